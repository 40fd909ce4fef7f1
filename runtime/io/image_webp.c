/* image_webp.c — WebP (lossy VP8, lossless VP8L, with or without alpha) through libwebp, as
 * Pillow's Image.open(f).convert("RGB") gives it.
 *
 * Pillow (WebPImagePlugin.py, _webp.c) decodes every WebP with libwebp's WebPAnimDecoder in
 * MODE_RGBA; for a still image that is one key frame decoded into a zeroed canvas with
 * libwebp's default options (fancy upsampling of the 4:2:0 chroma, no dithering), and
 * convert("RGB") drops the alpha. We decode the same way — WebPDecode into RGBA, defaults, one
 * thread — and drop alpha. Animated files are refused (Pillow would give the first frame).
 *
 * libwebp reports failures as a status code and frees its own memory; there is no setjmp. The
 * dimensions come from WebPGetFeatures (the VP8/VP8L/VP8X header) and are capped before the
 * pixel buffer is allocated. Truncated data is VP8_STATUS_NOT_ENOUGH_DATA from the
 * non-incremental decoder: refused, never partially filled. */
#include <stdio.h>
#include <stdlib.h>

#include <webp/decode.h>

#include "image_decode.h"

static const char *status_text(VP8StatusCode s)
{
    switch (s) {
    case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
    case VP8_STATUS_INVALID_PARAM: return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR: return "bitstream error";
    case VP8_STATUS_UNSUPPORTED_FEATURE: return "unsupported feature";
    case VP8_STATUS_SUSPENDED: return "suspended";
    case VP8_STATUS_USER_ABORT: return "aborted";
    case VP8_STATUS_NOT_ENOUGH_DATA: return "truncated (not enough data)";
    default: return "unknown error";
    }
}

int pgd__webp_decode(const unsigned char *p, size_t n, const char *name, int *w, int *h,
                     uint8_t **px, pgd_error **err)
{
    *px = NULL;
    WebPDecoderConfig cfg;
    if (!WebPInitDecoderConfig(&cfg))
        return pgd__error_set(err, PGD_ERR_INTERNAL, "image '%s': libwebp version mismatch", name);
    VP8StatusCode st = WebPGetFeatures(p, n, &cfg.input);
    if (st != VP8_STATUS_OK)
        return pgd__error_set(err, PGD_ERR_FORMAT, "image '%s': corrupt WebP header: %s", name,
                              status_text(st));
    if (cfg.input.has_animation)
        return pgd__error_set(err, PGD_ERR_UNSUPPORTED,
                              "image '%s': animated WebP is not supported", name);
    int rc = pgd__image_check_size(name, "WebP", cfg.input.width, cfg.input.height, err);
    if (rc)
        return rc;
    int iw = cfg.input.width, ih = cfg.input.height;
    size_t npx = (size_t)iw * ih;
    uint8_t *rgba = malloc(npx * 4);
    if (!rgba)
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY,
                              "image '%s': out of memory for %d x %d WebP pixels", name, iw, ih);
    cfg.output.colorspace = MODE_RGBA;
    cfg.output.is_external_memory = 1;
    cfg.output.u.RGBA.rgba = rgba;
    cfg.output.u.RGBA.stride = iw * 4;
    cfg.output.u.RGBA.size = npx * 4;
    cfg.options.use_threads = 0;
    st = WebPDecode(p, n, &cfg);
    WebPFreeDecBuffer(&cfg.output); /* nothing to free with external memory; the API asks it */
    if (st != VP8_STATUS_OK || cfg.output.width != iw || cfg.output.height != ih) {
        free(rgba);
        return pgd__error_set(err, PGD_ERR_FORMAT, "image '%s': corrupt WebP data: %s", name,
                              st != VP8_STATUS_OK ? status_text(st)
                                                  : "size changed while decoding");
    }
    /* RGBA -> RGB in place: each write lands at or before the byte it was read from. */
    for (size_t i = 0; i < npx; i++) {
        rgba[3 * i] = rgba[4 * i];
        rgba[3 * i + 1] = rgba[4 * i + 1];
        rgba[3 * i + 2] = rgba[4 * i + 2];
    }
    uint8_t *shrunk = realloc(rgba, npx * 3);
    *px = shrunk ? shrunk : rgba;
    *w = iw;
    *h = ih;
    return PGD_OK;
}

const char *pgd__webp_library(void)
{
    static _Thread_local char buf[32]; /* per thread: no race on the text */
    int v = WebPGetDecoderVersion();
    snprintf(buf, sizeof buf, "libwebp %d.%d.%d", (v >> 16) & 255, (v >> 8) & 255, v & 255);
    return buf;
}
