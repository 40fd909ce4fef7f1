/* interop.c — Pagoda on the caller's OpenCL objects and host memory (pagoda_cl.h):
 * a context over a caller's cl_context, device and queue; tensors over a caller's cl_mem or host
 * memory with no copy; the cl_mem under a tensor; events; mapping a tensor for the host.
 *
 * Every op reads a tensor's buffer from its start as numel contiguous floats, so a view at an
 * offset is a sub-buffer (the ops need no offset of their own), and layouts other than the
 * row-major one are refused rather than read wrongly. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "pagoda_cl.h"

/* ---- a context over the caller's objects ---- */

/* The platform of `device` and the indices pgd_devices_list gives it (-1 when not listed, as
 * for a sub-device), then its description as every context gets it. */
static int describe_device(cl_device_id device, cl_platform_id *platform, pgd_device_info *info,
                           pgd_error **err)
{
    cl_int cl = clGetDeviceInfo(device, CL_DEVICE_PLATFORM, sizeof *platform, platform, NULL);
    if (cl != CL_SUCCESS)
        return pgd__cl_fail(err, cl, "clGetDeviceInfo",
                            "the cl_device_id given to "
                            "pgd_ctx_create_from_cl is not a valid device");
    cl_platform_id plats[64];
    cl_uint np = 0;
    int pi = -1, di = -1;
    if (clGetPlatformIDs(64, plats, &np) != CL_SUCCESS)
        np = 0;
    for (cl_uint i = 0; i < np && i < 64 && pi < 0; i++) {
        if (plats[i] != *platform)
            continue;
        pi = (int)i;
        cl_device_id devs[64];
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[i], CL_DEVICE_TYPE_ALL, 64, devs, &nd) != CL_SUCCESS)
            nd = 0;
        for (cl_uint j = 0; j < nd && j < 64; j++)
            if (devs[j] == device)
                di = (int)j;
    }
    pgd__device_query(*platform, device, pi, di, info);
    return PGD_OK;
}

/* PGD_OK when `device` is one of `context`'s devices. */
static int check_context_device(cl_context context, cl_device_id device, pgd_error **err)
{
    size_t size = 0;
    cl_int cl = clGetContextInfo(context, CL_CONTEXT_DEVICES, 0, NULL, &size);
    if (cl != CL_SUCCESS)
        return pgd__cl_fail(err, cl, "clGetContextInfo",
                            "the cl_context given to "
                            "pgd_ctx_create_from_cl is not a valid context");
    cl_device_id *devs = malloc(size ? size : 1);
    if (!devs)
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "the context's device list");
    cl = clGetContextInfo(context, CL_CONTEXT_DEVICES, size, devs, NULL);
    int found = 0;
    for (size_t i = 0; cl == CL_SUCCESS && i < size / sizeof *devs; i++)
        found |= devs[i] == device;
    free(devs);
    if (cl != CL_SUCCESS)
        return pgd__cl_fail(err, cl, "clGetContextInfo", "listing the cl_context's devices");
    if (!found)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "pgd_ctx_create_from_cl: the cl_device_id is not one of the "
                              "cl_context's devices");
    return PGD_OK;
}

/* PGD_OK when the caller's queue is on `context` and `device` and executes in order. */
static int check_queue(cl_command_queue queue, cl_context context, cl_device_id device,
                       pgd_error **err)
{
    cl_context qc = NULL;
    cl_device_id qd = NULL;
    cl_command_queue_properties props = 0;
    cl_int cl = clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof qc, &qc, NULL);
    if (cl == CL_SUCCESS)
        cl = clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof qd, &qd, NULL);
    if (cl == CL_SUCCESS)
        cl = clGetCommandQueueInfo(queue, CL_QUEUE_PROPERTIES, sizeof props, &props, NULL);
    if (cl != CL_SUCCESS)
        return pgd__cl_fail(err, cl, "clGetCommandQueueInfo",
                            "the cl_command_queue given to "
                            "pgd_ctx_create_from_cl is not a valid queue");
    if (qc != context || qd != device)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "pgd_ctx_create_from_cl: the cl_command_queue belongs to another "
                              "%s than the one given",
                              qc != context ? "cl_context" : "device");
    if (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "pgd_ctx_create_from_cl: the cl_command_queue executes out of order; "
                              "Pagoda's ops rely on queue order (make an in-order queue, or pass "
                              "NULL for one of Pagoda's)");
    return PGD_OK;
}

