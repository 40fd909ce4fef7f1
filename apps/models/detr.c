/* detr.c — DETR object detection on libpagoda's public API (see detr.h).
 *
 * Activations: the backbone is NHWC (resnet.c), so its C5 output [B, h, w, C] is already the
 * token layout [B, h·w, C] the Transformer reads (token y·w + x, as flatten(2).transpose(1, 2)
 * orders them): the 1x1 input projection is a linear layer on it. Every linear layer is a
 * pgd_linear with its bias, ReLU and residual fused; attention is pgd_attention reading Q, K and V
 * in place (self-attention's Q and K come from one fused projection of x + pos), with the key
 * padding mask as an additive [B, 1, 1, T] view (zero strides) and, in the last decoder layer,
 * the cross-attention probabilities for the attention maps.
 */
#define CL_TARGET_OPENCL_VERSION 120
#include "detr.h"
#include "detr_parts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- loading ------------------------------------------------------------------------------ */

typedef struct ln_w {
    pgd_tensor *w, *b;
} ln_w;

typedef struct attn_w {
    pgd_linear *qk;    /* self-attention: Q and K of x + pos in one [2D, D] projection */
    pgd_linear *q, *k; /* cross-attention */
    pgd_linear *v, *o;
} attn_w;

typedef struct layer_w {
    attn_w sa, ca;
    ln_w ln[3];
    pgd_linear *fc1, *fc2;
} layer_w;

struct detr_model {
    pgd_ctx *ctx;
    detr_config cfg;
    resnet_model *backbone;
    pgd_linear *input_proj;
    float *query_pos; /* host [Q, D] */
    layer_w *enc, *dec;
    ln_w dec_norm;
    pgd_linear *cls, *box[3];
    pgd_tensor *dim_t; /* [D/2]: the sine embedding's divisors */
    pgd_kernel *pos_kernel;
};

static const char pos_source[] =
    "/* DETR's sine position embedding of one feature cell: the real cells above it (and\n"
    " * itself) in its column and left of it in its row, each count normalised by the column's\n"
    " * or row's total, times scale; channels [0, npf) the y part, [npf, 2 npf) the x part, even\n"
    " * channels sin(e / dim_t[i]), odd cos. */\n"
    "__kernel void detr_pos(__global const float *mask, __global const float *dim_t,\n"
    "                       __global float *pos, int H, int W, int npf, float scale)\n"
    "{\n"
    "    int x = get_global_id(0), y = get_global_id(1), b = get_global_id(2);\n"
    "    __global const float *m = mask + (size_t)b * H * W;\n"
    "    float ye = 0.0f, yt = 0.0f, xe = 0.0f, xt = 0.0f;\n"
    "    for (int i = 0; i < H; i++) {\n"
    "        float v = m[i * W + x];\n"
    "        yt += v;\n"
    "        if (i <= y) ye += v;\n"
    "    }\n"
    "    for (int j = 0; j < W; j++) {\n"
    "        float v = m[y * W + j];\n"
    "        xt += v;\n"
    "        if (j <= x) xe += v;\n"
    "    }\n"
    "    ye = ye / (yt + 1e-6f) * scale;\n"
    "    xe = xe / (xt + 1e-6f) * scale;\n"
    "    __global float *p = pos + ((size_t)b * H * W + (size_t)y * W + x) * (size_t)(2 * npf);\n"
    "    for (int i = 0; i < npf; i++) {\n"
    "        float ay = ye / dim_t[i], ax = xe / dim_t[i];\n"
    "        p[i] = (i & 1) ? cos(ay) : sin(ay);\n"
    "        p[npf + i] = (i & 1) ? cos(ax) : sin(ax);\n"
    "    }\n"
    "}\n";

static float *read_host(const model_source *src, const char *name, int64_t n, pgd_error **err)
{
    float *h = malloc((size_t)n * sizeof *h + 1);
    if (!h) {
        pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: reading '%s'", src->label, name);
        return NULL;
    }
    if (model_read(src, name, h, n, err)) {
        free(h);
        return NULL;
    }
    return h;
}

static int load_linear(pgd_ctx *ctx, const model_source *src, const char *p, int64_t out,
                       int64_t in, pgd_linear **l, pgd_error **err)
{
    char wn[256], bn[256];
    snprintf(wn, sizeof wn, "%.200s.weight", p);
    snprintf(bn, sizeof bn, "%.200s.bias", p);
    if (detr_need_linear(src, p, out, in, err))
        return pgd_error_get_code(*err);
    float *w = read_host(src, wn, out * in, err);
    float *b = w ? read_host(src, bn, out, err) : NULL;
    int rc = b ? model_linear_from_host(ctx, w, b, out, in, l, err) : pgd_error_get_code(*err);
    free(w);
    free(b);
    return rc;
}

static int load_ln(pgd_ctx *ctx, const model_source *src, const char *p, int64_t D, ln_w *ln,
                   pgd_error **err)
{
    char wn[256], bn[256];
    snprintf(wn, sizeof wn, "%.200s.weight", p);
    snprintf(bn, sizeof bn, "%.200s.bias", p);
    int rc = model_load_tensor(ctx, src, wn, 1, &D, &ln->w, err);
    if (!rc)
        rc = model_load_tensor(ctx, src, bn, 1, &D, &ln->b, err);
    return rc;
}

/* The attention at p: q, k and v (packed or not) on the host, then the device layers: one
 * fused Q|K projection for self-attention (`self`), three for cross-attention. */
