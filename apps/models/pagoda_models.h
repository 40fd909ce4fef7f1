/* pagoda_models.h — the public interface of libpagoda-models: the models of apps/models (ViT in
 * timm, Hugging Face and torchvision naming; ResNet in torchvision naming with non-local
 * blocks; MLP-Mixer in timm naming; Swin V1 in torchvision, timm and Hugging Face naming) behind
 * one small handle, for programs and bindings that want a whole model without its configuration
 * structures; and the tokenizers (pgd_tokenizer_*: BERT's WordPiece, GPT-2's byte-level BPE).
 * Written against pagoda.h only, like the models themselves.
 *
 *     pgd_model *m = NULL;
 *     pgd_model_info info;
 *     int rc = pgd_model_load(ctx, "vit_b16_timm.safetensors", NULL, &m, &err);
 *     if (!rc) rc = pgd_model_get_info(m, &info);      // family, classes, input size, preset
 *     if (!rc) rc = pgd_model_forward(m, images, B, 224, 224, logits, NULL, &err);
 *     pgd_model_destroy(m);
 *
 * The conventions are pagoda.h's: a pgd_status return, an optional `pgd_error **err` set at
 * most once, nothing allocated on error, destroy functions accept NULL. A model belongs to the
 * context it was loaded on and must be destroyed before that context is. A model is used
 * from one thread at a time (as its context is).
 */
#ifndef PAGODA_MODELS_H
#define PAGODA_MODELS_H

#include <stdint.h>

#include "pagoda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with its internals hidden; these are its only exported symbols. */
#if defined(__GNUC__) && !defined(PGD_STATIC)
#define PGD_MODELS_API __attribute__((visibility("default")))
#else
#define PGD_MODELS_API
#endif

typedef enum pgd_model_family {
    PGD_MODEL_VIT = 1,    /* Vision Transformer (ViT, DeiT) */
    PGD_MODEL_RESNET = 2, /* ResNet, with or without non-local blocks */
    PGD_MODEL_MIXER = 3,  /* MLP-Mixer (timm naming) */
    PGD_MODEL_SWIN = 4,   /* Swin Transformer V1 (torchvision, timm, Hugging Face namings) */
    PGD_MODEL_ONNX = 5,   /* an ONNX image classifier (.onnx: one input [N, 3, H, W]) */
} pgd_model_family;

/* What pgd_model_load reads beside the file; zero (or NULL options) means the file's own. */
typedef struct pgd_model_options {
    int heads;                 /* ViT: attention heads (0: __metadata__ num_heads, else the
                                  standard table by width), as `pagoda vit --heads` */
    const char *nonlocal_spec; /* ResNet: identity-initialised non-local blocks to add,
                                  "layer3.5[,layer2.1]", as `pagoda nonlocal --nonlocal` */
    const char *nonlocal_mode; /* ResNet: NULL (the file's), "embedded_gaussian", "gaussian",
                                  "dot_product" or "concatenation" */
    int subsample_set;         /* ResNet: 1: `subsample` overrides the file's; 0: the file's */
    int subsample;             /* ResNet, with subsample_set: 0 or 1 (pool the keys 2x2) */
} pgd_model_options;

/* A description of a loaded model (plain data). */
typedef struct pgd_model_info {
    pgd_model_family family;
    char family_name[16];  /* "vit", "resnet", "mixer" or "swin" */
    char naming[16];       /* "timm", "hf", "torchvision" (Swin: also "timm-old", "hf4", "hf5") */
    char description[256]; /* one line, as the CLI prints it */
    int classes;
    int input_h, input_w;      /* the trained input size (ViT, Mixer: patch x grid; ResNet: 224;
                                  Swin: 224, 40 for the tiny test models); a Mixer takes only
                                  this size */
    int patch;                 /* ViT, Mixer, Swin: the patch size; ResNet: 1 */
    int depth;                 /* ViT, Mixer: blocks; Swin: blocks over all stages; ResNet:
                                  18/34/50/101/152 or 0 for another layout */
    int width;                 /* ViT, Mixer, Swin: embedding width; ResNet: stem channels */
    int heads;                 /* ViT: attention heads; Swin: the first stage's; else 0 */
    int nonlocal_blocks;       /* ResNet: how many non-local blocks; else 0 */
    pgd_preprocess preprocess; /* the preset its weights were trained with */
    int has_attention_maps;    /* 1: pgd_model_attention_maps applies (ViT) */
    int has_affinity;          /* 1: pgd_model_affinity applies (ResNet with a non-local block) */
    int headless;              /* 1: a ViT without a classifier (DINO): the forward gives
                                  features [B, width] (classes == width), pooled as
                                  pgd_model_set_pool says */
} pgd_model_info;

