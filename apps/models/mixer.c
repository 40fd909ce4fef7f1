/* mixer.c — MLP-Mixer on libpagoda's ops (see mixer.h).
 *
 * A block is x += fc2(GELU(fc1(LN1(x)ᵀ)))ᵀ (token mixing, across the S patches of each channel)
 * then x += fc2(GELU(fc1(LN2(x)))) (channel mixing). x stays [B, S, D] throughout; the token MLP
 * runs as two strided GEMMs that read the token axis through transposed operands, so nothing is
 * ever transposed in memory:
 *
 *   U_b [D, Th]  = GELU(LN1(x)_bᵀ · W1ᵀ + b1)    A = LN1(x)_b read transposed, B = W1 shared
 *   x_b [S, D]  += [W2 | b2] · [U_b | 1]ᵀ         A = W2 with b2 as an extra column, shared
 *
 * The second GEMM's bias runs along its rows (tokens), which the GEMM epilogue (a bias per
 * column) cannot add; folding it in as one more K column against a column of ones in U, written
 * once when U is made, adds it inside the same GEMM. The head averages the tokens with a third
 * GEMM (a row of 1/S against each image's tokens). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "family.h"
#include "mixer.h"

typedef struct mixer_block {
    pgd_tensor *ln1_w, *ln1_b, *ln2_w, *ln2_b;
    pgd_tensor *tok_w1, *tok_b1, *tok_w2b; /* [Th, S], [Th], [S, Th + 1] (b2 last) */
    pgd_linear *ch_fc1, *ch_fc2;
} mixer_block;

struct mixer_model {
    pgd_ctx *ctx;
    mixer_config cfg;
    pgd_tensor *pe_w, *pe_b, *norm_w, *norm_b, *mean_row; /* mean_row [1, S] of 1/S */
    pgd_patch_proj *pe_proj; /* pe_w prepared once (packed on CPU devices) */
    pgd_linear *head;
    mixer_block *blocks;
    model_probe *probe;
};

int mixer_is(const model_source *src)
{
    int nd;
    int64_t s[8];
    return src->shape(src->u, "stem.proj.weight", &nd, s) == 0 &&
           src->shape(src->u, "blocks.0.mlp_tokens.fc1.weight", &nd, s) == 0;
}

/* The shape of `name` when it has `ndim` dims, else an error naming it. */
static int shape_of(const model_source *src, const char *name, int ndim, int64_t *s,
                    pgd_error **err)
{
    int nd = 0;
    if (src->shape(src->u, name, &nd, s) != 0)
        return pgd_error_set(err, PGD_ERR_NOT_FOUND, "%s: MLP-Mixer tensor '%s' is missing",
                             src->label, name);
    if (nd != ndim) {
        char got[96];
        model_shape_str(nd, s, got, sizeof got);
        return pgd_error_set(err, PGD_ERR_SHAPE, "%s: '%s' must have %d dims, found %s", src->label,
                             name, ndim, got);
    }
    return PGD_OK;
}

