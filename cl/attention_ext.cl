/*
 * Pagoda fused attention with the extended masking of pgd_attention_ex, OpenCL C 1.2.
 *
 *   O = softmax(cap(Q Kᵀ · scale) + mask) V     per (batch b, query head h),
 *   cap(s) = softcap · tanh(s / softcap) when softcap > 0,
 *
 * with query head h reading key/value head h / group (grouped-query attention), a value head
 * size DV independent of the key head size D, and the keys a query row sees restricted by:
 *   - the sequence's key count nk_b (flag X_LENS: lens[b], clamped to [0, Nk]; else Nk),
 *   - the causal mask (X_CAUSAL): key j visible iff j <= p,
 *   - a sliding window (wl, wr >= 0 each, -1 unbounded): iff p - wl <= j <= p + wr,
 *   - a mask tensor M[m.x + b*m.y + h*m.z + i*m.w + j] (strides may be 0: broadcast), added to
 *     the score (X_MASK), or boolean (X_MASK | X_BOOL: 0 hides the key, else it is kept),
 * where p = i + offset is query row i's position among the keys: offset `base` (X_TOPLEFT:
 * 0 aligns top-left, a cache's past count puts the queries after it), else nk_b - Nq
 * (bottom-right).
 *
 * Same layout as attention.cl: each tensor as base + t.x + b*t.y + h*t.z + token*t.w + d, the
 * head dim contiguous. Online softmax over tiles of TK keys in the log2 domain, one work-item a
 * query row: no Nq x Nk matrix reaches memory except in attn_ext_scores, which writes the
 * scores a caller asked for. A row with no visible key gives zeros. NaN and +inf propagate as
 * in attention.cl.
 *
 * -DHALF_IO: Q, K, V, O (and the cache) hold IEEE halves, read with vload_half and written with
 * vstore_half_rte (core OpenCL: no cl_khr_fp16 needed); the arithmetic stays float and the
 * output row accumulates in `acc` (dense [B, H, Nq, DV] floats) before its one rounding.
 *
 * Kernels: attn_ext_fwd (the output, optionally each row's (m2, l) statistics),
 *          attn_ext_scores (raw, masked or probabilities, from the statistics),
 *          attn_ext_append (copies new keys or values into a cache at token `past`).
 */

#define LOG2E_F 1.44269504088896341f
#ifdef USE_FMA
#define MAD(a, b, c) fma(a, b, c)
#else
#define MAD(a, b, c) mad(a, b, c)
#endif
#ifndef TK
#define TK 32
#endif

#ifdef HALF_IO
#define IOT half
#define LD(p, i) vload_half((i), (p))
#else
#define IOT float
#define LD(p, i) ((p)[i])
#endif

#define X_CAUSAL 1
#define X_MASK 2
#define X_TOPLEFT 4
#define X_BOOL 8
#define X_LENS 16
#define X_SOFTCAP 32

/* The key count of sequence b. */
inline int seq_keys(__global const float *lens, int b, int Nk, int flags)
{
    if (!(flags & X_LENS)) return Nk;
    const float n = lens[b];
    return n <= 0.0f ? 0 : (n >= (float)Nk ? Nk : (int)n);
}

/* Visible keys of a row lie in [*j0, *j1): the key count, causal mask and window bound them. */
inline void key_range(int i, int nkb, int Nq, int flags, int base, int wl, int wr, int *j0,
                      int *j1)
{
    const int p = i + ((flags & X_TOPLEFT) ? base : nkb - Nq);
    int hi = nkb, lo = 0;
    if (flags & X_CAUSAL) hi = min(hi, p + 1);
    if (wr >= 0) hi = min(hi, p + wr + 1);
    if (wl >= 0) lo = max(lo, p - wl);
    hi = max(hi, 0);
    *j0 = min(lo, hi);
    *j1 = hi;
}

/* The score of query row qp against key row kr before the mask: q·k·scale, soft-capped. */
inline float raw_score(__global const IOT *qp, __global const IOT *kr, int D, float scale,
                       float softcap, int flags)
{
    float sc = 0.0f;
    for (int d = 0; d < D; d++) sc = MAD(LD(qp, d), LD(kr, d), sc);
    sc *= scale;
    if (flags & X_SOFTCAP) sc = softcap * tanh(sc / softcap);
    return sc;
}

/* The score with the mask applied (natural log domain); -inf for a key the mask hides. */
inline float masked(float sc, __global const float *mp, int j, int flags)
{
    if (!(flags & X_MASK)) return sc;
    const float m = mp[j];
    if (flags & X_BOOL) return m == 0.0f ? -INFINITY : sc;
    return sc + m;
}

