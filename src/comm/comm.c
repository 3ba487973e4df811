/* The collective API's dispatch layer: names, sizes, the backend registry,
 * argument checks shared by all backends, and the watchdog hook (every op
 * enqueued here is registered with comm/watchdog.c, whatever the backend). */
#include <ctype.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "comm/wait.h"
#include "comm/watchdog.h"
#include "core/error.h"
#include "core/plugin.h"
#include "core/metrics.h"

/* ---- names and sizes ----------------------------------------------------- */

static const char *const coll_names[AO_NCOLLS] = {
    [AO_ALLGATHER] = "allgather", [AO_REDUCESCATTER] = "reducescatter",
    [AO_ALLREDUCE] = "allreduce", [AO_BROADCAST] = "broadcast",
    [AO_REDUCE] = "reduce",       [AO_ALLTOALL] = "alltoall",
    [AO_SENDRECV] = "sendrecv",
};

static const char *const redop_names[AO_NREDOPS] = {
    [AO_SUM] = "sum", [AO_PROD] = "prod", [AO_MAX] = "max", [AO_MIN] = "min", [AO_AVG] = "avg",
};

const char *ao_coll_name(ao_coll c)
{
    return (unsigned)c < AO_NCOLLS ? coll_names[c] : "unknown";
}

const char *ao_redop_name(ao_redop op)
{
    return (unsigned)op < AO_NREDOPS ? redop_names[op] : "unknown";
}

/* Lower case without '_', '-' and ' ', so "All_Gather" reads "allgather". */
static int normalize(const char *s, char *out, size_t n)
{
    size_t j = 0;
    for (; *s; s++) {
        if (*s == '_' || *s == '-' || *s == ' ') continue;
        if (j + 1 >= n) return -1;
        out[j++] = (char)tolower((unsigned char)*s);
    }
    out[j] = '\0';
    return j > 0 ? 0 : -1;
}

int ao_coll_parse(const char *s, ao_coll *out)
{
    char key[32];
    if (!s || normalize(s, key, sizeof key) != 0) return -1;
    for (int c = 0; c < AO_NCOLLS; c++) {
        if (strcmp(key, coll_names[c]) == 0) {
            *out = (ao_coll)c;
            return 0;
        }
    }
    return -1;
}

int ao_redop_parse(const char *s, ao_redop *out)
{
    static const struct {
        const char *alias;
        ao_redop op;
    } aliases[] = {{"product", AO_PROD}, {"average", AO_AVG}, {"mean", AO_AVG}};
    char key[32];
    if (!s || normalize(s, key, sizeof key) != 0) return -1;
    for (int op = 0; op < AO_NREDOPS; op++) {
        if (strcmp(key, redop_names[op]) == 0) {
            *out = (ao_redop)op;
            return 0;
        }
    }
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++) {
        if (strcmp(key, aliases[i].alias) == 0) {
            *out = aliases[i].op;
            return 0;
        }
    }
    return -1;
}

size_t ao_coll_bytes(ao_coll c, size_t count, ao_dtype t, int nranks)
{
    size_t bytes = count * ao_dtype_size(t);
    switch (c) {
    case AO_ALLGATHER:     /* the receive buffer */
    case AO_REDUCESCATTER: /* the send buffer */
    case AO_ALLTOALL:
        return bytes * (size_t)(nranks > 0 ? nranks : 1);
    default:
        return bytes;
    }
}

/* One formula for the kinds the metrics know (core/metrics.c); alltoall moves
 * like an all-gather, the rooted and point-to-point ops move their bytes once. */
double ao_coll_busbw_factor(ao_coll c, int nranks)
{
    switch (c) {
    case AO_ALLREDUCE:
        return ao_busbw_factor(AO_KIND_ALLREDUCE, nranks);
    case AO_ALLGATHER:
    case AO_ALLTOALL:
        return ao_busbw_factor(AO_KIND_ALLGATHER, nranks);
    case AO_REDUCESCATTER:
        return ao_busbw_factor(AO_KIND_REDUCESCATTER, nranks);
    default:
        return 1.0;
    }
}

/* ---- backends ------------------------------------------------------------ */

/* The comm backends of this build; each one's ops are in a plugin
 * (core/plugin.h), loaded when a command first needs it. */
