/* test_golden.c — attention and patch embedding against golden outputs computed by PyTorch
 * (tools/golden/make-golden.py, run with /usr/bin/python3), on every device.
 *
 * Data format (tests/data, directory from $PAGODA_TEST_DATA): per case <case> a JSON file
 * golden-<case>.json
 *     {"case": "<case>", "op": "...", "params": {...},
 *      "arrays": {"<name>": {"shape": [d0, ...], "file": "golden-<case>-<name>.bin"}, ...}}
 * and beside it, per array, a raw little-endian float32 file of exactly prod(shape) elements,
 * row-major. Inputs are float32; the "want_*" arrays were computed in float64 from those inputs
 * and rounded to float32. A missing or malformed file, a missing key or a size mismatch fails
 * the test; it never skips. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h" /* white-box: reaches library internals */
#include "reference.h"

#define MAX_ARRAYS 8

typedef struct golden_array {
    char name[32];
    int ndim;
    int64_t shape[PGD_MAX_DIMS];
    int64_t n;
    float *data;
} golden_array;

typedef struct golden {
    json_t *root;
    json_t *params;
    size_t count;
    golden_array arrays[MAX_ARRAYS];
} golden;

static void golden_free(golden *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->count; i++)
        free(g->arrays[i].data);
    json_decref(g->root);
    free(g);
}

/* Reads exactly n little-endian floats from path into a malloc'd buffer; NULL and a message
 * in msg otherwise. */
static float *read_floats(const char *path, int64_t n, char *msg, size_t msz)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(msg, msz, "%s: %s", path, strerror(errno));
        return NULL;
    }
    float *d = malloc((size_t)(n ? n : 1) * sizeof(float));
    size_t got = d ? fread(d, sizeof(float), (size_t)n, f) : 0;
    int extra = fgetc(f) != EOF;
    fclose(f);
    if (!d || got != (size_t)n || extra) {
        snprintf(msg, msz, "%s: want exactly %lld float32 values (%lld bytes), got %s", path,
                 (long long)n, (long long)n * 4, got != (size_t)n ? "fewer" : "more");
        free(d);
        return NULL;
    }
    /* The files are little-endian; so is every host the suite runs on, but check. */
    const uint16_t one = 1;
    if (*(const uint8_t *)&one != 1)
        for (int64_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, &d[i], 4);
            u = __builtin_bswap32(u);
            memcpy(&d[i], &u, 4);
        }
    return d;
}

/* Loads golden-<case>.json from dir with all its arrays. NULL and a message on any failure. */
static golden *golden_load_from(const char *dir, const char *gcase, char *msg, size_t msz)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/golden-%s.json", dir, gcase);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) {
        snprintf(msg, msz, "%s: line %d: %s", path, jerr.line, jerr.text);
        return NULL;
    }
    golden *g = calloc(1, sizeof *g);
    g->root = root;
    g->params = json_object_get(root, "params");
    json_t *arrays = json_object_get(root, "arrays");
    if (!json_is_object(g->params) || !json_is_object(arrays)) {
        snprintf(msg, msz, "%s: needs objects \"params\" and \"arrays\"", path);
        golden_free(g);
        return NULL;
    }
    const char *key;
    json_t *val;
    json_object_foreach(arrays, key, val)
    {
        json_t *shape = json_object_get(val, "shape"), *file = json_object_get(val, "file");
        if (g->count == MAX_ARRAYS || strlen(key) >= sizeof g->arrays[0].name ||
            !json_is_array(shape) || json_array_size(shape) > PGD_MAX_DIMS ||
            !json_is_string(file) || strchr(json_string_value(file), '/')) {
            snprintf(msg, msz,
                     "%s: array \"%s\" needs a shape (at most %d dims) and a plain file name", path,
                     key, PGD_MAX_DIMS);
            golden_free(g);
            return NULL;
        }
        golden_array *a = &g->arrays[g->count++];
        snprintf(a->name, sizeof a->name, "%s", key);
        a->ndim = (int)json_array_size(shape);
        a->n = 1;
        for (int i = 0; i < a->ndim; i++) {
            json_t *d = json_array_get(shape, (size_t)i);
            if (!json_is_integer(d) || json_integer_value(d) < 0 ||
                json_integer_value(d) > 100000000) {
                snprintf(msg, msz, "%s: array \"%s\": bad dimension %d", path, key, i);
                golden_free(g);
                return NULL;
            }
            a->shape[i] = json_integer_value(d);
            a->n *= a->shape[i];
        }
        char bin[4096];
        snprintf(bin, sizeof bin, "%s/%s", dir, json_string_value(file));
        a->data = read_floats(bin, a->n, msg, msz);
        if (!a->data) {
            golden_free(g);
            return NULL;
        }
    }
    return g;
}

