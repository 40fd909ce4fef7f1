/* test_vit.c — the ViT against PyTorch: tiny random-weight models in each naming (timm, timm
 * DeiT distilled, Hugging Face, torchvision), made by tools/golden/make-vit-golden.py;
 * configuration detection, logits on every device (at the trained image size and at another one,
 * where each family resamples its position grid its own way; the image-dependent part, image 1 -
 * image 0, checked on its own), a wrong head count shown to fall far outside the goldens, and
 * errors for missing or misshaped tensors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "craft.h"
#include "harness.h"
#include "vit.h"

/* Opens the weights at path and detects their ViT configuration; both must succeed. */
static void open_detect(const char *path, pgd_weights **w, model_source *src, vit_config *cfg)
{
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_weights_open(path, w, &err), &err);
    model_weights_source(src, *w, path);
    PGD_CHECK_OK(vit_detect(src, 0, cfg, &err), &err);
}

/* run_case with the linear layers' weights stored as halves (PAGODA_WEIGHTS_DTYPE=f16): logits
 * within half precision's reach of PyTorch's float32 and the same top-1 class for every image. */
static int f16_weights;

static void run_case(const char *name, vit_family fam, int extra)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/vit-%s.json", pgd_test_data_dir(), name);
    json_error_t je;
    json_t *meta = json_load_file(path, 0, &je);
    ck_assert_msg(meta != NULL, "%s: %s", path, je.text);
    json_t *in = json_object_get(meta, "input");
    int B = (int)json_integer_value(json_array_get(in, 0));
    int H = (int)json_integer_value(json_array_get(in, 2));
    int W = (int)json_integer_value(json_array_get(in, 3));
    int classes = (int)json_integer_value(json_object_get(meta, "classes"));
    /* Cases at another image size name the trained model's weights. */
    const char *wfile = json_string_value(json_object_get(meta, "weights"));
    char weights[256];
    if (wfile)
        snprintf(weights, sizeof weights, "%s", wfile);
    else
        snprintf(weights, sizeof weights, "vit-%s.safetensors", name);
    json_decref(meta);
    ck_assert(B > 1 && H > 0 && W > 0 && classes > 0); /* two images: rows to subtract */

    snprintf(path, sizeof path, "%s/%s", pgd_test_data_dir(), weights);
    pgd_weights *w = NULL;
    pgd_error *err = NULL;
    model_source src;
    vit_config cfg;
    open_detect(path, &w, &src, &cfg);
    ck_assert_int_eq(cfg.family, fam);
    ck_assert_int_eq(cfg.dim, 32);
    ck_assert_int_eq(cfg.depth, 2);
    ck_assert_int_eq(cfg.heads, 2); /* from __metadata__ num_heads */
    ck_assert_int_eq(cfg.patch, 8);
    ck_assert_int_eq(cfg.mlp, 64);
    ck_assert_int_eq(cfg.classes, classes);
    ck_assert_int_eq(cfg.extra, extra);
    ck_assert_int_eq(cfg.grid_h, 4); /* trained at 32x32: other sizes resample the grid */

    char fn[256];
    snprintf(fn, sizeof fn, "vit-%s-input.bin", name);
    float *x = pgd_test_read_floats(fn, (size_t)B * 3 * H * W);
    snprintf(fn, sizeof fn, "vit-%s-logits.bin", name);
    double *want = pgd_test_read_doubles(fn, (size_t)B * classes);
    float *got = malloc((size_t)B * classes * sizeof *got);
    float *map = malloc((size_t)B * (H / 8) * (W / 8) * sizeof *map);
    float *roll = malloc((size_t)B * (H / 8) * (W / 8) * sizeof *roll);

    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    static const char *const f16[] = {"PAGODA_WEIGHTS_DTYPE=f16", NULL};
    for (size_t i = 0; i < n; i++) {
        pgd_ctx *ctx = pgd_test_ctx_with(&d[i], f16_weights ? f16 : NULL);
        vit_model *m = NULL;
        PGD_CHECK_OK(vit_load(ctx, &src, &cfg, &m, &err), &err);
        double t[4];
        for (int k = 0; k < B * classes; k++)
            got[k] = NAN;
        PGD_CHECK_OK(vit_forward(m, x, B, H, W, got, map, roll, t, &err), &err);
        char what[160];
        snprintf(what, sizeof what, "%s logits on %s", name, d[i].name);
        /* Two blocks of float32 work against PyTorch's float32: 1e-4 relative (observed ~1e-6).
         * With half weights (11 significant bits, 2^-12 relative rounding) 1e-2 and the same
         * arg-max. */
        double rtol = f16_weights ? 1e-2 : 1e-4, atol = f16_weights ? 1e-3 : 1e-5;
        ck_assert_msg(pgd_test_allclose(got, want, (size_t)(B * classes), rtol, atol, what), "%s",
                      what);
        /* What the image decides, on its own (image 1 - image 0): the goldens' sharpened
         * attention makes a wrong head count move it by 0.8 or more
         * (tools/golden/make-vit-golden.py), a right run stays near 1e-6 (f16 weights: 1e-3). */
        ck_assert_msg(pgd_test_diffclose(got, want, (size_t)B, (size_t)classes, (size_t)classes,
                                         f16_weights ? 3e-2 : 1e-3, what),
                      "%s", what);
        for (int b = 0; f16_weights && b < B; b++) {
            int g1 = 0, w1 = 0;
            for (int k = 1; k < classes; k++) {
                g1 = got[b * classes + k] > got[b * classes + g1] ? k : g1;
                w1 = want[b * classes + k] > want[b * classes + w1] ? k : w1;
            }
            ck_assert_msg(g1 == w1, "%s: image %d top-1 %d with f16 weights, PyTorch %d", what, b,
                          g1, w1);
        }
        double worst = 0.0;
        for (int k = 0; k < B * classes; k++)
            worst = fmax(worst, fabs(got[k] - want[k]) / fmax(fabs(want[k]), 1e-6));
        printf("%s [%d, 3, %d, %d]: max relative error %.3g\n", what, B, H, W, worst);
        /* The attention map is the class token's probability mass on the patches. */
        for (int b = 0; b < B; b++) {
            double s = 0;
            for (int k = 0; k < (H / 8) * (W / 8); k++) {
                ck_assert(map[b * (H / 8) * (W / 8) + k] >= 0);
                s += map[b * (H / 8) * (W / 8) + k];
            }
            ck_assert_msg(s > 0 && s <= 1.0 + 1e-5, "attention mass %g", s);
            /* The rollout row is a distribution over all tokens, the class token's share
             * included: its patch part is positive and below 1. */
            double r = 0;
            for (int k = 0; k < (H / 8) * (W / 8); k++) {
                ck_assert(roll[b * (H / 8) * (W / 8) + k] >= 0);
                r += roll[b * (H / 8) * (W / 8) + k];
            }
            ck_assert_msg(r > 0 && r < 1.0, "rollout mass %g", r);
        }
        vit_free(m);
        pgd_ctx_destroy(ctx);
    }
    free(x);
    free(want);
    free(got);
    free(map);
    free(roll);
    pgd_weights_destroy(w);
}

