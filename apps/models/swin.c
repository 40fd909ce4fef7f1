/* swin.c — Swin Transformer v1 on libpagoda's ops (see swin.h).
 *
 * The map stays [B, H, W, C] (NHWC) from the patch embedding to the head. A block:
 *
 *   h = LN1(x); windows = pgd_window_partition(h, w, shift)      [B·nW, w², C], zero-padded
 *                                      (timm rolls before padding, the others after)
 *   a = attention over each window: qkv = linear(windows); softmax(q·kᵀ/√d + bias + mask)·v
 *   x += pgd_window_merge_add(proj(a))                            reverse shift, drop padding
 *   x += fc2(GELU(fc1(LN2(x))))
 *
 * The additive attention mask of a block is its relative position bias (per head, [heads, N, N]
 * from the table and the index every naming uses) plus, in shifted blocks, -100 between tokens
 * of a window that come from different regions of the rolled map (the value torchvision, timm
 * and Hugging Face use): one [B·nW, heads, N, N] tensor built on the host the first time a grid
 * and batch size are seen and kept, so all windows of the batch run as one attention launch. Patch
 * merging is pgd_patch_merge, LayerNorm over 4C and a bias-free linear to 2C. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "swin.h"

/* ---- names ---- */

enum {
    T_LN1_W,
    T_LN1_B,
    T_QKV_W,
    T_QKV_B,
    T_Q_W,
    T_Q_B,
    T_K_W,
    T_K_B,
    T_V_W,
    T_V_B,
    T_PROJ_W,
    T_PROJ_B,
    T_TABLE,
    T_INDEX,
    T_LN2_W,
    T_LN2_B,
    T_FC1_W,
    T_FC1_B,
    T_FC2_W,
    T_FC2_B,
    T_COUNT
};

static const char *const block_tv[T_COUNT] = {"norm1.weight",
                                              "norm1.bias",
                                              "attn.qkv.weight",
                                              "attn.qkv.bias",
                                              NULL,
                                              NULL,
                                              NULL,
                                              NULL,
                                              NULL,
                                              NULL,
                                              "attn.proj.weight",
                                              "attn.proj.bias",
                                              "attn.relative_position_bias_table",
                                              "attn.relative_position_index",
                                              "norm2.weight",
                                              "norm2.bias",
                                              "mlp.0.weight",
                                              "mlp.0.bias",
                                              "mlp.3.weight",
                                              "mlp.3.bias"};
static const char *const block_timm[T_COUNT] = {"norm1.weight",
                                                "norm1.bias",
                                                "attn.qkv.weight",
                                                "attn.qkv.bias",
                                                NULL,
                                                NULL,
                                                NULL,
                                                NULL,
                                                NULL,
                                                NULL,
                                                "attn.proj.weight",
                                                "attn.proj.bias",
                                                "attn.relative_position_bias_table",
                                                "attn.relative_position_index",
                                                "norm2.weight",
                                                "norm2.bias",
                                                "mlp.fc1.weight",
                                                "mlp.fc1.bias",
                                                "mlp.fc2.weight",
                                                "mlp.fc2.bias"};
static const char *const block_hf4[T_COUNT] = {"layernorm_before.weight",
                                               "layernorm_before.bias",
                                               NULL,
                                               NULL,
                                               "attention.self.query.weight",
                                               "attention.self.query.bias",
                                               "attention.self.key.weight",
                                               "attention.self.key.bias",
                                               "attention.self.value.weight",
                                               "attention.self.value.bias",
                                               "attention.output.dense.weight",
                                               "attention.output.dense.bias",
                                               "attention.self.relative_position_bias_table",
                                               "attention.self.relative_position_index",
                                               "layernorm_after.weight",
                                               "layernorm_after.bias",
                                               "intermediate.dense.weight",
                                               "intermediate.dense.bias",
                                               "output.dense.weight",
                                               "output.dense.bias"};
static const char *const block_hf5[T_COUNT] = {
    "layernorm_before.weight",
    "layernorm_before.bias",
    NULL,
    NULL,
    "attention.q_proj.weight",
    "attention.q_proj.bias",
    "attention.k_proj.weight",
    "attention.k_proj.bias",
    "attention.v_proj.weight",
    "attention.v_proj.bias",
    "attention.o_proj.weight",
    "attention.o_proj.bias",
    "attention.relative_position_bias.relative_position_bias_table",
    "attention.relative_position_bias.relative_position_index",
    "layernorm_after.weight",
    "layernorm_after.bias",
    "mlp.fc1.weight",
    "mlp.fc1.bias",
    "mlp.fc2.weight",
    "mlp.fc2.bias"};

enum { O_PE_W, O_PE_B, O_PN_W, O_PN_B, O_NORM_W, O_NORM_B, O_HEAD_W, O_HEAD_B, O_COUNT };

static const char *const outer_tv[O_COUNT] = {
    "features.0.0.weight", "features.0.0.bias", "features.0.2.weight", "features.0.2.bias",
    "norm.weight",         "norm.bias",         "head.weight",         "head.bias"};
static const char *const outer_timm[O_COUNT] = {
    "patch_embed.proj.weight", "patch_embed.proj.bias", "patch_embed.norm.weight",
    "patch_embed.norm.bias",   "norm.weight",           "norm.bias",
    "head.fc.weight",          "head.fc.bias"};
static const char *const outer_hf[O_COUNT] = {"swin.embeddings.patch_embeddings.projection.weight",
                                              "swin.embeddings.patch_embeddings.projection.bias",
                                              "swin.embeddings.norm.weight",
                                              "swin.embeddings.norm.bias",
                                              "swin.layernorm.weight",
                                              "swin.layernorm.bias",
                                              "classifier.weight",
                                              "classifier.bias"};

