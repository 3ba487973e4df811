/* aorta train on the cuda backend, end to end through the binary ($AORTA):
 * config/tiny.yaml with the teacher data set and dropout 0.1, 10 steps, fp32
 * GEMMs (training.tf32=false; the default true would leave 1e-4 behind).
 *  1. 1 GPU against the cpu backend (the numerical reference), same seed:
 *     the logged global losses agree step by step (relative <= 1e-4).
 *  2. dataset.placement device on 1 GPU gives the losses of host placement
 *     (the same samples, generated on the device).
 *  3. training.tf32 (TF32 GEMMs) runs and stays near fp32 (relative <= 5e-2:
 *     this checks the wiring, not TF32's accuracy).
 *  4. With 2 GPUs: 2 ranks x batch B under full_shard = 1 rank x 2B
 *     (relative <= 1e-4), and both ranks log the same global loss.
 *  5. bf16 GEMMs with fsdp.param_dtype bf16 (the GEMMs multiply the gathered
 *     bf16 weights; only the other parameters are cast back to fp32) stay
 *     near param_dtype fp32 (relative <= 1e-2: the two differ only by the
 *     bf16 rounding of biases and LayerNorm weights; a part left uncast
 *     would be zero or another unit's).
 * Every record of every run must hold the §7 invariants (overlap <= min(C,
 * M), step >= max(C, M), exposed = M - overlap, ratios in [0, 1], ...).
 * Prints one PASS/FAIL line per comparison and the verdict last. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "gpu/aorta_runs.h"
#include "core/jsonl.h"
#include "runtime/device.h"

#define STEPS    10
#define LOSS_TOL 1e-4

/* Runs `aorta train` into tmp/out/NAME; returns its exit status. */
static int train(const char *name, const char *backend, int nproc, int batch, const char *extra)
{
    char args[4096];
    snprintf(args, sizeof args,
             "train --backend %s --config '%s/config/tiny.yaml' --nproc %d --run-name %s "
             "--override training.output_dir='%s/out' training.max_steps=%d "
             "training.summary_skip_steps=2 training.log_interval=5 model.dropout=0.1 "
             "dataset.target=teacher dataset.seed=42 training.tf32=false training.batch_size=%d %s",
             backend, srcdir, nproc, name, tmp, STEPS, batch, extra);
    double secs;
    int rc = run_aorta(name, args, &secs);
    printf("run %-12s %s, %d rank(s) x batch %d %s: exit %d (%.1f s)\n", name, backend, nproc,
           batch, extra, rc, secs);
    return rc;
}

#define EPS 1e-6 /* ms: the intervals' rounding */

/* The §7 invariants of one record; returns the number violated (printed). */
static int record_invariants(const char *what, const ao_iter_record *r, int rank, int world)
{
    const ao_overlap *m = &r->m;
    int bad = 0;
#define INV(cond)                                                                                  \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            bad++;                                                                                 \
            printf("  %s step %lld (%s): invariant %s does not hold (step %.6f compute %.6f "      \
                   "comm %.6f overlap %.6f exposed %.6f idle %.6f)\n",                             \
                   what, r->step, r->phase, #cond, m->step_ms, m->compute_ms, m->comm_ms,          \
                   m->overlap_ms, m->exposed_comm_ms, m->idle_ms);                                 \
        }                                                                                          \
    } while (0)
    INV(r->rank == rank && r->world_size == world);
    INV(m->step_ms > 0);
    INV(m->compute_ms >= 0 && m->comm_ms >= 0 && m->copy_ms >= 0 && m->overlap_ms >= 0);
    INV(m->overlap_ms <= fmin(m->compute_ms, m->comm_ms) + EPS);
    INV(m->step_ms + EPS >= fmax(fmax(m->compute_ms, m->comm_ms), m->copy_ms));
    INV(fabs(m->exposed_comm_ms - (m->comm_ms - m->overlap_ms)) <= EPS);
    INV(m->idle_ms >= -EPS && m->idle_ms <= m->step_ms + EPS);
    INV(isnan(m->overlap_ratio) || (m->overlap_ratio >= 0 && m->overlap_ratio <= 1 + 1e-9));
    INV(isnan(m->compute_covered_ratio) ||
        (m->compute_covered_ratio >= 0 && m->compute_covered_ratio <= 1 + 1e-9));
    INV(isnan(m->overlap_efficiency) ||
        (m->overlap_efficiency >= 0 && m->overlap_efficiency <= 1 + 1e-9));
    if (strcmp(r->phase, "train") == 0) {
        INV(m->compute_ms > 0);
        INV(isfinite(r->loss) && r->loss > 0);
        INV(isfinite(r->grad_norm) && r->grad_norm > 0);
        INV(isfinite(r->lr) && r->lr >= 0);
    }
