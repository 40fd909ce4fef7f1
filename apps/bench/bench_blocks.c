/* bench_blocks.c — the benchmark items that time one model block: a non-local block, the ViT
 * patch embedding and a GAT layer (bench_items.c has the operator items and the helpers). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "bench_items.h"
#include "resnet.h"

/* ---- nonlocal[-unfused]:H,W,C — one embedded-Gaussian block on an H x W x C map, fused vs the
 * materialised softmax ---------------------------------------------------------------------- */

static int parse_nl(const char *spec, int *unfused, long v[3])
{
    v[0] = 56, v[1] = 56, v[2] = 256; /* the paper's res3-style map: N = 3136, C = 256 */
    if (strncmp(spec, "nonlocal", 8))
        return -1;
    *unfused = !strncmp(spec, "nonlocal-unfused", 16);
    const char *p = spec + (*unfused ? 16 : 8);
    if (*p == '\0')
        return 0;
    /* H and W each within 2^20 first, so that H * W cannot overflow */
    int64_t w[3];
    int n = 0;
    if (*p != ':' || pgd_parse_int64_list(p + 1, ',', 1, (int64_t)1 << 20, w, 3, 3, &n))
        return -1;
    if (w[0] * w[1] > (int64_t)1 << 20 || w[2] < 2 || w[2] > 8192)
        return -1;
    v[0] = (long)w[0], v[1] = (long)w[1], v[2] = (long)w[2];
    return 0;
}

static int validate_nl(const char *spec)
{
    int u = 0;
    long v[3];
    return parse_nl(spec, &u, v);
}

typedef struct nl_state {
    pgd_ctx *ctx;
    pgd_nonlocal *nl;
    pgd_tensor *x, *z;
} nl_state;

static int nl_once(void *p, pgd_error **err)
{
    nl_state *s = p;
    return pgd_nonlocal_forward(s->ctx, s->nl, s->x, s->z, err);
}

/* A block on C channels (Ci = C/2) with the seeded weights `pagoda nonlocal --nonlocal` inserts
 * (the work is that of a trained block). */
static int nl_block(pgd_ctx *ctx, int64_t C, int unfused, pgd_nonlocal **out, pgd_error **err)
{
    resnet_nl_weights h;
    pgd_nonlocal_params params;
    int rc = resnet_nl_seeded(C, C / 2, 0x6e6c0000u + 1000, &h, &params, err);
    if (rc)
        return rc;
    pgd_nonlocal_desc d = {C, C / 2, PGD_NONLOCAL_EMBEDDED_GAUSSIAN, 0, unfused};
    rc = pgd_nonlocal_create(ctx, &d, &params, out, err);
    resnet_nl_weights_free(&h);
    return rc;
}

