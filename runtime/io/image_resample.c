/* image_resample.c — Pillow-exact resampling, the classification presets (pgd_image_preprocess,
 * pgd_image_preprocess_view) and thumbnails, apart from image.c's loading and decoding. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image_decode.h"
#include "internal.h"

/* ---- Pillow-exact resampling ----
 *
 * A transcription of Pillow 9.4's libImaging/Resample.c for 8-bit images: per output pixel,
 * centre = (i + 0.5) * scale with scale = in / out; the filter is widened by
 * filterscale = max(scale, 1) (antialiasing when shrinking); taps from
 * (int)(centre - support + 0.5) to (int)(centre + support + 0.5), clamped to the image; weights
 * filter((x - centre + 0.5) / filterscale) normalised to sum 1, then turned into fixed point with
 * 22 fractional bits (rounded half away from zero); each pass accumulates from 2^21 and clips
 * (sum >> 22) to 0..255. Horizontal pass first, then vertical, each skipped when that side keeps
 * its size. */

#define PRECISION_BITS 22

typedef struct filter {
    double (*fn)(double);
    double support;
} filter;

static double bilinear_filter(double x)
{
    if (x < 0.0)
        x = -x;
    if (x < 1.0)
        return 1.0 - x;
    return 0.0;
}

static double bicubic_filter(double x)
{
    const double a = -0.5;
    if (x < 0.0)
        x = -x;
    if (x < 1.0)
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0)
        return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

static const filter BILINEAR = {bilinear_filter, 1.0};
static const filter BICUBIC = {bicubic_filter, 2.0};

typedef struct coeffs {
    int ksize;
    int *bounds; /* per output pixel: first tap, tap count */
    int *kk;     /* per output pixel: ksize fixed-point weights */
} coeffs;

/* Frees and clears, so that a second call (coeffs_make failed, then the caller's cleanup) is
 * harmless. */
static void coeffs_free(coeffs *c)
{
    free(c->bounds);
    free(c->kk);
    c->bounds = NULL;
    c->kk = NULL;
}

/* Coefficients for output pixels o0 .. o0 + n - 1 of a resize from in_size to out_size. */
static int coeffs_make(coeffs *c, int in_size, int out_size, const filter *f, int o0, int n)
{
    double scale, filterscale;
    scale = filterscale = (double)in_size / out_size;
    if (filterscale < 1.0)
        filterscale = 1.0;
    double support = f->support * filterscale;
    int ksize = (int)ceil(support) * 2 + 1;
    c->ksize = ksize;
    c->bounds = malloc((size_t)n * 2 * sizeof *c->bounds);
    c->kk = malloc((size_t)n * ksize * sizeof *c->kk);
    double *pre = malloc((size_t)ksize * sizeof *pre);
    if (!c->bounds || !c->kk || !pre) {
        free(pre);
        coeffs_free(c);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        int xx = o0 + i;
        double center = (xx + 0.5) * scale;
        double ww = 0.0;
        double ss = 1.0 / filterscale;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0)
            xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > in_size)
            xmax = in_size;
        xmax -= xmin;
        int x;
        for (x = 0; x < xmax; x++) {
            double w = f->fn((x + xmin - center + 0.5) * ss);
            pre[x] = w;
            ww += w;
        }
        for (x = 0; x < xmax; x++)
            if (ww != 0.0)
                pre[x] /= ww;
        int *k = c->kk + (size_t)i * ksize;
        for (x = 0; x < xmax; x++)
            k[x] = pre[x] < 0 ? (int)(-0.5 + pre[x] * (1 << PRECISION_BITS))
                              : (int)(0.5 + pre[x] * (1 << PRECISION_BITS));
        for (; x < ksize; x++)
            k[x] = 0;
        c->bounds[2 * i] = xmin;
        c->bounds[2 * i + 1] = xmax;
    }
    free(pre);
    return 0;
}

static uint8_t clip8(int v)
{
    if (v <= 0)
        return 0;
    v >>= PRECISION_BITS;
    return v > 255 ? 255 : (uint8_t)v;
}

/* Resizes src (sw x sh RGB) to dw x dh as Pillow does and writes the window of cw x ch pixels
 * at (cx0, cy0) of the result to dst (tight RGB rows). Only the window is computed. */
