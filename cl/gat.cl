/* gat.cl — the graph attention layer (GATConv, Veličković et al. 2018, as PyTorch Geometric
 * computes it) after h = x·Wᵀ (a GEMM):
 *
 *   gat_scores     a_src[i, h] = att_src[h]·h_i, a_dst[i, h] = att_dst[h]·h_i   (per node, head)
 *   gat_segments   for each segment of a node's incoming edges (CSR order, at most `seg`
 *                  edges), head and group of up to 8 channels: over the segment's scores
 *                  e_ij = LeakyReLU(a_src[j] + a_dst[i]) the maximum m, the sum
 *                  s = Σ exp(e - m) and the weighted sum o = Σ exp(e - m)·h_j
 *   gat_combine    per node, head (or all heads, averaged) and group of channels: the
 *                  segments merged (each rescaled to the common maximum), o / s, + residual,
 *                  + bias, activation; the node's softmax maximum and sum kept for gat_alpha
 *   gat_alpha      per edge and head: α = exp(e - M_i) / S_i, written at the edge's position
 *                  in PyG's edge order
 *
 * Segments bound every work-item's loop whatever the degrees (a node with 10^5 in-edges is
 * ~100 segments): GPUs keep their parallelism on power-law graphs, and no loop comes near the
 * ~65,535 iterations after which Mesa's llvmpipe ends a work-item's loop (see gemm.c).
 * Every launch is flat over `total` items, split by the launcher into ranges with a global
 * offset; items past `total` return. */

static inline float leaky(float v, float slope)
{
    /* A compare, not fmax: NaN stays NaN. */
    return v < 0.0f ? v * slope : v;
}

/* as[i·H + h] = Σ_c hs[i·ld + h·C + c]·att_src[h·C + c]; ad likewise from hd and att_dst. */
__kernel void gat_scores(__global const float *hs, __global const float *hd, int ld,
                         __global const float *att_src, __global const float *att_dst,
                         __global float *as, __global float *ad, int H, int C, long total)
{
    long t = get_global_id(0);
    if (t >= total)
        return;
    long i = t / H;
    int h = (int)(t % H);
    __global const float *xs = hs + i * ld + h * C, *xd = hd + i * ld + h * C;
    __global const float *ws = att_src + h * C, *wd = att_dst + h * C;
    float s = 0.0f, d = 0.0f;
    for (int c = 0; c < C; c++) {
        s = fma(xs[c], ws[c], s);
        d = fma(xd[c], wd[c], d);
    }
    as[t] = s;
    ad[t] = d;
}

/* Channels per work-item: a head's channels are taken CW at a time, so that the score, its
 * exponential and the source index of an edge are computed once for CW channels. */
#define CW 8

/* Item t = (k·H + h)·nc + q: segment k (edges seg_beg[k] .. min(seg_beg[k] + seg, rowptr[i + 1])
 * of node i = seg_node[k]), head h, channels h·C + q·CW .. + CW (nc = ceil(C / CW) chunks).
 * pm, ps [K, H] (written by chunk 0), po [K, HC]. */
__kernel void gat_segments(__global const float *hs, __global const float *as,
                           __global const float *ad, __global const int *rowptr,
                           __global const int *col, __global const int *seg_node,
                           __global const int *seg_beg, int seg, int H, int C, float slope,
                           __global float *pm, __global float *ps, __global float *po, long total)
{
    long t = get_global_id(0);
    if (t >= total)
        return;
    int nc = (C + CW - 1) / CW, HC = H * C;
    int q = (int)(t % nc);
    long kh = t / nc;
    int h = (int)(kh % H);
    long k = kh / H;
    int c0 = h * C + q * CW, cw = min(CW, C - q * CW);
    int i = seg_node[k], e0 = seg_beg[k], e1 = rowptr[i + 1];
    if (e1 - e0 > seg)
        e1 = e0 + seg;
    float adi = ad[(long)i * H + h];
    /* Two passes over the segment's scores: the maximum, then the exponentials with the
     * weighted sum. No branch in the loops (an online softmax's rescaling branch kept PoCL's
     * loops scalar and cost twice the time). */
    float m = -INFINITY, s = 0.0f, o[CW];
    for (int e = e0; e < e1; e++)
        m = fmax(m, leaky(as[(long)col[e] * H + h] + adi, slope));
    for (int c = 0; c < CW; c++)
        o[c] = 0.0f;
    for (int e = e0; e < e1; e++) {
        long j = col[e];
        /* NaN spreads through s and o (fmax above skips it; exp(NaN - m) does not). */
        float w = exp(leaky(as[j * H + h] + adi, slope) - m);
        __global const float *x = hs + j * HC + c0;
        s += w;
        for (int c = 0; c < CW; c++)
            if (c < cw)
                o[c] = fma(w, x[c], o[c]);
    }
    for (int c = 0; c < CW; c++)
        if (c < cw)
            po[k * HC + c0 + c] = o[c];
    if (q == 0) {
        pm[k * H + h] = m;
        ps[k * H + h] = s;
    }
}