static const char *data_dir(void)
{
    const char *dir = getenv("PAGODA_TEST_DATA");
    ck_assert_msg(dir && *dir, "PAGODA_TEST_DATA is not set (meson test sets it to tests/data)");
    return dir;
}

/* Loads a case or fails the test. */
static golden *golden_load(const char *gcase)
{
    char msg[8192] = "";
    golden *g = golden_load_from(data_dir(), gcase, msg, sizeof msg);
    ck_assert_msg(g != NULL, "golden case %s: %s", gcase, msg);
    return g;
}

/* The array `name` with the given shape (ndim dims), or fails the test. */
static const golden_array *arr(const golden *g, const char *name, int ndim, const int64_t *shape)
{
    for (size_t i = 0; i < g->count; i++) {
        const golden_array *a = &g->arrays[i];
        if (strcmp(a->name, name))
            continue;
        int same = a->ndim == ndim;
        for (int d = 0; same && d < ndim; d++)
            same = a->shape[d] == shape[d];
        ck_assert_msg(same, "golden array %s: shape differs from the case's parameters", name);
        return a;
    }
    ck_abort_msg("golden array %s missing", name);
    return NULL;
}

static int64_t iparam(const golden *g, const char *key)
{
    json_t *v = json_object_get(g->params, key);
    ck_assert_msg(json_is_integer(v), "golden parameter %s missing or not an integer", key);
    return json_integer_value(v);
}

static double rparam(const golden *g, const char *key)
{
    json_t *v = json_object_get(g->params, key);
    ck_assert_msg(json_is_number(v), "golden parameter %s missing or not a number", key);
    return json_number_value(v);
}

static pgd_tensor *upload(pgd_ctx *ctx, const golden_array *a)
{
    pgd_tensor *t = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_tensor_create(ctx, a->ndim, a->shape, &t, &err), &err);
    PGD_CHECK_OK(pgd_tensor_upload(t, a->data, &err), &err);
    return t;
}

/* A tensor of a's shape filled with NaN, so an unwritten element cannot pass. */
static pgd_tensor *poisoned(pgd_ctx *ctx, const golden_array *a)
{
    pgd_tensor *t = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_tensor_create(ctx, a->ndim, a->shape, &t, &err), &err);
    float *h = malloc((size_t)a->n * sizeof(float));
    for (int64_t i = 0; i < a->n; i++)
        h[i] = NAN;
    PGD_CHECK_OK(pgd_tensor_upload(t, h, &err), &err);
    free(h);
    return t;
}

static double *widen(const golden_array *a)
{
    double *w = malloc((size_t)a->n * sizeof(double));
    for (int64_t i = 0; i < a->n; i++)
        w[i] = a->data[i];
    return w;
}

/* Downloads t and compares with want; returns allclose's verdict. got_out (optional) receives
 * the downloaded values (malloc'd). */
static int compare(const pgd_tensor *t, const golden_array *want, double rtol, double atol,
                   const char *what, float **got_out)
{
    pgd_error *err = NULL;
    float *got = malloc((size_t)want->n * sizeof(float));
    PGD_CHECK_OK(pgd_tensor_download(t, got, &err), &err);
    double *w = widen(want);
    int ok = pgd_test_allclose(got, w, (size_t)want->n, rtol, atol, what);
    free(w);
    if (got_out)
        *got_out = got;
    else
        free(got);
    return ok;
}

/* The query-dependent part of an attention output on its own: in each of `groups` blocks of
 * `rows` query rows `width` wide, every row minus the block's first, within 1e-3 of that
 * difference's size. Near-uniform attention gives every query the same output, so a slip (heads
 * split the wrong way moved it by 1.0 and 1.6 of its size, tools/golden/make-golden.py) could hide
 * in what the rows share; the goldens' peaked softmax and this check keep it visible. */
