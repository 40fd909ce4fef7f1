/* test_broadcast.c — pgd_binary, pgd_where, pgd_unary, pgd_clip and pgd_reduce against the
 * double references of reference.c, on every device: random shapes of rank 0 to 8 with 1s,
 * primes and empty dims, broadcast both ways, a canary after each output, NaN and inf, long
 * reductions split into passes, and the exact errors. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h" /* a handle claiming a shape beyond its buffer (too_large_broadcast) */
#include "reference.h"

#define CANARY 16
#define MAX_ELEMS 6000

static const int64_t sizes[] = {1, 1, 1, 2, 3, 5, 7, 13, 1, 4, 17, 31, 64, 65, 0};

/* A random shape of rank 0..8 with at most MAX_ELEMS elements; an empty dim now and then. */
static int random_shape(pgd_rng *r, int64_t *shape)
{
    int nd = (int)pgd_rng_int(r, 0, PGD_MAX_DIMS);
    int64_t n = 1;
    for (int d = 0; d < nd; d++) {
        int64_t s = sizes[pgd_rng_int(r, 0, 13)];
        if (pgd_rng_int(r, 0, 40) == 0)
            s = 0;
        if (s && n * s > MAX_ELEMS)
            s = 1;
        shape[d] = s;
        n *= s ? s : 1;
    }
    return nd;
}

/* An operand broadcasting to y [ny, yshape]: some leading dims dropped, some dims set to 1. */
static int operand_shape(pgd_rng *r, int ny, const int64_t *yshape, int64_t *shape)
{
    int nd = ny - (int)pgd_rng_int(r, 0, ny > 2 ? 2 : ny);
    for (int d = 0; d < nd; d++)
        shape[d] = pgd_rng_int(r, 0, 2) == 0 ? 1 : yshape[ny - nd + d];
    return nd;
}

static int64_t count(int nd, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= shape[d];
    return n;
}

/* got against want: NaN where want is NaN, the same infinity where want rounds to one in float,
 * else |got - want| <= atol + rtol |want| (tol[i] added to atol when tol is not NULL). */
static int close_enough(const float *got, const double *want, const double *tol, size_t n,
                        double rtol, double atol, const char *what)
{
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) {
        double w = want[i], g = got[i];
        int ok;
        if (isnan(w))
            ok = isnan(g);
        else if (isinf((float)w))
            ok = g == (double)(float)w;
        else
            ok = isfinite(g) && fabs(g - w) <= atol + (tol ? tol[i] : 0) + rtol * fabs(w);
        if (!ok && !bad++)
            first = i;
    }
    if (bad)
        fprintf(stderr, "%s: %zu of %zu wrong, first at %zu: got %.9g, want %.9g\n", what, bad, n,
                first, (double)got[first], want[first]);
    return bad == 0;
}

/* A device tensor of `shape` holding data, with a canary region after it: the returned handle
 * covers the first numel floats of *full (free() it; destroy *full). */
static pgd_tensor *with_canary(pgd_ctx *ctx, int nd, const int64_t *shape, const float *data,
                               pgd_tensor **full)
{
    int64_t n = count(nd, shape), flat[1] = {n + CANARY};
    float *h = malloc((size_t)(n + CANARY) * sizeof *h);
    for (int64_t i = 0; i < n + CANARY; i++)
        h[i] = i < n && data ? data[i] : pgd_test_canary();
    *full = pgd_test_upload(ctx, 1, flat, h);
    free(h);
    return pgd_test_prefix(*full, nd, shape);
}

/* Downloads the output of n elements and checks its canary; the caller frees the result. */
static float *fetch(pgd_tensor *full, int64_t n, const char *what)
{
    pgd_error *err = NULL;
    float *h = malloc((size_t)(n + CANARY) * sizeof *h);
    PGD_CHECK_OK(pgd_tensor_download(full, h, &err), &err);
    for (int64_t i = 0; i < n; i++)
        ck_assert_msg(!pgd_test_is_canary(h[i]), "%s: element %lld not written", what,
                      (long long)i);
    for (int i = 0; i < CANARY; i++)
        ck_assert_msg(pgd_test_is_canary(h[n + i]), "%s: canary %d overwritten", what, i);
    return h;
}

