/* options.c — context options: defaults, the one reader of the environment, and the copy a
 * context keeps. Every PAGODA_* knob is parsed here, strictly, once per context creation; the
 * ops read the parsed values from ctx->opt and never the environment. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The first layout with `size` (0.1): a caller's copy is never smaller. Later versions add
 * fields at the end and keep this constant. */
#define OPTIONS_SIZE_MIN (offsetof(pgd_ctx_options, knobs) + PGD_KNOBS_MAX)

void pgd_ctx_options_init_size(pgd_ctx_options *opt, size_t size)
{
    if (size < sizeof opt->size)
        return; /* not even `size` fits: nothing to write (and creation refuses it) */
    memset(opt, 0, size < sizeof *opt ? size : sizeof *opt);
    opt->size = size;
}

/* The caller's options in the library's own layout: fields past opt->size take their
 * defaults. NULL: the defaults. A size below the first layout's (a structure not made by
 * pgd_ctx_options_init) or knobs without their NUL is refused. */
static int options_load(const pgd_ctx_options *opt, pgd_ctx_options *full, pgd_error **err)
{
    pgd_ctx_options_init(full);
    if (!opt)
        return PGD_OK;
    if (opt->size < OPTIONS_SIZE_MIN)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "pgd_ctx_options.size is %zu, less than the %zu bytes of the "
                              "first extensible layout: initialise the options with "
                              "pgd_ctx_options_init()",
                              opt->size, (size_t)OPTIONS_SIZE_MIN);
    memcpy(full, opt, opt->size < sizeof *full ? opt->size : sizeof *full);
    full->size = sizeof *full;
    if (!memchr(full->knobs, 0, sizeof full->knobs))
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "pgd_ctx_options.knobs is not NUL-terminated within its %d bytes",
                              PGD_KNOBS_MAX);
    return PGD_OK;
}

/* Writes the library's layout back into the caller's, as far as its size reaches. */
static void options_store(pgd_ctx_options *opt, const pgd_ctx_options *full)
{
    size_t size = opt->size;
    memcpy(opt, full, size < sizeof *full ? size : sizeof *full);
    opt->size = size;
}

/* ---- strict parsers: the whole value must parse, else an error naming the variable ---- */

static int bad(pgd_error **err, const char *var, const char *value, const char *accepted)
{
    return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "%s='%s': expected %s", var, value,
                          accepted);
}

/* A positive decimal integer no larger than max (pgd_parse_int64). */
static int parse_positive(const char *var, const char *s, int64_t max, int64_t *out,
                          pgd_error **err)
{
    char accepted[96];
    snprintf(accepted, sizeof accepted, "a positive whole number (1 to %lld)", (long long)max);
    return pgd_parse_int64(s, 1, max, out) ? bad(err, var, s, accepted) : PGD_OK;
}

/* A positive byte count with an optional K, M or G suffix (pgd_parse_bytes). */
static int parse_bytes(const char *var, const char *s, uint64_t *out, pgd_error **err)
{
    static const char accepted[] = "a positive byte count, optionally with a K, M or G suffix "
                                   "(binary), such as 4096, 512M or 2G";
    return pgd_parse_bytes(s, 1, UINT64_MAX, out) ? bad(err, var, s, accepted) : PGD_OK;
}

/* One of `names` (NULL-terminated); the index is the enum value. */
static int parse_enum(const char *var, const char *s, const char *const *names, int *out,
                      pgd_error **err)
{
    char accepted[160] = "one of";
    for (int i = 0; names[i]; i++) {
        if (!strcmp(s, names[i])) {
            *out = i;
            return PGD_OK;
        }
        size_t used = strlen(accepted);
        snprintf(accepted + used, sizeof accepted - used, "%s %s", i ? "," : "", names[i]);
    }
    return bad(err, var, s, accepted);
}

static int parse_bool(const char *var, const char *s, int *out, pgd_error **err)
{
    static const char *const names[] = {"0", "1", "off", "on", "no", "yes", "false", "true", NULL};
    int i;
    int rc = parse_enum(var, s, names, &i, err);
    if (!rc)
        *out = i % 2;
    return rc;
}

