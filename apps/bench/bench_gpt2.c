/* bench_gpt2.c — the `gpt2` bench item: text generation with GPT-2 small's sizes (seeded random
 * weights) through the KV cache, as pagoda generate runs it: a prompt of P tokens, then N new
 * tokens one at a time, batch 1, greedy, every token generated (no end-of-text stop). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_items.h"
#include "gpt2.h"
#include "gpt2_generate.h"

/* "gpt2[:P,N]": P prompt tokens (default 128), N new ones (default 128). */
static int parse_gpt2(const char *spec, long v[2])
{
    v[0] = v[1] = 128;
    if (strncmp(spec, "gpt2", 4))
        return -1;
    if (!spec[4])
        return 0;
    if (spec[4] != ':' || parse_nd(spec, v))
        return -1;
    return v[0] >= 1 && v[1] >= 1 && v[0] + v[1] <= 1024 ? 0 : -1;
}

static int validate_gpt2(const char *spec)
{
    long v[2];
    return parse_gpt2(spec, v);
}

typedef struct gpt2_bench {
    gpt2_model *m;
    int32_t *prompt;
    int len, new_tokens;
    double prefill_ms, decode_ms;
} gpt2_bench;

static int gpt2_once(void *p, pgd_error **err)
{
    gpt2_bench *s = p;
    gpt2_generation g = {.max_new = s->new_tokens, .sampling = {.greedy = 1}};
    gpt2_generated out;
    const int32_t *prompts[1] = {s->prompt};
    int rc = gpt2_generate(s->m, prompts, &s->len, 1, &g, &out, err);
    if (!rc) {
        s->prefill_ms = out.prefill_ms;
        s->decode_ms = out.decode_ms;
        gpt2_generated_free(&out);
    }
    return rc;
}

static void record(const gpt2_bench *s, const gpt2_config *c, bench_result *b)
{
    snprintf(b->name, sizeof b->name, "gpt2:%d,%d", s->len, s->new_tokens);
    double per_token = s->new_tokens > 1 ? s->decode_ms / (s->new_tokens - 1) : 0;
    snprintf(b->params, sizeof b->params,
             "{\"prompt\":%d,\"new\":%d,\"batch\":1,\"dim\":%d,\"layers\":%d,\"prefill_ms\":%.1f,"
             "\"ms_per_token\":%.2f}",
             s->len, s->new_tokens, c->dim, c->layers, s->prefill_ms, per_token);
    /* new tokens a second over the whole generate call (prefill included), as a user sees it */
    snprintf(b->extra_key, sizeof b->extra_key, "tokens_per_s");
    b->extra = b->median_ms > 0 ? s->new_tokens * 1000.0 / b->median_ms : 0;
    /* 2 FLOPs a weight a token (the matrices and the head), the attention's 4·ctx·dim a layer */
    double weights = (double)c->layers * 12 * c->dim * c->dim + (double)c->vocab * c->dim;
    double tokens = s->len + s->new_tokens, ctx = tokens / 2;
    b->flops = 2 * weights * tokens + 4.0 * c->layers * c->dim * ctx * tokens;
}

static int run_gpt2(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,
                    int *nres, int cap, pgd_error **err)
{
    (void)cap;
    long v[2];
    parse_gpt2(spec, v);
    gpt2_config cfg;
    gpt2_named_config("small", &cfg);
    model_source src;
    gpt2_bench s = {.len = (int)v[0], .new_tokens = (int)v[1]};
    int rc = gpt2_random_source(&src, &cfg, 1, err);
    if (!rc)
        rc = gpt2_detect(&src, "GPT-2 small's sizes", &cfg, err);
    if (!rc)
        rc = gpt2_load(ctx, &src, &cfg, &s.m, err);
    model_source_free(&src);
    if (!rc && !(s.prompt = item_alloc(s.len, err)))
        rc = PGD_ERR_OUT_OF_HOST_MEMORY;
    for (int i = 0; !rc && i < s.len; i++)
        s.prompt[i] = (int32_t)((i * 7919 + 13) % cfg.vocab); /* any fixed tokens */
    if (!rc)
        rc = time_runs(ctx, (timed_fn){gpt2_once, &s}, o, &res[0], err);
    if (!rc) {
        record(&s, &cfg, &res[0]);
        *nres = 1;
    }
    gpt2_free(s.m);
    free(s.prompt);
    return rc;
}

const bench_item bench_item_gpt2 = {
    "gpt2", "gpt2[:P,N]",
    "GPT-2 small's sizes (seeded random weights): a prompt of P tokens (default 128), then N new "
    "ones (default 128) through the KV cache, batch 1, greedy; new tokens/s as tokens_per_s, "
    "prefill ms and decode ms a token in the parameters",
    validate_gpt2, run_gpt2};
