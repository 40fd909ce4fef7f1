/* detr_parts.h — what detr_config.c (namings, detection) and detr.c (the model) share and
 * nobody else uses. */
#ifndef PAGODA_DETR_PARTS_H
#define PAGODA_DETR_PARTS_H

#include <stddef.h>

#include "detr.h"

/* The names one naming gives the model's tensors. */
typedef struct naming {
    const char *backbone;   /* prefix of the ResNet's torchvision/timm names */
    const char *input_proj; /* + ".weight" [D, C, 1, 1], ".bias" */
    const char *query;      /* [Q, D] */
    const char *enc, *dec;  /* layer prefixes, the index and a '.' follow */
    const char *sa, *ca;    /* the attentions within a decoder layer (sa also the encoder's) */
    int packed;             /* 1: in_proj_weight [3D, D] / in_proj_bias; else q/k/v_proj */
    const char *o;          /* output projection */
    const char *fc1, *fc2;
    const char *enc_ln[2];
    const char *dec_ln[3];
    const char *dec_norm, *cls, *box; /* box: ".N" follows */
} naming;

extern const naming detr_namings[3];

/* The name of a part of layer `i` of the encoder (dec 0) or decoder (dec 1). */
void detr_layer_name(const naming *nm, int dec, int i, const char *part, char *buf, size_t size);
/* *out: the tensors of src under `prefix`, named without it (a listing when src has one). The
 * view does not own src; free it with model_source_free before src. */
int detr_prefix_view(const model_source *src, const char *prefix, model_source *out,
                     pgd_error **err);
/* Requires the linear layer `p`.weight [out, in] and `p`.bias [out] (model_need). */
int detr_need_linear(const model_source *src, const char *p, int64_t out, int64_t in,
                     pgd_error **err);
/* The attention at `p` (ends with '.'): packed or q/k/v projections, and the output one. */
int detr_need_attention(const model_source *src, const naming *nm, const char *p, int64_t D,
                        pgd_error **err);

#endif