const char *swin_family_name(swin_family f)
{
    switch (f) {
    case SWIN_TORCHVISION: return "torchvision";
    case SWIN_TIMM: return "timm";
    case SWIN_TIMM_OLD: return "timm (downsample at stage end)";
    case SWIN_HF4: return "hf";
    case SWIN_HF5: return "hf (transformers 5)";
    }
    return "?";
}

static const char *const *block_names(swin_family f)
{
    return f == SWIN_TORCHVISION ? block_tv
           : f == SWIN_HF4       ? block_hf4
           : f == SWIN_HF5       ? block_hf5
                                 : block_timm;
}

static const char *const *outer_names(swin_family f)
{
    return f == SWIN_TORCHVISION            ? outer_tv
           : f == SWIN_HF4 || f == SWIN_HF5 ? outer_hf
                                            : outer_timm;
}

/* The name of tensor `t` of block b of stage s (NULL when the naming has none). */
static const char *block_name(swin_family f, int s, int b, int t, char *buf, size_t size)
{
    const char *sfx = block_names(f)[t];
    if (!sfx)
        return NULL;
    if (f == SWIN_TORCHVISION)
        snprintf(buf, size, "features.%d.%d.%s", 2 * s + 1, b, sfx);
    else if (f == SWIN_HF4 || f == SWIN_HF5)
        snprintf(buf, size, "swin.encoder.layers.%d.blocks.%d.%s", s, b, sfx);
    else
        snprintf(buf, size, "layers.%d.blocks.%d.%s", s, b, sfx);
    return buf;
}

/* The name of `what` ("reduction.weight", "norm.weight", "norm.bias") of the patch merging that
 * follows stage s. */
static const char *merge_name(swin_family f, int s, const char *what, char *buf, size_t size)
{
    if (f == SWIN_TORCHVISION)
        snprintf(buf, size, "features.%d.%s", 2 * s + 2, what);
    else if (f == SWIN_TIMM)
        snprintf(buf, size, "layers.%d.downsample.%s", s + 1, what);
    else if (f == SWIN_TIMM_OLD)
        snprintf(buf, size, "layers.%d.downsample.%s", s, what);
    else
        snprintf(buf, size, "swin.encoder.layers.%d.downsample.%s", s, what);
    return buf;
}

static int has(const model_source *src, const char *name)
{
    int nd;
    int64_t s[8];
    return src->shape(src->u, name, &nd, s) == 0;
}

int swin_is(const model_source *src)
{
    return has(src, "features.1.0.attn.relative_position_bias_table") ||
           has(src, "layers.0.blocks.0.attn.relative_position_bias_table") ||
           has(src, "swin.encoder.layers.0.blocks.0.attention.self.relative_position_bias_table") ||
           has(src, "swin.encoder.layers.0.blocks.0.attention.relative_position_bias."
                    "relative_position_bias_table");
}

/* ---- detection ---- */

static int need_2d(const model_source *src, const char *name, int64_t s[8], pgd_error **err)
{
    int nd = 0;
    if (src->shape(src->u, name, &nd, s) != 0)
        return pgd_error_set(err, PGD_ERR_NOT_FOUND, "%s: Swin tensor '%s' is missing", src->label,
                             name);
    if (nd != 2) {
        char got[96];
        model_shape_str(nd, s, got, sizeof got);
        return pgd_error_set(err, PGD_ERR_SHAPE, "%s: '%s' must be 2-D, found %s", src->label, name,
                             got);
    }
    return PGD_OK;
}

/* Blocks per stage (counted by name), and each stage's window and heads from its first relative
 * position table, [(2w - 1)², heads]: every size checked before it is used. */
static int detect_stages(const model_source *src, swin_config *cfg, pgd_error **err)
{
    char name[256];
    int64_t s[8];
    for (int st = 0; st < SWIN_MAX_STAGES; st++) {
        int b = 0;
        while (b < 1000 && has(src, block_name(cfg->family, st, b, T_TABLE, name, sizeof name)))
            b++;
        if (!b)
            break;
        cfg->depth[st] = b;
        cfg->stages = st + 1;
        block_name(cfg->family, st, 0, T_TABLE, name, sizeof name);
        int rows = 0, rc = need_2d(src, name, s, err);
        if (!rc)
            rc = model_size(src, name, "rows", s[0], MODEL_SIZE_MAX, &rows, err);
        if (!rc)
            rc = model_size(src, name, "heads", s[1], MODEL_SIZE_MAX, &cfg->heads[st], err);
        if (rc)
            return rc;
        int64_t w = lround((sqrt((double)rows) + 1) / 2);
        if (w < 1 || (2 * w - 1) * (2 * w - 1) != rows)
            return pgd_error_set(err, PGD_ERR_SHAPE,
                                 "%s: '%s' has %d rows, not (2w - 1)² for a square window w",
                                 src->label, name, rows);
        if (w > SWIN_MAX_WINDOW)
            return pgd_error_set(err, PGD_ERR_SHAPE,
                                 "%s: '%s' has %d rows: a window of %lld, more than the %d a "
                                 "Swin V1 can have (its attention mask grows as the window's "
                                 "fourth power)",
                                 src->label, name, rows, (long long)w, SWIN_MAX_WINDOW);
        cfg->window[st] = (int)w;
    }
    if (cfg->stages < 1)
        return pgd_error_set(err, PGD_ERR_FORMAT, "%s: no Swin blocks ('%s' is missing)",
                             src->label, block_name(cfg->family, 0, 0, T_TABLE, name, sizeof name));
    for (int st = 0; st < cfg->stages; st++) {
        int64_t C = (int64_t)cfg->dim << st;
        if (C % cfg->heads[st])
            return pgd_error_set(err, PGD_ERR_SHAPE,
                                 "%s: stage %d: width %lld is not divisible by its %d heads",
                                 src->label, st, (long long)C, cfg->heads[st]);
    }
    return PGD_OK;
}

