/* make-ycck-jpeg.c — writes a small YCCK JPEG (Adobe marker, transform 2) to stdout, for
 * tools/golden/make-decode-golden.py: Pillow cannot write one, and YCCK is what Photoshop's CMYK
 * JPEGs usually are. libjpeg converts CMYK input to YCCK and writes the Adobe marker (inverted
 * CMYK, as Photoshop does, so the samples written are 255 - ink).
 *
 *   cc -o make-ycck-jpeg tools/golden/make-ycck-jpeg.c -ljpeg && ./make-ycck-jpeg > out.jpg */
#include <stdio.h>
#include <stdlib.h>

#include <jpeglib.h>

int main(void)
{
    enum { W = 29, H = 19 };
    static JSAMPLE px[H][W * 4];
    unsigned seed = 7;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            seed = seed * 1103515245u + 12345u;
            JSAMPLE *p = &px[y][4 * x];
            p[0] = (JSAMPLE)(255 - x * 255 / (W - 1));
            p[1] = (JSAMPLE)(255 - y * 255 / (H - 1));
            p[2] = (JSAMPLE)(128 + ((x * 7 + y * 5) % 64) + (seed >> 28));
            p[3] =
                (JSAMPLE)(((x - W / 2) * (x - W / 2) + (y - H / 2) * (y - H / 2)) < 30 ? 90 : 250);
        }
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    jpeg_stdio_dest(&c, stdout);
    c.image_width = W;
    c.image_height = H;
    c.input_components = 4;
    c.in_color_space = JCS_CMYK;
    jpeg_set_defaults(&c);
    jpeg_set_colorspace(&c, JCS_YCCK);
    jpeg_set_quality(&c, 88, TRUE);
    jpeg_start_compress(&c, TRUE);
    for (int y = 0; y < H; y++) {
        JSAMPROW r = px[y];
        jpeg_write_scanlines(&c, &r, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    return 0;
}
