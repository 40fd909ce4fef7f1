/* attention.c — launchers for cl/attention.cl: fused multi-head attention and the optional
 * probability pass.
 *
 * Variant choice: CPU devices (PoCL; llvmpipe reports CPU too) with head_dim a multiple of 4
 * take attn_fwd_kt (K transposed first, both phases as broadcast-FMA register tiles), software
 * rasterisers attn_fwd_rows (a work-item owns ROWS query rows, vector math along the head
 * dimension, no barriers), unless pgd_tune stored another choice; other
 * devices take attn_fwd_tiled (K/V tiles of BK keys in local memory, BK the largest power of
 * two ≤ 64 whose tiles fit the device's local memory, halved while the built kernel needs
 * more); anything else takes attn_fwd_generic (head_dim at run time). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tune.h"

enum { V_ROWS, V_TILED, V_GENERIC, V_KT };

/* Work per forward launch (see pgd__launch_rows): the query rows are split into chunks of at
 * most this many FLOPs (4·Nk·D per row, head and batch: QKᵀ and PV), launched one
 * after another with a global offset. 2^28 FLOPs is ~100 ms at 2.7 GFLOP/s, the attention rate
 * of a slow device; on PoCL (~30 GFLOP/s) it is ~9 ms, and ViT-B/16's 197 rows of 12 heads
 * (0.6 MFLOP a row) still fit in one launch. */
#define LAUNCH_FLOPS (UINT64_C(1) << 28)

/* Query rows per forward launch, a multiple of `unit` (rows per work-group), so that each chunk
 * is made of the same work-groups as the whole launch and the results are bitwise the same. */
static int64_t chunk_rows(const pgd_ctx *ctx, int64_t B, int64_t H, int64_t Nq, int64_t Nk,
                          int64_t D, int64_t unit)
{
    uint64_t per_row = 4u * (uint64_t)B * (uint64_t)H * (uint64_t)(Nk > 0 ? Nk : 1) * (uint64_t)D;
    return pgd__launch_rows(ctx, Nq, per_row, LAUNCH_FLOPS, unit);
}

int pgd__attn_fma(const pgd_ctx *ctx)
{
    cl_device_fp_config fp = 0;
    clGetDeviceInfo(ctx->device, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, NULL);
    return (fp & CL_FP_FMA) != 0;
}

static int pick_variant(const pgd_ctx *ctx, int64_t D)
{
    pgd_attention_variant forced = ctx->opt.attention;
    if (forced == PGD_ATTENTION_ROWS && D % 4 == 0)
        return V_ROWS;
    if (forced == PGD_ATTENTION_KT && D % 4 == 0)
        return V_KT;
    if (forced == PGD_ATTENTION_TILED)
        return V_TILED;
    if (forced == PGD_ATTENTION_GENERIC)
        return V_GENERIC;
    /* the device's parameters: stored by pgd_tune, else the database's entry (tune/db.c) */
    const pgd__params *P = pgd__params_of(ctx);
    if (P->attn_variant && D % 4 == 0)
        return P->attn_variant == PGD_ATTENTION_KT ? V_KT : V_ROWS;
    /* CPU runtimes run the Kᵀ kernel: 1.5x the rows kernel on PoCL, 1.8x on Intel's runtime at
     * 16-wide key vectors (pagoda tune); software rasterisers (llvmpipe) keep rows */
    if (ctx->dev.type == PGD_DEVICE_CPU && D % 4 == 0)
        return ctx->dev.software_rasteriser ? V_ROWS : V_KT;
    if (ctx->dev.type != PGD_DEVICE_CPU)
        return V_TILED;
    return V_GENERIC;
}

/* An int4 stride descriptor; every value must fit in 32 bits. */
int pgd__attn_descr(const pgd_view *v, cl_int4 *out, const char *what, pgd_error **err)
{
    int64_t vals[4] = {v->offset, v->batch_stride, v->head_stride, v->token_stride};
    for (int i = 0; i < 4; i++) {
        if (vals[i] < 0 || vals[i] > INT32_MAX)
            return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                  "attention: %s offset/strides (%lld, %lld, %lld, %lld) must be "
                                  "in [0, 2^31)",
                                  what, (long long)vals[0], (long long)vals[1], (long long)vals[2],
                                  (long long)vals[3]);
        out->s[i] = (cl_int)vals[i];
    }
    return PGD_OK;
}

/* The last element a view touches must lie inside its tensor. */
int pgd__attn_check_view(const pgd_view *v, int64_t B, int64_t H, int64_t N, int64_t D, int halves,
                         const char *what, pgd_error **err)
{
    if (!v->t)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "attention: %s has no tensor", what);
    int64_t last = v->offset + (B - 1) * v->batch_stride + (H - 1) * v->head_stride +
                   (N - 1) * v->token_stride + D - 1;
    if (B > 0 && H > 0 && N > 0 && D > 0 && last >= pgd_tensor_get_numel(v->t) * (halves ? 2 : 1)) {
        char s[96];
        return pgd__error_set(err, PGD_ERR_SHAPE,
                              "attention: %s view (offset %lld, strides %lld/%lld/%lld) reaches "
                              "element %lld of tensor %s",
                              what, (long long)v->offset, (long long)v->batch_stride,
                              (long long)v->head_stride, (long long)v->token_stride,
                              (long long)last, pgd_tensor_shape_str(v->t, s, sizeof s));
    }
    return PGD_OK;
}

