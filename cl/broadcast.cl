/* broadcast.cl — elementwise ops with NumPy broadcasting, and reductions over any set of axes.
 *
 * One program for every shape and op: the launcher (runtime/ops/broadcast.c) collapses the
 * shapes to at most 8 dims and passes them with each operand's element strides (0 along a
 * broadcast dim) as uint8 vectors, component 0 the innermost dim; the op is a run-time code,
 * the same for every work-item of a launch, so its switch costs a predictable branch. */

/* The op codes; runtime/ops/broadcast.c keeps the same numbers (pgd_binary_op, pgd_unary_op,
 * pgd_reduce_op of pagoda.h). */
#define B_ADD 0
#define B_SUB 1
#define B_MUL 2
#define B_DIV 3
#define B_POW 4
#define B_MAX 5
#define B_MIN 6

#define U_EXP 0
#define U_LOG 1
#define U_SQRT 2
#define U_RSQRT 3
#define U_ERF 4
#define U_TANH 5
#define U_SIGMOID 6
#define U_ABS 7
#define U_NEG 8
#define U_RELU 9
#define U_GELU 10
#define U_GELU_TANH 11
#define U_SILU 12
#define U_CLIP 13

#define R_SUM 0
#define R_MEAN 1
#define R_MAX 2
#define R_MIN 3
#define R_PROD 4
#define R_ARGMAX 5
#define R_ARGMIN 6

/* The launch is 2-D: dimension 0 runs along the innermost dim (component 0: no division, and
 * neighbouring work-items touch neighbouring elements), dimension 1 over the rest, whose
 * coordinates come from dividing by the outer dims; only dims below `rank` are looked at (the
 * launcher fills the rest with size 1). Each macro sets i (the flat output index) and the
 * operands' offsets, or returns for a work-item past the end. */
#define STEP(k, ...)                                                                               \
    if (rank > k) {                                                                                \
        uint c = r % shape.s##k;                                                                   \
        r /= shape.s##k;                                                                           \
        __VA_ARGS__                                                                                \
    }
#define INDEX2                                                                                     \
    uint i0 = (uint)get_global_id(0), r = (uint)get_global_id(1), i = r * shape.s0 + i0;           \
    if (i0 >= shape.s0 || i >= n)                                                                  \
        return;                                                                                    \
    uint oa = i0 * sa.s0, ob = i0 * sb.s0;                                                         \
    STEP(1, oa += c * sa.s1; ob += c * sb.s1;)                                                     \
    STEP(2, oa += c * sa.s2; ob += c * sb.s2;)                                                     \
    STEP(3, oa += c * sa.s3; ob += c * sb.s3;)                                                     \
    STEP(4, oa += c * sa.s4; ob += c * sb.s4;)                                                     \
    STEP(5, oa += c * sa.s5; ob += c * sb.s5;)                                                     \
    STEP(6, oa += c * sa.s6; ob += c * sb.s6;)                                                     \
    STEP(7, oa += c * sa.s7; ob += c * sb.s7;)
#define INDEX3                                                                                     \
    uint i0 = (uint)get_global_id(0), r = (uint)get_global_id(1), i = r * shape.s0 + i0;           \
    if (i0 >= shape.s0 || i >= n)                                                                  \
        return;                                                                                    \
    uint oa = i0 * sa.s0, ob = i0 * sb.s0, oc = i0 * sc.s0;                                        \
    STEP(1, oa += c * sa.s1; ob += c * sb.s1; oc += c * sc.s1;)                                    \
    STEP(2, oa += c * sa.s2; ob += c * sb.s2; oc += c * sc.s2;)                                    \
    STEP(3, oa += c * sa.s3; ob += c * sb.s3; oc += c * sc.s3;)                                    \
    STEP(4, oa += c * sa.s4; ob += c * sb.s4; oc += c * sc.s4;)                                    \
    STEP(5, oa += c * sa.s5; ob += c * sb.s5; oc += c * sc.s5;)                                    \
    STEP(6, oa += c * sa.s6; ob += c * sb.s6; oc += c * sc.s6;)                                    \
    STEP(7, oa += c * sa.s7; ob += c * sb.s7; oc += c * sc.s7;)

