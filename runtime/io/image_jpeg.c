/* image_jpeg.c — JPEG through libjpeg(-turbo) with the settings Pillow uses, so that the pixels
 * equal Pillow's Image.open(f).convert("RGB") exactly.
 *
 * What Pillow does (JpegImagePlugin.py and libImaging/JpegDecode.c, read for this): the mode
 * follows the number of components in SOF — 1 "L", 3 "RGB", 4 "CMYK", anything else refused —
 * and libjpeg is asked for that colour space (out_color_space JCS_GRAYSCALE, JCS_RGB or
 * JCS_CMYK) while libjpeg itself decides what the file holds (JFIF, Adobe transform, component
 * ids: YCbCr, RGB, CMYK or YCCK). Every other setting is libjpeg's default: the accurate integer
 * IDCT (JDCT_ISLOW), fancy (triangle) upsampling of subsampled chroma, block smoothing, no
 * scaling. CMYK is always taken as Adobe-inverted ("CMYK;I", "assume adobe conventions") and
 * converted to RGB by Pillow's cmyk2rgb: with nk = 255 - k, r = nk - nk * c / 255, where
 * x * y / 255 is the rounded ((t >> 8) + t) >> 8 of t = x * y + 128. "L" becomes RGB by
 * copying the grey value. EXIF orientation is not applied (Pillow and torchvision don't).
 *
 * Where we are stricter than Pillow (which decodes whatever libjpeg gives it): a libjpeg
 * warning that means pixels were invented — premature end of file or of a data segment, bad
 * Huffman or arithmetic codes, resynchronisation, too much data, a broken progression — is an
 * error here, not a grey-filled image. Harmless warnings (extraneous bytes between markers, an
 * unknown JFIF revision or Adobe transform code, a bad ICC marker) are ignored, as is a file that
 * ends right after its last scan without EOI. A progressive file may have at most MAX_SCANS
 * scans (each scan re-reads the whole coefficient buffer: thousands of tiny scans are a cheap
 * way to spend minutes of CPU).
 *
 * libjpeg reports errors through error_exit, which must not return: ours formats the message
 * and longjmps back into decode_jpeg, the only function with a setjmp. Everything libjpeg
 * allocates is released by jpeg_destroy_decompress, and our two buffers live in the context
 * struct, so the caller frees the same things on every path. (libjpeg's memory manager has no
 * allocator hook in its API, so the allocation-failure walk of tests/test_hostio.c reaches our
 * allocations here but not libjpeg's own; those are pooled and all released by
 * jpeg_destroy_decompress, which every path calls.) */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

#include "image_decode.h"

#define MAX_SCANS 1000

#define STR_(x) #x
#define STR(x) STR_(x)

typedef struct jpeg_ctx {
    struct jpeg_decompress_struct cinfo;
    struct jpeg_error_mgr jerr;
    struct jpeg_source_mgr src;
    struct jpeg_progress_mgr progress;
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX + 64];
    const unsigned char *data;
    size_t size;
    int finishing; /* every scanline read: a missing EOI is harmless now */
    int min_side;  /* > 0: scale down in the IDCT while the shorter side stays >= min_side */
    uint8_t *out;  /* w * h * 3 */
    JSAMPLE *row;  /* one row of 1 or 4 components */
} jpeg_ctx;

/* cinfo is the first member of jpeg_ctx. */
static jpeg_ctx *ctx_of(j_common_ptr c)
{
    return (jpeg_ctx *)(void *)c;
}

static void on_error(j_common_ptr c)
{
    jpeg_ctx *x = ctx_of(c);
    (*c->err->format_message)(c, x->msg);
    longjmp(x->jump, 1);
}

static void on_message(j_common_ptr c, int level)
{
    if (level >= 0)
        return; /* trace messages */
    switch (c->err->msg_code) {
    case JWRN_EXTRANEOUS_DATA:
    case JWRN_JFIF_MAJOR:
    case JWRN_ADOBE_XFORM:
    case JWRN_BOGUS_ICC: return;
    case JWRN_JPEG_EOF:
        if (ctx_of(c)->finishing)
            return;
        break;
    default: break;
    }
    on_error(c);
}