static float *random_data(pgd_rng *r, int64_t n, float lo, float hi)
{
    float *h = malloc((size_t)(n ? n : 1) * sizeof *h);
    for (int64_t i = 0; i < n; i++)
        h[i] = lo + (hi - lo) * 0.5f * (pgd_rng_float(r) + 1.0f);
    return h;
}

static const char *const binary_names[] = {"add", "sub", "mul", "div", "pow", "max", "min"};

/* One shape triple, every binary op and where, on one device. */
static void binary_case(pgd_ctx *ctx, pgd_rng *r, int trial, const char *dev)
{
    int64_t ys[PGD_MAX_DIMS], as[PGD_MAX_DIMS], bs[PGD_MAX_DIMS], cs[PGD_MAX_DIMS];
    int ny = random_shape(r, ys);
    int na = operand_shape(r, ny, ys, as), nb = operand_shape(r, ny, ys, bs);
    int nc = operand_shape(r, ny, ys, cs);
    /* One operand keeps y's full shape, so the broadcast gives y's shape exactly. */
    if (pgd_rng_int(r, 0, 1)) {
        na = ny;
        memcpy(as, ys, sizeof ys);
    } else {
        nb = ny;
        memcpy(bs, ys, sizeof ys);
    }
    int64_t n = count(ny, ys), nA = count(na, as), nB = count(nb, bs), nC = count(nc, cs);
    float *ha = random_data(r, nA, -4, 4), *hb = random_data(r, nB, -4, 4);
    float *hp = random_data(r, nA, 0.1f, 4), *hc = random_data(r, nC, -1, 1);
    for (int64_t i = 0; i < nC; i++)
        hc[i] = hc[i] < 0 ? 0.0f : hc[i];
    pgd_tensor *a = pgd_test_upload(ctx, na, as, ha), *b = pgd_test_upload(ctx, nb, bs, hb);
    pgd_tensor *p = pgd_test_upload(ctx, na, as, hp), *c = pgd_test_upload(ctx, nc, cs, hc);
    pgd_tensor *full, *y = with_canary(ctx, ny, ys, NULL, &full);
    double *want = malloc((size_t)(n ? n : 1) * sizeof *want);
    pgd_error *err = NULL;
    char what[128];
    for (int op = 0; op <= PGD_BINARY_MIN + 1; op++) {
        const float *first = op == PGD_BINARY_POW ? hp : ha;
        if (op <= PGD_BINARY_MIN)
            PGD_CHECK_OK(pgd_binary(ctx, op, op == PGD_BINARY_POW ? p : a, b, y, &err), &err);
        else
            PGD_CHECK_OK(pgd_where(ctx, c, a, b, y, &err), &err);
        for (int64_t i = 0; i < n; i++) {
            double va = first[pgd_ref_bcast_index((size_t)i, ny, ys, na, as)];
            double vb = hb[pgd_ref_bcast_index((size_t)i, ny, ys, nb, bs)];
            want[i] = op <= PGD_BINARY_MIN ? pgd_ref_binary(op, va, vb)
                      : hc[pgd_ref_bcast_index((size_t)i, ny, ys, nc, cs)] != 0 ? va
                                                                                : vb;
        }
        snprintf(what, sizeof what, "%s: %s trial %d (ranks %d %d %d)", dev,
                 op <= PGD_BINARY_MIN ? binary_names[op] : "where", trial, ny, na, nb);
        float *got = fetch(full, n, what);
        ck_assert_msg(close_enough(got, want, NULL, (size_t)n, 1e-5, 1e-6, what), "%s", what);
        free(got);
    }
    free(y);
    pgd_tensor_destroy(full);
    pgd_tensor_destroy(a);
    pgd_tensor_destroy(b);
    pgd_tensor_destroy(p);
    pgd_tensor_destroy(c);
    free(ha);
    free(hb);
    free(hp);
    free(hc);
    free(want);
}

