/* image_png.c — PNG through libpng, converted to RGB as Pillow's Image.open(f).convert("RGB")
 * does.
 *
 * Why libpng and not libspng: both are in Debian 12 (libpng-dev 1.6.39, libspng-dev 0.7.3), but
 * libpng is the one every distribution and CI image already has (it comes with most desktop
 * and imaging stacks, Debian's security team tracks it closely, and Pillow's own wheels link it
 * for saving), its API has been stable since 1.6 (2013), and its error handling (a callback that
 * must not return, plus setjmp) is the same pattern as libjpeg's, so one hardening style covers
 * both. libspng would save the setjmp but adds a dependency few machines carry.
 *
 * Pillow decodes PNG with its own unpackers over zlib, not with libpng, so the conversions are
 * written out here to match its modes (checked bit for bit by tools/golden/make-decode-golden.py):
 *   grey 1/2/4 bit ("1", "L;2", "L;4"): scaled to 0..255 (x 255, x 85, x 17) — libpng's
 *     png_set_expand_gray_1_2_4_to_8 does the same;
 *   grey 8 ("L") and grey+alpha 8 ("LA"): the grey value in all three channels, alpha dropped;
 *   grey 16 ("I;16"): Pillow's I;16 -> RGB clips the 16-bit value to 255 (so 0..255 keep their
 *     value and everything brighter is white: a 16-bit grey photo comes out almost all white,
 *     and that is what torchvision sees);
 *   grey+alpha 16 ("LA;16B"), RGB 16 ("RGB;16B"), RGBA 16 ("RGBA;16B"): the high byte;
 *   palette ("P"): the palette entry (tRNS ignored), RGB 8: as is; RGBA 8: alpha dropped.
 * Gamma, colour profiles and tRNS on grey/RGB are ignored, as Pillow ignores them in convert().
 *
 * Before libpng sees the file, image.c's png_check has verified that every chunk is complete,
 * every CRC right and IEND present (Pillow refuses the same files). libpng's errors come
 * through on_error, which must not return: it keeps the message and longjmps into decode_png,
 * the only function with a setjmp; png_destroy_read_struct frees libpng's memory and our
 * buffers live in the context, so every path frees the same things. Warnings are ignored.
 * libpng allocates through png_alloc/png_dealloc (plain malloc and free in this file). */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>

#include "image_decode.h"

typedef struct png_ctx {
    png_structp png;
    png_infop info;
    const unsigned char *data;
    size_t size, pos;
    char msg[200];
    uint8_t *out;  /* w * h * 3 */
    uint8_t *rows; /* one row, or the whole image for an interlaced file */
    png_bytep *rowp;
    int oom; /* an allocation failed (libpng then reports "Out of memory" as an error) */
} png_ctx;

/* libpng allocates through these, so that its allocations are ours: the allocation-failure walk
 * of tests/test_hostio.c (malloc wrapped at link time) reaches them too. */
static png_voidp png_alloc(png_structp png, png_alloc_size_t n)
{
    void *q = malloc(n);
    if (!q)
        ((png_ctx *)png_get_mem_ptr(png))->oom = 1;
    return q;
}

static void png_dealloc(png_structp png, png_voidp q)
{
    (void)png;
    free(q);
}

