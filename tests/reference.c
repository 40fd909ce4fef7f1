/* reference.c — double-precision references for the kernels (see reference.h). Written for
 * clarity, not speed: straightforward loops, two-pass statistics in double. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pagoda.h"
#include "pagoda_util.h"
#include "reference.h"

/* PyTorch's NaN rules, which every reference follows: ReLU keeps NaN, and a NaN among the
 * operands of a max wins (fmax and `v > m ? v : m` would both drop it). GELU(-inf) is its limit
 * 0, not -inf · 0 = NaN (PyTorch's CPU paths disagree on it; its pending fix returns 0). */
static double relu_nan(double v)
{
    return v < 0.0 ? 0.0 : v;
}

static double max_nan(double a, double b)
{
    return (a > b || isnan(a)) ? a : b;
}

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
        y[i] = v == -INFINITY ? 0.0 : 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
    }
}

void pgd_ref_gelu_tanh(const float *x, size_t n, double *y)
{
    const double k = sqrt(2.0 / 3.14159265358979323846);
    for (size_t i = 0; i < n; i++) {
        double v = x[i];
        y[i] = v == -INFINITY ? 0.0 : 0.5 * v * (1.0 + tanh(k * (v + 0.044715 * v * v * v)));
    }
}

void pgd_ref_relu(const float *x, size_t n, double *y)
{
    for (size_t i = 0; i < n; i++)
        y[i] = relu_nan(x[i]);
}

