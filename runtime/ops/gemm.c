/* gemm.c — GEMM dispatch: Pagoda's own kernels (cl/gemm.cl) or CLBlast. Which back end a
 * shape class uses is measured and stored by tune/backend.c (at layer creation or on request,
 * never here); linear layers are in linear.c.
 *
 * Variant choice (per device, never per machine):
 *   - CPU devices (PoCL and vendors' CPU runtimes): gemm_cpu. Each work-item owns an RM × NB
 *     register tile (NB = VW·NV columns as NV float-VW vectors), local size 1, no barriers; B
 *     is repacked into NB-column panels contiguous in K (weights once, at load time).
 *     VW follows CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT; RM·NV accumulators + NV B vectors + 1
 *     broadcast stay within 16 vector registers (AVX2, SSE), which also fits AVX-512 and NEON.
 *   - GPUs, accelerators and software rasterisers (llvmpipe reports CPU but has GPU-like
 *     limits): gemm_gpu, local-memory tiles; the tile is the largest of three that fits the
 *     device's work-group and local-memory limits and the kernel's CL_KERNEL_WORK_GROUP_SIZE.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tune.h"

/* Built-in tiles of gemm_gpu, largest first; the smallest needs 16 work-items and 2.2 KiB of
 * local memory. The first that fits is the untuned default. */
static const pgd__gemm_params gpu_tiles[] = {
    {0, 0, 0, 0, 0, 64, 64, 16, 4, 4},
    {0, 0, 0, 0, 0, 32, 32, 16, 4, 4},
    {0, 0, 0, 0, 0, 32, 32, 8, 8, 8},
};

static const pgd__gemm_params *params_of(const pgd_ctx *ctx, const pgd__gemm_call *g)
{
    return g && g->params ? g->params : &pgd__params_of(ctx)->gemm;
}

int pgd__gemm_uses_cpu_kernel(const pgd_ctx *ctx)
{
    return pgd__params_of(ctx)->gemm.cpu;
}

static int gemm_fits(const pgd_ctx *ctx, const pgd__gemm_params *g)
{
    size_t wg = (size_t)(g->tsm / g->wptm) * (size_t)(g->tsn / g->wptn);
    uint64_t lmem = (uint64_t)g->tsk * (uint64_t)(g->tsm + g->tsn + 2) * 4;
    return wg <= ctx->dev.max_work_group && wg <= ctx->dev.max_work_item[0] &&
           lmem <= ctx->dev.local_mem;
}

void pgd__gemm_params_default(const pgd_ctx *ctx, pgd__gemm_params *p)
{
    memset(p, 0, sizeof *p);
    /* CPU devices (PoCL, vendors' CPU runtimes) get gemm_cpu; software rasterisers (llvmpipe
     * reports CPU but has GPU-like limits), GPUs and accelerators gemm_gpu. */
    if (ctx->dev.type == PGD_DEVICE_CPU && !ctx->dev.software_rasteriser) {
        unsigned w = ctx->dev.pref_vector_float;
        p->cpu = 1;
        p->rm = 6;
        p->vw = w >= 16 ? 16 : w >= 8 ? 8 : 4;
        p->nv = 2;
        p->ku = 4;
        return;
    }
    size_t n = sizeof gpu_tiles / sizeof gpu_tiles[0];
    *p = gpu_tiles[n - 1];
    for (size_t i = 0; i < n; i++)
        if (gemm_fits(ctx, &gpu_tiles[i])) {
            *p = gpu_tiles[i];
            break;
        }
}

static int in(int v, int lo, int hi)
{
    return v >= lo && v <= hi;
}

int pgd__gemm_params_check(const pgd_ctx *ctx, const pgd__gemm_params *p, pgd_error **err)
{
    char s[96];
    pgd__gemm_params_format(p, s, sizeof s);
    if (p->cpu) {
        if (!in(p->rm, 1, 16) ||
            !(p->vw == 1 || p->vw == 2 || p->vw == 4 || p->vw == 8 || p->vw == 16) ||
            !in(p->nv, 1, 8) || !in(p->ku, 1, 16) || p->rm * p->nv > 64)
            return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                  "gemm parameters %s: rm 1..16, vw 1, 2, 4, 8 or 16, nv 1..8, "
                                  "ku 1..16 and rm*nv at most 64 accumulators",
                                  s);
        return PGD_OK;
    }
    if (!in(p->tsm, 1, 256) || !in(p->tsn, 1, 256) || !in(p->tsk, 1, 64) || !in(p->wptm, 1, 16) ||
        !in(p->wptn, 1, 16) || p->tsm % p->wptm || p->tsn % p->wptn)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "gemm parameters %s: tsm and tsn 1..256, tsk 1..64, wptm and wptn "
                              "1..16 dividing tsm and tsn",
                              s);
    if (!gemm_fits(ctx, p))
        return pgd__error_set(
            err, PGD_ERR_UNSUPPORTED,
            "gemm parameters %s do not fit device '%s' (work-group %d of at "
            "most %zu, local memory %llu of %llu bytes)",
            s, ctx->dev.name, (p->tsm / p->wptm) * (p->tsn / p->wptn), ctx->dev.max_work_group,
            (unsigned long long)p->tsk * (unsigned long long)(p->tsm + p->tsn + 2) * 4,
            (unsigned long long)ctx->dev.local_mem);
    return PGD_OK;
}

