/* test_bert.c — BERT, DistilBERT and RoBERTa against transformers: the tiny random models of
 * tools/golden/make-bert-golden.py (folders tests/data/bert-*) on every device, a padded batch
 * (right and left padding, two token types) giving the last hidden state and the masked-LM logits
 * within 1e-4 relative, their input-dependent part (row r - row 0, row 0 a constant input) checked
 * on its own, a wrong head count shown to fall far outside the goldens, padded tokens shown to
 * change nothing they should not, and config.json's and the checkpoint's errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "bert.h"
#include "harness.h"

typedef struct golden {
    char dir[4096];
    int B, S, D, V, heads, mlm;
    int32_t *ids, *mask, *types;
    double *hidden, *logits;
    char *config; /* config.json's text */
    size_t config_n;
} golden;

static void read_ints(json_t *a, int B, int S, int32_t *out)
{
    ck_assert_int_eq((int)json_array_size(a), B);
    for (int b = 0; b < B; b++)
        for (int s = 0; s < S; s++)
            out[b * S + s] = (int32_t)json_integer_value(json_array_get(json_array_get(a, b), s));
}

static void golden_load(const char *name, golden *g)
{
    memset(g, 0, sizeof *g);
    snprintf(g->dir, sizeof g->dir, "%s/bert-%s", pgd_test_data_dir(), name);
    char path[4200];
    snprintf(path, sizeof path, "%s/golden.json", g->dir);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    ck_assert_msg(j != NULL, "%s: %s", path, je.text);
    json_t *ids = json_object_get(j, "ids");
    g->B = (int)json_array_size(ids);
    g->S = (int)json_array_size(json_array_get(ids, 0));
    g->D = (int)json_integer_value(json_object_get(j, "hidden"));
    g->V = (int)json_integer_value(json_object_get(j, "vocab"));
    g->heads = (int)json_integer_value(json_object_get(j, "heads"));
    g->mlm = json_is_true(json_object_get(j, "mlm"));
    ck_assert(g->B > 1 && g->S > 0 && g->D > 0);
    size_t n = (size_t)g->B * g->S;
    g->ids = malloc(n * sizeof *g->ids);
    g->mask = malloc(n * sizeof *g->mask);
    g->types = malloc(n * sizeof *g->types);
    read_ints(ids, g->B, g->S, g->ids);
    read_ints(json_object_get(j, "mask"), g->B, g->S, g->mask);
    read_ints(json_object_get(j, "types"), g->B, g->S, g->types);
    json_decref(j);
    char fn[256];
    snprintf(fn, sizeof fn, "bert-%s/golden-hidden.bin", name);
    g->hidden = pgd_test_read_doubles(fn, n * g->D);
    snprintf(fn, sizeof fn, "bert-%s/golden-logits.bin", name);
    g->logits = g->mlm ? pgd_test_read_doubles(fn, n * g->V) : NULL;
    snprintf(path, sizeof path, "%s/config.json", g->dir);
    unsigned char *text = NULL;
    ck_assert_msg(pgd_test_read_file(path, &text, &g->config_n) == 0, "%s", path);
    g->config = (char *)text;
}

static void golden_free(golden *g)
{
    free(g->ids);
    free(g->mask);
    free(g->types);
    free(g->hidden);
    free(g->logits);
    free(g->config);
}

/* Opens the case's weights and configuration (heads > 0: that head count instead). */
static void open_case(const golden *g, int heads, pgd_weights **w, model_source *src,
                      bert_config *cfg)
{
    pgd_error *err = NULL;
    char path[4200];
    snprintf(path, sizeof path, "%s/model.safetensors", g->dir);
    PGD_CHECK_OK(bert_config_parse(g->config, g->config_n, "config.json", cfg, &err), &err);
    if (heads)
        cfg->heads = heads;
    PGD_CHECK_OK(pgd_weights_open(path, w, &err), &err);
    model_weights_source(src, *w, "model.safetensors");
    PGD_CHECK_OK(bert_detect(src, cfg, &err), &err);
}

