/* pagoda.h — the public interface of libpagoda, a portable OpenCL compute runtime.
 *
 * A complete program (cc demo.c $(pkg-config --cflags --libs pagoda)): a linear layer
 * y = relu(x·Wᵀ + b) on the default device, the weights taken from a .safetensors file.
 *
 *     #include <stdio.h>
 *     #include "pagoda.h"
 *
 *     int main(int argc, char **argv)
 *     {
 *         pgd_error *err = NULL;
 *         pgd_ctx *ctx = NULL;
 *         pgd_weights *file = NULL;
 *         pgd_tensor *w = NULL, *b = NULL, *x = NULL, *y = NULL;
 *         pgd_linear *fc = NULL;
 *         float in[4 * 8], out[4 * 16];
 *         int64_t xs[2] = {4, 8}, ys[2] = {4, 16};
 *         for (int i = 0; i < 4 * 8; i++) in[i] = 0.25f * (float)(i % 5);
 *         int rc = pgd_ctx_create(NULL, &ctx, &err);      // NULL: $PAGODA_DEVICE or the best
 *         if (!rc) rc = pgd_weights_open(argc > 1 ? argv[1] : "fc.safetensors", &file, &err);
 *         if (!rc) rc = pgd_weights_upload(ctx, file, "fc.weight", &w, &err);   // [16, 8]
 *         if (!rc) rc = pgd_weights_upload(ctx, file, "fc.bias", &b, &err);     // [16]
 *         if (!rc) rc = pgd_linear_create(ctx, w, b, &fc, &err);
 *         if (!rc) rc = pgd_tensor_create(ctx, 2, xs, &x, &err);
 *         if (!rc) rc = pgd_tensor_create(ctx, 2, ys, &y, &err);
 *         if (!rc) rc = pgd_tensor_upload(x, in, &err);
 *         if (!rc) rc = pgd_linear_forward(ctx, fc, x, PGD_ACT_RELU, NULL, y, &err);
 *         if (!rc) rc = pgd_tensor_download(y, out, &err);  // waits for the device
 *         if (rc) fprintf(stderr, "error: %s\n", pgd_error_get_message(err));
 *         else printf("y[1][3] = %.6f\n", out[16 + 3]);
 *         pgd_error_destroy(err);
 *         pgd_linear_destroy(fc);
 *         pgd_tensor_destroy(w), pgd_tensor_destroy(b);
 *         pgd_tensor_destroy(x), pgd_tensor_destroy(y);
 *         pgd_weights_destroy(file);
 *         pgd_ctx_destroy(ctx);
 *         return rc != 0;
 *     }
 *
 * apps/examples/classify.c goes further: a whole ViT classifying an image.
 *
 * Conventions: every call that can fail returns a pgd_status (0 success, negative error) and,
 * where the reason can be detailed, takes a `pgd_error **err` last argument. `err` may be NULL;
 * otherwise *err must be NULL on entry and is set at most once, to an error the caller frees
 * with pgd_error_destroy(). The library never aborts or exits. Every object made by _create
 * (or _open, _load) is released by _destroy, which accepts NULL; getters carry _get_. Memory
 * the library allocates and hands over (arrays, file contents, decoded .npy data) is released
 * with pgd_free(), never with free(): on Windows the library and the program may use
 * different C runtimes, each with its own heap. docs/api.md has the versioning and ABI policy.
 *
 * Helpers that are not compute (number parsing, output files, image orientation and
 * thumbnails) are in pagoda_util.h. This header is C99-clean and does not include the OpenCL
 * headers.
 */
#ifndef PAGODA_H
#define PAGODA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(PGD_STATIC)
#define PGD_API
#elif defined(_WIN32)
#ifdef PGD_BUILDING
#define PGD_API __declspec(dllexport)
#else
#define PGD_API __declspec(dllimport)
#endif
#elif defined(__GNUC__)
#define PGD_API __attribute__((visibility("default")))
#else
#define PGD_API
#endif

/* The version of this header: MAJOR.MINOR.PATCH (meson.build's project version; a check at
 * configure time keeps the two equal). While MAJOR is 0 a minor release may change the API and
 * ABI; PGD_VERSION_NUMBER orders versions as integers. */
#define PGD_VERSION_MAJOR 0
#define PGD_VERSION_MINOR 1
#define PGD_VERSION_PATCH 0
#define PGD_VERSION_STRING "0.1.0"
#define PGD_VERSION_NUMBER (PGD_VERSION_MAJOR * 10000 + PGD_VERSION_MINOR * 100 + PGD_VERSION_PATCH)

/* ---- status codes ------------------------------------------------------------------------ */

/* X(NAME, value, message). Values overlapping OpenCL's meaning reuse OpenCL's numbers. */
#define PGD_STATUS_MAP(X)                                                                          \
    X(OK, 0, "success")                                                                            \
    X(ERR_DEVICE_NOT_FOUND, -1, "no OpenCL device matches")                                        \
    X(ERR_ALLOCATION, -4, "device memory allocation failed")                                       \
    X(ERR_OUT_OF_RESOURCES, -5, "the device ran out of resources")                                 \
    X(ERR_OUT_OF_HOST_MEMORY, -6, "out of host memory")                                            \
    X(ERR_BUILD, -11, "an OpenCL program failed to build")                                         \
    X(ERR_INVALID_ARGUMENT, -30, "invalid argument")                                               \
    X(ERR_NO_PLATFORM, -1001, "no OpenCL platform or device is installed")                         \
    X(ERR_OPENCL, -1100, "an OpenCL call failed")                                                  \
    X(ERR_IO, -1101, "file input/output failed")                                                   \
    X(ERR_FORMAT, -1102, "malformed input file")                                                   \
    X(ERR_SHAPE, -1103, "tensor shapes do not fit")                                                \
    X(ERR_UNSUPPORTED, -1104, "not supported")                                                     \
    X(ERR_TOO_LARGE, -1105, "request exceeds a device or safety limit")                            \
    X(ERR_NOT_FOUND, -1106, "not found")                                                           \
    X(ERR_INTERNAL, -1107, "internal error")

typedef enum pgd_status {
#define PGD_X_ENUM(name, value, msg) PGD_##name = value,
    PGD_STATUS_MAP(PGD_X_ENUM)
#undef PGD_X_ENUM
} pgd_status;

/* The version of the library that is running (it may differ from the header a program was
 * built with): PGD_VERSION_NUMBER and PGD_VERSION_STRING of its build. */
PGD_API int pgd_version(void);
PGD_API const char *pgd_version_string(void);

/* Releases memory the library allocated for the caller (pgd_devices_list's array,
 * pgd_file_read's and pgd_npy_read's data); NULL is accepted. Objects with a _destroy function
 * are released by it instead. */
PGD_API void pgd_free(void *p);

/* "PGD_ERR_BUILD" for PGD_ERR_BUILD; "PGD_UNKNOWN" for a value not in the list. Never NULL. */
PGD_API const char *pgd_status_name(int status);
/* A one-line English description of the status. Never NULL. */
PGD_API const char *pgd_status_str(int status);
/* The name of an OpenCL error code, e.g. "CL_OUT_OF_RESOURCES". Never NULL. */
PGD_API const char *pgd_cl_error_name(int cl_code);

/* ---- detailed errors --------------------------------------------------------------------- */

typedef struct pgd_error pgd_error;

/* The status code carried by the error. */
PGD_API pgd_status pgd_error_get_code(const pgd_error *err);
/* The fixed summary of the status (pgd_status_str of the code). */
PGD_API const char *pgd_error_get_summary(const pgd_error *err);
/* The full formatted message: what failed, where, and why. Never NULL for a non-NULL err. */
PGD_API const char *pgd_error_get_message(const pgd_error *err);
/* The OpenCL error code behind the error, or 0 when it did not come from OpenCL. */
PGD_API int pgd_error_get_cl_code(const pgd_error *err);
/* The build log for PGD_ERR_BUILD, else NULL. Owned by the error. */
PGD_API const char *pgd_error_get_log(const pgd_error *err);
/* Frees the error; NULL is accepted. */
PGD_API void pgd_error_destroy(pgd_error *err);

#if defined(__GNUC__)
#define PGD_PRINTF_LIKE(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define PGD_PRINTF_LIKE(fmt, args)
#endif

/* Creates an error for code outside the library (models, apps) with the library's contract:
 * when err is non-NULL and *err is still NULL, *err becomes a new error carrying `code` (a
 * negative pgd_status) and the printf-formatted message; an error already set is kept (the
 * first failure is the one reported). Returns `code`, so that `return pgd_error_set(err, ...)`
 * reads naturally. Out of host memory while creating it, *err stays NULL. */
PGD_API pgd_status pgd_error_set(pgd_error **err, int code, const char *fmt, ...)
    PGD_PRINTF_LIKE(3, 4);

/* ---- devices ----------------------------------------------------------------------------- */

typedef enum pgd_device_type {
    PGD_DEVICE_CPU = 1,
    PGD_DEVICE_GPU = 2,
    PGD_DEVICE_ACCELERATOR = 4,
    PGD_DEVICE_OTHER = 8
} pgd_device_type;

/* Capabilities of one OpenCL device, as reported by its driver. Plain data. */
typedef struct pgd_device_info {
    int platform_index; /* index among all platforms, as in "P:D" selectors */
    int device_index;   /* index among the platform's devices (all types) */
    char name[256];
    char vendor[256];
    char platform[256];         /* platform name */
    char platform_version[256]; /* e.g. "OpenCL 3.0 PoCL 3.1 ..." */
    char driver_version[256];
    char version[256];   /* CL_DEVICE_VERSION, e.g. "OpenCL 3.0 PoCL ..." */
    char c_version[128]; /* CL_DEVICE_OPENCL_C_VERSION */
    int opencl_c_major, opencl_c_minor;
    pgd_device_type type;
    int software_rasteriser; /* 1 for Mesa llvmpipe and similar: ranks last among defaults */
    unsigned compute_units;
    unsigned clock_mhz;
    uint64_t global_mem;
    uint64_t max_alloc;
    uint64_t local_mem;
    int local_mem_dedicated; /* 1: CL_LOCAL, 0: CL_GLOBAL (emulated in ordinary memory) */
    size_t max_work_group;
    size_t max_work_item[3];
    unsigned max_dims;
    int fp16, fp64, subgroups, images, unified_memory;
    unsigned pref_vector_float; /* CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT */
    unsigned mem_base_align;    /* CL_DEVICE_MEM_BASE_ADDR_ALIGN in bits */
} pgd_device_info;

/* Enumerates every device of every platform. *out is an array of *count entries that the caller
 * frees with pgd_free(); on error *out is NULL and *count 0. Zero devices is
 * PGD_ERR_NO_PLATFORM, with a message saying how to install one. */
PGD_API pgd_status pgd_devices_list(pgd_device_info **out, size_t *count, pgd_error **err);

/* Picks a device from `list` by selector:
 *   NULL or ""            the default: a GPU if present, else an accelerator, else the CPU device
 *                         with the most compute units; software rasterisers (llvmpipe) rank last;
 *                         ties keep enumeration order.
 *   "P:D"                 platform index P, device index D (see `pagoda devices`);
 *   "cpu"|"gpu"|"accelerator"  the best device of that type by the same ranking;
 *   anything else         the first device whose device or platform name contains it,
 *                         case-insensitively.
 * No match: PGD_ERR_DEVICE_NOT_FOUND with a message listing every device. */
PGD_API pgd_status pgd_device_select(const pgd_device_info *list, size_t count,
                                     const char *selector, size_t *index, pgd_error **err);

/* Low-precision capabilities of a device, as its driver reports them (pgd_device_get_lowp).
 * Carries its size: set .size = sizeof(pgd_device_lowp) before the call. The *_accel fields are
 * the bits of cl_khr_integer_dot_product's acceleration properties: PGD_DOT_* below. */
typedef struct pgd_device_lowp {
    size_t size;
    int fp16;                   /* cl_khr_fp16: half-precision arithmetic in kernels */
    unsigned half_fp_config;    /* CL_DEVICE_HALF_FP_CONFIG bits (0 without cl_khr_fp16) */
    int int_dot;                /* cl_khr_integer_dot_product */
    unsigned int_dot_caps;      /* 1: packed 4x8-bit inputs, 2: char4/uchar4 inputs */
    unsigned dot8_accel;        /* ACCELERATION_PROPERTIES_8BIT_KHR as PGD_DOT_* bits */
    unsigned dot8_packed_accel; /* ACCELERATION_PROPERTIES_4x8BIT_PACKED_KHR as PGD_DOT_* bits */
    int bf16_conversions;       /* cl_intel_bfloat16_conversions (or cl_intel_bfloat16) */
} pgd_device_lowp;
enum {
    PGD_DOT_SIGNED = 1,
    PGD_DOT_UNSIGNED = 2,
    PGD_DOT_MIXED = 4,
    PGD_DOT_SAT_SIGNED = 8,
    PGD_DOT_SAT_UNSIGNED = 16,
    PGD_DOT_SAT_MIXED = 32,
};

/* Fills *out (out->size set by the caller; fields past it are left alone) for the device `dev`
 * of pgd_devices_list or pgd_ctx_get_device. PGD_ERR_DEVICE_NOT_FOUND when the device is gone,
 * PGD_ERR_INVALID_ARGUMENT for a size below the first fields'. */
PGD_API pgd_status pgd_device_get_lowp(const pgd_device_info *dev, pgd_device_lowp *out,
                                       pgd_error **err);

/* Text for a device type: "cpu", "gpu", "accelerator", "other". */
PGD_API const char *pgd_device_type_name(pgd_device_type type);

/* ---- context ----------------------------------------------------------------------------- */

typedef struct pgd_ctx pgd_ctx;

/* The GEMM back end: chosen per shape class (AUTO), or forced. */
typedef enum pgd_gemm_backend {
    PGD_GEMM_BACKEND_AUTO = 0,    /* the stored (tuned) choice of the shape class, else Pagoda */
    PGD_GEMM_BACKEND_PAGODA = 1,  /* Pagoda's own kernels (cl/gemm.cl) */
    PGD_GEMM_BACKEND_CLBLAST = 2, /* CLBlast where built in, else Pagoda's kernels */
} pgd_gemm_backend;

/* When GEMM back ends are measured (only where CLBlast is built in; see pgd_gemm_tune). */
typedef enum pgd_gemm_tuning {
    /* Layer creation (pgd_linear_create) measures its shape class when no choice is stored,
     * and pgd_gemm_tune() measures on request. A forward pass never measures. */
    PGD_GEMM_TUNE_AT_CREATE = 0,
    /* Only pgd_gemm_tune() measures; layers use the stored choice, else Pagoda's kernels. */
    PGD_GEMM_TUNE_ON_REQUEST = 1,
} pgd_gemm_tuning;

