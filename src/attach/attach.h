/* aorta attach (DESIGN §15): per-step §7 metrics of an unmodified GPU job.
 *
 * The parent (run.c) makes the run directory, writes run.json, and runs the
 * command with aorta's injection library in CUDA_INJECTION64_PATH (CUDA
 * loads it into every process that initializes the driver and calls its
 * InitializeInjection) and LD_PRELOAD (so its CUPTI entry points stand in
 * front of libcupti's and it sees a second CUPTI client arrive), and with
 * its rocprofiler-sdk tool in ROCP_TOOL_LIBRARIES (the SDK loads it when a
 * ROCm runtime starts), each where this build has it. Every process that
 * does GPU work writes STEM_metrics.jsonl, a line per step as it completes,
 * and STEM_attach.json (its pid, rank, devices, CUPTI version, the step
 * source used, the steps it could not see), STEM being rank_NN, or pid_N
 * where its rank is unknown or taken (attach/claim.h). The parent passes the
 * exit status through, then lists the processes in run.json (attach/gather.h)
 * and writes summary.json.
 *
 * The parent talks to the library through these environment variables. */
#ifndef AORTA_ATTACH_ATTACH_H
#define AORTA_ATTACH_ATTACH_H

#define AO_ATTACH_ENV_DIR         "AORTA_ATTACH_DIR"
#define AO_ATTACH_ENV_SOURCE      "AORTA_ATTACH_SOURCE" /* auto, nvtx, kernel, window */
#define AO_ATTACH_ENV_STEP_NVTX   "AORTA_ATTACH_STEP_NVTX"
#define AO_ATTACH_ENV_STEP_KERNEL "AORTA_ATTACH_STEP_KERNEL"
#define AO_ATTACH_ENV_WINDOW_MS   "AORTA_ATTACH_WINDOW_MS"
#define AO_ATTACH_ENV_COMM        "AORTA_ATTACH_COMM"
#define AO_ATTACH_LIBRARY         "libaorta_attach.so"      /* CUPTI */
#define AO_ATTACH_ROCM_LIBRARY    "libaorta_attach_rocm.so" /* rocprofiler-sdk */
#define AO_ATTACH_RANK_INFO       "_attach.json"

typedef struct ao_attach_opts {
    const char *output_dir;                     /* default "artifacts" */
    const char *run_name;                       /* NULL: a fresh id */
    const char *source;                         /* "auto", "nvtx", "kernel", "window" */
    const char *step_nvtx, *step_kernel, *comm; /* NULL: defaults */
    double window_ms;                           /* 0: default */
    long long skip_steps;                       /* summary warm-up */
    int prometheus;          /* --prometheus: serve the run directory while the job runs */
    int prometheus_port;     /* 0: any free port */
    const char *listen_addr; /* --listen; NULL: 127.0.0.1 */
} ao_attach_opts;

/* Run argv (argv[argc] == NULL) under attach. Returns the exit code to exit
 * with: the command's, 128 + signal when it was killed (after re-raising the
 * signal on this process where it can), AO_EXIT_USAGE when the command
 * cannot be started or the run directory cannot be made. */
int ao_attach_run(const ao_attach_opts *o, int argc, char **argv);

#endif
