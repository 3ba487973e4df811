/* aorta train: the launcher parent, then on one rank set-up, the iteration loop,
 * records, logs, the end. */
#include "train/train.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm/wait.h"
#include "core/error.h"
#include "core/jsonl.h"
#include "core/rundir.h"
#include "core/version.h"
#include "data/loader.h"
#include "diagnose/for_run.h"
#include "engine/engine.h"
#include "export/export.h"
#include "launch/launch.h"
#include "launch/rank.h"
#include "model/model.h"
#include "runs/run_end.h"
#include "timeline/timeline.h"
#include "train/train_profile.h"

/* Host copies of the scalars, by iteration (the engine keeps only the last
 * few on the device side). */
#define SCALAR_RING 64

typedef struct issued {
    int64_t iter;
    int64_t step; /* the record's step: the optimizer step (baselines: the next one) */
    ao_phase phase;
    double data_wait_ms; /* the host's wait for the loader while issuing it */
} issued;

typedef struct trainer {
    const struct ao_config *cfg;
    const ao_train_opts *o;
    const ao_rank_info *ri;
    ao_rank rank;   /* the device and the root communicator */
    ao_device *dev; /* rank.dev */
    ao_device_info info;
    ao_stream *streams[AO_NSTREAMS];
    ao_model_shape shape;
    ao_model *model;
    ao_loader *loader;
    ao_timeline *tl;
    ao_engine *engine;
    ao_comm *root; /* rank.comm: every other communicator is split from it */
    ao_rundir rd;
    int have_rd;
    ao_jsonl_writer *w;
    FILE *log;
    ao_train_profile *prof;
    struct timespec anchor_mono;
    /* iterations issued and not yet delivered by the timeline, in order */
    issued *queue;
    size_t qhead, qlen, qcap;
    ao_step_scalars sc[SCALAR_RING];
    int64_t sc_iter[SCALAR_RING];
    int total_steps; /* train steps */
    int baselines;   /* compute-only iterations, and as many comm-only */
    int stop_agreed;
    const char *end; /* run.json's end: see ao_run_header */
    int progress_tty;
    double t_start;
    int64_t steps_done;
    double prev_window_end; /* the last delivered iteration's, µs; NAN before the first */
    int append_failed;
} trainer;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A line for rank_NN.log (and, on rank 0, stdout). */
static void log_line(trainer *t, int to_stdout, const char *fmt, ...) AO_PRINTF(3, 4);
static void log_line(trainer *t, int to_stdout, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (t->log) {
        fprintf(t->log, "%s\n", buf);
        fflush(t->log);
    }
    if (to_stdout && t->ri->rank == 0 && ao_log_level() <= AO_LEVEL_INFO) {
        if (t->progress_tty) printf("\r\033[K");
        printf("%s\n", buf);
        fflush(stdout);
    }
}

/* ---- set-up -------------------------------------------------------------- */

/* The run directory: joined when a launcher parent made it, else made by rank
 * 0 and its id broadcast to the others. */
static int open_rundir(trainer *t)
{
    const char *out = t->cfg->training.output_dir;
    const char *env = getenv(AO_RUN_ID_ENV);
    if (env && *env) {
        if (ao_rundir_validate_name(env, AO_RUN_ID_ENV)) return AO_EXIT_USAGE;
        return ao_rundir_join(out, env, 30.0, &t->rd);
    }
    char run_id[AO_RUN_ID_MAX] = "";
    if (t->o->run_name)
        snprintf(run_id, sizeof run_id, "%s", t->o->run_name);
    else if (t->ri->rank == 0)
        ao_rundir_make_id(run_id, sizeof run_id);
    if (!t->o->run_name && t->ri->world_size > 1) {
        ao_stream *s = ao_comm_stream(t->root);
        char *buf = ao_dev_alloc(t->dev, sizeof run_id);
        ao_copy_async(t->dev, buf, run_id, sizeof run_id, AO_H2D, s);
        ao_broadcast(t->root, buf, buf, sizeof run_id, AO_U8, 0);
        ao_copy_async(t->dev, run_id, buf, sizeof run_id, AO_D2H, s);
        ao_wait_stream_sync(s, "the run id's broadcast from rank 0");
        ao_dev_free(t->dev, buf);
        run_id[sizeof run_id - 1] = '\0';
    }
    return ao_rundir_open(out, run_id, t->ri->rank, 30.0, &t->rd);
}

