/* The collective watchdog; see watchdog.h.
 *
 * One thread and one list per process: a hang must be caught whichever
 * communicator it is on, and abort all of them, so the list of watched
 * communicators is the one piece of global state here (guarded by wd.mu).
 *
 * Each communicator keeps a ring of pending ops, each with a completion event
 * recorded after it on the comm's stream (right after it, or deferred past the
 * caller's own end event: ao_comm_defer_mark); the newest `unmarked` ops have
 * no event recorded yet and are pending whatever a query of their event
 * says. Events belong to ring slots and are reused once their op has retired;
 * the ring (and its event pool) only grows when more ops are in flight than
 * ever before. An op's clock starts when it is enqueued or, if later, when the
 * op before it was seen complete (by the thread's poll, up to
 * AO_WATCH_POLL_MS late), so ops queued behind a long one are not blamed for
 * its time. Ops are numbered on their communicator in enqueue order (from
 * 1), the number the backend's `stalled` uses to tell which ranks have not
 * reached the op. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm/watchdog.h"
#include "core/error.h"

struct pending_op {
    ao_event *done;
    ao_coll op;
    size_t bytes;
    uint64_t seq;
    int64_t step;
    int64_t enqueued_ns;
};

struct ao_watch {
    ao_comm *comm;
    struct pending_op *ring; /* every slot owns an event, pending or not */
    size_t cap, head, count;
    size_t unmarked;       /* the newest `unmarked` ops wait for ao_watch_mark */
    uint64_t issued;       /* ops registered so far: the next one's number - 1 */
    int64_t head_since_ns; /* when the current oldest op became the oldest */
    struct ao_watch *next;
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t wake;
    struct ao_watch *list;
    int running;
    unsigned epoch; /* bumped to stop the running thread */
    pthread_t thread;
} wd = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static struct ao_comm_base *base_of(ao_comm *c)
{
    return (struct ao_comm_base *)(void *)c;
}

static void retire_completed(struct ao_watch *w)
{
    while (w->count > w->unmarked && ao_event_query(w->ring[w->head].done)) {
        w->head = (w->head + 1) % w->cap;
        w->count--;
        w->head_since_ns = now_ns();
    }
}

static void grow(struct ao_watch *w)
{
    size_t cap = w->cap ? 2 * w->cap : 16;
    struct pending_op *ring = ao_calloc(cap, sizeof *ring);
    for (size_t i = 0; i < w->cap; i++) ring[i] = w->ring[(w->head + i) % w->cap];
    for (size_t i = w->cap; i < cap; i++) ring[i].done = ao_event_create(base_of(w->comm)->dev);
    free(w->ring);
    w->ring = ring;
    w->cap = cap;
    w->head = 0;
}

static _Atomic int64_t busy_since;
static _Atomic size_t pending_ops; /* at the thread's last poll */

int64_t ao_watch_busy_since(void)
{
    return atomic_load(&busy_since);
}

size_t ao_watch_pending(void)
{
    return atomic_load(&pending_ops);
}

static void *exit_later(void *arg)
{
    (void)arg;
    struct timespec ts = {AO_WATCH_ABORT_GRACE_S, 0};
    while (nanosleep(&ts, &ts) != 0) {
    }
    _exit(AO_EXIT_FAIL);
}

_Noreturn void ao_watch_die(const char *who, const char *msg, const char *hint, int locked,
                            ao_comm *first)
{
    static atomic_flag dying = ATOMIC_FLAG_INIT;
    if (atomic_flag_test_and_set(&dying)) /* another thread is ending the rank */
        for (;;) pause();
    ao_error(who, "%s", msg);
    if (hint) ao_hint("%s", hint);
    /* Nothing below, a file write included, can keep the process alive. */
    pthread_t t;
    if (pthread_create(&t, NULL, exit_later, NULL) == 0) pthread_detach(t);
    /* The run's end, recorded by its driver (train: run.json) before _exit. */
    ao_last_words(AO_END_TIMED_OUT, msg);
    if (!locked) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until); /* pthread_mutex_timedlock's clock */
        until.tv_sec += 2;
        locked = pthread_mutex_timedlock(&wd.mu, &until) == 0;
    }
    if (first) base_of(first)->ops->abort(first);
    if (locked)
        for (struct ao_watch *o = wd.list; o; o = o->next)
            if (o->comm != first) base_of(o->comm)->ops->abort(o->comm);
    _exit(AO_EXIT_FAIL);
}

