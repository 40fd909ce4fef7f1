/* test_swin.c — Swin Transformer V1 against PyTorch: one tiny random-weight model in each naming
 * (torchvision, timm, timm's older layout, transformers 5.x and 4.x), made by
 * tools/make-swin-golden.py: configuration detection; logits on every device for a batch of two
 * 40 x 40 images (a 10 x 10 grid padded to windows of 3) and for one 48 x 44 image (each library's
 * own way of running another size); hard attention modes run; misshaped, missing and V2 tensors
 * refused by name. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "craft.h"
#include "harness.h"
#include "swin.h"

/* Runs golden case `name` (its JSON gives the input and the weights file) on every device. */
static void run_case(const char *name, swin_family want_family)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/swin-%s.json", pgd_test_data_dir(), name);
    json_error_t je;
    json_t *meta = json_load_file(path, 0, &je);
    ck_assert_msg(meta, "%s: %s", path, je.text);
    json_t *in = json_object_get(meta, "input");
    int B = (int)json_integer_value(json_array_get(in, 0));
    int H = (int)json_integer_value(json_array_get(in, 2));
    int W = (int)json_integer_value(json_array_get(in, 3));
    int classes = (int)json_integer_value(json_object_get(meta, "classes"));
    const char *wf = json_string_value(json_object_get(meta, "weights"));
    char wpath[4096];
    if (wf)
        snprintf(wpath, sizeof wpath, "%s/%s", pgd_test_data_dir(), wf);
    else
        snprintf(wpath, sizeof wpath, "%s/swin-%s.safetensors", pgd_test_data_dir(), name);
    json_decref(meta);

    pgd_weights *w = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_weights_open(wpath, &w, &err), &err);
    model_source src;
    model_weights_source(&src, w, wpath);
    ck_assert(swin_is(&src));
    swin_config cfg;
    PGD_CHECK_OK(swin_detect(&src, &cfg, &err), &err);
    ck_assert_int_eq(cfg.family, want_family);
    ck_assert_int_eq(cfg.stages, 2);
    ck_assert_int_eq(cfg.dim, 16);
    ck_assert_int_eq(cfg.patch, 4);
    ck_assert_int_eq(cfg.depth[0], 2);
    ck_assert_int_eq(cfg.depth[1], 2);
    ck_assert_int_eq(cfg.heads[0], 1);
    ck_assert_int_eq(cfg.heads[1], 2);
    ck_assert_int_eq(cfg.window[0], 3);
    ck_assert_int_eq(cfg.mlp_ratio_x100, 400);
    ck_assert_int_eq(cfg.classes, classes);

    char fn[256];
    snprintf(fn, sizeof fn, "swin-%s-input.bin", name);
    float *x = pgd_test_read_floats(fn, (size_t)B * 3 * H * W);
    snprintf(fn, sizeof fn, "swin-%s-logits.bin", name);
    float *wl = pgd_test_read_floats(fn, (size_t)B * classes);
    double *want = malloc((size_t)B * classes * sizeof *want);
    float *got = malloc((size_t)B * classes * sizeof *got);
    for (int k = 0; k < B * classes; k++)
        want[k] = wl[k];
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t i = 0; i < n; i++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[i]);
        swin_model *m = NULL;
        PGD_CHECK_OK(swin_load(ctx, &src, &cfg, &m, &err), &err);
        for (int k = 0; k < B * classes; k++)
            got[k] = NAN;
        double t[5];
        PGD_CHECK_OK(swin_forward(m, x, B, H, W, got, t, &err), &err);
        char what[160];
        snprintf(what, sizeof what, "swin-%s logits on %s", name, d[i].name);
        ck_assert_msg(pgd_test_allclose(got, want, (size_t)(B * classes), 1e-4, 1e-5, what),
                      "%s", what);
        /* Batches of two: the image-dependent part (image 1 - image 0) on its own, where a slip
         * the biases would hide shows (no window shift moves it by 0.38 of its size,
         * tools/make-swin-golden.py). */
        ck_assert_msg(B < 2 || pgd_test_diffclose(got, want, (size_t)B, (size_t)classes,
                                                  (size_t)classes, 1e-3, what),
                      "%s", what);
        double worst = 0;
        for (int k = 0; k < B * classes; k++)
            worst = fmax(worst, fabs(got[k] - want[k]) / fmax(fabs(want[k]), 1e-6));
        printf("%s [%d, 3, %d, %d]: max relative error %.3g, window attention %.0f%% of blocks\n",
               what, B, H, W, worst, 100 * t[4]);
        ck_assert(t[4] > 0 && t[4] < 1);
        /* Hard attention runs through the same windows and changes the logits. */
        swin_set_attention(m, PGD_ATTENTION_TOPK, 1, 0);
        PGD_CHECK_OK(swin_forward(m, x, B, H, W, got, NULL, &err), &err);
        double moved = 0;
        for (int k = 0; k < B * classes; k++) {
            ck_assert(isfinite(got[k]));
            moved = fmax(moved, fabs(got[k] - want[k]));
        }
        ck_assert_msg(moved > 1e-4, "top-1 attention left the logits unchanged");
        swin_free(m);
        pgd_ctx_destroy(ctx);
    }
    free(x);
    free(wl);
    free(want);
    free(got);
    pgd_weights_close(w);
}

