/* The run directory, DESIGN §8: {output_dir}/{run_id}/, never reused.
 *
 * One process makes the run id (the launcher parent, or rank 0 when there is
 * no parent) and hands it to every rank in AORTA_RUN_ID. The creator makes
 * the directory with mkdir(2), which fails when it exists, so a run can never
 * add files to an older run; it then points {output_dir}/latest at it. The
 * other ranks join: they wait briefly for the directory to appear. When a
 * launcher parent created it (DESIGN §5), every rank, rank 0 included, joins.
 *
 *     char id[AO_RUN_ID_MAX];
 *     ao_rundir_make_id(id, sizeof id);            // or a --run-name
 *     ao_rundir d;
 *     if (ao_rundir_open(out_dir, id, rank, 30.0, &d)) return ...;
 *     char *m = ao_rundir_rank_path(&d, rank, world_size, AO_RANK_METRICS);
 */
#ifndef AORTA_CORE_RUNDIR_H
#define AORTA_CORE_RUNDIR_H

#include <stddef.h>
#include <stdio.h>

/* Buffer size for a run id (ids and names are at most 100 characters). */
#define AO_RUN_ID_MAX   128
#define AO_RUN_NAME_MAX 100
#define AO_RUN_ID_ENV   "AORTA_RUN_ID"
#define AO_RUN_LATEST   "latest"
#define AO_RUN_JSON     "run.json"
#define AO_RUN_SUMMARY  "summary.json"
#define AO_RUN_TRACE    "trace.json"
#define AO_RANK_METRICS "_metrics.jsonl"
#define AO_RANK_LOG     ".log"

typedef struct ao_rundir {
    char *output_dir; /* as given */
    char *run_id;
    char *path; /* output_dir/run_id */
} ao_rundir;

/* "20261122T051502Z-host-12345": UTC time, the short host name (characters
 * outside [A-Za-z0-9._-] become '-'), pid. Returns 0, or -1 when n is too
 * small (AO_RUN_ID_MAX always suffices). */
int ao_rundir_make_id(char *buf, size_t n);

/* A user-given run name must be a plain file name: not empty, not "." or
 * "..", not "latest", no '/', printable ASCII, at most AO_RUN_NAME_MAX
 * characters. Returns 0, or AO_EXIT_USAGE after an error naming `what` (the
 * flag or variable it came from, e.g. "--run-name"). */
int ao_rundir_validate_name(const char *name, const char *what);

/* A file a command will write at its end (--json, --csv): checked before any
 * work, so a typo does not cost the whole run. It must not be a directory,
 * and its directory must exist and be writable. Returns 0, or AO_EXIT_USAGE
 * after one error naming `flag` and the path. */
int ao_check_output_file(const char *flag, const char *path);
/* The same for a command that makes the file's missing directories (sweep
 * --out): the nearest existing one must be a writable directory. */
int ao_check_output_path(const char *flag, const char *path);

/* An input file opened for reading ("rb") by ao_open_input (core/json.h):
 * anything but a regular file is refused by name, without blocking (fopen
 * opens a directory, and blocks on a FIFO). NULL after one error: "cannot
 * read the KIND: why" or "is a FIFO, not a KIND". */
FILE *ao_open_input_file(const char *path, const char *kind);

/* Whether path, its symbolic links resolved, lies inside dir (not dir
 * itself): a directory scan follows a link only when it stays inside the
 * directory it was given. 0 also when either cannot be resolved. */
int ao_path_within(const char *dir, const char *path);

/* Creator: make output_dir (with parents), then output_dir/run_id, which
 * must not exist; then update output_dir/latest. Returns 0, AO_EXIT_USAGE
 * (bad id, the run directory exists, output_dir is not a directory) or
 * AO_EXIT_FAIL (I/O), after printing why. */
int ao_rundir_create(const char *output_dir, const char *run_id, ao_rundir *out);
/* Joiner: wait up to timeout_s for output_dir/run_id to exist. Returns 0,
 * or AO_EXIT_FAIL after printing why. */
int ao_rundir_join(const char *output_dir, const char *run_id, double timeout_s, ao_rundir *out);
/* Rank 0 creates, the other ranks join. */
int ao_rundir_open(const char *output_dir, const char *run_id, int rank, double timeout_s,
                   ao_rundir *out);
void ao_rundir_free(ao_rundir *d);

/* Staged creation, for a command that writes a whole run at once (`aorta
 * analyze`): a hidden output_dir/.run_id.partial-PID is made and returned in
 * out->path; ao_rundir_commit renames it to output_dir/run_id (which must not
 * exist: never a half-written or merged run) and updates `latest`;
 * ao_rundir_abandon removes it and its files, and so does an exit() before
 * either (ao_fatal: out of memory). Return codes as ao_rundir_create. */
int ao_rundir_create_staged(const char *output_dir, const char *run_id, ao_rundir *out);
int ao_rundir_commit(ao_rundir *d);
void ao_rundir_abandon(ao_rundir *d);

/* Point output_dir/latest at run_id (a relative symlink), atomically: a
 * temporary link renamed over the old one. Returns 0, or -1 after a warning
 * (a missing `latest` never fails a run). */
int ao_rundir_update_latest(const char *output_dir, const char *run_id);

/* path/name, e.g. AO_RUN_JSON. Heap string. */
char *ao_rundir_file(const ao_rundir *d, const char *name);
/* "rank_NN<suffix>" with suffix AO_RANK_METRICS or AO_RANK_LOG: NN has two
 * digits, or as many as world_size - 1 needs, so names sort by rank. */
char *ao_rank_file_name(int rank, int world_size, const char *suffix);
/* path/rank_NN<suffix>. Heap string. */
char *ao_rundir_rank_path(const ao_rundir *d, int rank, int world_size, const char *suffix);

#endif
