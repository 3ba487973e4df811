#include "report/glossary.h"

#include <string.h>

#include "runs/compare.h"
#include "runs/rundata.h"

typedef struct entry {
    const char *name; /* exact, or a family ending in '_' matched as a prefix */
    const char *suffix;
    ao_glossary_entry e;
} entry;

/* C, M, X: unions of compute, communication and copy intervals of one
 * iteration; W its window (DESIGN §7). Families first by prefix and suffix. */
static const entry entries[] = {
    {"step_ms",
     NULL,
     {"how long one training step takes: its statistics are over the " AO_STEP_MS_DEFINITION
      ", the time every rank waits for",
      "|W|, W = [earliest op start, latest op end] of the iteration"}},
    {"tokens_per_s",
     NULL,
     {"training throughput of one rank", "tokens of the rank's batch / step_ms"}},
    {"compute_ms", NULL, {"time some compute kernel was running", "|C|"}},
    {"comm_ms", NULL, {"time some collective was running", "|M|"}},
    {"copy_ms", NULL, {"time some host-to-device copy was running", "|X|"}},
    {"overlap_ms",
     NULL,
     {"communication hidden behind compute (compute and a collective at once)", "|C ∩ M|"}},
    {"exposed_comm_ms", NULL, {"communication nothing hid: the step waits for it", "|M \\ C|"}},
    {"idle_ms", NULL, {"time in the step when the device ran nothing", "|W \\ (C ∪ M ∪ X)|"}},
    {"host_wait_ms",
     NULL,
     {"idle time in which no op was enqueued: the device waited for the host's launches",
      "|W \\ (C ∪ M ∪ X ∪ Q)|, Q = ∪ [issue, start] of the ops"}},
    {"data_wait_ms",
     NULL,
     {"host time the step's issue waited for the data loader", "measured around the loader"}},
    {"host_gap_ms",
     NULL,
     {"the host's share of the gap before the step's window",
      "max(0, min(first issue, window start) − previous window end)"}},
    {"mem_peak_mb",
     NULL,
     {"the rank's device-memory high-water mark (aorta's own allocations)",
      "peak bytes from ao_dev_alloc / 2^20"}},
    {"overlap_ratio",
     NULL,
     {"share of communication hidden behind compute (as HTA defines it)", "|C ∩ M| / |M|"}},
    {"compute_covered_ratio",
     NULL,
     {"share of compute that ran beside communication", "|C ∩ M| / |C|"}},
    {"overlap_efficiency",
     NULL,
     {"how much of the shorter of compute and communication is hidden; 1 = all of it",
      "|C ∩ M| / min(|C|, |M|)"}},
    {"compute_", "_ms", {"time this collective kind ran hidden behind compute", "|C ∩ Mₖ|"}},
    {"exposed_", "_ms", {"time this collective kind ran with nothing to hide it", "|Mₖ \\ C|"}},
    {"busbw_",
     "_gbps",
     {"bus bandwidth of this collective kind, comparable across rank counts (nccl-tests)",
      "bytes × factor(n) / busy time; all_reduce 2(n−1)/n, all_gather and reduce_scatter "
      "(n−1)/n, GB = 1e9"}},
    {"busy_",
     "_ms",
     {"time this stream had an op running (more can mean more work or slower work)",
      "|union of the stream's ops|"}},
    {"kernel_step_ms",
     NULL,
     {"the step's window by the kernel trace (profiling.kernel_trace): what the GPU ran, "
      "without the event pairs' own edges",
      "|W| over the step's kernels, memcpys and memsets (CUPTI)"}},
    {"kernel_compute_ms",
     NULL,
     {"time some compute kernel was running, by the kernel trace", "|C|"}},
    {"kernel_comm_ms",
     NULL,
     {"time some collective kernel was running, by the kernel trace", "|M|"}},
    {"contention_ms",
     NULL,
     {"the price of overlap: how much longer the step's compute kernels ran beside a collective "
      "than the same kernels alone (the same launch in the compute-only baselines or in steps "
      "where no collective ran; else the same name). The step pays it only where compute is on "
      "the critical path; to lower it, run fewer kernels beside the collectives (fewer, larger "
      "collectives; collectives timed to the compute's memory-light kernels) or give the "
      "collectives fewer SMs (the knobs diagnose lists, and what each measurably did)",
      "Σ over compute kernels k overlapping M of (|k| − mean |k'| over the alone instances k' of "
      "the same kernel)"}},
    {"loss", NULL, {"training loss (global mean)", "the model's loss"}},
    {"grad_norm", NULL, {"gradient norm before clipping", "global L2 norm of the gradients"}},
    /* the per-kind busy times ("allgather_ms") after the prefixed families */
    {"", "_ms", {"time this collective kind was running", "|Mₖ|"}},
};

