/*
 * Pagoda fused scaled-dot-product attention (flash style), OpenCL C 1.2.
 *
 *   O = softmax(Q K^T * scale + mask) V       per (batch b, head h)
 *
 * Every tensor is addressed as  base + t.x + b*t.y + h*t.z + token*t.w + d
 * where t is an int4 "stride descriptor" (element offset, batch stride,
 * head stride, token stride); the head-dim elements are contiguous.
 * Online softmax over key tiles: no Nq x Nk matrix ever reaches global
 * memory (except in attn_probs, which writes only the requested rows).
 *
 * Scores are kept in the log2 domain: s2 = (q.k)*scale*log2(e) + mask*log2(e),
 * p = EXP2(s2 - m2).  stats[] (optional) receives per row (m2, l) where m2 is
 * the final running max (log2 domain) and l = sum exp2(s2 - m2).
 *
 * mask_mode bits: 1 = causal (key j allowed iff j <= i + shift, shift = Nk - Nq: aligned
 *                     bottom-right; with bit 4 shift = 0: aligned top-left),
 *                 2 = additive mask tensor M (row i, column j at
 *                     M[m.x + b*m.y + h*m.z + i*m.w + j]; strides may be 0).
 * A row with no allowed key (or all -inf) produces zeros, never NaN.
 *
 * NaN and +inf propagate as in PyTorch's softmax(QK^T)V: the running max uses fmax (cheap, and
 * it skips NaN), but a NaN score still reaches EXP2 (NaN) and so l and the row's output; a +inf
 * score makes the max +inf and EXP2(inf - inf) NaN. A NaN in V reaches every row that reads
 * its key, even with weight 0 (0 * NaN = NaN), as PyTorch's math path does; under the causal
 * mask a row may or may not read a key it cannot see (the kernels share key ranges between the
 * rows of a work-item or group), so a NaN in V at such a key is unspecified for that row.
 *
 * Kernels:
 *   attn_fwd_rows    CPU variant, needs -DHEAD_DIM (multiple of 4), -DROWS, -DTK
 *   attn_fwd_tiled   GPU variant, needs -DHEAD_DIM (any), -DBK; local K/V tiles
 *   attn_fwd_generic any device, runtime D, -DTK; O is used as accumulator
 *   attn_probs       second pass writing probabilities, runtime D
 */

#define LOG2E_F 1.44269504088896341f
/* -DNATIVE_EXP uses native_exp2 (faster on some devices, accuracy is
 * implementation-defined; the harness validates it per device) */
/* -DUSE_FMA: host sets it when CL_DEVICE_SINGLE_FP_CONFIG has CL_FP_FMA
 * (mad() is often lowered to a separate mul + add) */
#ifdef USE_FMA
#define MAD(a, b, c) fma(a, b, c)
#else
#define MAD(a, b, c) mad(a, b, c)
#endif
#ifdef NATIVE_EXP
#define EXP2(x) native_exp2(x)
#else
#define EXP2(x) exp2(x)
#endif

#ifndef TK
#define TK 32
#endif
#ifndef ROWS
#define ROWS 4
#endif
#ifndef BK
#define BK 32
#endif

/* One key tile of the online softmax: given the tile's scores s[0..n) (log2 domain) and their
 * maximum, moves the running max *m and sum *l to include the tile, turns s into the tile's
 * unnormalised probabilities, and returns the factor the accumulated output must be scaled by.
 * A row with nothing visible yet (max -inf) keeps zeros instead of producing NaN. */
inline float online_softmax_step(float *s, int n, float tmax, float *m, float *l)
{
    const float mn = fmax(*m, tmax);
    const float mb = (mn == -INFINITY) ? 0.0f : mn;
    const float alpha = EXP2(*m - mb);
    *m = mn;
    float ls = 0.0f;
    for (int t = 0; t < n; t++) {
        const float pe = EXP2(s[t] - mb);
        s[t] = pe;
        ls += pe;
    }
    *l = *l * alpha + ls;
    return alpha;
}

/* -------------------------------------------------------------------------- */
/* CPU variant: one work-item owns ROWS consecutive query rows of one (b,h),   */
/* loops over all keys with float4 math, no barriers, no local memory.         */
/* -------------------------------------------------------------------------- */
#ifdef HEAD_DIM
#if (HEAD_DIM % 4) == 0
/* vector width along the head dimension: 16 when the host asks for it (-DVW16: the device
 * prefers 16-wide floats, AVX-512), else 8 when possible (fills AVX2), else 4 */
