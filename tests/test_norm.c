/* test_norm.c — LayerNorm, softmax, GELU (erf and tanh), ReLU and bias add against the double
 * references of reference.c, on every device, over at least 100 seeded shapes per op (the
 * awkward sizes first), with NaN-poisoned outputs, NaN after every input and a canary after every
 * output (a NaN with its own payload) that must survive bit for bit. Some runs are in place. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "reference.h"

static const int64_t awkward[] = {1, 2, 3, 7, 13, 31, 63, 64, 65, 127, 197, 257};
#define N_AWKWARD (sizeof awkward / sizeof awkward[0])
#define TRIALS 110
#define CANARY 19

typedef enum op_kind {
    OP_LAYERNORM,
    OP_SOFTMAX,
    OP_GELU_ERF,
    OP_GELU_TANH,
    OP_RELU,
    OP_BIAS
} op_kind;

static const char *op_name(op_kind op)
{
    static const char *names[] = {"layernorm", "softmax", "gelu_erf",
                                  "gelu_tanh", "relu",    "bias_add"};
    return names[op];
}

/* Rows and cols of trial `trial`: every awkward size as cols and as rows first, then random
 * sizes, half of them near the awkward ones; the total is capped (smaller on software
 * rasterisers, which are slow). */
static void pick_shape(pgd_rng *r, int trial, const pgd_device_info *d, int64_t *rows,
                       int64_t *cols)
{
    int64_t cap = d->software_rasteriser ? 3000 : 40000;
    int64_t max_cols = d->software_rasteriser ? 1500 : 5000;
    if (trial < (int)N_AWKWARD) {
        *cols = awkward[trial];
        *rows = awkward[(trial * 5 + 3) % N_AWKWARD];
    } else if (trial < 2 * (int)N_AWKWARD) {
        *rows = awkward[trial - N_AWKWARD];
        *cols = pgd_rng_int(r, 1, 400);
    } else if (pgd_rng_int(r, 0, 1)) {
        *cols = awkward[pgd_rng_int(r, 0, N_AWKWARD - 1)] + pgd_rng_int(r, -1, 1);
        if (*cols < 1)
            *cols = 1;
        *rows = pgd_rng_int(r, 1, 300);
    } else {
        *cols = pgd_rng_int(r, 1, max_cols);
        *rows = pgd_rng_int(r, 1, 40);
    }
    if (*cols > cap)
        *cols = cap;
    while (*rows > 1 && *rows * *cols > cap)
        *rows = (*rows + 1) / 2;
}

static pgd_tensor *make(pgd_ctx *ctx, int64_t n, pgd_error **err)
{
    pgd_tensor *t = NULL;
    int64_t shape[1] = {n};
    PGD_CHECK_OK(pgd_tensor_create(ctx, 1, shape, &t, err), err);
    return t;
}

