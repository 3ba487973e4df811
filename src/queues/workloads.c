/* The workloads of `aorta queues`: one iteration each, as the ops a framework
 * would issue on N streams. Sizes are for one GPU of the H100/H200 class
 * (a stream's work in tens of µs to a few ms); the cpu backend gets the same
 * pattern with small sizes, so CI runs every workload. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "queues/internal.h"

typedef struct workload {
    const char *name, *help;
    void (*make)(ao_qplan *p, int cpu);
} workload;

/* ---- building ------------------------------------------------------------- */

static int add_op(ao_qplan *p, int stream, ao_qkind kind, const char *name)
{
    p->ops = ao_realloc(p->ops, (size_t)(p->nops + 1) * sizeof *p->ops);
    p->ops[p->nops] = (ao_qplan_op){.stream = stream, .kind = kind, .name = name};
    if (ao_qplan_name_index(p, name) < 0 && p->nnames < AO_QMAX_NAMES) p->names[p->nnames++] = name;
    return p->nops++;
}

static int gemm(ao_qplan *p, int stream, const char *name, int shape)
{
    int i = add_op(p, stream, AO_Q_GEMM, name);
    p->ops[i].shape = shape;
    return i;
}

static int spin(ao_qplan *p, int stream, const char *name, double us)
{
    int i = add_op(p, stream, AO_Q_SPIN, name);
    p->ops[i].spin_us = us;
    return i;
}

static int copy(ao_qplan *p, int stream, const char *name, size_t bytes, ao_copy_kind kind)
{
    int i = add_op(p, stream, AO_Q_COPY, name);
    p->ops[i].bytes = bytes;
    p->ops[i].copy = kind;
    return i;
}

/* Op `op` waits for op `on` (a no-op on the same stream: FIFO already). */
static void after(ao_qplan *p, int op, int on)
{
    if (p->ops[on].stream == p->ops[op].stream) return;
    ao_qplan_op *o = &p->ops[op];
    if (o->ndeps == 0) o->dep0 = p->ndeps;
    /* Deps of one op are added together, before the next op's. */
    p->deps = ao_realloc(p->deps, (size_t)(p->ndeps + 1) * sizeof *p->deps);
    p->deps[p->ndeps++] = on;
    o->ndeps++;
}

static int shape(ao_qplan *p, int m, int n, int k)
{
    p->shapes[p->nshapes] = (ao_qshape){m, n, k};
    return p->nshapes++;
}

/* ---- the workloads ---------------------------------------------------------- */

/* Stream 0 runs one large GEMM; every other stream a run of ~10 µs kernels
 * issued right after it: the convoy a long kernel makes for short ones. One
 * stream: the short kernels follow the GEMM on it. */
static void make_hetero(ao_qplan *p, int cpu)
{
    int big = cpu ? shape(p, 192, 192, 192) : shape(p, 8192, 8192, 8192);
    double us = cpu ? 200 : 10;
    int per = cpu ? 4 : 16;
    gemm(p, 0, "gemm", big);
    int first = p->nstreams > 1 ? 1 : 0;
    for (int k = 0; k < per; k++)
        for (int s = first; s < p->nstreams; s++) spin(p, s, "tiny", us);
}

/* Short kernels only, round-robin over the streams: what dispatch costs. */
static void make_tiny(ao_qplan *p, int cpu)
{
    int per = cpu ? 8 : 32;
    for (int k = 0; k < per; k++)
        for (int s = 0; s < p->nstreams; s++) spin(p, s, "tiny", cpu ? 20 : 2);
}

/* One large GEMM per stream: the device is full with one, the throughput
 * reference. */
static void make_gemm(ao_qplan *p, int cpu)
{
    int sh = cpu ? shape(p, 128, 128, 128) : shape(p, 4096, 4096, 4096);
    for (int s = 0; s < p->nstreams; s++) gemm(p, s, "gemm", sh);
}

/* MoE: a router on stream 0, one expert per stream (up and down projection
 * of its tokens) once the router is done, then a combine on stream 0 after
 * every expert. */
static void make_experts(ao_qplan *p, int cpu)
{
    int up = cpu ? shape(p, 64, 256, 64) : shape(p, 2048, 8192, 2048);
    int down = cpu ? shape(p, 64, 64, 256) : shape(p, 2048, 2048, 8192);
    int router = spin(p, 0, "router", cpu ? 50 : 5);
    int *last = ao_calloc((size_t)p->nstreams, sizeof *last);
    for (int s = 0; s < p->nstreams; s++) {
        int u = gemm(p, s, "expert", up);
        after(p, u, router);
        last[s] = gemm(p, s, "expert", down);
    }
    int combine = spin(p, 0, "combine", cpu ? 50 : 10);
    for (int s = 0; s < p->nstreams; s++) after(p, combine, last[s]);
    free(last);
}

/* One FSDP step of L layers on one rank: the batch's h2d copy, per layer an
 * all-gather before its forward and again before its backward, and a
 * reduce-scatter after its backward, issued as the engine issues them
 * (gathers one layer ahead) on streams 1..N-1 in turn (one stream: all on
 * stream 0), compute on stream 0. One rank has no peers: d2d copies of the
 * collectives' bytes stand in for them (plan->note says so). */