static int check_cl_args(cl_context context, cl_device_id device, cl_command_queue queue,
                         pgd_error **err)
{
    if (!context || !device)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "pgd_ctx_create_from_cl: the %s is NULL",
                              !context ? "cl_context" : "cl_device_id");
    int rc = check_context_device(context, device, err);
    if (!rc && queue)
        rc = check_queue(queue, context, device, err);
    return rc;
}

int pgd_ctx_create_from_cl(cl_context context, cl_device_id device, cl_command_queue queue,
                           const pgd_ctx_options *opt, pgd_ctx **out, pgd_error **err)
{
    *out = NULL;
    int rc = check_cl_args(context, device, queue, err);
    if (rc)
        return rc;
    pgd_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "allocating a context");
    if ((rc = pgd__options_copy(&ctx->opt, &ctx->knobs, opt, err))) {
        free(ctx);
        return rc;
    }
    if ((rc = describe_device(device, &ctx->platform, &ctx->dev, err))) {
        pgd__options_free(&ctx->opt);
        free(ctx);
        return rc;
    }
    if (!queue) {
        cl_int cl = CL_SUCCESS;
        queue = clCreateCommandQueue(context, device, CL_QUEUE_PROFILING_ENABLE, &cl);
        if (!queue) {
            rc = pgd__cl_fail(err, cl, "clCreateCommandQueue",
                              "on the caller's context, device "
                              "'%s'",
                              ctx->dev.name);
            pgd__options_free(&ctx->opt);
            free(ctx);
            return rc;
        }
    } else {
        clRetainCommandQueue(queue);
    }
    clRetainContext(context);
    clRetainDevice(device);
    ctx->context = context;
    ctx->device = device;
    ctx->device_retained = 1;
    ctx->queue = queue;
    if ((rc = pgd__ctx_open_rest(ctx, err)))
        return rc;
    *out = ctx;
    return PGD_OK;
}

cl_context pgd_ctx_cl_context(const pgd_ctx *ctx)
{
    return ctx->context;
}
cl_device_id pgd_ctx_cl_device(const pgd_ctx *ctx)
{
    return ctx->device;
}
cl_command_queue pgd_ctx_cl_queue(const pgd_ctx *ctx)
{
    return ctx->queue;
}

/* ---- events ---- */

int pgd_ctx_last_event(pgd_ctx *ctx, cl_event *out, pgd_error **err)
{
    *out = NULL;
    cl_int cl = clEnqueueMarkerWithWaitList(ctx->queue, 0, NULL, out);
    if (cl != CL_SUCCESS)
        return pgd__cl_fail(err, cl, "clEnqueueMarkerWithWaitList", "on '%s'", ctx->dev.name);
    /* Flushed, so that another queue waiting for the event does not wait forever: a driver
     * may hold unflushed commands back (Mesa's rusticl does). */
    cl = clFlush(ctx->queue);
    if (cl != CL_SUCCESS) {
        clReleaseEvent(*out);
        *out = NULL;
        return pgd__cl_fail(err, cl, "clFlush", "on '%s'", ctx->dev.name);
    }
    return PGD_OK;
}

int pgd_ctx_wait_events(pgd_ctx *ctx, cl_uint count, const cl_event *events, pgd_error **err)
{
    if (count == 0)
        return PGD_OK;
    if (!events)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "pgd_ctx_wait_events: %u events but the list is NULL", count);
    for (cl_uint i = 0; i < count; i++)
        if (!events[i])
            return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                  "pgd_ctx_wait_events: event %u of %u is NULL", i, count);
    cl_int cl = clEnqueueBarrierWithWaitList(ctx->queue, count, events, NULL);
    if (cl != CL_SUCCESS)
        return pgd__cl_fail(err, cl, "clEnqueueBarrierWithWaitList", "%u events on '%s'", count,
                            ctx->dev.name);
    return PGD_OK;
}