static const struct backend {
    const char *name, *device_backend, *plugin, *symbol;
} backends[] = {
#if defined(AORTA_HIP)
    {"rccl", "hip", "hip", "ao_nccl_comm_ops"},
#elif defined(AORTA_HAVE_NCCL)
    {"nccl", "cuda", "cuda", "ao_nccl_comm_ops"},
#endif
#ifdef AORTA_HAVE_MPI
    {"mpi", "cpu", "mpi", "ao_mpi_comm_ops"},
#endif
    {NULL, NULL, NULL, NULL},
};
enum { NBACKENDS = sizeof backends / sizeof backends[0] - 1 };

static const struct ao_comm_ops *ops_of(const struct backend *b, int quiet)
{
    return ao_plugin_sym(b->plugin, b->symbol, quiet);
}

int ao_comm_backend_count(void)
{
    return NBACKENDS;
}

const char *ao_comm_backend_name(int i)
{
    return i >= 0 && i < NBACKENDS ? backends[i].name : NULL;
}

void ao_comm_backend_version(int i, char *buf, size_t n)
{
    if (n == 0) return;
    buf[0] = '\0';
    if (i < 0 || i >= NBACKENDS) return;
    const struct ao_comm_ops *ops = ops_of(&backends[i], 1);
    if (ops)
        ops->version(buf, n);
    else
        snprintf(buf, n, "cannot load: %s", ao_plugin_why(backends[i].plugin));
}

static const struct backend *find_for_device(const char *device_backend)
{
    for (int i = 0; i < NBACKENDS; i++)
        if (strcmp(backends[i].device_backend, device_backend) == 0) return &backends[i];
    return NULL;
}

const char *ao_comm_backend_for(const char *device_backend)
{
    const struct backend *b = find_for_device(device_backend);
    return b ? b->name : NULL;
}

int ao_comm_backend_load(const char *device_backend)
{
    const struct backend *b = find_for_device(device_backend);
    return b && !ops_of(b, 0) ? -1 : 0;
}

static void list_backends(char *buf, size_t n)
{
    size_t used = 0;
    snprintf(buf, n, "none");
    for (int i = 0; i < NBACKENDS && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "", backends[i].name);
}

int ao_comm_make_id(const char *backend, ao_comm_id *id)
{
    memset(id, 0, sizeof *id);
    for (int i = 0; i < NBACKENDS; i++) {
        if (strcmp(backends[i].name, backend) != 0) continue;
        const struct ao_comm_ops *ops = ops_of(&backends[i], 0);
        if (!ops) return -1;
        return ops->make_id ? ops->make_id(id) : 0;
    }
    char names[128];
    list_backends(names, sizeof names);
    ao_error("comm backend", "\"%s\" is not built into this binary (available: %s)", backend,
             names);
    return -1;
}

void ao_comm_id_to_hex(const ao_comm_id *id, char hex[2 * AO_COMM_ID_BYTES + 1])
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < AO_COMM_ID_BYTES; i++) {
        hex[2 * i] = digits[id->bytes[i] >> 4];
        hex[2 * i + 1] = digits[id->bytes[i] & 15];
    }
    hex[2 * AO_COMM_ID_BYTES] = '\0';
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int ao_comm_id_from_hex(const char *hex, ao_comm_id *id)
{
    if (!hex || strlen(hex) != 2 * AO_COMM_ID_BYTES) return -1;
    for (int i = 0; i < AO_COMM_ID_BYTES; i++) {
        int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
        if (hi < 0 || lo < 0) return -1;
        id->bytes[i] = (unsigned char)(hi << 4 | lo);
    }
    return 0;
}

/* ---- communicators ------------------------------------------------------- */

static struct ao_comm_base *base_of(ao_comm *c)
{
    return (struct ao_comm_base *)(void *)c;
}

static ao_comm *watched(ao_comm *c, double timeout_s)
{
    if (!c) return NULL;
    struct ao_comm_base *b = base_of(c);
    b->timeout_s = timeout_s;
    b->watch = timeout_s > 0 ? ao_watch_add(c) : NULL;
    return c;
}

