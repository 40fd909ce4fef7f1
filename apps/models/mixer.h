/* mixer.h — MLP-Mixer (Tolstikhin et al. 2021), the model that drops attention: token mixing
 * and channel mixing by MLPs only. timm naming (mixer_s16_224, mixer_b16_224, mixer_l16_224:
 * stem.proj, blocks.N.{norm1, mlp_tokens.fc1/fc2, norm2, mlp_channels.fc1/fc2}, norm, head).
 * Written against pagoda.h only. */
#ifndef PAGODA_MIXER_H
#define PAGODA_MIXER_H

#include <stdint.h>

#include "model.h"

/* Limits on what a checkpoint may say (mixer_detect refuses more): the input side patch x grid
 * is an image's side, and preprocessing makes an image of that side. */
enum { MIXER_MAX_PATCH = 4096, MIXER_MAX_SIDE = 16384 };

typedef struct mixer_config {
    int depth, dim, patch, tokens, tokens_hidden, channels_hidden, classes;
    int grid_h, grid_w; /* the patch grid the token MLPs were trained for: tokens = gh·gw */
    float eps;
} mixer_config;

/* 1 when the source's names are an MLP-Mixer's (stem.proj.weight and blocks.0.mlp_tokens). */
int mixer_is(const model_source *src);
/* Reads depth, width, patch, token count, hidden widths and classes from the names and shapes
 * (the token grid is taken as square, as timm builds it); missing or misshaped tensors are an
 * error naming them. */
int mixer_detect(const model_source *src, mixer_config *cfg, pgd_error **err);

typedef struct mixer_model mixer_model;
int mixer_load(pgd_ctx *ctx, const model_source *src, const mixer_config *cfg, mixer_model **out,
               pgd_error **err);
void mixer_free(mixer_model *m);

/* Runs B images [B, 3, H, W] to logits [B, classes]. The token MLPs fix the grid: H and W must
 * be patch·grid_h and patch·grid_w (an error saying so otherwise). Stage times in ms go to
 * times[0..3] (embed, blocks, head, total) if non-NULL. */
int mixer_forward(mixer_model *m, const float *images, int B, int H, int W, float *logits,
                  double times[4], pgd_error **err);
/* After non-finite logits: one image again with every stage checked (see vit_find_nonfinite). */
int mixer_find_nonfinite(mixer_model *m, const float *image, int H, int W, model_probe *p,
                         pgd_error **err);

/* Standard configurations for seeded random weights: "s16", "b16", "l16" (224 x 224, 1000
 * classes) or "tiny" (2 blocks of width 32, patch 8, 32 x 32 input, 10 classes). -1: unknown. */
int mixer_named_config(const char *name, mixer_config *c);
/* Seeded random weights in timm naming for the configuration. */
int mixer_random_source(model_source *src, const mixer_config *cfg, uint64_t seed, pgd_error **err);

#endif