void pgd_ref_softmax(const float *x, size_t rows, size_t cols, double scale, double *y)
{
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        double m = -INFINITY, s = 0.0;
        for (size_t c = 0; c < cols; c++)
            m = max_nan(m, scale * xr[c]);
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

/* Keys' cubic convolution kernel with parameter A at distance |s|. */
static double cubic(double s, double A)
{
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

void pgd_ref_resize_weights(size_t in, size_t out, int mode, double *w)
{
    for (size_t i = 0; i < in * out; i++)
        w[i] = 0.0;
    if (mode == PGD_RESIZE_BICUBIC_ANTIALIAS) {
        /* Taps x with |x + 1/2 - c| < support around c = (o + 1/2)·s, A = -0.5 at distance
         * (x + 1/2 - c)/max(s, 1), normalised over the taps inside the grid. */
        double s = (double)in / (double)out, r = s >= 1.0 ? s : 1.0, support = 2.0 * r;
        for (size_t o = 0; o < out; o++) {
            double c = ((double)o + 0.5) * s, total = 0.0;
            double *row = w + o * in;
            for (size_t x = 0; x < in; x++) {
                double dx = ((double)x + 0.5 - c) / r;
                if (fabs((double)x + 0.5 - c) < support) /* the taps PyTorch visits */
                    row[x] = cubic(dx, -0.5);
                total += row[x];
            }
            if (total != 0.0)
                for (size_t x = 0; x < in; x++)
                    row[x] /= total;
        }
        return;
    }
    double s;
    if (mode == PGD_RESIZE_BICUBIC_ALIGN_CORNERS)
        s = out > 1 ? (double)(in - 1) / (double)(out - 1) : 0.0;
    else if (mode == PGD_RESIZE_BICUBIC_HF)
        s = 1.0 / (((double)out + 0.1) / (double)in); /* 1 / scale_factor */
    else
        s = (double)in / (double)out;
    for (size_t o = 0; o < out; o++) {
        double src =
            mode == PGD_RESIZE_BICUBIC_ALIGN_CORNERS ? (double)o * s : ((double)o + 0.5) * s - 0.5;
        long x0 = (long)floor(src);
        if (x0 > (long)in - 1)
            x0 = (long)in - 1;
        double f = src - (double)x0;
        f = f < 0.0 ? 0.0 : f > 1.0 ? 1.0 : f;
        for (long a = -1; a <= 2; a++)
            w[o * in + clampi(x0 + a, in)] += cubic((double)a - f, -0.75);
    }
}

void pgd_ref_pos_resize(const float *pos, size_t extra, size_t gh, size_t gw, size_t gh2,
                        size_t gw2, size_t D, int mode, double *out)
{
    for (size_t i = 0; i < extra * D; i++)
        out[i] = pos[i];
    const float *grid = pos + extra * D;
    double *wy = malloc(gh2 * gh * sizeof *wy), *wx = malloc(gw2 * gw * sizeof *wx);
    if (!wy || !wx)
        abort();
    pgd_ref_resize_weights(gh, gh2, mode, wy);
    pgd_ref_resize_weights(gw, gw2, mode, wx);
    /* Along x first, into tmp [gh, gw2, D], then along y. */
    double *tmp = calloc(gh * gw2 * D + 1, sizeof *tmp);
    if (!tmp)
        abort();
    for (size_t y = 0; y < gh; y++)
        for (size_t ox = 0; ox < gw2; ox++)
            for (size_t x = 0; x < gw; x++) {
                double wt = wx[ox * gw + x];
                if (wt != 0.0)
                    for (size_t d = 0; d < D; d++)
                        tmp[(y * gw2 + ox) * D + d] += wt * grid[(y * gw + x) * D + d];
            }
    for (size_t oy = 0; oy < gh2; oy++)
        for (size_t ox = 0; ox < gw2; ox++)
            for (size_t d = 0; d < D; d++) {
                double acc = 0.0;
                for (size_t y = 0; y < gh; y++)
                    acc += wy[oy * gh + y] * tmp[(y * gw2 + ox) * D + d];
                out[(extra + oy * gw2 + ox) * D + d] = acc;
            }
    free(tmp);
    free(wy);
    free(wx);
}

void pgd_ref_conv_out(const pgd_ref_conv *c, size_t *oh, size_t *ow)
{
    long eh = (long)c->h + 2 * (long)c->ph - (long)(c->dh * (c->kh - 1)) - 1;
    long ew = (long)c->w + 2 * (long)c->pw - (long)(c->dw * (c->kw - 1)) - 1;
    *oh = eh < 0 ? 0 : (size_t)eh / c->sh + 1;
    *ow = ew < 0 ? 0 : (size_t)ew / c->sw + 1;
}

static double ref_act(double v, int act)
{
    if (act == 1)
        return relu_nan(v);
    if (act == 2)
        return v == -INFINITY ? 0.0 : 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
    return v;
}

void pgd_ref_conv2d(const pgd_ref_conv *c, const float *x, const float *weight, const float *bias,
                    const float *const bn[4], double bn_eps, const float *residual, int act,
                    double *y, double *mag)
{
    size_t oh, ow;
    pgd_ref_conv_out(c, &oh, &ow);
    size_t cing = c->cin / c->groups, coutg = c->cout / c->groups;
    for (size_t n = 0; n < c->n; n++)
        for (size_t oy = 0; oy < oh; oy++)
            for (size_t ox = 0; ox < ow; ox++)
                for (size_t co = 0; co < c->cout; co++) {
                    size_t g = co / coutg;
                    double s = 0.0, a = 0.0;
                    for (size_t ci = 0; ci < cing; ci++)
                        for (size_t ky = 0; ky < c->kh; ky++)
                            for (size_t kx = 0; kx < c->kw; kx++) {
                                long iy = (long)(oy * c->sh + ky * c->dh) - (long)c->ph;
                                long ix = (long)(ox * c->sw + kx * c->dw) - (long)c->pw;
                                if (iy < 0 || ix < 0 || iy >= (long)c->h || ix >= (long)c->w)
                                    continue;
                                double xv =
                                    x[((n * c->h + (size_t)iy) * c->w + (size_t)ix) * c->cin +
                                      g * cing + ci];
                                double wv = weight[((co * cing + ci) * c->kh + ky) * c->kw + kx];
                                s += xv * wv;
                                a += fabs(xv * wv);
                            }
                    double b = bias ? bias[co] : 0.0;
                    double v = s + b, m = a + fabs(b);
                    if (bn) {
                        double sc = bn[0][co] / sqrt((double)bn[3][co] + bn_eps);
                        v = (v - bn[2][co]) * sc + bn[1][co];
                        m = a * fabs(sc) + fabs((b - bn[2][co]) * sc + bn[1][co]);
                    }
                    size_t i = ((n * oh + oy) * ow + ox) * c->cout + co;
                    if (residual) {
                        v += residual[i];
                        m += fabs(residual[i]);
                    }
                    y[i] = ref_act(v, act);
                    if (mag)
                        mag[i] = m;
                }
}

static void ref_pool(const float *x, size_t n, size_t h, size_t w, size_t c, size_t k, size_t s,
                     size_t p, int avg, double *y)
{
    size_t oh = (h + 2 * p - k) / s + 1, ow = (w + 2 * p - k) / s + 1;
    for (size_t b = 0; b < n; b++)
        for (size_t oy = 0; oy < oh; oy++)
            for (size_t ox = 0; ox < ow; ox++)
                for (size_t ch = 0; ch < c; ch++) {
                    long y0 = (long)(oy * s) - (long)p, x0 = (long)(ox * s) - (long)p;
                    long y1 = y0 + (long)k, x1 = x0 + (long)k;
                    if (y1 > (long)(h + p))
                        y1 = (long)(h + p);
                    if (x1 > (long)(w + p))
                        x1 = (long)(w + p);
                    double m = -INFINITY, sum = 0.0;
                    for (long iy = y0; iy < y1; iy++)
                        for (long ix = x0; ix < x1; ix++) {
                            if (iy < 0 || ix < 0 || iy >= (long)h || ix >= (long)w)
                                continue;
                            double v = x[((b * h + (size_t)iy) * w + (size_t)ix) * c + ch];
                            m = max_nan(m, v);
                            sum += v;
                        }
                    y[((b * oh + oy) * ow + ox) * c + ch] =
                        avg ? sum / (double)((y1 - y0) * (x1 - x0)) : m;
                }
}

void pgd_ref_maxpool2d(const float *x, size_t n, size_t h, size_t w, size_t c, size_t k, size_t s,
                       size_t p, double *y)
{
    ref_pool(x, n, h, w, c, k, s, p, 0, y);
}

void pgd_ref_avgpool2d(const float *x, size_t n, size_t h, size_t w, size_t c, size_t k, size_t s,
                       size_t p, double *y)
{
    ref_pool(x, n, h, w, c, k, s, p, 1, y);
}

void pgd_ref_global_avgpool(const float *x, size_t n, size_t h, size_t w, size_t c, double *y)
{
    for (size_t b = 0; b < n; b++)
        for (size_t ch = 0; ch < c; ch++) {
            double s = 0.0;
            for (size_t i = 0; i < h * w; i++)
                s += x[(b * h * w + i) * c + ch];
            y[b * c + ch] = s / (double)(h * w);
        }
}

/* out [n, co] = t [n, cin]·wᵀ + b, w [co, cin] (a 1x1 convolution), in double. */
static void ref_conv1x1(const float *t, size_t n, size_t cin, const float *w, const float *b,
                        size_t co, double *out)
{
    for (size_t i = 0; i < n; i++)
        for (size_t o = 0; o < co; o++) {
            double acc = b ? (double)b[o] : 0.0;
            for (size_t k = 0; k < cin; k++)
                acc += (double)t[i * cin + k] * w[o * cin + k];
            out[i * co + o] = acc;
        }
}

/* 2x2 stride-2 max pool (floor rule) of t [nb, h, w, c] into [nb, h/2, w/2, c]. */
static void ref_pool2(const double *t, size_t nb, size_t h, size_t w, size_t c, double *out)
{
    size_t h2 = h / 2, w2 = w / 2;
    for (size_t b = 0; b < nb; b++)
        for (size_t i = 0; i < h2; i++)
            for (size_t j = 0; j < w2; j++)
                for (size_t ch = 0; ch < c; ch++) {
                    double m = -INFINITY;
                    for (size_t di = 0; di < 2; di++)
                        for (size_t dj = 0; dj < 2; dj++)
                            m = max_nan(m, t[((b * h + 2 * i + di) * w + 2 * j + dj) * c + ch]);
                    out[((b * h2 + i) * w2 + j) * c + ch] = m;
                }
}

void pgd_ref_nonlocal_block(const pgd_ref_nonlocal *p, const float *x, size_t q, double *z,
                            double *aff, double *mag)
{
    size_t B = p->b, C = p->c, Ci = p->ci, N = p->h * p->w;
    size_t Np = p->subsample ? (p->h / 2) * (p->w / 2) : N;
    int gauss = p->mode == PGD_NONLOCAL_GAUSSIAN;
    size_t dq = gauss ? C : Ci; /* width of queries and keys */
    double *qv = malloc(B * N * dq * sizeof *qv), *kf = malloc(B * N * dq * sizeof *kf);
    double *gf = malloc(B * N * Ci * sizeof *gf), *kv = malloc(B * Np * dq * sizeof *kv);
    double *gv = malloc(B * Np * Ci * sizeof *gv), *y = malloc(B * N * Ci * sizeof *y);
    double *ym = malloc(B * N * Ci * sizeof *ym), *f = malloc(Np * sizeof *f);
    double *fm = malloc(Np * sizeof *fm);
    if (gauss) {
        for (size_t i = 0; i < B * N * C; i++)
            qv[i] = kf[i] = x[i];
    } else {
        ref_conv1x1(x, B * N, C, p->theta_w, p->theta_b, Ci, qv);
        ref_conv1x1(x, B * N, C, p->phi_w, p->phi_b, Ci, kf);
    }
    ref_conv1x1(x, B * N, C, p->g_w, p->g_b, Ci, gf);
    if (p->subsample) {
        ref_pool2(kf, B, p->h, p->w, dq, kv);
        ref_pool2(gf, B, p->h, p->w, Ci, gv);
    } else {
        for (size_t i = 0; i < B * N * dq; i++)
            kv[i] = kf[i];
        for (size_t i = 0; i < B * N * Ci; i++)
            gv[i] = gf[i];
    }
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < N; i++) {
            const double *qi = qv + (b * N + i) * dq;
            double at = 0, atm = 0, mx = -INFINITY, sum = 0;
            if (p->mode == PGD_NONLOCAL_CONCATENATION)
                for (size_t c = 0; c < Ci; c++) {
                    at += qi[c] * p->concat_w[c];
                    atm += fabs(qi[c] * p->concat_w[c]);
                }
            for (size_t j = 0; j < Np; j++) {
                const double *kj = kv + (b * Np + j) * dq;
                double s = 0, sm = 0;
                if (p->mode == PGD_NONLOCAL_CONCATENATION) {
                    for (size_t c = 0; c < Ci; c++) {
                        s += kj[c] * p->concat_w[Ci + c];
                        sm += fabs(kj[c] * p->concat_w[Ci + c]);
                    }
                    f[j] = relu_nan(at + s) / (double)Np;
                    fm[j] = (atm + sm) / (double)Np;
                } else {
                    for (size_t c = 0; c < dq; c++) {
                        s += qi[c] * kj[c];
                        sm += fabs(qi[c] * kj[c]);
                    }
                    f[j] = s;
                    fm[j] = sm / (double)Np;
                    mx = max_nan(mx, s);
                }
            }
            if (p->mode == PGD_NONLOCAL_EMBEDDED_GAUSSIAN || gauss) {
                for (size_t j = 0; j < Np; j++)
                    sum += f[j] = exp(f[j] - mx);
                for (size_t j = 0; j < Np; j++)
                    fm[j] = f[j] /= sum;
            } else if (p->mode == PGD_NONLOCAL_DOT_PRODUCT) {
                for (size_t j = 0; j < Np; j++)
                    f[j] /= (double)Np;
            }
            if (aff && i == q)
                for (size_t j = 0; j < Np; j++)
                    aff[b * Np + j] = f[j];
            for (size_t c = 0; c < Ci; c++) {
                double acc = 0, am = 0;
                for (size_t j = 0; j < Np; j++) {
                    acc += f[j] * gv[(b * Np + j) * Ci + c];
                    am += fm[j] * fabs(gv[(b * Np + j) * Ci + c]);
                }
                y[(b * N + i) * Ci + c] = acc;
                ym[(b * N + i) * Ci + c] = am;
            }
        }
    for (size_t r = 0; r < B * N; r++)
        for (size_t o = 0; o < C; o++) {
            double s = 1.0, acc = p->w_b ? (double)p->w_b[o] : 0.0, am = 0;
            for (size_t k = 0; k < Ci; k++) {
                acc += (double)p->w_w[o * Ci + k] * y[r * Ci + k];
                am += fabs((double)p->w_w[o * Ci + k]) * ym[r * Ci + k];
            }
            double shift = 0;
            if (p->bn[0]) {
                s = p->bn[0][o] / sqrt((double)p->bn[3][o] + p->bn_eps);
                shift = p->bn[1][o] - p->bn[2][o] * s;
            }
            z[r * C + o] = x[r * C + o] + acc * s + shift;
            if (mag)
                mag[r * C + o] = fabs(x[r * C + o]) + fabs(s) * am +
                                 fabs((p->w_b ? p->w_b[o] : 0.0) * s + shift);
        }
    free(qv);
    free(kf);
    free(gf);
    free(kv);
    free(gv);
    free(y);
    free(ym);
    free(f);
    free(fm);
}

void pgd_ref_gemm_strided(int ta, int tb, int64_t M, int64_t N, int64_t K, int64_t batch,
                          double alpha, pgd_ref_mat a, pgd_ref_mat b, double beta, const float *C0,
                          pgd_ref_mat c, const float *bias, int act, const float *R, double *out)
{
    for (int64_t bt = 0; bt < batch; bt++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double s = 0.0;
                for (int64_t k = 0; k < K; k++) {
                    int64_t ia = a.off + bt * a.batch_stride + (ta ? k * a.ld + m : m * a.ld + k);
                    int64_t ib = b.off + bt * b.batch_stride + (tb ? n * b.ld + k : k * b.ld + n);
                    s += (double)a.p[ia] * (double)b.p[ib];
                }
                int64_t ic = c.off + bt * c.batch_stride + m * c.ld + n;
                double x = alpha * s;
                if (beta != 0.0)
                    x += beta * (double)C0[ic];
                if (bias)
                    x += bias[n];
                x = ref_act(x, act);
                if (R)
                    x += R[ic];
                out[ic] = x;
            }
}

static int64_t view_at(const pgd_view *v, int64_t b, int64_t h, int64_t t)
{
    return v->offset + b * v->batch_stride + h * v->head_stride + t * v->token_stride;
}

/* Top-k of a score row: keeps the k highest finite-or-not scores above -inf (ties to the lower
 * index) and sets the others to -inf. keep is scratch of n chars. */
static void ref_topk(double *s, int64_t n, int64_t k, char *keep)
{
    memset(keep, 0, (size_t)(n ? n : 1));
    for (int64_t taken = 0; taken < k; taken++) {
        int64_t best = -1;
        for (int64_t j = 0; j < n; j++)
            if (!keep[j] && s[j] > -INFINITY && (best < 0 || s[j] > s[best]))
                best = j;
        if (best < 0)
            break;
        keep[best] = 1;
    }
    for (int64_t j = 0; j < n; j++)
        if (!keep[j])
            s[j] = -INFINITY;
}

void pgd_ref_attention(const pgd_attention_args *a, const float *q, const float *k, const float *v,
                       const float *m, double *o, double *p)
{
    int64_t B = a->batch, H = a->heads, Nq = a->nq, Nk = a->nk, D = a->head_dim;
    double scale = a->scale != 0 ? a->scale : 1.0 / sqrt((double)D);
    double *s = malloc((size_t)(Nk ? Nk : 1) * sizeof *s);
    char *keep = malloc((size_t)(Nk ? Nk : 1));
    int64_t hsel = a->probs_head < 0 ? H : 1;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < Nq; i++) {
                double mx = -INFINITY;
                for (int64_t j = 0; j < Nk; j++) {
                    double acc = 0;
                    for (int64_t d = 0; d < D; d++)
                        acc +=
                            (double)q[view_at(&a->q, b, h, i) + d] * k[view_at(&a->k, b, h, j) + d];
                    acc *= scale;
                    if (a->mask.t)
                        acc += m[view_at(&a->mask, b, h, i) + j];
                    if (a->causal && j > i + (a->causal == PGD_CAUSAL_TOP_LEFT ? 0 : Nk - Nq))
                        acc = -INFINITY;
                    s[j] = acc;
                    mx = max_nan(mx, acc);
                }
                int hard = a->mode != PGD_ATTENTION_SOFT && !isnan(mx) && mx != INFINITY;
                if (hard && a->mode == PGD_ATTENTION_TOPK)
                    ref_topk(s, Nk, a->topk, keep);
                double sum = 0;
                for (int64_t j = 0; j < Nk; j++) {
                    s[j] = mx == -INFINITY ? 0.0 : exp(s[j] - mx);
                    sum += s[j];
                }
                for (int64_t j = 0; j < Nk; j++)
                    s[j] = (sum > 0 || isnan(sum)) ? s[j] / sum : 0.0;
                if (hard && a->mode == PGD_ATTENTION_SAMPLE && sum > 0) {
                    double u = pgd_attention_uniform(a->seed, b, h, i, H, Nq), cum = 0;
                    int64_t pick = -1;
                    for (int64_t j = 0; j < Nk; j++) {
                        cum += s[j];
                        if (pick < 0 && s[j] > 0 && cum > u)
                            pick = j;
                    }
                    for (int64_t j = Nk - 1; j >= 0 && pick < 0; j--)
                        if (s[j] > 0)
                            pick = j;
                    for (int64_t j = 0; j < Nk; j++)
                        s[j] = j == pick;
                }
                for (int64_t d = 0; d < D; d++) {
                    double acc = 0;
                    for (int64_t j = 0; j < Nk; j++)
                        if (!hard || s[j] != 0)
                            acc += s[j] * v[view_at(&a->v, b, h, j) + d];
                    o[view_at(&a->o, b, h, i) + d] = acc;
                }
                if (p && i >= a->probs_q0 && i < a->probs_q1 &&
                    (a->probs_head < 0 || a->probs_head == h)) {
                    int64_t hs = a->probs_head < 0 ? h : 0;
                    for (int64_t j = 0; j < Nk; j++)
                        p[((b * hsel + hs) * (a->probs_q1 - a->probs_q0) + (i - a->probs_q0)) * Nk +
                          j] = s[j];
                }
            }
    free(s);
    free(keep);
}