ao_comm *ao_comm_create(ao_device *dev, ao_stream *s, const ao_rank_info *ri, const ao_comm_id *id,
                        const ao_comm_opts *opts)
{
    const char *device_backend = ao_device_backend(dev);
    const struct backend *b = find_for_device(device_backend);
    if (!b) {
        char names[128];
        list_backends(names, sizeof names);
        ao_error("collectives",
                 "no comm backend for %s devices is built into this binary "
                 "(built: %s)",
                 device_backend, names);
        ao_hint("rebuild with %s", strcmp(device_backend, "cpu") == 0
                                       ? "MPI installed (cmake -DAORTA_MPI=ON)"
                                       : "NCCL found (set NCCL_HOME)");
        return NULL;
    }
    if (ri->world_size < 1 || ri->rank < 0 || ri->rank >= ri->world_size) {
        ao_error("collectives", "rank %d is not within a world of %d ranks", ri->rank,
                 ri->world_size);
        return NULL;
    }
    const struct ao_comm_ops *ops = ops_of(b, 0);
    if (!ops) return NULL;
    ao_comm_opts none = {0};
    if (!opts) opts = &none;
    /* Collective over every rank: it waits for the slowest to arrive. */
    int w = ao_wait_begin("communicator init", s,
                          "every rank must reach it: look for a rank that failed or has not "
                          "started (its [rank K] lines); a slow cluster needs a larger "
                          "distributed.timeout_s");
    if (ao_test_hang_at("init", ri->rank, -1)) ao_test_block("init");
    ao_comm *c = watched(ops->create(dev, s, ri, id, opts), opts->timeout_s);
    ao_wait_end(w);
    return c;
}

ao_comm *ao_comm_split(ao_comm *parent, ao_stream *s, int color, int key)
{
    struct ao_comm_base *p = base_of(parent);
    int w = ao_wait_begin("communicator split", s,
                          "every rank of the parent communicator must reach it: look for a rank "
                          "that failed (its [rank K] lines)");
    ao_comm *c = watched(p->ops->split(parent, s, color, key), p->timeout_s);
    ao_wait_end(w);
    return c;
}

void ao_comm_destroy(ao_comm *c)
{
    if (!c) return;
    struct ao_comm_base *b = base_of(c);
    /* Let outstanding ops finish while the watchdog still guards them. */
    if (b->watch) ao_watch_mark(b->watch);
    ao_wait_stream_sync(b->stream, "a communicator's last ops before its teardown");
    if (b->watch) ao_watch_remove(b->watch);
    b->watch = NULL;
    int w = ao_wait_begin("communicator teardown", b->stream, NULL);
    free(b->seen);
    b->ops->destroy(c);
    ao_wait_end(w);
}

void ao_comm_abort(ao_comm *c)
{
    base_of(c)->ops->abort(c);
}

int ao_comm_rank(ao_comm *c)
{
    return base_of(c)->rank;
}

int ao_comm_size(ao_comm *c)
{
    return base_of(c)->size;
}

ao_stream *ao_comm_stream(ao_comm *c)
{
    return base_of(c)->stream;
}

/* Checks shared by every backend: a bad root, peer, dtype or op here is a
 * programming error (commands validate what users type). */
static void check_args(struct ao_comm_base *b, ao_coll op, ao_dtype t, ao_redop r, int peer,
                       int recv_peer)
{
    const char *name = ao_coll_name(op);
    if ((unsigned)t >= AO_NDTYPES) ao_fatal(AO_EXIT_FAIL, name, "invalid dtype %d", (int)t);
    if ((unsigned)r >= AO_NREDOPS) ao_fatal(AO_EXIT_FAIL, name, "invalid reduction %d", (int)r);
    if (peer < 0 || peer >= b->size)
        ao_fatal(AO_EXIT_FAIL, name, "%s %d is not a rank of this %d-rank communicator",
                 op == AO_SENDRECV ? "peer" : "root", peer, b->size);
    if (recv_peer < 0 || recv_peer >= b->size)
        ao_fatal(AO_EXIT_FAIL, name, "peer %d is not a rank of this %d-rank communicator",
                 recv_peer, b->size);
}

/* ---- calls made before ---------------------------------------------------- */

/* A call's signature: what a library's set-up on first use can depend on. */
static uint64_t signature(ao_coll op, size_t count, ao_dtype t, ao_redop r)
{
    uint64_t k = (uint64_t)count * 0x9e3779b97f4a7c15ull;
    k ^= ((uint64_t)op << 56) ^ ((uint64_t)t << 48) ^ ((uint64_t)r << 40);
    return k ? k : 1; /* 0 marks an empty slot */
}

