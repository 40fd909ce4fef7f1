/* vit.c — the Vision Transformer built from libpagoda's ops.
 *
 * Three namings are recognised (timm, Hugging Face ViTForImageClassification, torchvision
 * vit_*); all map onto one layer list. Per block: LayerNorm → fused qkv linear → fused
 * attention → projection + residual → LayerNorm → fc1 + GELU → fc2 + residual. Hugging Face's
 * separate query/key/value weights are concatenated into one qkv weight at load time. */
#define CL_TARGET_OPENCL_VERSION 120
#include "vit.h"
#include "maps.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
    W_PE_W,
    W_PE_B,
    W_CLS,
    W_DIST,
    W_POS,
    W_NORM_W,
    W_NORM_B,
    W_HEAD_W,
    W_HEAD_B,
    W_HEADD_W,
    W_HEADD_B,
    B_LN1_W,
    B_LN1_B,
    B_QKV_W,
    B_QKV_B,
    B_PROJ_W,
    B_PROJ_B,
    B_LN2_W,
    B_LN2_B,
    B_FC1_W,
    B_FC1_B,
    B_FC2_W,
    B_FC2_B,
    W_COUNT
};

/* Names per family; %d is the block index. For Hugging Face, B_QKV_* name the query tensor;
 * key and value follow by substitution. */
static const char *const names[3][W_COUNT] = {
    {"patch_embed.proj.weight",
     "patch_embed.proj.bias",
     "cls_token",
     "dist_token",
     "pos_embed",
     "norm.weight",
     "norm.bias",
     "head.weight",
     "head.bias",
     "head_dist.weight",
     "head_dist.bias",
     "blocks.%d.norm1.weight",
     "blocks.%d.norm1.bias",
     "blocks.%d.attn.qkv.weight",
     "blocks.%d.attn.qkv.bias",
     "blocks.%d.attn.proj.weight",
     "blocks.%d.attn.proj.bias",
     "blocks.%d.norm2.weight",
     "blocks.%d.norm2.bias",
     "blocks.%d.mlp.fc1.weight",
     "blocks.%d.mlp.fc1.bias",
     "blocks.%d.mlp.fc2.weight",
     "blocks.%d.mlp.fc2.bias"},
    {"vit.embeddings.patch_embeddings.projection.weight",
     "vit.embeddings.patch_embeddings.projection.bias",
     "vit.embeddings.cls_token",
     "vit.embeddings.distillation_token",
     "vit.embeddings.position_embeddings",
     "vit.layernorm.weight",
     "vit.layernorm.bias",
     "classifier.weight",
     "classifier.bias",
     "distillation_classifier.weight",
     "distillation_classifier.bias",
     "vit.encoder.layer.%d.layernorm_before.weight",
     "vit.encoder.layer.%d.layernorm_before.bias",
     "vit.encoder.layer.%d.attention.attention.query.weight",
     "vit.encoder.layer.%d.attention.attention.query.bias",
     "vit.encoder.layer.%d.attention.output.dense.weight",
     "vit.encoder.layer.%d.attention.output.dense.bias",
     "vit.encoder.layer.%d.layernorm_after.weight",
     "vit.encoder.layer.%d.layernorm_after.bias",
     "vit.encoder.layer.%d.intermediate.dense.weight",
     "vit.encoder.layer.%d.intermediate.dense.bias",
     "vit.encoder.layer.%d.output.dense.weight",
     "vit.encoder.layer.%d.output.dense.bias"},
    {"conv_proj.weight",
     "conv_proj.bias",
     "class_token",
     "",
     "encoder.pos_embedding",
     "encoder.ln.weight",
     "encoder.ln.bias",
     "heads.head.weight",
     "heads.head.bias",
     "",
     "",
     "encoder.layers.encoder_layer_%d.ln_1.weight",
     "encoder.layers.encoder_layer_%d.ln_1.bias",
     "encoder.layers.encoder_layer_%d.self_attention.in_proj_weight",
     "encoder.layers.encoder_layer_%d.self_attention.in_proj_bias",
     "encoder.layers.encoder_layer_%d.self_attention.out_proj.weight",
     "encoder.layers.encoder_layer_%d.self_attention.out_proj.bias",
     "encoder.layers.encoder_layer_%d.ln_2.weight",
     "encoder.layers.encoder_layer_%d.ln_2.bias",
     "encoder.layers.encoder_layer_%d.mlp.0.weight",
     "encoder.layers.encoder_layer_%d.mlp.0.bias",
     "encoder.layers.encoder_layer_%d.mlp.3.weight",
     "encoder.layers.encoder_layer_%d.mlp.3.bias"},
};

/* Expands the one "%d" of a name template into the block index. */
static void wname(vit_family f, int what, int block, char *buf, size_t size)
{
    const char *t = names[f][what], *p = strstr(t, "%d");
    if (!p)
        snprintf(buf, size, "%s", t);
    else
        snprintf(buf, size, "%.*s%d%s", (int)(p - t), t, block, p + 2);
}

/* A stage of the forward pass named after its tensors: a block as its names' prefix
 * ("blocks.3", "vit.encoder.layer.3"), a layer as its weight's name without ".weight". */
static void stage_name(vit_family f, int what, int block, char *buf, size_t size)
{
    const char *t = names[f][what], *p = strstr(t, "%d");
    if (p)
        snprintf(buf, size, "%.*s%d", (int)(p - t), t, block);
    else
        snprintf(buf, size, "%.*s", (int)(strlen(t) - strlen(".weight")), t);
}

static void replace(char *buf, size_t size, const char *from, const char *to)
{
    char *p = strstr(buf, from);
    if (!p)
        return;
    char tail[512];
    snprintf(tail, sizeof tail, "%s", p + strlen(from));
    snprintf(p, size - (size_t)(p - buf), "%s%s", to, tail);
}

/* The blocks a file has: one more than the highest block index any of its names carries (a
 * block held only in part then fails to load, naming what it lacks), or, for a source without
 * a listing, the blocks counted by their first LayerNorm. */
