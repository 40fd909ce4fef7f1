/* maps.c — heat maps over images as PNG (see maps.h): the ramp, the bilinear upsampling over the
 * model's view of the image, encoded by stb_image_write into a pgd_outfile (complete or not at
 * all). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stb_image_write.h>

#include "maps.h"

/* Lightness rises monotonically along the ramp. */
static const uint8_t RAMP[5][3] = {
    {20, 12, 70},    /* dark blue */
    {105, 30, 140},  /* purple */
    {205, 50, 80},   /* red */
    {245, 145, 30},  /* orange */
    {252, 245, 180}, /* pale yellow */
};

void map_color(float t, uint8_t rgb[3])
{
    if (!(t > 0.0f))
        t = 0.0f;
    if (t > 1.0f)
        t = 1.0f;
    float s = t * 4.0f;
    int i = (int)s;
    if (i > 3)
        i = 3;
    float u = s - (float)i;
    for (int c = 0; c < 3; c++) {
        float v = RAMP[i][c] + (RAMP[i + 1][c] - RAMP[i][c]) * u;
        rgb[c] = (uint8_t)lrintf(v);
    }
}

/* The map cell coordinate of pixel centre i when the map's `in` cells span [r0, r1) (centres
 * aligned, clamped at the border): the two neighbours and the weight of the second. */
static double view_source(int i, double r0, double r1, int in, int *i0, int *i1)
{
    double s = (i + 0.5 - r0) / (r1 - r0) * in - 0.5;
    if (s < 0)
        s = 0;
    if (s > in - 1)
        s = in - 1;
    *i0 = (int)s;
    *i1 = *i0 + 1 < in ? *i0 + 1 : *i0;
    return s - *i0;
}

/* The map min-max normalised into norm (n values; non-finite ones and a constant map: 0). */
static void normalise(const float *map, size_t n, float *norm)
{
    float lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (isfinite(map[i])) {
            if (map[i] < lo)
                lo = map[i];
            if (map[i] > hi)
                hi = map[i];
        }
    double range = (lo < hi) ? (double)hi - lo : 0.0;
    for (size_t i = 0; i < n; i++)
        norm[i] = (range > 0.0 && isfinite(map[i])) ? (float)((map[i] - (double)lo) / range) : 0.0f;
}

/* The picture: inside rect the image blended 50 % with the ramp's colour of the upsampled
 * map, outside it the image dimmed. pix is w x h x 3. */
static void draw(const uint8_t *base, int w, int h, const float *norm, int mw, int mh,
                 const double rect[4], uint8_t *pix)
{
    for (int y = 0; y < h; y++) {
        int y0, y1;
        double fy = view_source(y, rect[1], rect[3], mh, &y0, &y1);
        int yin = y + 0.5 >= rect[1] && y + 0.5 < rect[3];
        for (int x = 0; x < w; x++) {
            size_t o = ((size_t)y * w + x) * 3;
            if (!yin || x + 0.5 < rect[0] || x + 0.5 >= rect[2]) {
                /* outside what the model saw: the image, dimmed */
                for (int c = 0; c < 3; c++)
                    pix[o + c] = (uint8_t)(base[o + c] / 3);
                continue;
            }
            int x0, x1;
            double fx = view_source(x, rect[0], rect[2], mw, &x0, &x1);
            double t =
                (1 - fy) *
                    ((1 - fx) * norm[(size_t)y0 * mw + x0] + fx * norm[(size_t)y0 * mw + x1]) +
                fy * ((1 - fx) * norm[(size_t)y1 * mw + x0] + fx * norm[(size_t)y1 * mw + x1]);
            uint8_t col[3];
            map_color((float)t, col);
            for (int c = 0; c < 3; c++)
                pix[o + c] = (uint8_t)((base[o + c] + col[c] + 1) / 2);
        }
    }
}

typedef struct png_sink {
    pgd_outfile *f;
    int failed;
} png_sink;

static void png_write_cb(void *ctx, void *data, int size)
{
    png_sink *s = ctx;
    if (!s->failed && size > 0 && pgd_outfile_write(s->f, data, (size_t)size, NULL) != PGD_OK)
        s->failed = 1;
}

