/* device.c — platforms and devices, capabilities, selection rules, the context and queue. */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define NO_DEVICE_HINT                                                                             \
    "no OpenCL device was found. Install an OpenCL driver, for example PoCL for CPUs "             \
    "(Debian/Ubuntu: apt-get install pocl-opencl-icd ocl-icd-libopencl1), or your GPU vendor's "   \
    "OpenCL runtime; Mesa's rusticl (mesa-opencl-icd) needs RUSTICL_ENABLE=llvmpipe or a "         \
    "driver name to expose devices. `clinfo -l` shows what the ICD loader sees"

const char *pgd_device_type_name(pgd_device_type type)
{
    switch (type) {
    case PGD_DEVICE_CPU: return "cpu";
    case PGD_DEVICE_GPU: return "gpu";
    case PGD_DEVICE_ACCELERATOR: return "accelerator";
    default: return "other";
    }
}

static void info_str(cl_device_id d, cl_device_info what, char *dst, size_t size)
{
    dst[0] = 0;
    if (clGetDeviceInfo(d, what, size, dst, NULL) != CL_SUCCESS)
        dst[0] = 0;
    dst[size - 1] = 0;
}

static uint64_t info_u64(cl_device_id d, cl_device_info what)
{
    cl_ulong v = 0;
    clGetDeviceInfo(d, what, sizeof v, &v, NULL);
    return v;
}

static unsigned info_uint(cl_device_id d, cl_device_info what)
{
    cl_uint v = 0;
    clGetDeviceInfo(d, what, sizeof v, &v, NULL);
    return v;
}

static int has_word(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; (p = strstr(p, word)) != NULL; p += n) {
        int start = p == list || p[-1] == ' ';
        int end = p[n] == 0 || p[n] == ' ';
        if (start && end)
            return 1;
    }
    return 0;
}

static int contains_nocase(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    if (n == 0)
        return 0;
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] &&
               tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n)
            return 1;
    }
    return 0;
}

/* "OpenCL C 1.2 pocl" → 1, 2: the word after the prefix must be "M.m" (two small numbers, as
 * pgd_parse_int64_list reads them); anything else from the driver is treated as 1.0. */
static void parse_c_version(const char *s, int *major, int *minor)
{
    static const char prefix[] = "OpenCL C ";
    *major = 1, *minor = 0;
    if (strncmp(s, prefix, sizeof prefix - 1))
        return;
    s += sizeof prefix - 1;
    char word[32];
    size_t len = strcspn(s, " ");
    if (len >= sizeof word)
        return;
    memcpy(word, s, len);
    word[len] = 0;
    int64_t v[2];
    int n = 0;
    if (!pgd_parse_int64_list(word, '.', 0, 99, v, 2, 2, &n))
        *major = (int)v[0], *minor = (int)v[1];
}