static void check_query_part(const float *got, const golden_array *want, int64_t groups,
                             int64_t rows, int64_t width, const char *what)
{
    double *w = widen(want), worst = 0;
    for (int64_t g = 0; g < groups; g++) {
        size_t off = (size_t)(g * rows * width);
        worst = fmax(worst, pgd_test_diff_error(got + off, w + off, (size_t)rows, (size_t)width,
                                                (size_t)width, NULL));
    }
    free(w);
    printf("%s: query rows minus the first within %.3g of their size\n", what, worst);
    ck_assert_msg(worst <= 1e-3, "%s: query rows minus the first off by %.3g of their size", what,
                  worst);
}

/* Tolerances. Attention: softmax and a D-term dot product in float, values O(1): the suite's
 * usual rtol 1e-4, atol 1e-5. Patch embedding: K = C·P·P = 48 float products summed per output
 * with inputs O(1); as in test_patch.c the absolute slack grows with K. */
#define RTOL 1e-4
#define ATOL 1e-5

static const char *variants[] = {"rows", "tiled", "generic"};

/* BHND contiguous view of a [B, H, N, D] tensor. */
static pgd_view bhnd(const pgd_tensor *t, int64_t H, int64_t N, int64_t D)
{
    return (pgd_view){t, 0, H * N * D, N * D, D};
}

static void run_bhnd_case(const char *gcase, int with_mask)
{
    golden *g = golden_load(gcase);
    int64_t B = iparam(g, "batch"), H = iparam(g, "heads"), Nq = iparam(g, "nq"),
            Nk = iparam(g, "nk"), D = iparam(g, "head_dim");
    int causal = (int)iparam(g, "causal");
    float scale = (float)rparam(g, "scale");
    int64_t sq[4] = {B, H, Nq, D}, sk[4] = {B, H, Nk, D}, sm[2] = {Nq, Nk};
    const golden_array *q = arr(g, "q", 4, sq), *k = arr(g, "k", 4, sk), *v = arr(g, "v", 4, sk);
    const golden_array *want = arr(g, "want_out", 4, sq);
    const golden_array *m = with_mask ? arr(g, "mask", 2, sm) : NULL;
    size_t ndev;
    const pgd_device_info *devs = pgd_test_devices(&ndev);
    for (size_t di = 0; di < ndev; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&devs[di]);
        pgd_error *err = NULL;
        pgd_tensor *tq = upload(ctx, q), *tk = upload(ctx, k), *tv = upload(ctx, v);
        pgd_tensor *tm = m ? upload(ctx, m) : NULL;
        for (int var = 0; var < 3; var++) {
            ctx->opt.attention = (pgd_attention_variant)(PGD_ATTENTION_ROWS + var); /* variants[] */
            pgd_tensor *to = poisoned(ctx, want);
            pgd_attention_args a;
            memset(&a, 0, sizeof a);
            a.batch = B, a.heads = H, a.nq = Nq, a.nk = Nk, a.head_dim = D;
            a.scale = scale;
            a.causal = causal;
            a.q = bhnd(tq, H, Nq, D);
            a.k = bhnd(tk, H, Nk, D);
            a.v = bhnd(tv, H, Nk, D);
            a.o = bhnd(to, H, Nq, D);
            if (tm) /* [Nq, Nk] broadcast over batch and head: strides 0 */
                a.mask = (pgd_view){tm, 0, 0, 0, Nk};
            PGD_CHECK_OK(pgd_attention(ctx, &a, &err), &err);
            char what[256];
            snprintf(what, sizeof what, "golden %s on %s (%s)", gcase, devs[di].name,
                     variants[var]);
            float *got = NULL;
            ck_assert_msg(compare(to, want, RTOL, ATOL, what, &got), "%s", what);
            check_query_part(got, want, B * H, Nq, D, what);
            free(got);
            pgd_tensor_destroy(to);
        }
        ctx->opt.attention = PGD_ATTENTION_AUTO;
        pgd_tensor_destroy(tq);
        pgd_tensor_destroy(tk);
        pgd_tensor_destroy(tv);
        pgd_tensor_destroy(tm);
        pgd_ctx_destroy(ctx);
    }
    golden_free(g);
}

