/* text_map.h — attention over tokens as a picture: token × token heat maps (query rows, key
 * columns) in a labelled grid, one tile a layer/head, so that a causal model's lower triangle
 * and a bidirectional model's full square are seen as they are. Shared by the text models;
 * written against pagoda.h, maps.h's colours and stb_easy_font. */
#ifndef PAGODA_TEXT_MAP_H
#define PAGODA_TEXT_MAP_H

#include <stdint.h>

#include "pagoda.h"
#include "pagoda_util.h"

/* Draws `count` maps of n x n probabilities (maps + k·n·n, row i the query i's weights over
 * the keys) as the tiles of one PNG into f (committed or aborted by the caller): each tile
 * titled titles[k], its rows and columns labelled with the tokens labels[0..n) (shown as
 * printable ASCII, cut to 12 characters; a column's label written upwards), its cells coloured
 * by map_color over the tile's largest value, and a cell of exactly zero (a hidden key) drawn
 * light grey. n is 1 .. 512, count 1 .. 256. */
int text_map_write_png(pgd_outfile *f, const float *maps, int count, int n,
                       const char *const *titles, const char *const *labels, pgd_error **err);

#endif