#undef INV
    return bad;
}

/* The train-phase global losses of one rank's file into loss[STEPS] (also
 * checking every record's invariants); 0 when all is well. */
static int read_losses(const char *name, int rank, int world, double *loss, double *local)
{
    char path[512];
    snprintf(path, sizeof path, "%s/out/%s/rank_%02d_metrics.jsonl", tmp, name, rank);
    ao_iter_record *recs = NULL;
    size_t n = 0;
    if (ao_jsonl_read_all(path, &recs, &n, NULL) != 0) {
        printf("FAIL: %s: cannot read %s\n", name, path);
        return 1;
    }
    int bad = 0, seen = 0;
    for (size_t i = 0; i < n; i++) {
        char what[64];
        snprintf(what, sizeof what, "%s rank %d", name, rank);
        bad += record_invariants(what, &recs[i], rank, world);
        if (strcmp(recs[i].phase, "train") != 0) continue;
        long long s = recs[i].step;
        if (s < 0 || s >= STEPS || s != seen) {
            printf("  %s: train record %d has step %lld\n", what, seen, s);
            bad++;
            continue;
        }
        loss[s] = recs[i].loss;
        if (local) local[s] = recs[i].loss_local;
        seen++;
    }
    if (seen != STEPS) {
        printf("  %s rank %d: %d train records, expected %d\n", name, rank, seen, STEPS);
        bad++;
    }
    ao_iter_records_free(recs, n);
    printf("%s: %s rank %d: %zu records, invariants%s\n", bad ? "FAIL" : "PASS", name, rank, n,
           bad ? " violated" : " hold");
    return bad;
}

