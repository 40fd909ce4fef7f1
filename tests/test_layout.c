/* test_layout.c — pgd_transpose, pgd_slice, pgd_concat, pgd_gather, pgd_pad,
 * pgd_depth_to_space and pgd_space_to_depth against the references of reference.c, on every
 * device: 110 random cases per op of rank 0 to 8 with 1s, primes and empty dims, a canary after
 * each output, values compared bit for bit (NaN payloads, -0 and infinities among them), and
 * the exact errors. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "reference.h"

#define CANARY 16
#define MAX_ELEMS 4000
#define TRIALS 110

static const int64_t sizes[] = {1, 2, 3, 5, 7, 1, 4, 13, 17, 31, 64, 65};

/* A random shape of rank lo..hi with at most MAX_ELEMS elements; an empty dim now and then. */
static int random_shape(pgd_rng *r, int lo, int hi, int64_t *shape)
{
    int nd = (int)pgd_rng_int(r, lo, hi);
    int64_t n = 1;
    for (int d = 0; d < nd; d++) {
        int64_t s = sizes[pgd_rng_int(r, 0, 11)];
        if (pgd_rng_int(r, 0, 30) == 0)
            s = 0;
        if (s && n * s > MAX_ELEMS)
            s = 1;
        shape[d] = s;
        n *= s ? s : 1;
    }
    return nd;
}

static int64_t count(int nd, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= shape[d];
    return n;
}

static float bits_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Distinct values, with a NaN carrying a payload, -0 and the infinities among them. */
static double *random_values(pgd_rng *r, int64_t n)
{
    double *h = malloc((size_t)(n ? n : 1) * sizeof *h);
    for (int64_t i = 0; i < n; i++) {
        int64_t k = pgd_rng_int(r, 0, 60);
        h[i] = k == 0   ? (double)bits_float(0x7fc01234u)
               : k == 1 ? -0.0
               : k == 2 ? INFINITY
               : k == 3 ? -INFINITY
                        : (double)(float)(i + 0.25 * pgd_rng_float(r));
    }
    return h;
}

/* A device tensor of `shape` holding x (as floats), with a canary region after it: the handle
 * covers the first numel floats of *full (free() it; destroy *full). x NULL: canaries only. */
static pgd_tensor *with_canary(pgd_ctx *ctx, int nd, const int64_t *shape, const double *x,
                               pgd_tensor **full)
{
    int64_t n = count(nd, shape), flat[1] = {n + CANARY};
    float *h = malloc((size_t)(n + CANARY) * sizeof *h);
    for (int64_t i = 0; i < n + CANARY; i++)
        h[i] = i < n && x ? (float)x[i] : pgd_test_canary();
    *full = pgd_test_upload(ctx, 1, flat, h);
    free(h);
    return pgd_test_prefix(*full, nd, shape);
}

/* The output (n elements and the canary after it) against want, bit for bit. */
static void expect_bits(pgd_tensor *full, const double *want, int64_t n, const char *what,
                        const char *dev, int trial)
{
    pgd_error *err = NULL;
    float *h = malloc((size_t)(n + CANARY) * sizeof *h);
    PGD_CHECK_OK(pgd_tensor_download(full, h, &err), &err);
    for (int64_t i = 0; i < n; i++) {
        float w = (float)want[i];
        ck_assert_msg(memcmp(&h[i], &w, sizeof w) == 0,
                      "%s on %s, case %d: element %lld is %.9g, want %.9g", what, dev, trial,
                      (long long)i, (double)h[i], (double)w);
    }
    for (int i = 0; i < CANARY; i++)
        ck_assert_msg(pgd_test_is_canary(h[n + i]), "%s on %s, case %d: canary %d overwritten",
                      what, dev, trial, i);
    free(h);
}

/* The device tensors of one case: the input x and the output y, each with its canary. */
typedef struct io {
    pgd_tensor *x, *xfull, *y, *yfull;
} io;