START_TEST(timm)
{
    run_case("timm", VIT_TIMM, 1);
}
END_TEST

START_TEST(timm_f16_weights)
{
    f16_weights = 1;
    run_case("timm", VIT_TIMM, 1);
    f16_weights = 0;
}
END_TEST
START_TEST(deit)
{
    run_case("deit", VIT_TIMM, 2);
}
END_TEST
START_TEST(huggingface)
{
    run_case("hf", VIT_HF, 1);
}
END_TEST
START_TEST(torchvision)
{
    run_case("torchvision", VIT_TORCHVISION, 1);
}
END_TEST
/* At an image size other than the trained 32x32: the 4x4 position grid resampled by each
 * family's own rule (timm antialiased, torchvision align_corners, Hugging Face scale_factor). */
START_TEST(timm_resized)
{
    run_case("timm-24x40", VIT_TIMM, 1);
}
END_TEST
START_TEST(deit_resized)
{
    run_case("deit-40x24", VIT_TIMM, 2);
}
END_TEST
START_TEST(huggingface_resized)
{
    run_case("hf-40x32", VIT_HF, 1);
}
END_TEST
START_TEST(torchvision_resized)
{
    run_case("torchvision-40x40", VIT_TORCHVISION, 1);
}
END_TEST

/* The goldens see a wrong head count: each naming's weights run with 1 and 4 heads instead of
 * the file's 2 put the image-dependent part of the logits (image 1 - image 0) far outside the
 * tolerance run_case gives it (observed 0.8 to 2.2 of its size against 1e-3). */
static void wrong_heads_case(const char *name)
{
    char path[4096], fn[256];
    snprintf(path, sizeof path, "%s/vit-%s.safetensors", pgd_test_data_dir(), name);
    pgd_weights *w = NULL;
    pgd_error *err = NULL;
    model_source src;
    vit_config cfg;
    open_detect(path, &w, &src, &cfg);
    const int B = 2;
    snprintf(fn, sizeof fn, "vit-%s-input.bin", name);
    float *x = pgd_test_read_floats(fn, (size_t)B * 3 * 32 * 32);
    snprintf(fn, sizeof fn, "vit-%s-logits.bin", name);
    double *want = pgd_test_read_doubles(fn, (size_t)B * cfg.classes);
    float got[2 * 64];
    ck_assert_int_le(cfg.classes, 64);
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    static const int wrong[] = {1, 4};
    for (int k = 0; k < 2; k++) {
        vit_config bad = cfg;
        bad.heads = wrong[k];
        vit_model *m = NULL;
        PGD_CHECK_OK(vit_load(ctx, &src, &bad, &m, &err), &err);
        PGD_CHECK_OK(vit_forward(m, x, B, 32, 32, got, NULL, NULL, NULL, &err), &err);
        double e = pgd_test_diff_error(got, want, (size_t)B, (size_t)cfg.classes,
                                       (size_t)cfg.classes, NULL);
        printf("vit-%s with %d heads for 2: image 1 - image 0 off by %.3g of its size\n", name,
               wrong[k], e);
        ck_assert_msg(e > 0.1, "vit-%s: %d heads hide below the golden (%g)", name, wrong[k], e);
        vit_free(m);
    }
    pgd_ctx_destroy(ctx);
    free(x);
    free(want);
    pgd_weights_destroy(w);
}

