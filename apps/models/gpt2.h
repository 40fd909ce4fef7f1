/* gpt2.h — GPT-2 (Hugging Face's GPT2LMHeadModel and the bare GPT2Model) built from libpagoda's
 * ops: configuration from config.json and the file's shapes, weights on the device, and a
 * decoder state holding each layer's KV cache, so that a prompt is run once (prefill) and each
 * new token costs one position's work (gpt2_append). Written against pagoda.h only.
 *
 *     gpt2_config cfg;
 *     gpt2_model *m = NULL;
 *     gpt2_state *st = NULL;
 *     rc = gpt2_config_read("config.json", &cfg, &err);
 *     if (!rc) rc = gpt2_detect(&src, &cfg, &err);
 *     if (!rc) rc = gpt2_load(ctx, &src, &cfg, &m, &err);
 *     if (!rc) rc = gpt2_state_create(m, batch, capacity, &st, &err);
 *     if (!rc) rc = gpt2_append(m, st, ids, mask, T, 0, logits, &err);   // prefill
 *     ... gpt2_append(m, st, next, NULL, 1, 0, logits, &err) once per new token ...
 */
#ifndef PAGODA_GPT2_H
#define PAGODA_GPT2_H

#include <stdint.h>

#include "model.h"

typedef enum gpt2_act { GPT2_GELU_TANH = 1, GPT2_GELU_EXACT = 2 } gpt2_act;

typedef struct gpt2_config {
    int layers, dim, heads, vocab, positions, inner;
    float eps;
    gpt2_act act;    /* activation_function: gelu_new / gelu_pytorch_tanh, or gelu */
    int scale_attn;  /* scale_attn_weights (1: scores / sqrt(head size)) */
    int eos;         /* eos_token_id, or -1 */
    int prefixed;    /* "transformer." names (GPT2LMHeadModel), else the bare GPT2Model's */
    int lm_head;     /* the file holds lm_head.weight (else the head is wte, tied) */
    int from_config; /* n_embd and n_head came from a config.json (0: gpt2_random_config) */
    model_assumptions assumed;
} gpt2_config;

/* Fills what config.json says (n_embd, n_head: required, a missing or non-integer value is an
 * error naming the file and the key; n_layer, n_positions, n_inner, layer_norm_epsilon,
 * activation_function, scale_attn_weights, eos_token_id), refusing what the model does not run
 * (cross-attention, scale_attn_by_inverse_layer_idx, another activation). A missing
 * layer_norm_epsilon or activation_function is recorded in cfg->assumed. */
int gpt2_config_read(const char *config_json, gpt2_config *cfg, pgd_error **err);

/* Recognises the naming (GPT2LMHeadModel's "transformer." or GPT2Model's bare names), reads
 * the vocabulary, positions, layers and MLP width from the shapes, and checks them against
 * what gpt2_config_read filled: n_embd equal to wte's width, n_head dividing it, n_layer and
 * n_positions (when given) equal to the file's. Errors name the file, the tensor or
 * `config` (config.json's path, for messages). */
int gpt2_detect(const model_source *src, const char *config, gpt2_config *cfg, pgd_error **err);

typedef struct gpt2_model gpt2_model;

/* Checks and uploads every tensor (strict: exact shapes, finite values, nothing left unused but
 * the causal buffers h.N.attn.bias / masked_bias of older files). */
int gpt2_load(pgd_ctx *ctx, const model_source *src, const gpt2_config *cfg, gpt2_model **out,
              pgd_error **err);
void gpt2_free(gpt2_model *m);
const gpt2_config *gpt2_get_config(const gpt2_model *m);

/* The state of `batch` sequences of at most `capacity` tokens each (<= positions): every
 * layer's keys and values [batch, heads, capacity, head size] on the device, the attention
 * mask so far and each sequence's next position. */
typedef struct gpt2_state gpt2_state;
int gpt2_state_create(gpt2_model *m, int batch, int capacity, gpt2_state **out, pgd_error **err);
void gpt2_state_free(gpt2_state *st);
/* Tokens appended so far (the same for every sequence: padding counts). */
int gpt2_state_length(const gpt2_state *st);

/* Appends T tokens to each sequence: ids [batch, T], mask [batch, T] (1 a token, 0 padding,
 * which no later token attends to; NULL: all 1). A token's position is the count of real tokens
 * before it in its sequence, a padding token's 1 (transformers' generate with left padding).
 * logits: with all_rows [batch, T, vocab], else the last token's [batch, vocab]. An id outside
 * the vocabulary, or more tokens than the state holds, is an error naming them. */
int gpt2_append(gpt2_model *m, gpt2_state *st, const int32_t *ids, const uint8_t *mask, int T,
                int all_rows, float *logits, pgd_error **err);

/* From the next gpt2_append on, probs[l] (NULL entries: none; probs itself NULL: none) receives
 * layer l's attention probabilities of that append, [batch, heads, T, past + T] (the attention
 * op's scores output; 0 at hidden keys). */
void gpt2_set_probs(gpt2_state *st, float *const *probs);

/* A small configuration for seeded random weights (no checkpoint): width 64, 4 heads, 2 layers,
 * 256 positions, the 257 tokens of gpt2_byte_tokenizer. */
void gpt2_random_config(gpt2_config *cfg);
/* A named configuration for seeded random weights: "tiny" (gpt2_random_config) or "small"
 * (GPT-2 small's sizes: 12 layers of width 768, 12 heads, 50257 tokens, 1024 positions).
 * 0, or -1 for an unknown name. */
int gpt2_named_config(const char *name, gpt2_config *cfg);
/* Seeded random weights of cfg in GPT2Model's bare names. */
int gpt2_random_source(model_source *src, const gpt2_config *cfg, uint64_t seed, pgd_error **err);

#endif
