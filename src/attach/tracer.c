/* attach/tracer.h */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "attach/attach.h"
#include "attach/claim.h"
#include "attach/steps.h"
#include "attach/tracer.h"
#include "core/error.h"
#include "core/jsonl.h"

#define FLUSH_MS  100
#define SETTLE_NS 500000000ull
#define NAME_MAX_ 128

typedef struct qbuf {
    void *p;
    size_t valid;
    int tag;
} qbuf;

typedef struct qmark {
    char name[NAME_MAX_];
    int64_t begin, end;
} qmark;

typedef struct qevent { /* aside (on = 1) or resume, in order */
    int on;
    int64_t corr;
    uint64_t t;
} qevent;

typedef struct open_range { /* a start ... end range */
    uint64_t id;
    int64_t begin;
    char name[NAME_MAX_];
} open_range;

static struct {
    const ao_tracer_backend *b;
    /* mu: what the vendor's threads hand over */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    qbuf *q;
    size_t nq, capq;
    qmark *marks;
    size_t nmarks, capmarks;
    qevent *events;
    size_t nevents, capevents;
    open_range *ranges;
    size_t nranges, capranges;
    size_t dropped;
    int stop;
    /* worker-only (and the starting thread before it runs) */
    pthread_t worker;
    ao_steps *steps;
    ao_jsonl_writer *w;
    int claimed; /* 1: its files are made; -1: they could not be */
    int active;  /* it saw GPU work: an activity, or another client stepping in */
    ao_attach_info info;
    uint64_t now;       /* of the current drain */
    double anchor_wall; /* UNIX seconds at the anchor */
    pid_t pid;          /* the process that started the worker */
} T = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap) return;
    *cap = *cap ? 2 * *cap : 64;
    if (*cap < need) *cap = need;
    *p = ao_realloc(*p, *cap * size);
}

const char *ao_tracer_dir(void)
{
    const char *dir = getenv(AO_ATTACH_ENV_DIR);
    return dir && *dir ? dir : NULL;
}

static ao_step_source source_from_env(void)
{
    const char *s = getenv(AO_ATTACH_ENV_SOURCE);
    if (!s) return AO_STEP_NONE;
    if (!strcmp(s, "nvtx")) return AO_STEP_NVTX;
    if (!strcmp(s, "kernel")) return AO_STEP_KERNEL;
    if (!strcmp(s, "window")) return AO_STEP_WINDOW;
    return AO_STEP_NONE;
}

int ao_tracer_open(const ao_tracer_backend *b)
{
    const char *dir = ao_tracer_dir();
    if (!dir) return -1;
    T.b = b;
    /* the launcher's variables now, on the thread CUDA started on: the
     * worker that claims the files later must not read the environment
     * while the job may be changing it */
    ao_attach_who who;
    ao_attach_who_detect(&who);
    const char *w = getenv(AO_ATTACH_ENV_WINDOW_MS);
    ao_steps_opts so = {.forced = source_from_env(),
                        .nvtx_regex = getenv(AO_ATTACH_ENV_STEP_NVTX),
                        .kernel_regex = getenv(AO_ATTACH_ENV_STEP_KERNEL),
                        .window_ms = w ? atof(w) : 0,
                        .comm_regex = getenv(AO_ATTACH_ENV_COMM),
                        .settle_ns = SETTLE_NS,
                        .world_size = who.world_size};
    uint64_t anchor = b->now_ns();
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    T.anchor_wall = (double)rt.tv_sec + rt.tv_nsec / 1e9;
    T.steps = ao_steps_new(&so, anchor);
    if (!T.steps) {
        ao_warn("attach: a step or comm regex does not compile; pid %d runs untraced",
                (int)getpid());
        return -1;
    }
    /* the files wait for GPU work (claim below): a launcher that only
     * initializes the GPU writes nothing */
    ao_attach_info_init(&T.info, dir, &who);
    return 0;
}

