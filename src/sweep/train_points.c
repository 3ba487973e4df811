/* A train sweep's points as configurations (declared in sweep/plan.h): the
 * config and overrides each launch gives `aorta train`, so that the sweep
 * reads each run where it is written and --dry-run refuses a point that
 * train would refuse. */
#include <string.h>

#include "core/config.h"
#include "core/error.h"
#include "core/text.h"
#include "engine/engine.h"
#include "sweep/plan.h"
#include "sweep/strs.h"

/* What train's --override takes after it: KEY=VALUE words, as
 * cli_take_overrides reads them (a word starting with '-' is the next flag). */
static int is_assignment(const char *word)
{
    return word[0] != '-' && strchr(word, '=') != NULL;
}

char **ao_sweep_train_config(const ao_sweep_plan *p, int point, int *n, const char **config)
{
    const ao_sweep_spec *s = p->spec;
    char **ov = NULL;
    *n = 0;
    *config = s->config;
    /* The fixed args first: the point's axes come after them on the command
     * line, and a later override wins. */
    for (int i = 0; i < s->nargs; i++) {
        const char *a = s->args[i];
        if (strcmp(a, "--override") == 0) {
            while (i + 1 < s->nargs && is_assignment(s->args[i + 1]))
                push(&ov, n, ao_strdup(s->args[++i]));
        } else if (ao_starts_with(a, "--override=")) {
            push(&ov, n, ao_strdup(a + strlen("--override=")));
        } else if ((strcmp(a, "--config") == 0 || strcmp(a, "-c") == 0) && i + 1 < s->nargs) {
            *config = s->args[++i];
        } else if (ao_starts_with(a, "--config=")) {
            *config = a + strlen("--config=");
        }
    }
    for (int a = 0; a < s->naxes; a++)
        if (s->axes[a].key[0] != '-' && strcmp(s->axes[a].key, "nproc") != 0)
            push(&ov, n, ao_asprintf("%s=%s", s->axes[a].key, p->points[point].values[a]));
    return ov;
}

int ao_sweep_check_train_points(const ao_sweep_plan *p)
{
    if (p->spec->command != AO_SWEEP_TRAIN) return 0;
    int rc = 0;
    for (int i = 0; rc == 0 && i < p->npoints; i++) {
        int n, nproc = p->groups[p->points[i].group].nproc;
        const char *config;
        char **ov = ao_sweep_train_config(p, i, &n, &config);
        struct ao_config cfg;
        rc = ao_config_load(&cfg, config, ov, n);
        /* The rank count's own rules (a hybrid group divides it, ...), where
         * the point names it; else train's default count decides at launch. */
        if (rc == 0 && nproc > 0 && ao_engine_check_config(&cfg, nproc, nproc)) rc = AO_EXIT_USAGE;
        ao_config_free(&cfg);
        if (rc) {
            char what[512] = "";
            for (int a = 0; a < p->spec->naxes; a++)
                ao_appendf(what, sizeof what, "%s%s=%s", a ? " " : "", p->spec->axes[a].key,
                           p->points[i].values[a]);
            ao_hint("the sweep's point %d (%s) would fail so; nothing was run", i, what);
        }
        free_strs(ov, n);
    }
    return rc;
}