static io io_make(pgd_ctx *ctx, int nx, const int64_t *xs, const double *x, int ny,
                  const int64_t *ys)
{
    io t;
    t.x = with_canary(ctx, nx, xs, x, &t.xfull);
    t.y = with_canary(ctx, ny, ys, NULL, &t.yfull);
    return t;
}

static void io_free(io *t)
{
    free(t->x);
    free(t->y);
    pgd_tensor_destroy(t->xfull);
    pgd_tensor_destroy(t->yfull);
}

static void transpose_case(pgd_ctx *ctx, pgd_rng *r, int trial, const char *dev)
{
    int64_t xs[PGD_MAX_DIMS], ys[PGD_MAX_DIMS];
    int nd = random_shape(r, 0, PGD_MAX_DIMS, xs), perm[PGD_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        perm[d] = d;
    for (int d = nd - 1; d > 0; d--) { /* Fisher-Yates */
        int j = (int)pgd_rng_int(r, 0, d), t = perm[d];
        perm[d] = perm[j];
        perm[j] = t;
    }
    int reverse = trial % 7 == 3; /* perm NULL: the dims reversed */
    for (int d = 0; d < nd; d++) {
        if (reverse)
            perm[d] = nd - 1 - d;
        ys[d] = xs[perm[d]];
    }
    int64_t n = count(nd, xs);
    double *x = random_values(r, n), *want = malloc((size_t)(n ? n : 1) * sizeof *want);
    pgd_ref_transpose(x, nd, xs, perm, want);
    io t = io_make(ctx, nd, xs, x, nd, ys);
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_transpose(ctx, t.x, reverse ? NULL : perm, t.y, &err), &err);
    expect_bits(t.yfull, want, n, "transpose", dev, trial);
    io_free(&t);
    free(x);
    free(want);
}

START_TEST(transpose_random)
{
    PGD_TEST_EACH_DEVICE(11, for (int i = 0; i < TRIALS; i++) transpose_case(ctx, &r, i, dev));
}
END_TEST

/* A random slice bound for an axis of n: in range, beyond either end, or the extremes. */
static int64_t random_bound(pgd_rng *r, int64_t n)
{
    int64_t k = pgd_rng_int(r, 0, 12);
    return k == 0 ? INT64_MIN : k == 1 ? INT64_MAX : pgd_rng_int(r, -2 * n - 2, 2 * n + 2);
}

static void slice_case(pgd_ctx *ctx, pgd_rng *r, int trial, const char *dev)
{
    static const int64_t steps_pool[] = {1, 1, 2, 3, 7, -1, -1, -2, -3, -5, 1000, -1000};
    int64_t xs[PGD_MAX_DIMS], ys[PGD_MAX_DIMS], starts[PGD_MAX_DIMS], ends[PGD_MAX_DIMS];
    int64_t steps[PGD_MAX_DIMS], *idx[PGD_MAX_DIMS];
    int nd = random_shape(r, 0, PGD_MAX_DIMS, xs), axes[PGD_MAX_DIMS], taken[PGD_MAX_DIMS] = {0};
    int n = nd ? (int)pgd_rng_int(r, 0, nd) : 0;
    for (int i = 0; i < n; i++) {
        int a;
        do
            a = (int)pgd_rng_int(r, 0, nd - 1);
        while (taken[a]);
        taken[a] = 1;
        axes[i] = pgd_rng_int(r, 0, 1) ? a : a - nd;
        starts[i] = random_bound(r, xs[a]);
        ends[i] = random_bound(r, xs[a]);
        steps[i] = steps_pool[pgd_rng_int(r, 0, 11)];
    }
    for (int d = 0; d < nd; d++) { /* the whole axis unless sliced */
        idx[d] = malloc((size_t)(xs[d] + 1) * sizeof *idx[d]);
        ys[d] = pgd_ref_slice_indices(xs[d], 0, xs[d], 1, idx[d]);
    }
    for (int i = 0; i < n; i++) {
        int a = axes[i] < 0 ? axes[i] + nd : axes[i];
        ys[a] = pgd_ref_slice_indices(xs[a], starts[i], ends[i], steps[i], idx[a]);
    }
    int64_t nx = count(nd, xs), ny = count(nd, ys);
    double *x = random_values(r, nx), *want = malloc((size_t)(ny ? ny : 1) * sizeof *want);
    pgd_ref_slice(x, nd, xs, idx, ys, want);
    io t = io_make(ctx, nd, xs, x, nd, ys);
    pgd_error *err = NULL;
    int all_one = trial % 5 == 0; /* steps NULL where every step is 1 */
    for (int i = 0; i < n; i++)
        all_one = all_one && steps[i] == 1;
    PGD_CHECK_OK(pgd_slice(ctx, t.x, n, axes, starts, ends, all_one ? NULL : steps, t.y, &err),
                 &err);
    expect_bits(t.yfull, want, ny, "slice", dev, trial);
    io_free(&t);
    for (int d = 0; d < nd; d++)
        free(idx[d]);
    free(x);
    free(want);
}

