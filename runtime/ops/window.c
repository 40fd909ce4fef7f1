/* window.c — launchers for cl/window.cl: Swin's window partition with cyclic shift and padding,
 * its inverse added into the residual stream, and the 2 x 2 patch merge. */
#include <stdio.h>

#include "internal.h"

/* x must be [B, H, W, C] with every size >= 1 and the element counts the kernels index within
 * 2^31 per dimension product and 2^40 in all. */
static int check_map(const pgd_tensor *x, const char *op, const char *name, pgd_error **err)
{
    char s[96];
    if (x->ndim != 4 || x->shape[0] < 1 || x->shape[1] < 1 || x->shape[2] < 1 || x->shape[3] < 1)
        return pgd__error_set(err, PGD_ERR_SHAPE, "%s: %s %s must be [B, H, W, C], sizes >= 1", op,
                              name, pgd_tensor_shape_str(x, s, sizeof s));
    for (int i = 0; i < 4; i++)
        if (x->shape[i] > INT32_MAX / 4)
            return pgd__error_set(err, PGD_ERR_TOO_LARGE, "%s: %s %s has a size over 2^29", op,
                                  name, pgd_tensor_shape_str(x, s, sizeof s));
    return PGD_OK;
}

/* The padded grid and window count of a partition, with the shift checked. */
static int grid(const pgd_tensor *x, int64_t w, int64_t sh, int64_t sw, int flags, const char *op,
                int64_t *Hp, int64_t *Wp, int64_t *nW, int64_t *Rh, int64_t *Rw, pgd_error **err)
{
    int64_t H = x->shape[1], W = x->shape[2];
    if (w < 1 || w > 4096)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: window %lld must be 1..4096", op,
                              (long long)w);
    if (flags & ~PGD_WINDOW_ROLL_UNPADDED)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: unknown flags 0x%x", op,
                              (unsigned)flags);
    *Hp = (H + w - 1) / w * w;
    *Wp = (W + w - 1) / w * w;
    int unpadded = flags & PGD_WINDOW_ROLL_UNPADDED;
    *Rh = unpadded ? H : *Hp;
    *Rw = unpadded ? W : *Wp;
    if (sh < 0 || sw < 0 || sh >= *Rh || sw >= *Rw)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "%s: shift (%lld, %lld) must lie in [0, %lld) x [0, %lld), the "
                              "%s grid",
                              op, (long long)sh, (long long)sw, (long long)*Rh, (long long)*Rw,
                              unpadded ? "unpadded" : "padded");
    *nW = (*Hp / w) * (*Wp / w);
    return PGD_OK;
}

static int launch(pgd_ctx *ctx, const char *name, cl_mem in, cl_mem out, const cl_int *v, int nv,
                  int64_t total, pgd_error **err)
{
    cl_kernel k;
    pgd__args args;
    int rc = pgd__args_kernel(&args, ctx, "window", NULL, name, &k, err);
    if (rc)
        return rc;
    pgd__arg_mem(&args, in);
    pgd__arg_mem(&args, out);
    for (int i = 0; i < nv; i++)
        pgd__arg_int(&args, v[i]);
    if ((rc = pgd__args_end(&args, err)))
        return rc;
    size_t wg = pgd__flat_wg(ctx, k), global = pgd__round_up((size_t)total, wg);
    return pgd__enqueue(ctx, k, name, 1, &global, &wg, err);
}

