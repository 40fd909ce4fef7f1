/* test_nonlocal.c — the ResNet + non-local pipeline against PyTorch
 * (tools/golden/make-nonlocal-golden.py): small torchvision-named ResNets with a non-local block in
 * each of the four modes, with and without subsampling, batch > 1, a bottleneck net with two
 * blocks; the affinity row; the zero-initialised block is the identity; malformed weights name the
 * key. Every device. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "craft.h"
#include "harness.h"
#include "resnet.h"

static float *read_npy(const char *name, int *ndim, int64_t shape[PGD_MAX_DIMS])
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", pgd_test_data_dir(), name);
    float *data = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_npy_read(path, &data, ndim, shape, &err), &err);
    return data;
}

static pgd_weights *open_case(const char *name, model_source *src, char *path, size_t size)
{
    snprintf(path, size, "%s/nl-%s.safetensors", pgd_test_data_dir(), name);
    pgd_weights *w = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_weights_open(path, &w, &err), &err);
    model_weights_source(src, w, path);
    return w;
}

/* |got - want| <= 1e-4 · max|want| over the row set (logits of float32 work vs float64). */
static void check_close(const float *got, const float *want, size_t n, double rel, const char *what)
{
    double scale = 0;
    for (size_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(want[i]));
    ck_assert_msg(scale > 0, "%s: golden is all zero", what);
    double *w = malloc(n * sizeof *w);
    for (size_t i = 0; i < n; i++)
        w[i] = want[i];
    int ok = pgd_test_allclose(got, w, n, 0, rel * scale, what);
    free(w);
    ck_assert_msg(ok, "%s", what);
}

/* The image-dependent part of the logits (each image minus image 0), within 1e-3 of its own
 * size: average pooling over random images leaves it 2 to 20 % of the logits, where a slip
 * would hide below check_close's 1e-4 of the whole (the blocks left out move it by 0.16 or
 * more, tools/golden/make-nonlocal-golden.py). */
static void check_rows(const float *got, const float *want, int rows, int width, const char *what)
{
    size_t n = (size_t)rows * width;
    double *w = malloc(n * sizeof *w);
    for (size_t i = 0; i < n; i++)
        w[i] = want[i];
    int ok = pgd_test_diffclose(got, w, (size_t)rows, (size_t)width, (size_t)width, 1e-3, what);
    free(w);
    ck_assert_msg(ok, "%s", what);
}

/* The grid a block's input has: stem /2, max pool /2, /2 per later layer's first block. */
static void block_grid(const resnet_config *c, int H, int W, int *bh, int *bw)
{
    int64_t h = (H - 1) / 2 + 1, w = (W - 1) / 2 + 1;
    h = (h - 1) / 2 + 1, w = (w - 1) / 2 + 1;
    for (int L = 2; L <= c->nl[0].layer; L++)
        if (!(L == c->nl[0].layer && c->nl[0].block == 0))
            h = (h - 1) / 2 + 1, w = (w - 1) / 2 + 1;
    *bh = (int)h;
    *bw = (int)w;
}

