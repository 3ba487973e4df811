/* What one attached GPU process says about itself, in
 * rank_NN_attach.json next to its metrics (written at its exit), and the
 * "extra" object of its JSONL records. The parent folds the rank files into
 * run.json (attach/run.c). */
#ifndef AORTA_ATTACH_INFO_H
#define AORTA_ATTACH_INFO_H

#include <stddef.h>
#include <stdint.h>

#include <yajl/yajl_gen.h>

#include "attach/steps.h"

#define AO_ATTACH_MAX_VERSIONS 4
#define AO_ATTACH_MAX_DEVICES  64

typedef struct ao_attach_info {
    char dir[4096];
    int rank, world_size;
    struct {
        const char *key; /* a literal */
        char value[64];
    } versions[AO_ATTACH_MAX_VERSIONS]; /* the tracing API's and the driver's */
    int nversions;
    char devices[AO_ATTACH_MAX_DEVICES][128];
    int ndevices;
    size_t dropped;          /* records the tracing API dropped for want of buffers */
    const char *foreign_key; /* "other_cupti_client", ...: a literal */
    char foreign[256];       /* what showed another tracing client, or "" */
    long long steps;         /* lines written */
} ao_attach_info;

void ao_attach_info_init(ao_attach_info *in, const char *dir, int rank, int world_size);
/* A versions member (ignored past AO_ATTACH_MAX_VERSIONS); key a literal. */
void ao_attach_info_version(ao_attach_info *in, const char *key, const char *value);
/* The next device's name (index = order of the calls). */
void ao_attach_info_device(ao_attach_info *in, const char *name);
void ao_attach_info_step(ao_attach_info *in, const ao_step_out *s);
/* rank_NN_attach.json: rank, pid, host, command line, devices, versions,
 * the step source and its changes, steps, unseen steps, late/outside/dropped
 * records, the other tracing client. 0 or -1 after a warning. */
int ao_attach_info_write(const ao_attach_info *in, const ao_steps_stats *st);

/* The JSONL record's "extra": what `aorta analyze` writes beside §7 (host
 * wait, comm and exposure by kind), then step_source, step_name,
 * activities. */
typedef struct ao_attach_extra {
    const ao_step_out *s;
} ao_attach_extra;
int ao_attach_extra_gen(void *ctx, yajl_gen g);

#endif