/* attn_fwd_kt's untuned key vector width. */
static int default_kw(const pgd_ctx *ctx)
{
    /* 8 where the device asks for 8 (AVX2), else 16: AVX-512, and the implicit vectorisers
     * (preferred width 1), where 16 measured fastest */
    return ctx->dev.pref_vector_float == 8 ? 8 : 16;
}

/* The key vector width attn_fwd_kt runs: the tuned one, else default_kw's. */
static int kt_kw(const pgd_ctx *ctx)
{
    const pgd__params *P = pgd__params_of(ctx);
    return P->attn_kw ? P->attn_kw : default_kw(ctx);
}

/* Query rows a work-item of attn_fwd_kt owns: the tuned number, else 6 where the key vectors
 * are 16 wide and the device asks for 16-wide vectors (AVX-512: 32 registers; on the 2-core Xeon
 * 6 rows ran N = 197 / 785 / 3136 1.1-1.25x faster than 4), else 4. */
static int kt_rows(const pgd_ctx *ctx)
{
    if (pgd__params_of(ctx)->attn_rows)
        return pgd__params_of(ctx)->attn_rows;
    return kt_kw(ctx) == 16 && ctx->dev.pref_vector_float == 16 ? 6 : 4;
}

/* attn_fwd_kt's key tile: 4 key vectors of kt_kw's width. */
static int kt_tile(const pgd_ctx *ctx)
{
    return 4 * kt_kw(ctx);
}

/* attn_fwd_kt's key blocks: where a head's K and V take more than block_above() bytes, a
 * work-item owns KT_QT query tiles and takes the keys in blocks of about KT_BLOCK_BYTES of K and
 * V, each serving its tiles in turn while it is in the core's cache. PoCL 3.1, Xeon (2 MiB L2),
 * one head of 64: N = 3136 (1.6 MB of K and V) 18.4 -> 11.4 ms (28 -> 45 % of peak), N = 1568
 * 3.3 -> 3.2 ms, one head of 128 at N = 3136 45.7 -> 28.8 ms, N = 785 with 12 heads (0.4 MB a
 * head) unchanged either way; blocks of 32-512 KiB and 4-16 tiles all within 4 % of these. */
#define KT_BLOCK_BYTES (128u << 10)
#define KT_QT 8

/* The size of a head's K and V above which attn_fwd_kt blocks its keys: 512 KiB where the
 * device asks for explicit vectors (PoCL), 2 MiB where it vectorises across work-items. Intel's
 * CPU runtime, same Xeon: blocked ran slower for heads of 0.8 and 1.6 MB (N = 785 of 128: 1.52
 * -> 1.94 ms; N = 1568 / 3136 of 64: 2.6 -> 4.4 / 14.7 -> 17.6 ms) and faster at 3.2 MB
 * (N = 3136 of 128: 43.5 -> 32.1 ms; the non-local block 48-51 -> 34 ms). */
static uint64_t block_above(const pgd_ctx *ctx)
{
    return ctx->dev.pref_vector_float > 1 ? 512u << 10 : 2u << 20;
}

/* The query tiles a work-item of attn_fwd_kt takes (1 or KT_QT) and its keys a block (*kb, a
 * multiple of the key tile) for Nk keys of D. */
static int kt_blocking(const pgd_ctx *ctx, int64_t Nk, int64_t D, cl_int *kb)
{
    const int tk = kt_tile(ctx);
    int64_t forced = ctx->knobs.attn_key_block;
    if (forced <= 0 && (uint64_t)Nk * (uint64_t)D * 8u <= block_above(ctx)) {
        *kb = (cl_int)(Nk + tk < INT32_MAX ? Nk + tk : INT32_MAX); /* one block */
        return 1;
    }
    int64_t blk = forced > 0 ? forced : (int64_t)KT_BLOCK_BYTES / (8 * D);
    blk = (blk + tk - 1) / tk * tk;
    *kb = (cl_int)(blk < INT32_MAX - tk ? blk : INT32_MAX - tk);
    return KT_QT;
}

/* attn_fwd_kt's build options: key vectors of kt_kw's width, TK = kt_tile keys, kt_rows query
 * rows a tile (*rows; may be NULL), qt tiles a work-item, the P·V vectors as wide along the head
 * dimension as it divides. */
static void kt_options(const pgd_ctx *ctx, int64_t D, int qt, char *opts, size_t size, int *rows)
{
    int kw = kt_kw(ctx), r = kt_rows(ctx);
    int vw = kw;
    while (D % vw)
        vw /= 2;
    char qts[24] = "";
    if (qt > 1)
        snprintf(qts, sizeof qts, " -DQT=%d", qt);
    snprintf(opts, size, "-DHEAD_DIM=%lld -DROWS=%d -DTK=%d -DKW=%d -DVW_PV=%d%s%s", (long long)D,
             r, kt_tile(ctx), kw, vw, pgd__attn_fma(ctx) ? " -DUSE_FMA" : "", qts);
    if (rows)
        *rows = r;
}

/* The forward kernel of variant var for Nk keys of D: *lx work-items a group, *rows query rows a
 * work-item, and for attn_fwd_kt *kb keys a block (every key when unblocked). */
