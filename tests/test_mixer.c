/* test_mixer.c — MLP-Mixer against PyTorch: a tiny timm MlpMixer with random weights made by
 * tools/golden/make-mixer-golden.py (batch 2, a 5 x 5 token grid); configuration detection, logits
 * on every device, the classify dispatcher's detection, and errors for misshaped, missing, extra
 * and non-finite tensors and for an input of the wrong size. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "craft.h"
#include "harness.h"
#include "mixer.h"

enum { B = 2, IMG = 40, CLASSES = 7 };

START_TEST(golden_logits)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/mixer-tiny.safetensors", pgd_test_data_dir());
    pgd_weights *w = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_weights_open(path, &w, &err), &err);
    model_source src;
    model_weights_source(&src, w, path);
    ck_assert(mixer_is(&src));
    mixer_config cfg;
    PGD_CHECK_OK(mixer_detect(&src, &cfg, &err), &err);
    ck_assert_int_eq(cfg.dim, 24);
    ck_assert_int_eq(cfg.depth, 2);
    ck_assert_int_eq(cfg.patch, 8);
    ck_assert_int_eq(cfg.tokens, 25);
    ck_assert_int_eq(cfg.grid_h, 5);
    ck_assert_int_eq(cfg.tokens_hidden, 12);
    ck_assert_int_eq(cfg.channels_hidden, 96);
    ck_assert_int_eq(cfg.classes, CLASSES);
    float *x = pgd_test_read_floats("mixer-tiny-input.bin", (size_t)B * 3 * IMG * IMG);
    float *wf = pgd_test_read_floats("mixer-tiny-logits.bin", (size_t)B * CLASSES);
    double want[B * CLASSES];
    for (int k = 0; k < B * CLASSES; k++)
        want[k] = wf[k];
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t i = 0; i < n; i++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[i]);
        mixer_model *m = NULL;
        PGD_CHECK_OK(mixer_load(ctx, &src, &cfg, &m, &err), &err);
        float got[B * CLASSES];
        for (int k = 0; k < B * CLASSES; k++)
            got[k] = NAN;
        double t[4];
        PGD_CHECK_OK(mixer_forward(m, x, B, IMG, IMG, got, t, &err), &err);
        char what[160];
        snprintf(what, sizeof what, "mixer-tiny logits on %s", d[i].name);
        ck_assert_msg(pgd_test_allclose(got, want, B * CLASSES, 1e-4, 1e-5, what), "%s", what);
        /* The image-dependent part (image 1 - image 0) on its own: 30 % of the logits, where
         * the patches taken in column order move it by 0.44 (tools/golden/make-mixer-golden.py). */
        ck_assert_msg(pgd_test_diffclose(got, want, B, CLASSES, CLASSES, 1e-3, what), "%s", what);
        double worst = 0;
        for (int k = 0; k < B * CLASSES; k++)
            worst = fmax(worst, fabs(got[k] - want[k]) / fmax(fabs(want[k]), 1e-6));
        printf("%s: max relative error %.3g\n", what, worst);
        /* One image alone gives its row of the batch's logits. */
        float one[CLASSES];
        PGD_CHECK_OK(mixer_forward(m, x + 3 * IMG * IMG, 1, IMG, IMG, one, NULL, &err), &err);
        ck_assert_msg(pgd_test_allclose(one, want + CLASSES, CLASSES, 1e-4, 1e-5, what), "alone");
        /* The token MLPs fix the grid: another size is refused by name. */
        ck_assert_int_eq(mixer_forward(m, x, 1, 48, 48, got, NULL, &err), PGD_ERR_SHAPE);
        ck_assert_msg(strstr(pgd_error_get_message(err), "[B, 3, 40, 40]"), "%s",
                      pgd_error_get_message(err));
        pgd_error_destroy(err);
        err = NULL;
        mixer_free(m);
        pgd_ctx_destroy(ctx);
    }
    free(x);
    free(wf);
    pgd_weights_destroy(w);
}
END_TEST

static int mixer_variant_load(pgd_ctx *ctx, const model_source *src, void *user, void **model,
                              pgd_error **err)
{
    (void)user;
    mixer_config cfg;
    mixer_model *m = NULL;
    int rc = mixer_detect(src, &cfg, err);
    if (!rc)
        rc = mixer_load(ctx, src, &cfg, &m, err);
    *model = m;
    return rc;
}

static void mixer_variant_free(void *m)
{
    mixer_free(m);
}

/* A variant of mixer-tiny.safetensors made with e[0..n) must fail naming `named`. */
static void refuse_variant(pgd_ctx *ctx, const char *tag, const craft_edit *e, size_t n,
                           const char *named)
{
    const craft_loader l = {"mixer", mixer_variant_load, mixer_variant_free, NULL};
    craft_try_variant(ctx, &l, "mixer-tiny.safetensors", tag, e, n, named, NULL);
}

