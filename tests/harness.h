/* harness.h — helpers shared by the Check suites. */
#ifndef PAGODA_TEST_HARNESS_H
#define PAGODA_TEST_HARNESS_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

/* The public header only: model and op tests see the library as a user does. White-box suites
 * (cache, program, options internals, fault paths) include "internal.h" themselves. */
#include "pagoda.h"
#include "pagoda_util.h"

/* The devices a test runs on: every device found, or those $PAGODA_TEST_DEVICE names (meson
 * runs each device's tests as a test of its own, gemm@pocl, gemm@intel, ..., setting it; see
 * docs/testing.md). It holds a key of pgd_test_device_key or a selector as pgd_device_select
 * takes ("1:0", "llvmpipe"). Exits the process with 77 (meson: skipped) when there is none. */
const pgd_device_info *pgd_test_devices(size_t *count);
/* The device's key in test names: "pocl", "rusticl", "intel" (Intel's CPU runtime), "gpu" (any
 * other GPU) or "other". */
const char *pgd_test_device_key(const pgd_device_info *d);
/* Whether this process runs the device-independent checks (error paths, strict loading, shape
 * rules: tests that use one device, any device): 1 when it runs every device, or the primary
 * one, the first device whose key is in $PAGODA_TEST_KEYS (meson sets it to the option
 * test_devices; unset: the first device found). Elsewhere 0, said on stdout: such a test
 * returns at once, so each check runs once per machine, not once per device. */
int pgd_test_primary(void);
/* The device's index among all devices found, whatever $PAGODA_TEST_DEVICE keeps: seeds derived
 * from it are the same whether one device runs or all. */
size_t pgd_test_device_ordinal(const pgd_device_info *d);
/* "P:D" of a device, in a static buffer per call slot (4 slots). */
const char *pgd_test_selector(const pgd_device_info *d);
/* A context on device d; fails the test with the error message otherwise. */
pgd_ctx *pgd_test_ctx(const pgd_device_info *d);
/* The options a test's context gets: the defaults, then the PAGODA_* variables meson's test
 * environment set (read, never changed: tests pass their settings, they do not setenv), then
 * `vars` ("PAGODA_GEMM=pagoda", ... ending in NULL; NULL for none), with the device fixed to d
 * (d NULL: as the variables say). The strings of vars must outlive the use of *o. Fails the test
 * on a bad value. */
void pgd_test_options(const pgd_device_info *d, const char *const *vars, pgd_ctx_options *o);
/* A context made with pgd_test_options(d, vars); fails the test otherwise. */
pgd_ctx *pgd_test_ctx_with(const pgd_device_info *d, const char *const *vars);
/* A context made with *o; fails the test otherwise. */
pgd_ctx *pgd_test_ctx_opts(const pgd_ctx_options *o);
/* Sets knob `key` of o to `value` (0: the library's own choice); fails the test on error. */
void pgd_test_knob(pgd_ctx_options *o, const char *key, int64_t value);

/* Runs the statements after `seed` once per device, with `ctx` a context on it, `dev` its name
 * and `r` a generator seeded with seed + the device's index; the context is destroyed after. */
#define PGD_TEST_EACH_DEVICE(seed, ...)                                                            \
    do {                                                                                           \
        size_t nd_;                                                                                \
        const pgd_device_info *d_ = pgd_test_devices(&nd_);                                        \
        for (size_t di_ = 0; di_ < nd_; di_++) {                                                   \
            pgd_ctx *ctx = pgd_test_ctx(&d_[di_]);                                                 \
            const char *dev = d_[di_].name;                                                        \
            pgd_rng r;                                                                             \
            pgd_rng_seed(&r, (seed) + pgd_test_device_ordinal(&d_[di_]));                          \
            __VA_ARGS__;                                                                           \
            pgd_ctx_destroy(ctx);                                                                  \
        }                                                                                          \
    } while (0)

/* Asserts that a call returned status `code` with an error whose message holds `part`, then
 * frees the error. */
void pgd_test_expect_error(int rc, pgd_error *err, int code, const char *part);

/* Launches of kernel `name` in ctx's profile (pgd_ctx_set_profiling(ctx, 1) first). */
long pgd_test_launches(pgd_ctx *ctx, const char *name);

/* A float32 tensor of the given shape holding data (numel floats); fails the test on error. */
pgd_tensor *pgd_test_upload(pgd_ctx *ctx, int ndim, const int64_t *shape, const float *data);

