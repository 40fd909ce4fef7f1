/* test_gpt2.c — GPT-2 against transformers: tiny random models made by
 * tools/golden/make-gpt2-golden.py (GPT2LMHeadModel naming with vocab.json + merges.txt, and the
 * bare GPT2Model naming with tokenizer.json), on every device: the prompts' ids equal the Python
 * tokenizer's, the logits of a left-padded batch within 1e-4 relative, the cached path (a
 * prefill then one token a step) equal to the full recomputation, a later token unable to change
 * an earlier logit, transformers' greedy generate (64 new tokens, batch left-padded) token for
 * token, a wrong head count far outside the tolerance, and config.json errors by name. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "gpt2.h"
#include "gpt2_generate.h"
#include "harness.h"
#include "tokenizer.h"

typedef struct golden {
    json_t *j;
    int B, T, V, eos, max_new;
    int32_t *ids;
    uint8_t *mask;
    double *logits;
} golden;

static void golden_read(const char *name, golden *g)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/golden.json", pgd_test_data_dir(), name);
    json_error_t je;
    g->j = json_load_file(path, 0, &je);
    ck_assert_msg(g->j != NULL, "%s: %s", path, je.text);
    json_t *ids = json_object_get(g->j, "ids"), *mask = json_object_get(g->j, "mask");
    g->B = (int)json_array_size(ids);
    g->T = (int)json_array_size(json_array_get(ids, 0));
    g->V = (int)json_integer_value(json_object_get(g->j, "vocab"));
    g->eos = (int)json_integer_value(json_object_get(g->j, "eos"));
    g->max_new = (int)json_integer_value(json_object_get(g->j, "max_new"));
    ck_assert(g->B == 3 && g->T > 2 && g->V > 256 && g->max_new >= 64);
    g->ids = malloc((size_t)g->B * g->T * sizeof *g->ids);
    g->mask = malloc((size_t)g->B * g->T);
    for (int b = 0; b < g->B; b++)
        for (int t = 0; t < g->T; t++) {
            g->ids[b * g->T + t] =
                (int32_t)json_integer_value(json_array_get(json_array_get(ids, b), t));
            g->mask[b * g->T + t] =
                (uint8_t)json_integer_value(json_array_get(json_array_get(mask, b), t));
        }
    snprintf(path, sizeof path, "%s/logits.bin", name);
    g->logits = pgd_test_read_doubles(path, (size_t)g->B * g->T * g->V);
}

static void golden_free(golden *g)
{
    json_decref(g->j);
    free(g->ids);
    free(g->mask);
    free(g->logits);
}

typedef struct loaded {
    gpt2_config cfg;
    model_source src;
    gpt2_model *m;
} loaded;

/* config.json (heads: 0 as it says, else overridden), detection and the load. */
static void load(pgd_ctx *ctx, const char *name, int heads, loaded *l)
{
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/%s", pgd_test_data_dir(), name);
    pgd_error *err = NULL;
    snprintf(path, sizeof path, "%s/config.json", dir);
    PGD_CHECK_OK(gpt2_config_read(path, &l->cfg, &err), &err);
    if (heads)
        l->cfg.heads = heads;
    static char wpath[4200];
    snprintf(wpath, sizeof wpath, "%s/model.safetensors", dir);
    PGD_CHECK_OK(model_source_open(&l->src, wpath, &err), &err);
    PGD_CHECK_OK(gpt2_detect(&l->src, path, &l->cfg, &err), &err);
    PGD_CHECK_OK(gpt2_load(ctx, &l->src, &l->cfg, &l->m, &err), &err);
}

static void unload(loaded *l)
{
    gpt2_free(l->m);
    model_source_free(&l->src);
}

