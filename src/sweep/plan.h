/* `aorta sweep`: the sweep file, its overrides and the plan of launches.
 *
 * A sweep names a command (train, coll, sdma, queues), its fixed arguments,
 * axes (values a point takes: config keys for train, flags for coll/sdma/
 * queues, queues' `workload` and `streams`, and `nproc`) and environment
 * variables. Environments are built as:
 *
 *     env:      cartesian product of every variable's values (file order, the
 *               last variable varies fastest);
 *     env_zip:  a list of entries, each one set of variables taken together;
 *     both:     the env product crossed with the zip entries (every env
 *               combination once with each entry), so env {A: [1,2]} with
 *               env_zip [{B:1,C:1}, {B:2,C:2}] gives 4 environments.
 *
 * A variable may not be in both. A launch group is one (nproc, environment)
 * pair; groups are ordered nproc first, then the env product, then the zip
 * entries. Inside a group the points are the cartesian product of the other
 * axes, filtered by --skip. Points share a launch (one process of this binary
 * with the group's environment) where the command can take them in one run:
 * for coll the `size` axis (coll's own -b/-e sweep, when the sizes form a
 * geometric or arithmetic series; else one launch per size) and the `--coll`
 * axis (coll's --coll list), and for queues the `streams` axis (its --streams
 * list). Every other point is its own launch: train would
 * need a multi-config mode to reuse communicators across configs, and sdma
 * runs one GEMM shape per process.
 *
 * Values are YAML scalars or lists; a scalar or list item may be a range:
 * `pow2:A:B` (2^A .. 2^B) or `lin:FIRST:LAST[:STEP]` (inclusive, STEP
 * default 1). Every user error prints one line naming FILE:LINE (or the
 * flag) and returns AO_EXIT_USAGE. */
#ifndef AORTA_SWEEP_PLAN_H
#define AORTA_SWEEP_PLAN_H

#include <stdio.h>

typedef enum ao_sweep_command {
    AO_SWEEP_TRAIN,
    AO_SWEEP_COLL,
    AO_SWEEP_SDMA,
    AO_SWEEP_QUEUES
} ao_sweep_command;

const char *ao_sweep_command_name(ao_sweep_command c);

/* One named list of values: an axis or an env variable. */
typedef struct ao_sweep_axis {
    char *key;
    char **values;
    int nvalues;
    char *where; /* "FILE:LINE" or the flag it came from */
} ao_sweep_axis;

/* One env_zip entry: variables set together. */
typedef struct ao_sweep_zip {
    char **names;
    char **values;
    int n;
    char *where;
} ao_sweep_zip;

typedef struct ao_sweep_skip {
    char *key;
    char *value;
} ao_sweep_skip;

typedef struct ao_sweep_spec {
    char *path;
    char *name;
    ao_sweep_command command;
    char **args; /* fixed arguments of the command */
    int nargs;
    char *config; /* train: the base config file, or NULL for the defaults */
    char *config_where;
    ao_sweep_axis *axes; /* `nproc` included when given */
    int naxes;
    ao_sweep_axis *env;
    int nenv;
    ao_sweep_zip *zip;
    int nzip;
    char *metric; /* charted; `metric: [a, b]` charts each, a first */
    char *metric_where;
    char **more_metrics;
    int nmore_metrics;
    ao_sweep_skip *skips;
    int nskips;
    long max_points; /* refuse plans with more points; 0 = AO_SWEEP_MAX_POINTS */
} ao_sweep_spec;

/* The default cap on a sweep's points (its axes' and environments' product,
 * before --skip): a sweep that large is a mistake more often than a plan, and
 * its plan alone would take memory and time. --max-points raises it. */
#define AO_SWEEP_MAX_POINTS 100000L

/* Parse a sweep file, or YAML text (`where` names it in messages). 0 or
 * AO_EXIT_USAGE after one error line. *s is safe to free either way. */
int ao_sweep_spec_load(const char *path, ao_sweep_spec *s);
int ao_sweep_spec_load_text(const char *where, const char *text, ao_sweep_spec *s);
void ao_sweep_spec_free(ao_sweep_spec *s);