/* The value of a variable in envp ("NAME=VALUE" strings; NULL: the process environment), or
 * NULL when it is unset or empty (an empty value means "default", so that `PAGODA_GEMM= pagoda
 * ...` undoes an exported one). The last entry of a name wins, as for a shell's assignments. */
static const char *lookup(const char *const *envp, const char *var)
{
    const char *s = NULL;
    if (!envp)
        s = getenv(var);
    size_t n = strlen(var);
    for (; envp && *envp; envp++)
        if (!strncmp(*envp, var, n) && (*envp)[n] == '=')
            s = *envp + n + 1;
    return s && *s ? s : NULL;
}

/* ---- knobs: key=value pairs for tests and tuning experiments ---- */

static const struct knob {
    const char *key, *var;    /* the key in options.knobs, the variable from_env reads */
    int64_t max;              /* values are 1..max */
    int bytes;                /* a byte count: K, M or G suffix allowed */
    size_t offset;            /* of the int64_t in pgd__knobs */
    const char *const *names; /* a named knob: one of these, stored as its index + 1 */
} knob_table[] = {
    {"gemm_k_chunk", "PAGODA_GEMM_KCHUNK", INT32_MAX, 0, offsetof(pgd__knobs, gemm_k_chunk), NULL},
    {"conv_mb", "PAGODA_CONV_MB", 4096, 0, offsetof(pgd__knobs, conv_mb), NULL},
    {"conv_chunk_bytes", "PAGODA_CONV_CHUNK", INT64_MAX, 1, offsetof(pgd__knobs, conv_chunk_bytes),
     NULL},
    {"row_wg", "PAGODA_ROW_WG", 1 << 20, 0, offsetof(pgd__knobs, row_wg), NULL},
    {"max_launch_rows", "PAGODA_MAX_LAUNCH_ROWS", INT64_MAX, 0,
     offsetof(pgd__knobs, max_launch_rows), NULL},
    {"nl_key_chunk", "PAGODA_NL_KEY_CHUNK", INT32_MAX, 0, offsetof(pgd__knobs, nl_key_chunk), NULL},
    {"attn_key_block", "PAGODA_ATTN_KEY_BLOCK", INT32_MAX, 0, offsetof(pgd__knobs, attn_key_block),
     NULL},
    {"max_batch", "PAGODA_MAX_BATCH", INT32_MAX, 0, offsetof(pgd__knobs, max_batch), NULL},
    {"precision", "PAGODA_PRECISION", 3, 0, offsetof(pgd__knobs, precision), pgd__precision_names},
};
#define NKNOBS (sizeof knob_table / sizeof knob_table[0])

static int64_t *knob_slot(pgd__knobs *k, const struct knob *kn)
{
    return (int64_t *)(void *)((char *)k + kn->offset);
}

static const struct knob *knob_find(const char *key, size_t len)
{
    for (size_t i = 0; i < NKNOBS; i++)
        if (strlen(knob_table[i].key) == len && !strncmp(knob_table[i].key, key, len))
            return &knob_table[i];
    return NULL;
}

/* The value of knob kn from text s, in messages called `name` ("PAGODA_CONV_MB", "knob
 * conv_mb"). */
static int knob_value(const struct knob *kn, const char *name, const char *s, int64_t *out,
                      pgd_error **err)
{
    if (kn->names) {
        int i = 0;
        int rc = parse_enum(name, s, kn->names, &i, err);
        if (!rc)
            *out = i + 1;
        return rc;
    }
    if (kn->bytes) {
        uint64_t b;
        int rc = parse_bytes(name, s, &b, err);
        if (!rc && b > (uint64_t)kn->max)
            rc = bad(err, name, s, "a byte count below 2^63");
        if (!rc)
            *out = (int64_t)b;
        return rc;
    }
    return parse_positive(name, s, kn->max, out, err);
}

