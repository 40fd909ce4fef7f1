/* test_interop.c — Pagoda on the caller's OpenCL objects (pagoda_cl.h) and host views, on every
 * device: a caller's context and queue used by ops, caller's buffers wrapped at offsets with
 * strides fed to GEMMs (against a double reference), events ordering the caller's queue and
 * Pagoda's, host memory shared both ways, and hostile arguments answered with clear errors. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
/* pagoda.h (through harness.h) must not bring in the OpenCL headers: callers who do not use
 * interop need none. */
#ifdef CL_VERSION_1_0
#error "pagoda.h includes the OpenCL headers; only pagoda_cl.h may"
#endif
#include "pagoda_cl.h"

/* The OpenCL handles of a listed device. */
static void cl_handles(const pgd_device_info *d, cl_platform_id *p, cl_device_id *dev)
{
    cl_platform_id plats[64];
    cl_uint np = 0;
    ck_assert_int_eq(clGetPlatformIDs(64, plats, &np), CL_SUCCESS);
    ck_assert_uint_lt((cl_uint)d->platform_index, np);
    *p = plats[d->platform_index];
    cl_device_id devs[64];
    cl_uint nd = 0;
    ck_assert_int_eq(clGetDeviceIDs(*p, CL_DEVICE_TYPE_ALL, 64, devs, &nd), CL_SUCCESS);
    ck_assert_uint_lt((cl_uint)d->device_index, nd);
    *dev = devs[d->device_index];
}

static cl_context make_cl_context(const pgd_device_info *d, cl_device_id *dev)
{
    cl_platform_id p;
    cl_handles(d, &p, dev);
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)p, 0};
    cl_int cl = CL_SUCCESS;
    cl_context c = clCreateContext(props, 1, dev, NULL, NULL, &cl);
    ck_assert_msg(c != NULL, "clCreateContext on %s: %d", d->name, cl);
    return c;
}

static cl_command_queue make_queue(cl_context c, cl_device_id dev)
{
    cl_int cl = CL_SUCCESS;
    cl_command_queue q = clCreateCommandQueue(c, dev, 0, &cl);
    ck_assert_msg(q != NULL, "clCreateCommandQueue: %d", cl);
    return q;
}

static pgd_ctx *ctx_from_cl(const pgd_device_info *d, cl_context c, cl_device_id dev,
                            cl_command_queue q)
{
    pgd_ctx_options o;
    pgd_test_options(d, NULL, &o);
    pgd_ctx *ctx = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_ctx_create_from_cl(c, dev, q, &o, &ctx, &err), &err);
    return ctx;
}

/* call (which sets `err`) fails with `code` and a message holding `part`; err is freed. */
#define EXPECT_ERR(call, code, part)                                                               \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        pgd_test_expect_error(rc_, err, code, part);                                               \
        err = NULL;                                                                                \
    } while (0)

static void fill_random(pgd_rng *r, float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = pgd_rng_float(r);
}

/* want[m, n] = sum_k a[m·lda + k] · b[k·N + n], in double. */
static void ref_gemm(const float *a, int64_t lda, const float *b, int64_t M, int64_t N, int64_t K,
                     double *want)
{
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++)
                s += (double)a[m * lda + k] * b[k * N + n];
            want[m * N + n] = s;
        }
}

/* A caller's context and queue run Pagoda's ops; Pagoda keeps them alive after the caller lets
 * go of its references, and a NULL queue gets one of Pagoda's on the caller's context. */
