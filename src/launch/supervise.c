/* Start child processes and watch them: forward their output, reap them, stop
 * the others after the first failure, pass Ctrl-C on.
 *
 * Signals reach the loop through a signalfd (SIGINT, SIGTERM and SIGCHLD are
 * blocked in the parent while it supervises), so there is no handler and no
 * global state. The parent should be single-threaded here: another thread
 * with these signals unblocked would take them instead. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "launch/internal.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void ao_describe_status(int status, char *buf, size_t n)
{
    if (WIFEXITED(status))
        snprintf(buf, n, "exited with code %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, n, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(buf, n, "ended with wait status 0x%x", (unsigned)status);
}

/* A rank that stopped cleanly on Ctrl-C (AO_EXIT_INTERRUPTED) has not failed. */
static int interrupted(int status)
{
    return WIFEXITED(status) && WEXITSTATUS(status) == AO_EXIT_INTERRUPTED;
}

static int failed(int status)
{
    return !(WIFEXITED(status) && WEXITSTATUS(status) == 0) && !interrupted(status);
}

int ao_supervisor_begin(ao_supervisor *s, ao_proc *procs, int nprocs)
{
    s->procs = procs;
    s->nprocs = nprocs;
    s->parent = getpid();
    for (int i = 0; i < nprocs; i++) {
        procs[i].pid = 0;
        procs[i].fd[0] = procs[i].fd[1] = -1;
        procs[i].running = 0;
        procs[i].status = 0;
    }
    /* Output is flushed now so it comes before the ranks' lines. */
    fflush(NULL);

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &set, &s->old_mask) != 0) {
        ao_error("launch", "cannot block signals: %s", strerror(errno));
        return -1;
    }
    s->sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (s->sigfd < 0) {
        ao_error("launch", "signalfd: %s", strerror(errno));
        sigprocmask(SIG_SETMASK, &s->old_mask, NULL);
        return -1;
    }
    /* A closed terminal must not kill the supervisor (writes then fail);
     * SIGCHLD must not be ignored or the children could not be waited for. */
    struct sigaction ign = {.sa_handler = SIG_IGN}, dfl = {.sa_handler = SIG_DFL};
    sigaction(SIGPIPE, &ign, &s->old_pipe);
    sigaction(SIGCHLD, &dfl, &s->old_chld);
    return 0;
}

int ao_supervisor_start(ao_supervisor *s, int i, const char *path, char *const argv[],
                        char *const envp[])
{
    ao_proc *p = &s->procs[i];
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0) {
        ao_error("launch", "pipe: %s", strerror(errno));
        return -1;
    }
    if (pipe2(err, O_CLOEXEC) != 0) {
        ao_error("launch", "pipe: %s", strerror(errno));
        close(out[0]);
        close(out[1]);
        return -1;
    }
    /* Prepared before fork: after it the child only makes async-signal-safe
     * calls (the parent may have threads). */
    char exec_failed[512];
    int exec_failed_len = snprintf(exec_failed, sizeof exec_failed,
                                   "aorta: error: %s: cannot run %s: ", p->name, path);
    if (exec_failed_len >= (int)sizeof exec_failed) exec_failed_len = (int)sizeof exec_failed - 1;

    pid_t pid = fork();
    if (pid < 0) {
        ao_error("launch", "cannot start %s: fork: %s", p->name, strerror(errno));
        close(out[0]);
        close(out[1]);
        close(err[0]);
        close(err[1]);
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0); /* the terminal's Ctrl-C reaches the parent only */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != s->parent) _exit(AO_EXIT_FAIL); /* parent already gone */
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) dup2(devnull, STDIN_FILENO);
        dup2(out[1], STDOUT_FILENO);
        dup2(err[1], STDERR_FILENO);
        sigaction(SIGPIPE, &s->old_pipe, NULL);
        sigaction(SIGCHLD, &s->old_chld, NULL);
        sigprocmask(SIG_SETMASK, &s->old_mask, NULL);
        execve(path, argv, envp);
        int e = errno;
        write(STDERR_FILENO, exec_failed, (size_t)exec_failed_len);
        const char *why = strerror(e);
        write(STDERR_FILENO, why, strlen(why));
        write(STDERR_FILENO, "\n", 1);
        _exit(127);
    }
    setpgid(pid, pid); /* also here, so it holds before the parent signals it */
    close(out[1]);
    close(err[1]);
    p->pid = pid;
    p->fd[0] = out[0];
    p->fd[1] = err[0];
    p->running = 1;
    ao_debug("launch: started %s (pid %d)", p->name, (int)pid);
    return 0;
}