static void make_fsdp(ao_qplan *p, int cpu)
{
    int layers = cpu ? 2 : 4;
    int fwd = cpu ? shape(p, 96, 96, 96) : shape(p, 4096, 4096, 4096);
    int bwd = cpu ? shape(p, 96, 96, 192) : shape(p, 4096, 4096, 8192);
    size_t param = cpu ? (256u << 10) : (64u << 20), batch = cpu ? (256u << 10) : (16u << 20);
    int next = 0;
#define COMM_STREAM() (p->nstreams > 1 ? 1 + (next++ % (p->nstreams - 1)) : 0)
    int h2d = copy(p, COMM_STREAM(), "h2d", batch, AO_H2D);
    int *ag = ao_calloc((size_t)layers, sizeof *ag);
    ag[0] = copy(p, COMM_STREAM(), "allgather", param, AO_D2D);
    for (int l = 0; l < layers; l++) {
        if (l + 1 < layers) ag[l + 1] = copy(p, COMM_STREAM(), "allgather", param, AO_D2D);
        int f = gemm(p, 0, "forward", fwd);
        after(p, f, ag[l]);
        if (l == 0) after(p, f, h2d);
    }
    ag[layers - 1] = copy(p, COMM_STREAM(), "allgather", param, AO_D2D);
    for (int l = layers - 1; l >= 0; l--) {
        if (l > 0) ag[l - 1] = copy(p, COMM_STREAM(), "allgather", param, AO_D2D);
        int b = gemm(p, 0, "backward", bwd);
        after(p, b, ag[l]);
        int rs = copy(p, COMM_STREAM(), "reducescatter", param, AO_D2D);
        after(p, rs, b);
    }
#undef COMM_STREAM
    free(ag);
    p->note = "one rank: d2d copies of the collectives' bytes stand in for all-gather and "
              "reduce-scatter";
}

/* A pipeline of N stages, stage s on stream s: micro-batch m's stage s waits
 * for its stage s-1 through an event. */
static void make_pipeline(ao_qplan *p, int cpu)
{
    int sh = cpu ? shape(p, 64, 64, 64) : shape(p, 4096, 4096, 2048);
    int micro = cpu ? 4 : 8;
    int *prev = ao_calloc((size_t)micro, sizeof *prev);
    for (int s = 0; s < p->nstreams; s++)
        for (int m = 0; m < micro; m++) {
            int op = gemm(p, s, "stage", sh);
            if (s > 0) after(p, op, prev[m]);
            prev[m] = op;
        }
    free(prev);
}

/* Each stream a loader lane: a pinned host-to-device copy of a batch, then
 * the compute that consumes it, twice per iteration. */
static void make_dataload(ao_qplan *p, int cpu)
{
    int sh = cpu ? shape(p, 96, 96, 96) : shape(p, 4096, 4096, 2048);
    size_t bytes = cpu ? (256u << 10) : (8u << 20);
    for (int k = 0; k < 2; k++)
        for (int s = 0; s < p->nstreams; s++) {
            copy(p, s, "h2d", bytes, AO_H2D);
            gemm(p, s, "compute", sh);
        }
}

static const workload workloads[] = {
    {"hetero", "~10 us kernels on N-1 streams beside a ~2 ms GEMM on stream 0 (the convoy)",
     make_hetero},
    {"tiny", "32 ~2 us kernels per stream, round-robin: the cost of dispatch", make_tiny},
    {"gemm", "one 4096^3 bf16 GEMM per stream: the throughput reference", make_gemm},
    {"experts", "MoE: router, one expert (up + down GEMM) per stream, combine after all",
     make_experts},
    {"fsdp", "one FSDP step: h2d, all-gathers ahead of each layer, reduce-scatters after",
     make_fsdp},
    {"pipeline", "N stages on N streams, 8 micro-batches handed on through events", make_pipeline},
    {"dataload", "per stream: h2d copy of a batch, then the GEMM that uses it, twice",
     make_dataload},
};
#define NWORKLOADS ((int)(sizeof workloads / sizeof workloads[0]))

int ao_queues_workload_count(void)
{
    return NWORKLOADS;
}

const char *ao_queues_workload_name(int i)
{
    return i >= 0 && i < NWORKLOADS ? workloads[i].name : NULL;
}

const char *ao_queues_workload_help(int i)
{
    return i >= 0 && i < NWORKLOADS ? workloads[i].help : NULL;
}

static const workload *find(const char *name)
{
    for (int i = 0; i < NWORKLOADS; i++)
        if (strcmp(workloads[i].name, name) == 0) return &workloads[i];
    return NULL;
}

int ao_queues_workload_check(const char *flag, const char *name)
{
    if (find(name)) return 0;
    ao_error(flag,
             "'%s' is not a workload; allowed: hetero, tiny, gemm, experts, fsdp, pipeline, "
             "dataload (aorta queues list)",
             name);
    return -1;
}

void ao_qplan_make(const char *name, int streams, int cpu, ao_qplan *p)
{
    memset(p, 0, sizeof *p);
    p->nstreams = streams;
    find(name)->make(p, cpu);
}

void ao_qplan_free(ao_qplan *p)
{
    free(p->ops);
    free(p->deps);
    memset(p, 0, sizeof *p);
}

int ao_qplan_name_index(const ao_qplan *p, const char *name)
{
    for (int i = 0; i < p->nnames; i++)
        if (strcmp(p->names[i], name) == 0) return i;
    return -1;
}