static FILE *create_exclusive(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        ao_error(path, "cannot create: %s", strerror(errno));
        return NULL;
    }
    return fdopen(fd, "w");
}

/* run.json's config section: every key with its type and origin. */
struct visit_ctx {
    ao_config_emit_fn emit;
    void *emit_ctx;
};

static void visit_item(void *ctx, const struct ao_config_item *it)
{
    struct visit_ctx *v = ctx;
    static const char *const names[] = {"int",  "float",      "bool",        "string",
                                        "enum", "float list", "int or bool", "map"};
    ao_config_entry e = {.key = it->key, .type = names[it->type], .origin = it->origin};
    if (it->is_null)
        e.value = (ao_json_value){.type = AO_JSON_NULL};
    else if (it->type == AO_CFG_INT)
        e.value = ao_json_int(strtoll(it->value, NULL, 10));
    else if (it->type == AO_CFG_FLOAT)
        e.value = ao_json_double(strtod(it->value, NULL));
    else if (it->type == AO_CFG_BOOL)
        e.value = ao_json_bool(strcmp(it->value, "true") == 0);
    else if (it->type == AO_CFG_STRING || it->type == AO_CFG_ENUM)
        e.value = ao_json_str(it->value);
    else
        e.value = ao_json_raw(it->value);
    v->emit(v->emit_ctx, &e);
}

static void visit_config(const void *config, ao_config_emit_fn emit, void *emit_ctx)
{
    struct visit_ctx v = {emit, emit_ctx};
    ao_config_foreach(config, visit_item, &v);
}

static int write_run_json(trainer *t)
{
    char comm_ver[256] = "", dev_ver[256] = "";
    for (int i = 0; i < ao_comm_backend_count(); i++)
        if (strcmp(ao_comm_backend_name(i), ao_comm_backend_for(t->info.backend)) == 0)
            ao_comm_backend_version(i, comm_ver, sizeof comm_ver);
    for (int i = 0; i < ao_device_backend_count(); i++)
        if (strcmp(ao_device_backend_name(i), t->info.backend) == 0)
            ao_device_backend_version(i, dev_ver, sizeof dev_ver);
    ao_json_field versions[] = {
        {"aorta", ao_json_str(AORTA_VERSION)},
        {"git_commit", ao_json_str(ao_git_commit)},
        {"device_backend", ao_json_str(t->info.backend)},
        {"device_runtime", ao_json_str(t->info.runtime_version)},
        {"driver", ao_json_str(t->info.driver_version)},
        {"backend_version", ao_json_str(dev_ver)},
        {"comm", ao_json_str(comm_ver)},
    };
    ao_json_field dev[] = {
        {"rank", ao_json_int(0)},
        {"backend", ao_json_str(t->info.backend)},
        {"name", ao_json_str(t->info.name)},
        {"ordinal", ao_json_int(t->info.ordinal)},
        {"pci_bus_id", ao_json_str(t->info.pci_bus_id)},
        {"sm_count", ao_json_int(t->info.sm_count)},
        {"total_mem", ao_json_int((long long)t->info.total_mem)},
    };
    ao_json_object devices[] = {{dev, sizeof dev / sizeof dev[0]}};
    ao_run_header h = {.run_id = t->rd.run_id,
                       .command = "train",
                       .argc = t->o->argc,
                       .argv = t->o->argv,
                       .world_size = t->ri->world_size,
                       .config_visit = visit_config,
                       .config = t->cfg,
                       .versions = versions,
                       .nversions = sizeof versions / sizeof versions[0],
                       .devices = devices,
                       .ndevices = 1,
                       .anchor_realtime =
                           t->tl ? ao_timeline_anchor_realtime(t->tl) : (struct timespec){0, 0},
                       .anchor_monotonic = t->anchor_mono,
                       .unanchored = !t->tl,
                       .planned_steps = t->total_steps + 2 * t->baselines,
                       .end = t->end};
    char *path = ao_rundir_file(&t->rd, AO_RUN_JSON);
    int rc = ao_run_json_write(path, &h);
    free(path);
    return rc;
}

