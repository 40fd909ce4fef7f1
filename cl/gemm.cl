/*
 * Pagoda GEMM kernels -- OpenCL C 1.2, row-major float32.
 *
 *   C = alpha * op(A) * op(B) + beta * C
 *   then optional epilogue:  + bias[n]  ->  activation  ->  + R[m,n]
 *   (epilogue bit 4: + bias[n]  ->  + R[m,n]  ->  activation, ResNet's order)
 *
 * op(A) is M x K, op(B) is K x N, C is M x N (row-major, leading dims).
 * All sizes/offsets are in elements.  See NOTES.md for launch rules.
 *
 * Compile-time macros (all have defaults):
 *   TRANS_A   0/1   op(A) = A (A is MxK, lda>=K) or A^T (A is KxM, lda>=M)
 *   TRANS_B   0/1   op(B) = B (B is KxN, ldb>=N) or B^T (B is NxK, ldb>=K)
 *   (the epilogue -- bias, activation, residual -- is the run-time argument `epi`)
 *   -- gemm_cpu / gemm_pack_b:
 *   RM        rows of C per work-item (register tile height)
 *   VW        float vector width (1, 2, 4, 8 or 16)
 *   NV        vectors per row; panel width NB = VW*NV columns per work-item
 *   KU        unroll factor of the K loop
 *   (gemm_cpu reads B as the NB-column panels gemm_pack_b makes; the launcher always packs)
 *   PACK_KB   k rows per work-item in gemm_pack_b
 *   -- gemm_gpu:
 *   TSM, TSN, TSK   work-group tile (rows, cols, depth)
 *   WPTM, WPTN      per-work-item register tile; local size = (TSN/WPTN, TSM/WPTM)
 */

#ifndef TRANS_A
#define TRANS_A 0
#endif
#ifndef TRANS_B
#define TRANS_B 0
#endif
#ifndef RM
#define RM 6
#endif
#ifndef VW
#define VW 8
#endif
#ifndef NV
#define NV 2
#endif
#ifndef KU
#define KU 4
#endif
#ifndef TSM
#define TSM 32
#endif
#ifndef TSN
#define TSN 32
#endif
#ifndef TSK
#define TSK 16
#endif
#ifndef WPTM
#define WPTM 4
#endif
#ifndef WPTN
#define WPTN 4
#endif

#define NB (VW * NV)

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#if VW == 1
/* Scalar code, for runtimes that vectorise across work-items (Intel's CPU runtime, GPUs). */
#define VT float
#define VLOAD(o, p) ((p)[o])
#define VSTORE(x, o, p) ((p)[o] = (x))
#else
#define VT CAT(float, VW)
#define VLOAD CAT(vload, VW)
#define VSTORE CAT(vstore, VW)
#endif

/* B_HALF: the B operand (weights) is stored as IEEE half (vload_half is core OpenCL, no
 * cl_khr_fp16 needed) and widened to float as it is loaded; the arithmetic stays fp32. */
#ifdef B_HALF
#define BPTR __global const half *
#define BEL(p, i) vload_half((i), (p))
#if VW == 1
#define BVLOAD(o, p) vload_half((o), (p))
#else
#define BVLOAD(o, p) CAT(vload_half, VW)((o), (p))
#endif
#else
#define BPTR __global const float *
#define BEL(p, i) ((p)[i])
#define BVLOAD(o, p) VLOAD((o), (p))
#endif
/* PACK_HALF: gemm_pack_b writes its panels as half, rounded to nearest even. */
#ifdef PACK_HALF
#define PPTR __global half *
#define PSTORE1(x, i, p) vstore_half_rte((x), (i), (p))
#if VW == 1
#define PSTORE(x, o, p) vstore_half_rte((x), (o), (p))
#else
#define PSTORE(x, o, p) CAT(CAT(vstore_half, VW), _rte)((x), (o), (p))
#endif
#else
#define PPTR __global float *
#define PSTORE1(x, i, p) ((p)[i] = (x))
#define PSTORE(x, o, p) VSTORE((x), (o), (p))
#endif


/* ---------------------------------------------------------------- epilogue */
/* The epilogue is chosen at run time by `epi` (bit 0: bias, bit 1: residual, bits 2-3: the
 * activation 0 none / 1 ReLU / 2 exact GELU, bit 4: the residual is added before the
 * activation, as ResNet does): it runs once per output element, outside the K loop, so a
 * uniform branch costs nothing measurable and one program serves every layer. */
#define EPI_BIAS(e) ((e) & 1)
#define EPI_RES(e) (((e) >> 1) & 1)
#define EPI_ACT(e) (((e) >> 2) & 3)
#define EPI_RES_FIRST(e) (((e) >> 4) & 1)

/* erf(z) in float to within one ulp (checked against double erf on 2^23 points of [0, 8] by
 * tools/dev/erf-coefficients, which fitted these polynomials), with no exp and no branch, so that
 * it vectorises: the built-in erf is a library call of a few hundred instructions per vector
 * (PoCL 3.1: GELU took a quarter of ViT-B/16's fc1 GEMM). |z| < 1: z + z·Q(z²); 1 <= |z| < 2.5
 * and 2.5 <= |z| < 4: polynomials in (|z| - 1.75)·4/3 and (|z| - 3.25)·4/3; |z| >= 4: ±1. NaN
 * stays NaN (its lanes take the polynomial, which gives NaN). T is float or a float vector. */
