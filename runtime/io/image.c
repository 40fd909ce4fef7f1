/* image.c — image loading and decoding (resampling and the presets: image_resample.c). (Drawing
 * maps over images is the models' business: apps/models/maps.c.)
 *
 * Decoders: JPEG through libjpeg-turbo (image_jpeg.c), PNG through libpng (image_png.c), WebP
 * through libwebp (image_webp.c), each when meson found the library (options jpeg, png, webp,
 * "auto"), with Pillow's settings so that the pixels equal Pillow's convert("RGB") exactly.
 * stb_image decodes BMP, and JPEG or PNG when their library is absent (then JPEGs differ from
 * Pillow by up to ~20 levels at sharp colour edges: another IDCT and chroma upsampling; 16-bit
 * PNGs and palette indices past PLTE differ completely). pgd_image_decoder says which decoder
 * serves a format in this build.
 *
 * Security (see ANCHORS.md): Debian's stb_image is v2.27 and lacks later fixes, and its shared
 * library has every decoder compiled in. So we pick the decoder ourselves: only files whose
 * magic bytes say JPEG, PNG or BMP reach stb_image. stb's probe order is JPEG, PNG, BMP, GIF,
 * PSD, PIC, PNM, HDR, TGA; the later ones test their own magic ("GIF8", "8BPS", 53 80 F6 34,
 * 'P', "#?") which none of our three magics carries, and TGA wants byte 1 (colour-map type)
 * <= 1, which is 0xD8, 0x50 or 0x4D for ours. So a file that fails its own decoder cannot fall
 * through to another one. The dimensions come from stbi_info_from_memory and are capped before
 * decoding. We never touch stb's global switches (flip on load and the like). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <stb_image.h>

#include "image_decode.h"
#include "internal.h"
#include "pgd_config.h"

/* Largest encoded file we read: an uncompressed 8192 x 8192 BMP is 192 MiB. */
#define MAX_FILE_BYTES ((size_t)512 << 20)

/* ---- loading ---- */

typedef enum img_format { FMT_UNKNOWN, FMT_JPEG, FMT_PNG, FMT_BMP, FMT_WEBP } img_format;

/* The format the magic bytes announce; *other names a recognised but refused format. */
static img_format sniff(const unsigned char *p, size_t n, const char **other)
{
    static const unsigned char png[8] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
    *other = NULL;
    if (n >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF)
        return FMT_JPEG;
    if (n >= 8 && !memcmp(p, png, 8))
        return FMT_PNG;
    if (n >= 2 && p[0] == 'B' && p[1] == 'M')
        return FMT_BMP;
    if (n >= 4 && !memcmp(p, "GIF8", 4))
        *other = "GIF";
    else if (n >= 2 && p[0] == 'P' && p[1] >= '1' && p[1] <= '7')
        *other = "PNM";
    else if (n >= 4 && !memcmp(p, "8BPS", 4))
        *other = "PSD";
    else if (n >= 2 && !memcmp(p, "#?", 2))
        *other = "HDR (Radiance)";
    else if (n >= 4 && p[0] == 0x53 && p[1] == 0x80 && p[2] == 0xF6 && p[3] == 0x34)
        *other = "PIC (Softimage)";
    else if (n >= 12 && !memcmp(p, "RIFF", 4) && !memcmp(p + 8, "WEBP", 4)) {
        if (PGD_HAVE_LIBWEBP)
            return FMT_WEBP;
        *other = "WebP (this build has no libwebp)";
    } else if (n >= 4 && (!memcmp(p, "II*\0", 4) || !memcmp(p, "MM\0*", 4)))
        *other = "TIFF";
    else if (n >= 4 && (p[0] == 0x89 && p[1] == 'P' && p[2] == 'N' && p[3] == 'G'))
        *other = "PNG with a damaged signature";
    return FMT_UNKNOWN;
}

static const char *format_name(img_format f)
{
    switch (f) {
    case FMT_JPEG: return "JPEG";
    case FMT_PNG: return "PNG";
    case FMT_BMP: return "BMP";
    case FMT_WEBP: return "WebP";
    default: return "unknown";
    }
}

/* stb_image 2.27 (Debian's) writes past its 257-entry size table when a JPEG Huffman table
 * (DHT) declares more than 256 codes (fixed upstream in 2.28; found here by fuzz_image). So
 * every DHT segment of the file — they may follow any scan in a progressive JPEG — is checked
 * before stb_image sees the data: each table's 16 counts sum to at most 256 and the table
 * fits in its segment. Entropy-coded data is skipped up to the next real marker (0xFF followed
 * by neither 0x00, a fill byte nor RST0..7). */