void pgd__gemm_params_format(const pgd__gemm_params *p, char *buf, size_t size)
{
    if (p->cpu)
        snprintf(buf, size, "cpu:rm=%d,vw=%d,nv=%d,ku=%d", p->rm, p->vw, p->nv, p->ku);
    else
        snprintf(buf, size, "gpu:tsm=%d,tsn=%d,tsk=%d,wptm=%d,wptn=%d", p->tsm, p->tsn, p->tsk,
                 p->wptm, p->wptn);
}

int pgd__gemm_params_parse(const char *text, pgd__gemm_params *p, pgd_error **err)
{
    pgd__gemm_params q;
    memset(&q, 0, sizeof q);
    const char *rest;
    static const char *const cpu_names[] = {"rm", "vw", "nv", "ku"};
    static const char *const gpu_names[] = {"tsm", "tsn", "tsk", "wptm", "wptn"};
    int *cpu_fields[] = {&q.rm, &q.vw, &q.nv, &q.ku};
    int *gpu_fields[] = {&q.tsm, &q.tsn, &q.tsk, &q.wptm, &q.wptn};
    const char *const *names;
    int **fields, n;
    if (text && !strncmp(text, "cpu:", 4)) {
        q.cpu = 1;
        names = cpu_names;
        fields = cpu_fields;
        n = 4;
    } else if (text && !strncmp(text, "gpu:", 4)) {
        names = gpu_names;
        fields = gpu_fields;
        n = 5;
    } else {
        goto bad;
    }
    rest = text + 4;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(names[i]);
        if (strncmp(rest, names[i], len) || rest[len] != '=')
            goto bad;
        rest += len + 1;
        int v = 0, digits = 0;
        while (*rest >= '0' && *rest <= '9' && digits < 4) {
            v = v * 10 + (*rest++ - '0');
            digits++;
        }
        if (!digits || (*rest != (i + 1 < n ? ',' : '\0')))
            goto bad;
        *fields[i] = v;
        if (i + 1 < n)
            rest++;
    }
    *p = q;
    return PGD_OK;
bad:
    return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                          "gemm parameters '%s': expected cpu:rm=R,vw=V,nv=N,ku=U or "
                          "gpu:tsm=M,tsn=N,tsk=K,wptm=A,wptn=B (whole numbers)",
                          text ? text : "(null)");
}

static void trans_opts(char *buf, size_t size, int ta, int tb)
{
    snprintf(buf, size, "-DTRANS_A=%d -DTRANS_B=%d", ta, tb);
}

int pgd__gemm_epi_code(const pgd__gemm_call *g)
{
    return (g->bias ? 1 : 0) | (g->residual ? 2 : 0) | ((int)g->act << 2) |
           (g->residual && g->res_before_act ? 16 : 0);
}

static void set_mat_args(pgd__args *a, const pgd__mat *m)
{
    pgd__arg_mem(a, m->buf);
    pgd__arg_int(a, (cl_int)m->off);
    pgd__arg_int(a, m->ld);
    pgd__arg_long(a, m->stride);
}

static int check_int_range(const pgd__gemm_call *g, pgd_error **err)
{
    const int64_t lim = INT32_MAX;
    if (g->M < 0 || g->N < 0 || g->K < 0 || g->batch < 1 || g->M > lim || g->N > lim ||
        g->K > lim || (int64_t)g->a.off > lim || (int64_t)g->b.off > lim || (int64_t)g->c.off > lim)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "gemm: sizes out of range (M=%lld N=%lld K=%lld batch=%lld)",
                              (long long)g->M, (long long)g->N, (long long)g->K,
                              (long long)g->batch);
    return PGD_OK;
}

/* Sets the 24 arguments shared by gemm_cpu and gemm_gpu. */
static int set_gemm_args(pgd_ctx *ctx, cl_kernel k, const char *name, const pgd__gemm_call *g,
                         const pgd__mat *b, pgd_error **err)
{
    pgd__args a;
    pgd__args_begin(&a, ctx, k, name);
    pgd__arg_int(&a, (cl_int)g->M);
    pgd__arg_int(&a, (cl_int)g->N);
    pgd__arg_int(&a, (cl_int)g->K);
    pgd__arg_float(&a, g->alpha);
    pgd__arg_float(&a, g->beta);
    set_mat_args(&a, &g->a);
    set_mat_args(&a, b);
    set_mat_args(&a, &g->c);
    /* Unused bias and residual still need a valid buffer: C stands in. */
    pgd__arg_mem(&a, g->bias ? g->bias->buf : g->c.buf);
    pgd__arg_int(&a, g->bias ? (cl_int)g->bias->off : 0);
    pgd__mat r = g->residual ? *g->residual : g->c;
    set_mat_args(&a, &r);
    pgd__arg_int(&a, pgd__gemm_epi_code(g));
    return pgd__args_end(&a, err);
}

