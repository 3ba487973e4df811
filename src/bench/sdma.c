#include "bench/sdma.h"
#include "core/json.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench/table.h"
#include "bench/values.h"
#include "core/error.h"
#include "core/units.h"
#include "launch/rank.h"

static const char *const direction_names[] = {"h2d", "d2h", "d2d", "p2p"};
static const char *const engine_names[] = {"dma", "kernel"};

int ao_sdma_direction_parse(const char *flag, const char *s, ao_sdma_direction *out)
{
    for (int i = 0; i < 4; i++) {
        if (strcmp(s, direction_names[i]) == 0) {
            *out = (ao_sdma_direction)i;
            return 0;
        }
    }
    ao_error(flag, "'%s' is not a copy direction; allowed: h2d, d2h, d2d, p2p", s);
    return -1;
}

const char *ao_sdma_direction_name(ao_sdma_direction d)
{
    return (unsigned)d < 4 ? direction_names[d] : "?";
}

int ao_sdma_engine_parse(const char *flag, const char *s, ao_sdma_engine *out)
{
    for (int i = 0; i < 2; i++) {
        if (strcmp(s, engine_names[i]) == 0) {
            *out = (ao_sdma_engine)i;
            return 0;
        }
    }
    ao_error(flag, "'%s' is not a copy engine; allowed: dma (copy engines), kernel (SM threads)",
             s);
    return -1;
}

const char *ao_sdma_engine_name(ao_sdma_engine e)
{
    return (unsigned)e < 2 ? engine_names[e] : "?";
}

/* Axes: all but the output file. */
const ao_bench_flag ao_sdma_flags[AO_SDMA_NFLAGS] = {
    [AO_SDMA_F_DEVICE] = {{"--device"}, 1},
    [AO_SDMA_F_MATRIX_SIZE] = {{"--matrix-size"}, 1},
    [AO_SDMA_F_DTYPE] = {{"--dtype"}, 1},
    [AO_SDMA_F_COPY_MB] = {{"--copy-mb"}, 1},
    [AO_SDMA_F_ITERATIONS] = {{"--iterations"}, 1},
    [AO_SDMA_F_WARMUP] = {{"--warmup"}, 1},
    [AO_SDMA_F_DIRECTION] = {{"--direction"}, 1},
    [AO_SDMA_F_ENGINE] = {{"--engine"}, 1},
    [AO_SDMA_F_JSON] = {{"--json"}, 0},
    [AO_SDMA_F_BACKEND] = {{"--backend"}, 1},
};

void ao_sdma_defaults(ao_sdma_opts *o)
{
    memset(o, 0, sizeof *o);
    o->backend = "auto";
    o->device = -1;
    o->matrix = 4096;
    o->dtype = AO_BF16;
    o->copy_bytes = (size_t)64 << 20;
    o->iterations = 20;
    o->warmup = 3;
    o->direction = AO_SDMA_H2D;
    o->engine = AO_SDMA_DMA;
}

double ao_sdma_savings_pct(double serial, double overlapped)
{
    return serial > 0 ? (serial - overlapped) / serial * 100.0 : NAN;
}

double ao_sdma_achieved(double serial, double overlapped, double gemm_alone, double copy_alone)
{
    double den = serial - fmax(gemm_alone, copy_alone);
    return den > 0 ? (serial - overlapped) / den : NAN;
}

double ao_interval_overlap(double a0, double a1, double b0, double b1)
{
    double len = fmin(a1, b1) - fmax(a0, b0);
    return len > 0 ? len : 0;
}

/* ---- the run ---------------------------------------------------------------- */

enum mode { M_GEMM, M_COPY, M_SERIAL, M_OVERLAP, M_N };
static const char *const mode_names[M_N] = {"gemm", "copy", "serial", "overlap"};

typedef struct samples {
    double *total, *gemm, *copy; /* ms per measured iteration; NAN when not part of the mode */
} samples;

typedef struct sdma {
    const ao_sdma_opts *o;
    ao_rank r;             /* this rank's device */
    ao_device *dev, *peer; /* r.dev; peer: the p2p destination device */
    ao_device_info info;
    ao_stream *gs, *cs, *peer_s;
    ao_event *ev[4];
    void *a, *b, *c;
    void *src, *dst;
    int src_on_host, dst_on_host;
    ao_gemm_desc gemm;
    double flops;
    samples m[M_N];
    int concurrent;
    double overlap_ms_sum;
} sdma;

static uint8_t pattern(size_t i)
{
    return (uint8_t)((i >> 12) * 31u + i * 7u + 1u);
}