/* ---- graph attention ---- */

/* out [n, rows] = x [n, f]·wᵀ, w [rows, f]. */
static void ref_lin(const float *x, const float *w, size_t n, size_t f, size_t rows, double *out)
{
    for (size_t i = 0; i < n; i++)
        for (size_t r = 0; r < rows; r++) {
            double acc = 0;
            for (size_t k = 0; k < f; k++)
                acc += (double)x[i * f + k] * w[r * f + k];
            out[i * rows + r] = acc;
        }
}

size_t pgd_ref_gat_layer(const pgd_ref_gat *p, const float *x, const int64_t *edge_index, size_t e,
                         double *y, double *alpha, double *mag)
{
    size_t n = p->n, H = p->heads, C = p->c, HC = H * C, od = p->concat ? HC : C;
    /* The edge list attention runs over. */
    size_t cap = e + (p->add_loops ? n : 0), m = 0;
    int64_t *src = malloc((cap ? cap : 1) * sizeof *src);
    int64_t *dst = malloc((cap ? cap : 1) * sizeof *dst);
    for (size_t k = 0; k < e; k++) {
        if (p->add_loops && edge_index[k] == edge_index[e + k])
            continue;
        src[m] = edge_index[k], dst[m] = edge_index[e + k], m++;
    }
    for (size_t i = 0; p->add_loops && i < n; i++)
        src[m] = (int64_t)i, dst[m] = (int64_t)i, m++;

    double *h = malloc(n * HC * sizeof *h), *hd = malloc(n * HC * sizeof *hd);
    double *as = malloc(n * H * sizeof *as), *ad = malloc(n * H * sizeof *ad);
    double *sc = malloc((m ? m : 1) * H * sizeof *sc), *mx = malloc(n * H * sizeof *mx);
    double *sum = calloc(n * H, sizeof *sum);
    double *acc = calloc(n * HC, sizeof *acc), *accm = calloc(n * HC, sizeof *accm);
    ref_lin(x, p->w, n, p->f, HC, h);
    ref_lin(x, p->w_dst ? p->w_dst : p->w, n, p->f, HC, hd);
    for (size_t i = 0; i < n; i++)
        for (size_t hh = 0; hh < H; hh++) {
            double s = 0, d = 0;
            for (size_t c = 0; c < C; c++) {
                s += h[i * HC + hh * C + c] * p->att_src[hh * C + c];
                d += hd[i * HC + hh * C + c] * p->att_dst[hh * C + c];
            }
            as[i * H + hh] = s, ad[i * H + hh] = d;
            mx[i * H + hh] = -INFINITY;
        }
    for (size_t k = 0; k < m; k++)
        for (size_t hh = 0; hh < H; hh++) {
            double v = as[src[k] * H + hh] + ad[dst[k] * H + hh];
            v = v < 0 ? v * p->slope : v;
            sc[k * H + hh] = v;
            mx[dst[k] * H + hh] = fmax(mx[dst[k] * H + hh], v);
        }
    for (size_t k = 0; k < m; k++)
        for (size_t hh = 0; hh < H; hh++)
            sum[dst[k] * H + hh] += exp(sc[k * H + hh] - mx[dst[k] * H + hh]);
    for (size_t k = 0; k < m; k++)
        for (size_t hh = 0; hh < H; hh++) {
            double a = exp(sc[k * H + hh] - mx[dst[k] * H + hh]) / sum[dst[k] * H + hh];
            if (alpha)
                alpha[k * H + hh] = a;
            for (size_t c = 0; c < C; c++) {
                double v = h[src[k] * HC + hh * C + c];
                acc[dst[k] * HC + hh * C + c] += a * v;
                accm[dst[k] * HC + hh * C + c] += a * fabs(v);
            }
        }
    double *res = NULL;
    if (p->res_w) {
        res = malloc(n * od * sizeof *res);
        ref_lin(x, p->res_w, n, p->f, od, res);
    }
    for (size_t i = 0; i < n; i++)
        for (size_t o = 0; o < od; o++) {
            double v = 0, g = 0;
            if (p->concat) {
                v = acc[i * HC + o], g = accm[i * HC + o];
            } else {
                for (size_t hh = 0; hh < H; hh++)
                    v += acc[i * HC + hh * C + o], g += accm[i * HC + hh * C + o];
                v /= (double)H, g /= (double)H;
            }
            if (res)
                v += res[i * od + o], g += fabs(res[i * od + o]);
            if (p->bias)
                v += p->bias[o], g += fabs((double)p->bias[o]);
            if (p->act == 1)
                v = v > 0 ? v : expm1(v);
            else if (p->act == 2)
                v = v < 0 ? 0 : v;
            y[i * od + o] = v;
            if (mag)
                mag[i * od + o] = g;
        }
    free(src), free(dst), free(h), free(hd), free(as), free(ad), free(sc), free(mx), free(sum);
    free(acc), free(accm), free(res);
    return m;
}