static int jpeg_tables_ok(const unsigned char *p, size_t n)
{
    size_t i = 2; /* after SOI */
    while (i + 1 < n) {
        if (p[i] != 0xFF) {
            i++;
            continue;
        }
        unsigned m = p[i + 1];
        if (m == 0x00 || m == 0xFF || (m >= 0xD0 && m <= 0xD7) || m == 0x01 || m == 0xD8) {
            i += m == 0xFF ? 1 : 2;
            continue;
        }
        if (m == 0xD9) /* EOI */
            break;
        if (i + 3 >= n)
            break; /* truncated: stb_image reports it */
        size_t seg = (size_t)p[i + 2] << 8 | p[i + 3], end = i + 2 + seg;
        if (seg < 2)
            break; /* stb_image rejects a bad length itself */
        if (m == 0xC4) {
            size_t q = i + 4, stop = end < n ? end : n;
            while (q < stop) {
                if (q + 17 > stop)
                    return 0;
                size_t codes = 0;
                for (int k = 0; k < 16; k++)
                    codes += p[q + 1 + k];
                if (codes > 256 || q + 17 + codes > stop)
                    return 0;
                q += 17 + codes;
            }
        }
        i = end;
    }
    return 1;
}

/* ---- refusing what the decoder would invent ----
 *
 * stb_image 2.27 fills in what a file lacks: a BMP whose pixel rows run past the end of the
 * file decodes with the missing rows as zeros (a 1,000-byte file declaring 8192 x 8192 becomes
 * a 192 MiB black image), and a PNG's chunk CRCs are never checked, so a corrupted byte inside
 * the compressed data gives a wrong image without an error. Pillow refuses both ("image file
 * is truncated", "broken PNG file"). So before stb_image sees the bytes, a BMP's declared pixel
 * data must fit in the file, and a PNG's chunks must be complete, their CRCs right and IEND
 * present. Each check returns NULL when the file passes, else what is wrong. */

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