/* How the run ended, into run.json: by any rank (the first failure wins,
 * core/jsonl.h), from a failed return or from the last words of a process
 * that exits at once (ao_fatal, the collective watchdog). */
static void record_end(trainer *t, ao_end_kind kind, const char *text)
{
    static const char *const how[] = {"failed", "timed out", "out of space"};
    if (!*text) text = "it ended without a message";
    char *why = ao_asprintf("%s on rank %d: %s", how[kind], t->ri->rank, text);
    ao_run_json_record_end(t->rd.path, why);
    free(why);
}

static void last_words(void *ctx, ao_end_kind kind, const char *text)
{
    record_end(ctx, kind, text);
}

static int setup(trainer *t)
{
    const struct ao_config *cfg = t->cfg;
    const ao_rank_info *ri = t->ri;
    int rc = ao_engine_check_config(cfg, ri->world_size, ri->local_world_size);
    if (rc) return rc;
    ao_rank_opts ro = {.cmd = "train",
                       .backend = t->o->backend,
                       .ordinal = -1,
                       .rdzv_file = t->o->rdzv_file,
                       .bootstrap_timeout_s = cfg->distributed.timeout_s,
                       .comm = {.min_ctas = cfg->distributed.nccl.min_ctas,
                                .max_ctas = cfg->distributed.nccl.max_ctas,
                                .cga_cluster_size = cfg->distributed.nccl.cga_cluster_size,
                                .timeout_s = cfg->distributed.timeout_s}};
    if ((rc = ao_rank_open(&t->rank, ri, &ro)) != 0) return rc;
    t->dev = t->rank.dev;
    t->info = t->rank.info;
    for (int i = 0; i < AO_NSTREAMS; i++)
        t->streams[i] = ao_stream_create(t->dev, ao_stream_id_name((ao_stream_id)i),
                                         cfg->streams.by_id[i].priority);
    ao_gemm_set_policy(t->dev, cfg->compute.gemm_chunks, cfg->compute.sm_count_target,
                       ao_engine_compute_alone(cfg, ri->world_size));

    if ((rc = ao_rank_connect(&t->rank, t->streams[AO_STREAM_COMPUTE], &ro)) != 0) return rc;
    t->root = t->rank.comm;
    if ((rc = open_rundir(t)) != 0) return rc;
    t->have_rd = 1;
    /* run.json from here on, before the memory is taken: a run that fails
     * in set-up (out of memory) still says what it was and how it ended. */
    if (ri->rank == 0 && (rc = write_run_json(t)) != 0) return rc;
    ao_set_last_words(last_words, t);

    ao_model_shape_of(cfg, &t->shape);
    t->model = ao_model_create(t->dev, &t->shape);
    if (!t->model) return AO_EXIT_USAGE;
    ao_loader_config lc = {
        .data = {.seq_len = cfg->dataset.sequence_length,
                 .num_dense = cfg->dataset.num_dense_features,
                 .dense_dim = cfg->dataset.dense_dim,
                 .num_sparse = cfg->dataset.sparse_features,
                 .vocab = cfg->dataset.vocab_size},
        .seed = (uint64_t)cfg->dataset.seed,
        .target_kind =
            cfg->dataset.target == AO_DATASET_TARGET_TEACHER ? AO_TARGET_TEACHER : AO_TARGET_RANDOM,
        .batch = cfg->training.batch_size,
        .world = ri->world_size,
        .rank = ri->rank,
        .accum = cfg->training.gradient_accumulation,
        .num_samples = cfg->dataset.num_samples,
        .placement = cfg->dataset.placement,
        .workers = cfg->dataloader.num_workers,
        .pinned = cfg->dataloader.pin_memory,
        .depth = ao_loader_depth_for(cfg->dataset.placement, cfg->dataloader.num_workers),
    };
    t->loader = ao_loader_create(t->dev, t->streams[AO_STREAM_H2D], &lc);
    if (!t->loader) return AO_EXIT_USAGE;

    t->tl = ao_timeline_create(t->dev, t->streams, cfg->profiling.timing);
    ao_timeline_set_nvtx(t->tl, cfg->profiling.nvtx);
    t->prof = ao_train_profile_start(cfg, t->dev, &t->info, ri->rank, ri->world_size);
    ao_train_profile_skip(t->prof, cfg,
                          (int64_t)cfg->training.summary_skip_steps + 2 * t->baselines,
                          (int64_t)t->total_steps + 2 * t->baselines);
    ao_timeline_anchor(t->tl, t->streams[AO_STREAM_COMPUTE]);
    clock_gettime(CLOCK_MONOTONIC, &t->anchor_mono);
    ao_train_profile_anchored(t->prof, t->tl, t->streams[AO_STREAM_COMPUTE]);

    ao_engine_setup es = {.cfg = cfg,
                          .ri = ri,
                          .root = t->root,
                          .dev = t->dev,
                          .streams = t->streams,
                          .model = t->model,
                          .shape = &t->shape,
                          .loader = t->loader,
                          .timeline = t->tl};
    t->engine = ao_engine_create(&es, &rc);
    if (!t->engine) return rc;
    /* The rank's files once set-up has succeeded: a failed one leaves none
     * empty behind. */
    char *path = ao_rundir_rank_path(&t->rd, ri->rank, ri->world_size, AO_RANK_LOG);
    t->log = create_exclusive(path);
    free(path);
    if (!t->log) return AO_EXIT_FAIL;
    path = ao_rundir_rank_path(&t->rd, ri->rank, ri->world_size, AO_RANK_METRICS);
    t->w = ao_jsonl_open(path, cfg->training.log_interval);
    free(path);
    if (!t->w) return AO_EXIT_FAIL;
    if (ri->rank == 0 && (rc = write_run_json(t)) != 0) return rc;

    char desc[512];
    ao_engine_describe(t->engine, desc, sizeof desc);
    log_line(t, 1, "aorta train: run %s on %s (%s), rank %d of %d, %d steps planned%s",
             t->rd.run_id, t->info.name, t->info.backend, ri->rank, ri->world_size,
             t->total_steps + 2 * t->baselines, t->baselines ? " (baselines included)" : "");
    log_line(t, 1, "%s", desc);
    /* Forward plus backward (twice the forward), per rank and step: what
     * achieved TFLOP/s are computed from (bench/train.sh). */
    log_line(t, 1, "model: %.4g TFLOP per rank per step (GEMMs and attention, 3 x forward)",
             3.0 * ao_model_forward_flops(&t->shape) * cfg->training.gradient_accumulation / 1e12);
    return 0;
}