float pgd_ref_round_half(float x)
{
    if (isnan(x) || isinf(x) || x == 0.0f)
        return x;
    double a = fabs((double)x);
    if (a >= 65520.0) /* past the largest half plus half an ulp: rounds to infinity */
        return x > 0 ? INFINITY : -INFINITY;
    /* the spacing of halves around a: 2^(e - 10) for normal halves (2^-14 <= a), 2^-24 below */
    int e;
    frexp(a, &e); /* a = f·2^e, f in [0.5, 1): the half's exponent is e - 1 */
    double ulp = ldexp(1.0, (e - 1 < -14 ? -14 : e - 1) - 10);
    double q = a / ulp; /* exact: a power-of-two scaling */
    double r = floor(q), frac = q - r;
    if (frac > 0.5 || (frac == 0.5 && fmod(r, 2.0) != 0.0))
        r += 1.0;
    double y = r * ulp;
    return (float)(x < 0 ? -y : y);
}

size_t pgd_ref_bcast_index(size_t i, int ny, const int64_t *yshape, int nd, const int64_t *shape)
{
    size_t at = 0, stride = 1;
    for (int e = 0; e < ny; e++) { /* e: dim counted from the end */
        size_t n = (size_t)yshape[ny - 1 - e], c = i % n;
        i /= n;
        if (e < nd) {
            size_t s = (size_t)shape[nd - 1 - e];
            at += (s == 1 ? 0 : c) * stride;
            stride *= s;
        }
    }
    return at;
}

