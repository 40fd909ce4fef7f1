/* clfault.c — an LD_PRELOAD shim that makes one chosen OpenCL call fail.
 *
 *   PGD_FAULT_CALL=N     the Nth intercepted call (1-based, counted over all intercepted entry
 *                        points in call order) returns PGD_FAULT_ERROR instead of running;
 *                        unset or 0: every call goes through
 *   PGD_FAULT_ERROR=E    a CL error name (CL_OUT_OF_RESOURCES, CL_MEM_OBJECT_ALLOCATION_FAILURE,
 *                        CL_OUT_OF_HOST_MEMORY, CL_INVALID_WORK_GROUP_SIZE,
 *                        CL_BUILD_PROGRAM_FAILURE) or number; default CL_OUT_OF_RESOURCES
 *   PGD_FAULT_COUNT=FILE at exit, writes the number of intercepted calls to FILE
 *   PGD_FAULT_TRACE=FILE appends "N name" for every intercepted call (to map N to a call kind)
 *   PGD_FAULT_LEAKS=1    at exit, prints "clfault: leaked OpenCL objects: …" to stderr when
 *                        any context, queue, buffer, program, kernel or event that the program
 *                        created (or retained) was not released as often; silent otherwise
 *
 * Retain/release calls are forwarded and counted per object kind but never fail and do not
 * advance N (releasing is what error paths do; failing it would test nothing of ours).
 *
 * Every other call is forwarded to the next definition (the ICD loader) through
 * dlsym(RTLD_NEXT). Calls made by the driver itself on its own entry points are not seen: the
 * shim only interposes on the symbols the program resolves. Single-threaded callers assumed
 * (Pagoda's runtime is); the counter is atomic anyway. */
#define _GNU_SOURCE
#define CL_TARGET_OPENCL_VERSION 120
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CL/cl.h>

static atomic_long calls;
static long fail_at = -1; /* -1: not read yet; 0: never */
static cl_int fail_code = CL_OUT_OF_RESOURCES;
static FILE *trace;

/* Live objects per kind: created + retained - released, by the program's own calls. */
enum { K_CONTEXT, K_QUEUE, K_MEM, K_PROGRAM, K_KERNEL, K_EVENT, K_KINDS };
static const char *const kind_names[K_KINDS] = {"cl_context", "cl_command_queue", "cl_mem",
                                                "cl_program", "cl_kernel",        "cl_event"};
static atomic_long live[K_KINDS];

static const struct {
    const char *name;
    cl_int code;
} codes[] = {
    {"CL_OUT_OF_RESOURCES", CL_OUT_OF_RESOURCES},
    {"CL_MEM_OBJECT_ALLOCATION_FAILURE", CL_MEM_OBJECT_ALLOCATION_FAILURE},
    {"CL_OUT_OF_HOST_MEMORY", CL_OUT_OF_HOST_MEMORY},
    {"CL_INVALID_WORK_GROUP_SIZE", CL_INVALID_WORK_GROUP_SIZE},
    {"CL_BUILD_PROGRAM_FAILURE", CL_BUILD_PROGRAM_FAILURE},
    {"CL_INVALID_VALUE", CL_INVALID_VALUE},
    {"CL_DEVICE_NOT_AVAILABLE", CL_DEVICE_NOT_AVAILABLE},
};

static void write_count(void)
{
    const char *path = getenv("PGD_FAULT_COUNT");
    if (!path || !*path)
        return;
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "%ld\n", (long)atomic_load(&calls));
        fclose(f);
    }
}

static void report_leaks(void)
{
    char msg[256];
    size_t len = 0;
    for (int k = 0; k < K_KINDS; k++) {
        long n = atomic_load(&live[k]);
        /* n < 0: released objects made by a creation call the shim does not wrap. */
        if (n > 0 && len < sizeof msg)
            len += (size_t)snprintf(msg + len, sizeof msg - len, "%s%ld %s", len ? ", " : "", n,
                                    kind_names[k]);
    }
    if (len)
        fprintf(stderr, "clfault: leaked OpenCL objects: %s\n", msg);
}

static void setup(void)
{
    const char *n = getenv("PGD_FAULT_CALL");
    fail_at = n && *n ? strtol(n, NULL, 10) : 0;
    const char *e = getenv("PGD_FAULT_ERROR");
    if (e && *e) {
        char *end;
        long v = strtol(e, &end, 10);
        if (*end == '\0')
            fail_code = (cl_int)v;
        else
            for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
                if (!strcmp(e, codes[i].name))
                    fail_code = codes[i].code;
    }
    const char *t = getenv("PGD_FAULT_TRACE");
    if (t && *t)
        trace = fopen(t, "a");
    atexit(write_count);
    const char *l = getenv("PGD_FAULT_LEAKS");
    if (l && *l && strcmp(l, "0"))
        atexit(report_leaks);
}