/* The convolution algorithm; a forced one is used only where it applies, else AUTO's. */
typedef enum pgd_conv_algo {
    PGD_CONV_ALGO_AUTO = 0,      /* per shape and device */
    PGD_CONV_ALGO_GEMM = 1,      /* 1x1, stride 1, no padding, one group: a plain GEMM */
    PGD_CONV_ALGO_IMPLICIT = 2,  /* implicit GEMM (CPU devices) */
    PGD_CONV_ALGO_IM2COL = 3,    /* im2col matrix in chunks, then GEMM */
    PGD_CONV_ALGO_DIRECT = 4,    /* direct kernel */
    PGD_CONV_ALGO_WINOGRAD = 5,  /* 3x3 stride 1, one group, CPU devices: F(2x2, 3x3) + GEMMs */
    PGD_CONV_ALGO_DEPTHWISE = 6, /* groups = channels: the depthwise kernel */
} pgd_conv_algo;

/* The attention kernel; a forced one is used only where it applies, else AUTO's. */
typedef enum pgd_attention_variant {
    PGD_ATTENTION_AUTO = 0,    /* the tuned choice, else kt on CPUs and rows on software
                                * rasterisers (head_dim % 4 == 0); tiled on GPUs */
    PGD_ATTENTION_ROWS = 1,    /* a work-item per query row (head_dim % 4 == 0) */
    PGD_ATTENTION_TILED = 2,   /* local-memory tiles */
    PGD_ATTENTION_GENERIC = 3, /* plain kernel, any head_dim */
    PGD_ATTENTION_KT = 4,      /* rows with K transposed first: both phases broadcast-FMA GEMMs
                                * (head_dim % 4 == 0) */
} pgd_attention_variant;

/* The size of pgd_ctx_options.knobs, its terminating NUL included. */
#define PGD_KNOBS_MAX 512

/* Everything a context can be configured with. The structure grows at its end from one version
 * to the next without breaking callers: `size` says how large the caller's copy is, the library
 * reads and writes only the fields inside it, and fields past it take their defaults. Always
 * start from pgd_ctx_options_init(), which sets `size` and the defaults (a `size` too small
 * for this layout, such as the 0 of `= {0}`, is refused with PGD_ERR_INVALID_ARGUMENT). Each
 * field names the environment variable pgd_ctx_options_from_env() reads into it; nothing else
 * in the library reads the environment. The library never keeps the caller's strings:
 * pgd_ctx_create_with_options() copies them. */
typedef struct pgd_ctx_options {
    /* sizeof (pgd_ctx_options) as the caller was built: set by pgd_ctx_options_init(). */
    size_t size;
    /* $PAGODA_DEVICE: a selector as for pgd_device_select() ("cpu", "1:0", "llvmpipe", ...);
     * NULL: the best device (GPU, accelerator, CPU; software rasterisers last). */
    const char *device;
    /* $PAGODA_CACHE_DIR: the disk cache of program binaries and tuning choices. NULL: the
     * platform default ($XDG_CACHE_HOME/pagoda, else $HOME/.cache/pagoda); "off" (or "none",
     * "0"): no disk cache and no stored tuning. A directory that cannot be made disables it. */
    const char *cache_dir;
    /* $PAGODA_CL_DIR: read kernel sources from this directory (<dir>/<file>.cl) instead of the
     * copies embedded at build time (for kernel development). NULL: embedded. */
    const char *kernel_dir;
    /* $PAGODA_PROFILE (0/1, off/on, no/yes, false/true): record a profiling event per launch
     * (pgd_profile_print), as pgd_ctx_set_profiling(ctx, 1) does. */
    int profiling;
    /* Set with $PAGODA_PROFILE too: print the profile table to stderr when the context is
     * destroyed (only when something was recorded). */
    int profile_print_at_destroy;
    /* $PAGODA_GEMM = auto | pagoda | clblast. */
    pgd_gemm_backend gemm_backend;
    /* $PAGODA_GEMM_TUNE = create | request. */
    pgd_gemm_tuning gemm_tuning;
    /* $PAGODA_CONV = auto | gemm | implicit | im2col | direct | winograd | depthwise. */
    pgd_conv_algo conv_algo;
    /* $PAGODA_ATTENTION = auto | rows | tiled | generic | kt. */
    pgd_attention_variant attention;
    /* $PAGODA_GLOBAL_MEM, $PAGODA_MAX_ALLOC (bytes, K/M/G suffix allowed): lower what the
     * device reports (CL_DEVICE_GLOBAL_MEM_SIZE, CL_DEVICE_MAX_MEM_ALLOC_SIZE), to see how a
     * run behaves on a smaller device. Never raise them. 0: the device's values. */
    uint64_t global_mem_limit;
    uint64_t max_alloc_limit;
    /* $PAGODA_KERNEL_PARAMS: the GEMM kernel parameters to use instead of the stored tuning
     * or the device's defaults, as pgd_ctx_get_kernel_params() prints them:
     * "cpu:rm=6,vw=16,nv=2,ku=4" (gemm_cpu: rows per work-item, vector width 1/2/4/8/16,
     * vectors per row, K unroll) or "gpu:tsm=64,tsn=64,tsk=16,wptm=4,wptn=4" (gemm_gpu: the
     * work-group tile and each work-item's). Checked against the device at context creation.
     * NULL: the tuning stored by pgd_tune() for this device and driver, else the defaults. */
    const char *kernel_params;
    /* $PAGODA_WEIGHTS_DTYPE = f32 | f16 (0 | 1): how linear layers (pgd_linear_create) and
     * convolutions (pgd_conv2d_create) created afterwards store their weights on the device.
     * f16 halves their memory and bandwidth: each weight is rounded to the nearest half
     * (vstore_half_rte, core OpenCL) once and widened back as the GEMM loads it; inputs,
     * accumulation and outputs stay fp32. Those layers then always run Pagoda's kernels. */
    int weights_f16;
    /* Knobs for tests and tuning experiments, not part of the stable interface: a NUL-terminated
     * list of key=value pairs separated by commas, "" for none. Each value is a positive
     * whole number (conv_chunk_bytes also takes a K, M or G suffix; precision a name); a knob not
     * given takes the library's own choice. Known keys, with the variable
     * pgd_ctx_options_from_env() reads each from: gemm_k_chunk     $PAGODA_GEMM_KCHUNK     split
     * every GEMM's K into chunks of this many, accumulated through beta (default: 256 on software
     * rasterisers, whose loops are cut after ~65,535 iterations; no split elsewhere) conv_mb
     * $PAGODA_CONV_MB         row tiles per work-item of the implicit-GEMM convolution (1 to 4096;
     * default 1) conv_chunk_bytes $PAGODA_CONV_CHUNK      a smaller im2col chunk than the default
     * 64 MiB (or the device's max allocation), so small shapes run the chunk loop row_wg
     * $PAGODA_ROW_WG          an upper bound on the work-group size of the row kernels (LayerNorm,
     * softmax) replacing the CPU cap (up to 2^20) max_launch_rows  $PAGODA_MAX_LAUNCH_ROWS rows per
     * launch of every split launch (default: a launch is cut at about 2^30 FLOPs) nl_key_chunk
     * $PAGODA_NL_KEY_CHUNK    keys per chunk of the non-local attention attn_key_block
     * $PAGODA_ATTN_KEY_BLOCK  keys per block of the CPU attention kernel (kt) max_batch
     * $PAGODA_MAX_BATCH       for applications (libpagoda-models reads it with pgd_ctx_get_knob):
     * the most images put in one pass; the library itself does not batch precision
     * $PAGODA_PRECISION       f32 | f16 | int8 (pgd_ctx_get_knob: 1, 2, 3): the arithmetic of
     * linear layers (docs/precision.md). f16 needs cl_khr_fp16, int8 cl_khr_integer_dot_product; a
     * device without it refuses the context with PGD_ERR_UNSUPPORTED naming the device and the
     * extension Set them with pgd_ctx_options_set_knob() or by writing the text; they are checked
     * when the context is created (an unknown key or a bad value is PGD_ERR_INVALID_ARGUMENT naming
     * it) and the context keeps them normalised (pgd_ctx_get_options(ctx)->knobs). */
    char knobs[PGD_KNOBS_MAX];
} pgd_ctx_options;

/* Fills *opt with the defaults (all zero / NULL / "") and opt->size with `size`, the caller's
 * sizeof (pgd_ctx_options). Call it through pgd_ctx_options_init(), which passes the size. */
PGD_API void pgd_ctx_options_init_size(pgd_ctx_options *opt, size_t size);
static inline void pgd_ctx_options_init(pgd_ctx_options *opt)
{
    pgd_ctx_options_init_size(opt, sizeof *opt);
}
/* Sets knob `key` of opt->knobs to `value` (text as in the list above), replacing an earlier
 * value of the key; value NULL or "" removes the knob (the library's own choice). An unknown
 * key or a bad value is PGD_ERR_INVALID_ARGUMENT naming them, and opt is left unchanged. */
PGD_API pgd_status pgd_ctx_options_set_knob(pgd_ctx_options *opt, const char *key,
                                            const char *value, pgd_error **err);
/* Reads the PAGODA_* variables documented in pgd_ctx_options into *opt, overwriting only the
 * fields (and knobs) whose variable is set and non-empty. Strict: a value that does not parse
 * completely (PAGODA_GEMM=fast, PAGODA_MAX_BATCH=-3, PAGODA_GLOBAL_MEM=lots, "12x") is
 * PGD_ERR_INVALID_ARGUMENT with a message naming the variable, its value and what is accepted,
 * and *opt is left unchanged. String fields then point into the environment: they stay valid
 * until that variable changes. */
PGD_API pgd_status pgd_ctx_options_from_env(pgd_ctx_options *opt, pgd_error **err);
/* The same from an explicit list of "NAME=VALUE" strings ending in NULL (as execve's envp; a
 * name given twice: the last wins) instead of the process environment, which it does not read
 * (envp NULL: the process environment). For callers that configure contexts from their own
 * settings, and for tests that must not change process-wide state. String fields point into
 * envp's strings. */
PGD_API pgd_status pgd_ctx_options_from_envp(pgd_ctx_options *opt, const char *const *envp,
                                             pgd_error **err);
/* Opens a context and an in-order profiling queue as `opt` says (NULL: the defaults; the
 * environment is not read). The context keeps its own copy of `opt` and its strings; the caller
 * keeps `opt`. Stored GEMM tuning choices are loaded here. On error nothing is allocated. */
PGD_API pgd_status pgd_ctx_create_with_options(const pgd_ctx_options *opt, pgd_ctx **out,
                                               pgd_error **err);
/* The options the context was made with (its own copy, owned by the context; cache_dir is the
 * value asked for, see pgd_ctx_get_cache_dir for the one in use). */
PGD_API const pgd_ctx_options *pgd_ctx_get_options(const pgd_ctx *ctx);
/* The value of knob `key` (see pgd_ctx_options.knobs) the context was made with, into *value:
 * 0 when it was not given. An unknown key is PGD_ERR_NOT_FOUND (*value unchanged). */
PGD_API pgd_status pgd_ctx_get_knob(const pgd_ctx *ctx, const char *key, int64_t *value);
/* pgd_ctx_options_init + pgd_ctx_options_from_env + a non-NULL `selector` replacing the
 * device, then pgd_ctx_create_with_options: a context configured by the environment (a bad
 * PAGODA_* value is an error). `selector` NULL means $PAGODA_DEVICE, or the default. */
PGD_API pgd_status pgd_ctx_create(const char *selector, pgd_ctx **out, pgd_error **err);
PGD_API void pgd_ctx_destroy(pgd_ctx *ctx);
/* The device the context runs on. Owned by the context. */
PGD_API const pgd_device_info *pgd_ctx_get_device(const pgd_ctx *ctx);
/* Waits for all queued work. */
PGD_API pgd_status pgd_ctx_finish(pgd_ctx *ctx, pgd_error **err);

/* Counters about program builds, for tests and reports. */
typedef struct pgd_build_stats {
    unsigned programs_requested; /* calls that wanted a program */
    unsigned memory_hits;        /* served from the in-memory table */
    unsigned disk_hits;          /* built from a cached binary */
    unsigned source_builds;      /* compiled from source */
    unsigned disk_writes;        /* binaries written to the cache */
    unsigned disk_rejects;       /* cached binaries found bad, deleted and rebuilt */
    double build_ms;             /* total wall time spent in builds (source or binary) */
} pgd_build_stats;

PGD_API void pgd_ctx_get_build_stats(const pgd_ctx *ctx, pgd_build_stats *out);
/* Drops the in-memory program table (the disk cache stays): frees the host and device memory the
 * built programs hold; the next request builds again (from the disk cache when it can). Kernels
 * of pgd_kernel handles stay valid. */
PGD_API void pgd_ctx_clear_programs(pgd_ctx *ctx);

/* The names of the embedded kernel files ("gemm", "attention", ...), NULL-terminated. */
PGD_API const char *const *pgd_program_names(void);
/* Builds (or fetches from the caches) the program of embedded kernel file `name` with extra
 * build options `options` (may be NULL) ahead of use: a program that warms up at start-up so
 * its first forward pass pays no compile, or a benchmark timing compiles. An unknown name is
 * PGD_ERR_NOT_FOUND. */
PGD_API pgd_status pgd_program_prepare(pgd_ctx *ctx, const char *name, const char *options,
                                       pgd_error **err);

/* The disk cache directory in use, or NULL when caching is off or unusable. */
PGD_API const char *pgd_ctx_get_cache_dir(const pgd_ctx *ctx);

/* ---- profiling --------------------------------------------------------------------------- */

PGD_API void pgd_ctx_set_profiling(pgd_ctx *ctx, int on);
/* Prints per-kernel totals (launches, queued→start, start→end; total, mean, share) to `f`.
 * Waits for the queue first. */
PGD_API pgd_status pgd_profile_print(pgd_ctx *ctx, FILE *f, pgd_error **err);
/* Forgets the collected timings. */
PGD_API void pgd_profile_reset(pgd_ctx *ctx);

/* ---- tensors ----------------------------------------------------------------------------- */

#define PGD_MAX_DIMS 8

typedef struct pgd_tensor pgd_tensor;