/* The logits of the real positions only (padding rows are the model's, but meaningless). */
static int close_valid(const golden *g, const float *got, double tol, const char *what)
{
    double amax = 0;
    for (size_t i = 0; i < (size_t)g->B * g->T * g->V; i++)
        amax = fmax(amax, fabs(g->logits[i]));
    int ok = 1;
    for (int r = 0; r < g->B * g->T; r++)
        if (g->mask[r])
            ok &= pgd_test_allclose(got + (size_t)r * g->V, g->logits + (size_t)r * g->V,
                                    (size_t)g->V, tol, tol * amax, what);
    return ok;
}

static float *run_full(gpt2_model *m, const golden *g)
{
    pgd_error *err = NULL;
    gpt2_state *st = NULL;
    float *out = malloc((size_t)g->B * g->T * g->V * sizeof *out);
    PGD_CHECK_OK(gpt2_state_create(m, g->B, g->T, &st, &err), &err);
    PGD_CHECK_OK(gpt2_append(m, st, g->ids, g->mask, g->T, 1, out, &err), &err);
    ck_assert_int_eq(gpt2_state_length(st), g->T);
    gpt2_state_free(st);
    return out;
}

/* Two tokens of prefill (the padded start), then one token a step through the cache. */
static float *run_cached(gpt2_model *m, const golden *g)
{
    pgd_error *err = NULL;
    gpt2_state *st = NULL;
    int B = g->B, T = g->T, V = g->V, first = 2;
    float *out = malloc((size_t)B * T * V * sizeof *out), *part = malloc((size_t)B * T * V * 4);
    int32_t *ids = malloc((size_t)B * T * sizeof *ids);
    uint8_t *mask = malloc((size_t)B * T);
    PGD_CHECK_OK(gpt2_state_create(m, B, T, &st, &err), &err);
    for (int t0 = 0; t0 < T;) {
        int n = t0 == 0 ? first : 1;
        for (int b = 0; b < B; b++)
            for (int t = 0; t < n; t++) {
                ids[b * n + t] = g->ids[b * T + t0 + t];
                mask[b * n + t] = g->mask[b * T + t0 + t];
            }
        PGD_CHECK_OK(gpt2_append(m, st, ids, mask, n, 1, part, &err), &err);
        for (int b = 0; b < B; b++)
            memcpy(out + ((size_t)b * T + t0) * V, part + (size_t)b * n * V,
                   (size_t)n * V * sizeof *out);
        t0 += n;
    }
    gpt2_state_free(st);
    free(part);
    free(ids);
    free(mask);
    return out;
}

static void check_tokenizer(const char *name, const golden *g)
{
    char a[4096], b[4200];
    pgd_error *err = NULL;
    tokenizer *tk = NULL;
    snprintf(a, sizeof a, "%s/%s", pgd_test_data_dir(), name);
    snprintf(b, sizeof b, "%s/tokenizer.json", a);
    FILE *f = fopen(b, "r");
    if (f) {
        fclose(f);
        PGD_CHECK_OK(tokenizer_load_json(b, &tk, &err), &err);
    } else {
        char v[4200], mg[4200];
        snprintf(v, sizeof v, "%s/vocab.json", a);
        snprintf(mg, sizeof mg, "%s/merges.txt", a);
        PGD_CHECK_OK(tokenizer_load_bpe(v, mg, &tk, &err), &err);
    }
    json_t *prompts = json_object_get(g->j, "prompts"), *pids = json_object_get(g->j, "prompt_ids");
    for (size_t i = 0; i < json_array_size(prompts); i++) {
        const char *text = json_string_value(json_array_get(prompts, i));
        int32_t *ids = NULL;
        size_t n = 0;
        PGD_CHECK_OK(tokenizer_encode(tk, text, strlen(text), 0, &ids, &n, &err), &err);
        json_t *want = json_array_get(pids, i);
        ck_assert_uint_eq(n, json_array_size(want));
        for (size_t k = 0; k < n; k++)
            ck_assert_int_eq(ids[k], json_integer_value(json_array_get(want, k)));
        free(ids);
    }
    tokenizer_free(tk);
}

