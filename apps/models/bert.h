/* bert.h — bidirectional text encoders of Hugging Face's transformers: BERT (BertModel,
 * BertForMaskedLM), RoBERTa (RobertaModel, RobertaForMaskedLM) and DistilBERT (DistilBertModel,
 * DistilBertForMaskedLM), read from model.safetensors + config.json as save_pretrained writes
 * them, and run with libpagoda's ops: every token attends to every token of its sequence that
 * the attention mask keeps.
 *
 * Sizes come from the tensors' shapes and config.json together; what only config.json can say
 * (the head count, the activation, the LayerNorm epsilon, RoBERTa's padding id) is never guessed:
 * a missing or inconsistent value is an error naming config.json. */
#ifndef PAGODA_BERT_H
#define PAGODA_BERT_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

typedef enum bert_arch {
    BERT_ARCH_BERT = 0,
    BERT_ARCH_ROBERTA = 1, /* position ids count from pad_token_id + 1, pads get pad_token_id */
    BERT_ARCH_DISTIL = 2,  /* no token types, transformer.layer.N.{attention.q_lin, ffn, ...} */
} bert_arch;

typedef enum bert_act {
    BERT_ACT_GELU = 0,      /* "gelu": the exact erf form */
    BERT_ACT_GELU_TANH = 1, /* "gelu_new", "gelu_pytorch_tanh" */
    BERT_ACT_RELU = 2,      /* "relu" (DistilBERT's other choice) */
} bert_act;

typedef struct bert_config {
    bert_arch arch;
    int layers, hidden, heads, inter, vocab, max_pos;
    int type_vocab; /* token types; 0 for DistilBERT (none) */
    int pad_id;     /* pad_token_id (-1 when config.json has none) */
    bert_act act;
    int mlm; /* the masked-LM head is in the file (else a headless encoder) */
    float eps;
    char prefix[16]; /* "bert.", "roberta.", "distilbert." or "" (a headless model's names) */
} bert_config;

const char *bert_arch_name(bert_arch a);
const char *bert_act_name(bert_act a);

/* The values of a config.json (`n` bytes of text; `label` names it in errors) into cfg, which it
 * first clears: model_type, sizes, head count, activation, epsilon, padding id. Any value of the
 * wrong type or range, an unknown model_type or activation, a position_embedding_type other than
 * "absolute", a missing head count or one that does not divide the width is PGD_ERR_FORMAT
 * naming `label` and the key. */
int bert_config_parse(const char *text, size_t n, const char *label, bert_config *cfg,
                      pgd_error **err);
/* Completes cfg (as bert_config_parse left it) from the source's names and shapes: the naming's
 * prefix, the MLM head, and every size, each checked against config.json's value (a mismatch is
 * an error naming both the tensor and config.json). */
int bert_detect(const model_source *src, bert_config *cfg, pgd_error **err);

typedef struct bert_model bert_model;

/* Strict load (every tensor exactly shaped and finite, every tensor of the file consumed but
 * the pooler and the next-sentence head, which no output here uses). */
int bert_load(pgd_ctx *ctx, const model_source *src, const bert_config *cfg, bert_model **out,
              pgd_error **err);
void bert_free(bert_model *m);
const bert_config *bert_get_config(const bert_model *m);

/* A batch of B sequences of S tokens (row-major [B, S] host arrays). */
typedef struct bert_batch {
    int B, S;
    const int32_t *ids;   /* token ids in [0, vocab) */
    const int32_t *mask;  /* 1: a token, 0: padding (either side); NULL: all tokens */
    const int32_t *types; /* token type ids in [0, type_vocab); NULL: all 0 */
} bert_batch;

/* What a forward returns; NULL fields are not computed. */
typedef struct bert_outputs {
    float *hidden; /* [B, S, hidden]: the last layer's output (last_hidden_state) */
    float *logits; /* [B, S, vocab]: the masked-LM logits (needs cfg.mlm) */
    float *probs;  /* [layers, B, heads, S, S]: every layer's attention probabilities */
} bert_outputs;

/* The forward pass. Errors (naming the sequence and position): an id or type out of range, a
 * sequence longer than the position table allows, a sequence with no token under its mask. */
int bert_forward(bert_model *m, const bert_batch *in, bert_outputs *out, pgd_error **err);

/* The configuration of the seeded random model (`pagoda fill-mask` without --weights): a BERT of
 * 2 layers, width 64, 4 heads, MLM head, over `vocab` tokens. */
void bert_random_config(int vocab, bert_config *cfg);
/* A source of seeded random weights in BertForMaskedLM's names for cfg. */
int bert_random_source(model_source *src, const bert_config *cfg, uint64_t seed, pgd_error **err);

#endif
