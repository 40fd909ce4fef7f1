/* profile.c — kernel launches and their event timings, aggregated per kernel name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void pgd_ctx_set_profiling(pgd_ctx *ctx, int on)
{
    ctx->profiling = on != 0;
}

static int name_index(pgd_ctx *ctx, const char *name)
{
    for (size_t i = 0; i < ctx->totals_len; i++)
        if (!strcmp(ctx->totals[i].name, name))
            return (int)i;
    if (ctx->totals_len == ctx->totals_cap) {
        size_t cap = ctx->totals_cap ? ctx->totals_cap * 2 : 16;
        pgd__prof_total *t = realloc(ctx->totals, cap * sizeof *t);
        if (!t)
            return -1;
        ctx->totals = t;
        ctx->totals_cap = cap;
    }
    pgd__prof_total *t = &ctx->totals[ctx->totals_len];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    return (int)ctx->totals_len++;
}

/* Reads the timings of the collected events into the totals and releases the events. */
static void drain(pgd_ctx *ctx)
{
    for (size_t i = 0; i < ctx->events_len; i++) {
        pgd__prof_event *pe = &ctx->events[i];
        cl_ulong q = 0, s = 0, e = 0;
        if (clGetEventProfilingInfo(pe->ev, CL_PROFILING_COMMAND_QUEUED, sizeof q, &q, NULL) ==
                CL_SUCCESS &&
            clGetEventProfilingInfo(pe->ev, CL_PROFILING_COMMAND_START, sizeof s, &s, NULL) ==
                CL_SUCCESS &&
            clGetEventProfilingInfo(pe->ev, CL_PROFILING_COMMAND_END, sizeof e, &e, NULL) ==
                CL_SUCCESS) {
            pgd__prof_total *t = &ctx->totals[pe->name_index];
            t->launches++;
            t->queued_ms += s > q ? (double)(s - q) / 1e6 : 0;
            t->run_ms += e > s ? (double)(e - s) / 1e6 : 0;
        }
        clReleaseEvent(pe->ev);
    }
    ctx->events_len = 0;
}

int pgd__enqueue(pgd_ctx *ctx, cl_kernel k, const char *name, cl_uint dims, const size_t *global,
                 const size_t *local, pgd_error **err)
{
    return pgd__enqueue_at(ctx, k, name, dims, NULL, global, local, err);
}

int pgd__enqueue_at(pgd_ctx *ctx, cl_kernel k, const char *name, cl_uint dims, const size_t *offset,
                    const size_t *global, const size_t *local, pgd_error **err)
{
    for (cl_uint i = 0; i < dims; i++)
        if (global[i] == 0)
            return PGD_OK; /* an empty launch does nothing; OpenCL would call it an error */
    cl_event ev = NULL;
    cl_event *evp = NULL;
    int idx = -1;
    if (ctx->profiling) {
        idx = name_index(ctx, name);
        /* Bound the number of pending events: drain once the queue has caught up. */
        if (idx >= 0 && ctx->events_len >= 4096) {
            clFinish(ctx->queue);
            drain(ctx);
        }
        if (idx >= 0 && ctx->events_len == ctx->events_cap) {
            size_t cap = ctx->events_cap ? ctx->events_cap * 2 : 256;
            pgd__prof_event *e = realloc(ctx->events, cap * sizeof *e);
            if (e) {
                ctx->events = e;
                ctx->events_cap = cap;
            }
        }
        if (idx >= 0 && ctx->events_len < ctx->events_cap)
            evp = &ev;
    }
    cl_int cl = clEnqueueNDRangeKernel(ctx->queue, k, dims, offset, global, local, 0, NULL, evp);
    if (cl != CL_SUCCESS) {
        char sizes[128];
        snprintf(sizes, sizeof sizes, "global %zu,%zu,%zu local %zu,%zu,%zu offset %zu", global[0],
                 dims > 1 ? global[1] : (size_t)1, dims > 2 ? global[2] : (size_t)1,
                 local ? local[0] : (size_t)0, local && dims > 1 ? local[1] : (size_t)0,
                 local && dims > 2 ? local[2] : (size_t)0, offset ? offset[0] : (size_t)0);
        return pgd__cl_fail(err, cl, "clEnqueueNDRangeKernel", "kernel '%s' (%s) on '%s'", name,
                            sizes, ctx->dev.name);
    }
    if (evp) {
        ctx->events[ctx->events_len].ev = ev;
        ctx->events[ctx->events_len].name_index = idx;
        ctx->events_len++;
    }
    return PGD_OK;
}

static int by_time(const void *a, const void *b)
{
    const pgd__prof_total *x = a, *y = b;
    return (x->run_ms < y->run_ms) - (x->run_ms > y->run_ms);
}

pgd_status pgd_profile_print(pgd_ctx *ctx, FILE *f, pgd_error **err)
{
    int rc = pgd_ctx_finish(ctx, err);
    if (rc)
        return rc;
    drain(ctx);
    double total = 0;
    for (size_t i = 0; i < ctx->totals_len; i++)
        total += ctx->totals[i].run_ms;
    pgd__prof_total *sorted = malloc((ctx->totals_len + 1) * sizeof *sorted);
    if (!sorted)
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "profile table");
    if (ctx->totals_len)
        memcpy(sorted, ctx->totals, ctx->totals_len * sizeof *sorted);
    qsort(sorted, ctx->totals_len, sizeof *sorted, by_time);
    fprintf(f, "profile on %s (%s)\n", ctx->dev.name, ctx->dev.platform);
    fprintf(f, "%-32s %8s %12s %12s %10s %6s\n", "kernel", "launches", "run ms", "queued ms",
            "mean ms", "share");
    for (size_t i = 0; i < ctx->totals_len; i++) {
        const pgd__prof_total *t = &sorted[i];
        if (!t->launches)
            continue;
        fprintf(f, "%-32s %8lu %12.3f %12.3f %10.4f %5.1f%%\n", t->name, t->launches, t->run_ms,
                t->queued_ms, t->run_ms / (double)t->launches,
                total > 0 ? 100.0 * t->run_ms / total : 0.0);
    }
    fprintf(f, "%-32s %8s %12.3f\n", "total", "", total);
    free(sorted);
    return PGD_OK;
}

void pgd_profile_reset(pgd_ctx *ctx)
{
    clFinish(ctx->queue);
    drain(ctx);
    ctx->totals_len = 0;
}

void pgd__profile_destroy(pgd_ctx *ctx)
{
    for (size_t i = 0; i < ctx->events_len; i++)
        clReleaseEvent(ctx->events[i].ev);
    free(ctx->events);
    free(ctx->totals);
    ctx->events = NULL;
    ctx->totals = NULL;
    ctx->events_len = ctx->totals_len = 0;
}