static int load_attention(pgd_ctx *ctx, const model_source *src, const naming *nm, const char *p,
                          int64_t D, int self, attn_w *a, pgd_error **err)
{
    char name[256];
    float *w = malloc((size_t)(3 * D * D + 3 * D) * sizeof *w);
    if (!w)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: %s", src->label, p);
    float *b = w + 3 * D * D;
    int rc = detr_need_attention(src, nm, p, D, err);
    if (!rc && nm->packed) {
        snprintf(name, sizeof name, "%.200sin_proj_weight", p);
        rc = model_read(src, name, w, 3 * D * D, err);
        snprintf(name, sizeof name, "%.200sin_proj_bias", p);
        if (!rc)
            rc = model_read(src, name, b, 3 * D, err);
    } else if (!rc) {
        static const char *const proj[] = {"q_proj", "k_proj", "v_proj"};
        for (int i = 0; i < 3 && !rc; i++) {
            snprintf(name, sizeof name, "%.120s%.60s.weight", p, proj[i]);
            rc = model_read(src, name, w + i * D * D, D * D, err);
            snprintf(name, sizeof name, "%.120s%.60s.bias", p, proj[i]);
            if (!rc)
                rc = model_read(src, name, b + i * D, D, err);
        }
    }
    if (!rc && self) {
        /* [q; k] rows are contiguous in w and b: one [2D, D] layer */
        float *qkb = malloc((size_t)(2 * D) * sizeof *qkb);
        if (!qkb)
            rc = pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s: %s", src->label, p);
        if (!rc) {
            memcpy(qkb, b, (size_t)(2 * D) * sizeof *qkb);
            rc = model_linear_from_host(ctx, w, qkb, 2 * D, D, &a->qk, err);
        }
        free(qkb);
    } else if (!rc) {
        rc = model_linear_from_host(ctx, w, b, D, D, &a->q, err);
        if (!rc)
            rc = model_linear_from_host(ctx, w + D * D, b + D, D, D, &a->k, err);
    }
    if (!rc)
        rc = model_linear_from_host(ctx, w + 2 * D * D, b + 2 * D, D, D, &a->v, err);
    free(w);
    snprintf(name, sizeof name, "%.120s%.120s", p, nm->o);
    if (!rc)
        rc = load_linear(ctx, src, name, D, D, &a->o, err);
    return rc;
}

static int load_layer(detr_model *m, const model_source *src, int dec, int i, pgd_error **err)
{
    const detr_config *c = &m->cfg;
    const naming *nm = &detr_namings[c->naming];
    layer_w *l = dec ? &m->dec[i] : &m->enc[i];
    int64_t D = c->dim, F = dec ? c->dec_ffn : c->enc_ffn;
    char p[256];
    detr_layer_name(nm, dec, i, nm->sa, p, sizeof p);
    int rc = load_attention(m->ctx, src, nm, p, D, 1, &l->sa, err);
    if (!rc && dec) {
        detr_layer_name(nm, dec, i, nm->ca, p, sizeof p);
        rc = load_attention(m->ctx, src, nm, p, D, 0, &l->ca, err);
    }
    detr_layer_name(nm, dec, i, nm->fc1, p, sizeof p);
    if (!rc)
        rc = load_linear(m->ctx, src, p, F, D, &l->fc1, err);
    detr_layer_name(nm, dec, i, nm->fc2, p, sizeof p);
    if (!rc)
        rc = load_linear(m->ctx, src, p, D, F, &l->fc2, err);
    for (int k = 0; k < (dec ? 3 : 2) && !rc; k++) {
        detr_layer_name(nm, dec, i, dec ? nm->dec_ln[k] : nm->enc_ln[k], p, sizeof p);
        rc = load_ln(m->ctx, src, p, D, &l->ln[k], err);
    }
    return rc;
}

static void attn_free(attn_w *a)
{
    pgd_linear_destroy(a->qk);
    pgd_linear_destroy(a->q);
    pgd_linear_destroy(a->k);
    pgd_linear_destroy(a->v);
    pgd_linear_destroy(a->o);
}

static void layer_free(layer_w *l)
{
    attn_free(&l->sa);
    attn_free(&l->ca);
    for (int k = 0; k < 3; k++) {
        pgd_tensor_destroy(l->ln[k].w);
        pgd_tensor_destroy(l->ln[k].b);
    }
    pgd_linear_destroy(l->fc1);
    pgd_linear_destroy(l->fc2);
}

void detr_free(detr_model *m)
{
    if (!m)
        return;
    resnet_free(m->backbone);
    pgd_linear_destroy(m->input_proj);
    free(m->query_pos);
    for (int i = 0; m->enc && i < m->cfg.enc_layers; i++)
        layer_free(&m->enc[i]);
    for (int i = 0; m->dec && i < m->cfg.dec_layers; i++)
        layer_free(&m->dec[i]);
    free(m->enc);
    free(m->dec);
    pgd_tensor_destroy(m->dec_norm.w);
    pgd_tensor_destroy(m->dec_norm.b);
    pgd_linear_destroy(m->cls);
    for (int i = 0; i < 3; i++)
        pgd_linear_destroy(m->box[i]);
    pgd_tensor_destroy(m->dim_t);
    pgd_kernel_destroy(m->pos_kernel);
    free(m);
}

const detr_config *detr_get_config(const detr_model *m)
{
    return &m->cfg;
}

/* The backbone through a view of its own names (resnet_load's strict load covers them), then
 * recorded as consumed in the DETR load. */
