/* The files of a run (DESIGN §8): run.json, and rank_NN_metrics.jsonl with
 * one complete JSON object per line per iteration.
 *
 * Absent values: every key of a record is always written. A number that is
 * absent or undefined (NAN: a ratio with an empty denominator, a loss not
 * computed in a comm-only step; also ±inf, which JSON cannot hold) is written
 * as null, and null reads back as NAN. `samples` is absent when negative
 * (null, read back as -1). An op's `unit` -1 and `kind` AO_KIND_NONE are
 * null. The reader accepts null for every floating-point field; integer
 * fields must be integers. Fields added after schema 1 was first written
 * (host_wait_ms, exposed_<kind>_ms, data_wait_ms, mem_peak_mb, host_gap_ms, an op's issue_us) are
 * optional on read: absent reads as NAN (issue_us: has_issue 0).
 *
 * Numbers round-trip: a double is written in the shortest form strtod reads
 * back bit-exact, so writer -> reader gives identical numbers. */
#ifndef AORTA_CORE_JSONL_H
#define AORTA_CORE_JSONL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "core/json.h"
#include "core/metrics.h"

#define AO_JSONL_SCHEMA    1
#define AO_RUN_JSON_SCHEMA 1

/* ---- run.json -------------------------------------------------------------- */

/* One resolved configuration value and where it came from. */
typedef struct ao_config_entry {
    const char *key;     /* "training.lr" */
    ao_json_value value; /* typed, or AO_JSON_RAW text for lists */
    const char *type;    /* the schema's type name ("float", "enum", ...), or NULL */
    const char *origin;  /* "default", "configs/a.yaml:12:5", "--override", ... */
} ao_config_entry;

/* The config module visits its resolved values in order and calls emit for
 * each; the writer owns emit and emit_ctx. */
typedef void (*ao_config_emit_fn)(void *emit_ctx, const ao_config_entry *e);
typedef void (*ao_config_visit_fn)(const void *config, ao_config_emit_fn emit, void *emit_ctx);

typedef struct ao_run_header {
    const char *run_id;
    const char *command; /* "train", "coll", ... */
    int argc;
    char *const *argv;
    const char *host; /* NULL: gethostname() */
    int world_size;
    ao_config_visit_fn config_visit; /* NULL: no "config" section */
    const void *config;
    char *const *envp;             /* NULL: environ; filtered with ao_env_filter */
    const ao_json_field *versions; /* {"aorta","0.1.0"}, {"nccl","2.21.5"}, ... */
    size_t nversions;
    const ao_json_object *devices; /* one object per device, fields as the caller likes */
    size_t ndevices;
    /* Host clocks read right after the anchor event was recorded; device
     * times in the metrics files are microseconds from that event. With
     * unanchored set (run.json written at set-up, before the anchor event)
     * no "anchor" is written. */
    struct timespec anchor_realtime, anchor_monotonic;
    int unanchored;
    /* How the run ends, when the command knows: planned_steps > 0 writes
     * "planned_steps"; end NULL writes nothing, "" writes "completed": true,
     * other text "completed": false and "end": the reason. */
    long long planned_steps;
    const char *end;
} ao_run_header;

/* The end a run.json says until the run's end is known: a run killed
 * outright (SIGKILL of every process) keeps it. */
#define AO_RUN_END_UNRECORDED "not recorded: the run was killed, or is still running"

/* Write run.json (pretty, through a temporary file and rename). Returns 0,
 * AO_EXIT_USAGE when a config value is not valid JSON text, AO_EXIT_FAIL
 * on I/O errors, after printing why. With the unrecorded end, the file ends
 * in AO_RUN_END_ROOM spaces: room to record the end in place on a full disk. */
int ao_run_json_write(const char *path, const ao_run_header *h);
#define AO_RUN_END_ROOM 512

/* Record how a run ended in run_dir/run.json ("completed": false, "end":
 * why), unless an end is recorded there already: the first failure is the
 * cause, what follows it its consequences. Any process of the run may call
 * it (a rank, the launcher parent); a lock on the directory orders them. On
 * a full disk the file is rewritten in place within its room. Returns 1
 * recorded, 0 when an end was there or there is no run.json, -1 after
 * printing why it could not be written. */
int ao_run_json_record_end(const char *run_dir, const char *why);

/* The variables worth recording (NCCL_*, RCCL_*, CUDA_*, HIP_*, HSA_*,
 * OMPI_*, SLURM_*, AORTA_*, TORCH_*), sorted by name: a heap array of pointers into
 * envp ("NAME=VALUE"), *n of them; free() the array only. */
char **ao_env_filter(char *const *envp, size_t *n);

/* ---- iteration records -------------------------------------------------------- */

/* Called inside the record's open "extra" object; emits key/value pairs.
 * Returns 0, or nonzero to fail the append. */
typedef int (*ao_jsonl_extra_fn)(void *ctx, yajl_gen g);

