/* vit_family.c — the ViT as a model family (family.h): its entry for api.c and the CLI's
 * detection, and its seeded random weights of the named sizes (timm naming) for the demo, the
 * bench and tests. Apart from vit.c, which holds the model itself. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "family.h"
#include "vit.h"

const char *vit_family_name(vit_family f)
{
    return f == VIT_TIMM ? "timm" : f == VIT_HF ? "Hugging Face" : "torchvision";
}

/* How each family resamples its position grid at another image size (the grid differs):
 * timm's resample_abs_pos_embed (dynamic_img_size=True) antialiases, torchvision's
 * interpolate_embeddings aligns corners, Hugging Face's interpolate_pos_encoding passes
 * scale_factor (n + 0.1) / n. Equal grids are used as they are, as all three do. */
pgd_resize_mode vit_resize_mode(vit_family f)
{
    switch (f) {
    case VIT_TORCHVISION: return PGD_RESIZE_BICUBIC_ALIGN_CORNERS;
    case VIT_HF: return PGD_RESIZE_BICUBIC_HF;
    case VIT_TIMM:
    default: return PGD_RESIZE_BICUBIC_ANTIALIAS;
    }
}

static int rand_shape(const void *cfgp, const char *name, int *ndim, int64_t s[8])
{
    const vit_config *c = cfgp;
    int64_t D = c->dim, T = c->pos_prefix + (int64_t)c->grid_h * c->grid_w;
    int blk = -1;
    char rest[128] = "";
    if (sscanf(name, "blocks.%d.%127s", &blk, rest) == 2) {
        if (blk < 0 || blk >= c->depth)
            return -1;
        *ndim = 1;
        s[0] = D;
        if (!strcmp(rest, "norm1.weight") || !strcmp(rest, "norm1.bias") ||
            !strcmp(rest, "norm2.weight") || !strcmp(rest, "norm2.bias") ||
            !strcmp(rest, "attn.proj.bias") || !strcmp(rest, "mlp.fc2.bias"))
            return 0;
        *ndim = 2;
        if (!strcmp(rest, "attn.qkv.weight"))
            s[0] = 3 * D, s[1] = D;
        else if (!strcmp(rest, "attn.proj.weight"))
            s[0] = D, s[1] = D;
        else if (!strcmp(rest, "mlp.fc1.weight"))
            s[0] = c->mlp, s[1] = D;
        else if (!strcmp(rest, "mlp.fc2.weight"))
            s[0] = D, s[1] = c->mlp;
        else if (!strcmp(rest, "attn.qkv.bias"))
            *ndim = 1, s[0] = 3 * D;
        else if (!strcmp(rest, "mlp.fc1.bias"))
            *ndim = 1, s[0] = c->mlp;
        else
            return -1;
        return 0;
    }
    if (!strcmp(name, "patch_embed.proj.weight")) {
        *ndim = 4;
        s[0] = D, s[1] = 3, s[2] = s[3] = c->patch;
    } else if (!strcmp(name, "patch_embed.proj.bias") || !strcmp(name, "norm.weight") ||
               !strcmp(name, "norm.bias")) {
        *ndim = 1;
        s[0] = D;
    } else if (!strcmp(name, "cls_token") ||
               (!strcmp(name, "dist_token") && c->extra - c->registers == 2)) {
        *ndim = 3;
        s[0] = 1, s[1] = 1, s[2] = D;
    } else if (!strcmp(name, "pos_embed")) {
        *ndim = 3;
        s[0] = 1, s[1] = T, s[2] = D;
    } else if (!strcmp(name, "head.weight")) {
        *ndim = 2;
        s[0] = c->classes, s[1] = D;
    } else if (!strcmp(name, "head.bias")) {
        *ndim = 1;
        s[0] = c->classes;
    } else {
        return -1;
    }
    return 0;
}

int vit_named_config(const char *name, vit_config *c)
{
    memset(c, 0, sizeof *c);
    c->family = VIT_TIMM;
    c->patch = 16;
    c->grid_h = c->grid_w = 14;
    c->extra = 1;
    c->pos_prefix = 1;
    c->classes = 1000;
    c->eps = 1e-6f;
    if (!strcmp(name, "ti"))
        c->dim = 192, c->depth = 12, c->heads = 3;
    else if (!strcmp(name, "s"))
        c->dim = 384, c->depth = 12, c->heads = 6;
    else if (!strcmp(name, "b"))
        c->dim = 768, c->depth = 12, c->heads = 12;
    else if (!strcmp(name, "tiny")) {
        c->dim = 32, c->depth = 2, c->heads = 2, c->patch = 8, c->grid_h = c->grid_w = 4;
        c->classes = 10;
    } else
        return -1;
    c->mlp = 4 * c->dim;
    return 0;
}

int vit_random_source(model_source *src, const vit_config *cfg, uint64_t seed, pgd_error **err)
{
    vit_config c = *cfg;
    c.family = VIT_TIMM;
    return model_random_source(src, &c, sizeof c, rand_shape, NULL, seed, err);
}

/* ---- the family entry ---- */

