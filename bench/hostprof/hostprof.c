/* A sampling profiler of one thread's host time, for the machines that have no
 * perf, gdb or nsys (the lent GPU machines). Preloaded:
 *
 *     HOSTPROF_OUT=/tmp/hp LD_PRELOAD=build-device/bench/libhostprof.so aorta train ...
 *     bench/hostprof/report.py /tmp/hp.<pid> build-device/aorta
 *
 * Every HOSTPROF_US microseconds of wall time (default 100) the main thread of
 * each process gets SIGPROF and records its stack (backtrace(3), which unwinds
 * through libraries without frame pointers by their .eh_frame). Wall time, not
 * CPU time: a thread blocked in the driver is what a host-bound step is made
 * of. At exit the samples and /proc/self/maps go to HOSTPROF_OUT.<pid>, and
 * report.py attributes them to functions of the executable and to the
 * libraries (libcuda, libcublasLt, libnccl, ...) they call.
 *
 * Only the main thread is sampled (the one that issues work in aorta); the
 * timer is per process, so children started by exec are sampled too and forks
 * without exec are not. A diagnostic tool: backtrace is not async-signal-safe
 * by the letter (its first call loads libgcc_s, made here before the timer
 * starts), and system calls the signal interrupts are restarted (SA_RESTART)
 * where the kernel can. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <execinfo.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

enum { MAX_FRAMES = 48, MAX_SAMPLES = 1 << 18 };

struct sample {
    uintptr_t pc;
    int n;
    void *frames[MAX_FRAMES];
};

static struct sample *samples;
static volatile long nsamples;
static volatile sig_atomic_t in_sample; /* on_sigprof is unwinding */
static long dropped;
static timer_t timer;
static int running;
static char out_path[4096];

static void on_sigprof(int sig, siginfo_t *si, void *uc_)
{
    (void)sig;
    (void)si;
    long i = nsamples;
    if (i >= MAX_SAMPLES) {
        dropped++;
        return;
    }
    struct sample *s = &samples[i];
    s->pc = 0;
#if defined(__x86_64__)
    const ucontext_t *uc = uc_;
    s->pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#else
    (void)uc_;
#endif
    in_sample = 1;
    s->n = backtrace(s->frames, MAX_FRAMES);
    in_sample = 0;
    nsamples = i + 1;
}

/* A crash says where it happened, and whether inside the sampler's own
 * unwinding (backtrace is not async-signal-safe), then takes its default
 * course (a core, the exit status). */
static void on_segv(int sig, siginfo_t *info, void *uc_)
{
    char line[160];
    uintptr_t pc = 0;
#if defined(__x86_64__)
    pc = (uintptr_t)((const ucontext_t *)uc_)->uc_mcontext.gregs[REG_RIP];
#else
    (void)uc_;
#endif
    int n = snprintf(line, sizeof line, "hostprof: signal %d at address %p, pc %p, %s\n", sig,
                     info->si_addr, (void *)pc,
                     in_sample ? "inside the sampler's backtrace" : "outside the sampler");
    if (n > 0) (void)!write(2, line, (size_t)n);
    void *frames[MAX_FRAMES];
    int depth = backtrace(frames, MAX_FRAMES);
    backtrace_symbols_fd(frames, depth, 2);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void copy_maps(FILE *out)
{
    FILE *m = fopen("/proc/self/maps", "r");
    if (!m) return;
    char line[4096];
    while (fgets(line, sizeof line, m)) fprintf(out, "M %s", line);
    fclose(m);
}

__attribute__((constructor)) static void hostprof_start(void)
{
    const char *out = getenv("HOSTPROF_OUT");
    if (!out || !*out) return;
    snprintf(out_path, sizeof out_path, "%s.%ld", out, (long)getpid());
    long us = getenv("HOSTPROF_US") ? strtol(getenv("HOSTPROF_US"), NULL, 10) : 100;
    if (us < 10) us = 10;
    samples = mmap(NULL, sizeof(struct sample) * MAX_SAMPLES, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (samples == MAP_FAILED) {
        samples = NULL;
        return;
    }
    void *warm[4];
    backtrace(warm, 4); /* loads libgcc_s now, not inside the handler */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigprof;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGPROF, &sa, NULL) != 0) return;
    struct sigaction segv;
    memset(&segv, 0, sizeof segv);
    segv.sa_sigaction = on_segv;
    segv.sa_flags = SA_SIGINFO | SA_RESETHAND;
    sigemptyset(&segv.sa_mask);
    sigaction(SIGSEGV, &segv, NULL);
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGPROF;
    sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    if (timer_create(CLOCK_MONOTONIC, &sev, &timer) != 0) return;
    struct itimerspec its;
    its.it_interval.tv_sec = us / 1000000;
    its.it_interval.tv_nsec = (us % 1000000) * 1000;
    its.it_value = its.it_interval;
    if (timer_settime(timer, 0, &its, NULL) != 0) return;
    running = 1;
}

__attribute__((destructor)) static void hostprof_stop(void)
{
    if (!running) return;
    running = 0;
    struct itimerspec off;
    memset(&off, 0, sizeof off);
    timer_settime(timer, 0, &off, NULL);
    timer_delete(timer);
    FILE *f = fopen(out_path, "w");
    if (!f) return;
    fprintf(f, "H pid=%ld samples=%ld dropped=%ld interval_us=%s\n", (long)getpid(), nsamples,
            dropped, getenv("HOSTPROF_US") ? getenv("HOSTPROF_US") : "100");
    copy_maps(f);
    for (long i = 0; i < nsamples; i++) {
        fprintf(f, "S %lx", (unsigned long)samples[i].pc);
        for (int j = 0; j < samples[i].n; j++)
            fprintf(f, " %lx", (unsigned long)(uintptr_t)samples[i].frames[j]);
        fputc('\n', f);
    }
    fclose(f);
}