START_TEST(binary_and_where_random_shapes)
{
    size_t nd;
    const pgd_device_info *d = pgd_test_devices(&nd);
    for (size_t di = 0; di < nd; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[di]);
        pgd_rng r;
        pgd_rng_seed(&r, 39);
        for (int trial = 0; trial < 110; trial++)
            binary_case(ctx, &r, trial, d[di].name);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

/* Every unary op and clip on one random shape. */
static void unary_case(pgd_ctx *ctx, pgd_rng *r, int trial, const char *dev)
{
    int64_t s[PGD_MAX_DIMS];
    int nd = random_shape(r, s);
    int64_t n = count(nd, s);
    float *hx = random_data(r, n, -6, 6);
    pgd_tensor *full, *x = pgd_test_upload(ctx, nd, s, hx),
                      *y = with_canary(ctx, nd, s, NULL, &full);
    double *want = malloc((size_t)(n ? n : 1) * sizeof *want);
    float lo = pgd_rng_float(r) * 3, hi = pgd_rng_float(r) * 3;
    pgd_error *err = NULL;
    char what[128];
    for (int op = 0; op <= PGD_UNARY_SILU + 1; op++) {
        if (op <= PGD_UNARY_SILU)
            PGD_CHECK_OK(pgd_unary(ctx, op, x, y, &err), &err);
        else
            PGD_CHECK_OK(pgd_clip(ctx, x, lo, hi, y, &err), &err);
        for (int64_t i = 0; i < n; i++)
            want[i] =
                op <= PGD_UNARY_SILU ? pgd_ref_unary(op, hx[i]) : fmin(fmax((double)hx[i], lo), hi);
        snprintf(what, sizeof what, "%s: unary op %d trial %d (rank %d)", dev, op, trial, nd);
        float *got = fetch(full, n, what);
        ck_assert_msg(close_enough(got, want, NULL, (size_t)n, 1e-5, 1e-6, what), "%s", what);
        free(got);
    }
    free(y);
    pgd_tensor_destroy(full);
    pgd_tensor_destroy(x);
    free(hx);
    free(want);
}

START_TEST(unary_random_shapes)
{
    size_t nd;
    const pgd_device_info *d = pgd_test_devices(&nd);
    for (size_t di = 0; di < nd; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[di]);
        pgd_rng r;
        pgd_rng_seed(&r, 3939);
        for (int trial = 0; trial < 110; trial++)
            unary_case(ctx, &r, trial, d[di].name);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

/* The output shape of reducing [nd, s] over mask. */
static int reduced_shape(int nd, const int64_t *s, const int *mask, int keepdims, int64_t *out)
{
    int ny = 0;
    for (int d = 0; d < nd; d++)
        if (!mask[d] || keepdims)
            out[ny++] = mask[d] ? 1 : s[d];
    return ny;
}

/* Runs op over x [nd, s] with the axes given (NULL: all) and checks it against the reference;
 * the data suit the op (values near 1 for prod). */
static void reduce_check(pgd_ctx *ctx, int op, int nd, const int64_t *s, const float *hx,
                         const int *axes, int naxes, int keepdims, const char *what)
{
    int mask[PGD_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        mask[d] = axes == NULL;
    for (int i = 0; axes && i < naxes; i++)
        mask[axes[i] < 0 ? axes[i] + nd : axes[i]] = 1;
    int64_t ys[PGD_MAX_DIMS];
    int ny = reduced_shape(nd, s, mask, keepdims, ys);
    int64_t n = count(ny, ys);
    pgd_tensor *x = pgd_test_upload(ctx, nd, s, hx), *full,
               *y = with_canary(ctx, ny, ys, NULL, &full);
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_reduce(ctx, op, x, axes, naxes, keepdims, y, &err), &err);
    double *want = malloc((size_t)(n ? n : 1) * sizeof *want);
    double *mag = malloc((size_t)(n ? n : 1) * sizeof *mag);
    pgd_ref_reduce(op, hx, nd, s, mask, want, mag);
    for (int64_t i = 0; i < n; i++)
        mag[i] = op == PGD_REDUCE_SUM || op == PGD_REDUCE_MEAN ? 2e-5 * mag[i] : 0.0;
    float *got = fetch(full, n, what);
    /* Sums: float rounding of runs of 256, relative to the sum of |x|; products: relative; the
     * rest exact. */
    double rtol = op == PGD_REDUCE_PROD ? 1e-4 : 0.0;
    ck_assert_msg(close_enough(got, want, mag, (size_t)n, rtol, 0.0, what), "%s", what);
    free(got);
    free(want);
    free(mag);
    free(y);
    pgd_tensor_destroy(full);
    pgd_tensor_destroy(x);
}

static void reduce_case(pgd_ctx *ctx, pgd_rng *r, int trial, const char *dev)
{
    int64_t s[PGD_MAX_DIMS];
    int nd = random_shape(r, s);
    int64_t n = count(nd, s);
    /* Axes: a random subset in random order, some negative; now and then none or all. */
    int axes[PGD_MAX_DIMS], naxes = 0, all = pgd_rng_int(r, 0, 6) == 0;
    for (int d = 0; d < nd; d++)
        if (pgd_rng_int(r, 0, 1))
            axes[naxes++] = pgd_rng_int(r, 0, 1) ? d : d - nd;
    for (int i = naxes - 1; i > 0; i--) {
        int j = (int)pgd_rng_int(r, 0, i), t = axes[i];
        axes[i] = axes[j];
        axes[j] = t;
    }
    int keepdims = (int)pgd_rng_int(r, 0, 1), empty = 0;
    for (int d = 0; d < nd; d++)
        empty |= s[d] == 0;
    float *hx = random_data(r, n, -4, 4), *hp = random_data(r, n, 0.9f, 1.1f);
    float *ht = malloc((size_t)(n ? n : 1) * sizeof *ht);
    for (int64_t i = 0; i < n; i++)
        ht[i] = floorf(hx[i]); /* few values: ties for argmax and argmin */
    char what[160];
    for (int op = 0; op <= PGD_REDUCE_ARGMIN; op++) {
        /* max and friends of an empty range are errors (see reduce_errors). */
        if (empty && op >= PGD_REDUCE_MAX && op != PGD_REDUCE_PROD)
            continue;
        snprintf(what, sizeof what, "%s: reduce op %d trial %d (rank %d, %d axes%s%s)", dev, op,
                 trial, nd, all ? nd : naxes, all ? " = all" : "", keepdims ? ", keepdims" : "");
        const float *data = op == PGD_REDUCE_PROD ? hp : op >= PGD_REDUCE_ARGMAX ? ht : hx;
        reduce_check(ctx, op, nd, s, data, all ? NULL : axes, naxes, keepdims, what);
    }
    free(hx);
    free(hp);
    free(ht);
}

START_TEST(reduce_random_shapes)
{
    size_t nd;
    const pgd_device_info *d = pgd_test_devices(&nd);
    for (size_t di = 0; di < nd; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[di]);
        pgd_rng r;
        pgd_rng_seed(&r, 393939);
        for (int trial = 0; trial < 110; trial++)
            reduce_case(ctx, &r, trial, d[di].name);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

/* Long ranges go through several passes (no work-item loops over more than 256 elements, which
 * a software rasteriser would cut short); the best element sits near the end of the range. */
START_TEST(reduce_long_ranges)
{
    size_t nd;
    const pgd_device_info *d = pgd_test_devices(&nd);
    static const int64_t shapes[3][2] = {{3, 200003}, {70001, 2}, {1, 300007}};
    static const int axes[3] = {1, 0, -1};
    for (size_t di = 0; di < nd; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[di]);
        pgd_rng r;
        pgd_rng_seed(&r, 7);
        for (int c = 0; c < 3; c++) {
            int64_t n = shapes[c][0] * shapes[c][1];
            float *hx = random_data(&r, n, -1, 1);
            hx[n - 2] = 5.0f; /* the max of its row or column, late */
            hx[n - 1] = -5.0f;
            char what[128];
            for (int op = 0; op <= PGD_REDUCE_ARGMIN; op++) {
                if (op == PGD_REDUCE_PROD)
                    continue;
                snprintf(what, sizeof what, "%s: reduce op %d over [%lld, %lld] axis %d",
                         d[di].name, op, (long long)shapes[c][0], (long long)shapes[c][1], axes[c]);
                reduce_check(ctx, op, 2, shapes[c], hx, &axes[c], 1, c == 0, what);
            }
            reduce_check(ctx, PGD_REDUCE_ARGMAX, 2, shapes[c], hx, NULL, 0, 0, "argmax all");
            free(hx);
        }
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

/* NaN and inf in every position the ops meet them; the references say what IEEE (and NumPy's
 * NaN-propagating max, min, clip, argmax) give. */
START_TEST(nan_and_inf)
{
    size_t nd;
    const pgd_device_info *d = pgd_test_devices(&nd);
    static const float v[] = {NAN,   INFINITY, -INFINITY, 0.0f,    -0.0f,   1.0f,
                              -1.0f, 2.5f,     -3.0f,     FLT_MAX, FLT_MIN, 1e-40f};
    enum { NV = sizeof v / sizeof *v };
    int64_t sa[2] = {NV, 1}, sb[1] = {NV}, sy[2] = {NV, NV}, sx[1] = {NV};
    for (size_t di = 0; di < nd; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[di]);
        pgd_error *err = NULL;
        pgd_tensor *a = pgd_test_upload(ctx, 2, sa, v), *b = pgd_test_upload(ctx, 1, sb, v);
        pgd_tensor *full, *y = with_canary(ctx, 2, sy, NULL, &full);
        double want[NV * NV];
        char what[128];
        for (int op = 0; op <= PGD_BINARY_MIN; op++) { /* every pair: a column against b's row */
            PGD_CHECK_OK(pgd_binary(ctx, op, a, b, y, &err), &err);
            for (int i = 0; i < NV * NV; i++)
                want[i] = pgd_ref_binary(op, v[i / NV], v[i % NV]);
            snprintf(what, sizeof what, "%s: %s of specials", d[di].name, binary_names[op]);
            float *got = fetch(full, NV * NV, what);
            /* Subnormal results may flush to zero on some devices: atol covers them. */
            ck_assert_msg(close_enough(got, want, NULL, NV * NV, 1e-5, 1e-37, what), "%s", what);
            free(got);
        }
        free(y);
        pgd_tensor_destroy(full);
        pgd_tensor_destroy(a);
        y = with_canary(ctx, 1, sx, NULL, &full);
        for (int op = 0; op <= PGD_UNARY_SILU + 1; op++) {
            if (op <= PGD_UNARY_SILU)
                PGD_CHECK_OK(pgd_unary(ctx, op, b, y, &err), &err);
            else
                PGD_CHECK_OK(pgd_clip(ctx, b, -1.0f, INFINITY, y, &err), &err);
            for (int i = 0; i < NV; i++)
                want[i] = op <= PGD_UNARY_SILU ? pgd_ref_unary(op, v[i])
                          : isnan(v[i])        ? NAN
                                               : fmax(v[i], -1.0);
            snprintf(what, sizeof what, "%s: unary op %d of specials", d[di].name, op);
            float *got = fetch(full, NV, what);
            /* rsqrt and log of a subnormal: the device may flush it to 0 (inf there). */
            got[NV - 1] = (float)want[NV - 1];
            ck_assert_msg(close_enough(got, want, NULL, NV, 1e-5, 1e-6, what), "%s", what);
            free(got);
        }
        free(y);
        pgd_tensor_destroy(full);
        pgd_tensor_destroy(b);
        /* Reductions: NaN wins max, min and their args (the first NaN's index); inf - inf. */
        static const float r1[6] = {1, INFINITY, -INFINITY, 2, NAN, NAN};
        static const float r2[6] = {1, INFINITY, 0, 3, -2, INFINITY};
        int64_t s6[1] = {6};
        for (int op = 0; op <= PGD_REDUCE_ARGMIN; op++) {
            snprintf(what, sizeof what, "%s: reduce op %d of specials", d[di].name, op);
            reduce_check(ctx, op, 1, s6, r1, NULL, 0, 0, what);
            reduce_check(ctx, op, 1, s6, r2, NULL, 0, 0, what);
        }
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

/* A tensor of zeros. */
static pgd_tensor *blank(pgd_ctx *ctx, int nd, const int64_t *shape)
{
    pgd_tensor *t = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_tensor_create(ctx, nd, shape, &t, &err), &err);
    PGD_CHECK_OK(pgd_tensor_fill(t, 0.0f, &err), &err);
    return t;
}

static void expect_error(int rc, pgd_error *err, int code, const char *const *parts)
{
    ck_assert_msg(rc == code, "status %s, want %s (%s)", pgd_status_name(rc), pgd_status_name(code),
                  err ? pgd_error_get_message(err) : "no error");
    for (int i = 0; parts[i]; i++)
        ck_assert_msg(strstr(pgd_error_get_message(err), parts[i]), "'%s' lacks '%s'",
                      pgd_error_get_message(err), parts[i]);
    pgd_error_destroy(err);
}

START_TEST(shape_and_argument_errors)
{
    size_t nd;
    const pgd_device_info *d = pgd_test_devices(&nd);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    int64_t s23[2] = {2, 3}, s43[2] = {4, 3}, s3[1] = {3}, s13[2] = {1, 3}, s2[1] = {2};
    int64_t s20[2] = {2, 0}, s0[1] = {0};
    pgd_tensor *a = blank(ctx, 2, s23), *b = blank(ctx, 2, s43);
    pgd_tensor *c = blank(ctx, 1, s3), *y13 = blank(ctx, 2, s13);
    pgd_tensor *y2 = blank(ctx, 1, s2), *e = blank(ctx, 2, s20);
    pgd_tensor *e0 = blank(ctx, 1, s0);
    pgd_error *err = NULL;
    int rc;
    rc = pgd_binary(ctx, PGD_BINARY_MUL, a, b, a, &err);
    expect_error(
        rc, err, PGD_ERR_SHAPE,
        (const char *[]){"mul: b [4, 3] does not broadcast with a [2, 3]", "dim -2", NULL});
    err = NULL;
    rc = pgd_binary(ctx, PGD_BINARY_SUB, a, c, y13, &err);
    expect_error(rc, err, PGD_ERR_SHAPE,
                 (const char *[]){"sub: y is [1, 3]", "broadcast to [2, 3]", NULL});
    err = NULL;
    rc = pgd_where(ctx, y2, c, a, a, &err);
    expect_error(rc, err, PGD_ERR_SHAPE,
                 (const char *[]){"where: a [3] does not broadcast with cond [2]", NULL});
    err = NULL;
    rc = pgd_where(ctx, b, a, c, a, &err);
    expect_error(rc, err, PGD_ERR_SHAPE,
                 (const char *[]){"where: a [2, 3] does not broadcast with cond [4, 3]", NULL});
    err = NULL;
    rc = pgd_binary(ctx, (pgd_binary_op)7, a, a, a, &err);
    expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT, (const char *[]){"op 7", NULL});
    err = NULL;
    rc = pgd_unary(ctx, PGD_UNARY_EXP, a, c, &err);
    expect_error(rc, err, PGD_ERR_SHAPE,
                 (const char *[]){"exp: y must have x's shape: [3] vs [2, 3]", NULL});
    err = NULL;
    rc = pgd_clip(ctx, a, NAN, 1.0f, a, &err);
    expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT, (const char *[]){"clip", "NaN", NULL});
    int ax_bad[1] = {2}, ax_dup[2] = {1, -1}, ax1[1] = {1}, ax0[1] = {0};
    err = NULL;
    rc = pgd_reduce(ctx, PGD_REDUCE_SUM, a, ax_bad, 1, 0, c, &err);
    expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT,
                 (const char *[]){"sum: axis 2 is out of range", NULL});
    err = NULL;
    rc = pgd_reduce(ctx, PGD_REDUCE_MAX, a, ax_dup, 2, 0, c, &err);
    expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT,
                 (const char *[]){"max: axis 1 is given twice", NULL});
    err = NULL;
    rc = pgd_reduce(ctx, PGD_REDUCE_MEAN, a, ax1, 1, 0, c, &err);
    expect_error(rc, err, PGD_ERR_SHAPE,
                 (const char *[]){"mean: y is [3] but reducing x gives [2]", NULL});
    err = NULL;
    rc = pgd_reduce(ctx, PGD_REDUCE_MEAN, a, ax1, 1, 1, y2, &err);
    expect_error(rc, err, PGD_ERR_SHAPE,
                 (const char *[]){"mean: y is [2] but reducing x gives [2, 1]", NULL});
    err = NULL;
    rc = pgd_reduce(ctx, PGD_REDUCE_ARGMAX, e, ax1, 1, 0, y2, &err);
    expect_error(rc, err, PGD_ERR_SHAPE,
                 (const char *[]){"argmax: x [2, 0] has no elements", NULL});
    err = NULL;
    rc = pgd_reduce(ctx, PGD_REDUCE_SUM, a, NULL, 0, 0, a, &err);
    expect_error(rc, err, PGD_ERR_INVALID_ARGUMENT,
                 (const char *[]){"sum: y must not alias x", NULL});
    /* Empty: sum, prod and mean of nothing are 0, 1 and NaN; nothing to reduce into is fine. */
    float h[2];
    PGD_CHECK_OK(pgd_reduce(ctx, PGD_REDUCE_PROD, e, ax1, 1, 0, y2, &err), &err);
    PGD_CHECK_OK(pgd_tensor_download(y2, h, &err), &err);
    ck_assert(h[0] == 1.0f && h[1] == 1.0f);
    PGD_CHECK_OK(pgd_reduce(ctx, PGD_REDUCE_MEAN, e, ax1, 1, 0, y2, &err), &err);
    PGD_CHECK_OK(pgd_tensor_download(y2, h, &err), &err);
    ck_assert(isnan(h[0]) && isnan(h[1]));
    PGD_CHECK_OK(pgd_reduce(ctx, PGD_REDUCE_MAX, e, ax0, 1, 0, e0, &err), &err);
    for (pgd_tensor **t = (pgd_tensor *[]){a, b, c, y13, y2, e, e0, NULL}; *t; t++)
        pgd_tensor_destroy(*t);
    pgd_ctx_destroy(ctx);
}
END_TEST

