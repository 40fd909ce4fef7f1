/* patch.c — launchers for cl/patch_embed.cl: ViT patch embedding and bicubic resizing of
 * position-embedding grids (PyTorch's plain, align_corners, antialiased and scale-factor rules). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tune.h"

#define PE_HAS_BIAS 1u
#define PE_HAS_POS 2u

static int64_t last_dim(const pgd_tensor *t)
{
    return t->ndim ? t->shape[t->ndim - 1] : 1;
}

/* The sizes of one patch embedding: image [B, C, H, W], patches P × P on a gh × gw grid (np of
 * them), `extra` class and distillation tokens before them, T tokens of D features out. */
typedef struct {
    int64_t B, C, H, W, D, P, gw, np, extra, T;
} patch_dims;

static int check_patch_args(const pgd_tensor *image, const pgd_tensor *weight,
                            const pgd_tensor *bias, const pgd_tensor *cls, const pgd_tensor *dist,
                            const pgd_tensor *pos, const pgd_tensor *out, patch_dims *g,
                            pgd_error **err)
{
    const char *op = "patch_embed";
    if (!image || !weight || !out)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: image, weight and out are required", op);
    if (dist && !cls)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: a distillation token needs a class token", op);
    if (image->ndim != 4 || weight->ndim != 4)
        return pgd__shape_error(err, op, "image must be [B, C, H, W] and weight [D, C, P, P]",
                                image, weight);
    int64_t B = image->shape[0], C = image->shape[1], H = image->shape[2], W = image->shape[3];
    int64_t D = weight->shape[0], P = weight->shape[2];
    if (weight->shape[1] != C || weight->shape[3] != P || P < 1)
        return pgd__shape_error(
            err, op, "weight must be [D, C, P, P] with the image's channel count C", image, weight);
    if (H % P || W % P)
        return pgd__shape_error(
            err, op, "image height and width must be multiples of the patch size", image, weight);
    int64_t gh = H / P, gw = W / P, np = gh * gw;
    int64_t extra = (cls ? 1 : 0) + (dist ? 1 : 0), T = extra + np;
    if (bias && (bias->ndim != 1 || bias->shape[0] != D))
        return pgd__shape_error(err, op, "bias must be 1-D [D]", weight, bias);
    /* Tokens as the libraries store them: [D], [1, D] or [1, 1, D]. */
    if (cls && (last_dim(cls) != D || pgd_tensor_get_numel(cls) != D))
        return pgd__shape_error(err, op, "class token must be [D] (or [1, 1, D])", weight, cls);
    if (dist && (last_dim(dist) != D || pgd_tensor_get_numel(dist) != D))
        return pgd__shape_error(err, op, "distillation token must be [D] (or [1, 1, D])", weight,
                                dist);
    if (out->ndim != 3 || out->shape[0] != B || out->shape[1] != T || out->shape[2] != D) {
        char what[160];
        snprintf(what, sizeof what, "out must be [B, T, D] = [%lld, %lld, %lld] for this image",
                 (long long)B, (long long)T, (long long)D);
        return pgd__shape_error(err, op, what, image, out);
    }
    if (pos && (last_dim(pos) != D || pgd_tensor_get_numel(pos) != T * D)) {
        char what[160];
        snprintf(what, sizeof what, "position embeddings must be [T, D] = [%lld, %lld]",
                 (long long)T, (long long)D);
        return pgd__shape_error(err, op, what, out, pos);
    }
    if (pgd_tensor_get_numel(image) > (int64_t)UINT32_MAX ||
        pgd_tensor_get_numel(weight) > (int64_t)UINT32_MAX ||
        pgd_tensor_get_numel(out) > (int64_t)UINT32_MAX)
        return pgd__error_set(err, PGD_ERR_TOO_LARGE, "%s: a tensor has more than 2^32 elements",
                              op);
    *g = (patch_dims){B, C, H, W, D, P, gw, np, extra, T};
    return PGD_OK;
}

/* The patches' rows of out: unfold into [B·np, C·P·P], then one strided-batched GEMM with the
 * shared GEMM kernels: batch b's rows land at token `extra` of out[b]; bias and the patches' rows
 * of pos (shared by every batch: stride 0) are the GEMM's epilogue. bb and pb stand for absent
 * bias and pos (never read). */
struct pgd_patch_proj {
    pgd_ctx *ctx;
    const pgd_tensor *weight; /* [D, C, P, P], the caller's */
    pgd_tensor *packed;  /* CPU devices: its panels (pgd__gemm_pack, as Bᵀ [D, K]); else NULL */
    pgd__gemm_params gp; /* the GEMM parameters it was packed with */
};

