/* resnet.h — ResNet backbones (torchvision naming) with non-local blocks (Wang et al., "Non-local
 * Neural Networks", CVPR 2018), built from libpagoda's convolution, pooling and non-local ops. */
#ifndef PAGODA_RESNET_H
#define PAGODA_RESNET_H

#include <stdint.h>

#include "model.h"
#include "pagoda.h"

/* The modes of the library's op under the model's names (same values as pgd_nonlocal_mode). */
typedef enum nl_mode {
    NL_EMBEDDED_GAUSSIAN = PGD_NONLOCAL_EMBEDDED_GAUSSIAN,
    NL_GAUSSIAN = PGD_NONLOCAL_GAUSSIAN,
    NL_DOT_PRODUCT = PGD_NONLOCAL_DOT_PRODUCT,
    NL_CONCATENATION = PGD_NONLOCAL_CONCATENATION
} nl_mode;

/* "embedded_gaussian", "gaussian", "dot_product", "concatenation". */
const char *nl_mode_name(nl_mode m);
/* 0 and *m for a known name, else -1. */
int nl_mode_parse(const char *s, nl_mode *m);

#define RESNET_MAX_BLOCKS 64 /* residual blocks per layer */
#define RESNET_MAX_NL 16     /* non-local blocks */

typedef struct resnet_nl_site {
    int layer, block; /* inserted immediately before residual block layer<layer>.<block> */
    int64_t channels; /* C: the input channels of that block */
    int64_t inner;    /* C/2 (θ, φ, g widths) */
    int identity;     /* 1: inserted by --nonlocal with the paper's initialisation */
} resnet_nl_site;

typedef struct resnet_config {
    int bottleneck;   /* 1: Bottleneck blocks (conv1/2/3), 0: BasicBlock (conv1/2) */
    int blocks[4];    /* residual blocks per layer */
    int64_t stem;     /* conv1 output channels */
    int64_t width[4]; /* per layer: the blocks' inner width */
    int64_t out[4];   /* per layer: output channels */
    int64_t classes;
    int depth; /* 18/34/50/101/152 for the standard layouts, else 0 */
    nl_mode mode;
    int mode_forced; /* 1: the mode came from resnet_options, not the file: the parts of the
                        file's blocks that mode does not use are left out, not refused */
    int subsample;
    int headless; /* 1: a backbone without fc (DETR's): classes is 0, no logits */
    int dc5;      /* 1: layer4 dilated instead of strided (DETR-DC5; output stride 16) */
    int n_nl;
    resnet_nl_site nl[RESNET_MAX_NL];
    model_assumptions assumed; /* "nonlocal_mode", "nonlocal_subsample": the file's blocks'
                                  settings that neither its metadata nor the options gave */
} resnet_config;

/* Options that override what the file says. */
typedef struct resnet_options {
    const char *nonlocal_spec; /* "layer3.5[,layer2.1,…]": identity-initialised blocks to add */
    const char *mode;          /* NULL: __metadata__ nonlocal.mode, else embedded_gaussian */
    int subsample;             /* -1: __metadata__ nonlocal.subsample, else off; 0/1 force */
} resnet_options;

/* Reads the layout from names and shapes: block type, blocks per layer, widths, classes, and
 * the non-local blocks present in the file (nonlocal.layerL.B.*) plus those `opt` adds. Every
 * missing or misshaped tensor, an unknown mode, or a non-local key naming a block that doesn't
 * exist → an error naming the key. Blocks per layer come from the highest index the names
 * carry, so a block missing or held in part is reported, not dropped. */
int resnet_detect(const model_source *src, const resnet_options *opt, resnet_config *cfg,
                  pgd_error **err);

/* As resnet_detect for a detector's backbone to C5: no fc.weight/fc.bias (classes 0), no
 * non-local blocks; dc5: layer4 with stride 1 and dilation 2 (its first block's entering 3x3
 * keeps dilation 1), as torchvision's replace_stride_with_dilation and timm's output_stride=16
 * build it. */
int resnet_detect_backbone(const model_source *src, int dc5, resnet_config *cfg, pgd_error **err);

