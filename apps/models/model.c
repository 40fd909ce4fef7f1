/* model.c — small helpers every model file of apps/models shares (model.h), kept once here
 * rather than as a static copy per model. */
#include "model.h"

#include <stdlib.h>
#include <string.h>

int model_has(const model_source *src, const char *name)
{
    int nd;
    int64_t s[8];
    return src->shape(src->u, name, &nd, s) == 0;
}

/* A linear layer from weight `wn` [out, in] and bias `bn` [out]. The bias may be absent (a
 * model built without one) unless `need_bias`: a block after the first must have the biases
 * block 0 has, or it is a block held in part. */
int model_load_linear(pgd_ctx *ctx, const model_source *src, const char *wn, const char *bn,
                      int need_bias, int64_t out_dim, int64_t in_dim, pgd_linear **out,
                      pgd_error **err)
{
    int64_t ws[2] = {out_dim, in_dim}, bs[1] = {out_dim};
    pgd_tensor *w = NULL, *b = NULL;
    int rc = model_load_tensor(ctx, src, wn, 2, ws, &w, err);
    if (!rc && (need_bias || model_has(src, bn)))
        rc = model_load_tensor(ctx, src, bn, 1, bs, &b, err);
    if (!rc)
        rc = pgd_linear_create(ctx, w, b, out, err);
    pgd_tensor_destroy(w);
    pgd_tensor_destroy(b);
    return rc;
}

/* As model_load_linear for a layer followed by LayerScale (DINOv2's ls1/ls2: y = gamma ⊙ (xWᵀ +
 * b)): gamma [out] is folded into the rows of W and into b on the host, so the layer runs as a
 * plain linear with the residual fused. */
int model_load_linear_scaled(pgd_ctx *ctx, const model_source *src, const char *wn, const char *bn,
                             const char *gn, int64_t out_dim, int64_t in_dim, pgd_linear **out,
                             pgd_error **err)
{
    int64_t ws[2] = {out_dim, in_dim}, bs[1] = {out_dim};
    float *w = malloc((size_t)(out_dim * in_dim) * sizeof *w + 1);
    float *b = malloc((size_t)out_dim * sizeof *b + 1),
          *g = malloc((size_t)out_dim * sizeof *g + 1);
    int rc =
        w && b && g ? PGD_OK : pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "reading '%s'", wn);
    int with_bias = model_has(src, bn);
    if (!rc)
        rc = model_need(src, wn, 2, ws, err);
    if (!rc)
        rc = model_read(src, wn, w, out_dim * in_dim, err);
    if (!rc && with_bias && !(rc = model_need(src, bn, 1, bs, err)))
        rc = model_read(src, bn, b, out_dim, err);
    if (!rc)
        rc = model_need(src, gn, 1, bs, err);
    if (!rc)
        rc = model_read(src, gn, g, out_dim, err);
    for (int64_t r = 0; !rc && r < out_dim; r++) {
        for (int64_t k = 0; k < in_dim; k++)
            w[r * in_dim + k] *= g[r];
        b[r] = with_bias ? b[r] * g[r] : 0.0f;
    }
    if (!rc)
        rc = model_linear_from_host(ctx, w, b, out_dim, in_dim, out, err);
    free(w);
    free(b);
    free(g);
    return rc;
}

int model_mean_head(pgd_ctx *ctx, const model_head *a, float *logits, pgd_error **err)
{
    int64_t T = a->tokens, D = a->dim;
    int rc = pgd_layernorm(ctx, a->x, a->norm_w, a->norm_b, a->eps, a->h, err);
    if (!rc)
        rc = model_probe_tensor(a->probe, a->h, err, "norm (final norm)");
    pgd_gemm_args g = {.alpha = 1.0f};
    pgd_matrix row = {a->mean_row, 0, T, 0}, h = {a->h, 0, D, T * D};
    pgd_matrix p = {a->pooled, 0, D, D};
    if (!rc)
        rc = pgd_gemm_strided(ctx, &g, 1, D, T, a->batch, row, h, p, err);
    if (!rc)
        rc = pgd_linear_forward(ctx, a->head, a->pooled, PGD_ACT_NONE, NULL, a->out, err);
    if (!rc)
        rc = model_probe_tensor(a->probe, a->out, err, "head");
    if (!rc)
        rc = pgd_tensor_download(a->out, logits, err);
    return rc;
}

int model_probe_run(model_probe *p, model_probe **slot, int64_t classes, model_probe_pass pass,
                    void *model, const float *image, int H, int W, pgd_error **err)
{
    memset(p, 0, sizeof *p);
    float *logits = malloc((size_t)classes * sizeof *logits);
    if (!logits)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "logits");
    *slot = p;
    int rc = pass(model, image, H, W, logits, err);
    *slot = NULL;
    free(logits);
    return rc;
}

typedef struct blocks_load {
    void *model;
    int depth;
    model_load_fn outer;
    model_block_fn block;
} blocks_load;

static int load_blocks(void *u, const model_source *tracked, pgd_error **err)
{
    const blocks_load *l = u;
    int rc = l->outer(l->model, tracked, err);
    for (int i = 0; i < l->depth && !rc; i++)
        rc = l->block(l->model, tracked, i, err);
    return rc;
}

int model_load_blocks(const model_source *src, void *model, int depth, model_load_fn outer,
                      model_block_fn block, pgd_error **err)
{
    blocks_load l = {model, depth, outer, block};
    return model_load_strict(src, load_blocks, &l, NULL, 0, err);
}

int model_mlp_residual(pgd_ctx *ctx, pgd_tensor *x, const pgd_tensor *ln_w, const pgd_tensor *ln_b,
                       float eps, const pgd_linear *fc1, const pgd_linear *fc2, pgd_tensor *h,
                       pgd_tensor *mlp, pgd_error **err)
{
    int rc = pgd_layernorm(ctx, x, ln_w, ln_b, eps, h, err);
    if (!rc)
        rc = pgd_linear_forward(ctx, fc1, h, PGD_ACT_GELU, NULL, mlp, err);
    if (!rc)
        rc = pgd_linear_forward(ctx, fc2, mlp, PGD_ACT_NONE, x, x, err);
    return rc;
}

void model_destroy_tensors(pgd_tensor *const *ts, size_t n)
{
    for (size_t i = 0; i < n; i++)
        pgd_tensor_destroy(ts[i]);
}

int model_linear_from_host(pgd_ctx *ctx, const float *w, const float *b, int64_t out, int64_t in,
                           pgd_linear **l, pgd_error **err)
{
    int64_t sw[2] = {out, in}, sb[1] = {out};
    pgd_tensor *tw = NULL, *tb = NULL;
    int rc = model_upload(ctx, w, 2, sw, &tw, err);
    if (!rc && b)
        rc = model_upload(ctx, b, 1, sb, &tb, err);
    if (!rc)
        rc = pgd_linear_create(ctx, tw, tb, l, err);
    pgd_tensor_destroy(tw);
    pgd_tensor_destroy(tb);
    return rc;
}

void model_stage_times(double *times, double t0, double t1, double t2, double t3)
{
    if (!times)
        return;
    times[0] = t1 - t0;
    times[1] = t2 - t1;
    times[2] = t3 - t2;
    times[3] = t3 - t0;
}
