/* One forward + backward of aorta's whole model, dumped as .npy files for an
 * independent implementation to check (tests/gpu/torch_model.py).
 *
 *     model_dump CONFIG OUTDIR [--backend cpu|cuda] [--compute fp32|bf16]
 *                [--set key=value]...
 *
 * The model shape, batch size and seeds come from CONFIG through the config
 * API (--set overrides keys as `aorta --override` does). model.dropout must
 * be 0: dropout masks come from aorta's counter-based RNG, which no other
 * implementation draws, so a comparison with another framework only means
 * something without them (the masks are checked against the CPU reference by
 * tests/gpu/test_model_cuda.c).
 *
 * The micro-batch is samples 0..B-1 of the synthetic data (dataset.target as
 * configured), step 0, and the loss is normalised by its token count B*T.
 * OUTDIR receives (float32 or int32, little-endian):
 *   model.json                the shape, the backend and the compute mode
 *   dense.npy [B,T,F,D]  ids.npy [B,T,S] (int32)  target.npy, weight.npy [B,T]
 *   loss.npy [1]
 *   param_<u>.npy, grad_<u>.npy  [n_u] unit u's flat parameters and their
 *                                gradient (model.h's unit layout)
 * Exits 0, 2 on a usage error, 77 when the backend has no device here, 1 on
 * any other failure. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/config.h"
#include "core/error.h"
#include "data/data.h"
#include "model/model.h"
#include "model/ops_ref.h"
#include "runtime/device.h"
#ifdef AORTA_HAVE_CUDA
#include "model/model_cuda.h"
#endif

#define EXIT_SKIP 77
#define MAX_SETS  32

/* ---- .npy writing (format version 1.0) -------------------------------------- */

/* The header's dict, padded with spaces and ended by '\n' so that the data
 * starts at a multiple of 64 bytes, as numpy writes it. */
static int npy_write(const char *dir, const char *name, const char *descr, const void *data,
                     size_t elem_size, const int64_t *shape, int rank)
{
    char dims[160] = "";
    size_t used = 0;
    for (int i = 0; i < rank; i++)
        used += (size_t)snprintf(dims + used, sizeof dims - used, "%lld,%s", (long long)shape[i],
                                 i + 1 < rank ? " " : "");
    char header[256];
    int len = snprintf(header, sizeof header,
                       "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, dims);
    const int preamble = 10; /* magic (6), version (2), header length (2) */
    while ((preamble + len + 1) % 64 != 0) header[len++] = ' ';
    header[len++] = '\n';

    size_t count = 1;
    for (int i = 0; i < rank; i++) count *= (size_t)shape[i];
    char *path = ao_asprintf("%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) {
        ao_error("model_dump", "cannot write %s: %s", path, strerror(errno));
        free(path);
        return AO_EXIT_FAIL;
    }
    const unsigned char magic[10] = {0x93,
                                     'N',
                                     'U',
                                     'M',
                                     'P',
                                     'Y',
                                     1,
                                     0,
                                     (unsigned char)(len & 0xff),
                                     (unsigned char)(len >> 8)};
    int ok = fwrite(magic, 1, sizeof magic, f) == sizeof magic &&
             fwrite(header, 1, (size_t)len, f) == (size_t)len &&
             fwrite(data, elem_size, count, f) == count;
    ok = (fclose(f) == 0) && ok;
    if (!ok) ao_error("model_dump", "cannot write %s: %s", path, strerror(errno));
    free(path);
    return ok ? 0 : AO_EXIT_FAIL;
}

static int npy_f32(const char *dir, const char *name, const float *data, const int64_t *shape,
                   int rank)
{
    return npy_write(dir, name, "<f4", data, sizeof(float), shape, rank);
}

/* ---- arguments --------------------------------------------------------------- */

typedef struct {
    const char *config, *out, *backend;
    ao_compute_mode compute;
    const char *compute_name;
    char *sets[MAX_SETS];
    int n_sets;
} options;

static int usage(void)
{
    fprintf(stderr, "usage: model_dump CONFIG OUTDIR [--backend cpu|cuda] [--compute fp32|bf16] "
                    "[--set key=value]...\n");
    return AO_EXIT_USAGE;
}

static int parse_args(int argc, char **argv, options *o)
{
    *o = (options){.backend = "cpu", .compute = AO_COMPUTE_DEFAULT, .compute_name = "fp32"};
    int positional = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const int has_value = i + 1 < argc;
        if (strcmp(a, "--backend") == 0 && has_value) {
            o->backend = argv[++i];
            if (strcmp(o->backend, "cpu") != 0 && strcmp(o->backend, "cuda") != 0) {
                ao_error("model_dump", "--backend must be cpu or cuda, got '%s'", o->backend);
                return AO_EXIT_USAGE;
            }
        } else if (strcmp(a, "--compute") == 0 && has_value) {
            o->compute_name = argv[++i];
            if (strcmp(o->compute_name, "fp32") == 0) {
                o->compute = AO_COMPUTE_DEFAULT;
            } else if (strcmp(o->compute_name, "bf16") == 0) {
                o->compute = AO_COMPUTE_BF16;
            } else {
                ao_error("model_dump", "--compute must be fp32 or bf16, got '%s'", o->compute_name);
                return AO_EXIT_USAGE;
            }
        } else if (strcmp(a, "--set") == 0 && has_value) {
            if (o->n_sets == MAX_SETS) {
                ao_error("model_dump", "at most %d --set options", MAX_SETS);
                return AO_EXIT_USAGE;
            }
            o->sets[o->n_sets++] = argv[++i];
        } else if (a[0] == '-') {
            ao_error("model_dump", "unknown option or missing value: '%s'", a);
            return usage();
        } else if (positional == 0) {
            o->config = a, positional++;
        } else if (positional == 1) {
            o->out = a, positional++;
        } else {
            ao_error("model_dump", "unexpected argument '%s'", a);
            return usage();
        }
    }
    if (positional != 2) return usage();
    if (strcmp(o->compute_name, "bf16") == 0 && strcmp(o->backend, "cuda") != 0) {
        ao_error("model_dump", "--compute bf16 needs --backend cuda (the cpu model is fp32 only)");
        return AO_EXIT_USAGE;
    }
    return 0;
}

