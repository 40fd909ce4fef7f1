/*
 * Pagoda convolution and pooling kernels -- OpenCL C 1.2, float32, NHWC activations
 * ([batch, height, width, channels], channels contiguous). The GEMM-shaped convolutions
 * (1x1, implicit GEMM) live in gemm.cl with the GEMM tiles; here are the layout conversion,
 * im2col, the direct convolution and the pools. Every kernel is one work-item per output
 * element over a flat index (`total` of them), so any work-group size the launcher picks is
 * valid; sizes are in elements.
 */

/* The activation codes of pgd_act: 0 none, 1 ReLU, 2 exact GELU. ReLU is written as a compare
 * so that NaN stays NaN, as in PyTorch (fmax(NaN, 0) would return 0); GELU(-inf) is its limit
 * 0, not -inf · 0 = NaN. */
inline float conv_act(float x, int act)
{
    if (act == 1)
        return x < 0.0f ? 0.0f : x;
    if (act == 2)
        return x == -INFINITY ? 0.0f : 0.5f * x * (1.0f + erf(x * 0.70710678118654752f));
    return x;
}

/* y [N, H, W, C] from x [N, C, H, W]. */
#define PCAT_(a, b) a##b
#define PCAT(a, b) PCAT_(a, b)

/* One work-item a run of 16 neighbouring pixels of one image (total = N·ceil(H·W/16) runs):
 * each channel's 16 values are one vector load from its plane, and the run's 16·C outputs are
 * one contiguous block (PoCL 3.1, Xeon: ResNet-50's 224x224x3 input 0.176 ms with a pixel a
 * work-item, whose C = 3 strided loads and stores went one element at a time). A run that
 * would cross the plane's end (H·W not a multiple of 16) goes pixel by pixel. */
#define NHWC_RUN 16
__kernel void nchw_to_nhwc(__global const float *X, __global float *Y, const int total,
                           const int C, const int H, const int W)
{
    const int p = get_global_id(0);
    if (p >= total) return;
    const int hw = H * W, runs = (hw + NHWC_RUN - 1) / NHWC_RUN;
    const int n = p / runs, hw0 = (p % runs) * NHWC_RUN;
    __global const float *src = X + (long)n * C * hw + hw0;
    __global float *dst = Y + ((long)n * hw + hw0) * C;
    if (hw0 + NHWC_RUN <= hw && C == 3) {
        /* an RGB image: three plane vectors interleaved into three output vectors */
        const float16 r = vload16(0, src), g = vload16(0, src + hw), b = vload16(0, src + 2 * hw);
        vstore16((float16)(r.s0, g.s0, b.s0, r.s1, g.s1, b.s1, r.s2, g.s2, b.s2, r.s3, g.s3,
                           b.s3, r.s4, g.s4, b.s4, r.s5),
                 0, dst);
        vstore16((float16)(g.s5, b.s5, r.s6, g.s6, b.s6, r.s7, g.s7, b.s7, r.s8, g.s8, b.s8,
                           r.s9, g.s9, b.s9, r.sa, g.sa),
                 1, dst);
        vstore16((float16)(b.sa, r.sb, g.sb, b.sb, r.sc, g.sc, b.sc, r.sd, g.sd, b.sd, r.se,
                           g.se, b.se, r.sf, g.sf, b.sf),
                 2, dst);
    } else if (hw0 + NHWC_RUN <= hw) {
        for (int c = 0; c < C; ++c) {
            float t[NHWC_RUN];
            vstore16(vload16(0, src + (long)c * hw), 0, t);
#pragma unroll
            for (int i = 0; i < NHWC_RUN; ++i) dst[i * C + c] = t[i];
        }
    } else {
        for (int i = 0; hw0 + i < hw; ++i)
            for (int c = 0; c < C; ++c) dst[(long)i * C + c] = src[(long)c * hw + i];
    }
}

/* The geometry of a convolution, passed as one int16:
 * 0 H, 1 W, 2 CIN (input channels, ldx), 3 OH, 4 OW, 5 COUT, 6 KH, 7 KW, 8 SH, 9 SW, 10 PH,
 * 11 PW, 12 DH, 13 DW, 14 CING (channels per group), 15 COUTG. */
#define G_H geo.s0
#define G_W geo.s1
#define G_CIN geo.s2
#define G_OH geo.s3
#define G_OW geo.s4
#define G_COUT geo.s5
#define G_KH geo.s6
#define G_KW geo.s7
#define G_SH geo.s8
#define G_SW geo.s9
#define G_PH geo.sa
#define G_PW geo.sb
#define G_DH geo.sc
#define G_DW geo.sd
#define G_CING geo.se
#define G_COUTG geo.sf

