/* peak.cl — microkernels that measure what a device can do at best: its fp32 FMA rate and its
 * global memory bandwidth. `pagoda bench peak` times them; every other result is then shown as
 * a fraction of these numbers (its place under the roofline).
 *
 * Build options:
 *   -DPEAK_VEC=4|8|16    width of each accumulator (floatN); builds peak_fma alone
 *   (none)               builds the streaming kernels alone
 *   -DPEAK_CHAINS=4|8|16 independent accumulators per work-item
 * A CPU needs several independent chains to hide the FMA latency (4 cycles on two ports: 8 in
 * flight); a GPU hides it with other work-items, so fewer chains and more items suit it.
 * The two halves are built apart because a software driver (llvmpipe) scalarises the long FMA
 * body and takes far longer to compile it than to run the streaming kernels. */

#ifdef PEAK_VEC
#ifndef PEAK_CHAINS
#define PEAK_CHAINS 8
#endif

/* fma(), not mad(): PoCL lowers mad() to a multiply and an add (half the rate, twice the
 * latency); -DPEAK_OP=mad measures that form. */
#ifndef PEAK_OP
#define PEAK_OP fma
#endif

#define PEAK_CAT(a, b) a##b
#define PEAK_XCAT(a, b) PEAK_CAT(a, b)
/* -DPEAK_HALF: the same chains in half precision (cl_khr_fp16), for the fp16 FMA peak. */
#ifdef PEAK_HALF
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#define PEAK_ELT half
#else
#define PEAK_ELT float
#endif
#define vecf PEAK_XCAT(PEAK_ELT, PEAK_VEC)

/* The chains as separate variables (not an array), so no compiler keeps them in memory. */
#define PEAK_C4(X) X(0) X(1) X(2) X(3)
#define PEAK_C8(X) PEAK_C4(X) X(4) X(5) X(6) X(7)
#define PEAK_C16(X) PEAK_C8(X) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
#define PEAK_CHAINS_OF(X) PEAK_XCAT(PEAK_C, PEAK_CHAINS)(X)

#define PEAK_DECL(j) vecf acc##j = (vecf)((PEAK_ELT)(seed + (float)(j) * 1e-3f));
#define PEAK_ONE(j) acc##j = PEAK_OP(acc##j, m, c);
#define PEAK_SUM(j) s += acc##j;
/* One step of every chain: acc = acc * m + c. The chains never depend on each other, so the
 * hardware can issue them back to back. */
#define PEAK_STEP PEAK_CHAINS_OF(PEAK_ONE)

/* Each work-item runs `iters` × 4 steps of PEAK_CHAINS chains of PEAK_VEC lanes: 2 FLOP per
 * lane and step. m and c come from the host, so nothing folds at compile time; m·acc + c with
 * m just below 1 keeps the values finite. The sum is stored so the work is not dead. */
__kernel void peak_fma(__global float *out, float m0, float c0, int iters)
{
    vecf m = (vecf)((PEAK_ELT)m0), c = (vecf)((PEAK_ELT)c0);
    float seed = (float)get_global_id(0) * 1e-7f;
    PEAK_CHAINS_OF(PEAK_DECL)
    for (int i = 0; i < iters; i++) {
        PEAK_STEP PEAK_STEP PEAK_STEP PEAK_STEP
    }
    vecf s = (vecf)((PEAK_ELT)0.0f);
    PEAK_CHAINS_OF(PEAK_SUM)
    float t = 0.0f;
    for (int l = 0; l < PEAK_VEC; l++)
        t += (float)((PEAK_ELT *)&s)[l];
    out[get_global_id(0)] = t;
}

#elif defined(PEAK_DOT) /* -DPEAK_DOT=ss|us: the 8-bit integer dot-product peak */

#ifndef PEAK_CHAINS
#define PEAK_CHAINS 8
#endif
#define PEAK_CAT(a, b) a##b
#define PEAK_XCAT(a, b) PEAK_CAT(a, b)
#define PEAK_C4(X) X(0) X(1) X(2) X(3)
#define PEAK_C8(X) PEAK_C4(X) X(4) X(5) X(6) X(7)
#define PEAK_C16(X) PEAK_C8(X) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
#define PEAK_CHAINS_OF(X) PEAK_XCAT(PEAK_C, PEAK_CHAINS)(X)
/* dot_acc_sat_4x8packed_ss_int (signed x signed) or _us_ (unsigned x signed, the form x86
 * VNNI has in hardware) of cl_khr_integer_dot_product: 4 multiply-adds per call. Each chain
 * feeds its accumulator back in as the packed operand, so nothing is loop-invariant. */
#ifdef PEAK_NOSAT
#define PEAK_DOTF(a, b, c) (c + PEAK_XCAT(PEAK_XCAT(dot_4x8packed_, PEAK_DOT), _int)(a, b))
#else
#define PEAK_DOTF PEAK_XCAT(PEAK_XCAT(dot_acc_sat_4x8packed_, PEAK_DOT), _int)
#endif
#define PEAK_IDECL(j) int acc##j = (int)(seed + (uint)(j));
#define PEAK_IONE(j) acc##j = PEAK_DOTF(as_uint(acc##j) ^ a, b, acc##j);
#define PEAK_ISUM(j) s += acc##j;
#define PEAK_ISTEP PEAK_CHAINS_OF(PEAK_IONE)

__kernel void peak_dot(__global int *out, uint a, uint b, int iters)
{
    uint seed = (uint)get_global_id(0);
    PEAK_CHAINS_OF(PEAK_IDECL)
    for (int i = 0; i < iters; i++) {
        PEAK_ISTEP PEAK_ISTEP PEAK_ISTEP PEAK_ISTEP
    }
    int s = 0;
    PEAK_CHAINS_OF(PEAK_ISUM)
    out[get_global_id(0)] = s;
}

#else /* the streaming kernels */

#ifndef PEAK_PER_ITEM
#define PEAK_PER_ITEM 16
#endif

/* The streaming kernels give each work-group a contiguous block of PEAK_PER_ITEM × group-size
 * float4s, and each work-item every group-size-th of them: neighbouring items touch
 * neighbouring addresses on every step (coalesced on a GPU), and a CPU driver, which runs a
 * group's items one after another on one core, walks a block small enough for its L1 while
 * the whole group streams through memory once. Several float4s per item keep the per-item
 * overhead of CPU drivers small against the memory traffic. */

/* Streaming read: each item sums its float4s and stores one float (1/256 of the traffic). */
__kernel void peak_read(__global const float4 *src, __global float *out)
{
    uint wg = (uint)get_local_size(0);
    uint base = (uint)get_group_id(0) * wg * PEAK_PER_ITEM + (uint)get_local_id(0);
    float4 acc = (float4)(0.0f);
    for (int j = 0; j < PEAK_PER_ITEM; j++)
        acc += src[base + (uint)j * wg];
    out[get_global_id(0)] = acc.x + acc.y + acc.z + acc.w;
}

/* Streaming copy, laid out as peak_read. */
__kernel void peak_copy(__global const float4 *src, __global float4 *dst)
{
    uint wg = (uint)get_local_size(0);
    uint base = (uint)get_group_id(0) * wg * PEAK_PER_ITEM + (uint)get_local_id(0);
    for (int j = 0; j < PEAK_PER_ITEM; j++)
        dst[base + (uint)j * wg] = src[base + (uint)j * wg];
}

#endif
