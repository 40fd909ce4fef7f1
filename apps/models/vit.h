/* vit.h — the Vision Transformer: configuration from tensor names and shapes, weights on the
 * device, and the forward pass built from libpagoda's ops. */
#ifndef PAGODA_VIT_H
#define PAGODA_VIT_H

#include <stdint.h>

#include "pagoda.h"

/* Where weights come from: a safetensors file, or seeded random values for the demo. */
typedef struct vit_source {
    void *u;
    const char *label; /* for messages: the file name, or "random weights" */
    /* 0 with the shape when the tensor exists, -1 when it does not. */
    int (*shape)(void *u, const char *name, int *ndim, int64_t shape[8]);
    /* Reads the tensor as float32 into dst (numel floats). */
    int (*read)(void *u, const char *name, float *dst, pgd_error **err);
    /* A __metadata__ value, or NULL. */
    const char *(*meta)(void *u, const char *key);
    /* The i-th tensor name, or NULL past the end (may itself be NULL: no listing). */
    const char *(*name_at)(void *u, size_t i);
} vit_source;

/* Shared by the models (weights.c): requires tensor `name` with `want_ndim` dims of `want`
 * (compared by element count, so [1, 1, D] matches [D]); the error names the tensor, its shape
 * and the expected one. */
int model_need(const vit_source *src, const char *name, int want_ndim, const int64_t *want,
               pgd_error **err);
/* Writes "[a, b, c]". */
void model_shape_str(int ndim, const int64_t *s, char *buf, size_t size);

/* Fitting on the device (weights.c). The weights as float32: the sum over the source's
 * tensors (0 when it lists none, as random sources do). */
uint64_t model_weight_bytes(const vit_source *src);
/* Refuses, before anything is allocated, weights larger than the device's global memory
 * (PGD_ERR_TOO_LARGE with both sizes and the file). */
int model_check_fits(pgd_ctx *ctx, const vit_source *src, const char *what, pgd_error **err);
/* A forward over a batch that may not fit the device at once. Passes of as many images as fit,
 * at per_image bytes each (the measured peak of the last pass at the same input, when larger),
 * in seven eighths of the global memory less what live tensors hold (the model), with the
 * largest single per-image buffer (`largest` bytes) under CL_DEVICE_MAX_MEM_ALLOC_SIZE and at
 * most $PAGODA_MAX_BATCH images; a pass of several images that runs out of device memory is
 * retried at half the size. pass(u, first, n, times, err) runs images [first, first + n) and
 * fills times[0..ntimes) (ntimes <= 8), summed over the passes. PGD_ERR_TOO_LARGE, naming the
 * sizes, when one image does not fit. */
typedef int (*model_pass_fn)(void *u, int first, int n, double *times, pgd_error **err);
typedef struct model_batching {
    int h, w, maps;     /* the input (size, probability maps) `bytes` was measured for */
    uint64_t bytes;     /* device bytes one image took in the last pass there */
    int last_split;     /* images per pass in the last forward */
} model_batching;
int model_forward_batched(pgd_ctx *ctx, model_batching *mb, int H, int W, int maps, int B,
                          uint64_t per_image, uint64_t largest, const char *what, int ntimes,
                          model_pass_fn pass, void *u, double *times, pgd_error **err);

typedef enum vit_family { VIT_TIMM, VIT_HF, VIT_TORCHVISION } vit_family;

typedef struct vit_config {
    vit_family family;
    int depth, dim, heads, patch, mlp, classes;
    int grid_h, grid_w; /* trained position grid */
    int extra;          /* 1: class token, 2: class + distillation token (DeiT) */
    float eps;
} vit_config;

const char *vit_family_name(vit_family f);
/* The position-grid resize rule of family f at an image size other than the trained one: timm
 * antialiased bicubic, torchvision align_corners, Hugging Face its scale_factor. */
pgd_resize_mode vit_resize_mode(vit_family f);

/* Recognises the naming and reads depth, width, patch, grid, classes and eps from the names
 * and shapes; heads from __metadata__ "num_heads", else `heads` (>0), else the standard table
 * (192→3, 384→6, 768→12, 1024→16, 1280→16), else dim/64. Missing or misshaped tensors → an
 * error naming them. */
int vit_detect(const vit_source *src, int heads, vit_config *cfg, pgd_error **err);

typedef struct vit_model vit_model;

int vit_load(pgd_ctx *ctx, const vit_source *src, const vit_config *cfg, vit_model **out,
             pgd_error **err);
void vit_free(vit_model *m);

/* Runs B images [B, 3, H, W] (H, W multiples of the patch; the position grid is resized by
 * vit_resize_mode(family) when they differ from the trained size) to logits [B, classes]. If
 * attn_map is non-NULL it receives the last block's class-token attention over the patches,
 * averaged over heads, as [B, H/P, W/P]; if rollout is non-NULL it receives the class token's row
 * of the attention rollout across all blocks (Abnar & Zuidema 2020: heads averaged, identity for
 * the residual, rows renormalised, multiplied through the layers), same shape. Stage times in ms go
 * to times[0..3] (embed, blocks, head, total) if non-NULL. */
int vit_forward(vit_model *m, const float *images, int B, int H, int W, float *logits,
                float *attn_map, float *rollout, double times[4], pgd_error **err);
/* A batch too big for the device's memory runs as several passes (model_forward_batched);
 * the images per pass of the last vit_forward. */
int vit_last_split(const vit_model *m);

/* A source over an open safetensors file; `label` (the path) names it in messages. */
void vit_weights_source(vit_source *src, pgd_weights *w, const char *label);

/* The configuration of a standard ViT by size name, for seeded random weights: "ti", "s", "b"
 * (ViT-Ti/16, ViT-S/16, ViT-B/16 at 224 x 224, 1000 classes, timm naming) or "tiny" (2 blocks
 * of width 32, patch 8, 32 x 32 input, 10 classes). 0, or -1 for an unknown name. */
int vit_named_config(const char *name, vit_config *c);

/* A source of seeded random weights in timm naming for the given configuration. */
void vit_random_source(vit_source *src, const vit_config *cfg, uint64_t seed);

#endif