START_TEST(wrong_heads_seen)
{
    wrong_heads_case("timm");
    wrong_heads_case("deit");
    wrong_heads_case("hf");
    wrong_heads_case("torchvision");
}
END_TEST

/* A source that hides one tensor or lies about one shape, over a real file. */
typedef struct faulty {
    pgd_weights *w;
    const char *hide, *bend;
} faulty;

static int f_shape(void *u, const char *name, int *ndim, int64_t s[8])
{
    faulty *f = u;
    if (f->hide && !strcmp(name, f->hide))
        return -1;
    pgd_weight_info info;
    if (pgd_weights_find(f->w, name, &info))
        return -1;
    *ndim = info.ndim;
    for (int i = 0; i < info.ndim; i++)
        s[i] = info.shape[i];
    if (f->bend && !strcmp(name, f->bend))
        s[0] += 1;
    return 0;
}

static int f_read(void *u, const char *name, float *dst, pgd_error **err)
{
    faulty *f = u;
    return pgd_weights_to_float(f->w, name, dst, err);
}

static const char *f_meta(void *u, const char *key)
{
    faulty *f = u;
    return pgd_weights_get_metadata(f->w, key);
}

/* __metadata__ num_heads replaced by `heads_meta` (NULL: absent). */
static const char *heads_meta;

static const char *meta_heads(void *u, const char *key)
{
    (void)u;
    return strcmp(key, "num_heads") ? NULL : heads_meta;
}

/* num_heads is parsed strictly (a "16abc" was read as 16, a "99999999999" as none), an
 * explicit head count that disagrees with it is an error naming both, not overruled, and a
 * count neither gives is recorded as assumed. */
START_TEST(num_heads_metadata)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/vit-timm.safetensors", pgd_test_data_dir());
    pgd_weights *w = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_weights_open(path, &w, &err), &err);
    model_source src;
    model_weights_source(&src, w, path);
    src.meta = meta_heads;
    vit_config cfg;
    static const char *const bad[] = {"16abc", "2 ",  " 2",          "",          "0", "-2",
                                      "2.0",   "0x2", "99999999999", "4294967298"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        heads_meta = bad[i];
        int rc = vit_detect(&src, 0, &cfg, &err);
        ck_assert_msg(rc == PGD_ERR_FORMAT, "num_heads '%s' gave %s", bad[i], pgd_status_name(rc));
        ck_assert_msg(strstr(pgd_error_get_message(err), "num_heads"), "%s",
                      pgd_error_get_message(err));
        pgd_error_destroy(err);
        err = NULL;
    }
    heads_meta = "2";
    PGD_CHECK_OK(vit_detect(&src, 0, &cfg, &err), &err);
    ck_assert_int_eq(cfg.heads, 2);
    PGD_CHECK_OK(vit_detect(&src, 2, &cfg, &err), &err); /* --heads 2 agrees */
    ck_assert_int_eq(cfg.heads, 2);
    ck_assert_int_eq(vit_detect(&src, 4, &cfg, &err), PGD_ERR_INVALID_ARGUMENT);
    const char *m = pgd_error_get_message(err);
    ck_assert_msg(strstr(m, "4 heads") && strstr(m, "num_heads 2"), "%s", m);
    pgd_error_destroy(err);
    err = NULL;
    ck_assert_int_eq(cfg.assumed.n, 0);
    heads_meta = NULL; /* no metadata: the explicit count */
    PGD_CHECK_OK(vit_detect(&src, 4, &cfg, &err), &err);
    ck_assert_int_eq(cfg.heads, 4);
    ck_assert_int_eq(cfg.assumed.n, 0);
    /* neither: the table's guess (width 32: 1 head), recorded as assumed for the caller to say */
    PGD_CHECK_OK(vit_detect(&src, 0, &cfg, &err), &err);
    ck_assert_int_eq(cfg.assumed.n, 1);
    ck_assert_str_eq(cfg.assumed.a[0].key, "heads");
    ck_assert_str_eq(cfg.assumed.a[0].value, "1");
    ck_assert_ptr_nonnull(strstr(cfg.assumed.a[0].how, "--heads"));
    pgd_weights_destroy(w);
}
END_TEST

START_TEST(missing_and_misshaped)
{
    if (!pgd_test_primary())
        return;
    char path[4096];
    snprintf(path, sizeof path, "%s/vit-timm.safetensors", pgd_test_data_dir());
    pgd_weights *w = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_weights_open(path, &w, &err), &err);
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    const char *cases[][2] = {{"blocks.1.mlp.fc2.bias", NULL},
                              {NULL, "blocks.0.attn.proj.weight"},
                              {"norm.weight", NULL},
                              {NULL, "pos_embed"}};
    for (size_t c = 0; c < 4; c++) {
        faulty f = {w, cases[c][0], cases[c][1]};
        model_source src = {&f, "faulty.safetensors", f_shape, f_read, f_meta, NULL, NULL, NULL};
        vit_config cfg;
        vit_model *m = NULL;
        int rc = vit_detect(&src, 0, &cfg, &err);
        if (rc == PGD_OK)
            rc = vit_load(ctx, &src, &cfg, &m, &err);
        /* A bias absent from one block while block 0 has it is a block held in part. */
        const char *who = cases[c][0] ? cases[c][0] : cases[c][1];
        ck_assert_msg(rc != PGD_OK, "case %zu loaded", c);
        ck_assert_ptr_null(m);
        ck_assert_msg(strstr(pgd_error_get_message(err), who) != NULL, "'%s' not named in: %s", who,
                      pgd_error_get_message(err));
        pgd_error_destroy(err);
        err = NULL;
    }
    /* Not a ViT at all. */
    faulty f = {w, "patch_embed.proj.weight", NULL};
    model_source src = {&f, "other.safetensors", f_shape, f_read, f_meta, NULL, NULL, NULL};
    vit_config cfg;
    ck_assert_int_eq(vit_detect(&src, 0, &cfg, &err), PGD_ERR_FORMAT);
    ck_assert(strstr(pgd_error_get_message(err), "not a ViT") != NULL);
    pgd_error_destroy(err);
    pgd_ctx_destroy(ctx);
    pgd_weights_destroy(w);
}
END_TEST