/* CRC-32 (ISO 3309, as PNG uses it) over n bytes, continuing from crc. */
static uint32_t crc32_update(uint32_t crc, const unsigned char *p, size_t n)
{
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

/* Every chunk complete and with a correct CRC, the first IDAT not empty (stb_image 2.27 does
 * pointer arithmetic on a NULL buffer for an empty one: UBSan pointer-overflow, found by
 * fuzz_image), up to IEND; bytes after IEND are ignored, as Pillow and libpng do. */
static const char *png_check(const unsigned char *p, size_t n)
{
    size_t i = 8; /* after the signature */
    int seen_idat = 0;
    for (;;) {
        if (n - i < 12)
            return "truncated: a chunk or IEND is missing";
        uint32_t len = be32(p + i);
        if (len > n - i - 12)
            return "truncated: a chunk runs past the end of the file";
        const unsigned char *type = p + i + 4;
        if (!memcmp(type, "IDAT", 4) && !seen_idat++ && len == 0)
            return "its first IDAT (image data) chunk is empty";
        if (crc32_update(0, type, 4 + (size_t)len) != be32(type + 4 + len))
            return "a chunk's CRC does not match its bytes (the file is damaged)";
        if (!memcmp(type, "IEND", 4))
            return NULL;
        i += 12 + (size_t)len;
    }
}

/* The pixel rows a BMP declares fit between its pixel-data offset and the end of the file
 * (uncompressed and bit-field BMPs; stb_image refuses RLE BMPs itself). */
static const char *bmp_check(const unsigned char *p, size_t n, char *msg, size_t size)
{
    if (n < 26)
        return "truncated header";
    uint32_t off = le32(p + 10), hsz = le32(p + 14);
    int64_t w, h;
    uint32_t bpp, comp = 0;
    if (hsz == 12) {
        w = p[18] | p[19] << 8;
        h = p[20] | p[21] << 8;
        bpp = (uint32_t)(p[24] | p[25] << 8);
    } else {
        if (n < 34)
            return "truncated header";
        w = (int32_t)le32(p + 18);
        h = (int32_t)le32(p + 22);
        bpp = (uint32_t)(p[28] | p[29] << 8);
        comp = le32(p + 30);
    }
    if (comp == 1 || comp == 2)
        return NULL; /* RLE: stb_image refuses it with its own reason */
    if (comp != 0 && comp != 3 && comp != 6) {
        /* stb_image would decode an unknown compression as raw rows of the declared size,
         * which for a huge claimed width is seconds of work over no data. */
        snprintf(msg, size, "BMP compression %u is not supported", comp);
        return msg;
    }
    if (h < 0)
        h = -h;
    if (w < 0 || bpp == 0 || bpp > 32)
        return NULL; /* stb_image refuses these with its own reason */
    uint64_t stride = ((uint64_t)w * bpp + 31) / 32 * 4, need = off + stride * (uint64_t)h;
    if (off > n || need > n) {
        snprintf(msg, size,
                 "truncated: its %lld x %lld pixels at %u bits need %llu bytes from "
                 "offset %u, the file has %zu",
                 (long long)w, (long long)h, bpp, (unsigned long long)(stride * (uint64_t)h), off,
                 n);
        return msg;
    }
    return NULL;
}

/* PNG and BMP: the checks above. NULL when the file may be decoded. */
static const char *structure_check(img_format fmt, const unsigned char *p, size_t n, char *msg,
                                   size_t size)
{
    if (fmt == FMT_PNG)
        return png_check(p, n);
    if (fmt == FMT_BMP)
        return bmp_check(p, n, msg, size);
    return NULL;
}

int pgd__image_check_size(const char *name, const char *format, long long w, long long h,
                          pgd_error **err)
{
    if (w < 1 || h < 1)
        return pgd__error_set(err, PGD_ERR_FORMAT, "image '%s': %s header gives size %lld x %lld",
                              name, format, w, h);
    if (w > PGD_IMAGE_MAX_PIXELS || h > PGD_IMAGE_MAX_PIXELS || w * h > PGD_IMAGE_MAX_PIXELS)
        return pgd__error_set(err, PGD_ERR_TOO_LARGE,
                              "image '%s': %s of %lld x %lld pixels exceeds the limit of %lld "
                              "pixels (8192 x 8192)",
                              name, format, w, h, PGD_IMAGE_MAX_PIXELS);
    return PGD_OK;
}

static int use_stb; /* pgd__image_use_stb */

void pgd__image_use_stb(int on)
{
    use_stb = on;
}

/* The formats this build reads, for messages. */
#define FORMATS_READ (PGD_HAVE_LIBWEBP ? "JPEG, PNG, BMP and WebP" : "JPEG, PNG and BMP")

const char *pgd_image_decoder(const char *format)
{
    if (!format)
        return NULL;
    if (use_stb && (!strcmp(format, "JPEG") || !strcmp(format, "PNG")))
        return "stb_image";
    if (!strcmp(format, "JPEG"))
#if PGD_HAVE_LIBJPEG
        return pgd__jpeg_library();
#else
        return "stb_image";
#endif
    if (!strcmp(format, "PNG"))
#if PGD_HAVE_LIBPNG
        return pgd__png_library();
#else
        return "stb_image";
#endif
    if (!strcmp(format, "BMP"))
        return "stb_image";
    if (!strcmp(format, "WebP"))
#if PGD_HAVE_LIBWEBP
        return pgd__webp_library();
#else
        return NULL;
#endif
    return NULL;
}

/* The library decoders (image_jpeg.c, image_png.c, image_webp.c): they check the size
 * themselves, after reading the header and before allocating pixels. */
static int decode_with_library(img_format fmt, const unsigned char *p, size_t size,
                               const char *name, int min_side, pgd_image **out, pgd_error **err)
{
    int w = 0, h = 0, rc = PGD_ERR_INTERNAL;
    uint8_t *px = NULL;
#if PGD_HAVE_LIBJPEG
    if (fmt == FMT_JPEG)
        rc = pgd__jpeg_decode(p, size, name, min_side, &w, &h, &px, err);
#endif
#if PGD_HAVE_LIBPNG
    if (fmt == FMT_PNG)
        rc = pgd__png_decode(p, size, name, &w, &h, &px, err);
#endif
#if PGD_HAVE_LIBWEBP
    if (fmt == FMT_WEBP)
        rc = pgd__webp_decode(p, size, name, &w, &h, &px, err);
#endif
    (void)p;
    (void)size;
    (void)min_side;
    if (rc == PGD_ERR_INTERNAL && !px)
        return pgd__error_set(err, rc, "image '%s': no decoder for %s", name, format_name(fmt));
    if (rc)
        return rc;
    pgd_image *img = calloc(1, sizeof *img);
    if (!img) {
        free(px);
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "image '%s': out of memory", name);
    }
    img->data = px;
    img->own_pixels = 1;
    img->width = img->src_width = w;
    img->height = img->src_height = h;
    *out = img;
    return PGD_OK;
}

