/* What one attached CUDA process says about itself, in
 * rank_NN_attach.json next to its metrics (written at its exit), and the
 * "extra" object of its JSONL records. The parent folds the rank files into
 * run.json (attach/run.c). */
#ifndef AORTA_ATTACH_INFO_H
#define AORTA_ATTACH_INFO_H

#include <stddef.h>
#include <stdint.h>

#include <yajl/yajl_gen.h>

#include "attach/steps.h"

typedef struct ao_attach_info {
    char dir[4096];
    int rank, world_size;
    uint32_t cupti_version;
    size_t dropped;    /* records CUPTI dropped for want of buffers */
    char foreign[256]; /* the call that showed another CUPTI client, or "" */
    long long steps;   /* lines written */
} ao_attach_info;

void ao_attach_info_init(ao_attach_info *in, const char *dir, int rank, int world_size,
                         uint32_t cupti_version);
void ao_attach_info_step(ao_attach_info *in, const ao_step_out *s);
/* rank_NN_attach.json: rank, pid, host, command line, devices (through the
 * loaded libcuda), versions, the step source and its changes, steps, unseen
 * steps, late/outside/dropped records, the other CUPTI client. 0 or -1
 * after a warning. */
int ao_attach_info_write(const ao_attach_info *in, const ao_steps_stats *st);

/* The JSONL record's "extra": what `aorta analyze` writes beside §7 (host
 * wait, comm and exposure by kind), then step_source, step_name,
 * activities. */
typedef struct ao_attach_extra {
    const ao_step_out *s;
} ao_attach_extra;
int ao_attach_extra_gen(void *ctx, yajl_gen g);

#endif
