/* onnx_family.c — an ONNX classifier as one more model family: `pagoda classify --weights
 * MODEL.onnx` (and the library's pgd_model_open) run any ONNX file whose one input is an image
 * batch [N, 3, H, W] and whose first output is [N, classes], through libpagoda's graph path
 * (pgd_graph_*). The family is chosen by the file itself (model_source_open marks .onnx
 * files), never by tensor names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "family.h"

typedef struct onnx_config {
    char path[4096];
    int classes, h, w; /* h, w: 0 when the model takes any size */
} onnx_config;

typedef struct onnx_model {
    pgd_ctx *ctx;
    pgd_graph *g;
    onnx_config cfg;
} onnx_model;

static int onnx_is(const model_source *src)
{
    const char *f = src->meta ? src->meta(src->u, "pagoda.format") : NULL;
    return f && !strcmp(f, "onnx");
}

static int onnx_detect(const model_source *src, const pgd_model_options *opt, void *cfg,
                       pgd_error **err)
{
    (void)opt;
    onnx_config *c = cfg;
    memset(c, 0, sizeof *c);
    snprintf(c->path, sizeof c->path, "%s", src->label);
    pgd_graph *g = NULL;
    int rc = pgd_graph_load(NULL, c->path, &g, err);
    if (rc)
        return rc;
    pgd_graph_io in, out;
    if (pgd_graph_num_inputs(g) != 1 || pgd_graph_get_input(g, 0, &in) || in.ndim != 4 ||
        (in.shape[1] != 3 && in.shape[1] >= 0) || pgd_graph_get_output(g, 0, &out) ||
        out.ndim != 2 || out.shape[1] < 1 || out.shape[1] > 1000000) {
        pgd_graph_destroy(g);
        return pgd_error_set(err, PGD_ERR_UNSUPPORTED,
                             "%s: not an image classifier: classify wants one input [N, 3, H, W] "
                             "and a first output [N, classes] (use pagoda run for other models)",
                             c->path);
    }
    c->classes = (int)out.shape[1];
    c->h = in.shape[2] > 0 ? (int)in.shape[2] : 0;
    c->w = in.shape[3] > 0 ? (int)in.shape[3] : 0;
    pgd_graph_destroy(g);
    return PGD_OK;
}

static int onnx_load(pgd_ctx *ctx, const model_source *src, const void *cfg, void **model,
                     pgd_error **err)
{
    (void)src;
    onnx_model *m = calloc(1, sizeof *m);
    if (!m)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    m->ctx = ctx;
    m->cfg = *(const onnx_config *)cfg;
    int rc = pgd_graph_load(ctx, m->cfg.path, &m->g, err);
    if (rc) {
        free(m);
        return rc;
    }
    *model = m;
    return PGD_OK;
}

static int onnx_random(const char *name, void *cfg, model_source *src, pgd_error **err)
{
    (void)name, (void)cfg, (void)src, (void)err;
    return PGD_ERR_NOT_FOUND; /* an ONNX file brings its own weights */
}

static int onnx_forward(void *model, const float *images, int B, int H, int W, float *logits,
                        double *total_ms, pgd_error **err)
{
    onnx_model *m = model;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int64_t shape[4] = {B, 3, H, W};
    pgd_tensor *x = NULL, *y = NULL;
    int rc = pgd_tensor_create_from(m->ctx, 4, shape, images, &x, err);
    if (!rc)
        rc = pgd_graph_run(m->g, (const pgd_tensor *const *)&x, &y, err);
    if (!rc && pgd_tensor_get_numel(y) != (int64_t)B * m->cfg.classes)
        rc = pgd_error_set(err, PGD_ERR_SHAPE, "%s: the first output has %lld values, not %d x %d",
                           m->cfg.path, (long long)pgd_tensor_get_numel(y), B, m->cfg.classes);
    if (!rc)
        rc = pgd_tensor_download(y, logits, err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (total_ms) /* the download waited for the pass */
        *total_ms =
            1e3 * (double)(t1.tv_sec - t0.tv_sec) + 1e-6 * (double)(t1.tv_nsec - t0.tv_nsec);
    pgd_tensor_destroy(x);
    pgd_tensor_destroy(y);
    return rc;
}

static int onnx_nonfinite(void *model, const float *image, int H, int W, model_probe *p,
                          pgd_error **err)
{
    (void)model, (void)image, (void)H, (void)W, (void)p;
    return pgd_error_set(err, PGD_ERR_UNSUPPORTED, "an ONNX graph has no stage probes");
}

static void onnx_info(const void *cfg, const char *label, pgd_model_info *info)
{
    const onnx_config *c = cfg;
    snprintf(info->family_name, sizeof info->family_name, "onnx");
    snprintf(info->naming, sizeof info->naming, "onnx");
    const char *name = label ? label : c->path, *slash = strrchr(name, '/');
    snprintf(info->description, sizeof info->description, "ONNX graph %.200s, %d classes",
             slash ? slash + 1 : name, c->classes);
    info->classes = c->classes;
    info->input_h = c->h ? c->h : 224;
    info->input_w = c->w ? c->w : 224;
    info->preprocess = PGD_PREPROCESS_TORCHVISION;
}

static int onnx_classes(const void *cfg)
{
    return ((const onnx_config *)cfg)->classes;
}

static int onnx_check_input(const void *cfg, int B, int H, int W, pgd_error **err)
{
    const onnx_config *c = cfg;
    (void)B;
    if ((c->h && H != c->h) || (c->w && W != c->w))
        return pgd_error_set(err, PGD_ERR_SHAPE, "%s takes %d x %d images, not %d x %d", c->path,
                             c->h, c->w, H, W);
    return PGD_OK;
}

static void onnx_free(void *model)
{
    onnx_model *m = model;
    if (m)
        pgd_graph_destroy(m->g);
    free(m);
}

const model_family family_onnx = {
    .id = PGD_MODEL_ONNX,
    .name = "onnx",
    .cfg_size = sizeof(onnx_config),
    .is = onnx_is,
    .detect = onnx_detect,
    .load = onnx_load,
    .random = onnx_random,
    .forward = onnx_forward,
    .find_nonfinite = onnx_nonfinite,
    .info = onnx_info,
    .classes = onnx_classes,
    .check_input = onnx_check_input,
    .no_maps = "an ONNX graph (no attention maps)",
    .free = onnx_free,
};