static void do_copy(sdma *x, ao_stream *s)
{
    const ao_sdma_opts *o = x->o;
    static const ao_copy_kind kinds[] = {AO_H2D, AO_D2H, AO_D2D, AO_D2D};
    if (o->direction == AO_SDMA_P2P)
        ao_copy_peer_async(x->peer, x->dst, x->dev, x->src, o->copy_bytes, s);
    else if (o->engine == AO_SDMA_KERNEL)
        ao_copy_sm_async(x->dev, x->dst, x->src, o->copy_bytes, s);
    else
        ao_copy_async(x->dev, x->dst, x->src, o->copy_bytes, kinds[o->direction], s);
}

static void run_iteration(sdma *x, enum mode m, int slot)
{
    ao_event **e = x->ev;
    double total = NAN, g = NAN, c = NAN;
    switch (m) {
    case M_GEMM:
        ao_event_record(e[0], x->gs);
        ao_gemm(x->dev, x->gs, &x->gemm);
        ao_event_record(e[1], x->gs);
        ao_stream_sync(x->gs);
        total = g = ao_event_elapsed_us(e[0], e[1]) / 1e3;
        break;
    case M_COPY:
        ao_event_record(e[0], x->cs);
        do_copy(x, x->cs);
        ao_event_record(e[1], x->cs);
        ao_stream_sync(x->cs);
        total = c = ao_event_elapsed_us(e[0], e[1]) / 1e3;
        break;
    case M_SERIAL: /* one stream: the copy starts when the GEMM ends */
        ao_event_record(e[0], x->gs);
        ao_gemm(x->dev, x->gs, &x->gemm);
        ao_event_record(e[1], x->gs);
        do_copy(x, x->gs);
        ao_event_record(e[2], x->gs);
        ao_stream_sync(x->gs);
        total = ao_event_elapsed_us(e[0], e[2]) / 1e3;
        g = ao_event_elapsed_us(e[0], e[1]) / 1e3;
        c = ao_event_elapsed_us(e[1], e[2]) / 1e3;
        break;
    case M_OVERLAP: { /* two streams released by the same event */
        ao_event_record(e[0], x->gs);
        ao_stream_wait_event(x->cs, e[0]);
        ao_gemm(x->dev, x->gs, &x->gemm);
        ao_event_record(e[1], x->gs);
        ao_event_record(e[2], x->cs);
        do_copy(x, x->cs);
        ao_event_record(e[3], x->cs);
        ao_stream_sync(x->gs);
        ao_stream_sync(x->cs);
        g = ao_event_elapsed_us(e[0], e[1]) / 1e3;
        double c0 = ao_event_elapsed_us(e[0], e[2]) / 1e3,
               c1 = ao_event_elapsed_us(e[0], e[3]) / 1e3;
        c = c1 - c0;
        total = fmax(g, c1);
        if (slot >= 0) {
            double both = ao_interval_overlap(0, g, c0, c1);
            x->concurrent += both > 0;
            x->overlap_ms_sum += both;
        }
        break;
    }
    case M_N:
        break;
    }
    if (slot < 0) return;
    x->m[m].total[slot] = total;
    x->m[m].gemm[slot] = g;
    x->m[m].copy[slot] = c;
}

static double mean_of(const double *v, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) s += v[i];
    return n ? s / n : NAN;
}

static double extreme_of(const double *v, int n, int want_max)
{
    double r = v[0];
    for (int i = 1; i < n; i++) r = want_max ? fmax(r, v[i]) : fmin(r, v[i]);
    return r;
}

/* Fill the source with the pattern and zero the destination. */
static void prepare_data(sdma *x)
{
    size_t n = x->o->copy_bytes;
    uint8_t *stage = ao_host_alloc(x->dev, n);
    for (size_t i = 0; i < n; i++) stage[i] = pattern(i);
    if (x->src_on_host) {
        memcpy(x->src, stage, n);
    } else {
        ao_copy_async(x->dev, x->src, stage, n, AO_H2D, x->cs);
        ao_stream_sync(x->cs);
    }
    if (x->dst_on_host)
        memset(x->dst, 0, n);
    else if (x->peer) {
        ao_memset_async(x->peer, x->dst, 0, n, x->peer_s);
        ao_stream_sync(x->peer_s);
    } else {
        ao_memset_async(x->dev, x->dst, 0, n, x->cs);
        ao_stream_sync(x->cs);
    }
    ao_host_free(x->dev, stage);
}

