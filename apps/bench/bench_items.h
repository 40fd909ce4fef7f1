/* bench_items.h — the helpers the item files share (bench_items.c defines them; bench_blocks.c
 * and bench_models.c use them): timing, sizes checked before any allocation, seeded inputs. */
#ifndef PAGODA_BENCH_ITEMS_H
#define PAGODA_BENCH_ITEMS_H

#include <stddef.h>
#include <stdint.h>

#include "bench.h"

typedef struct timed_fn {
    int (*fn)(void *state, pgd_error **err);
    void *state;
} timed_fn;

/* Warm-up then timed runs of f, each drained (bench_time). */
int time_runs(pgd_ctx *ctx, timed_fn f, const bench_opts *o, bench_result *b, pgd_error **err);

/* a * b and a + b for sizes >= 0, saturating at INT64_MAX (which every limit refuses). */
int64_t mul_sat(int64_t a, int64_t b);
int64_t add_sat(int64_t a, int64_t b);

/* The largest device tensor, all device tensors and the largest host buffer of an item, in
 * floats, against the device's and the host's limits: PGD_ERR_TOO_LARGE with err set, or
 * PGD_OK. */
int check_fits(pgd_ctx *ctx, int64_t largest, int64_t total, int64_t host, pgd_error **err);

/* A malloc of `floats` floats whose failure is an error naming the size. */
void *item_alloc(int64_t floats, pgd_error **err);

/* n seeded random floats (the same on every run). */
void fill_rand(float *p, size_t n);

/* A spec "<name>:N,D": both sizes into v. 0, or -1 if it does not parse. */
int parse_nd(const char *spec, long v[2]);

#endif