/* ---- a tensor over the caller's buffer ---- */

/* The device's base address alignment in bytes (what sub-buffer origins and zero-copy host
 * pointers need), at least `floor`. */
static size_t base_align(const pgd_ctx *ctx, size_t floor)
{
    size_t a = ctx->dev.mem_base_align / 8;
    return a > floor ? a : floor;
}

/* PGD_OK when `strides` (NULL: none given) are the row-major ones of `shape`, ignoring the
 * strides of size-1 dims (any value addresses the same elements). */
static int check_strides(int ndim, const int64_t *shape, const int64_t *strides, pgd_error **err)
{
    if (!strides)
        return PGD_OK;
    int64_t want = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        if (strides[i] < 0)
            return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                  "pgd_tensor_wrap_cl: stride %d is %" PRId64
                                  " (strides must not be negative)",
                                  i, strides[i]);
        if (shape[i] != 1 && strides[i] != want)
            return pgd__error_set(err, PGD_ERR_UNSUPPORTED,
                                  "pgd_tensor_wrap_cl: stride %d is %" PRId64 " but the "
                                  "row-major stride of that dim is %" PRId64 ": Pagoda's tensors "
                                  "are contiguous (address other layouts with pgd_matrix or "
                                  "pgd_view over the whole storage, or copy)",
                                  i, strides[i], want);
        want *= shape[i];
    }
    return PGD_OK;
}

/* The caller's buffer checked: ctx's cl_context, a buffer, large enough for `need` bytes from
 * `offset`. Resolves a sub-buffer to its parent (*root, *root_offset: the origin added). */
static int check_buffer(pgd_ctx *ctx, cl_mem buf, size_t offset, uint64_t need, cl_mem *root,
                        size_t *root_offset, pgd_error **err)
{
    cl_context bc = NULL;
    cl_mem_object_type type = 0;
    size_t size = 0, origin = 0;
    cl_mem assoc = NULL;
    cl_int cl = clGetMemObjectInfo(buf, CL_MEM_CONTEXT, sizeof bc, &bc, NULL);
    if (cl == CL_SUCCESS)
        cl = clGetMemObjectInfo(buf, CL_MEM_TYPE, sizeof type, &type, NULL);
    if (cl == CL_SUCCESS)
        cl = clGetMemObjectInfo(buf, CL_MEM_SIZE, sizeof size, &size, NULL);
    if (cl == CL_SUCCESS)
        cl = clGetMemObjectInfo(buf, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof assoc, &assoc, NULL);
    if (cl == CL_SUCCESS && assoc)
        cl = clGetMemObjectInfo(buf, CL_MEM_OFFSET, sizeof origin, &origin, NULL);
    if (cl != CL_SUCCESS)
        return pgd__cl_fail(err, cl, "clGetMemObjectInfo",
                            "pgd_tensor_wrap_cl: the cl_mem is not a valid memory object");
    if (bc != ctx->context)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "pgd_tensor_wrap_cl: the cl_mem belongs to another cl_context than "
                              "the Pagoda context's (on '%s')",
                              ctx->dev.name);
    if (type != CL_MEM_OBJECT_BUFFER)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "pgd_tensor_wrap_cl: the cl_mem is not a buffer (an image or pipe)");
    if (offset > size || need > size - offset)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "pgd_tensor_wrap_cl: the view needs %" PRIu64 " bytes from byte "
                              "offset %zu but the buffer holds %zu bytes (CL_MEM_SIZE)",
                              need, offset, size);
    *root = assoc ? assoc : buf;
    *root_offset = origin + offset;
    return PGD_OK;
}