static size_t count_mismatches(sdma *x)
{
    size_t n = x->o->copy_bytes, bad = 0;
    const uint8_t *got = x->dst;
    uint8_t *stage = NULL;
    if (!x->dst_on_host) {
        ao_device *d = x->peer ? x->peer : x->dev;
        ao_stream *s = x->peer ? x->peer_s : x->cs;
        stage = ao_host_alloc(d, n);
        ao_copy_async(d, stage, x->dst, n, AO_D2H, s);
        ao_stream_sync(s);
        got = stage;
    }
    for (size_t i = 0; i < n; i++) bad += got[i] != pattern(i);
    if (stage) ao_host_free(x->peer ? x->peer : x->dev, stage);
    return bad;
}

static int open_devices(sdma *x, const ao_rank_info *ri)
{
    const ao_sdma_opts *o = x->o;
    ao_rank_opts ro = {.cmd = "sdma", .backend = o->backend, .ordinal = o->device};
    int rc = ao_rank_open(&x->r, ri, &ro);
    if (rc) return rc;
    x->dev = x->r.dev;
    x->info = x->r.info;
    int ordinal = x->info.ordinal, ndev = x->r.ndevices;
    if (o->direction == AO_SDMA_P2P && ordinal + 1 >= ndev) {
        ao_error("--direction",
                 "p2p copies from device %d to device %d; the %s backend sees %d "
                 "device(s)",
                 ordinal, ordinal + 1, o->backend, ndev);
        if (strcmp(o->backend, "cpu") == 0) ao_hint("on the cpu backend use --direction d2d");
        return AO_EXIT_USAGE;
    }
    if (o->direction == AO_SDMA_P2P && o->engine == AO_SDMA_KERNEL) {
        ao_error("--engine", "kernel copies run within one device; p2p takes --engine dma");
        return AO_EXIT_USAGE;
    }
    if (o->direction == AO_SDMA_P2P) {
        x->peer = ao_device_open(o->backend, ordinal + 1);
        if (!x->peer) return AO_EXIT_USAGE;
        x->peer_s = ao_stream_create(x->peer, "verify", 0);
    }
    return 0;
}

static void setup(sdma *x, ao_dtype t)
{
    const ao_sdma_opts *o = x->o;
    /* The GEMM yields to the copy: lowest priority vs highest. */
    x->gs = ao_stream_create(x->dev, "compute", x->info.priority_least);
    x->cs = ao_stream_create(x->dev, "h2d", x->info.priority_greatest);
    for (int i = 0; i < 4; i++) x->ev[i] = ao_event_create(x->dev);
    size_t n = (size_t)o->matrix, elems = n * n;
    x->a = ao_dev_alloc(x->dev, elems * ao_dtype_size(t));
    x->b = ao_dev_alloc(x->dev, elems * ao_dtype_size(t));
    x->c = ao_dev_alloc(x->dev, elems * ao_dtype_size(t));
    ao_bench_fill_random(x->dev, x->gs, x->a, elems, t, 1);
    ao_bench_fill_random(x->dev, x->gs, x->b, elems, t, 2);
    x->gemm = (ao_gemm_desc){.m = o->matrix,
                             .n = o->matrix,
                             .k = o->matrix,
                             .alpha = 1.0f,
                             .a = x->a,
                             .lda = o->matrix,
                             .b = x->b,
                             .ldb = o->matrix,
                             .c = x->c,
                             .ldc = o->matrix,
                             .ab_type = t,
                             .c_type = t,
                             .batch_count = 1};
    x->flops = 2.0 * (double)n * (double)n * (double)n;
    x->src_on_host = o->direction == AO_SDMA_H2D;
    x->dst_on_host = o->direction == AO_SDMA_D2H;
    x->src =
        x->src_on_host ? ao_host_alloc(x->dev, o->copy_bytes) : ao_dev_alloc(x->dev, o->copy_bytes);
    if (x->dst_on_host)
        x->dst = ao_host_alloc(x->dev, o->copy_bytes);
    else
        x->dst = ao_dev_alloc(x->peer ? x->peer : x->dev, o->copy_bytes);
    for (int m = 0; m < M_N; m++) {
        x->m[m].total = ao_calloc((size_t)o->iterations, sizeof(double));
        x->m[m].gemm = ao_calloc((size_t)o->iterations, sizeof(double));
        x->m[m].copy = ao_calloc((size_t)o->iterations, sizeof(double));
    }
}