/* A ViT's detect + load for craft_try_variant; every committed variant base has depth 2. */
static int vit_variant_load(pgd_ctx *ctx, const model_source *src, void *user, void **model,
                            pgd_error **err)
{
    (void)user;
    vit_config cfg;
    vit_model *m = NULL;
    int rc = vit_detect(src, 0, &cfg, err);
    if (!rc)
        rc = vit_load(ctx, src, &cfg, &m, err);
    if (!rc)
        ck_assert_int_eq(cfg.depth, 2);
    *model = m;
    return rc;
}

static void vit_variant_free(void *m)
{
    vit_free(m);
}

/* Loads a variant of tests/data/<base> made with edits e[0..n): with `named` NULL it must load,
 * else fail with a message naming `named` and (when given) `also`. */
static void try_variant(pgd_ctx *ctx, const char *base, const char *tag, const craft_edit *e,
                        size_t n, const char *named, const char *also)
{
    const craft_loader l = {"vit", vit_variant_load, vit_variant_free, NULL};
    craft_try_variant(ctx, &l, base, tag, e, n, named, also);
}

/* Hostile files, made at test time from the committed tiny models: transposed or reshaped
 * weights with the right element count, a block held in part, extra or aliased names, and
 * non-finite values. Each is refused, naming the tensor; the unedited copy loads. */
START_TEST(strict_variants)
{
    if (!pgd_test_primary())
        return;
    size_t nd;
    const pgd_device_info *d = pgd_test_devices(&nd);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    static const struct {
        const char *base, *tag;
        craft_edit e;
        const char *named, *also;
    } cases[] = {
        {"vit-timm.safetensors",
         "fc2-transposed",
         {CRAFT_RESHAPE, "blocks.0.mlp.fc2.weight", 2, {64, 32}, NULL, 0, 0},
         "blocks.0.mlp.fc2.weight",
         "[64, 32]"},
        {"vit-timm.safetensors",
         "qkv-transposed",
         {CRAFT_RESHAPE, "blocks.1.attn.qkv.weight", 2, {32, 96}, NULL, 0, 0},
         "blocks.1.attn.qkv.weight",
         "[96, 32]"},
        {"vit-timm.safetensors",
         "pos-transposed",
         {CRAFT_RESHAPE, "pos_embed", 3, {1, 32, 17}, NULL, 0, 0},
         "pos_embed",
         "[1, 32, 17]"},
        {"vit-timm.safetensors",
         "cls-flat",
         {CRAFT_RESHAPE, "cls_token", 1, {32}, NULL, 0, 0},
         "cls_token",
         "[1, 1, 32]"},
        {"vit-hf.safetensors",
         "hf-patch-hwio",
         {CRAFT_RESHAPE,
          "vit.embeddings.patch_embeddings.projection.weight",
          4,
          {32, 8, 8, 3},
          NULL,
          0,
          0},
         "vit.embeddings.patch_embeddings.projection.weight",
         NULL},
        {"vit-timm.safetensors",
         "block1-norm1-missing",
         {CRAFT_DROP, "blocks.1.norm1.weight", 0, {0}, NULL, 0, 0},
         "blocks.1.norm1.weight",
         "missing"},
        {"vit-timm.safetensors",
         "block1-fc2-bias-missing",
         {CRAFT_DROP, "blocks.1.mlp.fc2.bias", 0, {0}, NULL, 0, 0},
         "blocks.1.mlp.fc2.bias",
         "missing"},
        {"vit-torchvision.safetensors",
         "tv-block1-ln2-missing",
         {CRAFT_DROP, "encoder.layers.encoder_layer_1.ln_2.weight", 0, {0}, NULL, 0, 0},
         "encoder.layers.encoder_layer_1.ln_2.weight",
         NULL},
        {"vit-timm.safetensors",
         "extra-tensor",
         {CRAFT_COPY, "head.bias", 0, {0}, "head.extra_bias", 0, 0},
         "head.extra_bias",
         "not used"},
        {"vit-timm.safetensors",
         "aliased-block",
         {CRAFT_COPY, "blocks.1.norm1.weight", 0, {0}, "blocks.01.norm1.weight", 0, 0},
         "blocks.01.norm1.weight",
         "not used"},
        {"vit-hf.safetensors",
         "hf-pooler",
         {CRAFT_COPY, "vit.layernorm.bias", 0, {0}, "vit.pooler.dense.bias", 0, 0},
         "vit.pooler.dense.bias",
         NULL},
        {"vit-timm.safetensors",
         "nan-weight",
         {CRAFT_POKE, "blocks.1.mlp.fc1.weight", 0, {0}, NULL, 70, NAN},
         "blocks.1.mlp.fc1.weight",
         "[2, 6]"},
        {"vit-deit.safetensors",
         "inf-token",
         {CRAFT_POKE, "dist_token", 0, {0}, NULL, 3, INFINITY},
         "dist_token",
         "inf"},
    };
    try_variant(ctx, "vit-timm.safetensors", "unchanged", NULL, 0, NULL, NULL);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        try_variant(ctx, cases[c].base, cases[c].tag, &cases[c].e, 1, cases[c].named,
                    cases[c].also);
    pgd_ctx_destroy(ctx);
}
END_TEST