/* The MLP ratio (block 0's fc1, [hidden, dim]) and the classes (the head, [classes, width]). */
static int detect_widths(const model_source *src, swin_config *cfg, pgd_error **err)
{
    char name[256];
    int64_t s[8];
    int hidden = 0;
    block_name(cfg->family, 0, 0, T_FC1_W, name, sizeof name);
    int rc = need_2d(src, name, s, err);
    if (!rc && s[1] != cfg->dim)
        rc = pgd_error_set(err, PGD_ERR_SHAPE, "%s: '%s' has %lld columns, not the width %d",
                           src->label, name, (long long)s[1], cfg->dim);
    if (!rc)
        rc = model_size(src, name, "MLP hidden width", s[0], MODEL_SIZE_MAX, &hidden, err);
    if (rc)
        return rc;
    cfg->mlp_ratio_x100 = (int)((int64_t)hidden * 100 / cfg->dim);
    if (cfg->mlp_ratio_x100 < 1)
        return pgd_error_set(err, PGD_ERR_SHAPE, "%s: '%s': an MLP of %d for a width of %d",
                             src->label, name, hidden, cfg->dim);
    const char *head = outer_names(cfg->family)[O_HEAD_W];
    if (cfg->family == SWIN_TIMM || cfg->family == SWIN_TIMM_OLD)
        head = has(src, "head.fc.weight") ? "head.fc.weight" : "head.weight";
    if ((rc = need_2d(src, head, s, err)))
        return rc;
    return model_size(src, head, "classes", s[0], MODEL_SIZE_MAX, &cfg->classes, err);
}

int swin_detect(const model_source *src, swin_config *cfg, pgd_error **err)
{
    memset(cfg, 0, sizeof *cfg);
    if (has(src, "features.0.0.weight"))
        cfg->family = SWIN_TORCHVISION;
    else if (has(src, "swin.embeddings.patch_embeddings.projection.weight"))
        cfg->family = has(src, "swin.encoder.layers.0.blocks.0.attention.self.query.weight")
                          ? SWIN_HF4
                          : SWIN_HF5;
    else if (has(src, "patch_embed.proj.weight"))
        cfg->family = has(src, "layers.0.downsample.reduction.weight") ? SWIN_TIMM_OLD : SWIN_TIMM;
    else
        return pgd_error_set(err, PGD_ERR_FORMAT,
                             "%s: not a Swin checkpoint in torchvision, timm or Hugging Face "
                             "naming (no patch embedding found)",
                             src->label);
    size_t i = 0;
    for (const char *n; src->name_at && (n = src->name_at(src->u, i)) != NULL; i++)
        if (strstr(n, "logit_scale") || strstr(n, "cpb_mlp"))
            return pgd_error_set(err, PGD_ERR_UNSUPPORTED,
                                 "%s: '%s' is a Swin V2 tensor: Swin V2 is not supported yet "
                                 "(V1 only)",
                                 src->label, n);
    const char *const *on = outer_names(cfg->family);
    int64_t s[8];
    int nd = 0;
    if (src->shape(src->u, on[O_PE_W], &nd, s) != 0 || nd != 4 || s[1] != 3 || s[2] != s[3]) {
        char got[96] = "absent";
        if (nd)
            model_shape_str(nd, s, got, sizeof got);
        return pgd_error_set(err, PGD_ERR_SHAPE, "%s: '%s' must be [C, 3, P, P], found %s",
                             src->label, on[O_PE_W], got);
    }
    /* Stage s is dim << s wide: dim is bounded so that the widest stage stays in range. */
    int rc = model_size(src, on[O_PE_W], "channels", s[0], MODEL_SIZE_MAX >> 4, &cfg->dim, err);
    if (!rc)
        rc = model_size(src, on[O_PE_W], "patch size", s[2], SWIN_MAX_PATCH, &cfg->patch, err);
    if (!rc)
        rc = detect_stages(src, cfg, err);
    if (!rc)
        rc = detect_widths(src, cfg, err);
    if (rc)
        return rc;
    cfg->eps = 1e-5f; /* nn.LayerNorm's default in all three libraries' Swin */
    return PGD_OK;
}

/* ---- loading ---- */

typedef struct swin_block {
    pgd_tensor *ln1_w, *ln1_b, *ln2_w, *ln2_b;
    pgd_linear *qkv, *proj, *fc1, *fc2;
    float *table; /* host [(2w-1)², heads] */
    int window;
    /* The additive mask for the grid it was built for: [nW, heads, N, N] (shifted blocks) or
     * [heads, N, N] (the bias alone, shared by every window). */
    pgd_tensor *mask;
    int mask_h, mask_w, mask_shift_h, mask_shift_w;
    int64_t mask_copies; /* images the mask is repeated for (1 when unshifted) */
} swin_block;

typedef struct swin_merge {
    pgd_tensor *norm_w, *norm_b;
    pgd_linear *reduction;
} swin_merge;

struct swin_model {
    pgd_ctx *ctx;
    swin_config cfg;
    pgd_tensor *pe_w, *pe_b, *pn_w, *pn_b, *norm_w, *norm_b;
    pgd_patch_proj *pe_proj; /* pe_w prepared once (packed on CPU devices) */
    pgd_tensor *mean_row;    /* [1, tokens] of 1/tokens for the head's mean (model_mean_row) */
    pgd_linear *head;
    swin_block *blocks[SWIN_MAX_STAGES];
    swin_merge merges[SWIN_MAX_STAGES];
    model_probe *probe;
    pgd_attention_mode attn_mode;
    int64_t attn_topk;
    uint64_t attn_seed;
    double attn_ms; /* window attention time of the last forward (with profiling off: 0) */
};

void swin_set_attention(swin_model *m, pgd_attention_mode mode, int64_t topk, uint64_t seed)
{
    m->attn_mode = mode;
    m->attn_topk = topk;
    m->attn_seed = seed;
}