START_TEST(torchvision) { run_case("torchvision", SWIN_TORCHVISION); }
END_TEST
START_TEST(torchvision_other_size) { run_case("torchvision-48x44", SWIN_TORCHVISION); }
END_TEST
START_TEST(timm) { run_case("timm", SWIN_TIMM); }
END_TEST
START_TEST(timm_other_size) { run_case("timm-48x44", SWIN_TIMM); }
END_TEST
START_TEST(timm_old_layout) { run_case("timm-old", SWIN_TIMM_OLD); }
END_TEST
START_TEST(hf5) { run_case("hf5", SWIN_HF5); }
END_TEST
START_TEST(hf5_other_size) { run_case("hf5-48x44", SWIN_HF5); }
END_TEST
START_TEST(hf4) { run_case("hf4", SWIN_HF4); }
END_TEST

static int swin_variant_load(pgd_ctx *ctx, const model_source *src, void *user, void **model,
                             pgd_error **err)
{
    (void)user;
    swin_config cfg;
    swin_model *m = NULL;
    int rc = swin_detect(src, &cfg, err);
    if (!rc)
        rc = swin_load(ctx, src, &cfg, &m, err);
    *model = m;
    return rc;
}

static void swin_variant_free(void *m) { swin_free(m); }

/* A variant of tests/data/<base> made with e[0..n) must fail naming `named`. */
static void refuse(pgd_ctx *ctx, const char *base, const char *tag, const craft_edit *e,
                   size_t n, const char *named)
{
    const craft_loader l = {"swin", swin_variant_load, swin_variant_free, NULL};
    craft_try_variant(ctx, &l, base, tag, e, n, named, NULL);
}

START_TEST(strict_loading)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    craft_edit e1 = {CRAFT_RESHAPE, "features.3.1.attn.proj.weight", 2, {32, 32}, NULL, 0, 0};
    e1.shape[0] = 16, e1.shape[1] = 64; /* [32, 32] as [16, 64] */
    refuse(ctx, "swin-torchvision.safetensors", "proj", &e1, 1, "features.3.1.attn.proj.weight");
    craft_edit e2 = {CRAFT_DROP, "features.2.reduction.weight", 0, {0}, NULL, 0, 0};
    refuse(ctx, "swin-torchvision.safetensors", "merge", &e2, 1, "features.2.reduction.weight");
    craft_edit e3 = {CRAFT_RESHAPE, "layers.1.blocks.0.attn.relative_position_bias_table", 2,
                     {2, 25}, NULL, 0, 0};
    refuse(ctx, "swin-timm.safetensors", "table", &e3, 1,
           "layers.1.blocks.0.attn.relative_position_bias_table");
    craft_edit e4 = {CRAFT_COPY, "norm.weight", 0, {0}, NULL, 0, 0};
    e4.to = "layers.0.blocks.0.attn.logit_scale";
    refuse(ctx, "swin-timm.safetensors", "v2", &e4, 1, "Swin V2");
    craft_edit e5 = {CRAFT_DROP,
                     "swin.encoder.layers.1.blocks.1.attention.self.value.bias", 0, {0}, NULL, 0,
                     0};
    refuse(ctx, "swin-hf4.safetensors", "hf-value", &e5, 1, "attention.self.value.bias");
    craft_edit e6 = {CRAFT_COPY, "head.bias", 0, {0}, "head.extra", 0, 0};
    refuse(ctx, "swin-torchvision.safetensors", "unconsumed", &e6, 1, "head.extra");
    pgd_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("swin");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, torchvision);
    tcase_add_test(tc, torchvision_other_size);
    tcase_add_test(tc, timm);
    tcase_add_test(tc, timm_other_size);
    tcase_add_test(tc, timm_old_layout);
    tcase_add_test(tc, hf5);
    tcase_add_test(tc, hf5_other_size);
    tcase_add_test(tc, hf4);
    tcase_add_test(tc, strict_loading);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