/* Output rows per launch (see pgd__launch_rows), a multiple of `unit`. */
static int64_t launch_rows(const pgd_ctx *ctx, const pgd__gemm_call *g, int64_t unit)
{
    uint64_t per_row = 2u * (uint64_t)g->N * (uint64_t)(g->K ? g->K : 1) * (uint64_t)g->batch;
    return pgd__launch_rows(ctx, g->M, per_row, PGD_LAUNCH_GEMM_FLOPS, unit);
}

/* The same GEMM restricted to output rows [m0, m0 + rows); `res` holds its residual operand. */
static pgd__gemm_call rows_of(const pgd__gemm_call *g, int64_t m0, int64_t rows, pgd__mat *res)
{
    pgd__gemm_call c = *g;
    c.M = rows;
    c.a.off += (size_t)(g->trans_a ? m0 : m0 * g->a.ld);
    c.c.off += (size_t)(m0 * g->c.ld);
    if (g->residual) {
        *res = *g->residual;
        res->off += (size_t)(m0 * res->ld);
        c.residual = res;
    }
    return c;
}

int pgd__gemm_pack(pgd_ctx *ctx, const pgd__gemm_params *p, int trans_b, int64_t N, int64_t K,
                   int64_t batch, const pgd__mat *b, cl_mem packed, int64_t packed_stride, int half,
                   pgd_error **err)
{
    char opts[256];
    snprintf(opts, sizeof opts, "-DTRANS_B=%d -DVW=%d -DNV=%d -DPACK_KB=16%s", trans_b, p->vw,
             p->nv, half ? " -DPACK_HALF" : "");
    cl_kernel k;
    pgd__args a;
    int rc = pgd__args_kernel(&a, ctx, "gemm", opts, "gemm_pack_b", &k, err);
    if (rc)
        return rc;
    pgd__arg_int(&a, (cl_int)N);
    pgd__arg_int(&a, (cl_int)K);
    set_mat_args(&a, b);
    pgd__arg_mem(&a, packed);
    pgd__arg_long(&a, packed_stride);
    if ((rc = pgd__args_end(&a, err)))
        return rc;
    int nb = p->vw * p->nv;
    size_t global[3] = {(size_t)((K + 15) / 16), (size_t)((N + nb - 1) / nb), (size_t)batch};
    return pgd__enqueue(ctx, k, "gemm_pack_b", 3, global, NULL, err);
}

int64_t pgd__weights_floats(int64_t n, int half)
{
    return half ? (n + 1) / 2 : n;
}

int pgd__to_half(pgd_ctx *ctx, cl_mem src, int64_t n, pgd_tensor **out, pgd_error **err)
{
    *out = NULL;
    cl_kernel k;
    pgd__args a;
    int64_t shape[1] = {pgd__weights_floats(n, 1)};
    int rc = pgd__args_kernel(&a, ctx, "gemm", NULL, "gemm_to_half", &k, err);
    if (rc || (rc = pgd_tensor_create(ctx, 1, shape, out, err)))
        return rc;
    pgd__arg_long(&a, (cl_long)n);
    pgd__arg_mem(&a, src);
    pgd__arg_mem(&a, (*out)->buf);
    if (!(rc = pgd__args_end(&a, err))) {
        size_t global[1] = {(size_t)n};
        rc = pgd__enqueue(ctx, k, "gemm_to_half", 1, global, NULL, err);
    }
    if (rc) {
        pgd_tensor_destroy(*out);
        *out = NULL;
    }
    return rc;
}

int64_t pgd__gemm_packed_size(const pgd__gemm_params *p, int64_t N, int64_t K)
{
    int nb = p->vw * p->nv;
    return (N + nb - 1) / nb * nb * K;
}

/* gemm_cpu's register tile height for an M-row product: p->rm or a lower one that pads fewer. */
static int cpu_rows(const pgd__gemm_params *p, int64_t M)
{
    /* Rows past M are computed (clamped to row M - 1) and thrown away, so a tile height that
     * divides M better can win: the cost counted is the padded rows plus one row's worth per
     * tile for its panel loads and stores, ceil(M / r) · (r + 1), and the tuned height wins ties.
     * M = 49 (ResNet-50's layer4 at batch 1): 5 rows instead of 6 (54 -> 50 rows); M = 1 (its fc
     * layer): 1 instead of 6. PoCL 3.1, Xeon: conv 7x7 512 3x3 0.85 -> 0.78 ms, gemm 49,2048,512
     * 0.43 -> 0.37. ViT's M = 197, 1576 and ResNet's 196, 784, 3136, 392 keep the tuned 6. */
    int best = p->rm;
    int64_t best_cost = (M + p->rm - 1) / p->rm * (p->rm + 1);
    for (int r = p->rm - 1; r >= 1; r--) {
        int64_t cost = (M + r - 1) / r * (r + 1);
        if (cost < best_cost) {
            best = r;
            best_cost = cost;
        }
    }
    return best;
}