int mixer_detect(const model_source *src, mixer_config *cfg, pgd_error **err)
{
    memset(cfg, 0, sizeof *cfg);
    int64_t s[8];
    int rc = shape_of(src, "stem.proj.weight", 4, s, err);
    if (rc)
        return rc;
    if (s[1] != 3 || s[2] != s[3]) {
        char got[96];
        model_shape_str(4, s, got, sizeof got);
        return pgd_error_set(err, PGD_ERR_SHAPE,
                             "%s: 'stem.proj.weight' must be [D, 3, P, P], found %s", src->label,
                             got);
    }
    /* Every size is checked before it is used: a zero dimension names its tensor here rather
     * than failing as an empty buffer copy on the device later. */
    rc = model_size(src, "stem.proj.weight", "channels", s[0], MODEL_SIZE_MAX, &cfg->dim, err);
    if (!rc)
        rc = model_size(src, "stem.proj.weight", "patch size", s[2], MIXER_MAX_PATCH, &cfg->patch,
                        err);
    if (rc)
        return rc;
    cfg->depth = model_count_indexed(src, "blocks.", ".");
    if (cfg->depth < 1)
        return pgd_error_set(err, PGD_ERR_FORMAT, "%s: no MLP-Mixer blocks (blocks.N.*)",
                             src->label);
    const char *tok = "blocks.0.mlp_tokens.fc1.weight", *ch = "blocks.0.mlp_channels.fc1.weight";
    if (!(rc = shape_of(src, tok, 2, s, err)) &&
        !(rc = model_size(src, tok, "token MLP width", s[0], MODEL_SIZE_MAX, &cfg->tokens_hidden,
                          err)))
        rc = model_size(src, tok, "tokens", s[1], MODEL_SIZE_MAX, &cfg->tokens, err);
    if (!rc && !(rc = shape_of(src, ch, 2, s, err)))
        rc = model_size(src, ch, "channel MLP width", s[0], MODEL_SIZE_MAX, &cfg->channels_hidden,
                        err);
    if (!rc && !(rc = shape_of(src, "head.weight", 2, s, err)))
        rc = model_size(src, "head.weight", "classes", s[0], MODEL_SIZE_MAX, &cfg->classes, err);
    if (rc)
        return rc;
    int g = (int)lround(sqrt((double)cfg->tokens));
    if (g < 1 || g * g != cfg->tokens)
        return pgd_error_set(err, PGD_ERR_SHAPE,
                             "%s: '%s' mixes %d tokens, not a square patch grid", src->label, tok,
                             cfg->tokens);
    /* The input side, patch x grid, is an image size: bounded as images are. */
    if ((int64_t)g * cfg->patch > MIXER_MAX_SIDE)
        return pgd_error_set(err, PGD_ERR_SHAPE,
                             "%s: a %dx%d grid of %d-pixel patches ('%s', 'stem.proj.weight') "
                             "is a %lld-pixel input side, more than %d",
                             src->label, g, g, cfg->patch, tok, (long long)g * cfg->patch,
                             MIXER_MAX_SIDE);
    cfg->grid_h = cfg->grid_w = g;
    cfg->eps = 1e-6f; /* timm's Mixer: LayerNorm(eps=1e-6) */
    return PGD_OK;
}

/* ---- loading ---- */

/* A linear layer from `prefix`.weight [out, in] and `prefix`.bias [out]. */
static int load_linear(pgd_ctx *ctx, const model_source *src, const char *prefix, int64_t out,
                       int64_t in, pgd_linear **l, pgd_error **err)
{
    char wn[160], bn[160];
    snprintf(wn, sizeof wn, "%.150s.weight", prefix);
    snprintf(bn, sizeof bn, "%.150s.bias", prefix);
    return model_load_linear(ctx, src, wn, bn, 1, out, in, l, err);
}

static int load_block(void *model, const model_source *src, int i, pgd_error **err)
{
    mixer_model *m = model;
    pgd_ctx *ctx = m->ctx;
    const mixer_config *c = &m->cfg;
    mixer_block *b = &m->blocks[i];
    int64_t D = c->dim, S = c->tokens, Th = c->tokens_hidden, Ch = c->channels_hidden;
    int64_t sd[1] = {D};
    char n[160];
#define NAME(fmt) (snprintf(n, sizeof n, "blocks.%d." fmt, i), n)
    int rc = model_load_tensor(ctx, src, NAME("norm1.weight"), 1, sd, &b->ln1_w, err);
    if (!rc)
        rc = model_load_tensor(ctx, src, NAME("norm1.bias"), 1, sd, &b->ln1_b, err);
    if (!rc)
        rc = model_load_tensor(ctx, src, NAME("norm2.weight"), 1, sd, &b->ln2_w, err);
    if (!rc)
        rc = model_load_tensor(ctx, src, NAME("norm2.bias"), 1, sd, &b->ln2_b, err);
    int64_t sw1[2] = {Th, S}, sb1[1] = {Th}, sw2[2] = {S, Th}, sb2[1] = {S};
    if (!rc)
        rc = model_load_tensor(ctx, src, NAME("mlp_tokens.fc1.weight"), 2, sw1, &b->tok_w1, err);
    if (!rc)
        rc = model_load_tensor(ctx, src, NAME("mlp_tokens.fc1.bias"), 1, sb1, &b->tok_b1, err);
    float *w2 = NULL, *b2 = NULL, *w2b = NULL;
    if (!rc)
        rc = model_read_host(src, NAME("mlp_tokens.fc2.weight"), 2, sw2, &w2, err);
    if (!rc)
        rc = model_read_host(src, NAME("mlp_tokens.fc2.bias"), 1, sb2, &b2, err);
    if (!rc && !(w2b = malloc((size_t)(S * (Th + 1)) * sizeof *w2b)))
        rc = pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "blocks.%d token MLP", i);
    if (!rc) {
        for (int64_t r = 0; r < S; r++) {
            memcpy(w2b + r * (Th + 1), w2 + r * Th, (size_t)Th * sizeof *w2b);
            w2b[r * (Th + 1) + Th] = b2[r];
        }
        int64_t s2b[2] = {S, Th + 1};
        rc = model_upload(ctx, w2b, 2, s2b, &b->tok_w2b, err);
    }
    free(w2);
    free(b2);
    free(w2b);
    if (!rc) {
        snprintf(n, sizeof n, "blocks.%d.mlp_channels.fc1", i);
        rc = load_linear(ctx, src, n, Ch, D, &b->ch_fc1, err);
    }
    if (!rc) {
        snprintf(n, sizeof n, "blocks.%d.mlp_channels.fc2", i);
        rc = load_linear(ctx, src, n, D, Ch, &b->ch_fc2, err);
    }
