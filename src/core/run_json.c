/* run.json (core/jsonl.h): writing it, and recording how a run ended by
 * whichever process of the run sees it first. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/jsonl.h"
#include "core/rundir.h"

extern char **environ;

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ---- run.json ------------------------------------------------------------------ */

static const char *const env_prefixes[] = {"NCCL_", "RCCL_",  "CUDA_",  "HIP_",  "HSA_",
                                           "OMPI_", "SLURM_", "AORTA_", "TORCH_"};

static int env_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

char **ao_env_filter(char *const *envp, size_t *n)
{
    size_t total = 0, k = 0;
    for (char *const *e = envp; e && *e; e++) total++;
    char **out = ao_malloc((total + 1) * sizeof *out);
    for (size_t i = 0; i < total; i++) {
        for (size_t p = 0; p < NELEM(env_prefixes); p++) {
            if (strncmp(envp[i], env_prefixes[p], strlen(env_prefixes[p])) == 0 &&
                strchr(envp[i], '=')) {
                out[k++] = envp[i];
                break;
            }
        }
    }
    qsort(out, k, sizeof *out, env_cmp);
    out[k] = NULL;
    *n = k;
    return out;
}

typedef struct config_emit {
    ao_json_writer *o;
    char *bad_key; /* the first key whose value was not valid JSON */
} config_emit;

static void emit_config(void *ctx, const ao_config_entry *e)
{
    config_emit *c = ctx;
    ao_json_writer *o = c->o;
    if (o->st != yajl_gen_status_ok) return;
    ao_jw_open(o, e->key);
    ao_jw_key(o, "value");
    if (o->st == yajl_gen_status_ok) {
        o->st = ao_json_gen_value(o->g, &e->value);
        if (o->st != yajl_gen_status_ok) c->bad_key = ao_strdup(e->key ? e->key : "(null)");
    }
    ao_jw_str(o, "type", e->type);
    ao_jw_str(o, "origin", e->origin);
    ao_jw_close(o);
}

static void gen_timespec(ao_json_writer *o, const char *prefix, const struct timespec *t, int utc)
{
    char key[64];
    snprintf(key, sizeof key, "%s_ns", prefix);
    ao_jw_int(o, key, (long long)t->tv_sec * 1000000000LL + t->tv_nsec);
    snprintf(key, sizeof key, "%s_s", prefix);
    ao_jw_double(o, key, (double)t->tv_sec + 1e-9 * (double)t->tv_nsec);
    if (utc) {
        struct tm tm;
        time_t sec = t->tv_sec;
        gmtime_r(&sec, &tm);
        char date[40], iso[64];
        strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(iso, sizeof iso, "%s.%09ldZ", date, (long)t->tv_nsec);
        ao_jw_str(o, "utc", iso);
    }
}