START_TEST(caller_context_and_queue)
{
    size_t nd;
    const pgd_device_info *devs = pgd_test_devices(&nd);
    for (size_t di = 0; di < nd; di++) {
        const pgd_device_info *d = &devs[di];
        cl_device_id dev;
        cl_context c = make_cl_context(d, &dev);
        cl_command_queue q = make_queue(c, dev);
        pgd_ctx *ctx = ctx_from_cl(d, c, dev, q);
        ck_assert_ptr_eq(pgd_ctx_cl_context(ctx), c);
        ck_assert_ptr_eq(pgd_ctx_cl_device(ctx), dev);
        ck_assert_ptr_eq(pgd_ctx_cl_queue(ctx), q);
        ck_assert_str_eq(pgd_ctx_get_device(ctx)->name, d->name);
        ck_assert_int_eq(pgd_ctx_get_device(ctx)->platform_index, d->platform_index);
        ck_assert_int_eq(pgd_ctx_get_device(ctx)->device_index, d->device_index);
        ck_assert_uint_eq(pgd_ctx_get_device(ctx)->unified_memory, (unsigned)d->unified_memory);
        clReleaseCommandQueue(q); /* the context holds its own references from here */
        clReleaseContext(c);
        enum { M = 13, N = 9, K = 21 };
        pgd_rng r;
        pgd_rng_seed(&r, 1 + di);
        float a[M * K], b[K * N], got[M * N];
        double want[M * N];
        fill_random(&r, a, M * K);
        fill_random(&r, b, K * N);
        ref_gemm(a, K, b, M, N, K, want);
        int64_t sa[2] = {M, K}, sb[2] = {K, N}, sc[2] = {M, N};
        pgd_tensor *ta = pgd_test_upload(ctx, 2, sa, a);
        pgd_tensor *tb = pgd_test_upload(ctx, 2, sb, b);
        pgd_tensor *tc = NULL;
        pgd_error *err = NULL;
        PGD_CHECK_OK(pgd_tensor_create(ctx, 2, sc, &tc, &err), &err);
        PGD_CHECK_OK(pgd_gemm(ctx, NULL, ta, tb, tc, &err), &err);
        PGD_CHECK_OK(pgd_tensor_download(tc, got, &err), &err);
        ck_assert_msg(pgd_test_allclose(got, want, M * N, 1e-5, 1e-5, d->name), "%s", d->name);
        pgd_tensor_destroy(ta), pgd_tensor_destroy(tb), pgd_tensor_destroy(tc);
        pgd_ctx_destroy(ctx);

        c = make_cl_context(d, &dev);
        ctx = ctx_from_cl(d, c, dev, NULL);
        ck_assert_ptr_eq(pgd_ctx_cl_context(ctx), c);
        ck_assert_ptr_nonnull(pgd_ctx_cl_queue(ctx));
        cl_context qc = NULL;
        clGetCommandQueueInfo(pgd_ctx_cl_queue(ctx), CL_QUEUE_CONTEXT, sizeof qc, &qc, NULL);
        ck_assert_ptr_eq(qc, c);
        clReleaseContext(c);
        ta = pgd_test_upload(ctx, 2, sa, a);
        PGD_CHECK_OK(pgd_tensor_fill(ta, 0.5f, &err), &err);
        float back[M * K];
        PGD_CHECK_OK(pgd_tensor_download(ta, back, &err), &err);
        for (int i = 0; i < M * K; i++)
            ck_assert_float_eq(back[i], 0.5f);
        pgd_tensor_destroy(ta);
        pgd_ctx_destroy(ctx);
    }
}
END_TEST

/* Everything of the wrapping test that lives on the caller's side. */
typedef struct caller {
    cl_context c;
    cl_device_id dev;
    cl_command_queue q;
    cl_mem buf;
    size_t align, bytes;
} caller;

static void caller_open(caller *cb, const pgd_device_info *d, size_t bytes)
{
    cb->c = make_cl_context(d, &cb->dev);
    cb->q = make_queue(cb->c, cb->dev);
    cb->align = d->mem_base_align / 8 > 4 ? d->mem_base_align / 8 : 4;
    cb->bytes = bytes;
    cl_int cl = CL_SUCCESS;
    cb->buf = clCreateBuffer(cb->c, CL_MEM_READ_WRITE, bytes, NULL, &cl);
    ck_assert_msg(cb->buf != NULL, "clCreateBuffer: %d", cl);
}

static void caller_close(caller *cb)
{
    clReleaseMemObject(cb->buf);
    clReleaseCommandQueue(cb->q);
    clReleaseContext(cb->c);
}