#if defined(VW16) && (HEAD_DIM % 16) == 0
#define VW 16
#define floatV float16
#define vloadV vload16
#define vstoreV vstore16
#define HSUM4(p) (((p).lo.lo + (p).lo.hi) + ((p).hi.lo + (p).hi.hi))
#elif (HEAD_DIM % 8) == 0
#define VW 8
#define floatV float8
#define vloadV vload8
#define vstoreV vstore8
#define HSUM4(p) ((p).lo + (p).hi)
#else
#define VW 4
#define floatV float4
#define vloadV vload4
#define vstoreV vstore4
#define HSUM4(p) (p)
#endif
#define HDV (HEAD_DIM / VW)
#if (TK % 4) != 0
#error "TK must be a multiple of 4"
#endif
/* horizontal sums of four float4 -> float4 (one lane per input) */
inline float4 hsum4x4(float4 a, float4 b, float4 c, float4 d)
{
    const float4 ab = (float4)(a.even, b.even) + (float4)(a.odd, b.odd);
    const float4 cd = (float4)(c.even, d.even) + (float4)(c.odd, d.odd);
    return (float4)(ab.even, cd.even) + (float4)(ab.odd, cd.odd);
}
__kernel void attn_fwd_rows(
    __global const float *Q, int4 qs,
    __global const float *K, int4 ks,
    __global const float *V, int4 vs,
    __global float *O, int4 os,
    __global const float *M, int4 ms,
    __global float *stats, int write_stats,
    int H, int Nq, int Nk, float scale, int mask_mode)
{
    const int g = get_global_id(0);
    const int h = get_global_id(1);
    const int b = get_global_id(2);
    const int i0 = g * ROWS;
    if (i0 >= Nq || h >= H) return;
    const float qscale = scale * LOG2E_F;
    const int shift = (mask_mode & 4) ? 0 : Nk - Nq;

    floatV qv[ROWS][HDV];
    floatV acc[ROWS][HDV];
    float m[ROWS], l[ROWS];
    int ir[ROWS];
    _Pragma("unroll") for (int r = 0; r < ROWS; r++) {
        ir[r] = min(i0 + r, Nq - 1);
        const __global float *qp = Q + qs.x + b * qs.y + h * qs.z + ir[r] * qs.w;
        for (int d = 0; d < HDV; d++) {
            qv[r][d] = vloadV(d, qp) * qscale;
            acc[r][d] = (floatV)(0.0f);
        }
        m[r] = -INFINITY;
        l[r] = 0.0f;
    }
    int jend = Nk;
    if (mask_mode & 1) jend = clamp(ir[ROWS - 1] + shift + 1, 0, Nk);

    const __global float *kp = K + ks.x + b * ks.y + h * ks.z;
    const __global float *vp = V + vs.x + b * vs.y + h * vs.z;
    const __global float *mp = M + ms.x + b * ms.y + h * ms.z;

    const int jl = jend - 1;  /* last key any row of this work-item needs */
    for (int j0 = 0; j0 < jend; j0 += TK) {
        const int n = min(TK, jend - j0);
        const int n4 = (n + 3) >> 2;
        /* scores of the tile, 4 keys per float4; lanes past the end are -inf */
        float4 s4[ROWS][TK / 4];
        float4 tmax4[ROWS];
        _Pragma("unroll") for (int r = 0; r < ROWS; r++) tmax4[r] = (float4)(-INFINITY);
        for (int t4 = 0; t4 < n4; t4++) {
            const int j = j0 + 4 * t4;
            const __global float *k0 = kp + min(j, jl) * ks.w;
            const __global float *k1 = kp + min(j + 1, jl) * ks.w;
            const __global float *k2 = kp + min(j + 2, jl) * ks.w;
            const __global float *k3 = kp + min(j + 3, jl) * ks.w;
            floatV p0[ROWS], p1[ROWS], p2[ROWS], p3[ROWS];
            _Pragma("unroll") for (int r = 0; r < ROWS; r++) p0[r] = p1[r] = p2[r] = p3[r] = (floatV)(0.0f);
            for (int d = 0; d < HDV; d++) {
                const floatV a0 = vloadV(d, k0), a1 = vloadV(d, k1), a2 = vloadV(d, k2), a3 = vloadV(d, k3);
                _Pragma("unroll") for (int r = 0; r < ROWS; r++) {
                    p0[r] = MAD(qv[r][d], a0, p0[r]);
                    p1[r] = MAD(qv[r][d], a1, p1[r]);
                    p2[r] = MAD(qv[r][d], a2, p2[r]);
                    p3[r] = MAD(qv[r][d], a3, p3[r]);
                }
            }
            const int4 jj = (int4)(j) + (int4)(0, 1, 2, 3);
            _Pragma("unroll") for (int r = 0; r < ROWS; r++) {
                float4 v = hsum4x4(HSUM4(p0[r]), HSUM4(p1[r]), HSUM4(p2[r]), HSUM4(p3[r]));
                if (mask_mode & 2) {
                    const __global float *mr = mp + ir[r] * ms.w;
                    v += (float4)(mr[min(j, jl)], mr[min(j + 1, jl)], mr[min(j + 2, jl)], mr[min(j + 3, jl)]) * LOG2E_F;
                }
                int lim = jl;
                if (mask_mode & 1) lim = min(lim, ir[r] + shift);
                v = select(v, (float4)(-INFINITY), jj > (int4)(lim));
                s4[r][t4] = v;
                tmax4[r] = fmax(tmax4[r], v);
            }
        }
        float alpha[ROWS];
        _Pragma("unroll") for (int r = 0; r < ROWS; r++) {
            const float tmax = fmax(fmax(tmax4[r].x, tmax4[r].y), fmax(tmax4[r].z, tmax4[r].w));
            const float mn = fmax(m[r], tmax);
            const float mb = (mn == -INFINITY) ? 0.0f : mn;  /* all masked so far */
            alpha[r] = EXP2(m[r] - mb);                       /* m=-inf -> 0 */
            m[r] = mn;
            float4 ls4 = (float4)(0.0f);
            for (int t4 = 0; t4 < n4; t4++) {
                const float4 pe = EXP2(s4[r][t4] - (float4)(mb));
                s4[r][t4] = pe;
                ls4 += pe;
            }
            l[r] = l[r] * alpha[r] + ((ls4.x + ls4.y) + (ls4.z + ls4.w));
        }
        /* P.V: one head-dim vector chunk at a time, keys inner (4 per step),
         * so the accumulators stay in registers for the whole tile */
        for (int d = 0; d < HDV; d++) {
            floatV a[ROWS];
            _Pragma("unroll") for (int r = 0; r < ROWS; r++) a[r] = acc[r][d] * alpha[r];
            for (int t4 = 0; t4 < n4; t4++) {
                const int j = j0 + 4 * t4;
                const floatV v0 = vloadV(d, vp + min(j, jl) * vs.w);
                const floatV v1 = vloadV(d, vp + min(j + 1, jl) * vs.w);
                const floatV v2 = vloadV(d, vp + min(j + 2, jl) * vs.w);
                const floatV v3 = vloadV(d, vp + min(j + 3, jl) * vs.w);
                _Pragma("unroll") for (int r = 0; r < ROWS; r++) {
                    const float4 p = s4[r][t4];
                    a[r] = MAD((floatV)(p.x), v0, a[r]);
                    a[r] = MAD((floatV)(p.y), v1, a[r]);
                    a[r] = MAD((floatV)(p.z), v2, a[r]);
                    a[r] = MAD((floatV)(p.w), v3, a[r]);
                }
            }
            _Pragma("unroll") for (int r = 0; r < ROWS; r++) acc[r][d] = a[r];
        }
    }
    _Pragma("unroll") for (int r = 0; r < ROWS; r++) {
        const int i = i0 + r;
        if (i >= Nq) break;
        const float inv = (l[r] > 0.0f) ? 1.0f / l[r] : 0.0f;
        __global float *op = O + os.x + b * os.y + h * os.z + i * os.w;
        for (int d = 0; d < HDV; d++) vstoreV(acc[r][d] * inv, d, op);
        if (write_stats) {
            const int si = ((b * H + h) * Nq + i) * 2;
            stats[si] = m[r];
            stats[si + 1] = l[r];
        }
    }
}
#endif /* HEAD_DIM % 4 */

