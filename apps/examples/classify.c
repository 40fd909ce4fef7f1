/* classify.c — the smallest complete Pagoda program that does something useful: it opens a
 * Vision Transformer checkpoint (.safetensors in timm, Hugging Face or torchvision naming),
 * decodes and preprocesses an image as the checkpoint's family was trained, runs the model on
 * the default OpenCL device and prints the five most likely classes.
 *
 *   classify WEIGHTS.safetensors IMAGE
 *
 * It uses libpagoda's public header and the models of apps/models only, and is built in CI
 * against the library installed by `meson install` (tools/check-install). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "pagoda.h"
#include "vit.h"

/* Prints the error, frees it and returns the exit status 1. */
static int fail(const char *what, pgd_error *err)
{
    fprintf(stderr, "classify: %s: %s\n", what, err ? pgd_error_message(err) : "failed");
    pgd_error_free(err);
    return 1;
}

/* The preprocessing each weight family was trained with. */
static pgd_preprocess preset_of(vit_family f)
{
    return f == VIT_HF ? PGD_PREPROCESS_HF
           : f == VIT_TORCHVISION ? PGD_PREPROCESS_TORCHVISION
                                  : PGD_PREPROCESS_TIMM;
}

/* Prints the k largest softmax probabilities of logits[0..n). */
static void print_top(const float *logits, int n, int k)
{
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < n; i++)
        mx = logits[i] > mx ? logits[i] : mx;
    for (int i = 0; i < n; i++)
        sum += exp(logits[i] - mx);
    int used[5] = {-1, -1, -1, -1, -1};
    for (int r = 0; r < k && r < n && r < 5; r++) {
        int best = -1;
        for (int i = 0; i < n; i++) {
            int taken = 0;
            for (int j = 0; j < r; j++)
                taken |= used[j] == i;
            if (!taken && (best < 0 || logits[i] > logits[best]))
                best = i;
        }
        used[r] = best;
        printf("class %4d  %6.2f %%\n", best, 100.0 * exp(logits[best] - mx) / sum);
    }
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: classify WEIGHTS.safetensors IMAGE\n");
        return 2;
    }
    pgd_error *err = NULL;
    pgd_ctx *ctx = NULL;
    pgd_weights *w = NULL;
    pgd_image *img = NULL;
    vit_model *m = NULL;
    float *x = NULL, *logits = NULL;
    int status = 1;
    model_source src;
    vit_config cfg;
    const int S = PGD_PREPROCESS_SIZE;
    if (pgd_ctx_create(NULL, &ctx, &err))
        return fail("no OpenCL device", err);
    if (pgd_weights_open(argv[1], &w, &err)) {
        status = fail(argv[1], err);
        goto done;
    }
    model_weights_source(&src, w, argv[1]);
    if (vit_detect(&src, 0, &cfg, &err) || vit_load(ctx, &src, &cfg, &m, &err)) {
        status = fail(argv[1], err);
        goto done;
    }
    x = malloc((size_t)3 * S * S * sizeof *x);
    logits = malloc((size_t)cfg.classes * sizeof *logits);
    if (!x || !logits) {
        fprintf(stderr, "classify: out of memory\n");
        goto done;
    }
    if (pgd_image_load(argv[2], &img, &err) ||
        pgd_image_preprocess(img, preset_of(cfg.family), x, &err)) {
        status = fail(argv[2], err);
        goto done;
    }
    if (vit_forward(m, x, 1, S, S, logits, NULL, NULL, NULL, &err)) {
        status = fail("forward pass", err);
        goto done;
    }
    printf("%s on %s (%s ViT, %d classes)\n", argv[2], pgd_ctx_device(ctx)->name,
           vit_family_name(cfg.family), cfg.classes);
    print_top(logits, cfg.classes, 5);
    status = 0;
done:
    free(x);
    free(logits);
    pgd_image_free(img);
    vit_free(m);
    pgd_weights_close(w);
    pgd_ctx_destroy(ctx);
    return status;
}
