/* What one attached GPU process says about itself, in STEM_attach.json next
 * to its metrics (STEM is rank_NN or pid_N: attach/claim.h; written when it
 * claims its files and again at its exit), and the "extra" object of its
 * JSONL records. The parent folds these files into run.json (attach/run.c). */
#ifndef AORTA_ATTACH_INFO_H
#define AORTA_ATTACH_INFO_H

#include <stddef.h>
#include <stdint.h>

#include <yajl/yajl_gen.h>

#include "attach/claim.h"
#include "attach/steps.h"

#define AO_ATTACH_MAX_VERSIONS 4
#define AO_ATTACH_MAX_DEVICES  64

typedef struct ao_attach_info {
    char dir[4096];
    ao_attach_who who;     /* the launcher's word (at start) */
    ao_attach_claim claim; /* its files (stem "" before the claim) */
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
    uint64_t used;           /* bit d: its activity ran on device d (< 64) */
    /* NULL until the process ends: the file then says "finished": false */
    const ao_steps_stats *stats;
} ao_attach_info;

void ao_attach_info_init(ao_attach_info *in, const char *dir, const ao_attach_who *who);
/* A versions member (ignored past AO_ATTACH_MAX_VERSIONS); key a literal. */
void ao_attach_info_version(ao_attach_info *in, const char *key, const char *value);
/* The next device's name (index = order of the calls). */
void ao_attach_info_device(ao_attach_info *in, const char *name);
void ao_attach_info_step(ao_attach_info *in, const ao_step_out *s);
/* An activity ran on this device (the tracer's ordinal; < 0: unknown). */
void ao_attach_info_used_device(ao_attach_info *in, int device);
/* dir/STEM_attach.json, as an ao_attach_info_fn (ctx: the info): pid, rank
 * (null when unknown), world size, launcher, provisional, files, note,
 * finished, host, command line, devices and the one it used, versions, the
 * step source and its changes, steps, unseen steps, late/outside/dropped
 * records, the other tracing client. 0 or -1 after a warning. */
int ao_attach_info_write(void *ctx, const ao_attach_claim *c);

/* The JSONL record's "extra": what `aorta analyze` writes beside §7 (host
 * wait, comm and exposure by kind), then step_source, step_name,
 * activities. */
typedef struct ao_attach_extra {
    const ao_step_out *s;
} ao_attach_extra;
int ao_attach_extra_gen(void *ctx, yajl_gen g);

#endif