static int load_backbone(detr_model *m, const model_source *src, pgd_error **err)
{
    const naming *nm = &detr_namings[m->cfg.naming];
    model_source bb;
    int rc = detr_prefix_view(src, nm->backbone, &bb, err);
    if (rc)
        return rc;
    rc = resnet_load(m->ctx, &bb, &m->cfg.backbone, &m->backbone, err);
    model_source_free(&bb);
    if (!rc && src->name_at) {
        size_t pl = strlen(nm->backbone);
        const char *name;
        for (size_t i = 0; (name = src->name_at(src->u, i)) != NULL; i++)
            if (!strncmp(name, nm->backbone, pl))
                model_mark(src, name);
    }
    return rc;
}

static int load_all(void *model, const model_source *src, pgd_error **err)
{
    detr_model *m = model;
    const detr_config *c = &m->cfg;
    const naming *nm = &detr_namings[c->naming];
    int64_t D = c->dim;
    char name[256];
    int rc = load_backbone(m, src, err);
    if (!rc) {
        /* the 1x1 projection as a linear layer over the NHWC features */
        int64_t C = c->backbone.out[3], ps[4] = {D, C, 1, 1};
        snprintf(name, sizeof name, "%.200s.weight", nm->input_proj);
        float *w = NULL, *b = NULL;
        rc = model_read_host(src, name, 4, ps, &w, err);
        snprintf(name, sizeof name, "%.200s.bias", nm->input_proj);
        if (!rc)
            rc = model_read_host(src, name, 1, &D, &b, err);
        if (!rc)
            rc = model_linear_from_host(m->ctx, w, b, D, C, &m->input_proj, err);
        free(w);
        free(b);
    }
    if (!rc) {
        int64_t qs[2] = {c->queries, D};
        rc = model_read_host(src, nm->query, 2, qs, &m->query_pos, err);
    }
    for (int i = 0; i < c->enc_layers && !rc; i++)
        rc = load_layer(m, src, 0, i, err);
    for (int i = 0; i < c->dec_layers && !rc; i++)
        rc = load_layer(m, src, 1, i, err);
    if (!rc)
        rc = load_ln(m->ctx, src, nm->dec_norm, D, &m->dec_norm, err);
    if (!rc)
        rc = load_linear(m->ctx, src, nm->cls, c->classes, D, &m->cls, err);
    for (int i = 0; i < 3 && !rc; i++) {
        snprintf(name, sizeof name, "%s.%d", nm->box, i);
        rc = load_linear(m->ctx, src, name, i == 2 ? 4 : D, D, &m->box[i], err);
    }
    return rc;
}

/* The divisors temperature^(2 floor(i/2) / npf) of the sine embedding, as torch computes them
 * in float32. */
static int make_dim_t(detr_model *m, pgd_error **err)
{
    int64_t npf = m->cfg.dim / 2;
    float *d = malloc((size_t)npf * sizeof *d);
    if (!d)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "detr: position divisors");
    for (int64_t i = 0; i < npf; i++)
        d[i] = powf(10000.0f, (float)(2 * (i / 2)) / (float)npf);
    int rc = model_upload(m->ctx, d, 1, &npf, &m->dim_t, err);
    free(d);
    if (!rc)
        rc = pgd_kernel_create(m->ctx, "detr_pos", pos_source, NULL, "detr_pos", &m->pos_kernel,
                               err);
    return rc;
}

int detr_load(pgd_ctx *ctx, const model_source *src, const detr_config *cfg, detr_model **out,
              pgd_error **err)
{
    *out = NULL;
    if (cfg->dim % 2 || cfg->dim % cfg->enc_heads || cfg->dim % cfg->dec_heads)
        return pgd_error_set(err, PGD_ERR_SHAPE,
                             "%s: width %lld must be even and a multiple of the heads", src->label,
                             (long long)cfg->dim);
    if (model_check_fits(ctx, src, "DETR weights", err))
        return PGD_ERR_TOO_LARGE;
    detr_model *m = calloc(1, sizeof *m);
    if (!m)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "DETR model");
    m->ctx = ctx;
    m->cfg = *cfg;
    m->enc = calloc((size_t)(cfg->enc_layers ? cfg->enc_layers : 1), sizeof *m->enc);
    m->dec = calloc((size_t)cfg->dec_layers, sizeof *m->dec);
    int rc =
        m->enc && m->dec ? PGD_OK : pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "DETR layers");
    if (!rc)
        rc = model_load_strict(src, load_all, m, NULL, 0, err);
    if (!rc)
        rc = make_dim_t(m, err);
    if (rc) {
        detr_free(m);
        return rc;
    }
    *out = m;
    return PGD_OK;
}

/* ---- forward ------------------------------------------------------------------------------ */

void detr_feature_size(const detr_model *m, int H, int W, int *fh, int *fw)
{
    /* stem /2 (k7 p3), max-pool /2 (k3 p1), then /2 for layers 2, 3 and (not DC5) 4 */
    int64_t h = H, w = W;
    h = (h + 6 - 7) / 2 + 1, w = (w + 6 - 7) / 2 + 1;
    h = (h + 2 - 3) / 2 + 1, w = (w + 2 - 3) / 2 + 1;
    int strided = m->cfg.backbone.dc5 ? 2 : 3;
    for (int i = 0; i < strided; i++)
        h = (h - 1) / 2 + 1, w = (w - 1) / 2 + 1;
    *fh = (int)h;
    *fw = (int)w;
}

/* One pass's working tensors. */
typedef struct pass {
    detr_model *m;
    int64_t B, T, Q, D;
    pgd_tensor *x, *pos, *tmp, *qk, *v, *att, *ffn;      /* encoder [B, T, ...] */
    pgd_tensor *mem_pos, *km, *vm;                       /* memory + pos, cross K and V */
    pgd_tensor *tgt, *qpos, *tq, *qkq, *vq, *attq, *ffq; /* decoder [B, Q, ...] */
    pgd_tensor *kmask, *probs;
} pass;

