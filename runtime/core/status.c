/* status.c — status names and messages, OpenCL error names, the error object. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "internal.h"

struct pgd_error {
    int code;
    int cl_code;
    char *message;
    char *log;
};

int pgd_version(void)
{
    return PGD_VERSION_NUMBER;
}

const char *pgd_version_string(void)
{
    return PGD_VERSION_STRING;
}

const char *pgd_status_name(int status)
{
    switch (status) {
#define X(name, value, msg)                                                                        \
    case value: return "PGD_" #name;
        PGD_STATUS_MAP(X)
#undef X
    }
    return "PGD_UNKNOWN";
}

const char *pgd_status_str(int status)
{
    switch (status) {
#define X(name, value, msg)                                                                        \
    case value: return msg;
        PGD_STATUS_MAP(X)
#undef X
    }
    return "unknown status";
}

/* The OpenCL 1.2 error codes; later versions add none that 1.2 drivers return. */
/* clang-format off (one code a line; clang-format would run them together) */
#define PGD_CL_ERRORS(X)                                                                           \
    X(CL_SUCCESS)                                                                                  \
    X(CL_DEVICE_NOT_FOUND)                                                                         \
    X(CL_DEVICE_NOT_AVAILABLE)                                                                     \
    X(CL_COMPILER_NOT_AVAILABLE)                                                                   \
    X(CL_MEM_OBJECT_ALLOCATION_FAILURE)                                                            \
    X(CL_OUT_OF_RESOURCES)                                                                         \
    X(CL_OUT_OF_HOST_MEMORY)                                                                       \
    X(CL_PROFILING_INFO_NOT_AVAILABLE)                                                             \
    X(CL_MEM_COPY_OVERLAP)                                                                         \
    X(CL_IMAGE_FORMAT_MISMATCH)                                                                    \
    X(CL_IMAGE_FORMAT_NOT_SUPPORTED)                                                               \
    X(CL_BUILD_PROGRAM_FAILURE)                                                                    \
    X(CL_MAP_FAILURE)                                                                              \
    X(CL_MISALIGNED_SUB_BUFFER_OFFSET)                                                             \
    X(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)                                                \
    X(CL_COMPILE_PROGRAM_FAILURE)                                                                  \
    X(CL_LINKER_NOT_AVAILABLE)                                                                     \
    X(CL_LINK_PROGRAM_FAILURE)                                                                     \
    X(CL_DEVICE_PARTITION_FAILED)                                                                  \
    X(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)                                                            \
    X(CL_INVALID_VALUE)                                                                            \
    X(CL_INVALID_DEVICE_TYPE)                                                                      \
    X(CL_INVALID_PLATFORM)                                                                         \
    X(CL_INVALID_DEVICE)                                                                           \
    X(CL_INVALID_CONTEXT)                                                                          \
    X(CL_INVALID_QUEUE_PROPERTIES)                                                                 \
    X(CL_INVALID_COMMAND_QUEUE)                                                                    \
    X(CL_INVALID_HOST_PTR)                                                                         \
    X(CL_INVALID_MEM_OBJECT)                                                                       \
    X(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)                                                          \
    X(CL_INVALID_IMAGE_SIZE)                                                                       \
    X(CL_INVALID_SAMPLER)                                                                          \
    X(CL_INVALID_BINARY)                                                                           \
    X(CL_INVALID_BUILD_OPTIONS)                                                                    \
    X(CL_INVALID_PROGRAM)                                                                          \
    X(CL_INVALID_PROGRAM_EXECUTABLE)                                                               \
    X(CL_INVALID_KERNEL_NAME)                                                                      \
    X(CL_INVALID_KERNEL_DEFINITION)                                                                \
    X(CL_INVALID_KERNEL)                                                                           \
    X(CL_INVALID_ARG_INDEX)                                                                        \
    X(CL_INVALID_ARG_VALUE)                                                                        \
    X(CL_INVALID_ARG_SIZE)                                                                         \
    X(CL_INVALID_KERNEL_ARGS)                                                                      \
    X(CL_INVALID_WORK_DIMENSION)                                                                   \
    X(CL_INVALID_WORK_GROUP_SIZE)                                                                  \
    X(CL_INVALID_WORK_ITEM_SIZE)                                                                   \
    X(CL_INVALID_GLOBAL_OFFSET)                                                                    \
    X(CL_INVALID_EVENT_WAIT_LIST)                                                                  \
    X(CL_INVALID_EVENT)                                                                            \
    X(CL_INVALID_OPERATION)                                                                        \
    X(CL_INVALID_GL_OBJECT)                                                                        \
    X(CL_INVALID_BUFFER_SIZE)                                                                      \
    X(CL_INVALID_MIP_LEVEL)                                                                        \
    X(CL_INVALID_GLOBAL_WORK_SIZE)                                                                 \
    X(CL_INVALID_PROPERTY)                                                                         \
    X(CL_INVALID_IMAGE_DESCRIPTOR)                                                                 \
    X(CL_INVALID_COMPILER_OPTIONS)                                                                 \
    X(CL_INVALID_LINKER_OPTIONS)                                                                   \
    X(CL_INVALID_DEVICE_PARTITION_COUNT)