/* stb_image: BMP, and JPEG or PNG in a build without their library. */
static int decode_with_stb(img_format fmt, const unsigned char *p, size_t size, const char *name,
                           pgd_image **out, pgd_error **err)
{
    /* Before stbi_info: stb's JPEG header scan already reads the Huffman tables. */
    if (fmt == FMT_JPEG && !jpeg_tables_ok(p, size))
        return pgd__error_set(err, PGD_ERR_FORMAT,
                              "image '%s': corrupt JPEG: a Huffman table (DHT) lists more than 256 "
                              "codes or runs past its segment",
                              name);
    int len = (int)size; /* size <= MAX_FILE_BYTES < INT_MAX */
    int w = 0, h = 0, comp = 0;
    if (!stbi_info_from_memory(p, len, &w, &h, &comp))
        return pgd__error_set(err, PGD_ERR_FORMAT, "image '%s': cannot read the %s header: %s",
                              name, format_name(fmt), stbi_failure_reason());
    /* A top-down BMP (rows from the top) says so by a negative height, which stbi_info passes
     * on as it is; stbi_load decodes it the right way up, as Pillow does. INT_MIN has no
     * positive and stays refused below. */
    if (fmt == FMT_BMP && h < 0 && h != INT_MIN)
        h = -h;
    int rc = pgd__image_check_size(name, format_name(fmt), w, h, err);
    if (rc)
        return rc;
    char msg[200];
    const char *bad = structure_check(fmt, p, size, msg, sizeof msg);
    if (bad)
        return pgd__error_set(err, PGD_ERR_FORMAT, "image '%s': corrupt %s: %s", name,
                              format_name(fmt), bad);
    pgd_image *img = calloc(1, sizeof *img);
    if (!img)
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "image '%s': out of memory", name);
    int dw = 0, dh = 0, dn = 0;
    img->data = stbi_load_from_memory(p, len, &dw, &dh, &dn, 3);
    if (!img->data) {
        free(img);
        return pgd__error_set(err, PGD_ERR_FORMAT, "image '%s': cannot decode the %s data: %s",
                              name, format_name(fmt), stbi_failure_reason());
    }
    if (dw != w || dh != h) {
        stbi_image_free(img->data);
        free(img);
        return pgd__error_set(err, PGD_ERR_FORMAT,
                              "image '%s': %s decoded as %d x %d but its header says %d x %d", name,
                              format_name(fmt), dw, dh, w, h);
    }
    img->width = img->src_width = w;
    img->height = img->src_height = h;
    *out = img;
    return PGD_OK;
}

static int load_memory(const void *data, size_t size, const char *name, int min_side,
                       pgd_image **out, pgd_error **err)
{
    if (!out)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_image_load_memory: out is NULL");
    *out = NULL;
    if (!name)
        name = "(memory)";
    if (!data && size)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "image '%s': data is NULL", name);
    if (size == 0)
        return pgd__error_set(err, PGD_ERR_FORMAT, "image '%s': empty file", name);
    if (size > MAX_FILE_BYTES)
        return pgd__error_set(err, PGD_ERR_TOO_LARGE,
                              "image '%s': %zu bytes exceeds the %zu-byte limit on image files",
                              name, size, MAX_FILE_BYTES);
    const unsigned char *p = data;
    const char *other;
    img_format fmt = sniff(p, size, &other);
    if (fmt == FMT_UNKNOWN) {
        if (other)
            return pgd__error_set(err, PGD_ERR_UNSUPPORTED,
                                  "image '%s': format %s is not supported (only %s)", name, other,
                                  FORMATS_READ);
        char hex[3 * 8 + 1] = "";
        size_t k = size < 8 ? size : 8, pos = 0;
        for (size_t i = 0; i < k; i++)
            pos += (size_t)snprintf(hex + pos, sizeof hex - pos, "%s%02X", i ? " " : "", p[i]);
        return pgd__error_set(err, PGD_ERR_UNSUPPORTED,
                              "image '%s': unknown format (first bytes %s); only %s are supported",
                              name, hex, FORMATS_READ);
    }
    if ((fmt == FMT_JPEG && PGD_HAVE_LIBJPEG && !use_stb) || fmt == FMT_WEBP)
        return decode_with_library(fmt, p, size, name, min_side, out, err);
    if (fmt == FMT_PNG && PGD_HAVE_LIBPNG && !use_stb) {
        /* The size from IHDR, then the chunk structure, as for stb_image (Pillow refuses these
         * files too); libpng reads IHDR again and checks it fully. */
        if (size >= 24 && !memcmp(p + 12, "IHDR", 4)) {
            int rc = pgd__image_check_size(name, "PNG", be32(p + 16), be32(p + 20), err);
            if (rc)
                return rc;
        }
        const char *bad = png_check(p, size);
        if (bad)
            return pgd__error_set(err, PGD_ERR_FORMAT, "image '%s': corrupt PNG: %s", name, bad);
        return decode_with_library(fmt, p, size, name, min_side, out, err);
    }
    return decode_with_stb(fmt, p, size, name, out, err);
}

