/* The rank side of Ctrl-C: the first SIGINT/SIGTERM (or SIGUSR1, which
 * mpirun forwards where it would turn SIGINT into a kill) asks the rank to
 * stop after its current iteration; a second one ends it at once. */
#include <signal.h>

#include "launch/launch.h"

/* Process-wide by nature: a signal handler can only reach a global. */
static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig)
{
    if (stop_requested) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    stop_requested = 1;
}

int ao_launch_stop_requested(void)
{
    return stop_requested != 0;
}

void ao_launch_install_stop_handler(void)
{
    struct sigaction sa = {.sa_handler = on_stop_signal, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
}
