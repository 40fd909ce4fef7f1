/* pagoda_cl.h — interop: a Pagoda context over the caller's OpenCL context, device and queue;
 * tensors over the caller's cl_mem buffers; the cl_mem under a tensor; events to order the
 * caller's queue after Pagoda's work and the other way round; tensors over host memory and
 * host access to tensors with no copy on CPU devices (docs/interop.md).
 *
 * Separate from pagoda.h so that callers who do not use OpenCL themselves never need the
 * OpenCL headers: this one includes <CL/cl.h> (OpenCL 1.2 API unless the caller chose another
 * CL_TARGET_OPENCL_VERSION first) and then pagoda.h. Link with -lpagoda as usual.
 *
 * Threads: as for every context, one thread at a time per context; work the caller enqueues on
 * the same queue runs in queue order with Pagoda's (the queue is in order). */
#ifndef PAGODA_CL_H
#define PAGODA_CL_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include "pagoda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Opens a Pagoda context on `device` inside the caller's `context`, enqueueing on `queue`, or,
 * when queue is NULL, on a new in-order profiling queue Pagoda makes on that context and device.
 * Pagoda retains the three (clRetain*) and releases them in pgd_ctx_destroy; the caller may
 * release its own references at any time. Programs, the kernel cache, tuning choices and the
 * parameter database work as for pgd_ctx_create_with_options: the device's description is
 * queried the same way (platform_index/device_index are its indices in the platform lists, -1
 * for a device not listed there, such as a sub-device). `opt` as for
 * pgd_ctx_create_with_options (NULL: the defaults), except that opt->device is not used.
 * PGD_ERR_INVALID_ARGUMENT, naming the object, when context or device is NULL, the device is
 * not one of the context's, or the queue belongs to another context or device or executes out
 * of order (Pagoda's ops rely on queue order). A caller's queue made without
 * CL_QUEUE_PROFILING_ENABLE works, but pgd_profile_print then counts no launches. On error
 * nothing is retained or allocated. */
PGD_API int pgd_ctx_create_from_cl(cl_context context, cl_device_id device, cl_command_queue queue,
                                   const pgd_ctx_options *opt, pgd_ctx **out, pgd_error **err);
/* The OpenCL objects a context runs on (its own, or the caller's it retained). Owned by the
 * context: retain them to keep them past pgd_ctx_destroy. */
PGD_API cl_context pgd_ctx_cl_context(const pgd_ctx *ctx);
PGD_API cl_device_id pgd_ctx_cl_device(const pgd_ctx *ctx);
PGD_API cl_command_queue pgd_ctx_cl_queue(const pgd_ctx *ctx);

/* *out gets a new event (the caller releases it with clReleaseEvent) that completes when all
 * the work enqueued on ctx so far has completed: the last enqueued command's completion (a
 * marker on the context's in-order queue, flushed). Pass it in the wait list of the caller's
 * own queue to read Pagoda's results there without a clFinish. */
PGD_API int pgd_ctx_last_event(pgd_ctx *ctx, cl_event *out, pgd_error **err);
/* Work enqueued on ctx from now on starts only after the `count` events complete (a barrier
 * on the context's queue; the caller keeps its events): how a caller's writes on another queue
 * are ordered before Pagoda's ops. count 0 does nothing; events must not be NULL otherwise.
 * Events of another queue must have been flushed (clFlush) by the caller: a driver may hold
 * unflushed commands back and the wait would never end (Mesa's rusticl does). */
PGD_API int pgd_ctx_wait_events(pgd_ctx *ctx, cl_uint count, const cl_event *events,
                                pgd_error **err);

/* A tensor over the caller's buffer `buf`, with no copy: element 0 at byte `offset`, `ndim`
 * sizes in `shape` and element strides in `strides` (NULL: row-major contiguous). `dtype` is
 * pagoda.h's element type: PGD_DTYPE_F32, the one Pagoda's ops compute in. Pagoda's ops
 * read contiguous tensors, so strides must be the row-major ones of the shape (a size-1 dim may
 * have any stride, as DLPack and PyTorch give them); other layouts are PGD_ERR_UNSUPPORTED (wrap
 * the whole storage and address it with pgd_matrix or pgd_view, which take an ld and strides).
 * The buffer must belong to ctx's cl_context and hold offset + numel·4 bytes (CL_MEM_SIZE), and
 * a non-zero offset must be a multiple of the device's base address alignment
 * (CL_DEVICE_MEM_BASE_ADDR_ALIGN, in bytes; the view is a sub-buffer); a sub-buffer of the
 * caller's is accepted (its origin is added). Otherwise PGD_ERR_INVALID_ARGUMENT (or
 * PGD_ERR_UNSUPPORTED for another dtype or layout) naming the rule and the sizes. The tensor
 * retains `buf`; pgd_tensor_destroy releases it and never frees or pools it; it is not counted
 * in pgd_ctx_get_memory_stats. The caller orders its own use of the buffer with Pagoda's through
 * the queue (pgd_ctx_last_event, pgd_ctx_wait_events). On error nothing is allocated. */
PGD_API int pgd_tensor_wrap_cl(pgd_ctx *ctx, cl_mem buf, size_t offset, pgd_dtype dtype, int ndim,
                               const int64_t *shape, const int64_t *strides, pgd_tensor **out,
                               pgd_error **err);
/* The buffer holding t's elements and, in *offset (if not NULL), the byte offset of element 0
 * in it: for pgd_tensor_wrap_cl the caller's buffer and offset; otherwise the tensor's own
 * buffer (offset 0; it may be larger than the tensor, being pooled). Owned by the tensor:
 * retain it to keep it past pgd_tensor_destroy. */
PGD_API cl_mem pgd_tensor_cl_mem(const pgd_tensor *t, size_t *offset);

/* ---- host views ---- */

/* On a device whose memory is the host's (pgd_device_info.unified_memory:
 * CL_DEVICE_HOST_UNIFIED_MEMORY, true for PoCL's and Intel's CPU devices and rusticl on
 * llvmpipe), a tensor can live in the caller's memory and a tensor's memory can be read and
 * written by the host, with no copy either way. These take no OpenCL types. */

/* The alignment in bytes a host pointer needs for pgd_tensor_wrap_host on ctx's device
 * (CL_DEVICE_MEM_BASE_ADDR_ALIGN, at least 64); 0 when the device's memory is not the host's. */
PGD_API size_t pgd_ctx_host_alignment(const pgd_ctx *ctx);
/* A contiguous float32 tensor of `shape` over the caller's host memory at `data` (numel floats;
 * CL_MEM_USE_HOST_PTR), with no copy: what the host writes there is what ops read and the other
 * way round, once the work that uses the tensor has finished (pgd_ctx_finish) or between
 * pgd_tensor_map and pgd_tensor_unmap. The caller keeps the memory alive and unchanged while ops
 * run until pgd_tensor_destroy, which does not free it. PGD_ERR_UNSUPPORTED when the device's
 * memory is not the host's, or when the driver would copy after all (checked by mapping it);
 * PGD_ERR_INVALID_ARGUMENT for a NULL `data` or one not aligned to pgd_ctx_host_alignment.
 * The tensor is not counted in pgd_ctx_get_memory_stats. On error nothing is allocated. */
PGD_API int pgd_tensor_wrap_host(pgd_ctx *ctx, void *data, int ndim, const int64_t *shape,
                                 pgd_tensor **out, pgd_error **err);
/* The caller's memory under a tensor made by pgd_tensor_wrap_host; NULL for any other. */
PGD_API void *pgd_tensor_host_data(const pgd_tensor *t);
/* Maps the tensor's numel floats for host access (blocking: waits for the work queued before):
 * *ptr gets their address, valid until pgd_tensor_unmap(t, *ptr). On a device with unified
 * memory this is the tensor's own memory (no copy; for pgd_tensor_wrap_host the caller's
 * pointer); elsewhere the driver may copy in and out. Each map needs its unmap before the
 * tensor is destroyed; ops may not write the tensor while it is mapped. */
PGD_API int pgd_tensor_map(pgd_tensor *t, void **ptr, pgd_error **err);
/* Ends a mapping made by pgd_tensor_map (queued; later work on the tensor sees host writes). */
PGD_API int pgd_tensor_unmap(pgd_tensor *t, void *ptr, pgd_error **err);

#ifdef __cplusplus
}
#endif
#endif /* PAGODA_CL_H */