/* The decomposition's terms (DESIGN §7), each with what to do about it. */
static const ao_glossary_term terms[] = {
    {"source",
     "what the decomposition was measured with: kernel time when the run has the kernel trace "
     "(profiling.kernel_trace), else the op events; events also count what an op's event pair "
     "holds besides kernels (launch gaps, waits for SMs, a library's own work), which differs "
     "between baseline and train steps",
     "\"kernels\" or \"events\" (summary.json decomposition.source)",
     "turn profiling.kernel_trace on for the decomposition to trust"},
    {"compute alone",
     "compute of the compute-only baseline steps: the train step's compute with no collective "
     "beside it",
     "median |C| of the compute_only records",
     "the floor of the step: lower it with the kernels (precision, fusion)"},
    {"comm alone",
     "communication of the comm-only baseline steps: the step's collectives with no compute",
     "median |M| of the comm_only records",
     "what no overlap can hide below: larger messages, fewer collectives, faster links"},
    {"ideal", "the step if the shorter of compute and communication were hidden entirely",
     "max(compute alone, comm alone)", "the target"},
    {"serial", "the step if nothing overlapped", "compute alone + comm alone",
     "the worst a step without waits should be"},
    {"over ideal",
     "what overlap has not won back: when compute alone is the ideal, it is the contention plus "
     "the exposed communication, the idle time and the copies nothing ran beside",
     "step − ideal",
     "take the largest of contention_ms, exposed_comm_ms and idle_ms and follow its finding"},
    {"achieved",
     "the share of the possible gain of overlap the step got: 1 = the step is the ideal, 0 = as "
     "slow as running one after the other, below 0 = slower than that (contention or waits cost "
     "more than overlap saved)",
     "(serial − step) / (serial − ideal)",
     "below 1, the missing share is (1 − achieved) × (serial − ideal) ms: see over ideal"},
    {"contention (decomposition)",
     "how much longer compute ran in the train steps than alone: the union of compute grew",
     "compute_ms − compute alone",
     "compare with contention_ms (the same kernels, one by one); where they differ, compute "
     "moved, not slowed"},
    {"comm slowdown", "how much longer communication ran beside compute than alone",
     "comm_ms / comm alone",
     "above 1: collectives wait for SMs or memory bandwidth: stream priorities, NCCL channels"},
};

const ao_glossary_term *ao_glossary_terms(size_t *n)
{
    *n = sizeof terms / sizeof terms[0];
    return terms;
}

static int matches(const entry *e, const char *name)
{
    size_t n = strlen(name), p = strlen(e->name);
    if (!e->suffix) return strcmp(e->name, name) == 0;
    size_t s = strlen(e->suffix);
    return n > p + s && strncmp(name, e->name, p) == 0 && strcmp(name + n - s, e->suffix) == 0;
}

ao_glossary_entry ao_glossary(size_t metric)
{
    const ao_metric_def *d = ao_metric(metric);
    for (size_t i = 0; d && i < sizeof entries / sizeof entries[0]; i++)
        if (matches(&entries[i], d->name)) return entries[i].e;
    return (ao_glossary_entry){"", ""};
}
