/* fuzz_bert_config.c — libFuzzer target: a BERT-family config.json (bert_config_parse) and its
 * check against a checkpoint's names and shapes (bert_detect, over a fixed seeded BERT of width
 * 32, 2 heads, 2 layers, 100 tokens). What is refused carries a message; what is accepted is a
 * configuration a model can be built from: heads dividing the width, an epsilon in (0, 1), a
 * RoBERTa padding id, and after bert_detect the checkpoint's sizes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bert.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void refused(int rc, pgd_error *err)
{
    if (rc != PGD_OK && (!err || !pgd_error_get_message(err)[0]))
        abort();
    pgd_error_destroy(err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bert_config cfg;
    pgd_error *err = NULL;
    int rc = bert_config_parse((const char *)data, size, "config.json", &cfg, &err);
    refused(rc, err);
    if (rc)
        return 0;
    if (cfg.heads < 1 || (cfg.hidden && cfg.hidden % cfg.heads) || !(cfg.eps > 0 && cfg.eps < 1) ||
        (cfg.arch == BERT_ARCH_ROBERTA && cfg.pad_id < 0) || (unsigned)cfg.arch > 2)
        abort();
    bert_config fixed;
    bert_random_config(100, &fixed);
    fixed.hidden = 32, fixed.heads = 2, fixed.inter = 48, fixed.max_pos = 40;
    model_source src;
    if (bert_random_source(&src, &fixed, 1, NULL))
        abort();
    err = NULL;
    rc = bert_detect(&src, &cfg, &err);
    refused(rc, err);
    if (!rc && (cfg.hidden != 32 || cfg.vocab != 100 || cfg.hidden % cfg.heads || cfg.layers != 2 ||
                cfg.inter != 48 || strcmp(cfg.prefix, "bert.")))
        abort();
    model_source_free(&src);
    return 0;
}