static int embed_patches(pgd_ctx *ctx, const patch_dims *g, const pgd_tensor *image,
                         const pgd_tensor *weight, const pgd_patch_proj *proj, int has_bias,
                         cl_mem bb, int has_pos, cl_mem pb, pgd_tensor *out, pgd_error **err)
{
    int64_t B = g->B, C = g->C, P = g->P, np = g->np, D = g->D;
    int64_t K = C * P * P;
    pgd_tensor *A = NULL;
    int64_t as[2] = {B * np, K};
    int rc = pgd_tensor_create(ctx, 2, as, &A, err);
    if (rc)
        return rc;
    cl_kernel k;
    if ((rc = pgd__kernel_get(ctx, "patch_embed", NULL, "patch_unfold", &k, err))) {
        pgd_tensor_destroy(A);
        return rc;
    }
    cl_uint a[7] = {(cl_uint)C,     (cl_uint)g->H, (cl_uint)g->W,    (cl_uint)P,
                    (cl_uint)g->gw, (cl_uint)np,   (cl_uint)(B * np)};
    pgd__args args;
    pgd__args_begin(&args, ctx, k, "patch_unfold");
    pgd__arg_mem(&args, image->buf);
    pgd__arg_mem(&args, A->buf);
    for (cl_uint i = 0; i < 7; i++)
        pgd__arg_uint(&args, a[i]);
    if ((rc = pgd__args_end(&args, err))) {
        pgd_tensor_destroy(A);
        return rc;
    }
    size_t wg = pgd__flat_wg(ctx, k);
    size_t global[2] = {pgd__round_up((size_t)K, wg), (size_t)(B * np)}, local[2] = {wg, 1};
    rc = pgd__enqueue(ctx, k, "patch_unfold", 2, global, local, err);
    pgd__gemm_call gc;
    memset(&gc, 0, sizeof gc);
    gc.trans_b = 1;
    gc.M = np;
    gc.N = D;
    gc.K = K;
    gc.batch = B;
    gc.alpha = 1.0f;
    gc.a = (pgd__mat){A->buf, 0, (int)K, (long)(np * K)};
    gc.b = (pgd__mat){weight->buf, 0, (int)K, 0};
    if (proj && proj->packed) { /* the panels made once, shared by every image (stride 0) */
        gc.params = &proj->gp;
        gc.b = (pgd__mat){proj->packed->buf, 0, 0, 0};
        gc.b_packed = 1;
    }
    gc.c = (pgd__mat){out->buf, (size_t)(g->extra * D), (int)D, (long)(g->T * D)};
    pgd__mat mb = {bb, 0, 0, 0}, mp = {pb, (size_t)(g->extra * D), (int)D, 0};
    gc.bias = has_bias ? &mb : NULL;
    gc.residual = has_pos ? &mp : NULL;
    if (!rc)
        rc = pgd__gemm(ctx, &gc, err);
    pgd_tensor_destroy(A);
    return rc;
}

/* The class (and distillation) token rows of out, plus their rows of pos when flags has
 * PE_HAS_POS; pb stands for an absent pos (never read). */
static int write_tokens(pgd_ctx *ctx, const patch_dims *g, const pgd_tensor *cls,
                        const pgd_tensor *dist, cl_mem pb, cl_uint flags, pgd_tensor *out,
                        pgd_error **err)
{
    cl_kernel k;
    pgd__args args;
    int rc = pgd__args_kernel(&args, ctx, "patch_embed", NULL, "patch_tokens", &k, err);
    if (rc)
        return rc;
    cl_mem cb = cls->buf, db = dist ? dist->buf : cls->buf;
    cl_uint a[5] = {(cl_uint)g->D, (cl_uint)g->T, (cl_uint)g->extra, flags,
                    (cl_uint)(g->B * g->extra * g->D)};
    pgd__arg_mem(&args, cb);
    pgd__arg_mem(&args, db);
    pgd__arg_mem(&args, pb);
    pgd__arg_mem(&args, out->buf);
    for (cl_uint i = 0; i < 5; i++)
        pgd__arg_uint(&args, a[i]);
    if ((rc = pgd__args_end(&args, err)))
        return rc;
    size_t wg = pgd__flat_wg(ctx, k), global = pgd__round_up((size_t)a[4], wg);
    return pgd__enqueue(ctx, k, "patch_tokens", 1, &global, &wg, err);
}

