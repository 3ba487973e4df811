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
    {"loss", NULL, {"training loss (global mean)", "the model's loss"}},
    {"grad_norm", NULL, {"gradient norm before clipping", "global L2 norm of the gradients"}},
    /* the per-kind busy times ("allgather_ms") after the prefixed families */
    {"", "_ms", {"time this collective kind was running", "|Mₖ|"}},
};

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
