/* attention_ext.c — pgd_attention_ex: attention with what pgd_attention_ext adds (grouped
 * key/value heads, a value head size of its own, soft-capping, boolean masks, sliding windows,
 * per-sequence key counts, a KV cache, the scores as an output).
 *
 * Grouped heads, a larger value head and a cache alone run the tuned fused kernels (the cache
 * after its append, a larger value head in column chunks). Anything else runs attn_ext_fwd of
 * cl/attention_ext.cl: one launch, one work-item a query row, online softmax over key tiles
 * (no nq × nk scores in memory), the visible key range of each row computed from the causal
 * mask, the window and the sequence's key count so that hidden keys cost nothing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The rows of one launch: 4·nk·(dk + dv) FLOPs a row and head at most 2^28 a chunk on slow
 * devices (see attention.c). */
#define EXT_LAUNCH_FLOPS (UINT64_C(1) << 28)

enum { X_CAUSAL = 1, X_MASK = 2, X_TOPLEFT = 4, X_BOOL = 8, X_LENS = 16, X_SOFTCAP = 32 };

/* Whether a field the tuned kernels do not have is set. */
static int needs_ext_kernel(const pgd_attention_ext *e, int64_t dk, int64_t dv)
{
    return e->softcap > 0.0f || e->mask_bool || e->window || e->kv_lens || e->scores ||
           e->half_io || dv < dk;
}

static int bad(pgd_error **err, const char *what)
{
    return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "attention: %s", what);
}

/* The fields' values, each against its rule. */
static int check_ext(const pgd_attention_args *a, const pgd_attention_ext *e, int64_t kv,
                     int64_t dv, pgd_error **err)
{
    char msg[200];
    if (a->batch < 0 || a->heads < 0 || a->nq < 0 || a->nk < 0 || a->head_dim < 1 ||
        a->batch > INT32_MAX || a->heads > INT32_MAX || a->nq > INT32_MAX || a->nk > INT32_MAX ||
        a->head_dim > 4096 || a->causal < 0 || a->causal > PGD_CAUSAL_AFTER_PAST) {
        snprintf(msg, sizeof msg,
                 "bad sizes batch %lld heads %lld nq %lld nk %lld head_dim %lld causal %d",
                 (long long)a->batch, (long long)a->heads, (long long)a->nq, (long long)a->nk,
                 (long long)a->head_dim, a->causal);
        return pgd__error_set(err, PGD_ERR_SHAPE, "attention: %s", msg);
    }
    if (kv < 1 || a->heads < 1 || a->heads % kv) {
        snprintf(msg, sizeof msg, "%lld key/value heads do not divide the %lld query heads",
                 (long long)kv, (long long)a->heads);
        return bad(err, msg);
    }
    if (dv < 1 || dv > 4096) {
        snprintf(msg, sizeof msg, "a value head size of %lld (1..4096)", (long long)dv);
        return pgd__error_set(err, PGD_ERR_SHAPE, "attention: %s", msg);
    }
    if (!(e->softcap >= 0.0f) || isinf(e->softcap))
        return bad(err, "softcap must be 0 (none) or a positive finite number");
    if (e->window && (e->window_left < -1 || e->window_right < -1 || e->window_left > INT32_MAX ||
                      e->window_right > INT32_MAX)) {
        snprintf(msg, sizeof msg, "window of %lld left and %lld right: each -1 (open) or >= 0",
                 (long long)e->window_left, (long long)e->window_right);
        return bad(err, msg);
    }
    if (e->window_align < 0 || e->window_align > PGD_CAUSAL_AFTER_PAST ||
        (a->causal && e->window_align && e->window_align != a->causal))
        return bad(err, "window_align must be 0 or a PGD_CAUSAL_* alignment, and agree with "
                        "args->causal when both are set");
    if (e->scores && (e->scores_kind < PGD_SCORES_RAW || e->scores_kind > PGD_SCORES_PROBS))
        return bad(err, "scores_kind must be PGD_SCORES_RAW, PGD_SCORES_MASKED or "
                        "PGD_SCORES_PROBS");
    if (e->k_cache.t && (!e->v_cache.t || e->past < 0 || e->past > INT32_MAX - a->nk))
        return bad(err, "a KV cache needs k_cache and v_cache and 0 <= past < 2^31 - nk");
    if (!e->k_cache.t && e->v_cache.t)
        return bad(err, "v_cache without k_cache");
    return PGD_OK;
}