/* |got - want| <= 1e-4 |want| + 1e-4 max|want|, and the input-dependent part within 1e-3. */
static void compare(const float *got, const double *want, const golden *g, int width,
                    const char *what)
{
    size_t n = (size_t)g->B * g->S * width;
    double big = 0.0;
    for (size_t k = 0; k < n; k++)
        big = fmax(big, fabs(want[k]));
    ck_assert_msg(pgd_test_allclose(got, want, n, 1e-4, 1e-4 * big, what), "%s", what);
    size_t row = (size_t)g->S * width;
    ck_assert_msg(pgd_test_diffclose(got, want, (size_t)g->B, row, row, 1e-3, what), "%s", what);
}

static void run_case(const char *name, bert_arch arch)
{
    golden g;
    golden_load(name, &g);
    pgd_weights *w = NULL;
    model_source src;
    bert_config cfg;
    open_case(&g, 0, &w, &src, &cfg);
    ck_assert_int_eq(cfg.arch, arch);
    ck_assert_int_eq(cfg.hidden, g.D);
    ck_assert_int_eq(cfg.heads, g.heads);
    ck_assert_int_eq(cfg.vocab, g.V);
    ck_assert_int_eq(cfg.layers, 2);
    ck_assert_int_eq(cfg.mlm, g.mlm);
    size_t n = (size_t)g.B * g.S;
    float *hidden = malloc(n * g.D * sizeof *hidden);
    float *logits = g.mlm ? malloc(n * g.V * sizeof *logits) : NULL;
    float *probs = malloc((size_t)cfg.layers * n * g.S * cfg.heads * sizeof *probs);
    bert_batch in = {g.B, g.S, g.ids, g.mask, arch == BERT_ARCH_DISTIL ? NULL : g.types};
    bert_outputs out = {hidden, logits, probs};
    pgd_error *err = NULL;
    PGD_TEST_EACH_DEVICE(0, {
        (void)r;
        bert_model *m = NULL;
        PGD_CHECK_OK(bert_load(ctx, &src, &cfg, &m, &err), &err);
        PGD_CHECK_OK(bert_forward(m, &in, &out, &err), &err);
        char what[256];
        snprintf(what, sizeof what, "%s hidden on %s", name, dev);
        compare(hidden, g.hidden, &g, g.D, what);
        if (g.mlm) {
            snprintf(what, sizeof what, "%s logits on %s", name, dev);
            compare(logits, g.logits, &g, g.V, what);
        }
        /* Every probability row sums to 1 and puts nothing on a padded key. */
        for (size_t row = 0; row < (size_t)cfg.layers * g.B * cfg.heads * g.S; row++) {
            int b = (int)(row / ((size_t)cfg.heads * g.S) % g.B);
            double s = 0;
            for (int j = 0; j < g.S; j++) {
                float p = probs[row * g.S + j];
                ck_assert_msg(g.mask[b * g.S + j] || p == 0.0f, "%s: padded key %d has %g", what, j,
                              p);
                s += p;
            }
            ck_assert_msg(fabs(s - 1.0) < 1e-4, "%s: a probability row sums to %g", what, s);
        }
        printf("%s: passed\n", what);
        bert_free(m);
    });
    free(hidden);
    free(logits);
    free(probs);
    pgd_weights_destroy(w);
    golden_free(&g);
}

START_TEST(bert_mlm)
{
    run_case("tiny", BERT_ARCH_BERT);
}
END_TEST
START_TEST(bert_headless)
{
    run_case("model", BERT_ARCH_BERT);
}
END_TEST
START_TEST(distilbert)
{
    run_case("distil", BERT_ARCH_DISTIL);
}
END_TEST
START_TEST(roberta)
{
    run_case("roberta", BERT_ARCH_ROBERTA);
}
END_TEST

/* The same weights with another head count (config.json saying so) move the logits' input-
 * dependent part far outside what run_case allows: the goldens can see a head-count slip. */
