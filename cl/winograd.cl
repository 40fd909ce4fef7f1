/*
 * Pagoda Winograd convolution kernels -- OpenCL C 1.2, NHWC float32.
 *
 * A 3x3 convolution of stride 1 as F(2x2, 3x3) (Lavin and Gray, "Fast Algorithms for
 * Convolutional Neural Networks", 2016): each 2x2 block of outputs (a tile) comes from a 4x4
 * patch d of the input as Y = Aᵀ [U ⊙ V] A with V = Bᵀ d B per input channel and
 * U = G g Gᵀ per (output, input) channel pair (transformed once, on the host, in double).
 * The sum over input channels of U ⊙ V is 16 GEMMs M_ξ = V_ξ · U_ξᵀ (ξ = the 16 positions),
 * run between the two kernels here as one 1x1 convolution of 16 groups (conv.c): 16 products
 * per tile and channel pair instead of 36. Bᵀ and Aᵀ hold only 0 and ±1, G halves: the
 * transforms add and subtract.
 *
 *   Bᵀ = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]     Aᵀ = [1 1 1 0; 0 1 -1 -1]
 *
 * Tiles are numbered t = (n·TH + ty)·TW + tx over the output, TH = ceil(OH / 2),
 * TW = ceil(OW / 2); a launch takes tiles [t0, t0 + TC). In V and M, position ξ of tile t0 + i
 * starts at element i·ST + ξ·SX: [16][TC][channels] (ST = channels, SX = TC·channels) for 16
 * GEMMs, [TC][16][channels] (ST = 16·channels, SX = channels) for a 1x1 convolution of 16
 * groups.
 * A work-item takes one tile and CV contiguous channels (CV divides the channel count; the
 * host picks 16, 8, 4 or 1).
 */

#ifndef CV
#define CV 1
#endif

#define WCAT_(a, b) a##b
#define WCAT(a, b) WCAT_(a, b)
#if CV == 1
#define WT float
#define WLOAD(p) (*(p))
#define WSTORE(x, p) (*(p) = (x))
#else
#define WT WCAT(float, CV)
#define WLOAD(p) WCAT(vload, CV)(0, (p))
#define WSTORE(x, p) WCAT(vstore, CV)((x), 0, (p))
#endif

/* the epilogue code as gemm.cl reads it */
#define WEPI_BIAS(e) ((e) & 1)
#define WEPI_RES(e) (((e) >> 1) & 1)
#define WEPI_ACT(e) (((e) >> 2) & 3)
#define WEPI_RES_FIRST(e) (((e) >> 4) & 1)

/* Work-item idx of a launch over channels in vectors of CV: its first channel *c, its tile's
 * index in the launch *tl, and that tile's image *n and row and column of tiles *ty, *tx. */
typedef struct wino_item {
    int c, tl, n, ty, tx;
} wino_item;

static inline wino_item wino_locate(const int idx, const int channels, const int t0, const int TH,
                                    const int TW)
{
    const int cbn = channels / CV;
    wino_item w;
    w.c = (idx % cbn) * CV;
    w.tl = idx / cbn;
    const int t = t0 + w.tl;
    w.tx = t % TW;
    const int r = t / TW;
    w.ty = r % TH;
    w.n = r / TH;
    return w;
}

/* V at (t - t0, ξ, c) = (Bᵀ d B)[ξ] for the 4x4 patch at (2ty - PH, 2tx - PW), zeros outside. */
__kernel void wino_input(const int total, const int C, const int H, const int W, const int PH,
                         const int PW, const int TH, const int TW, const int t0,
                         const int ST, const int SX, __global const float *X, __global float *V)
{
    const int idx = get_global_id(0);
    if (idx >= total)
        return;
    const wino_item w = wino_locate(idx, C, t0, TH, TW);
    const int c = w.c, tl = w.tl, n = w.n;
    const int y0 = 2 * w.ty - PH, x0 = 2 * w.tx - PW;
    WT d[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int iy = y0 + i;
        const int rowok = iy >= 0 && iy < H;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int ix = x0 + j;
            d[i][j] = (rowok && ix >= 0 && ix < W)
                          ? WLOAD(X + ((long)(n * H + iy) * W + ix) * C + c)
                          : (WT)(0.0f);
        }
    }
    WT s[4][4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        s[0][j] = d[0][j] - d[2][j];
        s[1][j] = d[1][j] + d[2][j];
        s[2][j] = d[2][j] - d[1][j];
        s[3][j] = d[1][j] - d[3][j];
    }
    const long plane = SX;
    __global float *vp = V + (long)tl * ST + c;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        WSTORE(s[i][0] - s[i][2], vp + (4 * i + 0) * plane);
        WSTORE(s[i][1] + s[i][2], vp + (4 * i + 1) * plane);
        WSTORE(s[i][2] - s[i][1], vp + (4 * i + 2) * plane);
        WSTORE(s[i][1] - s[i][3], vp + (4 * i + 3) * plane);
    }
}

static inline WT wino_act(WT x, const int act)
{
    if (act == 1)
        return fmax(x, (WT)(0.0f));
    if (act == 2)
        return (WT)(0.5f) * x * ((WT)(1.0f) + erf(x * (WT)(0.70710678118654752f)));
    return x;
}

/* Y (NHWC, OH x OW, K channels) at tile t's 2x2 outputs = Aᵀ m A of M at (t - t0, ·, k), then the
 * epilogue: bias, residual and activation in the order `epi` says (R may be Y itself). */
__kernel void wino_output(const int total, const int K, const int OH, const int OW, const int TH,
                          const int TW, const int t0, const int ST, const int SX,
                          __global const float *M,
                          __global float *Y, __global const float *bias, __global const float *R,
                          const int epi)
{
    const int idx = get_global_id(0);
    if (idx >= total)
        return;
    const wino_item w = wino_locate(idx, K, t0, TH, TW);
    const int k = w.c, tl = w.tl, n = w.n, ty = w.ty, tx = w.tx;
    const long plane = SX;
    __global const float *mp = M + (long)tl * ST + k;
    WT q[2][4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const WT m0 = WLOAD(mp + (0 + j) * plane), m1 = WLOAD(mp + (4 + j) * plane);
        const WT m2 = WLOAD(mp + (8 + j) * plane), m3 = WLOAD(mp + (12 + j) * plane);
        q[0][j] = m0 + m1 + m2;
        q[1][j] = m1 - m2 - m3;
    }
    const WT bv = WEPI_BIAS(epi) ? WLOAD(bias + k) : (WT)(0.0f);
    const int hr = WEPI_RES(epi), first = WEPI_RES_FIRST(epi), act = WEPI_ACT(epi);
#pragma unroll
    for (int a = 0; a < 2; ++a) {
        const int oy = 2 * ty + a;
        if (oy >= OH)
            break;
#pragma unroll
        for (int b = 0; b < 2; ++b) {
            const int ox = 2 * tx + b;
            if (ox >= OW)
                break;
            WT x = b == 0 ? q[a][0] + q[a][1] + q[a][2] : q[a][1] - q[a][2] - q[a][3];
            const long o = ((long)(n * OH + oy) * OW + ox) * K + k;
            x += bv;
            if (hr && first)
                x += WLOAD(R + o);
            x = wino_act(x, act);
            if (hr && !first)
                x += WLOAD(R + o);
            WSTORE(x, Y + o);
        }
    }
}