/* Copies the nk new tokens of `src` (kv heads of d) into `dst` at token `past`. */
static int append(pgd_ctx *ctx, const pgd_attention_args *a, const pgd_view *src,
                  const pgd_view *dst, int64_t kv, int64_t d, int64_t past, int half,
                  const char *what, pgd_error **err)
{
    cl_int4 ss, ds;
    int rc;
    char name[32];
    snprintf(name, sizeof name, "%s cache", what);
    if ((rc = pgd__attn_check_view(src, a->batch, kv, a->nk, d, half, what, err)) ||
        (rc = pgd__attn_check_view(dst, a->batch, kv, past + a->nk, d, half, name, err)) ||
        (rc = pgd__attn_descr(src, &ss, what, err)) || (rc = pgd__attn_descr(dst, &ds, name, err)))
        return rc;
    if (a->nk == 0 || a->batch == 0)
        return PGD_OK;
    cl_kernel k;
    pgd__args args;
    if ((rc = pgd__args_kernel(&args, ctx, "attention_ext", half ? "-DHALF_IO" : NULL,
                               "attn_ext_append", &k, err)))
        return rc;
    pgd__arg_mem(&args, src->t->buf);
    pgd__arg(&args, sizeof ss, &ss);
    pgd__arg_mem(&args, dst->t->buf);
    pgd__arg(&args, sizeof ds, &ds);
    pgd__arg_int(&args, (cl_int)kv);
    pgd__arg_int(&args, (cl_int)a->nk);
    pgd__arg_int(&args, (cl_int)d);
    pgd__arg_int(&args, (cl_int)past);
    if ((rc = pgd__args_end(&args, err)))
        return rc;
    size_t global[3] = {(size_t)d, (size_t)a->nk, (size_t)(a->batch * kv)};
    return pgd__enqueue(ctx, k, "attn_ext_append", 3, global, NULL, err);
}

/* What both extended kernels take: buffers with their descriptors, sizes and flags. */
typedef struct {
    cl_mem q, k, v, o, mask, lens, acc; /* acc: the output's float accumulator (half_io) */
    int half;
    cl_int4 qs, ks, vs, os, ms;
    cl_int H, group, Nq, Nk, D, DV, flags, base, wl, wr;
    float scale, softcap;
} ext_bound;

static int ext_views(const pgd_attention_args *a, const pgd_attention_ext *e, int64_t kv,
                     int64_t dv, ext_bound *b, pgd_error **err)
{
    int64_t B = a->batch, H = a->heads, nq = a->nq, nk = a->nk, dk = a->head_dim;
    int rc, h = e->half_io != 0;
    if ((rc = pgd__attn_check_view(&a->q, B, H, nq, dk, h, "Q", err)) ||
        (nk && (rc = pgd__attn_check_view(&a->k, B, kv, nk, dk, h, "K", err))) ||
        (nk && (rc = pgd__attn_check_view(&a->v, B, kv, nk, dv, h, "V", err))) ||
        (rc = pgd__attn_check_view(&a->o, B, H, nq, dv, h, "O", err)) ||
        (a->mask.t && nk && (rc = pgd__attn_check_view(&a->mask, B, H, nq, nk, 0, "mask", err))))
        return rc;
    if (a->o.t == a->q.t || a->o.t == a->k.t || a->o.t == a->v.t || a->o.t == e->scores)
        return bad(err, "the output must not share a tensor with Q, K, V or the scores");
    if (e->scores && pgd_tensor_get_numel(e->scores) < B * H * nq * nk) {
        char s[96];
        return pgd__error_set(err, PGD_ERR_SHAPE,
                              "attention: scores of [%lld, %lld, %lld, %lld] need %lld floats; "
                              "tensor %s",
                              (long long)B, (long long)H, (long long)nq, (long long)nk,
                              (long long)(B * H * nq * nk),
                              pgd_tensor_shape_str(e->scores, s, sizeof s));
    }
    b->ms = (cl_int4){{0, 0, 0, 0}};
    if ((rc = pgd__attn_descr(&a->q, &b->qs, "Q", err)) ||
        (rc = pgd__attn_descr(&a->k, &b->ks, "K", err)) ||
        (rc = pgd__attn_descr(&a->v, &b->vs, "V", err)) ||
        (rc = pgd__attn_descr(&a->o, &b->os, "O", err)) ||
        (a->mask.t && (rc = pgd__attn_descr(&a->mask, &b->ms, "mask", err))))
        return rc;
    b->q = a->q.t->buf;
    b->k = nk ? a->k.t->buf : b->q;
    b->v = nk ? a->v.t->buf : b->q;
    b->o = a->o.t->buf;
    b->mask = a->mask.t ? a->mask.t->buf : b->q;
    b->lens = b->acc = b->q;
    b->half = h;
    return PGD_OK;
}