int pgd__device_query(cl_platform_id p, cl_device_id d, int pi, int di, pgd_device_info *info)
{
    memset(info, 0, sizeof *info);
    info->platform_index = pi;
    info->device_index = di;
    info_str(d, CL_DEVICE_NAME, info->name, sizeof info->name);
    info_str(d, CL_DEVICE_VENDOR, info->vendor, sizeof info->vendor);
    info_str(d, CL_DRIVER_VERSION, info->driver_version, sizeof info->driver_version);
    info_str(d, CL_DEVICE_VERSION, info->version, sizeof info->version);
    info_str(d, CL_DEVICE_OPENCL_C_VERSION, info->c_version, sizeof info->c_version);
    if (clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof info->platform, info->platform, NULL))
        info->platform[0] = 0;
    if (clGetPlatformInfo(p, CL_PLATFORM_VERSION, sizeof info->platform_version,
                          info->platform_version, NULL))
        info->platform_version[0] = 0;
    info->platform[sizeof info->platform - 1] = 0;
    info->platform_version[sizeof info->platform_version - 1] = 0;
    parse_c_version(info->c_version, &info->opencl_c_major, &info->opencl_c_minor);
    cl_device_type t = 0;
    clGetDeviceInfo(d, CL_DEVICE_TYPE, sizeof t, &t, NULL);
    info->type = (t & CL_DEVICE_TYPE_GPU)           ? PGD_DEVICE_GPU
                 : (t & CL_DEVICE_TYPE_ACCELERATOR) ? PGD_DEVICE_ACCELERATOR
                 : (t & CL_DEVICE_TYPE_CPU)         ? PGD_DEVICE_CPU
                                                    : PGD_DEVICE_OTHER;
    info->software_rasteriser = contains_nocase(info->name, "llvmpipe") ||
                                contains_nocase(info->name, "softpipe") ||
                                contains_nocase(info->name, "swiftshader");
    info->compute_units = info_uint(d, CL_DEVICE_MAX_COMPUTE_UNITS);
    info->clock_mhz = info_uint(d, CL_DEVICE_MAX_CLOCK_FREQUENCY);
    info->global_mem = info_u64(d, CL_DEVICE_GLOBAL_MEM_SIZE);
    info->max_alloc = info_u64(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
    info->local_mem = info_u64(d, CL_DEVICE_LOCAL_MEM_SIZE);
    cl_device_local_mem_type lt = CL_GLOBAL;
    clGetDeviceInfo(d, CL_DEVICE_LOCAL_MEM_TYPE, sizeof lt, &lt, NULL);
    info->local_mem_dedicated = lt == CL_LOCAL;
    clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof info->max_work_group,
                    &info->max_work_group, NULL);
    info->max_dims = info_uint(d, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS);
    size_t items[16] = {0};
    if (info->max_dims > 0 && info->max_dims <= 16 &&
        clGetDeviceInfo(d, CL_DEVICE_MAX_WORK_ITEM_SIZES, info->max_dims * sizeof(size_t), items,
                        NULL) == CL_SUCCESS) {
        for (unsigned i = 0; i < 3 && i < info->max_dims; i++)
            info->max_work_item[i] = items[i];
    }
    cl_bool b = CL_FALSE;
    clGetDeviceInfo(d, CL_DEVICE_IMAGE_SUPPORT, sizeof b, &b, NULL);
    info->images = b == CL_TRUE;
    b = CL_FALSE;
    clGetDeviceInfo(d, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof b, &b, NULL);
    info->unified_memory = b == CL_TRUE;
    info->pref_vector_float = info_uint(d, CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT);
    info->mem_base_align = info_uint(d, CL_DEVICE_MEM_BASE_ADDR_ALIGN);
    size_t ext_len = 0;
    if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &ext_len) == CL_SUCCESS && ext_len) {
        char *ext = malloc(ext_len + 1);
        if (ext && clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, ext_len, ext, NULL) == CL_SUCCESS) {
            ext[ext_len] = 0;
            info->fp16 = has_word(ext, "cl_khr_fp16");
            info->fp64 = has_word(ext, "cl_khr_fp64");
            info->subgroups =
                has_word(ext, "cl_khr_subgroups") || has_word(ext, "cl_intel_subgroups");
        }
        free(ext);
    }
    return PGD_OK;
}