static int shape_from_config(const options *o, ao_model_shape *s, int *target_kind)
{
    struct ao_config cfg;
    if (ao_config_load(&cfg, o->config, o->sets, o->n_sets)) {
        ao_config_free(&cfg);
        return AO_EXIT_USAGE;
    }
    *s = (ao_model_shape){.batch = cfg.training.batch_size,
                          .seq = cfg.dataset.sequence_length,
                          .num_dense = cfg.model.num_dense_features,
                          .dense_dim = cfg.model.dense_dim,
                          .sparse = cfg.dataset.sparse_features,
                          .vocab = cfg.model.vocab_size,
                          .emb_dim = cfg.model.embedding_dim,
                          .dim = cfg.model.model_dim,
                          .heads = cfg.model.num_heads,
                          .layers = cfg.model.num_layers,
                          .ff = ao_config_ff_dim(&cfg),
                          .mlp_hidden = cfg.model.mlp_hidden_dim,
                          .dropout = (float)cfg.model.dropout,
                          .seed = (uint64_t)cfg.dataset.seed};
    *target_kind = (int)cfg.dataset.target;
    ao_config_free(&cfg);
    if (s->dropout != 0.0f) {
        ao_error("model_dump",
                 "model.dropout must be 0 for a comparison with another framework, "
                 "got %g",
                 (double)s->dropout);
        ao_hint("add --set model.dropout=0");
        return AO_EXIT_USAGE;
    }
    return 0;
}

static int write_meta(const options *o, const ao_model_shape *s)
{
    char *path = ao_asprintf("%s/model.json", o->out);
    FILE *f = fopen(path, "w");
    if (!f) {
        ao_error("model_dump", "cannot write %s: %s", path, strerror(errno));
        free(path);
        return AO_EXIT_FAIL;
    }
    fprintf(f,
            "{\"batch\": %d, \"seq\": %d, \"num_dense\": %d, \"dense_dim\": %d, \"sparse\": %d, "
            "\"vocab\": %d, \"emb_dim\": %d, \"dim\": %d, \"heads\": %d, \"layers\": %d, "
            "\"ff\": %d, \"mlp_hidden\": %d, \"ln_eps\": %g, \"normalizer\": %d, "
            "\"backend\": \"%s\", \"compute\": \"%s\"}\n",
            s->batch, s->seq, s->num_dense, s->dense_dim, s->sparse, s->vocab, s->emb_dim, s->dim,
            s->heads, s->layers, s->ff, s->mlp_hidden, (double)AO_LN_EPS, s->batch * s->seq,
            o->backend, o->compute_name);
    const int ok = fclose(f) == 0;
    if (!ok) ao_error("model_dump", "cannot write %s: %s", path, strerror(errno));
    free(path);
    return ok ? 0 : AO_EXIT_FAIL;
}

