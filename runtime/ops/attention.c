/* attention.c — launchers for cl/attention.cl: fused multi-head attention and the optional
 * probability pass.
 *
 * Variant choice: CPU devices (PoCL; llvmpipe reports CPU too) with head_dim a multiple of 4
 * take attn_fwd_rows (a work-item owns ROWS query rows, vector math, no barriers); other
 * devices take attn_fwd_tiled (K/V tiles of BK keys in local memory, BK the largest power of
 * two ≤ 64 whose tiles fit the device's local memory, halved while the built kernel needs
 * more); anything else takes attn_fwd_generic (head_dim at run time). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

enum { V_ROWS, V_TILED, V_GENERIC };

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

static int fma_opt(const pgd_ctx *ctx)
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
    if (forced == PGD_ATTENTION_TILED)
        return V_TILED;
    if (forced == PGD_ATTENTION_GENERIC)
        return V_GENERIC;
    if (ctx->dev.type == PGD_DEVICE_CPU && D % 4 == 0)
        return V_ROWS;
    if (ctx->dev.type != PGD_DEVICE_CPU)
        return V_TILED;
    return V_GENERIC;
}

/* An int4 stride descriptor; every value must fit in 32 bits. */
static int descr(const pgd_view *v, cl_int4 *out, const char *what, pgd_error **err)
{
    int64_t vals[4] = {v->offset, v->batch_stride, v->head_stride, v->token_stride};
    for (int i = 0; i < 4; i++) {
        if (vals[i] < 0 || vals[i] > INT32_MAX)
            return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                  "attention: %s offset/strides (%lld, %lld, %lld, %lld) must be "
                                  "in [0, 2^31)",
                                  what, (long long)vals[0], (long long)vals[1],
                                  (long long)vals[2], (long long)vals[3]);
        out->s[i] = (cl_int)vals[i];
    }
    return PGD_OK;
}

