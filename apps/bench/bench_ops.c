/* bench_ops.c — `pagoda bench` items for the general operators of #39 whose cost is worth
 * timing: the attention-head permute as a copy (transpose), a batched matmul as one strided
 * GEMM, softmax over the channel axis of a segmentation map (moved last and back), and a max
 * pool with indices. Each reports its bytes moved (and FLOPs for the matmul). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_items.h"

/* name:A,B,C,D with each 1..65536 into v. */
static int parse4(const char *spec, int64_t v[4])
{
    const char *colon = strchr(spec, ':');
    int n = 0;
    if (!colon || pgd_parse_int64_list(colon + 1, ',', 1, 65536, v, 4, 4, &n))
        return -1;
    return 0;
}

static int validate4(const char *spec)
{
    int64_t v[4];
    return parse4(spec, v);
}

typedef struct op_state {
    pgd_ctx *ctx;
    int kind; /* 0 transpose, 1 matmul, 2 softmax over axis 1, 3 max pool */
    pgd_tensor *x, *w, *y, *idx;
} op_state;

static int op_once(void *p, pgd_error **err)
{
    op_state *s = p;
    static const int perm[4] = {0, 2, 1, 3};
    static const pgd_pool_desc pool = {PGD_POOL_MAX, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0};
    switch (s->kind) {
    case 0: return pgd_transpose(s->ctx, s->x, perm, s->y, err);
    case 1: return pgd_matmul(s->ctx, s->x, s->w, s->y, err);
    case 2: return pgd_softmax_axis(s->ctx, s->x, 1, 1.0f, 0, s->y, err);
    default: return pgd_pool2d(s->ctx, s->x, &pool, s->y, s->idx, err);
    }
}

/* A device tensor of `shape` filled with the seeded values. */
static int filled(pgd_ctx *ctx, int nd, const int64_t *shape, pgd_tensor **out, pgd_error **err)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n = mul_sat(n, shape[d]);
    float *h = item_alloc(n, err);
    if (!h)
        return PGD_ERR_OUT_OF_HOST_MEMORY;
    fill_rand(h, (size_t)n);
    int rc = pgd_tensor_create_from(ctx, nd, shape, h, out, err);
    free(h);
    return rc;
}

static int run_op(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res, int *nres,
                  int kind, pgd_error **err)
{
    int64_t v[4] = {1, 1, 1, 1};
    parse4(spec, v);
    op_state s = {ctx, kind, NULL, NULL, NULL, NULL};
    int64_t xs[4] = {v[0], v[1], v[2], v[3]}, ys[4], ws[4], oh = 0, ow = 0;
    int64_t n = mul_sat(mul_sat(v[0], v[1]), mul_sat(v[2], v[3])), ny = n, nw = 0;
    static const pgd_pool_desc pool = {PGD_POOL_MAX, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0};
    if (kind == 0) { /* [B, N, H, D] -> [B, H, N, D] */
        ys[0] = v[0], ys[1] = v[2], ys[2] = v[1], ys[3] = v[3];
    } else if (kind == 1) { /* [B, H, N, D] @ [B, H, D, N] */
        ws[0] = v[0], ws[1] = v[1], ws[2] = v[3], ws[3] = v[2];
        ys[0] = v[0], ys[1] = v[1], ys[2] = v[2], ys[3] = v[2];
        nw = n;
        ny = mul_sat(mul_sat(v[0], v[1]), mul_sat(v[2], v[2]));
    } else if (kind == 2) {
        for (int d = 0; d < 4; d++)
            ys[d] = xs[d];
    } else {
        int rc = pgd_pool2d_output_size(&pool, v[1], v[2], &oh, &ow, err);
        if (rc)
            return rc;
        ys[0] = v[0], ys[1] = oh, ys[2] = ow, ys[3] = v[3];
        ny = mul_sat(mul_sat(v[0], oh), mul_sat(ow, v[3]));
    }
    int64_t big = n > ny ? n : ny;
    int rc =
        check_fits(ctx, big, add_sat(add_sat(n, nw), mul_sat(ny, kind == 3 ? 2 : 1)), big, err);
    if (!rc)
        rc = filled(ctx, 4, xs, &s.x, err);
    if (!rc && kind == 1)
        rc = filled(ctx, 4, ws, &s.w, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 4, ys, &s.y, err);
    if (!rc && kind == 3)
        rc = pgd_tensor_create(ctx, 4, ys, &s.idx, err);
    bench_result *b = &res[0];
    if (!rc)
        rc = time_runs(ctx, (timed_fn){op_once, &s}, o, b, err);
    if (!rc) {
        static const char *const names[] = {"transpose", "matmul", "softmax-axis", "maxpool-idx"};
        snprintf(b->name, sizeof b->name, "%s:%lld,%lld,%lld,%lld", names[kind], (long long)v[0],
                 (long long)v[1], (long long)v[2], (long long)v[3]);
        snprintf(b->params, sizeof b->params, "{\"shape\":[%lld,%lld,%lld,%lld]}", (long long)v[0],
                 (long long)v[1], (long long)v[2], (long long)v[3]);
        b->flops = kind == 1 ? 2.0 * (double)ny * (double)v[3] : 0.0;
        b->bytes = 4.0 * (double)(n + nw + ny * (kind == 3 ? 2 : 1));
        *nres = 1;
    }
    pgd_tensor_destroy(s.x);
    pgd_tensor_destroy(s.w);
    pgd_tensor_destroy(s.y);
    pgd_tensor_destroy(s.idx);
    return rc;
}

#define OP_RUNNER(fn, kind)                                                                        \
    static int fn(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,          \
                  int *nres, int cap, pgd_error **err)                                             \
    {                                                                                              \
        (void)cap;                                                                                 \
        return run_op(ctx, spec, o, res, nres, kind, err);                                         \
    }
OP_RUNNER(run_transpose, 0)
OP_RUNNER(run_matmul, 1)
OP_RUNNER(run_softmax_axis, 2)
OP_RUNNER(run_maxpool_idx, 3)

const bench_item bench_item_transpose = {
    "transpose", "transpose:B,N,H,D",
    "the attention-head permute [B, N, H, D] -> [B, H, N, D] as a copy (pgd_transpose)", validate4,
    run_transpose};
const bench_item bench_item_matmul = {
    "matmul", "matmul:B,H,N,D",
    "batched [B, H, N, D] @ [B, H, D, N] (pgd_matmul: one strided GEMM)", validate4, run_matmul};
const bench_item bench_item_softmax_axis = {
    "softmax-axis", "softmax-axis:N,C,H,W",
    "softmax over the channels of [N, C, H, W] (axis 1: moved last and back)", validate4,
    run_softmax_axis};
const bench_item bench_item_maxpool_idx = {
    "maxpool-idx", "maxpool-idx:N,H,W,C",
    "3x3/2 max pool, pads 1, ceil mode, with indices, NHWC (pgd_pool2d)", validate4,
    run_maxpool_idx};
