/* gat.cl — the graph attention layer (GATConv, Veličković et al. 2018, as PyTorch Geometric
 * computes it) after h = x·Wᵀ (a GEMM):
 *
 *   gat_scores     a_src[i, h] = att_src[h]·h_i, a_dst[i, h] = att_dst[h]·h_i   (per node, head)
 *   gat_segments   for each segment of a node's incoming edges (CSR order, at most `seg`
 *                  edges) and each of the H·C channels: an online softmax over the segment's
 *                  scores e_ij = LeakyReLU(a_src[j] + a_dst[i]), giving the running maximum m,
 *                  the sum s = Σ exp(e - m) and the weighted sum o = Σ exp(e - m)·h_j
 *   gat_combine    per node and output column: the segments merged (rescaled to the common
 *                  maximum), o / s, heads concatenated or averaged, + residual, + bias,
 *                  activation; the node's softmax maximum and sum kept for gat_alpha
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

/* Item t = k·HC + c: segment k (edges seg_beg[k] .. min(seg_beg[k] + seg, rowptr[i + 1]) of node
 * i = seg_node[k]), channel c of head c / C. pm, ps [K, H] (written by the head's first
 * channel), po [K, HC]. */
__kernel void gat_segments(__global const float *hs, __global const float *as,
                           __global const float *ad, __global const int *rowptr,
                           __global const int *col, __global const int *seg_node,
                           __global const int *seg_beg, int seg, int H, int C, float slope,
                           __global float *pm, __global float *ps, __global float *po, long total)
{
    long t = get_global_id(0);
    if (t >= total)
        return;
    int HC = H * C;
    long k = t / HC;
    int c = (int)(t % HC), h = c / C;
    int i = seg_node[k], e0 = seg_beg[k], e1 = rowptr[i + 1];
    if (e1 - e0 > seg)
        e1 = e0 + seg;
    float adi = ad[(long)i * H + h];
    float m = -INFINITY, s = 0.0f, o = 0.0f;
    for (int e = e0; e < e1; e++) {
        long j = col[e];
        float v = leaky(as[j * H + h] + adi, slope);
        float x = hs[j * HC + c];
        if (v > m) {
            /* A new maximum: what was summed so far is rescaled (exp(-inf) = 0 at the start). */
            float r = exp(m - v);
            s = fma(s, r, 1.0f);
            o = fma(o, r, x);
            m = v;
        } else {
            /* NaN lands here too, and spreads through s and o. */
            float w = exp(v - m);
            s += w;
            o = fma(w, x, o);
        }
    }
    po[t] = o;
    if (c % C == 0) {
        pm[k * H + h] = m;
        ps[k * H + h] = s;
    }
}

/* One head's value of column c (of HC) at node i from its segments [k0, k1): Σ o / Σ s after
 * rescaling each segment to the common maximum; 0 for a node without incoming edges. */
static inline float merged(__global const float *pm, __global const float *ps,
                           __global const float *po, int k0, int k1, int H, int HC, int h, int c,
                           float *mo, float *so)
{
    float M = -INFINITY;
    for (int k = k0; k < k1; k++)
        M = fmax(M, pm[(long)k * H + h]);
    float S = 0.0f, O = 0.0f;
    for (int k = k0; k < k1; k++) {
        float r = exp(pm[(long)k * H + h] - M);
        S = fma(ps[(long)k * H + h], r, S);
        O = fma(po[(long)k * HC + c], r, O);
    }
    *mo = M;
    *so = S;
    return k1 > k0 ? O / S : 0.0f;
}

/* Item t = i·OD + c: output column c of node i, OD = HC (concat) or C (mean). act 0 none,
 * 1 ELU (α = 1), 2 ReLU. has_res/has_bias: res [N, OD], bias [OD]. When keep, nm and ns [N, H]
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
    int HC = H * C, OD = concat ? HC : C;
    long i = t / OD;
    int c = (int)(t % OD);
    int k0 = segptr[i], k1 = segptr[i + 1];
    float v, M, S;
    if (concat) {
        int h = c / C;
        v = merged(pm, ps, po, k0, k1, H, HC, h, c, &M, &S);
        if (keep && c % C == 0)
            nm[i * H + h] = M, ns[i * H + h] = S;
    } else {
        float sum = 0.0f;
        for (int h = 0; h < H; h++) {
            sum += merged(pm, ps, po, k0, k1, H, HC, h, h * C + c, &M, &S);
            if (keep && c == 0)
                nm[i * H + h] = M, ns[i * H + h] = S;
        }
        v = sum / (float)H;
    }
    if (has_res)
        v += res[t];
    if (has_bias)
        v += bias[c];
    if (act == 1)
        v = v > 0.0f ? v : expm1(v);
    else if (act == 2)
        v = v < 0.0f ? 0.0f : v;
    y[t] = v;
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