/* -------------------------------------------------------------------------- */
/* CPU variant with K transposed (attn_k_transpose first): both phases are     */
/* register-tiled GEMMs with broadcast operands, no horizontal sums.          */
/*   QKᵀ: s[r][keys] += q[r][d] · Kᵀ[d][keys]   (KW keys a vector, TK a tile)  */
/*   P·V: acc[r][d..] += p[r][t] · V[t][d..]     (VW head-dim lanes a vector)  */
/* A work-item owns ROWS query rows of one (b, h). Needs -DHEAD_DIM (multiple  */
/* of VW), -DROWS, -DTK (multiple of KW), -DKW and -DVW (4, 8 or 16).          */
/* Kᵀ is [B·H][HEAD_DIM][nkp] (nkp a multiple of TK, zeros past Nk).          */
/* -------------------------------------------------------------------------- */
#if defined(KW) && defined(VW_PV)
#define KVEC_(n) float##n
#define KVEC(n) KVEC_(n)
#define KLOAD_(n) vload##n
#define KLOAD(n) KLOAD_(n)
#define KSTORE_(n) vstore##n
#define KSTORE(n) KSTORE_(n)
#define floatK KVEC(KW)
#define vloadK KLOAD(KW)
#define vstoreK KSTORE(KW)
#define floatP KVEC(VW_PV)
#define vloadP KLOAD(VW_PV)
#define vstoreP KSTORE(VW_PV)
#define NKV (TK / KW)
#define NPV (HEAD_DIM / VW_PV)
#if (TK % KW) != 0 || (HEAD_DIM % VW_PV) != 0
#error "TK must be a multiple of KW and HEAD_DIM of VW_PV"
#endif
#define RMAX8(w) fmax(fmax(fmax((w).s0, (w).s1), fmax((w).s2, (w).s3)), fmax(fmax((w).s4, (w).s5), fmax((w).s6, (w).s7)))
#define RSUM8(w) (dot((w).lo, (float4)(1.0f)) + dot((w).hi, (float4)(1.0f)))
#if KW == 16
#define KREDMAX(v) RMAX8(fmax((v).lo, (v).hi))
#define KREDSUM(v) RSUM8((v).lo + (v).hi)
#define KIOTA (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
#define intK int16
#elif KW == 8
#define KREDMAX(v) RMAX8(v)
#define KREDSUM(v) RSUM8(v)
#define KIOTA (int8)(0, 1, 2, 3, 4, 5, 6, 7)
#define intK int8
#elif KW == 4
#define KREDMAX(v) fmax(fmax((v).x, (v).y), fmax((v).z, (v).w))
#define KREDSUM(v) dot((v), (float4)(1.0f))
#define KIOTA (int4)(0, 1, 2, 3)
#define intK int4
#else
#error "KW must be 4, 8 or 16"
#endif

