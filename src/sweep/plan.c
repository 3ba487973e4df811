/* `aorta sweep`'s plan (declared in sweep/plan.h): the groups, launches and
 * points of a checked spec, each launch's argv, and the --dry-run listing.
 * Reading and checking the spec is in spec.c. */
#include "sweep/plan.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/text.h"
#include "core/units.h"
#include "sweep/strs.h"

/* ---- planning ---------------------------------------------------------------- */

static int env_name_index(const ao_sweep_plan *p, const char *name)
{
    for (int i = 0; i < p->nenv_names; i++)
        if (strcmp(p->env_names[i], name) == 0) return i;
    return -1;
}

static void add_group(ao_sweep_plan *p, const ao_sweep_spec *s, int nproc, int combo)
{
    int nzip = s->nzip ? s->nzip : 1;
    int ei = combo / nzip, zi = combo % nzip;
    p->groups = grow(p->groups, p->ngroups, sizeof *p->groups);
    ao_sweep_group *g = &p->groups[p->ngroups++];
    g->nproc = nproc;
    g->env_val = ao_calloc((size_t)p->nenv_names + 1, sizeof *g->env_val);
    /* Mixed radix, the last variable fastest. */
    for (int e = s->nenv - 1; e >= 0; e--) {
        g->env_val[env_name_index(p, s->env[e].key)] = s->env[e].values[ei % s->env[e].nvalues];
        ei /= s->env[e].nvalues;
    }
    if (s->nzip)
        for (int i = 0; i < s->zip[zi].n; i++)
            g->env_val[env_name_index(p, s->zip[zi].names[i])] = s->zip[zi].values[i];
    int n = 0;
    g->env = NULL;
    for (int i = 0; i < p->nenv_names; i++)
        if (g->env_val[i]) push(&g->env, &n, ao_asprintf("%s=%s", p->env_names[i], g->env_val[i]));
    if (!g->env) g->env = ao_calloc(1, sizeof *g->env);
}

static int skipped(const ao_sweep_plan *p, const ao_sweep_group *g, const char **values)
{
    const ao_sweep_spec *s = p->spec;
    for (int k = 0; k < s->nskips; k++) {
        int a = ao_sweep_axis_index(s, s->skips[k].key);
        const char *v = a >= 0 ? values[a] : g->env_val[env_name_index(p, s->skips[k].key)];
        if (v && strcmp(v, s->skips[k].value) == 0) return 1;
    }
    return 0;
}

static int is_merged_axis(const ao_sweep_spec *s, int a)
{
    if (s->command == AO_SWEEP_QUEUES) return strcmp(s->axes[a].key, "streams") == 0;
    return s->command == AO_SWEEP_COLL &&
           (strcmp(s->axes[a].key, "size") == 0 || strcmp(s->axes[a].key, "--coll") == 0);
}