/* Name what hung and end the rank. Called with wd.mu held. */
_Noreturn static void fire(struct ao_watch *w, const char *why)
{
    struct ao_comm_base *b = base_of(w->comm);
    char what[32];
    snprintf(what, sizeof what, "rank %d", b->rank);
    /* Advice for the backend in use: NCCL's debug log means nothing to MPI. */
    const char *hint = "a rank that is slow on purpose needs a larger distributed.timeout_s";
    if (strcmp(b->ops->name, "nccl") == 0)
        hint = "set NCCL_DEBUG=INFO to see where the collective stalls; a rank that is slow on "
               "purpose needs a larger distributed.timeout_s";
    else if (strcmp(b->ops->name, "mpi") == 0)
        hint = "an MPI collective waits for every rank: look for a rank that stopped, hangs or "
               "runs another step (its [rank K] lines); a rank that is slow on purpose needs a "
               "larger distributed.timeout_s";
    ao_watch_die(what, why, hint, 1, w->comm);
}

void ao_watch_name_op(ao_coll op, uint64_t seq, int64_t step, size_t bytes, ao_stream *s, char *buf,
                      size_t n)
{
    char num[32] = "", at[32] = "";
    if (seq) snprintf(num, sizeof num, " #%llu", (unsigned long long)seq);
    if (step >= 0) snprintf(at, sizeof at, " (step %lld)", (long long)step);
    snprintf(buf, n, "%s%s%s of %zu bytes on stream \"%s\"", ao_coll_name(op), num, at, bytes,
             ao_stream_name(s));
}

static void name_op(const struct ao_watch *w, const struct pending_op *p, char *buf, size_t n)
{
    ao_watch_name_op(p->op, p->seq, p->step, p->bytes, base_of(w->comm)->stream, buf, n);
}

/* "; rank 1 has not reached it; ..." where the backend can tell (else "").
 * When this rank has not started the op itself, its stream waits for other
 * work: an op of another communicator that this rank is in is what stalls,
 * and that op's laggards are the ones named. Called with wd.mu held. */
static void stalled_ranks(const struct ao_watch *w, const struct pending_op *p, char *buf, size_t n)
{
    const struct ao_comm_ops *ops = base_of(w->comm)->ops;
    int self = 1;
    buf[0] = '\0';
    if (!ops->stalled || ops->stalled(w->comm, p->seq, &self, buf + 2, n - 2) != 0) return;
    memcpy(buf, "; ", 2);
    if (self) return;
    for (struct ao_watch *o = wd.list; o; o = o->next) {
        if (o == w || !base_of(o->comm)->ops->stalled) continue;
        retire_completed(o); /* its oldest op may be done but not yet polled */
        if (o->count == 0) continue;
        const struct pending_op *q = &o->ring[o->head];
        char what[192], who[512];
        int in_it = 0;
        if (base_of(o->comm)->ops->stalled(o->comm, q->seq, &in_it, who, sizeof who) != 0 || !in_it)
            continue;
        name_op(o, q, what, sizeof what);
        snprintf(buf, n, "; this rank has not started it: it waits for %s, where %s", what, who);
        return;
    }
}

static void check_one(struct ao_watch *w, int64_t now)
{
    struct ao_comm_base *b = base_of(w->comm);
    char msg[1024];
    if (b->ops->check) {
        char err[384] = "";
        if (b->ops->check(w->comm, err, sizeof err) != 0) {
            snprintf(msg, sizeof msg, "communicator on stream \"%s\" failed: %s",
                     ao_stream_name(b->stream), err);
            fire(w, msg);
        }
    }
    retire_completed(w);
    if (w->count == 0) return;
    const struct pending_op *p = &w->ring[w->head];
    int64_t start = p->enqueued_ns > w->head_since_ns ? p->enqueued_ns : w->head_since_ns;
    if ((double)(now - start) / 1e9 > b->timeout_s) {
        char what[192], who[768];
        name_op(w, p, what, sizeof what);
        stalled_ranks(w, p, who, sizeof who);
        snprintf(msg, sizeof msg, "%s did not complete in %g s%s", what, b->timeout_s, who);
        fire(w, msg);
    }
}