/* vars: the contexts' settings ("PAGODA_NL_KEY_CHUNK=5", ... ending in NULL; NULL for none). */
static void run_case(const char *name, nl_mode mode, int subsample, int n_nl,
                     const char *const *vars)
{
    char path[4096], fn[256];
    model_source src;
    pgd_weights *w = open_case(name, &src, path, sizeof path);
    pgd_error *err = NULL;
    resnet_config cfg;
    resnet_options opt = {NULL, NULL, -1};
    PGD_CHECK_OK(resnet_detect(&src, &opt, &cfg, &err), &err);
    ck_assert_int_eq(cfg.mode, mode);
    ck_assert_int_eq(cfg.subsample, subsample);
    ck_assert_int_eq(cfg.n_nl, n_nl);
    ck_assert_int_eq(cfg.depth, 0); /* not a standard layout */

    int nd;
    int64_t xs[PGD_MAX_DIMS], ls[PGD_MAX_DIMS], as[PGD_MAX_DIMS];
    snprintf(fn, sizeof fn, "nl-%s-input.npy", name);
    float *x = read_npy(fn, &nd, xs);
    ck_assert_int_eq(nd, 4);
    snprintf(fn, sizeof fn, "nl-%s-logits.npy", name);
    float *want = read_npy(fn, &nd, ls);
    ck_assert_int_eq(nd, 2);
    snprintf(fn, sizeof fn, "nl-%s-affinity.npy", name);
    float *want_aff = read_npy(fn, &nd, as);
    ck_assert_int_eq(nd, 2);
    int B = (int)xs[0], H = (int)xs[2], W = (int)xs[3];
    ck_assert_int_eq(ls[0], B);
    ck_assert_int_eq(ls[1], cfg.classes);
    ck_assert_int_eq(as[0], B);

    /* The query position the golden used, on the block's own grid ("y,x"). */
    const char *q = pgd_weights_get_metadata(w, "golden.query");
    ck_assert_ptr_nonnull(q);
    int qy = -1, qx = -1;
    ck_assert_int_eq(sscanf(q, "%d,%d", &qy, &qx), 2);

    size_t nlog = (size_t)(B * cfg.classes);
    float *got = malloc(nlog * sizeof *got);
    float *aff = malloc((size_t)(B * as[1]) * sizeof *aff);
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t i = 0; i < n; i++) {
        pgd_ctx *ctx = pgd_test_ctx_with(&d[i], vars);
        resnet_model *m = NULL;
        PGD_CHECK_OK(resnet_load(ctx, &src, &cfg, &m, &err), &err);
        int gh = 0, gw = 0;
        int64_t cells = resnet_nl_grid(m, H, W, &gh, &gw);
        ck_assert_int_eq(cells, as[1]);
        /* the query lives on the block's input grid (before any subsampling) */
        int bh = 0, bw = 0;
        block_grid(&cfg, H, W, &bh, &bw);
        resnet_affinity ra;
        memset(&ra, 0, sizeof ra);
        ra.row = aff;
        ra.qy = (qy + 0.5) / bh;
        ra.qx = (qx + 0.5) / bw;
        for (size_t k = 0; k < nlog; k++)
            got[k] = pgd_test_canary();
        double t[5];
        PGD_CHECK_OK(resnet_forward(m, x, B, H, W, got, &ra, t, &err), &err);
        ck_assert_int_eq(ra.qi, qy);
        ck_assert_int_eq(ra.qj, qx);
        ck_assert_int_eq(ra.gh * ra.gw, cells);
        char what[200];
        snprintf(what, sizeof what, "nl-%s logits on %s", name, d[i].name);
        check_close(got, want, nlog, 1e-4, what);
        check_rows(got, want, B, cfg.classes, what);
        snprintf(what, sizeof what, "nl-%s affinity on %s", name, d[i].name);
        check_close(aff, want_aff, (size_t)(B * as[1]), 1e-4, what);
        /* The same run without an affinity request gives the same logits. */
        float *again = malloc(nlog * sizeof *again);
        PGD_CHECK_OK(resnet_forward(m, x, B, H, W, again, NULL, NULL, &err), &err);
        ck_assert_int_eq(memcmp(again, got, nlog * sizeof *got), 0);
        free(again);
        resnet_free(m);
        pgd_ctx_destroy(ctx);
    }
    pgd_free(x); /* read_npy: pgd_npy_read's */
    pgd_free(want);
    pgd_free(want_aff);
    free(got);
    free(aff);
    pgd_weights_destroy(w);
}

#define CASE(fn, name, mode, sub)                                                                  \
    START_TEST(fn)                                                                                 \
    {                                                                                              \
        run_case(name, mode, sub, 1, NULL);                                                        \
    }                                                                                              \
    END_TEST
CASE(embedded, "basic-embedded-gaussian", NL_EMBEDDED_GAUSSIAN, 0)
CASE(embedded_sub, "basic-embedded-gaussian-sub", NL_EMBEDDED_GAUSSIAN, 1)
CASE(gaussian, "basic-gaussian", NL_GAUSSIAN, 0)
CASE(gaussian_sub, "basic-gaussian-sub", NL_GAUSSIAN, 1)
CASE(dot, "basic-dot-product", NL_DOT_PRODUCT, 0)
CASE(dot_sub, "basic-dot-product-sub", NL_DOT_PRODUCT, 1)
CASE(concat, "basic-concatenation", NL_CONCATENATION, 0)
CASE(concat_sub, "basic-concatenation-sub", NL_CONCATENATION, 1)

/* The concatenation sum split into key ranges of 5 (as long ranges are on llvmpipe). */
START_TEST(concat_chunked)
{
    static const char *const chunk[] = {"PAGODA_NL_KEY_CHUNK=5", NULL};
    run_case("basic-concatenation", NL_CONCATENATION, 0, 1, chunk);
    run_case("basic-concatenation-sub", NL_CONCATENATION, 1, 1, chunk);
}
END_TEST