static int run_nl(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res, int *nres,
                  int cap, pgd_error **err)
{
    (void)cap;
    int unfused = 0;
    long v[3] = {56, 56, 256};
    parse_nl(spec, &unfused, v);
    nl_state s = {ctx, NULL, NULL, NULL};
    int64_t xs[4] = {1, v[0], v[1], v[2]};
    /* x and z [N, C]; the block's scratch P [N, 3Ci] and y [N, Ci], with the N x N affinity
     * when unfused; the weights (about 2 C^2) */
    int64_t npos = mul_sat(v[0], v[1]), nx64 = mul_sat(npos, v[2]), ci = v[2] / 2;
    int64_t aff = unfused ? mul_sat(npos, npos) : 0;
    int64_t total = add_sat(add_sat(mul_sat(2, nx64), mul_sat(mul_sat(4, npos), ci)),
                            add_sat(aff, mul_sat(mul_sat(2, v[2]), v[2])));
    int rc = check_fits(ctx, nx64 > aff ? nx64 : aff, total, nx64, err);
    float *host = rc ? NULL : item_alloc(nx64, err);
    if (!host)
        return rc ? rc : PGD_ERR_OUT_OF_HOST_MEMORY;
    size_t nx = (size_t)nx64;
    fill_rand(host, nx);
    rc = nl_block(ctx, v[2], unfused, &s.nl, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 4, xs, &s.x, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 4, xs, &s.z, err);
    if (!rc)
        rc = pgd_tensor_upload(s.x, host, err);
    free(host);
    bench_result *b = &res[0];
    if (!rc)
        rc = time_runs(ctx, (timed_fn){nl_once, &s}, o, b, err);
    if (!rc) {
        snprintf(b->name, sizeof b->name, "%s:%ld,%ld,%ld",
                 unfused ? "nonlocal-unfused" : "nonlocal", v[0], v[1], v[2]);
        double N = (double)(v[0] * v[1]), C = (double)v[2], Ci = C / 2;
        b->flops = 2.0 * (4 * N * C * Ci + 2 * N * N * Ci);
        /* device memory the block needs beyond x and z: P [N, 3Ci], y [N, Ci], and for the
         * unfused form the N x N affinity */
        snprintf(b->extra_key, sizeof b->extra_key, "scratch_mib");
        b->extra = 4.0 * (N * 3 * Ci + N * Ci + (unfused ? N * N : 0)) / (1024.0 * 1024.0);
        *nres = 1;
    }
    pgd_tensor_destroy(s.x);
    pgd_tensor_destroy(s.z);
    pgd_nonlocal_destroy(s.nl);
    return rc;
}

const bench_item bench_item_nonlocal = {
    "nonlocal", "nonlocal[:H,W,C]",
    "one embedded-Gaussian non-local block on an H x W x C map (default 56,56,256: N = 3136), "
    "fused attention: no N x N matrix",
    validate_nl, run_nl};

const bench_item bench_item_nonlocal_unfused = {
    "nonlocal-unfused", "nonlocal-unfused[:H,W,C]",
    "the same non-local block with the N x N softmax materialised (GEMM, softmax, GEMM)",
    validate_nl, run_nl};

/* ---- patch_embed:B,D — the ViT patch embedding (16×16 stride-16 convolution of a 224×224
 * RGB image, class token, position embedding) into [B, 197, D] ------------------------------ */

static int parse_bd(const char *spec, long v[2])
{
    if (parse_nd(spec, v))
        return -1;
    return v[0] > 256 || v[1] > 4096 ? -1 : 0;
}

static int validate_bd(const char *spec)
{
    long v[2];
    return parse_bd(spec, v);
}

typedef struct patch_state {
    pgd_ctx *ctx;
    pgd_tensor *img, *w, *bias, *cls, *pos, *out;
} patch_state;

static int patch_once(void *p, pgd_error **err)
{
    patch_state *s = p;
    return pgd_patch_embed(s->ctx, s->img, s->w, s->bias, s->cls, NULL, s->pos, s->out, err);
}