static void pass_free(pass *p)
{
    pgd_tensor **all[] = {&p->x,       &p->pos,  &p->tmp, &p->qk,    &p->v,    &p->att, &p->ffn,
                          &p->mem_pos, &p->km,   &p->vm,  &p->tgt,   &p->qpos, &p->tq,  &p->qkq,
                          &p->vq,      &p->attq, &p->ffq, &p->kmask, &p->probs};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        pgd_tensor_destroy(*all[i]);
        *all[i] = NULL;
    }
}

static int new3(pgd_ctx *ctx, int64_t a, int64_t b, int64_t c, pgd_tensor **t, pgd_error **err)
{
    int64_t s[3] = {a, b, c};
    return pgd_tensor_create(ctx, 3, s, t, err);
}

/* Multi-head attention of `heads` over q/k/v rows of width ld (the head's d contiguous at
 * offset + h·hd), into o [B, nq, D]; mask NULL or [B, nk] additive. */
typedef struct mha_args {
    int64_t B, heads, nq, nk, D;
    const pgd_tensor *q, *k, *v;
    int64_t q_off, q_ld, k_off, k_ld, v_ld;
    const pgd_tensor *mask;
    pgd_tensor *o, *probs;
} mha_args;

static int mha(pgd_ctx *ctx, const mha_args *a, pgd_error **err)
{
    int64_t hd = a->D / a->heads;
    pgd_attention_args at;
    memset(&at, 0, sizeof at);
    at.batch = a->B, at.heads = a->heads, at.nq = a->nq, at.nk = a->nk, at.head_dim = hd;
    at.q = (pgd_view){a->q, a->q_off, a->nq * a->q_ld, hd, a->q_ld};
    at.k = (pgd_view){a->k, a->k_off, a->nk * a->k_ld, hd, a->k_ld};
    at.v = (pgd_view){a->v, 0, a->nk * a->v_ld, hd, a->v_ld};
    at.o = (pgd_view){a->o, 0, a->nq * a->D, hd, a->D};
    if (a->mask)
        at.mask = (pgd_view){a->mask, 0, a->nk, 0, 0};
    if (a->probs) {
        at.probs = a->probs;
        at.probs_head = -1;
        at.probs_q0 = 0;
        at.probs_q1 = a->nq;
    }
    return pgd_attention(ctx, &at, err);
}

static int layernorm(pgd_ctx *ctx, pgd_tensor *x, const ln_w *ln, pgd_error **err)
{
    return pgd_layernorm(ctx, x, ln->w, ln->b, 1e-5f, x, err);
}

/* x = LN(x + FFN(x)) with the layer's fc1 (ReLU) and fc2 (residual fused). */
static int ffn_block(pgd_ctx *ctx, const layer_w *l, pgd_tensor *x, pgd_tensor *h, const ln_w *ln,
                     pgd_error **err)
{
    int rc = pgd_linear_forward(ctx, l->fc1, x, PGD_ACT_RELU, NULL, h, err);
    if (!rc)
        rc = pgd_linear_forward(ctx, l->fc2, h, PGD_ACT_NONE, x, x, err);
    if (!rc)
        rc = layernorm(ctx, x, ln, err);
    return rc;
}

static int encoder_layer(pass *p, const layer_w *l, pgd_error **err)
{
    pgd_ctx *ctx = p->m->ctx;
    int rc = pgd_add(ctx, p->x, p->pos, p->tmp, err);
    if (!rc)
        rc = pgd_linear_forward(ctx, l->sa.qk, p->tmp, PGD_ACT_NONE, NULL, p->qk, err);
    if (!rc)
        rc = pgd_linear_forward(ctx, l->sa.v, p->x, PGD_ACT_NONE, NULL, p->v, err);
    if (!rc) {
        mha_args a = {p->B,   p->m->cfg.enc_heads,
                      p->T,   p->T,
                      p->D,   p->qk,
                      p->qk,  p->v,
                      0,      2 * p->D,
                      p->D,   2 * p->D,
                      p->D,   p->kmask,
                      p->att, NULL};
        rc = mha(ctx, &a, err);
    }
    if (!rc)
        rc = pgd_linear_forward(ctx, l->sa.o, p->att, PGD_ACT_NONE, p->x, p->x, err);
    if (!rc)
        rc = layernorm(ctx, p->x, &l->ln[0], err);
    if (!rc)
        rc = ffn_block(ctx, l, p->x, p->ffn, &l->ln[1], err);
    return rc;
}