static size_t size_of(const char *text)
{
    size_t b = 0;
    ao_parse_size("size", text, &b); /* checked by ao_sweep_spec_check */
    return b;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* The distinct sizes of a launch, ascending; their count. */
static int launch_sizes(const ao_sweep_plan *p, const ao_sweep_launch *l, int sa, size_t *out)
{
    for (int i = 0; i < l->npoints; i++) out[i] = size_of(p->points[l->points[i]].values[sa]);
    qsort(out, (size_t)l->npoints, sizeof *out, cmp_size);
    int n = 0;
    for (int i = 0; i < l->npoints; i++)
        if (n == 0 || out[n - 1] != out[i]) out[n++] = out[i];
    return n;
}

/* How coll's -b/-e sweep covers the sizes: a factor (> 1), a step (> 0), or
 * neither (returns 0: not one series). */
static int size_series(const size_t *sz, int n, long *factor, size_t *step)
{
    *factor = 2;
    *step = 0;
    if (n == 1) return 1;
    int geometric = sz[0] > 0 && sz[1] % sz[0] == 0 && sz[1] / sz[0] >= 2;
    for (int i = 1; geometric && i < n; i++) geometric = sz[i] == sz[i - 1] * (sz[1] / sz[0]);
    if (geometric) {
        *factor = (long)(sz[1] / sz[0]);
        return 1;
    }
    for (int i = 1; i < n; i++)
        if (sz[i] - sz[i - 1] != sz[1] - sz[0]) return 0;
    *factor = 0;
    *step = sz[1] - sz[0];
    return 1;
}

static ao_sweep_launch *new_launch(ao_sweep_plan *p, int group)
{
    p->launches = grow(p->launches, p->nlaunches, sizeof *p->launches);
    ao_sweep_launch *l = &p->launches[p->nlaunches++];
    *l = (ao_sweep_launch){.group = group};
    return l;
}

static void launch_add(ao_sweep_launch *l, int point)
{
    l->points = grow(l->points, l->npoints, sizeof *l->points);
    l->points[l->npoints++] = point;
}

/* Points of group g that differ only in merged axes share a launch: key[i]
 * numbers point i's values of the other axes (< nkeys), so each point finds
 * its launch in one look-up. A coll size set that is no single -b/-e series
 * is split into one launch per size. */
static void plan_launches(ao_sweep_plan *p, int g, int first, int last, const int *key, int nkeys)
{
    const ao_sweep_spec *s = p->spec;
    int start = p->nlaunches;
    int *slot = ao_calloc((size_t)nkeys, sizeof *slot); /* launch + 1, 0 = none yet */
    for (int i = first; i < last; i++) {
        if (!slot[key[i - first]]) {
            new_launch(p, g);
            slot[key[i - first]] = p->nlaunches;
        }
        launch_add(&p->launches[slot[key[i - first]] - 1], i);
    }
    free(slot);
    int sa = s->command == AO_SWEEP_COLL ? ao_sweep_axis_index(s, "size") : -1;
    if (sa < 0) return;
    int end = p->nlaunches;
    for (int li = start; li < end; li++) {
        size_t *sz = ao_calloc((size_t)p->launches[li].npoints, sizeof *sz);
        long factor;
        size_t step;
        int n = launch_sizes(p, &p->launches[li], sa, sz);
        if (!size_series(sz, n, &factor, &step)) {
            /* Move every size but the first to launches of their own. */
            ao_sweep_launch keep = p->launches[li];
            size_t first_size = size_of(p->points[keep.points[0]].values[sa]);
            p->launches[li].points = NULL;
            p->launches[li].npoints = 0;
            int *to = ao_calloc((size_t)n, sizeof *to); /* size index -> its launch */
            for (int k = 0; k < n; k++) {
                to[k] = li;
                if (sz[k] != first_size) {
                    new_launch(p, g);
                    to[k] = p->nlaunches - 1;
                }
            }
            for (int j = 0; j < keep.npoints; j++) {
                size_t b = size_of(p->points[keep.points[j]].values[sa]);
                const size_t *at = bsearch(&b, sz, (size_t)n, sizeof *sz, cmp_size);
                launch_add(&p->launches[to[at - sz]], keep.points[j]);
            }
            free(to);
            free(keep.points);
        }
        free(sz);
    }
}

int ao_sweep_plan_make(const ao_sweep_spec *s, ao_sweep_plan *p)
{
    memset(p, 0, sizeof *p);
    p->spec = s;
    for (int e = 0; e < s->nenv; e++) push(&p->env_names, &p->nenv_names, ao_strdup(s->env[e].key));
    for (int z = 0; z < s->nzip; z++)
        for (int i = 0; i < s->zip[z].n; i++)
            if (env_name_index(p, s->zip[z].names[i]) < 0)
                push(&p->env_names, &p->nenv_names, ao_strdup(s->zip[z].names[i]));

    /* Count before building anything: a product of long axes is refused at
     * once, not after the memory and time its plan would take. */
    long long total = s->nzip ? s->nzip : 1;
    long max = s->max_points > 0 ? s->max_points : AO_SWEEP_MAX_POINTS;
    for (int e = 0; e < s->nenv && total <= max; e++) total *= s->env[e].nvalues;
    for (int a = 0; a < s->naxes && total <= max; a++) total *= s->axes[a].nvalues;
    if (total > max) {
        ao_error(s->path,
                 "the sweep has more than %ld points (the product of its axes and "
                 "environments); the maximum is %ld",
                 max, max);
        ao_hint("fewer or shorter axes, --skip, or --max-points N to allow more");
        return AO_EXIT_USAGE;
    }
    int ncombos = s->nzip ? s->nzip : 1;
    for (int e = 0; e < s->nenv; e++) ncombos *= s->env[e].nvalues;
    int na = ao_sweep_axis_index(s, "nproc");
    int nnproc = na >= 0 ? s->axes[na].nvalues : 1;
    int ninner = 1, nkeys = 1;
    for (int a = 0; a < s->naxes; a++)
        if (a != na) ninner *= s->axes[a].nvalues;
    for (int a = 0; a < s->naxes; a++)
        if (a != na && !is_merged_axis(s, a)) nkeys *= s->axes[a].nvalues;
    int *key = ao_calloc((size_t)ninner, sizeof *key);

    for (int np = 0; np < nnproc; np++) {
        for (int c = 0; c < ncombos; c++) {
            int nproc = na >= 0 ? atoi(s->axes[na].values[np]) : 0;
            add_group(p, s, nproc, c);
            int g = p->ngroups - 1, first = p->npoints;
            for (int k = 0; k < ninner; k++) {
                const char **values = ao_calloc((size_t)s->naxes + 1, sizeof *values);
                int rest = k, kk = 0, radix = 1;
                for (int a = s->naxes - 1; a >= 0; a--) {
                    if (a == na) {
                        values[a] = s->axes[a].values[np];
                        continue;
                    }
                    int vi = rest % s->axes[a].nvalues;
                    values[a] = s->axes[a].values[vi];
                    rest /= s->axes[a].nvalues;
                    if (!is_merged_axis(s, a)) {
                        kk += vi * radix;
                        radix *= s->axes[a].nvalues;
                    }
                }
                if (skipped(p, &p->groups[g], values)) {
                    free(values);
                    continue;
                }
                key[p->npoints - first] = kk;
                p->points = grow(p->points, p->npoints, sizeof *p->points);
                p->points[p->npoints++] = (ao_sweep_point){.group = g, .values = values};
            }
            if (p->npoints == first) { /* every point skipped: no launch for the group */
                for (char **e = p->groups[g].env; e && *e; e++) free(*e);
                free(p->groups[g].env);
                free(p->groups[g].env_val);
                p->ngroups--;
                continue;
            }
            plan_launches(p, g, first, p->npoints, key, nkeys);
        }
    }
    free(key);
    for (int li = 0; li < p->nlaunches; li++)
        for (int j = 0; j < p->launches[li].npoints; j++)
            p->points[p->launches[li].points[j]].launch = li;
    if (p->npoints == 0) {
        ao_error("--skip", "every point of the sweep is skipped; nothing would run");
        return AO_EXIT_USAGE;
    }
    return 0;
}

void ao_sweep_plan_free(ao_sweep_plan *p)
{
    free_strs(p->env_names, p->nenv_names);
    for (int g = 0; g < p->ngroups; g++) {
        for (char **e = p->groups[g].env; *e; e++) free(*e);
        free(p->groups[g].env);
        free(p->groups[g].env_val);
    }
    free(p->groups);
    for (int i = 0; i < p->npoints; i++) free(p->points[i].values);
    free(p->points);
    for (int i = 0; i < p->nlaunches; i++) free(p->launches[i].points);
    free(p->launches);
    memset(p, 0, sizeof *p);
}

/* ---- argv -------------------------------------------------------------------- */

static int is_size_flag(const char *a)
{
    static const char *const flags[] = {
        "-b", "--minbytes", "-e", "--maxbytes", "-f", "--stepfactor", "-i", "--stepbytes", NULL};
    for (const char *const *f = flags; *f; f++) {
        size_t n = strlen(*f);
        if (strncmp(a, *f, n) == 0 && (a[n] == 0 || (a[n] == '=' && a[1] == '-'))) return 1;
    }
    return 0;
}

/* The distinct values of axis `a` over a launch's points, in order, joined by
 * commas (a merged axis' list: coll's --coll, queues' --streams). */
static char *launch_values(const ao_sweep_plan *p, const ao_sweep_launch *l, int a)
{
    char *list = ao_strdup("");
    for (int j = 0; j < l->npoints; j++) {
        const char *v = p->points[l->points[j]].values[a];
        int seen = 0;
        for (int k = 0; k < j; k++) seen |= strcmp(p->points[l->points[k]].values[a], v) == 0;
        if (seen) continue;
        char *next = ao_asprintf("%s%s%s", list, *list ? "," : "", v);
        free(list);
        list = next;
    }
    return list;
}

char **ao_sweep_launch_argv(const ao_sweep_plan *p, int li, const char *result,
                            const char *run_name)
{
    const ao_sweep_spec *s = p->spec;
    const ao_sweep_launch *l = &p->launches[li];
    const ao_sweep_point *pt = &p->points[l->points[0]];
    const ao_sweep_group *g = &p->groups[l->group];
    char **argv = NULL;
    int n = 0;
    push(&argv, &n, ao_strdup(ao_sweep_command_name(s->command)));
    if (s->command == AO_SWEEP_TRAIN && s->config) {
        push(&argv, &n, ao_strdup("--config"));
        push(&argv, &n, ao_strdup(s->config));
    }
    int sa = s->command == AO_SWEEP_COLL ? ao_sweep_axis_index(s, "size") : -1;
    int qa = s->command == AO_SWEEP_QUEUES ? ao_sweep_axis_index(s, "streams") : -1;
    for (int i = 0; i < s->nargs; i++) {
        /* A size axis replaces the fixed -b/-e/-f/-i (and the value after each),
         * a streams axis queues' --streams. */
        if ((sa >= 0 && is_size_flag(s->args[i])) ||
            (qa >= 0 &&
             (strcmp(s->args[i], "--streams") == 0 || ao_starts_with(s->args[i], "--streams=")))) {
            if (!strchr(s->args[i], '=')) i++;
            continue;
        }
        push(&argv, &n, ao_strdup(s->args[i]));
    }
    for (int a = 0; a < s->naxes; a++) {
        const char *key = s->axes[a].key;
        if (strcmp(key, "nproc") == 0 || is_merged_axis(s, a)) continue;
        if (s->command == AO_SWEEP_QUEUES && strcmp(key, "workload") == 0) {
            push(&argv, &n, ao_strdup(pt->values[a]));
        } else if (s->command == AO_SWEEP_TRAIN && key[0] != '-') {
            push(&argv, &n, ao_strdup("--override"));
            push(&argv, &n, ao_asprintf("%s=%s", key, pt->values[a]));
        } else {
            push(&argv, &n, ao_strdup(key));
            push(&argv, &n, ao_strdup(pt->values[a]));
        }
    }
    int ca = s->command == AO_SWEEP_COLL ? ao_sweep_axis_index(s, "--coll") : -1;
    if (ca >= 0) {
        push(&argv, &n, ao_strdup("--coll"));
        push(&argv, &n, launch_values(p, l, ca));
    }
    if (sa >= 0) {
        size_t *sz = ao_calloc((size_t)l->npoints, sizeof *sz);
        int ns = launch_sizes(p, l, sa, sz);
        long factor;
        size_t step;
        size_series(sz, ns, &factor, &step);
        push(&argv, &n, ao_strdup("-b"));
        push(&argv, &n, ao_asprintf("%zu", sz[0]));
        push(&argv, &n, ao_strdup("-e"));
        push(&argv, &n, ao_asprintf("%zu", sz[ns - 1]));
        push(&argv, &n, ao_strdup(factor ? "-f" : "-i"));
        push(&argv, &n, factor ? ao_asprintf("%ld", factor) : ao_asprintf("%zu", step));
        free(sz);
    }
    if (qa >= 0) {
        push(&argv, &n, ao_strdup("--streams"));
        push(&argv, &n, launch_values(p, l, qa));
    }
    if (g->nproc > 0) {
        push(&argv, &n, ao_strdup("--nproc"));
        push(&argv, &n, ao_asprintf("%d", g->nproc));
    }
    if (s->command == AO_SWEEP_TRAIN) {
        push(&argv, &n, ao_strdup("--run-name"));
        push(&argv, &n, ao_strdup(run_name));
    } else {
        push(&argv, &n, ao_strdup("--json"));
        push(&argv, &n, ao_strdup(result));
    }
    return argv;
}

int ao_sweep_point_size_index(const ao_sweep_plan *p, int point)
{
    int sa = p->spec->command == AO_SWEEP_COLL ? ao_sweep_axis_index(p->spec, "size") : -1;
    if (sa < 0) return -1;
    const ao_sweep_launch *l = &p->launches[p->points[point].launch];
    size_t *sz = ao_calloc((size_t)l->npoints, sizeof *sz);
    int n = launch_sizes(p, l, sa, sz), at = -1;
    size_t mine = size_of(p->points[point].values[sa]);
    for (int i = 0; i < n; i++)
        if (sz[i] == mine) at = i;
    free(sz);
    return at;
}

void ao_sweep_argv_free(char **argv)
{
    if (!argv) return;
    for (char **a = argv; *a; a++) free(*a);
    free(argv);
}

void ao_sweep_plan_print(const ao_sweep_plan *p, FILE *out)
{
    const ao_sweep_spec *s = p->spec;
    fprintf(out, "# sweep %s: %s, %d launch group%s, %d launch%s, %d point%s\n", s->name,
            ao_sweep_command_name(s->command), p->ngroups, p->ngroups == 1 ? "" : "s", p->nlaunches,
            p->nlaunches == 1 ? "" : "es", p->npoints, p->npoints == 1 ? "" : "s");
    /* A group's launches are consecutive (planned group by group). */
    for (int g = 0, li = 0; g < p->ngroups; g++) {
        fprintf(out, "group %d: nproc=", g);
        if (p->groups[g].nproc)
            fprintf(out, "%d", p->groups[g].nproc);
        else
            fprintf(out, "default");
        for (char **e = p->groups[g].env; *e; e++) fprintf(out, " %s", *e);
        fputc('\n', out);
        for (; li < p->nlaunches && p->launches[li].group == g; li++) {
            char **argv = ao_sweep_launch_argv(p, li, "RESULT.json", "RUN");
            fprintf(out, "  launch %d: aorta", li);
            for (char **a = argv; *a; a++) fprintf(out, " %s", *a);
            fputc('\n', out);
            ao_sweep_argv_free(argv);
            for (int j = 0; j < p->launches[li].npoints; j++) {
                const ao_sweep_point *pt = &p->points[p->launches[li].points[j]];
                fprintf(out, "    point %d:", p->launches[li].points[j]);
                for (int a = 0; a < s->naxes; a++)
                    fprintf(out, " %s=%s", s->axes[a].key, pt->values[a]);
                fputc('\n', out);
            }
        }
    }
}