/* On the worker, at the first GPU work: this process's files (attach/claim.h). */
static void claim(void)
{
    T.w = ao_attach_claim_files(T.info.dir, &T.info.who, &T.info.claim, ao_attach_info_write,
                                &T.info);
    T.claimed = T.w ? 1 : -1;
    if (!T.w)
        ao_warn("attach: pid %d cannot make its files in %s; it runs untraced", (int)getpid(),
                T.info.dir);
}

ao_attach_info *ao_tracer_info(void)
{
    return &T.info;
}

int ao_tracer_is_step_range(const char *name)
{
    return T.steps && ao_steps_is_step_range(T.steps, name);
}

void ao_tracer_push(void *buf, size_t valid, int tag, size_t dropped)
{
    pthread_mutex_lock(&T.mu);
    grow((void **)&T.q, &T.capq, T.nq + 1, sizeof *T.q);
    T.q[T.nq++] = (qbuf){buf, valid, tag};
    T.dropped += dropped;
    pthread_cond_signal(&T.cv);
    pthread_mutex_unlock(&T.mu);
}

static void mark_locked(const char *name, int64_t begin, int64_t end)
{
    grow((void **)&T.marks, &T.capmarks, T.nmarks + 1, sizeof *T.marks);
    qmark *m = &T.marks[T.nmarks++];
    snprintf(m->name, sizeof m->name, "%s", name);
    m->begin = begin;
    m->end = end;
}

void ao_tracer_mark(const char *name, int64_t begin, int64_t end)
{
    pthread_mutex_lock(&T.mu);
    mark_locked(name, begin, end);
    pthread_mutex_unlock(&T.mu);
}

/* This thread's push/pop stack. */
static _Thread_local struct {
    int depth, step_depth;
    int64_t begin;
    char name[NAME_MAX_];
} tls;

void ao_tracer_range_push(const char *name, int64_t corr)
{
    tls.depth++;
    if (tls.step_depth == 0 && name && ao_tracer_is_step_range(name)) {
        tls.step_depth = tls.depth;
        tls.begin = corr;
        snprintf(tls.name, sizeof tls.name, "%s", name);
    }
}

void ao_tracer_range_pop(int64_t corr)
{
    if (tls.depth <= 0) return;
    if (tls.depth == tls.step_depth) {
        ao_tracer_mark(tls.name, tls.begin, corr);
        tls.step_depth = 0;
    }
    tls.depth--;
}

void ao_tracer_range_start(const char *name, uint64_t id, int64_t corr)
{
    if (!name || !ao_tracer_is_step_range(name)) return;
    pthread_mutex_lock(&T.mu);
    grow((void **)&T.ranges, &T.capranges, T.nranges + 1, sizeof *T.ranges);
    open_range *r = &T.ranges[T.nranges++];
    r->id = id;
    r->begin = corr;
    snprintf(r->name, sizeof r->name, "%s", name);
    pthread_mutex_unlock(&T.mu);
}

void ao_tracer_range_end(uint64_t id, int64_t corr)
{
    pthread_mutex_lock(&T.mu);
    for (size_t i = 0; i < T.nranges; i++)
        if (T.ranges[i].id == id) {
            mark_locked(T.ranges[i].name, T.ranges[i].begin, corr);
            T.ranges[i] = T.ranges[--T.nranges];
            break;
        }
    pthread_mutex_unlock(&T.mu);
}

void ao_tracer_event(int on, int64_t corr, uint64_t t_ns)
{
    pthread_mutex_lock(&T.mu);
    grow((void **)&T.events, &T.capevents, T.nevents + 1, sizeof *T.events);
    T.events[T.nevents++] = (qevent){on, corr, t_ns};
    pthread_mutex_unlock(&T.mu);
}

void ao_tracer_add(const ao_cupti_record *r)
{
    T.active = 1;
    ao_steps_add(T.steps, r, T.now);
}

/* ---- the worker ---------------------------------------------------------------- */