/* ---- the run ------------------------------------------------------------------- */

#define MAX_UNITS 64

typedef struct {
    ao_model_shape shape;
    int units;
    size_t counts[MAX_UNITS];
    float *params[MAX_UNITS], *grads[MAX_UNITS]; /* host copies */
    float *dense, *target, *weight;              /* host batch */
    int32_t *ids;
    size_t n_tok, n_dense, n_ids;
    float loss;
} dump;

static void dump_free(dump *d)
{
    for (int u = 0; u < d->units; u++) free(d->params[u]), free(d->grads[u]);
    free(d->dense), free(d->ids), free(d->target), free(d->weight);
}

/* Initial parameters and the batch, on the host. */
static int dump_prepare(dump *d, int target_kind)
{
    const ao_model_shape *s = &d->shape;
    d->units = ao_model_units(s);
    if (d->units > MAX_UNITS) {
        ao_error("model_dump", "model.num_layers must be below %d here, got %d", MAX_UNITS,
                 s->layers);
        return AO_EXIT_USAGE;
    }
    for (int u = 0; u < d->units; u++) {
        d->counts[u] = ao_model_unit_params(s, u);
        d->params[u] = ao_malloc(d->counts[u] * sizeof(float));
        d->grads[u] = ao_calloc(d->counts[u], sizeof(float));
        ao_model_init_unit(s, u, d->params[u]);
    }
    const ao_data_shape ds = {s->seq, s->num_dense, s->dense_dim, s->sparse, s->vocab};
    d->n_tok = (size_t)s->batch * s->seq;
    d->n_dense = d->n_tok * (size_t)s->num_dense * s->dense_dim;
    d->n_ids = d->n_tok * (size_t)s->sparse;
    d->dense = ao_malloc(d->n_dense * sizeof(float));
    d->ids = ao_malloc(d->n_ids * sizeof(int32_t));
    d->target = ao_malloc(d->n_tok * sizeof(float));
    d->weight = ao_malloc(d->n_tok * sizeof(float));
    return ao_data_fill(&ds, s->seed, target_kind, 0, s->batch, d->dense, d->ids, d->target,
                        d->weight);
}

/* Device copies of the parameters, gradients and batch, one forward + backward
 * (as tests/gpu/test_model_cuda.c drives it), gradients and loss back. */