static int count_blocks(const model_source *src, vit_family f)
{
    const char *t = names[f][B_LN1_W], *p = strstr(t, "%d");
    char prefix[128], name[256];
    snprintf(prefix, sizeof prefix, "%.*s", (int)(p - t), t);
    int n = model_count_indexed(src, prefix, ".");
    if (n >= 0)
        return n;
    int nd;
    int64_t s[8];
    for (n = 0;; n++) {
        wname(f, B_LN1_W, n, name, sizeof name);
        if (src->shape(src->u, name, &nd, s) != 0)
            return n;
    }
}

/* The extra tokens (class, and DeiT's distillation token) and the square position grid. */
static int detect_tokens(const model_source *src, vit_config *cfg, pgd_error **err)
{
    vit_family fam = cfg->family;
    int nd;
    int64_t s[8];
    cfg->extra = 1;
    if (names[fam][W_DIST][0] && src->shape(src->u, names[fam][W_DIST], &nd, s) == 0)
        cfg->extra = 2;
    /* timm's register tokens (DINOv2 ..._reg4): [1, R, dim], after the class token. */
    if (fam == VIT_TIMM && src->shape(src->u, "reg_token", &nd, s) == 0) {
        if (nd != 3 || s[0] != 1 || s[1] < 1 || s[1] > 64 || s[2] != cfg->dim || cfg->extra != 1) {
            char gs[96];
            model_shape_str(nd, s, gs, sizeof gs);
            return pgd_error_set(err, PGD_ERR_SHAPE,
                                 "%s: 'reg_token' has shape %s, expected [1, R, %d] (R 1..64, "
                                 "no distillation token)",
                                 src->label, gs, cfg->dim);
        }
        cfg->registers = (int)s[1];
        cfg->extra = 1 + cfg->registers;
    }
    if (src->shape(src->u, names[fam][W_POS], &nd, s) != 0)
        return pgd_error_set(err, PGD_ERR_NOT_FOUND, "%s: tensor '%s' is missing", src->label,
                             names[fam][W_POS]);
    /* All three namings store the position embedding as [1, tokens, dim]. */
    if (nd != 3 || s[0] != 1 || s[2] != cfg->dim || s[1] < 1 || s[1] > INT32_MAX) {
        char gs[96];
        model_shape_str(nd, s, gs, sizeof gs);
        return pgd_error_set(err, PGD_ERR_SHAPE,
                             "%s: tensor '%s' has shape %s, expected [1, tokens, %d]", src->label,
                             names[fam][W_POS], gs, cfg->dim);
    }
    /* The position table covers the class (and distillation) token and the patches, or - timm's
     * no_embed_class, as DINOv2 with registers - the patches only; never the registers. */
    int64_t tokens = s[1];
    int prefixed = cfg->extra - cfg->registers;
    for (int prefix = prefixed; prefix >= 0; prefix -= prefixed ? prefixed : 1) {
        int64_t grid = tokens - prefix;
        int side = (int)floor(sqrt((double)(grid > 0 ? grid : 0)) + 0.5);
        if (grid >= 1 && (int64_t)side * side == grid && (prefix == prefixed || fam == VIT_TIMM)) {
            cfg->grid_h = cfg->grid_w = side;
            cfg->pos_prefix = prefix;
            return PGD_OK;
        }
        if (prefix == 0)
            break;
    }
    return pgd_error_set(err, PGD_ERR_SHAPE,
                         "%s: '%s' holds %lld tokens of width %d: not %d prefix tokens plus a "
                         "square grid%s",
                         src->label, names[fam][W_POS], (long long)tokens, cfg->dim, prefixed,
                         fam == VIT_TIMM ? " (nor a square grid alone)" : "");
}

/* Depth (blocks counted by name), MLP width and classes. */
static int detect_sizes(const model_source *src, vit_config *cfg, pgd_error **err)
{
    vit_family fam = cfg->family;
    int nd;
    int64_t s[8];
    char name[256];
    cfg->depth = count_blocks(src, fam);
    wname(cfg->family, B_LN1_W, 0, name, sizeof name);
    if (cfg->depth == 0)
        return pgd_error_set(err, PGD_ERR_NOT_FOUND, "%s: no transformer blocks ('%s' missing)",
                             src->label, name);
    wname(cfg->family, B_FC1_W, 0, name, sizeof name);
    if (src->shape(src->u, name, &nd, s) != 0 || nd != 2 || s[1] != cfg->dim)
        return pgd_error_set(err, PGD_ERR_SHAPE, "%s: '%s' missing or not [mlp, %d]", src->label,
                             name, cfg->dim);
    if (s[0] < 1 || s[0] > INT32_MAX)
        return pgd_error_set(err, PGD_ERR_SHAPE,
                             "%s: '%s' has %lld rows: the MLP width must be "
                             "1 .. 2^31 - 1",
                             src->label, name, (long long)s[0]);
    cfg->mlp = (int)s[0];
    if (!model_has(src, names[fam][W_HEAD_W]) && !model_has(src, names[fam][W_HEAD_B])) {
        /* No classifier at all: a feature model (DINO); its output is the pooled features. */
        cfg->headless = 1;
        cfg->classes = cfg->dim;
        return PGD_OK;
    }
    if (src->shape(src->u, names[fam][W_HEAD_W], &nd, s) != 0 || nd != 2 || s[1] != cfg->dim)
        return pgd_error_set(err, PGD_ERR_SHAPE, "%s: classifier '%s' missing or not [classes, %d]",
                             src->label, names[fam][W_HEAD_W], cfg->dim);
    if (s[0] < 1 || s[0] > INT32_MAX)
        return pgd_error_set(err, PGD_ERR_SHAPE,
                             "%s: classifier '%s' has %lld classes (1 .. "
                             "2^31 - 1)",
                             src->label, names[fam][W_HEAD_W], (long long)s[0]);
    cfg->classes = (int)s[0];
    return PGD_OK;
}

/* Heads into *out: __metadata__ "num_heads" (a whole number 1 .. 2^31 - 1, else an error: a
 * "16abc" is not 16), which `heads` (> 0, the caller's --heads) must equal when both are given;
 * else `heads`; else the standard table, else dim/64, recorded as assumed in *as. */