static int patch_embed(pgd_ctx *ctx, const pgd_tensor *image, const pgd_tensor *weight,
                       const pgd_patch_proj *proj, const pgd_tensor *bias, const pgd_tensor *cls,
                       const pgd_tensor *dist, const pgd_tensor *pos, pgd_tensor *out,
                       pgd_error **err)
{
    patch_dims g = {0};
    int rc = check_patch_args(image, weight, bias, cls, dist, pos, out, &g, err);
    if (rc || pgd_tensor_get_numel(out) == 0)
        return rc;
    cl_uint flags = (bias ? PE_HAS_BIAS : 0) | (pos ? PE_HAS_POS : 0);
    /* Absent optional tensors are never read; their arguments still need a valid buffer. */
    cl_mem bb = bias ? bias->buf : weight->buf, pb = pos ? pos->buf : weight->buf;
    if (g.np > 0 && g.C > 0) {
        if ((rc = embed_patches(ctx, &g, image, weight, proj, bias != NULL, bb, pos != NULL, pb,
                                out, err)))
            return rc;
    } else if (g.np > 0) {
        return pgd__error_set(err, PGD_ERR_SHAPE, "patch_embed: image has no channels");
    }
    if (g.extra == 0 || g.B == 0)
        return PGD_OK;
    return write_tokens(ctx, &g, cls, dist, pb, flags, out, err);
}

pgd_status pgd_patch_embed(pgd_ctx *ctx, const pgd_tensor *image, const pgd_tensor *weight,
                           const pgd_tensor *bias, const pgd_tensor *cls, const pgd_tensor *dist,
                           const pgd_tensor *pos, pgd_tensor *out, pgd_error **err)
{
    return patch_embed(ctx, image, weight, NULL, bias, cls, dist, pos, out, err);
}

pgd_status pgd_patch_proj_create(pgd_ctx *ctx, const pgd_tensor *weight, pgd_patch_proj **out,
                                 pgd_error **err)
{
    if (out)
        *out = NULL;
    if (!ctx || !weight || !out)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "patch_proj_create: ctx, weight and out are required");
    if (weight->ndim != 4) {
        char sw[128];
        return pgd__error_set(err, PGD_ERR_SHAPE,
                              "patch_proj_create: weight must be [D, C, P, P], not %s",
                              pgd_tensor_shape_str(weight, sw, sizeof sw));
    }
    int64_t D = weight->shape[0], K = weight->shape[1] * weight->shape[2] * weight->shape[3];
    if (D > INT32_MAX || K > INT32_MAX)
        return pgd__error_set(err, PGD_ERR_TOO_LARGE,
                              "patch_proj_create: weight [%lld, %lld] is too large", (long long)D,
                              (long long)K);
    pgd_patch_proj *p = calloc(1, sizeof *p);
    if (!p)
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "patch_proj_create");
    p->ctx = ctx;
    p->weight = weight;
    p->gp = pgd__params_of(ctx)->gemm;
    int rc = PGD_OK;
    if (p->gp.cpu && D > 0 && K > 0) {
        int64_t per = pgd__gemm_packed_size(&p->gp, D, K), shape[1] = {per};
        rc = pgd__check_alloc(ctx, (uint64_t)per * sizeof(float), "patch projection panels", err);
        if (!rc)
            rc = pgd_tensor_create(ctx, 1, shape, &p->packed, err);
        if (!rc) {
            pgd__mat src = {weight->buf, 0, (int)K, 0};
            rc = pgd__gemm_pack(ctx, &p->gp, 1, D, K, 1, &src, p->packed->buf, per, 0, err);
        }
    }
    if (rc) {
        pgd_patch_proj_destroy(p);
        return rc;
    }
    *out = p;
    return PGD_OK;
}

void pgd_patch_proj_destroy(pgd_patch_proj *proj)
{
    if (!proj)
        return;
    pgd_tensor_destroy(proj->packed);
    free(proj);
}

pgd_status pgd_patch_embed_proj(pgd_ctx *ctx, const pgd_tensor *image, const pgd_patch_proj *proj,
                                const pgd_tensor *bias, const pgd_tensor *cls,
                                const pgd_tensor *dist, const pgd_tensor *pos, pgd_tensor *out,
                                pgd_error **err)
{
    if (!proj)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "patch_embed: proj is required");
    if (ctx != proj->ctx)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "patch_embed: proj was created on another context");
    return patch_embed(ctx, image, proj->weight, proj, bias, cls, dist, pos, out, err);
}