/*
 * conv_im2col: rows [m0, m0 + rows) of group g's im2col matrix A [rows, KG], KG = KH·KW·CING
 * in (ky, kx, ci) order (the order of the prepared weights); taps outside the image are 0.
 * One work-item copies the CING contiguous channels of one tap of one row; total = rows·KH·KW.
 */
__kernel void conv_im2col(__global const float *X, __global float *A, const int16 geo,
                          const int m0, const int total, const int g)
{
    const int i = get_global_id(0);
    if (i >= total) return;
    const int taps = G_KH * G_KW, cing = G_CING;
    const int tap = i % taps, row = i / taps;
    const int ky = tap / G_KW, kx = tap % G_KW;
    const int m = m0 + row;
    const int pix = m % (G_OH * G_OW), n = m / (G_OH * G_OW);
    const int iy = (pix / G_OW) * G_SH - G_PH + ky * G_DH;
    const int ix = (pix % G_OW) * G_SW - G_PW + kx * G_DW;
    __global float *dst = A + (long)row * taps * cing + (long)tap * cing;
    if (iy >= 0 && iy < G_H && ix >= 0 && ix < G_W) {
        __global const float *src =
            X + (((long)n * G_H + iy) * G_W + ix) * G_CIN + (long)g * cing;
        for (int c = 0; c < cing; ++c) dst[c] = src[c];
    } else {
        for (int c = 0; c < cing; ++c) dst[c] = 0.0f;
    }
}

/*
 * conv_direct: y = act(conv(x) + bias + residual) (residual before the activation when
 * `res_first`, after it otherwise), one output element per work-item, any groups, stride,
 * padding and dilation. W is [COUT, KH, KW, CING]. flags: bit 0 bias, bit 1 residual, bits 2-3
 * the activation, bit 4 residual first. total = N·OH·OW·COUT.
 */
__kernel void conv_direct(__global const float *X, __global const float *Wt,
                          __global const float *bias, __global const float *R,
                          __global float *Y, const int16 geo, const int total,
                          const int flags)
{
    const int i = get_global_id(0);
    if (i >= total) return;
    const int co = i % G_COUT;
    int t = i / G_COUT;
    const int ox = t % G_OW;
    t /= G_OW;
    const int oy = t % G_OH, n = t / G_OH;
    const int g = co / G_COUTG, cing = G_CING;
    __global const float *xn = X + (long)n * G_H * G_W * G_CIN + (long)g * cing;
    __global const float *wc = Wt + (long)co * G_KH * G_KW * cing;
    float acc = 0.0f;
    for (int ky = 0; ky < G_KH; ++ky) {
        const int iy = oy * G_SH - G_PH + ky * G_DH;
        if (iy < 0 || iy >= G_H) continue;
        for (int kx = 0; kx < G_KW; ++kx) {
            const int ix = ox * G_SW - G_PW + kx * G_DW;
            if (ix < 0 || ix >= G_W) continue;
            __global const float *xp = xn + ((long)iy * G_W + ix) * G_CIN;
            __global const float *wp = wc + (ky * G_KW + kx) * cing;
            for (int c = 0; c < cing; ++c)
                acc = fma(xp[c], wp[c], acc);
        }
    }
    if (flags & 1) acc += bias[co];
    const int hr = (flags >> 1) & 1, act = (flags >> 2) & 3, first = (flags >> 4) & 1;
    if (hr && first) acc += R[i];
    acc = conv_act(acc, act);
    if (hr && !first) acc += R[i];
    Y[i] = acc;
}

/*
 * conv_depthwise: a depthwise convolution (groups = channels, one input and one output channel
 * a group), y = act(conv(x) + bias + residual) with conv_direct's flags. One work-item computes
 * DW_XB neighbouring output pixels of a row for DW_CV neighbouring channels (a vector: DW_CV is
 * set at build, 16, 8, 4 or 1, the widest dividing C), channels fastest: each weight vector is
 * read once for DW_XB outputs and every load is a vector of channels. W is [KH, KW, C]
 * (tap-major). total = N·OH·ceil(OW / DW_XB)·(C / DW_CV).
 */
