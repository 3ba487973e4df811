/* The vendor-neutral half of an attached process (DESIGN §15): the queue of
 * trace buffers, the step marks, the worker thread that cuts steps
 * (attach/steps.h) and writes STEM_metrics.jsonl (attach/claim.h), and the
 * info file at the end. The CUPTI library (inject_cuda.c) and the rocprofiler-sdk tool
 * (inject_rocm.c) each supply the calls below their API; both reach the
 * same steps, analysis and files.
 *
 * Threads: ao_tracer_push, _mark and _event may be called from any thread
 * (the vendor's callbacks); they take one short lock and never wait on the
 * worker. The backend's decode runs on the worker. One tracer per process. */
#ifndef AORTA_ATTACH_TRACER_H
#define AORTA_ATTACH_TRACER_H

#include <stddef.h>
#include <stdint.h>

#include "attach/info.h"
#include "timeline/cupti.h"

typedef struct ao_tracer_backend {
    /* The trace clock (the one records are stamped on), in ns. */
    uint64_t (*now_ns)(void);
    /* Decode one pushed buffer on the worker, each activity through
     * ao_tracer_add. 0: not now (kept, in order, for the next round; never
     * returned when final), 1: done, the buffer is the backend's to free. */
    int (*decode)(void *buf, size_t valid, int tag, int final);
    /* Called by the worker every round before it drains (ask the API to
     * hand over what it holds); NULL when the API flushes by itself. */
    void (*tick)(void);
} ao_tracer_backend;

/* The run directory aorta attach gave the process, or NULL when it was not
 * started by aorta attach (then the backend stays out of the way). */
const char *ao_tracer_dir(void);

/* The launcher's variables and the step options from the environment,
 * anchor (now_ns()). No file yet: the worker claims the process's files
 * (attach/claim.h) when the first activity (or another tracing client)
 * shows GPU work; a process that never does any writes nothing. -1 after
 * one `attach:` warning: the process runs untraced. */
int ao_tracer_open(const ao_tracer_backend *b);
/* The info file's facts the backend knows (versions, devices, the other
 * client); valid after ao_tracer_open. */
ao_attach_info *ao_tracer_info(void);
/* Whether an NVTX/roctx range of this name is a step. */
int ao_tracer_is_step_range(const char *name);
/* Start the worker. -1 after a warning (then ao_tracer_abandon). */
int ao_tracer_run(void);
/* Close what ao_tracer_open made without writing anything more. */
void ao_tracer_abandon(void);
/* The backend's tracing has stopped and its buffers are pushed: stop the
 * worker, take every step, write the info file where it claimed files,
 * close. Only in the process
 * that ran ao_tracer_run (not in a child forked since). */
void ao_tracer_finish(void);

/* A buffer of records (the backend's; `tag` is the backend's too), and the
 * records the vendor dropped before it. */
void ao_tracer_push(void *buf, size_t valid, int tag, size_t dropped);
/* A step range ended: the calls it held have correlation ids in
 * (begin, end]. */
void ao_tracer_mark(const char *name, int64_t begin, int64_t end);
/* The tracer stopped seeing activity (on = 1) or saw it again, at this
 * correlation id and trace time. */
void ao_tracer_event(int on, int64_t corr, uint64_t t_ns);
/* Host ranges (NVTX, roctx) at the correlation id given (the last one
 * issued, or the marker call's own): push/pop nest per thread and the
 * outermost step range is the step; start/end pair by the range's id. A
 * step range that ends becomes ao_tracer_mark(name, begin, end). */
void ao_tracer_range_push(const char *name, int64_t corr);
void ao_tracer_range_pop(int64_t corr);
void ao_tracer_range_start(const char *name, uint64_t id, int64_t corr);
void ao_tracer_range_end(uint64_t id, int64_t corr);
/* From decode: one activity (its name must outlive the process's tracing). */
void ao_tracer_add(const ao_cupti_record *r);

#endif