#undef NAME
    return rc;
}

static int load_outer(void *model, const model_source *src, pgd_error **err)
{
    mixer_model *m = model;
    pgd_ctx *ctx = m->ctx;
    const mixer_config *c = &m->cfg;
    int64_t D = c->dim, S = c->tokens;
    int64_t spe[4] = {D, 3, c->patch, c->patch}, sd[1] = {D};
    int rc = model_load_tensor(ctx, src, "stem.proj.weight", 4, spe, &m->pe_w, err);
    if (!rc)
        rc = pgd_patch_proj_create(ctx, m->pe_w, &m->pe_proj, err);
    if (!rc)
        rc = model_load_tensor(ctx, src, "stem.proj.bias", 1, sd, &m->pe_b, err);
    if (!rc)
        rc = model_load_tensor(ctx, src, "norm.weight", 1, sd, &m->norm_w, err);
    if (!rc)
        rc = model_load_tensor(ctx, src, "norm.bias", 1, sd, &m->norm_b, err);
    if (!rc)
        rc = load_linear(ctx, src, "head", c->classes, D, &m->head, err);
    if (!rc)
        rc = model_mean_row(ctx, S, &m->mean_row, err);
    return rc;
}

int mixer_load(pgd_ctx *ctx, const model_source *src, const mixer_config *cfg, mixer_model **out,
               pgd_error **err)
{
    *out = NULL;
    if (model_check_fits(ctx, src, "MLP-Mixer weights", err))
        return PGD_ERR_TOO_LARGE;
    mixer_model *m = calloc(1, sizeof *m);
    if (!m || !(m->blocks = calloc((size_t)cfg->depth, sizeof *m->blocks))) {
        free(m);
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "MLP-Mixer model");
    }
    m->ctx = ctx;
    m->cfg = *cfg;
    int rc = model_load_blocks(src, m, cfg->depth, load_outer, load_block, err);
    if (rc) {
        mixer_free(m);
        return rc;
    }
    *out = m;
    return PGD_OK;
}

void mixer_free(mixer_model *m)
{
    if (!m)
        return;
    pgd_patch_proj_destroy(m->pe_proj);
    pgd_tensor *ts[] = {m->pe_w, m->pe_b, m->norm_w, m->norm_b, m->mean_row};
    model_destroy_tensors(ts, sizeof ts / sizeof *ts);
    pgd_linear_destroy(m->head);
    for (int i = 0; m->blocks && i < m->cfg.depth; i++) {
        mixer_block *b = &m->blocks[i];
        pgd_tensor *bt[] = {b->ln1_w,  b->ln1_b,  b->ln2_w,  b->ln2_b,
                            b->tok_w1, b->tok_b1, b->tok_w2b};
        for (size_t j = 0; j < sizeof bt / sizeof *bt; j++)
            pgd_tensor_destroy(bt[j]);
        pgd_linear_destroy(b->ch_fc1);
        pgd_linear_destroy(b->ch_fc2);
    }
    free(m->blocks);
    free(m);
}