static void teardown(trainer *t)
{
    /* Destroying streams, communicators and the device waits for their work. */
    int w = ao_wait_begin("teardown", NULL, NULL);
    ao_engine_destroy(t->engine);
    ao_rank_disconnect(&t->rank);
    ao_loader_destroy(t->loader);
    ao_train_profile_stop(t->prof);
    if (t->tl) ao_timeline_destroy(t->tl);
    ao_model_destroy(t->model);
    for (int i = 0; i < AO_NSTREAMS; i++)
        if (t->streams[i]) ao_stream_destroy(t->streams[i]);
    ao_rank_close(&t->rank);
    if (t->w) ao_jsonl_close(t->w);
    if (t->log) fclose(t->log);
    if (t->have_rd) ao_rundir_free(&t->rd);
    free(t->queue);
    ao_wait_end(w);
}

/* ---- records ------------------------------------------------------------- */

static void push_issued(trainer *t, issued it)
{
    if (t->qlen == t->qcap) {
        size_t ncap = t->qcap ? 2 * t->qcap : 16;
        issued *q = ao_calloc(ncap, sizeof *q);
        for (size_t i = 0; i < t->qlen; i++) q[i] = t->queue[(t->qhead + i) % t->qcap];
        free(t->queue);
        t->queue = q;
        t->qcap = ncap;
        t->qhead = 0;
    }
    t->queue[(t->qhead + t->qlen++) % t->qcap] = it;
}

static const ao_step_scalars *scalars_of(trainer *t, int64_t iter)
{
    int k = (int)(iter % SCALAR_RING);
    if (t->sc_iter[k] != iter) {
        ao_engine_scalars(t->engine, iter, &t->sc[k]);
        t->sc_iter[k] = iter;
    }
    return &t->sc[k];
}

static void fmt_eta(char *buf, size_t n, double s)
{
    if (!(s >= 0) || s > 360000)
        snprintf(buf, n, "?");
    else if (s >= 60)
        snprintf(buf, n, "%dm%02ds", (int)s / 60, (int)s % 60);
    else
        snprintf(buf, n, "%.0fs", s);
}

