/* text_map.c — token × token attention maps as a labelled grid of heat maps (text_map.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* stb_easy_font.h is a header of static functions, some unused here, written loosely */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wmissing-braces"
#include <stb_easy_font.h>
#pragma GCC diagnostic pop

#include "maps.h"
#include "text_map.h"

#define LABEL_CHARS 12
#define TITLE_H 16

typedef struct canvas {
    uint8_t *px;
    int w, h;
} canvas;

static void fill(canvas *c, int x0, int y0, int x1, int y1, const uint8_t rgb[3])
{
    x0 = x0 < 0 ? 0 : x0, y0 = y0 < 0 ? 0 : y0;
    x1 = x1 > c->w ? c->w : x1, y1 = y1 > c->h ? c->h : y1;
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++)
            memcpy(c->px + ((size_t)y * c->w + x) * 3, rgb, 3);
}

/* Text from (x, y): left to right, or with up != 0 bottom to top (the text's x going up from
 * y, its y going right from x). */
static void text(canvas *c, int x, int y, const char *s, int up)
{
    static const uint8_t ink[3] = {20, 20, 20};
    char quads[LABEL_CHARS * 4 * 270];
    int n = stb_easy_font_print(0, 0, (char *)s, NULL, quads, sizeof quads);
    for (int q = 0; q < n; q++) {
        const float *v = (const float *)(quads + q * 64);
        int qx0 = (int)v[0], qy0 = (int)v[1], qx1 = (int)v[8], qy1 = (int)v[9];
        if (up)
            fill(c, x + qy0, y - qx1, x + qy1, y - qx0, ink);
        else
            fill(c, x + qx0, y + qy0, x + qx1, y + qy1, ink);
    }
}

/* A label as stb_easy_font can draw it: printable ASCII, at most LABEL_CHARS characters. */
static void shown(const char *s, char out[LABEL_CHARS + 1])
{
    int k = 0;
    for (; s && *s && k < LABEL_CHARS; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch >= 0x80 && (ch & 0xC0) == 0x80)
            continue; /* one '?' for a whole UTF-8 character */
        out[k++] = ch >= 32 && ch < 127 ? (char)ch : ch == '\n' ? '|' : '?';
    }
    out[k] = '\0';
}

typedef struct layout {
    int n, cell, margin, tile_w, tile_h, cols;
} layout;

static void tile(canvas *c, const layout *L, int x0, int y0, const float *map, const char *title,
                 const char *const *labels)
{
    static const uint8_t hidden[3] = {225, 225, 225};
    int n = L->n, gx = x0 + L->margin, gy = y0 + TITLE_H + L->margin;
    text(c, x0 + 2, y0 + 3, title, 0);
    float top = 0;
    for (int i = 0; i < n * n; i++)
        top = map[i] > top ? map[i] : top;
    for (int i = 0; i < n; i++) {
        char lb[LABEL_CHARS + 1];
        shown(labels[i], lb);
        int tw = stb_easy_font_width(lb);
        text(c, gx - tw - 3, gy + i * L->cell + (L->cell - 7) / 2, lb, 0);
        text(c, gx + i * L->cell + (L->cell - 7) / 2, gy - 3, lb, 1);
        for (int j = 0; j < n; j++) {
            float p = map[(size_t)i * n + j];
            uint8_t rgb[3];
            if (p == 0.0f)
                memcpy(rgb, hidden, 3);
            else
                map_color(top > 0 ? p / top : 0, rgb);
            fill(c, gx + j * L->cell, gy + i * L->cell, gx + (j + 1) * L->cell,
                 gy + (i + 1) * L->cell, rgb);
        }
    }
}

int text_map_write_png(pgd_outfile *f, const float *maps, int count, int n,
                       const char *const *titles, const char *const *labels, pgd_error **err)
{
    if (n < 1 || n > 512 || count < 1 || count > 256)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT,
                             "attention map: %d tokens in %d maps (1..512 tokens, 1..256 maps)", n,
                             count);
    layout L = {.n = n, .cell = 384 / n};
    L.cell = L.cell < 3 ? 3 : L.cell > 28 ? 28 : L.cell;
    L.margin = 6 * LABEL_CHARS + 8;
    L.tile_w = L.margin + n * L.cell + 16;
    L.tile_h = TITLE_H + L.margin + n * L.cell + 16;
    while (L.cols * L.cols < count)
        L.cols++;
    int rows = (count + L.cols - 1) / L.cols;
    canvas c = {NULL, L.cols * L.tile_w, rows * L.tile_h};
    if (!(c.px = malloc((size_t)c.w * c.h * 3)))
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "attention map: %d x %d pixels", c.w,
                             c.h);
    memset(c.px, 255, (size_t)c.w * c.h * 3);
    for (int k = 0; k < count; k++)
        tile(&c, &L, (k % L.cols) * L.tile_w, (k / L.cols) * L.tile_h, maps + (size_t)k * n * n,
             titles[k], labels);
    int rc = map_write_rgb_png_to(f, c.px, c.w, c.h, err);
    free(c.px);
    return rc;
}