static int write_run_json(const char *path, const ao_run_header *h)
{
    yajl_gen g = ao_json_gen_new(1);
    ao_json_writer o = {g, yajl_gen_status_ok};
    char host[256] = "";
    if (!h->host && gethostname(host, sizeof host) != 0) strcpy(host, "unknown");
    host[sizeof host - 1] = '\0';

    ao_jw_open(&o, NULL);
    ao_jw_int(&o, "schema", AO_RUN_JSON_SCHEMA);
    ao_jw_str(&o, "run_id", h->run_id);
    ao_jw_str(&o, "command", h->command);
    ao_jw_aopen(&o, "argv");
    for (int i = 0; i < h->argc; i++) ao_jw_str(&o, NULL, h->argv[i]);
    ao_jw_aclose(&o);
    ao_jw_str(&o, "host", h->host ? h->host : host);
    ao_jw_int(&o, "pid", (long long)getpid());
    ao_jw_int(&o, "world_size", h->world_size);
    if (h->planned_steps > 0) ao_jw_int(&o, "planned_steps", h->planned_steps);
    if (h->end) {
        ao_json_value done = ao_json_bool(!*h->end);
        ao_jw_value(&o, "completed", &done);
        if (*h->end) ao_jw_str(&o, "end", h->end);
    }
    if (!h->unanchored) {
        ao_jw_open(&o, "anchor");
        gen_timespec(&o, "realtime", &h->anchor_realtime, 1);
        gen_timespec(&o, "monotonic", &h->anchor_monotonic, 0);
        ao_jw_close(&o);
    }
    ao_jw_key(&o, "versions");
    if (o.st == yajl_gen_status_ok)
        o.st = ao_json_gen_object(g, &(ao_json_object){h->versions, h->nversions});
    ao_jw_aopen(&o, "devices");
    for (size_t i = 0; i < h->ndevices && o.st == yajl_gen_status_ok; i++)
        o.st = ao_json_gen_object(g, &h->devices[i]);
    ao_jw_aclose(&o);
    config_emit ce = {&o, NULL};
    if (h->config_visit) {
        ao_jw_open(&o, "config");
        h->config_visit(h->config, emit_config, &ce);
        ao_jw_close(&o);
    }
    size_t nenv;
    char **env = ao_env_filter(h->envp ? h->envp : environ, &nenv);
    ao_jw_open(&o, "env");
    for (size_t i = 0; i < nenv; i++) {
        const char *eq = strchr(env[i], '=');
        if (o.st == yajl_gen_status_ok)
            o.st = yajl_gen_string(g, (const unsigned char *)env[i], (size_t)(eq - env[i]));
        ao_jw_str(&o, NULL, eq + 1);
    }
    ao_jw_close(&o);
    free(env);
    ao_jw_close(&o);

    int rc = 0;
    if (ce.bad_key) {
        ao_error(path, "the config value of \"%s\" is not valid JSON", ce.bad_key);
        rc = AO_EXIT_USAGE;
    } else if (o.st != yajl_gen_status_ok) {
        ao_error(path, "JSON generation failed (yajl status %d)", (int)o.st);
        rc = AO_EXIT_FAIL;
    } else {
        const unsigned char *buf;
        size_t len;
        yajl_gen_get_buf(g, &buf, &len);
        int room = h->end && strcmp(h->end, AO_RUN_END_UNRECORDED) == 0;
        char *text = ao_malloc(len + AO_RUN_END_ROOM + 2);
        memcpy(text, buf, len);
        if (room) {
            memset(text + len, ' ', AO_RUN_END_ROOM);
            len += AO_RUN_END_ROOM;
        }
        text[len++] = '\n';
        if (ao_file_write_atomic(path, text, len) != 0) rc = AO_EXIT_FAIL;
        free(text);
    }
    free(ce.bad_key);
    yajl_gen_free(g);
    return rc;
}

/* The run directory locked (flock, exclusive) against the other processes
 * of the run that write its run.json; -1 when it cannot be opened. */
static int lock_run_dir(const char *dir)
{
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0)
        while (flock(dfd, LOCK_EX) != 0 && errno == EINTR) {
        }
    return dfd;
}

static void unlock_run_dir(int dfd)
{
    if (dfd < 0) return;
    flock(dfd, LOCK_UN);
    close(dfd);
}

/* run.json parsed (NULL: none or not JSON); its length in *len. */
static yajl_val read_run(const char *path, size_t *len)
{
    char *text = ao_file_read(path, len);
    yajl_val run = text ? yajl_tree_parse(text, NULL, 0) : NULL;
    free(text);
    return run;
}

/* Whether run's end is still to be recorded. */
static int end_open(yajl_val run)
{
    yajl_val done = ao_json_member(run, "completed"), end = ao_json_member(run, "end");
    return !done || (YAJL_IS_FALSE(done) && YAJL_IS_STRING(end) &&
                     strcmp(end->u.string, AO_RUN_END_UNRECORDED) == 0);
}