static void teardown(sdma *x)
{
    for (int m = 0; m < M_N; m++) {
        free(x->m[m].total);
        free(x->m[m].gemm);
        free(x->m[m].copy);
    }
    if (x->src) x->src_on_host ? ao_host_free(x->dev, x->src) : ao_dev_free(x->dev, x->src);
    if (x->dst)
        x->dst_on_host ? ao_host_free(x->dev, x->dst)
                       : ao_dev_free(x->peer ? x->peer : x->dev, x->dst);
    if (x->a) ao_dev_free(x->dev, x->a);
    if (x->b) ao_dev_free(x->dev, x->b);
    if (x->c) ao_dev_free(x->dev, x->c);
    for (int i = 0; i < 4; i++)
        if (x->ev[i]) ao_event_destroy(x->ev[i]);
    if (x->gs) ao_stream_destroy(x->gs);
    if (x->cs) ao_stream_destroy(x->cs);
    if (x->peer_s) ao_stream_destroy(x->peer_s);
    if (x->peer) ao_device_close(x->peer);
    ao_rank_close(&x->r);
}

enum { K_MODE, K_MEAN, K_MIN, K_MAX, K_GEMM, K_TFLOPS, K_COPY, K_GBPS, K_N };
static const ao_column columns[K_N] = {
    {"mode", "mode", "", 8, 0, 0},        {"mean_ms", "mean", "(ms)", 9, 3, 0},
    {"min_ms", "min", "(ms)", 9, 3, 0},   {"max_ms", "max", "(ms)", 9, 3, 0},
    {"gemm_ms", "gemm", "(ms)", 9, 3, 0}, {"gemm_tflops", "gemm", "(TFLOP/s)", 10, 2, 0},
    {"copy_ms", "copy", "(ms)", 9, 3, 0}, {"copy_gbps", "copy", "(GB/s)", 9, 2, 0},
};

static ao_table *summarize(const sdma *x)
{
    const ao_sdma_opts *o = x->o;
    int n = o->iterations;
    ao_table *t = ao_table_new(columns, K_N);
    for (int m = 0; m < M_N; m++) {
        int r = ao_table_add_row(t);
        const samples *s = &x->m[m];
        ao_table_set_str(t, r, K_MODE, mode_names[m]);
        ao_table_set_num(t, r, K_MEAN, mean_of(s->total, n));
        ao_table_set_num(t, r, K_MIN, extreme_of(s->total, n, 0));
        ao_table_set_num(t, r, K_MAX, extreme_of(s->total, n, 1));
        if (m != M_COPY) {
            double g = mean_of(s->gemm, n);
            ao_table_set_num(t, r, K_GEMM, g);
            ao_table_set_num(t, r, K_TFLOPS, g > 0 ? x->flops / (g * 1e-3) / 1e12 : NAN);
        }
        if (m != M_GEMM) {
            double c = mean_of(s->copy, n);
            ao_table_set_num(t, r, K_COPY, c);
            ao_table_set_num(t, r, K_GBPS, c > 0 ? (double)o->copy_bytes / (c * 1e-3) / 1e9 : NAN);
        }
    }
    return t;
}