double pgd_ref_binary(int op, double a, double b)
{
    switch (op) {
    case PGD_BINARY_ADD: return a + b;
    case PGD_BINARY_SUB: return a - b;
    case PGD_BINARY_MUL: return a * b;
    case PGD_BINARY_DIV: return a / b;
    case PGD_BINARY_POW: return pow(a, b);
    case PGD_BINARY_MAX: return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
    default: return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
    }
}

double pgd_ref_unary(int op, double x)
{
    const double k = sqrt(2.0 / 3.14159265358979323846);
    switch (op) {
    case PGD_UNARY_EXP: return exp(x);
    case PGD_UNARY_LOG: return log(x);
    case PGD_UNARY_SQRT: return sqrt(x);
    case PGD_UNARY_RSQRT: return 1.0 / sqrt(x);
    case PGD_UNARY_ERF: return erf(x);
    case PGD_UNARY_TANH: return tanh(x);
    case PGD_UNARY_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case PGD_UNARY_ABS: return fabs(x);
    case PGD_UNARY_NEG: return -x;
    case PGD_UNARY_RELU: return x < 0 ? 0.0 : x;
    case PGD_UNARY_GELU: return x == -INFINITY ? 0.0 : 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case PGD_UNARY_GELU_TANH:
        return x == -INFINITY ? 0.0 : 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
    default: return x == -INFINITY ? 0.0 : x / (1.0 + exp(-x)); /* PGD_UNARY_SILU */
    }
}

