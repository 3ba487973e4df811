/* synth_run: write a synthetic run directory (tests/unit/synth_run.h) for the
 * report's end-to-end test and benchmark.
 *   synth_run DIR [key=value ...]
 * keys: ranks, steps, baseline, compute_ms, comm_ms, hidden, jitter, seed,
 * profile_every, telemetry, kernels, slow_rank, slow_factor, strategy, nccl_algo. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/synth_run.h"

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: synth_run DIR [key=value ...]\n");
        return 2;
    }
    synth_opts o = synth_defaults();
    for (int i = 2; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) {
            fprintf(stderr, "synth_run: '%s' is not key=value\n", argv[i]);
            return 2;
        }
        *eq = '\0';
        const char *k = argv[i], *v = eq + 1;
        if (!strcmp(k, "ranks"))
            o.ranks = atoi(v);
        else if (!strcmp(k, "steps"))
            o.steps = atoi(v);
        else if (!strcmp(k, "baseline"))
            o.baseline_steps = atoi(v);
        else if (!strcmp(k, "compute_ms"))
            o.compute_ms = atof(v);
        else if (!strcmp(k, "comm_ms"))
            o.comm_ms = atof(v);
        else if (!strcmp(k, "hidden"))
            o.hidden = atof(v);
        else if (!strcmp(k, "jitter"))
            o.jitter = atof(v);
        else if (!strcmp(k, "seed"))
            o.seed = strtoull(v, NULL, 10);
        else if (!strcmp(k, "profile_every"))
            o.profile_every = atoi(v);
        else if (!strcmp(k, "telemetry"))
            o.telemetry = atoi(v);
        else if (!strcmp(k, "kernels"))
            o.kernels = atoi(v);
        else if (!strcmp(k, "slow_rank"))
            o.slow_rank = atoi(v);
        else if (!strcmp(k, "slow_factor"))
            o.slow_factor = atof(v);
        else if (!strcmp(k, "strategy"))
            o.strategy = v;
        else if (!strcmp(k, "nccl_algo"))
            o.nccl_algo = v;
        else {
            fprintf(stderr, "synth_run: unknown key '%s'\n", k);
            return 2;
        }
    }
    if (o.ranks < 1 || o.steps < 0) {
        fprintf(stderr, "synth_run: ranks must be >= 1 and steps >= 0\n");
        return 2;
    }
    if (synth_run_write(argv[1], &o) != 0) {
        fprintf(stderr, "synth_run: cannot write %s\n", argv[1]);
        return 1;
    }
    return 0;
}