static void ext_params(const pgd_attention_args *a, const pgd_attention_ext *e, int64_t kv,
                       int64_t dv, int64_t base, ext_bound *b)
{
    int align = a->causal ? a->causal : e->window_align;
    b->base = (cl_int)base;
    b->H = (cl_int)a->heads;
    b->group = (cl_int)(a->heads / kv);
    b->Nq = (cl_int)a->nq;
    b->Nk = (cl_int)a->nk;
    b->D = (cl_int)a->head_dim;
    b->DV = (cl_int)dv;
    b->flags = (a->causal ? X_CAUSAL : 0) | (a->mask.t ? X_MASK : 0) |
               (align == PGD_CAUSAL_TOP_LEFT ? X_TOPLEFT : 0) |
               (a->mask.t && e->mask_bool ? X_BOOL : 0) | (e->kv_lens ? X_LENS : 0) |
               (e->softcap > 0.0f ? X_SOFTCAP : 0);
    b->wl = e->window ? (cl_int)e->window_left : -1;
    b->wr = e->window ? (cl_int)e->window_right : -1;
    b->scale = a->scale != 0.0f ? a->scale : (float)(1.0 / sqrt((double)a->head_dim));
    b->softcap = e->softcap;
}

/* The per-sequence key counts as a device tensor of floats (exact: each at most nk < 2^24 is
 * checked here). */
static int upload_lens(pgd_ctx *ctx, const pgd_attention_args *a, const int64_t *lens,
                       pgd_tensor **t, pgd_error **err)
{
    int64_t n = a->batch, shape[1] = {a->batch};
    float *f = malloc((size_t)n * sizeof *f);
    if (!f)
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "attention: kv_lens");
    for (int64_t b = 0; b < n; b++) {
        if (lens[b] < 0 || lens[b] > a->nk || lens[b] > (1 << 24)) {
            free(f);
            return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                  "attention: kv_lens[%lld] is %lld: it must lie in [0, nk = "
                                  "%lld]",
                                  (long long)b, (long long)lens[b], (long long)a->nk);
        }
        f[b] = (float)lens[b];
    }
    int rc = pgd_tensor_create_from(ctx, 1, shape, f, t, err);
    free(f);
    return rc;
}

/* The arguments both kernels take after their buffers, in this order. */
static void arg_sizes(pgd__args *args, const ext_bound *b)
{
    const cl_int ints[6] = {b->H, b->group, b->Nq, b->Nk, b->D, b->DV};
    for (int i = 0; i < 6; i++)
        pgd__arg_int(args, ints[i]);
    pgd__arg_float(args, b->scale);
    pgd__arg_float(args, b->softcap);
    const cl_int tail[4] = {b->flags, b->base, b->wl, b->wr};
    for (int i = 0; i < 4; i++)
        pgd__arg_int(args, tail[i]);
}

