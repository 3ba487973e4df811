/* The loaded libcupti (CUDA builds only): its functions, found with dlsym,
 * and the decoding of activity records into ao_cupti_record. Shared by the
 * in-process kernel trace (cupti_cuda.c) and aorta attach's injection library
 * (attach/inject_cuda.c), so there is one CUPTI layer. */
#ifndef AORTA_TIMELINE_CUPTI_LIB_CUDA_H
#define AORTA_TIMELINE_CUPTI_LIB_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include <cupti.h>

#include "timeline/cupti.h"

typedef struct ao_cupti_fns {
    void *lib;
    char path[512]; /* the file loaded, for NVTX_INJECTION64_PATH ("" when unknown) */
    uint32_t version;
    CUptiResult (*get_version)(uint32_t *);
    CUptiResult (*enable)(CUpti_ActivityKind);
    CUptiResult (*disable)(CUpti_ActivityKind);
    CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc,
                                      CUpti_BuffersCallbackCompleteFunc);
    CUptiResult (*flush_all)(uint32_t);
    CUptiResult (*next_record)(uint8_t *, size_t, CUpti_Activity **);
    CUptiResult (*dropped)(CUcontext, uint32_t, size_t *);
    CUptiResult (*timestamp)(uint64_t *);
    CUptiResult (*result_string)(CUptiResult, const char **);
    /* optional: callbacks (attach) */
    CUptiResult (*subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
    CUptiResult (*unsubscribe)(CUpti_SubscriberHandle);
    CUptiResult (*enable_callback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
                                   CUpti_CallbackId);
    CUptiResult (*enable_domain)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain);
    CUptiResult (*flush_period)(uint32_t);
} ao_cupti_fns;

/* Load libcupti: a copy the process already holds first (a framework's
 * own, e.g. PyTorch's), else libcupti.so(.13/.12), else
 * $CUDA_HOME/extras/CUPTI/lib64. Checks the activity API and that the
 * library's API version is at least this build's header (the record structs
 * are the header's). Returns 0, or -1 with *why set (a static or dlerror
 * string, valid until the next dl call). */
int ao_cupti_fns_load(ao_cupti_fns *f, const char **why);
const char *ao_cupti_result_text(const ao_cupti_fns *f, CUptiResult r);

/* Interned kernel names: CUPTI's name pointers belong to CUPTI. */
typedef struct ao_cupti_names {
    char **slots;
    size_t cap, n;
} ao_cupti_names;
const char *ao_cupti_intern(ao_cupti_names *t, const char *s);
void ao_cupti_names_free(ao_cupti_names *t);

/* A kernel, memcpy or memset record as an ao_cupti_record (name interned in
 * names); 0 for any other kind. */
int ao_cupti_decode(const CUpti_Activity *a, ao_cupti_names *names, ao_cupti_record *r);
/* The device ordinal a kernel, memcpy or memset record ran on; -1 for any
 * other kind. */
int ao_cupti_device(const CUpti_Activity *a);

#endif
