/* The Prometheus text exposition of a followed run (export/prom.h). Values
 * come through runs/'s metric table (ao_metric_value), so a series means
 * what the summary's column of the same record field means. */
#include "export/prom.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/metrics.h"
#include "core/text.h"
#include "runs/rundata.h"

typedef enum vsrc {
    V_METRIC,     /* report metric `metric`, times scale */
    V_KIND,       /* report metric `metric` % kind name, per collective kind */
    V_KIND_OPS,   /* collective ops of the kind in the step */
    V_KIND_BYTES, /* collective bytes of the kind in the step */
    V_STEPS,      /* train records read */
    V_LAST_STEP,  /* the latest record's step */
    V_LAST_TIME,  /* its wall_time */
    V_BAD_LINES,  /* lines that were no record */
    V_RANK_FILES, /* rank files in the directory (per run, no rank label) */
} vsrc;

typedef struct family {
    const char *name, *type;
    vsrc src;
    const char *metric;
    double scale;
    const char *help;
} family;

#define MS 1e-3

/* Names by Prometheus conventions: base units as suffixes, counters in
 * _total, one meaning per name (a kind-labelled name holds kinds only). */
static const family families[] = {
    {"aorta_steps_total", "counter", V_STEPS, NULL, 1,
     "Train-step records the rank has written (lines of its metrics file)."},
    {"aorta_last_step", "gauge", V_LAST_STEP, NULL, 1, "Step number of the rank's latest record."},
    {"aorta_last_step_timestamp_seconds", "gauge", V_LAST_TIME, NULL, 1,
     "UNIX time at which the latest step's window began (the record's wall_time)."},
    {"aorta_step_seconds", "gauge", V_METRIC, "step_ms", MS,
     "The latest step's window W, first op start to last op end (step_ms)."},
    {"aorta_compute_seconds", "gauge", V_METRIC, "compute_ms", MS,
     "Union of the latest step's compute intervals, |C| (compute_ms)."},
    {"aorta_comm_seconds", "gauge", V_METRIC, "comm_ms", MS,
     "Union of the latest step's communication intervals, |M| (comm_ms)."},
    {"aorta_copy_seconds", "gauge", V_METRIC, "copy_ms", MS,
     "Union of the latest step's copy intervals, |X| (copy_ms)."},
    {"aorta_overlap_seconds", "gauge", V_METRIC, "overlap_ms", MS,
     "Communication hidden behind compute in the latest step, |C and M| (overlap_ms)."},
    {"aorta_step_exposed_comm_seconds", "gauge", V_METRIC, "exposed_comm_ms", MS,
     "Communication of any kind that no compute hid in the latest step, |M \\ C| "
     "(exposed_comm_ms); by kind: aorta_exposed_comm_seconds."},
    {"aorta_idle_seconds", "gauge", V_METRIC, "idle_ms", MS,
     "Time of the latest step's window with nothing running (idle_ms)."},
    {"aorta_host_wait_seconds", "gauge", V_METRIC, "host_wait_ms", MS,
     "Idle time of the latest step with nothing enqueued: the device waited for the host "
     "(host_wait_ms)."},
    {"aorta_data_wait_seconds", "gauge", V_METRIC, "data_wait_ms", MS,
     "Host time the latest step's issue waited for the data loader (data_wait_ms)."},
    {"aorta_host_gap_seconds", "gauge", V_METRIC, "host_gap_ms", MS,
     "The host's share of the gap before the latest step's window (host_gap_ms)."},
    {"aorta_overlap_ratio", "gauge", V_METRIC, "overlap_ratio", 1,
     "Share of the latest step's communication hidden behind compute, |C and M| / |M|; "
     "absent when the step had no communication."},
    {"aorta_compute_covered_ratio", "gauge", V_METRIC, "compute_covered_ratio", 1,
     "Share of the latest step's compute that ran beside communication, |C and M| / |C|."},
    {"aorta_overlap_efficiency_ratio", "gauge", V_METRIC, "overlap_efficiency", 1,
     "|C and M| / min(|C|, |M|) of the latest step: 1 when the shorter is fully hidden."},
    {"aorta_tokens_per_second", "gauge", V_METRIC, "tokens_per_s", 1,
     "Tokens the latest step processed per second (aorta train)."},
    {"aorta_memory_peak_bytes", "gauge", V_METRIC, "mem_peak_mb", 1048576.0,
     "The rank's device-memory high-water mark so far (aorta train)."},
    {"aorta_loss", "gauge", V_METRIC, "loss", 1, "Loss of the latest step (aorta train)."},
    {"aorta_grad_norm", "gauge", V_METRIC, "grad_norm", 1,
     "Gradient norm of the latest step (aorta train)."},
    {"aorta_exposed_comm_seconds", "gauge", V_KIND, "exposed_%s_ms", MS,
     "Communication of this collective kind that no compute hid in the latest step, "
     "|M_kind \\ C| (exposed_<kind>_ms)."},
    {"aorta_collective_seconds", "gauge", V_KIND, "%s_ms", MS,
     "Union of the latest step's intervals of this collective kind, |M_kind|."},
    {"aorta_collective_overlap_seconds", "gauge", V_KIND, "compute_%s_ms", MS,
     "Compute beside this collective kind in the latest step, |C and M_kind| "
     "(compute_<kind>_ms)."},
    {"aorta_collective_busbw_bytes_per_second", "gauge", V_KIND, "busbw_%s_gbps", 1e9,
     "Bus bandwidth of this collective kind in the latest step (nccl-tests factors)."},
    {"aorta_collective_ops", "gauge", V_KIND_OPS, NULL, 1,
     "Collectives of this kind in the latest step."},
    {"aorta_collective_bytes", "gauge", V_KIND_BYTES, NULL, 1,
     "Bytes of the collectives of this kind in the latest step (nccl-tests size)."},
    {"aorta_export_bad_lines_total", "counter", V_BAD_LINES, NULL, 1,
     "Complete lines of the rank's metrics file that were no metrics record (skipped)."},
    {"aorta_export_rank_files", "gauge", V_RANK_FILES, NULL, 1,
     "rank_*_metrics.jsonl files in the run directory."},
};