static int knobs_unknown(const char *key, size_t len, pgd_error **err)
{
    char known[256] = "";
    for (size_t i = 0; i < NKNOBS; i++) {
        size_t used = strlen(known);
        snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "", knob_table[i].key);
    }
    return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                          "options.knobs: unknown knob '%.*s' (known: %s)", (int)len, key, known);
}

int pgd__knobs_parse(const char *text, pgd__knobs *out, pgd_error **err)
{
    pgd__knobs k;
    memset(&k, 0, sizeof k);
    for (const char *at = text; *at;) {
        const char *end = strchr(at, ','), *eq = strchr(at, '=');
        size_t len = end ? (size_t)(end - at) : strlen(at);
        if (!eq || eq >= at + len)
            return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                  "options.knobs: '%.*s' in '%s' is not key=value", (int)len, at,
                                  text);
        const struct knob *kn = knob_find(at, (size_t)(eq - at));
        if (!kn)
            return knobs_unknown(at, (size_t)(eq - at), err);
        char name[64], value[64];
        snprintf(name, sizeof name, "options.knobs %s", kn->key);
        snprintf(value, sizeof value, "%.*s", (int)(at + len - eq - 1), eq + 1);
        if ((size_t)(at + len - eq - 1) >= sizeof value)
            return bad(err, name, "(too long)", "a positive whole number");
        int rc = knob_value(kn, name, value, knob_slot(&k, kn), err);
        if (rc)
            return rc;
        at = end ? end + 1 : at + len;
        if (end && !*at)
            return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                                  "options.knobs: '%s' ends in a comma", text);
    }
    *out = k;
    return PGD_OK;
}

/* The knobs as text: every one set, in the table's order. */
static void knobs_format(const pgd__knobs *k, char buf[PGD_KNOBS_MAX])
{
    size_t used = 0;
    buf[0] = 0;
    for (size_t i = 0; i < NKNOBS; i++) {
        int64_t v = *knob_slot((pgd__knobs *)k, &knob_table[i]);
        if (v > 0 && knob_table[i].names)
            used += (size_t)snprintf(buf + used, PGD_KNOBS_MAX - used, "%s%s=%s", used ? "," : "",
                                     knob_table[i].key, knob_table[i].names[v - 1]);
        else if (v > 0)
            used += (size_t)snprintf(buf + used, PGD_KNOBS_MAX - used, "%s%s=%lld", used ? "," : "",
                                     knob_table[i].key, (long long)v);
    }
}

pgd_status pgd_ctx_options_set_knob(pgd_ctx_options *opt, const char *key, const char *value,
                                    pgd_error **err)
{
    pgd_ctx_options o;
    pgd__knobs k;
    int rc = options_load(opt, &o, err);
    if (!rc)
        rc = pgd__knobs_parse(o.knobs, &k, err);
    if (rc)
        return rc;
    const struct knob *kn = key ? knob_find(key, strlen(key)) : NULL;
    if (!kn)
        return knobs_unknown(key ? key : "(null)", key ? strlen(key) : 6, err);
    char name[64];
    snprintf(name, sizeof name, "knob %s", kn->key);
    int64_t v = 0;
    if (value && *value && (rc = knob_value(kn, name, value, &v, err)))
        return rc;
    *knob_slot(&k, kn) = v;
    knobs_format(&k, o.knobs);
    options_store(opt, &o);
    return PGD_OK;
}

pgd_status pgd_ctx_get_knob(const pgd_ctx *ctx, const char *key, int64_t *value)
{
    const struct knob *kn = key ? knob_find(key, strlen(key)) : NULL;
    if (!kn)
        return PGD_ERR_NOT_FOUND;
    *value = *knob_slot((pgd__knobs *)&ctx->knobs, kn);
    return PGD_OK;
}

/* ---- the environment ---- */

pgd_status pgd_ctx_options_from_env(pgd_ctx_options *opt, pgd_error **err)
{
    return pgd_ctx_options_from_envp(opt, NULL, err);
}

