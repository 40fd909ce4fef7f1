/* serve_assets.h — the page of `pagoda serve` (apps/serve/static: index.html, app.js,
 * style.css), embedded at build time by cl/embed.c --table into serve_static_files: each file
 * by its name without the extension, as one NUL-terminated string. */
#ifndef PAGODA_SERVE_ASSETS_H
#define PAGODA_SERVE_ASSETS_H

typedef struct serve_asset {
    const char *name, *text;
} serve_asset;

extern const serve_asset serve_static_files[]; /* ends with {NULL, NULL} */

#endif
