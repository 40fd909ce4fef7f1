/* test_oclgrind.c — every kernel in cl/ at small shapes, in the forms a GPU runs them (local
 * memory tiles, barriers, work-groups of up to 256 items), for Oclgrind's checks of data races,
 * out-of-bounds and invalid accesses, barrier divergence and API misuse. No GPU has run
 * Pagoda's kernels in CI; llvmpipe runs their GPU paths, but a work-group there is a loop in one
 * order that hides most races. tests/oclgrind.sh runs this program under Oclgrind and fails on any
 * report; this program checks each result against the double references and that every kernel
 * of the .cl files in cl/ was launched, so that a new kernel cannot go unchecked.
 *
 * Oclgrind reports itself as a GPU with dedicated local memory, so the default context takes the
 * GPU paths (gemm_gpu, attn_fwd_tiled, the wide row reductions); further contexts force the CPU
 * kernels (options.kernel_params "cpu:...", attention kt and rows, Winograd), whose
 * out-of-bounds accesses matter as much. The kernels no launcher runs on such a device
 * (layernorm_vec, softmax_short, layout_copy_rows: devices without dedicated local memory;
 * gemm_epilogue: after CLBlast) are launched directly with their launchers' geometry.
 *
 * Usage: test_oclgrind CL_DIR [--any-device | --racy]. Without --any-device the device must be
 * Oclgrind's (so that the suite cannot pass by running somewhere else; with it, $PAGODA_DEVICE
 * picks one); --racy runs only the kernels that oclgrind-detects expects Oclgrind to report. */
#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "internal.h" /* white-box: GAT segments of a few edges, so gat_combine merges several */
#include "reference.h"
#include "tune.h" /* white-box: conv_few_rows_cpu forced */

static const char *cl_dir;
static int any_device;

/* ---- the kernels of cl/ and how often each ran ---- */

#define MAX_KERNELS 128
static char kernel_names[MAX_KERNELS][64];
static long kernel_runs[MAX_KERNELS];
static int kernel_count;

static char *read_text(const char *path)
{
    unsigned char *data = NULL;
    size_t size = 0;
    ck_assert_msg(pgd_test_read_file(path, &data, &size) == 0, "cannot read %s", path);
    return (char *)data;
}

/* Every `__kernel ... void NAME(` of one file. */
static void scan_kernels(const char *text)
{
    for (const char *p = text; (p = strstr(p, "__kernel")) != NULL; p += 8) {
        const char *v = strstr(p, "void");
        if (!v)
            break;
        v += 4;
        while (isspace((unsigned char)*v))
            v++;
        size_t n = 0;
        while (isalnum((unsigned char)v[n]) || v[n] == '_')
            n++;
        ck_assert(n > 0 && n < sizeof kernel_names[0] && kernel_count < MAX_KERNELS);
        memcpy(kernel_names[kernel_count], v, n);
        kernel_names[kernel_count++][n] = 0;
    }
}

/* First: the kernels of every .cl file in cl/. */
START_TEST(kernels_listed)
{
    DIR *d = opendir(cl_dir);
    ck_assert_msg(d != NULL, "cannot open the kernel directory %s", cl_dir);
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 4 || strcmp(e->d_name + n - 3, ".cl"))
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", cl_dir, e->d_name);
        char *text = read_text(path);
        scan_kernels(text);
        free(text);
        files++;
    }
    closedir(d);
    ck_assert_msg(files >= 10 && kernel_count >= 40, "%s: %d files, %d kernels", cl_dir, files,
                  kernel_count);
}
END_TEST

/* Adds ctx's launches of every kernel to the tally, then destroys ctx. */
static void tally_destroy(pgd_ctx *ctx)
{
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_ctx_finish(ctx, &err), &err);
    for (int i = 0; i < kernel_count; i++) {
        char direct[80]; /* pgd_kernel_create's launches: "name:function" */
        snprintf(direct, sizeof direct, "direct:%s", kernel_names[i]);
        kernel_runs[i] += pgd_test_launches(ctx, kernel_names[i]) + pgd_test_launches(ctx, direct);
    }
    pgd_ctx_destroy(ctx);
}

/* ---- contexts ---- */

typedef struct form {
    const char *kernel_params; /* NULL: the device's defaults (gemm_gpu on Oclgrind) */
    pgd_attention_variant attention;
    pgd_conv_algo conv;
    int weights_f16;
    int64_t attn_key_block;
    int row_wg;
    int few_rows; /* 1: conv_few_rows_cpu wherever it can run (white-box: the params) */
} form;

static pgd_ctx *make_ctx(const form *f)
{
    pgd_ctx_options o;
    pgd_ctx_options_init(&o);
    pgd_error *err = NULL;
    if (any_device) /* $PAGODA_DEVICE picks the device */
        PGD_CHECK_OK(pgd_ctx_options_from_env(&o, &err), &err);
    o.cache_dir = "off";
    o.gemm_backend = PGD_GEMM_BACKEND_PAGODA;
    o.gemm_tuning = PGD_GEMM_TUNE_ON_REQUEST;
    if (f) {
        o.kernel_params = f->kernel_params;
        o.attention = f->attention;
        o.conv_algo = f->conv;
        o.weights_f16 = f->weights_f16;
        pgd_test_knob(&o, "attn_key_block", f->attn_key_block);
        pgd_test_knob(&o, "row_wg", f->row_wg);
    }
    pgd_ctx *ctx = NULL;
    PGD_CHECK_OK(pgd_ctx_create_with_options(&o, &ctx, &err), &err);
    if (f)
        pgd__params_of(ctx)->conv_few_rows = f->few_rows;
    const pgd_device_info *d = pgd_ctx_get_device(ctx);
    ck_assert_msg(any_device || strstr(d->name, "Oclgrind"),
                  "the device is '%s', not Oclgrind's: run this under tests/oclgrind.sh", d->name);
    pgd_ctx_set_profiling(ctx, 1);
    return ctx;
}

static const form cpu_form = {.kernel_params = "cpu:rm=2,vw=4,nv=2,ku=2",
                              .attention = PGD_ATTENTION_KT};

/* ---- data ---- */

static float *rand_floats(pgd_rng *r, int64_t n, float scale)
{
    float *f = malloc((size_t)(n > 0 ? n : 1) * sizeof *f);
    for (int64_t i = 0; i < n; i++)
        f[i] = pgd_rng_float(r) * scale;
    return f;
}

static pgd_tensor *upload_rand(pgd_ctx *ctx, pgd_rng *r, int ndim, const int64_t *shape,
                               float **host)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    float *h = rand_floats(r, n, 1.0f);
    pgd_tensor *t = pgd_test_upload(ctx, ndim, shape, h);
    if (host)
        *host = h;
    else
        free(h);
    return t;
}

/* An output tensor poisoned with NaN, so that an element left unwritten fails the comparison. */
static pgd_tensor *poisoned(pgd_ctx *ctx, int ndim, const int64_t *shape)
{
    pgd_tensor *t = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_tensor_create(ctx, ndim, shape, &t, &err), &err);
    PGD_CHECK_OK(pgd_tensor_fill(t, NAN, &err), &err);
    return t;
}

static float *download(const pgd_tensor *t)
{
    pgd_error *err = NULL;
    int64_t n = pgd_tensor_get_numel(t);
    float *h = malloc((size_t)(n > 0 ? n : 1) * sizeof *h);
    PGD_CHECK_OK(pgd_tensor_download(t, h, &err), &err);
    return h;
}

/* Downloads t and compares it with want (n values); frees want. */
static void expect_close(const pgd_tensor *t, double *want, double rtol, double atol,
                         const char *what)
{
    float *got = download(t);
    size_t n = (size_t)pgd_tensor_get_numel(t);
    ck_assert_msg(pgd_test_allclose(got, want, n, rtol, atol, what), "%s differs", what);
    free(got);
    free(want);
}

static double *dalloc(int64_t n)
{
    return malloc((size_t)(n > 0 ? n : 1) * sizeof(double));
}

/* ---- elementwise, rows, activations ---- */