/* Creates a contiguous float32 tensor of `ndim` dims on the context's device. The contents are
 * undefined. Sizes larger than the device's max allocation or global memory fail early with
 * PGD_ERR_TOO_LARGE naming both sizes. Buffers are taken from and returned to a pool kept by
 * the context. */
PGD_API pgd_status pgd_tensor_create(pgd_ctx *ctx, int ndim, const int64_t *shape, pgd_tensor **out,
                                     pgd_error **err);
/* Returns the buffer to the pool and frees the handle. NULL is accepted. */
PGD_API void pgd_tensor_destroy(pgd_tensor *t);
PGD_API int pgd_tensor_get_ndim(const pgd_tensor *t);
PGD_API int64_t pgd_tensor_get_dim(const pgd_tensor *t, int i);
/* The element stride of dim i (contiguous: the product of the later dims). */
PGD_API int64_t pgd_tensor_get_stride(const pgd_tensor *t, int i);
PGD_API int64_t pgd_tensor_get_numel(const pgd_tensor *t);
/* Changes the shape of a contiguous tensor to one with the same element count. */
PGD_API pgd_status pgd_tensor_reshape(pgd_tensor *t, int ndim, const int64_t *shape,
                                      pgd_error **err);
/* Copies numel floats from host to device (blocking). */
PGD_API pgd_status pgd_tensor_upload(pgd_tensor *t, const float *src, pgd_error **err);
/* pgd_tensor_create followed by pgd_tensor_upload of `data` (numel floats, kept by the caller):
 * a device tensor holding a copy of host data. On error *out is NULL and nothing is allocated. */
PGD_API pgd_status pgd_tensor_create_from(pgd_ctx *ctx, int ndim, const int64_t *shape,
                                          const float *data, pgd_tensor **out, pgd_error **err);
/* Copies numel floats from device to host (blocking). */
PGD_API pgd_status pgd_tensor_download(const pgd_tensor *t, float *dst, pgd_error **err);
/* Writes a one-line shape like "[2, 197, 768]" into buf. Returns buf. */
PGD_API char *pgd_tensor_shape_str(const pgd_tensor *t, char *buf, size_t size);

/* Bytes currently held idle in the context's buffer pool, and how many buffers. */
PGD_API void pgd_ctx_get_pool_stats(const pgd_ctx *ctx, uint64_t *idle_bytes, size_t *idle_buffers,
                                    uint64_t *reused);

/* Device memory accounting of a context. `live_bytes` counts the buffers held by live tensors
 * (pooled idle buffers not included); `peak_bytes` is the most live_bytes seen since the last
 * pgd_ctx_memory_reset_peak (or creation): what a pass really needed. */
typedef struct pgd_memory_stats {
    uint64_t live_bytes, peak_bytes;
    uint64_t idle_bytes; /* held idle in the pool for reuse */
    size_t idle_buffers;
    uint64_t reused; /* tensor creations served from the pool */
} pgd_memory_stats;
PGD_API void pgd_ctx_get_memory_stats(const pgd_ctx *ctx, pgd_memory_stats *out);
/* Sets peak_bytes to the bytes live now, before a pass to be measured. */
PGD_API void pgd_ctx_memory_reset_peak(pgd_ctx *ctx);

/* Copies `count` elements of src starting at element src_offset to dst starting at dst_offset
 * (flat, row-major element indices), on the device, in queue order. Both tensors belong to the
 * same context; the ranges must lie inside each tensor (else PGD_ERR_INVALID_ARGUMENT naming the
 * range and the tensor's shape) and must not overlap when src is dst. count 0 does nothing. */
PGD_API pgd_status pgd_tensor_copy(const pgd_tensor *src, int64_t src_offset, pgd_tensor *dst,
                                   int64_t dst_offset, int64_t count, pgd_error **err);
/* dst = src narrowed along dimension `dim` to indices [start, start + length), made
 * contiguous (torch's src.narrow(dim, start, length).contiguous()). dst must have exactly that
 * shape, else PGD_ERR_SHAPE naming both shapes; start and length must fit the dimension. One
 * device copy, whatever dim is. dst must not be src. */
PGD_API pgd_status pgd_tensor_slice(const pgd_tensor *src, int dim, int64_t start, int64_t length,
                                    pgd_tensor *dst, pgd_error **err);
/* Sets every element of t to `value`. */
PGD_API pgd_status pgd_tensor_fill(pgd_tensor *t, float value, pgd_error **err);

/* ---- GEMM and linear layers --------------------------------------------------------------- */

typedef enum pgd_act { PGD_ACT_NONE = 0, PGD_ACT_RELU = 1, PGD_ACT_GELU = 2 } pgd_act;

/* Options of pgd_gemm. Epilogue order: alpha·op(A)·op(B) + beta·C, + bias[n], activation
 * (GELU is the exact erf form), + residual[m, n]. */
typedef struct pgd_gemm_args {
    int trans_a, trans_b;   /* op(X) = Xᵀ when set */
    float alpha, beta;      /* beta = 0: C is not read (may hold NaN) */
    const pgd_tensor *bias; /* 1-D [N], or NULL */
    pgd_act act;
    const pgd_tensor *residual; /* shaped like C (may be C itself), or NULL */
} pgd_gemm_args;

/* C = op(A)·op(B) with the epilogue of `args` (NULL: plain C = A·B). A, B and C are row-major
 * 2-D [rows, cols] or 3-D [batch, rows, cols]; a 2-D B with 3-D A and C is shared by every
 * batch. Any sizes. The back end is the tuned choice of the shape class (see pgd_gemm_tune),
 * else Pagoda's kernels, or the one options.gemm_backend forces. */
PGD_API pgd_status pgd_gemm(pgd_ctx *ctx, const pgd_gemm_args *args, const pgd_tensor *a,
                            const pgd_tensor *b, pgd_tensor *c, pgd_error **err);

/* A matrix operand addressed inside a tensor's buffer, for GEMMs over parts of tensors (one
 * head's slice of a fused projection, a batch of matrices with gaps): element (b, r, c) of the
 * stored (untransposed) matrix is at offset + b·batch_stride + r·ld + c. batch_stride 0 shares
 * one matrix across the batch. */
typedef struct pgd_matrix {
    const pgd_tensor *t;
    int64_t offset, ld, batch_stride;
} pgd_matrix;

/* C = op(A)·op(B) with the epilogue of `args` (NULL: plain C = A·B) on strided operands: op(A)
 * is M x K, op(B) K x N, C M x N, `batch` of each. With trans_a the stored A is K x M (and
 * likewise B). args->bias is 1-D [N]; args->residual, when set, is read with C's offset,
 * ld and batch_stride. Every operand must lie inside its tensor (ld at least its row length,
 * offsets and strides non-negative, the last element addressed within numel), else
 * PGD_ERR_INVALID_ARGUMENT naming the operand; C's batch_stride must not be 0 when batch > 1.
 * C must not overlap A or B. */
PGD_API pgd_status pgd_gemm_strided(pgd_ctx *ctx, const pgd_gemm_args *args, int64_t M, int64_t N,
                                    int64_t K, int64_t batch, pgd_matrix a, pgd_matrix b,
                                    pgd_matrix c, pgd_error **err);

/* y = numpy.matmul(a, b) (ONNX MatMul): a [..., M, K] times b [..., K, N] is [..., M, N], the
 * batch dims (all but the last two) broadcasting against each other as NumPy's do, at any rank
 * up to PGD_MAX_DIMS; a 1-D a is a row [1, K] and a 1-D b a column [K, 1], the added dim
 * removed from y. A broadcast operand is never copied (its matrices are shared through a batch
 * stride of 0). y must have exactly the result's shape (PGD_ERR_SHAPE naming all three) and
 * must not be a's or b's tensor. */
PGD_API pgd_status pgd_matmul(pgd_ctx *ctx, const pgd_tensor *a, const pgd_tensor *b, pgd_tensor *y,
                              pgd_error **err);

/* A linear layer y = x·Wᵀ + b with W [out, in] as PyTorch stores it, prepared once for the
 * device (on CPU devices W is repacked into the GEMM's panel layout). The caller keeps `w` and
 * `bias` (bias may be NULL); the layer holds its own copies. On error nothing is allocated. */
typedef struct pgd_linear pgd_linear;
PGD_API pgd_status pgd_linear_create(pgd_ctx *ctx, const pgd_tensor *w, const pgd_tensor *bias,
                                     pgd_linear **out, pgd_error **err);
PGD_API void pgd_linear_destroy(pgd_linear *l);
/* y[..., out] = act(x[..., in]·Wᵀ + b) + residual. residual may be NULL or y's own tensor. */
PGD_API pgd_status pgd_linear_forward(pgd_ctx *ctx, const pgd_linear *l, const pgd_tensor *x,
                                      pgd_act act, const pgd_tensor *residual, pgd_tensor *y,
                                      pgd_error **err);

/* GEMM back-end tuning. Where CLBlast is built in, the back end of a GEMM is chosen per device
 * and shape class: (op(A), op(B), batched?, M, N, K each rounded up to a power of two); linear
 * layers are classed by N and K only. The choices are stored in <cache dir>/gemm-choices.json
 * under the device's identity (name, driver, platform), loaded when a context is created and
 * written only when something is measured. A forward pass (pgd_gemm, pgd_linear_forward,
 * convolutions, attention) never measures and never writes a file: an unmeasured class uses
 * the stored choice, else Pagoda's kernels; options.gemm_backend forces one everywhere.
 *
 * pgd_gemm_tune measures both back ends for the class of an op(A)·op(B) of these sizes on
 * scratch buffers (median of 3 runs after a warm-up; CLBlast's first-call compile excluded),
 * unless a choice for the class is stored already, and stores the faster. `chosen` (may be
 * NULL) receives PGD_GEMM_BACKEND_PAGODA or PGD_GEMM_BACKEND_CLBLAST. Without CLBlast, or with
 * gemm_backend forced, nothing is measured and `chosen` is that back end. Sizes must be
 * positive (PGD_ERR_INVALID_ARGUMENT). */
PGD_API pgd_status pgd_gemm_tune(pgd_ctx *ctx, int trans_a, int trans_b, int64_t M, int64_t N,
                                 int64_t K, int64_t batch, pgd_gemm_backend *chosen,
                                 pgd_error **err);

/* ---- per-device kernel tuning ------------------------------------------------------------ */

/* Pagoda's GEMM kernel parameters (register tile, vector width, K unroll of gemm_cpu; the
 * work-group tile of gemm_cpu's local-memory sibling gemm_gpu) differ in their best values
 * between OpenCL implementations: PoCL vectorises the kernel's own float16 code, Intel's CPU
 * runtime and GPUs vectorise across work-items. pgd_tune searches them by measurement on the
 * context's device and stores the winner in the cache directory (tuning.json) under the
 * device and driver; contexts created later load it (unless options.kernel_params says
 * otherwise), and so does this one: layers created after the call use it, layers created before
 * keep the parameters their weights were packed for. Untuned devices get defaults from their
 * reported limits (type, preferred vector width, work-group size, local memory). */
typedef struct pgd_tune_progress {
    int index, count;   /* this candidate (0-based) of `count`; -1 in the runoff (of `count`
                           finalists, `ms` their median of 5 passes, best_ms -1) */
    const char *params; /* its parameters, as pgd_ctx_get_kernel_params prints them */
    double ms;          /* its time for the workload; < 0 when rejected (see `why`) */
    const char *why;    /* NULL, or why it was rejected: build failure, wrong result, too slow */
    double best_ms;     /* the best time so far */
    double elapsed_s;   /* since the search began */
} pgd_tune_progress;
typedef void (*pgd_tune_progress_fn)(const pgd_tune_progress *p, void *user);

typedef struct pgd_tune_result {
    char params[128];   /* the winner */
    char defaults[128]; /* the device's untuned parameters */
    double best_ms;     /* the winner's time for the workload */
    double default_ms;  /* the defaults' time (the first candidate measured) */
    int tried;          /* candidates measured */
    int rejected;       /* of which rejected */
    int skipped;        /* candidates left when the budget ran out */
    double seconds;     /* the whole search, builds included */
    int stored;         /* 1: written to <cache dir>/tuning.json */
    /* The attention stage (CPU devices): the kernel chosen ("kt:kw=16,rows=6", "rows"; "" when none
     * was measured) and the time of its workload (ViT-B/16's 197-token and a 785-token
     * attention of 12 heads) with it and with the untuned choice, ms (-1: not measured). */
    char attention[32];
    double attention_ms, attention_default_ms;
    /* The runoff: the best this many GEMM candidates measured again in turns (5 rounds); the
     * lowest median won and is best_ms (and default_ms, when the defaults were among them). */
    int runoff;
} pgd_tune_result;

/* Searches the GEMM parameters of the context's device for at most about budget_s seconds
 * (<= 0: 60), starting with the defaults; every candidate is first checked on an awkward
 * GEMM against a double-precision host reference and rejected if wrong. The workload is the
 * GEMMs of ViT-B/16 and ResNet-50's commonest layer shapes (a few hundred MFLOP each). `fn`
 * (may be NULL) is called after each candidate. Then, on CPU devices, the attention kernel
 * (rows, or Kᵀ at key vector widths 16, 8, 4 with 4, 6 or 8 query rows a work-item; each
 * checked against a double reference first)
 * in the last fifth of the budget, its untuned choice always measured. `out` (may be NULL)
 * receives the result. The winners are stored when the context has a cache directory, and used
 * by this context from now. */
PGD_API pgd_status pgd_tune(pgd_ctx *ctx, double budget_s, pgd_tune_progress_fn fn, void *user,
                            pgd_tune_result *out, pgd_error **err);

/* The GEMM kernel parameters the context uses now ("cpu:rm=6,vw=16,nv=2,ku=4" or
 * "gpu:tsm=...") into buf, and where they came from: "defaults", "tuned" (stored by pgd_tune
 * for this device and driver) or "options" (options.kernel_params). */
PGD_API const char *pgd_ctx_get_kernel_params(const pgd_ctx *ctx, char *buf, size_t size);
/* The attention kernel the context runs for a head dimension of 64 ("kt:kw=16,rows=6", "rows",
 * "tiled", "generic") into buf, and where the choice came from: "defaults", "tuned" (stored by
 * pgd_tune) or "options" (options.attention). */
PGD_API const char *pgd_ctx_get_attention_params(const pgd_ctx *ctx, char *buf, size_t size);
/* Which entry of the parameters the context runs, into buf (returned): "db:<name>" (the shipped
 * parameter database's entry for this device: a known device such as "db:pocl-avx512", else its
 * class such as "db:cpu", else "db:generic", the rules from the device's limits),
 * "tuned:<store key>" (pgd_tune's result in the cache directory's tuning.json, under that key)
 * or "options" (options.kernel_params). */
