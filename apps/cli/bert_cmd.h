/* bert_cmd.h — what `pagoda fill-mask` and `pagoda embed-text` share (bert_run.c): the options,
 * the model and tokenizer opened from --weights (or the seeded random model), the texts as one
 * padded batch through the encoder, the attention map, and the JSON document's common part. */
#ifndef PAGODA_BERT_CMD_H
#define PAGODA_BERT_CMD_H

#include "app.h"
#include "bert.h"
#include "text_files.h"

#define BERT_COMMON_HELP                                                                           \
    "Options:\n"                                                                                   \
    "  --weights W        the model: a folder as save_pretrained writes it (model.safetensors,\n"  \
    "                     config.json, and tokenizer.json or vocab.txt), its model.safetensors\n"  \
    "                     (config.json and the tokenizer beside it), or hf:ORG/NAME (pulled\n"     \
    "                     into the hub cache once). config.json is required: the head count is\n"  \
    "                     read from it, never guessed. Without --weights: a seeded random BERT\n"  \
    "                     over a small built-in vocabulary, said on stderr (it means nothing)\n"   \
    "  --tokenizer F      tokenizer.json or vocab.txt instead of the one beside the weights\n"     \
    "  --device SEL       the device (see 'pagoda devices --help')\n"                              \
    "  --attention-map OUT.png\n"                                                                  \
    "                     the first text's token x token attention as a grid of heat maps, one\n"  \
    "                     tile per layer and head chosen (rows: the attending token, columns:\n"   \
    "                     the token attended to; a bidirectional encoder fills the square)\n"      \
    "  --layers L         layers drawn: all, or indices from 0 separated by commas, negative\n"    \
    "                     ones from the end (default -1: the last layer)\n"                        \
    "  --heads H          heads drawn: all (default), or indices from 0 separated by commas\n"

typedef struct bert_opts {
    const char *weights, *tokenizer, *device, *map, *layers, *heads;
    int fill, json, top_k, pool_cls, normalize;
    char **texts;
    int ntexts;
} bert_opts;

typedef struct bert_run {
    bert_opts o;
    text_files files;
    int random;
    tokenizer *tok;
    bert_config cfg;
    model_source src;
    bert_model *m;
    pgd_ctx *ctx;
    pgd_outfile *map;
    int B, S, mask_id; /* the batch: B texts padded to S tokens */
    int32_t *ids, *mask;
    int *first, *len;               /* each text's first token and token count */
    float *hidden, *logits, *probs; /* what the command asked for (bert_outputs) */
} bert_run;

/* Opens everything, runs the batch, calls report(r) and draws the attention map; the exit
 * status. */
int bert_run_command(bert_run *r, int (*report)(bert_run *r));
/* {"weights", "random", "tokenizer", "device", "model", key: value, "attention_map"}. */
json_t *bert_doc(const bert_run *r, const char *key, json_t *value);
/* The tokens of text b as JSON strings. */
json_t *bert_tokens_json(const bert_run *r, int b);
json_t *bert_token_json(const bert_run *r, int id);
/* The token of id, escaped for the terminal, into buf. */
const char *bert_token_text(const bert_run *r, int id, char *buf, size_t size);

#endif