/* The row ops of norm.cl on [rows, cols], scale and add, against the references. */
static void rows_case(pgd_ctx *ctx, pgd_rng *r, int64_t rows, int64_t cols)
{
    pgd_error *err = NULL;
    int64_t s[2] = {rows, cols}, n = rows * cols;
    float *hx, *hb, *hw, *hbias;
    pgd_tensor *x = upload_rand(ctx, r, 2, s, &hx), *b = upload_rand(ctx, r, 2, s, &hb);
    pgd_tensor *w = upload_rand(ctx, r, 1, &cols, &hw),
               *bias = upload_rand(ctx, r, 1, &cols, &hbias);
    pgd_tensor *y = poisoned(ctx, 2, s);
    double *want = dalloc(n);
    PGD_CHECK_OK(pgd_scale(ctx, x, 1.5f, y, &err), &err);
    PGD_CHECK_OK(pgd_add(ctx, y, b, y, &err), &err);
    for (int64_t i = 0; i < n; i++)
        want[i] = 1.5 * hx[i] + hb[i];
    expect_close(y, want, 1e-6, 1e-6, "scale + add");
    PGD_CHECK_OK(pgd_layernorm(ctx, x, w, bias, 1e-5f, y, &err), &err);
    pgd_ref_layernorm(hx, hw, hbias, (size_t)rows, (size_t)cols, 1e-5, want = dalloc(n));
    expect_close(y, want, 1e-4, 1e-5, "layernorm");
    PGD_CHECK_OK(pgd_layernorm(ctx, x, NULL, NULL, 1e-5f, y, &err), &err);
    pgd_ref_layernorm(hx, NULL, NULL, (size_t)rows, (size_t)cols, 1e-5, want = dalloc(n));
    expect_close(y, want, 1e-4, 1e-5, "layernorm without affine");
    PGD_CHECK_OK(pgd_softmax(ctx, x, 0.7f, y, &err), &err);
    pgd_ref_softmax(hx, (size_t)rows, (size_t)cols, 0.7, want = dalloc(n));
    expect_close(y, want, 1e-5, 1e-7, "softmax");
    PGD_CHECK_OK(pgd_gelu(ctx, x, y, 0, &err), &err);
    pgd_ref_gelu_erf(hx, (size_t)n, want = dalloc(n));
    expect_close(y, want, 1e-5, 1e-6, "gelu");
    PGD_CHECK_OK(pgd_gelu(ctx, x, y, 1, &err), &err);
    pgd_ref_gelu_tanh(hx, (size_t)n, want = dalloc(n));
    expect_close(y, want, 1e-5, 1e-6, "gelu (tanh)");
    PGD_CHECK_OK(pgd_relu(ctx, x, y, &err), &err);
    pgd_ref_relu(hx, (size_t)n, want = dalloc(n));
    expect_close(y, want, 0, 0, "relu");
    PGD_CHECK_OK(pgd_bias_add(ctx, x, bias, y, &err), &err);
    pgd_ref_bias_add(hx, hbias, (size_t)rows, (size_t)cols, want = dalloc(n));
    expect_close(y, want, 1e-6, 1e-6, "bias_add");
    pgd_tensor *tensors[] = {x, b, w, bias, y};
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++)
        pgd_tensor_destroy(tensors[i]);
    free(hx), free(hb), free(hw), free(hbias);
}

START_TEST(rows_and_elementwise)
{
    pgd_rng r;
    pgd_rng_seed(&r, 11);
    pgd_ctx *ctx = make_ctx(NULL);
    rows_case(ctx, &r, 3, 50); /* a group of 64 items a row, 14 of them idle */
    rows_case(ctx, &r, 2, 1);
    tally_destroy(ctx);
    /* groups of 16 items striding over rows of 70 */
    const form narrow = {.row_wg = 16};
    ctx = make_ctx(&narrow);
    rows_case(ctx, &r, 2, 70);
    tally_destroy(ctx);
}
END_TEST

/* ---- broadcasting elementwise ops and reductions (broadcast.cl) ---- */

/* a [3, 1, 5] op b [4, 1]: y [3, 4, 5] through broadcast_binary (three dims after merging),
 * where, the unary ops, clip, and a [70] + [70] through broadcast_binary2 (merges to one dim);
 * reductions over one axis (in runs: 300 elements) and over all. */
static void broadcast_case(pgd_ctx *ctx, pgd_rng *r)
{
    pgd_error *err = NULL;
    int64_t sa[3] = {3, 1, 5}, sb[2] = {4, 1}, sy[3] = {3, 4, 5}, n = 60;
    float *ha, *hb;
    pgd_tensor *a = upload_rand(ctx, r, 3, sa, &ha), *b = upload_rand(ctx, r, 2, sb, &hb);
    pgd_tensor *y = poisoned(ctx, 3, sy);
    double *want;
    for (int op = PGD_BINARY_ADD; op <= PGD_BINARY_MIN; op++) {
        if (op == PGD_BINARY_POW)
            continue; /* a negative base: NaN, compared below with positive operands only */
        PGD_CHECK_OK(pgd_binary(ctx, (pgd_binary_op)op, a, b, y, &err), &err);
        want = dalloc(n);
        for (int64_t i = 0; i < n; i++)
            want[i] = pgd_ref_binary(op, ha[pgd_ref_bcast_index((size_t)i, 3, sy, 3, sa)],
                                     hb[pgd_ref_bcast_index((size_t)i, 3, sy, 2, sb)]);
        expect_close(y, want, 1e-5, 1e-6, "broadcast binary");
    }
    PGD_CHECK_OK(pgd_where(ctx, b, a, b, y, &err), &err);
    want = dalloc(n);
    for (int64_t i = 0; i < n; i++) {
        size_t ib = pgd_ref_bcast_index((size_t)i, 3, sy, 2, sb);
        want[i] = hb[ib] != 0 ? ha[pgd_ref_bcast_index((size_t)i, 3, sy, 3, sa)] : hb[ib];
    }
    expect_close(y, want, 0, 0, "where");
    pgd_tensor *u = poisoned(ctx, 3, sa);
    for (int op = PGD_UNARY_EXP; op <= PGD_UNARY_SILU; op++) {
        PGD_CHECK_OK(pgd_unary(ctx, (pgd_unary_op)op, a, u, &err), &err);
        want = dalloc(15);
        for (int64_t i = 0; i < 15; i++)
            want[i] = pgd_ref_unary(op, ha[i]);
        /* log, sqrt and rsqrt of negative values are NaN on both sides */
        float *got = download(u);
        for (int64_t i = 0; i < 15; i++)
            ck_assert_msg(isnan(want[i]) ? isnan(got[i])
                                         : fabs(got[i] - want[i]) <= 1e-5 * fabs(want[i]) + 1e-6,
                          "unary %d [%lld]: %g, want %g", op, (long long)i, got[i], want[i]);
        free(got);
        free(want);
    }
    PGD_CHECK_OK(pgd_clip(ctx, a, -0.25f, 0.5f, u, &err), &err);
    want = dalloc(15);
    for (int64_t i = 0; i < 15; i++)
        want[i] = ha[i] < -0.25 ? -0.25 : ha[i] > 0.5 ? 0.5 : ha[i];
    expect_close(u, want, 0, 0, "clip");
    int64_t sl[1] = {70};
    float *hl, *hm;
    pgd_tensor *l = upload_rand(ctx, r, 1, sl, &hl), *m = upload_rand(ctx, r, 1, sl, &hm);
    pgd_tensor *ly = poisoned(ctx, 1, sl);
    PGD_CHECK_OK(pgd_binary(ctx, PGD_BINARY_MUL, l, m, ly, &err), &err);
    want = dalloc(70);
    for (int64_t i = 0; i < 70; i++)
        want[i] = (double)hl[i] * hm[i];
    expect_close(ly, want, 1e-6, 1e-7, "broadcast binary2");
    int64_t sx[2] = {2, 300}, s1[1] = {2}, s0[1] = {1};
    float *hx;
    pgd_tensor *x = upload_rand(ctx, r, 2, sx, &hx), *y1 = poisoned(ctx, 1, s1);
    pgd_tensor *y0 = poisoned(ctx, 0, s0);
    int axis = 1, mask[2] = {0, 1}, all[2] = {1, 1};
    for (int op = PGD_REDUCE_SUM; op <= PGD_REDUCE_ARGMIN; op++) {
        PGD_CHECK_OK(pgd_reduce(ctx, (pgd_reduce_op)op, x, &axis, 1, 0, y1, &err), &err);
        pgd_ref_reduce(op, hx, 2, sx, mask, want = dalloc(2), NULL);
        expect_close(y1, want, op == PGD_REDUCE_PROD ? 1e-4 : 1e-5, 1e-5, "reduce axis 1");
        PGD_CHECK_OK(pgd_reduce(ctx, (pgd_reduce_op)op, x, NULL, 0, 0, y0, &err), &err);
        pgd_ref_reduce(op, hx, 2, sx, all, want = dalloc(1), NULL);
        expect_close(y0, want, op == PGD_REDUCE_PROD ? 1e-4 : 1e-5, 1e-5, "reduce all");
    }
    pgd_tensor *tensors[] = {a, b, y, u, l, m, ly, x, y1, y0};
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++)
        pgd_tensor_destroy(tensors[i]);
    free(ha), free(hb), free(hl), free(hm), free(hx);
}

START_TEST(broadcast_ops)
{
    pgd_rng r;
    pgd_rng_seed(&r, 17);
    pgd_ctx *ctx = make_ctx(NULL);
    broadcast_case(ctx, &r);
    tally_destroy(ctx);
}
END_TEST

/* ---- layout (layout.cl) ---- */

/* The host copy of a float tensor as doubles, for the references. */
static double *widen(const float *h, int64_t n)
{
    double *d = dalloc(n);
    for (int64_t i = 0; i < n; i++)
        d[i] = h[i];
    return d;
}

/* A transpose and a slice with negative steps (layout_copy), a gather, every padding mode
 * with pads on both sides and a crop (layout_pad), and depth-to-space. */
