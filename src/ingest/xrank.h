/* A trace's collectives for the cross-rank matching (runs/collectives.h;
 * DESIGN §14 "Collectives across ranks"), and the late rank's windows
 * broken down from its trace.
 *
 * Each communication activity of an analysed trace becomes one entry: its
 * kind (from the kernel's name), communicator, sequence number, bytes and
 * dtype (Kineto's NCCL kernel args: "Process Group Name", "Seq", "In/Out msg
 * nelems", "dtype"), the pass and the layer or FSDP unit that launched it
 * (the host ranges enclosing its launch call on the launching thread:
 * FSDP::*, autograd's evaluate_function, Optimizer.*, forward/backward
 * annotations), and its launch, start and end. What the trace does not say
 * is unknown, never a default. */
#ifndef AORTA_INGEST_XRANK_H
#define AORTA_INGEST_XRANK_H

#include "ingest/analyze.h"
#include "ingest/trace.h"
#include "runs/collectives.h"

/* The entries of t (analysed into r) as run rank `rank`, times less
 * origin_us (the run's axis), appended to out (out->rank set). */
void ao_xrank_entries(const ao_trace *t, const ao_rank_result *r, int rank, double origin_us,
                      ao_coll_rank *out);

/* Fill cause_us of every instance of s whose late rank is `rank`, from its
 * trace's timeline (r->total.ops) and its host's data-loader ranges. */
void ao_xrank_breakdowns(const ao_trace *t, const ao_rank_result *r, int rank, double origin_us,
                         ao_coll_set *s);

/* The pass a host range's name says ("FSDP::pre_backward" -> backward,
 * "Optimizer.step#AdamW.step" -> optimizer, "## forward ##" -> forward;
 * AO_PASS_UNKNOWN when it says none), and the unit it names into buf
 * ("FSDP::all_gather (layers.3)" -> "layers.3"; an FSDP range without a
 * module path is the root module's: "root"); 0 when it names none. */
ao_pass ao_xrank_range_pass(const char *name);
int ao_xrank_range_unit(const char *name, char *buf, size_t n);

#endif