/* Finite weights whose sums overflow: the logits are not finite, and vit_find_nonfinite names
 * the first stage whose output is not (block 1's attention leaves 3e38 in a channel, its MLP
 * adds another 3e38 there). */
START_TEST(nonfinite_stage)
{
    char in[4096], out[4096];
    snprintf(in, sizeof in, "%s/vit-timm.safetensors", pgd_test_data_dir());
    const char *tmp = getenv("PAGODA_TEST_TMP");
    snprintf(out, sizeof out, "%s/craft-overflow.safetensors", tmp && *tmp ? tmp : ".");
    const craft_edit e[] = {{CRAFT_POKE, "blocks.1.attn.proj.bias", 0, {0}, NULL, 0, 3e38f},
                            {CRAFT_POKE, "blocks.1.mlp.fc2.bias", 0, {0}, NULL, 0, 3e38f}};
    craft_safetensors(in, out, e, 2);
    pgd_weights *w = NULL;
    model_source src;
    vit_config cfg;
    open_detect(out, &w, &src, &cfg);
    float *x = pgd_test_read_floats("vit-timm-input.bin", (size_t)2 * 3 * 32 * 32);
    float logits[20];
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t i = 0; i < n; i++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[i]);
        pgd_error *err = NULL;
        vit_model *m = NULL;
        PGD_CHECK_OK(vit_load(ctx, &src, &cfg, &m, &err), &err);
        PGD_CHECK_OK(vit_forward(m, x, 2, 32, 32, logits, NULL, NULL, NULL, &err), &err);
        ck_assert_msg(!isfinite(logits[0]), "logits finite on %s: %g", d[i].name, logits[0]);
        model_probe p;
        PGD_CHECK_OK(vit_find_nonfinite(m, x, 32, 32, &p, &err), &err);
        ck_assert_msg(!strcmp(p.stage, "blocks.1 (mlp)"), "stage on %s: '%s'", d[i].name, p.stage);
        vit_free(m);
        pgd_ctx_destroy(ctx);
    }
    free(x);
    pgd_weights_destroy(w);
}
END_TEST

/* Device limits, from a smaller device than the one at hand (the options' global_mem_limit and
 * max_alloc_limit, $PAGODA_GLOBAL_MEM and $PAGODA_MAX_ALLOC, lower what it reports): weights
 * that do not fit are refused before anything is allocated, with both sizes; at sizes where the
 * model fits but not the whole batch, the batch runs as smaller passes with the same logits;
 * below that a clear error. */