static void layout_case(pgd_ctx *ctx, pgd_rng *r)
{
    pgd_error *err = NULL;
    int64_t sx[3] = {3, 4, 5}, st[3] = {5, 3, 4}, n = 60;
    float *hx;
    pgd_tensor *x = upload_rand(ctx, r, 3, sx, &hx), *y = poisoned(ctx, 3, st);
    double *dx = widen(hx, n), *want = dalloc(n);
    int perm[3] = {2, 0, 1};
    PGD_CHECK_OK(pgd_transpose(ctx, x, perm, y, &err), &err);
    pgd_ref_transpose(dx, 3, sx, perm, want);
    expect_close(y, want, 0, 0, "transpose");
    int64_t ss[3] = {3, 2, 3}, starts[2] = {-1, 0}, ends[2] = {INT64_MIN, 5}, steps[2] = {-2, 2};
    int axes[2] = {1, 2};
    int64_t *idx[3];
    int64_t i0[3] = {0, 1, 2}, i1[2] = {3, 1}, i2[3] = {0, 2, 4};
    idx[0] = i0, idx[1] = i1, idx[2] = i2;
    pgd_tensor *s = poisoned(ctx, 3, ss);
    PGD_CHECK_OK(pgd_slice(ctx, x, 2, axes, starts, ends, steps, s, &err), &err);
    pgd_ref_slice(dx, 3, sx, idx, ss, want = dalloc(18));
    expect_close(s, want, 0, 0, "slice");
    int64_t gi[2] = {4, -5}, gs[1] = {2}, sg[3] = {3, 4, 2};
    pgd_tensor *g = poisoned(ctx, 3, sg);
    PGD_CHECK_OK(pgd_gather(ctx, x, 2, gi, 1, gs, g, &err), &err);
    pgd_ref_gather(dx, 3, sx, 2, gi, 1, gs, want = dalloc(24));
    expect_close(g, want, 0, 0, "gather");
    int64_t pads[6] = {1, -1, 6, 0, 2, 3}, sp[3] = {4, 5, 14};
    pgd_tensor *p = poisoned(ctx, 3, sp);
    for (int mode = PGD_PAD_CONSTANT; mode <= PGD_PAD_WRAP; mode++) {
        PGD_CHECK_OK(pgd_pad(ctx, x, pads, (pgd_pad_mode)mode, -7.0f, p, &err), &err);
        pgd_ref_pad(dx, 3, sx, pads, mode, -7.0, want = dalloc(280));
        expect_close(p, want, 0, 0, "pad");
    }
    int64_t sd[4] = {1, 8, 2, 3}, so[4] = {1, 2, 4, 6};
    float *hd;
    pgd_tensor *dd = upload_rand(ctx, r, 4, sd, &hd), *o = poisoned(ctx, 4, so);
    double *ddx = widen(hd, 48);
    PGD_CHECK_OK(pgd_depth_to_space(ctx, dd, 2, PGD_DEPTH_CRD, o, &err), &err);
    pgd_ref_depth_to_space(ddx, sd, 2, 1, want = dalloc(48));
    expect_close(o, want, 0, 0, "depth_to_space");
    pgd_tensor *tensors[] = {x, y, s, g, p, dd, o};
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++)
        pgd_tensor_destroy(tensors[i]);
    free(hx), free(hd), free(dx), free(ddx);
}

START_TEST(layout_ops)
{
    pgd_rng r;
    pgd_rng_seed(&r, 19);
    pgd_ctx *ctx = make_ctx(NULL);
    layout_case(ctx, &r);
    tally_destroy(ctx);
}
END_TEST

/* ---- normalisation over any axis (norm.cl) ---- */

/* log_softmax over a middle axis (moved last by layout_copy), LayerNorm with its statistics
 * (layernorm_stats), RMSNorm, batch norm and group norm (channel_norm). */
static void normalize_case(pgd_ctx *ctx, pgd_rng *r)
{
    pgd_error *err = NULL;
    int64_t sx[3] = {2, 70, 3}, s2[2] = {2, 1}, s70[1] = {70}, n = 420;
    float *hx, *hw, *hb;
    pgd_tensor *x = upload_rand(ctx, r, 3, sx, &hx), *y = poisoned(ctx, 3, sx);
    double *want = dalloc(n);
    PGD_CHECK_OK(pgd_softmax_axis(ctx, x, 1, 1.5f, 1, y, &err), &err);
    pgd_ref_softmax_axis(hx, 2, 70, 3, 1.5, 1, want);
    expect_close(y, want, 1e-5, 1e-5, "log_softmax axis 1");
    int64_t sw[2] = {70, 3};
    pgd_tensor *w = upload_rand(ctx, r, 2, sw, &hw), *b = upload_rand(ctx, r, 2, sw, &hb);
    pgd_tensor *m = poisoned(ctx, 2, s2), *s = poisoned(ctx, 2, s2);
    double *wm = dalloc(2), *wr = dalloc(2);
    PGD_CHECK_OK(pgd_layernorm_axis(ctx, x, 1, w, b, 1e-5f, y, m, s, &err), &err);
    pgd_ref_layernorm_groups(hx, 2, 210, hw, hb, 1e-5, want = dalloc(n), wm, wr);
    expect_close(y, want, 1e-4, 1e-5, "layernorm axis 1");
    expect_close(m, wm, 1e-5, 1e-6, "layernorm mean");
    expect_close(s, wr, 1e-4, 1e-6, "layernorm rstd");
    PGD_CHECK_OK(pgd_rmsnorm(ctx, x, 1, w, 1e-5f, y, &err), &err);
    pgd_ref_rmsnorm(hx, 2, 210, hw, 1e-5, want = dalloc(n));
    expect_close(y, want, 1e-4, 1e-5, "rmsnorm");
    float *hm, *hv, *hg, *hc;
    pgd_tensor *cm = upload_rand(ctx, r, 1, s70, &hm), *cv = upload_rand(ctx, r, 1, s70, &hv);
    pgd_tensor *cg = upload_rand(ctx, r, 1, s70, &hg), *cb = upload_rand(ctx, r, 1, s70, &hc);
    float *hv2 = malloc(70 * sizeof *hv2);
    for (int i = 0; i < 70; i++)
        hv2[i] = hv[i] * hv[i] + 0.5f; /* a variance */
    PGD_CHECK_OK(pgd_tensor_upload(cv, hv2, &err), &err);
    PGD_CHECK_OK(pgd_batch_norm(ctx, x, cm, cv, cg, cb, 1e-5f, y, &err), &err);
    pgd_ref_batch_norm(hx, 2, 70, 3, hm, hv2, hg, hc, 1e-5, want = dalloc(n));
    expect_close(y, want, 1e-5, 1e-6, "batch_norm");
    PGD_CHECK_OK(pgd_group_norm(ctx, x, 7, cg, cb, 1e-5f, y, &err), &err);
    pgd_ref_group_norm(hx, 2, 70, 3, 7, hg, hc, 1e-5, want = dalloc(n));
    expect_close(y, want, 1e-4, 1e-5, "group_norm");
    pgd_tensor *tensors[] = {x, y, w, b, m, s, cm, cv, cg, cb};
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++)
        pgd_tensor_destroy(tensors[i]);
    free(hx), free(hw), free(hb), free(hm), free(hv), free(hg), free(hc), free(hv2);
}

START_TEST(normalize_ops)
{
    pgd_rng r;
    pgd_rng_seed(&r, 23);
    pgd_ctx *ctx = make_ctx(NULL);
    normalize_case(ctx, &r);
    tally_destroy(ctx);
}
END_TEST

/* ---- general pooling (pool.cl) ---- */

/* A dilated max pool with per-side pads, ceil mode and indices, and an average pool counting
 * the padding, both against the reference. */
static void pool_general_case(pgd_ctx *ctx, pgd_rng *r)
{
    pgd_error *err = NULL;
    int64_t sx[4] = {2, 9, 7, 3}, oh, ow;
    float *hx;
    pgd_tensor *x = upload_rand(ctx, r, 4, sx, &hx);
    pgd_pool_desc d = {PGD_POOL_MAX, 3, 2, 2, 2, 2, 1, 1, 0, 2, 1, 1, 0};
    for (int mode = 0; mode < 2; mode++) {
        d.mode = (pgd_pool_mode)mode;
        d.count_include_pad = 1;
        PGD_CHECK_OK(pgd_pool2d_output_size(&d, 9, 7, &oh, &ow, &err), &err);
        int64_t sy[4] = {2, oh, ow, 3}, ny = 2 * oh * ow * 3;
        pgd_tensor *y = poisoned(ctx, 4, sy), *idx = mode ? NULL : poisoned(ctx, 4, sy);
        PGD_CHECK_OK(pgd_pool2d(ctx, x, &d, y, idx, &err), &err);
        double *want = dalloc(ny), *wi = dalloc(ny);
        pgd_ref_pool2d(hx, 2, 9, 7, 3, &d, oh, ow, want, wi);
        expect_close(y, want, 1e-5, 1e-6, mode ? "avgpool general" : "maxpool general");
        if (idx)
            expect_close(idx, wi, 0, 0, "maxpool indices");
        else
            free(wi);
        pgd_tensor_destroy(y);
        pgd_tensor_destroy(idx);
    }
    pgd_tensor_destroy(x);
    free(hx);
}

START_TEST(pool_general)
{
    pgd_rng r;
    pgd_rng_seed(&r, 29);
    pgd_ctx *ctx = make_ctx(NULL);
    pool_general_case(ctx, &r);
    tally_destroy(ctx);
}
END_TEST

/* ---- GEMM and linear layers ---- */