static int load_linear(pgd_ctx *ctx, const model_source *src, const char *wname, const char *bname,
                       int64_t out, int64_t in, pgd_linear **l, pgd_error **err)
{
    int64_t sw[2] = {out, in}, sb[1] = {out};
    float *w = NULL, *b = NULL;
    int rc = model_read_host(src, wname, 2, sw, &w, err);
    if (!rc && bname)
        rc = model_read_host(src, bname, 1, sb, &b, err);
    if (!rc)
        rc = model_linear_from_host(ctx, w, b, out, in, l, err);
    free(w);
    free(b);
    return rc;
}

/* The fused q|k|v projection: one tensor in torchvision and timm, three in Hugging Face's. */
static int load_qkv(pgd_ctx *ctx, const model_source *src, swin_family f, int s, int b, int64_t C,
                    pgd_linear **l, pgd_error **err)
{
    char n[256], nb[256];
    if (block_names(f)[T_QKV_W])
        return load_linear(ctx, src, block_name(f, s, b, T_QKV_W, n, sizeof n),
                           block_name(f, s, b, T_QKV_B, nb, sizeof nb), 3 * C, C, l, err);
    float *w = malloc((size_t)(3 * C * C) * sizeof *w),
          *bias = malloc((size_t)(3 * C) * sizeof *bias);
    int rc = w && bias
                 ? PGD_OK
                 : pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "stage %d block %d qkv", s, b);
    int64_t sw[2] = {C, C}, sb[1] = {C};
    for (int part = 0; part < 3 && !rc; part++) {
        float *hw = NULL, *hb = NULL;
        rc = model_read_host(src, block_name(f, s, b, T_Q_W + 2 * part, n, sizeof n), 2, sw, &hw,
                             err);
        if (!rc)
            rc = model_read_host(src, block_name(f, s, b, T_Q_B + 2 * part, n, sizeof n), 1, sb,
                                 &hb, err);
        if (!rc) {
            memcpy(w + part * C * C, hw, (size_t)(C * C) * sizeof *w);
            memcpy(bias + part * C, hb, (size_t)C * sizeof *bias);
        }
        free(hw);
        free(hb);
    }
    if (!rc)
        rc = model_linear_from_host(ctx, w, bias, 3 * C, C, l, err);
    free(w);
    free(bias);
    return rc;
}

static int load_block(swin_model *m, const model_source *src, int s, int b, pgd_error **err)
{
    pgd_ctx *ctx = m->ctx;
    const swin_config *c = &m->cfg;
    swin_family f = c->family;
    swin_block *k = &m->blocks[s][b];
    int64_t C = (int64_t)c->dim << s, w = c->window[s], N = w * w, heads = c->heads[s];
    int64_t hidden = C * c->mlp_ratio_x100 / 100, sd[1] = {C};
    char n[256], nb[256];
    k->window = (int)w;
    int rc = model_load_tensor(ctx, src, block_name(f, s, b, T_LN1_W, n, sizeof n), 1, sd,
                               &k->ln1_w, err);
    if (!rc)
        rc = model_load_tensor(ctx, src, block_name(f, s, b, T_LN1_B, n, sizeof n), 1, sd,
                               &k->ln1_b, err);
    if (!rc)
        rc = model_load_tensor(ctx, src, block_name(f, s, b, T_LN2_W, n, sizeof n), 1, sd,
                               &k->ln2_w, err);
    if (!rc)
        rc = model_load_tensor(ctx, src, block_name(f, s, b, T_LN2_B, n, sizeof n), 1, sd,
                               &k->ln2_b, err);
    if (!rc)
        rc = load_qkv(ctx, src, f, s, b, C, &k->qkv, err);
    if (!rc)
        rc = load_linear(ctx, src, block_name(f, s, b, T_PROJ_W, n, sizeof n),
                         block_name(f, s, b, T_PROJ_B, nb, sizeof nb), C, C, &k->proj, err);
    if (!rc)
        rc = load_linear(ctx, src, block_name(f, s, b, T_FC1_W, n, sizeof n),
                         block_name(f, s, b, T_FC1_B, nb, sizeof nb), hidden, C, &k->fc1, err);
    if (!rc)
        rc = load_linear(ctx, src, block_name(f, s, b, T_FC2_W, n, sizeof n),
                         block_name(f, s, b, T_FC2_B, nb, sizeof nb), C, hidden, &k->fc2, err);
    int64_t st[2] = {(2 * w - 1) * (2 * w - 1), heads};
    if (!rc)
        rc = model_read_host(src, block_name(f, s, b, T_TABLE, n, sizeof n), 2, st, &k->table, err);
    /* The index buffer is a function of the window alone (and absent from timm's files): its
     * shape is checked and the values are computed here. */
    int64_t si[1] = {N * N};
    if (!rc && has(src, block_name(f, s, b, T_INDEX, n, sizeof n)))
        rc = model_need(src, n, 1, si, err);
    return rc;
}

static int load_merge(swin_model *m, const model_source *src, int s, pgd_error **err)
{
    swin_merge *g = &m->merges[s];
    int64_t C = (int64_t)m->cfg.dim << s, s4[1] = {4 * C};
    char n[256];
    swin_family f = m->cfg.family;
    int rc = model_load_tensor(m->ctx, src, merge_name(f, s, "norm.weight", n, sizeof n), 1, s4,
                               &g->norm_w, err);
    if (!rc)
        rc = model_load_tensor(m->ctx, src, merge_name(f, s, "norm.bias", n, sizeof n), 1, s4,
                               &g->norm_b, err);
    if (!rc)
        rc = load_linear(m->ctx, src, merge_name(f, s, "reduction.weight", n, sizeof n), NULL,
                         2 * C, 4 * C, &g->reduction, err);
    return rc;
}