/* gemm_cpu's work order for short rows of A (K <= PANELS_FIRST_K): neighbouring work-items
 * take the column panels of one row block, whose few cache lines of A stay in L1, instead of the
 * row blocks of one panel. PoCL 3.1, Xeon (AVX-512): ResNet-50's 56x56 1x1 convolution 64 -> 256
 * 0.42 -> 0.36 ms, the model 3-5 % faster at batch 1 and 8 (K <= 512 or 1024: less; K = 2048
 * alone: 1.7x slower, its 512 KB panels read again for every row block); the implicit
 * convolution's strided 1x1 downsample 256 -> 512 at batch 8 4.7-5.1 -> 4.05-4.16 ms (K = 512,
 * 1024: 1.1-2.5x slower). */
#define PANELS_FIRST_K 256

static int panels_first_for(int64_t K)
{
    return K <= PANELS_FIRST_K;
}

/* gemm_cpu's build options for op(A) (trans_a), B's transpose flag and storage (b_half), the
 * half arithmetic of precision f16 (half_arith), its tile height *rm and work order
 * *panels_first, for M rows of K elements. */
static void cpu_options_ex(const pgd_ctx *ctx, const pgd__gemm_params *p, int64_t M, int64_t K,
                           int trans_a, int trans_b, int b_half, int half_arith, char *opts,
                           size_t size, int *rm, int *panels_first)
{
    char trans[64];
    trans_opts(trans, sizeof trans, trans_a, trans_b);
    *rm = cpu_rows(p, M);
    *panels_first = panels_first_for(K);
    /* PREFETCH: each tile prefetches its rows of C and of the residual before its k loop, so
     * that the epilogue's stores and loads find their lines in cache instead of stalling on
     * memory after the FMAs. Measured on PoCL 3.1 only (its clang lowers __builtin_prefetch to
     * the CPU's prefetch instructions), so only PoCL gets it (the parameter database's "pocl"
     * class sets the prefetch fact: tune/db.c). AMD EPYC
     * (AVX-512), 2026-12-06: ResNet-50's 56x56 1x1 convolution 64 -> 256 with its residual,
     * buffers cold as inside the model, 0.84 -> 0.71 ms; resnet50:8 325-327 -> 318-320 ms. */
    snprintf(opts, size, "%s -DRM=%d -DVW=%d -DNV=%d -DKU=%d%s%s%s%s", trans, *rm, p->vw, p->nv,
             p->ku, b_half ? " -DB_HALF" : "", half_arith ? " -DHALF_ARITH" : "",
             *panels_first ? " -DPANELS_FIRST" : "",
             pgd__params_of(ctx)->prefetch ? " -DPREFETCH" : "");
}

static void cpu_options(const pgd_ctx *ctx, const pgd__gemm_params *p, int64_t M, int64_t K,
                        int trans_a, int trans_b, int b_half, char *opts, size_t size, int *rm,
                        int *panels_first)
{
    cpu_options_ex(ctx, p, M, K, trans_a, trans_b, b_half, 0, opts, size, rm, panels_first);
}

void pgd__gemm_cpu_tile(const pgd_ctx *ctx, const pgd__gemm_params *p, int64_t M, int64_t K,
                        char *opts, size_t size, int *rm, int *nb, int *panels_first)
{
    *nb = p->vw * p->nv;
    /* TRANS_B=1 as linear layers build it: gemm_cpu reads packed panels either way. */
    cpu_options(ctx, p, M, K, 0, 1, 0, opts, size, rm, panels_first);
}

void pgd__gemm_cpu_grid(int panels_first, size_t first, size_t count, size_t panels, size_t depth,
                        size_t offset[3], size_t global[3])
{
    const int rd = panels_first; /* the dimension of the row blocks */
    offset[rd] = first;
    offset[1 - rd] = 0;
    offset[2] = 0;
    global[rd] = count;
    global[1 - rd] = panels;
    global[2] = depth;
}

/* conv_few_rows_cpu (cl/gemm.cl): a work-item takes one weight panel and every row tile, K in
 * blocks, prefetching the next block while it computes (PoCL). It runs for at most
 * FEW_ROWS_TILES row tiles (its TILES) and is chosen where the weights are read from memory, not
 * from cache: K >= FEW_ROWS_MIN_K, and where there are panels enough to keep every core busy (one
 * work-item a panel). Convolutions (conv.c) and linear layers (run_cpu, as a 1 x M image) use it.
 * PoCL 3.1, Xeon, ResNet-50 at batch 1, whose layer4 (M = 49, K up to 4608, 62 MB of weights)
 * and layer3 (M = 196, 33 row tiles) it runs: layer4 took 0.67 of layer3's time, 0.48 with it;
 * layer3 0.88-0.91 of layer1 and layer2's time, 0.82-0.84 with it (with up to 16 row tiles:
 * layer4 alone). Intel's CPU runtime (no prefetch): layer4 0.66 -> 0.62. ViT-B/16 at batch 1
 * (M = 197): its GEMMs took 10.5-10.8 times its attention kernels' time, 10.1-10.4 with it. */
