/* test_memory.c — device memory accounting (live and peak bytes), tensor-to-tensor copies,
 * slices and fills, on every device, against host copies done element by element. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static void expect_error(int rc, int code, pgd_error **err, const char *const *needles,
                         const char *what)
{
    ck_assert_msg(rc == code, "%s: got %s, want %s (%s)", what, pgd_status_name(rc),
                  pgd_status_name(code), *err ? pgd_error_get_message(*err) : "no error object");
    ck_assert_msg(*err != NULL, "%s: no error object", what);
    const char *m = pgd_error_get_message(*err);
    for (size_t i = 0; needles && needles[i]; i++)
        ck_assert_msg(strstr(m, needles[i]) != NULL, "%s: message lacks '%s': %s", what, needles[i],
                      m);
    pgd_error_destroy(*err);
    *err = NULL;
}

static pgd_tensor *make(pgd_ctx *ctx, int ndim, const int64_t *shape)
{
    pgd_tensor *t = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_tensor_create(ctx, ndim, shape, &t, &err), &err);
    return t;
}

static pgd_memory_stats stats(pgd_ctx *ctx)
{
    pgd_memory_stats s;
    memset(&s, 0xab, sizeof s); /* every field must be written */
    pgd_ctx_get_memory_stats(ctx, &s);
    return s;
}

/* Byte counts that are powers of two (at least 256) are size classes whatever the rounding
 * between powers of two is, so live bytes must move by exactly the tensor's size. */
START_TEST(live_and_peak_exact)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t di = 0; di < n; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[di]);
        pgd_memory_stats s0 = stats(ctx);
        ck_assert_uint_ge(s0.peak_bytes, s0.live_bytes);
        int64_t sa[2] = {16, 16};   /* 1024 bytes */
        int64_t sb[3] = {4, 8, 32}; /* 4096 bytes */
        int64_t sc[1] = {512};      /* 2048 bytes */
        pgd_tensor *a = make(ctx, 2, sa);
        pgd_memory_stats s = stats(ctx);
        ck_assert_uint_eq(s.live_bytes, s0.live_bytes + 1024);
        ck_assert_uint_eq(s.peak_bytes, s0.live_bytes + 1024);
        pgd_tensor *b = make(ctx, 3, sb);
        s = stats(ctx);
        ck_assert_uint_eq(s.live_bytes, s0.live_bytes + 5120);
        ck_assert_uint_eq(s.peak_bytes, s0.live_bytes + 5120);
        pgd_tensor_destroy(a);
        s = stats(ctx);
        ck_assert_uint_eq(s.live_bytes, s0.live_bytes + 4096);
        ck_assert_uint_eq(s.peak_bytes, s0.live_bytes + 5120); /* the peak stays */
        /* The destroyed buffer went to the pool: idle, not live. */
        ck_assert_uint_eq(s.idle_bytes, s0.idle_bytes + 1024);
        ck_assert_uint_eq(s.idle_buffers, s0.idle_buffers + 1);
        pgd_ctx_memory_reset_peak(ctx);
        s = stats(ctx);
        ck_assert_uint_eq(s.peak_bytes, s0.live_bytes + 4096);
        pgd_tensor *c = make(ctx, 1, sc);
        s = stats(ctx);
        ck_assert_uint_eq(s.live_bytes, s0.live_bytes + 6144);
        ck_assert_uint_eq(s.peak_bytes, s0.live_bytes + 6144);
        /* Same size again: served from the pool, counted live again, no longer idle. */
        pgd_tensor *a2 = make(ctx, 2, sa);
        s = stats(ctx);
        ck_assert_uint_eq(s.reused, s0.reused + 1);
        ck_assert_uint_eq(s.idle_bytes, s0.idle_bytes);
        ck_assert_uint_eq(s.idle_buffers, s0.idle_buffers);
        ck_assert_uint_eq(s.live_bytes, s0.live_bytes + 7168);
        ck_assert_uint_eq(s.peak_bytes, s0.live_bytes + 7168);
        pgd_tensor_destroy(a2);
        pgd_tensor_destroy(b);
        pgd_tensor_destroy(c);
        s = stats(ctx);
        ck_assert_uint_eq(s.live_bytes, s0.live_bytes);
        ck_assert_uint_eq(s.peak_bytes, s0.live_bytes + 7168);
        ck_assert_uint_eq(s.idle_bytes, s0.idle_bytes + 7168);
        ck_assert_uint_eq(s.idle_buffers, s0.idle_buffers + 3);
        pgd_ctx_memory_reset_peak(ctx);
        ck_assert_uint_eq(stats(ctx).peak_bytes, s0.live_bytes);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

