/* kernel.c — the caller's own OpenCL C kernels on a context (pgd_kernel_*): built and cached
 * like the embedded programs, launched through the same profiled enqueue, every argument
 * checked where it is set. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct pgd_kernel {
    pgd_ctx *ctx;
    cl_kernel kernel;
    char name[128]; /* "program:function", for messages and the profile */
};

pgd_status pgd_kernel_create(pgd_ctx *ctx, const char *name, const char *source,
                             const char *options, const char *function, pgd_kernel **out,
                             pgd_error **err)
{
    *out = NULL;
    if (!name || !*name || !source || !function || !*function)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "custom kernel: a program name, a source and a function name are "
                              "needed");
    /* The program table is looked up by name and options: the caller's programs get a name of
     * their own ("user:<name>:<hash of the source>"), so they never take the place of an embedded
     * kernel file, and two sources under one name never share an entry. */
    unsigned char digest[32];
    char hex[65], pname[192];
    pgd__sha256 sh;
    pgd__sha256_init(&sh);
    pgd__sha256_update(&sh, source, strlen(source));
    pgd__sha256_final(&sh, digest);
    pgd__sha256_hex(digest, hex);
    snprintf(pname, sizeof pname, "user:%.100s:%.16s", name, hex);
    cl_program prog = NULL;
    int rc = pgd__program_get_source(ctx, pname, source, options ? options : "", &prog, err);
    if (rc)
        return rc;
    pgd_kernel *k = calloc(1, sizeof *k);
    if (!k)
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "custom kernel '%s'", function);
    cl_int cl;
    k->kernel = clCreateKernel(prog, function, &cl);
    if (!k->kernel) {
        free(k);
        return pgd__cl_fail(err, cl, "clCreateKernel", "function '%s' of program '%s' on '%s'",
                            function, name, ctx->dev.name);
    }
    k->ctx = ctx;
    snprintf(k->name, sizeof k->name, "%.60s:%.60s", name, function);
    *out = k;
    return PGD_OK;
}

void pgd_kernel_destroy(pgd_kernel *k)
{
    if (!k)
        return;
    clReleaseKernel(k->kernel);
    free(k);
}

/* One argument at an explicit index, through the library's argument helper (the error names
 * the index, the kernel and the real OpenCL code). */
static int set(pgd_kernel *k, unsigned index, size_t size, const void *value, pgd_error **err)
{
    pgd__args a;
    pgd__args_begin(&a, k->ctx, k->kernel, k->name);
    pgd__args_seek(&a, index);
    pgd__arg(&a, size, value);
    return pgd__args_end(&a, err);
}

pgd_status pgd_kernel_set_tensor(pgd_kernel *k, unsigned index, const pgd_tensor *t,
                                 pgd_error **err)
{
    if (!t || t->ctx != k->ctx)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "argument %u of kernel '%s': %s",
                              index, k->name,
                              t ? "the tensor belongs to another context" : "no tensor");
    return set(k, index, sizeof(cl_mem), &t->buf, err);
}

pgd_status pgd_kernel_set_value(pgd_kernel *k, unsigned index, size_t size, const void *value,
                                pgd_error **err)
{
    if (!value || size == 0)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "argument %u of kernel '%s': no value given", index, k->name);
    return set(k, index, size, value, err);
}

pgd_status pgd_kernel_set_local(pgd_kernel *k, unsigned index, size_t bytes, pgd_error **err)
{
    /* OpenCL says CL_INVALID_ARG_SIZE, but Intel's CPU runtime (2026.2) accepts 0 bytes: refused
     * here, so that every driver answers the same. */
    if (bytes == 0)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "argument %u of kernel '%s': local memory of 0 bytes", index,
                              k->name);
    return set(k, index, bytes, NULL, err);
}

size_t pgd_kernel_get_max_work_group(const pgd_kernel *k)
{
    return pgd__kernel_wg(k->ctx, k->kernel);
}

size_t pgd_kernel_get_preferred_work_group(const pgd_kernel *k)
{
    return pgd__flat_wg(k->ctx, k->kernel);
}

pgd_status pgd_kernel_launch(pgd_kernel *k, unsigned dims, const size_t *global,
                             const size_t *local, pgd_error **err)
{
    if (dims < 1 || dims > 3 || !global)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "kernel '%s': %u dimensions (1 to 3 are possible)", k->name, dims);
    for (unsigned i = 0; local && i < dims; i++)
        if (local[i] == 0 || global[i] % local[i] != 0)
            return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                  "kernel '%s': global size %zu of dimension %u is not a multiple "
                                  "of the work-group size %zu",
                                  k->name, global[i], i, local[i]);
    return pgd__enqueue(k->ctx, k->kernel, k->name, dims, global, local, err);
}