START_TEST(device_limits)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/vit-timm.safetensors", pgd_test_data_dir());
    pgd_weights *w = NULL;
    pgd_error *err = NULL;
    model_source src;
    vit_config cfg;
    open_detect(path, &w, &src, &cfg);
    const int B = 2, H = 32, W = 32;
    float *x = pgd_test_read_floats("vit-timm-input.bin", (size_t)B * 3 * H * W);
    double *want = pgd_test_read_doubles("vit-timm-logits.bin", (size_t)B * cfg.classes);
    float *got = malloc((size_t)B * cfg.classes * sizeof *got);
    uint64_t need = model_weight_bytes(&src);
    ck_assert_uint_gt(need, 10000);

    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t i = 0; i < n; i++) {
        char lim[32];
        /* Each step sets these itself, whatever the environment says: no batch cap (the sweep
         * counts whole batches) and no memory limit but the step's own. */
        pgd_ctx_options base, o;
        pgd_test_options(&d[i], NULL, &base);
        pgd_test_knob(&base, "max_batch", 0);
        base.global_mem_limit = 0;
        base.max_alloc_limit = 0;
        /* weights larger than the global memory */
        o = base;
        o.global_mem_limit = need / 2;
        pgd_ctx *ctx = pgd_test_ctx_opts(&o);
        ck_assert_uint_eq(pgd_ctx_get_device(ctx)->global_mem, need / 2);
        vit_model *m = NULL;
        ck_assert_int_eq(vit_load(ctx, &src, &cfg, &m, &err), PGD_ERR_TOO_LARGE);
        ck_assert_ptr_null(m);
        const char *msg = pgd_error_get_message(err);
        snprintf(lim, sizeof lim, "%llu bytes", (unsigned long long)need);
        ck_assert_msg(strstr(msg, path) && strstr(msg, lim) && strstr(msg, "global memory"),
                      "message: %s", msg);
        pgd_error_destroy(err);
        err = NULL;
        pgd_ctx_destroy(ctx);

        /* a tensor larger than one buffer may be */
        o = base;
        o.max_alloc_limit = 4096;
        ctx = pgd_test_ctx_opts(&o);
        ck_assert_uint_eq(pgd_ctx_get_device(ctx)->max_alloc, 4096);
        ck_assert_int_eq(vit_load(ctx, &src, &cfg, &m, &err), PGD_ERR_TOO_LARGE);
        ck_assert_msg(strstr(pgd_error_get_message(err), "CL_DEVICE_MAX_MEM_ALLOC_SIZE"),
                      "message: %s", pgd_error_get_message(err));
        pgd_error_destroy(err);
        err = NULL;
        pgd_ctx_destroy(ctx);

        /* shrinking memory: whole batch, then passes of one image, then "one image needs" */
        int whole = 0, split = 0, refused = 0;
        for (double mem = 8.0 * need; mem > need / 2.0; mem *= 0.85) {
            snprintf(lim, sizeof lim, "%llu", (unsigned long long)mem);
            o = base;
            o.global_mem_limit = (uint64_t)mem;
            ctx = pgd_test_ctx_opts(&o);
            int rc = vit_load(ctx, &src, &cfg, &m, &err);
            if (rc == PGD_OK) {
                for (int k = 0; k < B * cfg.classes; k++)
                    got[k] = NAN;
                rc = vit_forward(m, x, B, H, W, got, NULL, NULL, NULL, &err);
                if (rc == PGD_OK) {
                    char what[160];
                    snprintf(what, sizeof what, "logits on %s with %s bytes, passes of %d",
                             d[i].name, lim, vit_last_split(m));
                    ck_assert_msg(
                        pgd_test_allclose(got, want, (size_t)(B * cfg.classes), 1e-4, 1e-5, what),
                        "%s", what);
                    ck_assert_int_ge(vit_last_split(m), 1);
                    if (vit_last_split(m) < B)
                        split++;
                    else
                        whole++;
                } else {
                    ck_assert_msg(rc == PGD_ERR_TOO_LARGE, "%s bytes: %s", lim,
                                  pgd_error_get_message(err));
                    refused++;
                    pgd_error_destroy(err);
                    err = NULL;
                }
                vit_free(m);
                m = NULL;
            } else {
                ck_assert_msg(rc == PGD_ERR_TOO_LARGE, "%s bytes: %s", lim,
                              pgd_error_get_message(err));
                pgd_error_destroy(err);
                err = NULL;
            }
            pgd_ctx_destroy(ctx);
        }
        printf("device limits on %s: %d whole batches, %d split, %d refused after loading\n",
               d[i].name, whole, split, refused);
        ck_assert_int_gt(whole, 0);
        ck_assert_int_gt(split, 0);

        /* the max_batch knob ($PAGODA_MAX_BATCH) caps the pass */
        o = base;
        pgd_test_knob(&o, "max_batch", 1);
        ctx = pgd_test_ctx_opts(&o);
        PGD_CHECK_OK(vit_load(ctx, &src, &cfg, &m, &err), &err);
        PGD_CHECK_OK(vit_forward(m, x, B, H, W, got, NULL, NULL, NULL, &err), &err);
        ck_assert_int_eq(vit_last_split(m), 1);
        ck_assert(pgd_test_allclose(got, want, (size_t)(B * cfg.classes), 1e-4, 1e-5,
                                    "PAGODA_MAX_BATCH=1"));
        vit_free(m);
        pgd_ctx_destroy(ctx);
    }
    free(x);
    free(want);
    free(got);
    pgd_weights_destroy(w);
}
END_TEST

/* Headless features of `weights` for the golden batch `case_` ([B, 3, H, W]): the class token
 * after the final norm and the mean of the patch tokens, as PyTorch computed them
 * (tools/golden/make-dino-golden.py), on every device. */