PGD_API const char *pgd_ctx_get_params_entry(const pgd_ctx *ctx, char *buf, size_t size);
/* The context's parameters (its GEMM parameters and attention kernel, as pgd_tune left or the
 * store gave them) as a line to add to the parameter database (runtime/tune/db.c), matching
 * this device: the known device's line with new values, or a new line under its class.
 * PGD_ERR_INVALID_ARGUMENT when buf is too small (2048 bytes is enough). */
PGD_API pgd_status pgd_tune_export(const pgd_ctx *ctx, char *buf, size_t size, pgd_error **err);

/* ---- attention --------------------------------------------------------------------------- */

/* A strided 4-D view [batch, head, token, d] over a tensor's buffer: element (b, h, t, d) is at
 * offset + b·batch_stride + h·head_stride + t·token_stride + d (d contiguous). This addresses
 * Q, K and V inside a fused qkv GEMM output without permutes. */
typedef struct pgd_view {
    const pgd_tensor *t;
    int64_t offset, batch_stride, head_stride, token_stride;
} pgd_view;

/* Which keys a query row attends to (pgd_attention_args.mode). */
typedef enum pgd_attention_mode {
    PGD_ATTENTION_SOFT = 0,   /* softmax over every visible key */
    PGD_ATTENTION_TOPK = 1,   /* softmax over the `topk` highest scores of the row only; ties at
                               * the k-th score go to the lower key index; topk >= the visible
                               * keys is soft attention */
    PGD_ATTENTION_SAMPLE = 2, /* one key j per row drawn from the softmax distribution, O = V[j];
                               * the draw is a pure function of (seed, b, h, row), the same on
                               * every device (pgd_attention_uniform) */
} pgd_attention_mode;

/* The causal mask's alignment (pgd_attention_args.causal) when nq != nk. Bottom-right: key j
 * is visible to query i iff j <= i + (nk - nq), so the last query sees every key (a query
 * block after a KV cache; FlashAttention 2.1+). Top-left: iff j <= i (torch.tril over
 * [nq, nk]; PyTorch's scaled_dot_product_attention(is_causal=True)). Equal when nq == nk. */
#define PGD_CAUSAL_BOTTOM_RIGHT 1
#define PGD_CAUSAL_TOP_LEFT 2
/* pgd_attention_ex only: query row i is key position past + i, the queries being the first new
 * tokens after a KV cache's `past` ones (ONNX Attention with past_key); without a cache it is
 * top-left, and with nq equal to the new key count bottom-right. */
#define PGD_CAUSAL_AFTER_PAST 3

typedef struct pgd_attention_args {
    int64_t batch, heads, nq, nk, head_dim;
    float scale;         /* 0: 1/sqrt(head_dim) */
    int causal;          /* 0 none, or a PGD_CAUSAL_* alignment */
    pgd_view q, k, v, o; /* o must not overlap q, k or v */
    pgd_view mask;       /* additive mask [b, h, i, j] (token_stride = row stride); t NULL: none */
    /* Optional attention probabilities of query rows [probs_q0, probs_q1) of one head
     * (probs_head >= 0) or all heads (-1), written densely as [batch, heads selected,
     * q1 - q0, nk]. probs NULL: none. The only case where probabilities reach memory. */
    pgd_tensor *probs;
    int probs_head;
    int64_t probs_q0, probs_q1;
    /* Hard attention (0: soft). TOPK needs topk >= 1; its probabilities are the renormalised
     * weights of the kept keys, SAMPLE's are one-hot. Hard modes run a plain kernel with an
     * nq x nk score buffer per launch (chunked to 64 MiB); they are for study, not speed. */
    pgd_attention_mode mode;
    int64_t topk;
    uint64_t seed;
} pgd_attention_args;

/* Fused scaled-dot-product attention O = softmax(Q·Kᵀ·scale + mask)·V, flash style (online
 * softmax over key tiles; no nq × nk matrix in device memory), any sizes. A fully masked row
 * gives zeros. options.attention ($PAGODA_ATTENTION) forces a kernel variant. */
PGD_API pgd_status pgd_attention(pgd_ctx *ctx, const pgd_attention_args *args, pgd_error **err);

/* Grouped-query (and multi-query) attention: args->heads query heads over kv_heads key/value
 * heads (kv_heads divides heads; the k and v views address kv_heads heads), query head h
 * reading key/value head h / (heads / kv_heads) as PyTorch's enable_gqa does. K and V are
 * never copied: the call is heads / kv_heads launches of the fused kernel over strided views.
 * Soft attention without probabilities only (PGD_ERR_UNSUPPORTED otherwise); a mask with a
 * head stride is read per query head. kv_heads == heads is pgd_attention. */
PGD_API pgd_status pgd_attention_gqa(pgd_ctx *ctx, const pgd_attention_args *args, int64_t kv_heads,
                                     pgd_error **err);

/* What pgd_attention_ex writes to pgd_attention_ext.scores (ONNX Attention's qk_matmul_output
 * modes 0, 2 and 3), dense [batch, heads, nq, nk] with nk counting the cache's past tokens. */
#define PGD_SCORES_RAW 1    /* q·kᵀ·scale, soft-capped when softcap > 0 */
#define PGD_SCORES_MASKED 2 /* the raw score with the mask applied; -inf where a key is hidden */
#define PGD_SCORES_PROBS 3  /* the softmax weights; 0 at hidden keys and in rows with none */

/* What pgd_attention_ex adds to pgd_attention_args. Set size to sizeof(pgd_attention_ext):
 * fields added later are then read only from callers that know them, and a zeroed field
 * means "not used". */
typedef struct pgd_attention_ext {
    size_t size;
    int64_t kv_heads;   /* key/value heads (0: args->heads), as pgd_attention_gqa */
    int64_t v_head_dim; /* the value head size (0: args->head_dim), larger or smaller; the v and
                         * o views then address v_head_dim columns a token */
    /* Soft-capping (Gemma 2, ONNX Attention's softcap): > 0 turns each score s = q·k·scale
     * into softcap·tanh(s / softcap), before the mask is applied. */
    float softcap;
    /* args->mask holds booleans: 0.0 hides the key, any other value keeps it (nothing is
     * added). Masks of either kind broadcast through zero strides in args->mask. */
    int mask_bool;
    /* Sliding window (window nonzero): key j is visible to the query at position p iff
     * p - window_left <= j <= p + window_right, -1 leaving that side open. Query row i sits at
     * p = i (top-left), p = i + nk_b - nq (bottom-right, nk_b the sequence's key count) or
     * p = past + i (PGD_CAUSAL_AFTER_PAST): the alignment of args->causal, or of window_align
     * when args->causal is 0 (0: bottom-right). */
    int window, window_align;
    int64_t window_left, window_right;
    /* Per-sequence key counts (NULL: nk for all), a host array of batch entries: the keys
     * [kv_lens[b], nk) of sequence b are hidden (ONNX's nonpad_kv_seqlen; padding without a
     * mask), and the bottom-right alignment counts kv_lens[b] keys. */
    const int64_t *kv_lens;
    /* Scores out (NULL: none): scores_kind (PGD_SCORES_*) of every query row and head, written
     * densely as [batch, heads, nq, nk]. The only N×N matrix that reaches memory. */
    pgd_tensor *scores;
    int scores_kind;
    /* KV cache (k_cache.t NULL: none): the nk new keys and values of args->k and args->v are
     * written into k_cache and v_cache at tokens [past, past + nk) (views of kv_heads heads,
     * key and value head sizes), and the attention runs over the cache's tokens
     * [0, past + nk), as a decoder appends a step's keys and attends over all of them. */
    pgd_view k_cache, v_cache;
    int64_t past;
    /* Half-precision storage: q, k, v, o and the caches hold IEEE binary16 values (a tensor of
     * n floats holds 2n halves; view offsets and strides count halves), read and written by
     * core OpenCL's vload_half / vstore_half_rte on every device; the arithmetic is float32
     * and each output is rounded once. The mask and the scores stay float. */
    int half_io;
} pgd_attention_ext;
/* pgd_attention with grouped key/value heads, a value head size of its own, soft-capping,
 * boolean masks, sliding windows, per-sequence key counts, a KV cache and the scores as an
 * output (ext NULL: pgd_attention). Every case stays fused (online softmax, no nq × nk scores
 * in memory unless ext->scores asks for them): with only kv_heads, a larger value head or a
 * cache it runs the tuned kernels (a larger value head as ceil(v_head_dim / head_dim) launches
 * over column chunks), else one launch of a kernel with one work-item a query row. Soft
 * attention only; args->probs only where no field after v_head_dim is set and the value head
 * is the key's (ext->scores gives the probabilities of every row); PGD_ERR_UNSUPPORTED
 * otherwise. */
PGD_API pgd_status pgd_attention_ex(pgd_ctx *ctx, const pgd_attention_args *args,
                                    const pgd_attention_ext *ext, pgd_error **err);

/* Multi-head self-attention on a fused projection: qkv [B, N, 3·H·D] laid out (q|k|v, head,
 * d) as timm and torchvision produce it, out [B, N, H·D]. */
PGD_API pgd_status pgd_attention_qkv(pgd_ctx *ctx, const pgd_tensor *qkv, int64_t heads,
                                     pgd_tensor *out, pgd_error **err);

/* ---- Swin's windows --------------------------------------------------------------------- */

/* pgd_window_partition's flags: roll the map before padding it (timm), instead of rolling the
 * padded map (torchvision, Hugging Face). */
#define PGD_WINDOW_ROLL_UNPADDED 1

/* Window partition with cyclic shift: x [B, H, W, C] zero-padded at the bottom and right to
 * Hp x Wp (multiples of `window`) and rolled by (-shift_h, -shift_w) as torch.roll does (element
 * (i, j) of the result is (i + shift_h, j + shift_w) modulo the rolled grid: Hp x Wp, or H x W
 * with PGD_WINDOW_ROLL_UNPADDED, where padding then follows the rolled map), cut into
 * window x window windows: out [B·nW, window², C], nW = (Hp/window)(Wp/window), windows
 * row-major and tokens row-major within each. Shifts lie in [0, rolled grid). out must not
 * alias x. */
PGD_API pgd_status pgd_window_partition(pgd_ctx *ctx, const pgd_tensor *x, int64_t window,
                                        int64_t shift_h, int64_t shift_w, int flags,
                                        pgd_tensor *out, pgd_error **err);
/* The inverse of pgd_window_partition with the same window, shifts and flags, added: every element
 * of y [B, H, W, C] gets the window token it was partitioned into (padding is dropped). The
 * residual add of a Swin block in one pass. */
PGD_API pgd_status pgd_window_merge_add(pgd_ctx *ctx, const pgd_tensor *windows, int64_t window,
                                        int64_t shift_h, int64_t shift_w, int flags, pgd_tensor *y,
                                        pgd_error **err);
/* Swin's patch merging gather: x [B, H, W, C] -> out [B, ceil(H/2), ceil(W/2), 4C], each 2 x 2
 * cell's pixels concatenated as (0,0), (1,0), (0,1), (1,1) (row offset, column offset), zeros
 * past an odd edge, as torchvision and timm order them. */
PGD_API pgd_status pgd_patch_merge(pgd_ctx *ctx, const pgd_tensor *x, pgd_tensor *out,
                                   pgd_error **err);

/* ---- .npy files ---------------------------------------------------------------------------- */

/* Largest .npy file pgd_npy_read reads (2 GiB): the whole file and its float copy are held in
 * memory at once; an input batch of 256 float64 images of 3 x 384 x 384 is 906 MB. */
#define PGD_NPY_MAX_BYTES ((uint64_t)2 << 30)

/* Reads a NumPy .npy array of little-endian float32 or float64 (converted) in C order, through
 * pgd_file_read's rules (a regular file of at most PGD_NPY_MAX_BYTES). The header must be the
 * dict NumPy writes, parsed as numpy.load parses it: exactly the keys 'descr', 'fortran_order'
 * (True or False) and 'shape' (a tuple of non-negative integers, at most PGD_MAX_DIMS), each
 * once, at most 10,000 bytes; anything else is PGD_ERR_FORMAT. *data is the caller's, for
 * pgd_free(); *ndim and shape receive the shape. On error nothing is allocated and the message
 * names the file and the problem. */
PGD_API pgd_status pgd_npy_read(const char *path, float **data, int *ndim,
                                int64_t shape[PGD_MAX_DIMS], pgd_error **err);
/* Writes float32 data of the given shape as .npy at path through a pgd_outfile: the file
 * appears complete or not at all, and a target that exists and is not a regular file is
 * refused (PGD_ERR_IO naming it). */
PGD_API pgd_status pgd_npy_write(const char *path, const float *data, int ndim,
                                 const int64_t *shape, pgd_error **err);
/* ---- weights (safetensors) ---- */

/* A read-only safetensors file (https://github.com/huggingface/safetensors): an 8-byte
 * little-endian header length N, N bytes of UTF-8 JSON, then the data section. pgd_weights_open()
 * reads and validates the header completely and keeps the file open; every accessor below then
 * works on checked entries, and a tensor's bytes are read from the file (pread, not a mapping)
 * when they are converted or copied. A handle may be read from several threads. */

typedef enum pgd_dtype {
    PGD_DTYPE_F64 = 0,
    PGD_DTYPE_F32,
    PGD_DTYPE_F16,
    PGD_DTYPE_BF16,
    PGD_DTYPE_I64,
    PGD_DTYPE_I32,
    PGD_DTYPE_I16,
    PGD_DTYPE_I8,
    PGD_DTYPE_U8,
    PGD_DTYPE_BOOL,
    /* known to the format, listed and located, but not converted by Pagoda */
    PGD_DTYPE_U16,
    PGD_DTYPE_U32,
    PGD_DTYPE_U64,
    PGD_DTYPE_F8_E4M3,
    PGD_DTYPE_F8_E5M2
} pgd_dtype;

/* The safetensors name of a dtype ("F32", "BF16", ...); "?" for a value not in the list. */
PGD_API const char *pgd_dtype_name(pgd_dtype dtype);
/* Bytes per element of a dtype; 0 for a value not in the list. */
PGD_API size_t pgd_dtype_size(pgd_dtype dtype);

typedef struct pgd_weights pgd_weights;