START_TEST(golden_attention_causal)
{
    run_bhnd_case("attn-causal", 0);
}
END_TEST

START_TEST(golden_attention_cross_mask)
{
    run_bhnd_case("attn-cross", 1);
}
END_TEST

/* (a) pgd_attention_qkv on the timm layout; (d) the probabilities of one head and a row range
 * through pgd_attention with views into the same qkv; and the negative check: one expected
 * value moved by 1e-2 must make the comparison fail. */
START_TEST(golden_attention_qkv_and_probs)
{
    golden *g = golden_load("attn-qkv");
    int64_t B = iparam(g, "batch"), N = iparam(g, "tokens"), H = iparam(g, "heads"),
            D = iparam(g, "head_dim");
    int ph = (int)iparam(g, "probs_head");
    int64_t q0 = iparam(g, "probs_q0"), q1 = iparam(g, "probs_q1");
    double scale = rparam(g, "scale");
    ck_assert_msg(fabs(scale - 1.0 / sqrt((double)D)) < 1e-12,
                  "pgd_attention_qkv uses 1/sqrt(D); the case says %g", scale);
    int64_t sqkv[3] = {B, N, 3 * H * D}, so[3] = {B, N, H * D}, sp[4] = {B, 1, q1 - q0, N};
    const golden_array *qkv = arr(g, "qkv", 3, sqkv), *want = arr(g, "want_out", 3, so);
    const golden_array *wprobs = arr(g, "want_probs", 4, sp);
    size_t ndev;
    const pgd_device_info *devs = pgd_test_devices(&ndev);
    for (size_t di = 0; di < ndev; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&devs[di]);
        pgd_error *err = NULL;
        char what[256];
        pgd_tensor *tqkv = upload(ctx, qkv), *to = poisoned(ctx, want);
        PGD_CHECK_OK(pgd_attention_qkv(ctx, tqkv, H, to, &err), &err);
        snprintf(what, sizeof what, "golden attn-qkv on %s", devs[di].name);
        float *got = NULL;
        ck_assert_msg(compare(to, want, RTOL, ATOL, what, &got), "%s", what);
        check_query_part(got, want, B, N, H * D, what);

        /* Negative check: the same output against a copy with one value off by 1e-2. */
        double *bad = widen(want);
        bad[want->n / 2] += 1e-2;
        snprintf(what, sizeof what, "golden attn-qkv on %s, one value perturbed (must fail)",
                 devs[di].name);
        ck_assert_msg(!pgd_test_allclose(got, bad, (size_t)want->n, RTOL, ATOL, what),
                      "a 1e-2 error passed the comparison");
        free(bad);
        free(got);

        for (int var = 0; var < 3; var++) {
            ctx->opt.attention = (pgd_attention_variant)(PGD_ATTENTION_ROWS + var); /* variants[] */
            pgd_tensor *to2 = poisoned(ctx, want), *tp = poisoned(ctx, wprobs);
            int64_t tok = 3 * H * D;
            pgd_attention_args a;
            memset(&a, 0, sizeof a);
            a.batch = B, a.heads = H, a.nq = N, a.nk = N, a.head_dim = D;
            a.q = (pgd_view){tqkv, 0, N * tok, D, tok};
            a.k = (pgd_view){tqkv, H * D, N * tok, D, tok};
            a.v = (pgd_view){tqkv, 2 * H * D, N * tok, D, tok};
            a.o = (pgd_view){to2, 0, N * H * D, D, H * D}; /* BNHD = [B, N, H·D] */
            a.probs = tp;
            a.probs_head = ph;
            a.probs_q0 = q0;
            a.probs_q1 = q1;
            PGD_CHECK_OK(pgd_attention(ctx, &a, &err), &err);
            snprintf(what, sizeof what, "golden attn-qkv via views on %s (%s)", devs[di].name,
                     variants[var]);
            float *got2 = NULL;
            ck_assert_msg(compare(to2, want, RTOL, ATOL, what, &got2), "%s", what);
            check_query_part(got2, want, B, N, H * D, what);
            free(got2);
            snprintf(what, sizeof what,
                     "golden attn-qkv probabilities head %d rows [%lld, %lld) on %s (%s)", ph,
                     (long long)q0, (long long)q1, devs[di].name, variants[var]);
            ck_assert_msg(compare(tp, wprobs, RTOL, ATOL, what, NULL), "%s", what);
            pgd_tensor_destroy(to2);
            pgd_tensor_destroy(tp);
        }
        ctx->opt.attention = PGD_ATTENTION_AUTO;
        pgd_tensor_destroy(tqkv);
        pgd_tensor_destroy(to);
        pgd_ctx_destroy(ctx);
    }
    golden_free(g);
}
END_TEST