pgd_status pgd_image_load_memory(const void *data, size_t size, const char *name, pgd_image **out,
                                 pgd_error **err)
{
    return load_memory(data, size, name, 0, out, err);
}

pgd_status pgd_image_load_memory_scaled(const void *data, size_t size, const char *name,
                                        int min_side, pgd_image **out, pgd_error **err)
{
    if (min_side < 1) {
        if (out)
            *out = NULL;
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "pgd_image_load_memory_scaled: min_side %d < 1", min_side);
    }
    return load_memory(data, size, name, min_side, out, err);
}

static int load_file(const char *path, int min_side, pgd_image **out, pgd_error **err)
{
    if (!out)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_image_load: out is NULL");
    *out = NULL;
    if (!path)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_image_load: path is NULL");
    unsigned char *buf = NULL;
    size_t size = 0;
    int rc = pgd__file_read(path, "image", MAX_FILE_BYTES, &buf, &size, err);
    if (rc)
        return rc;
    rc = load_memory(buf, size, path, min_side, out, err);
    free(buf);
    return rc;
}

pgd_status pgd_image_load(const char *path, pgd_image **out, pgd_error **err)
{
    return load_file(path, 0, out, err);
}

pgd_status pgd_image_load_scaled(const char *path, int min_side, pgd_image **out, pgd_error **err)
{
    if (min_side < 1) {
        if (out)
            *out = NULL;
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "pgd_image_load_scaled: min_side %d < 1", min_side);
    }
    return load_file(path, min_side, out, err);
}

/* ---- EXIF orientation (--exif-rotate) ----
 *
 * Pillow's ImageOps.exif_transpose reads the Orientation tag (0x0112) of IFD0 in the image's
 * EXIF block (JPEG: the first APP1 segment starting "Exif\0\0"; PNG: the eXIf chunk; WebP: the
 * EXIF chunk of an extended file) and transposes for 2..8; anything else leaves the image as it
 * is. Every offset is checked against the block. */

static unsigned rd16(const unsigned char *p, int le)
{
    return le ? (unsigned)(p[0] | p[1] << 8) : (unsigned)(p[0] << 8 | p[1]);
}

static uint32_t rd32(const unsigned char *p, int le)
{
    return le ? le32(p) : be32(p);
}

static int tiff_orientation(const unsigned char *t, size_t n)
{
    if (n >= 6 && !memcmp(t, "Exif\0\0", 6))
        t += 6, n -= 6;
    if (n < 8)
        return 1;
    int le;
    if (!memcmp(t, "II*\0", 4))
        le = 1;
    else if (!memcmp(t, "MM\0*", 4))
        le = 0;
    else
        return 1;
    uint32_t ifd = rd32(t + 4, le);
    if (ifd > n || n - ifd < 2)
        return 1;
    unsigned count = rd16(t + ifd, le);
    for (unsigned i = 0; i < count; i++) {
        size_t e = ifd + 2 + (size_t)i * 12;
        if (e + 12 > n)
            return 1;
        if (rd16(t + e, le) != 0x0112)
            continue;
        unsigned type = rd16(t + e + 2, le);
        uint32_t v = type == 3 ? rd16(t + e + 8, le) : type == 4 ? rd32(t + e + 8, le) : 0;
        return v >= 1 && v <= 8 ? (int)v : 1;
    }
    return 1;
}