static int load_outer(swin_model *m, const model_source *src, pgd_error **err)
{
    const swin_config *c = &m->cfg;
    const char *const *on = outer_names(c->family);
    int64_t C = c->dim, Cl = (int64_t)c->dim << (c->stages - 1);
    int64_t spe[4] = {C, 3, c->patch, c->patch}, sd[1] = {C}, sl[1] = {Cl};
    int rc = model_load_tensor(m->ctx, src, on[O_PE_W], 4, spe, &m->pe_w, err);
    if (!rc)
        rc = pgd_patch_proj_create(m->ctx, m->pe_w, &m->pe_proj, err);
    if (!rc)
        rc = model_load_tensor(m->ctx, src, on[O_PE_B], 1, sd, &m->pe_b, err);
    if (!rc)
        rc = model_load_tensor(m->ctx, src, on[O_PN_W], 1, sd, &m->pn_w, err);
    if (!rc)
        rc = model_load_tensor(m->ctx, src, on[O_PN_B], 1, sd, &m->pn_b, err);
    if (!rc)
        rc = model_load_tensor(m->ctx, src, on[O_NORM_W], 1, sl, &m->norm_w, err);
    if (!rc)
        rc = model_load_tensor(m->ctx, src, on[O_NORM_B], 1, sl, &m->norm_b, err);
    const char *hw = on[O_HEAD_W], *hb = on[O_HEAD_B];
    if ((c->family == SWIN_TIMM || c->family == SWIN_TIMM_OLD) && !has(src, hw))
        hw = "head.weight", hb = "head.bias";
    if (!rc)
        rc = load_linear(m->ctx, src, hw, hb, c->classes, Cl, &m->head, err);
    return rc;
}

static int load_all(void *model, const model_source *ts, pgd_error **err)
{
    swin_model *m = model;
    const swin_config *cfg = &m->cfg;
    int rc = load_outer(m, ts, err);
    for (int s = 0; s < cfg->stages && !rc; s++) {
        for (int b = 0; b < cfg->depth[s] && !rc; b++)
            rc = load_block(m, ts, s, b, err);
        if (!rc && s + 1 < cfg->stages)
            rc = load_merge(m, ts, s, err);
    }
    return rc;
}

int swin_load(pgd_ctx *ctx, const model_source *src, const swin_config *cfg, swin_model **out,
              pgd_error **err)
{
    *out = NULL;
    if (model_check_fits(ctx, src, "Swin weights", err))
        return PGD_ERR_TOO_LARGE;
    swin_model *m = calloc(1, sizeof *m);
    if (!m)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "Swin model");
    m->ctx = ctx;
    m->cfg = *cfg;
    int rc = PGD_OK;
    for (int s = 0; s < cfg->stages && !rc; s++)
        if (!(m->blocks[s] = calloc((size_t)cfg->depth[s], sizeof *m->blocks[s])))
            rc = pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "Swin blocks");
    if (!rc)
        rc = model_load_strict(src, load_all, m, NULL, 0, err);
    if (rc) {
        swin_free(m);
        return rc;
    }
    *out = m;
    return PGD_OK;
}

void swin_free(swin_model *m)
{
    if (!m)
        return;
    pgd_patch_proj_destroy(m->pe_proj);
    pgd_tensor *ts[] = {m->pe_w, m->pe_b, m->pn_w, m->pn_b, m->norm_w, m->norm_b, m->mean_row};
    model_destroy_tensors(ts, sizeof ts / sizeof *ts);
    pgd_linear_destroy(m->head);
    for (int s = 0; s < m->cfg.stages; s++) {
        for (int b = 0; m->blocks[s] && b < m->cfg.depth[s]; b++) {
            swin_block *k = &m->blocks[s][b];
            pgd_tensor *bt[] = {k->ln1_w, k->ln1_b, k->ln2_w, k->ln2_b, k->mask};
            for (size_t i = 0; i < sizeof bt / sizeof *bt; i++)
                pgd_tensor_destroy(bt[i]);
            pgd_linear_destroy(k->qkv);
            pgd_linear_destroy(k->proj);
            pgd_linear_destroy(k->fc1);
            pgd_linear_destroy(k->fc2);
            free(k->table);
        }
        free(m->blocks[s]);
        pgd_tensor_destroy(m->merges[s].norm_w);
        pgd_tensor_destroy(m->merges[s].norm_b);
        pgd_linear_destroy(m->merges[s].reduction);
    }
    free(m);
}

/* ---- forward ---- */

/* The region of a padded, rolled coordinate for the shifted-window mask: torchvision's slices
 * (0, -w), (-w, -shift), (-shift, None) over a padded length n. */
static int region(int64_t p, int64_t n, int64_t w, int64_t shift)
{
    return p < n - w ? 0 : p < n - shift ? 1 : 2;
}

/* The shift of block bi over an H x W grid: odd blocks shift by half a window, except along a
 * dimension the window covers whole. */
static void block_shift(int64_t w, int64_t H, int64_t W, int bi, int64_t *sh, int64_t *sw)
{
    int64_t Hp = (H + w - 1) / w * w, Wp = (W + w - 1) / w * w;
    *sh = bi % 2 && w < Hp ? w / 2 : 0;
    *sw = bi % 2 && w < Wp ? w / 2 : 0;
}

/* The bias alone is shared by every window of every image (batch stride 0); a shifted block's
 * mask differs per window and is repeated for each of the B images, so that all B·nW windows
 * run as one launch. */
static int64_t mask_copies(int64_t B, int64_t sh, int64_t sw)
{
    return sh || sw ? B : 1;
}

static int mask_is_for(const swin_block *k, int64_t B, int64_t H, int64_t W, int64_t sh, int64_t sw)
{
    return k->mask && k->mask_h == H && k->mask_w == W && k->mask_shift_h == sh &&
           k->mask_shift_w == sw && k->mask_copies == mask_copies(B, sh, sw);
}