static void run_patch_case(const char *gcase, int with_dist)
{
    golden *g = golden_load(gcase);
    int64_t B = iparam(g, "batch"), C = iparam(g, "channels"), Hh = iparam(g, "height"),
            Ww = iparam(g, "width"), P = iparam(g, "patch"), D = iparam(g, "dim"),
            T = iparam(g, "tokens");
    ck_assert_int_eq(iparam(g, "extra"), with_dist ? 2 : 1);
    int64_t si[4] = {B, C, Hh, Ww}, sw[4] = {D, C, P, P}, sd[1] = {D}, sp[2] = {T, D},
            so[3] = {B, T, D};
    const golden_array *img = arr(g, "image", 4, si), *w = arr(g, "weight", 4, sw);
    const golden_array *bias = arr(g, "bias", 1, sd), *cls = arr(g, "cls", 1, sd);
    const golden_array *dist = with_dist ? arr(g, "dist", 1, sd) : NULL;
    const golden_array *pos = arr(g, "pos", 2, sp), *want = arr(g, "want_out", 3, so);
    double atol = ATOL + 2e-6 * (double)(C * P * P);
    size_t ndev;
    const pgd_device_info *devs = pgd_test_devices(&ndev);
    for (size_t di = 0; di < ndev; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&devs[di]);
        pgd_error *err = NULL;
        pgd_tensor *ti = upload(ctx, img), *tw = upload(ctx, w), *tb = upload(ctx, bias);
        pgd_tensor *tc = upload(ctx, cls), *td = dist ? upload(ctx, dist) : NULL;
        pgd_tensor *tp = upload(ctx, pos), *to = poisoned(ctx, want);
        PGD_CHECK_OK(pgd_patch_embed(ctx, ti, tw, tb, tc, td, tp, to, &err), &err);
        char what[256];
        snprintf(what, sizeof what, "golden %s on %s", gcase, devs[di].name);
        ck_assert_msg(compare(to, want, RTOL, atol, what, NULL), "%s", what);
        pgd_tensor *all[] = {ti, tw, tb, tc, td, tp, to};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
            pgd_tensor_destroy(all[i]);
        pgd_ctx_destroy(ctx);
    }
    golden_free(g);
}

START_TEST(golden_patch_embed_cls)
{
    run_patch_case("patch-cls", 0);
}
END_TEST

START_TEST(golden_patch_embed_dist)
{
    run_patch_case("patch-dist", 1);
}
END_TEST

/* The pgd_resize_mode a golden's "mode" parameter names (make-golden.py's names). */
static pgd_resize_mode resize_mode(const golden *g)
{
    const char *m = json_string_value(json_object_get(g->params, "mode"));
    ck_assert_ptr_nonnull(m);
    static const char *const names[] = {"bicubic", "align-corners", "antialias", "hf"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(m, names[i]))
            return (pgd_resize_mode)i;
    ck_abort_msg("unknown resize mode '%s'", m);
    return PGD_RESIZE_BICUBIC;
}