static void on_error(png_structp png, png_const_charp msg)
{
    png_ctx *x = png_get_error_ptr(png);
    snprintf(x->msg, sizeof x->msg, "%s", msg ? msg : "libpng error");
    png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

static void on_read(png_structp png, png_bytep buf, size_t n)
{
    png_ctx *x = png_get_io_ptr(png);
    if (n > x->size - x->pos)
        png_error(png, "truncated: read past the end of the file");
    memcpy(buf, x->data + x->pos, n);
    x->pos += n;
}

/* One decoded row (ch channels of depth bits, after libpng's expansion) to RGB as Pillow. */
static void row_to_rgb(const uint8_t *s, int w, int ch, int depth, uint8_t *o)
{
    int bps = depth / 8, stride = ch * bps;
    for (int i = 0; i < w; i++, s += stride, o += 3) {
        if (ch <= 2) {
            uint8_t v = bps == 1 ? s[0] : ch == 1 ? (s[0] ? 255 : s[1]) : s[0];
            o[0] = o[1] = o[2] = v;
        } else {
            o[0] = s[0];
            o[1] = s[bps];
            o[2] = s[2 * bps];
        }
    }
}

static int decode_png(png_ctx *x, const char *name, int *w, int *h, pgd_error **err)
{
    if (setjmp(png_jmpbuf(x->png)))
        return 1;
    png_set_read_fn(x->png, x, on_read);
    /* Benign errors (a palette index past the palette, ...) as warnings: Pillow decodes those. */
    png_set_benign_errors(x->png, 1);
    /* The size limit is ours (below); libpng's own default of 1,000,000 per side is looser. */
    png_set_user_limits(x->png, 0x7fffffff, 0x7fffffff);
    png_read_info(x->png, x->info);
    png_uint_32 pw = png_get_image_width(x->png, x->info);
    png_uint_32 ph = png_get_image_height(x->png, x->info);
    int rc = pgd__image_check_size(name, "PNG", pw, ph, err);
    if (rc)
        return rc;
    int type = png_get_color_type(x->png, x->info);
    int depth = png_get_bit_depth(x->png, x->info);
    if (type == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(x->png);
    if (type == PNG_COLOR_TYPE_GRAY && depth < 8)
        png_set_expand_gray_1_2_4_to_8(x->png);
    int passes = png_set_interlace_handling(x->png);
    png_read_update_info(x->png, x->info);
    int ch = png_get_channels(x->png, x->info);
    int od = png_get_bit_depth(x->png, x->info);
    size_t rowbytes = png_get_rowbytes(x->png, x->info);
    if (ch < 1 || ch > 4 || (od != 8 && od != 16) || rowbytes != (size_t)pw * ch * (od / 8)) {
        snprintf(x->msg, sizeof x->msg, "unexpected layout after expansion: %d channels of %d bits",
                 ch, od);
        return 1;
    }
    size_t nrows = passes > 1 ? ph : 1;
    x->out = malloc((size_t)pw * ph * 3);
    x->rows = malloc(rowbytes * nrows);
    x->rowp = passes > 1 ? malloc(ph * sizeof *x->rowp) : NULL;
    if (!x->out || !x->rows || (passes > 1 && !x->rowp))
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY,
                              "image '%s': out of memory for %u x %u PNG pixels", name, pw, ph);
    if (passes > 1) {
        for (png_uint_32 y = 0; y < ph; y++)
            x->rowp[y] = x->rows + rowbytes * y;
        png_read_image(x->png, x->rowp);
        for (png_uint_32 y = 0; y < ph; y++)
            row_to_rgb(x->rowp[y], (int)pw, ch, od, x->out + (size_t)y * pw * 3);
    } else {
        for (png_uint_32 y = 0; y < ph; y++) {
            png_read_row(x->png, x->rows, NULL);
            row_to_rgb(x->rows, (int)pw, ch, od, x->out + (size_t)y * pw * 3);
        }
    }
    *w = (int)pw;
    *h = (int)ph;
    return 0;
}

int pgd__png_decode(const unsigned char *p, size_t n, const char *name, int *w, int *h,
                    uint8_t **px, pgd_error **err)
{
    *px = NULL;
    png_ctx *x = calloc(1, sizeof *x);
    if (!x)
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "image '%s': out of memory", name);
    x->data = p;
    x->size = n;
    x->png = png_create_read_struct_2(PNG_LIBPNG_VER_STRING, x, on_error, on_warning, x, png_alloc,
                                      png_dealloc);
    x->info = x->png ? png_create_info_struct(x->png) : NULL;
    int rc;
    if (!x->info)
        rc = pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY,
                            "image '%s': out of memory starting libpng", name);
    else
        rc = decode_png(x, name, w, h, err);
    png_destroy_read_struct(x->png ? &x->png : NULL, x->info ? &x->info : NULL, NULL);
    free(x->rows);
    free(x->rowp);
    if (rc == 0)
        *px = x->out;
    else
        free(x->out);
    if (rc == 1 && x->oom)
        rc = pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "image '%s': out of memory in libpng",
                            name);
    else if (rc == 1)
        rc = pgd__error_set(err, PGD_ERR_FORMAT, "image '%s': corrupt PNG: %s", name, x->msg);
    free(x);
    return rc;
}

const char *pgd__png_library(void)
{
    return "libpng " PNG_LIBPNG_VER_STRING;
}
