/* memnet.h — an end-to-end memory network (Sukhbaatar et al., NeurIPS 2015) as
 * tools/golden/train-memnet.py defines it, and stories in bAbI's text format. Written against
 * pagoda.h only. The bags of words are summed on the host (an embedding lookup); the hops run on
 * the device on existing ops, every question of a file at once: scores = u·mᵀ (batched GEMM), the
 * mask of empty slots added, softmax, u ← p·c + u (GEMM with u as residual), logits = u·Wᵀ. */
#ifndef PAGODA_MEMNET_H
#define PAGODA_MEMNET_H

#include <stdint.h>

#include "model.h"
#include "pagoda.h"

/* A vocabulary word and its index, in the sorted table that finds words (memnet_model.sorted). */
typedef struct memnet_word {
    const char *word;
    int index;
} memnet_word;

typedef struct memnet_model {
    int hops, memory, sent, dim, vocab;
    char **words;        /* [vocab]; words[0] is the empty word */
    memnet_word *sorted; /* [vocab]: the words sorted by strcmp, for lookups in log time */
    char *word_text;     /* what words point into */
    float *embed;        /* [hops + 1, vocab, dim] */
    float *temporal;     /* [hops + 1, memory, dim] */
    float *pe;           /* [sent, dim] position encoding */
    pgd_tensor *answer;  /* embed[hops] on the device [vocab, dim] */
} memnet_model;

/* Loads embed.0 .. embed.K [V, d] and temporal.0 .. temporal.K [M, d] with __metadata__ format
 * "pagoda-memn2n", hops (1..16), memory_size, sentence_size and vocab (V space-separated words,
 * the first "<nil>"); every tensor exactly shaped and consumed, the vocabulary without
 * duplicates. On error *out is NULL. */
int memnet_load(pgd_ctx *ctx, const model_source *src, memnet_model **out, pgd_error **err);
void memnet_free(memnet_model *m);

/* One question of a story file with the sentences it may attend to. */
typedef struct memnet_question {
    int line;       /* its line in the file (1-based) */
    char *text;     /* the question as written */
    char *answer;   /* the answer the file gives, or NULL */
    int n_facts;    /* the story's sentences before it, the last `memory` of them */
    int *fact_line; /* [n_facts] their lines in the file, most recent first */
    char **fact;    /* [n_facts] their text (owned by the story) */
} memnet_question;

typedef struct memnet_story {
    int n_questions;
    memnet_question *q;
    char *text; /* the file, split in place */
} memnet_story;

/* Reads a story file in bAbI's format: "N sentence" lines, N = 1 starting a new story, and
 * question lines "N question?<TAB>answer<TAB>supporting ids" (answer and ids optional). Every
 * word must be in m's vocabulary and a sentence at most m->sent words, else PGD_ERR_FORMAT
 * naming the line and the word; a question before any sentence of its story is an error too,
 * and so is a NUL byte (named with its offset and line: a story is text). */
int memnet_story_load(const memnet_model *m, const char *path, memnet_story *s, pgd_error **err);
void memnet_story_free(memnet_story *s);

/* Answers every question: logits [Q, V] and the attention of each hop, attention [Q, hops,
 * memory] (slot i is fact i of the question, most recent first; empty slots 0). Both arrays
 * are the caller's. */
int memnet_run(pgd_ctx *ctx, const memnet_model *m, const memnet_story *s, float *logits,
               float *attention, pgd_error **err);

#endif