/* SIGKILL goes to the child's process group (whatever it started dies with
 * it); other signals to the child alone, since mpirun passes them on itself
 * and a rank that got one twice would stop at once. */
static void signal_running(ao_supervisor *s, int sig)
{
    for (int i = 0; i < s->nprocs; i++) {
        if (!s->procs[i].running) continue;
        if (sig == SIGKILL) kill(-s->procs[i].pid, SIGKILL);
        kill(s->procs[i].pid, sig);
    }
}

static int count_running(const ao_supervisor *s)
{
    int n = 0;
    for (int i = 0; i < s->nprocs; i++) n += s->procs[i].running;
    return n;
}

static void close_stream(ao_supervisor *s, int i, int stream)
{
    ao_proc *p = &s->procs[i];
    if (p->fd[stream] < 0) return;
    close(p->fd[stream]);
    p->fd[stream] = -1;
    s->output(s->ctx, i, stream, NULL, 0);
}

struct run_state {
    int first_failure; /* index of the first proc that failed on its own */
    int stopping;      /* we sent SIGTERM: later deaths are ours */
    int interrupts;    /* Ctrl-C seen */
    double kill_at;    /* SIGKILL the rest at this time (0: not armed) */
    double drain_until;
};

static void stop_all(ao_supervisor *s, struct run_state *st)
{
    if (st->stopping) return;
    st->stopping = 1;
    signal_running(s, SIGTERM);
    st->kill_at = now_s() + s->grace_s;
}

static void reap(ao_supervisor *s, struct run_state *st)
{
    for (int i = 0; i < s->nprocs; i++) {
        ao_proc *p = &s->procs[i];
        if (!p->running) continue;
        int status;
        pid_t r = waitpid(p->pid, &status, WNOHANG);
        if (r == 0 || (r < 0 && errno == EINTR)) continue;
        p->running = 0;
        p->status = r < 0 ? 0 : status;
        char how[128];
        ao_describe_status(p->status, how, sizeof how);
        ao_debug("launch: %s %s", p->name, how);
        if (failed(p->status) && !st->stopping && st->first_failure < 0) {
            st->first_failure = i;
            stop_all(s, st);
        }
    }
}

static void on_signal(ao_supervisor *s, struct run_state *st, int sig)
{
    if (sig == SIGCHLD) return; /* reaped after every wakeup */
    if (sig == SIGINT && st->interrupts++ == 0) {
        /* The ranks stop after their current iteration. */
        ao_warn("interrupted: asking the ranks to stop after this iteration "
                "(Ctrl-C again to terminate them)");
        signal_running(s, s->interrupt_signal);
        return;
    }
    if (sig == SIGINT && st->interrupts > 2) {
        signal_running(s, SIGKILL);
        return;
    }
    ao_warn("terminating the ranks (SIGKILL after %g s)", s->grace_s);
    stop_all(s, st);
}