#define FEW_ROWS_TILES 40
#define FEW_ROWS_MIN_K 256

int pgd__gemm_few_rows(const pgd_ctx *ctx, int64_t M, int rm, int64_t K, int64_t items)
{
    int force = pgd__params_of(ctx)->conv_few_rows;
    if (force < 0 || rm < 1 || (M + rm - 1) / rm > FEW_ROWS_TILES)
        return 0;
    if (force > 0)
        return 1;
    return K >= FEW_ROWS_MIN_K && items >= 2 * (int64_t)ctx->dev.compute_units;
}

void pgd__conv_cpu_set_args(pgd__args *args, const pgd__conv_cpu_args *a)
{
    for (int i = 0; i < 16; i++)
        pgd__arg_int(args, a->geo[i]);
    pgd__arg_mem(args, a->x);
    pgd__arg_mem(args, a->zeros);
    pgd__arg_mem(args, a->b);
    pgd__arg(args, sizeof a->stride_b, &a->stride_b);
    pgd__arg_mem(args, a->c);
    pgd__arg(args, sizeof a->ldc, &a->ldc);
    pgd__arg_mem(args, a->bias);
    pgd__arg_mem(args, a->res);
    pgd__arg(args, sizeof a->epi, &a->epi);
}

int pgd__few_rows_run(pgd_ctx *ctx, const char *opts, const pgd__conv_cpu_args *a, size_t panels,
                      size_t groups, pgd_error **err)
{
    cl_kernel k;
    pgd__args args;
    int rc = pgd__args_kernel(&args, ctx, "gemm", opts, "conv_few_rows_cpu", &k, err);
    if (rc)
        return rc;
    pgd__conv_cpu_set_args(&args, a);
    if ((rc = pgd__args_end(&args, err)))
        return rc;
    size_t global[2] = {panels, groups}, local[2] = {1, 1};
    return pgd__enqueue(ctx, k, "conv_few_rows_cpu", 2, global, local, err);
}

/* A linear layer's product (packed weights, one batch, C = A·Bᵀ + epilogue, nothing offset) on
 * conv_few_rows_cpu, as a 1 x M image of K channels through a 1 x 1 convolution; 1 if it ran
 * there (rc in *rc), 0 if it does not apply. */
static int run_cpu_few_rows(pgd_ctx *ctx, const pgd__gemm_call *g, const char *opts, int rm,
                            int *rc, pgd_error **err)
{
    const pgd__gemm_params *p = params_of(ctx, g);
    int64_t nb = p->vw * p->nv;
    const pgd__mat *r = g->residual;
    if (!g->b_packed || g->trans_a || g->batch != 1 || g->alpha != 1.0f || g->beta != 0.0f ||
        g->a.off || g->b.off || g->c.off || (g->bias && g->bias->off) ||
        (r && (r->off || r->ld != g->c.ld)) || g->M > INT32_MAX || g->N > INT32_MAX ||
        g->K > INT32_MAX || !pgd__gemm_few_rows(ctx, g->M, rm, g->K, (g->N + nb - 1) / nb))
        return 0;
    /* Unused bias and residual, and the zeros of padding (none here), are never read. */
    pgd__conv_cpu_args a = {{(cl_int)g->M, (cl_int)g->N, (cl_int)g->K, (cl_int)g->a.ld, 1,
                             (cl_int)g->M, 1, (cl_int)g->M, 1, 1, 1, 1, 1, 1, 0, 0},
                            g->a.buf,
                            g->a.buf,
                            g->b.buf,
                            0,
                            g->c.buf,
                            (cl_int)g->c.ld,
                            g->bias ? g->bias->buf : g->c.buf,
                            r ? r->buf : g->c.buf,
                            pgd__gemm_epi_code(g)};
    *rc = pgd__few_rows_run(ctx, opts, &a, (size_t)((g->N + nb - 1) / nb), 1, err);
    return 1;
}