pgd_status pgd_devices_list(pgd_device_info **out, size_t *count, pgd_error **err)
{
    *out = NULL;
    *count = 0;
    cl_uint np = 0;
    cl_int rc = clGetPlatformIDs(0, NULL, &np);
    /* The ICD loader answers CL_PLATFORM_NOT_FOUND_KHR (-1001) when no driver is installed. */
    if (rc == -1001 || (rc == CL_SUCCESS && np == 0))
        return pgd__error_set(err, PGD_ERR_NO_PLATFORM, NO_DEVICE_HINT);
    if (rc != CL_SUCCESS)
        return pgd__cl_fail(err, rc, "clGetPlatformIDs", "while listing OpenCL platforms");
    cl_platform_id *plats = calloc(np, sizeof *plats);
    if (!plats)
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "listing %u platforms", np);
    rc = clGetPlatformIDs(np, plats, NULL);
    if (rc != CL_SUCCESS) {
        free(plats);
        return pgd__cl_fail(err, rc, "clGetPlatformIDs", "while listing OpenCL platforms");
    }
    pgd_device_info *list = NULL;
    size_t n = 0;
    for (cl_uint pi = 0; pi < np; pi++) {
        cl_uint nd = 0;
        rc = clGetDeviceIDs(plats[pi], CL_DEVICE_TYPE_ALL, 0, NULL, &nd);
        if (rc == CL_DEVICE_NOT_FOUND || (rc == CL_SUCCESS && nd == 0))
            continue; /* a platform with no devices (Mesa Clover, often) is not an error */
        if (rc != CL_SUCCESS) {
            /* Any other failure is an error: silently dropping the platform would turn it into
             * a confusing "no device" or "matches no device" later. */
            free(list);
            free(plats);
            return pgd__cl_fail(err, rc, "clGetDeviceIDs",
                                "while listing the devices of platform %u", pi);
        }
        cl_device_id *devs = calloc(nd, sizeof *devs);
        pgd_device_info *grown = realloc(list, (n + nd) * sizeof *list);
        if (!devs || !grown) {
            free(devs);
            free(grown ? grown : list);
            free(plats);
            return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "listing devices");
        }
        list = grown;
        rc = clGetDeviceIDs(plats[pi], CL_DEVICE_TYPE_ALL, nd, devs, NULL);
        if (rc != CL_SUCCESS) {
            free(devs);
            free(list);
            free(plats);
            return pgd__cl_fail(err, rc, "clGetDeviceIDs",
                                "while listing the devices of platform %u", pi);
        }
        for (cl_uint di = 0; di < nd; di++)
            pgd__device_query(plats[pi], devs[di], (int)pi, (int)di, &list[n++]);
        free(devs);
    }
    free(plats);
    if (n == 0) {
        free(list);
        return pgd__error_set(err, PGD_ERR_NO_PLATFORM, NO_DEVICE_HINT);
    }
    *out = list;
    *count = n;
    return PGD_OK;
}

void pgd_free(void *p)
{
    free(p);
}

/* Ranking for the default choice: higher is better. Type first (GPU, accelerator, CPU, other),
 * software rasterisers below every real device, then compute units. */
static long rank(const pgd_device_info *d)
{
    long type_rank = d->type == PGD_DEVICE_GPU           ? 3
                     : d->type == PGD_DEVICE_ACCELERATOR ? 2
                     : d->type == PGD_DEVICE_CPU         ? 1
                                                         : 0;
    if (d->software_rasteriser)
        type_rank = -1;
    return type_rank * 1000000L + (long)(d->compute_units > 999999 ? 999999 : d->compute_units);
}

