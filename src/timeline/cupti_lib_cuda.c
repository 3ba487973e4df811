/* timeline/cupti_lib_cuda.h: libcupti loaded at run time and its records decoded. */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "timeline/cupti_lib_cuda.h"

static void *open_library(void)
{
    static const char *const libs[] = {"libcupti.so", "libcupti.so.13", "libcupti.so.12"};
    /* A copy already in the process first: two libcuptis in one process would
     * each think they own the driver's profiling hooks. */
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
        void *lib = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
        if (lib) return lib;
    }
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++) {
        void *lib = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
        if (lib) return lib;
    }
    const char *home = getenv("CUDA_HOME");
    if (!home || !*home) return NULL;
    char *path = ao_asprintf("%s/extras/CUPTI/lib64/libcupti.so", home);
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    free(path);
    return lib;
}

#define SYM(field, name) (*(void **)&f->field = dlsym(f->lib, name))

int ao_cupti_fns_load(ao_cupti_fns *f, const char **why)
{
    memset(f, 0, sizeof *f);
    f->lib = open_library();
    if (!f->lib) {
        const char *e = dlerror();
        *why = e ? e : "cannot load libcupti";
        return -1;
    }
    struct link_map *lm = NULL;
    if (dlinfo(f->lib, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name)
        snprintf(f->path, sizeof f->path, "%s", lm->l_name);
    SYM(get_version, "cuptiGetVersion");
    SYM(enable, "cuptiActivityEnable");
    SYM(disable, "cuptiActivityDisable");
    SYM(register_callbacks, "cuptiActivityRegisterCallbacks");
    SYM(flush_all, "cuptiActivityFlushAll");
    SYM(next_record, "cuptiActivityGetNextRecord");
    SYM(dropped, "cuptiActivityGetNumDroppedRecords");
    SYM(timestamp, "cuptiGetTimestamp");
    SYM(result_string, "cuptiGetResultString");
    SYM(subscribe, "cuptiSubscribe");
    SYM(unsubscribe, "cuptiUnsubscribe");
    SYM(enable_callback, "cuptiEnableCallback");
    SYM(enable_domain, "cuptiEnableDomain");
    SYM(flush_period, "cuptiActivityFlushPeriod");
    /* libcupti stays loaded on every path: CUPTI does not support being
     * unloaded from a process it has attached to. */
    if (!f->get_version || !f->enable || !f->disable || !f->register_callbacks || !f->flush_all ||
        !f->next_record || !f->timestamp) {
        *why = "libcupti lacks the activity API";
        return -1;
    }
    if (f->get_version(&f->version) != CUPTI_SUCCESS || f->version < CUPTI_API_VERSION) {
        static char buf[128];
        snprintf(buf, sizeof buf, "libcupti has API version %u, older than %u (this build's)",
                 f->version, (unsigned)CUPTI_API_VERSION);
        *why = buf;
        return -1;
    }
    return 0;
}

const char *ao_cupti_result_text(const ao_cupti_fns *f, CUptiResult r)
{
    const char *s = NULL;
    if (f->result_string && f->result_string(r, &s) == CUPTI_SUCCESS && s) return s;
    return "unknown CUPTI error";
}

static uint64_t hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

const char *ao_cupti_intern(ao_cupti_names *t, const char *s)
{
    if (2 * (t->n + 1) > t->cap) {
        ao_cupti_names bigger = {ao_calloc(t->cap ? 2 * t->cap : 256, sizeof(char *)),
                                 t->cap ? 2 * t->cap : 256, 0};
        for (size_t i = 0; i < t->cap; i++)
            if (t->slots[i]) {
                size_t j = hash(t->slots[i]) & (bigger.cap - 1);
                while (bigger.slots[j]) j = (j + 1) & (bigger.cap - 1);
                bigger.slots[j] = t->slots[i];
                bigger.n++;
            }
        free(t->slots);
        *t = bigger;
    }
    size_t j = hash(s) & (t->cap - 1);
    while (t->slots[j]) {
        if (strcmp(t->slots[j], s) == 0) return t->slots[j];
        j = (j + 1) & (t->cap - 1);
    }
    t->n++;
    return t->slots[j] = ao_strdup(s);
}

void ao_cupti_names_free(ao_cupti_names *t)
{
    for (size_t i = 0; i < t->cap; i++) free(t->slots[i]);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

static const char *memcpy_name(uint8_t copy_kind)
{
    switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
        return "memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
        return "memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
        return "memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
        return "memcpy HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
        return "memcpy PtoP";
    default:
        return "memcpy";
    }
}

int ao_cupti_decode(const CUpti_Activity *a, ao_cupti_names *names, ao_cupti_record *r)
{
    memset(r, 0, sizeof *r);
    if (a->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || a->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)a;
        *r = (ao_cupti_record){
            AO_CUPTI_KERNEL, k->start, k->end,
            k->streamId,     0,        k->name ? ao_cupti_intern(names, k->name) : "kernel",
            k->correlationId};
    } else if (a->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
        const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)a;
        *r = (ao_cupti_record){AO_CUPTI_MEMCPY, m->start, m->end,
                               m->streamId,     m->bytes, memcpy_name(m->copyKind),
                               m->correlationId};
    } else if (a->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
        const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)a;
        *r = (ao_cupti_record){AO_CUPTI_MEMSET, m->start, m->end,          m->streamId,
                               m->bytes,        "memset", m->correlationId};
    } else {
        return 0;
    }
    return 1;
}

int ao_cupti_device(const CUpti_Activity *a)
{
    if (a->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || a->kind == CUPTI_ACTIVITY_KIND_KERNEL)
        return (int)((const CUpti_ActivityKernel10 *)a)->deviceId;
    if (a->kind == CUPTI_ACTIVITY_KIND_MEMCPY)
        return (int)((const CUpti_ActivityMemcpy6 *)a)->deviceId;
    if (a->kind == CUPTI_ACTIVITY_KIND_MEMSET)
        return (int)((const CUpti_ActivityMemset4 *)a)->deviceId;
    return -1;
}