/* Sizes that are not size classes: each tensor costs at least its bytes and at most the
 * rounding of a size class more (a minimum class of 256 bytes); the running sum and the peak
 * follow the tensors as they come and go in random order. */
START_TEST(live_and_peak_random)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t di = 0; di < n; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[di]);
        pgd_rng r;
        pgd_rng_seed(&r, 314);
        enum { SLOTS = 12 };
        pgd_tensor *t[SLOTS] = {0};
        uint64_t cost[SLOTS] = {0};
        pgd_memory_stats s0 = stats(ctx);
        uint64_t live = 0, peak = 0;
        for (int step = 0; step < 200; step++) {
            int i = (int)pgd_rng_int(&r, 0, SLOTS - 1);
            if (step % 50 == 25) {
                pgd_ctx_memory_reset_peak(ctx);
                peak = live;
            }
            if (t[i]) {
                pgd_tensor_destroy(t[i]);
                t[i] = NULL;
                live -= cost[i];
            } else {
                int64_t len =
                    pgd_rng_int(&r, 0, 3) == 0 ? pgd_rng_int(&r, 0, 70) : pgd_rng_int(&r, 1, 20000);
                uint64_t before = stats(ctx).live_bytes;
                t[i] = make(ctx, 1, &len);
                cost[i] = stats(ctx).live_bytes - before;
                uint64_t bytes = (uint64_t)len * 4;
                ck_assert_msg(cost[i] >= bytes && cost[i] >= 4 &&
                                  cost[i] <= (bytes < 256 ? 256 : bytes + bytes / 4),
                              "%s: a tensor of %llu bytes counts %llu live bytes", d[di].name,
                              (unsigned long long)bytes, (unsigned long long)cost[i]);
                live += cost[i];
                if (live > peak)
                    peak = live;
            }
            pgd_memory_stats s = stats(ctx);
            ck_assert_uint_eq(s.live_bytes, s0.live_bytes + live);
            ck_assert_uint_eq(s.peak_bytes, s0.live_bytes + peak);
        }
        for (int i = 0; i < SLOTS; i++)
            pgd_tensor_destroy(t[i]);
        ck_assert_uint_eq(stats(ctx).live_bytes, s0.live_bytes);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

static float *random_floats(pgd_rng *r, size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < n; i++)
        p[i] = pgd_rng_float(r);
    return p;
}

static void download_into(const pgd_tensor *t, float *host)
{
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_tensor_download(t, host, &err), &err);
}