static int resample_window(const uint8_t *src, int sw, int sh, int dw, int dh, const filter *f,
                           int cx0, int cy0, int cw, int ch, uint8_t *dst)
{
    int need_h = dw != sw, need_v = dh != sh;
    coeffs hc = {0}, vc = {0};
    uint8_t *tmp = NULL;
    int rc = -1;
    int r0 = cy0, r1 = cy0 + ch; /* input rows the vertical pass reads */
    if (need_v) {
        if (coeffs_make(&vc, sh, dh, f, cy0, ch) != 0)
            goto out;
        r0 = vc.bounds[0];
        r1 = vc.bounds[2 * (ch - 1)] + vc.bounds[2 * (ch - 1) + 1];
    }
    if (need_h && coeffs_make(&hc, sw, dw, f, cx0, cw) != 0)
        goto out;
    int th = r1 - r0;
    tmp = malloc((size_t)cw * th * 3);
    if (!tmp)
        goto out;
    /* Horizontal pass (or the column window) over rows r0 .. r1 - 1. */
    for (int y = 0; y < th; y++) {
        const uint8_t *row = src + (size_t)(r0 + y) * sw * 3;
        uint8_t *o = tmp + (size_t)y * cw * 3;
        if (!need_h) {
            memcpy(o, row + (size_t)cx0 * 3, (size_t)cw * 3);
            continue;
        }
        for (int i = 0; i < cw; i++) {
            int xmin = hc.bounds[2 * i], xn = hc.bounds[2 * i + 1];
            const int *k = hc.kk + (size_t)i * hc.ksize;
            int s0 = 1 << (PRECISION_BITS - 1), s1 = s0, s2 = s0;
            const uint8_t *px = row + (size_t)xmin * 3;
            for (int x = 0; x < xn; x++) {
                s0 += px[3 * x + 0] * k[x];
                s1 += px[3 * x + 1] * k[x];
                s2 += px[3 * x + 2] * k[x];
            }
            o[3 * i + 0] = clip8(s0);
            o[3 * i + 1] = clip8(s1);
            o[3 * i + 2] = clip8(s2);
        }
    }
    /* Vertical pass (or a copy). */
    if (!need_v) {
        memcpy(dst, tmp, (size_t)cw * ch * 3);
    } else {
        for (int j = 0; j < ch; j++) {
            int ymin = vc.bounds[2 * j] - r0, yn = vc.bounds[2 * j + 1];
            const int *k = vc.kk + (size_t)j * vc.ksize;
            uint8_t *o = dst + (size_t)j * cw * 3;
            for (int i = 0; i < cw * 3; i++) {
                int s = 1 << (PRECISION_BITS - 1);
                for (int y = 0; y < yn; y++)
                    s += tmp[(size_t)(ymin + y) * cw * 3 + i] * k[y];
                o[i] = clip8(s);
            }
        }
    }
    rc = 0;
out:
    free(tmp);
    coeffs_free(&hc);
    coeffs_free(&vc);
    return rc;
}

/* torchvision's CenterCrop offset: int(round((size - crop) / 2.0)), Python rounding half to
 * even. */
static int crop_offset(int size, int crop)
{
    int d = size - crop;
    int off = d / 2;
    if ((d & 1) && (off & 1))
        off++;
    return off;
}

pgd_status pgd_image_preprocess(const pgd_image *img, pgd_preprocess preset, float *out,
                                pgd_error **err)
{
    if (!img || !img->data || !out)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "pgd_image_preprocess: image or output is NULL");
    const int S = PGD_PREPROCESS_SIZE;
    int sw = img->width, sh = img->height;
    int dw, dh;
    const filter *f;
    float mean[3], stdv[3];
    switch (preset) {
    case PGD_PREPROCESS_TORCHVISION:
    case PGD_PREPROCESS_TIMM: {
        int side = preset == PGD_PREPROCESS_TORCHVISION ? 256 : 248;
        f = preset == PGD_PREPROCESS_TORCHVISION ? &BILINEAR : &BICUBIC;
        /* torchvision 0.14 _compute_resized_output_size: long = int(side * long / short). */
        int shrt = sw <= sh ? sw : sh, lng = sw <= sh ? sh : sw;
        int nl = (int)((double)side * lng / shrt);
        if (sw <= sh) {
            dw = side;
            dh = nl;
        } else {
            dw = nl;
            dh = side;
        }
        if (preset == PGD_PREPROCESS_TORCHVISION) {
            mean[0] = 0.485f, mean[1] = 0.456f, mean[2] = 0.406f;
            stdv[0] = 0.229f, stdv[1] = 0.224f, stdv[2] = 0.225f;
        } else {
            mean[0] = mean[1] = mean[2] = 0.5f;
            stdv[0] = stdv[1] = stdv[2] = 0.5f;
        }
        break;
    }
    case PGD_PREPROCESS_HF:
        dw = dh = S;
        f = &BILINEAR;
        mean[0] = mean[1] = mean[2] = 0.5f;
        stdv[0] = stdv[1] = stdv[2] = 0.5f;
        break;
    default:
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "pgd_image_preprocess: unknown preset %d", (int)preset);
    }
    int cx0 = crop_offset(dw, S), cy0 = crop_offset(dh, S);
    uint8_t *win = malloc((size_t)S * S * 3);
    if (!win || resample_window(img->data, sw, sh, dw, dh, f, cx0, cy0, S, S, win) != 0) {
        free(win);
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY,
                              "pgd_image_preprocess: out of memory resizing %d x %d to %d x %d", sw,
                              sh, dw, dh);
    }
    /* ToTensor then Normalize, in float32 as torchvision does: (v / 255 - mean) / std. */
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < S * S; i++) {
            float v = (float)win[(size_t)i * 3 + c] / 255.0f;
            out[(size_t)c * S * S + i] = (v - mean[c]) / stdv[c];
        }
    free(win);
    return PGD_OK;
}