/* The knob variables of envp into *k (those set). */
static int knobs_from_envp(const char *const *envp, pgd__knobs *k, pgd_error **err)
{
    for (size_t i = 0; i < NKNOBS; i++) {
        const char *s = lookup(envp, knob_table[i].var);
        int rc =
            s ? knob_value(&knob_table[i], knob_table[i].var, s, knob_slot(k, &knob_table[i]), err)
              : PGD_OK;
        if (rc)
            return rc;
    }
    return PGD_OK;
}

pgd_status pgd_ctx_options_from_envp(pgd_ctx_options *opt, const char *const *envp, pgd_error **err)
{
    static const char *const backends[] = {"auto", "pagoda", "clblast", NULL};
    static const char *const tunings[] = {"create", "request", NULL};
    static const char *const convs[] = {"auto",   "gemm",     "implicit",  "im2col",
                                        "direct", "winograd", "depthwise", NULL};
    static const char *const attns[] = {"auto", "rows", "tiled", "generic", "kt", NULL};
    static const char *const dtypes[] = {"f32", "f16", NULL};
    pgd_ctx_options o; /* committed only when every variable parsed */
    pgd__knobs k;
    const char *s;
    int rc = options_load(opt, &o, err), e;
    if (!rc)
        rc = pgd__knobs_parse(o.knobs, &k, err);
    if (rc)
        return rc;

    if ((s = lookup(envp, "PAGODA_DEVICE")))
        o.device = s;
    if ((s = lookup(envp, "PAGODA_CACHE_DIR")))
        o.cache_dir = s;
    if ((s = lookup(envp, "PAGODA_CL_DIR")))
        o.kernel_dir = s;
    if ((s = lookup(envp, "PAGODA_KERNEL_PARAMS")))
        o.kernel_params = s; /* checked against the device at context creation */
    if (!rc && (s = lookup(envp, "PAGODA_PROFILE")) &&
        !(rc = parse_bool("PAGODA_PROFILE", s, &e, err)))
        o.profiling = o.profile_print_at_destroy = e;
    if (!rc && (s = lookup(envp, "PAGODA_GEMM")) &&
        !(rc = parse_enum("PAGODA_GEMM", s, backends, &e, err)))
        o.gemm_backend = (pgd_gemm_backend)e;
    if (!rc && (s = lookup(envp, "PAGODA_GEMM_TUNE")) &&
        !(rc = parse_enum("PAGODA_GEMM_TUNE", s, tunings, &e, err)))
        o.gemm_tuning = (pgd_gemm_tuning)e;
    if (!rc && (s = lookup(envp, "PAGODA_CONV")) &&
        !(rc = parse_enum("PAGODA_CONV", s, convs, &e, err)))
        o.conv_algo = (pgd_conv_algo)e;
    if (!rc && (s = lookup(envp, "PAGODA_ATTENTION")) &&
        !(rc = parse_enum("PAGODA_ATTENTION", s, attns, &e, err)))
        o.attention = (pgd_attention_variant)e;
    if (!rc && (s = lookup(envp, "PAGODA_WEIGHTS_DTYPE")) &&
        !(rc = parse_enum("PAGODA_WEIGHTS_DTYPE", s, dtypes, &e, err)))
        o.weights_f16 = e;
    if (!rc && (s = lookup(envp, "PAGODA_GLOBAL_MEM")))
        rc = parse_bytes("PAGODA_GLOBAL_MEM", s, &o.global_mem_limit, err);
    if (!rc && (s = lookup(envp, "PAGODA_MAX_ALLOC")))
        rc = parse_bytes("PAGODA_MAX_ALLOC", s, &o.max_alloc_limit, err);
    if (!rc)
        rc = knobs_from_envp(envp, &k, err);
    if (!rc) {
        knobs_format(&k, o.knobs);
        options_store(opt, &o);
    }
    return rc;
}

/* ---- the copy a context keeps ---- */

