/* nonlocal.cl — the parts of a non-local block (Wang et al. 2018) that GEMM and the fused
 * attention kernel don't cover: the concatenation form's per-position terms and its sum.
 *
 * Concatenation: f(x_i, x_j) = ReLU(w_θ·θ_i + w_φ·φ_j), y_i = (1/N') Σ_j f(x_i, x_j) g_j.
 * a_i = w_θ·θ_i and b_j = w_φ·φ_j are computed once (nl_rowdot); nl_concat then streams over j
 * with one work-item per (channel, position, batch item), so no N x N' matrix is ever stored. */

/* out[r] = Σ_c X[off + r·ld + c]·w[c], r < rows. */
__kernel void nl_rowdot(__global const float *X, long off, int ld, int cols,
                        __global const float *w, __global float *out, int rows)
{
    int r = get_global_id(0);
    if (r >= rows)
        return;
    __global const float *x = X + off + (long)r * ld;
    float acc = 0.0f;
    for (int c = 0; c < cols; c++)
        acc = fma(x[c], w[c], acc);
    out[r] = acc;
}

/* Y[(b·N + i)·Ci + c] (+)= inv · Σ_{j0 <= j < j1} max(a[b·N + i] + bv[b·Np + j], 0) ·
 * G[goff + (b·Np + j)·ld + c]; accumulate: add to Y (the launcher splits long j ranges: Mesa's
 * llvmpipe ends a work-item's loops after ~65535 iterations). */
__kernel void nl_concat(__global const float *a, __global const float *bv,
                        __global const float *G, long goff, int ld, int Ci, int N, int Np,
                        float inv, __global float *Y, int j0, int j1, int accumulate)
{
    int c = get_global_id(0), i = get_global_id(1), b = get_global_id(2);
    if (c >= Ci || i >= N)
        return;
    float ai = a[(long)b * N + i];
    __global const float *bb = bv + (long)b * Np;
    __global const float *g = G + goff + (long)b * Np * ld + c;
    float acc = 0.0f;
    for (int j = j0; j < j1; j++) {
        /* ReLU as a compare: NaN stays NaN (fmax would make it 0). */
        float f = ai + bb[j];
        f = f < 0.0f ? 0.0f : f;
        acc = fma(f, g[(long)j * ld], acc);
    }
    long o = ((long)b * N + i) * Ci + c;
    Y[o] = accumulate ? Y[o] + acc * inv : acc * inv;
}