static pgd_tensor *wrap(pgd_ctx *ctx, cl_mem buf, size_t offset, int ndim, const int64_t *shape,
                        const int64_t *strides)
{
    pgd_tensor *t = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(
        pgd_tensor_wrap_cl(ctx, buf, offset, PGD_DTYPE_F32, ndim, shape, strides, &t, &err), &err);
    return t;
}

static size_t round_up(size_t n, size_t m)
{
    return (n + m - 1) / m * m;
}

/* The caller's buffer holds A (rows padded to lda), B and C at aligned byte offsets, with
 * canaries around C; Pagoda's queue is its own. The caller's writes reach Pagoda through an
 * event (pgd_ctx_wait_events), Pagoda's result reaches the caller's read through
 * pgd_ctx_last_event. */
static void wrapped_on(const pgd_device_info *d, size_t di)
{
    enum { M = 7, N = 11, K = 19, LDA = 24 };
    size_t al = d->mem_base_align / 8 > 4 ? d->mem_base_align / 8 : 4;
    size_t off_a = al, off_b = off_a + round_up(M * LDA * 4, al);
    size_t off_c = off_b + round_up(K * N * 4, al) + al;
    size_t total = off_c + round_up(M * N * 4, al) + al;
    caller cb;
    caller_open(&cb, d, total);
    float *host = malloc(total), *back = malloc(total);
    ck_assert_ptr_nonnull(host);
    ck_assert_ptr_nonnull(back);
    for (size_t i = 0; i < total / 4; i++)
        host[i] = pgd_test_canary();
    pgd_rng r;
    pgd_rng_seed(&r, 100 + di);
    float *a = host + off_a / 4, *b = host + off_b / 4;
    fill_random(&r, a, M * LDA);
    fill_random(&r, b, K * N);
    double want[M * N];
    ref_gemm(a, LDA, b, M, N, K, want);
    cl_event written = NULL;
    ck_assert_int_eq(
        clEnqueueWriteBuffer(cb.q, cb.buf, CL_FALSE, 0, total, host, 0, NULL, &written),
        CL_SUCCESS);
    ck_assert_int_eq(clFlush(cb.q), CL_SUCCESS); /* the caller's part of waiting across queues */
    pgd_ctx *ctx = ctx_from_cl(d, cb.c, cb.dev, NULL);
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_ctx_wait_events(ctx, 1, &written, &err), &err);
    int64_t s_store[1] = {M * LDA}, s_b[2] = {K, N}, st_b[2] = {N, 1}, s_c[2] = {M, N};
    int64_t s_b3[3] = {1, K, N}, st_b3[3] = {12345, N, 1}; /* a size-1 dim: any stride */
    pgd_tensor *ta = wrap(ctx, cb.buf, off_a, 1, s_store, NULL);
    pgd_tensor *tb = wrap(ctx, cb.buf, off_b, 2, s_b, st_b);
    pgd_tensor *tb3 = wrap(ctx, cb.buf, off_b, 3, s_b3, st_b3);
    pgd_tensor *tc = wrap(ctx, cb.buf, off_c, 2, s_c, NULL);
    size_t off = 0;
    ck_assert_ptr_eq(pgd_tensor_cl_mem(tc, &off), cb.buf);
    ck_assert_uint_eq(off, off_c);
    pgd_matrix ma = {ta, 0, LDA, 0}, mb = {tb, 0, N, 0}, mc = {tc, 0, N, 0};
    PGD_CHECK_OK(pgd_gemm_strided(ctx, NULL, M, N, K, 1, ma, mb, mc, &err), &err);
    float b3[K * N];
    PGD_CHECK_OK(pgd_tensor_download(tb3, b3, &err), &err); /* read through the sub-buffer */
    ck_assert_int_eq(memcmp(b3, b, sizeof b3), 0);
    cl_event done = NULL;
    PGD_CHECK_OK(pgd_ctx_last_event(ctx, &done, &err), &err);
    ck_assert_ptr_nonnull(done);
    ck_assert_int_eq(clEnqueueReadBuffer(cb.q, cb.buf, CL_TRUE, 0, total, back, 1, &done, NULL),
                     CL_SUCCESS);
    cl_int status = -1;
    clGetEventInfo(done, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
    ck_assert_int_eq(status, CL_COMPLETE);
    ck_assert_msg(pgd_test_allclose(back + off_c / 4, want, M * N, 1e-5, 1e-5, d->name), "%s",
                  d->name);
    for (size_t i = 0; i < total / 4; i++)
        if (i < off_c / 4 || i >= off_c / 4 + M * N)
            ck_assert_msg(memcmp(&back[i], &host[i], 4) == 0, "%s: float %zu outside C changed",
                          d->name, i);
    clReleaseEvent(done);
    clReleaseEvent(written);
    pgd_tensor_destroy(ta), pgd_tensor_destroy(tb), pgd_tensor_destroy(tb3);
    pgd_tensor_destroy(tc);
    pgd_ctx_destroy(ctx);
    caller_close(&cb);
    free(host);
    free(back);
}