/* clang-format on */

const char *pgd_cl_error_name(int cl_code)
{
    switch (cl_code) {
#define X(name)                                                                                    \
    case name: return #name;
        PGD_CL_ERRORS(X)
#undef X
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    }
    return "CL_UNKNOWN_ERROR";
}

int pgd__status_from_cl(cl_int cl_code)
{
    switch (cl_code) {
    case CL_SUCCESS: return PGD_OK;
    case CL_DEVICE_NOT_FOUND: return PGD_ERR_DEVICE_NOT_FOUND;
    case CL_MEM_OBJECT_ALLOCATION_FAILURE:
    case CL_INVALID_BUFFER_SIZE: return PGD_ERR_ALLOCATION;
    case CL_OUT_OF_RESOURCES: return PGD_ERR_OUT_OF_RESOURCES;
    case CL_OUT_OF_HOST_MEMORY: return PGD_ERR_OUT_OF_HOST_MEMORY;
    case CL_BUILD_PROGRAM_FAILURE:
    case CL_COMPILE_PROGRAM_FAILURE:
    case CL_LINK_PROGRAM_FAILURE:
    case CL_INVALID_BUILD_OPTIONS: return PGD_ERR_BUILD;
    case -1001: return PGD_ERR_NO_PLATFORM;
    default: return PGD_ERR_OPENCL;
    }
}

static int error_vset(pgd_error **err, int code, int cl_code, const char *prefix, const char *fmt,
                      va_list ap)
{
    if (!err || *err)
        return code; /* an error is set at most once: the first cause is the one reported */
    pgd_error *e = calloc(1, sizeof *e);
    if (!e)
        return code;
    e->code = code;
    e->cl_code = cl_code;
    char body[2048];
    vsnprintf(body, sizeof body, fmt, ap);
    size_t n = strlen(prefix) + strlen(body) + 1;
    e->message = malloc(n);
    if (e->message)
        snprintf(e->message, n, "%s%s", prefix, body);
    *err = e;
    return code;
}

int pgd__error_set(pgd_error **err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vset(err, code, 0, "", fmt, ap);
    va_end(ap);
    return code;
}

pgd_status pgd_error_set(pgd_error **err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    error_vset(err, code, 0, "", fmt, ap);
    va_end(ap);
    return code;
}

int pgd__cl_fail(pgd_error **err, cl_int cl_code, const char *call, const char *fmt, ...)
{
    int code = pgd__status_from_cl(cl_code);
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s failed with %s (%d): ", call, pgd_cl_error_name(cl_code),
             (int)cl_code);
    va_list ap;
    va_start(ap, fmt);
    error_vset(err, code, cl_code, prefix, fmt, ap);
    va_end(ap);
    return code;
}

void pgd__error_set_log(pgd_error **err, const char *log)
{
    if (err && *err && log && !(*err)->log)
        (*err)->log = pgd__strdup(log);
}

pgd_status pgd_error_get_code(const pgd_error *err)
{
    return err ? err->code : PGD_OK;
}
const char *pgd_error_get_summary(const pgd_error *err)
{
    return pgd_status_str(err ? err->code : PGD_OK);
}
const char *pgd_error_get_message(const pgd_error *err)
{
    if (!err)
        return "no error";
    return err->message ? err->message : pgd_status_str(err->code);
}
int pgd_error_get_cl_code(const pgd_error *err)
{
    return err ? err->cl_code : 0;
}
const char *pgd_error_get_log(const pgd_error *err)
{
    return err ? err->log : NULL;
}

void pgd_error_destroy(pgd_error *err)
{
    if (!err)
        return;
    free(err->message);
    free(err->log);
    free(err);
}

/* ---- small helpers shared by the runtime ---- */

double pgd__now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

char *pgd__strdup(const char *s)
{
    if (!s)
        return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}
