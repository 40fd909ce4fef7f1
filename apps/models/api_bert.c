/* api_bert.c — the BERT-family encoders of bert.h behind pagoda_models.h's pgd_bert_*
 * (exported by libpagoda-models): the folder's files found as the CLI finds them
 * (text_files.h), the configuration checked, the weights uploaded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bert.h"
#include "pagoda_models.h"
#include "text_files.h"

struct pgd_bert {
    bert_model *m;
    bert_config cfg;
};

static int open_config(const text_files *f, bert_config *cfg, pgd_error **err)
{
    char *text = NULL, label[4200];
    size_t n = 0;
    snprintf(label, sizeof label, "%s/config.json", f->dir);
    int rc = text_read_beside(f, "config.json", &text, &n, err);
    if (rc == PGD_ERR_NOT_FOUND)
        return pgd_error_set(err, PGD_ERR_NOT_FOUND,
                             "%s: no config.json beside the weights: the head count is read "
                             "from it (never guessed)",
                             f->dir);
    if (!rc)
        rc = bert_config_parse(text, n, label, cfg, err);
    free(text);
    return rc;
}

PGD_MODELS_API pgd_status pgd_bert_load(pgd_ctx *ctx, const char *weights, pgd_bert **out,
                                        pgd_error **err)
{
    if (!out || !ctx || !weights)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_bert_load: NULL argument");
    *out = NULL;
    text_files f;
    model_source src;
    memset(&src, 0, sizeof src);
    pgd_bert *b = calloc(1, sizeof *b);
    int rc = b ? text_files_find(weights, &f, err)
               : pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "pgd_bert_load");
    if (!rc)
        rc = open_config(&f, &b->cfg, err);
    if (!rc)
        rc = model_source_open(&src, f.weights, err);
    if (!rc)
        rc = bert_detect(&src, &b->cfg, err);
    if (!rc)
        rc = bert_load(ctx, &src, &b->cfg, &b->m, err);
    model_source_free(&src);
    if (rc) {
        free(b);
        return rc;
    }
    *out = b;
    return PGD_OK;
}

PGD_MODELS_API pgd_status pgd_bert_get_info(const pgd_bert *m, pgd_bert_info *info)
{
    if (!m || !info)
        return PGD_ERR_INVALID_ARGUMENT;
    const bert_config *c = &m->cfg;
    memset(info, 0, sizeof *info);
    snprintf(info->arch, sizeof info->arch, "%s", bert_arch_name(c->arch));
    info->layers = c->layers, info->hidden = c->hidden, info->heads = c->heads;
    info->vocab = c->vocab, info->positions = c->max_pos, info->type_vocab = c->type_vocab;
    info->pad_id = c->pad_id, info->mlm = c->mlm;
    return PGD_OK;
}

PGD_MODELS_API pgd_status pgd_bert_forward(pgd_bert *m, int B, int S, const int32_t *ids,
                                           const int32_t *mask, const int32_t *types, float *hidden,
                                           float *logits, float *probs, pgd_error **err)
{
    if (!m || !ids)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT, "pgd_bert_forward: NULL argument");
    bert_batch in = {B, S, ids, mask, types};
    bert_outputs out = {hidden, logits, probs};
    return bert_forward(m->m, &in, &out, err);
}

PGD_MODELS_API void pgd_bert_destroy(pgd_bert *m)
{
    if (m)
        bert_free(m->m);
    free(m);
}
