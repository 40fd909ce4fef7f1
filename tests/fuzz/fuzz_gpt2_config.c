/* fuzz_gpt2_config.c — libFuzzer target: GPT-2's config.json (gpt2_config_read, through the
 * real file path), then detection of a seeded random GPT-2 (a source without a tensor listing,
 * so the configuration's own n_layer counts) under whatever configuration was accepted. An
 * accepted configuration must hold what the model relies on (n_head dividing n_embd, sizes of
 * at least 1, eps finite and not negative); a refused one must say why; no input may crash,
 * leak or read out of bounds. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_file.h"
#include "gpt2.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int refused(int rc, pgd_error *err)
{
    if (rc == PGD_OK)
        return 0;
    if (!err || !pgd_error_get_message(err)[0])
        abort();
    pgd_error_destroy(err);
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_file_write(data, size, "config.json");
    if (!path)
        return 0;
    gpt2_config cfg;
    pgd_error *err = NULL;
    if (refused(gpt2_config_read(path, &cfg, &err), err))
        return 0;
    if (cfg.dim < 1 || cfg.heads < 1 || cfg.dim % cfg.heads || !(cfg.eps >= 0) ||
        !isfinite(cfg.eps) || cfg.layers < 0 || cfg.positions < 0 || cfg.inner < 0)
        abort();
    /* the weights of the small random model, read under the fuzzed sizes */
    gpt2_config rnd;
    gpt2_random_config(&rnd);
    if (cfg.layers > 64)
        return 0; /* the random source answers for that many blocks: keep each input quick */
    rnd.layers = cfg.layers ? cfg.layers : 2;
    model_source src;
    if (refused(gpt2_random_source(&src, &rnd, 1, &err), err))
        return 0;
    err = NULL;
    if (!refused(gpt2_detect(&src, path, &cfg, &err), err) &&
        (cfg.vocab != rnd.vocab || cfg.dim != rnd.dim || cfg.positions != rnd.positions ||
         cfg.inner != rnd.inner || cfg.layers != rnd.layers))
        abort();
    model_source_free(&src);
    return 0;
}