START_TEST(wrapped_buffers_offsets_strides)
{
    size_t nd;
    const pgd_device_info *devs = pgd_test_devices(&nd);
    for (size_t di = 0; di < nd; di++)
        wrapped_on(&devs[di], di);
}
END_TEST

/* Host memory under a tensor: the caller's writes are what Pagoda reads, Pagoda's writes are
 * what the caller reads, mapping gives the caller's own pointer; a mapped ordinary tensor is
 * written through the pointer and read back by download. */
static void host_views_on(const pgd_device_info *d)
{
    pgd_ctx *ctx = pgd_test_ctx(d);
    size_t al = pgd_ctx_host_alignment(ctx);
    pgd_error *err = NULL;
    int64_t shape[2] = {5, 13};
    enum { n = 65 };
    if (!d->unified_memory) {
        ck_assert_uint_eq(al, 0);
        pgd_tensor *t = NULL;
        float x[n];
        EXPECT_ERR(pgd_tensor_wrap_host(ctx, x, 2, shape, &t, &err), PGD_ERR_UNSUPPORTED,
                   "not the host's");
        pgd_ctx_destroy(ctx);
        return;
    }
    ck_assert_uint_ge(al, 64);
    float *mem = aligned_alloc(al, round_up(n * 4, al));
    ck_assert_ptr_nonnull(mem);
    for (int i = 0; i < n; i++)
        mem[i] = (float)i;
    pgd_tensor *t = NULL;
    PGD_CHECK_OK(pgd_tensor_wrap_host(ctx, mem, 2, shape, &t, &err), &err);
    ck_assert_ptr_eq(pgd_tensor_host_data(t), mem);
    float got[n];
    PGD_CHECK_OK(pgd_tensor_download(t, got, &err), &err);
    for (int i = 0; i < n; i++)
        ck_assert_float_eq(got[i], (float)i);
    mem[7] = -3.5f; /* through the host pointer, after the work above finished */
    PGD_CHECK_OK(pgd_tensor_download(t, got, &err), &err);
    ck_assert_float_eq(got[7], -3.5f);
    PGD_CHECK_OK(pgd_tensor_fill(t, 2.25f, &err), &err);
    PGD_CHECK_OK(pgd_ctx_finish(ctx, &err), &err);
    for (int i = 0; i < n; i++)
        ck_assert_float_eq(mem[i], 2.25f);
    void *p = NULL;
    PGD_CHECK_OK(pgd_tensor_map(t, &p, &err), &err);
    ck_assert_ptr_eq(p, mem);
    PGD_CHECK_OK(pgd_tensor_unmap(t, p, &err), &err);
    pgd_tensor_destroy(t);
    ck_assert_float_eq(mem[0], 2.25f); /* destroy leaves the caller's memory alone */
    free(mem);

    pgd_tensor *own = NULL;
    PGD_CHECK_OK(pgd_tensor_create(ctx, 2, shape, &own, &err), &err);
    ck_assert_ptr_null(pgd_tensor_host_data(own));
    PGD_CHECK_OK(pgd_tensor_fill(own, 1.0f, &err), &err);
    PGD_CHECK_OK(pgd_tensor_map(own, &p, &err), &err);
    float *f = p;
    ck_assert_float_eq(f[n - 1], 1.0f);
    f[3] = 42.0f;
    PGD_CHECK_OK(pgd_tensor_unmap(own, p, &err), &err);
    PGD_CHECK_OK(pgd_tensor_download(own, got, &err), &err);
    ck_assert_float_eq(got[3], 42.0f);
    ck_assert_float_eq(got[4], 1.0f);
    pgd_tensor_destroy(own);
    pgd_ctx_destroy(ctx);
}