static int run_patch_embed(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,
                           int *nres, int cap, pgd_error **err)
{
    (void)cap;
    long v[2] = {1, 768};
    parse_bd(spec, v);
    long B = v[0], D = v[1], T = 197, P = 16;
    patch_state s;
    memset(&s, 0, sizeof s);
    s.ctx = ctx;
    int64_t si[4] = {B, 3, 224, 224}, sw[4] = {D, 3, P, P}, sd[1] = {D}, sp[2] = {T, D},
            so[3] = {B, T, D};
    size_t nmax = (size_t)(B * 3 * 224 * 224);
    if ((size_t)(D * 3 * P * P) > nmax)
        nmax = (size_t)(D * 3 * P * P);
    if ((size_t)(T * D) > nmax)
        nmax = (size_t)(T * D);
    float *host = NULL;
    int rc = check_fits(ctx, (int64_t)nmax,
                        B * 3 * 224 * 224 + D * 3 * P * P + 2 * D + T * D + B * T * D,
                        (int64_t)nmax, err);
    if (!rc && !(host = item_alloc((int64_t)nmax, err)))
        rc = PGD_ERR_OUT_OF_HOST_MEMORY;
    if (!rc) {
        fill_rand(host, nmax);
        rc = pgd_tensor_create(ctx, 4, si, &s.img, err);
    }
    if (!rc)
        rc = pgd_tensor_create(ctx, 4, sw, &s.w, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 1, sd, &s.bias, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 1, sd, &s.cls, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 2, sp, &s.pos, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 3, so, &s.out, err);
    pgd_tensor *ups[5] = {s.img, s.w, s.bias, s.cls, s.pos};
    for (int i = 0; i < 5 && !rc; i++)
        rc = pgd_tensor_upload(ups[i], host, err);
    bench_result *b = &res[0];
    if (!rc)
        rc = time_runs(ctx, (timed_fn){patch_once, &s}, o, b, err);
    if (!rc) {
        snprintf(b->name, sizeof b->name, "patch_embed:%ld,%ld", B, D);
        snprintf(b->params, sizeof b->params, "{\"B\":%ld,\"D\":%ld,\"image\":224,\"patch\":%ld}",
                 B, D, P);
        b->flops = 2.0 * (double)B * 196.0 * (double)D * (double)(3 * P * P);
        b->bytes = 4.0 * ((double)B * 3 * 224 * 224 + (double)D * 3 * P * P + (double)T * D +
                          (double)B * T * D);
        *nres = 1;
    }
    pgd_tensor_destroy(s.img);
    pgd_tensor_destroy(s.w);
    pgd_tensor_destroy(s.bias);
    pgd_tensor_destroy(s.cls);
    pgd_tensor_destroy(s.pos);
    pgd_tensor_destroy(s.out);
    free(host);
    return rc;
}

const bench_item bench_item_patch_embed = {
    "patch_embed", "patch_embed:B,D",
    "ViT patch embedding: B 224x224 images, 16x16 patches, D channels, cls + position", validate_bd,
    run_patch_embed};

/* ---- gat[:N,E] — one GATConv layer (64 -> 8 heads x 8, concat, ELU) on a generated power-law
 * graph ------------------------------------------------------------------------------------ */

/* The graph of the item, the same one tools/bench/bench-gat-peers builds for PyG: edge k has source
 * h(2k) mod N and destination 0 for every tenth edge (a hub: 10^5 in-edges at the default
 * size), else floor(N·u²) with u = h(2k+1) / 2^64 in 53 bits (more edges into low ids); h is
 * splitmix64's finaliser over k·golden + seed. */
