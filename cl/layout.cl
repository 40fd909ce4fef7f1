/* layout.cl — data movement without arithmetic: strided copies (transpose, slice with steps,
 * concat, depth-to-space and space-to-depth), gather along an axis and padding.
 *
 * One work-item per output element. The launcher (runtime/ops/layout.c) passes the output's
 * dims innermost first (at most 8, after merging the dims every operand walks contiguously) as
 * a uint8 vector and each operand's element strides along them; a source stride may be negative
 * (a slice with a negative step), so source offsets are signed. The launcher guarantees that
 * every offset fits an int. Values are copied bit for bit: NaN payloads and signed zeros
 * survive. */

/* The coordinates of output element i along the `rank` dims of `shape` (innermost first) into
 * c[0..rank). */
static void coords(uint i, uint8 shape, uint rank, uint *c)
{
    uint s[8];
    vstore8(shape, 0, s);
    for (uint k = 0; k < rank; k++) {
        c[k] = i % s[k];
        i /= s[k];
    }
}

/* y[yoff + sum c_k sy_k] = x[xoff + sum c_k sx_k] for every coordinate c of `shape`. */
__kernel void layout_copy(__global const float *x, __global float *y, uint8 shape, int8 sx,
                          uint8 sy, int xoff, uint yoff, uint rank, uint count)
{
    uint i = (uint)get_global_id(0);
    if (i >= count)
        return;
    uint c[8];
    coords(i, shape, rank, c);
    int ss[8];
    uint ds[8];
    vstore8(sx, 0, ss);
    vstore8(sy, 0, ds);
    int ox = xoff;
    uint oy = yoff;
    for (uint k = 0; k < rank; k++) {
        ox += (int)c[k] * ss[k];
        oy += c[k] * ds[k];
    }
    y[oy] = x[ox];
}

/* layout_copy with one work-item a row of the innermost dim, which both operands walk
 * contiguously (sx[0] = sy[0] = 1): the outer coordinates are found once a row, and the row moves
 * in vectors of 4 (vload4 needs only float alignment). For devices where local memory is
 * emulated (CPUs): one element a work-item spent its time on the coordinates (PoCL 3.1, Xeon:
 * Swin-T's window partitions, rows of 96 channels, 2.3 ms a copy). rows = count / shape[0]. */
__kernel void layout_copy_rows(__global const float *x, __global float *y, uint8 shape, int8 sx,
                               uint8 sy, int xoff, uint yoff, uint rank, uint rows)
{
    uint r = (uint)get_global_id(0);
    if (r >= rows)
        return;
    uint s[8], ds[8];
    int ss[8];
    vstore8(shape, 0, s);
    vstore8(sx, 0, ss);
    vstore8(sy, 0, ds);
    int ox = xoff;
    uint oy = yoff;
    for (uint k = 1; k < rank; k++) {
        const uint c = r % s[k];
        r /= s[k];
        ox += (int)c * ss[k];
        oy += c * ds[k];
    }
    __global const float *xr = x + ox;
    __global float *yr = y + oy;
    const uint n = s[0], n4 = n / 4;
    for (uint j = 0; j < n4; j++)
        vstore4(vload4(j, xr), j, yr);
    for (uint j = 4 * n4; j < n; j++)
        yr[j] = xr[j];
}

/* y [outer, nidx, inner] = x [outer, dim, inner] at idx[j] along the middle (the launcher has
 * checked and normalised every index to [0, dim)). */
__kernel void layout_gather(__global const float *x, __global const int *idx, __global float *y,
                            uint dim, uint nidx, uint inner, uint count)
{
    uint i = (uint)get_global_id(0);
    if (i >= count)
        return;
    uint in = i % inner, r = i / inner, j = r % nidx, o = r / nidx;
    y[i] = x[(o * dim + (uint)idx[j]) * inner + in];
}

/* Where output coordinate c of a padded dim reads the source, or -1 for the constant: p is c
 * minus the padding before it, n the source's size along the dim. mode 0 constant, 1 reflect
 * (mirrored about the edge elements, repeatedly for pads beyond the size, as NumPy's), 2 edge
 * (the nearest edge element), 3 wrap (periodic). */
static int pad_source(int p, int n, int mode)
{
    if (p >= 0 && p < n)
        return p;
    if (mode == 0)
        return -1;
    if (mode == 2)
        return p < 0 ? 0 : n - 1;
    if (mode == 3) {
        int m = p % n;
        return m < 0 ? m + n : m;
    }
    if (n == 1)
        return 0;
    int period = 2 * (n - 1), m = p % period;
    m = m < 0 ? m + period : m;
    return m < n ? m : period - m;
}

/* y = x padded: along dim k (innermost first) output coordinate c reads source coordinate
 * pad_source(c - before_k, size_k); a coordinate outside the source in constant mode gives
 * `value`. */
__kernel void layout_pad(__global const float *x, __global float *y, uint8 shape, int8 before,
                         uint8 size, uint8 sx, uint rank, int mode, float value, uint count)
{
    uint i = (uint)get_global_id(0);
    if (i >= count)
        return;
    uint c[8], n[8], st[8];
    int b[8];
    coords(i, shape, rank, c);
    vstore8(before, 0, b);
    vstore8(size, 0, n);
    vstore8(sx, 0, st);
    uint ox = 0;
    for (uint k = 0; k < rank; k++) {
        int s = pad_source((int)c[k] - b[k], (int)n[k], mode);
        if (s < 0) {
            y[i] = value;
            return;
        }
        ox += (uint)s * st[k];
    }
    y[i] = x[ox];
}