static void write_step(void *ctx, const ao_step_out *s)
{
    (void)ctx;
    ao_attach_info_step(&T.info, s);
    if (!T.w) return;
    ao_iter_record r;
    ao_iter_record_init(&r);
    r.rank = T.info.claim.rank;
    r.world_size = T.info.claim.world_size;
    r.step = s->step;
    r.wall_time = T.anchor_wall + s->m.window_start_us / 1e6;
    r.m = s->m;
    ao_attach_extra ex = {s};
    r.extra = ao_attach_extra_gen;
    r.extra_ctx = &ex;
    if (ao_jsonl_append(T.w, &r) != 0) { /* disk full...: stop writing, keep the job */
        ao_jsonl_close(T.w);
        T.w = NULL;
    }
}

static void drain(int final)
{
    if (T.b->tick && !final) T.b->tick();
    pthread_mutex_lock(&T.mu);
    qbuf *q = T.q;
    size_t nq = T.nq;
    T.q = NULL;
    T.nq = T.capq = 0;
    pthread_mutex_unlock(&T.mu);
    T.now = mono_ns();
    size_t kept = 0;
    for (size_t i = 0; i < nq; i++)
        if (!T.b->decode(q[i].p, q[i].valid, q[i].tag, final)) q[kept++] = q[i];
    if (kept) { /* back in front of what arrived meanwhile */
        pthread_mutex_lock(&T.mu);
        size_t n = kept + T.nq;
        q = ao_realloc(q, n * sizeof *q);
        memcpy(q + kept, T.q, T.nq * sizeof *q);
        free(T.q);
        T.q = q;
        T.nq = T.capq = n;
        pthread_mutex_unlock(&T.mu);
    } else {
        free(q);
    }

    pthread_mutex_lock(&T.mu);
    qmark *marks = T.marks;
    size_t nmarks = T.nmarks;
    qevent *events = T.events;
    size_t nevents = T.nevents;
    T.marks = NULL;
    T.nmarks = T.capmarks = 0;
    T.events = NULL;
    T.nevents = T.capevents = 0;
    pthread_mutex_unlock(&T.mu);
    for (size_t i = 0; i < nevents; i++) {
        if (events[i].on)
            ao_steps_aside(T.steps, events[i].corr, events[i].t);
        else
            ao_steps_resume(T.steps, events[i].corr, events[i].t);
    }
    for (size_t i = 0; i < nmarks; i++)
        ao_steps_add_mark(T.steps, marks[i].name, marks[i].begin, marks[i].end);
    free(marks);
    free(events);
    if (nevents) T.active = 1; /* another client traces: GPU work, unseen or not */
    if (T.active && !T.claimed) claim();
    ao_steps_advance(T.steps, T.now, final, write_step, NULL);
}

static void *worker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&T.mu);
    while (!T.stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += FLUSH_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&T.cv, &T.mu, &until);
        if (T.stop) break;
        pthread_mutex_unlock(&T.mu);
        drain(0);
        pthread_mutex_lock(&T.mu);
    }
    pthread_mutex_unlock(&T.mu);
    return NULL;
}

int ao_tracer_run(void)
{
    if (pthread_create(&T.worker, NULL, worker, NULL) != 0) {
        ao_warn("attach: no worker thread in pid %d; this process runs untraced", (int)getpid());
        return -1;
    }
    T.pid = getpid();
    return 0;
}

void ao_tracer_abandon(void)
{
    ao_jsonl_close(T.w);
    T.w = NULL;
}

void ao_tracer_finish(void)
{
    /* a child forked after the GPU runtime started (a data loader's worker)
     * has no worker thread and no business with the parent's files */
    if (!T.pid || getpid() != T.pid) return;
    pthread_mutex_lock(&T.mu);
    T.stop = 1;
    pthread_cond_signal(&T.cv);
    pthread_mutex_unlock(&T.mu);
    pthread_join(T.worker, NULL);
    T.pid = 0;
    drain(1);
    if (T.claimed == 1) {
        ao_steps_stats st;
        ao_steps_get_stats(T.steps, &st);
        T.info.dropped = T.dropped;
        T.info.stats = &st;
        ao_attach_claim_finish(T.info.dir, &T.info.claim, ao_attach_info_write, &T.info);
        T.info.stats = NULL;
    }
    ao_jsonl_close(T.w);
    T.w = NULL;
    /* the names outlive nothing now; the tables stay until exit */
}