static void run_pos_resize_case(const char *gcase)
{
    golden *g = golden_load(gcase);
    int extra = (int)iparam(g, "extra"), gh = (int)iparam(g, "gh"), gw = (int)iparam(g, "gw"),
        gh2 = (int)iparam(g, "gh2"), gw2 = (int)iparam(g, "gw2");
    int64_t D = iparam(g, "dim");
    pgd_resize_mode mode = resize_mode(g);
    int64_t sp[2] = {extra + (int64_t)gh * gw, D}, so[2] = {extra + (int64_t)gh2 * gw2, D};
    const golden_array *pos = arr(g, "pos", 2, sp), *want = arr(g, "want_out", 2, so);
    size_t ndev;
    const pgd_device_info *devs = pgd_test_devices(&ndev);
    for (size_t di = 0; di < ndev; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&devs[di]);
        pgd_error *err = NULL;
        pgd_tensor *tp = upload(ctx, pos), *to = poisoned(ctx, want);
        PGD_CHECK_OK(pgd_pos_embed_resize(ctx, tp, extra, gh, gw, gh2, gw2, mode, to, &err), &err);
        char what[256];
        snprintf(what, sizeof what, "golden %s %dx%d -> %dx%d on %s", gcase, gh, gw, gh2, gw2,
                 devs[di].name);
        float *got = NULL;
        ck_assert_msg(compare(to, want, RTOL, ATOL, what, &got), "%s", what);
        double worst = 0.0;
        for (int64_t i = 0; i < want->n; i++)
            worst = fmax(worst, fabs((double)got[i] - (double)want->data[i]));
        printf("%s: max abs error %.3g\n", what, worst);
        free(got);
        pgd_tensor_destroy(tp);
        pgd_tensor_destroy(to);
        pgd_ctx_destroy(ctx);
    }
    golden_free(g);
}

START_TEST(golden_pos_resize)
{
    run_pos_resize_case("pos-resize");
}
END_TEST