/* Floats in block k's mask for an H x W grid (-1: past any size model_mul allows). */
static int64_t mask_floats(const swin_block *k, int64_t heads, int64_t B, int64_t H, int64_t W,
                           int64_t sh, int64_t sw)
{
    int64_t w = k->window, N = w * w;
    int64_t nW = sh || sw ? model_mul((H + w - 1) / w, (W + w - 1) / w) : 1;
    return model_mul(model_mul(model_mul(nW, mask_copies(B, sh, sw)), heads), N * N);
}

/* Builds k->mask for an H x W grid (see the file comment) unless it is already for it. */
static int block_mask(swin_model *m, swin_block *k, int64_t heads, int64_t B, int64_t H, int64_t W,
                      int64_t sh, int64_t sw, pgd_error **err)
{
    if (mask_is_for(k, B, H, W, sh, sw))
        return PGD_OK;
    pgd_tensor_destroy(k->mask);
    k->mask = NULL;
    int64_t copies = mask_copies(B, sh, sw);
    int64_t w = k->window, N = w * w, R = 2 * w - 1;
    int64_t Hp = (H + w - 1) / w * w, Wp = (W + w - 1) / w * w, nWw = Wp / w;
    int64_t nW = sh || sw ? (Hp / w) * nWw : 1;
    /* swin_forward checked the whole mask against the host and the device (check_plan). */
    size_t one = (size_t)(nW * heads * N * N);
    float *host = malloc(one * (size_t)copies * sizeof *host);
    if (!host)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "Swin attention mask");
    for (int64_t win = 0; win < nW; win++)
        for (int64_t h = 0; h < heads; h++)
            for (int64_t i = 0; i < N; i++)
                for (int64_t j = 0; j < N; j++) {
                    int64_t ri = i / w, ci = i % w, rj = j / w, cj = j % w;
                    int64_t idx = (ri - rj + w - 1) * R + (ci - cj + w - 1);
                    float v = k->table[idx * heads + h];
                    if (sh || sw) {
                        int64_t base_r = win / nWw * w, base_c = win % nWw * w;
                        int li =
                            region(base_r + ri, Hp, w, sh) * 3 + region(base_c + ci, Wp, w, sw);
                        int lj =
                            region(base_r + rj, Hp, w, sh) * 3 + region(base_c + cj, Wp, w, sw);
                        if (li != lj)
                            v += -100.0f;
                    }
                    host[((win * heads + h) * N + i) * N + j] = v;
                }
    for (int64_t c = 1; c < copies; c++)
        memcpy(host + (size_t)c * one, host, one * sizeof *host);
    int64_t shape[4] = {copies * nW, heads, N, N};
    int rc = model_upload(m->ctx, host, 4, shape, &k->mask, err);
    free(host);
    if (!rc) {
        k->mask_h = (int)H, k->mask_w = (int)W;
        k->mask_shift_h = (int)sh, k->mask_shift_w = (int)sw;
        k->mask_copies = copies;
    }
    return rc;
}

typedef struct pass_state {
    swin_model *m;
    int64_t B, H, W; /* the current grid */
    pgd_tensor *img, *x, *h, *win, *qkv, *a, *o, *mlp, *pm, *pm_n, *pooled, *out;
} pass_state;

static void drop(pgd_tensor **t)
{
    pgd_tensor_destroy(*t);
    *t = NULL;
}

static void pass_free(pass_state *ps)
{
    pgd_tensor **all[] = {&ps->img, &ps->x,   &ps->h,  &ps->win,  &ps->qkv,    &ps->a,
                          &ps->o,   &ps->mlp, &ps->pm, &ps->pm_n, &ps->pooled, &ps->out};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        drop(all[i]);
}

/* The stage's working tensors for the current grid and width. */
static int stage_alloc(pass_state *ps, int s, pgd_error **err)
{
    pgd_ctx *ctx = ps->m->ctx;
    const swin_config *c = &ps->m->cfg;
    int64_t C = (int64_t)c->dim << s, w = c->window[s], N = w * w, B = ps->B;
    int64_t nW = ((ps->H + w - 1) / w) * ((ps->W + w - 1) / w);
    int64_t hidden = C * c->mlp_ratio_x100 / 100;
    drop(&ps->h), drop(&ps->win), drop(&ps->qkv), drop(&ps->a), drop(&ps->o), drop(&ps->mlp);
    int64_t sx[4] = {B, ps->H, ps->W, C}, sw[3] = {B * nW, N, C}, sq[3] = {B * nW, N, 3 * C};
    int64_t sm[4] = {B, ps->H, ps->W, hidden};
    int rc = pgd_tensor_create(ctx, 4, sx, &ps->h, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 3, sw, &ps->win, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 3, sq, &ps->qkv, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 3, sw, &ps->a, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 3, sw, &ps->o, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 4, sm, &ps->mlp, err);
    return rc;
}

/* The attention of all B·nW windows of the batch as one launch: q, k, v read in place from
 * the qkv projection, the mask per window (shifted blocks) or shared (the bias alone). */
