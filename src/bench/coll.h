/* `aorta coll`: collective bandwidth, measured and printed as nccl-tests does
 * (same size/count semantics, same columns, same busbw factors), optionally
 * with a GEMM loop running beside the collective on a lower-priority stream.
 *
 * The pieces that need no device (size lists, counts, bandwidth math, flag
 * values) are separate functions so that they can be unit-tested. */
#ifndef AORTA_BENCH_COLL_H
#define AORTA_BENCH_COLL_H

#include <stddef.h>

#include "bench/values.h"
#include "comm/comm.h"
#include "runtime/device.h"

/* How the ranks' times combine into the printed one (nccl-tests' -a). */
typedef enum ao_time_combine {
    AO_COMBINE_RANK0, /* nccl-tests -a 0 */
    AO_COMBINE_AVG,   /* -a 1, the default */
    AO_COMBINE_MIN,   /* -a 2 */
    AO_COMBINE_MAX,   /* -a 3 */
} ao_time_combine;

/* "rank0|avg|min|max" or nccl-tests' numbers 0..3; 0 or -1 after an error. */
int ao_time_combine_parse(const char *flag, const char *s, ao_time_combine *out);
const char *ao_time_combine_name(ao_time_combine c);

/* A comma list of collectives ("all_reduce,all_gather"); duplicates are an
 * error. Fills out[0..*n). */
int ao_coll_list_parse(const char *flag, const char *s, ao_coll out[AO_NCOLLS], int *n);

/* nccl-tests' size sweep: from min to max (inclusive), multiplying by
 * `factor` when factor > 1, else adding `step`. Exactly one of them must be
 * nonzero. Returns the number of sizes (a fresh array in *out) or -1 after
 * printing why (min > max, factor 1, a zero start with a factor, a step of 0,
 * more than AO_COLL_MAX_SIZES sizes). */
#define AO_COLL_MAX_SIZES 4096
/* coll's flags with a value, indexed by ao_coll_flag (see ao_bench_flag). */
typedef enum ao_coll_flag {
    AO_COLL_F_COLL,
    AO_COLL_F_MINBYTES,
    AO_COLL_F_MAXBYTES,
    AO_COLL_F_STEPFACTOR,
    AO_COLL_F_STEPBYTES,
    AO_COLL_F_ITERS,
    AO_COLL_F_WARMUP,
    AO_COLL_F_DTYPE,
    AO_COLL_F_OP,
    AO_COLL_F_CHECK,
    AO_COLL_F_AVERAGE,
    AO_COLL_F_ROOT,
    AO_COLL_F_JSON,
    AO_COLL_F_CSV,
    AO_COLL_F_RDZV_FILE,
    AO_COLL_F_MIN_CTAS,
    AO_COLL_F_MAX_CTAS,
    AO_COLL_F_NPROC,
    AO_COLL_F_BACKEND,
    AO_COLL_F_WITH_COMPUTE,
    AO_COLL_NFLAGS
} ao_coll_flag;
extern const ao_bench_flag ao_coll_flags[AO_COLL_NFLAGS];

int ao_coll_size_list(size_t min, size_t max, long factor, size_t step, size_t **out);

/* "M,N,K[,dtype]" for --with-compute. *dtype_set says whether a dtype was
 * given. */
int ao_gemm_shape_parse(const char *flag, const char *s, int *m, int *n, int *k, ao_dtype *dtype,
                        int *dtype_set);

/* The buffers and the op argument for one requested size, as nccl-tests
 * derives them: the count is rounded down so that the size stays a multiple
 * of nranks x dtype size where the op splits the buffer among ranks. */
typedef struct ao_coll_shape {
    size_t count;      /* the op's count argument (comm.h conventions) */
    size_t bytes;      /* the "size" column: ao_coll_bytes(count) */
    size_t send_elems; /* elements the send buffer needs */
    size_t recv_elems; /* elements the receive buffer needs */
} ao_coll_shape;

void ao_coll_shape_for(ao_coll c, size_t size, ao_dtype t, int nranks, ao_coll_shape *out);
/* Whether the op has an in-place form here (alltoall and sendrecv do not). */
int ao_coll_has_inplace(ao_coll c);
/* Whether the op reduces (and so prints its redop) / uses a root. */
int ao_coll_reduces(ao_coll c);
int ao_coll_has_root(ao_coll c);

/* GB/s (1e9) for `bytes` in `time_us`; NAN when the time is not positive. */
double ao_algbw_gbps(size_t bytes, double time_us);

typedef struct ao_coll_bench_opts {
    ao_coll colls[AO_NCOLLS];
    int ncolls;
    size_t min_bytes, max_bytes;
    long factor; /* > 1, or 0 when stepping by `step` */
    size_t step;
    int iters, warmup;
    ao_dtype dtype;
    ao_redop op;
    int check;
    ao_time_combine combine;
    int root;
    int per_iter;
    const char *json_path, *csv_path;
    int min_ctas, max_ctas;
    const char *rdzv_file; /* comm id rendezvous under a non-MPI launcher, or NULL */
    const char *backend;   /* resolved: "cpu", "cuda", ... */
    int with_compute;
    int gemm_m, gemm_n, gemm_k;
    ao_dtype gemm_dtype;
    int gemm_dtype_set; /* else bf16 on GPUs, f32 on cpu */
} ao_coll_bench_opts;

/* Defaults as `aorta coll --help` documents them. */
void ao_coll_bench_defaults(ao_coll_bench_opts *o);

/* Checks that need the backend and the rank count but no device, made before
 * any rank starts: a root beyond the ranks, a dtype the comm backend cannot
 * reduce (MPI has no fp16/bf16 arithmetic). 0, or -1 after printing why. */
int ao_coll_bench_validate(const ao_coll_bench_opts *o, int nranks);

/* Run the benchmark as rank ri->rank of ri->world_size. Rank 0 prints the
 * table and writes the files. Returns the exit code: 0, 1 when a run failed or
 * a check found wrong elements, 2 for input this device cannot take. */
int ao_coll_bench_run(const ao_coll_bench_opts *o, const ao_rank_info *ri);

/* `aorta coll` after its flags: the options validated for the job's rank
 * count, then the ranks spawned (nproc, 0 for the default: launch/rank.h) or
 * this process run as one rank. Returns the exit code. */
int ao_coll_bench(int argc, char **argv, const ao_coll_bench_opts *o, int nproc);

#endif