/* Each mode, up and down (the rule of each weight family at another image size). */
START_TEST(golden_pos_resize_modes)
{
    static const char *const cases[] = {"pos-resize-bicubic-up",
                                        "pos-resize-bicubic-down",
                                        "pos-resize-align-corners-up",
                                        "pos-resize-align-corners-down",
                                        "pos-resize-antialias-up",
                                        "pos-resize-antialias-down",
                                        "pos-resize-hf-up",
                                        "pos-resize-hf-down"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_pos_resize_case(cases[i]);
}
END_TEST

/* PyTorch's 1-D weights of each mode for every size 1..6 -> 1..9: the double reference of
 * reference.c (which test_patch.c checks the kernels against) and the device, resizing a 1 x in
 * grid of unit rows (D = in) to 1 x out, whose output is W [out, in] itself. */
START_TEST(golden_resize_weights)
{
    golden *g = golden_load("resize-weights");
    int in_max = (int)iparam(g, "in_max"), out_max = (int)iparam(g, "out_max");
    static const char *const names[] = {"bicubic", "align-corners", "antialias", "hf"};
    int64_t total = 0;
    for (int n_in = 1; n_in <= in_max; n_in++)
        total += (int64_t)n_in * out_max * (out_max + 1) / 2;
    size_t ndev;
    const pgd_device_info *devs = pgd_test_devices(&ndev);
    double *w = malloc((size_t)(in_max * out_max) * sizeof *w);
    float *eye = malloc((size_t)(in_max * in_max) * sizeof *eye);
    float *got = malloc((size_t)(in_max * out_max) * sizeof *got);
    ck_assert(w && eye && got);
    for (int mode = 0; mode < 4; mode++) {
        const golden_array *want = arr(g, names[mode], 1, &total);
        double worst_ref = 0.0, worst_dev = 0.0;
        int64_t off = 0;
        for (int n_in = 1; n_in <= in_max; n_in++) {
            for (int n_out = 1; n_out <= out_max; n_out++) {
                const float *wm = want->data + off;
                off += (int64_t)n_in * n_out;
                pgd_ref_resize_weights((size_t)n_in, (size_t)n_out, mode, w);
                for (int k = 0; k < n_in * n_out; k++) {
                    double e = fabs(w[k] - (double)wm[k]);
                    worst_ref = fmax(worst_ref, e);
                    ck_assert_msg(e < 1e-6, "reference %s %d -> %d, weight %d: %.9g vs %.9g",
                                  names[mode], n_in, n_out, k, w[k], (double)wm[k]);
                }
                for (int k = 0; k < n_in * n_in; k++)
                    eye[k] = k % (n_in + 1) == 0 ? 1.0f : 0.0f;
                int64_t sp[2] = {n_in, n_in}, so[2] = {n_out, n_in};
                for (size_t di = 0; di < ndev; di++) {
                    pgd_ctx *ctx = pgd_test_ctx(&devs[di]);
                    pgd_error *err = NULL;
                    pgd_tensor *tp = pgd_test_upload(ctx, 2, sp, eye), *to = NULL;
                    PGD_CHECK_OK(pgd_tensor_create(ctx, 2, so, &to, &err), &err);
                    PGD_CHECK_OK(pgd_pos_embed_resize(ctx, tp, 0, 1, n_in, 1, n_out,
                                                      (pgd_resize_mode)mode, to, &err),
                                 &err);
                    PGD_CHECK_OK(pgd_tensor_download(to, got, &err), &err);
                    for (int k = 0; k < n_in * n_out; k++) {
                        double e = fabs((double)got[k] - (double)wm[k]);
                        worst_dev = fmax(worst_dev, e);
                        ck_assert_msg(e < 2e-6, "%s on %s %d -> %d, weight %d: %.9g vs %.9g",
                                      names[mode], devs[di].name, n_in, n_out, k, (double)got[k],
                                      (double)wm[k]);
                    }
                    pgd_tensor_destroy(tp);
                    pgd_tensor_destroy(to);
                    pgd_ctx_destroy(ctx);
                }
            }
        }
        ck_assert_int_eq(off, total);
        printf("resize weights %s: max abs error reference %.3g, devices %.3g\n", names[mode],
               worst_ref, worst_dev);
    }
    free(w);
    free(eye);
    free(got);
    golden_free(g);
}
END_TEST

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

/* The loader refuses what it must: a missing case, malformed JSON, a short or long .bin, a
 * missing .bin, a bad shape. (golden_load turns each refusal into a test failure.) */
START_TEST(golden_loader_rejects_bad_files)
{
    char *dir = pgd_test_tempdir("golden");
    char msg[8192], path[4096];
    const float four[4] = {1, 2, 3, 4};
    ck_assert_ptr_null(golden_load_from(dir, "absent", msg, sizeof msg));
    ck_assert_ptr_nonnull(strstr(msg, "golden-absent.json"));

    snprintf(path, sizeof path, "%s/golden-bad.json", dir);
    write_file(path, "{\"params\": {", 12);
    ck_assert_ptr_null(golden_load_from(dir, "bad", msg, sizeof msg));

    const char *ok =
        "{\"params\": {}, \"arrays\": {\"x\": {\"shape\": [2, 2], \"file\": \"x.bin\"}}}";
    snprintf(path, sizeof path, "%s/golden-x.json", dir);
    write_file(path, ok, strlen(ok));
    ck_assert_ptr_null(golden_load_from(dir, "x", msg, sizeof msg)); /* no x.bin */
    snprintf(path, sizeof path, "%s/x.bin", dir);
    write_file(path, four, 3 * sizeof(float));
    ck_assert_ptr_null(golden_load_from(dir, "x", msg, sizeof msg)); /* short */
    ck_assert_ptr_nonnull(strstr(msg, "exactly 4"));
    const float five[5] = {1, 2, 3, 4, 5};
    write_file(path, five, sizeof five);
    ck_assert_ptr_null(golden_load_from(dir, "x", msg, sizeof msg)); /* long */
    write_file(path, four, sizeof four);
    golden *g = golden_load_from(dir, "x", msg, sizeof msg);
    ck_assert_msg(g != NULL, "%s", msg);
    ck_assert_int_eq(g->count, 1);
    ck_assert_int_eq(g->arrays[0].n, 4);
    ck_assert(g->arrays[0].data[3] == 4.0f);
    golden_free(g);

    const char *badshape =
        "{\"params\": {}, \"arrays\": {\"x\": {\"shape\": [2, -2], \"file\": \"x.bin\"}}}";
    write_file(path, four, sizeof four);
    snprintf(path, sizeof path, "%s/golden-x.json", dir);
    write_file(path, badshape, strlen(badshape));
    ck_assert_ptr_null(golden_load_from(dir, "x", msg, sizeof msg));
    pgd_test_rmtree(dir);
    free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("golden");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, golden_loader_rejects_bad_files);
    tcase_add_test(tc, golden_attention_qkv_and_probs);
    tcase_add_test(tc, golden_attention_causal);
    tcase_add_test(tc, golden_attention_cross_mask);
    tcase_add_test(tc, golden_patch_embed_cls);
    tcase_add_test(tc, golden_patch_embed_dist);
    tcase_add_test(tc, golden_pos_resize);
    tcase_add_test(tc, golden_pos_resize_modes);
    tcase_add_test(tc, golden_resize_weights);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