/* max/min that return NaN when either side is NaN (NumPy's maximum/minimum; OpenCL's fmax
 * would drop the NaN). a + b carries the NaN's payload. */
static float nan_max(float a, float b)
{
    return (isnan(a) || isnan(b)) ? a + b : fmax(a, b);
}
static float nan_min(float a, float b)
{
    return (isnan(a) || isnan(b)) ? a + b : fmin(a, b);
}

static float binary(int op, float a, float b)
{
    switch (op) {
    case B_ADD: return a + b;
    case B_SUB: return a - b;
    case B_MUL: return a * b;
    case B_DIV: return a / b;
    case B_POW: return pow(a, b);
    case B_MAX: return nan_max(a, b);
    default: return nan_min(a, b);
    }
}

__kernel void broadcast_binary(__global const float *a, __global const float *b,
                               __global float *y, uint8 shape, uint8 sa, uint8 sb, uint rank,
                               uint n, int op)
{
    INDEX2
    y[i] = binary(op, a[oa], b[ob]);
}

/* broadcast_binary for at most two dims after merging (same shapes, a scalar, a bias over the
 * last dims: the usual cases): no division, no branch on the rank, so that CPU runtimes
 * vectorise it across work-items. */
__kernel void broadcast_binary2(__global const float *a, __global const float *b,
                                __global float *y, uint8 shape, uint8 sa, uint8 sb, uint rank,
                                uint n, int op)
{
    uint i0 = (uint)get_global_id(0), i1 = (uint)get_global_id(1), i = i1 * shape.s0 + i0;
    if (i0 >= shape.s0 || i >= n)
        return;
    y[i] = binary(op, a[i0 * sa.s0 + i1 * sa.s1], b[i0 * sb.s0 + i1 * sb.s1]);
}

/* y = cond != 0 ? a : b (NaN counts as true, as bool(nan) in NumPy). */
__kernel void broadcast_where(__global const float *cond, __global const float *a,
                              __global const float *b, __global float *y, uint8 shape, uint8 sa,
                              uint8 sb, uint8 sc, uint rank, uint n)
{
    INDEX3
    y[i] = cond[oc] != 0.0f ? a[oa] : b[ob];
}

static float unary(int op, float x, float lo, float hi)
{
    switch (op) {
    case U_EXP: return exp(x);
    case U_LOG: return log(x);
    case U_SQRT: return sqrt(x);
    case U_RSQRT: return rsqrt(x);
    case U_ERF: return erf(x);
    case U_TANH: return tanh(x);
    case U_SIGMOID: return 1.0f / (1.0f + exp(-x));
    case U_ABS: return fabs(x);
    case U_NEG: return -x;
    case U_RELU: return x < 0.0f ? 0.0f : x; /* NaN stays NaN */
    /* GELU and SiLU at -inf: the limit 0, not -inf · 0 = NaN, as pgd_gelu (cl/norm.cl). */
    case U_GELU: return x == -INFINITY ? 0.0f : 0.5f * x * (1.0f + erf(x * M_SQRT1_2_F));
    case U_GELU_TANH: {
        float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
        return x == -INFINITY ? 0.0f : 0.5f * x * (1.0f + tanh(u));
    }
    case U_SILU: return x == -INFINITY ? 0.0f : x / (1.0f + exp(-x));
    default: return isnan(x) ? x : fmin(fmax(x, lo), hi); /* U_CLIP */
    }
}

__kernel void broadcast_unary(__global const float *x, __global float *y, float lo, float hi,
                              uint n, int op)
{
    uint i = (uint)get_global_id(0);
    if (i < n)
        y[i] = unary(op, x[i], lo, hi);
}