START_TEST(slice_random)
{
    PGD_TEST_EACH_DEVICE(21, for (int i = 0; i < TRIALS; i++) slice_case(ctx, &r, i, dev));
}
END_TEST

static void concat_case(pgd_ctx *ctx, pgd_rng *r, int trial, const char *dev)
{
    int64_t base[PGD_MAX_DIMS] = {0}, shapes[4][PGD_MAX_DIMS], ys[PGD_MAX_DIMS];
    int nd = random_shape(r, 1, PGD_MAX_DIMS, base), n = (int)pgd_rng_int(r, 1, 4);
    int axis = (int)pgd_rng_int(r, 0, nd - 1);
    double *x[4];
    pgd_tensor *full[4], *xs[4];
    const int64_t *sp[4];
    memcpy(ys, base, sizeof ys);
    ys[axis] = 0;
    for (int k = 0; k < n; k++) {
        memcpy(shapes[k], base, sizeof base);
        shapes[k][axis] = pgd_rng_int(r, 0, 6) == 0 ? 0 : sizes[pgd_rng_int(r, 0, 6)];
        ys[axis] += shapes[k][axis];
        x[k] = random_values(r, count(nd, shapes[k]));
        xs[k] = with_canary(ctx, nd, shapes[k], x[k], &full[k]);
        sp[k] = shapes[k];
    }
    int64_t ny = count(nd, ys);
    double *want = malloc((size_t)(ny ? ny : 1) * sizeof *want);
    pgd_ref_concat(n, (const double *const *)x, nd, sp, axis, want);
    pgd_tensor *yfull, *y = with_canary(ctx, nd, ys, NULL, &yfull);
    pgd_error *err = NULL;
    PGD_CHECK_OK(
        pgd_concat(ctx, n, (const pgd_tensor *const *)xs, trial % 2 ? axis : axis - nd, y, &err),
        &err);
    expect_bits(yfull, want, ny, "concat", dev, trial);
    for (int k = 0; k < n; k++) {
        free(xs[k]);
        pgd_tensor_destroy(full[k]);
        free(x[k]);
    }
    free(y);
    pgd_tensor_destroy(yfull);
    free(want);
}

START_TEST(concat_random)
{
    PGD_TEST_EACH_DEVICE(31, for (int i = 0; i < TRIALS; i++) concat_case(ctx, &r, i, dev));
}
END_TEST