typedef struct resnet_model resnet_model;

int resnet_load(pgd_ctx *ctx, const model_source *src, const resnet_config *cfg, resnet_model **out,
                pgd_error **err);
void resnet_free(resnet_model *m);

/* The affinity row of one query position of the first non-local block (visualisation). */
typedef struct resnet_affinity {
    double qx, qy; /* the query as a fraction of the input's width and height, in [0, 1) */
    float *row;    /* out: [B, gh * gw] (caller allocates B * max grid; see resnet_nl_grid) */
    int gh, gw;    /* out: the grid the row lives on (after subsampling) */
    int qi, qj;    /* out: the query's position on the block's own grid (row, column) */
} resnet_affinity;

/* The grid h x w a non-local block at site s of configuration c sees for an input of H x W, and
 * its keys' (subsampled) grid kh x kw: returns kh * kw. */
int64_t resnet_site_grid(const resnet_config *c, const resnet_nl_site *s, int H, int W, int64_t *h,
                         int64_t *w, int64_t *kh, int64_t *kw);
/* The (subsampled) key grid of the first non-local block for an input of H x W, or 0. */
int64_t resnet_nl_grid(const resnet_model *m, int H, int W, int *gh, int *gw);

/* Runs B images [B, 3, H, W] to logits [B, classes]. times (ms) if non-NULL: [0] stem,
 * [1] residual layers without the non-local blocks, [2] non-local blocks, [3] head, [4] total.
 * aff NULL: no affinity. */
int resnet_forward(resnet_model *m, const float *images, int B, int H, int W, float *logits,
                   resnet_affinity *aff, double times[5], pgd_error **err);
/* A headless backbone's features: images [B, 3, H, W] (host) through the stem and the four
 * layers into *c5, a new NHWC device tensor [B, H/32, W/32, out[3]] (H/16 with dc5) for the
 * caller to destroy. On error *c5 is NULL. */
int resnet_features(resnet_model *m, const float *images, int B, int H, int W, pgd_tensor **c5,
                    pgd_error **err);
/* The images per pass of the last resnet_forward (see vit_last_split). */
int resnet_last_split(const resnet_model *m);
/* As vit_find_nonfinite: one image again with every stage checked; p->stage names the first
 * whose output is not finite ("conv1 (stem)", "layer2.1", "nonlocal.layer3.5", "fc"). */
int resnet_find_nonfinite(resnet_model *m, const float *image, int H, int W, model_probe *p,
                          pgd_error **err);

/* Seeded random weights in torchvision naming for ResNet-`depth` (18/34/50/101/152) with
 * `classes` outputs and non-local blocks at the sites of `spec` (e.g. "layer3.5", may be NULL)
 * in `mode` (their BN after W has γ = 1: the blocks do real work). */
/* (Free the source with model_source_free.) */
/* classes 0: a headless backbone (no fc). */
int resnet_random_source(model_source *src, int depth, int64_t classes, const char *spec,
                         nl_mode mode, uint64_t seed, pgd_error **err);

/* The host arrays of one non-local block (the bn block holds γ, β, mean and var, C each). */
typedef struct resnet_nl_weights {
    float *theta, *phi, *g, *bt, *bp, *bg, *w, *bw, *bn, *concat;
    pgd_batchnorm bn_desc; /* over bn, for params->bn */
} resnet_nl_weights;

/* Seeded weights for a non-local block on C channels with inner width Ci, as --nonlocal inserts
 * them (the paper's initialisation): θ, φ, g, W and concat uniform (xorshift from `seed`),
 * biases zero, BN γ = β = mean = 0 and var = 1, so z = x exactly while the block does all the
 * work of a trained one (benchmarks use it for that). Fills *h, which the caller frees with
 * resnet_nl_weights_free, and, when params is non-NULL, *params pointing into *h for
 * pgd_nonlocal_create (valid while *h lives). On error *h is empty. */
int resnet_nl_seeded(int64_t C, int64_t Ci, uint64_t seed, resnet_nl_weights *h,
                     pgd_nonlocal_params *params, pgd_error **err);
void resnet_nl_weights_free(resnet_nl_weights *h);

#endif