static int detect_heads(const model_source *src, int heads, int dim, int *out,
                        model_assumptions *as, pgd_error **err)
{
    const char *meta = src->meta ? src->meta(src->u, "num_heads") : NULL;
    if (meta) {
        int64_t v;
        if (pgd_parse_int64(meta, 1, INT32_MAX, &v))
            return pgd_error_set(err, PGD_ERR_FORMAT,
                                 "%s: __metadata__ num_heads '%s' is not a whole number from 1 "
                                 "to 2147483647",
                                 src->label, meta);
        if (heads > 0 && heads != v)
            return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                 "%d heads asked for, but %s says num_heads %lld in its "
                                 "__metadata__",
                                 heads, src->label, (long long)v);
        *out = (int)v;
        return PGD_OK;
    }
    *out = heads;
    if (heads > 0)
        return PGD_OK;
    static const int table[][2] = {{192, 3}, {384, 6}, {768, 12}, {1024, 16}, {1280, 16}};
    *out = dim % 64 == 0 ? dim / 64 : 1;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        *out = table[i][0] == dim ? table[i][1] : *out;
    char v[16];
    snprintf(v, sizeof v, "%d", *out);
    model_assume(as, "heads", v, "num_heads in __metadata__, or --heads N");
    return PGD_OK;
}

int vit_detect(const model_source *src, int heads, vit_config *cfg, pgd_error **err)
{
    memset(cfg, 0, sizeof *cfg);
    int nd;
    int64_t s[8];
    int fam = -1;
    for (int f = 0; f < 3 && fam < 0; f++)
        if (src->shape(src->u, names[f][W_PE_W], &nd, s) == 0)
            fam = f;
    if (fam < 0)
        return pgd_error_set(err, PGD_ERR_FORMAT,
                             "%s: not a ViT checkpoint: none of '%s' (timm), '%s' (Hugging Face) "
                             "or '%s' (torchvision) is present",
                             src->label, names[0][W_PE_W], names[1][W_PE_W], names[2][W_PE_W]);
    cfg->family = (vit_family)fam;
    if (nd != 4 || s[1] != 3 || s[2] != s[3] || s[2] < 1 || s[2] > 4096 || s[0] < 1 ||
        s[0] > INT32_MAX) {
        char gs[96];
        model_shape_str(nd, s, gs, sizeof gs);
        return pgd_error_set(err, PGD_ERR_SHAPE,
                             "%s: '%s' has shape %s, expected [dim, 3, P, P] (dim >= 1, "
                             "P 1..4096)",
                             src->label, names[fam][W_PE_W], gs);
    }
    cfg->dim = (int)s[0];
    cfg->patch = (int)s[2];
    cfg->eps = fam == VIT_HF ? 1e-12f : 1e-6f;
    cfg->layer_scale = fam == VIT_TIMM && model_has(src, "blocks.0.ls1.gamma");
    /* A source that knows its library resizes the grid another way says so (Hugging Face's
     * DINOv2 through vit_source_adapt: plain bicubic). */
    const char *resize = src->meta ? src->meta(src->u, "pagoda_pos_resize") : NULL;
    cfg->pos_resize = resize && !strcmp(resize, "bicubic") ? PGD_RESIZE_BICUBIC + 1 : 0;
    int rc = detect_tokens(src, cfg, err);
    if (!rc)
        rc = detect_sizes(src, cfg, err);
    if (rc)
        return rc;
    rc = detect_heads(src, heads, cfg->dim, &cfg->heads, &cfg->assumed, err);
    if (rc)
        return rc;
    if (cfg->dim % cfg->heads)
        return pgd_error_set(err, PGD_ERR_SHAPE, "%s: width %d is not divisible by %d heads",
                             src->label, cfg->dim, cfg->heads);
    return PGD_OK;
}

/* ---- weights on the device ---- */

typedef struct vit_block {
    pgd_tensor *ln1_w, *ln1_b, *ln2_w, *ln2_b;
    pgd_linear *qkv, *proj, *fc1, *fc2;
} vit_block;

struct vit_model {
    pgd_ctx *ctx;
    vit_config cfg;
    pgd_tensor *pe_w, *pe_b, *cls, *dist, *reg, *pos, *norm_w, *norm_b;
    pgd_patch_proj *pe_proj; /* pe_w prepared once (packed on CPU devices) */
    pgd_tensor *pos_resized;
    pgd_tensor *mean_row; /* [1, patches] of 1/patches for mean pooling (model_mean_row) */
    int pos_h, pos_w;
    pgd_linear *head, *head_dist;
    vit_block *blocks;
    model_batching batching; /* measured bytes per image, images per pass of the last forward */
    model_probe *probe;      /* set by vit_find_nonfinite: every stage's output is checked */
    pgd_attention_mode attn_mode; /* vit_set_attention */
    int64_t attn_topk;
    uint64_t attn_seed;
    int pool;         /* vit_set_pool */
    float *head_maps; /* vit_set_head_maps: [B, heads, gh, gw] of the next forward, or NULL */
    int pass_first;   /* the first image of the pass forward_pass runs (vit_pass) */
};

void vit_set_head_maps(vit_model *m, float *maps)
{
    m->head_maps = maps;
}

void vit_set_pool(vit_model *m, int pool)
{
    m->pool = pool;
}

/* Floats per image the forward gives: the classes, or a headless model's pooled features. */
static int64_t out_width(const vit_model *m)
{
    return m->cfg.headless && m->pool == VIT_POOL_BOTH ? 2 * (int64_t)m->cfg.dim : m->cfg.classes;
}

int vit_output_width(const vit_model *m)
{
    return (int)out_width(m);
}

void vit_set_attention(vit_model *m, pgd_attention_mode mode, int64_t topk, uint64_t seed)
{
    m->attn_mode = mode;
    m->attn_topk = topk;
    m->attn_seed = seed;
}