int ao_supervisor_run(ao_supervisor *s)
{
    struct run_state st = {.first_failure = -1};
    struct pollfd *pfd = ao_calloc((size_t)(2 * s->nprocs + 1), sizeof *pfd);
    int *who = ao_calloc((size_t)(2 * s->nprocs + 1), sizeof *who);
    char *buf = ao_malloc(65536);

    for (;;) {
        reap(s, &st);
        int running = count_running(s);
        double t = now_s();
        if (running && st.kill_at > 0 && t >= st.kill_at) {
            signal_running(s, SIGKILL);
            st.kill_at = 0;
        }
        /* Once all have ended, read what is left in the pipes, but not
         * forever: a process a child left behind may hold them open. */
        if (!running && st.drain_until == 0) st.drain_until = t + 1.0;

        int n = 0;
        pfd[n++] = (struct pollfd){.fd = s->sigfd, .events = POLLIN};
        for (int i = 0; i < s->nprocs; i++)
            for (int k = 0; k < 2; k++)
                if (s->procs[i].fd[k] >= 0) {
                    who[n] = 2 * i + k;
                    pfd[n++] = (struct pollfd){.fd = s->procs[i].fd[k], .events = POLLIN};
                }
        if (!running && (n == 1 || t >= st.drain_until)) break;

        /* Wake at least every 200 ms to reap: a signal can still reach a
         * thread some library started before the mask was set, and then the
         * signalfd never sees the SIGCHLD. */
        int timeout = 200;
        double until = !running ? st.drain_until : st.kill_at;
        if (until > 0 && until - t < 0.2)
            timeout = until <= t ? 0 : (int)((until - t) * 1000.0) + 1;
        if (poll(pfd, (nfds_t)n, timeout) < 0) {
            if (errno == EINTR) continue;
            ao_error("launch", "poll: %s", strerror(errno));
            stop_all(s, &st);
            continue;
        }
        if (pfd[0].revents & POLLIN) {
            struct signalfd_siginfo si;
            while (read(s->sigfd, &si, sizeof si) == (ssize_t)sizeof si)
                on_signal(s, &st, (int)si.ssi_signo);
        }
        for (int j = 1; j < n; j++) {
            if (!pfd[j].revents) continue;
            int i = who[j] / 2, k = who[j] % 2;
            ssize_t r = read(pfd[j].fd, buf, 65536);
            if (r > 0)
                s->output(s->ctx, i, k, buf, (size_t)r);
            else if (r == 0 || (errno != EINTR && errno != EAGAIN))
                close_stream(s, i, k);
        }
    }
    for (int i = 0; i < s->nprocs; i++) {
        close_stream(s, i, 0);
        close_stream(s, i, 1);
    }
    s->interrupts = st.interrupts;
    s->failed = st.first_failure;
    free(pfd);
    free(who);
    free(buf);

    if (st.first_failure >= 0) {
        ao_proc *p = &s->procs[st.first_failure];
        char how[128], what[64];
        ao_describe_status(p->status, how, sizeof how);
        snprintf(what, sizeof what, "%s failed", p->name);
        ao_error(what, "%s", how);
        /* A usage error (bad config, say) keeps its meaning. */
        int usage = WIFEXITED(p->status) && WEXITSTATUS(p->status) == AO_EXIT_USAGE;
        return usage ? AO_EXIT_USAGE : AO_EXIT_FAIL;
    }
    for (int i = 0; i < s->nprocs; i++)
        if (failed(s->procs[i].status)) {
            char how[128];
            ao_describe_status(s->procs[i].status, how, sizeof how);
            ao_error("interrupted", "%s %s before it finished", s->procs[i].name, how);
            return AO_EXIT_FAIL;
        }
    for (int i = 0; i < s->nprocs; i++)
        if (interrupted(s->procs[i].status)) return AO_EXIT_INTERRUPTED;
    return AO_EXIT_OK;
}

void ao_supervisor_end(ao_supervisor *s)
{
    /* Only after a failed start can children still run here. */
    for (int i = 0; i < s->nprocs; i++) {
        ao_proc *p = &s->procs[i];
        if (p->running) {
            kill(-p->pid, SIGKILL);
            kill(p->pid, SIGKILL);
            while (waitpid(p->pid, &p->status, 0) < 0 && errno == EINTR) {
            }
            p->running = 0;
        }
        for (int k = 0; k < 2; k++)
            if (p->fd[k] >= 0) {
                close(p->fd[k]);
                p->fd[k] = -1;
            }
    }
    close(s->sigfd);
    sigaction(SIGPIPE, &s->old_pipe, NULL);
    sigaction(SIGCHLD, &s->old_chld, NULL);
    /* Signals that came while blocked (a Ctrl-C after the last rank ended)
     * were read from the signalfd or are dropped here, not delivered late. */
    struct timespec zero = {0, 0};
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGCHLD);
    while (sigtimedwait(&set, NULL, &zero) > 0) {
    }
    sigprocmask(SIG_SETMASK, &s->old_mask, NULL);
}