/* Whether v replaces the best b of a max (sign 1) or min (sign -1) so far: larger / smaller, or
 * the first NaN. */
static int ref_better(double v, double b, double sign)
{
    return sign * v > sign * b || (isnan(v) && !isnan(b));
}

void pgd_ref_reduce(int op, const float *x, int nd, const int64_t *shape, const int *mask,
                    double *y, double *mag)
{
    size_t n = 1, nout = 1, nred = 1;
    for (int d = 0; d < nd; d++) {
        n *= (size_t)shape[d];
        *(mask[d] ? &nred : &nout) *= (size_t)shape[d];
    }
    double *best = calloc(nout ? nout : 1, sizeof *best);
    size_t *seen = calloc(nout ? nout : 1, sizeof *seen);
    double sign = op == PGD_REDUCE_MAX || op == PGD_REDUCE_ARGMAX ? 1.0 : -1.0;
    for (size_t o = 0; o < nout; o++) {
        y[o] = op == PGD_REDUCE_PROD ? 1.0 : 0.0;
        if (mag)
            mag[o] = 0.0;
    }
    for (size_t i = 0; i < n; i++) {
        /* The output index over the kept dims and the index over the reduced ones. */
        size_t rest = i, o = 0, j = 0, ko = 1, kj = 1;
        for (int d = nd - 1; d >= 0; d--) {
            size_t s = (size_t)shape[d], c = rest % s;
            rest /= s;
            if (mask[d]) {
                j += c * kj;
                kj *= s;
            } else {
                o += c * ko;
                ko *= s;
            }
        }
        double v = x[i];
        if (mag)
            mag[o] += fabs(v);
        if (op == PGD_REDUCE_SUM || op == PGD_REDUCE_MEAN) {
            y[o] += v;
        } else if (op == PGD_REDUCE_PROD) {
            y[o] *= v;
        } else if (!seen[o]++ || ref_better(v, best[o], sign)) {
            best[o] = v;
            y[o] = op == PGD_REDUCE_ARGMAX || op == PGD_REDUCE_ARGMIN ? (double)j : v;
        }
    }
    for (size_t o = 0; o < nout && op == PGD_REDUCE_MEAN; o++) {
        y[o] /= (double)nred;
        if (mag)
            mag[o] /= (double)nred;
    }
    free(best);
    free(seen);
}

/* ---- layout ---- */

/* The row-major coordinates of flat index i in shape (nd dims) into c. */
static void ref_unflatten(int64_t i, int nd, const int64_t *shape, int64_t *c)
{
    for (int d = nd - 1; d >= 0; d--) {
        c[d] = shape[d] ? i % shape[d] : 0;
        i = shape[d] ? i / shape[d] : 0;
    }
}

static int64_t ref_flatten(int nd, const int64_t *shape, const int64_t *c)
{
    int64_t i = 0;
    for (int d = 0; d < nd; d++)
        i = i * shape[d] + c[d];
    return i;
}

static int64_t ref_count(int nd, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= shape[d];
    return n;
}

void pgd_ref_transpose(const double *x, int nd, const int64_t *shape, const int *perm, double *y)
{
    int64_t ys[PGD_MAX_DIMS], c[PGD_MAX_DIMS], xc[PGD_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        ys[d] = shape[perm[d]];
    for (int64_t i = 0; i < ref_count(nd, ys); i++) {
        ref_unflatten(i, nd, ys, c);
        for (int d = 0; d < nd; d++)
            xc[perm[d]] = c[d];
        y[i] = x[ref_flatten(nd, shape, xc)];
    }
}

int64_t pgd_ref_slice_indices(int64_t n, int64_t start, int64_t end, int64_t step, int64_t *idx)
{
    /* CPython's slice.indices(), then the walk from start towards end. */
    int64_t lower = step < 0 ? -1 : 0, upper = step < 0 ? n - 1 : n;
    if (start < 0) {
        start += n;
        if (start < lower)
            start = lower;
    } else if (start > upper) {
        start = upper;
    }
    if (end < 0) {
        end += n;
        if (end < lower)
            end = lower;
    } else if (end > upper) {
        end = upper;
    }
    int64_t k = 0;
    for (int64_t i = start; step > 0 ? i < end : i > end; i += step) {
        if (idx)
            idx[k] = i;
        k++;
        if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step))
            break;
    }
    return k;
}