static int forward_kernel(pgd_ctx *ctx, int var, int64_t Nk, int64_t D, cl_kernel *k, size_t *lx,
                          int *rows, cl_int *kb, pgd_error **err)
{
    char opts[256];
    const char *fma = pgd__attn_fma(ctx) ? " -DUSE_FMA" : "";
    int rc;
    *rows = 1;
    if (var == V_KT) {
        int qt = kt_blocking(ctx, Nk, D, kb);
        kt_options(ctx, D, qt, opts, sizeof opts, rows);
        rc = pgd__kernel_get(ctx, "attention", opts, "attn_fwd_kt", k, err);
        /* blocked: one work-item a group, so that the few long work-items spread over cores */
        if (!rc)
            *lx = qt > 1 ? 1
                         : pgd__pow2_floor(pgd__kernel_wg(ctx, *k) < 16 ? pgd__kernel_wg(ctx, *k)
                                                                        : 16);
        *rows *= qt;
        return rc;
    }
    if (var == V_ROWS) {
        *rows = 4;
        const char *vw16 = pgd_ctx_get_device(ctx)->pref_vector_float >= 16 ? " -DVW16" : "";
        snprintf(opts, sizeof opts, "-DHEAD_DIM=%lld -DROWS=4 -DTK=32%s%s", (long long)D, fma,
                 vw16);
        rc = pgd__kernel_get(ctx, "attention", opts, "attn_fwd_rows", k, err);
        if (!rc)
            *lx = pgd__pow2_floor(pgd__kernel_wg(ctx, *k) < 16 ? pgd__kernel_wg(ctx, *k) : 16);
        return rc;
    }
    if (var == V_TILED) {
        /* Tiles of BK keys × D floats for K and V (and score space): 8·BK·D bytes. */
        int bk = 64;
        while (bk > 1 && (uint64_t)(8 * bk) * (uint64_t)D + 1024 > ctx->dev.local_mem)
            bk /= 2;
        for (;;) {
            snprintf(opts, sizeof opts, "-DHEAD_DIM=%lld -DBK=%d%s", (long long)D, bk, fma);
            rc = pgd__kernel_get(ctx, "attention", opts, "attn_fwd_tiled", k, err);
            if (rc)
                return rc;
            cl_ulong lm = 0;
            clGetKernelWorkGroupInfo(*k, ctx->device, CL_KERNEL_LOCAL_MEM_SIZE, sizeof lm, &lm,
                                     NULL);
            if (lm <= ctx->dev.local_mem || bk == 1)
                break;
            bk /= 2;
        }
        *lx = pgd__pow2_floor(pgd__kernel_wg(ctx, *k) < 64 ? pgd__kernel_wg(ctx, *k) : 64);
        return PGD_OK;
    }
    snprintf(opts, sizeof opts, "-DTK=32%s", fma);
    rc = pgd__kernel_get(ctx, "attention", opts, "attn_fwd_generic", k, err);
    if (!rc)
        *lx = pgd__pow2_floor(pgd__kernel_wg(ctx, *k) < 64 ? pgd__kernel_wg(ctx, *k) : 64);
    return rc;
}

static int check_sizes(const pgd_attention_args *a, pgd_error **err)
{
    int64_t B = a->batch, H = a->heads, Nq = a->nq, Nk = a->nk, D = a->head_dim;
    if (B < 0 || H < 0 || Nq < 0 || Nk < 0 || D < 1 || B > INT32_MAX || H > INT32_MAX ||
        Nq > INT32_MAX || Nk > INT32_MAX || D > 4096)
        return pgd__error_set(err, PGD_ERR_SHAPE,
                              "attention: bad sizes batch %lld heads %lld nq %lld nk %lld "
                              "head_dim %lld (head_dim 1..4096)",
                              (long long)B, (long long)H, (long long)Nq, (long long)Nk,
                              (long long)D);
    if (a->causal < 0 || a->causal > PGD_CAUSAL_TOP_LEFT)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "attention: causal is %d: 0 (none), PGD_CAUSAL_BOTTOM_RIGHT (1) or "
                              "PGD_CAUSAL_TOP_LEFT (2)",
                              a->causal);
    return PGD_OK;
}

/* Every view inside its tensor (K and V only when there are keys), and O apart from Q, K, V. */
static int check_views(const pgd_attention_args *a, pgd_error **err)
{
    int64_t B = a->batch, H = a->heads, Nq = a->nq, Nk = a->nk, D = a->head_dim;
    int rc;
    if ((rc = pgd__attn_check_view(&a->q, B, H, Nq, D, 0, "Q", err)) ||
        (Nk && (rc = pgd__attn_check_view(&a->k, B, H, Nk, D, 0, "K", err))) ||
        (Nk && (rc = pgd__attn_check_view(&a->v, B, H, Nk, D, 0, "V", err))) ||
        (rc = pgd__attn_check_view(&a->o, B, H, Nq, D, 0, "O", err)) ||
        (a->mask.t && Nk && (rc = pgd__attn_check_view(&a->mask, B, H, Nq, Nk, 0, "mask", err))))
        return rc;
    if (a->o.t == a->q.t || a->o.t == a->k.t || a->o.t == a->v.t)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "attention: the output must not share a tensor with Q, K or V");
    return PGD_OK;
}

/* The requested rows of probabilities must fit the probs tensor. */
static int check_probs(const pgd_attention_args *a, pgd_error **err)
{
    int64_t B = a->batch, H = a->heads, Nq = a->nq, Nk = a->nk;
    int64_t q0 = a->probs_q0, q1 = a->probs_q1, hsel = a->probs_head < 0 ? H : 1;
    if (!a->probs)
        return PGD_OK;
    if (q0 < 0 || q1 > Nq || q0 >= q1 || a->probs_head >= H ||
        pgd_tensor_get_numel(a->probs) < B * hsel * (q1 - q0) * Nk) {
        char s[96];
        return pgd__error_set(err, PGD_ERR_SHAPE,
                              "attention: probabilities of rows [%lld, %lld) of head %d need "
                              "%lld floats; tensor %s (nq %lld, heads %lld)",
                              (long long)q0, (long long)q1, a->probs_head,
                              (long long)(B * hsel * (q1 > q0 ? q1 - q0 : 0) * Nk),
                              pgd_tensor_shape_str(a->probs, s, sizeof s), (long long)Nq,
                              (long long)H);
    }
    return PGD_OK;
}