START_TEST(wrong_heads_seen)
{
    golden g;
    golden_load("tiny", &g);
    size_t n = (size_t)g.B * g.S;
    float *logits = malloc(n * g.V * sizeof *logits);
    size_t nd;
    const pgd_device_info *d = pgd_test_devices(&nd);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    static const int wrong[] = {1, 2, 8};
    for (size_t k = 0; k < 3; k++) {
        pgd_weights *w = NULL;
        model_source src;
        bert_config cfg;
        open_case(&g, wrong[k], &w, &src, &cfg);
        bert_model *m = NULL;
        pgd_error *err = NULL;
        PGD_CHECK_OK(bert_load(ctx, &src, &cfg, &m, &err), &err);
        bert_batch in = {g.B, g.S, g.ids, g.mask, g.types};
        bert_outputs out = {NULL, logits, NULL};
        PGD_CHECK_OK(bert_forward(m, &in, &out, &err), &err);
        size_t row = (size_t)g.S * g.V;
        double e = pgd_test_diff_error(logits, g.logits, (size_t)g.B, row, row, NULL);
        printf("%d heads for %d: rows minus row 0 off by %.3g\n", wrong[k], g.heads, e);
        ck_assert_msg(e > 0.05, "%d heads for %d hide in the golden (%g)", wrong[k], g.heads, e);
        bert_free(m);
        pgd_weights_destroy(w);
    }
    pgd_ctx_destroy(ctx);
    free(logits);
    golden_free(&g);
}
END_TEST

/* Padded tokens are ignored: another id (and type) at every padded position changes no output
 * of a real token, bit for bit up to float noise; another id at one real token changes them. */
static void padding_case(const char *name)
{
    golden g;
    golden_load(name, &g);
    pgd_weights *w = NULL;
    model_source src;
    bert_config cfg;
    open_case(&g, 0, &w, &src, &cfg);
    size_t n = (size_t)g.B * g.S, hn = n * g.D;
    float *h0 = malloc(hn * sizeof *h0), *h1 = malloc(hn * sizeof *h1);
    int32_t *ids = malloc(n * sizeof *ids);
    memcpy(ids, g.ids, n * sizeof *ids);
    for (size_t k = 0; k < n; k++)
        if (!g.mask[k])
            ids[k] = (int32_t)(7 + k % 50);
    const int32_t *types = cfg.arch == BERT_ARCH_DISTIL ? NULL : g.types;
    pgd_error *err = NULL;
    PGD_TEST_EACH_DEVICE(0, {
        (void)r;
        bert_model *m = NULL;
        PGD_CHECK_OK(bert_load(ctx, &src, &cfg, &m, &err), &err);
        bert_batch a = {g.B, g.S, g.ids, g.mask, types}, b = a;
        b.ids = ids;
        bert_outputs oa = {h0, NULL, NULL}, ob = {h1, NULL, NULL};
        PGD_CHECK_OK(bert_forward(m, &a, &oa, &err), &err);
        PGD_CHECK_OK(bert_forward(m, &b, &ob, &err), &err);
        double moved = 0, big = 0;
        for (size_t k = 0; k < hn; k++) {
            big = fmax(big, fabs(h0[k]));
            if (g.mask[k / g.D])
                moved = fmax(moved, fabs(h0[k] - h1[k]));
        }
        ck_assert_msg(moved <= 1e-6 * big, "%s on %s: padded ids moved a real output by %g", name,
                      dev, moved);
        /* One real token of sequence 1 changed: the others of that sequence move. */
        ids[1 * g.S + 2] = g.ids[1 * g.S + 2] == 9 ? 10 : 9;
        PGD_CHECK_OK(bert_forward(m, &b, &ob, &err), &err);
        double other = 0;
        for (int t = 3; t < g.S; t++)
            for (int c = 0; c < g.D && g.mask[g.S + t]; c++)
                other = fmax(other, fabs(h0[(g.S + t) * g.D + c] - h1[(g.S + t) * g.D + c]));
        ck_assert_msg(other > 1e-3 * big, "%s on %s: a real token changed nothing (%g)", name, dev,
                      other);
        ids[1 * g.S + 2] = g.ids[1 * g.S + 2];
        bert_free(m);
    });
    free(h0);
    free(h1);
    free(ids);
    pgd_weights_destroy(w);
    golden_free(&g);
}

