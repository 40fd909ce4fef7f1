/* options.c — context options: defaults, the one reader of the environment, and the copy a
 * context keeps. Every PAGODA_* knob is parsed here, strictly, once per context creation; the
 * ops read the parsed values from ctx->opt and never the environment. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void pgd_ctx_options_init(pgd_ctx_options *opt)
{
    memset(opt, 0, sizeof *opt);
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

int pgd_ctx_options_from_env(pgd_ctx_options *opt, pgd_error **err)
{
    return pgd_ctx_options_from_envp(opt, NULL, err);
}

int pgd_ctx_options_from_envp(pgd_ctx_options *opt, const char *const *envp, pgd_error **err)
{
    static const char *const backends[] = {"auto", "pagoda", "clblast", NULL};
    static const char *const tunings[] = {"create", "request", NULL};
    static const char *const convs[] = {"auto", "gemm", "implicit", "im2col", "direct", "winograd", NULL};
    static const char *const attns[] = {"auto", "rows", "tiled", "generic", "kt", NULL};
    static const char *const dtypes[] = {"f32", "f16", NULL};
    pgd_ctx_options o = *opt; /* committed only when every variable parsed */
    const char *s;
    int rc = PGD_OK, e;
    int64_t v;

    if ((s = lookup(envp, "PAGODA_DEVICE")))
        o.device = s;
    if ((s = lookup(envp, "PAGODA_CACHE_DIR")))
        o.cache_dir = s;
    if ((s = lookup(envp, "PAGODA_CL_DIR")))
        o.kernel_dir = s;
    if ((s = lookup(envp, "PAGODA_KERNEL_PARAMS")))
        o.kernel_params = s; /* checked against the device at context creation */
    if (!rc && (s = lookup(envp, "PAGODA_PROFILE")) && !(rc = parse_bool("PAGODA_PROFILE", s, &e, err)))
        o.profiling = o.profile_print_at_destroy = e;
    if (!rc && (s = lookup(envp, "PAGODA_GEMM")) && !(rc = parse_enum("PAGODA_GEMM", s, backends, &e, err)))
        o.gemm_backend = (pgd_gemm_backend)e;
    if (!rc && (s = lookup(envp, "PAGODA_GEMM_TUNE")) &&
        !(rc = parse_enum("PAGODA_GEMM_TUNE", s, tunings, &e, err)))
        o.gemm_tuning = (pgd_gemm_tuning)e;
    if (!rc && (s = lookup(envp, "PAGODA_GEMM_KCHUNK")) &&
        !(rc = parse_positive("PAGODA_GEMM_KCHUNK", s, INT32_MAX, &v, err)))
        o.gemm_k_chunk = v;
    if (!rc && (s = lookup(envp, "PAGODA_CONV")) && !(rc = parse_enum("PAGODA_CONV", s, convs, &e, err)))
        o.conv_algo = (pgd_conv_algo)e;
    if (!rc && (s = lookup(envp, "PAGODA_CONV_MB")) &&
        !(rc = parse_positive("PAGODA_CONV_MB", s, 4096, &v, err)))
        o.conv_mb = (int)v;
    if (!rc && (s = lookup(envp, "PAGODA_CONV_CHUNK")))
        rc = parse_bytes("PAGODA_CONV_CHUNK", s, &o.conv_chunk_bytes, err);
    if (!rc && (s = lookup(envp, "PAGODA_ATTENTION")) &&
        !(rc = parse_enum("PAGODA_ATTENTION", s, attns, &e, err)))
        o.attention = (pgd_attention_variant)e;
    if (!rc && (s = lookup(envp, "PAGODA_WEIGHTS_DTYPE")) &&
        !(rc = parse_enum("PAGODA_WEIGHTS_DTYPE", s, dtypes, &e, err)))
        o.weights_f16 = e;
    if (!rc && (s = lookup(envp, "PAGODA_ATTN_KEY_BLOCK")) &&
        !(rc = parse_positive("PAGODA_ATTN_KEY_BLOCK", s, INT32_MAX, &v, err)))
        o.attn_key_block = v;
    if (!rc && (s = lookup(envp, "PAGODA_ROW_WG")) &&
        !(rc = parse_positive("PAGODA_ROW_WG", s, 1 << 20, &v, err)))
        o.row_wg = (int)v;
    if (!rc && (s = lookup(envp, "PAGODA_MAX_LAUNCH_ROWS")) &&
        !(rc = parse_positive("PAGODA_MAX_LAUNCH_ROWS", s, INT64_MAX, &v, err)))
        o.max_launch_rows = v;
    if (!rc && (s = lookup(envp, "PAGODA_GLOBAL_MEM")))
        rc = parse_bytes("PAGODA_GLOBAL_MEM", s, &o.global_mem_limit, err);
    if (!rc && (s = lookup(envp, "PAGODA_MAX_ALLOC")))
        rc = parse_bytes("PAGODA_MAX_ALLOC", s, &o.max_alloc_limit, err);
    if (!rc && (s = lookup(envp, "PAGODA_MAX_BATCH")) &&
        !(rc = parse_positive("PAGODA_MAX_BATCH", s, INT32_MAX, &v, err)))
        o.max_batch = (int)v;
    if (!rc && (s = lookup(envp, "PAGODA_NL_KEY_CHUNK")) &&
        !(rc = parse_positive("PAGODA_NL_KEY_CHUNK", s, INT32_MAX, &v, err)))
        o.nl_key_chunk = v;
    if (!rc)
        *opt = o;
    return rc;
}

/* ---- the copy a context keeps ---- */

int pgd__options_copy(pgd_ctx_options *dst, const pgd_ctx_options *src)
{
    pgd_ctx_options o;
    if (src)
        o = *src;
    else
        pgd_ctx_options_init(&o);
    o.device = pgd__strdup(o.device);
    o.cache_dir = pgd__strdup(o.cache_dir);
    o.kernel_dir = pgd__strdup(o.kernel_dir);
    o.kernel_params = pgd__strdup(o.kernel_params);
    if ((src && src->device && !o.device) || (src && src->cache_dir && !o.cache_dir) ||
        (src && src->kernel_dir && !o.kernel_dir) ||
        (src && src->kernel_params && !o.kernel_params)) {
        pgd__options_free(&o);
        return -1;
    }
    *dst = o;
    return 0;
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

int pgd_hub_options_from_env(pgd_hub_options *o, pgd_error **err)
{
    pgd_hub_options n = *o; /* committed only when every variable parsed */
    const char *s;
    int rc = PGD_OK;
    if ((s = lookup(NULL, "HF_ENDPOINT")))
        n.endpoint = s;
    if ((s = lookup(NULL, "HF_TOKEN")))
        n.token = s;
    if ((s = lookup(NULL, "HF_HUB_CACHE")))
        n.cache_dir = s;
    if ((s = lookup(NULL, "HF_HOME")))
        n.hf_home = s;
    if ((s = lookup(NULL, "HF_HUB_OFFLINE"))) {
        /* any case, as huggingface_hub reads it (HF_HUB_OFFLINE=TRUE) */
        char low[8] = "";
        for (size_t i = 0; s[i] && i + 1 < sizeof low; i++)
            low[i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]);
        rc = strlen(s) < sizeof low ? parse_bool("HF_HUB_OFFLINE", low, &n.offline, err)
                                    : bad(err, "HF_HUB_OFFLINE", s, "1/0, true/false, yes/no "
                                                                    "or on/off");
    }
    if (!rc && (s = lookup(NULL, "HF_HUB_DOWNLOAD_TIMEOUT"))) {
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