/* Hugging Face keeps query, key and value apart: concatenate them into one [3·dim, dim]. */
static int load_hf_qkv(pgd_ctx *ctx, const model_source *src, int block, int64_t dim,
                       pgd_linear **out, pgd_error **err)
{
    float *w = malloc((size_t)(3 * dim * dim) * sizeof *w),
          *b = malloc((size_t)(3 * dim) * sizeof *b);
    int rc = w && b ? PGD_OK : pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "qkv weights");
    static const char *parts[3] = {"query", "key", "value"};
    for (int p = 0; p < 3 && !rc; p++) {
        char wn[256], bn[256];
        wname(VIT_HF, B_QKV_W, block, wn, sizeof wn);
        wname(VIT_HF, B_QKV_B, block, bn, sizeof bn);
        replace(wn, sizeof wn, "query", parts[p]);
        replace(bn, sizeof bn, "query", parts[p]);
        int64_t ws[2] = {dim, dim}, bs[1] = {dim};
        rc = model_need(src, wn, 2, ws, err);
        if (!rc)
            rc = model_read(src, wn, w + p * dim * dim, dim * dim, err);
        if (!rc)
            rc = model_need(src, bn, 1, bs, err);
        if (!rc)
            rc = model_read(src, bn, b + p * dim, dim, err);
    }
    if (!rc)
        rc = model_linear_from_host(ctx, w, b, 3 * dim, dim, out, err);
    free(w);
    free(b);
    return rc;
}

/* Transformer block i: its two layer norms and four linear layers (Hugging Face's separate
 * query, key and value joined into one). */
static int load_block(void *model, const model_source *src, int i, pgd_error **err)
{
    vit_model *m = model;
    pgd_ctx *ctx = m->ctx;
    const vit_config *cfg = &m->cfg;
    vit_family f = cfg->family;
    int64_t D = cfg->dim, d1[1] = {D};
    vit_block *b = &m->blocks[i];
    char a[256], c[256];
    wname(f, B_QKV_B, 0, c, sizeof c);
    int qkv_bias = i > 0 && model_has(src, c); /* the biases block 0 has, every block has */
    wname(f, B_PROJ_B, 0, c, sizeof c);
    int proj_bias = i > 0 && model_has(src, c);
    wname(f, B_FC1_B, 0, c, sizeof c);
    int fc1_bias = i > 0 && model_has(src, c);
    wname(f, B_FC2_B, 0, c, sizeof c);
    int fc2_bias = i > 0 && model_has(src, c);
    wname(f, B_LN1_W, i, a, sizeof a);
    int rc = model_load_tensor(ctx, src, a, 1, d1, &b->ln1_w, err);
    wname(f, B_LN1_B, i, a, sizeof a);
    if (!rc)
        rc = model_load_tensor(ctx, src, a, 1, d1, &b->ln1_b, err);
    wname(f, B_LN2_W, i, a, sizeof a);
    if (!rc)
        rc = model_load_tensor(ctx, src, a, 1, d1, &b->ln2_w, err);
    wname(f, B_LN2_B, i, a, sizeof a);
    if (!rc)
        rc = model_load_tensor(ctx, src, a, 1, d1, &b->ln2_b, err);
    if (!rc && f == VIT_HF)
        rc = load_hf_qkv(ctx, src, i, D, &b->qkv, err);
    else if (!rc) {
        wname(f, B_QKV_W, i, a, sizeof a);
        wname(f, B_QKV_B, i, c, sizeof c);
        rc = model_load_linear(ctx, src, a, c, qkv_bias, 3 * D, D, &b->qkv, err);
    }
    /* LayerScale (timm's DINOv2: blocks.N.ls1.gamma after the attention projection, ls2.gamma
     * after fc2), folded into those layers. */
    char g1[64], g2[64];
    snprintf(g1, sizeof g1, "blocks.%d.ls1.gamma", i);
    snprintf(g2, sizeof g2, "blocks.%d.ls2.gamma", i);
    int ls = f == VIT_TIMM && cfg->layer_scale;
    wname(f, B_PROJ_W, i, a, sizeof a);
    wname(f, B_PROJ_B, i, c, sizeof c);
    if (!rc && ls)
        rc = model_load_linear_scaled(ctx, src, a, c, g1, D, D, &b->proj, err);
    else if (!rc)
        rc = model_load_linear(ctx, src, a, c, proj_bias, D, D, &b->proj, err);
    wname(f, B_FC1_W, i, a, sizeof a);
    wname(f, B_FC1_B, i, c, sizeof c);
    if (!rc)
        rc = model_load_linear(ctx, src, a, c, fc1_bias, cfg->mlp, D, &b->fc1, err);
    wname(f, B_FC2_W, i, a, sizeof a);
    wname(f, B_FC2_B, i, c, sizeof c);
    if (!rc && ls)
        rc = model_load_linear_scaled(ctx, src, a, c, g2, D, cfg->mlp, &b->fc2, err);
    else if (!rc)
        rc = model_load_linear(ctx, src, a, c, fc2_bias, D, cfg->mlp, &b->fc2, err);
    return rc;
}

/* A tensor stored with leading 1s (all three namings keep the class token as [1, 1, D] and the
 * position embedding as [1, T, D]): checked and read as the file has it, used as [rows, D]. */
static int load_squeezed(pgd_ctx *ctx, const model_source *src, const char *name, int64_t rows,
                         int64_t D, pgd_tensor **out, pgd_error **err)
{
    int64_t file[3] = {1, rows, D}, use[2] = {rows, D};
    int rc = model_load_tensor(ctx, src, name, 3, file, out, err);
    if (!rc)
        rc = rows == 1 ? pgd_tensor_reshape(*out, 1, use + 1, err)
                       : pgd_tensor_reshape(*out, 2, use, err);
    return rc;
}

/* Everything outside the blocks: patch embedding, tokens, position embedding, final norm,
 * classifier(s). */