/* What the forward and the probability kernels share: each buffer with its stride descriptor
 * (absent K, V, mask and statistics are bound to Q's buffer and never read), sizes, scale and
 * the mode bits (1 causal, 2 mask). */
typedef struct {
    cl_mem q, k, v, o, mask, stats;
    cl_mem kt;      /* V_KT: Kᵀ [B·H][D][nkp] */
    cl_int nkp, kb; /* V_KT: Kᵀ's padded key count, keys a block */
    cl_int4 qs, ks, vs, os, ms;
    cl_int write_stats, H, Nq, Nk, D, mode;
    float scale;
} bound;

/* Fills `b` from the arguments; fails when an offset or stride does not fit the kernels' int. */
static int bind(const pgd_attention_args *a, bound *b, pgd_error **err)
{
    int rc;
    b->ms = (cl_int4){{0, 0, 0, 0}};
    if ((rc = pgd__attn_descr(&a->q, &b->qs, "Q", err)) ||
        (rc = pgd__attn_descr(&a->k, &b->ks, "K", err)) ||
        (rc = pgd__attn_descr(&a->v, &b->vs, "V", err)) ||
        (rc = pgd__attn_descr(&a->o, &b->os, "O", err)) ||
        (a->mask.t && (rc = pgd__attn_descr(&a->mask, &b->ms, "mask", err))))
        return rc;
    int64_t Nk = a->nk, D = a->head_dim;
    b->q = a->q.t->buf;
    b->k = Nk ? a->k.t->buf : b->q;
    b->v = Nk ? a->v.t->buf : b->q;
    b->o = a->o.t->buf;
    b->mask = a->mask.t ? a->mask.t->buf : b->q;
    b->stats = b->q;
    b->write_stats = 0;
    b->H = (cl_int)a->heads;
    b->Nq = (cl_int)a->nq;
    b->Nk = (cl_int)Nk;
    b->D = (cl_int)D;
    b->mode =
        (a->causal ? 1 : 0) | (a->mask.t ? 2 : 0) | (a->causal == PGD_CAUSAL_TOP_LEFT ? 4 : 0);
    b->scale = a->scale != 0.0f ? a->scale : (float)(1.0 / sqrt((double)D));
    return PGD_OK;
}

static void arg_view(pgd__args *args, cl_mem m, const cl_int4 *descriptor)
{
    pgd__arg_mem(args, m);
    pgd__arg(args, sizeof *descriptor, descriptor);
}

/* The arguments both kernels take after their buffers, in this order. */
static void arg_sizes(pgd__args *args, const bound *b)
{
    pgd__arg_int(args, b->H);
    pgd__arg_int(args, b->Nq);
    pgd__arg_int(args, b->Nk);
    pgd__arg_float(args, b->scale);
    pgd__arg_int(args, b->mode);
}

/* attn_fwd_kt's Kᵀ: K's view transposed into a new [B·H·D·nkp] tensor *kt, nkp = Nk rounded up
 * to the key tile (a multiple of 16: TK >= 16), zeros past Nk. */
static int transpose_k(pgd_ctx *ctx, const pgd_attention_args *a, bound *b, pgd_tensor **kt,
                       pgd_error **err)
{
    char opts[256];
    const int tk = kt_tile(ctx);
    kt_options(ctx, a->head_dim, 1, opts, sizeof opts, NULL);
    int64_t nkp = (a->nk + tk - 1) / tk * tk;
    int64_t shape[1] = {a->batch * a->heads * a->head_dim * nkp};
    if (nkp > INT32_MAX || shape[0] > INT32_MAX)
        return pgd__error_set(err, PGD_ERR_SHAPE,
                              "attention: Kᵀ of %lld floats is too large for the kt kernel",
                              (long long)shape[0]);
    cl_kernel k;
    pgd__args args;
    int rc = pgd__args_kernel(&args, ctx, "attention", opts, "attn_k_transpose", &k, err);
    if (rc || (rc = pgd_tensor_create(ctx, 1, shape, kt, err)))
        return rc;
    b->kt = (*kt)->buf;
    b->nkp = (cl_int)nkp;
    arg_view(&args, b->k, &b->ks);
    pgd__arg_mem(&args, b->kt);
    pgd__arg_int(&args, b->H);
    pgd__arg_int(&args, b->Nk);
    pgd__arg_int(&args, b->nkp);
    if ((rc = pgd__args_end(&args, err)))
        return rc;
    size_t global[2] = {(size_t)nkp / 16, (size_t)(a->batch * a->heads)};
    size_t local[2] = {1, 1};
    return pgd__enqueue(ctx, k, "attn_k_transpose", 2, global, local, err);
}

static const char *const variant_names[] = {"attn_fwd_rows", "attn_fwd_tiled", "attn_fwd_generic",
                                            "attn_fwd_kt"};

/* Sets the forward kernel's arguments and enqueues it: k from forward_kernel, lx work-items a
 * group, `rows` query rows a work-item. */