/* Command-line changes, applied before ao_sweep_spec_check:
 * --axis KEY=V1,V2 and --env NAME=V1,V2 replace (or add) that list;
 * --skip KEY=V drops the points whose axis or variable KEY has value V. */
int ao_sweep_spec_set_axis(ao_sweep_spec *s, const char *flag, const char *kv);
int ao_sweep_spec_set_env(ao_sweep_spec *s, const char *flag, const char *kv);
int ao_sweep_spec_add_skip(ao_sweep_spec *s, const char *flag, const char *kv);

/* Everything that can be checked before running: axis keys the command
 * knows (train: config keys and values through the schema), nproc values,
 * variables in both env and env_zip, skip keys, the metric. */
int ao_sweep_spec_check(const ao_sweep_spec *s);

/* Expand one value (a plain value or a range) onto *vals. 0, or
 * AO_EXIT_USAGE after an error naming `where`. */
int ao_sweep_expand(const char *where, const char *text, char ***vals, int *n);

/* The metric columns a command's rows carry (NULL-terminated). */
const char *const *ao_sweep_metric_columns(ao_sweep_command c);

typedef struct ao_sweep_group {
    int nproc;      /* 0: the command's default */
    char **env;     /* NULL-terminated NAME=VALUE, for the children only */
    char **env_val; /* per plan env name, the value or NULL (not set) */
} ao_sweep_group;

typedef struct ao_sweep_point {
    int group;
    int launch;
    const char **values; /* per spec axis (nproc included), pointing into the spec */
} ao_sweep_point;

typedef struct ao_sweep_launch {
    int group;
    int *points; /* indices into plan->points, in plan order */
    int npoints;
} ao_sweep_launch;

typedef struct ao_sweep_plan {
    const ao_sweep_spec *spec;
    char **env_names; /* env columns: env variables, then zip variables, first seen first */
    int nenv_names;
    ao_sweep_group *groups;
    int ngroups;
    ao_sweep_point *points;
    int npoints;
    ao_sweep_launch *launches;
    int nlaunches;
} ao_sweep_plan;

/* The plan of a checked spec, in time linear in its points. 0, or
 * AO_EXIT_USAGE after printing (more than the maximum of points, every
 * point skipped). The plan points into the spec, which must outlive it. */
int ao_sweep_plan_make(const ao_sweep_spec *s, ao_sweep_plan *p);
void ao_sweep_plan_free(ao_sweep_plan *p);

/* The index of axis `key` in the spec, or -1. */
int ao_sweep_axis_index(const ao_sweep_spec *s, const char *key);

/* argv (after the program name) of launch `li`: the command, its fixed
 * arguments, the points' axis flags, --nproc, and where the child writes its
 * results (`result` for coll/sdma --json; `run_name` for train --run-name).
 * A fresh NULL-terminated array of fresh strings; free with
 * ao_sweep_argv_free. */
char **ao_sweep_launch_argv(const ao_sweep_plan *p, int li, const char *result,
                            const char *run_name);
void ao_sweep_argv_free(char **argv);

/* coll: the position of the point's size among its launch's sizes (the
 * order coll writes its rows in), or -1 without a size axis. */
int ao_sweep_point_size_index(const ao_sweep_plan *p, int point);

/* The groups, launches and points, for --dry-run. */
/* train: the configuration a point's launch gives `aorta train`: the config
 * file in *config (the sweep's `config:`, or a --config among its args; NULL:
 * the defaults) and the overrides, heap strings (*n; free each and the
 * array): the args' --override KEY=VALUE words, then the point's axes. */
char **ao_sweep_train_config(const ao_sweep_plan *p, int point, int *n, const char **config);
/* train: every point's whole configuration through train's own checks (the
 * schema, the cross-key rules, and the rank count's where the point names
 * it), before anything runs. 0, or AO_EXIT_USAGE after the error and a hint
 * naming the point. Other commands: 0. */
int ao_sweep_check_train_points(const ao_sweep_plan *p);

void ao_sweep_plan_print(const ao_sweep_plan *p, FILE *out);

#endif
