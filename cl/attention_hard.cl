/* attention_hard.cl — hard attention: each query row attends to a subset of its keys.
 *
 *   mode 1 (top-k):  softmax over the k highest scores of the row only, the others get weight
 *                    0; ties at the k-th score go to the lower key index. k >= the number of
 *                    visible keys is soft attention.
 *   mode 2 (sample): one key j drawn from the row's softmax distribution with a counter-based
 *                    generator (seed, row), O = V[j] (Xu et al. 2015's stochastic hard
 *                    attention at inference).
 *
 * Views, masks and the causal rule are those of attention.cl (mask_mode bit 1 causal, bit 2
 * additive mask M). A row with no visible key gives zeros; a NaN or +inf score makes its row
 * NaN (probabilities too), as softmax does. A NaN in V reaches only the rows that keep its key.
 *
 * Probabilities go to P for rows [pq0, pq1) (pq0 == pq1: none; P is then bound to O and never
 * written) of one head or all (probs_head -1), densely as attn_probs writes them.
 *
 * One work-item per query row; its scores live in the scratch buffer S, one row of Nk floats
 * per work-item of the launch: (bl, hl, i - i0) with b = b0 + bl, h = h0 + hl. Selection is
 * exact: the k-th largest score is found by a bitwise search over order-preserving integer
 * keys (32 counting passes over the row), so no sort and no private array that depends on Nk.
 */

/* Maps a float to a uint whose unsigned order is the float order (-inf smallest); -0 and +0
 * map to one key, as they compare equal. */
inline uint order_key(float s)
{
    const uint u = s == 0.0f ? 0u : as_uint(s);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* A 64-bit mixing function (multiply-xorshift rounds); bijective, so distinct counters under one
 * seed never collide before the final truncation. */
inline ulong mix64(ulong z)
{
    z = (z ^ (z >> 31)) * 0x7fb5d329728ea185UL;
    z = (z ^ (z >> 27)) * 0x81dadef4bc2dd44dUL;
    return z ^ (z >> 33);
}

/* Uniform float in [0, 1) for a row: 24 random bits, exact in float, the same on every device
 * and in the host reference (pgd_attention_uniform). */
inline float row_uniform(ulong seed, ulong counter)
{
    const ulong x = mix64(mix64(seed ^ 0x9e3779b97f4a7c15UL) + counter);
    return (float)(uint)(x >> 40) * (1.0f / 16777216.0f);
}

__kernel void attn_hard(
    __global const float *Q, int4 qs,
    __global const float *K, int4 ks,
    __global const float *V, int4 vs,
    __global float *O, int4 os,
    __global const float *M, int4 ms,
    __global float *S, __global float *P,
    int H, int Nq, int Nk, float scale, int mask_mode, int D,
    int mode, int topk, ulong seed,
    int b0, int h0, int i0, int i1, int hc,
    int probs_head, int pq0, int pq1)
{
    const int i = get_global_id(0);
    const int hl = get_global_id(1);
    const int bl = get_global_id(2);
    const int h = h0 + hl;
    const int b = b0 + bl;
    if (i >= i1 || h >= H) return;
    const int shift = (mask_mode & 4) ? 0 : Nk - Nq;
    const __global float *qp = Q + qs.x + b * qs.y + h * qs.z + i * qs.w;
    const __global float *kp = K + ks.x + b * ks.y + h * ks.z;
    const __global float *vp = V + vs.x + b * vs.y + h * vs.z;
    const __global float *mp = M + ms.x + b * ms.y + h * ms.z + i * ms.w;
    __global float *op = O + os.x + b * os.y + h * os.z + i * os.w;
    __global float *sp = S + ((size_t)(bl * hc + hl) * (size_t)(i1 - i0) + (size_t)(i - i0)) *
                             (size_t)Nk;

    int jend = Nk;
    if (mask_mode & 1) jend = clamp(i + shift + 1, 0, Nk);
    int nvalid = 0, bad = 0;
    float mx = -INFINITY;
    for (int j = 0; j < Nk; j++) {
        float sc = -INFINITY;
        if (j < jend) {
            const __global float *kr = kp + j * ks.w;
            float acc = 0.0f;
            for (int d = 0; d < D; d++) acc = fma(qp[d], kr[d], acc);
            sc = acc * scale;
            if (mask_mode & 2) sc += mp[j];
        }
        sp[j] = sc;
        bad |= isnan(sc) || sc == INFINITY;
        nvalid += sc > -INFINITY;
        mx = fmax(mx, sc);
    }

    /* Which keys are kept: key > T, plus the first `need` keys equal to T. */
    uint T = order_key(-INFINITY);
    int need = 0;
    if (mode == 1 && topk < nvalid && !bad) {
        /* The largest T with at least topk keys >= T is the k-th largest key. */
        T = 0;
        for (int bit = 31; bit >= 0; bit--) {
            const uint cand = T | (1u << bit);
            int c = 0;
            for (int j = 0; j < Nk; j++) c += order_key(sp[j]) >= cand;
            if (c >= topk) T = cand;
        }
        int gt = 0;
        for (int j = 0; j < Nk; j++) gt += order_key(sp[j]) > T;
        need = topk - gt;
    }

    float sum = 0.0f;
    int pick = -1;
    if (!bad && nvalid > 0) {
        int eq = 0;
        for (int j = 0; j < Nk; j++) {
            const uint kj = order_key(sp[j]);
            int keep = kj > T;
            if (!keep && kj == T && eq < need) {
                keep = 1;
                eq++;
            }
            const float e = keep ? exp(sp[j] - mx) : 0.0f;
            sp[j] = e;
            sum += e;
        }
        if (mode == 2) {
            const float target = row_uniform(seed, ((ulong)b * (ulong)H + (ulong)h) *
                                                       (ulong)Nq + (ulong)i) * sum;
            float cum = 0.0f;
            for (int j = 0; j < Nk && pick < 0; j++) {
                if (sp[j] > 0.0f) {
                    cum += sp[j];
                    if (cum > target) pick = j;
                }
            }
            /* Rounding can leave the target at the very top: the last key with weight. */
            for (int j = Nk - 1; j >= 0 && pick < 0; j--)
                if (sp[j] > 0.0f) pick = j;
        }
    }

    /* The output row, and its probabilities when they are asked for. */
    for (int d = 0; d < D; d++) {
        float acc = 0.0f;
        if (bad)
            acc = NAN;
        else if (mode == 2 && pick >= 0)
            acc = vp[pick * vs.w + d];
        else if (nvalid > 0) {
            for (int j = 0; j < Nk; j++)
                if (sp[j] > 0.0f) acc = fma(sp[j], vp[j * vs.w + d], acc);
            acc /= sum;
        }
        op[d] = acc;
    }
    if (i >= pq0 && i < pq1 && (probs_head < 0 || probs_head == h)) {
        const int hsel = probs_head < 0 ? H : 1, hs = probs_head < 0 ? h : 0;
        __global float *pp = P + (((size_t)b * hsel + hs) * (size_t)(pq1 - pq0) + (size_t)(i - pq0)) *
                                     (size_t)Nk;
        for (int j = 0; j < Nk; j++) {
            float p = 0.0f;
            if (bad)
                p = NAN;
            else if (mode == 2)
                p = j == pick ? 1.0f : 0.0f;
            else if (nvalid > 0)
                p = sp[j] / sum;
            pp[j] = p;
        }
    }
}