static void gather_case(pgd_ctx *ctx, pgd_rng *r, int trial, const char *dev)
{
    int64_t xs[PGD_MAX_DIMS], is[3], ys[PGD_MAX_DIMS];
    int nd = random_shape(r, 1, 6, xs), axis = (int)pgd_rng_int(r, 0, nd - 1);
    int ni = (int)pgd_rng_int(r, 0, 2);
    if (xs[axis] == 0)
        xs[axis] = 3; /* indices need something to point at */
    int64_t nidx = 1;
    for (int d = 0; d < ni; d++)
        nidx *= is[d] = pgd_rng_int(r, 0, 12) == 0 ? 0 : pgd_rng_int(r, 1, 5);
    int64_t *idx = malloc((size_t)(nidx ? nidx : 1) * sizeof *idx);
    for (int64_t j = 0; j < nidx; j++)
        idx[j] = pgd_rng_int(r, -xs[axis], xs[axis] - 1);
    int ny = 0;
    for (int d = 0; d < axis; d++)
        ys[ny++] = xs[d];
    for (int d = 0; d < ni; d++)
        ys[ny++] = is[d];
    for (int d = axis + 1; d < nd; d++)
        ys[ny++] = xs[d];
    int64_t nx = count(nd, xs), n = count(ny, ys);
    double *x = random_values(r, nx), *want = malloc((size_t)(n ? n : 1) * sizeof *want);
    pgd_ref_gather(x, nd, xs, axis, idx, ni, is, want);
    io t = io_make(ctx, nd, xs, x, ny, ys);
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_gather(ctx, t.x, trial % 2 ? axis : axis - nd, idx, ni, is, t.y, &err), &err);
    expect_bits(t.yfull, want, n, "gather", dev, trial);
    io_free(&t);
    free(idx);
    free(x);
    free(want);
}

START_TEST(gather_random)
{
    PGD_TEST_EACH_DEVICE(41, for (int i = 0; i < TRIALS; i++) gather_case(ctx, &r, i, dev));
}
END_TEST

static void pad_case(pgd_ctx *ctx, pgd_rng *r, int trial, const char *dev)
{
    int64_t xs[PGD_MAX_DIMS], ys[PGD_MAX_DIMS], pads[2 * PGD_MAX_DIMS];
    int nd = random_shape(r, 0, 6, xs), mode = trial % 4;
    for (int d = 0; d < nd; d++) {
        if (mode != PGD_PAD_CONSTANT && xs[d] == 0)
            xs[d] = 2;
        int64_t n = xs[d];
        do {
            pads[d] = pgd_rng_int(r, -n, 2 * n + 3);
            pads[nd + d] = pgd_rng_int(r, -n, 2 * n + 3);
        } while (n + pads[d] + pads[nd + d] < 0);
        ys[d] = n + pads[d] + pads[nd + d];
        if (count(d + 1, ys) > 4 * MAX_ELEMS) { /* keep the output small */
            pads[d] = pads[nd + d] = 0;
            ys[d] = n;
        }
    }
    float value = trial % 8 == 0 ? bits_float(0x7fc0beefu) : 0.5f * (float)trial;
    int64_t nx = count(nd, xs), ny = count(nd, ys);
    double *x = random_values(r, nx), *want = malloc((size_t)(ny ? ny : 1) * sizeof *want);
    pgd_ref_pad(x, nd, xs, pads, mode, (double)value, want);
    io t = io_make(ctx, nd, xs, x, nd, ys);
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_pad(ctx, t.x, pads, (pgd_pad_mode)mode, value, t.y, &err), &err);
    static const char *const names[] = {"pad constant", "pad reflect", "pad edge", "pad wrap"};
    expect_bits(t.yfull, want, ny, names[mode], dev, trial);
    io_free(&t);
    free(x);
    free(want);
}

START_TEST(pad_random)
{
    PGD_TEST_EACH_DEVICE(51, for (int i = 0; i < TRIALS; i++) pad_case(ctx, &r, i, dev));
}
END_TEST