int ao_run_json_write(const char *path, const ao_run_header *h)
{
    /* Under the run's lock, and an end another process recorded meanwhile is
     * kept: never replaced by the unrecorded one. */
    const char *slash = strrchr(path, '/');
    char *dir =
        slash ? ao_asprintf("%.*s", (int)(slash - path) + (slash == path), path) : ao_strdup(".");
    int dfd = lock_run_dir(dir);
    free(dir);
    ao_run_header kept = *h;
    yajl_val run = NULL;
    if (h->end && strcmp(h->end, AO_RUN_END_UNRECORDED) == 0) {
        run = read_run(path, NULL);
        yajl_val end = ao_json_member(run, "end");
        if (YAJL_IS_OBJECT(run) && !end_open(run) && YAJL_IS_STRING(end)) kept.end = end->u.string;
    }
    int rc = write_run_json(path, &kept);
    if (run) yajl_tree_free(run);
    unlock_run_dir(dfd);
    return rc;
}

/* The run.json tree with "completed": false and "end": why. */
static int gen_ended(yajl_gen g, yajl_val run, const char *why)
{
    yajl_gen_status st = yajl_gen_map_open(g);
    int done = 0;
    for (size_t i = 0; i < run->u.object.len && st == yajl_gen_status_ok; i++) {
        const char *k = run->u.object.keys[i];
        if (strcmp(k, "end") == 0) continue;
        st = ao_json_gen_str(g, k);
        if (st != yajl_gen_status_ok) break;
        if (strcmp(k, "completed") == 0) {
            st = yajl_gen_bool(g, 0);
            if (st == yajl_gen_status_ok) st = ao_json_gen_str(g, "end");
            if (st == yajl_gen_status_ok) st = ao_json_gen_str(g, why);
            done = 1;
        } else {
            st = ao_json_gen_tree(g, run->u.object.values[i]);
        }
    }
    if (!done && st == yajl_gen_status_ok) {
        st = ao_json_gen_str(g, "completed");
        if (st == yajl_gen_status_ok) st = yajl_gen_bool(g, 0);
        if (st == yajl_gen_status_ok) st = ao_json_gen_str(g, "end");
        if (st == yajl_gen_status_ok) st = ao_json_gen_str(g, why);
    }
    if (st == yajl_gen_status_ok) st = yajl_gen_map_close(g);
    return st == yajl_gen_status_ok ? 0 : -1;
}

/* The new text over the old file's bytes, padded with spaces to its length:
 * blocks the file already has, so a full disk does not stop it. */
static int rewrite_in_place(const char *path, const unsigned char *buf, size_t len, size_t old)
{
    if (len + 1 > old) return -1;
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    char *text = ao_malloc(old);
    memcpy(text, buf, len);
    memset(text + len, ' ', old - len - 1);
    text[old - 1] = '\n';
    ssize_t w = pwrite(fd, text, old, 0);
    free(text);
    int rc = w == (ssize_t)old && fsync(fd) == 0 ? 0 : -1;
    close(fd);
    return rc;
}

int ao_run_json_record_end(const char *run_dir, const char *why)
{
    int dfd = lock_run_dir(run_dir);
    if (dfd < 0) return 0;
    char *path = ao_asprintf("%s/%s", run_dir, AO_RUN_JSON);
    size_t old = 0;
    yajl_val run = read_run(path, &old);
    int rc = 0;
    if (YAJL_IS_OBJECT(run) && end_open(run)) {
        yajl_gen g = ao_json_gen_new(1);
        if (gen_ended(g, run, why) == 0) {
            const unsigned char *buf;
            size_t len;
            yajl_gen_get_buf(g, &buf, &len);
            /* Atomic where there is room; in place where there is not. */
            int err = ao_file_write_atomic_quiet(path, buf, len);
            if (err && rewrite_in_place(path, buf, len, old) != 0) {
                ao_error(path, "cannot record the run's end (%s): %s", why, strerror(err));
                rc = -1;
            } else {
                rc = 1;
            }
        }
        yajl_gen_free(g);
    }
    if (run) yajl_tree_free(run);
    free(path);
    unlock_run_dir(dfd);
    return rc;
}