static int launch_fwd(pgd_ctx *ctx, const pgd_attention_args *a, const ext_bound *b, cl_mem stats,
                      pgd_error **err)
{
    char opts[64];
    snprintf(opts, sizeof opts, "-DTK=32%s%s", pgd__attn_fma(ctx) ? " -DUSE_FMA" : "",
             b->half ? " -DHALF_IO" : "");
    cl_kernel k;
    pgd__args args;
    int rc = pgd__args_kernel(&args, ctx, "attention_ext", opts, "attn_ext_fwd", &k, err);
    if (rc)
        return rc;
    const cl_mem bufs[5] = {b->q, b->k, b->v, b->o, b->mask};
    const cl_int4 *ds[5] = {&b->qs, &b->ks, &b->vs, &b->os, &b->ms};
    for (int i = 0; i < 5; i++) {
        pgd__arg_mem(&args, bufs[i]);
        pgd__arg(&args, sizeof(cl_int4), ds[i]);
        if (i == 3)
            pgd__arg_mem(&args, b->acc);
    }
    pgd__arg_mem(&args, b->lens);
    pgd__arg_mem(&args, stats ? stats : b->q);
    pgd__arg_int(&args, stats != NULL);
    arg_sizes(&args, b);
    if ((rc = pgd__args_end(&args, err)))
        return rc;
    size_t wg = pgd__kernel_wg(ctx, k), lx = pgd__pow2_floor(wg < 64 ? wg : 64);
    uint64_t per_row = 4u * (uint64_t)a->batch * (uint64_t)a->heads *
                       (uint64_t)(a->nk > 0 ? a->nk : 1) * (uint64_t)(b->D + b->DV);
    size_t gx = ((size_t)a->nq + lx - 1) / lx * lx;
    size_t chunk = (size_t)pgd__launch_rows(ctx, a->nq, per_row, EXT_LAUNCH_FLOPS, (int64_t)lx);
    chunk = (chunk + lx - 1) / lx * lx;
    for (size_t x0 = 0; x0 < gx && !rc; x0 += chunk) {
        size_t offset[3] = {x0, 0, 0};
        size_t global[3] = {gx - x0 < chunk ? gx - x0 : chunk, (size_t)a->heads, (size_t)a->batch};
        size_t local[3] = {lx, 1, 1};
        rc = pgd__enqueue_at(ctx, k, "attn_ext_fwd", 3, x0 ? offset : NULL, global, local, err);
    }
    return rc;
}

static int launch_scores(pgd_ctx *ctx, const pgd_attention_args *a, const pgd_attention_ext *e,
                         const ext_bound *b, cl_mem stats, pgd_error **err)
{
    cl_kernel k;
    pgd__args args;
    int rc = pgd__args_kernel(&args, ctx, "attention_ext", b->half ? "-DHALF_IO" : NULL,
                              "attn_ext_scores", &k, err);
    if (rc)
        return rc;
    pgd__arg_mem(&args, b->q);
    pgd__arg(&args, sizeof b->qs, &b->qs);
    pgd__arg_mem(&args, b->k);
    pgd__arg(&args, sizeof b->ks, &b->ks);
    pgd__arg_mem(&args, b->mask);
    pgd__arg(&args, sizeof b->ms, &b->ms);
    pgd__arg_mem(&args, b->lens);
    pgd__arg_mem(&args, stats ? stats : b->q);
    pgd__arg_mem(&args, e->scores->buf);
    arg_sizes(&args, b);
    pgd__arg_int(&args, e->scores_kind);
    if ((rc = pgd__args_end(&args, err)))
        return rc;
    size_t wg = pgd__kernel_wg(ctx, k), lx = pgd__pow2_floor(wg < 64 ? wg : 64);
    size_t global[3] = {((size_t)a->nk + lx - 1) / lx * lx, (size_t)a->nq,
                        (size_t)(a->batch * a->heads)};
    size_t local[3] = {lx, 1, 1};
    return pgd__enqueue(ctx, k, "attn_ext_scores", 3, global, local, err);
}

/* One launch of attn_ext_fwd (and attn_ext_scores when scores are asked for). */
static int ext_forward(pgd_ctx *ctx, const pgd_attention_args *a, const pgd_attention_ext *e,
                       int64_t kv, int64_t dv, int64_t base, pgd_error **err)
{
    if (a->probs)
        return pgd__error_set(err, PGD_ERR_UNSUPPORTED,
                              "attention: args->probs with soft-capping, boolean masks, windows, "
                              "key counts, scores or a smaller value head: ask for "
                              "ext->scores (PGD_SCORES_PROBS)");
    ext_bound b;
    int rc = ext_views(a, e, kv, dv, &b, err);
    if (rc || a->batch == 0 || a->nq == 0)
        return rc;
    ext_params(a, e, kv, dv, base, &b);
    pgd_tensor *lens = NULL, *stats = NULL, *acc = NULL;
    if (e->kv_lens && !(rc = upload_lens(ctx, a, e->kv_lens, &lens, err)))
        b.lens = lens->buf;
    if (!rc && b.half) {
        int64_t shape[1] = {a->batch * a->heads * a->nq * dv};
        if (!(rc = pgd_tensor_create(ctx, 1, shape, &acc, err)))
            b.acc = acc->buf;
    }
    if (!rc && e->scores && e->scores_kind == PGD_SCORES_PROBS) {
        int64_t shape[1] = {a->batch * a->heads * a->nq * 2};
        rc = pgd_tensor_create(ctx, 1, shape, &stats, err);
    }
    if (!rc)
        rc = launch_fwd(ctx, a, &b, stats ? stats->buf : NULL, err);
    if (!rc && e->scores && a->nk)
        rc = launch_scores(ctx, a, e, &b, stats ? stats->buf : NULL, err);
    pgd_tensor_destroy(lens);
    pgd_tensor_destroy(stats);
    pgd_tensor_destroy(acc);
    return rc;
}