/* ---- forward ---- */

typedef struct pass_state {
    mixer_model *m;
    int64_t B;
    pgd_tensor *img, *x, *h, *u, *mlp, *pooled, *out;
} pass_state;

static void pass_free(pass_state *ps)
{
    pgd_tensor *all[] = {ps->img, ps->x, ps->h, ps->u, ps->mlp, ps->pooled, ps->out};
    model_destroy_tensors(all, sizeof all / sizeof *all);
}

static int pass_alloc(pass_state *ps, const float *images, int H, int W, pgd_error **err)
{
    pgd_ctx *ctx = ps->m->ctx;
    const mixer_config *c = &ps->m->cfg;
    int64_t B = ps->B, S = c->tokens, D = c->dim;
    int64_t si[4] = {B, 3, H, W}, sx[3] = {B, S, D}, su[3] = {B, D, c->tokens_hidden + 1};
    int64_t sm[3] = {B, S, c->channels_hidden}, sp[2] = {B, D}, so[2] = {B, c->classes};
    int rc = model_upload(ctx, images, 4, si, &ps->img, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 3, sx, &ps->x, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 3, sx, &ps->h, err);
    /* U's last column stays 1: the bias column of the token MLP's second GEMM. */
    if (!rc)
        rc = pgd_tensor_create(ctx, 3, su, &ps->u, err);
    if (!rc)
        rc = pgd_tensor_fill(ps->u, 1.0f, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 3, sm, &ps->mlp, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 2, sp, &ps->pooled, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 2, so, &ps->out, err);
    return rc;
}

/* x += token MLP of LN1(x), as the two strided GEMMs of the file comment. */
static int token_mixing(pass_state *ps, const mixer_block *b, pgd_error **err)
{
    pgd_ctx *ctx = ps->m->ctx;
    const mixer_config *c = &ps->m->cfg;
    int64_t B = ps->B, S = c->tokens, D = c->dim, Th = c->tokens_hidden;
    int rc = pgd_layernorm(ctx, ps->x, b->ln1_w, b->ln1_b, c->eps, ps->h, err);
    pgd_gemm_args g1 = {
        .trans_a = 1, .trans_b = 1, .alpha = 1.0f, .bias = b->tok_b1, .act = PGD_ACT_GELU};
    pgd_matrix h = {ps->h, 0, D, S * D}, w1 = {b->tok_w1, 0, S, 0};
    pgd_matrix u = {ps->u, 0, Th + 1, D * (Th + 1)};
    if (!rc)
        rc = pgd_gemm_strided(ctx, &g1, D, Th, S, B, h, w1, u, err);
    pgd_gemm_args g2 = {.trans_b = 1, .alpha = 1.0f, .residual = ps->x};
    pgd_matrix w2 = {b->tok_w2b, 0, Th + 1, 0}, x = {ps->x, 0, D, S * D};
    if (!rc)
        rc = pgd_gemm_strided(ctx, &g2, S, D, Th + 1, B, w2, u, x, err);
    return rc;
}

static int block_forward(pass_state *ps, int i, pgd_error **err)
{
    pgd_ctx *ctx = ps->m->ctx;
    const mixer_config *c = &ps->m->cfg;
    const mixer_block *b = &ps->m->blocks[i];
    int rc = token_mixing(ps, b, err);
    if (!rc)
        rc = model_probe_tensor(ps->m->probe, ps->x, err, "blocks.%d (token mixing)", i);
    if (!rc)
        rc = model_mlp_residual(ctx, ps->x, b->ln2_w, b->ln2_b, c->eps, b->ch_fc1, b->ch_fc2, ps->h,
                                ps->mlp, err);
    if (!rc)
        rc = model_probe_tensor(ps->m->probe, ps->x, err, "blocks.%d (channel mixing)", i);
    return rc;
}

/* Final norm, mean over the tokens (a GEMM with the row of 1/S), head. */
static int head_forward(pass_state *ps, float *logits, pgd_error **err)
{
    mixer_model *m = ps->m;
    model_head h = {ps->x,   m->norm_w, m->norm_b, m->mean_row,   m->cfg.eps, ps->h,   ps->pooled,
                    ps->out, m->head,   ps->B,     m->cfg.tokens, m->cfg.dim, m->probe};
    return model_mean_head(m->ctx, &h, logits, err);
}