/* transformers' greedy generate: every sequence's new tokens equal, eos included. */
static void check_greedy(gpt2_model *m, const golden *g)
{
    json_t *pids = json_object_get(g->j, "prompt_ids"), *want = json_object_get(g->j, "greedy");
    int32_t *prompts[3];
    int lens[3];
    for (int b = 0; b < g->B; b++) {
        json_t *p = json_array_get(pids, b);
        lens[b] = (int)json_array_size(p);
        prompts[b] = malloc((size_t)lens[b] * sizeof **prompts);
        for (int t = 0; t < lens[b]; t++)
            prompts[b][t] = (int32_t)json_integer_value(json_array_get(p, t));
    }
    int32_t stop = g->eos;
    gpt2_generation gen = {
        .max_new = g->max_new, .stop_ids = &stop, .n_stop = 1, .sampling = {.greedy = 1}};
    gpt2_generated out;
    pgd_error *err = NULL;
    PGD_CHECK_OK(gpt2_generate(m, (const int32_t *const *)prompts, lens, g->B, &gen, &out, &err),
                 &err);
    for (int b = 0; b < g->B; b++) {
        json_t *w = json_array_get(want, b);
        ck_assert_int_eq(out.n[b], (int)json_array_size(w));
        for (int i = 0; i < out.n[b]; i++)
            ck_assert_msg(
                out.ids[(size_t)b * g->max_new + i] == json_integer_value(json_array_get(w, i)),
                "sequence %d token %d: %d, transformers %d", b, i,
                out.ids[(size_t)b * g->max_new + i], (int)json_integer_value(json_array_get(w, i)));
        free(prompts[b]);
    }
    ck_assert_int_eq(out.steps, g->max_new - 1); /* one append a new token after the first */
    gpt2_generated_free(&out);
}

/* Changing the last token of the longest prompt leaves every earlier logit as it was. */
static void check_causal(gpt2_model *m, const golden *g, const float *full)
{
    pgd_error *err = NULL;
    gpt2_state *st = NULL;
    int b = 0, T = g->T, V = g->V;
    for (int k = 0; k < g->B; k++)
        if (g->mask[k * T]) /* an unpadded row */
            b = k;
    int32_t *ids = malloc((size_t)T * sizeof *ids);
    memcpy(ids, g->ids + (size_t)b * T, (size_t)T * sizeof *ids);
    ids[T - 1] = (ids[T - 1] + 1) % V;
    float *out = malloc((size_t)T * V * sizeof *out);
    PGD_CHECK_OK(gpt2_state_create(m, 1, T, &st, &err), &err);
    PGD_CHECK_OK(gpt2_append(m, st, ids, NULL, T, 1, out, &err), &err);
    double moved = 0, last = 0;
    for (int i = 0; i < (T - 1) * V; i++)
        moved = fmax(moved, fabs(out[i] - full[(size_t)b * T * V + i]));
    for (int i = (T - 1) * V; i < T * V; i++)
        last = fmax(last, fabs(out[i] - full[(size_t)b * T * V + i]));
    ck_assert_msg(moved < 1e-4 && last > 1e-2,
                  "a later token moved earlier logits by %g (the "
                  "changed position by %g)",
                  moved, last);
    gpt2_state_free(st);
    free(ids);
    free(out);
}