static void on_iteration(void *ctx, int64_t step, const char *phase, const ao_op *ops, size_t nops)
{
    trainer *t = ctx;
    if (t->qlen == 0)
        ao_fatal(AO_EXIT_FAIL, "train", "the timeline delivered an unknown iteration");
    issued it = t->queue[t->qhead];
    t->qhead = (t->qhead + 1) % t->qcap;
    t->qlen--;
    ao_iter_record r;
    ao_iter_record_init(&r);
    r.rank = t->ri->rank;
    r.world_size = t->ri->world_size;
    r.step = step;
    r.phase = phase;
    r.data_wait_ms = it.data_wait_ms;
    size_t in_use, peak;
    if (ao_dev_mem_usage(t->dev, &in_use, &peak) == 0) r.mem_peak_mb = (double)peak / 1048576.0;
    ao_overlap_compute(ops, nops, t->ri->world_size, &r.m);
    double f0, f1;
    if (nops == 0 && ao_timeline_frame(t->tl, &f0, &f1)) {
        /* profiling.timing off: the step time alone; what needs the ops is
         * unknown (null in the record), not zero. */
        r.m.window_start_us = f0;
        r.m.window_end_us = f1;
        r.m.step_ms = (f1 - f0) / 1000.0;
        r.m.compute_ms = r.m.comm_ms = r.m.copy_ms = r.m.overlap_ms = NAN;
        r.m.exposed_comm_ms = r.m.idle_ms = r.m.host_wait_ms = NAN;
        for (int k = 0; k < AO_NKINDS; k++) r.m.compute_kind_ms[k] = r.m.exposed_kind_ms[k] = NAN;
    }
    /* The gap before this window that the host caused: nothing of this
     * iteration was enqueued yet when the previous one's last op ended. */
    double enq = fmin(r.m.first_issue_us, r.m.window_start_us);
    if (isfinite(t->prev_window_end) && isfinite(r.m.first_issue_us))
        r.host_gap_ms = enq > t->prev_window_end ? (enq - t->prev_window_end) / 1000.0 : 0;
    if (nops) t->prev_window_end = r.m.window_end_us;
    struct timespec a = ao_timeline_anchor_realtime(t->tl);
    r.wall_time = (double)a.tv_sec + 1e-9 * (double)a.tv_nsec + 1e-6 * r.m.window_start_us;
    int64_t samples = ao_engine_step_samples(t->engine);
    if (it.phase == AO_PHASE_TRAIN) {
        const ao_step_scalars *s = scalars_of(t, it.iter);
        r.loss = s->loss;
        r.loss_local = s->loss_local;
        r.grad_norm = s->grad_norm;
        r.lr = s->lr;
        r.loss_scale = s->loss_scale;
        r.samples = samples;
        if (r.m.step_ms > 0)
            r.tokens_per_s = (double)ao_engine_step_tokens(t->engine) / (r.m.step_ms * 1e-3);
    }
    ao_train_profile_record(t->prof, it.iter, ops, nops, &r);
    if (ao_jsonl_append(t->w, &r) != 0) t->append_failed = 1;
    if (it.phase != AO_PHASE_TRAIN) return;
    t->steps_done = step + 1;
    /* logging.level DEBUG: every step's line, whatever log_interval says. */
    int interval = ao_log_level() <= AO_LEVEL_DEBUG ? 1 : t->cfg->training.log_interval;
    if ((step + 1) % interval == 0 || step + 1 == t->total_steps) {
        char scale[64] = "";
        if (isfinite(r.loss_scale))
            snprintf(scale, sizeof scale, "  loss_scale %g%s", r.loss_scale,
                     isfinite(r.grad_norm) ? "" : " (overflow: step skipped)");
        log_line(t, 1,
                 "step %lld/%d  loss %.6g  loss_local %.6g  lr %.3g  grad_norm %.4g  step %.2f ms  "
                 "tokens/s %.4g%s",
                 (long long)step + 1, t->total_steps, r.loss, r.loss_local, r.lr, r.grad_norm,
                 r.m.step_ms, r.tokens_per_s, scale);
    }
    if (t->progress_tty) {
        double el = now_s() - t->t_start;
        char eta[32];
        fmt_eta(eta, sizeof eta, el / (double)(step + 1) * (double)(t->total_steps - step - 1));
        printf("\r\033[K[%lld/%d] loss %.4g  %.1f ms/step  ETA %s", (long long)step + 1,
               t->total_steps, r.loss, r.m.step_ms, eta);
        fflush(stdout);
    }
}