__kernel void attn_ext_fwd(
    __global const IOT *Q, int4 qs,
    __global const IOT *K, int4 ks,
    __global const IOT *V, int4 vs,
    __global IOT *O, int4 os,
    __global float *acc,
    __global const float *M, int4 ms,
    __global const float *lens,
    __global float *stats, int write_stats,
    int H, int group, int Nq, int Nk, int D, int DV, float scale, float softcap, int flags,
    int base, int wl, int wr)
{
    const int i = get_global_id(0);
    const int h = get_global_id(1);
    const int b = get_global_id(2);
    if (i >= Nq || h >= H) return;
    const int hk = h / group;
    const __global IOT *qp = Q + qs.x + b * qs.y + h * qs.z + i * qs.w;
    const __global IOT *kp = K + ks.x + b * ks.y + hk * ks.z;
    const __global IOT *vp = V + vs.x + b * vs.y + hk * vs.z;
    const __global float *mp = M + ms.x + b * ms.y + h * ms.z + i * ms.w;
    __global IOT *orow = O + os.x + b * os.y + h * os.z + i * os.w;
#ifdef HALF_IO
    __global float *op = acc + ((size_t)(b * H + h) * Nq + i) * DV;
#else
    __global float *op = orow;
#endif
    for (int d = 0; d < DV; d++) op[d] = 0.0f;

    int jbeg, jend;
    key_range(i, seq_keys(lens, b, Nk, flags), Nq, flags, base, wl, wr, &jbeg, &jend);
    float m = -INFINITY, l = 0.0f;
    for (int j0 = jbeg; j0 < jend; j0 += TK) {
        const int n = min(TK, jend - j0);
        float s[TK];
        float tmax = -INFINITY;
        for (int t = 0; t < n; t++) {
            const float sc = raw_score(qp, kp + (j0 + t) * ks.w, D, scale, softcap, flags);
            s[t] = masked(sc, mp, j0 + t, flags) * LOG2E_F;
            tmax = fmax(tmax, s[t]);
        }
        /* the tile's max and sum joined to the row's (a row with nothing visible so far keeps
         * zeros instead of NaN) */
        const float mn = fmax(m, tmax);
        const float mb = (mn == -INFINITY) ? 0.0f : mn;
        const float alpha = exp2(m - mb);
        m = mn;
        float ls = 0.0f;
        for (int t = 0; t < n; t++) {
            s[t] = exp2(s[t] - mb);
            ls += s[t];
        }
        l = l * alpha + ls;
        for (int d = 0; d < DV; d++) {
            float a = op[d] * alpha;
            for (int t = 0; t < n; t++) a = MAD(s[t], LD(vp, (j0 + t) * vs.w + d), a);
            op[d] = a;
        }
    }
    const float inv = (l > 0.0f) ? 1.0f / l : 0.0f;
#ifdef HALF_IO
    for (int d = 0; d < DV; d++) vstore_half_rte(op[d] * inv, d, orow);
#else
    for (int d = 0; d < DV; d++) op[d] *= inv;
#endif
    if (write_stats) {
        const int si = ((b * H + h) * Nq + i) * 2;
        stats[si] = m;
        stats[si + 1] = l;
    }
}

/* Scores of every row, dense [B, H, Nq, Nk]: kind 1 the raw (soft-capped) score, kind 2 with
 * the mask added and -inf where a key is hidden, kind 3 the probability from the statistics
 * attn_ext_fwd wrote (0 at hidden keys and in rows with no visible key; NaN through a row
 * whose scores hold NaN or +inf, as attn_probs). global = (roundup(Nk), Nq, B*H). */
__kernel void attn_ext_scores(
    __global const IOT *Q, int4 qs,
    __global const IOT *K, int4 ks,
    __global const float *M, int4 ms,
    __global const float *lens,
    __global const float *stats,
    __global float *S,
    int H, int group, int Nq, int Nk, int D, int DV, float scale, float softcap, int flags,
    int base, int wl, int wr, int kind)
{
    const int j = get_global_id(0);
    const int i = get_global_id(1);
    const int bh = get_global_id(2);
    if (j >= Nk || i >= Nq) return;
    const int b = bh / H;
    const int h = bh - b * H;
    const __global IOT *qp = Q + qs.x + b * qs.y + h * qs.z + i * qs.w;
    const __global IOT *kr = K + ks.x + b * ks.y + (h / group) * ks.z + j * ks.w;
    const float sc = raw_score(qp, kr, D, scale, softcap, flags);
    int j0, j1;
    key_range(i, seq_keys(lens, b, Nk, flags), Nq, flags, base, wl, wr, &j0, &j1);
    const int seen = j >= j0 && j < j1;
    float out = sc;
    if (kind >= 2) {
        const float mk = masked(sc, M + ms.x + b * ms.y + h * ms.z + i * ms.w, j, flags);
        out = seen ? mk : -INFINITY;
        if (kind == 3) {
            const int si = ((b * H + h) * Nq + i) * 2;
            const float m2 = stats[si], l = stats[si + 1];
            float p = isnan(l) ? l : 0.0f;
            if (seen && l > 0.0f) p = exp2(mk * LOG2E_F - m2) / l;
            out = p;
        }
    }
    S[((size_t)bh * Nq + i) * Nk + j] = out;
}

/* Cache append: src's tokens [0, n) of every (batch, head) to dst's tokens [past, past + n).
 * global = (D, n, B*Hk). */
__kernel void attn_ext_append(__global const IOT *src, int4 ss, __global IOT *dst, int4 ds,
                              int Hk, int n, int D, int past)
{
    const int d = get_global_id(0);
    const int t = get_global_id(1);
    const int bh = get_global_id(2);
    if (d >= D || t >= n) return;
    const int b = bh / Hk;
    const int h = bh - b * Hk;
#ifdef HALF_IO
    vstore_half(vload_half(ss.x + b * ss.y + h * ss.z + t * ss.w + d, src),
                ds.x + b * ds.y + h * ds.z + (past + t) * ds.w + d, dst);
#else
    dst[ds.x + b * ds.y + h * ds.z + (past + t) * ds.w + d] =
        src[ss.x + b * ss.y + h * ss.z + t * ss.w + d];
#endif
}