/* One tensor of an open file. `data` is NULL for a file opened by pgd_weights_open (the bytes
 * stay on disk: copy them with pgd_weights_read); kept for handles on memory. */
typedef struct pgd_weight_info {
    const char *name;
    pgd_dtype dtype;
    const char *dtype_name; /* "F32", ... */
    int ndim;               /* 0..PGD_MAX_DIMS; 0 is a scalar */
    int64_t shape[PGD_MAX_DIMS];
    uint64_t numel;  /* product of the shape (1 for a scalar) */
    uint64_t bytes;  /* numel * pgd_dtype_size(dtype) */
    uint64_t offset; /* of the first byte within the data section */
    const void *data;
} pgd_weight_info;

/* Opens and validates a safetensors file. Rejected with PGD_ERR_FORMAT (PGD_ERR_NOT_FOUND or
 * PGD_ERR_IO when the file cannot be read), the message naming the file, the tensor and the rule
 * broken:
 *   - the file holds at least 8 bytes; header length N <= 100,000,000 and 8 + N <= file size;
 *   - the header is valid UTF-8 and a JSON object without duplicate keys;
 *   - at most 1,000,000 tensors; names are 1..1024 bytes;
 *   - "__metadata__", when present, is an object whose values are all strings;
 *   - every other entry is an object with exactly "dtype" (a known dtype name), "shape" (an
 *     array of at most 8 non-negative integers) and "data_offsets" ([begin, end], integers,
 *     begin <= end <= data section size);
 *   - end - begin equals product(shape) x dtype size, computed without overflow;
 *   - sorted by offset, the ranges start at 0 and follow each other without gap or overlap, and
 *     the last ends exactly at the end of the file (no trailing bytes).
 * The path goes through pgd_file_read's rules (a regular file; a FIFO or a device is refused
 * without blocking). On error *out is NULL and nothing is allocated or left open. A file that
 * is truncated or rewritten while open is never a crash: reading a tensor that is gone is
 * PGD_ERR_IO naming the file and the tensor. */
PGD_API pgd_status pgd_weights_open(const char *path, pgd_weights **out, pgd_error **err);
/* Closes the file and frees. NULL is accepted. */
PGD_API void pgd_weights_destroy(pgd_weights *w);
/* The number of tensors (the "__metadata__" entry is not a tensor). */
PGD_API size_t pgd_weights_get_count(const pgd_weights *w);
/* The name of tensor i, tensors ordered by their offset in the file; NULL when i >= count. */
PGD_API const char *pgd_weights_get_name(const pgd_weights *w, size_t i);
/* Fills *info (may be NULL) for tensor `name`: PGD_OK, or PGD_ERR_NOT_FOUND when absent. */
PGD_API pgd_status pgd_weights_find(const pgd_weights *w, const char *name, pgd_weight_info *info);
/* The value of metadata key `key`, or NULL when absent. Owned by the handle. */
PGD_API const char *pgd_weights_get_metadata(const pgd_weights *w, const char *key);
/* Converts tensor `name` to numel float32 values in dst (host memory). F32 is copied, F16 and
 * BF16 converted exactly (subnormals, infinities and NaN included), F64 rounded to nearest
 * (beyond the float range: infinity). Other dtypes: PGD_ERR_UNSUPPORTED naming the dtype;
 * absent tensor: PGD_ERR_NOT_FOUND. */
PGD_API pgd_status pgd_weights_to_float(const pgd_weights *w, const char *name, float *dst,
                                        pgd_error **err);
/* Copies tensor `name`'s bytes as stored (little-endian, `bytes` of pgd_weight_info) to dst.
 * PGD_ERR_NOT_FOUND when absent; PGD_ERR_IO (naming file and tensor) when the file has been
 * truncated since it was opened. */
PGD_API pgd_status pgd_weights_read(const pgd_weights *w, const char *name, void *dst,
                                    pgd_error **err);
/* Creates a float32 tensor of the tensor's shape (a scalar becomes shape [1]) on the context's
 * device and uploads the converted values. On error *out is NULL. */
PGD_API pgd_status pgd_weights_upload(pgd_ctx *ctx, const pgd_weights *w, const char *name,
                                      pgd_tensor **out, pgd_error **err);
/* ---- images ---- */

/* A decoded image: width x height pixels, RGB, 8 bits per channel, rows top to bottom, no
 * padding (data[(y * width + x) * 3 + c]). Opaque; the pixel buffer belongs to the image and
 * lives until pgd_image_destroy. */
typedef struct pgd_image pgd_image;

/* Largest accepted image: width x height <= PGD_IMAGE_MAX_PIXELS (8192 x 8192). */
#define PGD_IMAGE_MAX_PIXELS (8192LL * 8192LL)

/* Reads and decodes a JPEG, PNG, BMP or (when built with libwebp) WebP file, recognised by its
 * magic bytes; every other format is PGD_ERR_UNSUPPORTED naming the file and the format seen.
 * JPEG, PNG and WebP go through libjpeg-turbo, libpng and libwebp when the build found them
 * (pgd_image_decoder), with Pillow's settings: the pixels equal Pillow's
 * Image.open(f).convert("RGB") exactly, including its conversions of grey, palette, 16-bit and
 * CMYK images; BMP (and JPEG/PNG without their library) go through stb_image. The dimensions
 * are read from the header and checked (1 <= width, height; width x height <=
 * PGD_IMAGE_MAX_PIXELS, else PGD_ERR_TOO_LARGE) before anything is decoded. Grey and alpha
 * channels become RGB (alpha is dropped; EXIF orientation is not applied, as in Pillow). A file
 * the decoder would complete by inventing pixels is PGD_ERR_FORMAT: a truncated JPEG or WebP, a
 * JPEG with corrupt entropy-coded data, a BMP whose declared rows run past the end of the file,
 * a PNG with a truncated chunk, a wrong chunk CRC or no IEND. A decoder failure is
 * PGD_ERR_FORMAT with the decoder's reason. The path goes through
 * pgd_file_read's rules (a regular file; at most 512 MiB). On success *out is a new image for
 * pgd_image_destroy. */
PGD_API pgd_status pgd_image_load(const char *path, pgd_image **out, pgd_error **err);
/* As pgd_image_load on size bytes in memory (the caller keeps them); name (may be NULL) is used
 * in messages. */
PGD_API pgd_status pgd_image_load_memory(const void *data, size_t size, const char *name,
                                         pgd_image **out, pgd_error **err);
/* As pgd_image_load(_memory), but a JPEG decoded by libjpeg-turbo is scaled down inside the IDCT
 * to the smallest of 1/8, 1/4, 1/2 (else full size) whose shorter side stays >= min_side (>= 1),
 * e.g. 256 for the torchvision preset: a 4000 x 3000 photo decodes as 500 x 375, several times
 * faster. NOT bit-identical to Pillow (libjpeg's reduced IDCT, then Pillow's resize from the
 * smaller image); other formats and stb_image builds decode at full size, exactly as
 * pgd_image_load. pagoda vit/nonlocal --fast-decode. */
PGD_API pgd_status pgd_image_load_scaled(const char *path, int min_side, pgd_image **out,
                                         pgd_error **err);
PGD_API pgd_status pgd_image_load_memory_scaled(const void *data, size_t size, const char *name,
                                                int min_side, pgd_image **out, pgd_error **err);
PGD_API int pgd_image_get_width(const pgd_image *img);
PGD_API int pgd_image_get_height(const pgd_image *img);
/* The RGB pixels (width * height * 3 bytes), owned by the image. */
PGD_API const uint8_t *pgd_image_get_data(const pgd_image *img);
/* Frees the image; NULL is accepted. */
PGD_API void pgd_image_destroy(pgd_image *img);
/* Preprocessing presets, each to a 3 x 224 x 224 float tensor, channel-major (CHW), RGB:
 *   TORCHVISION  shorter side to 256 (PIL bilinear, antialiased), centre crop 224,
 *                ImageNet mean (0.485, 0.456, 0.406) and std (0.229, 0.224, 0.225);
 *   TIMM         shorter side to 248 (PIL bicubic, antialiased), centre crop 224, mean/std 0.5;
 *   HF           resize to 224 x 224 (PIL bilinear, antialiased), mean/std 0.5.
 * The resampling reproduces Pillow 9.4's Image.resize bit for bit (8-bit, horizontal pass then
 * vertical, each rounded to uint8); only the cropped window is computed. */
typedef enum pgd_preprocess {
    PGD_PREPROCESS_TORCHVISION = 0,
    PGD_PREPROCESS_TIMM = 1,
    PGD_PREPROCESS_HF = 2
} pgd_preprocess;

#define PGD_PREPROCESS_SIZE 224

/* Writes the preset's 3 x 224 x 224 floats to out (the caller's buffer of
 * 3 * PGD_PREPROCESS_SIZE * PGD_PREPROCESS_SIZE floats). */
PGD_API pgd_status pgd_image_preprocess(const pgd_image *img, pgd_preprocess preset, float *out,
                                        pgd_error **err);

/* The rectangle {x0, y0, x1, y1} of the image, in its pixels, that pgd_image_preprocess's
 * output shows for `preset` (the centre crop after the resize; the whole image for hf). For a
 * thumbnail it is the rectangle its source image gives, scaled to the thumbnail, so maps drawn
 * over a thumbnail line up as over the source. PGD_OK, or PGD_ERR_INVALID_ARGUMENT for an empty
 * image or unknown preset. */
PGD_API pgd_status pgd_image_preprocess_view(const pgd_image *img, pgd_preprocess preset,
                                             double rect[4]);

/* ---- elementwise ops ----------------------------------------------------------------------- */

/* y = alpha * x. x and y have the same shape; y may alias x. */
PGD_API pgd_status pgd_scale(pgd_ctx *ctx, const pgd_tensor *x, float alpha, pgd_tensor *y,
                             pgd_error **err);
/* y = a + b elementwise. a, b and y have the same shape; y may alias a or b. */
PGD_API pgd_status pgd_add(pgd_ctx *ctx, const pgd_tensor *a, const pgd_tensor *b, pgd_tensor *y,
                           pgd_error **err);

/* ---- broadcasting elementwise ops and reductions ------------------------------------------ */

/* The operands broadcast as NumPy's do (multidirectionally): shapes are aligned at their last
 * dim, a missing leading dim counts as 1, and each dim's sizes must be equal or one of them 1
 * (a dim of 0 broadcasts with 1 to 0). y must have exactly the broadcast shape; a shape that
 * does not broadcast, or a y of another shape, is PGD_ERR_SHAPE naming the operand, its shape
 * and the dim. Any rank up to PGD_MAX_DIMS, rank 0 and empty tensors included; y may alias an
 * operand of y's shape. Results are float32 with OpenCL's accuracy for each function; NaN
 * propagates through every op (max, min and clip included, as in NumPy). One program serves
 * every shape and op (cl/broadcast.cl). At most 2^32 elements per operand, else
 * PGD_ERR_TOO_LARGE. */
typedef enum pgd_binary_op {
    PGD_BINARY_ADD = 0,
    PGD_BINARY_SUB = 1,
    PGD_BINARY_MUL = 2,
    PGD_BINARY_DIV = 3, /* IEEE: x/0 is ±inf, 0/0 NaN */
    PGD_BINARY_POW = 4, /* C's pow: a negative base with a non-integer exponent is NaN */
    PGD_BINARY_MAX = 5, /* NumPy's maximum: NaN when either is NaN */
    PGD_BINARY_MIN = 6
} pgd_binary_op;

/* y = a op b, broadcast. */
PGD_API pgd_status pgd_binary(pgd_ctx *ctx, pgd_binary_op op, const pgd_tensor *a,
                              const pgd_tensor *b, pgd_tensor *y, pgd_error **err);
/* y = cond != 0 ? a : b, the three broadcast together (NaN in cond counts as true). */
PGD_API pgd_status pgd_where(pgd_ctx *ctx, const pgd_tensor *cond, const pgd_tensor *a,
                             const pgd_tensor *b, pgd_tensor *y, pgd_error **err);

typedef enum pgd_unary_op {
    PGD_UNARY_EXP = 0,
    PGD_UNARY_LOG = 1,
    PGD_UNARY_SQRT = 2,
    PGD_UNARY_RSQRT = 3, /* 1 / sqrt(x) */
    PGD_UNARY_ERF = 4,
    PGD_UNARY_TANH = 5,
    PGD_UNARY_SIGMOID = 6, /* 1 / (1 + exp(-x)) */
    PGD_UNARY_ABS = 7,
    PGD_UNARY_NEG = 8,
    PGD_UNARY_RELU = 9,       /* max(x, 0); NaN stays NaN */
    PGD_UNARY_GELU = 10,      /* x/2 (1 + erf(x/sqrt 2)); -inf gives 0, as pgd_gelu */
    PGD_UNARY_GELU_TANH = 11, /* x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    PGD_UNARY_SILU = 12       /* x * sigmoid(x) in one pass (swish); -inf gives 0 */
} pgd_unary_op;

/* y = op(x) elementwise; y has x's shape and may alias x. */
PGD_API pgd_status pgd_unary(pgd_ctx *ctx, pgd_unary_op op, const pgd_tensor *x, pgd_tensor *y,
                             pgd_error **err);
/* y = min(max(x, lo), hi) elementwise (NumPy's clip: hi wins when lo > hi; NaN stays NaN). lo
 * and hi may be infinite (no bound), not NaN (PGD_ERR_INVALID_ARGUMENT). y may alias x. */
PGD_API pgd_status pgd_clip(pgd_ctx *ctx, const pgd_tensor *x, float lo, float hi, pgd_tensor *y,
                            pgd_error **err);

typedef enum pgd_reduce_op {
    PGD_REDUCE_SUM = 0,  /* of nothing: 0 */
    PGD_REDUCE_MEAN = 1, /* of nothing: NaN */
    PGD_REDUCE_MAX = 2,  /* NaN when any element is NaN */
    PGD_REDUCE_MIN = 3,
    PGD_REDUCE_PROD = 4, /* of nothing: 1 */
    /* The index of the first maximum (minimum; the first NaN when there is one) in the reduced
     * elements taken in row-major order over the reduced axes: over one axis, its index along
     * that axis; over all, NumPy's flat index. Stored as a float: at most 2^24 reduced elements,
     * else PGD_ERR_TOO_LARGE. */
    PGD_REDUCE_ARGMAX = 5,
    PGD_REDUCE_ARGMIN = 6
} pgd_reduce_op;