/* ---- the loop ------------------------------------------------------------ */

typedef struct plan_item {
    ao_phase phase;
    int64_t data_step;
} plan_item;

/* Iteration k of the run: warm-up train steps, the baselines, the rest. The
 * baselines count against the run's steps (as config validation says), so
 * train steps = total - 2 x baseline_steps. */
static plan_item plan_at(const trainer *t, int64_t k)
{
    int64_t warm = t->cfg->training.summary_skip_steps, nb = t->baselines;
    if (k < warm) return (plan_item){AO_PHASE_TRAIN, k};
    if (k < warm + nb) return (plan_item){AO_PHASE_COMPUTE_ONLY, warm};
    if (k < warm + 2 * nb) return (plan_item){AO_PHASE_COMM_ONLY, warm};
    return (plan_item){AO_PHASE_TRAIN, k - 2 * nb};
}

static int run_loop(trainer *t)
{
    int64_t n_iter = t->total_steps + 2 * t->baselines;
    int64_t prev_train = -1;
    t->t_start = now_s();
    ao_test_timeout_apply();
    for (int64_t k = 0; k < n_iter; k++) {
        plan_item p = plan_at(t, k);
        int64_t next = -1;
        for (int64_t j = k + 1; j < n_iter && next < 0; j++) {
            plan_item q = plan_at(t, j);
            if (q.phase != AO_PHASE_COMM_ONLY) next = q.data_step;
        }
        ao_train_profile_issue(t->prof, k);
        ao_timeline_begin(t->tl, p.data_step, ao_phase_name(p.phase));
        ao_engine_iteration(t->engine, k, p.phase, p.data_step, next, ao_launch_stop_requested());
        ao_timeline_end(t->tl);
        push_issued(t, (issued){k, p.data_step, p.phase, ao_engine_take_data_wait_ms(t->engine)});
        /* One iteration late: the previous train step's scalars, with the
         * stop request every rank voted on in it. */
        if (prev_train >= 0 && scalars_of(t, prev_train)->stop) t->stop_agreed = 1;
        if (p.phase == AO_PHASE_TRAIN) prev_train = k;
        ao_timeline_collect(t->tl, 0, on_iteration, t);
        if (t->append_failed) return AO_EXIT_FAIL;
        if (t->stop_agreed) {
            log_line(t, 1, "stopping after step %lld (signal)", (long long)p.data_step + 1);
            break;
        }
    }
    /* The last iterations' timings and scalars: waits inside it progress. */
    int w = ao_wait_begin("the last iterations' timings", NULL, NULL);
    ao_timeline_collect(t->tl, 1, on_iteration, t);
    ao_wait_end(w);
    if (t->progress_tty) {
        printf("\r\033[K");
        fflush(stdout);
    }
    return t->append_failed ? AO_EXIT_FAIL : 0;
}

/* Limits that would otherwise cut a run short, or its learning rate, in
 * silence: each named once, with the keys that set it. */
static void warn_step_caps(const struct ao_config *cfg, int world_size, int steps, int train_steps)
{
    if (steps < cfg->training.max_steps)
        ao_warn("the run makes %d steps, not training.max_steps %d: training.epochs %d over "
                "dataset.num_samples %d at a global batch of %d x %d x %d (ranks x batch_size x "
                "gradient_accumulation) ends it first",
                steps, cfg->training.max_steps, cfg->training.epochs, cfg->dataset.num_samples,
                world_size, cfg->training.batch_size, cfg->training.gradient_accumulation);
    if (cfg->scheduler.total_steps < train_steps)
        ao_warn("scheduler.total_steps %d is below the run's %d train steps: the learning rate "
                "is 0 from step %d on",
                cfg->scheduler.total_steps, train_steps, cfg->scheduler.total_steps + 1);
}