static int check_wrap_args(pgd_ctx *ctx, cl_mem buf, size_t offset, pgd_dtype dtype, int ndim,
                           const int64_t *shape, const int64_t *strides, uint64_t *numel,
                           pgd_error **err)
{
    if (!buf)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "pgd_tensor_wrap_cl: the cl_mem is NULL");
    if (dtype != PGD_DTYPE_F32)
        return pgd__error_set(err, PGD_ERR_UNSUPPORTED,
                              "pgd_tensor_wrap_cl: dtype %s: Pagoda's tensors are float32 "
                              "(PGD_DTYPE_F32)",
                              pgd_dtype_name(dtype));
    int rc = pgd__tensor_numel(ndim, shape, numel, err);
    if (!rc)
        rc = check_strides(ndim, shape, strides, err);
    if (rc)
        return rc;
    size_t align = base_align(ctx, 4);
    if (offset % align)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "pgd_tensor_wrap_cl: byte offset %zu is not a multiple of %zu, the "
                              "base address alignment of '%s' (CL_DEVICE_MEM_BASE_ADDR_ALIGN)",
                              offset, align, ctx->dev.name);
    return PGD_OK;
}

int pgd_tensor_wrap_cl(pgd_ctx *ctx, cl_mem buf, size_t offset, pgd_dtype dtype, int ndim,
                       const int64_t *shape, const int64_t *strides, pgd_tensor **out,
                       pgd_error **err)
{
    *out = NULL;
    uint64_t numel = 0;
    int rc = check_wrap_args(ctx, buf, offset, dtype, ndim, shape, strides, &numel, err);
    cl_mem root = NULL;
    size_t root_offset = 0;
    if (!rc)
        rc = check_buffer(ctx, buf, offset, numel * sizeof(float), &root, &root_offset, err);
    if (rc)
        return rc;
    size_t bytes = (size_t)numel * sizeof(float);
    pgd_tensor *t = pgd__tensor_handle(ctx, ndim, shape);
    if (!t)
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "tensor handle");
    t->foreign = 1;
    t->offset = offset;
    t->parent = buf;
    clRetainMemObject(buf);
    if (root_offset == 0 || bytes == 0) {
        /* The view starts where the root buffer does (or holds nothing): no sub-buffer. */
        t->buf = root;
        t->bytes = bytes;
        clRetainMemObject(root);
        *out = t;
        return PGD_OK;
    }
    cl_buffer_region region = {root_offset, bytes};
    cl_int cl = CL_SUCCESS;
    t->buf = clCreateSubBuffer(root, 0, CL_BUFFER_CREATE_TYPE_REGION, &region, &cl);
    if (!t->buf) {
        pgd_tensor_destroy(t);
        return pgd__cl_fail(err, cl, "clCreateSubBuffer",
                            "pgd_tensor_wrap_cl: %zu bytes at byte "
                            "%zu of the caller's buffer on '%s'",
                            bytes, root_offset, ctx->dev.name);
    }
    t->bytes = bytes;
    *out = t;
    return PGD_OK;
}

cl_mem pgd_tensor_cl_mem(const pgd_tensor *t, size_t *offset)
{
    if (offset)
        *offset = t->parent ? t->offset : 0;
    return t->parent ? t->parent : t->buf;
}

/* ---- host views ---- */

size_t pgd_ctx_host_alignment(const pgd_ctx *ctx)
{
    return ctx->dev.unified_memory ? base_align(ctx, 64) : 0;
}

void *pgd_tensor_host_data(const pgd_tensor *t)
{
    return t->host;
}

int pgd_tensor_map(pgd_tensor *t, void **ptr, pgd_error **err)
{
    *ptr = NULL;
    size_t bytes = (size_t)pgd_tensor_get_numel(t) * sizeof(float);
    if (!bytes) {
        /* Nothing to map; OpenCL refuses an empty region. Any non-NULL address will do. */
        *ptr = t->host ? t->host : (void *)t;
        return PGD_OK;
    }
    cl_int cl = CL_SUCCESS;
    *ptr = clEnqueueMapBuffer(t->ctx->queue, t->buf, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, bytes,
                              0, NULL, NULL, &cl);
    if (!*ptr) {
        char s[256];
        return pgd__cl_fail(err, cl, "clEnqueueMapBuffer", "mapping tensor %s (%zu bytes) on '%s'",
                            pgd_tensor_shape_str(t, s, sizeof s), bytes, t->ctx->dev.name);
    }
    return PGD_OK;
}