int mixer_forward(mixer_model *m, const float *images, int B, int H, int W, float *logits,
                  double times[4], pgd_error **err)
{
    pgd_ctx *ctx = m->ctx;
    const mixer_config *c = &m->cfg;
    if (B < 1 || H != c->patch * c->grid_h || W != c->patch * c->grid_w)
        return pgd_error_set(err, PGD_ERR_SHAPE,
                             "mixer: input [%d, 3, %d, %d] must be [B, 3, %d, %d]: the token "
                             "MLPs mix exactly %d x %d patches of %d pixels",
                             B, H, W, c->patch * c->grid_h, c->patch * c->grid_w, c->grid_h,
                             c->grid_w, c->patch);
    pass_state ps = {.m = m, .B = B};
    double t0 = model_now_ms();
    int rc = pass_alloc(&ps, images, H, W, err);
    if (!rc)
        rc = model_probe_tensor(m->probe, ps.img, err, "the input");
    if (!rc)
        rc = pgd_patch_embed_proj(ctx, ps.img, m->pe_proj, m->pe_b, NULL, NULL, NULL, ps.x, err);
    if (!rc)
        rc = model_probe_tensor(m->probe, ps.x, err, "stem.proj (patch embedding)");
    double t1 = model_stage_end(ctx, times != NULL, &rc, err);
    for (int i = 0; i < c->depth && !rc; i++)
        rc = block_forward(&ps, i, err);
    double t2 = model_stage_end(ctx, times != NULL, &rc, err);
    if (!rc)
        rc = head_forward(&ps, logits, err);
    double t3 = model_now_ms();
    model_stage_times(times, t0, t1, t2, t3);
    pass_free(&ps);
    return rc;
}

static int probe_pass(void *model, const float *image, int H, int W, float *logits, pgd_error **err)
{
    return mixer_forward(model, image, 1, H, W, logits, NULL, err);
}

int mixer_find_nonfinite(mixer_model *m, const float *image, int H, int W, model_probe *p,
                         pgd_error **err)
{
    return model_probe_run(p, &m->probe, m->cfg.classes, probe_pass, m, image, H, W, err);
}

/* ---- seeded random weights (timm naming) ---- */

static int rand_shape(const void *cfgp, const char *name, int *ndim, int64_t s[8])
{
    const mixer_config *c = cfgp;
    int64_t D = c->dim, S = c->tokens, Th = c->tokens_hidden, Ch = c->channels_hidden;
    int blk = -1;
    char rest[128] = "";
    *ndim = 1;
    if (sscanf(name, "blocks.%d.%127s", &blk, rest) == 2) {
        if (blk < 0 || blk >= c->depth)
            return -1;
        s[0] = D;
        if (!strncmp(rest, "norm1.", 6) || !strncmp(rest, "norm2.", 6))
            return strcmp(rest + 6, "weight") && strcmp(rest + 6, "bias") ? -1 : 0;
        if (!strcmp(rest, "mlp_tokens.fc1.weight"))
            *ndim = 2, s[0] = Th, s[1] = S;
        else if (!strcmp(rest, "mlp_tokens.fc1.bias"))
            s[0] = Th;
        else if (!strcmp(rest, "mlp_tokens.fc2.weight"))
            *ndim = 2, s[0] = S, s[1] = Th;
        else if (!strcmp(rest, "mlp_tokens.fc2.bias"))
            s[0] = S;
        else if (!strcmp(rest, "mlp_channels.fc1.weight"))
            *ndim = 2, s[0] = Ch, s[1] = D;
        else if (!strcmp(rest, "mlp_channels.fc1.bias"))
            s[0] = Ch;
        else if (!strcmp(rest, "mlp_channels.fc2.weight"))
            *ndim = 2, s[0] = D, s[1] = Ch;
        else if (!strcmp(rest, "mlp_channels.fc2.bias"))
            s[0] = D;
        else
            return -1;
        return 0;
    }
    if (!strcmp(name, "stem.proj.weight"))
        *ndim = 4, s[0] = D, s[1] = 3, s[2] = s[3] = c->patch;
    else if (!strcmp(name, "stem.proj.bias") || !strcmp(name, "norm.weight") ||
             !strcmp(name, "norm.bias"))
        s[0] = D;
    else if (!strcmp(name, "head.weight"))
        *ndim = 2, s[0] = c->classes, s[1] = D;
    else if (!strcmp(name, "head.bias"))
        s[0] = c->classes;
    else
        return -1;
    return 0;
}