/* Head h of node i from its segments [k0, k1): o[c] = Σ o_k / Σ s_k over channels c0 .. c0 + cw
 * after rescaling each segment to the common maximum (one segment: no rescaling); zeros for a
 * node without incoming edges. *mo and *so receive the maximum and the sum. */
static inline void merged(__global const float *pm, __global const float *ps,
                          __global const float *po, int k0, int k1, int H, int HC, int h, int c0,
                          int cw, float *o, float *mo, float *so)
{
    for (int c = 0; c < CW; c++)
        o[c] = 0.0f;
    if (k1 - k0 == 1) {
        float S = ps[(long)k0 * H + h];
        for (int c = 0; c < CW; c++)
            if (c < cw)
                o[c] = po[(long)k0 * HC + c0 + c] / S;
        *mo = pm[(long)k0 * H + h];
        *so = S;
        return;
    }
    float M = -INFINITY;
    for (int k = k0; k < k1; k++)
        M = fmax(M, pm[(long)k * H + h]);
    float S = 0.0f;
    for (int k = k0; k < k1; k++) {
        float r = exp(pm[(long)k * H + h] - M);
        S = fma(ps[(long)k * H + h], r, S);
        for (int c = 0; c < CW; c++)
            if (c < cw)
                o[c] = fma(po[(long)k * HC + c0 + c], r, o[c]);
    }
    if (k1 > k0)
        for (int c = 0; c < CW; c++)
            o[c] /= S;
    *mo = M;
    *so = S;
}

/* Item t = (i·G + g)·nc + q over nodes i, G = H groups (concat) or 1 (mean), and chunks q of
 * CW channels: output columns of node i, OD = HC (concat) or C (mean). act 0 none, 1 ELU
 * (α = 1), 2 ReLU. has_res/has_bias: res [N, OD], bias [OD]. When keep, nm and ns [N, H]
 * receive the softmax maximum and sum per node and head. */
__kernel void gat_combine(__global const float *pm, __global const float *ps,
                          __global const float *po, __global const int *segptr, int H, int C,
                          int concat, __global const float *res, int has_res,
                          __global const float *bias, int has_bias, int act, int keep,
                          __global float *nm, __global float *ns, __global float *y, long total)
{
    long t = get_global_id(0);
    if (t >= total)
        return;
    int nc = (C + CW - 1) / CW, HC = H * C, OD = concat ? HC : C, G = concat ? H : 1;
    int q = (int)(t % nc);
    long ig = t / nc;
    int g = (int)(ig % G);
    long i = ig / G;
    int cw = min(CW, C - q * CW);
    int k0 = segptr[i], k1 = segptr[i + 1];
    float v[CW], o[CW], M, S;
    int col0; /* the first output column of the item */
    if (concat) {
        col0 = g * C + q * CW;
        merged(pm, ps, po, k0, k1, H, HC, g, col0, cw, v, &M, &S);
        if (keep && q == 0)
            nm[i * H + g] = M, ns[i * H + g] = S;
    } else {
        col0 = q * CW;
        for (int c = 0; c < CW; c++)
            v[c] = 0.0f;
        for (int h = 0; h < H; h++) {
            merged(pm, ps, po, k0, k1, H, HC, h, h * C + col0, cw, o, &M, &S);
            for (int c = 0; c < CW; c++)
                v[c] += o[c];
            if (keep && q == 0)
                nm[i * H + h] = M, ns[i * H + h] = S;
        }
        for (int c = 0; c < CW; c++)
            v[c] /= (float)H;
    }
    for (int c = 0; c < CW; c++) {
        if (c >= cw)
            break;
        long at = i * OD + col0 + c;
        float x = v[c];
        if (has_res)
            x += res[at];
        if (has_bias)
            x += bias[col0 + c];
        /* exp(x) - 1, not expm1: PoCL's expm1 is a slow scalar call (4x this kernel's time);
         * the difference is an absolute 1e-7 near 0. */
        if (act == 1)
            x = x > 0.0f ? x : exp(x) - 1.0f;
        else if (act == 2)
            x = x < 0.0f ? 0.0f : x;
        y[at] = x;
    }
}

/* Item t = e·H + h for CSR edge e (source col[e], destination dst[e]): the attention
 * coefficient, written to alpha[perm[e]·H + h]. */
__kernel void gat_alpha(__global const float *as, __global const float *ad,
                        __global const int *col, __global const int *dst,
                        __global const int *perm, int H, float slope, __global const float *nm,
                        __global const float *ns, __global float *alpha, long total)
{
    long t = get_global_id(0);
    if (t >= total)
        return;
    long e = t / H;
    int h = (int)(t % H);
    long i = dst[e], j = col[e];
    float v = leaky(as[j * H + h] + ad[i * H + h], slope);
    alpha[(long)perm[e] * H + h] = exp(v - nm[i * H + h]) / ns[i * H + h];
}