int pgd_tensor_unmap(pgd_tensor *t, void *ptr, pgd_error **err)
{
    if (!ptr)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "pgd_tensor_unmap: the pointer is NULL");
    if (pgd_tensor_get_numel(t) == 0)
        return PGD_OK;
    cl_int cl = clEnqueueUnmapMemObject(t->ctx->queue, t->buf, ptr, 0, NULL, NULL);
    if (cl != CL_SUCCESS) {
        char s[256];
        return pgd__cl_fail(err, cl, "clEnqueueUnmapMemObject", "unmapping tensor %s on '%s'",
                            pgd_tensor_shape_str(t, s, sizeof s), t->ctx->dev.name);
    }
    return PGD_OK;
}

static int check_host_args(pgd_ctx *ctx, const void *data, pgd_error **err)
{
    if (!ctx->dev.unified_memory)
        return pgd__error_set(err, PGD_ERR_UNSUPPORTED,
                              "pgd_tensor_wrap_host: the memory of '%s' is not the host's "
                              "(CL_DEVICE_HOST_UNIFIED_MEMORY is false): upload a copy instead",
                              ctx->dev.name);
    if (!data)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "pgd_tensor_wrap_host: the host pointer is NULL");
    size_t align = pgd_ctx_host_alignment(ctx);
    if ((uintptr_t)data % align)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "pgd_tensor_wrap_host: host pointer %p is not aligned to %zu bytes, "
                              "what '%s' needs to use it in place (pgd_ctx_host_alignment)",
                              data, align, ctx->dev.name);
    return PGD_OK;
}

/* PGD_OK when mapping t gives the caller's own memory back: the driver uses it in place. */
static int check_in_place(pgd_tensor *t, pgd_error **err)
{
    void *p = NULL;
    int rc = pgd_tensor_map(t, &p, err);
    if (rc)
        return rc;
    int same = p == t->host;
    rc = pgd_tensor_unmap(t, p, err);
    if (!rc)
        rc = pgd_ctx_finish(t->ctx, err);
    if (!rc && !same)
        rc = pgd__error_set(err, PGD_ERR_UNSUPPORTED,
                            "pgd_tensor_wrap_host: '%s' copies the host memory at %p instead of "
                            "using it in place (mapping gave %p): upload a copy instead",
                            t->ctx->dev.name, t->host, p);
    return rc;
}

int pgd_tensor_wrap_host(pgd_ctx *ctx, void *data, int ndim, const int64_t *shape, pgd_tensor **out,
                         pgd_error **err)
{
    *out = NULL;
    uint64_t numel = 0;
    int rc = check_host_args(ctx, data, err);
    if (!rc)
        rc = pgd__tensor_numel(ndim, shape, &numel, err);
    if (!rc)
        rc = pgd__check_alloc(ctx, numel * sizeof(float), "a host tensor", err);
    if (rc)
        return rc;
    pgd_tensor *t = pgd__tensor_handle(ctx, ndim, shape);
    if (!t)
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "tensor handle");
    t->foreign = 1;
    t->host = data;
    t->bytes = (size_t)numel * sizeof(float);
    if (numel == 0) {
        *out = t; /* no memory to share; ops do nothing with an empty tensor */
        return PGD_OK;
    }
    cl_int cl = CL_SUCCESS;
    t->buf =
        clCreateBuffer(ctx->context, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, t->bytes, data, &cl);
    if (!t->buf) {
        rc = pgd__cl_fail(err, cl, "clCreateBuffer",
                          "pgd_tensor_wrap_host: %zu bytes at %p on "
                          "'%s'",
                          t->bytes, data, ctx->dev.name);
        pgd_tensor_destroy(t);
        return rc;
    }
    if ((rc = check_in_place(t, err))) {
        pgd_tensor_destroy(t);
        return rc;
    }
    *out = t;
    return PGD_OK;
}
