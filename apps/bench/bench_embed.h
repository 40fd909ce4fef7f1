/* bench_embed.h — the bench's kernel files (apps/bench, .cl), embedded at build time by
 * cl/embed.c --table into bench_peak_sources (name without extension, source text). */
#ifndef PAGODA_BENCH_EMBED_H
#define PAGODA_BENCH_EMBED_H

typedef struct bench_source {
    const char *name, *text;
} bench_source;

extern const bench_source bench_peak_sources[];

#endif