START_TEST(padding_ignored)
{
    padding_case("tiny");
    padding_case("distil");
}
END_TEST

/* config.json's errors, each naming the file and the key. */
static void config_error(const char *text, int code, const char *part)
{
    bert_config cfg;
    pgd_error *err = NULL;
    int rc = bert_config_parse(text, strlen(text), "config.json", &cfg, &err);
    pgd_test_expect_error(rc, err, code, part);
}

START_TEST(config_errors)
{
    config_error("{\"model_type\": \"bert\", \"hidden_size\": 48}", PGD_ERR_FORMAT,
                 "config.json: no 'num_attention_heads'");
    config_error("{\"model_type\": \"bert\", \"hidden_size\": 48, \"num_attention_heads\": 5}",
                 PGD_ERR_FORMAT, "5 does not divide the width 48");
    config_error("{\"model_type\": \"distilbert\", \"dim\": 32}", PGD_ERR_FORMAT, "'n_heads'");
    config_error("{\"num_attention_heads\": \"4\"}", PGD_ERR_FORMAT,
                 "'num_attention_heads' must be a whole number");
    config_error("{\"num_attention_heads\": 4, \"layer_norm_eps\": -1}", PGD_ERR_FORMAT,
                 "layer_norm_eps");
    /* 1e-83 rounds to 0 as a float (found by fuzz_bert_config) */
    config_error("{\"num_attention_heads\": 4, \"layer_norm_eps\": 1e-83}", PGD_ERR_FORMAT,
                 "smallest normal float");
    config_error("{\"num_attention_heads\": 4, \"hidden_act\": \"swish\"}", PGD_ERR_FORMAT,
                 "'hidden_act' must be");
    config_error("{\"model_type\": \"gpt2\"}", PGD_ERR_UNSUPPORTED, "model_type");
    config_error("{\"model_type\": \"roberta\", \"num_attention_heads\": 4}", PGD_ERR_FORMAT,
                 "pad_token_id");
    config_error("{\"num_attention_heads\": 4, \"position_embedding_type\": \"relative_key\"}",
                 PGD_ERR_UNSUPPORTED, "absolute");
    config_error("[1, 2]", PGD_ERR_FORMAT, "not a JSON object");
    config_error("{\"a\": 1, \"a\": 2}", PGD_ERR_FORMAT, "not valid JSON");
    config_error("{\"num_attention_heads\": 4, \"num_attention_heads\": 4}", PGD_ERR_FORMAT,
                 "not valid JSON");
}
END_TEST

/* config.json against the checkpoint: a width, vocabulary or layer count that the shapes
 * contradict, a head count that does not divide the width the shapes give. */
START_TEST(config_vs_weights)
{
    golden g;
    golden_load("tiny", &g);
    char path[4200];
    snprintf(path, sizeof path, "%s/model.safetensors", g.dir);
    pgd_weights *w = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_weights_open(path, &w, &err), &err);
    model_source src;
    model_weights_source(&src, w, "model.safetensors");
    static const char *const cases[][2] = {
        {"{\"num_attention_heads\": 4, \"hidden_size\": 64}", "config.json's hidden_size is 64"},
        {"{\"num_attention_heads\": 4, \"vocab_size\": 300}", "config.json's vocab_size is 300"},
        {"{\"num_attention_heads\": 4, \"num_hidden_layers\": 3}", "config.json says 3"},
        {"{\"num_attention_heads\": 5}", "5 heads do not divide the width 48"},
        {"{\"model_type\": \"distilbert\", \"n_heads\": 4}", "model_type is \"distilbert\""},
        {"{\"num_attention_heads\": 4, \"intermediate_size\": 95}", "intermediate_size is 95"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        bert_config cfg;
        PGD_CHECK_OK(bert_config_parse(cases[i][0], strlen(cases[i][0]), "config.json", &cfg, &err),
                     &err);
        int rc = bert_detect(&src, &cfg, &err);
        ck_assert_msg(rc != PGD_OK, "%s accepted", cases[i][0]);
        ck_assert_msg(strstr(pgd_error_get_message(err), cases[i][1]), "%s: %s", cases[i][0],
                      pgd_error_get_message(err));
        pgd_error_destroy(err);
        err = NULL;
    }
    pgd_weights_destroy(w);
    golden_free(&g);
}
END_TEST

