/* pool.cl — max and average pooling with the whole of ONNX's and PyTorch's semantics:
 * rectangular windows and strides, dilation, per-side padding, ceil mode (decided by the
 * launcher, runtime/ops/pool.c, through the output size), count_include_pad, and max-pool
 * indices. NHWC; one work-item per output element, i = ((n·OH + oy)·OW + ox)·C + c.
 *
 * The geometry arrives as int8 g: (kh, kw, sh, sw, dh, dw, pad_top, pad_left) and int4 e:
 * (pad_bottom, pad_right, H, W). */

/* Max: a NaN wins and the last NaN's index is kept (PyTorch's `val > max || isnan(val)`); taps
 * in the padding are skipped (they count as -inf). idx, when want_idx, receives the winner's
 * index within its channel's plane, h·W + w (PyTorch's indices), as a float; a window with no
 * tap inside x gives -inf and index -1. */
__kernel void pool2d_max(__global const float *x, __global float *y, __global float *idx,
                         int8 g, int4 e, int C, int OH, int OW, int total, int want_idx)
{
    int i = get_global_id(0);
    if (i >= total)
        return;
    int c = i % C, t = i / C, ox = t % OW;
    t /= OW;
    int oy = t % OH, n = t / OH, H = e.s2, W = e.s3;
    int y0 = oy * g.s2 - g.s6, x0 = ox * g.s3 - g.s7;
    float m = -INFINITY;
    int at = -1;
    for (int ky = 0; ky < g.s0; ky++) {
        int yy = y0 + ky * g.s4;
        if (yy < 0 || yy >= H)
            continue;
        for (int kx = 0; kx < g.s1; kx++) {
            int xx = x0 + kx * g.s5;
            if (xx < 0 || xx >= W)
                continue;
            float v = x[(((long)n * H + yy) * W + xx) * C + c];
            if (v > m || isnan(v)) {
                m = v;
                at = yy * W + xx;
            }
        }
    }
    y[i] = m;
    if (want_idx)
        idx[i] = (float)at;
}

/* Average: the sum over the taps inside x, divided by the taps inside the padded extent
 * ([-pad_top, H + pad_bottom) x [-pad_left, W + pad_right)) with include_pad, else by the taps
 * inside x; a window of no counted tap gives NaN (0 / 0). */
__kernel void pool2d_avg(__global const float *x, __global float *y, int8 g, int4 e, int C,
                         int OH, int OW, int total, int include_pad)
{
    int i = get_global_id(0);
    if (i >= total)
        return;
    int c = i % C, t = i / C, ox = t % OW;
    t /= OW;
    int oy = t % OH, n = t / OH, H = e.s2, W = e.s3;
    int y0 = oy * g.s2 - g.s6, x0 = ox * g.s3 - g.s7;
    float s = 0.0f;
    int inside = 0, padded = 0;
    for (int ky = 0; ky < g.s0; ky++) {
        int yy = y0 + ky * g.s4;
        int yin = yy >= 0 && yy < H, ypad = yy >= -g.s6 && yy < H + e.s0;
        for (int kx = 0; kx < g.s1; kx++) {
            int xx = x0 + kx * g.s5;
            int xin = xx >= 0 && xx < W, xpad = xx >= -g.s7 && xx < W + e.s1;
            padded += ypad && xpad;
            if (yin && xin) {
                s += x[(((long)n * H + yy) * W + xx) * C + c];
                inside++;
            }
        }
    }
    y[i] = s / (float)(include_pad ? padded : inside);
}