typedef struct pgd_model pgd_model;

/* Opens the .safetensors file at `path`, recognises the family by the rule of `pagoda classify`
 * (an MLP-Mixer's stem.proj and blocks.0.mlp_tokens; else a Swin's; else a torchvision ResNet's
 * conv1 and layer1.0.conv1; else a ViT in timm, Hugging Face or torchvision naming, whose
 * detector's error is the one reported when the file is none of them), checks every tensor exactly
 * and uploads the weights to ctx. `opt` may be NULL. On error *out is NULL and nothing is
 * allocated. The caller keeps `path` and `opt`. */
PGD_MODELS_API pgd_status pgd_model_load(pgd_ctx *ctx, const char *path,
                                         const pgd_model_options *opt, pgd_model **out,
                                         pgd_error **err);
/* A model with seeded random weights (the bench's items, the same weights on every machine):
 * "vit_ti16", "vit_s16", "vit_b16", "vit_tiny" (2 blocks of width 32, 32 x 32 input),
 * "dinov2_s14" (DINOv2-S/14 at 224 x 224: headless, its features [B, 384] are the logits),
 * "resnet50", "resnet50-nl" (a non-local block before layer3.5), "mixer_s16", "mixer_b16",
 * "mixer_l16", "mixer_tiny", "swin_t", "swin_s", "swin_b" and "swin_tiny". Unknown names are
 * PGD_ERR_NOT_FOUND listing the known ones. */
PGD_MODELS_API pgd_status pgd_model_random(pgd_ctx *ctx, const char *name, pgd_model **out,
                                           pgd_error **err);
/* Frees the model (before its context); NULL is accepted. */
PGD_MODELS_API void pgd_model_destroy(pgd_model *m);
/* Fills *info. PGD_ERR_INVALID_ARGUMENT for NULL arguments. */
PGD_MODELS_API pgd_status pgd_model_get_info(const pgd_model *m, pgd_model_info *info);

/* Runs B images [B, 3, H, W] (preprocessed, host float32) to logits [B, classes] (host). A ViT
 * takes H and W multiples of its patch (other sizes than the trained one resample the
 * position embeddings); a ResNet any size its stem accepts. A batch too large for the device
 * runs as several passes. times_ms (may be NULL) receives the total time of the pass. */
PGD_MODELS_API pgd_status pgd_model_forward(pgd_model *m, const float *images, int B, int H, int W,
                                            float *logits, double *times_ms, pgd_error **err);
/* ViT only (else PGD_ERR_UNSUPPORTED): the forward pass with, per image, the last block's
 * class-token attention over the patches averaged over heads (`last`) and the attention
 * rollout across all blocks (`rollout`), each [B, H/patch, W/patch] (either may be NULL);
 * logits as pgd_model_forward (may be NULL: discarded). */
PGD_MODELS_API pgd_status pgd_model_attention_maps(pgd_model *m, const float *images, int B, int H,
                                                   int W, float *logits, float *last,
                                                   float *rollout, pgd_error **err);
/* ResNet with a non-local block only (else PGD_ERR_UNSUPPORTED): the key grid gh x gw of the
 * first non-local block for an input of H x W, returns gh * gw (0 when the model has none). */
PGD_MODELS_API int64_t pgd_model_affinity_grid(const pgd_model *m, int H, int W, int *gh, int *gw);
/* The forward pass with the affinity row of one query position of the first non-local block:
 * the query (qx, qy) as fractions of the input's width and height in [0, 1); row receives
 * [B, gh * gw] (pgd_model_affinity_grid), *qi / *qj (may be NULL) the query's position on the
 * block's grid. logits may be NULL. */
PGD_MODELS_API pgd_status pgd_model_affinity(pgd_model *m, const float *images, int B, int H, int W,
                                             double qx, double qy, float *logits, float *row,
                                             int *qi, int *qj, pgd_error **err);

/* How a headless ViT pools its final-normed tokens into features: PGD_MODEL_POOL_CLS (the class
 * token, what timm gives with num_classes=0; the default) or PGD_MODEL_POOL_MEAN (the mean of
 * the patch tokens). PGD_ERR_UNSUPPORTED for a model with a classifier. */
enum { PGD_MODEL_POOL_CLS = 0, PGD_MODEL_POOL_MEAN = 1 };
PGD_MODELS_API pgd_status pgd_model_set_pool(pgd_model *m, int pool, pgd_error **err);

/* The built-in ImageNet-1k class name of index i (0..999), or NULL. */
PGD_MODELS_API const char *pgd_model_imagenet_label(int i);