void pgd_ref_slice(const double *x, int nd, const int64_t *shape, int64_t *const *idx,
                   const int64_t *yshape, double *y)
{
    int64_t c[PGD_MAX_DIMS], xc[PGD_MAX_DIMS];
    for (int64_t i = 0; i < ref_count(nd, yshape); i++) {
        ref_unflatten(i, nd, yshape, c);
        for (int d = 0; d < nd; d++)
            xc[d] = idx[d][c[d]];
        y[i] = x[ref_flatten(nd, shape, xc)];
    }
}

void pgd_ref_concat(int n, const double *const *xs, int nd, const int64_t *const *shapes, int axis,
                    double *y)
{
    int64_t ys[PGD_MAX_DIMS], c[PGD_MAX_DIMS];
    memcpy(ys, shapes[0], (size_t)nd * sizeof *ys);
    ys[axis] = 0;
    for (int k = 0; k < n; k++)
        ys[axis] += shapes[k][axis];
    for (int64_t i = 0; i < ref_count(nd, ys); i++) {
        ref_unflatten(i, nd, ys, c);
        int k = 0;
        while (c[axis] >= shapes[k][axis])
            c[axis] -= shapes[k++][axis];
        y[i] = xs[k][ref_flatten(nd, shapes[k], c)];
    }
}

void pgd_ref_gather(const double *x, int nd, const int64_t *shape, int axis, const int64_t *idx,
                    int idx_nd, const int64_t *idx_shape, double *y)
{
    int64_t ys[2 * PGD_MAX_DIMS], c[2 * PGD_MAX_DIMS], xc[PGD_MAX_DIMS];
    int ny = 0;
    for (int d = 0; d < axis; d++)
        ys[ny++] = shape[d];
    for (int d = 0; d < idx_nd; d++)
        ys[ny++] = idx_shape[d];
    for (int d = axis + 1; d < nd; d++)
        ys[ny++] = shape[d];
    for (int64_t i = 0; i < ref_count(ny, ys); i++) {
        ref_unflatten(i, ny, ys, c);
        for (int d = 0; d < axis; d++)
            xc[d] = c[d];
        int64_t j = ref_flatten(idx_nd, idx_shape, c + axis), v = idx[j];
        xc[axis] = v < 0 ? v + shape[axis] : v;
        for (int d = axis + 1; d < nd; d++)
            xc[d] = c[d - 1 + idx_nd];
        y[i] = x[ref_flatten(nd, shape, xc)];
    }
}

/* Where padded coordinate p of a dim of n reads, or -1 for the constant, by walking the
 * reflections (edge: clamping, wrap: whole periods) one at a time. */
static int64_t ref_pad_source(int64_t p, int64_t n, int mode)
{
    if (p >= 0 && p < n)
        return p;
    if (mode == PGD_PAD_CONSTANT)
        return -1;
    if (mode == PGD_PAD_EDGE)
        return p < 0 ? 0 : n - 1;
    if (mode == PGD_PAD_WRAP) {
        while (p < 0)
            p += n;
        while (p >= n)
            p -= n;
        return p;
    }
    if (n == 1)
        return 0;
    while (p < 0 || p >= n)
        p = p < 0 ? -p : 2 * (n - 1) - p;
    return p;
}

void pgd_ref_pad(const double *x, int nd, const int64_t *shape, const int64_t *pads, int mode,
                 double value, double *y)
{
    int64_t ys[PGD_MAX_DIMS], c[PGD_MAX_DIMS], xc[PGD_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        ys[d] = shape[d] + pads[d] + pads[nd + d];
    for (int64_t i = 0; i < ref_count(nd, ys); i++) {
        ref_unflatten(i, nd, ys, c);
        int inside = 1;
        for (int d = 0; d < nd && inside; d++) {
            xc[d] = ref_pad_source(c[d] - pads[d], shape[d], mode);
            inside = xc[d] >= 0;
        }
        y[i] = inside ? x[ref_flatten(nd, shape, xc)] : value;
    }
}

void pgd_ref_depth_to_space(const double *x, const int64_t *shape, int block, int crd, double *y)
{
    int64_t b = block, C = shape[1] / (b * b), H = shape[2], W = shape[3];
    int64_t ys[4] = {shape[0], C, H * b, W * b}, c[4];
    for (int64_t i = 0; i < ref_count(4, ys); i++) {
        ref_unflatten(i, 4, ys, c);
        int64_t h = c[2] / b, b1 = c[2] % b, w = c[3] / b, b2 = c[3] % b;
        int64_t ch = crd ? c[1] * b * b + b1 * b + b2 : (b1 * b + b2) * C + c[1];
        int64_t xc[4] = {c[0], ch, h, w};
        y[i] = x[ref_flatten(4, shape, xc)];
    }
}

void pgd_ref_space_to_depth(const double *x, const int64_t *shape, int block, double *y)
{
    int64_t b = block, C = shape[1];
    int64_t ys[4] = {shape[0], C * b * b, shape[2] / b, shape[3] / b}, c[4];
    for (int64_t i = 0; i < ref_count(4, ys); i++) {
        ref_unflatten(i, 4, ys, c);
        int64_t blk = c[1] / C, ch = c[1] % C;
        int64_t xc[4] = {c[0], ch, c[2] * b + blk / b, c[3] * b + blk % b};
        y[i] = x[ref_flatten(4, shape, xc)];
    }
}

/* ---- normalisation over any axis ---- */

void pgd_ref_softmax_axis(const float *x, int64_t outer, int64_t n, int64_t inner, double scale,
                          int log_form, double *y)
{
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const float *xr = x + o * n * inner + i;
            double *yr = y + o * n * inner + i, m = -INFINITY, s = 0.0;
            for (int64_t k = 0; k < n; k++) {
                double v = scale * xr[k * inner];
                m = isnan(v) || v > m ? v : m;
                if (isnan(m))
                    break;
            }
            for (int64_t k = 0; k < n; k++)
                s += exp(scale * xr[k * inner] - m);
            for (int64_t k = 0; k < n; k++) {
                double d = scale * xr[k * inner] - m;
                yr[k * inner] = log_form ? d - log(s) : exp(d) / s;
            }
        }
}