static int train_rank(const struct ao_config *cfg, const ao_train_opts *o, const ao_rank_info *ri,
                      ao_exporter *ex)
{
    trainer t;
    memset(&t, 0, sizeof t);
    for (int i = 0; i < SCALAR_RING; i++) t.sc_iter[i] = -1;
    t.cfg = cfg;
    t.prev_window_end = NAN;
    t.o = o;
    t.ri = ri;
    int iterations = ao_config_total_steps(cfg, ri->world_size);
    t.baselines = cfg->training.baseline_steps;
    if (t.baselines && cfg->training.summary_skip_steps + 2 * t.baselines >= iterations) {
        if (ri->rank == 0)
            ao_warn(
                "training.baseline_steps %d skipped: %d ranks make only %d steps, not more than "
                "warm-up plus 2 x %d",
                t.baselines, ri->world_size, iterations, t.baselines);
        t.baselines = 0;
    }
    t.total_steps = iterations - 2 * t.baselines;
    /* What run.json says until the end is known: a killed run keeps it. */
    t.end = AO_RUN_END_UNRECORDED;
    if (ri->rank == 0) warn_step_caps(cfg, ri->world_size, iterations, t.total_steps);
    t.progress_tty = ri->rank == 0 && o->progress;
    int rc = setup(&t);
    /* rank 0 made the run directory (no launcher parent): it serves it */
    if (rc == 0 && ex) rc = ao_export_start(ex, t.rd.path);
    if (rc == 0) rc = run_loop(&t);
    if (rc == 0) {
        if (ao_test_hang_at("device", ri->rank, -1)) {
            static const char *const where = "device";
            ao_launch_host(t.streams[AO_STREAM_COMPUTE], ao_test_block_fn, &where, sizeof where);
        }
        ao_engine_finish(t.engine);
        if (ao_jsonl_close(t.w) != 0) rc = AO_EXIT_FAIL;
        t.w = NULL;
        /* Every rank's file is complete before rank 0 reads them. */
        ao_engine_barrier(t.engine);
    }
    if (rc == 0) {
        log_line(&t, 0, "done: %lld steps", (long long)t.steps_done);
        if (ri->rank == 0) {
            char why[96];
            snprintf(why, sizeof why, "stopped by a signal (Ctrl-C or SIGTERM) after step %lld",
                     (long long)t.steps_done);
            /* A stop is recorded like a failure (it may follow one); a
             * completed run rewrites run.json whole. */
            t.end = t.stop_agreed ? why : "";
            rc = t.stop_agreed ? (ao_run_json_record_end(t.rd.path, why) < 0 ? AO_EXIT_FAIL : 0)
                               : write_run_json(&t);
            printf("\n");
            if (rc == 0) rc = ao_summary_for_run(t.rd.path, -1, stdout);
            if (rc == 0) rc = ao_diagnose_print_run(t.rd.path, stdout);
            if (rc == 0 && cfg->profiling.chrome_trace) {
                char *trace = ao_rundir_file(&t.rd, cfg->profiling.trace_filename);
                rc = ao_trace_from_run(t.rd.path, trace);
                if (rc == 0) printf("trace: %s\n", trace);
                free(trace);
            }
            printf("run directory: %s\n", t.rd.path);
            fflush(stdout);
            t.end = NULL; /* why[] ends here */
        }
        /* Rank 0 alone says so: others exiting non-zero first could make
         * mpirun kill rank 0 while it writes the summary. */
        if (rc == 0 && t.stop_agreed && ri->rank == 0) rc = AO_EXIT_INTERRUPTED;
    }
    if (rc != 0 && rc != AO_EXIT_INTERRUPTED && t.have_rd)
        record_end(&t, ao_jsonl_error(t.w) == ENOSPC ? AO_END_NO_SPACE : AO_END_FAILED,
                   ao_last_error());
    ao_set_last_words(NULL, NULL);
    teardown(&t);
    return rc;
}

/* ---- the launcher parent ----------------------------------------------------- */

struct parent_ctx {
    const struct ao_config *cfg;
    const char *run_name;
    ao_exporter *ex; /* profiling.prometheus_port: serves the run directory */
    char *run_dir;   /* made by make_rundir */
};

/* The exporter's socket, before anything is made: a port that is taken
 * stops the run before it starts. */