/* C = act(alpha·op(A)·op(B) + beta·C + bias) + R over a batch of 2, for each transposition. */
static void gemm_case(pgd_ctx *ctx, pgd_rng *r, int ta, int tb, int64_t M, int64_t N, int64_t K)
{
    pgd_error *err = NULL;
    const int64_t batch = 2;
    int64_t sa[3] = {batch, ta ? K : M, ta ? M : K}, sb[3] = {batch, tb ? N : K, tb ? K : N};
    int64_t sc[3] = {batch, M, N};
    float *ha, *hb, *hc, *hr, *hbias;
    pgd_tensor *a = upload_rand(ctx, r, 3, sa, &ha), *b = upload_rand(ctx, r, 3, sb, &hb);
    pgd_tensor *c = upload_rand(ctx, r, 3, sc, &hc), *res = upload_rand(ctx, r, 3, sc, &hr);
    pgd_tensor *bias = upload_rand(ctx, r, 1, &N, &hbias);
    pgd_gemm_args g = {ta, tb, 0.5f, 0.25f, bias, PGD_ACT_GELU, res};
    PGD_CHECK_OK(pgd_gemm(ctx, &g, a, b, c, &err), &err);
    double *want = dalloc(batch * M * N);
    pgd_ref_mat ma = {ha, 0, sa[2], sa[1] * sa[2]}, mb = {hb, 0, sb[2], sb[1] * sb[2]};
    pgd_ref_mat mc = {NULL, 0, N, M * N};
    pgd_ref_gemm_strided(ta, tb, M, N, K, batch, 0.5, ma, mb, 0.25, hc, mc, hbias, PGD_ACT_GELU, hr,
                         want);
    char what[64];
    snprintf(what, sizeof what, "gemm ta %d tb %d %lldx%lldx%lld", ta, tb, (long long)M,
             (long long)N, (long long)K);
    expect_close(c, want, 1e-4, 1e-5, what);
    /* plain C = A·B (beta 0: C is never read; it holds NaN) */
    pgd_tensor *c0 = poisoned(ctx, 3, sc);
    g = (pgd_gemm_args){ta, tb, 1.0f, 0.0f, NULL, PGD_ACT_NONE, NULL};
    PGD_CHECK_OK(pgd_gemm(ctx, &g, a, b, c0, &err), &err);
    pgd_ref_gemm_strided(ta, tb, M, N, K, batch, 1.0, ma, mb, 0.0, NULL, mc, NULL, 0, NULL,
                         want = dalloc(batch * M * N));
    expect_close(c0, want, 1e-4, 1e-5, what);
    pgd_tensor *tensors[] = {a, b, c, res, bias, c0};
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++)
        pgd_tensor_destroy(tensors[i]);
    free(ha), free(hb), free(hc), free(hr), free(hbias);
}

/* y = relu(x·Wᵀ + b) + y through a linear layer (its weights packed on CPU kernels, rounded to
 * halves with weights_f16). */
static void linear_case(pgd_ctx *ctx, pgd_rng *r, int f16, int64_t rows, int64_t in, int64_t out)
{
    pgd_error *err = NULL;
    int64_t sx[2] = {rows, in}, sw[2] = {out, in}, sy[2] = {rows, out};
    float *hx, *hw, *hb, *hy;
    pgd_tensor *x = upload_rand(ctx, r, 2, sx, &hx), *w = upload_rand(ctx, r, 2, sw, &hw);
    pgd_tensor *b = upload_rand(ctx, r, 1, &out, &hb), *y = upload_rand(ctx, r, 2, sy, &hy);
    pgd_linear *l = NULL;
    PGD_CHECK_OK(pgd_linear_create(ctx, w, b, &l, &err), &err);
    PGD_CHECK_OK(pgd_linear_forward(ctx, l, x, PGD_ACT_RELU, y, y, &err), &err);
    if (f16)
        for (int64_t i = 0; i < out * in; i++)
            hw[i] = pgd_ref_round_half(hw[i]);
    double *want = dalloc(rows * out);
    pgd_ref_mat mx = {hx, 0, in, 0}, mw = {hw, 0, in, 0}, my = {NULL, 0, out, 0};
    pgd_ref_gemm_strided(0, 1, rows, out, in, 1, 1.0, mx, mw, 0.0, NULL, my, hb, PGD_ACT_RELU, hy,
                         want);
    expect_close(y, want, 1e-4, 1e-5, f16 ? "linear (f16 weights)" : "linear");
    pgd_linear_destroy(l);
    pgd_tensor_destroy(x), pgd_tensor_destroy(w), pgd_tensor_destroy(b), pgd_tensor_destroy(y);
    free(hx), free(hw), free(hb), free(hy);
}

START_TEST(gemm_forms)
{
    static const form forms[] = {
        {.kernel_params = NULL},                                    /* the device's tile */
        {.kernel_params = "gpu:tsm=32,tsn=16,tsk=8,wptm=4,wptn=2"}, /* several groups of 64 */
        {.weights_f16 = 1},                                         /* fp16 weights */
        {.kernel_params = "cpu:rm=2,vw=4,nv=2,ku=2"},               /* gemm_cpu, packed panels */
    };
    pgd_rng r;
    pgd_rng_seed(&r, 12);
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        pgd_ctx *ctx = make_ctx(&forms[i]);
        for (int t = 0; t < 4; t++)
            gemm_case(ctx, &r, t & 1, t >> 1, 37, 45, 20);
        linear_case(ctx, &r, forms[i].weights_f16, 5, 20, 45);
        tally_destroy(ctx);
    }
}
END_TEST

/* ---- attention ---- */

static pgd_view dense_view(const pgd_tensor *t, int64_t H, int64_t N, int64_t D)
{
    return (pgd_view){t, 0, H * N * D, N * D, D};
}

/* One attention of B = 2, H = 2 with an additive mask (some keys -inf), causal or not, with
 * probabilities of rows [1, nq) of every head, against the reference. */
static void attention_case(pgd_ctx *ctx, pgd_rng *r, int64_t nq, int64_t nk, int64_t D, int causal,
                           pgd_attention_mode mode, const char *what)
{
    pgd_error *err = NULL;
    const int64_t B = 2, H = 2;
    int64_t sq[4] = {B, H, nq, D}, sk[4] = {B, H, nk, D}, sm[4] = {B, H, nq, nk};
    int64_t sp[4] = {B, H, nq - 1, nk};
    float *hq, *hk, *hv, *hm;
    pgd_tensor *q = upload_rand(ctx, r, 4, sq, &hq), *k = upload_rand(ctx, r, 4, sk, &hk);
    pgd_tensor *v = upload_rand(ctx, r, 4, sk, &hv);
    hm = rand_floats(r, B * H * nq * nk, 1.0f);
    for (int64_t i = 0; i < B * H * nq * nk; i += 5)
        hm[i] = -INFINITY;
    pgd_tensor *m = pgd_test_upload(ctx, 4, sm, hm);
    pgd_tensor *o = poisoned(ctx, 4, sq), *p = poisoned(ctx, 4, sp);
    pgd_attention_args a;
    memset(&a, 0, sizeof a);
    a.batch = B, a.heads = H, a.nq = nq, a.nk = nk, a.head_dim = D, a.causal = causal;
    a.q = dense_view(q, H, nq, D), a.k = dense_view(k, H, nk, D), a.v = dense_view(v, H, nk, D);
    a.o = dense_view(o, H, nq, D), a.mask = dense_view(m, H, nq, nk);
    a.probs = p, a.probs_head = -1, a.probs_q0 = 1, a.probs_q1 = nq;
    a.mode = mode, a.topk = 3, a.seed = 7;
    PGD_CHECK_OK(pgd_attention(ctx, &a, &err), &err);
    double *want = dalloc(B * H * nq * D), *wantp = dalloc(B * H * (nq - 1) * nk);
    pgd_ref_attention(&a, hq, hk, hv, hm, want, wantp);
    expect_close(o, want, 1e-4, 1e-5, what);
    expect_close(p, wantp, 1e-4, 1e-6, what);
    pgd_tensor *tensors[] = {q, k, v, m, o, p};
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++)
        pgd_tensor_destroy(tensors[i]);
    free(hq), free(hk), free(hv), free(hm);
}

START_TEST(attention_forms)
{
    static const struct {
        form f;
        int64_t d;
        const char *what;
    } cases[] = {
        {{.attention = PGD_ATTENTION_AUTO}, 8, "attention tiled (the GPU default)"},
        {{.attention = PGD_ATTENTION_TILED}, 6, "attention tiled, head_dim 6"},
        {{.attention = PGD_ATTENTION_ROWS}, 8, "attention rows"},
        {{.attention = PGD_ATTENTION_KT}, 8, "attention kt"},
        {{.attention = PGD_ATTENTION_KT, .attn_key_block = 4}, 8, "attention kt, key blocks"},
        {{.attention = PGD_ATTENTION_GENERIC}, 6, "attention generic"},
    };
    pgd_rng r;
    pgd_rng_seed(&r, 13);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pgd_ctx *ctx = make_ctx(&cases[i].f);
        attention_case(ctx, &r, 9, 70, cases[i].d, 0, PGD_ATTENTION_SOFT, cases[i].what);
        attention_case(ctx, &r, 5, 7, cases[i].d, 1, PGD_ATTENTION_SOFT, cases[i].what);
        if (i == 0) {
            attention_case(ctx, &r, 5, 7, 8, 0, PGD_ATTENTION_TOPK, "attention top-3");
            attention_case(ctx, &r, 5, 7, 8, 1, PGD_ATTENTION_SAMPLE, "attention sampled");
        }
        tally_destroy(ctx);
    }
}
END_TEST

/* pgd_attention_ex's kernels: the keys appended to a cache (attn_ext_append), a window, key
 * counts per sequence and a boolean mask broadcast over heads and queries (attn_ext_fwd), the
 * probabilities as scores (attn_ext_scores). The reference sees the same visibility as an
 * additive mask of 0 and -inf. */