/* y = op of x over the axes axes[0..naxes) (each in [-ndim, ndim), negative from the end, no
 * axis twice, else PGD_ERR_INVALID_ARGUMENT naming it). axes NULL reduces every axis; naxes 0
 * with axes not NULL reduces none (y is op of each single element). y's shape is x's without
 * the reduced axes, or with them as 1 when keepdims; any other is PGD_ERR_SHAPE naming both.
 * max, min, argmax and argmin of no elements (a reduced axis of size 0) are PGD_ERR_SHAPE, as
 * in NumPy. Sums accumulate in float in runs of at most 256 elements, then the runs' results
 * again: no work-item loops over more than 256 elements, whatever the size. y must not alias
 * x. */
PGD_API pgd_status pgd_reduce(pgd_ctx *ctx, pgd_reduce_op op, const pgd_tensor *x, const int *axes,
                              int naxes, int keepdims, pgd_tensor *y, pgd_error **err);

/* ---- layout: transpose, slice, concat, gather, pad, depth-to-space ---------------------- */

/* Data movement with the semantics of ONNX's operators (NumPy's where they agree): values are
 * copied bit for bit (NaN payloads and signed zeros kept). y is a tensor of exactly the result's
 * shape, else PGD_ERR_SHAPE naming both; y must not be an input's tensor. Any rank up to
 * PGD_MAX_DIMS, empty tensors included; at most 2^31 - 1 elements per operand, else
 * PGD_ERR_TOO_LARGE. One program serves them all (cl/layout.cl). */

/* y = x with its dims permuted: y's dim d is x's dim perm[d] (numpy.transpose; perm NULL
 * reverses the dims). perm must name each dim once (PGD_ERR_INVALID_ARGUMENT). */
PGD_API pgd_status pgd_transpose(pgd_ctx *ctx, const pgd_tensor *x, const int *perm, pgd_tensor *y,
                                 pgd_error **err);
/* y = the strided view of x whose element (i_0, ..., i_{nd-1}) is x's flat element
 * offset + sum i_d·strides[d], made contiguous (a view of shape `shape`; strides >= 0, 0
 * repeating an element as a broadcast does). Every element addressed must lie inside x
 * (PGD_ERR_INVALID_ARGUMENT naming the last one) and y must have exactly `shape`. This is how
 * a graph materialises the transposes, slices and expansions it keeps as views. */
PGD_API pgd_status pgd_copy_strided(pgd_ctx *ctx, const pgd_tensor *x, int64_t offset, int nd,
                                    const int64_t *shape, const int64_t *strides, pgd_tensor *y,
                                    pgd_error **err);
/* y = x[starts:ends:steps] along the n axes (ONNX Slice): axes NULL means 0..n-1, negative
 * axes count from the end, none twice; steps NULL means 1 each, a step is non-zero and may be
 * negative. Starts and ends are clamped as Python and NumPy do (negative ones count from the
 * end; INT64_MAX and INT64_MIN reach the ends), as ONNX's reference evaluator does. Axes not
 * named are taken whole. */
PGD_API pgd_status pgd_slice(pgd_ctx *ctx, const pgd_tensor *x, int n, const int *axes,
                             const int64_t *starts, const int64_t *ends, const int64_t *steps,
                             pgd_tensor *y, pgd_error **err);
/* y = the n tensors xs joined along `axis` (negative from the end): every one has xs[0]'s rank
 * and dims but along the axis (ONNX Concat, numpy.concatenate). */
PGD_API pgd_status pgd_concat(pgd_ctx *ctx, int n, const pgd_tensor *const *xs, int axis,
                              pgd_tensor *y, pgd_error **err);
/* y = numpy.take(x, indices, axis) (ONNX Gather): the indices are on the host, idx_ndim dims of
 * idx_shape (0 dims: one index, and the axis disappears), each in [-dim, dim) of the axis
 * (negative from the end; else PGD_ERR_INVALID_ARGUMENT naming the index). y's shape is
 * x.shape[:axis] + idx_shape + x.shape[axis + 1:]. */
PGD_API pgd_status pgd_gather(pgd_ctx *ctx, const pgd_tensor *x, int axis, const int64_t *indices,
                              int idx_ndim, const int64_t *idx_shape, pgd_tensor *y,
                              pgd_error **err);

typedef enum pgd_pad_mode {
    PGD_PAD_CONSTANT = 0, /* `value` outside x */
    PGD_PAD_REFLECT = 1,  /* mirrored about the edge elements, repeatedly for pads beyond the
                           * size (numpy.pad's 'reflect'; a dim of 1 repeats its element) */
    PGD_PAD_EDGE = 2,     /* the nearest edge element */
    PGD_PAD_WRAP = 3      /* periodic */
} pgd_pad_mode;
/* y = x padded (ONNX Pad): pads[d] elements before dim d and pads[ndim + d] after it (ONNX's
 * order); a negative pad removes elements. A dim's size plus its pads' sizes at most 2^30; an
 * empty dim grows only in constant mode. */
PGD_API pgd_status pgd_pad(pgd_ctx *ctx, const pgd_tensor *x, const int64_t *pads,
                           pgd_pad_mode mode, float value, pgd_tensor *y, pgd_error **err);

typedef enum pgd_depth_mode {
    PGD_DEPTH_DCR = 0, /* ONNX's default: channel (b1·block + b2)·C' + c' */
    PGD_DEPTH_CRD = 1  /* PyTorch's pixel_shuffle: channel c'·block² + b1·block + b2 */
} pgd_depth_mode;
/* x [N, C, H, W] to y [N, C / block², H·block, W·block] (ONNX DepthToSpace). */
PGD_API pgd_status pgd_depth_to_space(pgd_ctx *ctx, const pgd_tensor *x, int block,
                                      pgd_depth_mode mode, pgd_tensor *y, pgd_error **err);
/* x [N, C, H, W] to y [N, C·block², H / block, W / block]: y's channel (b1·block + b2)·C + c
 * holds x[c, h·block + b1, w·block + b2] (ONNX SpaceToDepth, the inverse of DCR). */
PGD_API pgd_status pgd_space_to_depth(pgd_ctx *ctx, const pgd_tensor *x, int block, pgd_tensor *y,
                                      pgd_error **err);

/* ---- normalisation, activations, softmax, patch embedding ---- */

/* The row ops below work over the last dim of x: cols = its last dim, rows = the product of the
 * others. y must have x's shape and may alias x. The caller keeps every tensor. */

/* Layer-normalises each row: y = (x - mean) / sqrt(var + eps) * w + b, var the biased variance,
 * accumulated in float with the mean taken relative to the row's first element (so a large
 * common offset costs no precision). w and b are 1-D [cols] each, or are both NULL (then
 * y = the normalised x). eps >= 0. */
PGD_API pgd_status pgd_layernorm(pgd_ctx *ctx, const pgd_tensor *x, const pgd_tensor *w,
                                 const pgd_tensor *b, float eps, pgd_tensor *y, pgd_error **err);
/* ---- normalisation over any axis ---- */

/* The ops below take an axis in [-ndim, ndim) (negative from the end; else
 * PGD_ERR_INVALID_ARGUMENT naming it); y has x's shape and may be x's tensor. */

/* y = softmax(scale · x) along `axis`, or with log != 0 log_softmax(scale · x), computed as
 * scale·x - max - log Σ exp(scale·x - max) (a tiny probability keeps its digits). Rows holding
 * NaN or +inf, and rows of only -inf, are NaN, as in PyTorch. The last axis runs as
 * pgd_softmax does; another axis is moved last and back by two copies (a temporary of x's
 * size). */
PGD_API pgd_status pgd_softmax_axis(pgd_ctx *ctx, const pgd_tensor *x, int axis, float scale,
                                    int log, pgd_tensor *y, pgd_error **err);
/* LayerNorm over the dims from `axis` on (ONNX LayerNormalization, torch layer_norm with
 * normalized_shape = x.shape[axis:]): each group of those dims is normalised as pgd_layernorm
 * normalises a row. w and b (both or neither) have x.shape[axis:], or are 1-D of its product.
 * mean and rstd (both or neither) receive each group's mean and 1 / sqrt(var + eps) with x's
 * dims before the axis, then any 1s (ONNX's [.., 1, 1]); they are computed before y is
 * written. */
PGD_API pgd_status pgd_layernorm_axis(pgd_ctx *ctx, const pgd_tensor *x, int axis,
                                      const pgd_tensor *w, const pgd_tensor *b, float eps,
                                      pgd_tensor *y, pgd_tensor *mean, pgd_tensor *rstd,
                                      pgd_error **err);
/* RMSNorm over the dims from `axis` on: y = x / sqrt(mean(x²) + eps) · w (w as
 * pgd_layernorm_axis's, or NULL for none). eps >= 0. */
PGD_API pgd_status pgd_rmsnorm(pgd_ctx *ctx, const pgd_tensor *x, int axis, const pgd_tensor *w,
                               float eps, pgd_tensor *y, pgd_error **err);
/* Batch norm for inference on x [N, C, ...] (2 dims or more): y = (x - mean_c) /
 * sqrt(var_c + eps) · w_c + b_c with mean, var, w and b 1-D [C] device tensors (ONNX
 * BatchNormalization in inference mode). */
PGD_API pgd_status pgd_batch_norm(pgd_ctx *ctx, const pgd_tensor *x, const pgd_tensor *mean,
                                  const pgd_tensor *var, const pgd_tensor *w, const pgd_tensor *b,
                                  float eps, pgd_tensor *y, pgd_error **err);
/* Group norm on x [N, C, ...]: the channels in `groups` groups (groups divides C), each group of
 * each sample normalised over its channels and the dims after them, then y · w_c + b_c with w
 * and b 1-D [C] (both or neither; torch.nn.functional.group_norm). */
PGD_API pgd_status pgd_group_norm(pgd_ctx *ctx, const pgd_tensor *x, int groups,
                                  const pgd_tensor *w, const pgd_tensor *b, float eps,
                                  pgd_tensor *y, pgd_error **err);

/* y = GELU(x) elementwise: the exact form x/2 (1 + erf(x/sqrt 2)), or with tanh_form != 0 the
 * approximation x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). y may alias x. */
PGD_API pgd_status pgd_gelu(pgd_ctx *ctx, const pgd_tensor *x, pgd_tensor *y, int tanh_form,
                            pgd_error **err);
/* y = max(x, 0) elementwise. y may alias x. */
PGD_API pgd_status pgd_relu(pgd_ctx *ctx, const pgd_tensor *x, pgd_tensor *y, pgd_error **err);
/* y = softmax(scale * x) over each row, computed with the row maximum subtracted. */
PGD_API pgd_status pgd_softmax(pgd_ctx *ctx, const pgd_tensor *x, float scale, pgd_tensor *y,
                               pgd_error **err);
/* y[r, c] = x[r, c] + bias[c]; bias is 1-D [cols]. y may alias x. */
PGD_API pgd_status pgd_bias_add(pgd_ctx *ctx, const pgd_tensor *x, const pgd_tensor *bias,
                                pgd_tensor *y, pgd_error **err);

/* ViT patch embedding: image [B, C, H, W] through a P x P stride-P convolution with weight
 * [D, C, P, P] and bias [D] (NULL: none) into out [B, T, D], T = extra + (H/P)(W/P). The first
 * `extra` tokens are the class token cls [D] and then the distillation token dist [D] (each
 * NULL when absent; dist needs cls); then the patches row-major. pos [T, D] (NULL: none) is
 * added to every token. H and W must be multiples of P, else PGD_ERR_SHAPE naming both shapes.
 * out must not alias an input. */
PGD_API pgd_status pgd_patch_embed(pgd_ctx *ctx, const pgd_tensor *image, const pgd_tensor *weight,
                                   const pgd_tensor *bias, const pgd_tensor *cls,
                                   const pgd_tensor *dist, const pgd_tensor *pos, pgd_tensor *out,
                                   pgd_error **err);
/* A patch embedding's projection weight [D, C, P, P] prepared once, for a model's forward passes:
 * on CPU devices packed into the GEMM kernel's panels, which pgd_patch_embed does again on every
 * call. The weight tensor is referenced, not copied, and must outlive the object; its values
 * are read at creation (upload them first) and the panels follow ctx's GEMM parameters of that
 * moment. A weight that is not 4-D is PGD_ERR_SHAPE. */
typedef struct pgd_patch_proj pgd_patch_proj;
PGD_API pgd_status pgd_patch_proj_create(pgd_ctx *ctx, const pgd_tensor *weight,
                                         pgd_patch_proj **out, pgd_error **err);
PGD_API void pgd_patch_proj_destroy(pgd_patch_proj *proj);
/* pgd_patch_embed with the prepared projection proj (created on the same ctx): the same checks
 * and the same result, bit for bit. */
PGD_API pgd_status pgd_patch_embed_proj(pgd_ctx *ctx, const pgd_tensor *image,
                                        const pgd_patch_proj *proj, const pgd_tensor *bias,
                                        const pgd_tensor *cls, const pgd_tensor *dist,
                                        const pgd_tensor *pos, pgd_tensor *out, pgd_error **err);
/* How pgd_pos_embed_resize resamples the position grid: the rule of each weight family when a
 * ViT runs at an image size other than the trained one. All are bicubic; they differ in how
 * output coordinates map to the source grid, in the cubic's A, and at the border. With in and
 * out the grid sizes along one axis and dst an output index: */
typedef enum pgd_resize_mode {
    /* F.interpolate(size=(gh2, gw2), mode='bicubic', align_corners=False): source position
     * (dst + 1/2) * in/out - 1/2, Keys' cubic with A = -0.75, taps clamped to the border. */
    PGD_RESIZE_BICUBIC = 0,
    /* The same with align_corners=True: source position dst * (in - 1)/(out - 1) (0 when out
     * is 1). torchvision's interpolate_embeddings. */
    PGD_RESIZE_BICUBIC_ALIGN_CORNERS = 1,
    /* F.interpolate(size=..., mode='bicubic', antialias=True, align_corners=False), timm's
     * resample_abs_pos_embed (dynamic_img_size=True, or loading at another img_size). With
     * s = in/out and r = max(s, 1): the taps are the source indices x with |x + 1/2 - c| < 2r
     * around c = (dst + 1/2) * s, weighted by the cubic with A = -0.5 at (x + 1/2 - c) / r and
     * normalised over the taps inside the grid (no border clamping); downsampling widens the
     * support, upsampling keeps 4 taps. */
    PGD_RESIZE_BICUBIC_ANTIALIAS = 2,
    /* Hugging Face ViTEmbeddings.interpolate_pos_encoding (transformers 4.39, DINO's rule):
     * F.interpolate(scale_factor=((gh2 + 0.1)/gh, (gw2 + 0.1)/gw), mode='bicubic',
     * align_corners=False). As PGD_RESIZE_BICUBIC, but the source scale is 1/scale_factor, not
     * in/out. Hugging Face divides by sqrt(gh * gw) on both axes, its grids being square.
     * Not the identity when the sizes are equal (Hugging Face skips the call then). */
    PGD_RESIZE_BICUBIC_HF = 3
} pgd_resize_mode;