static int launch_forward(pgd_ctx *ctx, const pgd_attention_args *a, const bound *b, int var,
                          cl_kernel k, size_t lx, int rows, pgd_error **err)
{
    int64_t B = a->batch, H = a->heads, Nq = a->nq, Nk = a->nk, D = a->head_dim;
    const char *name = variant_names[var];
    pgd__args args;
    pgd__args_begin(&args, ctx, k, name);
    arg_view(&args, b->q, &b->qs);
    if (var == V_KT) {
        pgd__arg_mem(&args, b->kt);
        pgd__arg_int(&args, b->nkp);
    } else {
        arg_view(&args, b->k, &b->ks);
    }
    arg_view(&args, b->v, &b->vs);
    arg_view(&args, b->o, &b->os);
    arg_view(&args, b->mask, &b->ms);
    pgd__arg_mem(&args, b->stats);
    pgd__arg_int(&args, b->write_stats);
    arg_sizes(&args, b);
    if (var == V_GENERIC)
        pgd__arg_int(&args, b->D);
    if (var == V_KT)
        pgd__arg_int(&args, b->kb);
    int rc = pgd__args_end(&args, err);
    /* The whole launch covers gx work-items in dimension 0 (rows query rows each); it is
     * enqueued in chunks of whole work-groups, each at its global offset. The kernels index by
     * the global id, so a chunk computes exactly what the same work-items would in one launch. */
    size_t gx = ((size_t)((Nq + rows - 1) / rows) + lx - 1) / lx * lx;
    size_t chunk =
        ((size_t)chunk_rows(ctx, B, H, Nq, Nk, D, (int64_t)lx * rows) + (size_t)rows - 1) /
        (size_t)rows;
    chunk = (chunk + lx - 1) / lx * lx;
    for (size_t x0 = 0; x0 < gx && !rc; x0 += chunk) {
        size_t offset[3] = {x0, 0, 0};
        size_t global[3] = {gx - x0 < chunk ? gx - x0 : chunk, (size_t)H, (size_t)B};
        size_t local[3] = {lx, 1, 1};
        rc = pgd__enqueue_at(ctx, k, name, 3, x0 ? offset : NULL, global, local, err);
    }
    return rc;
}

/* The probability pass: softmax rows [probs_q0, probs_q1) of one head (or all) into a->probs,
 * from the row statistics the forward pass wrote. */
static int launch_probs(pgd_ctx *ctx, const pgd_attention_args *a, const bound *b, pgd_error **err)
{
    int64_t q0 = a->probs_q0, q1 = a->probs_q1, hsel = a->probs_head < 0 ? a->heads : 1;
    cl_kernel kp;
    pgd__args args;
    int rc = pgd__args_kernel(&args, ctx, "attention", NULL, "attn_probs", &kp, err);
    if (rc)
        return rc;
    size_t lp = pgd__pow2_floor(pgd__kernel_wg(ctx, kp) < 64 ? pgd__kernel_wg(ctx, kp) : 64);
    arg_view(&args, b->q, &b->qs);
    arg_view(&args, b->k, &b->ks);
    arg_view(&args, b->mask, &b->ms);
    pgd__arg_mem(&args, b->stats);
    pgd__arg_mem(&args, a->probs->buf);
    arg_sizes(&args, b);
    pgd__arg_int(&args, b->D);
    pgd__arg_int(&args, a->probs_head);
    pgd__arg_int(&args, (cl_int)q0);
    pgd__arg_int(&args, (cl_int)q1);
    rc = pgd__args_end(&args, err);
    size_t gp[3] = {((size_t)a->nk + lp - 1) / lp * lp, (size_t)(q1 - q0),
                    (size_t)(a->batch * hsel)};
    size_t lpp[3] = {lp, 1, 1};
    if (!rc)
        rc = pgd__enqueue(ctx, kp, "attn_probs", 3, gp, lpp, err);
    return rc;
}

/* The counter-based generator of attn_hard (cl/attention_hard.cl), bit for bit. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 31)) * UINT64_C(0x7fb5d329728ea185);
    z = (z ^ (z >> 27)) * UINT64_C(0x81dadef4bc2dd44d);
    return z ^ (z >> 33);
}

float pgd_attention_uniform(uint64_t seed, int64_t b, int64_t h, int64_t i, int64_t heads,
                            int64_t nq)
{
    uint64_t counter = ((uint64_t)b * (uint64_t)heads + (uint64_t)h) * (uint64_t)nq + (uint64_t)i;
    uint64_t x = mix64(mix64(seed ^ UINT64_C(0x9e3779b97f4a7c15)) + counter);
    return (float)(uint32_t)(x >> 40) * (1.0f / 16777216.0f);
}

/* Scores a hard-attention launch may hold: 16 Mi floats (64 MiB). */
#define HARD_SCRATCH (INT64_C(1) << 24)

/* Hard attention (top-k or sampled): attn_hard, one work-item per query row, over launches of
 * bc batch entries x hc heads x rc rows whose scores fit HARD_SCRATCH. */