static void depth_case(pgd_ctx *ctx, pgd_rng *r, int trial, const char *dev)
{
    int b = (int)pgd_rng_int(r, 1, 4);
    int64_t xs[4] = {pgd_rng_int(r, 1, 2), b * b * pgd_rng_int(r, 1, 3), pgd_rng_int(r, 1, 7),
                     pgd_rng_int(r, 1, 9)};
    int64_t ys[4] = {xs[0], xs[1] / (b * b), xs[2] * b, xs[3] * b}, n = count(4, xs);
    int crd = trial % 2;
    double *x = random_values(r, n), *want = malloc((size_t)n * sizeof *want);
    pgd_ref_depth_to_space(x, xs, b, crd, want);
    io t = io_make(ctx, 4, xs, x, 4, ys);
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_depth_to_space(ctx, t.x, b, crd ? PGD_DEPTH_CRD : PGD_DEPTH_DCR, t.y, &err),
                 &err);
    expect_bits(t.yfull, want, n, crd ? "depth_to_space CRD" : "depth_to_space DCR", dev, trial);
    io_free(&t);
    /* and back: space_to_depth of y is x for DCR; checked against its own reference */
    int64_t zs[4] = {ys[0], ys[1] * b * b, ys[2] / b, ys[3] / b};
    double *y = want, *back = malloc((size_t)n * sizeof *back);
    pgd_ref_space_to_depth(y, ys, b, back);
    if (!crd)
        ck_assert_msg(memcmp(back, x, (size_t)n * sizeof *x) == 0 || n == 0,
                      "the references of depth_to_space (DCR) and space_to_depth disagree");
    t = io_make(ctx, 4, ys, y, 4, zs);
    PGD_CHECK_OK(pgd_space_to_depth(ctx, t.x, b, t.y, &err), &err);
    expect_bits(t.yfull, back, n, "space_to_depth", dev, trial);
    io_free(&t);
    free(back);
    free(x);
    free(want);
}

START_TEST(depth_space_random)
{
    PGD_TEST_EACH_DEVICE(61, for (int i = 0; i < TRIALS; i++) depth_case(ctx, &r, i, dev));
}
END_TEST

static pgd_tensor *blank(pgd_ctx *ctx, int nd, const int64_t *shape)
{
    pgd_tensor *t = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_tensor_create(ctx, nd, shape, &t, &err), &err);
    return t;
}