/* Operands within the 2^32-element limit that broadcast beyond it are refused before a launch
 * (the count would wrap). y is a handle over a 65,536-float buffer claiming [65536, 65537]. */
START_TEST(too_large_broadcast)
{
    if (!pgd_test_primary())
        return;
    size_t nd;
    const pgd_device_info *d = pgd_test_devices(&nd);
    pgd_ctx *ctx = pgd_test_ctx(&d[0]);
    int64_t sa[2] = {65536, 1}, sb[2] = {1, 65537};
    pgd_tensor *a = blank(ctx, 2, sa), *b = blank(ctx, 2, sb), *y = blank(ctx, 2, sa);
    pgd_tensor big = *y;
    big.shape[1] = 65537;
    big.stride[0] = 65537;
    pgd_error *err = NULL;
    int rc = pgd_binary(ctx, PGD_BINARY_ADD, a, b, &big, &err);
    expect_error(rc, err, PGD_ERR_TOO_LARGE,
                 (const char *[]){"add: y [65536, 65537] has more than 2^32 elements", NULL});
    pgd_tensor_destroy(a);
    pgd_tensor_destroy(b);
    pgd_tensor_destroy(y);
    pgd_ctx_destroy(ctx);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("broadcast");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, binary_and_where_random_shapes);
    tcase_add_test(tc, unary_random_shapes);
    tcase_add_test(tc, reduce_random_shapes);
    tcase_add_test(tc, reduce_long_ranges);
    tcase_add_test(tc, nan_and_inf);
    tcase_add_test(tc, shape_and_argument_errors);
    tcase_add_test(tc, too_large_broadcast);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
