/* gpt2_generate.c — the generation loop over GPT-2's KV cache and the choice of each token. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2_generate.h"

void gpt2_rng_seed(gpt2_rng *r, uint64_t seed)
{
    r->s = seed;
}

double gpt2_rng_uniform(gpt2_rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

/* Descending by value, the lower id first among equals (a total order: the same on every
 * machine whatever qsort does). */
static int by_value(const void *pa, const void *pb)
{
    const gpt2_scored *a = pa, *b = pb;
    if (a->v != b->v)
        return a->v > b->v ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

static int32_t argmax(const float *l, int V)
{
    int32_t best = 0;
    for (int32_t i = 1; i < V; i++)
        if (l[i] > l[best] || (isnan(l[i]) && !isnan(l[best])))
            best = i;
    return best;
}

int32_t gpt2_pick(const float *logits, int V, const gpt2_sampling *s, gpt2_rng *r,
                  gpt2_scored *work)
{
    if (s->greedy)
        return argmax(logits, V);
    float t = s->temperature > 0 ? s->temperature : 1.0f;
    for (int i = 0; i < V; i++)
        work[i] = (gpt2_scored){logits[i] / t, i};
    qsort(work, (size_t)V, sizeof *work, by_value);
    int keep = s->top_k > 0 && s->top_k < V ? s->top_k : V;
    double top = work[0].v, sum = 0;
    for (int i = 0; i < keep; i++)
        sum += exp((double)work[i].v - top);
    if (s->top_p < 1.0f) { /* the fewest highest whose probability reaches top_p */
        double cum = 0;
        int n = 0;
        while (n < keep) {
            cum += exp((double)work[n].v - top) / sum;
            n++;
            if (cum >= s->top_p)
                break;
        }
        keep = n;
        sum = 0;
        for (int i = 0; i < keep; i++)
            sum += exp((double)work[i].v - top);
    }
    double u = gpt2_rng_uniform(r) * sum, acc = 0;
    for (int i = 0; i < keep; i++) {
        acc += exp((double)work[i].v - top);
        if (u < acc)
            return work[i].id;
    }
    return work[keep - 1].id;
}

void gpt2_generated_free(gpt2_generated *g)
{
    free(g->ids);
    free(g->n);
    memset(g, 0, sizeof *g);
}

/* The left-padded batch [B, T] and its mask. */
static void pad_batch(const int32_t *const *prompts, const int *lens, int B, int T, int32_t pad,
                      int32_t *ids, uint8_t *mask)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int at = t - (T - lens[b]);
            ids[b * T + t] = at >= 0 ? prompts[b][at] : pad;
            mask[b * T + t] = at >= 0;
        }
}

typedef struct gen_run {
    gpt2_model *m;
    const gpt2_generation *g;
    gpt2_generated *out;
    int B, V;
    float *logits;
    gpt2_scored *work;
    int32_t *next;
    uint8_t *done;
    gpt2_rng rng;
} gen_run;

/* Chooses every live sequence's token from run->logits; 1 when all have ended. */
static int choose(gen_run *run, int index)
{
    const gpt2_generation *g = run->g;
    int live = 0;
    for (int b = 0; b < run->B; b++) {
        if (run->done[b])
            continue;
        int32_t id =
            gpt2_pick(run->logits + (size_t)b * run->V, run->V, &g->sampling, &run->rng, run->work);
        run->next[b] = id;
        run->out->ids[(size_t)b * g->max_new + index] = id;
        run->out->n[b] = index + 1;
        int stop = g->on_token && g->on_token(g->u, b, index, id);
        for (int k = 0; k < g->n_stop; k++)
            stop |= id == g->stop_ids[k];
        run->done[b] = stop || index + 1 == g->max_new;
        live += !run->done[b];
    }
    return live == 0;
}

static int gen_loop(gen_run *run, const int32_t *ids, const uint8_t *mask, int T, pgd_error **err)
{
    gpt2_state *st = NULL;
    const gpt2_generation *g = run->g;
    int rc = gpt2_state_create(run->m, run->B, T + g->max_new, &st, err);
    double t0 = model_now_ms();
    if (!rc)
        rc = gpt2_append(run->m, st, ids, mask, T, 0, run->logits, err);
    double t1 = model_now_ms();
    run->out->prefill_ms = t1 - t0;
    for (int i = 0; !rc && !choose(run, i); i++) {
        for (int b = 0; b < run->B; b++) /* an ended sequence repeats its last token, unread */
            run->next[b] = run->out->ids[(size_t)b * g->max_new + run->out->n[b] - 1];
        rc = gpt2_append(run->m, st, run->next, NULL, 1, 0, run->logits, err);
        run->out->steps++;
    }
    run->out->decode_ms = model_now_ms() - t1;
    gpt2_state_free(st);
    return rc;
}

int gpt2_generate(gpt2_model *m, const int32_t *const *prompts, const int *lens, int B,
                  const gpt2_generation *g, gpt2_generated *out, pgd_error **err)
{
    memset(out, 0, sizeof *out);
    const gpt2_config *c = gpt2_get_config(m);
    int T = 0;
    for (int b = 0; b < B; b++)
        T = lens[b] > T ? lens[b] : T;
    if (B < 1 || g->max_new < 1 || lens[0] < 1)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                             "generate: %d prompts, %d new tokens: at least one of each", B,
                             g->max_new);
    for (int b = 0; b < B; b++)
        if (lens[b] < 1)
            return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT, "generate: prompt %d is empty",
                                 b + 1);
    if ((int64_t)T + g->max_new > c->positions)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                             "generate: a prompt of %d tokens and %d new ones exceed the model's "
                             "%d positions (n_positions)",
                             T, g->max_new, c->positions);
    gen_run run = {.m = m, .g = g, .out = out, .B = B, .V = c->vocab};
    gpt2_rng_seed(&run.rng, g->sampling.seed);
    int32_t *ids = malloc((size_t)B * T * sizeof *ids);
    uint8_t *mask = malloc((size_t)B * T);
    run.logits = malloc((size_t)B * run.V * sizeof *run.logits);
    run.work = malloc((size_t)run.V * sizeof *run.work);
    run.next = calloc((size_t)B, sizeof *run.next);
    run.done = calloc((size_t)B, 1);
    out->ids = calloc((size_t)B * g->max_new, sizeof *out->ids);
    out->n = calloc((size_t)B, sizeof *out->n);
    out->prompt_len = T;
    int rc = PGD_OK;
    if (!ids || !mask || !run.logits || !run.work || !run.next || !run.done || !out->ids || !out->n)
        rc = pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "generate: %d sequences", B);
    if (!rc) {
        pad_batch(prompts, lens, B, T, c->eos >= 0 && c->eos < c->vocab ? c->eos : 0, ids, mask);
        rc = gen_loop(&run, ids, mask, T, err);
    }
    free(ids);
    free(mask);
    free(run.logits);
    free(run.work);
    free(run.next);
    free(run.done);
    if (rc)
        gpt2_generated_free(out);
    return rc;
}