START_TEST(copy_random_ranges)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t di = 0; di < n; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[di]);
        pgd_rng r;
        pgd_rng_seed(&r, 77);
        for (int trial = 0; trial < 120; trial++) {
            int64_t ns = pgd_rng_int(&r, 1, 3000), nd = pgd_rng_int(&r, 1, 3000);
            int same = trial % 5 == 4;
            if (same)
                nd = ns;
            float *hs = random_floats(&r, (size_t)ns), *hd = random_floats(&r, (size_t)nd);
            float *got = malloc((size_t)nd * sizeof *got);
            pgd_tensor *src = pgd_test_upload(ctx, 1, &ns, hs);
            pgd_tensor *dst = same ? src : pgd_test_upload(ctx, 1, &nd, hd);
            if (same)
                memcpy(hd, hs, (size_t)ns * sizeof *hd);
            int64_t lim = ns < nd ? ns : nd;
            int64_t count = trial % 7 == 0 ? lim : pgd_rng_int(&r, 0, lim);
            int64_t so = pgd_rng_int(&r, 0, ns - count), dof = pgd_rng_int(&r, 0, nd - count);
            if (same) {
                /* Two disjoint ranges of one tensor (touching is allowed). */
                count = pgd_rng_int(&r, 0, ns / 2);
                so = pgd_rng_int(&r, 0, ns - 2 * count);
                dof = pgd_rng_int(&r, so + count, ns - count);
                if (trial % 2) {
                    int64_t x = so;
                    so = dof;
                    dof = x;
                }
            }
            pgd_error *err = NULL;
            PGD_CHECK_OK(pgd_tensor_copy(src, so, dst, dof, count, &err), &err);
            download_into(dst, got);
            for (int64_t i = 0; i < count; i++)
                hd[dof + i] = hs[so + i];
            for (int64_t i = 0; i < nd; i++)
                ck_assert_msg(memcmp(&got[i], &hd[i], sizeof(float)) == 0,
                              "%s: copy %lld of [%lld] at %lld to [%lld] at %lld%s: element %lld "
                              "is %g, want %g",
                              d[di].name, (long long)count, (long long)ns, (long long)so,
                              (long long)nd, (long long)dof, same ? " (same tensor)" : "",
                              (long long)i, got[i], hd[i]);
            pgd_tensor_destroy(src);
            if (!same)
                pgd_tensor_destroy(dst);
            free(hs);
            free(hd);
            free(got);
        }
        /* Copies run in queue order: a chain a -> b -> c seen by one download at the end. */
        int64_t len = 1000;
        pgd_rng_seed(&r, 5);
        float *ha = random_floats(&r, 1000), *hc = malloc(1000 * sizeof *hc);
        pgd_tensor *a = pgd_test_upload(ctx, 1, &len, ha), *b = make(ctx, 1, &len),
                   *c = make(ctx, 1, &len);
        pgd_error *err = NULL;
        PGD_CHECK_OK(pgd_tensor_copy(a, 0, b, 0, 1000, &err), &err);
        PGD_CHECK_OK(pgd_tensor_copy(b, 0, c, 0, 1000, &err), &err);
        download_into(c, hc);
        ck_assert_int_eq(memcmp(ha, hc, 1000 * sizeof *hc), 0);
        pgd_tensor_destroy(a);
        pgd_tensor_destroy(b);
        pgd_tensor_destroy(c);
        free(ha);
        free(hc);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