/* ---- tokenizers: text <-> token ids exactly as Hugging Face's tokenizers give them ---------
 * (docs/tokenizers.md). No context needed; a tokenizer caches words, so one thread at a time. */
typedef struct pgd_tokenizer pgd_tokenizer;

/* Loads a tokenizer: with `merges` (merges.txt), `path` is GPT-2's vocab.json (byte-level BPE);
 * else a path ending in ".json" is a tokenizer.json (WordPiece with BertNormalizer and
 * BertPreTokenizer, or BPE with ByteLevel; another component is PGD_ERR_UNSUPPORTED naming it);
 * else `path` is BERT's vocab.txt, lower-cased and accents stripped when `lowercase` (as
 * BertTokenizer's do_lower_case). Hostile files are errors naming the file and the rule. On
 * error *out is NULL. The caller keeps the paths. */
PGD_MODELS_API int pgd_tokenizer_load(const char *path, const char *merges, int lowercase,
                                      pgd_tokenizer **out, pgd_error **err);
/* The ids of len bytes of UTF-8 text (else PGD_ERR_INVALID_ARGUMENT naming the byte offset);
 * add_special: BERT's [CLS] ... [SEP] (or tokenizer.json's post-processor). *ids is allocated
 * by the library: release it with pgd_tokenizer_release. */
PGD_MODELS_API int pgd_tokenizer_encode(pgd_tokenizer *t, const char *text, size_t len,
                                        int add_special, int32_t **ids, size_t *n, pgd_error **err);
/* The text of n ids (skip_special: leave out special tokens), valid UTF-8, NUL-terminated, *len
 * bytes (it may hold NUL characters). Release *text with pgd_tokenizer_release. */
PGD_MODELS_API int pgd_tokenizer_decode(const pgd_tokenizer *t, const int32_t *ids, size_t n,
                                        int skip_special, char **text, size_t *len,
                                        pgd_error **err);
/* The bytes of token `id` (*len of them, not NUL-terminated, owned by t), or NULL. */
PGD_MODELS_API const char *pgd_tokenizer_token(const pgd_tokenizer *t, int32_t id, size_t *len);
/* The id of a token, or -1. */
PGD_MODELS_API int32_t pgd_tokenizer_id(const pgd_tokenizer *t, const char *token, size_t len);
/* Highest id + 1. */
PGD_MODELS_API int32_t pgd_tokenizer_vocab_size(const pgd_tokenizer *t);
/* Frees what pgd_tokenizer_encode or pgd_tokenizer_decode returned; NULL is accepted. */
PGD_MODELS_API void pgd_tokenizer_release(void *p);
/* NULL is accepted. */
PGD_MODELS_API void pgd_tokenizer_free(pgd_tokenizer *t);

/* ---- BERT-family encoders: BERT, DistilBERT, RoBERTa (docs/text.md) ---------------------- */
typedef struct pgd_bert pgd_bert;

typedef struct pgd_bert_info {
    char arch[16]; /* "bert", "roberta" or "distilbert" */
    int layers, hidden, heads, vocab, positions;
    int type_vocab; /* token types (0: none, DistilBERT) */
    int pad_id;     /* config.json's pad_token_id, or -1 */
    int mlm;        /* 1: the masked-LM head is loaded (logits available) */
} pgd_bert_info;

/* Loads a save_pretrained folder, or the .safetensors file in it, with its config.json beside
 * it (required: the head count is read from it, never guessed); every tensor checked exactly.
 * On error *out is NULL. */
PGD_MODELS_API pgd_status pgd_bert_load(pgd_ctx *ctx, const char *weights, pgd_bert **out,
                                        pgd_error **err);
/* PGD_ERR_INVALID_ARGUMENT for NULL arguments. */
PGD_MODELS_API pgd_status pgd_bert_get_info(const pgd_bert *m, pgd_bert_info *info);
/* B sequences of S token ids (host [B, S]); mask [B, S] (1: a token, 0: padding; NULL: all
 * tokens) and types [B, S] (NULL: all 0). Fills what is not NULL: hidden [B, S, hidden] (the
 * last hidden state), logits [B, S, vocab] (the masked-LM head's), probs [layers, B, heads, S,
 * S] (every layer's attention probabilities). */
PGD_MODELS_API pgd_status pgd_bert_forward(pgd_bert *m, int B, int S, const int32_t *ids,
                                           const int32_t *mask, const int32_t *types, float *hidden,
                                           float *logits, float *probs, pgd_error **err);
/* Before its context; NULL is accepted. */
PGD_MODELS_API void pgd_bert_destroy(pgd_bert *m);

#ifdef __cplusplus
}
#endif
#endif /* PAGODA_MODELS_H */
