/* norm.cl — row reductions (LayerNorm, softmax), activations and bias add over the last dim.
 *
 * The row kernels run one work-group per row. The launcher picks a power-of-two work-group size
 * from CL_KERNEL_WORK_GROUP_SIZE and the device's local memory and passes a __local scratch
 * buffer of that many floats, so one build serves every row length. The flat kernels use one
 * work-item per element; the launcher rounds the global size up, so they check i < n. */

/* Sums v over the work-group; every work-item gets the total. The local size must be a power
 * of two. The trailing barrier lets the caller reuse `scratch` at once. */
static float group_sum(float v, __local float *scratch)
{
    uint lid = (uint)get_local_id(0), nl = (uint)get_local_size(0);
    scratch[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = nl >> 1; s > 0; s >>= 1) {
        if (lid < s)
            scratch[lid] += scratch[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float r = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

/* max(a, b) where a NaN in either wins, as in PyTorch's max reductions. */
static float max_nan(float a, float b)
{
    return (a > b || isnan(a)) ? a : b;
}

/* The maximum of v over the work-group (NaN if any work-item holds NaN); every work-item gets
 * it. Same conditions as group_sum. */
static float group_max(float v, __local float *scratch)
{
    uint lid = (uint)get_local_id(0), nl = (uint)get_local_size(0);
    scratch[lid] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint s = nl >> 1; s > 0; s >>= 1) {
        if (lid < s)
            scratch[lid] = max_nan(scratch[lid], scratch[lid + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float r = scratch[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

/* y = (x - mean) / sqrt(var + eps) * w + b per row; w and b are read only when affine != 0.
 * Two passes over the row. The mean is accumulated relative to the row's first element, so a
 * large common offset (1e3 + small noise) costs no precision; the variance is then the mean
 * square of (x - mean), never the cancelling E[x²] - E[x]². Every read of a row happens before the
 * group's last barrier and each element is read and written by the same work-item, so y may alias
 * x. */
__kernel void layernorm_rows(__global const float *x, __global const float *w,
                             __global const float *b, __global float *y, uint cols, float eps,
                             uint affine, __local float *scratch)
{
    size_t row = get_group_id(0);
    uint lid = (uint)get_local_id(0), nl = (uint)get_local_size(0);
    __global const float *xr = x + row * cols;
    __global float *yr = y + row * cols;
    float shift = xr[0];
    float s = 0.0f;
    for (uint c = lid; c < cols; c += nl)
        s += xr[c] - shift;
    /* mean = shift + dmean, kept as the pair: rounding shift + dmean to float would lose
     * dmean's low bits when shift is large. x - shift is exact for x near shift. */
    float dmean = group_sum(s, scratch) / (float)cols;
    float q = 0.0f;
    for (uint c = lid; c < cols; c += nl) {
        float d = (xr[c] - shift) - dmean;
        q += d * d;
    }
    float rstd = 1.0f / sqrt(group_sum(q, scratch) / (float)cols + eps);
    for (uint c = lid; c < cols; c += nl) {
        float v = ((xr[c] - shift) - dmean) * rstd;
        yr[c] = affine ? v * w[c] + b[c] : v;
    }
}

/* layernorm_vec: the same LayerNorm with one work-item per row and LVW-wide vectors along it
 * (cols % LVW == 0), no barriers: for CPU runtimes that vectorise what they are given, where a
 * work-group per row costs more to schedule than the row takes to normalise. Same two passes,
 * same shift; the sums are vector lanes added at the end. global = rows (rounded up). */
#ifdef LVW
#define LCAT_(a, b) a##b
#define LCAT(a, b) LCAT_(a, b)
#define LV LCAT(float, LVW)
#define LVLOAD LCAT(vload, LVW)
#define LVSTORE LCAT(vstore, LVW)
inline float lv_sum(LV v)
{
#if LVW == 16
    const float8 a = v.lo + v.hi;
    const float4 c = a.lo + a.hi;
#elif LVW == 8
    const float4 c = v.lo + v.hi;
#else
    const float4 c = v;
#endif
    return (c.x + c.y) + (c.z + c.w);
}
__kernel void layernorm_vec(__global const float *x, __global const float *w,
                            __global const float *b, __global float *y, uint rows, uint cols,
                            float eps, uint affine)
{
    const size_t row = get_global_id(0);
    if (row >= rows) return;
    __global const float *xr = x + row * cols;
    __global float *yr = y + row * cols;
    const uint nv = cols / LVW;
    const LV shift = (LV)(xr[0]);
    LV s = (LV)(0.0f);
    for (uint c = 0; c < nv; c++) s += LVLOAD(c, xr) - shift;
    const LV dmean = (LV)(lv_sum(s) / (float)cols);
    LV q = (LV)(0.0f);
    for (uint c = 0; c < nv; c++) {
        const LV d = (LVLOAD(c, xr) - shift) - dmean;
        q += d * d;
    }
    const LV rstd = (LV)(1.0f / sqrt(lv_sum(q) / (float)cols + eps));
    for (uint c = 0; c < nv; c++) {
        const LV v = ((LVLOAD(c, xr) - shift) - dmean) * rstd;
        LVSTORE(affine ? v * LVLOAD(c, w) + LVLOAD(c, b) : v, c, yr);
    }
}
#endif

/* y = softmax(scale * x) per row, with the row maximum subtracted before exp. As in PyTorch, a
 * row holding NaN or +inf is all NaN (the maximum is NaN, or inf - inf is), and so is a row of
 * only -inf (-inf - -inf); -inf elements of any other row get 0. */
__kernel void softmax_rows(__global const float *x, __global float *y, uint cols, float scale,
                           __local float *scratch)
{
    size_t row = get_group_id(0);
    uint lid = (uint)get_local_id(0), nl = (uint)get_local_size(0);
    __global const float *xr = x + row * cols;
    __global float *yr = y + row * cols;
    float m = -INFINITY;
    for (uint c = lid; c < cols; c += nl)
        m = max_nan(m, scale * xr[c]);
    m = group_max(m, scratch);
    float s = 0.0f;
    for (uint c = lid; c < cols; c += nl)
        s += exp(scale * xr[c] - m);
    float inv = 1.0f / group_sum(s, scratch);
    for (uint c = lid; c < cols; c += nl)
        yr[c] = exp(scale * xr[c] - m) * inv;
}

/* softmax_rows (log_form: log_softmax_rows) with one work-item a row and no barrier, `rows`
 * rows: for short rows on devices where local memory is emulated, where a work-group a row
 * costs more than the row's arithmetic. The row goes in vectors of 8 (one scalar tail), so that
 * exp runs as a vector function; the exponentials are kept in y between the sum and the scaling
 * (one exp an element). The same NaN and infinity rules as softmax_rows through the arithmetic:
 * a NaN, a +inf (inf - inf) or a row of only -inf makes the sum NaN and the row NaN; the sum is
 * taken in vector lanes instead of as a tree. y may alias x (each element is read before its own
 * work-item writes it). */
__kernel void softmax_short(__global const float *x, __global float *y, uint cols, float scale,
                            uint rows, uint log_form)
{
    const size_t row = get_global_id(0);
    if (row >= rows) return;
    __global const float *xr = x + row * cols;
    __global float *yr = y + row * cols;
    const uint n8 = cols / 8;
    float8 mv = (float8)(-INFINITY);
    for (uint c = 0; c < n8; c++)
        mv = fmax(mv, scale * vload8(c, xr));
    float m = fmax(fmax(fmax(mv.s0, mv.s1), fmax(mv.s2, mv.s3)),
                   fmax(fmax(mv.s4, mv.s5), fmax(mv.s6, mv.s7)));
    for (uint c = 8 * n8; c < cols; c++)
        m = fmax(m, scale * xr[c]);
    float8 sv = (float8)(0.0f);
    float s = 0.0f;
    if (log_form) {
        for (uint c = 0; c < n8; c++)
            sv += exp(scale * vload8(c, xr) - m);
        for (uint c = 8 * n8; c < cols; c++)
            s += exp(scale * xr[c] - m);
    } else {
        for (uint c = 0; c < n8; c++) {
            const float8 e = exp(scale * vload8(c, xr) - m);
            sv += e;
            vstore8(e, c, yr);
        }
        for (uint c = 8 * n8; c < cols; c++) {
            const float e = exp(scale * xr[c] - m);
            s += e;
            yr[c] = e;
        }
    }
    s += ((sv.s0 + sv.s1) + (sv.s2 + sv.s3)) + ((sv.s4 + sv.s5) + (sv.s6 + sv.s7));
    if (log_form) {
        const float lse = log(s);
        for (uint c = 0; c < n8; c++)
            vstore8((scale * vload8(c, xr) - m) - lse, c, yr);
        for (uint c = 8 * n8; c < cols; c++)
            yr[c] = (scale * xr[c] - m) - lse;
    } else {
        const float inv = 1.0f / s;
        for (uint c = 0; c < n8; c++)
            vstore8(vload8(c, yr) * inv, c, yr);
        for (uint c = 8 * n8; c < cols; c++)
            yr[c] *= inv;
    }
}

/* y = log_softmax(scale * x) per row: scale·x - max - log Σ exp(scale·x - max), never the log
 * of a rounded probability (a tiny probability keeps its digits). NaN, +inf and all -inf rows
 * give NaN as softmax_rows does. y may alias x (each element is read and written by one
 * work-item, every read of the row before the group's last barrier). */
__kernel void log_softmax_rows(__global const float *x, __global float *y, uint cols,
                               float scale, __local float *scratch)
{
    size_t row = get_group_id(0);
    uint lid = (uint)get_local_id(0), nl = (uint)get_local_size(0);
    __global const float *xr = x + row * cols;
    __global float *yr = y + row * cols;
    float m = -INFINITY;
    for (uint c = lid; c < cols; c += nl)
        m = max_nan(m, scale * xr[c]);
    m = group_max(m, scratch);
    float s = 0.0f;
    for (uint c = lid; c < cols; c += nl)
        s += exp(scale * xr[c] - m);
    float lse = log(group_sum(s, scratch));
    for (uint c = lid; c < cols; c += nl)
        yr[c] = (scale * xr[c] - m) - lse;
}

/* y = x / sqrt(mean(x²) + eps) · w per row (RMSNorm); w is read only when affine != 0. y may
 * alias x. */
__kernel void rmsnorm_rows(__global const float *x, __global const float *w, __global float *y,
                           uint cols, float eps, uint affine, __local float *scratch)
{
    size_t row = get_group_id(0);
    uint lid = (uint)get_local_id(0), nl = (uint)get_local_size(0);
    __global const float *xr = x + row * cols;
    __global float *yr = y + row * cols;
    float q = 0.0f;
    for (uint c = lid; c < cols; c += nl)
        q += xr[c] * xr[c];
    float r = 1.0f / sqrt(group_sum(q, scratch) / (float)cols + eps);
    for (uint c = lid; c < cols; c += nl)
        yr[c] = affine ? xr[c] * r * w[c] : xr[c] * r;
}

/* Each row's mean and 1 / sqrt(var + eps), with layernorm_rows' arithmetic (the same shift,
 * the same two passes), so that they are the statistics the normalised rows were made with. */
__kernel void layernorm_stats(__global const float *x, __global float *mean,
                              __global float *rstd, uint cols, float eps,
                              __local float *scratch)
{
    size_t row = get_group_id(0);
    uint lid = (uint)get_local_id(0), nl = (uint)get_local_size(0);
    __global const float *xr = x + row * cols;
    float shift = xr[0];
    float s = 0.0f;
    for (uint c = lid; c < cols; c += nl)
        s += xr[c] - shift;
    float dmean = group_sum(s, scratch) / (float)cols;
    float q = 0.0f;
    for (uint c = lid; c < cols; c += nl) {
        float d = (xr[c] - shift) - dmean;
        q += d * d;
    }
    float r = 1.0f / sqrt(group_sum(q, scratch) / (float)cols + eps);
    if (lid == 0) {
        mean[row] = shift + dmean;
        rstd[row] = r;
    }
}

/* Per channel of x [N, C, inner] (flat, n elements): y = (x - mean_c) / sqrt(var_c + eps) ·
 * w_c + b_c with stats != 0 (batch norm for inference), y = x · w_c + b_c without (the affine
 * step of group norm). y may alias x. */
__kernel void channel_norm(__global const float *x, __global float *y,
                           __global const float *mean, __global const float *var,
                           __global const float *w, __global const float *b, float eps,
                           uint channels, uint inner, uint n, uint stats)
{
    uint i = (uint)get_global_id(0);
    if (i >= n)
        return;
    uint c = (i / inner) % channels;
    float v = x[i];
    if (stats)
        v = (v - mean[c]) * (1.0f / sqrt(var[c] + eps));
    y[i] = v * w[c] + b[c];
}

/* GELU, exact form: x/2 · (1 + erf(x/√2)). NaN stays NaN; -inf gives the limit 0, not
 * -inf · 0 = NaN (PyTorch's CPU paths differ here; its pending fix returns 0 too). */
__kernel void gelu_erf(__global const float *x, __global float *y, uint n)
{
    uint i = (uint)get_global_id(0);
    if (i < n) {
        float v = x[i];
        y[i] = v == -INFINITY ? 0.0f : 0.5f * v * (1.0f + erf(v * M_SQRT1_2_F));
    }
}

/* GELU, tanh approximation: x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³))); NaN and ±inf as
 * gelu_erf. */
__kernel void gelu_tanh(__global const float *x, __global float *y, uint n)
{
    uint i = (uint)get_global_id(0);
    if (i < n) {
        float v = x[i];
        float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
        y[i] = v == -INFINITY ? 0.0f : 0.5f * v * (1.0f + tanh(u));
    }
}

/* max(x, 0), written so that a NaN stays NaN (fmax would turn it into 0). */
__kernel void relu(__global const float *x, __global float *y, uint n)
{
    uint i = (uint)get_global_id(0);
    if (i < n) {
        float v = x[i];
        y[i] = v < 0.0f ? 0.0f : v;
    }
}

/* y[r, c] = x[r, c] + bias[c] over a flat index i = r * cols + c. */
__kernel void bias_add(__global const float *x, __global const float *bias, __global float *y,
                       uint cols, uint n)
{
    uint i = (uint)get_global_id(0);
    if (i < n)
        y[i] = x[i] + bias[i % cols];
}