int mixer_named_config(const char *name, mixer_config *c)
{
    memset(c, 0, sizeof *c);
    c->patch = 16;
    c->grid_h = c->grid_w = 14;
    c->classes = 1000;
    c->eps = 1e-6f;
    if (!strcmp(name, "s16"))
        c->dim = 512, c->depth = 8;
    else if (!strcmp(name, "b16"))
        c->dim = 768, c->depth = 12;
    else if (!strcmp(name, "l16"))
        c->dim = 1024, c->depth = 24;
    else if (!strcmp(name, "tiny"))
        c->dim = 32, c->depth = 2, c->patch = 8, c->grid_h = c->grid_w = 4, c->classes = 10;
    else
        return -1;
    c->tokens = c->grid_h * c->grid_w;
    c->tokens_hidden = c->dim / 2; /* timm: mlp_ratio (0.5, 4.0) */
    c->channels_hidden = 4 * c->dim;
    return 0;
}

int mixer_random_source(model_source *src, const mixer_config *cfg, uint64_t seed, pgd_error **err)
{
    mixer_config c = *cfg;
    return model_random_source(src, &c, sizeof c, rand_shape, NULL, seed, err);
}

/* ---- the family entry (family.h) ---- */

MODEL_FAMILY_ADAPTERS(mixer)
MODEL_FAMILY_PLAIN(mixer)
MODEL_FAMILY_RANDOM(mixer, {"mixer_s16", "s16"}, {"mixer_b16", "b16"}, {"mixer_l16", "l16"},
                    {"mixer_tiny", "tiny"})

static void fam_info(const void *cfg, const char *label, pgd_model_info *info)
{
    const mixer_config *c = cfg;
    snprintf(info->naming, sizeof info->naming, "timm");
    info->classes = c->classes;
    info->patch = c->patch;
    info->input_h = c->patch * c->grid_h;
    info->input_w = c->patch * c->grid_w;
    info->depth = c->depth;
    info->width = c->dim;
    /* timm's mixer_*_224: bicubic, crop 0.875, mean/std 0.5 (as `pagoda classify`) */
    info->preprocess = PGD_PREPROCESS_TIMM;
    snprintf(info->description, sizeof info->description,
             "%s: MLP-Mixer, width %d, depth %d, patch %d, %dx%d grid, %d classes", label, c->dim,
             c->depth, c->patch, c->grid_h, c->grid_w, c->classes);
}

static int fam_classes(const void *cfg)
{
    return ((const mixer_config *)cfg)->classes;
}

/* Multiply-adds: the token MLPs (2·S·Th per channel), the channel MLPs (2·D·Ch per token), the
 * stem and the head. A Mixer runs only at its trained size, whatever H x W. */
static double fam_macs(const void *cfg, int H, int W)
{
    (void)H, (void)W;
    const mixer_config *c = cfg;
    double S = c->tokens, D = c->dim;
    double per_block = 2.0 * S * c->tokens_hidden * D + 2.0 * D * c->channels_hidden * S;
    return c->depth * per_block + S * (3 * c->patch * c->patch) * D + D * c->classes;
}

static void fam_sizes(const void *cfg, char *buf, size_t size)
{
    const mixer_config *c = cfg;
    snprintf(buf, size, "\"dim\":%d,\"depth\":%d,\"tokens\":%d", c->dim, c->depth, c->tokens);
}

const model_family family_mixer = {
    .id = PGD_MODEL_MIXER,
    .name = "mixer",
    .cfg_size = sizeof(mixer_config),
    .is = mixer_is,
    .detect = mixer_fam_detect,
    .load = mixer_fam_load,
    .random = mixer_fam_random,
    .forward = mixer_fam_forward,
    .find_nonfinite = mixer_fam_nonfinite,
    .info = fam_info,
    .classes = fam_classes,
    .no_maps = "MLP-Mixer (no attention)",
    .free = mixer_fam_free,
    .macs = fam_macs,
    .sizes_json = fam_sizes,
};