static void expect_forward(bert_model *m, const bert_batch *in, bert_outputs *out, int code,
                           const char *part);

/* Inputs the forward refuses: an id outside the vocabulary, a type outside the types, a
 * sequence longer than the positions, a sequence that is all padding. */
START_TEST(bad_inputs)
{
    golden g;
    golden_load("tiny", &g);
    pgd_weights *w = NULL;
    model_source src;
    bert_config cfg;
    open_case(&g, 0, &w, &src, &cfg);
    size_t nd;
    const pgd_device_info *d = pgd_test_devices(&nd);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    bert_model *m = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(bert_load(ctx, &src, &cfg, &m, &err), &err);
    int32_t ids[40] = {2, 9, 3}, mask[40] = {0}, types[40] = {0, 0, 2};
    float hidden[40 * 48];
    bert_outputs out = {hidden, NULL, NULL};
    bert_batch in = {1, 3, ids, NULL, NULL};
    ids[1] = g.V;
    expect_forward(m, &in, &out, PGD_ERR_INVALID_ARGUMENT, "outside the vocabulary");
    ids[1] = 9;
    in.types = types;
    expect_forward(m, &in, &out, PGD_ERR_INVALID_ARGUMENT, "token type 2");
    in.types = NULL;
    in.mask = mask;
    expect_forward(m, &in, &out, PGD_ERR_INVALID_ARGUMENT, "no token under its attention mask");
    in.mask = NULL;
    in.S = 40; /* the tiny model has 32 positions */
    expect_forward(m, &in, &out, PGD_ERR_INVALID_ARGUMENT, "32 positions");
    bert_free(m);
    pgd_ctx_destroy(ctx);
    pgd_weights_destroy(w);
    golden_free(&g);
}
END_TEST

/* The call is made before err is read (an argument list has no order). */
static void expect_forward(bert_model *m, const bert_batch *in, bert_outputs *out, int code,
                           const char *part)
{
    pgd_error *err = NULL;
    int rc = bert_forward(m, in, out, &err);
    pgd_test_expect_error(rc, err, code, part);
}

/* The seeded random model loads through its own source and runs. */
START_TEST(random_model)
{
    bert_config cfg;
    bert_random_config(100, &cfg);
    model_source src;
    pgd_error *err = NULL;
    PGD_CHECK_OK(bert_random_source(&src, &cfg, 1, &err), &err);
    size_t nd;
    const pgd_device_info *d = pgd_test_devices(&nd);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    bert_model *m = NULL;
    PGD_CHECK_OK(bert_load(ctx, &src, &cfg, &m, &err), &err);
    int32_t ids[5] = {2, 10, 4, 11, 3};
    float logits[5 * 100];
    bert_batch in = {1, 5, ids, NULL, NULL};
    bert_outputs out = {NULL, logits, NULL};
    PGD_CHECK_OK(bert_forward(m, &in, &out, &err), &err);
    for (int k = 0; k < 500; k++)
        ck_assert(isfinite(logits[k]));
    bert_free(m);
    pgd_ctx_destroy(ctx);
    model_source_free(&src);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("bert");
    TCase *tc = tcase_create("bert");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, bert_mlm);
    tcase_add_test(tc, bert_headless);
    tcase_add_test(tc, distilbert);
    tcase_add_test(tc, roberta);
    tcase_add_test(tc, wrong_heads_seen);
    tcase_add_test(tc, padding_ignored);
    tcase_add_test(tc, config_errors);
    tcase_add_test(tc, config_vs_weights);
    tcase_add_test(tc, bad_inputs);
    tcase_add_test(tc, random_model);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