/* vars: the contexts' settings ("PAGODA_ROW_WG=1024", ... ending in NULL; NULL for none). */
static void run_op(op_kind op, uint64_t seed, int trials, const char *const *vars)
{
    size_t ndev;
    const pgd_device_info *devs = pgd_test_devices(&ndev);
    for (size_t di = 0; di < ndev; di++) {
        const pgd_device_info *d = &devs[di];
        pgd_ctx *ctx = pgd_test_ctx_with(d, vars);
        pgd_error *err = NULL;
        pgd_rng r;
        pgd_rng_seed(&r, seed);
        for (int trial = 0; trial < trials; trial++) {
            int64_t rows, cols;
            pick_shape(&r, trial, d, &rows, &cols);
            int64_t n = rows * cols, full = n + CANARY;
            int in_place = trial % 3 == 2;
            /* LayerNorm: every fourth row set sits on a large common offset. */
            double offset = op == OP_LAYERNORM && trial % 4 == 1 ? 1e3 : 0.0;
            double spread = offset != 0.0 ? 1e-2 : op == OP_SOFTMAX ? 5.0 : 6.0;
            int affine = !(op == OP_LAYERNORM && trial % 5 == 4);
            float scale = op == OP_SOFTMAX ? pgd_rng_float(&r) * 3.0f : 1.0f;
            static const float eps_choices[] = {1e-5f, 1e-6f, 1e-12f, 0.1f};
            float eps = eps_choices[trial % 4];

            float *hx = malloc((size_t)full * sizeof(float));
            float *hy = malloc((size_t)full * sizeof(float));
            float *hw = malloc((size_t)cols * sizeof(float));
            float *hb = malloc((size_t)cols * sizeof(float));
            double *want = malloc((size_t)n * sizeof(double));
            ck_assert(hx && hy && hw && hb && want);
            for (int64_t i = 0; i < full; i++) {
                /* In place, x's tail is the output's canary; otherwise a plain NaN that
                 * poisons any result read from beyond x. */
                hx[i] = i < n      ? (float)(offset + spread * pgd_rng_float(&r))
                        : in_place ? pgd_test_canary()
                                   : NAN;
                hy[i] = i < n ? NAN : pgd_test_canary(); /* poison: an unwritten element fails */
            }
            for (int64_t c = 0; c < cols; c++) {
                hw[c] = 1.0f + 0.5f * pgd_rng_float(&r);
                hb[c] = pgd_rng_float(&r);
            }
            pgd_tensor *x = make(ctx, full, &err), *y = in_place ? x : make(ctx, full, &err);
            pgd_tensor *w = make(ctx, cols, &err), *b = make(ctx, cols, &err);
            PGD_CHECK_OK(pgd_tensor_upload(x, hx, &err), &err);
            if (!in_place)
                PGD_CHECK_OK(pgd_tensor_upload(y, hy, &err), &err);
            PGD_CHECK_OK(pgd_tensor_upload(w, hw, &err), &err);
            PGD_CHECK_OK(pgd_tensor_upload(b, hb, &err), &err);

            /* The op sees [rows, cols] (sometimes [2, rows/2, cols]); the canary lies beyond. */
            int64_t s2[2] = {rows, cols}, s3[3] = {2, rows / 2, cols};
            int three = rows % 2 == 0 && trial % 7 == 3;
            pgd_tensor *vx = three ? pgd_test_prefix(x, 3, s3) : pgd_test_prefix(x, 2, s2);
            pgd_tensor *vy = in_place ? vx
                             : three  ? pgd_test_prefix(y, 3, s3)
                                      : pgd_test_prefix(y, 2, s2);
            switch (op) {
            case OP_LAYERNORM:
                PGD_CHECK_OK(
                    pgd_layernorm(ctx, vx, affine ? w : NULL, affine ? b : NULL, eps, vy, &err),
                    &err);
                pgd_ref_layernorm(hx, affine ? hw : NULL, affine ? hb : NULL, (size_t)rows,
                                  (size_t)cols, eps, want);
                break;
            case OP_SOFTMAX:
                PGD_CHECK_OK(pgd_softmax(ctx, vx, scale, vy, &err), &err);
                pgd_ref_softmax(hx, (size_t)rows, (size_t)cols, scale, want);
                break;
            case OP_GELU_ERF:
                PGD_CHECK_OK(pgd_gelu(ctx, vx, vy, 0, &err), &err);
                pgd_ref_gelu_erf(hx, (size_t)n, want);
                break;
            case OP_GELU_TANH:
                PGD_CHECK_OK(pgd_gelu(ctx, vx, vy, 1, &err), &err);
                pgd_ref_gelu_tanh(hx, (size_t)n, want);
                break;
            case OP_RELU:
                PGD_CHECK_OK(pgd_relu(ctx, vx, vy, &err), &err);
                pgd_ref_relu(hx, (size_t)n, want);
                break;
            case OP_BIAS:
                PGD_CHECK_OK(pgd_bias_add(ctx, vx, b, vy, &err), &err);
                pgd_ref_bias_add(hx, hb, (size_t)rows, (size_t)cols, want);
                break;
            }
            PGD_CHECK_OK(pgd_tensor_download(y, hy, &err), &err);

            /* fp32 against double: relative and absolute slack per op. */
            double rtol = 1e-5, atol = 1e-5;
            if (op == OP_LAYERNORM)
                rtol = 1e-4, atol = 2e-4;
            else if (op == OP_SOFTMAX)
                rtol = 1e-4, atol = 1e-6;
            else if (op == OP_RELU)
                rtol = 0, atol = 0;
            else if (op == OP_BIAS)
                rtol = 1e-6, atol = 1e-6;
            char what[160];
            snprintf(what, sizeof what, "%s on %s [%lld, %lld]%s", op_name(op), d->name,
                     (long long)rows, (long long)cols, in_place ? " in place" : "");
            ck_assert_msg(pgd_test_allclose(hy, want, (size_t)n, rtol, atol, what),
                          "%s (trial %d, scale %g, eps %g, affine %d)", what, trial, (double)scale,
                          (double)eps, affine);
            for (int64_t i = n; i < full; i++)
                ck_assert_msg(pgd_test_is_canary(hy[i]), "%s: canary %lld overwritten", what,
                              (long long)(i - n));
            if (vy != vx)
                free(vy);
            free(vx);
            if (!in_place)
                pgd_tensor_destroy(y);
            pgd_tensor_destroy(x);
            pgd_tensor_destroy(w);
            pgd_tensor_destroy(b);
            free(hx);
            free(hy);
            free(hw);
            free(hb);
            free(want);
        }
        pgd_ctx_destroy(ctx);
    }
}

