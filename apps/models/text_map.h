/* text_map.h — token x token attention drawn as a labelled heat-map grid (PNG): one tile per
 * (layer, head) chosen, rows the queries and columns the keys, each labelled with its token, so
 * that a bidirectional encoder's full square and a causal decoder's lower triangle are seen as
 * they are. Shared by the text commands; written against pagoda.h, maps.h and stb_easy_font. */
#ifndef PAGODA_TEXT_MAP_H
#define PAGODA_TEXT_MAP_H

#include "pagoda.h"
#include "pagoda_util.h"

/* `count` matrices maps[i] (T x T floats, row-major, row = query, column = key; probabilities
 * in [0, 1]) as the tiles of one picture into f (the caller commits or aborts it): a grid as
 * square as the count allows, row-major, tile i titled titles[i], rows and columns labelled
 * with tokens[0..T) (printable ASCII shown, other bytes as '?', cut at 14 characters), cells
 * coloured by map_color's ramp over 0 .. the tile's largest value. T from 1 to 512, count from
 * 1 to 1024 (else PGD_ERR_INVALID_ARGUMENT). */
int text_attention_png(pgd_outfile *f, const float *maps, int count, int T,
                       const char *const *tokens, const char *const *titles, pgd_error **err);

#endif
