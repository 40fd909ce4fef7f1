/* params.c — a context's per-device parameters: the one loader (at context creation: the
 * database entry, then the store, then options.kernel_params) and the one writer of the store.
 *
 * The store is <cache dir>/tuning.json: one object per device key (device, driver, platform),
 * holding what pgd_tune found ("gemm", "attention" and its measurements) and the GEMM back-end
 * choices per shape class ("choices"). The choices used to live apart, in gemm-choices.json
 * under another key: a device whose entry has no "choices" reads them from there (read only;
 * the next write puts them into tuning.json), so existing caches keep their tuning. A store
 * that is missing, unreadable or malformed only means: the database's values. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tune.h"

static char *store_path(const pgd_ctx *ctx, const char *file)
{
    if (!ctx->cache_dir)
        return NULL;
    size_t n = strlen(ctx->cache_dir) + strlen(file) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", ctx->cache_dir, file);
    return p;
}

/* A JSON store in the cache directory as an object, or NULL when there is no cache directory or
 * the file is missing, unreadable (not a regular file, too large) or malformed. */
static json_t *store_load(const pgd_ctx *ctx, const char *file)
{
    char *path = store_path(ctx, file);
    unsigned char *text = NULL;
    size_t size = 0;
    int rc = path ? pgd__file_read(path, NULL, PGD__MAX_CHOICES_BYTES, &text, &size, NULL) : -1;
    free(path);
    if (rc != PGD_OK)
        return NULL;
    json_t *all = json_loadb((const char *)text, size, JSON_REJECT_DUPLICATES, NULL);
    free(text);
    if (!json_is_object(all)) {
        json_decref(all);
        return NULL;
    }
    return all;
}

/* The choices of the old gemm-choices.json (its own device key), into p->choices. */
static void legacy_choices(const pgd_ctx *ctx, pgd__params *p)
{
    json_t *all = store_load(ctx, "gemm-choices.json");
    char id[65];
    pgd__cache_key(&ctx->dev, "gemm-choices", "", id);
    json_t *ch = json_object_get(json_object_get(all, id), "choices");
    if (json_is_object(ch))
        json_object_update(p->choices, ch);
    json_decref(all);
}

/* The database entry's values: the untuned GEMM parameters (the rule's where the entry gives
 * none, or gives some that do not fit this device) and attention kernel, the prefetch fact. */
static void apply_db(const pgd_ctx *ctx, pgd__params *p)
{
    const pgd__db_entry *e = pgd__db_lookup_in(pgd__db, pgd__db_count, &ctx->dev);
    const char *gemm, *attn;
    pgd__db_resolve(pgd__db, pgd__db_count, e, &gemm, &attn, &p->prefetch);
    p->db_name = e ? e->name : "generic";
    snprintf(p->entry, sizeof p->entry, "db:%s", p->db_name);
    pgd__gemm_params_default(ctx, &p->gemm_default);
    pgd__gemm_params q;
    if (gemm && !pgd__gemm_params_parse(gemm, &q, NULL) && !pgd__gemm_params_check(ctx, &q, NULL))
        p->gemm_default = q;
    p->gemm = p->gemm_default;
    p->gemm_from = "defaults";
    int v, kw, rows;
    if (attn && !pgd__attention_params_parse(attn, &v, &kw, &rows)) {
        p->db_attn_variant = p->attn_variant = v;
        p->db_attn_kw = p->attn_kw = kw;
        p->db_attn_rows = p->attn_rows = rows;
    }
}