#define NFAMILIES (sizeof families / sizeof families[0])

size_t ao_prom_family_count(void)
{
    return NFAMILIES;
}

void ao_prom_family(size_t i, const char **name, const char **type, const char **help)
{
    *name = families[i].name;
    *type = families[i].type;
    *help = families[i].help;
}

static void escaped(FILE *out, const char *s, int quote)
{
    for (; *s; s++) {
        if (*s == '\\')
            fputs("\\\\", out);
        else if (*s == '\n')
            fputs("\\n", out);
        else if (*s == '"' && quote)
            fputs("\\\"", out);
        else
            fputc(*s, out);
    }
}

void ao_prom_label_value(FILE *out, const char *s)
{
    escaped(out, s, 1);
}

void ao_prom_help_text(FILE *out, const char *s)
{
    escaped(out, s, 0);
}

static void series(FILE *o, const char *name, const ao_follow *f, const ao_follow_rank *r,
                   const char *kind)
{
    fprintf(o, "%s{run=\"", name);
    ao_prom_label_value(o, f->run);
    if (r) {
        fputs("\",rank=\"", o);
        ao_prom_label_value(o, r->label);
    }
    if (kind) {
        fputs("\",kind=\"", o);
        ao_prom_label_value(o, kind);
    }
    fputs("\"} ", o);
}

/* A sample; none for NAN (a value the record does not have). */
static void sample(FILE *o, const char *name, const ao_follow *f, const ao_follow_rank *r,
                   const char *kind, double v)
{
    if (isnan(v)) return;
    char num[40];
    if (isinf(v))
        snprintf(num, sizeof num, "%sInf", v > 0 ? "+" : "-");
    else
        ao_format_double(num, sizeof num, v);
    series(o, name, f, r, kind);
    fprintf(o, "%s\n", num);
}

static void sample_int(FILE *o, const char *name, const ao_follow *f, const ao_follow_rank *r,
                       const char *kind, unsigned long long v)
{
    series(o, name, f, r, kind);
    fprintf(o, "%llu\n", v);
}

static double metric(const char *name, const ao_iter_record *rec)
{
    int i = ao_metric_find(name);
    return i < 0 ? NAN : ao_metric_value((size_t)i, rec);
}

static void kind_samples(FILE *o, const family *fam, const ao_follow *f, const ao_follow_rank *r)
{
    for (int k = 0; k < AO_NKINDS; k++) {
        const char *kind = ao_coll_kind_name((ao_coll_kind)k);
        const ao_kind_stats *ks = &r->last.m.kinds[k];
        if (ks->ops <= 0) continue; /* the step ran no collective of this kind */
        if (fam->src == V_KIND_OPS) {
            sample_int(o, fam->name, f, r, kind, (unsigned long long)ks->ops);
        } else if (fam->src == V_KIND_BYTES) {
            sample_int(o, fam->name, f, r, kind, ks->bytes);
        } else {
            char name[64];
            snprintf(name, sizeof name, fam->metric, kind);
            sample(o, fam->name, f, r, kind, metric(name, &r->last) * fam->scale);
        }
    }
}

static void rank_samples(FILE *o, const family *fam, const ao_follow *f, const ao_follow_rank *r)
{
    switch (fam->src) {
    case V_STEPS:
        sample_int(o, fam->name, f, r, NULL, (unsigned long long)r->steps);
        return;
    case V_BAD_LINES:
        sample_int(o, fam->name, f, r, NULL, (unsigned long long)r->bad_lines);
        return;
    case V_RANK_FILES:
        return;
    default:
        break;
    }
    if (!r->have_last) return;
    switch (fam->src) {
    case V_LAST_STEP:
        sample_int(o, fam->name, f, r, NULL, (unsigned long long)r->last.step);
        break;
    case V_LAST_TIME:
        sample(o, fam->name, f, r, NULL, r->last.wall_time);
        break;
    case V_METRIC:
        sample(o, fam->name, f, r, NULL, metric(fam->metric, &r->last) * fam->scale);
        break;
    default:
        kind_samples(o, fam, f, r);
        break;
    }
}

char *ao_prom_render(const ao_follow *f, size_t *len)
{
    char *text = NULL;
    size_t n = 0;
    FILE *o = open_memstream(&text, &n);
    if (!o) ao_fatal(AO_EXIT_FAIL, "export", "out of memory");
    for (size_t i = 0; i < NFAMILIES; i++) {
        const family *fam = &families[i];
        fprintf(o, "# HELP %s ", fam->name);
        ao_prom_help_text(o, fam->help);
        fprintf(o, "\n# TYPE %s %s\n", fam->name, fam->type);
        if (fam->src == V_RANK_FILES)
            sample_int(o, fam->name, f, NULL, NULL, (unsigned long long)f->n);
        for (size_t r = 0; r < f->n; r++) rank_samples(o, fam, f, &f->ranks[r]);
    }
    if (fclose(o) != 0 || !text) ao_fatal(AO_EXIT_FAIL, "export", "out of memory");
    *len = n;
    return text;
}
