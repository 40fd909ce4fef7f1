/* vit.h — the Vision Transformer: configuration from tensor names and shapes, weights on the
 * device, and the forward pass built from libpagoda's ops. */
#ifndef PAGODA_VIT_H
#define PAGODA_VIT_H

#include <stdint.h>

#include "model.h"

typedef enum vit_family { VIT_TIMM, VIT_HF, VIT_TORCHVISION } vit_family;

typedef struct vit_config {
    vit_family family;
    int depth, dim, heads, patch, mlp, classes;
    int grid_h, grid_w; /* trained position grid */
    int extra;          /* tokens before the patches: 1 class token, 2 class + distillation
                         * token (DeiT), 1 + registers (timm's reg_token, DINOv2 ..._reg4) */
    int registers;      /* register tokens (they take no position embedding) */
    int pos_resize;     /* 0: the family's grid-resize rule; else 1 + the pgd_resize_mode used */
    int pos_prefix;     /* prefix tokens the position table covers: extra less the registers,
                         * or 0 (timm's no_embed_class) */
    int layer_scale;    /* timm's LayerScale (blocks.N.ls1.gamma / ls2.gamma, DINOv2) */
    int headless;       /* no classifier in the file (DINO): the forward gives features [B, dim]
                         * (classes == dim), pooled as vit_set_pool says */
    float eps;
    model_assumptions assumed; /* "heads" when neither __metadata__ nor the caller gave them */
} vit_config;

const char *vit_family_name(vit_family f);
/* The position-grid resize rule of family f at an image size other than the trained one: timm
 * antialiased bicubic, torchvision align_corners, Hugging Face its scale_factor. */
pgd_resize_mode vit_resize_mode(vit_family f);

/* Recognises the naming and reads depth, width, patch, grid, classes and eps from the names
 * and shapes (a file without a classifier is a headless feature model, cfg->headless); heads from
 * __metadata__ "num_heads" (a whole number, else an error; `heads` > 0 given too must equal it,
 * else an error naming both), else `heads` (>0), else the standard table (192→3, 384→6, 768→12,
 * 1024→16, 1280→16), else dim/64. Missing or misshaped tensors → an error naming them. */
int vit_detect(const model_source *src, int heads, vit_config *cfg, pgd_error **err);
/* When src holds Hugging Face's headless ViTModel (facebook/dino-vits16: the "vit." naming
 * without its prefix, and a pooler the features do not use), wraps it so that vit_detect and
 * vit_load read it as the classifier-less "vit." naming; when it holds Hugging Face's DINOv2
 * (Dinov2Model, facebook/dinov2-small), as timm's DINOv2 names. The wrapper takes over src (and
 * frees it with model_source_free). Any other source is left as it is. */
int vit_source_adapt(model_source *src, pgd_error **err);

typedef struct vit_model vit_model;

int vit_load(pgd_ctx *ctx, const model_source *src, const vit_config *cfg, vit_model **out,
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
/* The attention every block uses from the next vit_forward on: PGD_ATTENTION_SOFT (the
 * default), PGD_ATTENTION_TOPK keeping `topk` keys a row, or PGD_ATTENTION_SAMPLE drawing one key
 * a row (block i with its own stream derived from `seed`). */
void vit_set_attention(vit_model *m, pgd_attention_mode mode, int64_t topk, uint64_t seed);
/* A headless model's pooling of the final-normed tokens: VIT_POOL_CLS (the class token, what
 * timm's forward gives with num_classes=0), VIT_POOL_MEAN (the mean of the patch tokens) or
 * VIT_POOL_BOTH (the two side by side, [B, 2·dim], from one forward). */
enum { VIT_POOL_CLS = 0, VIT_POOL_MEAN = 1, VIT_POOL_BOTH = 2 };
void vit_set_pool(vit_model *m, int pool);
/* Floats per image vit_forward writes: the classes, or the pooled features (dim, 2·dim). */
int vit_output_width(const vit_model *m);
/* From the next vit_forward on, maps (the caller's [B, heads, H/P, W/P]; NULL: none) receives
 * every head's class-token attention over the patches in the last block (the DINO figure). */
void vit_set_head_maps(vit_model *m, float *maps);
/* A batch too big for the device's memory runs as several passes (model_forward_batched);
 * the images per pass of the last vit_forward. */
int vit_last_split(const vit_model *m);
/* After a vit_forward whose logits were not all finite: runs one image [1, 3, H, W] again with
 * every stage's output checked and names in p->stage the first that holds a NaN or an infinity
 * ("blocks.3 (attention)", "norm (final norm)", ...; "" when the rerun finds none). */
int vit_find_nonfinite(vit_model *m, const float *image, int H, int W, model_probe *p,
                       pgd_error **err);

/* The configuration of a standard ViT by size name, for seeded random weights: "ti", "s", "b"
 * (ViT-Ti/16, ViT-S/16, ViT-B/16 at 224 x 224, 1000 classes, timm naming) or "tiny" (2 blocks
 * of width 32, patch 8, 32 x 32 input, 10 classes). 0, or -1 for an unknown name. */
int vit_named_config(const char *name, vit_config *c);

/* A source of seeded random weights in timm naming for the given configuration. */
int vit_random_source(model_source *src, const vit_config *cfg, uint64_t seed, pgd_error **err);

#endif