/* Resizes a position-embedding table pos [extra + gh*gw, D] (any shape with D as last dim and
 * that many rows) to out [extra + gh2*gw2, D]: the first `extra` rows are copied, the gh x gw
 * grid is resampled to gh2 x gw2 by `mode` (see pgd_resize_mode). out must not alias pos. */
PGD_API pgd_status pgd_pos_embed_resize(pgd_ctx *ctx, const pgd_tensor *pos, int extra, int gh,
                                        int gw, int gh2, int gw2, pgd_resize_mode mode,
                                        pgd_tensor *out, pgd_error **err);

/* ---- convolution and pooling (NHWC activations) -------------------------------------------- */

/* Activations of the CNN ops are NHWC: [batch, height, width, channels], channels contiguous.
 * pgd_nchw_to_nhwc converts an image batch [N, C, H, W] (as preprocessing writes it). */
PGD_API pgd_status pgd_nchw_to_nhwc(pgd_ctx *ctx, const pgd_tensor *x, pgd_tensor *y,
                                    pgd_error **err);

typedef struct pgd_conv2d_desc {
    int64_t cin, cout; /* channels in and out; both multiples of groups */
    int kh, kw;        /* kernel size */
    int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w; /* 0 for stride/dilation means 1 */
    int groups; /* 0 means 1; groups == cin == cout is depthwise */
} pgd_conv2d_desc;

/* Batch norm folded into a convolution at load time (inference form, running statistics). */
typedef struct pgd_batchnorm {
    const float *weight, *bias, *mean, *var; /* cout elements each (host memory) */
    float eps;
} pgd_batchnorm;

/* A convolution prepared once for the device: weight is host float [cout, cin/groups, kh, kw]
 * (PyTorch's layout), bias host [cout] or NULL, bn NULL or folded in (w' = w·γ/√(var+eps),
 * b' = (b − mean)·γ/√(var+eps) + β). The caller keeps the host arrays. On error nothing is
 * allocated and the message names the rule broken. */
typedef struct pgd_conv2d pgd_conv2d;
PGD_API pgd_status pgd_conv2d_create(pgd_ctx *ctx, const pgd_conv2d_desc *desc, const float *weight,
                                     const float *bias, const pgd_batchnorm *bn, pgd_conv2d **out,
                                     pgd_error **err);
PGD_API void pgd_conv2d_destroy(pgd_conv2d *conv);
/* Output height and width for an input of h x w (PyTorch's floor rule); 0 when the kernel does
 * not fit. */
PGD_API void pgd_conv2d_out_size(const pgd_conv2d_desc *desc, int64_t h, int64_t w, int64_t *oh,
                                 int64_t *ow);
/* y [N, OH, OW, cout] = act(conv(x [N, H, W, cin]) + bias + residual), the residual (NULL: none;
 * shaped like y, may not alias x; may be y itself) added before the activation as ResNet does.
 * y may not alias x (PGD_ERR_INVALID_ARGUMENT). Wrong shapes are PGD_ERR_SHAPE naming both
 * tensors. The algorithm (GEMM for 1x1, implicit GEMM, im2col + GEMM, direct, Winograd
 * F(2x2, 3x3) for wide 3x3 layers on CPU devices, depthwise where groups = channels) is chosen
 * per shape and device; options.conv_algo ($PAGODA_CONV=gemm|implicit|im2col|direct|winograd|
 * depthwise) forces one where it applies (winograd: for layers created while it was forced, or wide
 * enough for the automatic choice). */
PGD_API pgd_status pgd_conv2d_forward(pgd_ctx *ctx, const pgd_conv2d *conv, const pgd_tensor *x,
                                      pgd_act act, const pgd_tensor *residual, pgd_tensor *y,
                                      pgd_error **err);
/* pgd_conv2d_forward with pads per side (ONNX's pads, [top, left, bottom, right], each 0 to
 * 4096) on a layer created with pad_h = pad_w = 0 (else PGD_ERR_INVALID_ARGUMENT): x is padded
 * with zeros into a temporary (pgd_pad; the padded input's size) and convolved unpadded, so
 * every algorithm applies. y is the size pgd_conv2d_out_size gives for the padded input. */
PGD_API pgd_status pgd_conv2d_forward_pads(pgd_ctx *ctx, const pgd_conv2d *conv,
                                           const pgd_tensor *x, const int pads[4], pgd_act act,
                                           const pgd_tensor *residual, pgd_tensor *y,
                                           pgd_error **err);
/* ONNX's auto_pad for an h x w input: the pads [top, left, bottom, right] that make the output
 * ceil(h / stride_h) x ceil(w / stride_w), the odd one at the end (SAME_UPPER, lower = 0) or at
 * the start (SAME_LOWER, lower = 1). The descriptor's own pads are ignored. */
PGD_API void pgd_conv2d_same_pads(const pgd_conv2d_desc *desc, int64_t h, int64_t w, int lower,
                                  int pads[4]);
/* The algorithm pgd_conv2d_forward would use for one image of h x w ("gemm", "implicit", ...).
 * On CPU devices a "gemm" (1x1) convolution with few output rows (batch · h · w, at most 40
 * row tiles) runs as "implicit" in its few-rows form, which does not depend on h x w alone. */
PGD_API const char *pgd_conv2d_algorithm(pgd_ctx *ctx, const pgd_conv2d *conv, int64_t h,
                                         int64_t w);
/* The same for a batch of n images (n >= 1, else NULL): "winograd" needs at least 32 tiles of
 * 2x2 outputs in the batch, so a small image may take it at a larger batch. */
PGD_API const char *pgd_conv2d_algorithm_batch(pgd_ctx *ctx, const pgd_conv2d *conv, int64_t n,
                                               int64_t h, int64_t w);

/* Max pooling over k x k windows (padding counts as -inf; PyTorch's floor rule), NHWC. Pools need
 * k >= 1, stride >= 1 and 0 <= pad <= k/2 (PyTorch's rule) and a y that does not alias x, else
 * PGD_ERR_INVALID_ARGUMENT; y must be [N, OH, OW, C], else PGD_ERR_SHAPE naming both shapes. */
PGD_API pgd_status pgd_maxpool2d(pgd_ctx *ctx, const pgd_tensor *x, int k, int stride, int pad,
                                 pgd_tensor *y, pgd_error **err);
/* Average pooling over k x k windows, zero padding counted in the divisor
 * (count_include_pad = True, PyTorch's default), NHWC. */
PGD_API pgd_status pgd_avgpool2d(pgd_ctx *ctx, const pgd_tensor *x, int k, int stride, int pad,
                                 pgd_tensor *y, pgd_error **err);
/* y [N, C] = mean over H, W of x [N, H, W, C]. */
PGD_API pgd_status pgd_global_avgpool(pgd_ctx *ctx, const pgd_tensor *x, pgd_tensor *y,
                                      pgd_error **err);

/* Pooling with the whole of ONNX's MaxPool/AveragePool and PyTorch's max_pool2d/avg_pool2d:
 * a kh x kw window every sh x sw, taps dh x dw apart (0 counts as 1), pads per side, NHWC. */
typedef enum pgd_pool_mode { PGD_POOL_MAX = 0, PGD_POOL_AVG = 1 } pgd_pool_mode;
typedef struct pgd_pool_desc {
    pgd_pool_mode mode;
    int kh, kw, sh, sw, dh, dw;
    int pad_top, pad_left, pad_bottom, pad_right;
    /* The output size rounds up (a last, partial window) instead of down; as in PyTorch, a
     * window that would start past x and its leading padding is dropped. */
    int ceil_mode;
    /* Average: padding taps count in the divisor (PyTorch's default, ONNX's
     * count_include_pad = 1); a window's taps past the padded extent never count. */
    int count_include_pad;
} pgd_pool_desc;
/* The output height and width of pooling an h x w input; PGD_ERR_INVALID_ARGUMENT for sizes
 * out of range (windows, strides, dilations 1 to 4096, pads 0 to 4096), PGD_ERR_SHAPE when the
 * window spans more than the padded input. */
PGD_API pgd_status pgd_pool2d_output_size(const pgd_pool_desc *d, int64_t h, int64_t w, int64_t *oh,
                                          int64_t *ow, pgd_error **err);
/* y [N, OH, OW, C] = the pool of x [N, H, W, C]. Max: NaN wins; padding counts as -inf (a
 * window with no tap inside x gives -inf); `indices` (NULL, or shaped like y) receives each
 * winner's index h·W + w within its channel's plane, as PyTorch's return_indices gives it (as
 * float, -1 for none). Average: the taps inside x summed, over the divisor count_include_pad
 * says (no tap counted: NaN). */
PGD_API pgd_status pgd_pool2d(pgd_ctx *ctx, const pgd_tensor *x, const pgd_pool_desc *d,
                              pgd_tensor *y, pgd_tensor *indices, pgd_error **err);
/* y [N, C] = max over H, W of x [N, H, W, C] (NaN wins). */
PGD_API pgd_status pgd_global_maxpool(pgd_ctx *ctx, const pgd_tensor *x, pgd_tensor *y,
                                      pgd_error **err);

/* ---- custom kernels --------------------------------------------------------------------- */

/* An OpenCL C kernel of the caller's own, run on a context's queue like the library's: built
 * once per context and options (kept in the context's program table and its disk cache, under
 * `name`), launched with profiling when profiling is on, errors in the library's form (a build
 * failure is PGD_ERR_BUILD with the log). For ops the library lacks, and for benchmarks. */
typedef struct pgd_kernel pgd_kernel;

/* Builds `source` (OpenCL C 1.2, NUL-terminated; the caller keeps it) with the build options
 * `options` (may be NULL) and creates its kernel function `function`. `name` labels the program
 * in the cache and in messages. The kernel object is the caller's own: its arguments are not
 * shared with other pgd_kernel handles. On error *out is NULL. */
PGD_API pgd_status pgd_kernel_create(pgd_ctx *ctx, const char *name, const char *source,
                                     const char *options, const char *function, pgd_kernel **out,
                                     pgd_error **err);
PGD_API void pgd_kernel_destroy(pgd_kernel *k);
/* Sets argument `index` to the buffer of tensor t (a __global pointer parameter). */
PGD_API pgd_status pgd_kernel_set_tensor(pgd_kernel *k, unsigned index, const pgd_tensor *t,
                                         pgd_error **err);
/* Sets argument `index` to `size` bytes at `value` (a scalar or vector parameter; size must
 * be the parameter's OpenCL size: 4 for int/uint/float, 8 for long). */
PGD_API pgd_status pgd_kernel_set_value(pgd_kernel *k, unsigned index, size_t size,
                                        const void *value, pgd_error **err);
/* Sets argument `index`, a __local pointer parameter, to `bytes` (> 0) of local memory. */
PGD_API pgd_status pgd_kernel_set_local(pgd_kernel *k, unsigned index, size_t bytes,
                                        pgd_error **err);
/* The largest work-group this kernel can be launched with on the context's device (at least 1). */
PGD_API size_t pgd_kernel_get_max_work_group(const pgd_kernel *k);
/* A work-group size for a flat one-item-per-element launch: four times the device's preferred
 * multiple for this kernel (a SIMD width or warp), at most pgd_kernel_get_max_work_group. */
PGD_API size_t pgd_kernel_get_preferred_work_group(const pgd_kernel *k);
/* Enqueues the kernel over `dims` (1-3) dimensions of `global` work-items in groups of `local`
 * (NULL: the driver chooses); global must be a multiple of local in each dimension. An unset
 * argument or a bad size is an error naming the kernel, not a crash. Does not wait. */
PGD_API pgd_status pgd_kernel_launch(pgd_kernel *k, unsigned dims, const size_t *global,
                                     const size_t *local, pgd_error **err);

/* ---- non-local blocks (NHWC activations) --------------------------------------------------- */

/* The non-local block of Wang et al., "Non-local Neural Networks" (CVPR 2018), as PyTorch
 * implementations define it: on x [B, H, W, C] with N = H·W query positions and N' key
 * positions (N, or (H/2)·(W/2) with subsampling),
 *     θ = x·θ_wᵀ + θ_b, φ = x·φ_wᵀ + φ_b, g = x·g_wᵀ + g_b      (1x1 convolutions, Ci wide)
 *     φ, g (and for the Gaussian form the keys x) max-pooled 2x2, stride 2, when subsampling
 *     y_i = Σ_j f(i, j)·g_j
 *     z = x + BN(W·y + W_b)                                     (W: a 1x1 convolution, Ci → C)
 * with f one of the modes below. The softmax forms run as one fused attention (no N x N'
 * matrix in device memory), the dot product as two GEMMs (O(N·Ci²)), the concatenation as one
 * streaming kernel over the keys. */
typedef enum pgd_nonlocal_mode {
    PGD_NONLOCAL_EMBEDDED_GAUSSIAN = 0, /* f = softmax_j(θ_i·φ_j) */
    PGD_NONLOCAL_GAUSSIAN = 1,          /* f = softmax_j(x_i·x_j); θ and φ are not used */
    PGD_NONLOCAL_DOT_PRODUCT = 2,       /* f = θ_i·φ_j / N' */
    PGD_NONLOCAL_CONCATENATION = 3      /* f = ReLU(w_θ·θ_i + w_φ·φ_j) / N' */
} pgd_nonlocal_mode;

/* "embedded_gaussian", "gaussian", "dot_product", "concatenation"; "?" for another value. */
PGD_API const char *pgd_nonlocal_mode_name(pgd_nonlocal_mode mode);

typedef struct pgd_nonlocal_desc {
    int64_t channels; /* C >= 2: the channels of x and z */
    int64_t inner;    /* Ci >= 1: the width of θ, φ and g (the paper uses C/2); the
                         Gaussian form needs Ci <= C */
    pgd_nonlocal_mode mode;
    int subsample; /* 0 or 1: pool φ and g (Gaussian: the keys x) 2x2, floor rule */
    int unfused;   /* 0 or 1: the softmax forms materialise the N x N' scores (GEMM,
                      softmax, GEMM): the benchmark baseline. Ignored by the others. */
} pgd_nonlocal_desc;