static int dump_run(dump *d, const options *o)
{
    ao_device *dev = ao_device_open(o->backend, 0);
    if (!dev) return AO_EXIT_FAIL;
    ao_stream *st = ao_stream_create(dev, "compute", 0);
    ao_model *m = ao_model_create(dev, &d->shape);
    if (!m) {
        ao_stream_destroy(st);
        ao_device_close(dev);
        return AO_EXIT_FAIL;
    }
#ifdef AORTA_HAVE_CUDA
    if (strcmp(o->backend, "cuda") == 0) ao_model_cuda_set_compute(m, o->compute);
#endif
    float *params[MAX_UNITS], *grads[MAX_UNITS];
    for (int u = 0; u < d->units; u++) {
        const size_t bytes = d->counts[u] * sizeof(float);
        params[u] = ao_dev_alloc(dev, bytes);
        grads[u] = ao_dev_alloc(dev, bytes);
        ao_copy_async(dev, params[u], d->params[u], bytes, AO_H2D, st);
        ao_memset_async(dev, grads[u], 0, bytes, st);
    }
    float *loss = ao_dev_alloc(dev, sizeof(float));
    float *dense = ao_dev_alloc(dev, d->n_dense * sizeof(float));
    int32_t *ids = ao_dev_alloc(dev, d->n_ids * sizeof(int32_t));
    float *target = ao_dev_alloc(dev, d->n_tok * sizeof(float));
    float *weight = ao_dev_alloc(dev, d->n_tok * sizeof(float));
    ao_copy_async(dev, dense, d->dense, d->n_dense * sizeof(float), AO_H2D, st);
    ao_copy_async(dev, ids, d->ids, d->n_ids * sizeof(int32_t), AO_H2D, st);
    ao_copy_async(dev, target, d->target, d->n_tok * sizeof(float), AO_H2D, st);
    ao_copy_async(dev, weight, d->weight, d->n_tok * sizeof(float), AO_H2D, st);

    const ao_batch b = {dense, ids, target, weight, 0};
    const double normalizer = (double)d->n_tok;
    const int L = d->shape.layers;
    ao_model_forward_input(m, st, params[0], &b, 0);
    for (int l = 1; l <= L; l++) ao_model_forward_layer(m, st, l, params[l], &b, 0);
    ao_model_forward_head(m, st, params[0], &b, normalizer, loss);
    ao_model_backward_head(m, st, params[0], grads[0], &b, normalizer);
    for (int l = L; l >= 1; l--) ao_model_backward_layer(m, st, l, params[l], grads[l], &b, 0);
    ao_model_backward_input(m, st, params[0], grads[0], &b);

    ao_copy_async(dev, &d->loss, loss, sizeof(float), AO_D2H, st);
    for (int u = 0; u < d->units; u++)
        ao_copy_async(dev, d->grads[u], grads[u], d->counts[u] * sizeof(float), AO_D2H, st);
    ao_stream_sync(st);

    for (int u = 0; u < d->units; u++) ao_dev_free(dev, params[u]), ao_dev_free(dev, grads[u]);
    ao_dev_free(dev, loss), ao_dev_free(dev, dense), ao_dev_free(dev, ids);
    ao_dev_free(dev, target), ao_dev_free(dev, weight);
    ao_model_destroy(m);
    ao_stream_destroy(st);
    ao_device_close(dev);
    return 0;
}

static int dump_write(const dump *d, const options *o)
{
    const ao_model_shape *s = &d->shape;
    const int64_t dense_shape[4] = {s->batch, s->seq, s->num_dense, s->dense_dim};
    const int64_t ids_shape[3] = {s->batch, s->seq, s->sparse};
    const int64_t tok_shape[2] = {s->batch, s->seq};
    const int64_t one = 1;
    int rc = write_meta(o, s);
    if (!rc) rc = npy_f32(o->out, "dense.npy", d->dense, dense_shape, 4);
    if (!rc) rc = npy_write(o->out, "ids.npy", "<i4", d->ids, sizeof(int32_t), ids_shape, 3);
    if (!rc) rc = npy_f32(o->out, "target.npy", d->target, tok_shape, 2);
    if (!rc) rc = npy_f32(o->out, "weight.npy", d->weight, tok_shape, 2);
    if (!rc) rc = npy_f32(o->out, "loss.npy", &d->loss, &one, 1);
    for (int u = 0; u < d->units && !rc; u++) {
        char name[32];
        const int64_t n = (int64_t)d->counts[u];
        snprintf(name, sizeof name, "param_%d.npy", u);
        rc = npy_f32(o->out, name, d->params[u], &n, 1);
        snprintf(name, sizeof name, "grad_%d.npy", u);
        if (!rc) rc = npy_f32(o->out, name, d->grads[u], &n, 1);
    }
    return rc;
}

int main(int argc, char **argv)
{
    const uint16_t probe = 1;
    if (*(const unsigned char *)&probe != 1) {
        ao_error("model_dump", "the .npy files are written as little-endian: this host is not");
        return AO_EXIT_FAIL;
    }
    options o;
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc;
    if (ao_device_count(o.backend) < 1) {
        printf("SKIP: no %s device visible\n", o.backend);
        return EXIT_SKIP;
    }
    if (mkdir(o.out, 0755) != 0 && errno != EEXIST) {
        ao_error("model_dump", "cannot create %s: %s", o.out, strerror(errno));
        return AO_EXIT_FAIL;
    }
    dump d = {0};
    int target_kind = 0;
    rc = shape_from_config(&o, &d.shape, &target_kind);
    if (!rc) rc = dump_prepare(&d, target_kind);
    if (!rc) rc = dump_run(&d, &o);
    if (!rc) rc = dump_write(&d, &o);
    if (!rc)
        printf("model_dump: %s %s, %d units, loss %.7g, written to %s\n", o.backend, o.compute_name,
               d.units, (double)d.loss, o.out);
    dump_free(&d);
    return rc;
}