static int window_attention(pass_state *ps, swin_block *k, int s, int bi, int64_t nW,
                            pgd_error **err)
{
    const swin_config *c = &ps->m->cfg;
    int64_t C = (int64_t)c->dim << s, heads = c->heads[s], hd = C / heads,
            N = k->window * k->window;
    int shifted = k->mask_shift_h || k->mask_shift_w;
    pgd_attention_args aa;
    memset(&aa, 0, sizeof aa);
    aa.batch = ps->B * nW;
    aa.heads = heads;
    aa.nq = aa.nk = N;
    aa.head_dim = hd;
    aa.q = (pgd_view){ps->qkv, 0, N * 3 * C, hd, 3 * C};
    aa.k = (pgd_view){ps->qkv, C, N * 3 * C, hd, 3 * C};
    aa.v = (pgd_view){ps->qkv, 2 * C, N * 3 * C, hd, 3 * C};
    aa.o = (pgd_view){ps->a, 0, N * C, hd, C};
    aa.mask = (pgd_view){k->mask, 0, shifted ? heads * N * N : 0, N * N, N};
    aa.mode = ps->m->attn_mode;
    aa.topk = ps->m->attn_topk;
    aa.seed = ps->m->attn_seed + (uint64_t)(s * 1000 + bi) * UINT64_C(0x9e3779b97f4a7c15);
    return pgd_attention(ps->m->ctx, &aa, err);
}

static int block_forward(pass_state *ps, int s, int bi, pgd_error **err)
{
    swin_model *m = ps->m;
    pgd_ctx *ctx = m->ctx;
    const swin_config *c = &m->cfg;
    swin_block *k = &m->blocks[s][bi];
    int64_t w = k->window, Hp = (ps->H + w - 1) / w * w, Wp = (ps->W + w - 1) / w * w;
    int64_t nW = (Hp / w) * (Wp / w), sh, sw;
    block_shift(w, ps->H, ps->W, bi, &sh, &sw);
    /* timm rolls the map before padding it; torchvision and Hugging Face roll the padded map. */
    int flags = c->family == SWIN_TIMM || c->family == SWIN_TIMM_OLD ? PGD_WINDOW_ROLL_UNPADDED : 0;
    int rc = block_mask(m, k, c->heads[s], ps->B, ps->H, ps->W, sh, sw, err);
    if (!rc)
        rc = pgd_layernorm(ctx, ps->x, k->ln1_w, k->ln1_b, c->eps, ps->h, err);
    if (!rc)
        rc = pgd_window_partition(ctx, ps->h, w, sh, sw, flags, ps->win, err);
    if (!rc)
        rc = pgd_linear_forward(ctx, k->qkv, ps->win, PGD_ACT_NONE, NULL, ps->qkv, err);
    double t0 = model_now_ms();
    if (!rc && m->attn_ms >= 0)
        rc = pgd_ctx_finish(ctx, err);
    if (!rc)
        rc = window_attention(ps, k, s, bi, nW, err);
    if (!rc && m->attn_ms >= 0) {
        rc = pgd_ctx_finish(ctx, err);
        m->attn_ms += model_now_ms() - t0;
    }
    if (!rc)
        rc = pgd_linear_forward(ctx, k->proj, ps->a, PGD_ACT_NONE, NULL, ps->o, err);
    if (!rc)
        rc = pgd_window_merge_add(ctx, ps->o, w, sh, sw, flags, ps->x, err);
    if (!rc)
        rc =
            model_probe_tensor(m->probe, ps->x, err, "stage %d block %d (window attention)", s, bi);
    if (!rc)
        rc = model_mlp_residual(ctx, ps->x, k->ln2_w, k->ln2_b, c->eps, k->fc1, k->fc2, ps->h,
                                ps->mlp, err);
    if (!rc)
        rc = model_probe_tensor(m->probe, ps->x, err, "stage %d block %d (mlp)", s, bi);
    return rc;
}

/* Patch merging after stage s: x [B, H, W, C] -> [B, ceil(H/2), ceil(W/2), 2C]. */
static int merge_forward(pass_state *ps, int s, pgd_error **err)
{
    swin_model *m = ps->m;
    pgd_ctx *ctx = m->ctx;
    int64_t C = (int64_t)m->cfg.dim << s, Ho = (ps->H + 1) / 2, Wo = (ps->W + 1) / 2;
    int64_t spm[4] = {ps->B, Ho, Wo, 4 * C}, sx[4] = {ps->B, Ho, Wo, 2 * C};
    drop(&ps->pm), drop(&ps->pm_n);
    int rc = pgd_tensor_create(ctx, 4, spm, &ps->pm, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 4, spm, &ps->pm_n, err);
    if (!rc)
        rc = pgd_patch_merge(ctx, ps->x, ps->pm, err);
    if (!rc)
        rc = pgd_layernorm(ctx, ps->pm, m->merges[s].norm_w, m->merges[s].norm_b, m->cfg.eps,
                           ps->pm_n, err);
    drop(&ps->x);
    if (!rc)
        rc = pgd_tensor_create(ctx, 4, sx, &ps->x, err);
    if (!rc)
        rc = pgd_linear_forward(ctx, m->merges[s].reduction, ps->pm_n, PGD_ACT_NONE, NULL, ps->x,
                                err);
    ps->H = Ho, ps->W = Wo;
    if (!rc)
        rc = model_probe_tensor(m->probe, ps->x, err, "patch merging after stage %d", s);
    return rc;
}

static int head_forward(pass_state *ps, float *logits, pgd_error **err)
{
    swin_model *m = ps->m;
    pgd_ctx *ctx = m->ctx;
    int64_t C = (int64_t)m->cfg.dim << (m->cfg.stages - 1), T = ps->H * ps->W, B = ps->B;
    drop(&ps->h);
    int64_t sx[4] = {B, ps->H, ps->W, C}, sp[2] = {B, C}, so[2] = {B, m->cfg.classes};
    int rc = pgd_tensor_create(ctx, 4, sx, &ps->h, err);
    if (!rc)
        rc = model_mean_row(ctx, T, &m->mean_row, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 2, sp, &ps->pooled, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 2, so, &ps->out, err);
    model_head h = {ps->x,   m->norm_w, m->norm_b, m->mean_row, m->cfg.eps, ps->h,   ps->pooled,
                    ps->out, m->head,   B,         T,           C,          m->probe};
    return rc ? rc : model_mean_head(ctx, &h, logits, err);
}