START_TEST(strict_loading)
{
    if (!pgd_test_primary())
        return;
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    /* The second block's token fc1 transposed: same element count, other layout. */
    craft_edit t1 = {CRAFT_RESHAPE, "blocks.1.mlp_tokens.fc1.weight", 2, {25, 12}, NULL, 0, 0};
    refuse_variant(ctx, "transposed", &t1, 1, "blocks.1.mlp_tokens.fc1.weight");
    craft_edit t2 = {CRAFT_RESHAPE, "blocks.0.norm2.weight", 2, {1, 24}, NULL, 0, 0};
    refuse_variant(ctx, "norm-2d", &t2, 1, "blocks.0.norm2.weight");
    craft_edit t3 = {CRAFT_DROP, "blocks.1.mlp_channels.fc2.bias", 0, {0}, NULL, 0, 0};
    refuse_variant(ctx, "dropped", &t3, 1, "blocks.1.mlp_channels.fc2.bias");
    /* A third block's stray tensor: the count says 3 blocks, block 2 is incomplete. */
    craft_edit t4 = {CRAFT_COPY, "blocks.1.norm1.weight", 0, {0}, "blocks.2.norm1.weight", 0, 0};
    refuse_variant(ctx, "partial-block", &t4, 1, "blocks.2.");
    craft_edit t5 = {CRAFT_COPY, "head.bias", 0, {0}, "head_dist.bias", 0, 0};
    refuse_variant(ctx, "unconsumed", &t5, 1, "head_dist.bias");
    craft_edit t6 = {CRAFT_POKE, "blocks.0.mlp_tokens.fc2.bias", 0, {0}, NULL, 3, NAN};
    refuse_variant(ctx, "nan", &t6, 1, "blocks.0.mlp_tokens.fc2.bias");
    craft_edit t7 = {CRAFT_RESHAPE, "stem.proj.weight", 4, {24, 3, 4, 16}, NULL, 0, 0};
    refuse_variant(ctx, "stem", &t7, 1, "stem.proj.weight");
    pgd_ctx_destroy(ctx);
}
END_TEST

/* Hostile sizes: a tensor with a zero dimension holds no bytes and may claim any other size.
 * Each size mixer_detect reads is checked first, and the error names the tensor: a 0-class head
 * used to fail as "clEnqueueCopyBuffer … CL_INVALID_VALUE", a huge patch to overflow the input
 * side (patch x grid) in classify. */
START_TEST(hostile_sizes)
{
    if (!pgd_test_primary())
        return;
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    const int64_t big = INT64_C(1) << 20;
    const struct {
        const char *tensor, *bias;
        int ndim;
        int64_t shape[4];
        const char *also;
    } cases[] = {
        {"head.weight", "head.bias", 2, {0, 24}, "zero dimension: 0 classes"},
        {"head.weight", NULL, 2, {INT64_C(1) << 40, 0}, "classes: it must be 1 .."},
        {"blocks.0.mlp_channels.fc1.weight",
         "blocks.0.mlp_channels.fc1.bias",
         2,
         {0, 24},
         "zero dimension: 0 channel MLP width"},
        {"blocks.0.mlp_tokens.fc1.weight",
         "blocks.0.mlp_tokens.fc1.bias",
         2,
         {0, 25},
         "zero dimension: 0 token MLP width"},
        {"blocks.0.mlp_tokens.fc1.weight", NULL, 2, {12, 0}, "zero dimension: 0 tokens"},
        {"stem.proj.weight", NULL, 4, {24, 3, 0, 0}, "zero dimension: 0 patch size"},
        {"stem.proj.weight", NULL, 4, {0, 3, big, big}, "zero dimension: 0 channels"},
    };
    const craft_loader l = {"mixer", mixer_variant_load, mixer_variant_free, NULL};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        craft_edit e[2] = {{CRAFT_RESIZE, cases[i].tensor, cases[i].ndim, {0}, NULL, 0, 0},
                           {CRAFT_RESIZE, cases[i].bias, 1, {cases[i].shape[0]}, NULL, 0, 0}};
        memcpy(e[0].shape, cases[i].shape, sizeof cases[i].shape);
        char tag[32];
        snprintf(tag, sizeof tag, "size%zu", i);
        craft_try_variant(ctx, &l, "mixer-tiny.safetensors", tag, e, cases[i].bias ? 2 : 1,
                          cases[i].tensor, cases[i].also);
    }
    pgd_ctx_destroy(ctx);
}
END_TEST

/* Seeded random weights of the named sizes load and run (the bench and the demo use them). */
START_TEST(random_weights)
{
    if (!pgd_test_primary())
        return;
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    mixer_config cfg;
    ck_assert_int_eq(mixer_named_config("nope", &cfg), -1);
    ck_assert_int_eq(mixer_named_config("tiny", &cfg), 0);
    model_source src;
    pgd_error *err = NULL;
    PGD_CHECK_OK(mixer_random_source(&src, &cfg, 1, &err), &err);
    mixer_model *m = NULL;
    PGD_CHECK_OK(mixer_load(ctx, &src, &cfg, &m, &err), &err);
    float x[3 * 32 * 32], logits[10];
    for (int i = 0; i < 3 * 32 * 32; i++)
        x[i] = (float)sin(0.01 * i);
    PGD_CHECK_OK(mixer_forward(m, x, 1, 32, 32, logits, NULL, &err), &err);
    for (int k = 0; k < 10; k++)
        ck_assert_msg(isfinite(logits[k]), "logit %d is %g", k, logits[k]);
    mixer_free(m);
    model_source_free(&src);
    pgd_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("mixer");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, golden_logits);
    tcase_add_test(tc, strict_loading);
    tcase_add_test(tc, random_weights);
    suite_add_tcase(s, tc);
    /* Hostile inputs alone: CK_RUN_CASE=hostile runs them without the goldens. */
    TCase *th = tcase_create("hostile");
    tcase_set_timeout(th, 600);
    tcase_add_test(th, hostile_sizes);
    suite_add_tcase(s, th);
    return pgd_test_run(s);
}
