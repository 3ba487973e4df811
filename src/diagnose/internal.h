/* Shared inside src/diagnose only. */
#ifndef AORTA_DIAGNOSE_INTERNAL_H
#define AORTA_DIAGNOSE_INTERNAL_H

#include "core/error.h"
#include "diagnose/diagnose.h"

/* Medians over one rank's kept steps, ms per step; NAN when unknown. */
typedef struct ao_diag_terms {
    double step, compute, comm, exposed, idle, host_wait, data_wait, gap, own;
    double contention; /* contention_ms: the same kernels beside a collective against alone */
    double exposed_kind[AO_NKINDS];
} ao_diag_terms;

void ao_diag_terms_of(const ao_rank_data *rd, ao_diag_terms *t);
/* A new finding of d (share from d->step_ms, cause -1). */
ao_finding *ao_diag_add_finding(ao_diagnosis *d, ao_finding_kind kind, double ms, int rank);
void ao_diag_note_add(ao_diag_note **v, size_t *n, const char *id, const char *fmt, ...)
    AO_PRINTF(4, 5);

/* contention.c: the price of overlap on rank c, and which source the
 * decomposition used when it is not kernel time (a limitation). */
void ao_diag_contention(const ao_run_data *run, const ao_diag_terms *t, int c, ao_diagnosis *d);

/* knobs.c: where a finding sits and the knobs that move it. */
void ao_diag_where_input(const ao_run_data *run, ao_finding *f);
void ao_diag_knobs_input(const ao_run_data *run, ao_finding *f);
void ao_diag_knobs_host(const ao_run_data *run, ao_finding *f);
/* The knobs of an idle device with work queued (a stream waiting on an event). */
void ao_diag_knobs_device_wait(const ao_run_data *run, char *buf, size_t n);
void ao_diag_knobs_straggler(const ao_run_data *run, const ao_diag_terms *t, int c, ao_finding *f);
void ao_diag_where_comm(const ao_run_data *run, int c, ao_coll_kind k, ao_finding *f);
void ao_diag_knobs_comm(const ao_run_data *run, int c, ao_coll_kind k, ao_finding *f);

/* The device backend the run measured ("cuda", "hip", "cpu"), or "" when
 * run.json does not say; knob advice for one backend is not given to
 * another (no SM or NCCL advice for a cpu run). */
const char *ao_diag_backend(const ao_run_data *run);

/* late.c: who the others wait for, arrival skew, slow transfers
 * (collectives.jsonl), and the pass and unit of a rank's collective op. */
void ao_diag_late(ao_diagnosis *d, const ao_run_data *run, const ao_coll_ref *ref);
/* The instance member of rank `rank`'s op `op_index` in step `step`, or
 * NULL. */
const ao_coll_instance *ao_diag_coll_of_op(const ao_run_data *run, int rank, long long step,
                                           int op_index);

/* sanity.c: flags on the measurement, limitations, outlier steps. */
void ao_diag_sanity(const ao_run_data *run, const ao_diag_terms *t, int c, ao_diagnosis *d);
void ao_diag_outliers(const ao_run_data *run, int c, ao_diagnosis *d);

#endif