MODEL_FAMILY_ADAPTERS(vit)
MODEL_FAMILY_RANDOM(vit, {"vit_ti16", "ti"}, {"vit_s16", "s"}, {"vit_b16", "b"},
                    {"vit_tiny", "tiny"})

/* The random sizes: the table's, and DINOv2-S/14 as `pagoda embed` runs it at 224 x 224 (the
 * bench's dinov2_s14): ViT-S with 14-pixel patches on a 16 x 16 grid, headless (its features,
 * 384 wide, are the output). */
static int random_sized(const char *name, void *cfg, model_source *src, pgd_error **err)
{
    if (strcmp(name, "dinov2_s14"))
        return vit_fam_random(name, cfg, src, err);
    vit_config *c = cfg;
    vit_named_config("s", c);
    c->patch = 14;
    c->grid_h = c->grid_w = 16;
    c->headless = 1;
    c->classes = c->dim;
    return vit_random_source(src, c, 1, err);
}

static int detect(const model_source *src, const pgd_model_options *opt, void *cfg, pgd_error **err)
{
    return vit_detect(src, opt ? opt->heads : 0, cfg, err);
}

static int forward(void *model, const float *images, int B, int H, int W, float *logits,
                   double *total_ms, pgd_error **err)
{
    double t[5] = {0};
    int rc = vit_forward(model, images, B, H, W, logits, NULL, NULL, total_ms ? t : NULL, err);
    if (!rc && total_ms)
        *total_ms = t[3];
    return rc;
}

static void info(const void *cfg, const char *label, pgd_model_info *info)
{
    const vit_config *c = cfg;
    snprintf(info->naming, sizeof info->naming, "%s",
             c->family == VIT_HF            ? "hf"
             : c->family == VIT_TORCHVISION ? "torchvision"
                                            : "timm");
    info->classes = c->classes;
    info->patch = c->patch;
    info->input_h = c->patch * c->grid_h;
    info->input_w = c->patch * c->grid_w;
    info->depth = c->depth;
    info->width = c->dim;
    info->heads = c->heads;
    info->preprocess = c->family == VIT_HF            ? PGD_PREPROCESS_HF
                       : c->family == VIT_TORCHVISION ? PGD_PREPROCESS_TORCHVISION
                                                      : PGD_PREPROCESS_TIMM;
    info->has_attention_maps = 1;
    info->headless = c->headless;
    snprintf(info->description, sizeof info->description,
             "%s: %s ViT, width %d, depth %d, %d heads, patch %d, %dx%d grid, %d classes", label,
             vit_family_name(c->family), c->dim, c->depth, c->heads, c->patch, c->grid_h, c->grid_w,
             c->classes);
}

static int classes(const void *cfg)
{
    return ((const vit_config *)cfg)->classes;
}

static int check_input(const void *cfg, int B, int H, int W, pgd_error **err)
{
    const vit_config *c = cfg;
    if (H % c->patch || W % c->patch)
        return pgd_error_set(err, PGD_ERR_SHAPE,
                             "pgd_model: the input [%d, 3, %d, %d] is not a multiple of the "
                             "ViT's patch %d",
                             B, H, W, c->patch);
    return PGD_OK;
}

static int attention_maps(void *model, const float *images, int B, int H, int W, float *logits,
                          float *last, float *rollout, pgd_error **err)
{
    return vit_forward(model, images, B, H, W, logits, last, rollout, NULL, err);
}

static void vit_fam_attention(void *model, pgd_attention_mode mode, int64_t topk, uint64_t seed)
{
    vit_set_attention(model, mode, topk, seed);
}

static int set_pool(void *model, int mean)
{
    vit_set_pool(model, mean ? VIT_POOL_MEAN : VIT_POOL_CLS);
    return PGD_OK;
}

/* Multiply-adds: per block the qkv, projection and MLP linears over the T tokens and the two
 * attention products (T² D each); the patch embedding (the head's D·classes left out). */
static double macs(const void *cfg, int H, int W)
{
    const vit_config *c = cfg;
    double P = (double)(H / c->patch) * (W / c->patch), T = c->extra + P, D = c->dim;
    double per_block = T * (3 * D * D + D * D + 2 * D * c->mlp) + 2 * T * T * D;
    return c->depth * per_block + P * 3.0 * c->patch * c->patch * D;
}

static void sizes_json(const void *cfg, char *buf, size_t size)
{
    const vit_config *c = cfg;
    snprintf(buf, size, "\"dim\":%d,\"heads\":%d,\"depth\":%d", c->dim, c->heads, c->depth);
}

const model_family family_vit = {
    .id = PGD_MODEL_VIT,
    .name = "vit",
    .cfg_size = sizeof(vit_config),
    .is = NULL, /* the fallback: its detector has the last word */
    .detect = detect,
    .load = vit_fam_load,
    .random = random_sized,
    .forward = forward,
    .find_nonfinite = vit_fam_nonfinite,
    .info = info,
    .classes = classes,
    .check_input = check_input,
    .attention_maps = attention_maps,
    .set_attention = vit_fam_attention,
    .set_pool = set_pool,
    .free = vit_fam_free,
    .macs = macs,
    .sizes_json = sizes_json,
};
