/* bench_models.c — the benchmark items that time whole models (bench_items.c has the
 * operator items and the helpers both use). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>

#include "bench.h"
#include "bench_items.h"
#include "detr.h"
#include "mixer.h"
#include "model.h"
#include "resnet.h"
#include "swin.h"
#include "vit.h"

/* ---- model items: a whole forward, image tensor to logits, with seeded random weights (the
 * work is that of trained weights). vit_ti16 / vit_s16 / vit_b16[:B] — a ViT; resnet50[:B],
 * resnet50-nl[:B] — ResNet-50 without and with one non-local block before layer3.5 (the
 * paper's setting). One runner, run_model, times every model; a family says how to load, run,
 * describe and free its own. --------------------------------------------------------------- */


struct model_family;

typedef struct model_state {
    const struct model_family *f;
    void *model;
    float *x, *logits;
    int batch;
    double nl_ms, total_ms; /* ResNet: the non-local blocks' and the whole pass's time, last run */
    int nl;                 /* ResNet: has a non-local block (its share is measured) */
} model_state;

typedef struct model_family {
    /* Loads the model `spec` names into s->model and its batch into s->batch. */
    int (*load)(pgd_ctx *ctx, const char *spec, model_state *s, pgd_error **err);
    /* One forward of s->x (s->batch images of 224 x 224) to s->logits. */
    int (*forward)(model_state *s, pgd_error **err);
    /* Fills b's params, flops and extra (the name is already set). */
    void (*describe)(const char *spec, const model_state *s, bench_result *b);
    void (*free)(void *model);
} model_family;

/* A spec "<name>[:B]" where name is exactly `name_len` characters: the batch B (default 1, at
 * most 256). */
static int parse_batch(const char *spec, size_t name_len, long *batch)
{
    *batch = 1;
    if (spec[name_len] == '\0')
        return 0;
    if (spec[name_len] != ':')
        return -1;
    int64_t v;
    if (pgd_parse_int64(spec + name_len + 1, 1, 256, &v))
        return -1;
    *batch = (long)v;
    return 0;
}

static int model_once(void *p, pgd_error **err)
{
    model_state *s = p;
    return s->f->forward(s, err);
}

/* The one runner of every model item: loads the model, times forwards of a seeded random batch
 * of 224 x 224 images to 1000 logits each, names the result "<name>:<batch>" and lets the
 * family describe it. */
static int run_model(pgd_ctx *ctx, const model_family *f, const char *spec, const bench_opts *o,
                     bench_result *res, int *nres, pgd_error **err)
{
    model_state s = {.f = f, .batch = 1};
    int rc = f->load(ctx, spec, &s, err);
    size_t nx = (size_t)s.batch * 3 * 224 * 224;
    if (!rc) {
        s.x = item_alloc((int64_t)nx, err);
        s.logits = s.x ? item_alloc((int64_t)s.batch * 1000, err) : NULL;
        if (!s.x || !s.logits)
            rc = PGD_ERR_OUT_OF_HOST_MEMORY;
        else
            fill_rand(s.x, nx);
    }
    bench_result *b = &res[0];
    if (!rc)
        rc = time_runs(ctx, (timed_fn){model_once, &s}, o, b, err);
    if (!rc) {
        snprintf(b->name, sizeof b->name, "%.*s:%d", (int)strcspn(spec, ":"), spec, s.batch);
        f->describe(spec, &s, b);
        *nres = 1;
    }
    f->free(s.model);
    free(s.x);
    free(s.logits);
    return rc;
}

/* ViT: the size from the item's name. */
static int parse_vit(const char *spec, vit_config *c, long *batch)
{
    static const char *const sizes[][2] = {
        {"vit_ti16", "ti"}, {"vit_s16", "s"}, {"vit_b16", "b"}, {"dinov2_s14", "s"}};
    memset(c, 0, sizeof *c);
    *batch = 1;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = strlen(sizes[i][0]);
        if (!strncmp(spec, sizes[i][0], n) && (spec[n] == '\0' || spec[n] == ':')) {
            if (parse_batch(spec, n, batch) || vit_named_config(sizes[i][1], c))
                return -1;
            if (i == 3) { /* DINOv2-S/14 at 224: 16 x 16 patches, features, no classifier */
                c->patch = 14;
                c->grid_h = c->grid_w = 16;
                c->headless = 1;
                c->classes = c->dim;
            }
            return 0;
        }
    }
    return -1;
}