int map_write_rgb_png_to(pgd_outfile *f, const uint8_t *rgb, int w, int h, pgd_error **err)
{
    if (!f || !rgb || w < 1 || h < 1)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT, "map_write_rgb_png_to: no pixels");
    png_sink sink = {f, 0};
    if (!stbi_write_png_to_func(png_write_cb, &sink, w, h, 3, rgb, w * 3))
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY,
                             "'%s': stbi_write_png failed (out of memory?)",
                             pgd_outfile_get_path(f));
    if (sink.failed)
        return pgd_outfile_write(f, NULL, 0, err); /* reports the remembered write error */
    return PGD_OK;
}

int map_write_png(const char *path, const pgd_image *base, const float *map, int mw, int mh,
                  pgd_error **err)
{
    double full[4] = {0, 0, base ? pgd_image_get_width(base) : 0,
                      base ? pgd_image_get_height(base) : 0};
    return map_write_png_view(path, base, map, mw, mh, full, err);
}

int map_write_png_view(const char *path, const pgd_image *base, const float *map, int mw, int mh,
                       const double rect[4], pgd_error **err)
{
    if (!path)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                             "map_write_png: path, image or map is NULL");
    pgd_outfile *f = NULL;
    int rc = pgd_outfile_open(path, &f, err);
    if (!rc)
        rc = map_write_png_view_to(f, base, map, mw, mh, rect, err);
    if (rc) {
        pgd_outfile_abort(f);
        return rc;
    }
    return pgd_outfile_commit(f, err);
}

int map_write_png_view_to(pgd_outfile *f, const pgd_image *base, const float *map, int mw, int mh,
                          const double rect[4], pgd_error **err)
{
    const char *path = pgd_outfile_get_path(f);
    if (!f || !base || !pgd_image_get_data(base) || !map)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                             "map_write_png: file, image or map is NULL");
    if (mw < 1 || mh < 1 || (long long)mw * mh > PGD_IMAGE_MAX_PIXELS)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                             "heat map '%s': map size %d x %d is not in 1 .. 8192 x 8192", path, mw,
                             mh);
    if (!rect || !(rect[2] > rect[0]) || !(rect[3] > rect[1]))
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                             "heat map '%s': the map's rectangle is empty", path);
    int w = pgd_image_get_width(base), h = pgd_image_get_height(base);
    size_t n = (size_t)mw * mh;
    float *norm = malloc(n * sizeof *norm);
    uint8_t *pix = malloc((size_t)w * h * 3);
    if (!norm || !pix) {
        free(norm);
        free(pix);
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "heat map '%s': out of memory", path);
    }
    normalise(map, n, norm);
    draw(pgd_image_get_data(base), w, h, norm, mw, mh, rect, pix);
    free(norm);
    png_sink sink = {f, 0};
    int rc = PGD_OK;
    if (!stbi_write_png_to_func(png_write_cb, &sink, w, h, 3, pix, w * 3))
        rc = pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY,
                           "heat map '%s': stbi_write_png failed (out of memory?)", path);
    else if (sink.failed)
        rc = pgd_outfile_write(f, NULL, 0, err); /* reports the remembered write error */
    free(pix);
    return rc;
}