static int load_outer(void *model, const model_source *src, pgd_error **err)
{
    vit_model *m = model;
    pgd_ctx *ctx = m->ctx;
    const vit_config *cfg = &m->cfg;
    vit_family f = cfg->family;
    int64_t D = cfg->dim, P = cfg->patch, T = cfg->pos_prefix + (int64_t)cfg->grid_h * cfg->grid_w;
    int64_t pe[4] = {D, 3, P, P}, d1[1] = {D};
    int rc = model_load_tensor(ctx, src, names[f][W_PE_W], 4, pe, &m->pe_w, err);
    if (!rc)
        rc = pgd_patch_proj_create(ctx, m->pe_w, &m->pe_proj, err);
    if (!rc && model_has(src, names[f][W_PE_B]))
        rc = model_load_tensor(ctx, src, names[f][W_PE_B], 1, d1, &m->pe_b, err);
    if (!rc)
        rc = load_squeezed(ctx, src, names[f][W_CLS], 1, D, &m->cls, err);
    if (!rc && cfg->extra - cfg->registers == 2)
        rc = load_squeezed(ctx, src, names[f][W_DIST], 1, D, &m->dist, err);
    if (!rc && cfg->registers)
        rc = load_squeezed(ctx, src, "reg_token", cfg->registers, D, &m->reg, err);
    if (!rc)
        rc = load_squeezed(ctx, src, names[f][W_POS], T, D, &m->pos, err);
    if (!rc)
        rc = model_load_tensor(ctx, src, names[f][W_NORM_W], 1, d1, &m->norm_w, err);
    if (!rc)
        rc = model_load_tensor(ctx, src, names[f][W_NORM_B], 1, d1, &m->norm_b, err);
    if (!rc && !cfg->headless)
        rc = model_load_linear(ctx, src, names[f][W_HEAD_W], names[f][W_HEAD_B], 0, cfg->classes, D,
                               &m->head, err);
    if (!rc && cfg->extra - cfg->registers == 2 && !cfg->headless)
        rc = model_load_linear(ctx, src, names[f][W_HEADD_W], names[f][W_HEADD_B], 0, cfg->classes,
                               D, &m->head_dist, err);
    return rc;
}

/* Strict: every tensor of the file exactly as expected, finite, and used. None of the three
 * namings writes a buffer the model does not need (timm's VisionTransformer, Hugging Face's
 * ViTForImageClassification and torchvision's VisionTransformer hold parameters only), so
 * nothing is on the ignore list. */
int vit_load(pgd_ctx *ctx, const model_source *src, const vit_config *cfg, vit_model **out,
             pgd_error **err)
{
    *out = NULL;
    if (model_check_fits(ctx, src, "ViT weights", err))
        return PGD_ERR_TOO_LARGE;
    vit_model *m = calloc(1, sizeof *m);
    if (!m)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "model");
    m->ctx = ctx;
    m->cfg = *cfg;
    m->blocks = calloc((size_t)cfg->depth, sizeof *m->blocks);
    if (!m->blocks) {
        free(m);
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "model blocks");
    }
    int rc = model_load_blocks(src, m, cfg->depth, load_outer, load_block, err);
    if (rc) {
        vit_free(m);
        return rc;
    }
    *out = m;
    return PGD_OK;
}

void vit_free(vit_model *m)
{
    if (!m)
        return;
    pgd_tensor *ts[] = {m->pe_w, m->pe_b,   m->cls,    m->dist,        m->reg,
                        m->pos,  m->norm_w, m->norm_b, m->pos_resized, m->mean_row};
    pgd_patch_proj_destroy(m->pe_proj);
    model_destroy_tensors(ts, sizeof ts / sizeof ts[0]);
    pgd_linear_destroy(m->head);
    pgd_linear_destroy(m->head_dist);
    for (int i = 0; m->blocks && i < m->cfg.depth; i++) {
        vit_block *b = &m->blocks[i];
        pgd_tensor_destroy(b->ln1_w);
        pgd_tensor_destroy(b->ln1_b);
        pgd_tensor_destroy(b->ln2_w);
        pgd_tensor_destroy(b->ln2_b);
        pgd_linear_destroy(b->qkv);
        pgd_linear_destroy(b->proj);
        pgd_linear_destroy(b->fc1);
        pgd_linear_destroy(b->fc2);
    }
    free(m->blocks);
    free(m);
}

/* ---- forward ---- */

/* Copies token `tok` of every batch of x [B, T, D] into rows [B, D]. */
static int gather_token(const pgd_tensor *x, int64_t B, int64_t D, int tok, pgd_tensor *rows,
                        pgd_error **err)
{
    int64_t one[3] = {B, 1, D}, flat[2] = {B, D};
    int rc = pgd_tensor_reshape(rows, 3, one, err);
    if (!rc)
        rc = pgd_tensor_slice(x, 1, tok, 1, rows, err);
    int back = pgd_tensor_reshape(rows, 2, flat, rc ? NULL : err);
    return rc ? rc : back;
}

/* The position embedding for a gh x gw grid: the trained one, or (other grids) resized by the
 * family's rule and kept for the next pass at the same size. */
static int pos_for_grid(vit_model *m, int gh, int gw, const pgd_tensor **pos, pgd_error **err)
{
    const vit_config *c = &m->cfg;
    *pos = m->pos;
    if (gh == c->grid_h && gw == c->grid_w)
        return PGD_OK;
    if (!m->pos_resized || m->pos_h != gh || m->pos_w != gw) {
        pgd_tensor_destroy(m->pos_resized);
        m->pos_resized = NULL;
        int64_t ps[2] = {c->pos_prefix + (int64_t)gh * gw, c->dim};
        int rc = pgd_tensor_create(m->ctx, 2, ps, &m->pos_resized, err);
        if (!rc)
            rc = pgd_pos_embed_resize(m->ctx, m->pos, c->pos_prefix, c->grid_h, c->grid_w, gh, gw,
                                      c->pos_resize ? (pgd_resize_mode)(c->pos_resize - 1)
                                                    : vit_resize_mode(c->family),
                                      m->pos_resized, err);
        if (rc)
            return rc;
        m->pos_h = gh;
        m->pos_w = gw;
    }
    *pos = m->pos_resized;
    return PGD_OK;
}

/* The tensors and host buffers of one forward pass of B images on a gh x gw grid (T tokens). */
typedef struct pass_state {
    vit_model *m;
    int64_t B, T, gh, gw;
    int64_t prow; /* probability rows kept per head: T for the rollout, else 1 (class token) */
    pgd_tensor *img, *x, *h, *qkv, *a, *mlp, *rows, *out, *out2, *probs;
    double *R, *scratch; /* the rollout [B, T, T] and rollout_step's scratch */
    float *hp;           /* one block's probabilities on the host, for the rollout */
} pass_state;

