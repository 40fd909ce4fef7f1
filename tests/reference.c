/* reference.c — double-precision references for the kernels (see reference.h). Written for
 * clarity, not speed: straightforward loops, two-pass statistics in double. */
#include <math.h>
#include <stdlib.h>

#include "reference.h"

void pgd_ref_layernorm(const float *x, const float *w, const float *b, size_t rows, size_t cols,
                       double eps, double *y)
{
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        double mean = 0.0, var = 0.0;
        for (size_t c = 0; c < cols; c++)
            mean += xr[c];
        mean /= (double)cols;
        for (size_t c = 0; c < cols; c++)
            var += ((double)xr[c] - mean) * ((double)xr[c] - mean);
        var /= (double)cols;
        double rstd = 1.0 / sqrt(var + eps);
        for (size_t c = 0; c < cols; c++) {
            double v = ((double)xr[c] - mean) * rstd;
            y[r * cols + c] = w ? v * w[c] + b[c] : v;
        }
    }
}

void pgd_ref_gelu_erf(const float *x, size_t n, double *y)
{
    for (size_t i = 0; i < n; i++) {
        double v = x[i];
        y[i] = 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
    }
}

void pgd_ref_gelu_tanh(const float *x, size_t n, double *y)
{
    const double k = sqrt(2.0 / 3.14159265358979323846);
    for (size_t i = 0; i < n; i++) {
        double v = x[i];
        y[i] = 0.5 * v * (1.0 + tanh(k * (v + 0.044715 * v * v * v)));
    }
}

void pgd_ref_relu(const float *x, size_t n, double *y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] > 0.0f ? x[i] : 0.0;
}

void pgd_ref_softmax(const float *x, size_t rows, size_t cols, double scale, double *y)
{
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        double m = -INFINITY, s = 0.0;
        for (size_t c = 0; c < cols; c++)
            m = fmax(m, scale * xr[c]);
        for (size_t c = 0; c < cols; c++)
            s += exp(scale * xr[c] - m);
        for (size_t c = 0; c < cols; c++)
            y[r * cols + c] = exp(scale * xr[c] - m) / s;
    }
}

void pgd_ref_bias_add(const float *x, const float *bias, size_t rows, size_t cols, double *y)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            y[r * cols + c] = (double)x[r * cols + c] + bias[c];
}

void pgd_ref_patch_embed(const float *img, size_t B, size_t C, size_t H, size_t W,
                         const float *weight, size_t D, size_t P, const float *bias,
                         const float *cls, const float *dist, const float *pos, double *out)
{
    size_t gh = H / P, gw = W / P, extra = (cls ? 1 : 0) + (dist ? 1 : 0), T = extra + gh * gw;
    for (size_t b = 0; b < B; b++) {
        for (size_t t = 0; t < T; t++) {
            for (size_t d = 0; d < D; d++) {
                double v;
                if (t < extra) {
                    v = t == 0 ? cls[d] : dist[d];
                } else {
                    size_t p = t - extra, py = p / gw, px = p % gw;
                    v = bias ? bias[d] : 0.0;
                    for (size_t c = 0; c < C; c++)
                        for (size_t ky = 0; ky < P; ky++)
                            for (size_t kx = 0; kx < P; kx++)
                                v += (double)weight[((d * C + c) * P + ky) * P + kx] *
                                     img[((b * C + c) * H + py * P + ky) * W + px * P + kx];
                }
                if (pos)
                    v += pos[t * D + d];
                out[(b * T + t) * D + d] = v;
            }
        }
    }
}

/* Keys' cubic convolution kernel with A = -0.75 at distance |s|. */
static double cubic(double s)
{
    const double A = -0.75;
    s = fabs(s);
    if (s <= 1.0)
        return ((A + 2.0) * s - (A + 3.0)) * s * s + 1.0;
    if (s < 2.0)
        return ((A * s - 5.0 * A) * s + 8.0 * A) * s - 4.0 * A;
    return 0.0;
}

static size_t clampi(long i, size_t n)
{
    return i < 0 ? 0 : (size_t)i >= n ? n - 1 : (size_t)i;
}

void pgd_ref_pos_resize(const float *pos, size_t extra, size_t gh, size_t gw, size_t gh2,
                        size_t gw2, size_t D, double *out)
{
    for (size_t i = 0; i < extra * D; i++)
        out[i] = pos[i];
    const float *grid = pos + extra * D;
    double sy = (double)gh / (double)gh2, sx = (double)gw / (double)gw2;
    for (size_t oy = 0; oy < gh2; oy++) {
        double ry = (oy + 0.5) * sy - 0.5;
        long y0 = (long)floor(ry);
        double fy = ry - (double)y0;
        for (size_t ox = 0; ox < gw2; ox++) {
            double rx = (ox + 0.5) * sx - 0.5;
            long x0 = (long)floor(rx);
            double fx = rx - (double)x0;
            for (size_t d = 0; d < D; d++) {
                double acc = 0.0;
                for (long a = -1; a <= 2; a++) {
                    size_t yy = clampi(y0 + a, gh);
                    for (long c = -1; c <= 2; c++) {
                        size_t xx = clampi(x0 + c, gw);
                        acc += cubic((double)a - fy) * cubic((double)c - fx) *
                               grid[(yy * gw + xx) * D + d];
                    }
                }
                out[(extra + oy * gw2 + ox) * D + d] = acc;
            }
        }
    }
}