static int run_cpu(pgd_ctx *ctx, const pgd__gemm_call *g, pgd_error **err)
{
    const pgd__gemm_params *p = params_of(ctx, g);
    int nb = p->vw * p->nv;
    pgd__mat b = g->b;
    pgd_tensor *tmp = NULL;
    int rc;
    if ((g->b_half || g->half_arith) && !g->b_packed)
        return pgd__error_set(err, PGD_ERR_INTERNAL,
                              "gemm: half weights must be packed for gemm_cpu");
    if (!g->b_packed) {
        /* B changes from call to call here (not weights): pack it now into a pooled buffer. */
        int64_t per = pgd__gemm_packed_size(p, g->N, g->K);
        int64_t shape[2] = {g->b.stride ? g->batch : 1, per};
        rc = pgd_tensor_create(ctx, 2, shape, &tmp, err);
        if (rc)
            return rc;
        rc = pgd__gemm_pack(ctx, p, g->trans_b, g->N, g->K, g->b.stride ? g->batch : 1, &g->b,
                            tmp->buf, per, 0, err);
        if (rc) {
            pgd_tensor_destroy(tmp);
            return rc;
        }
        b.buf = tmp->buf;
        b.off = 0;
        b.ld = 0;
        b.stride = g->b.stride ? per : 0;
    }
    char opts[320];
    int rm, panels_first;
    cpu_options_ex(ctx, p, g->M, g->K, g->trans_a, g->trans_b, g->b_half, g->half_arith, opts,
                   sizeof opts, &rm, &panels_first);
    /* The few-rows kernel has no half arithmetic: precision f16 runs gemm_cpu. */
    if (!g->half_arith && run_cpu_few_rows(ctx, g, opts, rm, &rc, err)) {
        pgd_tensor_destroy(tmp);
        return rc;
    }
    cl_kernel k;
    rc = pgd__kernel_get(ctx, "gemm", opts, "gemm_cpu", &k, err);
    if (!rc) {
        rc = set_gemm_args(ctx, k, "gemm_cpu", g, &b, err);
        /* Long launches go in chunks of row blocks at their global offset: gemm_cpu indexes
         * by the global id, so each chunk computes what the same work-items would at once. */
        size_t blocks = (size_t)((g->M + rm - 1) / rm);
        size_t chunk = (size_t)((launch_rows(ctx, g, rm) + rm - 1) / rm); /* ≥ 1 */
        for (size_t b0 = 0; b0 < blocks && !rc; b0 += chunk) {
            size_t offset[3], global[3], local[3] = {1, 1, 1};
            pgd__gemm_cpu_grid(panels_first, b0, blocks - b0 < chunk ? blocks - b0 : chunk,
                               (size_t)((g->N + nb - 1) / nb), (size_t)g->batch, offset, global);
            rc = pgd__enqueue_at(ctx, k, "gemm_cpu", 3, b0 ? offset : NULL, global, local, err);
        }
    }
    pgd_tensor_destroy(tmp); /* the pool keeps the buffer; the in-order queue orders reuse */
    return rc;
}

/* The gemm_gpu kernel for parameters *c. A compiled kernel may allow fewer work-items than the
 * device (register use; llvmpipe allows 32 for the 64×64 tile): given or tuned parameters are
 * then an error, the device's untuned defaults step down to the next smaller tile that fits. */
static int gpu_kernel(pgd_ctx *ctx, const pgd__gemm_call *g, const pgd__gemm_params **c,
                      cl_kernel *k, pgd_error **err)
{
    size_t next = 0, ntiles = sizeof gpu_tiles / sizeof gpu_tiles[0];
    for (;;) {
        const pgd__gemm_params *p = *c;
        char epi[160], opts[320];
        trans_opts(epi, sizeof epi, g->trans_a, g->trans_b);
        snprintf(opts, sizeof opts, "%s -DTSM=%d -DTSN=%d -DTSK=%d -DWPTM=%d -DWPTN=%d%s", epi,
                 p->tsm, p->tsn, p->tsk, p->wptm, p->wptn, g->b_half ? " -DB_HALF" : "");
        int rc = pgd__kernel_get(ctx, "gemm", opts, "gemm_gpu", k, err);
        if (rc)
            return rc;
        size_t need = (size_t)(p->tsn / p->wptn) * (size_t)(p->tsm / p->wptm), kwg = 0;
        if (clGetKernelWorkGroupInfo(*k, ctx->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof kwg, &kwg,
                                     NULL) != CL_SUCCESS ||
            kwg >= need)
            return PGD_OK;
        int is_default = !memcmp(p, &pgd__params_of(ctx)->gemm_default, sizeof *p) ||
                         (next > 0 && !memcmp(p, &gpu_tiles[next - 1], sizeof *p));
        while (is_default && next < ntiles &&
               (!gemm_fits(ctx, &gpu_tiles[next]) || !memcmp(&gpu_tiles[next], p, sizeof *p) ||
                (size_t)(gpu_tiles[next].tsn / gpu_tiles[next].wptn) *
                        (size_t)(gpu_tiles[next].tsm / gpu_tiles[next].wptm) >=
                    need))
            next++;
        if (!is_default || next >= ntiles) {
            char s[96];
            pgd__gemm_params_format(p, s, sizeof s);
            return pgd__error_set(err, PGD_ERR_OUT_OF_RESOURCES,
                                  "gemm: the kernel built for %s allows %zu work-items per group "
                                  "on device '%s', its tile needs %zu",
                                  s, kwg, ctx->dev.name, need);
        }
        *c = &gpu_tiles[next++];
    }
}