static void attention_ext_case(pgd_ctx *ctx, pgd_rng *r)
{
    pgd_error *err = NULL;
    const int64_t B = 2, H = 2, nq = 6, nk = 9, D = 5, lens[2] = {9, 4};
    int64_t sq[4] = {B, H, nq, D}, sk[4] = {B, H, nk, D}, sm[4] = {B, 1, 1, nk};
    int64_t sp[4] = {B, H, nq, nk};
    float *hq, *hk, *hv, hb[2 * 9];
    pgd_tensor *q = upload_rand(ctx, r, 4, sq, &hq), *k = upload_rand(ctx, r, 4, sk, &hk);
    pgd_tensor *v = upload_rand(ctx, r, 4, sk, &hv);
    for (int i = 0; i < B * nk; i++)
        hb[i] = i % 4 != 1;
    pgd_tensor *m = pgd_test_upload(ctx, 4, sm, hb);
    pgd_tensor *kc = poisoned(ctx, 4, sk), *vc = poisoned(ctx, 4, sk);
    pgd_tensor *o = poisoned(ctx, 4, sq), *p = poisoned(ctx, 4, sp);
    pgd_attention_args a;
    memset(&a, 0, sizeof a);
    a.batch = B, a.heads = H, a.nq = nq, a.nk = nk, a.head_dim = D, a.causal = 1;
    a.q = dense_view(q, H, nq, D), a.k = dense_view(k, H, nk, D), a.v = dense_view(v, H, nk, D);
    a.o = dense_view(o, H, nq, D), a.mask = (pgd_view){m, 0, nk, 0, 0};
    pgd_attention_ext e;
    memset(&e, 0, sizeof e);
    e.size = sizeof e, e.mask_bool = 1, e.window = 1, e.window_left = 3, e.window_right = -1;
    e.kv_lens = lens, e.scores = p, e.scores_kind = PGD_SCORES_PROBS;
    e.k_cache = dense_view(kc, H, nk, D), e.v_cache = dense_view(vc, H, nk, D);
    PGD_CHECK_OK(pgd_attention_ex(ctx, &a, &e, &err), &err);
    /* the reference: the same keys hidden by an additive mask [B, H, nq, nk] */
    float *hm = malloc((size_t)(B * H * nq * nk) * sizeof *hm);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < nq; i++)
                for (int64_t j = 0; j < nk; j++) {
                    int64_t pos = i + lens[b] - nq;
                    int seen = j < lens[b] && j <= pos && pos - j <= 3 && hb[b * nk + j] != 0;
                    hm[((b * H + h) * nq + i) * nk + j] = seen ? 0.0f : -INFINITY;
                }
    pgd_attention_args ra = a;
    ra.causal = 0, ra.mask = dense_view(m, H, nq, nk);
    ra.probs = p, ra.probs_head = -1, ra.probs_q0 = 0, ra.probs_q1 = nq;
    double *want = dalloc(B * H * nq * D), *wantp = dalloc(B * H * nq * nk);
    pgd_ref_attention(&ra, hq, hk, hv, hm, want, wantp);
    expect_close(o, want, 1e-4, 1e-5, "attention ext");
    expect_close(p, wantp, 1e-4, 1e-6, "attention ext probabilities");
    expect_close(kc, widen(hk, B * H * nk * D), 0, 0, "attention ext K cache");
    pgd_tensor *tensors[] = {q, k, v, m, kc, vc, o, p};
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++)
        pgd_tensor_destroy(tensors[i]);
    free(hq), free(hk), free(hv), free(hm);
}

START_TEST(attention_ext_forms)
{
    pgd_rng r;
    pgd_rng_seed(&r, 17);
    form f = {.attention = PGD_ATTENTION_AUTO};
    pgd_ctx *ctx = make_ctx(&f);
    attention_ext_case(ctx, &r);
    tally_destroy(ctx);
}
END_TEST

/* ---- convolution and pooling ---- */

/* y = relu(conv(x) + bias + residual) for x [n, h, w, cin], checked against the reference and
 * that `alg` is the algorithm that ran. */
static void conv_case(pgd_ctx *ctx, pgd_rng *r, const pgd_conv2d_desc *d, int64_t n, int64_t h,
                      int64_t w, const char *alg)
{
    pgd_error *err = NULL;
    int groups = d->groups ? d->groups : 1;
    int64_t nw = d->cout * (d->cin / groups) * d->kh * d->kw;
    float *hw = rand_floats(r, nw, 0.5f), *hb = rand_floats(r, d->cout, 1.0f), *hx, *hres;
    pgd_conv2d *conv = NULL;
    PGD_CHECK_OK(pgd_conv2d_create(ctx, d, hw, hb, NULL, &conv, &err), &err);
    const char *got_alg = pgd_conv2d_algorithm_batch(ctx, conv, n, h, w);
    ck_assert_msg(any_device || !strcmp(got_alg, alg), "conv: %s runs, expected %s", got_alg, alg);
    int64_t oh, ow;
    pgd_conv2d_out_size(d, h, w, &oh, &ow);
    int64_t sx[4] = {n, h, w, d->cin}, sy[4] = {n, oh, ow, d->cout};
    pgd_tensor *x = upload_rand(ctx, r, 4, sx, &hx), *res = upload_rand(ctx, r, 4, sy, &hres);
    pgd_tensor *y = poisoned(ctx, 4, sy);
    PGD_CHECK_OK(pgd_conv2d_forward(ctx, conv, x, PGD_ACT_RELU, res, y, &err), &err);
    pgd_ref_conv g = {(size_t)n,
                      (size_t)h,
                      (size_t)w,
                      (size_t)d->cin,
                      (size_t)d->cout,
                      (size_t)d->kh,
                      (size_t)d->kw,
                      (size_t)(d->stride_h ? d->stride_h : 1),
                      (size_t)(d->stride_w ? d->stride_w : 1),
                      (size_t)d->pad_h,
                      (size_t)d->pad_w,
                      (size_t)(d->dil_h ? d->dil_h : 1),
                      (size_t)(d->dil_w ? d->dil_w : 1),
                      (size_t)groups};
    double *want = dalloc(n * oh * ow * d->cout);
    pgd_ref_conv2d(&g, hx, hw, hb, NULL, 1e-5, hres, 1, want, NULL);
    char what[64];
    snprintf(what, sizeof what, "conv %dx%d (%s)", d->kh, d->kw, alg);
    expect_close(y, want, 1e-4, 1e-4, what);
    pgd_conv2d_destroy(conv);
    pgd_tensor_destroy(x), pgd_tensor_destroy(res), pgd_tensor_destroy(y);
    free(hw), free(hb), free(hx), free(hres);
}

/* 1x1; 3x3 stride 2 in 2 groups of 8 outputs; depthwise 3x3 with dilation 2 over 5 channels
 * (one a work-item) and depthwise 5x5 stride 2 over 16 (a vector of 16); 3x3 stride 1. */
static const pgd_conv2d_desc conv_1x1 = {8, 12, 1, 1, 0, 0, 0, 0, 0, 0, 0};
static const pgd_conv2d_desc conv_grouped = {6, 16, 3, 3, 2, 2, 1, 1, 1, 1, 2};
static const pgd_conv2d_desc conv_depthwise = {5, 5, 3, 3, 1, 1, 2, 2, 2, 2, 5};
static const pgd_conv2d_desc conv_depthwise16 = {16, 16, 5, 5, 2, 2, 2, 2, 1, 1, 16};
static const pgd_conv2d_desc conv_3x3 = {4, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1};

START_TEST(conv_forms)
{
    pgd_rng r;
    pgd_rng_seed(&r, 14);
    pgd_ctx *ctx = make_ctx(NULL);
    conv_case(ctx, &r, &conv_1x1, 2, 5, 6, "gemm");
    conv_case(ctx, &r, &conv_grouped, 1, 7, 9, "im2col");
    conv_case(ctx, &r, &conv_depthwise, 1, 6, 7, "depthwise");
    conv_case(ctx, &r, &conv_depthwise16, 1, 9, 11, "depthwise");
    tally_destroy(ctx);
    form f = cpu_form;
    ctx = make_ctx(&f);
    conv_case(ctx, &r, &conv_grouped, 1, 7, 9, "implicit");
    tally_destroy(ctx);
    f.few_rows = 1;
    ctx = make_ctx(&f);
    conv_case(ctx, &r, &conv_1x1, 1, 3, 4, "gemm"); /* few rows: conv_few_rows_cpu */
    conv_case(ctx, &r, &conv_grouped, 1, 7, 9, "implicit");
    tally_destroy(ctx);
    f.few_rows = 0;
    f.conv = PGD_CONV_ALGO_WINOGRAD;
    ctx = make_ctx(&f);
    conv_case(ctx, &r, &conv_3x3, 1, 6, 5, "winograd");
    tally_destroy(ctx);
    f.conv = PGD_CONV_ALGO_IM2COL;
    ctx = make_ctx(&f);
    conv_case(ctx, &r, &conv_3x3, 1, 6, 5, "im2col");
    tally_destroy(ctx);
    f.conv = PGD_CONV_ALGO_DIRECT;
    ctx = make_ctx(&f);
    conv_case(ctx, &r, &conv_depthwise, 1, 6, 7, "direct");
    tally_destroy(ctx);
}
END_TEST