START_TEST(layernorm_shapes)
{
    run_op(OP_LAYERNORM, 101, TRIALS, NULL);
}
END_TEST
/* CPUs run the row kernels with a few work-items per row; PAGODA_ROW_WG lifts that cap so the
 * wide tree reductions a GPU uses (up to 1024 items, within 32 KiB of local memory on rusticl)
 * run here too. */
static void run_wide(op_kind op, uint64_t seed)
{
    run_op(op, seed, 40, (const char *const[]){"PAGODA_ROW_WG=1024", NULL});
}

START_TEST(layernorm_shapes_wide_groups)
{
    run_wide(OP_LAYERNORM, 111);
}
END_TEST
START_TEST(softmax_shapes_wide_groups)
{
    run_wide(OP_SOFTMAX, 222);
}
END_TEST
START_TEST(softmax_shapes)
{
    run_op(OP_SOFTMAX, 202, TRIALS, NULL);
}
END_TEST
START_TEST(gelu_erf_shapes)
{
    run_op(OP_GELU_ERF, 303, TRIALS, NULL);
}
END_TEST
START_TEST(gelu_tanh_shapes)
{
    run_op(OP_GELU_TANH, 404, TRIALS, NULL);
}
END_TEST
START_TEST(relu_shapes)
{
    run_op(OP_RELU, 505, TRIALS, NULL);
}
END_TEST
START_TEST(bias_add_shapes)
{
    run_op(OP_BIAS, 606, TRIALS, NULL);
}
END_TEST

/* A row of 1e3 + tiny noise: the naive E[x²] - E[x]² in float would give garbage; the result
 * must still match the double reference closely. */
START_TEST(layernorm_large_mean_long_rows)
{
    size_t ndev;
    const pgd_device_info *devs = pgd_test_devices(&ndev);
    for (size_t di = 0; di < ndev; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&devs[di]);
        pgd_error *err = NULL;
        pgd_rng r;
        pgd_rng_seed(&r, 77);
        int64_t rows = 3, cols = devs[di].software_rasteriser ? 2500 : 20000;
        int64_t n = rows * cols;
        float *hx = malloc((size_t)n * sizeof(float));
        double *want = malloc((size_t)n * sizeof(double));
        for (int64_t i = 0; i < n; i++)
            hx[i] = (float)(1e3 + 1e-2 * pgd_rng_float(&r) + (i / cols) * 1e2);
        int64_t shape[2] = {rows, cols};
        pgd_tensor *x = NULL;
        PGD_CHECK_OK(pgd_tensor_create(ctx, 2, shape, &x, &err), &err);
        PGD_CHECK_OK(pgd_tensor_upload(x, hx, &err), &err);
        PGD_CHECK_OK(pgd_layernorm(ctx, x, NULL, NULL, 1e-12f, x, &err), &err);
        pgd_ref_layernorm(hx, NULL, NULL, (size_t)rows, (size_t)cols, 1e-12, want);
        PGD_CHECK_OK(pgd_tensor_download(x, hx, &err), &err);
        ck_assert_msg(pgd_test_allclose(hx, want, (size_t)n, 1e-4, 1e-4, "layernorm large mean"),
                      "%s", devs[di].name);
        pgd_tensor_destroy(x);
        free(hx);
        free(want);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

/* Huge logits do not overflow: the row maximum is subtracted. */
START_TEST(softmax_large_logits)
{
    size_t ndev;
    const pgd_device_info *devs = pgd_test_devices(&ndev);
    for (size_t di = 0; di < ndev; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&devs[di]);
        pgd_error *err = NULL;
        pgd_rng r;
        pgd_rng_seed(&r, 99);
        int64_t rows = 5, cols = 301, n = rows * cols;
        float hx[5 * 301];
        double want[5 * 301];
        for (int64_t i = 0; i < n; i++)
            hx[i] = 500.0f + 100.0f * pgd_rng_float(&r);
        int64_t shape[2] = {rows, cols};
        pgd_tensor *x = NULL;
        PGD_CHECK_OK(pgd_tensor_create(ctx, 2, shape, &x, &err), &err);
        PGD_CHECK_OK(pgd_tensor_upload(x, hx, &err), &err);
        PGD_CHECK_OK(pgd_softmax(ctx, x, 0.5f, x, &err), &err);
        pgd_ref_softmax(hx, (size_t)rows, (size_t)cols, 0.5, want);
        PGD_CHECK_OK(pgd_tensor_download(x, hx, &err), &err);
        ck_assert_msg(pgd_test_allclose(hx, want, (size_t)n, 1e-4, 1e-7, "softmax large"), "%s",
                      devs[di].name);
        pgd_tensor_destroy(x);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

static void expect_shape_error(int rc, pgd_error **err, const char *a, const char *b)
{
    ck_assert_msg(rc == PGD_ERR_SHAPE, "want PGD_ERR_SHAPE, got %s", pgd_status_name(rc));
    ck_assert_ptr_nonnull(*err);
    const char *m = pgd_error_get_message(*err);
    ck_assert_msg(strstr(m, a) && strstr(m, b), "message lacks %s and %s: %s", a, b, m);
    pgd_error_destroy(*err);
    *err = NULL;
}

START_TEST(shape_errors_name_both_shapes)
{
    if (!pgd_test_primary())
        return;
    size_t ndev;
    const pgd_device_info *devs = pgd_test_devices(&ndev);
    pgd_ctx *ctx = pgd_test_ctx(&devs[0]);
    pgd_error *err = NULL;
    int64_t s34[2] = {3, 4}, s43[2] = {4, 3}, s5[1] = {5};
    pgd_tensor *x = NULL, *y = NULL, *v = NULL;
    PGD_CHECK_OK(pgd_tensor_create(ctx, 2, s34, &x, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 2, s43, &y, &err), &err);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 1, s5, &v, &err), &err);
    expect_shape_error(pgd_layernorm(ctx, x, NULL, NULL, 1e-5f, y, &err), &err, "[3, 4]", "[4, 3]");
    expect_shape_error(pgd_layernorm(ctx, x, v, v, 1e-5f, x, &err), &err, "[3, 4]", "[5]");
    expect_shape_error(pgd_softmax(ctx, x, 1.0f, y, &err), &err, "[3, 4]", "[4, 3]");
    expect_shape_error(pgd_gelu(ctx, x, y, 0, &err), &err, "[3, 4]", "[4, 3]");
    expect_shape_error(pgd_gelu(ctx, x, y, 1, &err), &err, "[3, 4]", "[4, 3]");
    expect_shape_error(pgd_relu(ctx, x, y, &err), &err, "[3, 4]", "[4, 3]");
    expect_shape_error(pgd_bias_add(ctx, x, v, x, &err), &err, "[3, 4]", "[5]");
    expect_shape_error(pgd_bias_add(ctx, x, v, y, &err), &err, "[3, 4]", "[4, 3]");
    ck_assert_int_eq(pgd_layernorm(ctx, x, v, NULL, 1e-5f, x, &err), PGD_ERR_INVALID_ARGUMENT);
    pgd_error_destroy(err);
    pgd_tensor_destroy(x);
    pgd_tensor_destroy(y);
    pgd_tensor_destroy(v);
    pgd_ctx_destroy(ctx);
}
END_TEST