/* Kᵀ[(b·H + h)][d][j] = K[b, h, j, d] for j < Nk, 0 for Nk <= j < nkp (a multiple of 16).
 * A work-item moves a block of 16 keys: their rows read whole (contiguous), each head-dim
 * element's 16 keys written as one vector. global = (nkp / 16, B·H). */
__kernel void attn_k_transpose(__global const float *K, int4 ks, __global float *KT, int H,
                               int Nk, int nkp)
{
    const int j0 = get_global_id(0) * 16;
    const int bh = get_global_id(1);
    if (j0 >= nkp) return;
    const int b = bh / H, h = bh - (bh / H) * H;
    const __global float *kp = K + ks.x + b * ks.y + h * ks.z;
    float blk[16][HEAD_DIM];
    for (int t = 0; t < 16; t++) {
        const int j = j0 + t;
        if (j < Nk) {
            const __global float *row = kp + j * ks.w;
            for (int d = 0; d < HEAD_DIM; d += 4) vstore4(vload4(0, row + d), 0, &blk[t][d]);
        } else {
            for (int d = 0; d < HEAD_DIM; d++) blk[t][d] = 0.0f;
        }
    }
    __global float *out = KT + (size_t)bh * HEAD_DIM * nkp + j0;
    for (int d = 0; d < HEAD_DIM; d++) {
        float col[16];
        for (int t = 0; t < 16; t++) col[t] = blk[t][d];
        vstore16(vload16(0, col), 0, out + (size_t)d * nkp);
    }
}

/* QT query tiles a work-item (1 unless built with -DQT): with more, the keys go in blocks of
 * kb (a multiple of TK) and each block serves the QT tiles in turn, so that its K and V stay in
 * the core's cache; each tile's state (q, acc, m, l) waits in private memory between blocks.
 * Every row still takes its keys in the same tiles in the same order: the same result, bit for
 * bit, for every QT and kb. */