/* Uploads the images and creates the activations [B, T, D], qkv [B, T, 3D] and mlp. */
static int pass_alloc(pass_state *ps, const float *images, int H, int W, pgd_error **err)
{
    pgd_ctx *ctx = ps->m->ctx;
    const vit_config *c = &ps->m->cfg;
    int64_t B = ps->B, T = ps->T, D = c->dim;
    int64_t si[4] = {B, 3, H, W}, sx[3] = {B, T, D}, sq[3] = {B, T, 3 * D}, sm[3] = {B, T, c->mlp};
    int rc = model_upload(ctx, images, 4, si, &ps->img, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 3, sx, &ps->x, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 3, sx, &ps->h, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 3, sx, &ps->a, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 3, sq, &ps->qkv, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 3, sm, &ps->mlp, err);
    return rc;
}

static void pass_free(pass_state *ps)
{
    free(ps->R);
    free(ps->scratch);
    free(ps->hp);
    pgd_tensor *all[] = {ps->img, ps->x,    ps->h,   ps->qkv,  ps->a,
                         ps->mlp, ps->rows, ps->out, ps->out2, ps->probs};
    model_destroy_tensors(all, sizeof all / sizeof all[0]);
}

/* One more block of the rollout from the probabilities just computed. */
static int rollout_update(pass_state *ps, pgd_error **err)
{
    int64_t B = ps->B, T = ps->T, heads = ps->m->cfg.heads;
    if (!ps->R) {
        ps->R = calloc((size_t)(B * T * T), sizeof *ps->R);
        ps->scratch = malloc((size_t)(T * T * 2 + T) * sizeof *ps->scratch);
        ps->hp = malloc((size_t)(B * heads * T * T) * sizeof *ps->hp);
        for (int64_t bb = 0; ps->R && bb < B; bb++)
            for (int64_t q = 0; q < T; q++)
                ps->R[(bb * T + q) * T + q] = 1.0;
    }
    if (!ps->R || !ps->scratch || !ps->hp)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "attention rollout");
    int rc = pgd_tensor_download(ps->probs, ps->hp, err);
    if (!rc)
        map_rollout_step(ps->R, ps->hp, B, heads, T, ps->scratch);
    return rc;
}

/* The attention of block i through the general entry point: with `probs`, keeping its
 * probabilities (the class token's row of every head, all rows for the rollout) in ps->probs,
 * with `rollout` advancing the rollout; in the model's attention mode (soft, top-k, sampled). */
static int block_attention(pass_state *ps, int i, int probs, int rollout, pgd_error **err)
{
    pgd_ctx *ctx = ps->m->ctx;
    int64_t B = ps->B, T = ps->T, D = ps->m->cfg.dim, heads = ps->m->cfg.heads;
    int rc = PGD_OK;
    if (probs && !ps->probs) {
        int64_t sp[1] = {B * heads * ps->prow * T};
        rc = pgd_tensor_create(ctx, 1, sp, &ps->probs, err);
    }
    pgd_attention_args aa;
    memset(&aa, 0, sizeof aa);
    aa.batch = B;
    aa.heads = heads;
    aa.nq = aa.nk = T;
    aa.head_dim = D / heads;
    int64_t tok = 3 * D, hd = D / heads;
    aa.q = (pgd_view){ps->qkv, 0, T * tok, hd, tok};
    aa.k = (pgd_view){ps->qkv, D, T * tok, hd, tok};
    aa.v = (pgd_view){ps->qkv, 2 * D, T * tok, hd, tok};
    aa.o = (pgd_view){ps->a, 0, T * D, hd, D};
    if (probs) {
        aa.probs = ps->probs;
        aa.probs_head = -1;
        aa.probs_q0 = 0;
        aa.probs_q1 = ps->prow;
    }
    aa.mode = ps->m->attn_mode;
    aa.topk = ps->m->attn_topk;
    /* Every block draws from its own stream. */
    aa.seed = ps->m->attn_seed + (uint64_t)i * UINT64_C(0x9e3779b97f4a7c15);
    if (!rc)
        rc = pgd_attention(ctx, &aa, err);
    if (!rc && rollout)
        rc = rollout_update(ps, err);
    return rc;
}

/* Transformer block i on ps->x in place; `probs`: keep its attention probabilities. */
static int block_forward(pass_state *ps, int i, int probs, int rollout, pgd_error **err)
{
    pgd_ctx *ctx = ps->m->ctx;
    const vit_config *c = &ps->m->cfg;
    const vit_block *b = &ps->m->blocks[i];
    int rc = pgd_layernorm(ctx, ps->x, b->ln1_w, b->ln1_b, c->eps, ps->h, err);
    if (!rc)
        rc = pgd_linear_forward(ctx, b->qkv, ps->h, PGD_ACT_NONE, NULL, ps->qkv, err);
    if (!rc)
        rc = probs || ps->m->attn_mode != PGD_ATTENTION_SOFT
                 ? block_attention(ps, i, probs, rollout, err)
                 : pgd_attention_qkv(ctx, ps->qkv, c->heads, ps->a, err);
    if (!rc)
        rc = pgd_linear_forward(ctx, b->proj, ps->a, PGD_ACT_NONE, ps->x, ps->x, err);
    char stage[128];
    stage_name(c->family, B_LN1_W, i, stage, sizeof stage);
    if (!rc)
        rc = model_probe_tensor(ps->m->probe, ps->x, err, "%s (attention)", stage);
    if (!rc)
        rc = model_mlp_residual(ctx, ps->x, b->ln2_w, b->ln2_b, c->eps, b->fc1, b->fc2, ps->h,
                                ps->mlp, err);
    if (!rc)
        rc = model_probe_tensor(ps->m->probe, ps->x, err, "%s (mlp)", stage);
    return rc;
}

/* The final norm and the classifier on the class token (DeiT distilled: the mean of the
 * class-token and distillation-token heads), logits downloaded. */
