/* image_decode.h — the image decoders behind pgd_image_load_memory (internal to runtime/io).
 *
 * Each decoder takes the whole file in memory (already sniffed by its magic bytes), reads the
 * dimensions from the header and checks them with pgd__image_check_size before it allocates
 * pixels, and on success returns *px: width * height * 3 RGB bytes from malloc, converted to RGB
 * exactly as Pillow's Image.open(f).convert("RGB") does. On failure it sets *err naming the
 * file, frees everything it allocated and leaves *px NULL. Compiled only when the library was
 * found (pgd_config.h: PGD_HAVE_LIBJPEG, PGD_HAVE_LIBPNG, PGD_HAVE_LIBWEBP). */
#ifndef PGD_IMAGE_DECODE_H
#define PGD_IMAGE_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* A decoded image (pagoda.h's pgd_image), shared by image.c and image_resample.c. */
struct pgd_image {
    int width, height;
    uint8_t *data; /* width * height * 3, from stbi_load_from_memory or malloc */
    /* The size of the decoded image a thumbnail was made from (else width, height). */
    int src_width, src_height;
    int own_pixels; /* data from our malloc (thumbnails, the library decoders), not stb_image */
};

/* PGD_OK when 1 <= w, h and w * h <= PGD_IMAGE_MAX_PIXELS, else the error (PGD_ERR_FORMAT or
 * PGD_ERR_TOO_LARGE) naming the file and format. */
int pgd__image_check_size(const char *name, const char *format, long long w, long long h,
                          pgd_error **err);

/* min_side > 0: decode at the smallest libjpeg scale (1/8, 1/4, 1/2) whose shorter side stays
 * >= min_side (pgd_image_load_memory_scaled); 0: full size, Pillow-exact. */
int pgd__jpeg_decode(const unsigned char *p, size_t n, const char *name, int min_side, int *w,
                     int *h, uint8_t **px, pgd_error **err);
int pgd__png_decode(const unsigned char *p, size_t n, const char *name, int *w, int *h,
                    uint8_t **px, pgd_error **err);
int pgd__webp_decode(const unsigned char *p, size_t n, const char *name, int *w, int *h,
                     uint8_t **px, pgd_error **err);

/* Tests and fuzz targets only (not thread-safe): on != 0 sends JPEG and PNG to stb_image even
 * where the build has libjpeg/libpng (as a -Djpeg=disabled -Dpng=disabled build would), so that
 * one build tests both paths; pgd_image_decoder follows. WebP is not affected. */
void pgd__image_use_stb(int on);

/* The library and version serving each format, e.g. "libjpeg-turbo 2.1.5 (libjpeg API 62)". */
const char *pgd__jpeg_library(void);
const char *pgd__png_library(void);
const char *pgd__webp_library(void);

#endif
