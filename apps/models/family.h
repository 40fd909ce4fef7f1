/* family.h — the one interface of a model family: what api.c (libpagoda-models), the CLI's
 * detection and the bench's model items (bench_models.c) call, so that a family is one model
 * file exporting one `model_family` plus one line in the table of family.c, never a switch over
 * families elsewhere. The entries speak of a family's configuration and model through void
 * pointers (cfg_size bytes of its config; its model handle); each model file adapts its own
 * typed functions. */
#ifndef PAGODA_FAMILY_H
#define PAGODA_FAMILY_H

#include <stddef.h>

#include "model.h"
#include "pagoda_models.h"

typedef struct model_family {
    pgd_model_family id;
    const char *name; /* "vit", "resnet", "mixer", "swin": pgd_model_info.family_name */
    size_t cfg_size;  /* the bytes of its configuration (vit_config, ...) */
    /* Whether the source's names are this family's. NULL: the fallback family, whose detect
     * has the last word (so that a file of no known family gets its precise error). */
    int (*is)(const model_source *src);
    /* The configuration from the source's names and shapes (opt may be NULL). */
    int (*detect)(const model_source *src, const pgd_model_options *opt, void *cfg,
                  pgd_error **err);
    /* Checks and uploads the weights: *model on success, NULL on error. */
    int (*load)(pgd_ctx *ctx, const model_source *src, const void *cfg, void **model,
                pgd_error **err);
    /* Seeded random weights of the size `name` (pgd_model_random's names): fills cfg and src.
     * PGD_ERR_NOT_FOUND without a message when the name is not this family's. */
    int (*random)(const char *name, void *cfg, model_source *src, pgd_error **err);
    /* Images [B, 3, H, W] (host) to logits [B, classes]; *total_ms the whole pass (may be
     * NULL: then no stage is timed, so nothing waits between them). */
    int (*forward)(void *model, const float *images, int B, int H, int W, float *logits,
                   double *total_ms, pgd_error **err);
    /* The forward of one image with a probe after each stage (model_probe). */
    int (*find_nonfinite)(void *model, const float *image, int H, int W, model_probe *p,
                          pgd_error **err);
    /* Describes the configuration: every field of info but family (label names the file). */
    void (*info)(const void *cfg, const char *label, pgd_model_info *info);
    int (*classes)(const void *cfg);
    /* PGD_OK when the input [B, 3, H, W] suits the configuration (NULL: any size). */
    int (*check_input)(const void *cfg, int B, int H, int W, pgd_error **err);
    /* The extra outputs, NULL where the family has none (then `no_maps` says why). */
    int (*attention_maps)(void *model, const float *images, int B, int H, int W, float *logits,
                          float *last, float *rollout, pgd_error **err);
    const char *no_maps; /* why not: "MLP-Mixer (no attention)", ... */
    /* The attention every block uses from the next forward on: soft, top-k or sampled
     * (pgd_attention_mode); NULL where the family has no attention to make hard. */
    void (*set_attention)(void *model, pgd_attention_mode mode, int64_t topk, uint64_t seed);
    /* A headless model's pooling (mean: the patch tokens' mean, else the class token). */
    int (*set_pool)(void *model, int mean);
    /* A non-local block's affinity: the key grid for an input of H x W (0: none), and the
     * forward with one query's row (qx, qy in [0, 1)). */
    int64_t (*affinity_grid)(const void *model, int H, int W, int *gh, int *gw);
    int (*affinity)(void *model, const float *images, int B, int H, int W, double qx, double qy,
                    float *logits, float *row, int *qi, int *qj, pgd_error **err);
    void (*free)(void *model);

    /* What the bench's model items record beside the times (NULL: nothing). */
    /* The multiply-adds of one image's forward at H x W (0 where not known). */
    double (*macs)(const void *cfg, int H, int W);
    /* The configuration's sizes as JSON members (ViT: "\"dim\":768,\"heads\":12,\"depth\":12"),
     * which an item's params hold between its batch and its image size. */
    void (*sizes_json)(const void *cfg, char *buf, size_t size);
    /* One part's share of the pass, recorded as `share_key` ("nonlocal_share": a ResNet's
     * non-local blocks over the whole pass; "window_attention_share": a Swin's window attention
     * over its blocks): `forward` with its stages timed, which drains the queue between them
     * (the launches that wait cost time), and *share that part's time over the pass's. A model
     * without the part (a ResNet without a non-local block) runs untimed, as `forward` does,
     * with *share -1. */
    const char *share_key;
    int (*forward_share)(void *model, const float *images, int B, int H, int W, float *logits,
                         double *share, pgd_error **err);
} model_family;