static void on_output(j_common_ptr c)
{
    (void)c; /* never print */
}

static void on_progress(j_common_ptr c)
{
    jpeg_ctx *x = ctx_of(c);
    if (x->cinfo.input_scan_number > MAX_SCANS) {
        snprintf(x->msg, sizeof x->msg, "more than %d scans", MAX_SCANS);
        longjmp(x->jump, 1);
    }
}

/* A source manager over the bytes in memory: the end of the data is a fake EOI marker plus the
 * JWRN_JPEG_EOF warning, which on_message turns into an error unless decoding has finished. */
static void src_init(j_decompress_ptr d)
{
    (void)d;
}

static boolean src_fill(j_decompress_ptr d)
{
    static const JOCTET eoi[2] = {0xFF, JPEG_EOI};
    WARNMS(d, JWRN_JPEG_EOF);
    d->src->next_input_byte = eoi;
    d->src->bytes_in_buffer = 2;
    return TRUE;
}

static void src_skip(j_decompress_ptr d, long n)
{
    if (n <= 0)
        return;
    while ((size_t)n > d->src->bytes_in_buffer) {
        n -= (long)d->src->bytes_in_buffer;
        (void)src_fill(d);
    }
    d->src->next_input_byte += n;
    d->src->bytes_in_buffer -= (size_t)n;
}

static void src_term(j_decompress_ptr d)
{
    (void)d;
}

/* Pillow's MULDIV255: x * y / 255 rounded. */
static int muldiv255(int a, int b)
{
    int t = a * b + 128;
    return ((t >> 8) + t) >> 8;
}

