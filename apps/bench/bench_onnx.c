/* bench_onnx.c — `pagoda bench MODEL.onnx[:B]`: an ONNX file's forward pass timed like the
 * model items (seeded random inputs of the declared shapes, symbolic dims set to B), in the same
 * JSON records, so --compare, the plots and tools/bench/bench-peers line it up with ONNX Runtime
 * and OpenVINO on the same file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_items.h"

/* "path.onnx" or "path.onnx:B" into the path and the batch (1 to 256). */
static int onnx_spec(const char *spec, char *path, size_t size, long *batch)
{
    const char *colon = strrchr(spec, ':');
    size_t n = strlen(spec);
    *batch = 1;
    if (colon && colon[1] && strspn(colon + 1, "0123456789") == strlen(colon + 1)) {
        int64_t v;
        if (pgd_parse_int64(colon + 1, 1, 256, &v))
            return -1;
        *batch = (long)v;
        n = (size_t)(colon - spec);
    }
    if (n < 6 || strncmp(spec + n - 5, ".onnx", 5) || n >= size)
        return -1;
    memcpy(path, spec, n);
    path[n] = 0;
    return 0;
}

int bench_is_onnx(const char *spec)
{
    char path[4096];
    long b;
    return !onnx_spec(spec, path, sizeof path, &b);
}

static int validate_onnx(const char *spec)
{
    return bench_is_onnx(spec) ? 0 : -1;
}

typedef struct onnx_state {
    pgd_graph *g;
    pgd_tensor *in[64], *out[64];
} onnx_state;

static int onnx_once(void *p, pgd_error **err)
{
    onnx_state *s = p;
    for (int k = 0; k < pgd_graph_num_outputs(s->g); k++)
        pgd_tensor_destroy(s->out[k]), s->out[k] = NULL;
    return pgd_graph_run(s->g, (const pgd_tensor *const *)s->in, s->out, err);
}

static int make_inputs(pgd_ctx *ctx, onnx_state *s, long batch, pgd_error **err)
{
    int nin = pgd_graph_num_inputs(s->g);
    if (nin > 64)
        return pgd_error_set(err, PGD_ERR_UNSUPPORTED, "bench: more than 64 inputs");
    for (int i = 0; i < nin; i++) {
        pgd_graph_io io;
        pgd_graph_get_input(s->g, i, &io);
        if (io.ndim < 0 || (io.elem_type && io.elem_type != 1))
            return pgd_error_set(err, PGD_ERR_UNSUPPORTED,
                                 "bench: input '%s' has no declared shape or is not float32",
                                 io.name);
        int64_t shape[PGD_MAX_DIMS], n = 1;
        for (int d = 0; d < io.ndim; d++)
            n = mul_sat(n, shape[d] = io.shape[d] >= 0 ? io.shape[d] : batch);
        int rc = check_fits(ctx, n, n, n, err);
        float *x = rc ? NULL : item_alloc(n, err);
        if (!x)
            return rc ? rc : PGD_ERR_OUT_OF_HOST_MEMORY;
        fill_rand(x, (size_t)n);
        rc = pgd_tensor_create_from(ctx, io.ndim, shape, x, &s->in[i], err);
        free(x);
        if (rc)
            return rc;
    }
    return PGD_OK;
}

static int run_onnx(pgd_ctx *ctx, const char *spec, const bench_opts *o, bench_result *res,
                    int *nres, int cap, pgd_error **err)
{
    (void)cap;
    char path[4096];
    long batch;
    if (onnx_spec(spec, path, sizeof path, &batch))
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT, "bench: '%s' is not MODEL.onnx[:B]",
                             spec);
    onnx_state s = {0};
    int rc = pgd_graph_load(ctx, path, &s.g, err);
    if (!rc)
        rc = make_inputs(ctx, &s, batch, err);
    bench_result *b = &res[0];
    if (!rc)
        rc = time_runs(ctx, (timed_fn){onnx_once, &s}, o, b, err);
    if (!rc) {
        const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        snprintf(b->name, sizeof b->name, "%.56s:%ld", base, batch);
        snprintf(b->params, sizeof b->params, "{\"batch\":%ld,\"onnx\":\"%.100s\"}", batch, base);
        b->flops = pgd_graph_flops(s.g);
        *nres = 1;
    }
    for (int k = 0; k < 64; k++)
        pgd_tensor_destroy(s.in[k]), pgd_tensor_destroy(s.out[k]);
    pgd_graph_destroy(s.g);
    return rc;
}

const bench_item bench_item_onnx = {
    ".onnx", "MODEL.onnx[:B]",
    "an ONNX model's forward pass (pagoda run's path), seeded random inputs of the declared "
    "shapes with symbolic dims set to B (default 1)",
    validate_onnx, run_onnx};
