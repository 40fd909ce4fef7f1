/* detr.h — DETR (Carion et al., "End-to-End Object Detection with Transformers", ECCV 2020):
 * a ResNet backbone to C5 (resnet.c, batch norms folded), a 1x1 input projection, a 2-D sine
 * position embedding computed on the device from the padding mask, a post-norm Transformer
 * encoder and decoder (object queries cross-attending to the encoder memory), and the class
 * and box heads. Weights in Hugging Face transformers 4.x naming (the hub's files, and what
 * transformers 5.x save_pretrained still writes), transformers 5.x in-memory naming
 * (state_dict(): model.backbone.model.*, o_proj, mlp.fc1) and the original repository's
 * (backbone.0.body.*, packed in_proj_weight, linear1/2, norm1..3). Written against pagoda.h. */
#ifndef PAGODA_DETR_H
#define PAGODA_DETR_H

#include <stdint.h>

#include "model.h"
#include "pagoda.h"
#include "resnet.h"

typedef enum detr_naming {
    DETR_HF4 = 0,      /* model.backbone.conv_encoder.model.*, out_proj, fc1 */
    DETR_HF5 = 1,      /* model.backbone.model.*, o_proj, mlp.fc1 */
    DETR_ORIGINAL = 2, /* backbone.0.body.*, transformer.*, in_proj_weight, linear1 */
} detr_naming;

/* "hf4", "hf5" or "original". */
const char *detr_naming_name(detr_naming n);

typedef struct detr_config {
    detr_naming naming;
    resnet_config backbone; /* headless; dc5 when dilated */
    int64_t dim;            /* d_model */
    int64_t enc_heads, dec_heads;
    int enc_layers, dec_layers;
    int64_t enc_ffn, dec_ffn;
    int64_t queries;
    int64_t classes;           /* logits per query, "no object" (the last) included */
    model_assumptions assumed; /* what detr_detect took by default ("encoder_heads",
                                  "decoder_heads", "dilation") */
} detr_config;

/* What the file's names and shapes cannot say. 0 (or NULL options): the file's __metadata__
 * ("encoder_attention_heads", "decoder_attention_heads", "dilation" = "true"/"false", as the
 * Hugging Face config names them), else 8 heads and no dilation, each default recorded in
 * cfg->assumed (a caller says so: a 4-head checkpoint run with 8 heads gives other detections,
 * nearly the same only while attention is near uniform). */
typedef struct detr_options {
    int enc_heads, dec_heads; /* > 0: override */
    int dc5;                  /* 0: the metadata's; 1: force DC5; -1: force no dilation */
    const char *origin[2];    /* where enc_heads, dec_heads came from, for messages (NULL:
                                 "the options"), e.g. a config.json's path or "--heads" */
} detr_options;

/* Recognises the naming, reads every size from names and shapes and checks every tensor
 * exactly (the error names the first missing or misshaped one). */
int detr_detect(const model_source *src, const detr_options *opt, detr_config *cfg,
                pgd_error **err);

typedef struct detr_model detr_model;

/* Strict load (every tensor consumed; the backbone's batch norms folded). On error *out is
 * NULL and nothing is allocated. */
int detr_load(pgd_ctx *ctx, const model_source *src, const detr_config *cfg, detr_model **out,
              pgd_error **err);
void detr_free(detr_model *m);
const detr_config *detr_get_config(const detr_model *m);

/* The feature grid (C5, stride 32; 16 with DC5) for an input of H x W. */
void detr_feature_size(const detr_model *m, int H, int W, int *fh, int *fw);

/* Outputs of one forward pass (host arrays the caller allocates). */
typedef struct detr_output {
    float *logits; /* [B, queries, classes] */
    float *boxes;  /* [B, queries, 4]: (cx, cy, w, h) in [0, 1] of the unpadded image */
    float *cross;  /* NULL, or [B, queries, fh * fw]: the last decoder layer's cross-attention,
                      heads averaged (detr_feature_size gives fh, fw) */
} detr_output;

/* Runs B preprocessed images [B, 3, H, W] (padded at the bottom and right to a common size)
 * with their pixel mask [B, H, W] (1 real, 0 padding; NULL: all real). times (ms, may be
 * NULL): [0] backbone, [1] input projection, position embedding and encoder, [2] decoder and
 * heads, [3] total. */
int detr_forward(detr_model *m, const float *images, const float *pixel_mask, int B, int H, int W,
                 const detr_output *out, double times[4], pgd_error **err);

/* One detection after post-processing. */
typedef struct detr_detection {
    int query, label;
    float score;
    float box[4]; /* x0, y0, x1, y1 in pixels of the original image */
} detr_detection;

/* Hugging Face's post_process_object_detection for one image: softmax over the classes, the
 * last ("no object") dropped, the best class of each query kept when its probability exceeds
 * threshold; boxes from (cx, cy, w, h) to corners scaled to img_w x img_h. out holds up to
 * `queries` entries, in query order. Returns how many. */
int detr_postprocess(const float *logits, const float *boxes, int64_t queries, int64_t classes,
                     float threshold, int img_w, int img_h, detr_detection *out);

/* A box (x0, y0, x1, y1) clipped to the image [0, img_w] x [0, img_h], for showing it:
 * post_process_object_detection does not clip (a box may reach past the image), the boxes
 * saved raw (--save-boxes) keep that. */
void detr_clip_box(const float box[4], int img_w, int img_h, float out[4]);

/* The COCO category name of id (0..90) as DETR's checkpoints number them ("N/A" for the ten
 * unused ids), or NULL outside. */
const char *detr_coco_label(int id);

/* Seeded random weights (HF 4.x naming) for DETR with a ResNet-`depth` backbone (50 or 101),
 * 256 wide, 6 + 6 layers, 8 heads, 100 queries, 92 classes: the bench, the demo, and the CLI
 * without a checkpoint. Free with model_source_free. */
int detr_random_source(model_source *src, int depth, uint64_t seed, pgd_error **err);

#endif