static uint64_t gat_hash(uint64_t k)
{
    uint64_t z = 0x6761742062656e63ull + (k + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void gat_edges(int64_t n, int64_t e, int64_t *ei)
{
    for (int64_t k = 0; k < e; k++) {
        ei[k] = (int64_t)(gat_hash(2 * (uint64_t)k) % (uint64_t)n);
        double u = (double)(gat_hash(2 * (uint64_t)k + 1) >> 11) * 0x1p-53;
        ei[e + k] = k % 10 == 0 ? 0 : (int64_t)floor((double)n * u * u);
    }
}

static int parse_gat(const char *spec, long v[2])
{
    v[0] = 100000, v[1] = 1000000;
    if (strncmp(spec, "gat", 3) || (spec[3] != '\0' && spec[3] != ':'))
        return -1;
    if (spec[3] == '\0')
        return 0;
    int64_t w[2];
    int n = 0;
    if (pgd_parse_int64_list(spec + 4, ',', 1, (int64_t)1 << 28, w, 2, 2, &n))
        return -1;
    v[0] = (long)w[0], v[1] = (long)w[1];
    return 0;
}

static int validate_gat(const char *spec)
{
    long v[2];
    return parse_gat(spec, v);
}

typedef struct gat_state {
    pgd_ctx *ctx;
    pgd_gat *gat;
    pgd_gat_graph *g;
    pgd_tensor *x, *y;
} gat_state;

static int gat_once(void *p, pgd_error **err)
{
    gat_state *s = p;
    return pgd_gat_forward(s->ctx, s->gat, s->g, s->x, s->y, NULL, err);
}

static int run_gat(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,
                   int *nres, int cap, pgd_error **err)
{
    (void)cap;
    long v[2];
    parse_gat(spec, v);
    const int64_t F = 64, H = 8, C = 8, N = v[0], E = v[1];
    gat_state s = {ctx, NULL, NULL, NULL, NULL};
    /* device: x, h [N, 64] and y; the scores and merge scratch ~ (N + E/1024)·(64 + 2·8); the
     * int32 CSR ~ 4 (E + N) */
    int64_t nx = mul_sat(N, F), e2 = add_sat(E, N);
    int64_t total = add_sat(mul_sat(5, nx), mul_sat(4, e2));
    int rc = check_fits(ctx, nx > e2 ? nx : e2, total, add_sat(nx, mul_sat(4, e2)), err);
    if (rc)
        return rc;
    float *host = item_alloc(nx, err);
    int64_t *ei = host ? malloc((size_t)(2 * E + 1) * sizeof *ei) : NULL;
    float *w = host ? item_alloc(H * C * F + 3 * H * C, err) : NULL;
    if (!host || !ei || !w) {
        free(host), free(ei), free(w);
        return ei || !host || !w ? PGD_ERR_OUT_OF_HOST_MEMORY
                                 : pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "edge_index");
    }
    fill_rand(host, (size_t)nx);
    model_fill_seeded(w, H * C * F + 3 * H * C, 0x676174, 0.2f);
    gat_edges(N, E, ei);
    pgd_gat_desc d;
    pgd_gat_desc_init(&d, F, C, H);
    d.act = PGD_GAT_ACT_ELU;
    pgd_gat_params p = {w,   NULL, w + H * C * F, w + H * C * F + H * C, w + H * C * F + 2 * H * C,
                        NULL};
    int64_t xs[2] = {N, F}, ys[2] = {N, H * C};
    double t0 = bench_now_ms();
    rc = pgd_gat_graph_create(ctx, N, ei, E, 1, &s.g, err);
    double graph_ms = bench_now_ms() - t0;
    free(ei);
    if (!rc)
        rc = pgd_gat_create(ctx, &d, &p, &s.gat, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 2, xs, &s.x, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 2, ys, &s.y, err);
    if (!rc)
        rc = pgd_tensor_upload(s.x, host, err);
    free(host);
    free(w);
    bench_result *b = &res[0];
    if (!rc)
        rc = time_runs(ctx, (timed_fn){gat_once, &s}, o, b, err);
    if (!rc) {
        int64_t ea = pgd_gat_graph_get_num_edges(s.g);
        snprintf(b->name, sizeof b->name, "gat:%ld,%ld", v[0], v[1]);
        snprintf(b->params, sizeof b->params,
                 "{\"nodes\":%ld,\"edges\":%ld,\"edges_attended\":%lld,\"max_in_degree\":%lld,"
                 "\"in\":64,\"heads\":8,\"channels\":8}",
                 v[0], v[1], (long long)ea, (long long)pgd_gat_graph_get_max_in_degree(s.g));
        /* h = x·Wᵀ, the scores, and per attended edge and channel one exp-weighted FMA */
        b->flops = 2.0 * (double)N * (double)(F * H * C) + 4.0 * (double)N * (double)(H * C) +
                   2.0 * (double)ea * (double)(H * C);
        snprintf(b->extra_key, sizeof b->extra_key, "graph_ms");
        b->extra = graph_ms;
        *nres = 1;
    }
    pgd_tensor_destroy(s.x);
    pgd_tensor_destroy(s.y);
    pgd_gat_destroy(s.gat);
    pgd_gat_graph_destroy(s.g);
    return rc;
}

const bench_item bench_item_gat = {
    "gat", "gat[:N,E]",
    "one GATConv layer (64 -> 8 heads x 8, concat, ELU, self loops) on a generated graph of N "
    "nodes and E edges (default 100000,1000000; every tenth edge into node 0); the CSR build "
    "time as graph_ms",
    validate_gat, run_gat};