int map_write_grid_png_view_to(pgd_outfile *f, const pgd_image *base, const float *maps, int count,
                               int mw, int mh, const double rect[4], pgd_error **err)
{
    const char *path = f ? pgd_outfile_get_path(f) : "?";
    if (!f || !base || !pgd_image_get_data(base) || !maps || count < 1 || count > 1024)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                             "map grid '%s': file, image or maps missing, or not 1..1024 maps",
                             path);
    if (mw < 1 || mh < 1 || (long long)mw * mh > PGD_IMAGE_MAX_PIXELS)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                             "map grid '%s': map size %d x %d is not in 1 .. 8192 x 8192", path, mw,
                             mh);
    if (!rect || !(rect[2] > rect[0]) || !(rect[3] > rect[1]))
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                             "map grid '%s': the maps' rectangle is empty", path);
    /* Tiles of the image's size, as square a grid as the count allows, row-major. */
    int w = pgd_image_get_width(base), h = pgd_image_get_height(base);
    int cols = 1;
    while (cols * cols < count)
        cols++;
    int rows = (count + cols - 1) / cols;
    if ((long long)w * cols * h * rows > 4LL * PGD_IMAGE_MAX_PIXELS)
        return pgd_error_set(err, PGD_ERR_TOO_LARGE,
                             "map grid '%s': %d tiles of %d x %d is too "
                             "large a picture",
                             path, count, w, h);
    size_t n = (size_t)mw * mh, gw = (size_t)w * cols;
    float *norm = malloc(n * sizeof *norm);
    uint8_t *tile = malloc((size_t)w * h * 3), *grid = calloc(gw * (size_t)h * rows * 3, 1);
    int rc = PGD_OK;
    if (!norm || !tile || !grid)
        rc = pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "map grid '%s': out of memory", path);
    for (int k = 0; !rc && k < count; k++) {
        normalise(maps + (size_t)k * n, n, norm);
        draw(pgd_image_get_data(base), w, h, norm, mw, mh, rect, tile);
        size_t x0 = (size_t)(k % cols) * w, y0 = (size_t)(k / cols) * h;
        for (int y = 0; y < h; y++)
            memcpy(grid + ((y0 + y) * gw + x0) * 3, tile + (size_t)y * w * 3, (size_t)w * 3);
    }
    png_sink sink = {f, 0};
    if (!rc &&
        !stbi_write_png_to_func(png_write_cb, &sink, (int)gw, h * rows, 3, grid, (int)gw * 3))
        rc = pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY,
                           "map grid '%s': stbi_write_png failed (out of memory?)", path);
    else if (!rc && sink.failed)
        rc = pgd_outfile_write(f, NULL, 0, err);
    free(norm);
    free(tile);
    free(grid);
    return rc;
}

int map_mass_mask(float *maps, int count, int n, double mass)
{
    int *order = malloc((size_t)(n > 0 ? n : 1) * sizeof *order);
    if (!order)
        return -1;
    for (int h = 0; h < count; h++) {
        float *row = maps + (size_t)h * (size_t)n;
        double total = 0;
        for (int t = 0; t < n; t++) {
            order[t] = t;
            total += row[t];
        }
        /* insertion sort by value, descending, stable (a map has a few hundred cells) */
        for (int i = 1; i < n; i++) {
            int v = order[i], j = i;
            while (j > 0 && row[order[j - 1]] < row[v]) {
                order[j] = order[j - 1];
                j--;
            }
            order[j] = v;
        }
        double cum = 0;
        int keep = 0;
        while (keep < n && cum < mass * total)
            cum += row[order[keep++]];
        for (int t = 0; t < n; t++)
            row[t] = 0.0f;
        for (int i = 0; i < keep; i++)
            row[order[i]] = 1.0f;
    }
    free(order);
    return 0;
}

/* Attention rollout (Abnar & Zuidema 2020): R ← (½·mean_h A + ½·I, rows renormalised) · R over
 * the layers; p holds this layer's probabilities [B, heads, T, T]. */
void map_rollout_step(double *R, const float *p, int64_t B, int64_t heads, int64_t T, double *tmp)
{
    for (int64_t b = 0; b < B; b++) {
        double *Rb = R + b * T * T;
        for (int64_t i = 0; i < T; i++) {
            double sum = 0;
            for (int64_t j = 0; j < T; j++) {
                double a = 0;
                for (int64_t h = 0; h < heads; h++)
                    a += p[((b * heads + h) * T + i) * T + j];
                a = 0.5 * a / (double)heads + (i == j ? 0.5 : 0.0);
                tmp[i * T + j] = a;
                sum += a;
            }
            for (int64_t j = 0; j < T; j++)
                tmp[i * T + j] /= sum > 0 ? sum : 1;
        }
        /* Rb = tmp · Rb, one row at a time through a scratch row at the end of tmp. */
        double *row = tmp + T * T;
        double *old = tmp + T * T + T;
        for (int64_t i = 0; i < T * T; i++)
            old[i] = Rb[i];
        for (int64_t i = 0; i < T; i++) {
            for (int64_t j = 0; j < T; j++)
                row[j] = 0;
            for (int64_t k = 0; k < T; k++) {
                double a = tmp[i * T + k];
                for (int64_t j = 0; j < T; j++)
                    row[j] += a * old[k * T + j];
            }
            for (int64_t j = 0; j < T; j++)
                Rb[i * T + j] = row[j];
        }
    }
}
