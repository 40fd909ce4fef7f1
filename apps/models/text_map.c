/* text_map.c — the token x token attention grid (text_map.h). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wmissing-braces"
#endif
#include <stb_easy_font.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

#include "maps.h"
#include "text_map.h"

enum { LABEL_CHARS = 14, GLYPH_H = 12, TITLE_H = 18, GAP = 12 };

typedef struct canvas {
    uint8_t *px;
    int w, h;
} canvas;

static void fill_rect(canvas *c, int x0, int y0, int x1, int y1, const uint8_t rgb[3])
{
    x0 = x0 < 0 ? 0 : x0, y0 = y0 < 0 ? 0 : y0;
    x1 = x1 > c->w ? c->w : x1, y1 = y1 > c->h ? c->h : y1;
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++)
            memcpy(c->px + ((size_t)y * c->w + x) * 3, rgb, 3);
}

/* The label of s: printable ASCII, other bytes '?', at most LABEL_CHARS characters. */
static void label(const char *s, char *buf)
{
    int n = 0;
    for (; s && s[n] && n < LABEL_CHARS; n++)
        buf[n] = (unsigned char)s[n] >= 32 && (unsigned char)s[n] < 127 ? s[n] : '?';
    buf[n] = 0;
}

/* Text at (x, y), black; rotated: reading upwards, its baseline on the left of (x, y + width),
 * for column labels. */
static void draw_text(canvas *c, int x, int y, const char *text, int rotated)
{
    static char quads[LABEL_CHARS * 64 * 32 + 4096];
    static const uint8_t ink[3] = {20, 20, 20};
    int n = stb_easy_font_print(0, 0, (char *)text, NULL, quads, sizeof quads);
    int tw = stb_easy_font_width((char *)text);
    for (int q = 0; q < n; q++) {
        const float *v = (const float *)(quads + q * 64); /* x, y, z, rgba per vertex */
        int qx0 = (int)v[0], qy0 = (int)v[1], qx1 = (int)v[8], qy1 = (int)v[9];
        if (!rotated)
            fill_rect(c, x + qx0, y + qy0, x + qx1, y + qy1, ink);
        else /* (qx, qy) -> (qy, tw - qx) */
            fill_rect(c, x + qy0, y + tw - qx1, x + qy1, y + tw - qx0, ink);
    }
}

typedef struct layout {
    int T, cell, lab, tile_w, tile_h, cols, rows;
} layout;

static void draw_tile(canvas *c, const layout *L, int x0, int y0, const float *m,
                      const char *const *tokens, const char *title)
{
    char buf[LABEL_CHARS + 1];
    draw_text(c, x0, y0 + 3, title ? title : "", 0);
    int gx = x0 + L->lab, gy = y0 + TITLE_H + L->lab;
    float top = 0.0f;
    for (int k = 0; k < L->T * L->T; k++)
        top = isfinite(m[k]) && m[k] > top ? m[k] : top;
    for (int i = 0; i < L->T; i++) {
        label(tokens[i], buf);
        int w = stb_easy_font_width(buf);
        draw_text(c, gx - w - 3, gy + i * L->cell + (L->cell - GLYPH_H) / 2 + 2, buf, 0);
        w = stb_easy_font_width(buf);
        draw_text(c, gx + i * L->cell + (L->cell - GLYPH_H) / 2 + 2, gy - w - 3, buf, 1);
        for (int j = 0; j < L->T; j++) {
            float v = m[(size_t)i * L->T + j];
            uint8_t rgb[3];
            map_color(top > 0 && isfinite(v) ? v / top : 0.0f, rgb);
            fill_rect(c, gx + j * L->cell, gy + i * L->cell, gx + (j + 1) * L->cell - 1,
                      gy + (i + 1) * L->cell - 1, rgb);
        }
    }
}

int text_attention_png(pgd_outfile *f, const float *maps, int count, int T,
                       const char *const *tokens, const char *const *titles, pgd_error **err)
{
    if (T < 1 || T > 512 || count < 1 || count > 1024 || !maps || !tokens)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                             "attention map: %d maps of %d tokens (1 to 1024 maps of 1 to 512)",
                             count, T);
    layout L = {.T = T};
    L.cell = T <= 16 ? 24 : T <= 48 ? 12 : T <= 128 ? 6 : 3;
    char buf[LABEL_CHARS + 1];
    for (int i = 0; i < T; i++) {
        label(tokens[i], buf);
        int w = stb_easy_font_width(buf) + 6;
        L.lab = w > L.lab ? w : L.lab;
    }
    L.tile_w = L.lab + T * L.cell + GAP;
    L.tile_h = TITLE_H + L.lab + T * L.cell + GAP;
    L.cols = (int)ceil(sqrt((double)count));
    L.rows = (count + L.cols - 1) / L.cols;
    canvas c = {NULL, GAP + L.cols * L.tile_w, GAP + L.rows * L.tile_h};
    if ((int64_t)c.w * c.h > (int64_t)1 << 27)
        return pgd_error_set(err, PGD_ERR_TOO_LARGE,
                             "attention map: %d x %d pixels (choose fewer --layers or --heads)",
                             c.w, c.h);
    if (!(c.px = malloc((size_t)c.w * c.h * 3)))
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "attention map");
    memset(c.px, 255, (size_t)c.w * c.h * 3);
    for (int k = 0; k < count; k++)
        draw_tile(&c, &L, GAP + (k % L.cols) * L.tile_w, GAP + (k / L.cols) * L.tile_h,
                  maps + (size_t)k * T * T, tokens, titles ? titles[k] : NULL);
    int rc = map_write_rgb_png_to(f, c.px, c.w, c.h, err);
    free(c.px);
    return rc;
}