/* Compares got to want: |got - want| <= atol + rtol * |want| for every element; NaN or Inf in
 * got never passes. On failure prints the first bad index with both values and the number of
 * bad elements, and returns 0. */
int pgd_test_allclose(const float *got, const double *want, size_t n, double rtol, double atol,
                      const char *what);

/* The input-dependent part of a batch's outputs, on its own. A random model answers mostly from
 * its biases and its near-uniform attention, so outputs can match within rtol while what the
 * input changes is wrong (a wrong head count moved DETR's logits by 1.5e-4 relative and their
 * image-0-minus-image-1 part by 13 %). Row r minus row 0 (r = 1 .. rows-1, rows `width` wide,
 * `stride` apart) of got against the same of want: returns the largest error of those
 * differences over the largest |difference| of want (inf if got is not finite, or want's rows
 * are all equal: such a golden checks nothing). *share, if non-NULL, receives the largest
 * |difference| of want over the largest |want|: how much of the output the input decides. */
double pgd_test_diff_error(const float *got, const double *want, size_t rows, size_t width,
                           size_t stride, double *share);
/* pgd_test_diff_error <= rtol; prints the error (and on failure says so), returns 1 if within. */
int pgd_test_diffclose(const float *got, const double *want, size_t rows, size_t width,
                       size_t stride, double rtol, const char *what);

/* The canary and poison value: a NaN with its own payload, so that a stray write of any other
 * value, another NaN included, is caught; pgd_test_is_canary compares bits. */
float pgd_test_canary(void);
int pgd_test_is_canary(float f);

/* A deterministic generator (xorshift64*). */
typedef struct pgd_rng {
    uint64_t s;
} pgd_rng;
void pgd_rng_seed(pgd_rng *r, uint64_t seed);
uint64_t pgd_rng_next(pgd_rng *r);
/* Uniform integer in [lo, hi]. */
int64_t pgd_rng_int(pgd_rng *r, int64_t lo, int64_t hi);
/* Uniform float in [-1, 1). */
float pgd_rng_float(pgd_rng *r);

/* Makes a fresh empty directory under the build's temp area; returns a malloc'd path. */
char *pgd_test_tempdir(const char *tag);
/* Removes a directory tree made by pgd_test_tempdir. */
void pgd_test_rmtree(const char *path);

/* A tensor handle of shape [len] over the first len floats of t's buffer, so a test can keep a
 * canary region after an op's output. Release with free(), never pgd_tensor_destroy(). */
pgd_tensor *pgd_test_prefix(const pgd_tensor *t, int ndim, const int64_t *shape);

/* The golden data directory, $PAGODA_TEST_DATA (meson test sets it; the test fails without). */
const char *pgd_test_data_dir(void);
/* Reads data file `name` (under pgd_test_data_dir) holding exactly n little-endian float32
 * values into a malloc'd array (as doubles: pgd_test_read_doubles, what pgd_test_allclose
 * compares against); a missing file or another size fails the test naming both. */
float *pgd_test_read_floats(const char *name, size_t n);
double *pgd_test_read_doubles(const char *name, size_t n);

/* Reads a whole file into a malloc'd, NUL-terminated buffer; 0, or -1 with errno set. */
int pgd_test_read_file(const char *path, unsigned char **data, size_t *size);

/* Runs a suite without forking (OpenCL drivers do not survive fork) and returns the exit code:
 * 0, 1 if a test failed, 77 (meson: skipped) if none ran, or if $CK_RUN_CASE names the case
 * given to pgd_test_case_unavailable. */
int pgd_test_run(Suite *s);
/* Says that test case `tcase` is left out of this build, and why (a library the build lacks):
 * run alone ($CK_RUN_CASE), it is reported as skipped with that reason. */
void pgd_test_case_unavailable(const char *tcase, const char *why);

#define PGD_CHECK_OK(call, errp)                                                                   \
    do {                                                                                           \
        int pgd_rc_ = (call);                                                                      \
        ck_assert_msg(pgd_rc_ == PGD_OK, "%s failed: %s (%s)", #call,                              \
                      *(errp) ? pgd_error_get_message(*(errp)) : "(no error object)",              \
                      pgd_status_name(pgd_rc_));                                                   \
    } while (0)

#endif