static void list_devices(char *buf, size_t size, const pgd_device_info *list, size_t count)
{
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; i < count && used < size; i++) {
        int w = snprintf(buf + used, size - used, "\n  %d:%d  %s  [%s, %s]", list[i].platform_index,
                         list[i].device_index, list[i].name, list[i].platform,
                         pgd_device_type_name(list[i].type));
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

static int best_of(const pgd_device_info *list, size_t count, int type_mask, size_t *index)
{
    long best = -1000000000L;
    int found = 0;
    for (size_t i = 0; i < count; i++) {
        if (type_mask && !(list[i].type & type_mask))
            continue;
        long r = rank(&list[i]);
        if (!found || r > best) {
            best = r;
            *index = i;
            found = 1;
        }
    }
    return found;
}

/* 1 when `s` has the shape of a "P:D" selector: one ':' with only digits and '-' either side. */
static int pd_syntax(const char *s)
{
    const char *colon = strchr(s, ':');
    static const char digits[] = "0123456789-";
    return colon && colon > s && colon[1] && strspn(s, digits) == (size_t)(colon - s) &&
           strspn(colon + 1, digits) == strlen(colon + 1);
}

pgd_status pgd_device_select(const pgd_device_info *list, size_t count, const char *selector,
                             size_t *index, pgd_error **err)
{
    if (count == 0)
        return pgd__error_set(err, PGD_ERR_NO_PLATFORM, NO_DEVICE_HINT);
    char listing[4096];
    if (!selector || !*selector) {
        best_of(list, count, 0, index);
        return PGD_OK;
    }
    int type_mask = 0;
    if (!strcmp(selector, "cpu") || !strcmp(selector, "CPU"))
        type_mask = PGD_DEVICE_CPU;
    else if (!strcmp(selector, "gpu") || !strcmp(selector, "GPU"))
        type_mask = PGD_DEVICE_GPU;
    else if (!strcmp(selector, "accelerator") || !strcmp(selector, "ACCELERATOR"))
        type_mask = PGD_DEVICE_ACCELERATOR;
    if (type_mask) {
        if (best_of(list, count, type_mask, index))
            return PGD_OK;
        list_devices(listing, sizeof listing, list, count);
        return pgd__error_set(err, PGD_ERR_DEVICE_NOT_FOUND,
                              "no %s device among the OpenCL devices found:%s", selector, listing);
    }
    if (pd_syntax(selector)) {
        /* Digits either side of one ':' are a P:D selector, never a name: an index that does
         * not parse (0:4294967296) is an error, not a wrapped or truncated index. */
        int64_t pd[2];
        int n = 0;
        if (pgd_parse_int64_list(selector, ':', 0, INT32_MAX, pd, 2, 2, &n))
            return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                  "device selector '%s': P:D wants two indices from 0 to %d",
                                  selector, INT32_MAX);
        int p = (int)pd[0], d = (int)pd[1];
        for (size_t i = 0; i < count; i++) {
            if (list[i].platform_index == p && list[i].device_index == d) {
                *index = i;
                return PGD_OK;
            }
        }
        list_devices(listing, sizeof listing, list, count);
        return pgd__error_set(err, PGD_ERR_DEVICE_NOT_FOUND,
                              "no device %d:%d (platform:device); the devices are:%s", p, d,
                              listing);
    }
    for (size_t i = 0; i < count; i++) {
        if (contains_nocase(list[i].name, selector) ||
            contains_nocase(list[i].platform, selector) ||
            contains_nocase(list[i].platform_version, selector)) {
            *index = i;
            return PGD_OK;
        }
    }
    list_devices(listing, sizeof listing, list, count);
    return pgd__error_set(err, PGD_ERR_DEVICE_NOT_FOUND,
                          "device selector '%s' matches no device (use P:D, cpu, gpu, "
                          "accelerator, or part of a device or platform name); the devices are:%s",
                          selector, listing);
}

/* Lowers a device limit to what the options allow (0: no lower limit). */
static void lower(uint64_t *value, uint64_t limit)
{
    if (limit && limit < *value)
        *value = limit;
}

static void ctx_free(pgd_ctx *ctx)
{
    pgd__options_free(&ctx->opt);
    free(ctx);
}

pgd_status pgd_ctx_create(const char *selector, pgd_ctx **out, pgd_error **err)
{
    *out = NULL;
    pgd_ctx_options opt;
    pgd_ctx_options_init(&opt);
    int rc = pgd_ctx_options_from_env(&opt, err);
    if (rc)
        return rc;
    if (selector)
        opt.device = selector;
    return pgd_ctx_create_with_options(&opt, out, err);
}

