/* program.c — kernel sources (embedded or from $PAGODA_CL_DIR), per-device build options,
 * build logs, and the in-memory program table backed by the disk cache. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct kernel_entry {
    char name[128];
    cl_kernel kernel;
} kernel_entry;

struct pgd__program_entry {
    struct pgd__program_entry *next;
    char *name;
    char *options; /* the full option string given to the driver */
    cl_program program;
    kernel_entry *kernels;
    cl_uint nkernels;
    char key[65];  /* the disk cache key */
    int from_disk; /* built from a cached binary */
    /* Replaced after its cached binary turned out to lack a kernel. Lookups skip it; it stays
     * in the table until the table is dropped, since callers may still hold its kernels. */
    int stale;
};

static const char *program_names[64];

static void fill_program_names(void)
{
    size_t i = 0;
    for (; pgd__embedded_sources[i].name && i < 63; i++)
        program_names[i] = pgd__embedded_sources[i].name;
    program_names[i] = NULL;
}

const char *const *pgd_program_names(void)
{
    /* Filled once, whichever thread asks first (contexts may live on different threads). */
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, fill_program_names);
    return program_names;
}

int pgd__source_load(const char *dir, const char *file, char **out, pgd_error **err)
{
    *out = NULL;
    if (dir && *dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.cl", dir, file);
        unsigned char *data = NULL;
        size_t size = 0;
        int rc = pgd__file_read(path, "kernel source (kernel_dir, $PAGODA_CL_DIR)",
                                PGD__MAX_SOURCE_BYTES, &data, &size, err);
        if (rc)
            return rc;
        *out = (char *)data;
        return PGD_OK;
    }
    for (size_t i = 0; pgd__embedded_sources[i].name; i++) {
        if (!strcmp(pgd__embedded_sources[i].name, file)) {
            *out = pgd__strdup(pgd__embedded_sources[i].text);
            return *out
                       ? PGD_OK
                       : pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "copying source %s", file);
        }
    }
    return pgd__error_set(err, PGD_ERR_NOT_FOUND, "no kernel file '%s.cl' is embedded in libpagoda",
                          file);
}

static char *build_log(pgd_ctx *ctx, cl_program prog)
{
    size_t n = 0;
    if (clGetProgramBuildInfo(prog, ctx->device, CL_PROGRAM_BUILD_LOG, 0, NULL, &n) != CL_SUCCESS)
        return pgd__strdup("(no build log available)");
    char *log = malloc(n + 1);
    if (!log)
        return NULL;
    if (clGetProgramBuildInfo(prog, ctx->device, CL_PROGRAM_BUILD_LOG, n, log, NULL) != CL_SUCCESS)
        n = 0;
    log[n] = 0;
    return log;
}

/* Options every program gets: the OpenCL C standard the device supports, capped at 1.2 since
 * our kernels are written for 1.2; a program whose options name a standard themselves (the
 * integer dot products of cl_khr_integer_dot_product exist only from OpenCL C 2.0) keeps it. */
static void full_options(const pgd_ctx *ctx, const char *extra, char *buf, size_t size)
{
    const char *std = extra && strstr(extra, "-cl-std=") ? ""
                      : (ctx->dev.opencl_c_major > 1 || ctx->dev.opencl_c_minor >= 2)
                          ? "-cl-std=CL1.2"
                      : ctx->dev.opencl_c_minor >= 1 ? "-cl-std=CL1.1"
                                                     : "";
    snprintf(buf, size, "%s%s%s", std, extra && *extra ? " " : "", extra ? extra : "");
}

static int create_kernels(pgd_ctx *ctx, pgd__program_entry *e, pgd_error **err)
{
    cl_uint n = 0;
    cl_int cl = clCreateKernelsInProgram(e->program, 0, NULL, &n);
    if (cl != CL_SUCCESS)
        return pgd__cl_fail(err, cl, "clCreateKernelsInProgram", "program '%s' on '%s'", e->name,
                            ctx->dev.name);
    if (n == 0)
        return PGD_OK;
    cl_kernel *ks = calloc(n, sizeof *ks);
    e->kernels = calloc(n, sizeof *e->kernels);
    if (!ks || !e->kernels) {
        free(ks);
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "kernels of '%s'", e->name);
    }
    cl = clCreateKernelsInProgram(e->program, n, ks, NULL);
    if (cl != CL_SUCCESS) {
        free(ks);
        return pgd__cl_fail(err, cl, "clCreateKernelsInProgram", "program '%s' on '%s'", e->name,
                            ctx->dev.name);
    }
    for (cl_uint i = 0; i < n; i++) {
        e->kernels[i].kernel = ks[i];
        if (clGetKernelInfo(ks[i], CL_KERNEL_FUNCTION_NAME, sizeof e->kernels[i].name,
                            e->kernels[i].name, NULL) != CL_SUCCESS)
            e->kernels[i].name[0] = 0;
        e->kernels[i].name[sizeof e->kernels[i].name - 1] = 0;
    }
    e->nkernels = n;
    free(ks);
    return PGD_OK;
}