/* Max, average and global average pools of x [2, 7, 6, c], and the NCHW -> NHWC transpose. */
static void pool_case(pgd_ctx *ctx, pgd_rng *r, int64_t c)
{
    pgd_error *err = NULL;
    const int64_t n = 2, h = 7, w = 6, oh = 4, ow = 3;
    int64_t sx[4] = {n, h, w, c}, sy[4] = {n, oh, ow, c}, sg[2] = {n, c}, sn[4] = {n, c, h, w};
    float *hx;
    pgd_tensor *x = upload_rand(ctx, r, 4, sx, &hx), *y = poisoned(ctx, 4, sy);
    double *want = dalloc(n * oh * ow * c);
    PGD_CHECK_OK(pgd_maxpool2d(ctx, x, 3, 2, 1, y, &err), &err);
    pgd_ref_maxpool2d(hx, n, h, w, c, 3, 2, 1, want);
    expect_close(y, want, 0, 0, "maxpool");
    PGD_CHECK_OK(pgd_avgpool2d(ctx, x, 3, 2, 1, y, &err), &err);
    pgd_ref_avgpool2d(hx, n, h, w, c, 3, 2, 1, want = dalloc(n * oh * ow * c));
    expect_close(y, want, 1e-5, 1e-6, "avgpool");
    pgd_tensor *g = poisoned(ctx, 2, sg);
    PGD_CHECK_OK(pgd_global_avgpool(ctx, x, g, &err), &err);
    pgd_ref_global_avgpool(hx, n, h, w, c, want = dalloc(n * c));
    expect_close(g, want, 1e-5, 1e-6, "global avgpool");
    /* x read as NCHW [n, c, h, w] */
    pgd_tensor *xn = pgd_test_upload(ctx, 4, sn, hx), *t = poisoned(ctx, 4, sx);
    PGD_CHECK_OK(pgd_nchw_to_nhwc(ctx, xn, t, &err), &err);
    want = dalloc(n * h * w * c);
    for (int64_t b = 0; b < n; b++)
        for (int64_t ch = 0; ch < c; ch++)
            for (int64_t i = 0; i < h * w; i++)
                want[(b * h * w + i) * c + ch] = hx[(b * c + ch) * h * w + i];
    expect_close(t, want, 0, 0, "nchw_to_nhwc");
    pgd_tensor *tensors[] = {x, y, g, xn, t};
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++)
        pgd_tensor_destroy(tensors[i]);
    free(hx);
}

START_TEST(pools)
{
    pgd_rng r;
    pgd_rng_seed(&r, 15);
    pgd_ctx *ctx = make_ctx(NULL);
    pool_case(ctx, &r, 3); /* scalar kernels */
    pool_case(ctx, &r, 8); /* _vec kernels, 8 channels an item */
    tally_destroy(ctx);
}
END_TEST

/* ---- patch embedding, position resize, Swin's windows ---- */

/* image [2, 3, 8, 12] in 4 x 4 patches to D = 10 with class and distillation tokens and pos. */
static void patch_case(pgd_ctx *ctx, pgd_rng *r)
{
    pgd_error *err = NULL;
    const int64_t B = 2, C = 3, H = 8, W = 12, P = 4, D = 10, T = 2 + (H / P) * (W / P);
    int64_t si[4] = {B, C, H, W}, sw[4] = {D, C, P, P}, sp[2] = {T, D}, so[3] = {B, T, D};
    float *himg, *hw, *hb, *hc, *hd, *hp;
    pgd_tensor *img = upload_rand(ctx, r, 4, si, &himg), *w = upload_rand(ctx, r, 4, sw, &hw);
    pgd_tensor *b = upload_rand(ctx, r, 1, &D, &hb), *cls = upload_rand(ctx, r, 1, &D, &hc);
    pgd_tensor *dist = upload_rand(ctx, r, 1, &D, &hd), *pos = upload_rand(ctx, r, 2, sp, &hp);
    pgd_tensor *out = poisoned(ctx, 3, so);
    PGD_CHECK_OK(pgd_patch_embed(ctx, img, w, b, cls, dist, pos, out, &err), &err);
    double *want = dalloc(B * T * D);
    pgd_ref_patch_embed(himg, B, C, H, W, hw, D, P, hb, hc, hd, hp, want);
    expect_close(out, want, 1e-4, 1e-4, "patch_embed");
    pgd_tensor *tensors[] = {img, w, b, cls, dist, pos, out};
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++)
        pgd_tensor_destroy(tensors[i]);
    free(himg), free(hw), free(hb), free(hc), free(hd), free(hp);
}

/* A 3 x 4 grid (one extra row) of D = 5 resized to 5 x 2 by every mode. */
static void pos_resize_cases(pgd_ctx *ctx, pgd_rng *r)
{
    pgd_error *err = NULL;
    const int64_t D = 5, rows = 1 + 3 * 4, rows2 = 1 + 5 * 2;
    int64_t sp[2] = {rows, D}, so[2] = {rows2, D};
    float *hp;
    pgd_tensor *pos = upload_rand(ctx, r, 2, sp, &hp);
    for (int mode = PGD_RESIZE_BICUBIC; mode <= PGD_RESIZE_BICUBIC_HF; mode++) {
        pgd_tensor *out = poisoned(ctx, 2, so);
        PGD_CHECK_OK(
            pgd_pos_embed_resize(ctx, pos, 1, 3, 4, 5, 2, (pgd_resize_mode)mode, out, &err), &err);
        double *want = dalloc(rows2 * D);
        pgd_ref_pos_resize(hp, 1, 3, 4, 5, 2, D, mode, want);
        expect_close(out, want, 1e-4, 1e-5, "pos_embed_resize");
        pgd_tensor_destroy(out);
    }
    pgd_tensor_destroy(pos);
    free(hp);
}

START_TEST(patch_and_pos)
{
    pgd_rng r;
    pgd_rng_seed(&r, 16);
    pgd_ctx *ctx = make_ctx(NULL);
    patch_case(ctx, &r);
    pos_resize_cases(ctx, &r);
    tally_destroy(ctx);
    ctx = make_ctx(&cpu_form);
    patch_case(ctx, &r);
    tally_destroy(ctx);
}
END_TEST

/* x [1, 5, 7, 3] in windows of 4 (padded to 8 x 8) shifted by (2, 1), merged back into zeros:
 * x again; the 2 x 2 patch merge against a plain loop. */
static void window_case(pgd_ctx *ctx, pgd_rng *r, int flags)
{
    pgd_error *err = NULL;
    const int64_t B = 1, H = 5, W = 7, C = 3, w = 4;
    int64_t sx[4] = {B, H, W, C}, sw[3] = {B * 4, w * w, C}, sm[4] = {B, 3, 4, 4 * C};
    float *hx;
    pgd_tensor *x = upload_rand(ctx, r, 4, sx, &hx), *win = poisoned(ctx, 3, sw);
    pgd_tensor *y = NULL, *m = poisoned(ctx, 4, sm);
    PGD_CHECK_OK(pgd_tensor_create(ctx, 4, sx, &y, &err), &err);
    PGD_CHECK_OK(pgd_tensor_fill(y, 0.0f, &err), &err);
    PGD_CHECK_OK(pgd_window_partition(ctx, x, w, 2, 1, flags, win, &err), &err);
    PGD_CHECK_OK(pgd_window_merge_add(ctx, win, w, 2, 1, flags, y, &err), &err);
    double *want = dalloc(B * H * W * C);
    for (int64_t i = 0; i < B * H * W * C; i++)
        want[i] = hx[i];
    expect_close(y, want, 0, 0, "window partition, merged back");
    PGD_CHECK_OK(pgd_patch_merge(ctx, x, m, &err), &err);
    static const int di[4] = {0, 1, 0, 1}, dj[4] = {0, 0, 1, 1};
    want = dalloc(B * 3 * 4 * 4 * C);
    for (int64_t io = 0; io < 3; io++)
        for (int64_t jo = 0; jo < 4; jo++)
            for (int k = 0; k < 4; k++)
                for (int64_t ch = 0; ch < C; ch++) {
                    int64_t i = 2 * io + di[k], j = 2 * jo + dj[k];
                    want[((io * 4 + jo) * 4 + k) * C + ch] =
                        i < H && j < W ? hx[(i * W + j) * C + ch] : 0.0;
                }
    expect_close(m, want, 0, 0, "patch_merge");
    pgd_tensor_destroy(x), pgd_tensor_destroy(win), pgd_tensor_destroy(y), pgd_tensor_destroy(m);
    free(hx);
}

START_TEST(windows)
{
    pgd_rng r;
    pgd_rng_seed(&r, 17);
    pgd_ctx *ctx = make_ctx(NULL);
    window_case(ctx, &r, 0);
    window_case(ctx, &r, PGD_WINDOW_ROLL_UNPADDED);
    tally_destroy(ctx);
}
END_TEST

/* ---- non-local blocks and graph attention ---- */

/* A block of every mode on x [1, 4, 5, 6] (Ci 3), subsampled for the dot product, and the
 * softmax form unfused too (GEMM, softmax_rows, GEMM). */