START_TEST(bottleneck)
{
    run_case("bottleneck", NL_EMBEDDED_GAUSSIAN, 1, 2, NULL);
}
END_TEST

/* Blocks inserted with the paper's initialisation (BN γ = 0) leave the output unchanged,
 * bit for bit, in every mode. */
START_TEST(identity_init)
{
    char path[4096];
    model_source src;
    pgd_weights *w = open_case("bottleneck", &src, path, sizeof path);
    pgd_error *err = NULL;
    int nd;
    int64_t xs[PGD_MAX_DIMS];
    float *x = read_npy("nl-bottleneck-input.npy", &nd, xs);
    int B = (int)xs[0], H = (int)xs[2], W = (int)xs[3];
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    static const char *const modes[] = {"embedded_gaussian", "gaussian", "dot_product",
                                        "concatenation"};
    for (size_t i = 0; i < n; i++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[i]);
        resnet_config base, more;
        resnet_options o0 = {NULL, NULL, -1};
        PGD_CHECK_OK(resnet_detect(&src, &o0, &base, &err), &err);
        resnet_model *m0 = NULL;
        PGD_CHECK_OK(resnet_load(ctx, &src, &base, &m0, &err), &err);
        size_t nl = (size_t)(B * base.classes);
        float *ref = malloc(nl * sizeof *ref), *got = malloc(nl * sizeof *got);
        PGD_CHECK_OK(resnet_forward(m0, x, B, H, W, ref, NULL, NULL, &err), &err);
        resnet_free(m0);
        resnet_options o = {"layer1.0,layer3.0,layer4.0", NULL, -1};
        PGD_CHECK_OK(resnet_detect(&src, &o, &more, &err), &err);
        ck_assert_int_eq(more.n_nl, base.n_nl + 3);
        resnet_model *m = NULL;
        PGD_CHECK_OK(resnet_load(ctx, &src, &more, &m, &err), &err);
        PGD_CHECK_OK(resnet_forward(m, x, B, H, W, got, NULL, NULL, &err), &err);
        ck_assert_msg(memcmp(ref, got, nl * sizeof *got) == 0,
                      "identity-initialised blocks changed the logits on %s", d[i].name);
        resnet_free(m);
        free(ref);
        free(got);
        pgd_ctx_destroy(ctx);
    }
    free(x);
    pgd_weights_destroy(w);

    /* Every mode, with and without subsampling: the file's block (layer2.1) run in that mode,
     * with and without identity blocks added before layer1.0 and layer4.0. */
    for (int k = 0; k < 4; k++) {
        const char *file = k == NL_CONCATENATION ? "basic-concatenation" : "basic-dot-product";
        w = open_case(file, &src, path, sizeof path);
        char fn[128];
        snprintf(fn, sizeof fn, "nl-%s-input.npy", file);
        float *xb = read_npy(fn, &nd, xs);
        B = (int)xs[0], H = (int)xs[2], W = (int)xs[3];
        for (size_t i = 0; i < n; i++) {
            pgd_ctx *ctx = pgd_test_ctx(&d[i]);
            for (int sub = 0; sub < 2; sub++) {
                resnet_options o0 = {NULL, modes[k], sub},
                               o1 = {"layer1.0,layer4.0", modes[k], sub};
                resnet_config c0, c1;
                PGD_CHECK_OK(resnet_detect(&src, &o0, &c0, &err), &err);
                PGD_CHECK_OK(resnet_detect(&src, &o1, &c1, &err), &err);
                ck_assert_int_eq(c1.n_nl, 3);
                resnet_model *m0 = NULL, *m1 = NULL;
                PGD_CHECK_OK(resnet_load(ctx, &src, &c0, &m0, &err), &err);
                PGD_CHECK_OK(resnet_load(ctx, &src, &c1, &m1, &err), &err);
                size_t nl = (size_t)(B * c0.classes);
                float *a = malloc(nl * sizeof *a), *b = malloc(nl * sizeof *b);
                PGD_CHECK_OK(resnet_forward(m0, xb, B, H, W, a, NULL, NULL, &err), &err);
                PGD_CHECK_OK(resnet_forward(m1, xb, B, H, W, b, NULL, NULL, &err), &err);
                ck_assert_msg(memcmp(a, b, nl * sizeof *a) == 0,
                              "%s%s: identity blocks changed the logits on %s", modes[k],
                              sub ? " (subsampled)" : "", d[i].name);
                free(a);
                free(b);
                resnet_free(m0);
                resnet_free(m1);
            }
            pgd_ctx_destroy(ctx);
        }
        free(xb);
        pgd_weights_destroy(w);
    }
}
END_TEST