pgd_status pgd_ctx_create_with_options(const pgd_ctx_options *opt, pgd_ctx **out, pgd_error **err)
{
    *out = NULL;
    pgd_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "allocating a context");
    int rc = pgd__options_copy(&ctx->opt, &ctx->knobs, opt, err);
    if (rc) {
        free(ctx);
        return rc;
    }
    pgd_device_info *list = NULL;
    size_t count = 0, idx = 0;
    rc = pgd_devices_list(&list, &count, err);
    if (!rc)
        rc = pgd_device_select(list, count, ctx->opt.device, &idx, err);
    if (rc) {
        pgd_free(list);
        ctx_free(ctx);
        return rc;
    }
    ctx->dev = list[idx];
    pgd_free(list);

    /* Look the handles up again by index: the info list holds no OpenCL handles. */
    cl_uint np = 0;
    cl_platform_id plats[64];
    cl_int cl = clGetPlatformIDs(64, plats, &np);
    np = np > 64 ? 64 : np; /* the count is of all platforms, the array holds 64 */
    if (cl != CL_SUCCESS || (cl_uint)ctx->dev.platform_index >= np) {
        rc = pgd__cl_fail(err, cl ? cl : CL_INVALID_PLATFORM, "clGetPlatformIDs",
                          "platform %d disappeared", ctx->dev.platform_index);
        ctx_free(ctx);
        return rc;
    }
    ctx->platform = plats[ctx->dev.platform_index];
    cl_device_id devs[64];
    cl_uint nd = 0;
    cl = clGetDeviceIDs(ctx->platform, CL_DEVICE_TYPE_ALL, 64, devs, &nd);
    nd = nd > 64 ? 64 : nd;
    if (cl != CL_SUCCESS || (cl_uint)ctx->dev.device_index >= nd) {
        rc = pgd__cl_fail(err, cl ? cl : CL_INVALID_DEVICE, "clGetDeviceIDs",
                          "device %d:%d disappeared", ctx->dev.platform_index,
                          ctx->dev.device_index);
        ctx_free(ctx);
        return rc;
    }
    ctx->device = devs[ctx->dev.device_index];
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)ctx->platform, 0};
    ctx->context = clCreateContext(props, 1, &ctx->device, NULL, NULL, &cl);
    if (!ctx->context) {
        rc = pgd__cl_fail(err, cl, "clCreateContext", "on device '%s'", ctx->dev.name);
        ctx_free(ctx);
        return rc;
    }
    ctx->queue = clCreateCommandQueue(ctx->context, ctx->device, CL_QUEUE_PROFILING_ENABLE, &cl);
    if (!ctx->queue) {
        rc = pgd__cl_fail(err, cl, "clCreateCommandQueue", "on device '%s'", ctx->dev.name);
        clReleaseContext(ctx->context);
        ctx_free(ctx);
        return rc;
    }
    if ((rc = pgd__ctx_open_rest(ctx, err)))
        return rc;
    *out = ctx;
    return PGD_OK;
}

int pgd__ctx_open_rest(pgd_ctx *ctx, pgd_error **err)
{
    lower(&ctx->dev.global_mem, ctx->opt.global_mem_limit);
    lower(&ctx->dev.max_alloc, ctx->opt.max_alloc_limit);
    if (ctx->dev.max_alloc > ctx->dev.global_mem)
        ctx->dev.max_alloc = ctx->dev.global_mem;
    ctx->cache_dir = pgd__cache_dir_resolve(ctx->opt.cache_dir);
    ctx->profiling = ctx->opt.profiling != 0;
    ctx->profile_at_exit = ctx->opt.profile_print_at_destroy != 0;
    int rc = pgd__lowp_open(ctx, err);
    if (!rc)
        rc = pgd__params_open(ctx, err);
    if (rc)
        pgd_ctx_destroy(ctx);
    return rc;
}

void pgd_ctx_destroy(pgd_ctx *ctx)
{
    if (!ctx)
        return;
    if (ctx->queue)
        clFinish(ctx->queue);
    if (ctx->profile_at_exit && ctx->totals_len)
        pgd_profile_print(ctx, stderr, NULL);
    pgd__profile_destroy(ctx);
    pgd__pool_destroy(ctx);
    pgd__programs_destroy(ctx);
    if (ctx->queue)
        clReleaseCommandQueue(ctx->queue);
    if (ctx->context)
        clReleaseContext(ctx->context);
    if (ctx->device_retained)
        clReleaseDevice(ctx->device);
    free(ctx->cache_dir);
    pgd__params_close(ctx);
    ctx_free(ctx);
}

const pgd_device_info *pgd_ctx_get_device(const pgd_ctx *ctx)
{
    return &ctx->dev;
}

pgd_status pgd_ctx_finish(pgd_ctx *ctx, pgd_error **err)
{
    cl_int cl = clFinish(ctx->queue);
    if (cl != CL_SUCCESS)
        return pgd__cl_fail(err, cl, "clFinish", "on device '%s'", ctx->dev.name);
    return PGD_OK;
}

void pgd_ctx_get_build_stats(const pgd_ctx *ctx, pgd_build_stats *out)
{
    *out = ctx->stats;
}
const char *pgd_ctx_get_cache_dir(const pgd_ctx *ctx)
{
    return ctx->cache_dir;
}
