/* Watched host waits; see wait.h.
 *
 * One registry and one monitor thread per process: a wait of any thread must
 * be caught, and the monitor must keep running while the device or a library
 * hangs, so it makes no device call and takes no lock that a device call can
 * hold (the collective watchdog's lock is taken only with a time limit, when
 * the rank is already failing). The registry is the one piece of global state
 * here (guarded by reg.mu), as the collective watchdog's list is. */
#include "comm/wait.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm/watchdog.h"
#include "core/error.h"

#define NSLOTS 64

struct slot {
    int used;
    int deferred;     /* left to the timeouts of collectives in flight, if any */
    int parent;       /* the wait around it on the same thread, -1 */
    int64_t since_ns; /* its begin, or the end of the last wait inside it */
    const char *what, *hint;
    ao_stream *stream;
    int64_t step;
    int coll; /* an ao_coll for a collective's enqueue call, else -1 */
    uint64_t seq;
    size_t bytes;
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t wake;
    struct slot slots[NSLOTS];
    int rank;
    double timeout_s;
    int running, stop, full_warned;
    pthread_t thread;
} reg = {.mu = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local int innermost = -1; /* this thread's innermost open wait */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static const char *const generic_hint =
    "the rank waited for something that did not come: look at the other ranks' [rank K] lines "
    "for one that failed or stopped; a wait that is slow on purpose needs a larger "
    "distributed.timeout_s";

static const char *const enqueue_hint =
    "the host never returned from the library's enqueue call: a first call on a communicator "
    "sets up its connections with the other ranks (NCCL connects lazily) and can wait for the "
    "device; set NCCL_DEBUG=INFO to see where it stops";

/* The innermost wait open inside slot i: what its thread is blocked in. */
static int innermost_in(int i)
{
    for (int found = 1; found;) {
        found = 0;
        for (int j = 0; j < NSLOTS; j++)
            if (reg.slots[j].used && reg.slots[j].parent == i) {
                i = j;
                found = 1;
                break;
            }
    }
    return i;
}

/* Called with reg.mu held; does not return. */
_Noreturn static void stalled(int i)
{
    const struct slot *w = &reg.slots[innermost_in(i)];
    char what[256], msg[512], who[32];
    if (w->coll >= 0) {
        char op[192];
        ao_watch_name_op((ao_coll)w->coll, w->seq, w->step, w->bytes, w->stream, op, sizeof op);
        snprintf(what, sizeof what, "the host has been inside the enqueue call of %s", op);
    } else {
        char step[48] = " (at start)";
        if (w->step >= 0) snprintf(step, sizeof step, " (step %lld)", (long long)w->step);
        char stream[64] = "";
        if (w->stream)
            snprintf(stream, sizeof stream, " on stream \"%s\"", ao_stream_name(w->stream));
        snprintf(what, sizeof what, "%s%s%s", w->what, step, stream);
    }
    snprintf(msg, sizeof msg, "%s: no progress in %g s", what, reg.timeout_s);
    snprintf(who, sizeof who, "rank %d", reg.rank);
    const char *hint = w->hint ? w->hint : w->coll >= 0 ? enqueue_hint : generic_hint;
    pthread_mutex_unlock(&reg.mu);
    ao_watch_die(who, msg, hint, 0, NULL);
}

static void check(int64_t now)
{
    const int64_t limit = (int64_t)(reg.timeout_s * 1e9);
    /* A device that does not get there because a collective never completes,
     * or an enqueue call that waits for earlier collectives (NCCL's work FIFO
     * and proxy-op pool are bounded), is that collective's timeout to name
     * (comm/watchdog.c), which is sure to come: left to it. */
    const int collectives = ao_watch_pending() > 0;
    for (int i = 0; i < NSLOTS; i++) {
        const struct slot *w = &reg.slots[i];
        if (!w->used || now - w->since_ns <= limit) continue;
        if (!(collectives && reg.slots[innermost_in(i)].deferred)) stalled(i);
    }
    /* The collective watchdog's device queries: a driver that does not
     * answer stalls them, and then no collective's timeout could fire. */
    int64_t busy = ao_watch_busy_since();
    if (busy && now - busy > limit) {
        char who[32], msg[256];
        snprintf(who, sizeof who, "rank %d", reg.rank);
        snprintf(msg, sizeof msg,
                 "the collective watchdog's query of the device has not returned in %g s: the "
                 "device or its driver does not answer",
                 reg.timeout_s);
        pthread_mutex_unlock(&reg.mu);
        ao_watch_die(who, msg, "look for a GPU error in dmesg or nvidia-smi", 0, NULL);
    }
}

static void *monitor_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&reg.mu);
    while (!reg.stop) {
        if (reg.timeout_s > 0) check(now_ns());
        ao_watch_poll_wait(&reg.wake, &reg.mu);
    }
    pthread_mutex_unlock(&reg.mu);
    return NULL;
}

static void init_wake(void)
{
    ao_watch_cond_init(&reg.wake);
}

void ao_wait_configure(int rank, double timeout_s)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_wake);
    pthread_mutex_lock(&reg.mu);
    reg.rank = rank;
    reg.timeout_s = timeout_s > 0 ? timeout_s : 0;
    if (!reg.running && reg.timeout_s > 0) {
        reg.stop = 0;
        int rc = pthread_create(&reg.thread, NULL, monitor_main, NULL);
        if (rc != 0)
            ao_fatal(AO_EXIT_FAIL, "watchdog", "cannot start its thread: %s", strerror(rc));
        reg.running = 1;
    }
    pthread_mutex_unlock(&reg.mu);
}