static int open_exporter(const struct ao_config *cfg, ao_exporter **ex)
{
    *ex = NULL;
    if (!cfg->profiling.prometheus_port) return 0;
    *ex = ao_export_open(cfg->profiling.prometheus_listen, cfg->profiling.prometheus_port,
                         "profiling.prometheus_listen", "profiling.prometheus_port");
    return *ex ? 0 : AO_EXIT_USAGE;
}

/* The run directory, made once, before any rank starts, and served from
 * here (this process, the ranks' parent or rank 0 of 1) when asked. */
static int make_rundir(struct parent_ctx *c)
{
    const struct ao_config *cfg = c->cfg;
    const char *run_name = c->run_name;
    char id[AO_RUN_ID_MAX];
    if (run_name)
        snprintf(id, sizeof id, "%s", run_name);
    else if (ao_rundir_make_id(id, sizeof id) != 0)
        return AO_EXIT_FAIL;
    ao_rundir d;
    int rc = ao_rundir_create(cfg->training.output_dir, id, &d);
    if (rc) return rc;
    if (c->ex) rc = ao_export_start(c->ex, d.path);
    c->run_dir = ao_strdup(d.path);
    ao_rundir_free(&d);
    if (rc) return rc;
    if (setenv(AO_RUN_ID_ENV, id, 1) != 0) {
        ao_error("train", "cannot export %s", AO_RUN_ID_ENV);
        return AO_EXIT_FAIL;
    }
    return 0;
}

/* Under a launcher every rank checks for itself (setup); here the parent
 * checks once for the ranks it will start. */
static int parent_check(void *vctx, int world_size, int launched)
{
    struct parent_ctx *c = vctx;
    if (launched) return 0;
    int rc = ao_engine_check_config(c->cfg, world_size, world_size);
    if (rc == 0) rc = open_exporter(c->cfg, &c->ex);
    return rc ? rc : make_rundir(c);
}

/* The ranks ended. A failed run's end is recorded here when no rank could
 * (a rank killed outright: the parent alone saw it), and summary.json is
 * written from the records there are, as rank 0 would have. */
static void parent_ended(void *vctx, const ao_launch_outcome *o, int rc)
{
    struct parent_ctx *c = vctx;
    if (!c->run_dir || rc == AO_EXIT_OK || rc == AO_EXIT_INTERRUPTED) return;
    char why[256];
    if (o->rank >= 0)
        snprintf(why, sizeof why, "rank %d %s", o->rank, o->how);
    else
        snprintf(why, sizeof why, "a rank failed (the ranks' launcher exited %d) without a word",
                 rc);
    ao_run_json_record_end(c->run_dir, why);
    char *summary = ao_asprintf("%s/%s", c->run_dir, AO_RUN_SUMMARY);
    int have = access(summary, F_OK) == 0;
    free(summary);
    if (!have && ao_summary_for_run(c->run_dir, -1, stdout) == 0)
        printf("summary of the steps that ran: %s/%s\n", c->run_dir, AO_RUN_SUMMARY);
    fflush(stdout);
}

int ao_train(const struct ao_config *cfg, ao_train_opts *o)
{
    struct parent_ctx pc = {cfg, o->run_name, NULL, NULL};
    ao_launch_req req = {.backend = o->backend,
                         .nproc = o->nproc,
                         .cpu_nproc = 1,
                         .spawn = 1,
                         .all_ranks_output = o->all_ranks,
                         .stop_handler = 1,
                         .check = parent_check,
                         .ended = parent_ended,
                         .ctx = &pc};
    ao_rank_info ri;
    ao_launch_role role;
    int rc = ao_launch_ranks(o->argc, o->argv, &req, &ri, &role);
    /* Under a launcher with no parent of ours, rank 0 makes the directory. */
    if (role == AO_ROLE_RANK && ri.rank == 0 && !getenv(AO_RUN_ID_ENV))
        rc = open_exporter(cfg, &pc.ex);
    free(pc.run_dir);
    if (role != AO_ROLE_DONE && rc == 0) {
        /* Only a solo rank 0 owns the terminal: under a launcher its output goes
         * through a line prefixer, where an in-place line would be noise. */
        o->progress = role == AO_ROLE_SOLO && isatty(STDOUT_FILENO);
        rc = train_rank(cfg, o, &ri, role == AO_ROLE_RANK ? pc.ex : NULL);
    }
    ao_export_close(pc.ex);
    return rc;
}