static int report(const sdma *x, ao_table *t, ao_dtype dt, size_t mismatches)
{
    const ao_sdma_opts *o = x->o;
    double serial = ao_table_num(t, M_SERIAL, K_MEAN), overlap = ao_table_num(t, M_OVERLAP, K_MEAN);
    double gemm = ao_table_num(t, M_GEMM, K_MEAN), copy = ao_table_num(t, M_COPY, K_MEAN);
    double savings = ao_sdma_savings_pct(serial, overlap);
    double achieved = ao_sdma_achieved(serial, overlap, gemm, copy);
    double overlap_ms = x->overlap_ms_sum / o->iterations;
    char size[32];
    ao_format_size(o->copy_bytes, size, sizeof size);
    printf("# aorta sdma: %s device %d (%s), GEMM %dx%dx%d %s, copy %s %s by %s, %d iterations "
           "(+%d warm-up)\n",
           x->info.backend, x->info.ordinal, x->info.name, o->matrix, o->matrix, o->matrix,
           ao_dtype_name(dt), size, ao_sdma_direction_name(o->direction),
           ao_sdma_engine_name(o->engine), o->iterations, o->warmup);
    printf("# streams: gemm priority %d, copy priority %d (device range %d..%d)\n",
           ao_stream_priority(x->gs), ao_stream_priority(x->cs), x->info.priority_least,
           x->info.priority_greatest);
    ao_table_print_header(t, stdout);
    for (int r = 0; r < M_N; r++) ao_table_print_row(t, r, stdout);
    printf("# savings    : %.2f %% of serial  ((serial - overlap) / serial)\n", savings);
    printf("# achieved   : %.3f  (1 = perfect: (serial - overlap) / (serial - max(gemm, copy)))\n",
           achieved);
    printf("# concurrent : %d/%d iterations the copy ran during the GEMM (mean overlap %.3f ms)\n",
           x->concurrent, o->iterations, overlap_ms);
    printf("# data check : %s (%zu of %zu bytes differ)\n", mismatches ? "FAILED" : "OK",
           mismatches, o->copy_bytes);
    fflush(stdout);
    if (!o->json_path) return 0;

    yajl_gen g = yajl_gen_alloc(NULL);
    yajl_gen_config(g, yajl_gen_beautify, 1);
    yajl_gen_map_open(g);
    ao_json_gen_str(g, "backend");
    ao_json_gen_str(g, x->info.backend);
    ao_json_gen_str(g, "device");
    yajl_gen_integer(g, x->info.ordinal);
    ao_json_gen_str(g, "device_name");
    ao_json_gen_str(g, x->info.name);
    ao_json_gen_str(g, "matrix_size");
    yajl_gen_integer(g, o->matrix);
    ao_json_gen_str(g, "dtype");
    ao_json_gen_str(g, ao_dtype_name(dt));
    ao_json_gen_str(g, "copy_bytes");
    yajl_gen_integer(g, (long long)o->copy_bytes);
    ao_json_gen_str(g, "direction");
    ao_json_gen_str(g, ao_sdma_direction_name(o->direction));
    ao_json_gen_str(g, "engine");
    ao_json_gen_str(g, ao_sdma_engine_name(o->engine));
    ao_json_gen_str(g, "iterations");
    yajl_gen_integer(g, o->iterations);
    ao_json_gen_str(g, "warmup");
    yajl_gen_integer(g, o->warmup);
    ao_json_gen_str(g, "gemm_priority");
    yajl_gen_integer(g, ao_stream_priority(x->gs));
    ao_json_gen_str(g, "copy_priority");
    yajl_gen_integer(g, ao_stream_priority(x->cs));
    ao_json_gen_str(g, "modes");
    ao_table_gen_json(t, g);
    ao_json_gen_str(g, "savings_pct");
    ao_json_gen_double(g, savings);
    ao_json_gen_str(g, "achieved");
    ao_json_gen_double(g, achieved);
    ao_json_gen_str(g, "concurrent_iterations");
    yajl_gen_integer(g, x->concurrent);
    ao_json_gen_str(g, "mean_overlap_ms");
    ao_json_gen_double(g, overlap_ms);
    ao_json_gen_str(g, "data_ok");
    yajl_gen_bool(g, mismatches == 0);
    yajl_gen_map_close(g);
    int rc = ao_json_write_atomic(o->json_path, g);
    yajl_gen_free(g);
    return rc;
}

int ao_sdma_run(const ao_sdma_opts *o)
{
    /* Never spawned: one process, or one per slot of an external launcher. */
    ao_launch_req req = {.backend = o->backend};
    ao_rank_info ri;
    ao_launch_role role;
    int rc = ao_launch_ranks(0, NULL, &req, &ri, &role);
    if (role == AO_ROLE_DONE) return rc;
    int print = ri.rank == 0;
    sdma x;
    memset(&x, 0, sizeof x);
    x.o = o;
    rc = open_devices(&x, &ri);
    ao_dtype dt = o->dtype;
    if (rc == 0) {
        if (!o->dtype_set) dt = strcmp(x.info.backend, "cpu") == 0 ? AO_F32 : AO_BF16;
        if (!ao_device_supports(x.dev, dt)) {
            ao_error("--dtype", "the %s backend cannot run %s GEMMs", x.info.backend,
                     ao_dtype_name(dt));
            rc = AO_EXIT_USAGE;
        }
    }
    if (rc == 0) {
        setup(&x, dt);
        prepare_data(&x);
        for (int m = 0; m < M_N; m++)
            for (int i = 0; i < o->warmup + o->iterations; i++)
                run_iteration(&x, (enum mode)m, i - o->warmup);
        size_t bad = count_mismatches(&x);
        ao_table *t = summarize(&x);
        if (print && report(&x, t, dt, bad) != 0) rc = AO_EXIT_FAIL;
        ao_table_free(t);
        if (bad) {
            ao_error("sdma", "the copy's destination differs from its source in %zu of %zu bytes",
                     bad, o->copy_bytes);
            rc = AO_EXIT_FAIL;
        }
    }
    teardown(&x);
    return rc;
}