/* The tuned values of the device's store entry, over the database's. */
static void apply_store(const pgd_ctx *ctx, pgd__params *p, json_t *mine)
{
    const char *text = json_string_value(json_object_get(mine, "gemm"));
    const char *attn = json_string_value(json_object_get(mine, "attention"));
    int v, kw, rows, tuned = 0;
    if (attn && !pgd__attention_params_parse(attn, &v, &kw, &rows)) {
        p->attn_variant = v;
        p->attn_kw = kw;
        p->attn_rows = rows;
        p->attn_tuned = tuned = 1;
    }
    pgd__gemm_params q;
    /* A stored entry that no longer parses or fits (a driver that lowered its limits under the
     * same version string) only means: untuned. */
    if (text && !pgd__gemm_params_parse(text, &q, NULL) && !pgd__gemm_params_check(ctx, &q, NULL)) {
        p->gemm = q;
        p->gemm_from = "tuned";
        tuned = 1;
    }
    if (tuned)
        snprintf(p->entry, sizeof p->entry, "tuned:%s", p->id);
}

int pgd__params_open(pgd_ctx *ctx, pgd_error **err)
{
    pgd__params *p = calloc(1, sizeof *p);
    if (!p || !(p->choices = json_object())) {
        free(p);
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "allocating the parameters");
    }
    ctx->params = p;
    pgd__cache_key(&ctx->dev, "tuning", "", p->id);
    apply_db(ctx, p);
    json_t *all = store_load(ctx, "tuning.json");
    json_t *mine = json_object_get(all, p->id);
    json_t *ch = json_object_get(mine, "choices");
    if (json_is_object(ch))
        json_object_update(p->choices, ch);
    else
        legacy_choices(ctx, p);
    if (ctx->opt.kernel_params) {
        pgd__gemm_params q;
        pgd_error *why = NULL;
        json_decref(all);
        if (pgd__gemm_params_parse(ctx->opt.kernel_params, &q, &why) ||
            pgd__gemm_params_check(ctx, &q, &why)) {
            int rc = pgd__error_set(err, pgd_error_get_code(why),
                                    "options.kernel_params (PAGODA_KERNEL_PARAMS): %s",
                                    pgd_error_get_message(why));
            pgd_error_destroy(why);
            return rc;
        }
        p->gemm = q;
        p->gemm_from = "options";
        snprintf(p->entry, sizeof p->entry, "options");
        return PGD_OK;
    }
    apply_store(ctx, p, mine);
    json_decref(all);
    return PGD_OK;
}

void pgd__params_close(pgd_ctx *ctx)
{
    if (!ctx->params)
        return;
    json_decref(ctx->params->choices);
    free(ctx->params);
    ctx->params = NULL;
}

int pgd__params_save(pgd_ctx *ctx, json_t *fields)
{
    pgd__params *p = ctx->params;
    char *path = store_path(ctx, "tuning.json");
    if (!path) {
        json_decref(fields);
        return 0;
    }
    json_t *all = store_load(ctx, "tuning.json");
    if (!all)
        all = json_object();
    json_t *mine = json_object_get(all, p->id);
    if (!json_is_object(mine)) {
        mine = json_object();
        json_object_set_new(all, p->id, mine);
    }
    if (fields)
        json_object_update(mine, fields);
    json_decref(fields);
    json_object_set_new(mine, "device", json_string(ctx->dev.name));
    json_object_set_new(mine, "driver", json_string(ctx->dev.driver_version));
    json_object_set(mine, "choices", p->choices);
    int stored = 0;
    pgd_outfile *f = NULL;
    if (!pgd_outfile_open(path, &f, NULL)) {
        if (json_dumpf(all, pgd_outfile_get_stream(f), JSON_INDENT(1) | JSON_SORT_KEYS) != 0)
            pgd_outfile_abort(f);
        else
            stored = pgd_outfile_commit(f, NULL) == PGD_OK;
    }
    json_decref(all);
    free(path);
    return stored;
}

const char *pgd_ctx_get_params_entry(const pgd_ctx *ctx, char *buf, size_t size)
{
    if (buf && size)
        snprintf(buf, size, "%s", ctx->params->entry);
    return buf;
}

const char *pgd_ctx_get_kernel_params(const pgd_ctx *ctx, char *buf, size_t size)
{
    if (buf && size)
        pgd__gemm_params_format(&ctx->params->gemm, buf, size);
    return ctx->params->gemm_from;
}

