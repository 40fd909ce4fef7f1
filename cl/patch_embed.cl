/* patch_embed.cl — ViT patch embedding and bicubic resizing of position-embedding grids.
 *
 * Patch embedding is a P×P stride-P convolution, computed here as a GEMM whose A operand (the
 * unfolded image, one row per patch, one column per (channel, ky, kx)) is gathered straight
 * from the image while loading each tile: out[b, extra + p, d] = bias[d] + Σ_k A[b·np + p, k] ·
 * W[d, k] (+ pos[extra + p, d]). PE_TS×PE_TS work-items compute a PE_TS×PE_TS output tile,
 * stepping through K in PE_TS-wide slices held in local memory. The launcher picks PE_TS. */

#ifndef PE_TS
#define PE_TS 8
#endif

#define PE_HAS_BIAS 1u
#define PE_HAS_POS 2u

/* Global size: (round_up(D, PE_TS), round_up(B·np, PE_TS)); dim 0 runs over channels d, dim 1
 * over patches. */
__kernel __attribute__((reqd_work_group_size(PE_TS, PE_TS, 1))) void
patch_embed_gemm(__global const float *img, __global const float *wt, __global const float *bias,
                 __global const float *pos, __global float *out, uint B, uint C, uint H, uint W,
                 uint P, uint D, uint gw, uint np, uint extra, uint flags)
{
    __local float at[PE_TS][PE_TS + 1]; /* at[patch][k]; +1 keeps columns off one bank */
    __local float wl[PE_TS][PE_TS + 1]; /* wl[channel][k] */
    uint tx = (uint)get_local_id(0), ty = (uint)get_local_id(1);
    uint d = (uint)get_group_id(0) * PE_TS + tx;
    uint m = (uint)get_group_id(1) * PE_TS + ty;
    uint M = B * np, PP = P * P, K = C * PP;
    /* Each work-item loads A[m, k0 + tx] and W[d_load, k0 + tx], d_load = row ty of the
     * group's channel block, so both loads are contiguous along k across the group's x. */
    uint d_load = (uint)get_group_id(0) * PE_TS + ty;
    uint pb = m / np, pp = m % np;
    uint py = pp / gw, px = pp % gw;
    __global const float *img_b = img + (size_t)pb * C * H * W + (size_t)(py * P) * W + px * P;
    float acc = 0.0f;
    for (uint k0 = 0; k0 < K; k0 += PE_TS) {
        uint k = k0 + tx;
        float a = 0.0f, w = 0.0f;
        if (m < M && k < K) {
            uint c = k / PP, r = k % PP;
            a = img_b[(size_t)c * H * W + (r / P) * W + r % P];
        }
        if (d_load < D && k < K)
            w = wt[(size_t)d_load * K + k];
        at[ty][tx] = a;
        wl[ty][tx] = w;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (uint kk = 0; kk < PE_TS; kk++)
            acc += at[ty][kk] * wl[tx][kk];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (m < M && d < D) {
        uint t = extra + pp;
        float v = acc;
        if (flags & PE_HAS_BIAS)
            v += bias[d];
        if (flags & PE_HAS_POS)
            v += pos[(size_t)t * D + d];
        out[((size_t)pb * (extra + np) + t) * D + d] = v;
    }
}

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
