/* bench_models.c — the benchmark items that time whole models (bench_items.c has the
 * operator items and the helpers both use). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_items.h"
#include "detr.h"
#include "family.h"
#include "model.h"

/* ---- image-model items: a whole forward, a seeded random batch of 224 x 224 images to logits
 * (a headless model's features), with seeded random weights (the work is that of trained
 * weights). An item's name is a random size of a family of the table (family.h): vit_ti16 /
 * vit_s16 / vit_b16, dinov2_s14, resnet50 / resnet50-nl (without and with one non-local block
 * before layer3.5, the paper's setting), mixer_b16, swin_t / swin_s. One runner, run_model,
 * times every one, and the family's entry loads, runs, sizes and frees it. ------------------ */

enum { MODEL_IMAGE = 224 };

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

/* The item's own name has matched (bench.c's find_item): only the batch is left to check. */
static int validate_model(const char *spec)
{
    long b;
    return parse_batch(spec, strcspn(spec, ":"), &b);
}

typedef struct model_state {
    const model_family *f;
    void *model;
    float *x, *logits;
    int batch;
    double share; /* the family's share_key part over the pass, last run; -1: none */
} model_state;

static int model_once(void *p, pgd_error **err)
{
    model_state *s = p;
    if (s->f->forward_share)
        return s->f->forward_share(s->model, s->x, s->batch, MODEL_IMAGE, MODEL_IMAGE, s->logits,
                                   &s->share, err);
    return s->f->forward(s->model, s->x, s->batch, MODEL_IMAGE, MODEL_IMAGE, s->logits, NULL, err);
}

/* The params (batch, the family's sizes, image), flops and share of a timed item. */
static void describe_model(const model_state *s, const void *cfg, bench_result *b)
{
    const model_family *f = s->f;
    if (f->sizes_json) {
        char sizes[96];
        f->sizes_json(cfg, sizes, sizeof sizes);
        snprintf(b->params, sizeof b->params, "{\"batch\":%d,%s,\"image\":%d}", s->batch, sizes,
                 MODEL_IMAGE);
    }
    if (f->macs)
        b->flops = 2.0 * (double)s->batch * f->macs(cfg, MODEL_IMAGE, MODEL_IMAGE);
    if (f->share_key && s->share >= 0) {
        snprintf(b->extra_key, sizeof b->extra_key, "%s", f->share_key);
        b->extra = s->share;
    }
}

/* The one runner of every image-model item: loads the random model the item names, times
 * forwards of a seeded random batch and names the result "<name>:<batch>". */
static int run_model(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,
                     int *nres, int cap, pgd_error **err)
{
    (void)cap;
    char name[32];
    long batch = 1;
    size_t n = strcspn(spec, ":");
    snprintf(name, sizeof name, "%.*s", (int)n, spec);
    parse_batch(spec, n, &batch);
    model_state s = {.batch = (int)batch, .share = -1};
    void *cfg = NULL;
    model_source src;
    int rc = family_random(name, &s.f, &cfg, &src, err);
    if (rc == PGD_ERR_NOT_FOUND)
        return pgd_error_set(err, rc, "bench: no model family has a random '%s'", name);
    if (!rc)
        rc = s.f->load(ctx, &src, cfg, &s.model, err);
    model_source_free(&src);
    size_t nx = (size_t)s.batch * 3 * MODEL_IMAGE * MODEL_IMAGE;
    if (!rc) {
        s.x = item_alloc((int64_t)nx, err);
        s.logits = s.x ? item_alloc((int64_t)s.batch * s.f->classes(cfg), err) : NULL;
        if (!s.x || !s.logits)
            rc = PGD_ERR_OUT_OF_HOST_MEMORY;
        else
            fill_rand(s.x, nx);
    }
    bench_result *b = &res[0];
    if (!rc)
        rc = time_runs(ctx, (timed_fn){model_once, &s}, o, b, err);
    if (!rc) {
        snprintf(b->name, sizeof b->name, "%s:%d", name, s.batch);
        describe_model(&s, cfg, b);
        *nres = 1;
    }
    if (s.model)
        s.f->free(s.model);
    free(cfg);
    free(s.x);
    free(s.logits);
    return rc;
}

const bench_item bench_item_vit = {
    "vit_b16", "vit_b16[:B]",
    "ViT-B/16 forward, 224x224 image tensor to logits, batch B (seeded random weights)",
    validate_model, run_model};

const bench_item bench_item_resnet = {
    "resnet50", "resnet50[:B]",
    "ResNet-50 forward, 224x224 image tensor to logits, batch B (seeded random weights)",
    validate_model, run_model};

const bench_item bench_item_mixer = {
    "mixer_b16", "mixer_b16[:B]",
    "MLP-Mixer-B/16 forward, 224x224 image tensor to logits, batch B (seeded random weights)",
    validate_model, run_model};

const bench_item bench_item_swin_t = {
    "swin_t", "swin_t[:B]",
    "Swin-T forward (torchvision's swin_t sizes), 224x224 image tensor to logits, batch B; the "
    "window attention's share of the blocks as window_attention_share",
    validate_model, run_model};
const bench_item bench_item_swin_s = {"swin_s", "swin_s[:B]", "the same, Swin-S (depths 2-2-18-2)",
                                      validate_model, run_model};

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
        mac += 6 * (4 * Q * D * D + 2 * Q * Q * D + 2 * Q * D * D + 2 * T * D * D + 2 * Q * T * D +
                    2 * Q * D * F);
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
    validate_model, run_model};

const bench_item bench_item_vit_s16 = {"vit_s16", "vit_s16[:B]", "the same, ViT-S/16 (384 wide)",
                                       validate_model, run_model};
const bench_item bench_item_vit_ti16 = {
    "vit_ti16", "vit_ti16[:B]", "the same, ViT-Ti/16 (192 wide)", validate_model, run_model};
const bench_item bench_item_dinov2_s14 = {
    "dinov2_s14", "dinov2_s14[:B]",
    "DINOv2-S/14 features (pagoda embed's work: 257 tokens, no classifier), 224x224, batch B; "
    "images/s = 1000 B / median",
    validate_model, run_model};
