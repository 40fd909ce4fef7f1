/* patch_embed.cl — ViT patch embedding and bicubic resizing of position-embedding grids (the
 * rules of PyTorch's F.interpolate that timm, torchvision and Hugging Face use).
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

/* Source index and fraction along one axis. align_corners = false: src = (dst + 1/2)·scale - 1/2,
 * not clamped below (PyTorch's cubic rule); align_corners = true: src = dst·scale. Taps are
 * clamped to the grid when read. */
static int cubic_source(uint dst, float scale, uint align, int in, float *frac)
{
    float src = align ? scale * (float)dst : ((float)dst + 0.5f) * scale - 0.5f;
    int i0 = (int)floor(src);
    if (i0 > in - 1)
        i0 = in - 1;
    *frac = clamp(src - (float)i0, 0.0f, 1.0f);
    return i0;
}

/* out[t, d]: rows t < extra copied, then the gh2 × gw2 grid resampled from pos's gh × gw grid
 * with PyTorch's bicubic (A = -0.75, clamped taps); sy, sx map output to source coordinates
 * (in/out, 1/scale_factor, or (in-1)/(out-1) with align). One work-item per output element. */
__kernel void pos_resize_bicubic(__global const float *pos, __global float *out, uint D, uint extra,
                                 uint gh, uint gw, uint gh2, uint gw2, float sy, float sx,
                                 uint align, uint n)
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
    int y0 = cubic_source(oy, sy, align, (int)gh, &fy);
    int x0 = cubic_source(ox, sx, align, (int)gw, &fx);
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

/* The antialiasing cubic (Keys, A = -0.5, as PIL and PyTorch's antialias=True) at distance x. */
static float aa_cubic(float x)
{
    const float A = -0.5f;
    x = fabs(x);
    if (x < 1.0f)
        return ((A + 2.0f) * x - (A + 3.0f)) * x * x + 1.0f;
    if (x < 2.0f)
        return (((x - 5.0f) * x + 8.0f) * x - 4.0f) * A;
    return 0.0f;
}

/* The taps of output index dst along one axis of the antialiased resize with scale s = in/out:
 * [*lo, *hi) around centre c = (dst + 1/2)·s, support 2·max(s, 1); returns the sum of their
 * weights (for the normalisation) and the centre and weight scale for aa_weight. */
static float aa_taps(uint dst, float s, int in, int *lo, int *hi, float *centre, float *inv)
{
    float support = s >= 1.0f ? 2.0f * s : 2.0f;
    float c = s * ((float)dst + 0.5f);
    *inv = s >= 1.0f ? 1.0f / s : 1.0f;
    *lo = max((int)(c - support + 0.5f), 0);
    *hi = min((int)(c + support + 0.5f), in);
    *centre = c;
    float total = 0.0f;
    for (int x = *lo; x < *hi; x++)
        total += aa_cubic(((float)x - c + 0.5f) * *inv);
    return total;
}

/* out[t, d] as pos_resize_bicubic, with PyTorch's antialiased bicubic (timm): weights
 * normalised over the in-bounds taps, support widened when downsampling. sy, sx are in/out. */
__kernel void pos_resize_bicubic_aa(__global const float *pos, __global float *out, uint D,
                                    uint extra, uint gh, uint gw, uint gh2, uint gw2, float sy,
                                    float sx, uint n)
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
    int y0, y1, x0, x1;
    float cy, cx, iy, ix;
    float ty = aa_taps(oy, sy, (int)gh, &y0, &y1, &cy, &iy);
    float tx = aa_taps(ox, sx, (int)gw, &x0, &x1, &cx, &ix);
    /* PyTorch divides each weight by the total (when it is not 0). */
    float ny = ty != 0.0f ? ty : 1.0f, nx = tx != 0.0f ? tx : 1.0f;
    __global const float *grid = pos + (size_t)extra * D + d;
    float acc = 0.0f;
    for (int y = y0; y < y1; y++) {
        float row = 0.0f;
        for (int x = x0; x < x1; x++)
            row += aa_cubic(((float)x - cx + 0.5f) * ix) / nx * grid[((size_t)y * gw + x) * D];
        acc += aa_cubic(((float)y - cy + 0.5f) * iy) / ny * row;
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
