/* patch_embed.cl — ViT patch embedding and bicubic resizing of position-embedding grids.
 *
 * Patch embedding is a P×P stride-P convolution, computed as patch_unfold (the image as one
 * row per patch, one column per (channel, ky, kx)) followed by the shared GEMM kernels with
 * bias and position embeddings as the epilogue: out[b, extra + p, d] = bias[d] +
 * Σ_k A[b·np + p, k] · W[d, k] + pos[extra + p, d]. */

#define PE_HAS_BIAS 1u
#define PE_HAS_POS 2u

/* The leading tokens: out[b, 0, :] = cls (+ pos[0]), out[b, 1, :] = dist (+ pos[1]) when
 * extra is 2. One work-item per element of B × extra × D. */
__kernel void patch_tokens(__global const float *cls, __global const float *dist,
                           __global const float *pos, __global float *out, uint D, uint T,
                           uint extra, uint flags, uint n)
{
    uint i = (uint)get_global_id(0);
    if (i >= n)
        return;
    uint d = i % D, t = (i / D) % extra, b = i / (D * extra);
    float v = t == 0 ? cls[d] : dist[d];
    if (flags & PE_HAS_POS)
        v += pos[(size_t)t * D + d];
    out[((size_t)b * T + t) * D + d] = v;
}

/* Cubic convolution weights (Keys, A = -0.75) for fraction f, as PyTorch's bicubic mode. */
static float4 cubic_weights(float f)
{
    const float A = -0.75f;
    float x0 = f + 1.0f, x1 = f, x2 = 1.0f - f, x3 = 2.0f - f;
    float4 c;
    c.s0 = ((A * x0 - 5.0f * A) * x0 + 8.0f * A) * x0 - 4.0f * A;
    c.s1 = ((A + 2.0f) * x1 - (A + 3.0f)) * x1 * x1 + 1.0f;
    c.s2 = ((A + 2.0f) * x2 - (A + 3.0f)) * x2 * x2 + 1.0f;
    c.s3 = ((A * x3 - 5.0f * A) * x3 + 8.0f * A) * x3 - 4.0f * A;
    return c;
}

/* Source index and fraction along one axis, align_corners = false: src = (dst + ½)·scale - ½,
 * not clamped below (PyTorch's cubic rule); taps are clamped to the grid when read. */
static int cubic_source(uint dst, float scale, int in, float *frac)
{
    float src = ((float)dst + 0.5f) * scale - 0.5f;
    int i0 = (int)floor(src);
    if (i0 > in - 1)
        i0 = in - 1;
    *frac = clamp(src - (float)i0, 0.0f, 1.0f);
    return i0;
}

/* out[t, d]: rows t < extra copied, then the gh2 × gw2 grid resampled from pos's gh × gw grid.
 * One work-item per output element. */
__kernel void pos_resize_bicubic(__global const float *pos, __global float *out, uint D, uint extra,
                                 uint gh, uint gw, uint gh2, uint gw2, float sy, float sx, uint n)
{
    uint i = (uint)get_global_id(0);
    if (i >= n)
        return;
    uint d = i % D, t = i / D;
    if (t < extra) {
        out[i] = pos[i];
        return;
    }
    uint g = t - extra, oy = g / gw2, ox = g % gw2;
    float fy, fx;
    int y0 = cubic_source(oy, sy, (int)gh, &fy), x0 = cubic_source(ox, sx, (int)gw, &fx);
    float4 wy = cubic_weights(fy), wx = cubic_weights(fx);
    float wya[4] = {wy.s0, wy.s1, wy.s2, wy.s3}, wxa[4] = {wx.s0, wx.s1, wx.s2, wx.s3};
    __global const float *grid = pos + (size_t)extra * D + d;
    float acc = 0.0f;
    for (int a = 0; a < 4; a++) {
        int yy = clamp(y0 - 1 + a, 0, (int)gh - 1);
        float row = 0.0f;
        for (int c = 0; c < 4; c++) {
            int xx = clamp(x0 - 1 + c, 0, (int)gw - 1);
            row += wxa[c] * grid[((size_t)yy * gw + xx) * D];
        }
        acc += wya[a] * row;
    }
    out[i] = acc;
}

/* Unfolds the image into A[B·np, C·P·P] (one row per patch, columns ordered (c, ky, kx) like
 * the convolution weight [D, C, P, P]), for the GEMM path of the launcher. Global (K, B·np). */
__kernel void patch_unfold(__global const float *img, __global float *A, uint C, uint H, uint W,
                           uint P, uint gw, uint np, uint M)
{
    uint k = (uint)get_global_id(0), m = (uint)get_global_id(1);
    uint PP = P * P, K = C * PP;
    if (k >= K || m >= M)
        return;
    uint b = m / np, p = m % np, c = k / PP, r = k % PP;
    uint y = (p / gw) * P + r / P, x = (p % gw) * P + r % P;
    A[(size_t)m * K + k] = img[(((size_t)b * C + c) * H + y) * W + x];
}