#ifndef QT
#define QT 1
#endif
__kernel void attn_fwd_kt(
    __global const float *Q, int4 qs,
    __global const float *KT, int nkp,
    __global const float *V, int4 vs,
    __global float *O, int4 os,
    __global const float *M, int4 ms,
    __global float *stats, int write_stats,
    int H, int Nq, int Nk, float scale, int mask_mode, int kb)
{
    const int g = get_global_id(0);
    const int h = get_global_id(1);
    const int b = get_global_id(2);
    const int ntiles = (Nq + ROWS - 1) / ROWS;
    const int t0 = g * QT;
    if (t0 >= ntiles || h >= H) return;
    const int nt = min(QT, ntiles - t0);
    const float qscale = scale * LOG2E_F;
    const int shift = (mask_mode & 4) ? 0 : Nk - Nq;

    float qsv[QT][ROWS][HEAD_DIM];
    floatP accsv[QT][ROWS][NPV];
    float msv[QT][ROWS], lsv[QT][ROWS];
    int jends[QT];
    int jmax = 0;
    for (int qt = 0; qt < nt; qt++) {
        const int i0 = (t0 + qt) * ROWS;
        _Pragma("unroll") for (int r = 0; r < ROWS; r++) {
            const int ir = min(i0 + r, Nq - 1);
            const __global float *qp = Q + qs.x + b * qs.y + h * qs.z + ir * qs.w;
            for (int d = 0; d < HEAD_DIM; d++) qsv[qt][r][d] = qp[d] * qscale;
            for (int c = 0; c < NPV; c++) accsv[qt][r][c] = (floatP)(0.0f);
            msv[qt][r] = -INFINITY;
            lsv[qt][r] = 0.0f;
        }
        int je = Nk;
        if (mask_mode & 1) je = clamp(min(i0 + ROWS - 1, Nq - 1) + shift + 1, 0, Nk);
        jends[qt] = je;
        jmax = max(jmax, je);
    }

    const __global float *kt = KT + (size_t)(b * H + h) * HEAD_DIM * nkp;
    const __global float *vp = V + vs.x + b * vs.y + h * vs.z;
    const __global float *mp = M + ms.x + b * ms.y + h * ms.z;
    float p[ROWS][TK];

    for (int kb0 = 0; kb0 < jmax; kb0 += kb) {
        for (int qt = 0; qt < nt; qt++) {
            const int jend = jends[qt];
            if (kb0 >= jend) continue;
            const int jl = jend - 1, jstop = min(kb0 + kb, jend);
            const int i0 = (t0 + qt) * ROWS;
            int ir[ROWS];
            float m[ROWS], l[ROWS];
            floatP acc[ROWS][NPV];
            float (*q)[HEAD_DIM] = qsv[qt];
            _Pragma("unroll") for (int r = 0; r < ROWS; r++) {
                ir[r] = min(i0 + r, Nq - 1);
                m[r] = msv[qt][r];
                l[r] = lsv[qt][r];
                _Pragma("unroll") for (int c = 0; c < NPV; c++) acc[r][c] = accsv[qt][r][c];
            }
            for (int j0 = kb0; j0 < jstop; j0 += TK) {
                const int n = min(TK, jend - j0);
                floatK s[ROWS][NKV];
                _Pragma("unroll") for (int r = 0; r < ROWS; r++)
                    _Pragma("unroll") for (int t = 0; t < NKV; t++) s[r][t] = (floatK)(0.0f);
                /* QKᵀ: one row of Kᵀ (TK keys of one head-dim element) a step */
                if (n == TK) {
                    const __global float *kr = kt + j0;
                    for (int d = 0; d < HEAD_DIM; d++, kr += nkp) {
                        floatK kv[NKV];
                        _Pragma("unroll") for (int t = 0; t < NKV; t++) kv[t] = vloadK(t, kr);
                        _Pragma("unroll") for (int r = 0; r < ROWS; r++) {
                            const floatK qb = (floatK)(q[r][d]);
                            _Pragma("unroll") for (int t = 0; t < NKV; t++)
                                s[r][t] = MAD(qb, kv[t], s[r][t]);
                        }
                    }
                } else {
                    /* the last, partial tile: only the key vectors that hold keys (ViT-B/16's
                     * 197 keys fill 13 of the 16 vectors of four 64-key tiles), the same sums in
                     * the same order; the vectors left out stay 0 and are masked below */
                    for (int t = 0; t * KW < n; t++) {
                        floatK st[ROWS];
                        _Pragma("unroll") for (int r = 0; r < ROWS; r++) st[r] = (floatK)(0.0f);
                        const __global float *kr = kt + j0 + t * KW;
                        for (int d = 0; d < HEAD_DIM; d++, kr += nkp) {
                            const floatK kv = vloadK(0, kr);
                            _Pragma("unroll") for (int r = 0; r < ROWS; r++)
                                st[r] = MAD((floatK)(q[r][d]), kv, st[r]);
                        }
                        _Pragma("unroll") for (int u = 0; u < NKV; u++) {
                            if (u == t) {
                                _Pragma("unroll") for (int r = 0; r < ROWS; r++) s[r][u] = st[r];
                            }
                        }
                    }
                }
                float alpha[ROWS];
                _Pragma("unroll") for (int r = 0; r < ROWS; r++) {
                    int lim = jl;
                    if (mask_mode & 1) lim = min(lim, ir[r] + shift);
                    const __global float *mr = mp + ir[r] * ms.w;
                    floatK vmax = (floatK)(-INFINITY);
                    _Pragma("unroll") for (int t = 0; t < NKV; t++) {
                        const int j = j0 + t * KW;
                        floatK v = s[r][t];
                        if (mask_mode & 2) {
                            if (j + KW <= jend) {
                                v += vloadK(0, mr + j) * LOG2E_F;
                            } else {
                                float mk[KW];
                                for (int e = 0; e < KW; e++) mk[e] = mr[min(j + e, jl)];
                                v += vloadK(0, mk) * LOG2E_F;
                            }
                        }
                        v = select(v, (floatK)(-INFINITY), ((intK)(j) + KIOTA) > (intK)(lim));
                        s[r][t] = v;
                        vmax = fmax(vmax, v);
                    }
                    const float mn = fmax(m[r], KREDMAX(vmax));
                    const float mb = (mn == -INFINITY) ? 0.0f : mn; /* all masked so far */
                    alpha[r] = EXP2(m[r] - mb);                      /* m = -inf -> 0 */
                    m[r] = mn;
                    floatK ls = (floatK)(0.0f);
                    _Pragma("unroll") for (int t = 0; t < NKV; t++) {
                        const floatK pe = EXP2(s[r][t] - (floatK)(mb));
                        ls += pe;
                        vstoreK(pe, t, p[r]);
                    }
                    l[r] = l[r] * alpha[r] + KREDSUM(ls);
                }
                /* P·V: all of a row's accumulators in registers, one key a step */
                _Pragma("unroll") for (int r = 0; r < ROWS; r++)
                    _Pragma("unroll") for (int c = 0; c < NPV; c++) acc[r][c] *= alpha[r];
                const __global float *vr = vp + j0 * vs.w;
                for (int t = 0; t < n; t++, vr += vs.w) {
                    floatP vv[NPV];
                    _Pragma("unroll") for (int c = 0; c < NPV; c++) vv[c] = vloadP(c, vr);
                    _Pragma("unroll") for (int r = 0; r < ROWS; r++) {
                        const floatP pb = (floatP)(p[r][t]);
                        _Pragma("unroll") for (int c = 0; c < NPV; c++)
                            acc[r][c] = MAD(pb, vv[c], acc[r][c]);
                    }
                }
            }
            _Pragma("unroll") for (int r = 0; r < ROWS; r++) {
                msv[qt][r] = m[r];
                lsv[qt][r] = l[r];
                _Pragma("unroll") for (int c = 0; c < NPV; c++) accsv[qt][r][c] = acc[r][c];
            }
        }
    }
    for (int qt = 0; qt < nt; qt++) {
        const int i0 = (t0 + qt) * ROWS;
        _Pragma("unroll") for (int r = 0; r < ROWS; r++) {
            const int i = i0 + r;
            if (i >= Nq) break;
            const float lr = lsv[qt][r];
            const float inv = (lr > 0.0f) ? 1.0f / lr : 0.0f;
            __global float *op = O + os.x + b * os.y + h * os.z + i * os.w;
            for (int c = 0; c < NPV; c++) vstoreP(accsv[qt][r][c] * inv, c, op);
            if (write_stats) {
                const int si = ((b * H + h) * Nq + i) * 2;
                stats[si] = msv[qt][r];
                stats[si + 1] = lr;
            }
        }
    }
}
#endif /* KW */

