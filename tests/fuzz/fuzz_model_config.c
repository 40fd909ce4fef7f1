/* fuzz_model_config.c — libFuzzer target: model configuration detection from tensor names and
 * shapes. The input is a safetensors file (so the fuzzer mutates names, shapes and metadata
 * through the real reader); whatever the reader accepts is handed to each detector, which must
 * either fill a consistent configuration or fail with a message — never read out of bounds or
 * overflow while deriving depth, width, patch, grid, classes, eps and heads (ViT, ResNet, and
 * GPT-2's vocabulary, positions, layers and MLP width). */
#include <stdint.h>
#include <stdlib.h>

#include "gpt2.h"
#include "internal.h"
#include "resnet.h"
#include "vit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_vit(const model_source *src, int heads)
{
    vit_config cfg;
    pgd_error *err = NULL;
    if (vit_detect(src, heads, &cfg, &err) != PGD_OK) {
        if (!err || !pgd_error_get_message(err)[0])
            abort();
        pgd_error_destroy(err);
        return;
    }
    pgd_error_destroy(err);
    /* What vit_load and vit_forward rely on. */
    if (cfg.depth < 1 || cfg.dim < 1 || cfg.heads < 1 || cfg.patch < 1 || cfg.mlp < 1 ||
        cfg.classes < 1 || cfg.grid_h < 1 || cfg.grid_w < 1 || cfg.extra < 1 || cfg.extra > 2 ||
        cfg.dim % cfg.heads != 0)
        abort();
}

static void check_resnet(const model_source *src, const char *spec, const char *mode, int sub)
{
    resnet_config cfg;
    resnet_options opt = {spec, mode, sub};
    pgd_error *err = NULL;
    if (resnet_detect(src, &opt, &cfg, &err) != PGD_OK) {
        if (!err || !pgd_error_get_message(err)[0])
            abort();
        pgd_error_destroy(err);
        return;
    }
    pgd_error_destroy(err);
    /* What resnet_load and resnet_forward rely on. */
    if (cfg.stem < 1 || cfg.classes < 1 || cfg.n_nl < 0 || cfg.n_nl > RESNET_MAX_NL)
        abort();
    for (int L = 0; L < 4; L++)
        if (cfg.blocks[L] < 1 || cfg.blocks[L] > RESNET_MAX_BLOCKS || cfg.width[L] < 1 ||
            cfg.out[L] < 1)
            abort();
    for (int i = 0; i < cfg.n_nl; i++)
        if (cfg.nl[i].layer < 1 || cfg.nl[i].layer > 4 || cfg.nl[i].block < 0 ||
            cfg.nl[i].block >= cfg.blocks[cfg.nl[i].layer - 1] || cfg.nl[i].channels < 1 ||
            cfg.nl[i].inner != (cfg.nl[i].channels > 1 ? cfg.nl[i].channels / 2 : 1))
            abort();
}

/* GPT-2's names and shapes under a config.json's sizes (width 48, `heads` heads). */
static void check_gpt2(const model_source *src, int heads)
{
    gpt2_config cfg = {.dim = 48, .heads = heads, .eps = 1e-5f, .eos = -1, .from_config = 1};
    pgd_error *err = NULL;
    if (gpt2_detect(src, "config.json", &cfg, &err) != PGD_OK) {
        if (!err || !pgd_error_get_message(err)[0])
            abort();
        pgd_error_destroy(err);
        return;
    }
    pgd_error_destroy(err);
    /* What gpt2_load and gpt2_append rely on. */
    if (cfg.layers < 1 || cfg.vocab < 1 || cfg.positions < 1 || cfg.inner < 1 || cfg.dim != 48 ||
        cfg.dim % cfg.heads)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pgd_weights *w = NULL;
    pgd_error *err = NULL;
    if (pgd__weights_open_memory(data, size, "fuzz.safetensors", &w, &err) != PGD_OK) {
        pgd_error_destroy(err);
        return 0;
    }
    model_source src;
    model_weights_source(&src, w, "fuzz.safetensors");
    check_vit(&src, 0);
    /* An explicit --heads that need not divide the width. */
    check_vit(&src, size ? 1 + data[size - 1] % 16 : 3);
    /* The ResNet detector: the file's own blocks and metadata, and with overrides. */
    check_resnet(&src, NULL, NULL, -1);
    check_resnet(&src, "layer1.0,layer3.1", "concatenation", 1);
    check_gpt2(&src, 4);
    pgd_weights_destroy(w);
    return 0;
}