pgd_status pgd_window_partition(pgd_ctx *ctx, const pgd_tensor *x, int64_t window, int64_t shift_h,
                                int64_t shift_w, int flags, pgd_tensor *out, pgd_error **err)
{
    const char *op = "window_partition";
    int64_t Hp = 0, Wp = 0, nW = 0, Rh = 0, Rw = 0;
    int rc = check_map(x, op, "x", err);
    if (!rc)
        rc = grid(x, window, shift_h, shift_w, flags, op, &Hp, &Wp, &nW, &Rh, &Rw, err);
    if (rc)
        return rc;
    int64_t B = x->shape[0], C = x->shape[3], N = window * window;
    if (out->ndim != 3 || out->shape[0] != B * nW || out->shape[1] != N || out->shape[2] != C) {
        char what[160];
        snprintf(what, sizeof what, "out must be [B·nW, w·w, C] = [%lld, %lld, %lld]",
                 (long long)(B * nW), (long long)N, (long long)C);
        return pgd__shape_error(err, op, what, x, out);
    }
    if (out == x || out->buf == x->buf)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: out must not alias x", op);
    cl_int v[11] = {(cl_int)B,       (cl_int)x->shape[1], (cl_int)x->shape[2], (cl_int)C,
                    (cl_int)window,  (cl_int)Hp,          (cl_int)Wp,          (cl_int)shift_h,
                    (cl_int)shift_w, (cl_int)Rh,          (cl_int)Rw};
    return launch(ctx, "window_partition", x->buf, out->buf, v, 11, pgd_tensor_get_numel(out), err);
}

pgd_status pgd_window_merge_add(pgd_ctx *ctx, const pgd_tensor *windows, int64_t window,
                                int64_t shift_h, int64_t shift_w, int flags, pgd_tensor *y,
                                pgd_error **err)
{
    const char *op = "window_merge_add";
    int64_t Hp = 0, Wp = 0, nW = 0, Rh = 0, Rw = 0;
    int rc = check_map(y, op, "y", err);
    if (!rc)
        rc = grid(y, window, shift_h, shift_w, flags, op, &Hp, &Wp, &nW, &Rh, &Rw, err);
    if (rc)
        return rc;
    int64_t B = y->shape[0], C = y->shape[3], N = window * window;
    if (windows->ndim != 3 || windows->shape[0] != B * nW || windows->shape[1] != N ||
        windows->shape[2] != C) {
        char what[160];
        snprintf(what, sizeof what, "windows must be [B·nW, w·w, C] = [%lld, %lld, %lld]",
                 (long long)(B * nW), (long long)N, (long long)C);
        return pgd__shape_error(err, op, what, y, windows);
    }
    if (windows->buf == y->buf)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: y must not alias the windows",
                              op);
    cl_int v[11] = {(cl_int)B,       (cl_int)y->shape[1], (cl_int)y->shape[2], (cl_int)C,
                    (cl_int)window,  (cl_int)Hp,          (cl_int)Wp,          (cl_int)shift_h,
                    (cl_int)shift_w, (cl_int)Rh,          (cl_int)Rw};
    return launch(ctx, "window_merge_add", windows->buf, y->buf, v, 11, pgd_tensor_get_numel(y),
                  err);
}

pgd_status pgd_patch_merge(pgd_ctx *ctx, const pgd_tensor *x, pgd_tensor *out, pgd_error **err)
{
    const char *op = "patch_merge";
    int rc = check_map(x, op, "x", err);
    if (rc)
        return rc;
    int64_t B = x->shape[0], H = x->shape[1], W = x->shape[2], C = x->shape[3];
    int64_t Ho = (H + 1) / 2, Wo = (W + 1) / 2;
    if (out->ndim != 4 || out->shape[0] != B || out->shape[1] != Ho || out->shape[2] != Wo ||
        out->shape[3] != 4 * C) {
        char what[160];
        snprintf(what, sizeof what,
                 "out must be [B, ceil(H/2), ceil(W/2), 4C] = [%lld, %lld, "
                 "%lld, %lld]",
                 (long long)B, (long long)Ho, (long long)Wo, (long long)(4 * C));
        return pgd__shape_error(err, op, what, x, out);
    }
    if (out->buf == x->buf)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s: out must not alias x", op);
    cl_int v[4] = {(cl_int)B, (cl_int)H, (cl_int)W, (cl_int)C};
    return launch(ctx, "patch_merge", x->buf, out->buf, v, 4, pgd_tensor_get_numel(out), err);
}