static int hard_forward(pgd_ctx *ctx, const pgd_attention_args *a, const bound *bd, pgd_error **err)
{
    if (a->mode != PGD_ATTENTION_TOPK && a->mode != PGD_ATTENTION_SAMPLE)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "attention: unknown mode %d",
                              (int)a->mode);
    if (a->mode == PGD_ATTENTION_TOPK && a->topk < 1)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "attention: top-k needs k >= 1, got %lld", (long long)a->topk);
    int64_t B = a->batch, H = a->heads, Nq = a->nq, Nk = a->nk, nk1 = Nk ? Nk : 1;
    int64_t rc_rows = Nq * nk1 <= HARD_SCRATCH ? Nq : (HARD_SCRATCH / nk1 ? HARD_SCRATCH / nk1 : 1);
    int64_t hc = 1, bc = 1;
    if (rc_rows == Nq) {
        hc = HARD_SCRATCH / (Nq * nk1);
        hc = hc < 1 ? 1 : hc > H ? H : hc;
    }
    if (rc_rows == Nq && hc == H) {
        bc = HARD_SCRATCH / (H * Nq * nk1);
        bc = bc < 1 ? 1 : bc > B ? B : bc;
    }
    cl_kernel k;
    pgd__args args;
    int rc = pgd__args_kernel(&args, ctx, "attention_hard", NULL, "attn_hard", &k, err);
    if (rc)
        return rc;
    pgd_tensor *scratch = NULL;
    int64_t shape[1] = {bc * hc * rc_rows * nk1};
    if ((rc = pgd_tensor_create(ctx, 1, shape, &scratch, err)))
        return rc;
    size_t lx = pgd__pow2_floor(pgd__kernel_wg(ctx, k) < 64 ? pgd__kernel_wg(ctx, k) : 64);
    cl_int topk = a->topk > INT32_MAX ? INT32_MAX : (cl_int)a->topk;
    cl_mem probs = a->probs ? a->probs->buf : bd->o;
    cl_int pq0 = a->probs ? (cl_int)a->probs_q0 : 0, pq1 = a->probs ? (cl_int)a->probs_q1 : 0;
    for (int64_t b0 = 0; b0 < B && !rc; b0 += bc)
        for (int64_t h0 = 0; h0 < H && !rc; h0 += hc)
            for (int64_t i0 = 0; i0 < Nq && !rc; i0 += rc_rows) {
                int64_t nb = B - b0 < bc ? B - b0 : bc, nh = H - h0 < hc ? H - h0 : hc;
                int64_t i1 = Nq - i0 < rc_rows ? Nq : i0 + rc_rows;
                pgd__args_begin(&args, ctx, k, "attn_hard");
                arg_view(&args, bd->q, &bd->qs);
                arg_view(&args, bd->k, &bd->ks);
                arg_view(&args, bd->v, &bd->vs);
                arg_view(&args, bd->o, &bd->os);
                arg_view(&args, bd->mask, &bd->ms);
                pgd__arg_mem(&args, scratch->buf);
                pgd__arg_mem(&args, probs);
                pgd__arg_int(&args, bd->H);
                pgd__arg_int(&args, bd->Nq);
                pgd__arg_int(&args, bd->Nk);
                pgd__arg_float(&args, bd->scale);
                pgd__arg_int(&args, bd->mode);
                pgd__arg_int(&args, bd->D);
                pgd__arg_int(&args, (cl_int)a->mode);
                pgd__arg_int(&args, topk);
                pgd__arg_long(&args, (cl_long)a->seed);
                pgd__arg_int(&args, (cl_int)b0);
                pgd__arg_int(&args, (cl_int)h0);
                pgd__arg_int(&args, (cl_int)i0);
                pgd__arg_int(&args, (cl_int)i1);
                pgd__arg_int(&args, (cl_int)hc);
                pgd__arg_int(&args, a->probs ? a->probs_head : -1);
                pgd__arg_int(&args, pq0);
                pgd__arg_int(&args, pq1);
                rc = pgd__args_end(&args, err);
                size_t offset[3] = {(size_t)i0, 0, 0};
                size_t global[3] = {((size_t)(i1 - i0) + lx - 1) / lx * lx, (size_t)nh, (size_t)nb};
                size_t local[3] = {lx, 1, 1};
                if (!rc)
                    rc = pgd__enqueue_at(ctx, k, "attn_hard", 3, i0 ? offset : NULL, global, local,
                                         err);
            }
    pgd_tensor_destroy(scratch);
    return rc;
}

int pgd_attention(pgd_ctx *ctx, const pgd_attention_args *a, pgd_error **err)
{
    int rc = check_sizes(a, err);
    if (rc || a->batch == 0 || a->heads == 0 || a->nq == 0)
        return rc;
    bound b;
    if ((rc = check_views(a, err)) || (rc = bind(a, &b, err)) || (rc = check_probs(a, err)))
        return rc;
    if (a->mode != PGD_ATTENTION_SOFT)
        return hard_forward(ctx, a, &b, err);
    int var = pick_variant(ctx, a->head_dim);
    cl_kernel k;
    size_t lx = 1;
    int rows;
    b.kb = 0;
    if ((rc = forward_kernel(ctx, var, a->nk, a->head_dim, &k, &lx, &rows, &b.kb, err)))
        return rc;
    /* The forward pass leaves two floats a query row (running maximum, sum) for the
     * probability pass. */
    pgd_tensor *stats = NULL;
    if (a->probs) {
        int64_t shape[1] = {a->batch * a->heads * a->nq * 2};
        if ((rc = pgd_tensor_create(ctx, 1, shape, &stats, err)))
            return rc;
        b.stats = stats->buf;
        b.write_stats = 1;
    }
    pgd_tensor *kt = NULL;
    b.kt = b.q;
    b.nkp = 0;
    if (var == V_KT && a->nk)
        rc = transpose_k(ctx, a, &b, &kt, err);
    if (!rc)
        rc = launch_forward(ctx, a, &b, var, k, lx, rows, err);
    if (!rc && a->probs)
        rc = launch_probs(ctx, a, &b, err);
    pgd_tensor_destroy(stats);
    pgd_tensor_destroy(kt);
    return rc;
}

