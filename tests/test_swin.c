/* test_swin.c — Swin Transformer V1 against PyTorch: one tiny random-weight model in each naming
 * (torchvision, timm, timm's older layout, transformers 5.x and 4.x), made by
 * tools/golden/make-swin-golden.py: configuration detection; logits on every device for a batch of
 * two 40 x 40 images (a 10 x 10 grid padded to windows of 3) and for one 48 x 44 image (each
 * library's own way of running another size); hard attention modes run; misshaped, missing and V2
 * tensors refused by name. */
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
        ck_assert_msg(pgd_test_allclose(got, want, (size_t)(B * classes), 1e-4, 1e-5, what), "%s",
                      what);
        /* Batches of two: the image-dependent part (image 1 - image 0) on its own, where a slip
         * the biases would hide shows (no window shift moves it by 0.38 of its size,
         * tools/golden/make-swin-golden.py). */
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
    pgd_weights_destroy(w);
}

START_TEST(torchvision)
{
    run_case("torchvision", SWIN_TORCHVISION);
}
END_TEST
START_TEST(torchvision_other_size)
{
    run_case("torchvision-48x44", SWIN_TORCHVISION);
}
END_TEST
START_TEST(timm)
{
    run_case("timm", SWIN_TIMM);
}
END_TEST
START_TEST(timm_other_size)
{
    run_case("timm-48x44", SWIN_TIMM);
}
END_TEST
START_TEST(timm_old_layout)
{
    run_case("timm-old", SWIN_TIMM_OLD);
}
END_TEST
START_TEST(hf5)
{
    run_case("hf5", SWIN_HF5);
}
END_TEST
START_TEST(hf5_other_size)
{
    run_case("hf5-48x44", SWIN_HF5);
}
END_TEST
START_TEST(hf4)
{
    run_case("hf4", SWIN_HF4);
}
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

static void swin_variant_free(void *m)
{
    swin_free(m);
}

/* A variant of tests/data/<base> made with e[0..n) must fail naming `named`. */
static void refuse(pgd_ctx *ctx, const char *base, const char *tag, const craft_edit *e, size_t n,
                   const char *named)
{
    const craft_loader l = {"swin", swin_variant_load, swin_variant_free, NULL};
    craft_try_variant(ctx, &l, base, tag, e, n, named, NULL);
}

START_TEST(strict_loading)
{
    if (!pgd_test_primary())
        return;
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    craft_edit e1 = {CRAFT_RESHAPE, "features.3.1.attn.proj.weight", 2, {32, 32}, NULL, 0, 0};
    e1.shape[0] = 16, e1.shape[1] = 64; /* [32, 32] as [16, 64] */
    refuse(ctx, "swin-torchvision.safetensors", "proj", &e1, 1, "features.3.1.attn.proj.weight");
    craft_edit e2 = {CRAFT_DROP, "features.2.reduction.weight", 0, {0}, NULL, 0, 0};
    refuse(ctx, "swin-torchvision.safetensors", "merge", &e2, 1, "features.2.reduction.weight");
    craft_edit e3 = {CRAFT_RESHAPE,
                     "layers.1.blocks.0.attn.relative_position_bias_table",
                     2,
                     {2, 25},
                     NULL,
                     0,
                     0};
    refuse(ctx, "swin-timm.safetensors", "table", &e3, 1,
           "layers.1.blocks.0.attn.relative_position_bias_table");
    craft_edit e4 = {CRAFT_COPY, "norm.weight", 0, {0}, NULL, 0, 0};
    e4.to = "layers.0.blocks.0.attn.logit_scale";
    refuse(ctx, "swin-timm.safetensors", "v2", &e4, 1, "Swin V2");
    craft_edit e5 = {
        CRAFT_DROP, "swin.encoder.layers.1.blocks.1.attention.self.value.bias", 0, {0}, NULL, 0, 0};
    refuse(ctx, "swin-hf4.safetensors", "hf-value", &e5, 1, "attention.self.value.bias");
    craft_edit e6 = {CRAFT_COPY, "head.bias", 0, {0}, "head.extra", 0, 0};
    refuse(ctx, "swin-torchvision.safetensors", "unconsumed", &e6, 1, "head.extra");
    pgd_ctx_destroy(ctx);
}
END_TEST

/* Hostile sizes: a tensor with a zero dimension holds no bytes and may claim any other size, so
 * each size swin_detect reads is checked before any arithmetic on it (a patch of 0 divided by
 * zero, a 0-class head failed as an empty device copy, huge rows overflowed the window). */