static int head_forward(pass_state *ps, float *logits, pgd_error **err)
{
    vit_model *m = ps->m;
    pgd_ctx *ctx = m->ctx;
    int64_t B = ps->B, D = m->cfg.dim;
    int64_t width = out_width(m), sr[2] = {B, D}, so[2] = {B, width};
    int mean = m->cfg.headless && m->pool != VIT_POOL_CLS;
    int cls = !m->cfg.headless || m->pool != VIT_POOL_MEAN;
    char stage[128];
    int rc = pgd_layernorm(ctx, ps->x, m->norm_w, m->norm_b, m->cfg.eps, ps->h, err);
    stage_name(m->cfg.family, W_NORM_W, 0, stage, sizeof stage);
    if (!rc)
        rc = model_probe_tensor(m->probe, ps->h, err, "%s (final norm)", stage);
    if (!rc)
        rc = pgd_tensor_create(ctx, 2, sr, &ps->rows, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 2, so, &ps->out, err);
    if (!rc && mean) {
        /* The mean of the patch tokens: a row of 1/P against each image's patch rows, into
         * the last D columns of each output row. */
        int64_t P = ps->T - m->cfg.extra;
        rc = model_mean_row(ctx, P, &m->mean_row, err);
        pgd_gemm_args g = {.alpha = 1.0f};
        pgd_matrix a = {m->mean_row, 0, P, 0}, hb = {ps->h, m->cfg.extra * D, D, ps->T * D};
        pgd_matrix c = {ps->out, width - D, width, width};
        if (!rc)
            rc = pgd_gemm_strided(ctx, &g, 1, D, P, B, a, hb, c, err);
    }
    if (!rc && cls)
        rc = gather_token(ps->h, B, D, 0, ps->rows, err);
    /* A headless model's class tokens into the first D columns of each output row. */
    if (!rc && cls && m->cfg.headless && width == D)
        rc = pgd_tensor_copy(ps->rows, 0, ps->out, 0, B * D, err);
    for (int64_t b = 0; !rc && cls && m->cfg.headless && width != D && b < B; b++)
        rc = pgd_tensor_copy(ps->rows, b * D, ps->out, b * width, D, err);
    if (!rc && !m->cfg.headless)
        rc = pgd_linear_forward(ctx, m->head, ps->rows, PGD_ACT_NONE, NULL, ps->out, err);
    if (!rc && m->head_dist) {
        rc = pgd_tensor_create(ctx, 2, so, &ps->out2, err);
        if (!rc)
            rc = gather_token(ps->h, B, D, 1, ps->rows, err);
        if (!rc)
            rc = pgd_linear_forward(ctx, m->head_dist, ps->rows, PGD_ACT_NONE, NULL, ps->out2, err);
        if (!rc)
            rc = pgd_add(ctx, ps->out, ps->out2, ps->out, err);
        if (!rc)
            rc = pgd_scale(ctx, ps->out, 0.5f, ps->out, err);
    }
    stage_name(m->cfg.family, W_HEAD_W, 0, stage, sizeof stage);
    if (!rc)
        rc = model_probe_tensor(m->probe, ps->out, err, "%s (classifier)", stage);
    if (!rc)
        rc = pgd_tensor_download(ps->out, logits, err);
    return rc;
}

/* The last block's class-token attention over the patches, averaged over heads:
 * attn_map [B, gh, gw]. */
static int attention_map(const pass_state *ps, float *attn_map, pgd_error **err)
{
    int64_t heads = ps->m->cfg.heads, extra = ps->m->cfg.extra, T = ps->T, prow = ps->prow;
    int64_t cells = ps->gh * ps->gw;
    float *p = malloc((size_t)(ps->B * heads * prow * T) * sizeof *p);
    int rc = p ? pgd_tensor_download(ps->probs, p, err)
               : pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "attention map");
    for (int64_t b = 0; !rc && b < ps->B; b++)
        for (int64_t t = 0; t < cells; t++) {
            double s = 0;
            for (int64_t hh = 0; hh < heads; hh++)
                s += p[((b * heads + hh) * prow) * T + extra + t]; /* row 0: the class token */
            attn_map[b * cells + t] = (float)(s / (double)heads);
        }
    free(p);
    return rc;
}

/* The token rows when the position table does not cover the prefix tokens as
 * pgd_patch_embed lays them out (timm's no_embed_class, register tokens): the patches (with the
 * class token when the table covers it) embedded with their positions, then per image
 * [class, registers, patches] assembled by copies. */
static int assemble_tokens(pass_state *ps, const pgd_tensor *pos, pgd_error **err)
{
    vit_model *m = ps->m;
    const vit_config *c = &m->cfg;
    int64_t D = c->dim, P = ps->gh * ps->gw, R = c->registers, pre = c->pos_prefix;
    int64_t st[3] = {ps->B, pre + P, D};
    pgd_tensor *t = NULL;
    int rc = pgd_tensor_create(m->ctx, 3, st, &t, err);
    if (!rc)
        rc = pgd_patch_embed_proj(m->ctx, ps->img, m->pe_proj, m->pe_b, pre ? m->cls : NULL, NULL,
                                  pos, t, err);
    for (int64_t b = 0; !rc && b < ps->B; b++) {
        int64_t row = b * ps->T * D, trow = b * (pre + P) * D;
        rc = pre ? pgd_tensor_copy(t, trow, ps->x, row, D, err)
                 : pgd_tensor_copy(m->cls, 0, ps->x, row, D, err);
        if (!rc && R)
            rc = pgd_tensor_copy(m->reg, 0, ps->x, row + D, R * D, err);
        if (!rc)
            rc = pgd_tensor_copy(t, trow + pre * D, ps->x, row + (1 + R) * D, P * D, err);
    }
    pgd_tensor_destroy(t);
    return rc;
}

/* Every head's class-token attention over the patches of the last block into
 * m->head_maps [image, head, gh, gw], images from m->pass_first on. */
static int head_maps(const pass_state *ps, pgd_error **err)
{
    int64_t heads = ps->m->cfg.heads, extra = ps->m->cfg.extra, T = ps->T, prow = ps->prow;
    int64_t cells = ps->gh * ps->gw;
    float *p = malloc((size_t)(ps->B * heads * prow * T) * sizeof *p);
    int rc = p ? pgd_tensor_download(ps->probs, p, err)
               : pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "attention maps");
    float *out = ps->m->head_maps + (size_t)ps->m->pass_first * (size_t)(heads * cells);
    for (int64_t b = 0; !rc && b < ps->B; b++)
        for (int64_t hh = 0; hh < heads; hh++)
            for (int64_t t = 0; t < cells; t++)
                out[(b * heads + hh) * cells + t] = p[((b * heads + hh) * prow) * T + extra + t];
    free(p);
    return rc;
}