/* A C literal for text into out: NULL, or text in quotes with quotes, backslashes and control
 * bytes escaped (cut short rather than overflow). */
static void c_literal(char *out, size_t size, const char *text)
{
    if (!text) {
        snprintf(out, size, "NULL");
        return;
    }
    size_t o = 0;
    out[o++] = '"';
    for (const unsigned char *c = (const unsigned char *)text; *c && o + 6 < size; c++) {
        if (*c == '"' || *c == '\\')
            o += (size_t)snprintf(out + o, size - o, "\\%c", *c);
        else if (*c < 0x20 || *c == 0x7f)
            o += (size_t)snprintf(out + o, size - o, "\\%03o", *c);
        else
            out[o++] = (char)*c;
    }
    out[o++] = '"';
    out[o] = '\0';
}

/* A name for a new entry: the device's name in lower case, other characters as '-'. */
static void slug(char *out, size_t size, const char *text)
{
    size_t o = 0;
    for (const char *c = text; *c && o + 1 < size; c++)
        if ((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9'))
            out[o++] = *c;
        else if (*c >= 'A' && *c <= 'Z')
            out[o++] = (char)(*c - 'A' + 'a');
        else if (o && out[o - 1] != '-')
            out[o++] = '-';
    out[o] = '\0';
}

int pgd_tune_export(const pgd_ctx *ctx, char *buf, size_t size, pgd_error **err)
{
    const pgd__params *p = ctx->params;
    if (!buf || size < 2)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "tune export: no buffer");
    char gemm[128], attn[64] = "NULL", name[48], note[400];
    pgd__gemm_params_format(&p->gemm, gemm, sizeof gemm);
    if (p->attn_variant == PGD_ATTENTION_ROWS)
        snprintf(attn, sizeof attn, "\"rows\"");
    else if (p->attn_variant == PGD_ATTENTION_KT)
        snprintf(attn, sizeof attn, "\"kt:kw=%d,rows=%d\"", p->attn_kw, p->attn_rows);
    /* A known device's line is replaced as it stands (its match kept); any other device gets a
     * new line under the class it matched, matched by platform, device name and vector width. */
    const pgd__db_entry *e = pgd__db_find(pgd__db, pgd__db_count, p->db_name);
    pgd__db_entry m = {0};
    if (e && e->kind == PGD__DB_DEVICE) {
        m = *e;
    } else {
        slug(name, sizeof name, ctx->dev.name);
        m.name = name;
        m.parent = e ? e->name : "generic";
        m.type = (unsigned)ctx->dev.type;
        m.rasteriser = ctx->dev.software_rasteriser != 0;
        m.platform = ctx->dev.platform;
        m.device = ctx->dev.name;
        m.vector_width = ctx->dev.pref_vector_float;
    }
    char plat[300], vendor[300], dev[300], drv[300], dv[300];
    c_literal(plat, sizeof plat, m.platform);
    c_literal(vendor, sizeof vendor, m.vendor);
    c_literal(dev, sizeof dev, m.device);
    c_literal(drv, sizeof drv, m.driver);
    c_literal(dv, sizeof dv, ctx->dev.driver_version);
    snprintf(note, sizeof note, "\"pagoda tune (%s), driver %.*s\"", p->gemm_from,
             (int)strlen(dv) - 2, dv + 1);
    const char *type = m.type == PGD_DEVICE_CPU ? "CPU" : m.type == PGD_DEVICE_GPU ? "GPU" : "0";
    int n = snprintf(buf, size,
                     "    {\"%s\", PGD__DB_DEVICE, \"%s\", %s, %d, %s, %s, %s, %s, %u,\n"
                     "     \"%s\", %s, -1, %s},\n",
                     m.name, m.parent, type, m.rasteriser, plat, vendor, dev, drv, m.vector_width,
                     gemm, attn, note);
    if (n < 0 || (size_t)n >= size)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "tune export: the entry needs %d bytes, the buffer holds %zu", n,
                              size);
    return PGD_OK;
}