static void golden_case(const char *name)
{
    golden g;
    golden_read(name, &g);
    check_tokenizer(name, &g);
    PGD_TEST_EACH_DEVICE(41, {
        (void)r;
        loaded l;
        load(ctx, name, 0, &l);
        ck_assert_int_eq(l.cfg.vocab, g.V);
        float *full = run_full(l.m, &g);
        ck_assert_msg(close_valid(&g, full, 1e-4, name), "%s on %s: logits", name, dev);
        float *cached = run_cached(l.m, &g);
        ck_assert_msg(close_valid(&g, cached, 1e-4, name), "%s on %s: cached", name, dev);
        double amax = 0, worst = 0;
        for (size_t i = 0; i < (size_t)g.B * g.T * g.V; i++)
            amax = fmax(amax, fabs(full[i]));
        for (size_t i = 0; i < (size_t)g.B * g.T * g.V; i++)
            if (g.mask[i / (size_t)g.V])
                worst = fmax(worst, fabs(cached[i] - full[i]) / amax);
        ck_assert_msg(worst < 1e-5,
                      "%s on %s: the cached path differs from the full "
                      "recomputation by %g of the largest logit",
                      name, dev, worst);
        check_causal(l.m, &g, full);
        check_greedy(l.m, &g);
        free(full);
        free(cached);
        unload(&l);
        fprintf(stderr, "%s on %s: logits, cache, causality and greedy generate agree\n", name,
                dev);
    });
    golden_free(&g);
}

START_TEST(golden_lm_head)
{
    golden_case("gpt2-tiny");
}
END_TEST

START_TEST(golden_bare)
{
    golden_case("gpt2-bare");
}
END_TEST

/* Twice the heads (config.json's n_head lying) moves the logits far outside the tolerance. */
START_TEST(wrong_heads)
{
    golden g;
    golden_read("gpt2-tiny", &g);
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    loaded l;
    load(ctx, "gpt2-tiny", 8, &l);
    float *full = run_full(l.m, &g);
    double amax = 0, worst = 0;
    for (size_t i = 0; i < (size_t)g.B * g.T * g.V; i++)
        amax = fmax(amax, fabs(g.logits[i]));
    for (int row = 0; row < g.B * g.T; row++)
        for (int v = 0; g.mask[row] && v < g.V; v++) {
            size_t i = (size_t)row * g.V + v;
            worst = fmax(worst, fabs(full[i] - g.logits[i]) / amax);
        }
    fprintf(stderr, "8 heads instead of 4: logits off by %.3g of the largest\n", worst);
    ck_assert_msg(worst > 1e-2,
                  "8 heads instead of 4 pass the golden (%g): it cannot see the "
                  "head count",
                  worst);
    free(full);
    unload(&l);
    pgd_ctx_destroy(ctx);
    golden_free(&g);
}
END_TEST

/* The file with an lm_head.weight added: wte times `scale` (1: the tied head written out, as
 * some checkpoints do; 2: an untied head, which must be the one used). */
typedef struct lm_wrap {
    model_source inner;
    float scale;
    size_t n;
} lm_wrap;

static int wrap_shape(void *u, const char *name, int *nd, int64_t s[8])
{
    lm_wrap *w = u;
    if (!strcmp(name, "lm_head.weight"))
        name = "transformer.wte.weight";
    return w->inner.shape(w->inner.u, name, nd, s);
}

static int wrap_read(void *u, const char *name, float *dst, pgd_error **err)
{
    lm_wrap *w = u;
    int head = !strcmp(name, "lm_head.weight");
    int rc = w->inner.read(w->inner.u, head ? "transformer.wte.weight" : name, dst, err);
    int nd;
    int64_t s[8];
    w->inner.shape(w->inner.u, "transformer.wte.weight", &nd, s);
    for (int64_t i = 0; !rc && head && i < s[0] * s[1]; i++)
        dst[i] *= w->scale;
    return rc;
}

static const char *wrap_meta(void *u, const char *key)
{
    lm_wrap *w = u;
    return w->inner.meta(w->inner.u, key);
}

static const char *wrap_name_at(void *u, size_t i)
{
    lm_wrap *w = u;
    return i < w->n ? w->inner.name_at(w->inner.u, i) : i == w->n ? "lm_head.weight" : NULL;
}