/* Whether (v, vi) replaces the best (b, bi) seen so far in a max (sign 1) or min (sign -1)
 * reduction: a larger/smaller value, or the first NaN. Ties keep the earlier index, as NumPy's
 * argmax; the elements come in index order. */
static int better(float v, float b, float sign)
{
    return sign * v > sign * b || (isnan(v) && !isnan(b));
}

/* Reduces chunk `part` (elements [part·chunk, min(nred, (part+1)·chunk)) of the reduced range) of
 * output element o, one work-item each: global size (nout rounded up, parts). Output o's base
 * offset comes from its coordinates over the kept dims (kshape, kstride); element j of the
 * reduced range is at offset base + its coordinates over the reduced dims (rshape, rstride), j
 * row-major over them. No work-item loops over more than `chunk` elements (software
 * rasterisers cut very long loops): a long range is reduced in parts whose results the
 * launcher reduces again.
 *
 * xi (when has_idx) holds the reduced-range index of each element of x (a later pass over the
 * parts of an argmax); else j is the index. The result goes to y[o·parts + part]: the value
 * (divided by div: the mean's element count, 1 otherwise), or for the argmax/argmin of the last
 * pass its index as a float; a pass that leaves parts for another writes their indices to yi. */
__kernel void broadcast_reduce(__global const float *x, __global const uint *xi, int has_idx,
                               __global float *y, __global uint *yi, int last,
                               uint8 kshape, uint8 kstride, uint krank, uint8 rshape,
                               uint8 rstride, uint rrank, uint nout, uint nred, uint chunk,
                               uint parts, int op, float div)
{
    uint o = (uint)get_global_id(0), part = (uint)get_global_id(1);
    if (part >= parts || o >= nout)
        return;
    uint ks[8] = {kshape.s0, kshape.s1, kshape.s2, kshape.s3, kshape.s4, kshape.s5, kshape.s6,
                  kshape.s7};
    uint kt[8] = {kstride.s0, kstride.s1, kstride.s2, kstride.s3, kstride.s4, kstride.s5,
                  kstride.s6, kstride.s7};
    uint rs[8] = {rshape.s0, rshape.s1, rshape.s2, rshape.s3, rshape.s4, rshape.s5, rshape.s6,
                  rshape.s7};
    uint rt[8] = {rstride.s0, rstride.s1, rstride.s2, rstride.s3, rstride.s4, rstride.s5,
                  rstride.s6, rstride.s7};
    uint base = 0, r = o;
    for (uint k = 0; k < krank; k++) {
        base += (r % ks[k]) * kt[k];
        r /= ks[k];
    }
    uint j0 = part * chunk, j1 = min(nred, j0 + chunk);
    /* The coordinates of j0 over the reduced dims, then an odometer from there. */
    uint cnt[8], off = base;
    r = j0;
    for (uint k = 0; k < rrank; k++) {
        cnt[k] = r % rs[k];
        r /= rs[k];
        off += cnt[k] * rt[k];
    }
    int arg = op == R_ARGMAX || op == R_ARGMIN;
    float sign = (op == R_MAX || op == R_ARGMAX) ? 1.0f : -1.0f;
    float acc = x[off];
    uint best = has_idx ? xi[off] : j0;
    for (uint j = j0; j < j1; j++) {
        if (j > j0) {
            float v = x[off];
            if (op == R_SUM || op == R_MEAN) {
                acc += v;
            } else if (op == R_PROD) {
                acc *= v;
            } else if (better(v, acc, sign)) {
                acc = v;
                best = has_idx ? xi[off] : j;
            }
        }
        for (uint k = 0; k < rrank; k++) {
            off += rt[k];
            if (++cnt[k] < rs[k])
                break;
            off -= cnt[k] * rt[k];
            cnt[k] = 0;
        }
    }
    uint at = o * parts + part;
    if (!last) {
        y[at] = acc;
        if (arg)
            yi[at] = best;
    } else {
        y[at] = arg ? (float)best : acc / div;
    }
}