static int run_gpu(pgd_ctx *ctx, const pgd__gemm_call *g, pgd_error **err)
{
    const pgd__gemm_params *c = params_of(ctx, g);
    int rc = pgd__gemm_params_check(ctx, c, err);
    if (rc)
        return rc;
    cl_kernel k;
    if ((rc = gpu_kernel(ctx, g, &c, &k, err)))
        return rc;
    size_t lx = (size_t)(c->tsn / c->wptn), ly = (size_t)(c->tsm / c->wptm);
    /* gemm_gpu indexes tiles by the work-group id: long launches go in chunks of whole
     * tile rows, each a GEMM over its rows of A, C and the residual. */
    int64_t chunk = launch_rows(ctx, g, c->tsm);
    for (int64_t m0 = 0; m0 < g->M && !rc; m0 += chunk) {
        pgd__mat res;
        pgd__gemm_call part = rows_of(g, m0, g->M - m0 < chunk ? g->M - m0 : chunk, &res);
        if ((rc = set_gemm_args(ctx, k, "gemm_gpu", &part, &part.b, err)))
            break;
        size_t global[3] = {(size_t)((part.N + c->tsn - 1) / c->tsn) * lx,
                            (size_t)((part.M + c->tsm - 1) / c->tsm) * ly, (size_t)part.batch};
        size_t local[3] = {lx, ly, 1};
        rc = pgd__enqueue(ctx, k, "gemm_gpu", 3, global, local, err);
    }
    return rc;
}

int pgd__gemm_run_own(pgd_ctx *ctx, const pgd__gemm_call *g, pgd_error **err)
{
    return params_of(ctx, g)->cpu ? run_cpu(ctx, g, err) : run_gpu(ctx, g, err);
}

static int gemm_one(pgd_ctx *ctx, const pgd__gemm_call *g, pgd_error **err)
{
    /* The stored choice of the class, never a measurement: see gemm_tune.c. */
    if (!g->b_packed && !g->b_own && pgd__gemm_backend(ctx, g, 0) == PGD__GEMM_CLBLAST) {
        /* CLBlast's launches are its own: long GEMMs go to it in chunks of rows. */
        int64_t chunk = launch_rows(ctx, g, 64);
        int rc = PGD_OK;
        for (int64_t m0 = 0; m0 < g->M && !rc; m0 += chunk) {
            pgd__mat res;
            pgd__gemm_call part = rows_of(g, m0, g->M - m0 < chunk ? g->M - m0 : chunk, &res);
            rc = pgd__gemm_clblast(ctx, &part, err);
        }
        if (rc != PGD_ERR_UNSUPPORTED)
            return rc;
    }
    return pgd__gemm_run_own(ctx, g, err);
}

/* The longest K one launch may take. Mesa's llvmpipe (22.3) ends every loop nest of a
 * work-item after about 65,535 iterations without an error (a GPU-hang guard), which silently
 * truncates the K loop of a GEMM past K ≈ 750; on software rasterisers K is therefore split
 * into chunks accumulated through beta. options.gemm_k_chunk sets the chunk anywhere (tests). */
static int64_t k_chunk(const pgd_ctx *ctx)
{
    if (ctx->knobs.gemm_k_chunk > 0)
        return ctx->knobs.gemm_k_chunk;
    return ctx->dev.software_rasteriser ? 256 : INT64_MAX;
}

static int gemm_k_chunked(pgd_ctx *ctx, const pgd__gemm_call *g, int64_t kc, pgd_error **err)
{
    pgd__mat res;
    cl_mem copy = NULL;
    int rc = PGD_OK;
    if (g->residual && g->residual->buf == g->c.buf) {
        /* the chunks overwrite C: keep the residual it holds */
        size_t bytes = 0;
        cl_int cl = clGetMemObjectInfo(g->c.buf, CL_MEM_SIZE, sizeof bytes, &bytes, NULL);
        if (cl == CL_SUCCESS)
            copy = clCreateBuffer(ctx->context, CL_MEM_READ_WRITE, bytes, NULL, &cl);
        if (cl == CL_SUCCESS)
            cl = clEnqueueCopyBuffer(ctx->queue, g->c.buf, copy, 0, 0, bytes, 0, NULL, NULL);
        if (cl != CL_SUCCESS) {
            if (copy)
                clReleaseMemObject(copy);
            return pgd__cl_fail(err, cl, "clEnqueueCopyBuffer",
                                "keeping the residual of a K-chunked GEMM (%zu bytes)", bytes);
        }
        res = *g->residual;
        res.buf = copy;
    }
    for (int64_t k0 = 0; k0 < g->K && !rc; k0 += kc) {
        pgd__gemm_call c = *g;
        int last = k0 + kc >= g->K;
        c.K = last ? g->K - k0 : kc;
        c.a.off += (size_t)(g->trans_a ? k0 * g->a.ld : k0);
        c.b.off += (size_t)(g->trans_b ? k0 : k0 * g->b.ld);
        if (k0 > 0)
            c.beta = 1.0f;
        if (!last) {
            c.bias = NULL;
            c.residual = NULL;
            c.act = PGD_ACT_NONE;
        } else if (copy) {
            c.residual = &res;
        }
        rc = gemm_one(ctx, &c, err);
    }
    if (copy)
        clReleaseMemObject(copy);
    return rc;
}