int pgd_attention_qkv(pgd_ctx *ctx, const pgd_tensor *qkv, int64_t heads, pgd_tensor *out,
                      pgd_error **err)
{
    char s1[96], s2[96];
    pgd_tensor_shape_str(qkv, s1, sizeof s1);
    pgd_tensor_shape_str(out, s2, sizeof s2);
    if (qkv->ndim != 3 || out->ndim != 3 || heads < 1 || qkv->shape[2] % (3 * heads) != 0 ||
        out->shape[0] != qkv->shape[0] || out->shape[1] != qkv->shape[1] ||
        out->shape[2] * 3 != qkv->shape[2])
        return pgd__error_set(err, PGD_ERR_SHAPE,
                              "attention: qkv %s must be [B, N, 3·H·D] with H=%lld and out %s "
                              "[B, N, H·D]",
                              s1, (long long)heads, s2);
    int64_t B = qkv->shape[0], N = qkv->shape[1], D = qkv->shape[2] / (3 * heads);
    int64_t tok = qkv->shape[2], bs = N * tok;
    pgd_attention_args a;
    memset(&a, 0, sizeof a);
    a.batch = B;
    a.heads = heads;
    a.nq = a.nk = N;
    a.head_dim = D;
    a.q = (pgd_view){qkv, 0, bs, D, tok};
    a.k = (pgd_view){qkv, heads * D, bs, D, tok};
    a.v = (pgd_view){qkv, 2 * heads * D, bs, D, tok};
    a.o = (pgd_view){out, 0, N * heads * D, D, heads * D};
    return pgd_attention(ctx, &a, err);
}

/* ---- tuning (pgd_tune's attention stage) ---- */

int pgd__attention_params_parse(const char *text, int *variant, int *kw, int *rows)
{
    if (!text)
        return -1;
    if (!strcmp(text, "rows")) {
        *variant = PGD_ATTENTION_ROWS;
        *kw = 0;
        *rows = 0;
        return 0;
    }
    /* "kt:kw=K" (K = 4, 8 or 16), or "kt:kw=K,rows=R" (R = 1..8) */
    int v = 0, r = 0, used = 0;
    if (sscanf(text, "kt:kw=%d%n", &v, &used) != 1 || (v != 4 && v != 8 && v != 16))
        return -1;
    if (text[used]) {
        int more = 0;
        if (sscanf(text + used, ",rows=%d%n", &r, &more) != 1 || text[used + more] || r < 1 ||
            r > KT_MAX_ROWS)
            return -1;
    }
    *variant = PGD_ATTENTION_KT;
    *kw = v;
    *rows = r;
    return 0;
}

/* The context's attention parameters as text, for `variant` (the Kᵀ kernel: its key width and
 * rows as the context runs them). */
static void attention_params_format(const pgd_ctx *ctx, int variant, char *buf, size_t size)
{
    if (variant == PGD_ATTENTION_KT)
        snprintf(buf, size, "kt:kw=%d,rows=%d", kt_kw(ctx), kt_rows(ctx));
    else
        snprintf(buf, size, "rows");
}

/* Self-attention of B = 1 on a fused [n, 3·h·64] qkv tensor. */
typedef struct {
    int64_t n, h;
    pgd_tensor *qkv, *out;
} attn_work;

static int attn_work_make(pgd_ctx *ctx, int64_t n, int64_t h, attn_work *w, float **host,
                          pgd_error **err)
{
    w->n = n;
    w->h = h;
    int64_t sq[3] = {1, n, 3 * h * 64}, so[3] = {1, n, h * 64};
    size_t count = (size_t)(n * 3 * h * 64);
    float *x = malloc(count * sizeof *x);
    if (!x)
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "tune: attention operands");
    uint64_t st = 0x9e3779b97f4a7c15ull ^ (uint64_t)n;
    for (size_t i = 0; i < count; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(st >> 40) / (double)(1ull << 24)) - 0.5f;
    }
    int rc = pgd_tensor_create_from(ctx, 3, sq, x, &w->qkv, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 3, so, &w->out, err);
    if (host && !rc)
        *host = x;
    else
        free(x);
    return rc;
}

static void attn_work_free(attn_work *w)
{
    pgd_tensor_destroy(w->qkv);
    pgd_tensor_destroy(w->out);
}

/* The candidate's probe output against attention in double: NULL when right, else why. */
static const char *attn_check(pgd_ctx *ctx, attn_work *p, const float *x)
{
    pgd_error *e = NULL;
    if (pgd_attention_qkv(ctx, p->qkv, p->h, p->out, &e)) {
        pgd_error_destroy(e);
        return "failed to run";
    }
    int64_t n = p->n, h = p->h, tok = 3 * h * 64;
    float *got = malloc((size_t)(n * h * 64) * sizeof *got);
    double *s = malloc((size_t)n * sizeof *s);
    const char *why = NULL;
    if (!got || !s || pgd_tensor_download(p->out, got, &e)) {
        pgd_error_destroy(e);
        why = "could not read the output";
    }
    for (int64_t hh = 0; !why && hh < h; hh++)
        for (int64_t i = 0; !why && i < n; i++) {
            double m = -INFINITY, l = 0;
            for (int64_t j = 0; j < n; j++) {
                double d = 0;
                for (int k = 0; k < 64; k++)
                    d += (double)x[i * tok + hh * 64 + k] * x[j * tok + (h + hh) * 64 + k];
                s[j] = d / 8.0;
                m = s[j] > m ? s[j] : m;
            }
            for (int64_t j = 0; j < n; j++)
                l += (s[j] = exp(s[j] - m));
            for (int k = 0; k < 64 && !why; k++) {
                double o = 0;
                for (int64_t j = 0; j < n; j++)
                    o += s[j] * x[j * tok + (2 * h + hh) * 64 + k];
                o /= l;
                if (!(fabs(got[(i * h + hh) * 64 + k] - o) <= 1e-4 + 1e-4 * fabs(o)))
                    why = "wrong result on a 37-token probe";
            }
        }
    free(got);
    free(s);
    return why;
}