#ifndef DW_CV
#define DW_CV 1
#endif
#define DW_XB 4
#if DW_CV == 1
#define DWV float
#define DW_LOAD(i, p) (p)[(i)]
#define DW_STORE(v, i, p) ((p)[(i)] = (v))
#else
#define DWV PCAT(float, DW_CV)
#define DW_LOAD(i, p) PCAT(vload, DW_CV)((i), (p))
#define DW_STORE(v, i, p) PCAT(vstore, DW_CV)((v), (i), (p))
#endif
/* ReLU as conv_act's compare (NaN stays NaN); other codes are handled by the caller. */
inline DWV dw_relu(DWV x)
{
#if DW_CV == 1
    return x < 0.0f ? 0.0f : x;
#else
    return select(x, (DWV)0.0f, x < (DWV)0.0f);
#endif
}
__kernel void conv_depthwise(__global const float *X, __global const float *Wt,
                             __global const float *bias, __global const float *R,
                             __global float *Y, const int16 geo, const int total, const int flags)
{
    const int i = get_global_id(0);
    if (i >= total) return;
    const int C = G_COUT, cvs = C / DW_CV, cb = i % cvs;
    const int owb = (G_OW + DW_XB - 1) / DW_XB;
    int t = i / cvs;
    const int ox0 = (t % owb) * DW_XB;
    t /= owb;
    const int oy = t % G_OH, n = t / G_OH;
    __global const float *xn = X + (long)n * G_H * G_W * C + cb * DW_CV;
    DWV acc[DW_XB];
#pragma unroll
    for (int o = 0; o < DW_XB; ++o) acc[o] = (DWV)0.0f;
    for (int ky = 0; ky < G_KH; ++ky) {
        const int iy = oy * G_SH - G_PH + ky * G_DH;
        if (iy < 0 || iy >= G_H) continue;
        __global const float *xr = xn + (long)iy * G_W * C;
        for (int kx = 0; kx < G_KW; ++kx) {
            const DWV w = DW_LOAD(0, Wt + (ky * G_KW + kx) * C + cb * DW_CV);
            const int ix0 = ox0 * G_SW - G_PW + kx * G_DW;
#pragma unroll
            for (int o = 0; o < DW_XB; ++o) {
                const int ix = ix0 + o * G_SW;
                if (ix >= 0 && ix < G_W) acc[o] = fma(DW_LOAD(0, xr + (long)ix * C), w, acc[o]);
            }
        }
    }
    const DWV b = (flags & 1) ? DW_LOAD(0, bias + cb * DW_CV) : (DWV)0.0f;
    const int hr = (flags >> 1) & 1, act = (flags >> 2) & 3, first = (flags >> 4) & 1;
#pragma unroll
    for (int o = 0; o < DW_XB; ++o) {
        if (ox0 + o >= G_OW) break;
        const long yi = (((long)n * G_OH + oy) * G_OW + ox0 + o) * C + cb * DW_CV;
        DWV v = acc[o] + b;
        if (hr && first) v += DW_LOAD(0, R + yi);
        if (act == 2) {
            /* GELU element by element: conv_act's NaN and -inf rules */
            float e[DW_CV];
            DW_STORE(v, 0, e);
            for (int j = 0; j < DW_CV; ++j) e[j] = conv_act(e[j], 2);
            v = DW_LOAD(0, e);
        } else if (act == 1) {
            v = dw_relu(v);
        }
        if (hr && !first) v += DW_LOAD(0, R + yi);
        DW_STORE(v, 0, Y + yi);
    }
}

/* The pools' output element i of [N, OH, OW, C]: its channel c, image n and the top-left
 * corner (y0, x0) of its window in the input (negative inside the padding). */
inline void pool_window(int i, int C, int OH, int OW, int S, int P, int *c, int *n, int *y0,
                        int *x0)
{
    *c = i % C;
    int t = i / C;
    const int ox = t % OW;
    t /= OW;
    const int oy = t % OH;
    *n = t / OH;
    *y0 = oy * S - P;
    *x0 = ox * S - P;
}

/*
 * Pools over K x K windows, NHWC; total = N·OH·OW·C. Max: padding is -inf (a window always
 * holds one real element by PyTorch's rule pad <= K/2). Average: the divisor counts padding
 * (count_include_pad) but not the part of a window past the padded edge, as PyTorch does.
 */
__kernel void maxpool2d(__global const float *X, __global float *Y, const int total,
                        const int C, const int H, const int W, const int OH, const int OW,
                        const int K, const int S, const int P)
{
    const int i = get_global_id(0);
    if (i >= total) return;
    int c, n, y0, x0;
    pool_window(i, C, OH, OW, S, P, &c, &n, &y0, &x0);
    /* A NaN in the window wins, as in PyTorch's max_pool2d (fmax would skip it). The padding
     * is never read, so -inf padding cannot turn into NaN. */
    float m = -INFINITY;
    for (int ky = max(y0, 0); ky < min(y0 + K, H); ++ky)
        for (int kx = max(x0, 0); kx < min(x0 + K, W); ++kx) {
            const float v = X[(((long)n * H + ky) * W + kx) * C + c];
            m = (v > m || isnan(v)) ? v : m;
        }
    Y[i] = m;
}