START_TEST(host_views)
{
    size_t nd;
    const pgd_device_info *devs = pgd_test_devices(&nd);
    for (size_t di = 0; di < nd; di++)
        host_views_on(&devs[di]);
}
END_TEST

static void expect_wrap_error(pgd_ctx *ctx, cl_mem buf, size_t offset, pgd_dtype dtype, int ndim,
                              const int64_t *shape, const int64_t *strides, int code,
                              const char *part)
{
    pgd_tensor *t = (pgd_tensor *)&t; /* must be set to NULL */
    pgd_error *err = NULL;
    int rc = pgd_tensor_wrap_cl(ctx, buf, offset, dtype, ndim, shape, strides, &t, &err);
    ck_assert_ptr_null(t);
    pgd_test_expect_error(rc, err, code, part);
}

/* Bad buffers and views: each refused with the rule it breaks. */
static void hostile_wraps(const pgd_device_info *d, caller *cb, pgd_ctx *ctx)
{
    int64_t s[2] = {4, 8}, big[2] = {4, 1000}, st_bad[2] = {9, 1}, st_neg[2] = {-8, 1};
    expect_wrap_error(ctx, NULL, 0, PGD_DTYPE_F32, 2, s, NULL, PGD_ERR_INVALID_ARGUMENT, "NULL");
    expect_wrap_error(ctx, cb->buf, 0, PGD_DTYPE_F32, 2, big, NULL, PGD_ERR_INVALID_ARGUMENT,
                      "CL_MEM_SIZE");
    expect_wrap_error(ctx, cb->buf, cb->bytes, PGD_DTYPE_F32, 2, s, NULL, PGD_ERR_INVALID_ARGUMENT,
                      "holds");
    if (cb->align > 4)
        expect_wrap_error(ctx, cb->buf, 4, PGD_DTYPE_F32, 2, s, NULL, PGD_ERR_INVALID_ARGUMENT,
                          "CL_DEVICE_MEM_BASE_ADDR_ALIGN");
    expect_wrap_error(ctx, cb->buf, 0, PGD_DTYPE_F16, 2, s, NULL, PGD_ERR_UNSUPPORTED, "float32");
    expect_wrap_error(ctx, cb->buf, 0, PGD_DTYPE_F32, 2, s, st_bad, PGD_ERR_UNSUPPORTED,
                      "row-major");
    expect_wrap_error(ctx, cb->buf, 0, PGD_DTYPE_F32, 2, s, st_neg, PGD_ERR_INVALID_ARGUMENT,
                      "negative");
    expect_wrap_error(ctx, cb->buf, 0, PGD_DTYPE_F32, -1, s, NULL, PGD_ERR_SHAPE, "shape");
    /* A buffer of another cl_context (on the same device). */
    cl_device_id dev2;
    cl_context other = make_cl_context(d, &dev2);
    cl_int cl = CL_SUCCESS;
    cl_mem foreign = clCreateBuffer(other, CL_MEM_READ_WRITE, 4096, NULL, &cl);
    ck_assert_ptr_nonnull(foreign);
    expect_wrap_error(ctx, foreign, 0, PGD_DTYPE_F32, 2, s, NULL, PGD_ERR_INVALID_ARGUMENT,
                      "another cl_context");
    clReleaseMemObject(foreign);
    clReleaseContext(other);
}