/* A source over a file that hides, reshapes, adds or renames tensors and overrides metadata. */
typedef struct faulty {
    pgd_weights *w;
    const char *hide;    /* this tensor is absent */
    const char *reshape; /* this tensor reports [1, 2, 3] */
    const char *extra;   /* this extra name is listed (shape [4]) */
    const char *meta_key, *meta_value;
} faulty;

static int f_shape(void *u, const char *name, int *ndim, int64_t s[8])
{
    faulty *f = u;
    if (f->hide && !strcmp(name, f->hide))
        return -1;
    if ((f->reshape && !strcmp(name, f->reshape)) || (f->extra && !strcmp(name, f->extra))) {
        *ndim = 3;
        s[0] = 1, s[1] = 2, s[2] = 3;
        return 0;
    }
    pgd_weight_info info;
    if (pgd_weights_find(f->w, name, &info) != PGD_OK)
        return -1;
    *ndim = info.ndim;
    for (int i = 0; i < info.ndim; i++)
        s[i] = info.shape[i];
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
    if (f->meta_key && !strcmp(key, f->meta_key))
        return f->meta_value;
    return pgd_weights_get_metadata(f->w, key);
}

static const char *f_name_at(void *u, size_t i)
{
    faulty *f = u;
    size_t n = pgd_weights_get_count(f->w);
    if (i < n)
        return pgd_weights_get_name(f->w, i);
    return i == n ? f->extra : NULL;
}

START_TEST(malformed)
{
    if (!pgd_test_primary())
        return;
    char path[4096];
    model_source file;
    pgd_weights *w = open_case("basic-concatenation", &file, path, sizeof path);
    struct {
        faulty f;
        const char *named; /* must appear in the message */
    } cases[] = {
        {{w, "layer2.0.conv1.weight", NULL, NULL, NULL, NULL}, "layer2.0.conv1.weight"},
        {{w, "layer3.0.downsample.0.weight", NULL, NULL, NULL, NULL},
         "layer3.0.downsample.0.weight"},
        {{w, "layer1.0.bn2.running_var", NULL, NULL, NULL, NULL}, "layer1.0.bn2.running_var"},
        {{w, "fc.bias", NULL, NULL, NULL, NULL}, "fc.bias"},
        {{w, NULL, "layer2.1.conv2.weight", NULL, NULL, NULL}, "layer2.1.conv2.weight"},
        {{w, NULL, "bn1.weight", NULL, NULL, NULL}, "bn1.weight"},
        {{w, "nonlocal.layer2.1.phi.weight", NULL, NULL, NULL, NULL},
         "nonlocal.layer2.1.phi.weight"},
        {{w, "nonlocal.layer2.1.concat.weight", NULL, NULL, NULL, NULL},
         "nonlocal.layer2.1.concat.weight"},
        {{w, NULL, "nonlocal.layer2.1.bn.running_mean", NULL, NULL, NULL},
         "nonlocal.layer2.1.bn.running_mean"},
        {{w, NULL, "nonlocal.layer2.1.w.weight", NULL, NULL, NULL}, "nonlocal.layer2.1.w.weight"},
        /* a non-local key pointing at a block that doesn't exist */
        {{w, NULL, NULL, "nonlocal.layer2.7.theta.weight", NULL, NULL},
         "nonlocal.layer2.7.theta.weight"},
        {{w, NULL, NULL, "nonlocal.layer9.0.g.weight", NULL, NULL}, "nonlocal.layer9.0.g.weight"},
        {{w, NULL, NULL, "nonlocal.layer2.1.gamma", NULL, NULL}, "nonlocal.layer2.1.gamma"},
        {{w, NULL, NULL, "nonlocal.stage2.theta.weight", NULL, NULL},
         "nonlocal.stage2.theta.weight"},
        /* unknown mode, bad subsample flag */
        {{w, NULL, NULL, NULL, "nonlocal.mode", "softmax_of_doom"}, "softmax_of_doom"},
        {{w, NULL, NULL, NULL, "nonlocal.subsample", "maybe"}, "nonlocal.subsample"},
        /* not a ResNet */
        {{w, "conv1.weight", NULL, NULL, NULL, NULL}, "not a ResNet"},
    };
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        model_source src = {
            &cases[c].f, "faulty.safetensors", f_shape, f_read, f_meta, f_name_at, NULL, NULL};
        resnet_config cfg;
        resnet_options opt = {NULL, NULL, -1};
        pgd_error *err = NULL;
        resnet_model *m = NULL;
        int rc = resnet_detect(&src, &opt, &cfg, &err);
        if (rc == PGD_OK)
            rc = resnet_load(ctx, &src, &cfg, &m, &err);
        ck_assert_msg(rc != PGD_OK, "case %zu (%s) was accepted", c, cases[c].named);
        ck_assert_ptr_null(m);
        ck_assert_msg(strstr(pgd_error_get_message(err), cases[c].named) != NULL,
                      "case %zu: '%s' not named in: %s", c, cases[c].named,
                      pgd_error_get_message(err));
        pgd_error_destroy(err);
    }
    /* --nonlocal specs: bad syntax, a block that doesn't exist, one that has a block already */
    const char *specs[][2] = {{"layer3", "layerL.B"},
                              {"layer4.1", "layer4.1"},
                              {"layer2.1", "already"},
                              {"layer1.0,,", "layerL.B"}};
    for (size_t c = 0; c < 4; c++) {
        resnet_config cfg;
        resnet_options opt = {specs[c][0], NULL, -1};
        pgd_error *err = NULL;
        ck_assert_int_ne(resnet_detect(&file, &opt, &cfg, &err), PGD_OK);
        ck_assert_msg(strstr(pgd_error_get_message(err), specs[c][1]) != NULL, "'%s' not in: %s",
                      specs[c][1], pgd_error_get_message(err));
        pgd_error_destroy(err);
    }
    pgd_ctx_destroy(ctx);
    pgd_weights_destroy(w);
}
END_TEST