void pgd_ref_layernorm_groups(const float *x, int64_t rows, int64_t cols, const float *w,
                              const float *b, double eps, double *y, double *mean, double *rstd)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        double m = 0.0, q = 0.0;
        for (int64_t c = 0; c < cols; c++)
            m += xr[c];
        m /= (double)cols;
        for (int64_t c = 0; c < cols; c++)
            q += (xr[c] - m) * (xr[c] - m);
        double s = 1.0 / sqrt(q / (double)cols + eps);
        for (int64_t c = 0; c < cols; c++) {
            double v = (xr[c] - m) * s;
            y[r * cols + c] = w ? v * w[c] + b[c] : v;
        }
        if (mean) {
            mean[r] = m;
            rstd[r] = s;
        }
    }
}

void pgd_ref_rmsnorm(const float *x, int64_t rows, int64_t cols, const float *w, double eps,
                     double *y)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        double q = 0.0;
        for (int64_t c = 0; c < cols; c++)
            q += (double)xr[c] * xr[c];
        double s = 1.0 / sqrt(q / (double)cols + eps);
        for (int64_t c = 0; c < cols; c++)
            y[r * cols + c] = w ? xr[c] * s * w[c] : xr[c] * s;
    }
}

void pgd_ref_batch_norm(const float *x, int64_t n, int64_t channels, int64_t inner,
                        const float *mean, const float *var, const float *w, const float *b,
                        double eps, double *y)
{
    for (int64_t i = 0; i < n * channels * inner; i++) {
        int64_t c = (i / inner) % channels;
        y[i] = (x[i] - (double)mean[c]) / sqrt((double)var[c] + eps) * w[c] + b[c];
    }
}

void pgd_ref_group_norm(const float *x, int64_t n, int64_t channels, int64_t inner, int groups,
                        const float *w, const float *b, double eps, double *y)
{
    int64_t cols = channels / groups * inner;
    pgd_ref_layernorm_groups(x, n * groups, cols, NULL, NULL, eps, y, NULL, NULL);
    for (int64_t i = 0; w && i < n * channels * inner; i++) {
        int64_t c = (i / inner) % channels;
        y[i] = y[i] * w[c] + b[c];
    }
}

/* ---- matmul ---- */

void pgd_ref_matmul(const float *a, int na, const int64_t *sa, const float *b, int nb,
                    const int64_t *sb, double *y)
{
    int64_t pa[PGD_MAX_DIMS + 1], pb[PGD_MAX_DIMS + 1], bs[PGD_MAX_DIMS];
    int ra = na < 2 ? 2 : na, rb = nb < 2 ? 2 : nb;
    memcpy(pa + (ra - na), sa, (size_t)na * sizeof *pa);
    memcpy(pb, sb, (size_t)nb * sizeof *pb);
    if (na == 1)
        pa[0] = 1;
    if (nb == 1)
        pb[1] = 1;
    int64_t M = pa[ra - 2], K = pa[ra - 1], N = pb[rb - 1];
    int r = ra - 2 > rb - 2 ? ra - 2 : rb - 2;
    int64_t nbatch = 1;
    for (int d = 0; d < r; d++) {
        int ea = d - (r - (ra - 2)), eb = d - (r - (rb - 2));
        int64_t da = ea >= 0 ? pa[ea] : 1, db = eb >= 0 ? pb[eb] : 1;
        bs[d] = da == 1 ? db : da;
        nbatch *= bs[d];
    }
    for (int64_t i = 0; i < nbatch; i++) {
        size_t ia = pgd_ref_bcast_index((size_t)i, r, bs, ra - 2, pa);
        size_t ib = pgd_ref_bcast_index((size_t)i, r, bs, rb - 2, pb);
        const float *am = a + ia * (size_t)(M * K), *bm = b + ib * (size_t)(K * N);
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double s = 0.0;
                for (int64_t k = 0; k < K; k++)
                    s += (double)am[m * K + k] * bm[k * N + n];
                y[(i * M + m) * N + n] = s;
            }
    }
}

/* ---- general pooling ---- */

void pgd_ref_pool2d(const float *x, int64_t n, int64_t h, int64_t w, int64_t c,
                    const pgd_pool_desc *d, int64_t oh, int64_t ow, double *y, double *idx)
{
    int dh = d->dh ? d->dh : 1, dw = d->dw ? d->dw : 1;
    for (int64_t b = 0; b < n; b++)
        for (int64_t oy = 0; oy < oh; oy++)
            for (int64_t ox = 0; ox < ow; ox++)
                for (int64_t ch = 0; ch < c; ch++) {
                    double best = -INFINITY, sum = 0.0;
                    int64_t at = -1, inside = 0, padded = 0;
                    for (int ky = 0; ky < d->kh; ky++)
                        for (int kx = 0; kx < d->kw; kx++) {
                            int64_t yy = oy * d->sh - d->pad_top + (int64_t)ky * dh;
                            int64_t xx = ox * d->sw - d->pad_left + (int64_t)kx * dw;
                            padded += yy >= -d->pad_top && yy < h + d->pad_bottom &&
                                      xx >= -d->pad_left && xx < w + d->pad_right;
                            if (yy < 0 || yy >= h || xx < 0 || xx >= w)
                                continue;
                            double v = x[((b * h + yy) * w + xx) * c + ch];
                            inside++;
                            sum += v;
                            if (v > best || isnan(v)) {
                                best = v;
                                at = yy * w + xx;
                            }
                        }
                    int64_t o = ((b * oh + oy) * ow + ox) * c + ch;
                    if (d->mode == PGD_POOL_MAX) {
                        y[o] = best;
                        if (idx)
                            idx[o] = (double)at;
                    } else {
                        y[o] = sum / (double)(d->count_include_pad ? padded : inside);
                    }
                }
}
