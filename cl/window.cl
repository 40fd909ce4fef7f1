/* window.cl — Swin's data movement, one work-item per element of the output:
 *
 *   window_partition  x [B, H, W, C] -> windows [B·nW, w·w, C]: the map zero-padded to
 *                     Hp x Wp (multiples of w) and rolled by (-sh, -sw) (torch.roll's cyclic
 *                     shift) over a period Rh x Rw — Hp x Wp when the padding is rolled too
 *                     (torchvision, Hugging Face), H x W when the map is rolled before it is
 *                     padded (timm) — cut into w x w windows, row-major windows of row-major
 *                     tokens.
 *   window_merge_add  the inverse, added: y [B, H, W, C] += the window token that came from it.
 *   patch_merge       x [B, H, W, C] -> [B, ceil(H/2), ceil(W/2), 4C], the four pixels of each
 *                     2 x 2 cell concatenated as (0,0), (1,0), (0,1), (1,1) (row, column),
 *                     zeros past an odd edge.
 *
 * Sizes come as ints; the host checks that every index fits. */

__kernel void window_partition(__global const float *x, __global float *out, int B, int H, int W,
                               int C, int w, int Hp, int Wp, int sh, int sw, int Rh, int Rw)
{
    const size_t e = get_global_id(0);
    const int nWw = Wp / w, N = w * w;
    const size_t total = (size_t)B * (size_t)(Hp / w) * (size_t)nWw * (size_t)N * (size_t)C;
    if (e >= total) return;
    const int ch = (int)(e % (size_t)C);
    size_t r = e / (size_t)C;
    const int tok = (int)(r % (size_t)N);
    r /= (size_t)N;
    const int nW = (Hp / w) * nWw;
    const int win = (int)(r % (size_t)nW);
    const int b = (int)(r / (size_t)nW);
    const int p = (win / nWw) * w + tok / w, q = (win % nWw) * w + tok % w;
    const int i = p < Rh ? (p + sh) % Rh : H, j = q < Rw ? (q + sw) % Rw : W;
    out[e] = (i < H && j < W) ? x[(((size_t)b * H + i) * W + j) * C + ch] : 0.0f;
}

__kernel void window_merge_add(__global const float *win, __global float *y, int B, int H, int W,
                               int C, int w, int Hp, int Wp, int sh, int sw, int Rh, int Rw)
{
    const size_t e = get_global_id(0);
    const size_t total = (size_t)B * (size_t)H * (size_t)W * (size_t)C;
    if (e >= total) return;
    const int ch = (int)(e % (size_t)C);
    size_t r = e / (size_t)C;
    const int j = (int)(r % (size_t)W);
    r /= (size_t)W;
    const int i = (int)(r % (size_t)H);
    const int b = (int)(r / (size_t)H);
    const int p = (i - sh + Rh) % Rh, q = (j - sw + Rw) % Rw;
    const int nWw = Wp / w, N = w * w, nW = (Hp / w) * nWw;
    const int widx = (p / w) * nWw + q / w, tok = (p % w) * w + q % w;
    y[e] += win[(((size_t)b * nW + widx) * N + tok) * C + ch];
}

__kernel void patch_merge(__global const float *x, __global float *out, int B, int H, int W,
                          int C)
{
    const size_t e = get_global_id(0);
    const int Ho = (H + 1) / 2, Wo = (W + 1) / 2;
    const size_t total = (size_t)B * (size_t)Ho * (size_t)Wo * (size_t)(4 * C);
    if (e >= total) return;
    const int c4 = (int)(e % (size_t)(4 * C));
    size_t r = e / (size_t)(4 * C);
    const int jo = (int)(r % (size_t)Wo);
    r /= (size_t)Wo;
    const int io = (int)(r % (size_t)Ho);
    const int b = (int)(r / (size_t)Ho);
    const int k = c4 / C, ch = c4 % C;
    const int i = 2 * io + (k & 1), j = 2 * jo + (k >> 1);
    out[e] = (i < H && j < W) ? x[(((size_t)b * H + i) * W + j) * C + ch] : 0.0f;
}
