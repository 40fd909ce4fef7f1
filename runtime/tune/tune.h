/* tune.h — per-device parameters (runtime/tune): the shipped database (db.c), the one store and
 * its loader and writer (params.c), the tuners (search.c: kernel parameters; backend.c: GEMM
 * back ends). Ops include this header and ask a context's parameters; the core holds only the
 * opaque handle (internal.h) and never includes it. Not installed. */
#ifndef PAGODA_TUNE_H
#define PAGODA_TUNE_H

#include "internal.h"

/* ---- the database (db.c) ---- */

enum { PGD__DB_GENERIC = 0, PGD__DB_CLASS = 1, PGD__DB_DEVICE = 2 };

/* One entry: a known device, a device class or the generic fallback. A field left NULL (or -1)
 * is its parent's; the generic entry's NULLs are the rules in code (gemm.c, attention.c). */
typedef struct pgd__db_entry {
    const char *name;   /* "pocl-avx512": what pagoda bench records as "db:<name>" */
    int kind;           /* PGD__DB_GENERIC, _CLASS or _DEVICE */
    const char *parent; /* the entry it falls back to (NULL only for the generic entry) */
    /* what a device must show to match (NULL / 0 / -1: anything) */
    unsigned type;         /* pgd_device_type bits */
    int rasteriser;        /* software_rasteriser, -1 any */
    const char *platform;  /* in the platform name or version, case-insensitive */
    const char *vendor;    /* in the vendor name, case-insensitive */
    const char *device;    /* in the device name or CL_DEVICE_VERSION, case-insensitive */
    const char *driver;    /* driver version prefix */
    unsigned vector_width; /* CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT, 0 any */
    /* the parameters */
    const char *gemm;      /* as pgd_ctx_get_kernel_params prints them */
    const char *attention; /* "rows", "kt:kw=K,rows=R" */
    int prefetch;          /* gemm_cpu prefetches its tiles' rows of C (-1: the parent's) */
    const char *note;      /* where the numbers come from */
} pgd__db_entry;

extern const pgd__db_entry pgd__db[];
extern const size_t pgd__db_count;

/* Whether an entry's match fields all hold for dev. */
int pgd__db_matches(const pgd__db_entry *e, const pgd_device_info *dev);
/* The most specific entry of db[0..n) that matches dev (a known device, else a device class,
 * else the generic entry); NULL when nothing matches (a table without a generic entry). */
const pgd__db_entry *pgd__db_lookup_in(const pgd__db_entry *db, size_t n,
                                       const pgd_device_info *dev);
/* The entry named `name` in db[0..n), or NULL. */
const pgd__db_entry *pgd__db_find(const pgd__db_entry *db, size_t n, const char *name);
/* The resolved values of entry e along its fallback chain (e, its parent, ... the generic
 * entry): each pointer the first non-NULL, *prefetch the first non-negative (0 if none). */
void pgd__db_resolve(const pgd__db_entry *db, size_t n, const pgd__db_entry *e, const char **gemm,
                     const char **attention, int *prefetch);

/* ---- a context's parameters (params.c) ---- */

struct pgd__params {
    char entry[96];                /* "db:<name>", "tuned:<store key>" or "options": what ran */
    const char *db_name;           /* the database entry that matched */
    char id[65];                   /* the device's key in the store (device, driver, platform) */
    pgd__gemm_params gemm;         /* what GEMMs and layers created now use */
    pgd__gemm_params gemm_default; /* the untuned parameters: the database's, else the rule */
    const char *gemm_from;         /* "defaults" (the database), "tuned" (the store), "options" */
    /* The attention kernel: 0 the rule (attention.c), else PGD_ATTENTION_ROWS or
     * PGD_ATTENTION_KT with attn_kw its key vector width and attn_rows its query rows a
     * work-item (0: the rule). attn_tuned: 1 when the store chose it, 0 the database. */
    int attn_variant, attn_kw, attn_rows, attn_tuned;
    int db_attn_variant, db_attn_kw, db_attn_rows; /* the database's (the untuned choice) */
    int prefetch; /* device class fact: gemm_cpu prefetches (PoCL; see gemm.c) */
    /* conv_few_rows_cpu (conv.c): 0 where its rule says, 1 wherever it can run (tests), -1
     * never (tests) */
    int conv_few_rows;
    struct json_t *choices;     /* GEMM back end per shape class: "pagoda" | "clblast" */
    unsigned gemm_measurements; /* back-end measurements made by this context */
};

/* The context's parameters (never NULL after context creation). */
static inline pgd__params *pgd__params_of(const pgd_ctx *ctx)
{
    return ctx->params;
}

/* The store: <cache dir>/tuning.json, one object per device key. Sets the entries of `fields`
 * (taken) in this device's object, with the context's back-end choices, keeping every other
 * entry and device, and rewrites the file atomically (core/outfile.c). 1 when written, 0 when
 * there is no cache directory or the write failed (the old file is kept). */
int pgd__params_save(pgd_ctx *ctx, struct json_t *fields);

#endif