static uint8_t clip8(int v)
{
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* Returns 0 and the pixels in x->out, 1 with the libjpeg message in x->msg, or a pgd status
 * (size check) with *err set. Long because everything between setjmp and the end of decoding
 * must stay in the one function libjpeg's error exit longjmps back into. */
static int decode_jpeg(jpeg_ctx *x, const char *name, int *w, int *h, pgd_error **err)
{
    if (setjmp(x->jump))
        return 1;
    x->cinfo.err = jpeg_std_error(&x->jerr);
    x->jerr.error_exit = on_error;
    x->jerr.emit_message = on_message;
    x->jerr.output_message = on_output;
    jpeg_create_decompress(&x->cinfo);
    x->src.init_source = src_init;
    x->src.fill_input_buffer = src_fill;
    x->src.skip_input_data = src_skip;
    x->src.resync_to_restart = jpeg_resync_to_restart;
    x->src.term_source = src_term;
    x->src.next_input_byte = x->data;
    x->src.bytes_in_buffer = x->size;
    x->cinfo.src = &x->src;
    x->progress.progress_monitor = on_progress;
    x->cinfo.progress = &x->progress;

    jpeg_read_header(&x->cinfo, TRUE);
    int rc = pgd__image_check_size(name, "JPEG", x->cinfo.image_width, x->cinfo.image_height, err);
    if (rc)
        return rc;
    int nc = x->cinfo.num_components;
    if (nc != 1 && nc != 3 && nc != 4) {
        snprintf(x->msg, sizeof x->msg, "%d colour components (only 1, 3 and 4 are read)", nc);
        return 1;
    }
    x->cinfo.out_color_space = nc == 1 ? JCS_GRAYSCALE : nc == 3 ? JCS_RGB : JCS_CMYK;
    /* libjpeg's defaults, which Pillow keeps: stated so that nothing changes them silently. */
    x->cinfo.dct_method = JDCT_ISLOW;
    x->cinfo.do_fancy_upsampling = TRUE;
    x->cinfo.scale_num = x->cinfo.scale_denom = 1;
    if (x->min_side > 0) {
        /* --fast-decode: libjpeg's scaled IDCT, 1/8 of the size first; not Pillow-exact. */
        unsigned shorter = x->cinfo.image_width < x->cinfo.image_height ? x->cinfo.image_width
                                                                        : x->cinfo.image_height;
        x->cinfo.scale_denom = 8;
        for (x->cinfo.scale_num = 1; x->cinfo.scale_num < 8; x->cinfo.scale_num *= 2)
            if ((shorter * x->cinfo.scale_num + 7) / 8 >= (unsigned)x->min_side)
                break;
    }
    jpeg_calc_output_dimensions(&x->cinfo);
    unsigned want_w = x->cinfo.output_width, want_h = x->cinfo.output_height;
    jpeg_start_decompress(&x->cinfo);
    int ow = (int)x->cinfo.output_width, oh = (int)x->cinfo.output_height;
    int oc = x->cinfo.output_components;
    if ((unsigned)ow != want_w || (unsigned)oh != want_h || oc != nc) {
        snprintf(x->msg, sizeof x->msg, "decoder output %d x %d x %d for a %u x %u x %d image", ow,
                 oh, oc, x->cinfo.image_width, x->cinfo.image_height, nc);
        return 1;
    }
    x->out = malloc((size_t)ow * oh * 3);
    x->row = malloc((size_t)ow * oc * sizeof *x->row);
    if (!x->out || !x->row)
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY,
                              "image '%s': out of memory for %d x %d JPEG pixels", name, ow, oh);
    while (x->cinfo.output_scanline < x->cinfo.output_height) {
        uint8_t *o = x->out + (size_t)x->cinfo.output_scanline * ow * 3;
        JSAMPROW r = oc == 3 ? o : x->row;
        if (jpeg_read_scanlines(&x->cinfo, &r, 1) != 1) {
            snprintf(x->msg, sizeof x->msg, "no data for row %u", x->cinfo.output_scanline);
            return 1;
        }
        if (oc == 1) {
            for (int i = 0; i < ow; i++)
                o[3 * i] = o[3 * i + 1] = o[3 * i + 2] = r[i];
        } else if (oc == 4) {
            for (int i = 0; i < ow; i++) {
                const JSAMPLE *s = r + 4 * i;
                int nk = s[3]; /* 255 - (255 - k): the inverted K */
                for (int c = 0; c < 3; c++)
                    o[3 * i + c] = clip8(nk - muldiv255(255 - s[c], nk));
            }
        }
    }
    x->finishing = 1;
    jpeg_finish_decompress(&x->cinfo);
    *w = ow;
    *h = oh;
    return 0;
}

int pgd__jpeg_decode(const unsigned char *p, size_t n, const char *name, int min_side, int *w,
                     int *h, uint8_t **px, pgd_error **err)
{
    *px = NULL;
    jpeg_ctx *x = calloc(1, sizeof *x);
    if (!x)
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "image '%s': out of memory", name);
    x->data = p;
    x->size = n;
    x->min_side = min_side;
    int rc = decode_jpeg(x, name, w, h, err);
    jpeg_destroy_decompress(&x->cinfo);
    free(x->row);
    if (rc == 0)
        *px = x->out;
    else
        free(x->out);
    if (rc == 1 && x->jerr.msg_code == JERR_OUT_OF_MEMORY)
        rc = pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "image '%s': libjpeg: %s", name,
                            x->msg);
    else if (rc == 1)
        rc = pgd__error_set(err, PGD_ERR_FORMAT, "image '%s': corrupt JPEG: %s", name, x->msg);
    free(x);
    return rc;
}

const char *pgd__jpeg_library(void)
{
#ifdef LIBJPEG_TURBO_VERSION
    return "libjpeg-turbo " STR(LIBJPEG_TURBO_VERSION) " (libjpeg API " STR(JPEG_LIB_VERSION) ")";
#else
    return "libjpeg (API " STR(JPEG_LIB_VERSION) ")";
#endif
}
