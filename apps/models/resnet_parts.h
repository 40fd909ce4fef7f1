/* resnet_parts.h — what the ResNet's files (resnet_config.c: layout and detection, resnet.c:
 * the model, resnet_random.c: seeded weights and the family entry) share and nobody else uses:
 * the walk over the residual blocks and the checks of their tensors. */
#ifndef PAGODA_RESNET_PARTS_H
#define PAGODA_RESNET_PARTS_H

#include "resnet.h"

/* ---- the walk over the residual blocks ----
 * Detection, loading and the random source all visit every residual block in order and every
 * convolution in it, with the same names, widths and strides: resnet_next_block and
 * resnet_block_convs say them once. */

/* Residual block layer<layer>.<block> as the walk sees it. */
typedef struct block_pos {
    int layer, block;        /* layer 1..4; 0 before the walk starts */
    int64_t cin, width, out; /* input channels, inner width, output channels */
    int stride;              /* 2 on the first block of layers 2-4, else 1 */
    int needs_ds;            /* the stride or the width changes: a downsample is required */
} block_pos;

/* Moves *p to the next residual block (from a zeroed *p, to layer1.0); 0 after the last. */
int resnet_next_block(const resnet_config *c, block_pos *p);

/* One convolution of a residual block, with the batch norm that follows it. */
typedef struct block_conv {
    char weight[64], bn[64]; /* "layerL.B.convK.weight" and "layerL.B.bnK", or the downsample's */
    int64_t cin, cout;
    int k, stride, dil;
    int last; /* the block's last convolution (conv3 of a Bottleneck, conv2 of a BasicBlock) */
} block_conv;

/* The convolutions of the block at p: conv1..conv3 (Bottleneck) or conv1..conv2 (BasicBlock),
 * then the downsample when `with_ds`. Returns how many it wrote (at most 4); the k-th
 * convolution (from 1) is out[k - 1], the downsample the last. */
int resnet_block_convs(const resnet_config *c, const block_pos *p, int with_ds, block_conv out[4]);

/* ---- checks of a file's tensors (resnet_config.c) ---- */
int resnet_need_conv(const model_source *src, const char *name, int64_t cout, int64_t cin, int k,
                     pgd_error **err);
/* The four tensors of batch norm `prefix` ([c] each). */
int resnet_need_bn(const model_source *src, const char *prefix, int64_t c, pgd_error **err);
int resnet_has_downsample(const model_source *src, int L, int B);
/* The index in c->nl of the non-local block before layerL.B, or -1. */
int resnet_site_index(const resnet_config *c, int L, int B);
/* Checks the tensors of non-local site s as the file holds them. */
int resnet_check_site(const model_source *src, const resnet_config *c, const resnet_nl_site *s,
                      pgd_error **err);
/* Adds the sites of a --nonlocal spec ("layer3.5[,layer2.1]") to c; `label` names it. */
int resnet_parse_spec(const char *label, const char *spec, resnet_config *c, int identity,
                      pgd_error **err);

/* The standard depths (18, 34, 50, 101, 152): the index of `depth`, or -1; and the layout of
 * index si with torchvision's widths. */
int resnet_standard_index(int depth);
void resnet_standard_config(int si, resnet_config *c);

/* Seeded values for blocks inserted by --nonlocal: uniform in [-amp, amp] (resnet.c). */
void resnet_fill_seeded(float *dst, int64_t n, uint64_t seed, float amp);

#endif