static void *watchdog_main(void *arg)
{
    unsigned epoch = (unsigned)(uintptr_t)arg;
    pthread_mutex_lock(&wd.mu);
    while (wd.epoch == epoch) {
        int64_t now = now_ns();
        atomic_store(&busy_since, now);
        size_t pending = 0;
        for (struct ao_watch *w = wd.list; w; w = w->next) {
            check_one(w, now);
            pending += w->count;
        }
        atomic_store(&busy_since, 0);
        atomic_store(&pending_ops, pending);
        ao_watch_poll_wait(&wd.wake, &wd.mu);
    }
    pthread_mutex_unlock(&wd.mu);
    return NULL;
}

/* The threads' timed waits are on the monotonic clock, like every time here. */
void ao_watch_cond_init(pthread_cond_t *c)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(c, &attr);
    pthread_condattr_destroy(&attr);
}

void ao_watch_poll_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += AO_WATCH_POLL_MS * 1000000L;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(c, m, &until);
}

static void init_wake(void)
{
    ao_watch_cond_init(&wd.wake);
}

static void start_thread_locked(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_wake);
    int rc = pthread_create(&wd.thread, NULL, watchdog_main, (void *)(uintptr_t)wd.epoch);
    if (rc != 0)
        ao_fatal(AO_EXIT_FAIL, "collective watchdog", "cannot start its thread: %s", strerror(rc));
    wd.running = 1;
}

struct ao_watch *ao_watch_add(ao_comm *c)
{
    struct ao_watch *w = ao_calloc(1, sizeof *w);
    w->comm = c;
    pthread_mutex_lock(&wd.mu);
    grow(w);
    w->next = wd.list;
    wd.list = w;
    if (!wd.running) start_thread_locked();
    pthread_mutex_unlock(&wd.mu);
    return w;
}

static void mark_locked(struct ao_watch *w)
{
    for (size_t i = w->count - w->unmarked; i < w->count; i++)
        ao_event_record(w->ring[(w->head + i) % w->cap].done, base_of(w->comm)->stream);
    w->unmarked = 0;
}

void ao_watch_mark(struct ao_watch *w)
{
    /* unmarked is written by the issuing thread only: read it unlocked */
    if (!w->unmarked) return;
    pthread_mutex_lock(&wd.mu);
    mark_locked(w);
    pthread_mutex_unlock(&wd.mu);
}

void ao_watch_op(struct ao_watch *w, ao_coll op, size_t bytes, int mark)
{
    pthread_mutex_lock(&wd.mu);
    /* Retired by the thread only: a query costs the thread that issues the
     * step ~1.3 us (H200, bench/api_cost), a host-bound step's time. The
     * ring holds what one poll interval enqueues. */
    if (w->count == w->cap) grow(w);
    struct pending_op *p = &w->ring[(w->head + w->count) % w->cap];
    p->op = op;
    p->bytes = bytes;
    p->seq = ++w->issued;
    p->step = ao_comm_step();
    p->enqueued_ns = now_ns();
    if (w->count == 0) w->head_since_ns = p->enqueued_ns;
    w->count++;
    w->unmarked++;
    if (mark) mark_locked(w);
    pthread_mutex_unlock(&wd.mu);
}

void ao_watch_set_timeout(double timeout_s)
{
    pthread_mutex_lock(&wd.mu);
    for (struct ao_watch *w = wd.list; w; w = w->next) base_of(w->comm)->timeout_s = timeout_s;
    pthread_mutex_unlock(&wd.mu);
}

uint64_t ao_watch_next_seq(const struct ao_watch *w)
{
    return w->issued + 1;
}

void ao_watch_remove(struct ao_watch *w)
{
    int join = 0;
    pthread_t thread;
    pthread_mutex_lock(&wd.mu);
    for (struct ao_watch **p = &wd.list; *p; p = &(*p)->next) {
        if (*p == w) {
            *p = w->next;
            break;
        }
    }
    if (!wd.list && wd.running) {
        atomic_store(&pending_ops, 0);
        wd.epoch++;
        wd.running = 0;
        thread = wd.thread;
        join = 1;
        pthread_cond_broadcast(&wd.wake);
    }
    pthread_mutex_unlock(&wd.mu);
    if (join) pthread_join(thread, NULL);

    for (size_t i = 0; i < w->cap; i++) ao_event_destroy(w->ring[i].done);
    free(w->ring);
    free(w);
}