static void nonlocal_case(pgd_ctx *ctx, pgd_rng *r, pgd_nonlocal_mode mode, int subsample,
                          int unfused)
{
    pgd_error *err = NULL;
    const int64_t C = 6, Ci = 3, sx[4] = {1, 4, 5, C};
    float *tw = rand_floats(r, Ci * C, 0.5f), *tb = rand_floats(r, Ci, 0.5f);
    float *pw = rand_floats(r, Ci * C, 0.5f), *pb = rand_floats(r, Ci, 0.5f);
    float *gw = rand_floats(r, Ci * C, 0.5f), *gb = rand_floats(r, Ci, 0.5f);
    float *ww = rand_floats(r, C * Ci, 0.5f), *wb = rand_floats(r, C, 0.5f);
    float *cw = rand_floats(r, 2 * Ci, 0.5f), *hx;
    pgd_nonlocal_desc d = {C, Ci, mode, subsample, unfused};
    pgd_nonlocal_params p = {tw, tb, pw, pb, gw, gb, ww, wb, NULL, cw};
    pgd_nonlocal *nl = NULL;
    PGD_CHECK_OK(pgd_nonlocal_create(ctx, &d, &p, &nl, &err), &err);
    pgd_tensor *x = upload_rand(ctx, r, 4, sx, &hx), *z = poisoned(ctx, 4, sx);
    PGD_CHECK_OK(pgd_nonlocal_forward(ctx, nl, x, z, &err), &err);
    pgd_ref_nonlocal rp = {1,    4,  5,  C,  Ci, (int)mode, subsample, tw,
                           tb,   pw, pb, gw, gb, ww,        wb,        {NULL, NULL, NULL, NULL},
                           1e-5, cw};
    double *want = dalloc(4 * 5 * C);
    pgd_ref_nonlocal_block(&rp, hx, 0, want, NULL, NULL);
    char what[64];
    snprintf(what, sizeof what, "non-local %s%s%s", pgd_nonlocal_mode_name(mode),
             subsample ? ", subsampled" : "", unfused ? ", unfused" : "");
    expect_close(z, want, 1e-4, 1e-4, what);
    pgd_nonlocal_destroy(nl);
    pgd_tensor_destroy(x), pgd_tensor_destroy(z);
    float *arrays[] = {tw, tb, pw, pb, gw, gb, ww, wb, cw, hx};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        free(arrays[i]);
}

START_TEST(nonlocal_modes)
{
    pgd_rng r;
    pgd_rng_seed(&r, 18);
    pgd_ctx *ctx = make_ctx(NULL);
    nonlocal_case(ctx, &r, PGD_NONLOCAL_EMBEDDED_GAUSSIAN, 0, 0);
    nonlocal_case(ctx, &r, PGD_NONLOCAL_EMBEDDED_GAUSSIAN, 1, 1);
    nonlocal_case(ctx, &r, PGD_NONLOCAL_GAUSSIAN, 0, 0);
    nonlocal_case(ctx, &r, PGD_NONLOCAL_DOT_PRODUCT, 1, 0);
    nonlocal_case(ctx, &r, PGD_NONLOCAL_CONCATENATION, 0, 0);
    tally_destroy(ctx);
}
END_TEST

/* A GATConv layer of 2 heads on 7 nodes with a hub (node 0 takes 9 edges), in segments of 2
 * edges so that gat_combine merges several per node, with α; heads concatenated with a
 * residual, then averaged with ELU. */
static void gat_case(pgd_ctx *ctx, pgd_rng *r, int concat)
{
    pgd_error *err = NULL;
    enum { N = 7, E = 14, F = 5, C = 3, H = 2 };
    static const int64_t ei[2 * E] = {1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 0, 5, 6,
                                      0, 0, 0, 0, 0, 0, 1, 2, 3, 0, 0, 0, 6, 5};
    pgd_gat_desc d;
    pgd_gat_desc_init(&d, F, C, H);
    d.concat = concat;
    d.act = concat ? PGD_GAT_ACT_NONE : PGD_GAT_ACT_ELU;
    int64_t od = pgd_gat_out_width(&d);
    float *w = rand_floats(r, H * C * F, 1.0f), *as = rand_floats(r, H * C, 1.0f);
    float *ad = rand_floats(r, H * C, 1.0f), *b = rand_floats(r, od, 1.0f);
    float *res = concat ? rand_floats(r, od * F, 1.0f) : NULL, *hx;
    pgd_gat_params p = {w, NULL, as, ad, b, res};
    pgd_gat_graph *g = NULL;
    pgd_gat *gat = NULL;
    PGD_CHECK_OK(pgd__graph_create_seg(ctx, N, ei, E, 1, 2, &g, &err), &err);
    PGD_CHECK_OK(pgd_gat_create(ctx, &d, &p, &gat, &err), &err);
    int64_t E2 = pgd_gat_graph_get_num_edges(g), sx[2] = {N, F}, sy[2] = {N, od}, sa[2] = {E2, H};
    pgd_tensor *x = upload_rand(ctx, r, 2, sx, &hx), *y = poisoned(ctx, 2, sy);
    pgd_tensor *alpha = poisoned(ctx, 2, sa);
    PGD_CHECK_OK(pgd_gat_forward(ctx, gat, g, x, y, alpha, &err), &err);
    pgd_ref_gat rp = {N, F, C, H, concat, 1, (int)d.act, d.negative_slope, w, NULL, as, ad, b, res};
    double *want = dalloc(N * od), *wanta = dalloc(E2 * H);
    ck_assert_int_eq((int64_t)pgd_ref_gat_layer(&rp, hx, ei, E, want, wanta, NULL), E2);
    expect_close(y, want, 1e-4, 1e-4, concat ? "gat (concatenated)" : "gat (averaged)");
    expect_close(alpha, wanta, 1e-4, 1e-6, "gat alpha");
    pgd_gat_destroy(gat);
    pgd_gat_graph_destroy(g);
    pgd_tensor_destroy(x), pgd_tensor_destroy(y), pgd_tensor_destroy(alpha);
    free(w), free(as), free(ad), free(b), free(res), free(hx);
}

START_TEST(gat_layers)
{
    pgd_rng r;
    pgd_rng_seed(&r, 19);
    pgd_ctx *ctx = make_ctx(NULL);
    gat_case(ctx, &r, 1);
    gat_case(ctx, &r, 0);
    tally_destroy(ctx);
}
END_TEST

/* ---- the kernels no launcher runs on a GPU, launched as their launchers do ---- */

static pgd_kernel *kernel_from(pgd_ctx *ctx, const char *file, const char *options,
                               const char *function)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.cl", cl_dir, file);
    char *src = read_text(path);
    pgd_kernel *k = NULL;
    pgd_error *err = NULL;
    PGD_CHECK_OK(pgd_kernel_create(ctx, "direct", src, options, function, &k, &err), &err);
    free(src);
    return k;
}

static void set_args(pgd_kernel *k, int n, const pgd_tensor *const *t, const size_t *size,
                     const void *const *value)
{
    pgd_error *err = NULL;
    for (int i = 0; i < n; i++)
        PGD_CHECK_OK(t[i] ? pgd_kernel_set_tensor(k, (unsigned)i, t[i], &err)
                          : pgd_kernel_set_value(k, (unsigned)i, size[i], value[i], &err),
                     &err);
}

/* layernorm_vec (norm.c: devices without dedicated local memory): a row an item, groups of 8,
 * 11 rows of 12 in float4 steps. */
static void layernorm_vec_case(pgd_ctx *ctx, pgd_rng *r)
{
    pgd_error *err = NULL;
    const int64_t rows = 11, cols = 12;
    int64_t s[2] = {rows, cols};
    float *hx, *hw, *hb;
    pgd_tensor *x = upload_rand(ctx, r, 2, s, &hx), *w = upload_rand(ctx, r, 1, &cols, &hw);
    pgd_tensor *b = upload_rand(ctx, r, 1, &cols, &hb), *y = poisoned(ctx, 2, s);
    pgd_kernel *k = kernel_from(ctx, "norm", "-DLVW=4", "layernorm_vec");
    cl_uint ur = rows, uc = cols, affine = 1;
    float eps = 1e-5f;
    const pgd_tensor *t[8] = {x, w, b, y};
    size_t size[8] = {0, 0, 0, 0, 4, 4, 4, 4};
    const void *v[8] = {NULL, NULL, NULL, NULL, &ur, &uc, &eps, &affine};
    set_args(k, 8, t, size, v);
    size_t global = 16, local = 8;
    PGD_CHECK_OK(pgd_kernel_launch(k, 1, &global, &local, &err), &err);
    double *want = dalloc(rows * cols);
    pgd_ref_layernorm(hx, hw, hb, rows, cols, 1e-5, want);
    expect_close(y, want, 1e-4, 1e-5, "layernorm_vec");
    pgd_kernel_destroy(k);
    pgd_tensor_destroy(x), pgd_tensor_destroy(w), pgd_tensor_destroy(b), pgd_tensor_destroy(y);
    free(hx), free(hw), free(hb);
}

/* softmax_short (norm.c: short rows where local memory is emulated): a row an item, 7 rows of 19
 * (two vectors of 8 and a tail of 3), the plain and the log form, groups of 4 with a partial
 * last group. */
static void softmax_short_case(pgd_ctx *ctx, pgd_rng *r)
{
    pgd_error *err = NULL;
    const int64_t rows = 7, cols = 19;
    int64_t s[2] = {rows, cols};
    float *hx;
    pgd_tensor *x = upload_rand(ctx, r, 2, s, &hx);
    pgd_kernel *k = kernel_from(ctx, "norm", NULL, "softmax_short");
    for (cl_uint lg = 0; lg < 2; lg++) {
        pgd_tensor *y = poisoned(ctx, 2, s);
        cl_uint ur = rows, uc = cols;
        float scale = 0.7f;
        const pgd_tensor *t[6] = {x, y};
        size_t size[6] = {0, 0, 4, 4, 4, 4};
        const void *v[6] = {NULL, NULL, &uc, &scale, &ur, &lg};
        set_args(k, 6, t, size, v);
        size_t global = 8, local = 4;
        PGD_CHECK_OK(pgd_kernel_launch(k, 1, &global, &local, &err), &err);
        double *want = dalloc(rows * cols);
        pgd_ref_softmax_axis(hx, rows, cols, 1, 0.7, (int)lg, want);
        expect_close(y, want, 1e-5, 1e-6, lg ? "softmax_short (log)" : "softmax_short");
        pgd_tensor_destroy(y);
    }
    pgd_kernel_destroy(k);
    pgd_tensor_destroy(x);
    free(hx);
}