START_TEST(hostile_sizes)
{
    if (!pgd_test_primary())
        return;
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    const int64_t huge = INT64_C(1) << 62;
    static const char *const tv = "swin-torchvision.safetensors", *tm = "swin-timm.safetensors";
    const struct {
        const char *base, *tensor;
        int ndim;
        int64_t shape[4];
        const char *also;
    } cases[] = {
        {tv, "features.0.0.weight", 4, {16, 3, 0, 0}, "zero dimension: 0 patch size"},
        {tv, "features.0.0.weight", 4, {0, 3, 4, 4}, "zero dimension: 0 channels"},
        {tv, "features.0.0.weight", 4, {INT64_C(1) << 40, 3, 0, 0}, "channels: it must be"},
        {tv, "features.1.0.attn.relative_position_bias_table", 2, {0, 1}, "0 rows"},
        {tv, "features.1.0.attn.relative_position_bias_table", 2, {huge, 0}, "rows: it must be"},
        {tv, "features.1.0.attn.relative_position_bias_table", 2, {25, 0}, "0 heads"},
        {tv, "features.1.0.mlp.0.weight", 2, {0, 16}, "zero dimension: 0 MLP hidden width"},
        {tv, "features.1.0.mlp.0.weight", 2, {huge, 0}, "columns, not the width 16"},
        {tv, "head.weight", 2, {0, 32}, "zero dimension: 0 classes"},
        {tv, "head.weight", 2, {huge, 0}, "classes: it must be"},
        {tm, "head.fc.weight", 2, {0, 32}, "zero dimension: 0 classes"},
    };
    const craft_loader l = {"swin", swin_variant_load, swin_variant_free, NULL};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        craft_edit e = {CRAFT_RESIZE, cases[i].tensor, cases[i].ndim, {0}, NULL, 0, 0};
        memcpy(e.shape, cases[i].shape, sizeof cases[i].shape);
        char tag[32];
        snprintf(tag, sizeof tag, "size%zu", i);
        craft_try_variant(ctx, &l, cases[i].base, tag, &e, 1, cases[i].tensor, cases[i].also);
    }
    /* Tables implying a window of 200 (1.3 MB): a 6 GiB mask per block, refused at once. */
    craft_edit w200[2];
    for (int b = 0; b < 2; b++) {
        static const char *const t[2] = {"layers.0.blocks.0.attn.relative_position_bias_table",
                                         "layers.0.blocks.1.attn.relative_position_bias_table"};
        w200[b] = (craft_edit){CRAFT_RESIZE, t[b], 2, {399 * 399, 1}, NULL, 0, 0};
    }
    craft_try_variant(ctx, &l, tm, "window200", w200, 2,
                      "layers.0.blocks.0.attn.relative_position_bias_table", "window of 200");
    pgd_ctx_destroy(ctx);
}
END_TEST

/* A window within the limit whose masks for a large input cannot be made: refused by the plan
 * before any mask is built (it used to build the first blocks and then fail, or fill the host). */
START_TEST(mask_limits)
{
    char in[4096], out[4096];
    snprintf(in, sizeof in, "%s/swin-timm.safetensors", pgd_test_data_dir());
    const char *tmp = getenv("PAGODA_TEST_TMP");
    snprintf(out, sizeof out, "%s/swin-window64.safetensors", tmp && *tmp ? tmp : ".");
    craft_edit e[2] = {{CRAFT_RESIZE,
                        "layers.0.blocks.0.attn.relative_position_bias_table",
                        2,
                        {127 * 127, 16},
                        NULL,
                        0,
                        0},
                       {CRAFT_RESIZE,
                        "layers.0.blocks.1.attn.relative_position_bias_table",
                        2,
                        {127 * 127, 16},
                        NULL,
                        0,
                        0}};
    craft_safetensors(in, out, e, 2);
    pgd_weights *w = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_weights_open(out, &w, &err), &err);
    model_source src;
    model_weights_source(&src, w, out);
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t i = 0; i < n; i++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[i]);
        void *m = NULL;
        PGD_CHECK_OK(swin_variant_load(ctx, &src, NULL, &m, &err), &err);
        /* Eight 800 x 800 images: a 200 x 200 grid, 16 windows of 64 x 64; a shifted block's
         * mask is 8 x 16 x 16 heads x 4096² floats, 128 GiB. */
        int B = 8, H = 800, W = 800;
        float *x = calloc((size_t)B * 3 * H * W, sizeof *x), logits[8 * 7];
        pgd_memory_stats before, after;
        pgd_ctx_get_memory_stats(ctx, &before);
        int rc = swin_forward(m, x, B, H, W, logits, NULL, &err);
        ck_assert_int_eq(rc, PGD_ERR_TOO_LARGE);
        const char *msg = pgd_error_get_message(err);
        ck_assert_msg(strstr(msg, "window 64") && strstr(msg, "block 1"), "%s", msg);
        printf("%s: %s\n", d[i].name, msg);
        pgd_ctx_get_memory_stats(ctx, &after);
        ck_assert_msg(after.peak_bytes == before.peak_bytes, "memory was allocated first");
        pgd_error_destroy(err);
        err = NULL;
        free(x);
        swin_free(m);
        pgd_ctx_destroy(ctx);
    }
    pgd_weights_destroy(w);
    remove(out);
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
    /* Hostile inputs alone: CK_RUN_CASE=hostile runs them without the goldens. */
    TCase *th = tcase_create("hostile");
    tcase_set_timeout(th, 600);
    tcase_add_test(th, hostile_sizes);
    tcase_add_test(th, mask_limits);
    suite_add_tcase(s, th);
    return pgd_test_run(s);
}