static int validate_vit(const char *spec)
{
    vit_config c;
    long b;
    return parse_vit(spec, &c, &b);
}

static int vit_item_load(pgd_ctx *ctx, const char *spec, model_state *s, pgd_error **err)
{
    vit_config c;
    long batch = 1;
    parse_vit(spec, &c, &batch);
    s->batch = (int)batch;
    model_source src;
    int rc = vit_random_source(&src, &c, 1, err);
    vit_model *m = NULL;
    if (!rc)
        rc = vit_load(ctx, &src, &c, &m, err);
    model_source_free(&src);
    s->model = m;
    return rc;
}

static int vit_item_forward(model_state *s, pgd_error **err)
{
    return vit_forward(s->model, s->x, s->batch, 224, 224, s->logits, NULL, NULL, NULL, err);
}

static void vit_item_describe(const char *spec, const model_state *s, bench_result *b)
{
    vit_config c;
    long batch = 1;
    parse_vit(spec, &c, &batch);
    snprintf(b->params, sizeof b->params,
             "{\"batch\":%ld,\"dim\":%d,\"heads\":%d,\"depth\":%d,\"image\":224}", batch,
             (int)c.dim, (int)c.heads, (int)c.depth);
    /* Multiply-adds of the linear layers, the attention products and the patch embedding. */
    double P = (double)c.grid_h * c.grid_w, T = c.extra + P, D = c.dim;
    double per_block = T * (3 * D * D + D * D + 2 * D * c.mlp) + 2 * T * T * D;
    b->flops = 2.0 * (double)s->batch * (12 * per_block + P * 3.0 * c.patch * c.patch * D);
}

static void vit_item_free(void *model) { vit_free(model); }

static const model_family vit_item_family = {vit_item_load, vit_item_forward, vit_item_describe,
                                             vit_item_free};

static int run_vit(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,
                   int *nres, int cap, pgd_error **err)
{
    (void)cap;
    return run_model(ctx, &vit_item_family, spec, o, res, nres, err);
}

const bench_item bench_item_vit = {
    "vit_b16", "vit_b16[:B]",
    "ViT-B/16 forward, 224x224 image tensor to logits, batch B (seeded random weights)",
    validate_vit, run_vit};

/* ResNet-50: 1 with the non-local block (resnet50-nl), 0 without, -1 for a bad spec. */
static int resnet_kind(const char *spec, long *batch)
{
    if (!strncmp(spec, "resnet50-nl", 11))
        return parse_batch(spec, 11, batch) ? -1 : 1;
    if (!strncmp(spec, "resnet50", 8))
        return parse_batch(spec, 8, batch) ? -1 : 0;
    return -1;
}

static int validate_resnet(const char *spec)
{
    long b;
    return resnet_kind(spec, &b) < 0 ? -1 : 0;
}

static int resnet_item_load(pgd_ctx *ctx, const char *spec, model_state *s, pgd_error **err)
{
    long batch = 1;
    int nl = resnet_kind(spec, &batch);
    s->batch = (int)batch;
    s->nl = nl;
    model_source src;
    int rc = resnet_random_source(&src, 50, 1000, nl ? "layer3.5" : NULL, NL_EMBEDDED_GAUSSIAN,
                                  1, err);
    if (rc)
        return rc;
    resnet_config cfg;
    resnet_options opt = {NULL, NULL, -1};
    resnet_model *m = NULL;
    rc = resnet_detect(&src, &opt, &cfg, err);
    if (!rc)
        rc = resnet_load(ctx, &src, &cfg, &m, err);
    model_source_free(&src);
    s->model = m;
    return rc;
}

static int resnet_item_forward(model_state *s, pgd_error **err)
{
    /* Stage times make resnet_forward drain the queue between stages (and around every
     * non-local block), which costs the launches that wait: only the non-local variant, whose
     * share is reported, asks for them (PoCL 3.1, AMD EPYC: 0.1-0.2 ms a pass at batch 1). */
    double t[5] = {0, 0, 0, 0, 0};
    int rc = resnet_forward(s->model, s->x, s->batch, 224, 224, s->logits, NULL,
                            s->nl ? t : NULL, err);
    s->nl_ms = t[2];
    s->total_ms = t[4];
    return rc;
}