static int decoder_layer(pass *p, const layer_w *l, int last, pgd_error **err)
{
    pgd_ctx *ctx = p->m->ctx;
    int64_t heads = p->m->cfg.dec_heads;
    /* self-attention over the queries, the query positions on Q and K */
    int rc = pgd_add(ctx, p->tgt, p->qpos, p->tq, err);
    if (!rc)
        rc = pgd_linear_forward(ctx, l->sa.qk, p->tq, PGD_ACT_NONE, NULL, p->qkq, err);
    if (!rc)
        rc = pgd_linear_forward(ctx, l->sa.v, p->tgt, PGD_ACT_NONE, NULL, p->vq, err);
    if (!rc) {
        mha_args a = {p->B, heads,    p->Q, p->Q,     p->D, p->qkq, p->qkq,  p->vq,
                      0,    2 * p->D, p->D, 2 * p->D, p->D, NULL,   p->attq, NULL};
        rc = mha(ctx, &a, err);
    }
    if (!rc)
        rc = pgd_linear_forward(ctx, l->sa.o, p->attq, PGD_ACT_NONE, p->tgt, p->tgt, err);
    if (!rc)
        rc = layernorm(ctx, p->tgt, &l->ln[0], err);
    /* cross-attention: queries + query positions against memory + positions (keys) and the
     * memory (values), padding masked */
    if (!rc)
        rc = pgd_add(ctx, p->tgt, p->qpos, p->tq, err);
    if (!rc)
        rc = pgd_linear_forward(ctx, l->ca.q, p->tq, PGD_ACT_NONE, NULL, p->vq, err);
    if (!rc)
        rc = pgd_linear_forward(ctx, l->ca.k, p->mem_pos, PGD_ACT_NONE, NULL, p->km, err);
    if (!rc)
        rc = pgd_linear_forward(ctx, l->ca.v, p->x, PGD_ACT_NONE, NULL, p->vm, err);
    if (!rc) {
        mha_args a = {p->B, heads, p->Q, p->T, p->D, p->vq,    p->km,   p->vm,
                      0,    p->D,  0,    p->D, p->D, p->kmask, p->attq, last ? p->probs : NULL};
        rc = mha(ctx, &a, err);
    }
    if (!rc)
        rc = pgd_linear_forward(ctx, l->ca.o, p->attq, PGD_ACT_NONE, p->tgt, p->tgt, err);
    if (!rc)
        rc = layernorm(ctx, p->tgt, &l->ln[1], err);
    if (!rc)
        rc = ffn_block(ctx, l, p->tgt, p->ffq, &l->ln[2], err);
    return rc;
}

/* The feature-level mask (nearest, as F.interpolate(size=...) picks floor(dst · in/out) in
 * float) on the host: fmask [B, fh, fw] of 0/1, and the additive key mask [B, fh·fw]. */
static int feature_masks(const float *pixel_mask, int B, int H, int W, int fh, int fw,
                         float **fmask, float **kmask, pgd_error **err)
{
    size_t n = (size_t)B * (size_t)fh * (size_t)fw;
    *fmask = malloc(n * sizeof **fmask);
    *kmask = malloc(n * sizeof **kmask);
    if (!*fmask || !*kmask) {
        free(*fmask);
        free(*kmask);
        *fmask = *kmask = NULL;
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "detr: masks");
    }
    float sy = (float)H / (float)fh, sx = (float)W / (float)fw;
    for (int b = 0; b < B; b++)
        for (int y = 0; y < fh; y++) {
            int iy = (int)floorf((float)y * sy);
            iy = iy > H - 1 ? H - 1 : iy;
            for (int x = 0; x < fw; x++) {
                int ix = (int)floorf((float)x * sx);
                ix = ix > W - 1 ? W - 1 : ix;
                float v = pixel_mask
                              ? pixel_mask[((size_t)b * H + (size_t)iy) * (size_t)W + (size_t)ix]
                              : 1.0f;
                size_t i = ((size_t)b * fh + (size_t)y) * (size_t)fw + (size_t)x;
                (*fmask)[i] = v != 0.0f ? 1.0f : 0.0f;
                (*kmask)[i] = v != 0.0f ? 0.0f : -1e30f;
            }
        }
    return PGD_OK;
}

static int position_embedding(pass *p, const float *fmask, int fh, int fw, pgd_error **err)
{
    detr_model *m = p->m;
    pgd_tensor *mt = NULL;
    int64_t ms[3] = {p->B, fh, fw};
    int rc = model_upload(m->ctx, fmask, 3, ms, &mt, err);
    int npf = (int)(p->D / 2);
    float scale = (float)(2.0 * M_PI);
    pgd_kernel *k = m->pos_kernel;
    if (!rc)
        rc = pgd_kernel_set_tensor(k, 0, mt, err);
    if (!rc)
        rc = pgd_kernel_set_tensor(k, 1, m->dim_t, err);
    if (!rc)
        rc = pgd_kernel_set_tensor(k, 2, p->pos, err);
    if (!rc)
        rc = pgd_kernel_set_value(k, 3, sizeof(int), &fh, err);
    if (!rc)
        rc = pgd_kernel_set_value(k, 4, sizeof(int), &fw, err);
    if (!rc)
        rc = pgd_kernel_set_value(k, 5, sizeof(int), &npf, err);
    if (!rc)
        rc = pgd_kernel_set_value(k, 6, sizeof(float), &scale, err);
    size_t global[3] = {(size_t)fw, (size_t)fh, (size_t)p->B};
    if (!rc)
        rc = pgd_kernel_launch(k, 3, global, NULL, err);
    if (!rc)
        rc = pgd_ctx_finish(m->ctx, err); /* mt is released below */
    pgd_tensor_destroy(mt);
    return rc;
}