static void release_entry(pgd__program_entry *e)
{
    for (cl_uint i = 0; i < e->nkernels; i++)
        clReleaseKernel(e->kernels[i].kernel);
    free(e->kernels);
    if (e->program)
        clReleaseProgram(e->program);
    free(e->name);
    free(e->options);
    free(e);
}

/* Tries the disk cache. Returns 1 with e->program built and kernels created, 0 otherwise. */
static int try_cached(pgd_ctx *ctx, pgd__program_entry *e, const char *key)
{
    unsigned char *bin = NULL;
    size_t size = 0;
    int got = pgd__cache_load(ctx->cache_dir, key, &bin, &size);
    if (got < 0)
        ctx->stats.disk_rejects++;
    if (got <= 0)
        return 0;
    cl_int status = CL_SUCCESS, cl = CL_SUCCESS;
    const unsigned char *bins[1] = {bin};
    e->program =
        clCreateProgramWithBinary(ctx->context, 1, &ctx->device, &size, bins, &status, &cl);
    free(bin);
    if (e->program && cl == CL_SUCCESS && status == CL_SUCCESS)
        cl = clBuildProgram(e->program, 1, &ctx->device, e->options, NULL, NULL);
    if (e->program && cl == CL_SUCCESS && status == CL_SUCCESS &&
        create_kernels(ctx, e, NULL) == 0) {
        e->from_disk = 1;
        return 1;
    }
    /* The driver refused the binary (another driver version, a damaged file that still had a
     * valid checksum, ...): delete it and build from source. */
    for (cl_uint i = 0; i < e->nkernels; i++)
        clReleaseKernel(e->kernels[i].kernel);
    free(e->kernels);
    e->kernels = NULL;
    e->nkernels = 0;
    if (e->program)
        clReleaseProgram(e->program);
    e->program = NULL;
    pgd__cache_remove(ctx->cache_dir, key);
    ctx->stats.disk_rejects++;
    return 0;
}

static void store_binary(pgd_ctx *ctx, pgd__program_entry *e, const char *key)
{
    size_t size = 0;
    if (clGetProgramInfo(e->program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL) !=
            CL_SUCCESS ||
        size == 0)
        return;
    unsigned char *bin = malloc(size);
    if (!bin)
        return;
    unsigned char *bins[1] = {bin};
    if (clGetProgramInfo(e->program, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL) == CL_SUCCESS &&
        pgd__cache_store(ctx->cache_dir, key, bin, size) == 0)
        ctx->stats.disk_writes++;
    free(bin);
}

/* The program `name` built from `source` with `options`: from the table, the disk cache (unless
 * `source_only`) or the source. */
static int program_get(pgd_ctx *ctx, const char *name, const char *source, const char *options,
                       int source_only, pgd__program_entry **out, pgd_error **err)
{
    char opts[4096];
    full_options(ctx, options, opts, sizeof opts);
    ctx->stats.programs_requested++;
    for (pgd__program_entry *e = ctx->programs; e; e = e->next) {
        if (!e->stale && !strcmp(e->name, name) && !strcmp(e->options, opts)) {
            ctx->stats.memory_hits++;
            *out = e;
            return PGD_OK;
        }
    }
    pgd__program_entry *e = calloc(1, sizeof *e);
    if (!e || !(e->name = pgd__strdup(name)) || !(e->options = pgd__strdup(opts))) {
        if (e)
            free(e->name);
        free(e);
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "program table entry");
    }
    double t0 = pgd__now_ms();
    char *key = e->key;
    pgd__cache_key(&ctx->dev, source, opts, key);
    int from_cache = ctx->cache_dir && !source_only && try_cached(ctx, e, key);
    if (from_cache) {
        ctx->stats.disk_hits++;
    } else {
        cl_int cl = CL_SUCCESS;
        size_t len = strlen(source);
        e->program = clCreateProgramWithSource(ctx->context, 1, &source, &len, &cl);
        if (!e->program) {
            int rc = pgd__cl_fail(err, cl, "clCreateProgramWithSource", "program '%s' on '%s'",
                                  name, ctx->dev.name);
            release_entry(e);
            return rc;
        }
        cl = clBuildProgram(e->program, 1, &ctx->device, opts, NULL, NULL);
        if (cl != CL_SUCCESS) {
            char *log = build_log(ctx, e->program);
            int rc = pgd__cl_fail(err, cl, "clBuildProgram",
                                  "building '%s.cl' for device '%s' (%s) with options '%s'\n"
                                  "build log:\n%s",
                                  name, ctx->dev.name, ctx->dev.platform, opts, log ? log : "");
            pgd__error_set_log(err, log ? log : "");
            free(log);
            release_entry(e);
            return rc == PGD_ERR_OPENCL ? PGD_ERR_BUILD : rc;
        }
        int rc = create_kernels(ctx, e, err);
        if (rc) {
            release_entry(e);
            return rc;
        }
        ctx->stats.source_builds++;
        /* Saved only now: some drivers compile lazily at kernel creation. */
        if (ctx->cache_dir)
            store_binary(ctx, e, key);
    }
    ctx->stats.build_ms += pgd__now_ms() - t0;
    e->next = ctx->programs;
    ctx->programs = e;
    *out = e;
    return PGD_OK;
}