/* Median of 3 timed runs of the workload (after one untimed), ms; -1 on failure. */
static double attn_time(pgd_ctx *ctx, attn_work *w, int nw)
{
    double t[3];
    for (int r = -1; r < 3; r++) {
        double t0 = pgd__now_ms();
        for (int i = 0; i < nw; i++) {
            pgd_error *e = NULL;
            if (pgd_attention_qkv(ctx, w[i].qkv, w[i].h, w[i].out, &e) || pgd_ctx_finish(ctx, &e)) {
                pgd_error_destroy(e);
                return -1;
            }
        }
        if (r >= 0)
            t[r] = pgd__now_ms() - t0;
    }
    double a = t[0], b = t[1], c = t[2];
    return a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
}

int pgd__attention_tune(pgd_ctx *ctx, double deadline_ms, char *winner, size_t size,
                        double *best_ms, double *default_ms, pgd_error **err)
{
    /* candidates {variant, key width, rows}: the untuned rule first, then rows and the Kᵀ
     * kernel at each key width with 4, 6 and 8 query rows a work-item */
    pgd__params *P = pgd__params_of(ctx);
    int saved_v = P->attn_variant, saved_kw = P->attn_kw, saved_rows = P->attn_rows;
    P->attn_variant = P->db_attn_variant; /* untuned: the database's choice, else the rule */
    P->attn_kw = P->db_attn_kw;
    P->attn_rows = P->db_attn_rows;
    int def_v = pick_variant(ctx, 64) == V_KT ? PGD_ATTENTION_KT : PGD_ATTENTION_ROWS;
    int def_kw = def_v == PGD_ATTENTION_KT ? kt_kw(ctx) : 0;
    int def_rows = def_v == PGD_ATTENTION_KT ? kt_rows(ctx) : 0;
    enum { NCAND = 11 };
    int cand[NCAND][3] = {{def_v, def_kw, def_rows}, {PGD_ATTENTION_ROWS, 0, 0}};
    const int widths[3] = {16, 8, 4}, rows[3] = {4, 6, 8};
    for (int i = 0; i < 9; i++) {
        cand[2 + i][0] = PGD_ATTENTION_KT;
        cand[2 + i][1] = widths[i / 3];
        cand[2 + i][2] = rows[i % 3];
    }
    /* ViT-B/16's attention and a 785-token one (a sixteenth on software rasterisers) */
    int64_t big = ctx->dev.software_rasteriser ? 49 : 785,
            small = ctx->dev.software_rasteriser ? 13 : 197;
    attn_work probe = {0}, w[2] = {{0}, {0}};
    float *px = NULL;
    int rc = attn_work_make(ctx, 37, 2, &probe, &px, err);
    if (!rc)
        rc = attn_work_make(ctx, small, 12, &w[0], NULL, err);
    if (!rc)
        rc = attn_work_make(ctx, big, 12, &w[1], NULL, err);
    int best = -1;
    double best_t = -1;
    *default_ms = -1;
    for (int c = 0; c < NCAND && !rc; c++) {
        if (c > 0 &&
            (pgd__now_ms() > deadline_ms ||
             (cand[c][0] == cand[0][0] && cand[c][1] == cand[0][1] && cand[c][2] == cand[0][2])))
            continue;
        /* the GPU path (tiled) is not a candidate: only CPU runtimes choose between these */
        if (ctx->dev.type != PGD_DEVICE_CPU)
            break;
        P->attn_variant = cand[c][0];
        P->attn_kw = cand[c][1];
        P->attn_rows = cand[c][2];
        double t = attn_check(ctx, &probe, px) ? -1 : attn_time(ctx, w, 2);
        if (c == 0)
            *default_ms = t;
        if (t >= 0 && (best_t < 0 || t < best_t)) {
            best_t = t;
            best = c;
        }
    }
    attn_work_free(&probe);
    attn_work_free(&w[0]);
    attn_work_free(&w[1]);
    free(px);
    P->attn_variant = saved_v;
    P->attn_kw = saved_kw;
    P->attn_rows = saved_rows;
    if (rc)
        return rc;
    *best_ms = best_t;
    if (best < 0) {
        winner[0] = '\0';
        return PGD_OK; /* nothing to choose (a GPU): the rule stays */
    }
    P->attn_variant = cand[best][0];
    P->attn_kw = cand[best][1];
    P->attn_rows = cand[best][2];
    P->attn_tuned = 1;
    attention_params_format(ctx, cand[best][0], winner, size);
    return PGD_OK;
}

const char *pgd_ctx_get_attention_params(const pgd_ctx *ctx, char *buf, size_t size)
{
    const pgd__params *P = pgd__params_of(ctx);
    if (P->attn_variant && P->attn_tuned) {
        attention_params_format(ctx, P->attn_variant, buf, size);
        return "tuned";
    }
    int v = pick_variant(ctx, 64);
    if (v == V_KT)
        attention_params_format(ctx, PGD_ATTENTION_KT, buf, size);
    else
        snprintf(buf, size, "%s", v == V_ROWS ? "rows" : v == V_TILED ? "tiled" : "generic");
    return ctx->opt.attention != PGD_ATTENTION_AUTO ? "options" : "defaults";
}