static void resnet_item_describe(const char *spec, const model_state *s, bench_result *b)
{
    long batch = 1;
    int nl = resnet_kind(spec, &batch);
    /* torchvision's ResNet-50: 4.09 G multiply-adds at 224x224; the non-local block at
     * 14x14, C = 1024: θ/φ/g 3·196·1024·512, W 196·512·1024, attention 2·196²·512. */
    double block = 4.0 * 196 * 1024 * 512 + 2.0 * 196 * 196 * 512;
    b->flops = 2.0 * (double)s->batch * (4.089e9 + (nl ? block : 0));
    if (nl && s->total_ms > 0) {
        snprintf(b->extra_key, sizeof b->extra_key, "nonlocal_share");
        b->extra = s->nl_ms / s->total_ms;
    }
}

static void resnet_item_free(void *model) { resnet_free(model); }

static const model_family resnet_item_family = {resnet_item_load, resnet_item_forward,
                                                resnet_item_describe, resnet_item_free};

static int run_resnet(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,
                      int *nres, int cap, pgd_error **err)
{
    (void)cap;
    return run_model(ctx, &resnet_item_family, spec, o, res, nres, err);
}

const bench_item bench_item_resnet = {
    "resnet50", "resnet50[:B]",
    "ResNet-50 forward, 224x224 image tensor to logits, batch B (seeded random weights)",
    validate_resnet, run_resnet};

/* MLP-Mixer-B/16 (timm's mixer_b16_224 sizes). */
static int validate_mixer(const char *spec)
{
    long b;
    return strncmp(spec, "mixer_b16", 9) || parse_batch(spec, 9, &b) ? -1 : 0;
}

static int mixer_item_load(pgd_ctx *ctx, const char *spec, model_state *s, pgd_error **err)
{
    long batch = 1;
    parse_batch(spec, 9, &batch);
    s->batch = (int)batch;
    mixer_config c;
    mixer_named_config("b16", &c);
    model_source src;
    int rc = mixer_random_source(&src, &c, 1, err);
    mixer_model *m = NULL;
    if (!rc)
        rc = mixer_load(ctx, &src, &c, &m, err);
    model_source_free(&src);
    s->model = m;
    return rc;
}

static int mixer_item_forward(model_state *s, pgd_error **err)
{
    return mixer_forward(s->model, s->x, s->batch, 224, 224, s->logits, NULL, err);
}

static void mixer_item_describe(const char *spec, const model_state *s, bench_result *b)
{
    (void)spec;
    mixer_config c;
    mixer_named_config("b16", &c);
    snprintf(b->params, sizeof b->params,
             "{\"batch\":%d,\"dim\":%d,\"depth\":%d,\"tokens\":%d,\"image\":224}", s->batch,
             c.dim, c.depth, c.tokens);
    /* Multiply-adds: the token MLPs (2·S·Th per channel), the channel MLPs (2·D·Ch per token),
     * the stem and the head. */
    double S = c.tokens, D = c.dim;
    double per_block = 2.0 * S * c.tokens_hidden * D + 2.0 * D * c.channels_hidden * S;
    b->flops = 2.0 * (double)s->batch * (c.depth * per_block + S * 768 * D + D * c.classes);
}

static void mixer_item_free(void *model) { mixer_free(model); }

static const model_family mixer_item_family = {mixer_item_load, mixer_item_forward,
                                               mixer_item_describe, mixer_item_free};

static int run_mixer(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,
                     int *nres, int cap, pgd_error **err)
{
    (void)cap;
    return run_model(ctx, &mixer_item_family, spec, o, res, nres, err);
}

const bench_item bench_item_mixer = {
    "mixer_b16", "mixer_b16[:B]",
    "MLP-Mixer-B/16 forward, 224x224 image tensor to logits, batch B (seeded random weights)",
    validate_mixer, run_mixer};

/* Swin-T / Swin-S (torchvision's swin_t, swin_s sizes). */
static int parse_swin(const char *spec, swin_config *c, long *batch)
{
    static const char *const sizes[][2] = {{"swin_t", "t"}, {"swin_s", "s"}};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        size_t n = strlen(sizes[i][0]);
        if (!strncmp(spec, sizes[i][0], n) && (spec[n] == '\0' || spec[n] == ':'))
            return parse_batch(spec, n, batch) ? -1 : swin_named_config(sizes[i][1], c);
    }
    return -1;
}