int pgd__options_copy(pgd_ctx_options *dst, pgd__knobs *knobs, const pgd_ctx_options *src,
                      pgd_error **err)
{
    pgd_ctx_options o;
    int rc = options_load(src, &o, err);
    if (!rc)
        rc = pgd__knobs_parse(o.knobs, knobs, err);
    if (rc)
        return rc;
    knobs_format(knobs, o.knobs);
    o.device = pgd__strdup(o.device);
    o.cache_dir = pgd__strdup(o.cache_dir);
    o.kernel_dir = pgd__strdup(o.kernel_dir);
    o.kernel_params = pgd__strdup(o.kernel_params);
    if ((src && src->device && !o.device) || (src && src->cache_dir && !o.cache_dir) ||
        (src && src->kernel_dir && !o.kernel_dir) ||
        (src && src->kernel_params && !o.kernel_params)) {
        pgd__options_free(&o);
        return pgd__error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "copying the context options");
    }
    *dst = o;
    return PGD_OK;
}

void pgd__options_free(pgd_ctx_options *opt)
{
    free((char *)opt->device);
    free((char *)opt->cache_dir);
    free((char *)opt->kernel_dir);
    free((char *)opt->kernel_params);
    opt->device = opt->cache_dir = opt->kernel_dir = opt->kernel_params = NULL;
}

/* The platform's cache location ($XDG_CACHE_HOME/pagoda, else $HOME/.cache/pagoda) for a
 * NULL cache_dir: where to cache is the user's platform convention, not a Pagoda knob, but it
 * is read here so that the environment stays in one file. */
int pgd__default_cache_dir(char *buf, size_t size)
{
    const char *xdg = lookup(NULL, "XDG_CACHE_HOME");
    const char *home = lookup(NULL, "HOME");
    if (xdg)
        snprintf(buf, size, "%s/pagoda", xdg);
    else if (home)
        snprintf(buf, size, "%s/.cache/pagoda", home);
    else
        return -1;
    return 0;
}

const pgd_ctx_options *pgd_ctx_get_options(const pgd_ctx *ctx)
{
    return &ctx->opt;
}

/* ---- the hub's options: huggingface_hub's variables, read here with the others ---- */

pgd_status pgd_hub_options_from_env(pgd_hub_options *o, pgd_error **err)
{
    return pgd_hub_options_from_envp(o, NULL, err);
}

pgd_status pgd_hub_options_from_envp(pgd_hub_options *o, const char *const *envp, pgd_error **err)
{
    pgd_hub_options n = *o; /* committed only when every variable parsed */
    const char *s;
    int rc = PGD_OK;
    if ((s = lookup(envp, "HF_ENDPOINT")))
        n.endpoint = s;
    if ((s = lookup(envp, "HF_TOKEN")))
        n.token = s;
    if ((s = lookup(envp, "HF_HUB_CACHE")))
        n.cache_dir = s;
    if ((s = lookup(envp, "HF_HOME")))
        n.hf_home = s;
    if ((s = lookup(envp, "HF_HUB_OFFLINE"))) {
        /* any case, as huggingface_hub reads it (HF_HUB_OFFLINE=TRUE) */
        char low[8] = "";
        for (size_t i = 0; s[i] && i + 1 < sizeof low; i++)
            low[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]);
        rc = strlen(s) < sizeof low ? parse_bool("HF_HUB_OFFLINE", low, &n.offline, err)
                                    : bad(err, "HF_HUB_OFFLINE", s,
                                          "1/0, true/false, yes/no "
                                          "or on/off");
    }
    if (!rc && (s = lookup(envp, "HF_HUB_DOWNLOAD_TIMEOUT"))) {
        char *end;
        double t = strtod(s, &end);
        if (*end || !(t > 0 && t <= 86400))
            rc = bad(err, "HF_HUB_DOWNLOAD_TIMEOUT", s, "a number of seconds (0 < T <= 86400)");
        n.timeout_s = t;
    }
    if (!rc)
        *o = n;
    return rc;
}

int pgd__hub_default_home(char *buf, size_t size)
{
    const char *xdg = lookup(NULL, "XDG_CACHE_HOME");
    const char *home = lookup(NULL, "HOME");
    int n;
    if (xdg)
        n = snprintf(buf, size, "%s/huggingface", xdg);
    else if (home)
        n = snprintf(buf, size, "%s/.cache/huggingface", home);
    else
        return -1;
    return n < 0 || (size_t)n >= size ? -1 : 0;
}
