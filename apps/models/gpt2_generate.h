/* gpt2_generate.h — text generation with GPT-2's KV cache (gpt2.h): a prompt batch run once
 * (prefill), then one token a step appended to every layer's cache; greedy choice or sampling
 * (temperature, top-k, top-p) from a seeded generator of its own, the same on every machine;
 * stop tokens; each token handed to a callback as it is chosen (streaming). */
#ifndef PAGODA_GPT2_GENERATE_H
#define PAGODA_GPT2_GENERATE_H

#include <stdint.h>

#include "gpt2.h"

/* The choice of the next token. greedy: the highest logit (the lowest id among equals, as
 * torch.argmax). Else, in transformers' order: logits / temperature, the top_k highest kept
 * (0: all), then the fewest highest whose probabilities sum to at least top_p (1: all, and at
 * least one), then one drawn from the renormalised distribution. */
typedef struct gpt2_sampling {
    int greedy, top_k;
    float top_p, temperature;
    uint64_t seed;
} gpt2_sampling;

/* splitmix64: a deterministic generator (never zero-stuck; any seed). */
typedef struct gpt2_rng {
    uint64_t s;
} gpt2_rng;
void gpt2_rng_seed(gpt2_rng *r, uint64_t seed);
/* Uniform in [0, 1) with 53 bits. */
double gpt2_rng_uniform(gpt2_rng *r);

/* The next token from V logits; work: V entries of scratch, the caller's. */
typedef struct gpt2_scored {
    float v;
    int32_t id;
} gpt2_scored;
int32_t gpt2_pick(const float *logits, int V, const gpt2_sampling *s, gpt2_rng *r,
                  gpt2_scored *work);

/* Called with each new token of sequence `seq` (`index` its place among the new ones); a
 * non-zero return ends that sequence (a stop text seen). */
typedef int (*gpt2_token_fn)(void *u, int seq, int index, int32_t id);

typedef struct gpt2_generation {
    int max_new;             /* >= 1 */
    const int32_t *stop_ids; /* a sequence ends after one of these (eos) */
    int n_stop;
    gpt2_sampling sampling;
    gpt2_token_fn on_token; /* NULL: none */
    void *u;
} gpt2_generation;

typedef struct gpt2_generated {
    int32_t *ids;   /* [batch, max_new]: sequence b's new tokens at b * max_new (malloc'd) */
    int *n;         /* new tokens of each sequence (malloc'd) */
    int prompt_len; /* the left-padded batch's length */
    double prefill_ms, decode_ms;
    int steps; /* appends after the prefill */
} gpt2_generated;
void gpt2_generated_free(gpt2_generated *g);

/* Generates for B prompts (prompts[b] of lens[b] >= 1 tokens), left-padded to the longest
 * with the padding masked (transformers' batch generation). The prompt and the new tokens must
 * fit n_positions (an error naming both). *out is filled on success. */
int gpt2_generate(gpt2_model *m, const int32_t *const *prompts, const int *lens, int B,
                  const gpt2_generation *g, gpt2_generated *out, pgd_error **err);

#endif