static size_t seen_slot(const struct ao_comm_base *b, uint64_t k)
{
    size_t i = (size_t)(k ^ k >> 29) & (b->seen_cap - 1);
    while (b->seen[i] && b->seen[i] != k) i = (i + 1) & (b->seen_cap - 1);
    return i;
}

int ao_comm_seen(ao_comm *c, ao_coll op, size_t count, ao_dtype t, ao_redop r)
{
    const struct ao_comm_base *b = base_of(c);
    uint64_t k = signature(op, count, t, r);
    return b->seen_cap && b->seen[seen_slot(b, k)] == k;
}

static void remember(struct ao_comm_base *b, uint64_t k)
{
    if (2 * (b->seen_n + 1) > b->seen_cap) { /* at most half full */
        uint64_t *old = b->seen;
        size_t cap = b->seen_cap;
        b->seen_cap = cap ? 2 * cap : 64;
        b->seen = ao_calloc(b->seen_cap, sizeof *b->seen);
        for (size_t i = 0; i < cap; i++)
            if (old[i]) b->seen[seen_slot(b, old[i])] = old[i];
        free(old);
    }
    size_t i = seen_slot(b, k);
    if (!b->seen[i]) b->seen_n++;
    b->seen[i] = k;
}

static void enqueue(ao_comm *c, ao_coll op, const void *send, void *recv, size_t count, ao_dtype t,
                    ao_redop r, int peer, int recv_peer)
{
    struct ao_comm_base *b = base_of(c);
    check_args(b, op, t, r, peer, recv_peer);
    int defer = b->defer_mark;
    b->defer_mark = 0;
    if (b->watch) ao_watch_mark(b->watch); /* a deferred mark nobody made */
    const size_t bytes = ao_coll_bytes(op, count, t, b->size);
    /* The host inside the library: a first call may connect, and wait. */
    int w = ao_wait_begin_coll(op, b->watch ? ao_watch_next_seq(b->watch) : 0, bytes, b->stream);
    if (ao_test_hang_at("enqueue", b->rank, ao_comm_step())) ao_test_block("enqueue");
    b->ops->coll(c, op, send, recv, count, t, r, peer, recv_peer);
    if (b->watch) ao_watch_op(b->watch, op, bytes, !defer);
    ao_wait_end(w);
    remember(b, signature(op, count, t, r));
}

static _Atomic int64_t current_step = -1;

void ao_comm_set_step(int64_t step)
{
    atomic_store(&current_step, step);
}

int64_t ao_comm_step(void)
{
    return atomic_load(&current_step);
}

void ao_comm_defer_mark(ao_comm *c)
{
    base_of(c)->defer_mark = 1;
}

void ao_comm_mark(ao_comm *c)
{
    struct ao_comm_base *b = base_of(c);
    if (b->watch) ao_watch_mark(b->watch);
}

void ao_allgather(ao_comm *c, const void *send, void *recv, size_t count, ao_dtype t)
{
    enqueue(c, AO_ALLGATHER, send, recv, count, t, AO_SUM, 0, 0);
}

void ao_reducescatter(ao_comm *c, const void *send, void *recv, size_t recv_count, ao_dtype t,
                      ao_redop op)
{
    enqueue(c, AO_REDUCESCATTER, send, recv, recv_count, t, op, 0, 0);
}

void ao_allreduce(ao_comm *c, const void *send, void *recv, size_t count, ao_dtype t, ao_redop op)
{
    enqueue(c, AO_ALLREDUCE, send, recv, count, t, op, 0, 0);
}

void ao_broadcast(ao_comm *c, const void *send, void *recv, size_t count, ao_dtype t, int root)
{
    enqueue(c, AO_BROADCAST, send, recv, count, t, AO_SUM, root, 0);
}

void ao_reduce(ao_comm *c, const void *send, void *recv, size_t count, ao_dtype t, ao_redop op,
               int root)
{
    enqueue(c, AO_REDUCE, send, recv, count, t, op, root, 0);
}

void ao_alltoall(ao_comm *c, const void *send, void *recv, size_t count, ao_dtype t)
{
    enqueue(c, AO_ALLTOALL, send, recv, count, t, AO_SUM, 0, 0);
}

void ao_sendrecv(ao_comm *c, const void *send, int send_peer, void *recv, int recv_peer,
                 size_t count, ao_dtype t)
{
    enqueue(c, AO_SENDRECV, send, recv, count, t, AO_SUM, send_peer, recv_peer);
}