static void headless_case(const char *weights, const char *case_, int B, int H, int W,
                          int layer_scale)
{
    char path[4096], fn[256];
    snprintf(path, sizeof path, "%s/%s.safetensors", pgd_test_data_dir(), weights);
    pgd_weights *w = NULL;
    pgd_error *err = NULL;
    model_source src;
    vit_config cfg;
    PGD_CHECK_OK(pgd_weights_open(path, &w, &err), &err);
    model_weights_source(&src, w, path);
    PGD_CHECK_OK(vit_source_adapt(&src, &err), &err); /* HF's ViTModel naming; else as it is */
    PGD_CHECK_OK(vit_detect(&src, 0, &cfg, &err), &err);
    ck_assert_int_eq(cfg.headless, 1);
    ck_assert_int_eq(cfg.classes, 32);
    ck_assert_int_eq(cfg.layer_scale, layer_scale);
    snprintf(fn, sizeof fn, "%s-input.bin", case_);
    float *x = pgd_test_read_floats(fn, (size_t)B * 3 * H * W);
    snprintf(fn, sizeof fn, "%s-cls.bin", case_);
    double *want_cls = pgd_test_read_doubles(fn, (size_t)B * 32);
    snprintf(fn, sizeof fn, "%s-mean.bin", case_);
    double *want_mean = pgd_test_read_doubles(fn, (size_t)B * 32);
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t i = 0; i < n; i++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[i]);
        vit_model *m = NULL;
        PGD_CHECK_OK(vit_load(ctx, &src, &cfg, &m, &err), &err);
        float got[64];
        char what[200];
        PGD_CHECK_OK(vit_forward(m, x, B, H, W, got, NULL, NULL, NULL, &err), &err);
        snprintf(what, sizeof what, "%s class-token features on %s", case_, d[i].name);
        ck_assert_msg(pgd_test_allclose(got, want_cls, (size_t)B * 32, 1e-4, 1e-5, what), "%s",
                      what);
        /* Batches of two: the image-dependent part on its own (a wrong head count moves it by
         * 0.46 or more, tools/golden/make-dino-golden.py). */
        ck_assert_msg(B < 2 || pgd_test_diffclose(got, want_cls, (size_t)B, 32, 32, 1e-3, what),
                      "%s", what);
        vit_set_pool(m, VIT_POOL_MEAN);
        PGD_CHECK_OK(vit_forward(m, x, B, H, W, got, NULL, NULL, NULL, &err), &err);
        snprintf(what, sizeof what, "%s mean-pooled features on %s", case_, d[i].name);
        ck_assert_msg(pgd_test_allclose(got, want_mean, (size_t)B * 32, 1e-4, 1e-5, what), "%s",
                      what);
        ck_assert_msg(B < 2 || pgd_test_diffclose(got, want_mean, (size_t)B, 32, 32, 1e-3, what),
                      "%s", what);
        /* Both from one forward: [class token | patch mean] per image. */
        float both[128];
        vit_set_pool(m, VIT_POOL_BOTH);
        ck_assert_int_eq(vit_output_width(m), 64);
        PGD_CHECK_OK(vit_forward(m, x, B, H, W, both, NULL, NULL, NULL, &err), &err);
        for (int b = 0; b < B; b++) {
            snprintf(what, sizeof what, "%s both-pooled image %d on %s", case_, b, d[i].name);
            int ok = pgd_test_allclose(both + b * 64, want_cls + b * 32, 32, 1e-4, 1e-5, what);
            ok = ok &&
                 pgd_test_allclose(both + b * 64 + 32, want_mean + b * 32, 32, 1e-4, 1e-5, what);
            ck_assert_msg(ok, "%s", what);
        }
        vit_free(m);
        pgd_ctx_destroy(ctx);
    }
    free(x);
    free(want_cls);
    free(want_mean);
    model_source_free(&src);
    pgd_weights_destroy(w);
}

/* Hugging Face's headless ViTModel (facebook/dino-vits16's naming: no "vit." prefix, an unused
 * pooler): read through vit_source_adapt, features as transformers computes them. */
START_TEST(headless_hf_features)
{
    headless_case("dino-hf-tiny", "dino-hf-tiny", 2, 32, 32, 0);
    headless_case("dino-hf-tiny", "dino-hf-tiny-48x40", 1, 48, 40, 0);
    /* Hugging Face's DINOv2 (Dinov2Model, the hub's 4.x names): read as timm's DINOv2, its
     * position grid resized by plain bicubic interpolation as transformers does. */
    headless_case("dinov2-hf-tiny", "dinov2-hf-tiny", 2, 28, 28, 1);
    headless_case("dinov2-hf-tiny", "dinov2-hf-tiny-56x42", 1, 56, 42, 1);
}
END_TEST

/* A ViT without a classifier (timm, num_classes=0, as DINO's checkpoints) is a feature model;
 * its per-head maps are the last block's class-token attention as timm computes it. */
START_TEST(headless_features)
{
    headless_case("dino-tiny", "dino-tiny", 2, 32, 32, 0);
    headless_case("dino-tiny", "dino-tiny-48x40", 1, 48, 40, 0);
    char path[4096];
    snprintf(path, sizeof path, "%s/dino-tiny.safetensors", pgd_test_data_dir());
    pgd_weights *w = NULL;
    pgd_error *err = NULL;
    model_source src;
    vit_config cfg;
    open_detect(path, &w, &src, &cfg);
    float *x = pgd_test_read_floats("dino-tiny-input.bin", 2 * 3 * 32 * 32);
    double *want = pgd_test_read_doubles("dino-tiny-heads.bin", 2 * 2 * 16);
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t i = 0; i < n; i++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[i]);
        vit_model *m = NULL;
        PGD_CHECK_OK(vit_load(ctx, &src, &cfg, &m, &err), &err);
        float feats[64], maps[64];
        for (int k = 0; k < 64; k++)
            maps[k] = NAN;
        vit_set_head_maps(m, maps);
        PGD_CHECK_OK(vit_forward(m, x, 2, 32, 32, feats, NULL, NULL, NULL, &err), &err);
        char what[160];
        snprintf(what, sizeof what, "per-head class-token attention on %s", d[i].name);
        ck_assert_msg(pgd_test_allclose(maps, want, 64, 1e-4, 1e-6, what), "%s", what);
        vit_free(m);
        pgd_ctx_destroy(ctx);
    }
    free(x);
    free(want);
    pgd_weights_destroy(w);
}
END_TEST

