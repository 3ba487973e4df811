/* Device-memory accounting for a backend: the bytes its dev_alloc handed out
 * and not yet freed, and their high-water mark (what `aorta train` records as
 * mem_peak_mb and `aorta plan` is checked against). A list of live
 * allocations: a run makes a few hundred, all at set-up. */
#ifndef AORTA_RUNTIME_MEMTRACK_H
#define AORTA_RUNTIME_MEMTRACK_H

#include <pthread.h>
#include <stddef.h>

typedef struct ao_memtrack {
    pthread_mutex_t mu;
    void **ptr;
    size_t *bytes;
    size_t n, cap;
    size_t in_use, peak;
} ao_memtrack;

void ao_memtrack_init(ao_memtrack *t);
void ao_memtrack_destroy(ao_memtrack *t);
void ao_memtrack_add(ao_memtrack *t, void *p, size_t bytes);
/* A pointer the tracker does not know is ignored (freed twice, or not ours). */
void ao_memtrack_remove(ao_memtrack *t, void *p);
void ao_memtrack_get(ao_memtrack *t, size_t *in_use, size_t *peak);

#endif