typedef struct ao_iter_record {
    int rank, world_size;
    long long step;
    const char *phase; /* "train", "compute_only", "comm_only" */
    double wall_time;  /* UNIX seconds at window_start_us: anchor realtime + start */
    ao_overlap m;      /* every §7 field */
    /* NAN when absent */
    double loss, loss_local, grad_norm, lr, loss_scale, tokens_per_s;
    /* Host time the iteration's issue spent waiting for the data loader
     * (the batch not filled yet); NAN when not measured. Optional on read. */
    double data_wait_ms;
    /* The rank's device-memory high-water mark so far (ao_dev_alloc's bytes,
     * MiB); NAN when not measured. Optional on read. */
    double mem_peak_mb;
    /* The host's share of the gap before this iteration: from the previous
     * iteration's window end to this one's first op issue (or start, if
     * earlier), >= 0; NAN when unknown. Optional on read. */
    double host_gap_ms;
    long long samples; /* < 0 when absent */
    /* Per-op intervals (profiling windows): written when ops != NULL. */
    const ao_op *ops;
    size_t nops;
    /* Writer only: free-form "extra" object, written when extra != NULL. */
    ao_jsonl_extra_fn extra;
    void *extra_ctx;
    /* Reader only: the record's line in its file (for messages), and the
     * storage behind ops and their names. */
    size_t line;
    ao_op *ops_storage;
    char *names_storage;
} ao_iter_record;

/* The §7 fields of m as a record holds them (window, lengths, ratios,
 * compute_<kind>_ms, "streams" when with_streams, "collectives"), as
 * key/value pairs into an open map: for a second view of an iteration in an
 * extra hook (e.g. the kernel-level "overlap_kernels"). Returns the yajl
 * status. */
yajl_gen_status ao_overlap_gen_fields(yajl_gen g, const ao_overlap *m, int with_streams);

/* A record with every optional number absent (NAN / -1) and phase "train". */
void ao_iter_record_init(ao_iter_record *r);
/* Frees what the reader allocated (ops); the struct itself is the caller's. */
void ao_iter_record_free(ao_iter_record *r);
/* Move src's contents (and storage) into dst, leaving src empty. */
void ao_iter_record_move(ao_iter_record *dst, ao_iter_record *src);

/* The record as one JSON line with its '\n', heap-allocated; NULL after
 * printing why (a NULL phase, a failing extra callback). */
char *ao_iter_record_format(const ao_iter_record *r, size_t *len);
/* Parse one record from a parsed line; `where` ("file:line") prefixes every
 * error. Returns 0 or AO_EXIT_USAGE after printing why. */
int ao_iter_record_parse(yajl_val obj, const char *where, ao_iter_record *out);

/* ---- writer ------------------------------------------------------------------ */

typedef struct ao_jsonl_writer ao_jsonl_writer;

/* Create `path` (it must not exist: never appended to). Lines are buffered
 * and written with one write(2) every flush_every records (<= 1: each
 * record) and at close. NULL after printing why. */
ao_jsonl_writer *ao_jsonl_open(const char *path, int flush_every);
/* Returns 0, or -1 after printing why. */
int ao_jsonl_append(ao_jsonl_writer *w, const ao_iter_record *r);
int ao_jsonl_flush(ao_jsonl_writer *w);
/* The errno of the write that failed (0: none): after one, the file holds
 * whole lines only and every later append or flush returns -1 silently. */
int ao_jsonl_error(const ao_jsonl_writer *w);
/* Flushes and closes; NULL is a no-op. 0 or -1 after printing why. */
int ao_jsonl_close(ao_jsonl_writer *w);

/* ---- reader ------------------------------------------------------------------ */

typedef struct ao_jsonl_stats {
    size_t lines;     /* lines read, blank and truncated included */
    size_t records;   /* records handed to the callback */
    size_t blank;     /* empty lines skipped */
    size_t truncated; /* an unterminated, unparseable last line (0 or 1), skipped */
} ao_jsonl_stats;

/* r is the reader's until the callback returns (keep it with
 * ao_iter_record_move); line is the parsed object, for keys the record has
 * no field for ("extra"). A nonzero return stops reading and is returned. */
typedef int (*ao_jsonl_record_fn)(void *ctx, ao_iter_record *r, yajl_val line);

/* Stream `path` line by line. Returns 0, AO_EXIT_USAGE after an error naming
 * file:line (unreadable file, malformed line, schema mismatch, a missing
 * or mistyped field), or the callback's nonzero value. A last line without
 * '\n' that does not parse (a killed writer) is skipped with a warning. */
int ao_jsonl_read(const char *path, ao_jsonl_record_fn fn, void *ctx, ao_jsonl_stats *stats);

/* Every record of `path` in a heap array; free with ao_iter_records_free. */
int ao_jsonl_read_all(const char *path, ao_iter_record **recs, size_t *n, ao_jsonl_stats *stats);
void ao_iter_records_free(ao_iter_record *recs, size_t n);

#endif