/* A ResNet's detect + load for craft_try_variant; `user` is the forced mode or NULL. */
static int resnet_variant_load(pgd_ctx *ctx, const model_source *src, void *user, void **model,
                               pgd_error **err)
{
    resnet_config cfg;
    resnet_options opt = {NULL, user, -1};
    resnet_model *m = NULL;
    int rc = resnet_detect(src, &opt, &cfg, err);
    if (!rc)
        rc = resnet_load(ctx, src, &cfg, &m, err);
    *model = m;
    return rc;
}

static void resnet_variant_free(void *m)
{
    resnet_free(m);
}

/* Loads a variant of tests/data/<base> made with edits e[0..n) (with `mode` forced when not
 * NULL): with `named` NULL it must load, else fail naming `named` and (when given) `also`. */
static void try_variant(pgd_ctx *ctx, const char *base, const char *tag, const craft_edit *e,
                        size_t n, const char *mode, const char *named, const char *also)
{
    const craft_loader l = {"nl", resnet_variant_load, resnet_variant_free, (void *)mode};
    craft_try_variant(ctx, &l, base, tag, e, n, named, also);
}

/* Hostile files, made at test time from the committed tiny ResNets: a conv weight in HWIO
 * order, a BN vector as [2, 2], a block after a missing one, aliased or unknown names, NaN
 * weights and negative running variances. Each is refused naming the tensor; the unedited copy
 * loads, and a mode forced by the options may leave out the parts it does not use. */
/* A file's non-local blocks run in a mode and subsampling that their tensors cannot tell apart
 * (embedded Gaussian and dot product have the same ones): when neither __metadata__ nor the
 * options give them, the defaults taken are recorded as assumed, for the caller to say. */