pgd_status pgd_pos_embed_resize(pgd_ctx *ctx, const pgd_tensor *pos, int extra, int gh, int gw,
                                int gh2, int gw2, pgd_resize_mode mode, pgd_tensor *out,
                                pgd_error **err)
{
    const char *op = "pos_embed_resize";
    if (!pos || !out)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: pos and out are required", op);
    if (extra < 0 || gh < 1 || gw < 1 || gh2 < 1 || gw2 < 1)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: need extra >= 0 and grids of at least 1 x 1, got extra %d, "
                              "%d x %d -> %d x %d",
                              op, extra, gh, gw, gh2, gw2);
    if ((int)mode < (int)PGD_RESIZE_BICUBIC || (int)mode > (int)PGD_RESIZE_BICUBIC_HF)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: unknown resize mode %d", op,
                              (int)mode);
    int64_t D = last_dim(pos);
    int64_t rows = (int64_t)extra + (int64_t)gh * gw, rows2 = (int64_t)extra + (int64_t)gh2 * gw2;
    if (pgd_tensor_get_numel(pos) != rows * D) {
        char what[160];
        snprintf(what, sizeof what, "pos must have %d + %d x %d rows of its last dim", extra, gh,
                 gw);
        return pgd__shape_error(err, op, what, pos, out);
    }
    if (last_dim(out) != D || pgd_tensor_get_numel(out) != rows2 * D) {
        char what[160];
        snprintf(what, sizeof what, "out must be [%lld, %lld] (%d + %d x %d rows)",
                 (long long)rows2, (long long)D, extra, gh2, gw2);
        return pgd__shape_error(err, op, what, pos, out);
    }
    if (pgd_tensor_get_numel(out) > (int64_t)UINT32_MAX ||
        pgd_tensor_get_numel(pos) > (int64_t)UINT32_MAX)
        return pgd__error_set(err, PGD_ERR_TOO_LARGE, "%s: more than 2^32 elements", op);
    if (pos->buf == out->buf)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: out must not alias pos", op);
    if (D == 0)
        return PGD_OK;
    int aa = mode == PGD_RESIZE_BICUBIC_ANTIALIAS;
    const char *name = aa ? "pos_resize_bicubic_aa" : "pos_resize_bicubic";
    cl_kernel k;
    int rc = pgd__kernel_get(ctx, "patch_embed", NULL, name, &k, err);
    if (rc)
        return rc;
    /* The source scale as PyTorch computes it, in float: input / output for a requested size;
     * (input - 1) / (output - 1) with align_corners (0 for one output); 1 / scale_factor, the
     * division in double, for a requested scale factor (Hugging Face's (out + 0.1) / in). */
    float sy, sx;
    cl_uint align = mode == PGD_RESIZE_BICUBIC_ALIGN_CORNERS;
    if (align) {
        sy = gh2 > 1 ? (float)(gh - 1) / (float)(gh2 - 1) : 0.0f;
        sx = gw2 > 1 ? (float)(gw - 1) / (float)(gw2 - 1) : 0.0f;
    } else if (mode == PGD_RESIZE_BICUBIC_HF) {
        sy = (float)(1.0 / (((double)gh2 + 0.1) / (double)gh));
        sx = (float)(1.0 / (((double)gw2 + 0.1) / (double)gw));
    } else {
        sy = (float)gh / (float)gh2;
        sx = (float)gw / (float)gw2;
    }
    cl_uint a[7] = {(cl_uint)D,   (cl_uint)extra, (cl_uint)gh,         (cl_uint)gw,
                    (cl_uint)gh2, (cl_uint)gw2,   (cl_uint)(rows2 * D)};
    pgd__args args;
    pgd__args_begin(&args, ctx, k, name);
    pgd__arg_mem(&args, pos->buf);
    pgd__arg_mem(&args, out->buf);
    for (cl_uint i = 0; i < 6; i++)
        pgd__arg_uint(&args, a[i]);
    pgd__arg_float(&args, sy);
    pgd__arg_float(&args, sx);
    if (!aa)
        pgd__arg_uint(&args, align);
    pgd__arg_uint(&args, a[6]);
    if ((rc = pgd__args_end(&args, err)))
        return rc;
    size_t wg = pgd__flat_wg(ctx, k), global = pgd__round_up((size_t)a[6], wg);
    return pgd__enqueue(ctx, k, name, 1, &global, &wg, err);
}