/* Losses of run `got` against run `ref`, step by step. */
static void compare(const char *title, const char *got, const char *ref, const double *a,
                    const double *b, double tol)
{
    double worst = 0;
    int worst_step = 0;
    for (int s = 0; s < STEPS; s++) {
        double rel = fabs(a[s] - b[s]) / fabs(b[s]);
        if (!isnan(worst) && (isnan(rel) || rel > worst)) { /* a NaN is the worst */
            worst = rel;
            worst_step = s;
        }
    }
    int ok = worst <= tol;
    printf("%s: %s: %s vs %s: worst relative loss difference %.3e at step %d (%.9g vs %.9g), "
           "bound %.0e\n",
           ok ? "PASS" : "FAIL", title, got, ref, worst, worst_step, a[worst_step], b[worst_step],
           tol);
    if (!ok)
        for (int s = 0; s < STEPS; s++) printf("  step %d: %.9g %.9g\n", s, a[s], b[s]);
    CHECK(ok, "%s: losses differ", title);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    int ngpu = ao_device_count("cuda");
    GPU_SKIP_UNLESS(ngpu > 0, "no CUDA device visible");
    if (runs_begin("train_cuda")) return 1;
    printf("%d CUDA device(s); runs under %s\n", ngpu, tmp);

    double cpu[STEPS], gpu[STEPS], dev[STEPS], one2b[STEPS], two0[STEPS], two1[STEPS];
    double loc0[STEPS], loc1[STEPS], tf32[STEPS], pd32[STEPS], pd16[STEPS];
    double *all[] = {cpu, gpu, dev, one2b, two0, two1, loc0, loc1, tf32, pd32, pd16};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) /* unread = NAN, which fails */
        for (int s = 0; s < STEPS; s++) all[i][s] = NAN;

    /* 1. cuda against the cpu reference */
    int rc_cpu = train("cpu", "cpu", 1, 4, "");
    int rc_gpu = train("cuda", "cuda", 1, 4, "");
    CHECK(rc_cpu == 0, "the cpu reference run exited %d", rc_cpu);
    CHECK(rc_gpu == 0, "the cuda run exited %d", rc_gpu);
    if (rc_gpu == 0) CHECK(read_losses("cuda", 0, 1, gpu, NULL) == 0, "cuda run records");
    if (rc_cpu == 0) CHECK(read_losses("cpu", 0, 1, cpu, NULL) == 0, "cpu run records");
    if (rc_cpu == 0 && rc_gpu == 0)
        compare("1 GPU = cpu backend", "cuda", "cpu", gpu, cpu, LOSS_TOL);
    else
        printf("FAIL: 1 GPU = cpu backend: not compared (a run failed)\n");

    /* 2. samples generated on the device */
    int rc_dev = train("cuda_devdata", "cuda", 1, 4, "dataset.placement=device");
    CHECK(rc_dev == 0, "the device-placement run exited %d", rc_dev);
    if (rc_dev == 0 && read_losses("cuda_devdata", 0, 1, dev, NULL) == 0 && rc_gpu == 0)
        compare("placement device = host", "cuda_devdata", "cuda", dev, gpu, LOSS_TOL);

    /* 3. TF32 GEMMs (a later override wins) */
    int rc_tf32 = train("cuda_tf32", "cuda", 1, 4, "training.tf32=true");
    CHECK(rc_tf32 == 0, "the tf32 run exited %d", rc_tf32);
    if (rc_tf32 == 0 && read_losses("cuda_tf32", 0, 1, tf32, NULL) == 0 && rc_gpu == 0)
        compare("tf32 near fp32", "cuda_tf32", "cuda", tf32, gpu, 5e-2);

    /* 5. 16-bit gathers multiplied directly */
    const char *bf16 = "training.mixed_precision=bf16 fsdp.sharding_strategy=full_shard";
    char with16[256];
    snprintf(with16, sizeof with16, "%s fsdp.param_dtype=bf16", bf16);
    char with32[256];
    snprintf(with32, sizeof with32, "%s fsdp.param_dtype=fp32", bf16);
    int rc_p32 = train("cuda_bf16_pd32", "cuda", 1, 4, with32);
    int rc_p16 = train("cuda_bf16_pd16", "cuda", 1, 4, with16);
    CHECK(rc_p32 == 0 && rc_p16 == 0, "param_dtype runs exited %d, %d", rc_p32, rc_p16);
    if (rc_p32 == 0 && rc_p16 == 0 && read_losses("cuda_bf16_pd32", 0, 1, pd32, NULL) == 0 &&
        read_losses("cuda_bf16_pd16", 0, 1, pd16, NULL) == 0)
        compare("param_dtype bf16 near fp32", "cuda_bf16_pd16", "cuda_bf16_pd32", pd16, pd32, 1e-2);

    /* 4. two GPUs under full_shard = one GPU with twice the batch */
    if (ngpu >= 2) {
        int rc_1 = train("cuda_1x8", "cuda", 1, 8, "");
        int rc_2 = train("cuda_2x4", "cuda", 2, 4, "fsdp.sharding_strategy=full_shard");
        CHECK(rc_1 == 0 && rc_2 == 0, "2-GPU comparison runs exited %d, %d", rc_1, rc_2);
        int ok = rc_1 == 0 && rc_2 == 0;
        if (ok) {
            ok = read_losses("cuda_1x8", 0, 1, one2b, NULL) == 0;
            ok = read_losses("cuda_2x4", 0, 2, two0, loc0) == 0 && ok;
            ok = read_losses("cuda_2x4", 1, 2, two1, loc1) == 0 && ok;
            CHECK(ok, "2-GPU run records");
            compare("2 GPUs full_shard = 1 GPU x 2B", "cuda_2x4", "cuda_1x8", two0, one2b,
                    LOSS_TOL);
            int same = 1, local_differs = 0;
            for (int s = 0; s < STEPS; s++) {
                same &= two0[s] == two1[s];
                local_differs |= loc0[s] != loc1[s];
            }
            printf("%s: the 2 ranks log the same global loss and different local losses\n",
                   same && local_differs ? "PASS" : "FAIL");
            CHECK(same && local_differs, "rank agreement");
        }
    } else {
        printf("SKIP: 2 GPUs full_shard = 1 GPU x 2B: only %d GPU visible\n", ngpu);
    }

    runs_end();
    return check_result("test_train_cuda");
}