START_TEST(assumed_settings)
{
    char path[4096];
    model_source file;
    pgd_weights *w = open_case("basic-dot-product", &file, path, sizeof path);
    static const char *const keys[2] = {"nonlocal.mode", "nonlocal.subsample"};
    static const char *const said[2] = {"nonlocal_mode", "nonlocal_subsample"};
    for (int k = 0; k < 2; k++) {
        faulty f = {w, NULL, NULL, NULL, keys[k], NULL}; /* that key absent */
        model_source src = {&f,  "faulty.safetensors", f_shape, f_read, f_meta, f_name_at, NULL,
                            NULL};
        resnet_config cfg;
        resnet_options opt = {NULL, NULL, -1};
        pgd_error *err = NULL;
        PGD_CHECK_OK(resnet_detect(&src, &opt, &cfg, &err), &err);
        ck_assert_int_eq(cfg.assumed.n, 1);
        ck_assert_str_eq(cfg.assumed.a[0].key, said[k]);
        ck_assert_str_eq(cfg.assumed.a[0].value, k ? "false" : "\"embedded_gaussian\"");
        /* given by the options: nothing assumed */
        resnet_options given = {NULL, "dot_product", 0};
        PGD_CHECK_OK(resnet_detect(&src, &given, &cfg, &err), &err);
        ck_assert_int_eq(cfg.assumed.n, 0);
    }
    resnet_config cfg; /* the file's own metadata: nothing assumed */
    resnet_options opt = {NULL, NULL, -1};
    pgd_error *err = NULL;
    PGD_CHECK_OK(resnet_detect(&file, &opt, &cfg, &err), &err);
    ck_assert_int_eq(cfg.assumed.n, 0);
    pgd_weights_destroy(w);
}
END_TEST

START_TEST(strict_variants)
{
    if (!pgd_test_primary())
        return;
    size_t nd;
    const pgd_device_info *d = pgd_test_devices(&nd);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    const char *bott = "nl-bottleneck.safetensors";
    static const struct {
        const char *tag;
        craft_edit e;
        const char *named, *also;
    } cases[] = {
        {"conv-hwio",
         {CRAFT_RESHAPE, "layer3.1.conv2.weight", 4, {3, 3, 12, 12}, NULL, 0, 0},
         "layer3.1.conv2.weight",
         "[12, 12, 3, 3]"},
        {"stem-hwio",
         {CRAFT_RESHAPE, "conv1.weight", 4, {7, 7, 3, 8}, NULL, 0, 0},
         "conv1.weight",
         NULL},
        {"bn-2x2",
         {CRAFT_RESHAPE, "layer1.0.bn1.weight", 2, {2, 2}, NULL, 0, 0},
         "layer1.0.bn1.weight",
         "[2, 2]"},
        {"fc-transposed",
         {CRAFT_RESHAPE, "fc.weight", 2, {64, 7}, NULL, 0, 0},
         "fc.weight",
         "[64, 7]"},
        {"nl-theta-4d-swapped",
         {CRAFT_RESHAPE, "nonlocal.layer3.1.theta.weight", 4, {48, 24, 1, 1}, NULL, 0, 0},
         "nonlocal.layer3.1.theta.weight",
         NULL},
        {"layer1.2-without-1.1",
         {CRAFT_COPY, "layer1.0.conv1.weight", 0, {0}, "layer1.2.conv1.weight", 0, 0},
         "layer1.1.",
         "missing"},
        {"layer3.1-missing-bn",
         {CRAFT_DROP, "layer3.1.bn2.bias", 0, {0}, NULL, 0, 0},
         "layer3.1.bn2.bias",
         "missing"},
        {"nl-alias-sign",
         {CRAFT_COPY, "nonlocal.layer2.0.g.weight", 0, {0}, "nonlocal.layer+2.00.g.weight", 0, 0},
         "nonlocal.layer+2.00.g.weight",
         NULL},
        {"nl-alias-zero",
         {CRAFT_COPY, "nonlocal.layer2.0.g.bias", 0, {0}, "nonlocal.layer2.00.g.bias", 0, 0},
         "nonlocal.layer2.00.g.bias",
         NULL},
        {"layer-alias",
         {CRAFT_COPY, "layer1.0.conv1.weight", 0, {0}, "layer01.0.conv1.weight", 0, 0},
         "layer01.0.conv1.weight",
         "not used"},
        {"extra-tensor", {CRAFT_COPY, "fc.bias", 0, {0}, "fc.extra", 0, 0}, "fc.extra", "not used"},
        {"stray-buffer",
         {CRAFT_COPY,
          "layer1.0.bn1.num_batches_tracked",
          0,
          {0},
          "layer1.0.bn9.num_batches_tracked",
          0,
          0},
         "layer1.0.bn9.num_batches_tracked",
         "not used"},
        {"nan-conv",
         {CRAFT_POKE, "layer2.0.conv2.weight", 0, {0}, NULL, 10, NAN},
         "layer2.0.conv2.weight",
         "[0, 1, 0, 1]"},
        {"nan-nonlocal",
         {CRAFT_POKE, "nonlocal.layer2.0.w.weight", 0, {0}, NULL, 0, NAN},
         "nonlocal.layer2.0.w.weight",
         "nan"},
        {"negative-var",
         {CRAFT_POKE, "layer3.0.bn2.running_var", 0, {0}, NULL, 3, -0.5f},
         "layer3.0.bn2.running_var",
         "[3]"},
        {"negative-var-nonlocal",
         {CRAFT_POKE, "nonlocal.layer3.1.bn.running_var", 0, {0}, NULL, 0, -1.0f},
         "nonlocal.layer3.1.bn.running_var",
         "negative"},
    };
    try_variant(ctx, bott, "unchanged", NULL, 0, NULL, NULL, NULL);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        try_variant(ctx, bott, cases[c].tag, &cases[c].e, 1, NULL, cases[c].named, cases[c].also);
    /* A concatenation weight is refused under the file's own mode, left out under a forced one. */
    craft_edit stray = {
        CRAFT_COPY, "nonlocal.layer2.1.g.bias", 0, {0}, "nonlocal.layer2.1.concat.weight", 0, 0};
    try_variant(ctx, "nl-basic-dot-product.safetensors", "stray-concat", &stray, 1, NULL,
                "nonlocal.layer2.1.concat.weight", "not used");
    try_variant(ctx, "nl-basic-concatenation.safetensors", "forced-mode", NULL, 0,
                "embedded_gaussian", NULL, NULL);
    pgd_ctx_destroy(ctx);
}
END_TEST