/* -------------------------------------------------------------------------- */
/* GPU variant: a work-group of get_local_size(0) query rows (one per          */
/* work-item) shares K and V tiles of BK keys in local memory.                 */
/* Local memory used: 2*BK*HEAD_DIM*4 bytes.                                   */
/* -------------------------------------------------------------------------- */
__kernel void attn_fwd_tiled(
    __global const float *Q, int4 qs,
    __global const float *K, int4 ks,
    __global const float *V, int4 vs,
    __global float *O, int4 os,
    __global const float *M, int4 ms,
    __global float *stats, int write_stats,
    int H, int Nq, int Nk, float scale, int mask_mode)
{
    __local float Kt[BK * HEAD_DIM];
    __local float Vt[BK * HEAD_DIM];
    const int lid = get_local_id(0);
    const int lsz = get_local_size(0);
    const int i = get_global_id(0);
    const int h = get_global_id(1);
    const int b = get_global_id(2);
    const int ii = min(i, Nq - 1);
    const int shift = (mask_mode & 4) ? 0 : Nk - Nq;
    const float qscale = scale * LOG2E_F;

    /* key range needed by the whole group (uniform across the group); the group's first row
     * from the global id, which counts a chunked launch's global offset (get_group_id does not) */
    const int ilast = min(i - (int)get_local_id(0) + lsz - 1, Nq - 1);
    int jend = Nk;
    if (mask_mode & 1) jend = clamp(ilast + shift + 1, 0, Nk);

    float q[HEAD_DIM], acc[HEAD_DIM];
    const __global float *qp = Q + qs.x + b * qs.y + h * qs.z + ii * qs.w;
    for (int d = 0; d < HEAD_DIM; d++) {
        q[d] = qp[d] * qscale;
        acc[d] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    const __global float *kp = K + ks.x + b * ks.y + h * ks.z;
    const __global float *vp = V + vs.x + b * vs.y + h * vs.z;
    const __global float *mp = M + ms.x + b * ms.y + h * ms.z + ii * ms.w;

    for (int j0 = 0; j0 < jend; j0 += BK) {
        const int n = min(BK, jend - j0);
        for (int e = lid; e < n * HEAD_DIM; e += lsz) {
            const int t = e / HEAD_DIM;
            const int d = e - t * HEAD_DIM;
            Kt[e] = kp[(j0 + t) * ks.w + d];
            Vt[e] = vp[(j0 + t) * vs.w + d];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        float s[BK];
        float tmax = -INFINITY;
        for (int t = 0; t < n; t++) {
            float sc = 0.0f;
            for (int d = 0; d < HEAD_DIM; d++) sc = MAD(q[d], Kt[t * HEAD_DIM + d], sc);
            const int j = j0 + t;
            if (mask_mode & 2) sc += mp[j] * LOG2E_F;
            if ((mask_mode & 1) && j > ii + shift) sc = -INFINITY;
            s[t] = sc;
            tmax = fmax(tmax, sc);
        }
        const float alpha = online_softmax_step(s, n, tmax, &m, &l);
        for (int d = 0; d < HEAD_DIM; d++) {
            float a = acc[d] * alpha;
            for (int t = 0; t < n; t++) a = MAD(s[t], Vt[t * HEAD_DIM + d], a);
            acc[d] = a;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (i < Nq && h < H) {
        const float inv = (l > 0.0f) ? 1.0f / l : 0.0f;
        __global float *op = O + os.x + b * os.y + h * os.z + i * os.w;
        for (int d = 0; d < HEAD_DIM; d++) op[d] = acc[d] * inv;
        if (write_stats) {
            const int si = ((b * H + h) * Nq + i) * 2;
            stats[si] = m;
            stats[si + 1] = l;
        }
    }
}
#endif /* HEAD_DIM */

/* -------------------------------------------------------------------------- */
/* Generic path: runtime head dimension D.  One work-item per query row.      */
/* The output row itself is the (rescaled) accumulator, so no private array   */
/* depends on D.  O must not alias Q/K/V.                                      */
/* -------------------------------------------------------------------------- */
__kernel void attn_fwd_generic(
    __global const float *Q, int4 qs,
    __global const float *K, int4 ks,
    __global const float *V, int4 vs,
    __global float *O, int4 os,
    __global const float *M, int4 ms,
    __global float *stats, int write_stats,
    int H, int Nq, int Nk, float scale, int mask_mode, int D)
{
    const int i = get_global_id(0);
    const int h = get_global_id(1);
    const int b = get_global_id(2);
    if (i >= Nq || h >= H) return;
    const int shift = (mask_mode & 4) ? 0 : Nk - Nq;
    const float qscale = scale * LOG2E_F;
    const __global float *qp = Q + qs.x + b * qs.y + h * qs.z + i * qs.w;
    const __global float *kp = K + ks.x + b * ks.y + h * ks.z;
    const __global float *vp = V + vs.x + b * vs.y + h * vs.z;
    const __global float *mp = M + ms.x + b * ms.y + h * ms.z + i * ms.w;
    __global float *op = O + os.x + b * os.y + h * os.z + i * os.w;
    for (int d = 0; d < D; d++) op[d] = 0.0f;

    int jend = Nk;
    if (mask_mode & 1) jend = clamp(i + shift + 1, 0, Nk);
    float m = -INFINITY, l = 0.0f;
    for (int j0 = 0; j0 < jend; j0 += TK) {
        const int n = min(TK, jend - j0);
        float s[TK];
        float tmax = -INFINITY;
        for (int t = 0; t < n; t++) {
            const __global float *kr = kp + (j0 + t) * ks.w;
            float sc = 0.0f;
            for (int d = 0; d < D; d++) sc = MAD(qp[d], kr[d], sc);
            sc *= qscale;
            if (mask_mode & 2) sc += mp[j0 + t] * LOG2E_F;
            s[t] = sc;
            tmax = fmax(tmax, sc);
        }
        const float alpha = online_softmax_step(s, n, tmax, &m, &l);
        for (int d = 0; d < D; d++) {
            float a = op[d] * alpha;
            for (int t = 0; t < n; t++) a = MAD(s[t], vp[(j0 + t) * vs.w + d], a);
            op[d] = a;
        }
    }
    const float inv = (l > 0.0f) ? 1.0f / l : 0.0f;
    for (int d = 0; d < D; d++) op[d] *= inv;
    if (write_stats) {
        const int si = ((b * H + h) * Nq + i) * 2;
        stats[si] = m;
        stats[si + 1] = l;
    }
}

/* -------------------------------------------------------------------------- */
/* Probabilities for selected heads and query rows, second pass.              */
/* Uses (m2, l) saved by a forward kernel run with write_stats=1.             */
/* P layout: [B, Hsel, q1-q0, Nk] dense, Hsel = (head_sel < 0 ? H : 1).        */
/* global = (roundup(Nk, lx), q1-q0, B*Hsel)                                   */
/* -------------------------------------------------------------------------- */
__kernel void attn_probs(
    __global const float *Q, int4 qs,
    __global const float *K, int4 ks,
    __global const float *M, int4 ms,
    __global const float *stats,
    __global float *P,
    int H, int Nq, int Nk, float scale, int mask_mode, int D,
    int head_sel, int q0, int q1)
{
    const int j = get_global_id(0);
    const int r = get_global_id(1);
    const int bh = get_global_id(2);
    const int nr = q1 - q0;
    if (j >= Nk || r >= nr) return;
    const int hsel = (head_sel < 0) ? H : 1;
    const int b = bh / hsel;
    const int hs = bh - b * hsel;
    const int h = (head_sel < 0) ? hs : head_sel;
    const int i = q0 + r;
    const int si = ((b * H + h) * Nq + i) * 2;
    const float m2 = stats[si];
    const float l = stats[si + 1];
    /* l NaN: the row's scores hold NaN or +inf; all its probabilities are NaN, hidden keys
     * included, as PyTorch's softmax of the row gives. */
    float p = isnan(l) ? l : 0.0f;
    const int allowed = !((mask_mode & 1) && j > i + ((mask_mode & 4) ? 0 : Nk - Nq));
    if (allowed && l > 0.0f) {
        const __global float *qp = Q + qs.x + b * qs.y + h * qs.z + i * qs.w;
        const __global float *kr = K + ks.x + b * ks.y + h * ks.z + j * ks.w;
        float sc = 0.0f;
        for (int d = 0; d < D; d++) sc = MAD(qp[d], kr[d], sc);
        sc *= scale * LOG2E_F;
        if (mask_mode & 2) sc += M[ms.x + b * ms.y + h * ms.z + i * ms.w + j] * LOG2E_F;
        p = EXP2(sc - m2) / l;
    }
    P[((size_t)(b * hsel + hs) * nr + r) * Nk + j] = p;
}
