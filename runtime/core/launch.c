/* launch.c — small helpers every launcher shares: kernel arguments, work-group sizes, rounding,
 * shape errors. */
#include <stdio.h>

#include "internal.h"

void pgd__args_begin(pgd__args *a, pgd_ctx *ctx, cl_kernel k, const char *name)
{
    a->ctx = ctx;
    a->kernel = k;
    a->name = name;
    a->next = 0;
    a->failed = 0;
    a->cl = CL_SUCCESS;
}

int pgd__args_kernel(pgd__args *a, pgd_ctx *ctx, const char *file, const char *options,
                     const char *name, cl_kernel *k, pgd_error **err)
{
    int rc = pgd__kernel_get(ctx, file, options, name, k, err);
    if (!rc)
        pgd__args_begin(a, ctx, *k, name);
    return rc;
}

void pgd__args_seek(pgd__args *a, cl_uint index)
{
    a->next = index;
}

void pgd__arg(pgd__args *a, size_t size, const void *value)
{
    cl_uint index = a->next++;
    /* After a failure the launch will not happen: setting more would only hide which failed. */
    if (a->cl != CL_SUCCESS)
        return;
    cl_int cl = clSetKernelArg(a->kernel, index, size, value);
    if (cl != CL_SUCCESS) {
        a->cl = cl;
        a->failed = index;
    }
}

void pgd__arg_mem(pgd__args *a, cl_mem m)
{
    pgd__arg(a, sizeof m, &m);
}
void pgd__arg_int(pgd__args *a, cl_int v)
{
    pgd__arg(a, sizeof v, &v);
}
void pgd__arg_uint(pgd__args *a, cl_uint v)
{
    pgd__arg(a, sizeof v, &v);
}
void pgd__arg_long(pgd__args *a, cl_long v)
{
    pgd__arg(a, sizeof v, &v);
}
void pgd__arg_float(pgd__args *a, float v)
{
    pgd__arg(a, sizeof v, &v);
}
void pgd__arg_local(pgd__args *a, size_t bytes)
{
    pgd__arg(a, bytes, NULL);
}

int pgd__args_end(const pgd__args *a, pgd_error **err)
{
    if (a->cl == CL_SUCCESS)
        return PGD_OK;
    return pgd__cl_fail(err, a->cl, "clSetKernelArg", "argument %u of kernel '%s' on '%s'",
                        a->failed, a->name, a->ctx->dev.name);
}

size_t pgd__kernel_info(pgd_ctx *ctx, cl_kernel k, cl_kernel_work_group_info what)
{
    size_t v = 0;
    if (clGetKernelWorkGroupInfo(k, ctx->device, what, sizeof v, &v, NULL) != CL_SUCCESS)
        v = 0;
    return v;
}

size_t pgd__kernel_wg(pgd_ctx *ctx, cl_kernel k)
{
    size_t w = pgd__kernel_info(ctx, k, CL_KERNEL_WORK_GROUP_SIZE);
    return w ? w : 1;
}

size_t pgd__pow2_floor(size_t v)
{
    size_t p = 1;
    while (p * 2 <= v)
        p *= 2;
    return p;
}

size_t pgd__round_up(size_t n, size_t m)
{
    return (n + m - 1) / m * m;
}

int64_t pgd__launch_rows(const pgd_ctx *ctx, int64_t rows, uint64_t flops_per_row, uint64_t cap,
                         int64_t unit)
{
    if (unit < 1)
        unit = 1;
    uint64_t n = cap / (flops_per_row ? flops_per_row : 1);
    /* A CPU device has no watchdog and no display to starve, and each chunk would sweep the
     * weights again (PoCL 3.1, ViT-B/16 batch 8: fc1's 9.4 MB of weights read 8 times from
     * memory, 5 % of the forward pass): one launch. */
    if (ctx->dev.type == PGD_DEVICE_CPU && !ctx->dev.software_rasteriser)
        n = UINT64_MAX;
    if (ctx->knobs.max_launch_rows > 0)
        n = (uint64_t)ctx->knobs.max_launch_rows;
    if (n < (uint64_t)unit)
        n = (uint64_t)unit;
    n = n / (uint64_t)unit * (uint64_t)unit;
    return n >= (uint64_t)rows ? rows : (int64_t)n;
}

/* A flat kernel (one work-item per element) gets a few SIMD widths per group, so each group
 * keeps the device's scheduler busy, within what the compiled kernel accepts. */
size_t pgd__flat_wg(pgd_ctx *ctx, cl_kernel k)
{
    size_t limit = pgd__kernel_wg(ctx, k);
    size_t mult = pgd__kernel_info(ctx, k, CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE);
    if (mult == 0)
        mult = 1;
    return mult * 4 < limit ? mult * 4 : limit;
}

int pgd__shape_error(pgd_error **err, const char *op, const char *what, const pgd_tensor *a,
                     const pgd_tensor *b)
{
    char sa[128], sb[128];
    return pgd__error_set(err, PGD_ERR_SHAPE, "%s: %s: %s vs %s", op, what,
                          pgd_tensor_shape_str(a, sa, sizeof sa),
                          pgd_tensor_shape_str(b, sb, sizeof sb));
}

int pgd__check_out_shape(const char *op, const pgd_tensor *y, int nd, const int64_t *shape,
                         const char *what, pgd_error **err)
{
    int same = pgd_tensor_get_ndim(y) == nd;
    for (int d = 0; same && d < nd; d++)
        same = pgd_tensor_get_dim(y, d) == shape[d];
    if (same)
        return PGD_OK;
    char sy[128], want[256];
    size_t len = 0;
    want[len++] = '[';
    for (int d = 0; d < nd && len < sizeof want - 32; d++)
        len += (size_t)snprintf(want + len, sizeof want - len, "%s%lld", d ? ", " : "",
                                (long long)shape[d]);
    snprintf(want + len, sizeof want - len, "]");
    return pgd__error_set(err, PGD_ERR_SHAPE, "%s: y is %s but %s %s", op,
                          pgd_tensor_shape_str(y, sy, sizeof sy), what, want);
}

/* Enqueues a flat kernel (one work-item per element) over `total` items, each of about
 * `flops` FLOPs: long launches go in chunks of whole work-groups at their global offset (the
 * kernels index by the global id and test it against the total). */
int pgd__enqueue_flat_cap(pgd_ctx *ctx, cl_kernel k, const char *name, int64_t total,
                          uint64_t flops, size_t cpu_wg, pgd_error **err)
{
    size_t wg = pgd__flat_wg(ctx, k);
    /* On a CPU device a work-group is a call into the kernel's loop over its items: a few
     * hundred items make that call's cost small (PoCL 3.1: the stem's im2col took 31 ms in
     * groups of 32); cpu_wg items where each item is bigger. */
    if (pgd__gemm_uses_cpu_kernel(ctx)) {
        size_t limit = pgd__kernel_wg(ctx, k);
        wg = limit < cpu_wg ? limit : cpu_wg;
    }
    size_t global = pgd__round_up((size_t)total, wg);
    size_t chunk = flops ? (size_t)pgd__launch_rows(ctx, (int64_t)global, flops,
                                                    PGD_LAUNCH_GEMM_FLOPS, (int64_t)wg)
                         : global;
    int rc = PGD_OK;
    for (size_t x0 = 0; x0 < global && !rc; x0 += chunk) {
        size_t n = global - x0 < chunk ? global - x0 : chunk;
        rc = pgd__enqueue_at(ctx, k, name, 1, x0 ? &x0 : NULL, &n, &wg, err);
    }
    return rc;
}