/* Zero dimensions (issue 43): a tensor with a zero dimension holds no bytes and may claim any
 * other size. A 0-class head or a 0-channel block used to be reported as a missing tensor; the
 * error now says which tensor has the zero dimension, and huge sizes beside it stay shapes. */
START_TEST(zero_dimensions)
{
    if (!pgd_test_primary())
        return;
    size_t nd;
    const pgd_device_info *d = pgd_test_devices(&nd);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    const int64_t huge = INT64_C(1) << 40;
    craft_edit fc[2] = {{CRAFT_RESIZE, "fc.weight", 2, {0, 64}, NULL, 0, 0},
                        {CRAFT_RESIZE, "fc.bias", 1, {0}, NULL, 0, 0}};
    try_variant(ctx, "nl-bottleneck.safetensors", "fc0", fc, 2, NULL, "fc.weight",
                "zero dimension: 0 classes");
    craft_edit c1 = {CRAFT_RESIZE, "layer1.0.conv1.weight", 4, {0, 8, 1, 1}, NULL, 0, 0};
    try_variant(ctx, "nl-bottleneck.safetensors", "width0", &c1, 1, NULL, "layer1.0.conv1.weight",
                "zero dimension");
    craft_edit c3 = {CRAFT_RESIZE, "layer2.0.conv3.weight", 4, {0, huge, 1, 1}, NULL, 0, 0};
    try_variant(ctx, "nl-bottleneck.safetensors", "out0", &c3, 1, NULL, "layer2.0.conv3.weight",
                "zero dimension");
    craft_edit c2 = {CRAFT_RESIZE, "layer1.0.conv1.weight", 4, {huge, 0, 1, 1}, NULL, 0, 0};
    try_variant(ctx, "nl-bottleneck.safetensors", "width-huge", &c2, 1, NULL,
                "layer1.0.conv1.weight", "[1099511627776, 0, 1, 1]");
    pgd_ctx_destroy(ctx);
}
END_TEST

/* Finite weights whose sums overflow: the non-local block before layer3.1 leaves 3e38 in a
 * channel (finite), layer3.1's last BN adds another 3e38 there; resnet_find_nonfinite names
 * layer3.1. */