START_TEST(copy_errors)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t di = 0; di < n; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[di]), *other = pgd_test_ctx(&d[di]);
        pgd_rng r;
        pgd_rng_seed(&r, 8);
        int64_t ss[2] = {3, 7}, sd[3] = {2, 2, 5};
        float *hs = random_floats(&r, 21), *hd = random_floats(&r, 20), got[21];
        pgd_tensor *src = pgd_test_upload(ctx, 2, ss, hs), *dst = pgd_test_upload(ctx, 3, sd, hd);
        pgd_tensor *far = pgd_test_upload(other, 3, sd, hd);
        pgd_error *err = NULL;
        /* Past the end of the source, of the destination; negative offsets and counts. */
        expect_error(pgd_tensor_copy(src, 13, dst, 0, 9, &err), PGD_ERR_INVALID_ARGUMENT, &err,
                     (const char *const[]){"source", "13", "9", "[3, 7]", NULL}, "source past end");
        expect_error(pgd_tensor_copy(src, 0, dst, 17, 4, &err), PGD_ERR_INVALID_ARGUMENT, &err,
                     (const char *const[]){"destination", "17", "4", "[2, 2, 5]", NULL},
                     "destination past end");
        expect_error(pgd_tensor_copy(src, -2, dst, 0, 3, &err), PGD_ERR_INVALID_ARGUMENT, &err,
                     (const char *const[]){"source", "-2", "[3, 7]", NULL}, "negative source");
        expect_error(pgd_tensor_copy(src, 0, dst, -1, 3, &err), PGD_ERR_INVALID_ARGUMENT, &err,
                     (const char *const[]){"destination", "-1", NULL}, "negative destination");
        expect_error(pgd_tensor_copy(src, 0, dst, 0, -3, &err), PGD_ERR_INVALID_ARGUMENT, &err,
                     (const char *const[]){"-3", NULL}, "negative count");
        /* Offsets so large that offset + count overflows int64 must still be refused. */
        expect_error(pgd_tensor_copy(src, 1, dst, 0, INT64_MAX, &err), PGD_ERR_INVALID_ARGUMENT,
                     &err, NULL, "huge count");
        expect_error(pgd_tensor_copy(src, INT64_MAX, dst, 0, 1, &err), PGD_ERR_INVALID_ARGUMENT,
                     &err, NULL, "huge offset");
        /* Overlapping ranges of one tensor, both ways round and fully. */
        expect_error(pgd_tensor_copy(src, 2, src, 5, 4, &err), PGD_ERR_INVALID_ARGUMENT, &err,
                     (const char *const[]){"overlap", NULL}, "overlap forward");
        expect_error(pgd_tensor_copy(src, 5, src, 2, 4, &err), PGD_ERR_INVALID_ARGUMENT, &err,
                     (const char *const[]){"overlap", NULL}, "overlap backward");
        expect_error(pgd_tensor_copy(src, 3, src, 3, 1, &err), PGD_ERR_INVALID_ARGUMENT, &err,
                     (const char *const[]){"overlap", NULL}, "overlap in place");
        /* Another context's tensor, either side. */
        expect_error(pgd_tensor_copy(src, 0, far, 0, 3, &err), PGD_ERR_INVALID_ARGUMENT, &err,
                     (const char *const[]){"context", NULL}, "other context (destination)");
        expect_error(pgd_tensor_copy(far, 0, dst, 0, 3, &err), PGD_ERR_INVALID_ARGUMENT, &err,
                     (const char *const[]){"context", NULL}, "other context (source)");
        /* A NULL err is accepted on failure. */
        ck_assert_int_eq(pgd_tensor_copy(src, 20, dst, 0, 2, NULL), PGD_ERR_INVALID_ARGUMENT);
        /* count 0 does nothing, even at the very end of both tensors. */
        PGD_CHECK_OK(pgd_tensor_copy(src, 21, dst, 20, 0, &err), &err);
        PGD_CHECK_OK(pgd_tensor_copy(src, 4, src, 4, 0, &err), &err);
        /* A range ending exactly at the end is inside. */
        PGD_CHECK_OK(pgd_tensor_copy(src, 16, dst, 15, 5, &err), &err);
        for (int i = 0; i < 5; i++)
            hd[15 + i] = hs[16 + i];
        /* Nothing else was written by the refused copies. */
        download_into(dst, got);
        ck_assert_int_eq(memcmp(got, hd, 20 * sizeof *got), 0);
        download_into(src, got);
        ck_assert_int_eq(memcmp(got, hs, 21 * sizeof *got), 0);
        pgd_tensor_destroy(src);
        pgd_tensor_destroy(dst);
        pgd_tensor_destroy(far);
        free(hs);
        free(hd);
        pgd_ctx_destroy(other);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

/* host narrow(): dst[i] = src at i's coordinates with `start` added along `dim`. */
static void host_narrow(const float *src, int ndim, const int64_t *shape, int dim, int64_t start,
                        int64_t length, float *dst)
{
    int64_t dshape[5], total = 1;
    for (int i = 0; i < ndim; i++) {
        dshape[i] = i == dim ? length : shape[i];
        total *= dshape[i];
    }
    for (int64_t flat = 0; flat < total; flat++) {
        int64_t rem = flat, coord[5];
        for (int i = ndim - 1; i >= 0; i--) {
            coord[i] = rem % dshape[i];
            rem /= dshape[i];
        }
        coord[dim] += start;
        int64_t s = 0;
        for (int i = 0; i < ndim; i++)
            s = s * shape[i] + coord[i];
        dst[flat] = src[s];
    }
}