int pgd_image_exif_orientation(const void *data, size_t size)
{
    const unsigned char *p = data;
    const char *other;
    if (!p)
        return 1;
    img_format fmt = sniff(p, size, &other);
    if (fmt == FMT_JPEG) {
        size_t i = 2;
        while (i + 4 <= size && p[i] == 0xFF) {
            unsigned m = p[i + 1];
            if (m == 0xFF) {
                i++;
                continue;
            }
            if (m == 0xDA || m == 0xD9) /* SOS, EOI: no more header segments */
                break;
            size_t len = (size_t)p[i + 2] << 8 | p[i + 3];
            if (len < 2 || len > size - i - 2)
                break;
            if (m == 0xE1 && len >= 8 && !memcmp(p + i + 4, "Exif\0\0", 6))
                return tiff_orientation(p + i + 4, len - 2);
            i += 2 + len;
        }
    } else if (fmt == FMT_PNG) {
        for (size_t i = 8; size - i >= 12;) {
            uint32_t len = be32(p + i);
            if (len > size - i - 12)
                break;
            if (!memcmp(p + i + 4, "eXIf", 4))
                return tiff_orientation(p + i + 8, len);
            if (!memcmp(p + i + 4, "IEND", 4))
                break;
            i += 12 + (size_t)len;
        }
    } else if (size >= 12 && !memcmp(p, "RIFF", 4) && !memcmp(p + 8, "WEBP", 4)) {
        if (size < 20 || memcmp(p + 12, "VP8X", 4))
            return 1; /* a simple-format WebP has no EXIF */
        for (size_t i = 12; size - i >= 8;) {
            uint32_t len = le32(p + i + 4);
            if (len > size - i - 8)
                break;
            if (!memcmp(p + i, "EXIF", 4))
                return tiff_orientation(p + i + 8, len);
            i += 8 + (size_t)len + (len & 1);
        }
    }
    return 1;
}

pgd_status pgd_image_apply_orientation(const pgd_image *img, int orientation, pgd_image **out,
                                       pgd_error **err)
{
    if (!out)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "pgd_image_apply_orientation: out is NULL");
    *out = NULL;
    if (!img || !img->data || orientation < 1 || orientation > 8)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "pgd_image_apply_orientation: no image, or orientation %d is not "
                              "1..8",
                              orientation);
    int w = img->width, h = img->height, swap = orientation >= 5;
    int ow = swap ? h : w, oh = swap ? w : h;
    pgd_image *t = calloc(1, sizeof *t);
    uint8_t *px = t ? malloc((size_t)w * h * 3) : NULL;
    if (!px) {
        free(t);
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY,
                              "pgd_image_apply_orientation: %d x %d pixels", w, h);
    }
    /* Output pixel (x, y) comes from input (sx, sy); Pillow's transposes: 2 FLIP_LEFT_RIGHT,
     * 3 ROTATE_180, 4 FLIP_TOP_BOTTOM, 5 TRANSPOSE, 6 ROTATE_270 (clockwise), 7 TRANSVERSE,
     * 8 ROTATE_90 (counter-clockwise). */
    for (int y = 0; y < oh; y++)
        for (int x = 0; x < ow; x++) {
            int sx, sy;
            switch (orientation) {
            case 2: sx = w - 1 - x, sy = y; break;
            case 3: sx = w - 1 - x, sy = h - 1 - y; break;
            case 4: sx = x, sy = h - 1 - y; break;
            case 5: sx = y, sy = x; break;
            case 6: sx = y, sy = h - 1 - x; break;
            case 7: sx = w - 1 - y, sy = h - 1 - x; break;
            case 8: sx = w - 1 - y, sy = x; break;
            default: sx = x, sy = y; break;
            }
            memcpy(px + ((size_t)y * ow + x) * 3, img->data + ((size_t)sy * w + sx) * 3, 3);
        }
    t->data = px;
    t->own_pixels = 1;
    t->width = t->src_width = ow;
    t->height = t->src_height = oh;
    *out = t;
    return PGD_OK;
}

int pgd_image_get_width(const pgd_image *img)
{
    return img ? img->width : 0;
}

int pgd_image_get_height(const pgd_image *img)
{
    return img ? img->height : 0;
}

const uint8_t *pgd_image_get_data(const pgd_image *img)
{
    return img ? img->data : NULL;
}

void pgd_image_destroy(pgd_image *img)
{
    if (!img)
        return;
    if (img->own_pixels)
        free(img->data);
    else
        stbi_image_free(img->data);
    free(img);
}

int pgd_image_get_source_width(const pgd_image *img)
{
    return img ? img->src_width : 0;
}

int pgd_image_get_source_height(const pgd_image *img)
{
    return img ? img->src_height : 0;
}