START_TEST(lm_head_weight)
{
    golden g;
    golden_read("gpt2-tiny", &g);
    size_t nd;
    const pgd_device_info *d = pgd_test_devices(&nd);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    for (int k = 1; k <= 2; k++) {
        loaded l;
        load(ctx, "gpt2-tiny", 0, &l);
        gpt2_free(l.m);
        lm_wrap w = {.inner = l.src, .scale = (float)k};
        while (l.src.name_at(l.src.u, w.n))
            w.n++;
        model_source src = {.u = &w,
                            .label = "wrapped",
                            .shape = wrap_shape,
                            .read = wrap_read,
                            .meta = wrap_meta,
                            .name_at = wrap_name_at};
        pgd_error *err = NULL;
        gpt2_config cfg = l.cfg;
        PGD_CHECK_OK(gpt2_detect(&src, "config.json", &cfg, &err), &err);
        ck_assert(cfg.lm_head);
        PGD_CHECK_OK(gpt2_load(ctx, &src, &cfg, &l.m, &err), &err);
        for (size_t i = 0; k == 2 && i < (size_t)g.B * g.T * g.V; i++)
            g.logits[i] *= 2; /* the head is linear without a bias */
        float *full = run_full(l.m, &g);
        ck_assert_msg(close_valid(&g, full, 1e-4, "lm_head"), "lm_head.weight x%d", k);
        for (size_t i = 0; k == 2 && i < (size_t)g.B * g.T * g.V; i++)
            g.logits[i] /= 2;
        free(full);
        unload(&l);
    }
    pgd_ctx_destroy(ctx);
    golden_free(&g);
}
END_TEST

static void expect_config_error(const char *text, const char *part)
{
    char *dir = pgd_test_tempdir("gpt2-config"), path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    ck_assert(f != NULL);
    fputs(text, f);
    fclose(f);
    gpt2_config cfg;
    pgd_error *err = NULL;
    int rc = gpt2_config_read(path, &cfg, &err);
    ck_assert_msg(rc != PGD_OK && err && strstr(pgd_error_get_message(err), "config.json") &&
                      strstr(pgd_error_get_message(err), part),
                  "%s: got %s", text, err ? pgd_error_get_message(err) : "no error");
    pgd_error_destroy(err);
    pgd_test_rmtree(dir);
    free(dir);
}

START_TEST(config_errors)
{
    expect_config_error("{\"n_embd\": 48}", "n_head");
    expect_config_error("{\"n_head\": 4}", "n_embd");
    expect_config_error("{\"n_embd\": 48, \"n_head\": 5}", "does not divide");
    expect_config_error("{\"n_embd\": 48, \"n_head\": 4.5}", "n_head");
    expect_config_error("{\"n_embd\": 48, \"n_head\": 4, \"activation_function\": \"relu\"}",
                        "relu");
    expect_config_error("{\"n_embd\": 48, \"n_head\": 4, \"add_cross_attention\": true}",
                        "add_cross_attention");
    expect_config_error("[1]", "object");
    /* n_embd other than the file's width: detection names both */
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    (void)d;
    gpt2_config cfg;
    pgd_error *err = NULL;
    char w[4200];
    snprintf(w, sizeof w, "%s/gpt2-tiny/config.json", pgd_test_data_dir());
    PGD_CHECK_OK(gpt2_config_read(w, &cfg, &err), &err);
    cfg.dim = 64;
    cfg.heads = 4;
    model_source src;
    snprintf(w, sizeof w, "%s/gpt2-tiny/model.safetensors", pgd_test_data_dir());
    PGD_CHECK_OK(model_source_open(&src, w, &err), &err);
    int rc = gpt2_detect(&src, "config.json", &cfg, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_SHAPE, "n_embd 64");
    model_source_free(&src);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gpt2");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, golden_lm_head);
    tcase_add_test(tc, golden_bare);
    tcase_add_test(tc, wrong_heads);
    tcase_add_test(tc, lm_head_weight);
    tcase_add_test(tc, config_errors);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