#define ERF_FN(NAME, T)                                                                        \
    inline T NAME(T z)                                                                         \
    {                                                                                          \
        const T a = fabs(z), z2 = z * z;                                                       \
        T q = (T)(7.898210206e-05f);                                                           \
        q = fma(q, z2, (T)(-8.024354128e-04f));                                                \
        q = fma(q, z2, (T)(5.190053578e-03f));                                                 \
        q = fma(q, z2, (T)(-2.685480854e-02f));                                                \
        q = fma(q, z2, (T)(1.128361243e-01f));                                                 \
        q = fma(q, z2, (T)(-3.761262884e-01f));                                                \
        q = fma(q, z2, (T)(1.283791665e-01f));                                                 \
        const T small = fma(z, q, z);                                                          \
        const T u = (a - (T)(1.75f)) * (T)(1.333333333f);                                      \
        T b = (T)(-1.888623347e-05f);                                                          \
        b = fma(b, u, (T)(6.474366163e-05f));                                                  \
        b = fma(b, u, (T)(6.646626291e-05f));                                                  \
        b = fma(b, u, (T)(-8.058083173e-04f));                                                 \
        b = fma(b, u, (T)(1.598615596e-03f));                                                  \
        b = fma(b, u, (T)(1.570594294e-03f));                                                  \
        b = fma(b, u, (T)(-1.522062681e-02f));                                                 \
        b = fma(b, u, (T)(3.803536574e-02f));                                                  \
        b = fma(b, u, (T)(-5.195031954e-02f));                                                 \
        b = fma(b, u, (T)(3.958123351e-02f));                                                  \
        b = fma(b, u, (T)(9.866716703e-01f));                                                  \
        const T v = (a - (T)(3.25f)) * (T)(1.333333333f);                                      \
        T c = (T)(-8.254535909e-06f);                                                          \
        c = fma(c, v, (T)(2.659981123e-05f));                                                  \
        c = fma(c, v, (T)(-4.690368085e-05f));                                                 \
        c = fma(c, v, (T)(7.165763144e-05f));                                                  \
        c = fma(c, v, (T)(-9.065911500e-05f));                                                 \
        c = fma(c, v, (T)(8.336952908e-05f));                                                  \
        c = fma(c, v, (T)(-5.336379297e-05f));                                                 \
        c = fma(c, v, (T)(2.183540592e-05f));                                                  \
        c = fma(c, v, (T)(9.999956973e-01f));                                                  \
        T big = select(b, c, a >= (T)(2.5f));                                                  \
        big = select(big, (T)(1.0f), a >= (T)(4.0f) || big > (T)(1.0f));                      \
        return select(copysign(big, z), small, a < (T)(1.0f));                                 \
    }
ERF_FN(erf_s, float)
#if VW > 1
ERF_FN(erf_v, VT)
#else
#define erf_v erf_s
#endif

/* ReLU is a compare, not fmax, so that NaN stays NaN as in PyTorch; GELU(-inf) is its limit 0,
 * not -inf · 0 = NaN. Both run in the epilogue only, never in the K loop. */
inline float act_s(float x, int act)
{
    if (act == 1)
        return x < 0.0f ? 0.0f : x;
    if (act == 2)
        return x == -INFINITY ? 0.0f : 0.5f * x * (1.0f + erf_s(x * 0.70710678118654752f));
    return x;
}

inline VT act_v(VT x, int act)
{
    if (act == 1)
        return select(x, (VT)(0.0f), x < (VT)(0.0f));
    if (act == 2)
        return select((VT)(0.5f) * x * ((VT)(1.0f) + erf_v(x * (VT)(0.70710678118654752f))),
                      (VT)(0.0f), x == (VT)(-INFINITY));
    return x;
}

/* ------------------------------------------------------------ pack kernel */
/*
 * gemm_pack_b: reorders op(B) (K x N) into column panels of NB = VW*NV columns.
 *   P[batch*strideP + p*(K*NB) + k*NB + j] = op(B)[k, p*NB + j]   (0 if p*NB+j >= N)
 *   number of panels NP = ceil(N/NB); strideP >= NP*K*NB (elements).
 * Each work-item packs PACK_KB consecutive k of one panel.
 * Global size: (ceil(K/PACK_KB), ceil(N/NB), batch), local size NULL or (1,1,1).
 */
#ifndef PACK_KB
#define PACK_KB 16
#endif
__kernel void gemm_pack_b(const int N, const int K,
                          __global const float *B, const int offB, const int ldb,
                          const long strideB,
                          PPTR P, const long strideP)
{
    const int k0 = get_global_id(0) * PACK_KB;
    const int p = get_global_id(1);
    const int bt = get_global_id(2);
    const int n0 = p * NB;
    if (k0 >= K || n0 >= N) return;
    __global const float *Bb = B + offB + (long)bt * strideB;
    PPTR Pp = P + (long)bt * strideP + (long)p * K * NB;
    const int kend = min(k0 + PACK_KB, K);
    const int nrem = min(NB, N - n0);
#if TRANS_B
    /* op(B)[k,n] = B[n*ldb + k]: read rows of B contiguous in k */
    for (int j = 0; j < NB; ++j) {
        if (j < nrem) {
            __global const float *src = Bb + (long)(n0 + j) * ldb;
            for (int k = k0; k < kend; ++k) PSTORE1(src[k], (long)k * NB + j, Pp);
        } else {
            for (int k = k0; k < kend; ++k) PSTORE1(0.0f, (long)k * NB + j, Pp);
        }
    }
#else
    for (int k = k0; k < kend; ++k) {
        __global const float *src = Bb + (long)k * ldb + n0;
        PPTR dst = Pp + (long)k * NB;
        if (nrem == NB) {
            for (int v = 0; v < NV; ++v) PSTORE(VLOAD(v, src), v, dst);
        } else {
            for (int j = 0; j < NB; ++j) PSTORE1((j < nrem) ? src[j] : 0.0f, j, dst);
        }
    }
#endif
}