static const int64_t awkward[] = {1, 2, 3, 5, 7, 13, 17, 31, 33, 64, 65, 127};

START_TEST(slice_random_shapes)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t di = 0; di < n; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[di]);
        pgd_rng r;
        pgd_rng_seed(&r, 2024);
        const size_t canary = 19;
        int zero_len = 0, zero_dim = 0;
        for (int trial = 0; trial < 150; trial++) {
            int ndim = (int)pgd_rng_int(&r, 1, 5);
            int64_t shape[5], total;
            do {
                total = 1;
                for (int i = 0; i < ndim; i++) {
                    shape[i] = pgd_rng_int(&r, 0, 1) ? awkward[pgd_rng_int(&r, 0, 11)]
                                                     : pgd_rng_int(&r, 1, 9);
                    if (pgd_rng_int(&r, 0, 40) == 0)
                        shape[i] = 0;
                    total *= shape[i];
                }
            } while (total > 60000);
            int dim = (int)pgd_rng_int(&r, 0, ndim - 1);
            int64_t extent = shape[dim];
            int64_t start = pgd_rng_int(&r, 0, extent);
            int64_t length = pgd_rng_int(&r, 0, 4) == 0 ? 0 : pgd_rng_int(&r, 0, extent - start);
            if (trial % 10 == 3) { /* whole dimension */
                start = 0;
                length = extent;
            }
            zero_len += length == 0;
            zero_dim += total == 0;
            int64_t dshape[5], dn = 1;
            for (int i = 0; i < ndim; i++) {
                dshape[i] = i == dim ? length : shape[i];
                dn *= dshape[i];
            }
            float *hs = random_floats(&r, (size_t)total);
            float *want = malloc(((size_t)dn + 1) * sizeof *want);
            float *got = malloc(((size_t)dn + canary) * sizeof *got);
            float *init = malloc(((size_t)dn + canary) * sizeof *init);
            for (size_t i = 0; i < (size_t)dn + canary; i++)
                init[i] = pgd_test_canary();
            host_narrow(hs, ndim, shape, dim, start, length, want);
            pgd_tensor *src = pgd_test_upload(ctx, ndim, shape, hs);
            /* dst is the head of a larger buffer; its tail is a canary region. */
            int64_t big = dn + (int64_t)canary;
            pgd_tensor *buf = pgd_test_upload(ctx, 1, &big, init);
            pgd_tensor *dst = pgd_test_prefix(buf, ndim, dshape);
            pgd_error *err = NULL;
            PGD_CHECK_OK(pgd_tensor_slice(src, dim, start, length, dst, &err), &err);
            download_into(buf, got);
            char ss[96];
            pgd_tensor_shape_str(src, ss, sizeof ss);
            for (int64_t i = 0; i < dn; i++)
                ck_assert_msg(memcmp(&got[i], &want[i], sizeof(float)) == 0,
                              "%s: slice of %s along %d from %lld length %lld: element %lld is "
                              "%g, want %g",
                              d[di].name, ss, dim, (long long)start, (long long)length,
                              (long long)i, got[i], want[i]);
            for (size_t i = (size_t)dn; i < (size_t)dn + canary; i++)
                ck_assert_msg(pgd_test_is_canary(got[i]),
                              "%s: slice of %s along %d from %lld length %lld wrote past the "
                              "destination (element %zu)",
                              d[di].name, ss, dim, (long long)start, (long long)length, i);
            free(dst);
            pgd_tensor_destroy(buf);
            pgd_tensor_destroy(src);
            free(hs);
            free(want);
            free(got);
            free(init);
        }
        ck_assert_msg(zero_len >= 10, "only %d slices of length 0", zero_len);
        (void)zero_dim;
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