/* DINOv2's LayerScale (ls1/ls2 gammas folded into proj and fc2), patch 14, at the trained size
 * and at 56 x 42 (the position grid resampled as timm's dynamic_img_size does). */
/* DINOv2 with register tokens (timm's ..._reg4 layout: registers after the class token, the
 * position table over the patches only): features at the trained size and at 56 x 42. */
START_TEST(register_features)
{
    headless_case("dinov2reg-tiny", "dinov2reg-tiny", 2, 28, 28, 1);
    headless_case("dinov2reg-tiny", "dinov2reg-tiny-56x42", 1, 56, 42, 1);
}
END_TEST

/* A LayerScale gamma missing from one block, or a misshaped register token, are refused by name. */
START_TEST(layer_scale_strict)
{
    if (!pgd_test_primary())
        return;
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    const craft_edit drop = {CRAFT_DROP, "blocks.1.ls2.gamma", 0, {0}, NULL, 0, 0};
    try_variant(ctx, "dinov2-tiny.safetensors", "ls-dropped", &drop, 1, "blocks.1.ls2.gamma", NULL);
    const craft_edit reg = {CRAFT_COPY, "blocks.0.norm1.weight", 0, {0}, "reg_token", 0, 0};
    try_variant(ctx, "dinov2-tiny.safetensors", "registers", &reg, 1, "reg_token", "[1, R, 32]");
    pgd_ctx_destroy(ctx);
}
END_TEST

START_TEST(layer_scale_features)
{
    headless_case("dinov2-tiny", "dinov2-tiny", 2, 28, 28, 1);
    headless_case("dinov2-tiny", "dinov2-tiny-56x42", 1, 56, 42, 1);
}
END_TEST

/* Hostile sizes (the sweep of issue 43): a tensor with a zero dimension holds no bytes and may
 * claim any other size. Every size vit_detect reads is bounded before it is used, and the
 * error names the tensor; none reaches arithmetic (this runs clean under UBSan). */
START_TEST(hostile_sizes)
{
    if (!pgd_test_primary())
        return;
    size_t nd;
    const pgd_device_info *d = pgd_test_devices(&nd);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    const int64_t huge = INT64_C(1) << 40;
    const struct {
        const char *tensor, *bias;
        int ndim;
        int64_t shape[4];
        const char *also;
    } cases[] = {
        {"patch_embed.proj.weight", NULL, 4, {32, 3, 0, 0}, "P 1..4096"},
        {"patch_embed.proj.weight", NULL, 4, {0, 3, huge, huge}, "P 1..4096"},
        {"patch_embed.proj.weight", NULL, 4, {0, 3, 8, 8}, "dim >= 1"},
        {"head.weight", "head.bias", 2, {0, 32}, "0 classes"},
        {"head.weight", NULL, 2, {huge, 0}, "[classes, 32]"},
        {"blocks.0.mlp.fc1.weight", "blocks.0.mlp.fc1.bias", 2, {0, 32}, "0 rows"},
        {"blocks.0.mlp.fc1.weight", NULL, 2, {huge, 0}, "[mlp, 32]"},
        {"pos_embed", NULL, 3, {1, 0, 32}, "[1, tokens, 32]"},
        {"pos_embed", NULL, 3, {1, huge, 0}, "[1, tokens, 32]"},
        {"cls_token", NULL, 3, {1, huge, 0}, "cls_token"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        craft_edit e[2] = {{CRAFT_RESIZE, cases[i].tensor, cases[i].ndim, {0}, NULL, 0, 0},
                           {CRAFT_RESIZE, cases[i].bias, 1, {cases[i].shape[0]}, NULL, 0, 0}};
        memcpy(e[0].shape, cases[i].shape, sizeof cases[i].shape);
        char tag[32];
        snprintf(tag, sizeof tag, "size%zu", i);
        try_variant(ctx, "vit-timm.safetensors", tag, e, cases[i].bias ? 2 : 1, cases[i].tensor,
                    cases[i].also);
    }
    pgd_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("vit");
    TCase *tc = tcase_create("golden");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, timm);
    tcase_add_test(tc, timm_f16_weights);
    tcase_add_test(tc, deit);
    tcase_add_test(tc, huggingface);
    tcase_add_test(tc, torchvision);
    tcase_add_test(tc, timm_resized);
    tcase_add_test(tc, deit_resized);
    tcase_add_test(tc, huggingface_resized);
    tcase_add_test(tc, torchvision_resized);
    tcase_add_test(tc, wrong_heads_seen);
    tcase_add_test(tc, num_heads_metadata);
    tcase_add_test(tc, missing_and_misshaped);
    tcase_add_test(tc, strict_variants);
    tcase_add_test(tc, nonfinite_stage);
    tcase_add_test(tc, device_limits);
    tcase_add_test(tc, headless_features);
    tcase_add_test(tc, headless_hf_features);
    tcase_add_test(tc, layer_scale_features);
    tcase_add_test(tc, layer_scale_strict);
    tcase_add_test(tc, register_features);
    suite_add_tcase(s, tc);
    /* Hostile inputs alone: CK_RUN_CASE=hostile runs them without the goldens. */
    TCase *th = tcase_create("hostile");
    tcase_set_timeout(th, 600);
    tcase_add_test(th, hostile_sizes);
    suite_add_tcase(s, th);
    return pgd_test_run(s);
}