static int validate_swin(const char *spec)
{
    swin_config c;
    long b;
    return parse_swin(spec, &c, &b);
}

typedef struct swin_item {
    swin_model *m;
    double attn_share;
} swin_item;

static int swin_item_load(pgd_ctx *ctx, const char *spec, model_state *s, pgd_error **err)
{
    swin_config c;
    long batch = 1;
    parse_swin(spec, &c, &batch);
    s->batch = (int)batch;
    swin_item *it = calloc(1, sizeof *it);
    if (!it)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "swin item");
    s->model = it;
    model_source src;
    int rc = swin_random_source(&src, &c, 1, err);
    if (!rc)
        rc = swin_load(ctx, &src, &c, &it->m, err);
    model_source_free(&src);
    return rc;
}

static int swin_item_forward(model_state *s, pgd_error **err)
{
    swin_item *it = s->model;
    double t[5];
    int rc = swin_forward(it->m, s->x, s->batch, 224, 224, s->logits, t, err);
    it->attn_share = t[4];
    return rc;
}

static void swin_item_describe(const char *spec, const model_state *s, bench_result *b)
{
    swin_config c;
    long batch = 1;
    parse_swin(spec, &c, &batch);
    const swin_item *it = s->model;
    snprintf(b->params, sizeof b->params,
             "{\"batch\":%ld,\"dim\":%d,\"depths\":[%d,%d,%d,%d],\"window\":7,\"image\":224}",
             batch, c.dim, c.depth[0], c.depth[1], c.depth[2], c.depth[3]);
    /* Multiply-adds per stage (grid 56, 28, 14, 7; C doubling): qkv, proj and the MLP
     * (12 N C²), window attention (2 N·49·C), merges (N/4 · 8C²), plus stem and head. */
    double mac = 3136.0 * 48 * c.dim;
    for (int st = 0; st < 4; st++) {
        double N = 3136.0 / (1 << (2 * st)), C = (double)c.dim * (1 << st);
        mac += c.depth[st] * (12 * N * C * C + 2 * N * 49 * C);
        if (st < 3)
            mac += N / 4 * 8 * C * C;
    }
    mac += 8.0 * c.dim * c.classes;
    b->flops = 2.0 * (double)s->batch * mac;
    snprintf(b->extra_key, sizeof b->extra_key, "window_attention_share");
    b->extra = it ? it->attn_share : 0;
}

static void swin_item_free(void *model)
{
    swin_item *it = model;
    if (it)
        swin_free(it->m);
    free(it);
}

static const model_family swin_item_family = {swin_item_load, swin_item_forward,
                                              swin_item_describe, swin_item_free};

static int run_swin(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,
                    int *nres, int cap, pgd_error **err)
{
    (void)cap;
    return run_model(ctx, &swin_item_family, spec, o, res, nres, err);
}

const bench_item bench_item_swin_t = {
    "swin_t", "swin_t[:B]",
    "Swin-T forward (torchvision's swin_t sizes), 224x224 image tensor to logits, batch B; the "
    "window attention's share of the blocks as window_attention_share",
    validate_swin, run_swin};
const bench_item bench_item_swin_s = {"swin_s", "swin_s[:B]", "the same, Swin-S (depths 2-2-18-2)",
                                      validate_swin, run_swin};

/* ---- detr_r50[:B]: DETR with a ResNet-50 backbone on 800 x 1066 images ----------------------- */

enum { DETR_H = 800, DETR_W = 1066 };

static int parse_detr(const char *spec, long *batch)
{
    return strncmp(spec, "detr_r50", 8) ? -1 : parse_batch(spec, 8, batch);
}

static int validate_detr(const char *spec)
{
    long b;
    return parse_detr(spec, &b);
}

typedef struct detr_state {
    detr_model *m;
    int batch;
    float *x, *logits, *boxes;
    double t[4]; /* the last run's backbone, encoder, decoder and total (ms) */
} detr_state;

static int detr_once(void *p, pgd_error **err)
{
    detr_state *s = p;
    detr_output out = {s->logits, s->boxes, NULL};
    return detr_forward(s->m, s->x, NULL, s->batch, DETR_H, DETR_W, &out, s->t, err);
}

