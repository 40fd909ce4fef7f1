/* fuzz_resnet_config.c — libFuzzer target: the ResNet / non-local ResNet layout detection
 * (resnet_detect) driven directly, without the safetensors reader in between (fuzz_model_config
 * covers that path), so that the fuzzer's mutations land on names, shapes and options.
 *
 * The input is text. The first line is the options, `spec|mode|subsample` (an empty field is
 * "not given": NULL, NULL, -1). Every further line is either a tensor, `name d0 d1 …` (up to 8
 * dimensions, each a non-negative decimal whose product fits a safetensors file: at most 2^48
 * elements, so that what the detector sees could come from a real file), or a metadata entry,
 * `@key value`. Lines that do not parse are skipped. No device is involved. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "resnet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_TENSORS 512
#define MAX_META 16

typedef struct fake_tensor {
    const char *name;
    int ndim;
    int64_t shape[8];
} fake_tensor;

typedef struct fake_file {
    fake_tensor t[MAX_TENSORS];
    int n;
    const char *meta_key[MAX_META], *meta_val[MAX_META];
    int nmeta;
} fake_file;

static int fake_shape(void *u, const char *name, int *ndim, int64_t shape[8])
{
    const fake_file *f = u;
    for (int i = 0; i < f->n; i++) {
        if (strcmp(f->t[i].name, name))
            continue;
        *ndim = f->t[i].ndim;
        memcpy(shape, f->t[i].shape, sizeof f->t[i].shape);
        return 0;
    }
    return -1;
}

static int fake_read(void *u, const char *name, float *dst, pgd_error **err)
{
    (void)u, (void)name, (void)dst, (void)err;
    abort(); /* detection only looks at names and shapes */
}

static const char *fake_meta(void *u, const char *key)
{
    const fake_file *f = u;
    for (int i = 0; i < f->nmeta; i++)
        if (!strcmp(f->meta_key[i], key))
            return f->meta_val[i];
    return NULL;
}

static const char *fake_name_at(void *u, size_t i)
{
    const fake_file *f = u;
    return i < (size_t)f->n ? f->t[i].name : NULL;
}

/* One `name d0 d1 …` line into f, or nothing when it does not parse. */
static void add_tensor(fake_file *f, char *line)
{
    char *save = NULL, *name = strtok_r(line, " ", &save), *tok;
    if (!name || f->n == MAX_TENSORS)
        return;
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->t[i].name, name))
            return; /* a safetensors header holds each name once */
    fake_tensor *t = &f->t[f->n];
    int64_t elems = 1;
    t->ndim = 0;
    while ((tok = strtok_r(NULL, " ", &save))) {
        int64_t d;
        if (t->ndim == 8 || pgd_parse_int64(tok, 0, INT64_MAX, &d))
            return;
        if (d && elems > ((int64_t)1 << 48) / d)
            return;
        elems *= d;
        t->shape[t->ndim++] = d;
    }
    t->name = name;
    f->n++;
}

static void add_line(fake_file *f, char *line)
{
    if (line[0] != '@') {
        add_tensor(f, line);
        return;
    }
    char *sp = strchr(line, ' ');
    if (!sp || f->nmeta == MAX_META)
        return;
    *sp = 0;
    f->meta_key[f->nmeta] = line + 1;
    f->meta_val[f->nmeta++] = sp + 1;
}

/* What resnet_load and resnet_forward rely on. */
static void check_config(const resnet_config *cfg)
{
    if (cfg->stem < 1 || cfg->classes < 1 || cfg->n_nl < 0 || cfg->n_nl > RESNET_MAX_NL)
        abort();
    for (int L = 0; L < 4; L++)
        if (cfg->blocks[L] < 1 || cfg->blocks[L] > RESNET_MAX_BLOCKS || cfg->width[L] < 1 ||
            cfg->out[L] < 1)
            abort();
    for (int i = 0; i < cfg->n_nl; i++) {
        const resnet_nl_site *s = &cfg->nl[i];
        if (s->layer < 1 || s->layer > 4 || s->block < 0 || s->block >= cfg->blocks[s->layer - 1] ||
            s->channels < 1 || s->inner != (s->channels > 1 ? s->channels / 2 : 1))
            abort(); /* θ, φ and g are C/2 wide, whatever C is */
        for (int j = 0; j < i; j++)
            if (cfg->nl[j].layer == s->layer && cfg->nl[j].block == s->block)
                abort(); /* one block per site */
    }
}

/* The options line `spec|mode|subsample`. */
static void parse_options(char *line, resnet_options *opt)
{
    char *bar1 = strchr(line, '|'), *bar2 = bar1 ? strchr(bar1 + 1, '|') : NULL;
    if (bar1)
        *bar1 = 0;
    if (bar2)
        *bar2 = 0;
    opt->nonlocal_spec = line[0] ? line : NULL;
    opt->mode = bar1 && bar1[1] ? bar1 + 1 : NULL;
    int64_t sub = -1;
    if (bar2)
        pgd_parse_int64(bar2 + 1, -1, 1, &sub);
    opt->subsample = (int)sub;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    fake_file *f = calloc(1, sizeof *f);
    if (!text || !f) {
        free(text);
        free(f);
        return 0;
    }
    memcpy(text, data, size);
    text[size] = 0;
    resnet_options opt;
    char *nl = strchr(text, '\n');
    if (nl)
        *nl = 0;
    parse_options(text, &opt);
    for (char *line = nl ? nl + 1 : NULL; line;) {
        nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        add_line(f, line);
        line = nl ? nl + 1 : NULL;
    }
    model_source src = {.u = f,
                        .label = "fuzz.safetensors",
                        .shape = fake_shape,
                        .read = fake_read,
                        .meta = fake_meta,
                        .name_at = fake_name_at};
    resnet_config cfg;
    pgd_error *err = NULL;
    if (resnet_detect(&src, &opt, &cfg, &err) == PGD_OK) {
        if (err)
            abort();
        check_config(&cfg);
    } else if (!err || !pgd_error_get_message(err)[0]) {
        abort(); /* a refusal always says why */
    }
    pgd_error_destroy(err);
    free(f);
    free(text);
    return 0;
}