/* maxpool2d and avgpool2d a work-item per output pixel, over its C channels PVW at a time
 * (C % PVW == 0; NHWC makes them contiguous): global (N·OH·OW). The pixel's window is worked out
 * once for all its channels, not once per PVW of them (PoCL 3.1, Xeon: ResNet-50's 3x3/2 max pool
 * over 112 x 112 x 64, 0.15 -> 0.10 ms at batch 1). Same rules as the scalar kernels, lane by
 * lane. */
#ifdef PVW
#define PV PCAT(float, PVW)
#define PVLOAD PCAT(vload, PVW)
#define PVSTORE PCAT(vstore, PVW)

/* Output pixel p's image n, its window's corner (y0, x0) in the unpadded input and the window's
 * rows [ky0, ky1) x columns [kx0, kx1) that lie inside the input; yp its C outputs. */
#define POOL_PIXEL()                                                                           \
    const int p = get_global_id(0);                                                            \
    if (p >= pixels) return;                                                                   \
    const int ox = p % OW, t = p / OW, oy = t % OH, n = t / OH;                                \
    const int y0 = oy * S - P, x0 = ox * S - P;                                                \
    const int ky0 = max(y0, 0), ky1 = min(y0 + K, H), kx0 = max(x0, 0), kx1 = min(x0 + K, W); \
    __global const float *xn = X + (long)n * H * W * C;                                        \
    __global float *yp = Y + (long)p * C;

__kernel void maxpool2d_vec(__global const float *X, __global float *Y, const int pixels,
                            const int C, const int H, const int W, const int OH, const int OW,
                            const int K, const int S, const int P)
{
    POOL_PIXEL()
    for (int c = 0; c < C; c += PVW) {
        PV m = (PV)(-INFINITY);
        for (int ky = ky0; ky < ky1; ++ky)
            for (int kx = kx0; kx < kx1; ++kx) {
                const PV v = PVLOAD(0, xn + ((long)ky * W + kx) * C + c);
                m = select(m, v, isgreater(v, m) | isnan(v));
            }
        PVSTORE(m, 0, yp + c);
    }
}

__kernel void avgpool2d_vec(__global const float *X, __global float *Y, const int pixels,
                            const int C, const int H, const int W, const int OH, const int OW,
                            const int K, const int S, const int P)
{
    POOL_PIXEL()
    const int count = (min(y0 + K, H + P) - y0) * (min(x0 + K, W + P) - x0);
    for (int c = 0; c < C; c += PVW) {
        PV s = (PV)(0.0f);
        for (int ky = ky0; ky < ky1; ++ky)
            for (int kx = kx0; kx < kx1; ++kx)
                s += PVLOAD(0, xn + ((long)ky * W + kx) * C + c);
        PVSTORE(s / (float)count, 0, yp + c);
    }
}
#endif

__kernel void avgpool2d(__global const float *X, __global float *Y, const int total,
                        const int C, const int H, const int W, const int OH, const int OW,
                        const int K, const int S, const int P)
{
    const int i = get_global_id(0);
    if (i >= total) return;
    int c, n, y0, x0;
    pool_window(i, C, OH, OW, S, P, &c, &n, &y0, &x0);
    const int y1 = min(y0 + K, H + P), x1 = min(x0 + K, W + P);
    const int count = (y1 - y0) * (x1 - x0);
    float s = 0.0f;
    for (int ky = max(y0, 0); ky < min(y1, H); ++ky)
        for (int kx = max(x0, 0); kx < min(x1, W); ++kx)
            s += X[(((long)n * H + ky) * W + kx) * C + c];
    Y[i] = s / (float)count;
}

#ifdef PVW
/* global_avgpool with PVW contiguous channels a work-item (total counts floats): the same sums
 * in the same order, lane by lane, as vector loads. */
__kernel void global_avgpool_vec(__global const float *X, __global float *Y, const int total,
                                 const int C, const int HW)
{
    const int i = get_global_id(0) * PVW;
    if (i >= total) return;
    const int c = i % C, n = i / C;
    __global const float *xp = X + (long)n * HW * C + c;
    PV s = (PV)(0.0f);
    for (int p = 0; p < HW; ++p)
        s += PVLOAD(0, xp + (long)p * C);
    PVSTORE(s / (float)HW, 0, Y + i);
}
#endif

/* y [N, C] = mean over the HW pixels of x [N, HW, C]; total = N·C. */
__kernel void global_avgpool(__global const float *X, __global float *Y, const int total,
                             const int C, const int HW)
{
    const int i = get_global_id(0);
    if (i >= total) return;
    const int c = i % C, n = i / C;
    __global const float *xp = X + (long)n * HW * C + c;
    float s = 0.0f;
    for (int p = 0; p < HW; ++p)
        s += xp[(long)p * C];
    Y[i] = s / (float)HW;
}
