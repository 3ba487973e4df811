/* The command table: one line per `aorta <command>`, one file per command
 * (src/cli/cmd_<name>.c defining `int cmd_<name>(int argc, char **argv)`).
 * argv[0] is the command name; the return value is the exit code. */
AO_COMMAND(config, "show, validate or document the configuration")
AO_COMMAND(train, "the FSDP/DDP workload: overlap of communication and compute per step")
AO_COMMAND(coll, "collective bandwidth (nccl-tests columns), optionally under a GEMM")
AO_COMMAND(sdma, "GEMM vs DMA copy overlap on two streams")
AO_COMMAND(report, "summaries, comparisons with verdicts, charts and HTML from run directories")
AO_COMMAND(diagnose, "what bounds a step: classification, ranked findings with knobs, sanity flags")
AO_COMMAND(plan, "device memory per rank by strategy, precision and accumulation; what fits")
AO_COMMAND(queues, "how stream count and hardware queues shape concurrency")
AO_COMMAND(sweep, "axes and environment sweeps over train, coll, sdma and queues")
AO_COMMAND(analyze, "the same overlap metrics from a job's own traces (Kineto, rocprofv3, nsys)")
AO_COMMAND(attach, "per-step overlap metrics of an unmodified CUDA job (CUPTI injection)")
AO_COMMAND(export, "serve a run's latest per-step metrics to Prometheus, live")