static int alloc_pass(pass *p, pgd_error **err)
{
    pgd_ctx *ctx = p->m->ctx;
    int64_t B = p->B, T = p->T, Q = p->Q, D = p->D;
    int64_t F = p->m->cfg.enc_ffn > p->m->cfg.dec_ffn ? p->m->cfg.enc_ffn : p->m->cfg.dec_ffn;
    int rc = new3(ctx, B, T, D, &p->x, err);
    if (!rc)
        rc = new3(ctx, B, T, D, &p->pos, err);
    if (!rc)
        rc = new3(ctx, B, T, D, &p->tmp, err);
    if (!rc)
        rc = new3(ctx, B, T, 2 * D, &p->qk, err);
    if (!rc)
        rc = new3(ctx, B, T, D, &p->v, err);
    if (!rc)
        rc = new3(ctx, B, T, D, &p->att, err);
    if (!rc)
        rc = new3(ctx, B, T, p->m->cfg.enc_ffn, &p->ffn, err);
    if (!rc)
        rc = new3(ctx, B, T, D, &p->km, err);
    if (!rc)
        rc = new3(ctx, B, T, D, &p->vm, err);
    if (!rc)
        rc = new3(ctx, B, Q, D, &p->tgt, err);
    if (!rc)
        rc = new3(ctx, B, Q, D, &p->tq, err);
    if (!rc)
        rc = new3(ctx, B, Q, 2 * D, &p->qkq, err);
    if (!rc)
        rc = new3(ctx, B, Q, D, &p->vq, err);
    if (!rc)
        rc = new3(ctx, B, Q, D, &p->attq, err);
    if (!rc)
        rc = new3(ctx, B, Q, p->m->cfg.dec_ffn, &p->ffq, err);
    (void)F;
    return rc;
}

/* The heads on the decoder's normed output tgt: logits and sigmoid boxes downloaded. */
static int heads_forward(pass *p, const detr_output *out, pgd_error **err)
{
    detr_model *m = p->m;
    pgd_ctx *ctx = m->ctx;
    int64_t B = p->B, Q = p->Q, D = p->D, C = m->cfg.classes;
    pgd_tensor *lg = NULL, *h1 = NULL, *h2 = NULL, *bx = NULL;
    int rc = new3(ctx, B, Q, C, &lg, err);
    if (!rc)
        rc = new3(ctx, B, Q, D, &h1, err);
    if (!rc)
        rc = new3(ctx, B, Q, D, &h2, err);
    if (!rc)
        rc = new3(ctx, B, Q, 4, &bx, err);
    if (!rc)
        rc = pgd_linear_forward(ctx, m->cls, p->tgt, PGD_ACT_NONE, NULL, lg, err);
    if (!rc)
        rc = pgd_linear_forward(ctx, m->box[0], p->tgt, PGD_ACT_RELU, NULL, h1, err);
    if (!rc)
        rc = pgd_linear_forward(ctx, m->box[1], h1, PGD_ACT_RELU, NULL, h2, err);
    if (!rc)
        rc = pgd_linear_forward(ctx, m->box[2], h2, PGD_ACT_NONE, NULL, bx, err);
    if (!rc)
        rc = pgd_tensor_download(lg, out->logits, err);
    if (!rc)
        rc = pgd_tensor_download(bx, out->boxes, err);
    for (int64_t i = 0; !rc && i < B * Q * 4; i++)
        out->boxes[i] = 1.0f / (1.0f + expf(-out->boxes[i]));
    pgd_tensor_destroy(lg);
    pgd_tensor_destroy(h1);
    pgd_tensor_destroy(h2);
    pgd_tensor_destroy(bx);
    return rc;
}

/* The last layer's cross-attention [B, heads, Q, T] averaged over the heads. */
static int cross_maps(pass *p, float *cross, pgd_error **err)
{
    int64_t heads = p->m->cfg.dec_heads, QT = p->Q * p->T;
    size_t n = (size_t)(p->B * heads * QT);
    float *all = malloc(n * sizeof *all);
    if (!all)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "detr: attention maps");
    int rc = pgd_tensor_download(p->probs, all, err);
    for (int64_t b = 0; !rc && b < p->B; b++)
        for (int64_t i = 0; i < QT; i++) {
            double s = 0;
            for (int64_t h = 0; h < heads; h++)
                s += all[(b * heads + h) * QT + i];
            cross[b * QT + i] = (float)(s / (double)heads);
        }
    free(all);
    return rc;
}

static int decoder_forward(pass *p, const detr_output *out, pgd_error **err)
{
    detr_model *m = p->m;
    pgd_ctx *ctx = m->ctx;
    int64_t Q = p->Q, D = p->D;
    float *qp = malloc((size_t)(p->B * Q * D) * sizeof *qp);
    if (!qp)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "detr: query positions");
    for (int64_t b = 0; b < p->B; b++)
        memcpy(qp + b * Q * D, m->query_pos, (size_t)(Q * D) * sizeof *qp);
    int64_t qs[3] = {p->B, Q, D};
    int rc = model_upload(ctx, qp, 3, qs, &p->qpos, err);
    free(qp);
    if (!rc)
        rc = pgd_tensor_fill(p->tgt, 0.0f, err);
    if (!rc && out->cross) {
        int64_t ps[4] = {p->B, m->cfg.dec_heads, Q, p->T};
        rc = pgd_tensor_create(ctx, 4, ps, &p->probs, err);
    }
    for (int i = 0; i < m->cfg.dec_layers && !rc; i++)
        rc = decoder_layer(p, &m->dec[i], i == m->cfg.dec_layers - 1, err);
    if (!rc)
        rc = layernorm(ctx, p->tgt, &m->dec_norm, err);
    if (!rc)
        rc = heads_forward(p, out, err);
    if (!rc && out->cross)
        rc = cross_maps(p, out->cross, err);
    return rc;
}

