/* maps.h — drawing the models' maps (ViT attention, non-local affinity) over the images they
 * came from, as PNG files. Written against pagoda.h and stb_image_write. */
#ifndef PAGODA_MAPS_H
#define PAGODA_MAPS_H

#include <stdint.h>

#include "pagoda.h"
#include "pagoda_util.h"

/* Writes base with a heat map over it as a PNG at path: map is mw x mh floats, row-major,
 * min-max normalised (non-finite values count as the minimum; a constant map is all minimum),
 * bilinearly upsampled to the image size (pixel centres aligned, edges clamped), coloured with
 * map_color's dark-blue -> purple -> red -> orange -> pale-yellow ramp and blended 50 % over
 * the image. Written through a pgd_outfile: the file appears complete or not at all, and a
 * target that exists and is not a regular file is refused. The caller keeps base and map. */
int map_write_png(const char *path, const pgd_image *base, const float *map, int mw, int mh,
                  pgd_error **err);

/* As map_write_png, but the map covers only rect = {x0, y0, x1, y1} of the image (pixels,
 * x1 > x0, y1 > y0) and the rest is drawn dimmed: for maps over the crop a model saw
 * (pgd_image_preprocess_view gives it). */
int map_write_png_view(const char *path, const pgd_image *base, const float *map, int mw, int mh,
                       const double rect[4], pgd_error **err);

/* As map_write_png_view, into an open pgd_outfile that the caller commits or aborts (outputs
 * staged until a run has succeeded). The caller keeps f, also on error. */
int map_write_png_view_to(pgd_outfile *f, const pgd_image *base, const float *map, int mw, int mh,
                          const double rect[4], pgd_error **err);

/* `count` maps (each mw x mh, normalised on its own) drawn as map_write_png_view_to draws one,
 * each over its own copy of the image, as the tiles of one picture: a grid as square as the
 * count allows, row-major (the DINO figure: one tile per attention head). */
int map_write_grid_png_view_to(pgd_outfile *f, const pgd_image *base, const float *maps, int count,
                               int mw, int mh, const double rect[4], pgd_error **err);
/* Writes w x h RGB pixels (3 bytes each, row-major) as a PNG into f (which the caller commits
 * or aborts; kept by the caller, also on error). */
int map_write_rgb_png_to(pgd_outfile *f, const uint8_t *rgb, int w, int h, pgd_error **err);
/* DINO's attention thresholding: for each of `count` maps of n cells, the cells holding `mass`
 * (0..1) of its total, largest first (ties to the lower index), become 1 and the others 0 —
 * the fewest cells whose sum reaches mass × total. 0, or -1 when out of memory. */
int map_mass_mask(float *maps, int count, int n, double mass);
/* The colour ramp at t in [0, 1] (clamped; NaN counts as 0); lightness rises along it. */
void map_color(float t, uint8_t rgb[3]);

/* One block of attention rollout (Abnar & Zuidema 2020) over B images: R [B, T, T] <-
 * (1/2 mean_h A + 1/2 I, rows renormalised) R, p this block's probabilities [B, heads, T, T];
 * tmp holds T * T + T + T * T doubles. */
void map_rollout_step(double *R, const float *p, int64_t B, int64_t heads, int64_t T, double *tmp);

#endif