/* A value head size dv > dk on the tuned kernels: the output's columns in chunks of dk, each
 * one launch whose V and O views start at the chunk (the last chunk ends at dv and may overlap
 * the one before it: the same probabilities give the same values). Q·Kᵀ and the softmax are
 * recomputed per chunk, ceil(dv / dk) launches in all. */
static int chunked_value_head(pgd_ctx *ctx, const pgd_attention_args *a, int64_t kv, int64_t dv,
                              pgd_error **err)
{
    int64_t dk = a->head_dim;
    if (a->probs || a->mode != PGD_ATTENTION_SOFT)
        return pgd__error_set(err, PGD_ERR_UNSUPPORTED,
                              "attention: probabilities or hard attention with a value head "
                              "size (%lld) other than the key's (%lld)",
                              (long long)dv, (long long)dk);
    int rc = PGD_OK;
    for (int64_t c0 = 0; c0 < dv && !rc; c0 += dk) {
        pgd_attention_args s = *a;
        int64_t at = c0 + dk <= dv ? c0 : dv - dk;
        s.v.offset += at;
        s.o.offset += at;
        rc = pgd_attention_gqa(ctx, &s, kv, err);
    }
    return rc;
}

int pgd_attention_ex(pgd_ctx *ctx, const pgd_attention_args *a, const pgd_attention_ext *ext,
                     pgd_error **err)
{
    if (!a)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "attention: args is NULL");
    pgd_attention_ext e;
    memset(&e, 0, sizeof e);
    if (ext) {
        if (ext->size < sizeof(size_t) || ext->size > sizeof e)
            return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                  "attention: ext->size is %zu (set it to "
                                  "sizeof(pgd_attention_ext), %zu here)",
                                  ext->size, sizeof e);
        memcpy(&e, ext, ext->size); /* fields past an older caller's size stay unset */
    }
    int64_t kv = e.kv_heads ? e.kv_heads : a->heads, dk = a->head_dim;
    int64_t dv = e.v_head_dim ? e.v_head_dim : dk;
    int rc = check_ext(a, &e, kv, dv, err);
    if (rc)
        return rc;
    /* PGD_CAUSAL_AFTER_PAST as an alignment the kernels know (top-left at offset `base`) */
    pgd_attention_args s = *a;
    int64_t base = 0;
    int *align = a->causal ? &s.causal : &e.window_align;
    if (*align == PGD_CAUSAL_AFTER_PAST) {
        int bottom_right = e.past && a->nq == a->nk && !e.kv_lens;
        *align = bottom_right ? PGD_CAUSAL_BOTTOM_RIGHT : PGD_CAUSAL_TOP_LEFT;
        base = bottom_right ? 0 : e.past;
    }
    int ext_kernel = needs_ext_kernel(&e, dk, dv) || base;
    if ((ext_kernel || e.k_cache.t) && a->mode != PGD_ATTENTION_SOFT)
        return pgd__error_set(err, PGD_ERR_UNSUPPORTED,
                              "attention: hard attention (top-k, sampled) with the fields of "
                              "pgd_attention_ext other than kv_heads and v_head_dim");
    if (e.k_cache.t) {
        if (a->o.t == e.k_cache.t || a->o.t == e.v_cache.t)
            return bad(err, "the output must not share a tensor with the KV cache");
        if ((rc = append(ctx, a, &a->k, &e.k_cache, kv, dk, e.past, e.half_io, "K", err)) ||
            (rc = append(ctx, a, &a->v, &e.v_cache, kv, dv, e.past, e.half_io, "V", err)))
            return rc;
        s.k = e.k_cache;
        s.v = e.v_cache;
        s.nk = e.past + a->nk;
    }
    if (ext_kernel)
        return ext_forward(ctx, &s, &e, kv, dv, base, err);
    if (dv == dk)
        return pgd_attention_gqa(ctx, &s, kv, err);
    return chunked_value_head(ctx, &s, kv, dv, err);
}