static int forward_pass(vit_model *m, const float *images, int B, int H, int W, float *logits,
                        float *attn_map, float *rollout, double times[4], pgd_error **err)
{
    pgd_ctx *ctx = m->ctx;
    const vit_config *c = &m->cfg;
    int64_t P = c->patch;
    if (B < 1 || H < P || W < P || H % P || W % P)
        return pgd_error_set(err, PGD_ERR_SHAPE,
                             "vit: input [%d, 3, %d, %d] must be whole %lldx%lld patches", B, H, W,
                             (long long)P, (long long)P);
    pass_state ps = {.m = m, .B = B, .gh = H / P, .gw = W / P};
    ps.T = c->extra + ps.gh * ps.gw;
    ps.prow = rollout ? ps.T : 1;
    double t0 = model_now_ms();
    const pgd_tensor *pos = NULL;
    int rc = pos_for_grid(m, (int)ps.gh, (int)ps.gw, &pos, err);
    if (rc)
        return rc;
    rc = pass_alloc(&ps, images, H, W, err);
    if (!rc)
        rc = c->registers || c->pos_prefix != c->extra
                 ? assemble_tokens(&ps, pos, err)
                 : pgd_patch_embed_proj(ctx, ps.img, m->pe_proj, m->pe_b, m->cls, m->dist, pos,
                                        ps.x, err);
    char stage[128];
    stage_name(c->family, W_PE_W, 0, stage, sizeof stage);
    if (!rc)
        rc = model_probe_tensor(m->probe, ps.img, err, "the input");
    if (!rc)
        rc = model_probe_tensor(m->probe, ps.x, err, "%s (patch and position embedding)", stage);
    double t1 = model_stage_end(ctx, times != NULL, &rc, err);
    for (int i = 0; i < c->depth && !rc; i++)
        rc = block_forward(&ps, i, rollout || ((attn_map || m->head_maps) && i == c->depth - 1),
                           rollout != NULL, err);
    double t2 = model_stage_end(ctx, times != NULL, &rc, err);
    if (!rc)
        rc = head_forward(&ps, logits, err);
    if (!rc && attn_map)
        rc = attention_map(&ps, attn_map, err);
    if (!rc && m->head_maps)
        rc = head_maps(&ps, err);
    int64_t cells = ps.gh * ps.gw;
    for (int64_t b = 0; !rc && rollout && b < B; b++)
        for (int64_t t = 0; t < cells; t++)
            rollout[b * cells + t] = (float)ps.R[b * ps.T * ps.T + c->extra + t];
    double t3 = model_now_ms();
    model_stage_times(times, t0, t1, t2, t3);
    pass_free(&ps);
    return rc;
}

int vit_last_split(const vit_model *m)
{
    return m->batching.last_split;
}

/* One pass of vit_forward over images [first, first + n). */
typedef struct vit_pass_args {
    vit_model *m;
    const float *images;
    int H, W;
    float *logits, *attn_map, *rollout;
    int64_t cells;
} vit_pass_args;

static int vit_pass(void *u, int first, int n, double *times, pgd_error **err)
{
    vit_pass_args *a = u;
    size_t i = (size_t)first, cells = (size_t)a->cells;
    a->m->pass_first = first;
    return forward_pass(a->m, a->images + i * 3 * (size_t)a->H * (size_t)a->W, n, a->H, a->W,
                        a->logits + i * (size_t)out_width(a->m),
                        a->attn_map ? a->attn_map + i * cells : NULL,
                        a->rollout ? a->rollout + i * cells : NULL, times, err);
}

/* A batch that does not fit on the device at once runs as several passes of at most `b`
 * images: b from the device's free global memory and an estimate of one image's tensors (the
 * measured peak of an earlier pass at this size when there is one), halved again whenever a
 * pass runs out of device memory anyway. Every image's result is the same either way. */
int vit_forward(vit_model *m, const float *images, int B, int H, int W, float *logits,
                float *attn_map, float *rollout, double times[4], pgd_error **err)
{
    const vit_config *c = &m->cfg;
    int64_t P = c->patch;
    m->pass_first = 0;
    if (B < 1 || H < P || W < P || H % P || W % P)
        return forward_pass(m, images, B, H, W, logits, attn_map, rollout, times, err);
    int64_t T = c->extra + (H / P) * (W / P), D = c->dim, cells = (H / P) * (W / P);
    int64_t prow = rollout ? T : attn_map || m->head_maps ? 1 : 0;
    uint64_t probs = 4u * (uint64_t)(c->heads * prow * T);
    uint64_t per = 4u * (uint64_t)(3 * H * W + T * (6 * D + c->mlp) + D + 2 * out_width(m)) + probs;
    per += per / 4; /* GEMM packing, attention scratch, pool rounding */
    int maps = rollout ? 2 : attn_map || m->head_maps ? 1 : 0;
    uint64_t largest = 4u * (uint64_t)T * (uint64_t)(c->mlp > 3 * D ? c->mlp : 3 * D);
    if (probs > largest)
        largest = probs;
    vit_pass_args a = {m, images, H, W, logits, attn_map, rollout, cells};
    return model_forward_batched(m->ctx, &m->batching, H, W, maps, B, per, largest, "vit", 4,
                                 vit_pass, &a, times, err);
}

int vit_find_nonfinite(vit_model *m, const float *image, int H, int W, model_probe *p,
                       pgd_error **err)
{
    memset(p, 0, sizeof *p);
    int64_t classes = out_width(m);
    float *logits = malloc((size_t)classes * sizeof *logits);
    if (!logits)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "vit: logits");
    m->probe = p;
    float *maps = m->head_maps; /* the probe's rerun draws nothing */
    m->head_maps = NULL;
    m->pass_first = 0;
    int rc = forward_pass(m, image, 1, H, W, logits, NULL, NULL, NULL, err);
    m->head_maps = maps;
    m->probe = NULL;
    free(logits);
    return rc;
}