/* The last element a view touches must lie inside its tensor. */
static int check_view(const pgd_view *v, int64_t B, int64_t H, int64_t N, int64_t D,
                      const char *what, pgd_error **err)
{
    if (!v->t)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "attention: %s has no tensor", what);
    int64_t last = v->offset + (B - 1) * v->batch_stride + (H - 1) * v->head_stride +
                   (N - 1) * v->token_stride + D - 1;
    if (B > 0 && H > 0 && N > 0 && D > 0 && last >= pgd_tensor_numel(v->t)) {
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

static int forward_kernel(pgd_ctx *ctx, int var, int64_t D, cl_kernel *k, size_t *lx, int *rows,
                          pgd_error **err)
{
    char opts[256];
    const char *fma = fma_opt(ctx) ? " -DUSE_FMA" : "";
    int rc;
    *rows = 1;
    if (var == V_ROWS) {
        *rows = 4;
        const char *vw16 = pgd_ctx_device(ctx)->pref_vector_float >= 16 ? " -DVW16" : "";
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

int pgd_attention(pgd_ctx *ctx, const pgd_attention_args *a, pgd_error **err)
{
    int64_t B = a->batch, H = a->heads, Nq = a->nq, Nk = a->nk, D = a->head_dim;
    if (B < 0 || H < 0 || Nq < 0 || Nk < 0 || D < 1 || B > INT32_MAX || H > INT32_MAX ||
        Nq > INT32_MAX || Nk > INT32_MAX || D > 4096)
        return pgd__error_set(err, PGD_ERR_SHAPE,
                              "attention: bad sizes batch %lld heads %lld nq %lld nk %lld "
                              "head_dim %lld (head_dim 1..4096)",
                              (long long)B, (long long)H, (long long)Nq, (long long)Nk,
                              (long long)D);
    if (B == 0 || H == 0 || Nq == 0)
        return PGD_OK;
    int rc;
    if ((rc = check_view(&a->q, B, H, Nq, D, "Q", err)) ||
        (Nk && (rc = check_view(&a->k, B, H, Nk, D, "K", err))) ||
        (Nk && (rc = check_view(&a->v, B, H, Nk, D, "V", err))) ||
        (rc = check_view(&a->o, B, H, Nq, D, "O", err)) ||
        (a->mask.t && Nk && (rc = check_view(&a->mask, B, H, Nq, Nk, "mask", err))))
        return rc;
    if (a->o.t == a->q.t || a->o.t == a->k.t || a->o.t == a->v.t)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "attention: the output must not share a tensor with Q, K or V");
    cl_int4 qs, ks, vs, os, ms = {{0, 0, 0, 0}};
    if ((rc = descr(&a->q, &qs, "Q", err)) || (rc = descr(&a->k, &ks, "K", err)) ||
        (rc = descr(&a->v, &vs, "V", err)) || (rc = descr(&a->o, &os, "O", err)) ||
        (a->mask.t && (rc = descr(&a->mask, &ms, "mask", err))))
        return rc;
    int64_t q0 = a->probs_q0, q1 = a->probs_q1;
    int64_t hsel = a->probs_head < 0 ? H : 1;
    if (a->probs) {
        if (q0 < 0 || q1 > Nq || q0 >= q1 || a->probs_head >= H ||
            pgd_tensor_numel(a->probs) < B * hsel * (q1 - q0) * Nk) {
            char s[96];
            return pgd__error_set(err, PGD_ERR_SHAPE,
                                  "attention: probabilities of rows [%lld, %lld) of head %d need "
                                  "%lld floats; tensor %s (nq %lld, heads %lld)",
                                  (long long)q0, (long long)q1, a->probs_head,
                                  (long long)(B * hsel * (q1 > q0 ? q1 - q0 : 0) * Nk),
                                  pgd_tensor_shape_str(a->probs, s, sizeof s), (long long)Nq,
                                  (long long)H);
        }
    }
    int var = pick_variant(ctx, D);
    cl_kernel k;
    size_t lx;
    int rows;
    rc = forward_kernel(ctx, var, D, &k, &lx, &rows, err);
    if (rc)
        return rc;
    pgd_tensor *stats = NULL;
    if (a->probs) {
        int64_t shape[1] = {B * H * Nq * 2};
        if ((rc = pgd_tensor_create(ctx, 1, shape, &stats, err)))
            return rc;
    }
    cl_mem qb = a->q.t->buf, kb = Nk ? a->k.t->buf : qb, vb = Nk ? a->v.t->buf : qb,
           ob = a->o.t->buf;
    cl_mem mb = a->mask.t ? a->mask.t->buf : qb, sb = stats ? stats->buf : qb;
    cl_int ws = stats != NULL, iH = (cl_int)H, iNq = (cl_int)Nq, iNk = (cl_int)Nk, iD = (cl_int)D;
    cl_int mode = (a->causal ? 1 : 0) | (a->mask.t ? 2 : 0);
    float scale = a->scale != 0.0f ? a->scale : (float)(1.0 / sqrt((double)D));
    const char *names[] = {"attn_fwd_rows", "attn_fwd_tiled", "attn_fwd_generic"};
    pgd__args args;
    pgd__args_begin(&args, ctx, k, names[var]);
    pgd__arg_mem(&args, qb);
    pgd__arg(&args, sizeof qs, &qs);
    pgd__arg_mem(&args, kb);
    pgd__arg(&args, sizeof ks, &ks);
    pgd__arg_mem(&args, vb);
    pgd__arg(&args, sizeof vs, &vs);
    pgd__arg_mem(&args, ob);
    pgd__arg(&args, sizeof os, &os);
    pgd__arg_mem(&args, mb);
    pgd__arg(&args, sizeof ms, &ms);
    pgd__arg_mem(&args, sb);
    pgd__arg_int(&args, ws);
    pgd__arg_int(&args, iH);
    pgd__arg_int(&args, iNq);
    pgd__arg_int(&args, iNk);
    pgd__arg_float(&args, scale);
    pgd__arg_int(&args, mode);
    if (var == V_GENERIC)
        pgd__arg_int(&args, iD);
    rc = pgd__args_end(&args, err);
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
        rc = pgd__enqueue_at(ctx, k, names[var], 3, x0 ? offset : NULL, global, local, err);
    }
    if (!rc && a->probs) {
        cl_kernel kp;
        rc = pgd__kernel_get(ctx, "attention", NULL, "attn_probs", &kp, err);
        if (!rc) {
            size_t lp = pgd__pow2_floor(pgd__kernel_wg(ctx, kp) < 64 ? pgd__kernel_wg(ctx, kp) : 64);
            pgd__args_begin(&args, ctx, kp, "attn_probs");
            pgd__arg_mem(&args, qb);
            pgd__arg(&args, sizeof qs, &qs);
            pgd__arg_mem(&args, kb);
            pgd__arg(&args, sizeof ks, &ks);
            pgd__arg_mem(&args, mb);
            pgd__arg(&args, sizeof ms, &ms);
            pgd__arg_mem(&args, sb);
            pgd__arg_mem(&args, a->probs->buf);
            pgd__arg_int(&args, iH);
            pgd__arg_int(&args, iNq);
            pgd__arg_int(&args, iNk);
            pgd__arg_float(&args, scale);
            pgd__arg_int(&args, mode);
            pgd__arg_int(&args, iD);
            pgd__arg_int(&args, a->probs_head);
            pgd__arg_int(&args, (cl_int)q0);
            pgd__arg_int(&args, (cl_int)q1);
            rc = pgd__args_end(&args, err);
            size_t gp[3] = {((size_t)Nk + lp - 1) / lp * lp, (size_t)(q1 - q0), (size_t)(B * hsel)};
            size_t lpp[3] = {lp, 1, 1};
            if (!rc)
                rc = pgd__enqueue(ctx, kp, "attn_probs", 3, gp, lpp, err);
        }
    }
    pgd_tensor_destroy(stats);
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