void ao_wait_shutdown(void)
{
    pthread_mutex_lock(&reg.mu);
    int join = reg.running;
    pthread_t thread = reg.thread;
    reg.running = 0;
    reg.stop = 1;
    reg.timeout_s = 0;
    if (join) pthread_cond_broadcast(&reg.wake);
    pthread_mutex_unlock(&reg.mu);
    if (join) pthread_join(thread, NULL);
}

static int begin(const struct slot *w)
{
    pthread_mutex_lock(&reg.mu);
    int token = -1;
    if (reg.running && reg.timeout_s > 0) {
        for (int i = 0; i < NSLOTS && token < 0; i++)
            if (!reg.slots[i].used) token = i;
        if (token >= 0) {
            reg.slots[token] = *w;
            reg.slots[token].used = 1;
            reg.slots[token].parent = innermost;
            if (w->step == AO_WAIT_STEP_NOW) reg.slots[token].step = ao_comm_step();
            reg.slots[token].since_ns = now_ns();
            innermost = token;
        } else if (!reg.full_warned) {
            reg.full_warned = 1;
            ao_warn("more than %d host waits at once: the newest are not watched", NSLOTS);
        }
    }
    pthread_mutex_unlock(&reg.mu);
    return token;
}

int ao_wait_begin(const char *what, ao_stream *s, const char *hint)
{
    return begin(&(struct slot){
        .what = what, .hint = hint, .stream = s, .coll = -1, .step = AO_WAIT_STEP_NOW});
}

int ao_wait_begin_device(const char *what, ao_stream *s, const char *hint, int64_t step)
{
    return begin(&(struct slot){
        .what = what, .hint = hint, .stream = s, .coll = -1, .step = step, .deferred = 1});
}

int ao_wait_begin_coll(ao_coll op, uint64_t seq, size_t bytes, ao_stream *s)
{
    return begin(&(struct slot){.stream = s,
                                .coll = (int)op,
                                .seq = seq,
                                .bytes = bytes,
                                .step = AO_WAIT_STEP_NOW,
                                .deferred = 1});
}

void ao_wait_end(int token)
{
    if (token < 0 || token >= NSLOTS) return;
    pthread_mutex_lock(&reg.mu);
    struct slot *w = &reg.slots[token];
    innermost = w->parent;
    /* Something inside the wait around it finished: that wait progressed. */
    if (w->parent >= 0 && reg.slots[w->parent].used) reg.slots[w->parent].since_ns = now_ns();
    w->used = 0;
    pthread_mutex_unlock(&reg.mu);
}

void ao_wait_stream_sync(ao_stream *s, const char *what)
{
    int w = ao_wait_begin_device(what, s,
                                 "the stream's work never finished: a kernel on it, or an event it "
                                 "waits for, does not complete",
                                 AO_WAIT_STEP_NOW);
    ao_stream_sync(s);
    ao_wait_end(w);
}

void ao_wait_event_sync(ao_event *e, ao_stream *s, const char *what, int64_t step)
{
    int w = ao_wait_begin_device(what, s,
                                 "the work before the event on this stream never finished: a "
                                 "kernel on it, or an event it waits for, does not complete",
                                 step);
    ao_event_sync(e);
    ao_wait_end(w);
}

/* ---- planted hangs ------------------------------------------------------------ */

/* AORTA_TEST_HANG, read once: it is asked on every collective's enqueue. */
static struct {
    char where[16];
    long rank;
    long long step; /* -1: any */
} planted = {.rank = -1};

static void read_planted(void)
{
    const char *v = getenv("AORTA_TEST_HANG");
    if (!v || !*v) return;
    size_t n = strcspn(v, ":");
    if (n == 0 || n >= sizeof planted.where || v[n] != ':') return;
    char *end;
    long r = strtol(v + n + 1, &end, 10);
    memcpy(planted.where, v, n);
    planted.where[n] = '\0';
    planted.step = *end == ':' ? strtoll(end + 1, NULL, 10) : -1;
    planted.rank = r;
}

int ao_test_hang_at(const char *where, int rank, int64_t step)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, read_planted);
    if (planted.rank != rank || strcmp(planted.where, where) != 0) return 0;
    if (planted.step >= 0 && planted.step != step) return 0;
    ao_warn("AORTA_TEST_HANG: rank %d blocks for good at \"%s\" (a planted fault for tests)", rank,
            where);
    ao_test_timeout_apply(); /* the planted rank's watchdog ends it soon */
    return 1;
}

void ao_test_timeout_apply(void)
{
    const char *v = getenv("AORTA_TEST_TIMEOUT_S");
    double t = v && *v ? strtod(v, NULL) : 0;
    if (!(t > 0)) return;
    pthread_mutex_lock(&reg.mu);
    int rank = reg.rank, running = reg.running;
    pthread_mutex_unlock(&reg.mu);
    if (running) ao_wait_configure(rank, t);
    ao_watch_set_timeout(t);
}

_Noreturn void ao_test_block(const char *where)
{
    printf("blocked at %s (AORTA_TEST_HANG)\n", where);
    fflush(stdout);
    for (;;) pause();
}

void ao_test_block_fn(void *arg)
{
    ao_test_block(*(const char *const *)arg);
}