static int encoder_forward(pass *p, pgd_tensor *c5, const float *fmask, const float *kmask, int fh,
                           int fw, pgd_error **err)
{
    detr_model *m = p->m;
    pgd_ctx *ctx = m->ctx;
    int64_t cs[3] = {p->B, p->T, m->cfg.backbone.out[3]};
    int rc = pgd_tensor_reshape(c5, 3, cs, err);
    if (!rc)
        rc = pgd_linear_forward(ctx, m->input_proj, c5, PGD_ACT_NONE, NULL, p->x, err);
    if (!rc)
        rc = position_embedding(p, fmask, fh, fw, err);
    if (!rc) {
        int64_t ks[2] = {p->B, p->T};
        rc = model_upload(ctx, kmask, 2, ks, &p->kmask, err);
    }
    for (int i = 0; i < m->cfg.enc_layers && !rc; i++)
        rc = encoder_layer(p, &m->enc[i], err);
    /* memory + pos, the keys' input of every cross-attention */
    if (!rc)
        rc = new3(ctx, p->B, p->T, p->D, &p->mem_pos, err);
    if (!rc)
        rc = pgd_add(ctx, p->x, p->pos, p->mem_pos, err);
    return rc;
}

int detr_forward(detr_model *m, const float *images, const float *pixel_mask, int B, int H, int W,
                 const detr_output *out, double times[4], pgd_error **err)
{
    if (B < 1 || H < 32 || W < 32)
        return pgd_error_set(err, PGD_ERR_SHAPE,
                             "DETR input must be at least 1 x 3 x 32 x 32, got %d x 3 x %d x %d", B,
                             H, W);
    int fh, fw;
    detr_feature_size(m, H, W, &fh, &fw);
    pass p = {.m = m, .B = B, .T = (int64_t)fh * fw, .Q = m->cfg.queries, .D = m->cfg.dim};
    float *fmask = NULL, *kmask = NULL;
    double t0 = model_now_ms(), t1 = t0, t2 = t0;
    pgd_tensor *c5 = NULL;
    int rc = feature_masks(pixel_mask, B, H, W, fh, fw, &fmask, &kmask, err);
    if (!rc)
        rc = resnet_features(m->backbone, images, B, H, W, &c5, err);
    if (!rc && (pgd_tensor_get_dim(c5, 1) != fh || pgd_tensor_get_dim(c5, 2) != fw))
        rc = pgd_error_set(err, PGD_ERR_SHAPE, "detr: backbone output %lldx%lld, expected %dx%d",
                           (long long)pgd_tensor_get_dim(c5, 1),
                           (long long)pgd_tensor_get_dim(c5, 2), fh, fw);
    t1 = model_stage_end(m->ctx, times != NULL, &rc, err);
    if (!rc)
        rc = alloc_pass(&p, err);
    if (!rc)
        rc = encoder_forward(&p, c5, fmask, kmask, fh, fw, err);
    pgd_tensor_destroy(c5);
    t2 = model_stage_end(m->ctx, times != NULL, &rc, err);
    if (!rc)
        rc = decoder_forward(&p, out, err);
    pass_free(&p);
    free(fmask);
    free(kmask);
    if (!rc && times) {
        double t3 = model_now_ms();
        times[0] = t1 - t0;
        times[1] = t2 - t1;
        times[2] = t3 - t2;
        times[3] = t3 - t0;
    }
    return rc;
}

/* ---- random weights ----------------------------------------------------------------------- */

/* The transformer's tensors in HF 4.x naming with their shapes, for model_random_source. */
typedef struct rand_cfg {
    detr_config c;
} rand_cfg;

static int rand_match(const char *name, const char *want, int nd, int64_t a, int64_t b, int *ndim,
                      int64_t s[8])
{
    if (strcmp(name, want))
        return 0;
    *ndim = nd;
    s[0] = a;
    s[1] = b;
    s[2] = s[3] = 1;
    return 1;
}

static int rand_shape(const void *u, const char *name, int *ndim, int64_t s[8])
{
    const detr_config *c = &((const rand_cfg *)u)->c;
    const naming *nm = &detr_namings[DETR_HF4];
    int64_t D = c->dim;
    char w[256];
    if (rand_match(name, "model.input_projection.weight", 4, D, c->backbone.out[3], ndim, s) ||
        rand_match(name, "model.input_projection.bias", 1, D, 0, ndim, s) ||
        rand_match(name, nm->query, 2, c->queries, D, ndim, s) ||
        rand_match(name, "model.decoder.layernorm.weight", 1, D, 0, ndim, s) ||
        rand_match(name, "model.decoder.layernorm.bias", 1, D, 0, ndim, s) ||
        rand_match(name, "class_labels_classifier.weight", 2, c->classes, D, ndim, s) ||
        rand_match(name, "class_labels_classifier.bias", 1, c->classes, 0, ndim, s))
        return 0;
    for (int i = 0; i < 3; i++) {
        int64_t o = i == 2 ? 4 : D;
        snprintf(w, sizeof w, "bbox_predictor.layers.%d.weight", i);
        if (rand_match(name, w, 2, o, D, ndim, s))
            return 0;
        snprintf(w, sizeof w, "bbox_predictor.layers.%d.bias", i);
        if (rand_match(name, w, 1, o, 0, ndim, s))
            return 0;
    }
    int idx, n = 0, dec = !strncmp(name, "model.decoder.layers.", 21);
    if (!dec && strncmp(name, "model.encoder.layers.", 21))
        return -1;
    if (!(n = model_parse_index(name + 21, &idx)) || name[21 + n] != '.' ||
        idx >= (dec ? c->dec_layers : c->enc_layers))
        return -1;
    const char *part = name + 21 + n + 1;
    int64_t F = dec ? c->dec_ffn : c->enc_ffn;
    const char *attn[2] = {"self_attn.", "encoder_attn."};
    for (int a = 0; a < (dec ? 2 : 1); a++) {
        size_t al = strlen(attn[a]);
        if (strncmp(part, attn[a], al))
            continue;
        const char *proj = part + al;
        static const char *const pj[] = {"q_proj", "k_proj", "v_proj", "out_proj"};
        for (int k = 0; k < 4; k++) {
            snprintf(w, sizeof w, "%.200s.weight", pj[k]);
            if (rand_match(proj, w, 2, D, D, ndim, s))
                return 0;
            snprintf(w, sizeof w, "%.200s.bias", pj[k]);
            if (rand_match(proj, w, 1, D, 0, ndim, s))
                return 0;
        }
        return -1;
    }
    if (rand_match(part, "fc1.weight", 2, F, D, ndim, s) ||
        rand_match(part, "fc1.bias", 1, F, 0, ndim, s) ||
        rand_match(part, "fc2.weight", 2, D, F, ndim, s) ||
        rand_match(part, "fc2.bias", 1, D, 0, ndim, s))
        return 0;
    const char *lns[3] = {"self_attn_layer_norm", "encoder_attn_layer_norm", "final_layer_norm"};
    for (int k = 0; k < 3; k++) {
        if (!dec && k == 1)
            continue;
        snprintf(w, sizeof w, "%.200s.weight", lns[k]);
        if (rand_match(part, w, 1, D, 0, ndim, s))
            return 0;
        snprintf(w, sizeof w, "%.200s.bias", lns[k]);
        if (rand_match(part, w, 1, D, 0, ndim, s))
            return 0;
    }
    return -1;
}