/* Refuses, before anything is built, a forward whose masks or window tensors cannot be made.
 * A mask grows with the fourth power of the window the tables imply (window 200: 6 GiB for each
 * head of a block), is built on the host and kept on the device per block, so each is checked
 * against the host and the device's largest buffer, and the masks together against the
 * device's free memory. H x W: the patch grid. */
static int check_plan(swin_model *m, int64_t B, int64_t H, int64_t W, pgd_error **err)
{
    const swin_config *c = &m->cfg;
    uint64_t total = 0;
    char what[320];
    int rc = PGD_OK;
    for (int s = 0; s < c->stages && !rc; s++) {
        int64_t C = (int64_t)c->dim << s, w = c->window[s], N = w * w;
        int64_t nW = model_mul((H + w - 1) / w, (W + w - 1) / w);
        snprintf(what, sizeof what,
                 "Swin stage %d: q, k and v of %lld windows of %lldx%lld "
                 "tokens (a %lldx%lld grid)",
                 s, (long long)(B * nW), (long long)w, (long long)w, (long long)H, (long long)W);
        rc = model_check_alloc(m->ctx, 0, model_mul(model_mul(B, nW), N * 3 * C * 4), what, err);
        for (int b = 0; b < c->depth[s] && !rc; b++) {
            swin_block *k = &m->blocks[s][b];
            int64_t sh, sw;
            block_shift(w, H, W, b, &sh, &sw);
            if (mask_is_for(k, B, H, W, sh, sw))
                continue;
            int64_t bytes = model_mul(mask_floats(k, c->heads[s], B, H, W, sh, sw), 4);
            snprintf(what, sizeof what,
                     "Swin stage %d block %d: the attention mask of window "
                     "%lld (from its relative position table) over a %lldx%lld grid",
                     s, b, (long long)w, (long long)H, (long long)W);
            rc = model_check_alloc(m->ctx, 1, bytes, what, err);
            total += rc ? 0 : (uint64_t)bytes;
        }
        H = (H + 1) / 2, W = (W + 1) / 2;
    }
    const pgd_device_info *d = pgd_ctx_get_device(m->ctx);
    pgd_memory_stats mem;
    pgd_ctx_get_memory_stats(m->ctx, &mem);
    uint64_t room = d->global_mem > mem.live_bytes ? d->global_mem - mem.live_bytes : 0;
    if (!rc && total > room)
        rc = pgd_error_set(err, PGD_ERR_TOO_LARGE,
                           "Swin: the attention masks of the windows the relative position "
                           "tables imply (%d in stage 0) need %.1f MiB together for this input, "
                           "more than the %.1f MiB '%s' has free",
                           c->window[0], (double)total / 1048576.0, (double)room / 1048576.0,
                           d->name);
    return rc;
}

int swin_forward(swin_model *m, const float *images, int B, int H, int W, float *logits,
                 double *times, pgd_error **err)
{
    pgd_ctx *ctx = m->ctx;
    const swin_config *c = &m->cfg;
    int64_t P = c->patch;
    if (B < 1 || H < P || W < P || H % P || W % P)
        return pgd_error_set(err, PGD_ERR_SHAPE,
                             "swin: input [%d, 3, %d, %d] must be whole %lldx%lld patches", B, H, W,
                             (long long)P, (long long)P);
    int rc = check_plan(m, B, H / P, W / P, err);
    if (rc)
        return rc;
    pass_state ps = {.m = m, .B = B, .H = H / P, .W = W / P};
    m->attn_ms = times ? 0 : -1;
    double t0 = model_now_ms();
    int64_t si[4] = {B, 3, H, W}, st[3] = {B, ps.H * ps.W, c->dim};
    rc = model_upload(ctx, images, 4, si, &ps.img, err);
    if (!rc)
        rc = model_probe_tensor(m->probe, ps.img, err, "the input");
    pgd_tensor *tokens = NULL;
    if (!rc)
        rc = pgd_tensor_create(ctx, 3, st, &tokens, err);
    if (!rc)
        rc = pgd_patch_embed_proj(ctx, ps.img, m->pe_proj, m->pe_b, NULL, NULL, NULL, tokens, err);
    int64_t sx[4] = {B, ps.H, ps.W, c->dim};
    if (!rc)
        rc = pgd_tensor_reshape(tokens, 4, sx, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 4, sx, &ps.x, err);
    if (!rc)
        rc = pgd_layernorm(ctx, tokens, m->pn_w, m->pn_b, c->eps, ps.x, err);
    pgd_tensor_destroy(tokens);
    if (!rc)
        rc = model_probe_tensor(m->probe, ps.x, err, "patch embedding");
    double t1 = model_stage_end(ctx, times != NULL, &rc, err);
    for (int s = 0; s < c->stages && !rc; s++) {
        rc = stage_alloc(&ps, s, err);
        for (int b = 0; b < c->depth[s] && !rc; b++)
            rc = block_forward(&ps, s, b, err);
        if (!rc && s + 1 < c->stages)
            rc = merge_forward(&ps, s, err);
    }
    double t2 = model_stage_end(ctx, times != NULL, &rc, err);
    if (!rc)
        rc = head_forward(&ps, logits, err);
    double t3 = model_now_ms();
    model_stage_times(times, t0, t1, t2, t3);
    if (times)
        times[4] = t2 > t1 ? m->attn_ms / (t2 - t1) : 0;
    pass_free(&ps);
    return rc;
}

static int probe_pass(void *model, const float *image, int H, int W, float *logits, pgd_error **err)
{
    return swin_forward(model, image, 1, H, W, logits, NULL, err);
}

int swin_find_nonfinite(swin_model *m, const float *image, int H, int W, model_probe *p,
                        pgd_error **err)
{
    return model_probe_run(p, &m->probe, m->cfg.classes, probe_pass, m, image, H, W, err);
}