/* layout_copy_rows (layout.c: contiguous rows where local memory is emulated): x [3, 4, 10]
 * transposed to [4, 3, 10] (rows of 10: two vectors of 4 and a tail of 2), groups of 4 with a
 * partial last group. */
static void copy_rows_case(pgd_ctx *ctx, pgd_rng *r)
{
    pgd_error *err = NULL;
    int64_t sx[3] = {3, 4, 10}, sy[3] = {4, 3, 10};
    float *hx;
    pgd_tensor *x = upload_rand(ctx, r, 3, sx, &hx), *y = poisoned(ctx, 3, sy);
    pgd_kernel *k = kernel_from(ctx, "layout", NULL, "layout_copy_rows");
    /* dims innermost first: y's (10, 3, 4) with x's strides (1, 40, 10) and y's (1, 10, 30) */
    cl_uint shape[8] = {10, 3, 4, 1, 1, 1, 1, 1}, ys[8] = {1, 10, 30};
    cl_int xs[8] = {1, 40, 10}, xoff = 0;
    cl_uint yoff = 0, rank = 3, rows = 12;
    const pgd_tensor *t[9] = {x, y};
    size_t size[9] = {0, 0, sizeof shape, sizeof xs, sizeof ys, 4, 4, 4, 4};
    const void *v[9] = {NULL, NULL, shape, xs, ys, &xoff, &yoff, &rank, &rows};
    set_args(k, 9, t, size, v);
    size_t global = 16, local = 4;
    PGD_CHECK_OK(pgd_kernel_launch(k, 1, &global, &local, &err), &err);
    double *want = dalloc(120);
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 10; c++)
                want[(a * 3 + b) * 10 + c] = hx[(b * 4 + a) * 10 + c];
    expect_close(y, want, 0, 0, "layout_copy_rows");
    pgd_kernel_destroy(k);
    pgd_tensor_destroy(x), pgd_tensor_destroy(y);
    free(hx);
}

/* gemm_epilogue (gemm_clblast.c: after CLBlast's GEMM): C [2, 5, 7] += bias, GELU, + R, over
 * the global (N, M, batch) with the driver's groups. */
static void epilogue_case(pgd_ctx *ctx, pgd_rng *r)
{
    pgd_error *err = NULL;
    const int64_t B = 2, M = 5, N = 7;
    int64_t s[3] = {B, M, N};
    float *hc, *hb, *hr;
    pgd_tensor *c = upload_rand(ctx, r, 3, s, &hc), *b = upload_rand(ctx, r, 1, &N, &hb);
    pgd_tensor *res = upload_rand(ctx, r, 3, s, &hr);
    pgd_kernel *k = kernel_from(ctx, "gemm", NULL, "gemm_epilogue");
    cl_int m = M, n = N, zero = 0, ld = N, epi = 1 | 2 | (PGD_ACT_GELU << 2);
    cl_long stride = M * N;
    const pgd_tensor *t[13] = {NULL, NULL, c, NULL, NULL, NULL, b, NULL, res};
    size_t size[13] = {4, 4, 0, 4, 4, 8, 0, 4, 0, 4, 4, 8, 4};
    const void *v[13] = {&m,    &n,   NULL,  &zero, &ld,     &stride, NULL,
                         &zero, NULL, &zero, &ld,   &stride, &epi};
    set_args(k, 13, t, size, v);
    size_t global[3] = {N, M, B};
    PGD_CHECK_OK(pgd_kernel_launch(k, 3, global, NULL, &err), &err);
    double *want = dalloc(B * M * N);
    for (int64_t i = 0; i < B * M * N; i++) {
        double x = (double)hc[i] + hb[i % N];
        want[i] = 0.5 * x * (1.0 + erf(x / sqrt(2.0))) + hr[i];
    }
    expect_close(c, want, 1e-5, 1e-6, "gemm_epilogue");
    pgd_kernel_destroy(k);
    pgd_tensor_destroy(c), pgd_tensor_destroy(b), pgd_tensor_destroy(res);
    free(hc), free(hb), free(hr);
}

START_TEST(direct_launches)
{
    pgd_rng r;
    pgd_rng_seed(&r, 20);
    pgd_ctx *ctx = make_ctx(NULL);
    layernorm_vec_case(ctx, &r);
    softmax_short_case(ctx, &r);
    copy_rows_case(ctx, &r);
    epilogue_case(ctx, &r);
    tally_destroy(ctx);
}
END_TEST

/* Last: every kernel of cl/ ran at least once above. */
/* Kernels that need an extension Oclgrind 21.10 lacks (cl_khr_integer_dot_product: precision
 * int8), built only where the device has it; test_lowp runs them against the reference on every
 * device that does. */
static int needs_missing_extension(const char *name)
{
    return !strcmp(name, "q8_rows") || !strcmp(name, "gemm_q8");
}

START_TEST(every_kernel_ran)
{
    int missing = 0;
    for (int i = 0; i < kernel_count; i++)
        if (kernel_runs[i] == 0 && !needs_missing_extension(kernel_names[i])) {
            fprintf(stderr, "kernel %s was never launched: add it to test_oclgrind.c\n",
                    kernel_names[i]);
            missing++;
        }
    /* elsewhere (--any-device) the device's own policy may skip some: gemm_to_half on CPUs */
    ck_assert_msg(missing == 0 || any_device, "%d of %d kernels were never launched", missing,
                  kernel_count);
}
END_TEST

/* The suite's own check (--racy): a kernel whose work-items all write one __local float with
 * different values and one that writes far past its buffer (tensors are allocated in size
 * classes, so a write just past a tensor's end can land inside its buffer, where Oclgrind cannot
 * see it: the NaN-poisoned outputs and the op suites' canaries catch those), which Oclgrind must
 * report (the meson
 * test oclgrind-detects expects tests/oclgrind.sh to fail), so that the suite cannot pass
 * because reports went unseen. The program itself succeeds. */
static const char racy_source[] = "__kernel void racy(__global float *y)\n"
                                  "{\n"
                                  "    __local float s;\n"
                                  "    s = (float)get_local_id(0);\n"
                                  "    barrier(CLK_LOCAL_MEM_FENCE);\n"
                                  "    y[get_global_id(0)] = s;\n"
                                  "}\n"
                                  "__kernel void past_end(__global float *y)\n"
                                  "{\n"
                                  "    y[get_global_id(0) + 1000000] = 1.0f;\n"
                                  "}\n";

START_TEST(racy_kernels)
{
    pgd_ctx *ctx = make_ctx(NULL);
    pgd_error *err = NULL;
    const int64_t n = 16;
    pgd_tensor *y = poisoned(ctx, 1, &n);
    const char *names[2] = {"racy", "past_end"};
    for (int i = 0; i < 2; i++) {
        pgd_kernel *k = NULL;
        PGD_CHECK_OK(pgd_kernel_create(ctx, "self-check", racy_source, NULL, names[i], &k, &err),
                     &err);
        PGD_CHECK_OK(pgd_kernel_set_tensor(k, 0, y, &err), &err);
        size_t global = (size_t)n, local = 8;
        PGD_CHECK_OK(pgd_kernel_launch(k, 1, &global, &local, &err), &err);
        PGD_CHECK_OK(pgd_ctx_finish(ctx, &err), &err);
        pgd_kernel_destroy(k);
    }
    pgd_tensor_destroy(y);
    pgd_ctx_destroy(ctx);
}
END_TEST

int main(int argc, char **argv)
{
    int racy = argc == 3 && !strcmp(argv[2], "--racy");
    if (argc < 2 || argc > 3 || (argc == 3 && !racy && strcmp(argv[2], "--any-device"))) {
        fprintf(stderr, "usage: %s CL_DIR [--any-device | --racy]\n", argv[0]);
        return 2;
    }
    cl_dir = argv[1];
    any_device = argc == 3 && !racy;
    size_t n;
    pgd_test_devices(&n); /* exit 77 without a device */
    if (racy) {
        Suite *s = suite_create("oclgrind-detects");
        TCase *tc = tcase_create("racy");
        tcase_add_test(tc, racy_kernels);
        suite_add_tcase(s, tc);
        return pgd_test_run(s);
    }
    /* A case per family (CK_RUN_CASE=conv runs one); "kernels" first, "coverage" last. */
    const struct {
        const char *name;
        const TTest *test;
    } cases[] = {
        {"kernels", kernels_listed},
        {"rows", rows_and_elementwise},
        {"broadcast", broadcast_ops},
        {"layout", layout_ops},
        {"normalize", normalize_ops},
        {"pool2d", pool_general},
        {"gemm", gemm_forms},
        {"attention", attention_forms},
        {"attention_ext", attention_ext_forms},
        {"conv", conv_forms},
        {"pool", pools},
        {"patch", patch_and_pos},
        {"window", windows},
        {"nonlocal", nonlocal_modes},
        {"gat", gat_layers},
        {"direct", direct_launches},
        {"coverage", every_kernel_ran},
    };
    Suite *s = suite_create("oclgrind");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_set_timeout(tc, 0);
        tcase_add_test(tc, cases[i].test);
        suite_add_tcase(s, tc);
    }
    return pgd_test_run(s);
}
