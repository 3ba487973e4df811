/* The device-free parts of `aorta coll`: flag values, size sweeps, counts. */
#include "bench/coll.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/units.h"

static const char *const combine_names[] = {"rank0", "avg", "min", "max"};

int ao_time_combine_parse(const char *flag, const char *s, ao_time_combine *out)
{
    for (int i = 0; i < 4; i++) {
        char digit[2] = {(char)('0' + i), 0};
        if (strcmp(s, combine_names[i]) == 0 || strcmp(s, digit) == 0) {
            *out = (ao_time_combine)i;
            return 0;
        }
    }
    ao_error(flag,
             "'%s' is not a way to combine ranks' times; allowed: rank0, avg, min, max "
             "(or nccl-tests' 0, 1, 2, 3)",
             s);
    return -1;
}

const char *ao_time_combine_name(ao_time_combine c)
{
    return (unsigned)c < 4 ? combine_names[c] : "?";
}

int ao_coll_list_parse(const char *flag, const char *s, ao_coll out[AO_NCOLLS], int *n)
{
    char *copy = ao_strdup(s), *save = NULL;
    int count = 0, rc = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        ao_coll c;
        if (ao_coll_parse(tok, &c) != 0) {
            ao_error(flag,
                     "'%s' is not a collective; allowed: all_reduce, all_gather, "
                     "reduce_scatter, broadcast, reduce, alltoall, sendrecv",
                     tok);
            rc = -1;
            break;
        }
        for (int i = 0; i < count; i++) {
            if (out[i] == c) {
                ao_error(flag, "'%s' is listed twice", tok);
                rc = -1;
            }
        }
        if (rc) break;
        out[count++] = c;
    }
    free(copy);
    if (rc == 0 && count == 0) {
        ao_error(flag, "empty list; give one or more collectives, e.g. all_reduce,all_gather");
        rc = -1;
    }
    if (rc == 0) *n = count;
    return rc;
}

int ao_coll_size_list(size_t min, size_t max, long factor, size_t step, size_t **out)
{
    if (min > max) {
        ao_error("-b/-e", "the minimum size (%zu bytes) is larger than the maximum (%zu bytes)",
                 min, max);
        return -1;
    }
    if ((factor != 0) == (step != 0)) {
        ao_error("-f/-i", "give either a factor (-f) or a step (-i), not %s",
                 factor ? "both" : "neither");
        return -1;
    }
    if (factor && factor < 2) {
        ao_error("-f", "factor %ld would never grow the size; use 2 or more", factor);
        return -1;
    }
    if (factor && min == 0 && max > 0) {
        ao_error("-b", "a sweep by factor cannot start at 0 bytes; start at 1 or more, or use -i");
        return -1;
    }
    size_t *sizes = NULL;
    int n = 0;
    for (size_t s = min;;) {
        if (n == AO_COLL_MAX_SIZES) {
            free(sizes);
            ao_error("-b/-e", "the sweep has more than %d sizes; use a larger -f or -i",
                     AO_COLL_MAX_SIZES);
            return -1;
        }
        sizes = ao_realloc(sizes, (size_t)(n + 1) * sizeof *sizes);
        sizes[n++] = s;
        if (s == max) break; /* also ends -b 0 -e 0, which a factor never grows */
        /* Stop before the next size passes max or overflows size_t. */
        if (factor) {
            if (s > max / (size_t)factor) break;
            s *= (size_t)factor;
        } else {
            if (s > max - step) break;
            s += step;
        }
        if (s > max) break;
    }
    *out = sizes;
    return n;
}

int ao_gemm_shape_parse(const char *flag, const char *s, int *m, int *n, int *k, ao_dtype *dtype,
                        int *dtype_set)
{
    char *copy = ao_strdup(s), *save = NULL;
    char *parts[5];
    int np = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok && np < 5; tok = strtok_r(NULL, ",", &save))
        parts[np++] = tok;
    int rc = 0;
    if (np < 3 || np > 4) {
        ao_error(flag,
                 "'%s' is not a GEMM shape; expected M,N,K or M,N,K,DTYPE "
                 "(e.g. 8192,8192,8192,bf16)",
                 s);
        rc = -1;
    }
    int dims[3];
    for (int i = 0; rc == 0 && i < 3; i++) rc = ao_parse_int(flag, parts[i], 1, 1 << 20, &dims[i]);
    *dtype_set = 0;
    if (rc == 0 && np == 4) {
        if (ao_dtype_parse(parts[3], dtype) != 0) {
            ao_error(flag,
                     "'%s' is not a dtype; allowed: float, half, bfloat16, double "
                     "(or fp32, fp16, bf16, f64)",
                     parts[3]);
            rc = -1;
        } else if (*dtype != AO_F32 && *dtype != AO_F16 && *dtype != AO_BF16 && *dtype != AO_F64) {
            ao_error(flag, "GEMMs take a floating-point dtype, not '%s'", parts[3]);
            rc = -1;
        } else {
            *dtype_set = 1;
        }
    }
    if (rc == 0) {
        *m = dims[0];
        *n = dims[1];
        *k = dims[2];
    }
    free(copy);
    return rc;
}