/* Each rule broken once: the status and the words that name it. */
START_TEST(errors)
{
    size_t nd;
    const pgd_device_info *d = pgd_test_devices(&nd);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    int64_t s23[2] = {2, 3}, s32[2] = {3, 2}, s33[2] = {3, 3}, s43[2] = {4, 3}, s0[1] = {0};
    int64_t s4d[4] = {1, 3, 2, 2}, s4e[4] = {1, 4, 3, 2}, s4o[4] = {1, 1, 4, 4};
    pgd_tensor *a = blank(ctx, 2, s23), *b = blank(ctx, 2, s32), *c = blank(ctx, 2, s33);
    pgd_tensor *e = blank(ctx, 1, s0), *f = blank(ctx, 2, s43), *g = blank(ctx, 4, s4d);
    pgd_tensor *h = blank(ctx, 4, s4e), *o = blank(ctx, 4, s4o);
    pgd_error *err = NULL;
    int rc = pgd_transpose(ctx, a, (const int[]){0, 0}, b, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT,
                          "perm[1] = 0: perm must name each of x's 2");
    err = NULL;
    rc = pgd_transpose(ctx, a, NULL, c, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_SHAPE,
                          "transpose: y is [3, 3] but x permuted is [3, 2]");
    err = NULL;
    rc = pgd_transpose(ctx, a, NULL, a, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_SHAPE, "y is [2, 3]");
    err = NULL;
    rc = pgd_transpose(ctx, c, NULL, c, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT, "y must not be x's memory");
    err = NULL;
    int64_t st[2] = {0, 0}, en[2] = {2, 2}, zero[2] = {1, 0};
    rc = pgd_slice(ctx, a, 2, (const int[]){1, -1}, st, en, NULL, b, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT, "slice: axis -1 is named twice");
    err = NULL;
    rc = pgd_slice(ctx, a, 2, NULL, st, en, zero, b, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT, "the step of axis 1 is 0");
    err = NULL;
    rc = pgd_slice(ctx, a, 1, (const int[]){2}, st, en, NULL, b, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT, "axis 2 is outside [-2, 2)");
    err = NULL;
    rc = pgd_slice(ctx, a, 2, NULL, st, en, NULL, b, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_SHAPE,
                          "slice: y is [3, 2] but the slice of x is [2, 2]");
    err = NULL;
    rc = pgd_concat(ctx, 2, (const pgd_tensor *[]){a, b}, 0, f, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_SHAPE, "every tensor must have xs[0]'s dims");
    err = NULL;
    rc = pgd_concat(ctx, 2, (const pgd_tensor *[]){a, a}, 0, c, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_SHAPE, "y is [3, 3] but the tensors joined are [4, 3]");
    err = NULL;
    rc = pgd_concat(ctx, 2, (const pgd_tensor *[]){a, f}, 0, f, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT, "y must not be xs[1]'s memory");
    err = NULL;
    rc = pgd_concat(ctx, 0, NULL, 0, f, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT, "no tensors to join");
    err = NULL;
    int64_t idx[3] = {0, 2, -3}, is[1] = {3};
    rc = pgd_gather(ctx, a, 0, idx, 1, is, c, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT, "indices[1] = 2 is outside [-2, 2)");
    err = NULL;
    rc = pgd_gather(ctx, a, 1, idx, 1, is, b, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_SHAPE, "gather: y is [3, 2] but x gathered is [2, 3]");
    err = NULL;
    int64_t pads[2] = {-1, 0};
    rc = pgd_pad(ctx, e, (const int64_t[]){1, 0}, PGD_PAD_REFLECT, 0.0f, b, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT,
                          "dim 0 of x is empty: reflect padding");
    err = NULL;
    rc = pgd_pad(ctx, e, pads, PGD_PAD_CONSTANT, 0.0f, b, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT, "would be -1 long");
    err = NULL;
    rc = pgd_pad(ctx, a, (const int64_t[]){0, 0, 1 << 30, 0}, PGD_PAD_EDGE, 0.0f, b, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_TOO_LARGE, "beyond 2^30");
    err = NULL;
    rc = pgd_pad(ctx, a, (const int64_t[]){0, 0, 0, 0}, (pgd_pad_mode)7, 0.0f, a, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT, "mode 7 is not a pgd_pad_mode");
    err = NULL;
    rc = pgd_depth_to_space(ctx, g, 2, PGD_DEPTH_DCR, o, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_SHAPE,
                          "3 channels are not a multiple of the block size");
    err = NULL;
    rc = pgd_depth_to_space(ctx, a, 2, PGD_DEPTH_DCR, o, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_SHAPE, "depth_to_space: x is [2, 3], want [N, C, H, W]");
    err = NULL;
    rc = pgd_space_to_depth(ctx, h, 2, o, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_SHAPE,
                          "height and width must be multiples of the block size");
    err = NULL;
    rc = pgd_space_to_depth(ctx, o, 0, h, &err);
    pgd_test_expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT, "the block size is 0");
    pgd_tensor *ts[] = {a, b, c, e, f, g, h, o};
    for (size_t i = 0; i < sizeof ts / sizeof *ts; i++)
        pgd_tensor_destroy(ts[i]);
    pgd_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("layout");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, transpose_random);
    tcase_add_test(tc, slice_random);
    tcase_add_test(tc, concat_random);
    tcase_add_test(tc, gather_random);
    tcase_add_test(tc, pad_random);
    tcase_add_test(tc, depth_space_random);
    tcase_add_test(tc, errors);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
