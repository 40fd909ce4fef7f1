/* lowp.c — low-precision capabilities of a device (half arithmetic, integer dot products, bf16
 * conversions) and the context's precision (knob `precision`), refused by name where the device
 * lacks what it needs: never a silent fallback to float32. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* cl_khr_integer_dot_product's queries (cl_ext.h has them only for newer targets). */
#define DOT_CAPS 0x1073
#define DOT_ACCEL_8BIT 0x1074
#define DOT_ACCEL_4X8_PACKED 0x1075
#define HALF_FP_CONFIG 0x1034

const char *const pgd__precision_names[] = {"f32", "f16", "int8", NULL};

static int has_ext(const char *list, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = list; (p = strstr(p, word)) != NULL; p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == 0 || p[n] == ' '))
            return 1;
    return 0;
}

/* The six cl_bool of cl_device_integer_dot_product_acceleration_properties_khr as PGD_DOT_*. */
static unsigned dot_accel(cl_device_id d, cl_device_info what)
{
    cl_bool b[6] = {0};
    if (clGetDeviceInfo(d, what, sizeof b, b, NULL) != CL_SUCCESS)
        return 0;
    unsigned bits = 0;
    for (int i = 0; i < 6; i++)
        bits |= b[i] ? 1u << i : 0;
    return bits;
}

static void lowp_query(cl_device_id d, pgd_device_lowp *o)
{
    memset(o, 0, sizeof *o);
    o->size = sizeof *o;
    size_t len = 0;
    char *ext = NULL;
    if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &len) == CL_SUCCESS && len)
        ext = malloc(len + 1);
    if (!ext || clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, len, ext, NULL) != CL_SUCCESS) {
        free(ext);
        return;
    }
    ext[len] = 0;
    o->fp16 = has_ext(ext, "cl_khr_fp16");
    o->int_dot = has_ext(ext, "cl_khr_integer_dot_product");
    /* Intel's CPU runtime 2026.22 names it cl_intel_bfloat16; the registry's name is longer. */
    o->bf16_conversions =
        has_ext(ext, "cl_intel_bfloat16_conversions") || has_ext(ext, "cl_intel_bfloat16");
    free(ext);
    if (o->fp16) {
        cl_ulong cfg = 0;
        clGetDeviceInfo(d, HALF_FP_CONFIG, sizeof cfg, &cfg, NULL);
        o->half_fp_config = (unsigned)cfg;
    }
    if (o->int_dot) {
        cl_bitfield caps = 0;
        clGetDeviceInfo(d, DOT_CAPS, sizeof caps, &caps, NULL);
        o->int_dot_caps = (unsigned)caps;
        o->dot8_accel = dot_accel(d, DOT_ACCEL_8BIT);
        o->dot8_packed_accel = dot_accel(d, DOT_ACCEL_4X8_PACKED);
    }
}

/* The cl_device_id at dev's platform and device indices, checked by name. */
static int find_device(const pgd_device_info *dev, cl_device_id *out)
{
    cl_platform_id plats[64];
    cl_uint np = 0;
    if (dev->platform_index < 0 || dev->device_index < 0 ||
        clGetPlatformIDs(64, plats, &np) != CL_SUCCESS || (cl_uint)dev->platform_index >= np)
        return -1;
    cl_uint nd = 0;
    cl_platform_id p = plats[dev->platform_index];
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, NULL, &nd) != CL_SUCCESS ||
        (cl_uint)dev->device_index >= nd)
        return -1;
    cl_device_id *ids = calloc(nd, sizeof *ids);
    int rc = -1;
    if (ids && clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, ids, NULL) == CL_SUCCESS) {
        char name[256] = "";
        clGetDeviceInfo(ids[dev->device_index], CL_DEVICE_NAME, sizeof name, name, NULL);
        name[sizeof name - 1] = 0;
        if (!strcmp(name, dev->name)) {
            *out = ids[dev->device_index];
            rc = 0;
        }
    }
    free(ids);
    return rc;
}

pgd_status pgd_device_get_lowp(const pgd_device_info *dev, pgd_device_lowp *out, pgd_error **err)
{
    size_t first = offsetof(pgd_device_lowp, half_fp_config);
    if (!dev || !out || out->size < first)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "pgd_device_get_lowp: NULL device or result, or result size %zu "
                              "below %zu (set .size = sizeof(pgd_device_lowp))",
                              out ? out->size : (size_t)0, first);
    cl_device_id d;
    if (find_device(dev, &d))
        return pgd__error_set(err, PGD_ERR_DEVICE_NOT_FOUND,
                              "pgd_device_get_lowp: device '%s' is no longer at %d:%d", dev->name,
                              dev->platform_index, dev->device_index);
    pgd_device_lowp full;
    lowp_query(d, &full);
    size_t n = out->size < sizeof full ? out->size : sizeof full;
    memcpy((char *)out + sizeof out->size, (char *)&full + sizeof full.size, n - sizeof full.size);
    return PGD_OK;
}

int pgd__lowp_open(pgd_ctx *ctx, pgd_error **err)
{
    lowp_query(ctx->device, &ctx->lowp);
    ctx->precision = ctx->knobs.precision > 0 ? (int)ctx->knobs.precision - 1 : PGD__PREC_F32;
    const char *need = NULL, *what = NULL;
    if (ctx->precision == PGD__PREC_F16 && !ctx->lowp.fp16)
        need = "cl_khr_fp16", what = "half-precision arithmetic";
    /* int8 runs its dot products through the packed 4x8-bit built-ins. */
    if (ctx->precision == PGD__PREC_INT8 && !(ctx->lowp.int_dot && (ctx->lowp.int_dot_caps & 1)))
        need = "cl_khr_integer_dot_product (packed 4x8-bit)", what = "8-bit integer dot products";
    if (!need)
        return PGD_OK;
    return pgd__error_set(err, PGD_ERR_UNSUPPORTED,
                          "precision %s: device '%s' (%s) lacks %s, needed for %s; use precision "
                          "f32 there, or a device that `pagoda devices` lists with it",
                          pgd__precision_names[ctx->precision], ctx->dev.name, ctx->dev.platform,
                          need, what);
}