/* ---------------------------------------------------------------- CPU GEMM */
/*
 * Each work-item owns an RM x NB tile of C: RM*NV accumulators of type floatVW.
 * get_global_id(0) = row block (fastest -> neighbouring work-items share the
 * same B panel in cache), get_global_id(1) = column panel, get_global_id(2) = batch.
 * Global size: (ceil(M/RM), ceil(N/NB), batch), local size (1,1,1) (or NULL).
 * PANELS_FIRST swaps the first two: neighbouring work-items share the row block of A (short
 * rows, small K); global size (ceil(N/NB), ceil(M/RM), batch).
 */
#if TRANS_A
#define AELEM(r, k) Ab[(long)(k) * lda + mr[r]]
#else
#define AELEM(r, k) ar[r][k]
#endif

/* One k step: NV vectors of the panel row times RM broadcast elements of A (AEL(r, k) names
 * row r's element k; bp points at the panel). */
#define GEMM_CPU_STEP(kk_, AEL)                                                                \
    {                                                                                          \
        VT bv[NV];                                                                             \
        _Pragma("unroll") for (int v = 0; v < NV; ++v) bv[v] =                                 \
            BVLOAD(0, bp + (long)(kk_) * NB + v * VW);                                          \
        _Pragma("unroll") for (int r = 0; r < RM; ++r)                                         \
        {                                                                                      \
            const VT a = (VT)(AEL(r, kk_));                                                    \
            _Pragma("unroll") for (int v = 0; v < NV; ++v) acc[r][v] = fma(a, bv[v], acc[r][v]); \
        }                                                                                      \
    }

#ifdef PREFETCH
#define PF_L2(p) __builtin_prefetch((p), 0, 2)
#else
#define PF_L2(p)
#endif
/* GEMM_CPU_RUN that also prefetches two lines into L2 each KU steps, pf_off bytes on from pf_p
 * and on, never past pf_lim (conv_few_rows_cpu: its share of the next block of the panel).
 * min, not a branch: a branch here made LLVM spill the accumulators. */
#define GEMM_CPU_RUN_PF(n_, AEL)                                                               \
    {                                                                                          \
        const int nrun_ = (n_);                                                                \
        int k = 0;                                                                             \
        for (; k + KU <= nrun_; k += KU) {                                                     \
            _Pragma("unroll") for (int kk = 0; kk < KU; ++kk) GEMM_CPU_STEP(k + kk, AEL)       \
            PF_L2(pf_p + min(pf_off, pf_lim));                                                 \
            PF_L2(pf_p + min(pf_off + 64, pf_lim));                                            \
            pf_off += 128;                                                                     \
        }                                                                                      \
        for (; k < nrun_; ++k)                                                                 \
            GEMM_CPU_STEP(k, AEL)                                                              \
    }

/* n_ consecutive k steps from 0, unrolled KU at a time, then the remainder. */
#define GEMM_CPU_RUN(n_, AEL)                                                                  \
    {                                                                                          \
        const int nrun_ = (n_);                                                                \
        int k = 0;                                                                             \
        for (; k + KU <= nrun_; k += KU) {                                                     \
            _Pragma("unroll") for (int kk = 0; kk < KU; ++kk) GEMM_CPU_STEP(k + kk, AEL)       \
        }                                                                                      \
        for (; k < nrun_; ++k)                                                                 \
            GEMM_CPU_STEP(k, AEL)                                                              \
    }

/* Software prefetch of the tile's C rows (and the residual's, where it is another buffer) before
 * its k loop, so that the epilogue finds them in cache: the lines come in while the tile
 * computes instead of stalling its stores and loads at the end (PREFETCH: the host sets it on
 * PoCL, whose clang lowers __builtin_prefetch to the CPU's prefetch instructions). */
#ifdef PREFETCH
#define GEMM_CPU_PREFETCH()                                                                    \
    {                                                                                          \
        const int pr_ = EPI_RES(epi) && Rb != Cb;                                              \
        _Pragma("unroll") for (int r = 0; r < RM; ++r)                                         \
        {                                                                                      \
            const int m = min(m0 + r, M - 1);                                                  \
            _Pragma("unroll") for (int j = 0; j < NB; j += 16)                                 \
            {                                                                                  \
                __builtin_prefetch(Cb + (long)m * ldc + n0 + j, 1, 3);                         \
                if (pr_) __builtin_prefetch(Rb + (long)m * ldr + n0 + j, 0, 3);                \
            }                                                                                  \
        }                                                                                      \
    }
#else
#define GEMM_CPU_PREFETCH()
#endif

/* The epilogue of an RM x NB register tile at (m0, n0): alpha, beta·C, bias, residual and
 * activation in the order `epi` says, into Cb (ldc), reading Rb (ldr) and bb. */