/* Bad contexts and queues, host pointers and event lists. */
static void hostile_contexts(const pgd_device_info *d, caller *cb, pgd_ctx *ctx)
{
    pgd_ctx *bad = (pgd_ctx *)&bad;
    pgd_error *err = NULL;
    EXPECT_ERR(pgd_ctx_create_from_cl(NULL, cb->dev, NULL, NULL, &bad, &err),
               PGD_ERR_INVALID_ARGUMENT, "cl_context is NULL");
    ck_assert_ptr_null(bad);
    EXPECT_ERR(pgd_ctx_create_from_cl(cb->c, NULL, NULL, NULL, &bad, &err),
               PGD_ERR_INVALID_ARGUMENT, "cl_device_id is NULL");
    /* A queue of another context. */
    cl_device_id dev2;
    cl_context other = make_cl_context(d, &dev2);
    cl_command_queue q2 = make_queue(other, dev2);
    EXPECT_ERR(pgd_ctx_create_from_cl(cb->c, cb->dev, q2, NULL, &bad, &err),
               PGD_ERR_INVALID_ARGUMENT, "another cl_context");
    clReleaseCommandQueue(q2);
    clReleaseContext(other);
    /* An out-of-order queue, where the driver makes one. */
    cl_int cl = CL_SUCCESS;
    cl_command_queue ooo =
        clCreateCommandQueue(cb->c, cb->dev, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &cl);
    if (ooo) {
        EXPECT_ERR(pgd_ctx_create_from_cl(cb->c, cb->dev, ooo, NULL, &bad, &err),
                   PGD_ERR_INVALID_ARGUMENT, "out of order");
        clReleaseCommandQueue(ooo);
    }
    ck_assert_ptr_null(bad);
    EXPECT_ERR(pgd_ctx_wait_events(ctx, 2, NULL, &err), PGD_ERR_INVALID_ARGUMENT, "NULL");
    cl_event none[1] = {NULL};
    EXPECT_ERR(pgd_ctx_wait_events(ctx, 1, none, &err), PGD_ERR_INVALID_ARGUMENT,
               "event 0 of 1 is NULL");
    PGD_CHECK_OK(pgd_ctx_wait_events(ctx, 0, NULL, &err), &err);
    int64_t s[1] = {16};
    pgd_tensor *t = (pgd_tensor *)&t;
    if (d->unified_memory) {
        size_t al = pgd_ctx_host_alignment(ctx);
        char *mem = aligned_alloc(al, 2 * al);
        ck_assert_ptr_nonnull(mem);
        EXPECT_ERR(pgd_tensor_wrap_host(ctx, mem + 4, 1, s, &t, &err), PGD_ERR_INVALID_ARGUMENT,
                   "not aligned");
        ck_assert_ptr_null(t);
        EXPECT_ERR(pgd_tensor_wrap_host(ctx, NULL, 1, s, &t, &err), PGD_ERR_INVALID_ARGUMENT,
                   "NULL");
        free(mem);
    }
    PGD_CHECK_OK(pgd_tensor_create(ctx, 1, s, &t, &err), &err);
    EXPECT_ERR(pgd_tensor_unmap(t, NULL, &err), PGD_ERR_INVALID_ARGUMENT, "NULL");
    pgd_tensor_destroy(t);
}

START_TEST(hostile_arguments)
{
    size_t nd;
    const pgd_device_info *devs = pgd_test_devices(&nd);
    for (size_t di = 0; di < nd; di++) {
        caller cb;
        caller_open(&cb, &devs[di], 4096);
        pgd_ctx *ctx = ctx_from_cl(&devs[di], cb.c, cb.dev, cb.q);
        hostile_wraps(&devs[di], &cb, ctx);
        hostile_contexts(&devs[di], &cb, ctx);
        pgd_ctx_destroy(ctx);
        caller_close(&cb);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("interop");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, caller_context_and_queue);
    tcase_add_test(tc, wrapped_buffers_offsets_strides);
    tcase_add_test(tc, host_views);
    tcase_add_test(tc, hostile_arguments);
    suite_add_tcase(s, tc);
    return pgd_test_run(s);
}