void ao_coll_shape_for(ao_coll c, size_t size, ao_dtype t, int nranks, ao_coll_shape *out)
{
    size_t elems = size / ao_dtype_size(t), n = (size_t)nranks;
    switch (c) {
    case AO_ALLGATHER: /* count = what each rank contributes */
        out->count = elems / n;
        out->send_elems = out->count;
        out->recv_elems = out->count * n;
        break;
    case AO_REDUCESCATTER: /* count = what each rank receives */
        out->count = elems / n;
        out->send_elems = out->count * n;
        out->recv_elems = out->count;
        break;
    case AO_ALLTOALL: /* count = what goes to each peer */
        out->count = elems / n;
        out->send_elems = out->recv_elems = out->count * n;
        break;
    default:
        out->count = elems;
        out->send_elems = out->recv_elems = elems;
        break;
    }
    out->bytes = ao_coll_bytes(c, out->count, t, nranks);
}

int ao_coll_has_inplace(ao_coll c)
{
    return c != AO_ALLTOALL && c != AO_SENDRECV;
}

int ao_coll_reduces(ao_coll c)
{
    return c == AO_ALLREDUCE || c == AO_REDUCESCATTER || c == AO_REDUCE;
}

int ao_coll_has_root(ao_coll c)
{
    return c == AO_BROADCAST || c == AO_REDUCE;
}

double ao_algbw_gbps(size_t bytes, double time_us)
{
    if (!(time_us > 0)) return NAN;
    return (double)bytes / (time_us * 1e-6) / 1e9;
}

/* Axes: not the sizes (a sweep's `size` axis sets them), the output files,
 * the rendezvous or nproc (the sweep's own). */
const ao_bench_flag ao_coll_flags[AO_COLL_NFLAGS] = {
    [AO_COLL_F_COLL] = {{"--coll"}, 1},
    [AO_COLL_F_MINBYTES] = {{"-b", "--minbytes"}, 0},
    [AO_COLL_F_MAXBYTES] = {{"-e", "--maxbytes"}, 0},
    [AO_COLL_F_STEPFACTOR] = {{"-f", "--stepfactor"}, 0},
    [AO_COLL_F_STEPBYTES] = {{"-i", "--stepbytes"}, 0},
    [AO_COLL_F_ITERS] = {{"-n", "--iters"}, 1},
    [AO_COLL_F_WARMUP] = {{"-w", "--warmup", "--warmup_iters"}, 1},
    [AO_COLL_F_DTYPE] = {{"-d", "--dtype", "--datatype"}, 1},
    [AO_COLL_F_OP] = {{"-o", "--op"}, 1},
    [AO_COLL_F_CHECK] = {{"-c", "--check"}, 1},
    [AO_COLL_F_AVERAGE] = {{"-a", "--average"}, 1},
    [AO_COLL_F_ROOT] = {{"-r", "--root"}, 1},
    [AO_COLL_F_JSON] = {{"--json"}, 0},
    [AO_COLL_F_CSV] = {{"--csv"}, 0},
    [AO_COLL_F_RDZV_FILE] = {{"--rdzv-file"}, 0},
    [AO_COLL_F_MIN_CTAS] = {{"--min-ctas"}, 1},
    [AO_COLL_F_MAX_CTAS] = {{"--max-ctas"}, 1},
    [AO_COLL_F_NPROC] = {{"--nproc"}, 0},
    [AO_COLL_F_BACKEND] = {{"--backend"}, 1},
    [AO_COLL_F_WITH_COMPUTE] = {{"--with-compute"}, 1},
};

int ao_coll_bench_validate(const ao_coll_bench_opts *o, int nranks)
{
    int rooted = 0, reducing = 0;
    for (int i = 0; i < o->ncolls; i++) {
        rooted |= ao_coll_has_root(o->colls[i]);
        reducing |= ao_coll_reduces(o->colls[i]);
    }
    if (rooted && o->root >= nranks) {
        ao_error("--root", "rank %d does not exist; there are %d ranks", o->root, nranks);
        return -1;
    }
    size_t *sizes = NULL;
    if (ao_coll_size_list(o->min_bytes, o->max_bytes, o->factor, o->step, &sizes) < 0) return -1;
    free(sizes);
    const char *comm = ao_comm_backend_for(o->backend);
    if (reducing && comm && strcmp(comm, "mpi") == 0 &&
        (o->dtype == AO_F16 || o->dtype == AO_BF16)) {
        ao_error("--dtype",
                 "the mpi backend of the %s device cannot reduce %s (MPI has no such "
                 "arithmetic type); use float, or only all_gather, broadcast, alltoall "
                 "and sendrecv",
                 o->backend, ao_dtype_name(o->dtype));
        return -1;
    }
    return 0;
}

void ao_coll_bench_defaults(ao_coll_bench_opts *o)
{
    memset(o, 0, sizeof *o);
    o->colls[0] = AO_ALLREDUCE;
    o->ncolls = 1;
    o->min_bytes = o->max_bytes = 32u << 20; /* nccl-tests: -b 32M -e 32M */
    o->factor = 2;
    o->iters = 20;
    o->warmup = 5;
    o->dtype = AO_F32;
    o->op = AO_SUM;
    o->check = 1;
    o->combine = AO_COMBINE_AVG;
    o->backend = "auto";
}