/* Forwards of a seeded random batch (DetrForObjectDetection's sizes: 6 + 6 layers of width 256,
 * 100 queries, 92 classes) with the stage split of the last timed run in the parameters. */
static int run_detr(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,
                    int *nres, int cap, pgd_error **err)
{
    (void)cap;
    long batch = 1;
    parse_detr(spec, &batch);
    detr_state s = {0};
    s.batch = (int)batch;
    model_source src;
    detr_config cfg;
    int rc = detr_random_source(&src, 50, 1, err);
    if (rc)
        return rc;
    rc = detr_detect(&src, NULL, &cfg, err);
    if (!rc)
        rc = detr_load(ctx, &src, &cfg, &s.m, err);
    model_source_free(&src);
    size_t nx = (size_t)batch * 3 * DETR_H * DETR_W;
    if (!rc) {
        s.x = item_alloc((int64_t)nx, err);
        s.logits = s.x ? item_alloc(batch * cfg.queries * cfg.classes, err) : NULL;
        s.boxes = s.logits ? item_alloc(batch * cfg.queries * 4, err) : NULL;
        if (!s.boxes)
            rc = PGD_ERR_OUT_OF_HOST_MEMORY;
        else
            fill_rand(s.x, nx);
    }
    bench_result *b = &res[0];
    if (!rc)
        rc = time_runs(ctx, (timed_fn){detr_once, &s}, o, b, err);
    if (!rc) {
        snprintf(b->name, sizeof b->name, "detr_r50:%ld", batch);
        snprintf(b->params, sizeof b->params,
                 "{\"batch\":%ld,\"image\":[%d,%d],\"backbone_ms\":%.1f,\"encoder_ms\":%.1f,"
                 "\"decoder_ms\":%.1f}",
                 batch, DETR_H, DETR_W, s.t[0], s.t[1], s.t[2]);
        /* Multiply-adds: ResNet-50's 4.1 G at 224 x 224 scaled by the pixels; the input
         * projection; per encoder layer 4TD² + 2T²D + 2TDF over T = 25 x 34 cells; per decoder
         * layer the same with Q = 100 queries (self), cross-attention's K and V over T and
         * its products 2QTD. */
        double T = 25.0 * 34, D = 256, F = 2048, Q = 100;
        double mac = 4.1e9 * DETR_H * DETR_W / (224.0 * 224) + T * 2048 * D;
        mac += 6 * (4 * T * D * D + 2 * T * T * D + 2 * T * D * F);
        mac += 6 * (4 * Q * D * D + 2 * Q * Q * D + 2 * Q * D * D + 2 * T * D * D +
                    2 * Q * T * D + 2 * Q * D * F);
        b->flops = 2.0 * (double)batch * mac;
        snprintf(b->extra_key, sizeof b->extra_key, "backbone_share");
        b->extra = s.t[3] > 0 ? s.t[0] / s.t[3] : 0;
        *nres = 1;
    }
    detr_free(s.m);
    free(s.x);
    free(s.logits);
    free(s.boxes);
    return rc;
}

const bench_item bench_item_detr = {
    "detr_r50", "detr_r50[:B]",
    "DETR-R50 forward (facebook/detr-resnet-50's sizes, seeded random weights), an 800x1066 "
    "batch of B to logits and boxes; backbone/encoder/decoder ms in the parameters and the "
    "backbone's share as backbone_share",
    validate_detr, run_detr};

const bench_item bench_item_resnet_nl = {
    "resnet50-nl", "resnet50-nl[:B]",
    "ResNet-50 with a non-local block before layer3.5, batch B; the block's share of the time "
    "as nonlocal_share",
    validate_resnet, run_resnet};

const bench_item bench_item_vit_s16 = {"vit_s16", "vit_s16[:B]", "the same, ViT-S/16 (384 wide)",
                                       validate_vit, run_vit};
const bench_item bench_item_vit_ti16 = {"vit_ti16", "vit_ti16[:B]",
                                        "the same, ViT-Ti/16 (192 wide)", validate_vit, run_vit};
const bench_item bench_item_dinov2_s14 = {
    "dinov2_s14", "dinov2_s14[:B]",
    "DINOv2-S/14 features (pagoda embed's work: 257 tokens, no classifier), 224x224, batch B; "
    "images/s = 1000 B / median",
    validate_vit, run_vit};