/* The references themselves, against values worked out by hand or from the definitions. */
START_TEST(references_known_values)
{
    float x[4] = {-1.0f, 0.0f, 1.0f, 2.0f};
    double y[4];
    pgd_ref_gelu_erf(x, 4, y);
    ck_assert(fabs(y[0] - -0.15865525393145707) < 1e-12 && y[1] == 0.0 &&
              fabs(y[2] - 0.8413447460685429) < 1e-12 && fabs(y[3] - 1.9544997361036416) < 1e-12);
    pgd_ref_gelu_tanh(x, 4, y);
    ck_assert(fabs(y[2] - 0.8411919906082768) < 1e-12);
    pgd_ref_relu(x, 4, y);
    ck_assert(y[0] == 0.0 && y[3] == 2.0);
    pgd_ref_softmax(x, 1, 4, 1.0, y);
    double s = exp(-1.0) + 1.0 + exp(1.0) + exp(2.0);
    ck_assert(fabs(y[0] - exp(-1.0) / s) < 1e-15 && fabs(y[3] - exp(2.0) / s) < 1e-15);
    float w[2] = {2.0f, 1.0f}, b[2] = {0.5f, -1.0f};
    pgd_ref_layernorm(x, w, b, 2, 2, 0.0, y); /* rows {-1, 0} and {1, 2}: ±1 each */
    ck_assert(y[0] == -1.5 && y[1] == 0.0 && y[2] == -1.5 && y[3] == 0.0);
    pgd_ref_bias_add(x, b, 2, 2, y);
    ck_assert(y[0] == -0.5 && y[1] == -1.0 && y[2] == 1.5 && y[3] == 1.0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("norm");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, references_known_values);
    tcase_add_test(tc, layernorm_shapes);
    tcase_add_test(tc, layernorm_large_mean_long_rows);
    tcase_add_test(tc, softmax_shapes);
    tcase_add_test(tc, softmax_large_logits);
    tcase_add_test(tc, layernorm_shapes_wide_groups);
    tcase_add_test(tc, softmax_shapes_wide_groups);
    tcase_add_test(tc, gelu_erf_shapes);
    tcase_add_test(tc, gelu_tanh_shapes);
    tcase_add_test(tc, relu_shapes);
    tcase_add_test(tc, bias_add_shapes);
    tcase_add_test(tc, shape_errors_name_both_shapes);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