START_TEST(slice_errors)
{
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t di = 0; di < n; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[di]), *other = pgd_test_ctx(&d[di]);
        int64_t ss[3] = {4, 6, 5}, good[3] = {4, 2, 5}, bad1[3] = {4, 3, 5}, bad2[2] = {8, 5},
                bad3[3] = {5, 2, 4};
        pgd_tensor *src = make(ctx, 3, ss), *dst = make(ctx, 3, good), *w1 = make(ctx, 3, bad1),
                   *w2 = make(ctx, 2, bad2), *w3 = make(ctx, 3, bad3), *far = make(other, 3, good);
        pgd_error *err = NULL;
        float h[120], got[40];
        for (int i = 0; i < 120; i++)
            h[i] = (float)i;
        PGD_CHECK_OK(pgd_tensor_upload(src, h, &err), &err);
        float marks[40];
        for (int i = 0; i < 40; i++)
            marks[i] = -1.0f - (float)i;
        PGD_CHECK_OK(pgd_tensor_upload(dst, marks, &err), &err);
        /* Wrong destination shapes: same element count, other rank, transposed. */
        expect_error(pgd_tensor_slice(src, 1, 1, 2, w1, &err), PGD_ERR_SHAPE, &err,
                     (const char *const[]){"[4, 6, 5]", "[4, 3, 5]", NULL}, "wrong length");
        expect_error(pgd_tensor_slice(src, 1, 1, 2, w2, &err), PGD_ERR_SHAPE, &err,
                     (const char *const[]){"[4, 6, 5]", "[8, 5]", NULL}, "wrong rank");
        expect_error(pgd_tensor_slice(src, 1, 1, 2, w3, &err), PGD_ERR_SHAPE, &err,
                     (const char *const[]){"[4, 6, 5]", "[5, 2, 4]", NULL}, "wrong order");
        /* Dimensions that do not exist. */
        expect_error(pgd_tensor_slice(src, 3, 0, 2, dst, &err), PGD_ERR_INVALID_ARGUMENT, &err,
                     (const char *const[]){"3", "[4, 6, 5]", NULL}, "dim 3");
        expect_error(pgd_tensor_slice(src, -1, 0, 2, dst, &err), PGD_ERR_INVALID_ARGUMENT, &err,
                     (const char *const[]){"-1", NULL}, "dim -1");
        /* Start and length outside the dimension. */
        expect_error(pgd_tensor_slice(src, 1, 5, 2, dst, &err), PGD_ERR_INVALID_ARGUMENT, &err,
                     (const char *const[]){"5", "[4, 6, 5]", NULL}, "start + length past end");
        expect_error(pgd_tensor_slice(src, 1, 7, 0, dst, &err), PGD_ERR_INVALID_ARGUMENT, &err,
                     (const char *const[]){"7", NULL}, "start past end");
        expect_error(pgd_tensor_slice(src, 1, -1, 2, dst, &err), PGD_ERR_INVALID_ARGUMENT, &err,
                     (const char *const[]){"-1", NULL}, "negative start");
        expect_error(pgd_tensor_slice(src, 1, 2, -2, dst, &err), PGD_ERR_INVALID_ARGUMENT, &err,
                     (const char *const[]){"-2", NULL}, "negative length");
        expect_error(pgd_tensor_slice(src, 1, 1, INT64_MAX, dst, &err), PGD_ERR_INVALID_ARGUMENT,
                     &err, NULL, "huge length");
        /* dst == src, and another context. */
        expect_error(pgd_tensor_slice(src, 1, 0, 6, src, &err), PGD_ERR_INVALID_ARGUMENT, &err,
                     NULL, "dst is src");
        expect_error(pgd_tensor_slice(src, 1, 0, 2, far, &err), PGD_ERR_INVALID_ARGUMENT, &err,
                     (const char *const[]){"context", NULL}, "other context");
        ck_assert_int_eq(pgd_tensor_slice(src, 1, 5, 2, dst, NULL), PGD_ERR_INVALID_ARGUMENT);
        /* None of the refused calls wrote anything. */
        download_into(dst, got);
        ck_assert_int_eq(memcmp(got, marks, sizeof got), 0);
        /* The last two rows of the middle dimension: start + length == extent is inside. */
        PGD_CHECK_OK(pgd_tensor_slice(src, 1, 4, 2, dst, &err), &err);
        download_into(dst, got);
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 2; b++)
                for (int c = 0; c < 5; c++)
                    ck_assert_float_eq(got[(a * 2 + b) * 5 + c], h[(a * 6 + 4 + b) * 5 + c]);
        pgd_tensor_destroy(src);
        pgd_tensor_destroy(dst);
        pgd_tensor_destroy(w1);
        pgd_tensor_destroy(w2);
        pgd_tensor_destroy(w3);
        pgd_tensor_destroy(far);
        pgd_ctx_destroy(other);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