/* The random source: the backbone's (resnet_random_source) under the HF 4.x prefix, the rest
 * from model_random_source. Neither is listed by name (random sources pass the consumed
 * check), so detection is replaced by the known configuration (detr_random_config). */
typedef struct rand_src {
    model_source bb, rest;
    detr_config cfg;
} rand_src;

static const char bb_prefix[] = "model.backbone.conv_encoder.model.";

static int rs_shape(void *u, const char *name, int *ndim, int64_t s[8])
{
    rand_src *r = u;
    size_t pl = sizeof bb_prefix - 1;
    if (!strncmp(name, bb_prefix, pl))
        return r->bb.shape(r->bb.u, name + pl, ndim, s);
    return r->rest.shape(r->rest.u, name, ndim, s);
}

static int rs_read(void *u, const char *name, float *dst, pgd_error **err)
{
    rand_src *r = u;
    size_t pl = sizeof bb_prefix - 1;
    if (!strncmp(name, bb_prefix, pl))
        return r->bb.read(r->bb.u, name + pl, dst, err);
    int rc = r->rest.read(r->rest.u, name, dst, err);
    /* the query embeddings at the scale of a trained model's (about 1, as transformers
     * initialises them), so that random queries differ after the first LayerNorm */
    int64_t n = r->cfg.queries * r->cfg.dim;
    for (int64_t i = 0; !rc && !strcmp(name, detr_namings[DETR_HF4].query) && i < n; i++)
        dst[i] *= 30.0f;
    /* and the cross-attention's Q and K projections large enough that each query's attention
     * over the image is peaked, as a trained model's is (with every weight at the common
     * scale it is nearly uniform, and every query gives the same box) */
    int qk =
        strstr(name, "encoder_attn.q_proj.weight") || strstr(name, "encoder_attn.k_proj.weight");
    /* the same for the box and class heads, so that the boxes and classes of different queries
     * differ visibly (a demo's picture, not a model) */
    int head = !strncmp(name, "bbox_predictor.", 15) || !strncmp(name, "class_labels", 12);
    int nd = 0;
    int64_t sh[8], numel = 1;
    if (!rc && (qk || head) && r->rest.shape(r->rest.u, name, &nd, sh) == 0)
        for (int i = 0; i < nd; i++)
            numel *= sh[i];
    for (int64_t i = 0; !rc && (qk || head) && nd == 2 && i < numel; i++)
        dst[i] *= qk ? 6.0f : 4.0f;
    return rc;
}

/* The random model's configuration is known, not assumed. */
static const char *rs_meta(void *u, const char *key)
{
    (void)u;
    return !strcmp(key, "dilation") ? "false" : strstr(key, "_attention_heads") ? "8" : NULL;
}

static void rs_release(void *u)
{
    rand_src *r = u;
    if (!r)
        return;
    model_source_free(&r->bb);
    model_source_free(&r->rest);
    free(r);
}

int detr_random_source(model_source *src, int depth, uint64_t seed, pgd_error **err)
{
    if (depth != 50 && depth != 101)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                             "random DETR: the backbone is ResNet-50 or ResNet-101, not %d", depth);
    rand_src *r = calloc(1, sizeof *r);
    if (!r)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "random weights");
    int rc = resnet_random_source(&r->bb, depth, 0, NULL, NL_EMBEDDED_GAUSSIAN, seed, err);
    if (!rc)
        rc = resnet_detect_backbone(&r->bb, 0, &r->cfg.backbone, err);
    detr_config *c = &r->cfg;
    c->naming = DETR_HF4;
    c->dim = 256;
    c->enc_heads = c->dec_heads = 8;
    c->enc_layers = c->dec_layers = 6;
    c->enc_ffn = c->dec_ffn = 2048;
    c->queries = 100;
    c->classes = 92;
    rand_cfg rcfg = {*c};
    if (!rc)
        rc = model_random_source(&r->rest, &rcfg, sizeof rcfg, rand_shape, NULL, seed + 17, err);
    if (rc) {
        rs_release(r);
        return rc;
    }
    *src = (model_source){.u = r,
                          .label = "random weights",
                          .shape = rs_shape,
                          .read = rs_read,
                          .meta = rs_meta,
                          .name_at = NULL,
                          .release = rs_release};
    return PGD_OK;
}