START_TEST(nonfinite_stage)
{
    char in[4096], out[4096];
    snprintf(in, sizeof in, "%s/nl-bottleneck.safetensors", pgd_test_data_dir());
    const char *tmp = getenv("PAGODA_TEST_TMP");
    snprintf(out, sizeof out, "%s/craft-nl-overflow.safetensors", tmp && *tmp ? tmp : ".");
    const craft_edit e[] = {{CRAFT_POKE, "nonlocal.layer3.1.bn.bias", 0, {0}, NULL, 0, 3e38f},
                            {CRAFT_POKE, "layer3.1.bn3.bias", 0, {0}, NULL, 0, 3e38f}};
    craft_safetensors(in, out, e, 2);
    pgd_weights *w = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_weights_open(out, &w, &err), &err);
    model_source src;
    model_weights_source(&src, w, out);
    resnet_config cfg;
    resnet_options opt = {NULL, NULL, -1};
    PGD_CHECK_OK(resnet_detect(&src, &opt, &cfg, &err), &err);
    int nd;
    int64_t xs[PGD_MAX_DIMS];
    float *x = read_npy("nl-bottleneck-input.npy", &nd, xs);
    int B = (int)xs[0], H = (int)xs[2], W = (int)xs[3];
    float *logits = malloc((size_t)B * (size_t)cfg.classes * sizeof *logits);
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t i = 0; i < n; i++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[i]);
        resnet_model *m = NULL;
        PGD_CHECK_OK(resnet_load(ctx, &src, &cfg, &m, &err), &err);
        PGD_CHECK_OK(resnet_forward(m, x, B, H, W, logits, NULL, NULL, &err), &err);
        ck_assert_msg(!isfinite(logits[0]), "logits finite on %s: %g", d[i].name, logits[0]);
        model_probe p;
        PGD_CHECK_OK(resnet_find_nonfinite(m, x, H, W, &p, &err), &err);
        ck_assert_msg(!strcmp(p.stage, "layer3.1"), "stage on %s: '%s'", d[i].name, p.stage);
        resnet_free(m);
        pgd_ctx_destroy(ctx);
    }
    free(logits);
    free(x);
    pgd_weights_destroy(w);
}
END_TEST

/* The random ResNet-50 with a block before layer3.5 (what `pagoda nonlocal` runs without
 * weights) is recognised as such; random ResNet-18 loads without blocks. */
START_TEST(random_models)
{
    pgd_error *err = NULL;
    model_source src;
    resnet_config cfg;
    resnet_options opt = {NULL, NULL, -1};
    PGD_CHECK_OK(resnet_random_source(&src, 50, 1000, "layer3.5", NL_EMBEDDED_GAUSSIAN, 1, &err),
                 &err);
    PGD_CHECK_OK(resnet_detect(&src, &opt, &cfg, &err), &err);
    ck_assert_int_eq(cfg.depth, 50);
    ck_assert_int_eq(cfg.bottleneck, 1);
    ck_assert_int_eq(cfg.n_nl, 1);
    ck_assert_int_eq(cfg.nl[0].layer, 3);
    ck_assert_int_eq(cfg.nl[0].block, 5);
    ck_assert_int_eq(cfg.nl[0].channels, 1024);
    ck_assert_int_eq(cfg.nl[0].inner, 512);
    ck_assert_int_eq(cfg.out[3], 2048);
    model_source_free(&src);
    PGD_CHECK_OK(resnet_random_source(&src, 18, 10, NULL, NL_EMBEDDED_GAUSSIAN, 1, &err), &err);
    PGD_CHECK_OK(resnet_detect(&src, &opt, &cfg, &err), &err);
    ck_assert_int_eq(cfg.depth, 18);
    ck_assert_int_eq(cfg.bottleneck, 0);
    ck_assert_int_eq(cfg.n_nl, 0);
    model_source_free(&src);
    ck_assert_int_ne(resnet_random_source(&src, 19, 10, NULL, NL_EMBEDDED_GAUSSIAN, 1, &err),
                     PGD_OK);
    ck_assert(strstr(pgd_error_get_message(err), "18, 34, 50") != NULL);
    pgd_error_destroy(err);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("nonlocal");
    TCase *tc = tcase_create("golden");
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, embedded);
    tcase_add_test(tc, embedded_sub);
    tcase_add_test(tc, gaussian);
    tcase_add_test(tc, gaussian_sub);
    tcase_add_test(tc, dot);
    tcase_add_test(tc, dot_sub);
    tcase_add_test(tc, concat);
    tcase_add_test(tc, concat_sub);
    tcase_add_test(tc, concat_chunked);
    tcase_add_test(tc, bottleneck);
    tcase_add_test(tc, identity_init);
    tcase_add_test(tc, malformed);
    tcase_add_test(tc, assumed_settings);
    tcase_add_test(tc, strict_variants);
    tcase_add_test(tc, nonfinite_stage);
    tcase_add_test(tc, random_models);
    suite_add_tcase(s, tc);
    /* Hostile inputs alone: CK_RUN_CASE=hostile runs them without the goldens. */
    TCase *th = tcase_create("hostile");
    tcase_add_test(th, zero_dimensions);
    suite_add_tcase(s, th);
    return pgd_test_run(s);
}