static float from_bits(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

START_TEST(fill_values)
{
    const float values[] = {
        0.0f,
        from_bits(0x80000000u) /* -0 */,
        1.0f,
        -3.25f,
        1e-40f /* subnormal */,
        from_bits(0x7f800000u) /* +inf */,
        from_bits(0xff800000u) /* -inf */,
        from_bits(0x7fc0c0deu) /* a NaN with a payload */,
        from_bits(0x7f7fffffu) /* FLT_MAX */,
    };
    const int64_t lengths[] = {1, 3, 64, 1001, 65537};
    size_t n;
    const pgd_device_info *d = pgd_test_devices(&n);
    for (size_t di = 0; di < n; di++) {
        pgd_ctx *ctx = pgd_test_ctx(&d[di]);
        pgd_error *err = NULL;
        for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++) {
            int64_t len = lengths[li], total = len + 7;
            float *init = malloc((size_t)total * sizeof *init), *got = malloc((size_t)total * 4);
            for (int64_t i = 0; i < total; i++)
                init[i] = pgd_test_canary();
            pgd_tensor *buf = pgd_test_upload(ctx, 1, &total, init);
            pgd_tensor *t = pgd_test_prefix(buf, 1, &len);
            for (size_t vi = 0; vi < sizeof values / sizeof values[0]; vi++) {
                PGD_CHECK_OK(pgd_tensor_fill(t, values[vi], &err), &err);
                download_into(buf, got);
                for (int64_t i = 0; i < len; i++)
                    ck_assert_msg(memcmp(&got[i], &values[vi], 4) == 0,
                                  "%s: fill %lld with value %zu: element %lld has other bits",
                                  d[di].name, (long long)len, vi, (long long)i);
                for (int64_t i = len; i < total; i++)
                    ck_assert_msg(pgd_test_is_canary(got[i]), "%s: fill %lld wrote element %lld",
                                  d[di].name, (long long)len, (long long)i);
            }
            free(t);
            pgd_tensor_destroy(buf);
            free(init);
            free(got);
        }
        /* An empty tensor and a multi-dimensional one. */
        int64_t empty[2] = {0, 4}, shape[3] = {3, 5, 7};
        pgd_tensor *e = make(ctx, 2, empty), *m = make(ctx, 3, shape);
        PGD_CHECK_OK(pgd_tensor_fill(e, 1.0f, &err), &err);
        PGD_CHECK_OK(pgd_tensor_fill(m, -0.5f, &err), &err);
        float got[105];
        download_into(m, got);
        for (int i = 0; i < 105; i++)
            ck_assert_float_eq(got[i], -0.5f);
        pgd_tensor_destroy(e);
        pgd_tensor_destroy(m);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("memory");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, live_and_peak_exact);
    tcase_add_test(tc, live_and_peak_random);
    tcase_add_test(tc, copy_random_ranges);
    tcase_add_test(tc, copy_errors);
    tcase_add_test(tc, slice_random_shapes);
    tcase_add_test(tc, slice_errors);
    tcase_add_test(tc, fill_values);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
