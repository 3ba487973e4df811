/* aorta attach: a live stream of device activity (CUPTI records, in any
 * order) and step marks, cut into steps, each reduced to the DESIGN §7
 * metrics as soon as it is complete.
 *
 * Where steps come from, in this order of preference (the first one seen
 * wins and a better one later takes over; a flag forces one):
 *   nvtx    host ranges whose name matches a regex. A range holds the CUDA
 *           calls issued inside it: an activity belongs to the step whose
 *           range held its launch (CUPTI correlation ids grow with every
 *           call, so a range is the id interval (begin, end]).
 *   kernel  the last kernel of a run of kernels matching a regex (by default
 *           the optimizer's) ends a step; runs closer than min_gap other
 *           kernels apart are one run (grad clipping's foreach ops before the
 *           optimizer's).
 *   window  fixed windows of device time, by an activity's midpoint.
 *
 * Each step's activities are analysed as `aorta analyze` analyses a trace
 * (ingest/analyze.h: the same classification, with --comm, and metrics).
 *
 * Completion: records arrive in buffers, late and out of order. A step is
 * complete once a record issued after it (a larger correlation id; for
 * windows, one that ended after the window) arrived at least settle_ns ago.
 * A record of an emitted step that arrives later is counted as late.
 *
 * Periods the tracer could not see (it stepped aside for another CUPTI
 * client) are given with ao_steps_aside; steps that touch one are counted
 * and listed as unseen instead of emitted. Pure C: no CUPTI, no clock. */
#ifndef AORTA_ATTACH_STEPS_H
#define AORTA_ATTACH_STEPS_H

#include <stddef.h>
#include <stdint.h>

#include "core/metrics.h"
#include "ingest/analyze.h"
#include "timeline/cupti.h"

typedef enum ao_step_source {
    AO_STEP_NONE,
    AO_STEP_WINDOW,
    AO_STEP_KERNEL,
    AO_STEP_NVTX
} ao_step_source;
/* "none", "window", "kernel", "nvtx" */
const char *ao_step_source_name(ao_step_source s);

#define AO_STEP_NVTX_DEFAULT                                                                       \
    "^((train[ _-]?)?(step|iteration|iter)([ _#-]?[0-9]+)?|ProfilerStep#[0-9]+)$"
#define AO_STEP_KERNEL_DEFAULT                                                                     \
    "multi_tensor_apply_kernel|[Ff]used_?[Aa]dam|[Ff]used_?[Ss][Gg][Dd]|adamw_kernel"
#define AO_STEP_WINDOW_MS_DEFAULT 1000.0

typedef struct ao_steps_opts {
    ao_step_source forced;    /* AO_STEP_NONE: automatic */
    const char *nvtx_regex;   /* NULL: AO_STEP_NVTX_DEFAULT */
    const char *kernel_regex; /* NULL: AO_STEP_KERNEL_DEFAULT */
    double window_ms;         /* <= 0: AO_STEP_WINDOW_MS_DEFAULT */
    const char *comm_regex;   /* kernels that are communication besides NCCL/RCCL's */
    uint64_t settle_ns;
    int min_gap; /* <= 0: 16 */
    int world_size;
} ao_steps_opts;

/* Whether re compiles as a POSIX extended regex; AO_EXIT_USAGE after an
 * error naming flag. */
int ao_steps_regex_check(const char *flag, const char *re);

typedef struct ao_step_out {
    long long step;
    ao_step_source source;
    const char *name; /* the NVTX range's name; NULL for other sources */
    const ao_op *ops; /* by start; times in µs from the anchor */
    size_t nops;
    ao_overlap m;
    const ao_step_result *analysis; /* everything `aorta analyze` says of a step */
} ao_step_out;
typedef void (*ao_step_emit_fn)(void *ctx, const ao_step_out *s);

typedef struct ao_steps ao_steps;

/* anchor_ns: the CUPTI time ops are measured from. NULL when a regex does
 * not compile (check them first with ao_steps_regex_check). */
ao_steps *ao_steps_new(const ao_steps_opts *o, uint64_t anchor_ns);
void ao_steps_free(ao_steps *s);

/* The record is copied; its name must outlive s. */
void ao_steps_add(ao_steps *s, const ao_cupti_record *r, uint64_t arrived_ns);
/* Whether an NVTX range of this name is a step (false when the source is
 * forced to kernel or window). */
int ao_steps_is_step_range(const ao_steps *s, const char *name);
/* A step range ended: the calls it held have ids in (corr_begin, corr_end]. */
void ao_steps_add_mark(ao_steps *s, const char *name, int64_t corr_begin, int64_t corr_end);
/* The tracer saw nothing from (corr_from, t_from) on; ao_steps_resume ends
 * the period. */
void ao_steps_aside(ao_steps *s, int64_t corr_from, uint64_t t_from_ns);
void ao_steps_resume(ao_steps *s, int64_t corr_to, uint64_t t_to_ns);
/* Emit every complete step (final: every step, the device is done). */
void ao_steps_advance(ao_steps *s, uint64_t now_ns, int final, ao_step_emit_fn fn, void *ctx);

typedef struct ao_step_change {
    long long step; /* the first step from this source */
    ao_step_source source;
} ao_step_change;

typedef struct ao_steps_stats {
    ao_step_source source;
    const ao_step_change *changes; /* every switch of source, the first included */
    size_t nchanges;
    long long emitted;
    const long long *unseen; /* step numbers the tracer could not see */
    size_t nunseen;
    size_t late;    /* records of already emitted steps */
    size_t outside; /* records issued outside any step range */
} ao_steps_stats;
void ao_steps_get_stats(const ao_steps *s, ao_steps_stats *st);

#endif