/* The block's weights, host float arrays in PyTorch's layouts. A NULL bias is zero; arrays a
 * mode does not use may be NULL (θ and φ for the Gaussian form, concat_weight except for
 * concatenation). */
typedef struct pgd_nonlocal_params {
    const float *theta_weight, *theta_bias; /* [Ci, C, 1, 1] and [Ci] */
    const float *phi_weight, *phi_bias;     /* [Ci, C, 1, 1] and [Ci] */
    const float *g_weight, *g_bias;         /* [Ci, C, 1, 1] and [Ci]; g_weight required */
    const float *w_weight, *w_bias;         /* [C, Ci, 1, 1] and [C]; w_weight required */
    const pgd_batchnorm *bn;                /* the BN after W ([C] each), folded into W; NULL:
                                               none */
    const float *concat_weight;             /* [1, 2·Ci, 1, 1]: w_θ then w_φ */
} pgd_nonlocal_params;

typedef struct pgd_nonlocal pgd_nonlocal;

/* Prepares a block for the device: the θ/φ/g convolutions fused into one, BN folded into W.
 * The caller keeps desc, params and every host array; the block holds its own copies. A mode
 * outside the enum, C < 2, Ci < 1 (Gaussian: Ci > C), or a flag other than 0/1 is
 * PGD_ERR_INVALID_ARGUMENT, and
 * so is a missing array the mode needs (the message names it). On error *out is NULL and
 * nothing is allocated. */
PGD_API pgd_status pgd_nonlocal_create(pgd_ctx *ctx, const pgd_nonlocal_desc *desc,
                                       const pgd_nonlocal_params *params, pgd_nonlocal **out,
                                       pgd_error **err);
/* Frees the block; NULL is accepted. */
PGD_API void pgd_nonlocal_destroy(pgd_nonlocal *nl);
/* The description the block was created with (owned by the block); NULL for NULL. */
PGD_API const pgd_nonlocal_desc *pgd_nonlocal_get_desc(const pgd_nonlocal *nl);
/* The key grid of the block on an h x w input: gh x gw (either may be NULL) is h x w, or
 * (h/2) x (w/2) with subsampling; returns gh·gw = N'. */
PGD_API int64_t pgd_nonlocal_key_grid(const pgd_nonlocal_desc *desc, int64_t h, int64_t w,
                                      int64_t *gh, int64_t *gw);
/* z = x + BN(W·y(x)) for x NHWC [B, H, W, C] into z of exactly x's shape (caller-allocated;
 * z may be x itself). A wrong x or z is PGD_ERR_SHAPE naming the shape found and the one
 * expected; with subsampling H and W must be at least 2 (PGD_ERR_SHAPE). Scratch tensors
 * (P [B, H, W, 3·Ci], y [B, H, W, Ci], and for `unfused` the [B·N, N'] scores) come from the
 * context's pool and go back to it before the call returns. */
PGD_API pgd_status pgd_nonlocal_forward(pgd_ctx *ctx, const pgd_nonlocal *nl, const pgd_tensor *x,
                                        pgd_tensor *z, pgd_error **err);
/* The affinity row f(i, ·) of query position i = (qi, qj) (row, column on x's H x W grid) for
 * every batch item, into the caller's host array row [B, gh·gw], with *gh x *gw (either may be
 * NULL) the key grid (pgd_nonlocal_key_grid). Softmax forms: the probability row, from the
 * attention kernel's probability pass; dot product and concatenation: f as defined above
 * (divided by N'), computed in double on the host from the device's θ and φ. x is checked as
 * for pgd_nonlocal_forward; a query outside the grid is PGD_ERR_INVALID_ARGUMENT. The
 * projections are recomputed: call it beside pgd_nonlocal_forward, for visualisation. */
PGD_API pgd_status pgd_nonlocal_affinity(pgd_ctx *ctx, const pgd_nonlocal *nl, const pgd_tensor *x,
                                         int64_t qi, int64_t qj, float *row, int64_t *gh,
                                         int64_t *gw, pgd_error **err);

/* ---- graph attention (GATConv) ------------------------------------------------------------- */

/* A graph on the device for graph attention: N nodes and the edges of an edge_index [2, E] as
 * PyTorch Geometric stores it (row 0 the sources j, row 1 the destinations i; a message flows
 * j -> i), kept as CSR over each node's incoming edges. Multi-edges are kept and each counts
 * in the softmax, as in PyG. */
typedef struct pgd_gat_graph pgd_gat_graph;

/* Builds the graph on the host and uploads it. edge_index is host int64 [2, num_edges],
 * row-major (all sources, then all destinations), kept by the caller; it may be NULL when
 * num_edges is 0. With add_self_loops = 1 the edges are those PyG's GATConv uses with
 * add_self_loops=True: existing self loops removed, the other edges in their order, then one
 * loop per node 0..N-1 (E' = E - loops + N); with 0 they are taken as given (E' = E) and a node
 * without incoming edges gets zeros before the bias. Every index is checked: num_nodes 1..2^31-2,
 * num_edges >= 0, add_self_loops 0 or 1, and each edge_index value in 0..N-1, else
 * PGD_ERR_INVALID_ARGUMENT naming the row, the edge and the value; E' of 2^31-1 or more is
 * PGD_ERR_TOO_LARGE. On error *out is NULL and nothing is allocated. */
PGD_API pgd_status pgd_gat_graph_create(pgd_ctx *ctx, int64_t num_nodes, const int64_t *edge_index,
                                        int64_t num_edges, int add_self_loops, pgd_gat_graph **out,
                                        pgd_error **err);
/* Frees the graph; NULL is accepted. */
PGD_API void pgd_gat_graph_destroy(pgd_gat_graph *g);
/* N; 0 for NULL. */
PGD_API int64_t pgd_gat_graph_get_num_nodes(const pgd_gat_graph *g);
/* E': the edges attention runs over, self loops included; 0 for NULL. */
PGD_API int64_t pgd_gat_graph_get_num_edges(const pgd_gat_graph *g);
/* The largest number of incoming edges of a node (self loop included); 0 for NULL. */
PGD_API int64_t pgd_gat_graph_get_max_in_degree(const pgd_gat_graph *g);
/* The graph's edges [2, E'] (int64, sources then destinations) in the order attention
 * coefficients come in: PyG's order after its self-loop rule, the edge_index GATConv returns
 * with return_attention_weights=True. Owned by the graph; NULL for NULL. */
PGD_API const int64_t *pgd_gat_graph_get_edge_index(const pgd_gat_graph *g);

/* The activation fused after a GAT layer's bias (the one a model applies between layers). */
typedef enum pgd_gat_act {
    PGD_GAT_ACT_NONE = 0,
    PGD_GAT_ACT_ELU = 1, /* x > 0 ? x : exp(x) - 1 (F.elu, alpha 1) */
    PGD_GAT_ACT_RELU = 2
} pgd_gat_act;

/* One GATConv layer (Veličković et al., "Graph Attention Networks", ICLR 2018, as PyG's
 * GATConv computes it in eval mode): with F inputs, H heads of C channels,
 *     h = x·Wᵀ                                     [N, H·C], W = lin.weight [H·C, F]
 *     e_ij = LeakyReLU(att_src[h]·h_j + att_dst[h]·h_i, negative_slope)   per edge j -> i, head h
 *     α_ij = softmax of e_ij over node i's incoming edges (numerically stable; per head)
 *     out_i = Σ_j α_ij h_j                          per head
 *     y = concat over heads [N, H·C], or their mean [N, C]; (+ x·W_resᵀ) + bias; activation. */
typedef struct pgd_gat_desc {
    int64_t in_channels;  /* F >= 1 */
    int64_t out_channels; /* C >= 1, per head */
    int64_t heads;        /* H >= 1 (H·C <= 2^24) */
    int concat;           /* 1: heads concatenated, 0: averaged */
    float negative_slope; /* of the LeakyReLU on the scores; PyG's default is 0.2 */
    pgd_gat_act act;
} pgd_gat_desc;

/* Sets *d to PyG's defaults for those sizes: concat 1, negative_slope 0.2, no activation. */
PGD_API void pgd_gat_desc_init(pgd_gat_desc *d, int64_t in_channels, int64_t out_channels,
                               int64_t heads);
/* The output width: H·C with concat, C without; 0 for NULL. */
PGD_API int64_t pgd_gat_out_width(const pgd_gat_desc *d);

/* A layer's weights, host float arrays in PyG's layouts (att_src/att_dst [1, H, C] read as
 * [H·C]). */
typedef struct pgd_gat_params {
    const float *weight;          /* [H·C, F]: lin.weight (lin_src.weight); required */
    const float *weight_dst;      /* [H·C, F]: lin_dst.weight when it differs, else NULL */
    const float *att_src;         /* [H, C]; required */
    const float *att_dst;         /* [H, C]; required */
    const float *bias;            /* [out width]; NULL: none */
    const float *residual_weight; /* [out width, F]: res.weight (residual=True); NULL: none */
} pgd_gat_params;

typedef struct pgd_gat pgd_gat;

/* Prepares a layer for the device. The caller keeps desc, params and the arrays; the layer
 * holds its own copies. A size out of range, concat not 0/1, a non-finite slope, an unknown
 * activation or a missing required array is PGD_ERR_INVALID_ARGUMENT naming it. On error *out
 * is NULL and nothing is allocated. */
PGD_API pgd_status pgd_gat_create(pgd_ctx *ctx, const pgd_gat_desc *desc,
                                  const pgd_gat_params *params, pgd_gat **out, pgd_error **err);
/* Frees the layer; NULL is accepted. */
PGD_API void pgd_gat_destroy(pgd_gat *gat);
/* The description the layer was made with (owned by it); NULL for NULL. */
PGD_API const pgd_gat_desc *pgd_gat_get_desc(const pgd_gat *gat);
/* y [N, out width] = the layer on graph g with node features x [N, F]. alpha, when not NULL, is
 * [E', H] and receives the attention coefficients α, row r for edge r of
 * pgd_gat_graph_get_edge_index (PyG's order). x, y, alpha and g belong to ctx and are distinct
 * tensors (y must not alias x), else PGD_ERR_INVALID_ARGUMENT; a wrong shape is PGD_ERR_SHAPE
 * naming the shape found and the one expected. No launch is made per node: each node's incoming
 * edges are cut into segments of bounded length, so degrees of 10^5 and more cost no more than
 * their edges. Scratch tensors come from the context's pool and go back to it before the call
 * returns. */
PGD_API pgd_status pgd_gat_forward(pgd_ctx *ctx, const pgd_gat *gat, const pgd_gat_graph *g,
                                   const pgd_tensor *x, pgd_tensor *y, pgd_tensor *alpha,
                                   pgd_error **err);

/* ---- ONNX graphs ----------------------------------------------------------------------- */

/* An ONNX model (.onnx, opsets 11 to 28; weights inline or as external data beside the file)
 * compiled for a context: its shape subgraphs are evaluated on the host, its matrix products,
 * convolutions and attention blocks run as Pagoda's fused layers (MatMul/Gemm + bias + GELU or
 * ReLU + residual as one linear layer; Conv + BatchNormalization + residual + ReLU as one
 * convolution; MatMul-scale-Softmax-MatMul as fused attention, no N x N scores in memory), and
 * transposes, reshapes, slices and expansions are strided views, copied only when an op needs
 * contiguous data. Tensors on the device are float32. */
typedef struct pgd_graph pgd_graph;

/* An input or output as the file declares it: elem_type is ONNX's TensorProto data type (1 =
 * float), ndim -1 when the file gives no shape; a dim of -1 is symbolic (dim_name holds its
 * name, e.g. "batch"). Strings belong to the graph. */
typedef struct pgd_graph_io {
    const char *name;
    int elem_type;
    int ndim;
    int64_t shape[PGD_MAX_DIMS];
    const char *dim_name[PGD_MAX_DIMS];
} pgd_graph_io;

/* Loads and checks an ONNX file: a truncated or malformed message, a value used before it is
 * produced or produced twice, a cycle, tensors whose data do not match their shapes, external
 * data outside the model's folder or past its file's end are PGD_ERR_FORMAT naming the file,
 * node and value. Ops Pagoda lacks are reported by pgd_graph_report and refused by
 * pgd_graph_run naming the node, op and opset; loading still succeeds so a report can be
 * made. */
PGD_API pgd_status pgd_graph_load(pgd_ctx *ctx, const char *path, pgd_graph **out, pgd_error **err);
/* The same from bytes in memory (a model built or downloaded in memory, e.g. by Python's onnx
 * package): `name` stands for the file in messages and places external data: with a name,
 * external tensors are read from files beside it as for a file of that name; with NULL the
 * messages say "<memory>" and a model with external data is PGD_ERR_FORMAT. The bytes are
 * parsed and copied: the caller may free them on return. At most 2 GiB (PGD_ERR_TOO_LARGE). */
PGD_API pgd_status pgd_graph_load_memory(pgd_ctx *ctx, const void *data, size_t size,
                                         const char *name, pgd_graph **out, pgd_error **err);
PGD_API void pgd_graph_destroy(pgd_graph *g);
PGD_API int pgd_graph_num_inputs(const pgd_graph *g);
PGD_API int pgd_graph_num_outputs(const pgd_graph *g);
/* PGD_ERR_INVALID_ARGUMENT when i is out of range. */
PGD_API pgd_status pgd_graph_get_input(const pgd_graph *g, int i, pgd_graph_io *out);
PGD_API pgd_status pgd_graph_get_output(const pgd_graph *g, int i, pgd_graph_io *out);
/* One forward pass: inputs[i] is the i-th graph input (a float32 device tensor of the shape the
 * model expects, any batch), outputs[i] receives a new tensor the caller destroys (NULL on
 * error). The host-side shape computations are redone only when the input shapes change;
 * layers are prepared (weights packed for the device) on the first run. */
PGD_API pgd_status pgd_graph_run(pgd_graph *g, const pgd_tensor *const *inputs,
                                 pgd_tensor **outputs, pgd_error **err);
/* The floating-point operations of the last run's matrix products, convolutions and attention
 * (2 per multiply-add). */
PGD_API double pgd_graph_flops(const pgd_graph *g);
/* A JSON report (the caller frees it with pgd_free): file, opset, producer, parameter count,
 * inputs and outputs, op histogram, the fused groups, and every node Pagoda cannot run with the
 * reason. */
PGD_API char *pgd_graph_report(const pgd_graph *g);

#ifdef __cplusplus
}
#endif
#endif /* PAGODA_H */
