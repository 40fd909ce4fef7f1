/* swin.h — Swin Transformer (v1; Liu et al. 2021): local self-attention in shifted windows with
 * a relative position bias, patch merging between stages. Weights in torchvision naming
 * (swin_t/s/b: features.N...), timm naming (swin_*_patch4_window7_224: layers.S.blocks.B..., the
 * downsample at the start of a stage or, in older files, at the end) or Hugging Face naming
 * (transformers 4.x attention.self.query/key/value and 5.x attention.q_proj/k_proj/v_proj).
 * Written against pagoda.h only. */
#ifndef PAGODA_SWIN_H
#define PAGODA_SWIN_H

#include <stdint.h>

#include "model.h"

typedef enum swin_family {
    SWIN_TORCHVISION,
    SWIN_TIMM,     /* downsample at the start of stages 1.. (timm >= 0.9) */
    SWIN_TIMM_OLD, /* downsample at the end of stages ..S-2 */
    SWIN_HF4,      /* transformers 4.x */
    SWIN_HF5,      /* transformers 5.x */
} swin_family;

/* Limits on what a checkpoint may say (swin_detect refuses more). No Swin V1 has a window over
 * 12 (V2: 24); a window's attention mask grows with its fourth power (64: 64 MiB a head, 200:
 * 6 GiB), so tables implying a window over SWIN_MAX_WINDOW are refused as not a Swin's. */
enum { SWIN_MAX_STAGES = 8, SWIN_MAX_PATCH = 4096, SWIN_MAX_WINDOW = 64 };

typedef struct swin_config {
    swin_family family;
    int patch, dim, stages, classes, mlp_ratio_x100;
    int depth[SWIN_MAX_STAGES], heads[SWIN_MAX_STAGES];
    int window[SWIN_MAX_STAGES]; /* from each stage's relative position table; square windows */
    float eps;
} swin_config;

const char *swin_family_name(swin_family f);
/* 1 when the source's names are a Swin's in one of the namings. */
int swin_is(const model_source *src);
/* Reads the naming, stages, depths, widths, heads (the tables' columns), windows (the tables'
 * rows, (2w - 1)²), MLP ratio and classes from names and shapes; errors name the tensor. Swin V2
 * checkpoints (logit_scale, cpb_mlp) are refused by name. */
int swin_detect(const model_source *src, swin_config *cfg, pgd_error **err);

typedef struct swin_model swin_model;
int swin_load(pgd_ctx *ctx, const model_source *src, const swin_config *cfg, swin_model **out,
              pgd_error **err);
void swin_free(swin_model *m);

/* Runs B images [B, 3, H, W] (H and W multiples of the patch, any size: windows pad at the
 * bottom and right as the libraries do) to logits [B, classes]. Stage times in ms go to
 * times[0..3] (embed, blocks, head, total) if non-NULL; times[4] is the window attention's share
 * of the blocks when `times` has room (the caller passes 5). */
int swin_forward(swin_model *m, const float *images, int B, int H, int W, float *logits,
                 double *times, pgd_error **err);
int swin_find_nonfinite(swin_model *m, const float *image, int H, int W, model_probe *p,
                        pgd_error **err);
/* The attention every block uses from the next forward on (see vit_set_attention). */
void swin_set_attention(swin_model *m, pgd_attention_mode mode, int64_t topk, uint64_t seed);

/* torchvision's swin_t / swin_s / swin_b ("t", "s", "b") or "tiny" (2 stages of 2 blocks, width
 * 16, window 3, 40 x 40 input, 10 classes), for seeded random weights. -1: unknown name. */
int swin_named_config(const char *name, swin_config *c);
int swin_random_source(model_source *src, const swin_config *cfg, uint64_t seed, pgd_error **err);

#endif