#define GEMM_CPU_STORE()                                                                       \
    {                                                                                          \
        const int readC = (beta != 0.0f);                                                      \
        const int hb = EPI_BIAS(epi), hr = EPI_RES(epi), act = EPI_ACT(epi);                   \
        const int hr0 = hr && EPI_RES_FIRST(epi), hr1 = hr && !EPI_RES_FIRST(epi);             \
        if (n0 + NB <= N) {                                                                    \
            VT bsv[NV];                                                                        \
            _Pragma("unroll") for (int v = 0; v < NV; ++v) bsv[v] =                            \
                hb ? VLOAD(0, bb + n0 + v * VW) : (VT)(0.0f);                                  \
            _Pragma("unroll") for (int r = 0; r < RM; ++r)                                     \
            {                                                                                  \
                const int m = m0 + r;                                                          \
                if (m < M) {                                                                   \
                    __global float *cp = Cb + (long)m * ldc + n0;                              \
                    _Pragma("unroll") for (int v = 0; v < NV; ++v)                             \
                    {                                                                          \
                        VT x = (VT)(alpha) * acc[r][v];                                        \
                        if (readC) x = fma((VT)(beta), VLOAD(0, cp + v * VW), x);              \
                        x += bsv[v];                                                           \
                        if (hr0) x += VLOAD(0, Rb + (long)m * ldr + n0 + v * VW);              \
                        x = act_v(x, act);                                                     \
                        if (hr1) x += VLOAD(0, Rb + (long)m * ldr + n0 + v * VW);              \
                        VSTORE(x, 0, cp + v * VW);                                             \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
        } else {                                                                               \
            const int nrem = N - n0;                                                           \
            _Pragma("unroll") for (int r = 0; r < RM; ++r)                                     \
            {                                                                                  \
                const int m = m0 + r;                                                          \
                if (m < M) {                                                                   \
                    float tmp[NB];                                                             \
                    _Pragma("unroll") for (int v = 0; v < NV; ++v) VSTORE(acc[r][v], v, tmp);  \
                    for (int j = 0; j < nrem; ++j) {                                           \
                        const long ci = (long)m * ldc + n0 + j;                                \
                        float x = alpha * tmp[j];                                              \
                        if (readC) x = fma(beta, Cb[ci], x);                                   \
                        if (hb) x += bb[n0 + j];                                               \
                        if (hr0) x += Rb[(long)m * ldr + n0 + j];                              \
                        x = act_s(x, act);                                                     \
                        if (hr1) x += Rb[(long)m * ldr + n0 + j];                              \
                        Cb[ci] = x;                                                            \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }

/* HALF_ARITH (with B_HALF, on a device with cl_khr_fp16: precision f16): the products and
 * their sums in half, HK k steps at a time, each block's sums then added into the float
 * accumulators. A block's error is a few half roundings of its partial sums (unit 2^-11);
 * adding the blocks in float keeps the error from growing with K as a half sum over K would.
 * A is read as float and each element rounded to half (inf beyond 65504). */
#ifdef HALF_ARITH
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#ifndef HK
#define HK 16
#endif
#if VW == 1
#define HVT half
#define HVLOAD(o, p) ((p)[o])
#define HTOF(x) ((float)(x))
#else
#define HVT CAT(half, VW)
#define HVLOAD CAT(vload, VW)
#define HTOF CAT(convert_float, VW)
#endif
#define GEMM_HALF_STEP(kk_, AEL)                                                               \
    {                                                                                          \
        HVT bv[NV];                                                                            \
        _Pragma("unroll") for (int v = 0; v < NV; ++v) bv[v] =                                 \
            HVLOAD(0, bp + (long)(kk_) * NB + v * VW);                                         \
        _Pragma("unroll") for (int r = 0; r < RM; ++r)                                         \
        {                                                                                      \
            const HVT a = (HVT)((half)(AEL(r, kk_)));                                          \
            _Pragma("unroll") for (int v = 0; v < NV; ++v) hacc[r][v] =                        \
                fma(a, bv[v], hacc[r][v]);                                                     \
        }                                                                                      \
    }
/* All K steps, in blocks of HK summed in half and added into acc in float. */
#define GEMM_HALF_RUN(AEL)                                                                     \
    for (int kb = 0; kb < K; kb += HK) {                                                       \
        HVT hacc[RM][NV];                                                                      \
        _Pragma("unroll") for (int r = 0; r < RM; ++r)                                         \
            _Pragma("unroll") for (int v = 0; v < NV; ++v) hacc[r][v] = (HVT)((half)0.0f);     \
        const int kn = min(HK, K - kb);                                                        \
        for (int k = 0; k < kn; ++k)                                                           \
            GEMM_HALF_STEP(kb + k, AEL)                                                        \
        _Pragma("unroll") for (int r = 0; r < RM; ++r)                                         \
            _Pragma("unroll") for (int v = 0; v < NV; ++v) acc[r][v] += HTOF(hacc[r][v]);      \
    }
#endif

__kernel void gemm_cpu(const int M, const int N, const int K,
                       const float alpha, const float beta,
                       __global const float *A, const int offA, const int lda, const long strideA,
                       BPTR B, const int offB, const int ldb, const long strideB,
                       __global float *C, const int offC, const int ldc, const long strideC,
                       __global const float *bias, const int offBias,
                       __global const float *R, const int offR, const int ldr, const long strideR,
                       const int epi)
{
#ifdef PANELS_FIRST
    const int mb = get_global_id(1);
    const int pb = get_global_id(0);
#else
    const int mb = get_global_id(0);
    const int pb = get_global_id(1);
#endif
    const int bt = get_global_id(2);
    const int m0 = mb * RM;
    const int n0 = pb * NB;
    if (m0 >= M || n0 >= N) return;

    __global const float *Ab = A + offA + (long)bt * strideA;
#if TRANS_A
    int mr[RM];
#pragma unroll
    for (int r = 0; r < RM; ++r) mr[r] = min(m0 + r, M - 1);
#else
    __global const float *ar[RM];
#pragma unroll
    for (int r = 0; r < RM; ++r) ar[r] = Ab + (long)min(m0 + r, M - 1) * lda;
#endif

    /* B is packed: panel pb holds K rows of NB contiguous floats, zero padded past N. */
    BPTR bp = B + offB + (long)bt * strideB + (long)pb * K * NB;

    VT acc[RM][NV];
#pragma unroll
    for (int r = 0; r < RM; ++r)
#pragma unroll
        for (int v = 0; v < NV; ++v) acc[r][v] = (VT)(0.0f);

    __global float *Cb = C + offC + (long)bt * strideC;
    __global const float *Rb = R + offR + (long)bt * strideR;
    __global const float *bb = bias + offBias;
    GEMM_CPU_PREFETCH()
#ifdef HALF_ARITH
    GEMM_HALF_RUN(AELEM)
#else
    GEMM_CPU_RUN(K, AELEM)
#endif
    GEMM_CPU_STORE()
}

/* ------------------------------------------------------- CPU implicit-GEMM convolution */
/*
 * conv_implicit_cpu: the gemm_cpu tile over a convolution seen as a GEMM without the im2col
 * matrix. Row m of A is output pixel m of the NHWC output (n, oy, ox); its K = KH·KW·CIN
 * elements are the taps in (ky, kx, ci) order, which is the order of the packed weights B.
 * For one tap the CIN elements of a row are contiguous in the NHWC input; with one group
 * (ldx = CIN) and no horizontal dilation the KW·CIN elements of a kernel row are too, and where
 * that kernel row lies inside the input for every row of the tile the inner loop, gemm_cpu's,
 * runs over the whole run. Otherwise it runs tap by tap, and a tap that falls outside the
 * H x W input (padding PH, PW) reads Z, CIN zeros, instead: no bordered copy of the input and
 * no check in the inner loop. C is the NHWC output with ldc channels, group g's columns at
 * g·N; B's groups are strideB apart. Each work-item computes MB row tiles of RM rows, one after
 * the other, so that they share the panel while it is in cache.
 * Global size: (ceil(M/(RM·MB)), ceil(N/NB), groups), local size (1,1,1); with PANELS_FIRST
 * (gemm_cpu's order for short rows) the first two dimensions swap.
 */
#define CONV_AEL(r, c) ar[r][c]

/* The arguments of the implicit convolutions (conv_implicit_cpu, conv_few_rows_cpu). */
#define CONV_CPU_PARAMS                                                                        \
    const int M, const int N, const int CIN, const int ldx, const int H, const int W,          \
        const int OH, const int OW, const int KH, const int KW, const int SH, const int SW,    \
        const int DH, const int DW, const int PH, const int PW, __global const float *X,       \
        __global const float *Z, BPTR B, const long strideB, __global float *C, const int ldc, \
        __global const float *bias, __global const float *R, const int epi

__kernel void conv_implicit_cpu(CONV_CPU_PARAMS, const int MB)
{
#ifdef PANELS_FIRST
    const int rb = get_global_id(1), pb = get_global_id(0);
#else
    const int rb = get_global_id(0), pb = get_global_id(1);
#endif
    const int g = get_global_id(2);
    const int n0 = pb * NB;
    if (n0 >= N) return;
    const float alpha = 1.0f, beta = 0.0f;
    const int K = KH * KW * CIN, ldr = ldc;
    /* one group, no horizontal dilation: a kernel row's KW·CIN elements are contiguous */
    const int row_runs = DW == 1 && ldx == CIN;
    BPTR bpanel = B + (long)g * strideB + (long)pb * K * NB;

    for (int mt = 0; mt < MB; ++mt) {
        const int m0 = (rb * MB + mt) * RM;
        if (m0 >= M) return;
        /* each row's image and the input position of its (0, 0) tap */
        int nn[RM], iy0[RM], ix0[RM];
#pragma unroll
        for (int r = 0; r < RM; ++r) {
            const int m = min(m0 + r, M - 1);
            const int pix = m % (OH * OW);
            nn[r] = m / (OH * OW);
            iy0[r] = (pix / OW) * SH - PH;
            ix0[r] = (pix % OW) * SW - PW;
        }

        __global float *Cb = C + (long)g * N;
        __global const float *Rb = R + (long)g * N;
        __global const float *bb = bias + (long)g * N;
        GEMM_CPU_PREFETCH()

        VT acc[RM][NV];
#pragma unroll
        for (int r = 0; r < RM; ++r)
#pragma unroll
            for (int v = 0; v < NV; ++v) acc[r][v] = (VT)(0.0f);

        for (int ky = 0; ky < KH; ++ky) {
            /* Kernel row ky lies inside the input for every row of the tile: one run of KW·CIN
             * elements; else a run of CIN per tap, the taps outside reading Z. Same products in
             * the same order either way. */
            int whole = row_runs;
#pragma unroll
            for (int r = 0; r < RM; ++r)
                whole = whole && (uint)(iy0[r] + ky * DH) < (uint)H && ix0[r] >= 0 &&
                        ix0[r] + KW <= W;
            if (whole) {
                __global const float *ar[RM];
#pragma unroll
                for (int r = 0; r < RM; ++r)
                    ar[r] = X + (((long)nn[r] * H + iy0[r] + ky * DH) * W + ix0[r]) * ldx;
                BPTR bp = bpanel + (long)ky * KW * CIN * NB;
                GEMM_CPU_RUN(KW * CIN, CONV_AEL)
            } else {
                for (int kx = 0; kx < KW; ++kx) {
                    __global const float *ar[RM];
#pragma unroll
                    for (int r = 0; r < RM; ++r) {
                        const int iy = iy0[r] + ky * DH, ix = ix0[r] + kx * DW;
                        ar[r] = ((uint)iy < (uint)H && (uint)ix < (uint)W)
                                    ? X + (((long)nn[r] * H + iy) * W + ix) * ldx + (long)g * CIN
                                    : Z;
                    }
                    BPTR bp = bpanel + (long)(ky * KW + kx) * CIN * NB;
                    GEMM_CPU_RUN(CIN, CONV_AEL)
                }
            }
        }

        GEMM_CPU_STORE()
    }
}

/* ------------------------------------------- CPU implicit convolution, few output rows */
/*
 * conv_few_rows_cpu: conv_implicit_cpu's product for convolutions with few output rows
 * (M <= RM·TILES: ResNet-50's layer4 and layer3 at batch 1, M = 49 and 196), whose weights
 * are read once and are too big for the cache (a 3x3 512 -> 512 layer: 9.4 MB, panels of
 * 1.2 MB). A work-item takes
 * one NB-column panel and every row tile, and walks K in blocks of at most KBLK rows of the
 * panel (never across a tap): each block is read from memory once, by the first row tile, and
 * from L1 by the others, while each tile prefetches its share of the next block, so that the
 * weights stream in while the FMAs run instead of only while a tile waits for them (the
 * row-tile order read each panel from memory at the first tile and left memory idle for the
 * others). The tiles' accumulators wait in private memory between blocks. Same products in
 * the same order as conv_implicit_cpu (tap by tap here), so the same sums.
 * Global size: (ceil(N/NB), groups), local size (1, 1).
 */
#ifndef TILES
#define TILES 40
#endif
#ifndef KBLK
#define KBLK 128
#endif
__kernel void conv_few_rows_cpu(CONV_CPU_PARAMS)
{
    const int pb = get_global_id(0), g = get_global_id(1);
    const int n0 = pb * NB;
    if (n0 >= N) return;
    const float alpha = 1.0f, beta = 0.0f;
    const int K = KH * KW * CIN, ldr = ldc;
    const int T = min((M + RM - 1) / RM, TILES);
    BPTR bpanel = B + (long)g * strideB + (long)pb * K * NB;
    __global float *Cb = C + (long)g * N;
    __global const float *Rb = R + (long)g * N;
    __global const float *bb = bias + (long)g * N;

    /* each row's image and the input position of its (0, 0) tap */
    int nn[TILES * RM], iy0[TILES * RM], ix0[TILES * RM];
    for (int i = 0; i < T * RM; ++i) {
        const int m = min(i, M - 1);
        const int pix = m % (OH * OW);
        nn[i] = m / (OH * OW);
        iy0[i] = (pix / OW) * SH - PH;
        ix0[i] = (pix % OW) * SW - PW;
    }
    VT part[TILES][RM][NV];

    for (int tap = 0; tap < KH * KW; ++tap) {
        const int ky = tap / KW, kx = tap % KW;
        for (int c0 = 0; c0 < CIN; c0 += KBLK) {
            const int kn = min(KBLK, CIN - c0);
            const int k0 = tap * CIN + c0;
            const int first = k0 == 0, last = k0 + kn == K;
            /* the next block's lines, shared out among the tiles */
            const int nk = last ? kn : min(KBLK, K - (k0 + kn));
            const long lines = ((long)nk * NB * sizeof(*bpanel) + 63) / 64;
            BPTR bp = bpanel + (long)k0 * NB;
            for (int t = 0; t < T; ++t) {
                const int m0 = t * RM;
                __global const float *ar[RM];
#pragma unroll
                for (int r = 0; r < RM; ++r) {
                    const int i = m0 + r;
                    const int iy = iy0[i] + ky * DH, ix = ix0[i] + kx * DW;
                    ar[r] = ((uint)iy < (uint)H && (uint)ix < (uint)W)
                                ? X + (((long)nn[i] * H + iy) * W + ix) * ldx + (long)g * CIN + c0
                                : Z;
                }
                VT acc[RM][NV];
#pragma unroll
                for (int r = 0; r < RM; ++r)
#pragma unroll
                    for (int v = 0; v < NV; ++v) acc[r][v] = first ? (VT)(0.0f) : part[t][r][v];
                /* tile t's share of the next block's lines (the last block: of itself again,
                 * nothing past the panel) */
                __global const char *pf_p =
                    (__global const char *)(bp + (last ? 0 : (long)kn * NB));
                int pf_off = (int)(lines * t / T * 64);
                const int pf_lim = (int)(lines - 1) * 64;
                GEMM_CPU_RUN_PF(kn, CONV_AEL)
                if (last) {
                    GEMM_CPU_STORE()
                } else {
#pragma unroll
                    for (int r = 0; r < RM; ++r)
#pragma unroll
                        for (int v = 0; v < NV; ++v) part[t][r][v] = acc[r][v];
                }
            }
        }
    }
}

/* ---------------------------------------------------------------- GPU GEMM */
/*
 * Classic local-memory tiling.  Work-group computes TSM x TSN of C,
 * each work-item WPTM x WPTN (strided by RTSM/RTSN for conflict-free access).
 * Local size (RTSN, RTSM) = (TSN/WPTN, TSM/WPTM).
 * Global size (ceil(N/TSN)*RTSN, ceil(M/TSM)*RTSM, batch).
 * Local memory: (TSM*TSK + TSK*TSN)*4 bytes (+padding of 1 column).
 */
#define RTSM (TSM / WPTM)
#define RTSN (TSN / WPTN)
#define LWG (RTSM * RTSN)

__kernel __attribute__((reqd_work_group_size(RTSN, RTSM, 1)))
void gemm_gpu(const int M, const int N, const int K,
              const float alpha, const float beta,
              __global const float *A, const int offA, const int lda, const long strideA,
              BPTR B, const int offB, const int ldb, const long strideB,
              __global float *C, const int offC, const int ldc, const long strideC,
              __global const float *bias, const int offBias,
              __global const float *R, const int offR, const int ldr, const long strideR,
              const int epi)
{
    __local float As[TSK][TSM + 1];
    __local float Bs[TSK][TSN + 1];

    const int tx = get_local_id(0); /* column direction */
    const int ty = get_local_id(1); /* row direction */
    const int tid = ty * RTSN + tx;
    const int bn0 = get_group_id(0) * TSN;
    const int bm0 = get_group_id(1) * TSM;
    const int bt = get_global_id(2);

    __global const float *Ab = A + offA + (long)bt * strideA;
    BPTR Bb = B + offB + (long)bt * strideB;

    float acc[WPTM][WPTN];
    for (int i = 0; i < WPTM; ++i)
        for (int j = 0; j < WPTN; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += TSK) {
        /* load A tile: TSM x TSK elements, op(A)[m, k] */
        for (int e = tid; e < TSM * TSK; e += LWG) {
#if TRANS_A
            const int mm = e % TSM, kk = e / TSM; /* contiguous in m */
            const int m = bm0 + mm, k = k0 + kk;
            As[kk][mm] = (m < M && k < K) ? Ab[(long)k * lda + m] : 0.0f;
#else
            const int kk = e % TSK, mm = e / TSK; /* contiguous in k */
            const int m = bm0 + mm, k = k0 + kk;
            As[kk][mm] = (m < M && k < K) ? Ab[(long)m * lda + k] : 0.0f;
#endif
        }
        /* load B tile: TSK x TSN elements, op(B)[k, n] */
        for (int e = tid; e < TSK * TSN; e += LWG) {
#if TRANS_B
            const int kk = e % TSK, nn = e / TSK; /* contiguous in k */
            const int n = bn0 + nn, k = k0 + kk;
            Bs[kk][nn] = (n < N && k < K) ? BEL(Bb, (long)n * ldb + k) : 0.0f;
#else
            const int nn = e % TSN, kk = e / TSN; /* contiguous in n */
            const int n = bn0 + nn, k = k0 + kk;
            Bs[kk][nn] = (n < N && k < K) ? BEL(Bb, (long)k * ldb + n) : 0.0f;
#endif
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int kk = 0; kk < TSK; ++kk) {
            float bv[WPTN];
            for (int j = 0; j < WPTN; ++j) bv[j] = Bs[kk][tx + j * RTSN];
            for (int i = 0; i < WPTM; ++i) {
                const float a = As[kk][ty + i * RTSM];
                for (int j = 0; j < WPTN; ++j) acc[i][j] = fma(a, bv[j], acc[i][j]);
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

    __global float *Cb = C + offC + (long)bt * strideC;
    __global const float *Rb = R + offR + (long)bt * strideR;
    const int hb = EPI_BIAS(epi), hr = EPI_RES(epi), act = EPI_ACT(epi);
    for (int i = 0; i < WPTM; ++i) {
        const int m = bm0 + ty + i * RTSM;
        if (m >= M) continue;
        for (int j = 0; j < WPTN; ++j) {
            const int n = bn0 + tx + j * RTSN;
            if (n >= N) continue;
            const long ci = (long)m * ldc + n;
            float x = alpha * acc[i][j];
            if (beta != 0.0f) x = fma(beta, Cb[ci], x);
            if (hb) x += bias[offBias + n];
            if (hr && EPI_RES_FIRST(epi)) x += Rb[(long)m * ldr + n];
            x = act_s(x, act);
            if (hr && !EPI_RES_FIRST(epi)) x += Rb[(long)m * ldr + n];
            Cb[ci] = x;
        }
    }
}

/* ------------------------------------------------------------ epilogue only */
/*
 * gemm_epilogue: applies + bias[n], activation, + R[m,n] to C in place, for back ends (CLBlast)
 * that compute only alpha*op(A)*op(B) + beta*C. Global (N, M, batch).
 */
__kernel void gemm_epilogue(const int M, const int N,
                            __global float *C, const int offC, const int ldc, const long strideC,
                            __global const float *bias, const int offBias,
                            __global const float *R, const int offR, const int ldr,
                            const long strideR, const int epi)
{
    const int n = get_global_id(0), m = get_global_id(1), bt = get_global_id(2);
    if (n >= N || m >= M) return;
    __global float *cp = C + offC + (long)bt * strideC + (long)m * ldc + n;
    float x = *cp;
    const float res = EPI_RES(epi) ? R[offR + (long)bt * strideR + (long)m * ldr + n] : 0.0f;
    if (EPI_BIAS(epi)) x += bias[offBias + n];
    if (EPI_RES_FIRST(epi)) x += res;
    x = act_s(x, EPI_ACT(epi));
    if (!EPI_RES_FIRST(epi)) x += res;
    *cp = x;
}

/* gemm_to_half: H[i] = X[i] as half, rounded to nearest even (weights stored as fp16 for
 * gemm_gpu). Global (n). */
__kernel void gemm_to_half(const long n, __global const float *X, __global half *H)
{
    const long i = get_global_id(0);
    if (i < n) vstore_half_rte(X[i], i, H);
}

/* ------------------------------------------------------------ int8 (precision int8) */
/*
 * Built with -cl-std=CL3.0 -DQ8 on a device with cl_khr_integer_dot_product (packed 4x8-bit).
 * q8_rows: symmetric int8 quantisation of each row of X (M rows of K floats, ld K): scale
 *   S[r] = max|x| / 127, Q[r] = round(x / S[r]) clamped to [-127, 127], four to a uint (byte t:
 *   element 4j + t), K4 = ceil(K/4) words a row, zero padded. A row holding NaN or infinity
 *   gets S[r] = NaN, so its outputs are NaN (never a silently finite result). Used at load for
 *   the weights (per output channel: rows of the [N, K] matrix) and per forward for the
 *   activations (per row, as ONNX Runtime's dynamic quantisation does per tensor).
 * gemm_q8: C[m, n] = SA[m]·SB[n]·Σ_k QA[m,k]·QB[n,k] with the epilogue of gemm_cpu (bias,
 *   activation, residual; epi bits as EPI_*), QR x QC outputs a work-item. The int32 sums are
 *   exact while K·127² < 2^31 (K < 133,000: the host checks).
 */
#ifdef Q8
#ifndef QR
#define QR 4
#endif
#ifndef QC
#define QC 4
#endif
__kernel void q8_rows(const int K, const int K4, __global const float *X, __global uint *Q,
                      __global float *S)
{
    const int r = get_global_id(0);
    __global const float *x = X + (long)r * K;
    float m = 0.0f;
    int bad = 0;
    for (int k = 0; k < K; ++k) {
        m = fmax(m, fabs(x[k]));
        bad |= !isfinite(x[k]);
    }
    const float inv = m > 0.0f ? 127.0f / m : 0.0f;
    S[r] = bad ? NAN : m / 127.0f;
    for (int j = 0; j < K4; ++j) {
        uint p = 0;
        for (int t = 0; t < 4; ++t) {
            const int k = 4 * j + t;
            const int q = (k < K && !bad) ? clamp((int)rint(x[k] * inv), -127, 127) : 0;
            p |= (uint)(q & 0xff) << (8 * t);
        }
        Q[(long)r * K4 + j] = p;
    }
}

__kernel void gemm_q8(const int M, const int N, const int K4, __global const uint *A,
                      __global const float *SA, __global const uint *B, __global const float *SB,
                      __global float *C, const int ldc, __global const float *bias,
                      __global const float *R, const int ldr, const int epi)
{
    const int n0 = get_global_id(0) * QC;
    const int m0 = get_global_id(1) * QR;
    if (m0 >= M || n0 >= N) return;
    __global const uint *ar[QR];
    __global const uint *bc[QC];
#pragma unroll
    for (int r = 0; r < QR; ++r) ar[r] = A + (long)min(m0 + r, M - 1) * K4;
#pragma unroll
    for (int c = 0; c < QC; ++c) bc[c] = B + (long)min(n0 + c, N - 1) * K4;
    int acc[QR][QC];
#pragma unroll
    for (int r = 0; r < QR; ++r)
#pragma unroll
        for (int c = 0; c < QC; ++c) acc[r][c] = 0;
    for (int j = 0; j < K4; ++j) {
        uint a[QR], b[QC];
#pragma unroll
        for (int r = 0; r < QR; ++r) a[r] = ar[r][j];
#pragma unroll
        for (int c = 0; c < QC; ++c) b[c] = bc[c][j];
#pragma unroll
        for (int r = 0; r < QR; ++r)
#pragma unroll
            for (int c = 0; c < QC; ++c) acc[r][c] += dot_4x8packed_ss_int(a[r], b[c]);
    }
    const int hb = EPI_BIAS(epi), hr = EPI_RES(epi), act = EPI_ACT(epi);
    const int hr0 = hr && EPI_RES_FIRST(epi), hr1 = hr && !EPI_RES_FIRST(epi);
    for (int r = 0; r < QR; ++r) {
        const int m = m0 + r;
        if (m >= M) break;
        for (int c = 0; c < QC; ++c) {
            const int n = n0 + c;
            if (n >= N) break;
            float x = (float)acc[r][c] * (SA[m] * SB[n]);
            if (hb) x += bias[n];
            if (hr0) x += R[(long)m * ldr + n];
            x = act_s(x, act);
            if (hr1) x += R[(long)m * ldr + n];
            C[(long)m * ldc + n] = x;
        }
    }
}
#endif