pgd_status pgd_image_preprocess_view(const pgd_image *img, pgd_preprocess preset, double rect[4])
{
    if (!img || img->width < 1 || img->height < 1)
        return PGD_ERR_INVALID_ARGUMENT;
    const int S = PGD_PREPROCESS_SIZE;
    /* The geometry of the source image (a thumbnail's view is its source's, scaled). */
    int sw = img->src_width, sh = img->src_height;
    double fx = (double)img->width / sw, fy = (double)img->height / sh;
    if (preset == PGD_PREPROCESS_HF) {
        rect[0] = 0, rect[1] = 0, rect[2] = img->width, rect[3] = img->height;
        return PGD_OK;
    }
    if (preset != PGD_PREPROCESS_TORCHVISION && preset != PGD_PREPROCESS_TIMM)
        return PGD_ERR_INVALID_ARGUMENT;
    /* the same geometry as pgd_image_preprocess: shorter side to 256 (248), centre crop S */
    int side = preset == PGD_PREPROCESS_TORCHVISION ? 256 : 248;
    int shrt = sw <= sh ? sw : sh, lng = sw <= sh ? sh : sw;
    int nl = (int)((double)side * lng / shrt);
    int dw = sw <= sh ? side : nl, dh = sw <= sh ? nl : side;
    int cx0 = crop_offset(dw, S), cy0 = crop_offset(dh, S);
    double kx = (double)sw / dw * fx, ky = (double)sh / dh * fy;
    rect[0] = cx0 * kx;
    rect[1] = cy0 * ky;
    rect[2] = (cx0 + S) * kx;
    rect[3] = (cy0 + S) * ky;
    return PGD_OK;
}

pgd_status pgd_image_thumbnail(const pgd_image *img, int max_side, pgd_image **out, pgd_error **err)
{
    if (!out)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_image_thumbnail: out is NULL");
    *out = NULL;
    if (!img || img->width < 1 || img->height < 1 || max_side < 1)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "pgd_image_thumbnail: an empty image or max_side < 1");
    int w = img->width, h = img->height, lng = w >= h ? w : h;
    int tw = w, th = h;
    if (lng > max_side) {
        /* Pillow's Image.thumbnail rounding: the long side becomes max_side exactly. */
        tw = w >= h ? max_side : (int)((double)w * max_side / lng + 0.5);
        th = w >= h ? (int)((double)h * max_side / lng + 0.5) : max_side;
        tw = tw < 1 ? 1 : tw;
        th = th < 1 ? 1 : th;
    }
    pgd_image *t = calloc(1, sizeof *t);
    uint8_t *px = t ? malloc((size_t)tw * th * 3) : NULL;
    if (!px || resample_window(img->data, w, h, tw, th, &BILINEAR, 0, 0, tw, th, px) != 0) {
        free(px);
        free(t);
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY,
                              "pgd_image_thumbnail: %d x %d pixels", tw, th);
    }
    t->data = px;
    t->own_pixels = 1;
    t->width = tw;
    t->height = th;
    t->src_width = img->src_width;
    t->src_height = img->src_height;
    *out = t;
    return PGD_OK;
}