int pgd__gemm(pgd_ctx *ctx, const pgd__gemm_call *g, pgd_error **err)
{
    int rc = check_int_range(g, err);
    if (rc)
        return rc;
    if (g->M == 0 || g->N == 0)
        return PGD_OK;
    int64_t kc = k_chunk(ctx);
    if (g->K > kc && !g->b_packed)
        return gemm_k_chunked(ctx, g, kc, err);
    return gemm_one(ctx, g, err);
}

/* ---- public API ---- */

static int mat_dims(const pgd_tensor *t, int64_t *batch, int64_t *rows, int64_t *cols)
{
    if (t->ndim == 2) {
        *batch = 1;
        *rows = t->shape[0];
        *cols = t->shape[1];
        return 0;
    }
    if (t->ndim == 3) {
        *batch = t->shape[0];
        *rows = t->shape[1];
        *cols = t->shape[2];
        return 0;
    }
    return -1;
}

pgd_status pgd_gemm(pgd_ctx *ctx, const pgd_gemm_args *args, const pgd_tensor *a,
                    const pgd_tensor *b, pgd_tensor *c, pgd_error **err)
{
    pgd_gemm_args def = {0, 0, 1.0f, 0.0f, NULL, PGD_ACT_NONE, NULL};
    if (!args)
        args = &def;
    int64_t ba, ar, ac, bb, br, bc, bcn, cr, cc;
    char sa[96], sb[96], sc[96];
    pgd_tensor_shape_str(a, sa, sizeof sa);
    pgd_tensor_shape_str(b, sb, sizeof sb);
    pgd_tensor_shape_str(c, sc, sizeof sc);
    if (mat_dims(a, &ba, &ar, &ac) || mat_dims(b, &bb, &br, &bc) || mat_dims(c, &bcn, &cr, &cc))
        return pgd__error_set(err, PGD_ERR_SHAPE,
                              "gemm: A %s, B %s and C %s must be 2-D or 3-D (batch first)", sa, sb,
                              sc);
    int64_t M = args->trans_a ? ac : ar, K = args->trans_a ? ar : ac;
    int64_t Kb = args->trans_b ? bc : br, N = args->trans_b ? br : bc;
    int64_t batch = bcn;
    if (K != Kb || cr != M || cc != N || ba != batch || (bb != batch && bb != 1))
        return pgd__error_set(err, PGD_ERR_SHAPE,
                              "gemm: shapes do not fit: op(A) of %s is %lldx%lld, op(B) of %s is "
                              "%lldx%lld, C is %s (batch of B must be 1 or C's)",
                              sa, (long long)M, (long long)K, sb, (long long)Kb, (long long)N, sc);
    pgd__gemm_call g;
    memset(&g, 0, sizeof g);
    g.trans_a = args->trans_a != 0;
    g.trans_b = args->trans_b != 0;
    g.M = M;
    g.N = N;
    g.K = K;
    g.batch = batch;
    g.alpha = args->alpha;
    g.beta = args->beta;
    g.act = args->act;
    g.a = (pgd__mat){a->buf, 0, (int)ac, (long)(ar * ac)};
    g.b = (pgd__mat){b->buf, 0, (int)bc, bb == 1 ? 0 : (long)(br * bc)};
    g.c = (pgd__mat){c->buf, 0, (int)cc, (long)(cr * cc)};
    pgd__mat bias, res;
    if (args->bias) {
        if (args->bias->ndim != 1 || args->bias->shape[0] != N) {
            char s[96];
            return pgd__error_set(err, PGD_ERR_SHAPE, "gemm: bias %s must be 1-D [N] with N=%lld",
                                  pgd_tensor_shape_str(args->bias, s, sizeof s), (long long)N);
        }
        bias = (pgd__mat){args->bias->buf, 0, 0, 0};
        g.bias = &bias;
    }
    if (args->residual) {
        if (!pgd__shape_equal(args->residual, c)) {
            char s[96];
            return pgd__error_set(err, PGD_ERR_SHAPE, "gemm: residual %s must be shaped like C %s",
                                  pgd_tensor_shape_str(args->residual, s, sizeof s), sc);
        }
        res = (pgd__mat){args->residual->buf, 0, (int)cc, (long)(cr * cc)};
        g.residual = &res;
    }
    return pgd__gemm(ctx, &g, err);
}