/* Counts the call; returns 1 when this one is to fail. */
static int hit(const char *name)
{
    if (fail_at < 0)
        setup();
    long n = atomic_fetch_add(&calls, 1) + 1;
    if (trace) {
        fprintf(trace, "%ld %s\n", n, name);
        fflush(trace);
    }
    return n == fail_at;
}

static void *next(const char *name)
{
    void *p = dlsym(RTLD_NEXT, name);
    if (!p) {
        fprintf(stderr, "clfault: %s not found after the shim\n", name);
        abort();
    }
    return p;
}

/* Status-returning calls. */
#define FORWARD(ret_name, params, args)                                                            \
    CL_API_ENTRY cl_int CL_API_CALL ret_name params                                                \
    {                                                                                              \
        static cl_int(CL_API_CALL *real) params;                                                   \
        if (hit(#ret_name))                                                                        \
            return fail_code;                                                                      \
        if (!real)                                                                                 \
            *(void **)&real = next(#ret_name);                                                     \
        return real args;                                                                          \
    }

/* Object-returning calls with an errcode_ret out-parameter. */
#define FORWARD_OBJ(kind, type, ret_name, params, args)                                            \
    CL_API_ENTRY type CL_API_CALL ret_name params                                                  \
    {                                                                                              \
        static type(CL_API_CALL *real) params;                                                     \
        if (hit(#ret_name)) {                                                                      \
            if (errcode_ret)                                                                       \
                *errcode_ret = fail_code;                                                          \
            return NULL;                                                                           \
        }                                                                                          \
        if (!real)                                                                                 \
            *(void **)&real = next(#ret_name);                                                     \
        type obj = real args;                                                                      \
        if (obj)                                                                                   \
            atomic_fetch_add(&live[kind], 1);                                                      \
        return obj;                                                                                \
    }

/* Enqueue calls: an event handed back counts as a live cl_event. */
#define FORWARD_ENQ(ret_name, params, args)                                                        \
    CL_API_ENTRY cl_int CL_API_CALL ret_name params                                                \
    {                                                                                              \
        static cl_int(CL_API_CALL *real) params;                                                   \
        if (hit(#ret_name))                                                                        \
            return fail_code;                                                                      \
        if (!real)                                                                                 \
            *(void **)&real = next(#ret_name);                                                     \
        cl_int rc = real args;                                                                     \
        if (rc == CL_SUCCESS && e)                                                                 \
            atomic_fetch_add(&live[K_EVENT], 1);                                                   \
        return rc;                                                                                 \
    }

/* Retain (+1) and release (-1): forwarded, counted, never failed, not numbered. */
#define FORWARD_REF(kind, delta, ret_name, type)                                                   \
    CL_API_ENTRY cl_int CL_API_CALL ret_name(type obj)                                             \
    {                                                                                              \
        static cl_int(CL_API_CALL *real)(type);                                                    \
        if (!real)                                                                                 \
            *(void **)&real = next(#ret_name);                                                     \
        cl_int rc = real(obj);                                                                     \
        if (rc == CL_SUCCESS)                                                                      \
            atomic_fetch_add(&live[kind], delta);                                                  \
        return rc;                                                                                 \
    }

FORWARD(clGetPlatformIDs, (cl_uint n, cl_platform_id *p, cl_uint *np), (n, p, np))
FORWARD(clGetDeviceIDs,
        (cl_platform_id p, cl_device_type t, cl_uint n, cl_device_id *d, cl_uint *nd),
        (p, t, n, d, nd))
FORWARD_OBJ(K_CONTEXT, cl_context, clCreateContext,
            (const cl_context_properties *props, cl_uint n, const cl_device_id *d,
             void(CL_CALLBACK *cb)(const char *, const void *, size_t, void *), void *user,
             cl_int *errcode_ret),
            (props, n, d, cb, user, errcode_ret))
FORWARD_OBJ(K_QUEUE, cl_command_queue, clCreateCommandQueue,
            (cl_context c, cl_device_id d, cl_command_queue_properties p, cl_int *errcode_ret),
            (c, d, p, errcode_ret))
FORWARD_OBJ(K_MEM, cl_mem, clCreateBuffer,
            (cl_context c, cl_mem_flags f, size_t size, void *host, cl_int *errcode_ret),
            (c, f, size, host, errcode_ret))
FORWARD_OBJ(K_PROGRAM, cl_program, clCreateProgramWithSource,
            (cl_context c, cl_uint n, const char **s, const size_t *l, cl_int *errcode_ret),
            (c, n, s, l, errcode_ret))
FORWARD_OBJ(K_PROGRAM, cl_program, clCreateProgramWithBinary,
            (cl_context c, cl_uint n, const cl_device_id *d, const size_t *l,
             const unsigned char **b, cl_int *status, cl_int *errcode_ret),
            (c, n, d, l, b, status, errcode_ret))
FORWARD(clBuildProgram,
        (cl_program p, cl_uint n, const cl_device_id *d, const char *o,
         void(CL_CALLBACK *cb)(cl_program, void *), void *user),
        (p, n, d, o, cb, user))
FORWARD_OBJ(K_KERNEL, cl_kernel, clCreateKernel,
            (cl_program p, const char *name, cl_int *errcode_ret), (p, name, errcode_ret))
CL_API_ENTRY cl_int CL_API_CALL clCreateKernelsInProgram(cl_program p, cl_uint n, cl_kernel *k,
                                                         cl_uint *nk)
{
    static cl_int(CL_API_CALL * real)(cl_program, cl_uint, cl_kernel *, cl_uint *);
    if (hit("clCreateKernelsInProgram"))
        return fail_code;
    if (!real)
        *(void **)&real = next("clCreateKernelsInProgram");
    cl_uint got = 0;
    cl_int rc = real(p, n, k, &got);
    if (nk)
        *nk = got;
    if (rc == CL_SUCCESS && k)
        atomic_fetch_add(&live[K_KERNEL], (long)got);
    return rc;
}
FORWARD(clGetProgramInfo, (cl_program p, cl_program_info i, size_t s, void *v, size_t *r),
        (p, i, s, v, r))
FORWARD(clSetKernelArg, (cl_kernel k, cl_uint i, size_t s, const void *v), (k, i, s, v))
FORWARD_ENQ(clEnqueueNDRangeKernel,
            (cl_command_queue q, cl_kernel k, cl_uint dims, const size_t *off, const size_t *g,
             const size_t *l, cl_uint ne, const cl_event *w, cl_event *e),
            (q, k, dims, off, g, l, ne, w, e))
FORWARD_ENQ(clEnqueueWriteBuffer,
            (cl_command_queue q, cl_mem b, cl_bool bl, size_t off, size_t size, const void *p,
             cl_uint ne, const cl_event *w, cl_event *e),
            (q, b, bl, off, size, p, ne, w, e))
FORWARD_ENQ(clEnqueueReadBuffer,
            (cl_command_queue q, cl_mem b, cl_bool bl, size_t off, size_t size, void *p, cl_uint ne,
             const cl_event *w, cl_event *e),
            (q, b, bl, off, size, p, ne, w, e))
FORWARD_ENQ(clEnqueueCopyBuffer,
            (cl_command_queue q, cl_mem s, cl_mem d, size_t so, size_t dof, size_t size, cl_uint ne,
             const cl_event *w, cl_event *e),
            (q, s, d, so, dof, size, ne, w, e))
FORWARD(clFinish, (cl_command_queue q), (q))
FORWARD_ENQ(clEnqueueFillBuffer,
            (cl_command_queue q, cl_mem b, const void *pat, size_t ps, size_t off, size_t size,
             cl_uint ne, const cl_event *w, cl_event *e),
            (q, b, pat, ps, off, size, ne, w, e))

FORWARD_REF(K_CONTEXT, 1, clRetainContext, cl_context)
FORWARD_REF(K_CONTEXT, -1, clReleaseContext, cl_context)
FORWARD_REF(K_QUEUE, 1, clRetainCommandQueue, cl_command_queue)
FORWARD_REF(K_QUEUE, -1, clReleaseCommandQueue, cl_command_queue)
FORWARD_REF(K_MEM, 1, clRetainMemObject, cl_mem)
FORWARD_REF(K_MEM, -1, clReleaseMemObject, cl_mem)
FORWARD_REF(K_PROGRAM, 1, clRetainProgram, cl_program)
FORWARD_REF(K_PROGRAM, -1, clReleaseProgram, cl_program)
FORWARD_REF(K_KERNEL, 1, clRetainKernel, cl_kernel)
FORWARD_REF(K_KERNEL, -1, clReleaseKernel, cl_kernel)
FORWARD_REF(K_EVENT, 1, clRetainEvent, cl_event)
FORWARD_REF(K_EVENT, -1, clReleaseEvent, cl_event)