extern const model_family family_vit, family_resnet, family_mixer, family_swin, family_onnx;

/* The families, in the order pgd_model_random lists their names. */
extern const model_family *const model_families[];
extern const size_t model_family_count;

/* The one detection rule: the first family (in the order MLP-Mixer, Swin, ResNet) whose names
 * the source holds, else the fallback (ViT), whose detector's error is returned when the file is
 * none of them (then *out is NULL). opt (may be NULL) as the fallback's detect takes it. */
int family_detect(const model_source *src, const pgd_model_options *opt, const model_family **out,
                  pgd_error **err);
/* The family whose `random` knows `name` (pgd_model_random's names): *out, its configuration in
 * *cfg (calloc'd, out->cfg_size bytes, for the caller to free) and the seeded weights in src
 * (model_source_free). PGD_ERR_NOT_FOUND without a message when no family has the name; on any
 * error *out and *cfg are NULL and src is empty. */
int family_random(const char *name, const model_family **out, void **cfg, model_source *src,
                  pgd_error **err);
/* The size of a family's public random name in a table of {public name, size} pairs, or
 * NULL when the name is not in it. */
const char *family_size_of(const char *const table[][2], size_t n, const char *name);

/* The adapters from a family's typed functions to the entry's void pointers, written once:
 * X_fam_load, X_fam_nonfinite and X_fam_free from X_load, X_find_nonfinite and X_free (model
 * type X_model); X_fam_random from X_named_config and X_random_source (seed 1) over the
 * {public name, size} pairs given. One line in each model file instead of a copy each. */
#define MODEL_FAMILY_ADAPTERS(X)                                                                   \
    static int X##_fam_load(pgd_ctx *ctx, const model_source *src, const void *cfg, void **model,  \
                            pgd_error **err)                                                       \
    {                                                                                              \
        X##_model *m = NULL;                                                                       \
        int rc = X##_load(ctx, src, cfg, &m, err);                                                 \
        *model = m;                                                                                \
        return rc;                                                                                 \
    }                                                                                              \
    static int X##_fam_nonfinite(void *model, const float *image, int H, int W, model_probe *p,    \
                                 pgd_error **err)                                                  \
    {                                                                                              \
        return X##_find_nonfinite(model, image, H, W, p, err);                                     \
    }                                                                                              \
    static void X##_fam_free(void *model)                                                          \
    {                                                                                              \
        X##_free(model);                                                                           \
    }

/* X_fam_detect and X_fam_forward for a family whose X_detect takes no options and whose
 * X_forward fills times[0..3], the total last (MLP-Mixer, Swin); stage times only when the
 * total is asked for (timing drains the queue between the stages). */
#define MODEL_FAMILY_PLAIN(X)                                                                      \
    static int X##_fam_detect(const model_source *src, const pgd_model_options *opt, void *cfg,    \
                              pgd_error **err)                                                     \
    {                                                                                              \
        (void)opt;                                                                                 \
        return X##_detect(src, cfg, err);                                                          \
    }                                                                                              \
    static int X##_fam_forward(void *model, const float *images, int B, int H, int W,              \
                               float *logits, double *total_ms, pgd_error **err)                   \
    {                                                                                              \
        double t[5] = {0};                                                                         \
        int rc = X##_forward(model, images, B, H, W, logits, total_ms ? t : NULL, err);            \
        if (!rc && total_ms)                                                                       \
            *total_ms = t[3];                                                                      \
        return rc;                                                                                 \
    }

#define MODEL_FAMILY_RANDOM(X, ...)                                                                \
    static int X##_fam_random(const char *name, void *cfg, model_source *src, pgd_error **err)     \
    {                                                                                              \
        static const char *const sizes[][2] = {__VA_ARGS__};                                       \
        const char *size = family_size_of(sizes, sizeof sizes / sizeof sizes[0], name);            \
        if (!size)                                                                                 \
            return PGD_ERR_NOT_FOUND;                                                              \
        if (X##_named_config(size, cfg) != 0)                                                      \
            return pgd_error_set(err, PGD_ERR_INTERNAL, "pgd_model_random: %s", name);             \
        return X##_random_source(src, cfg, 1, err);                                                \
    }

#endif