int pgd__program_get_source(pgd_ctx *ctx, const char *name, const char *source, const char *options,
                            cl_program *out, pgd_error **err)
{
    pgd__program_entry *e = NULL;
    int rc = program_get(ctx, name, source, options, 0, &e, err);
    *out = rc ? NULL : e->program;
    return rc;
}

static int program_file(pgd_ctx *ctx, const char *file, const char *options, int source_only,
                        pgd__program_entry **out, pgd_error **err)
{
    char opts[4096];
    full_options(ctx, options, opts, sizeof opts);
    /* The table is looked up before the source is read, so a hit costs no file access. */
    for (pgd__program_entry *e = ctx->programs; e; e = e->next) {
        if (!e->stale && !strcmp(e->name, file) && !strcmp(e->options, opts)) {
            ctx->stats.programs_requested++;
            ctx->stats.memory_hits++;
            *out = e;
            return PGD_OK;
        }
    }
    char *src = NULL;
    int rc = pgd__source_load(ctx->opt.kernel_dir, file, &src, err);
    if (rc)
        return rc;
    rc = program_get(ctx, file, src, options, source_only, out, err);
    free(src);
    return rc;
}

pgd_status pgd_program_prepare(pgd_ctx *ctx, const char *name, const char *options, pgd_error **err)
{
    pgd__program_entry *e = NULL;
    return program_file(ctx, name, options, 0, &e, err);
}

static cl_kernel find_kernel(const pgd__program_entry *e, const char *kernel)
{
    for (cl_uint i = 0; i < e->nkernels; i++)
        if (!strcmp(e->kernels[i].name, kernel))
            return e->kernels[i].kernel;
    return NULL;
}

int pgd__kernel_get(pgd_ctx *ctx, const char *file, const char *options, const char *kernel,
                    cl_kernel *out, pgd_error **err)
{
    *out = NULL;
    pgd__program_entry *e = NULL;
    int rc = program_file(ctx, file, options, 0, &e, err);
    if (rc)
        return rc;
    if ((*out = find_kernel(e, kernel)) != NULL)
        return PGD_OK;
    if (e->from_disk) {
        /* A cached binary whose header matched the key but which lacks a kernel asked for is not
         * this program (a forged or misfiled entry): delete it, build from source once, and
         * look again. Only a source build that lacks the kernel is a real error. */
        pgd__cache_remove(ctx->cache_dir, e->key);
        ctx->stats.disk_rejects++;
        e->stale = 1;
        rc = program_file(ctx, file, options, 1, &e, err);
        if (rc)
            return rc;
        if ((*out = find_kernel(e, kernel)) != NULL)
            return PGD_OK;
    }
    return pgd__error_set(err, PGD_ERR_NOT_FOUND,
                          "kernel '%s' is not in '%s.cl' (options '%s') built for device '%s'",
                          kernel, file, e->options, ctx->dev.name);
}

void pgd__programs_destroy(pgd_ctx *ctx)
{
    while (ctx->programs) {
        pgd__program_entry *next = ctx->programs->next;
        release_entry(ctx->programs);
        ctx->programs = next;
    }
}

void pgd_ctx_clear_programs(pgd_ctx *ctx)
{
    clFinish(ctx->queue);
    pgd__programs_destroy(ctx);
}
