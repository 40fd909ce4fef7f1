/* classify.c — the smallest complete Pagoda program that does something useful: it opens a
 * checkpoint of any image family Pagoda knows (ViT/DeiT, ResNet with or without non-local blocks,
 * MLP-Mixer, Swin; .safetensors in the namings their libraries write), decodes and preprocesses
 * an image as the checkpoint was trained, runs the model on the default OpenCL device and prints
 * the five most likely classes.
 *
 *   classify WEIGHTS.safetensors IMAGE
 *
 * It uses the installed headers only (pagoda.h and pagoda_models.h) and is built in CI with
 * nothing but `pkg-config --cflags --libs pagoda-models` against the libraries `meson install`
 * put in a temporary prefix (tools/dev/check-install). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "pagoda_models.h"

/* Prints the error, frees it and returns the exit status 1. */
static int fail(const char *what, pgd_error *err)
{
    fprintf(stderr, "classify: %s: %s\n", what, err ? pgd_error_get_message(err) : "failed");
    pgd_error_destroy(err);
    return 1;
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
        printf("%6.2f %%  %s\n", 100.0 * exp(logits[best] - mx) / sum,
               n == 1000 ? pgd_model_imagenet_label(best) : "");
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
    pgd_model *m = NULL;
    pgd_model_info info;
    pgd_image *img = NULL;
    float *x = NULL, *logits = NULL;
    int status = 1;
    if (pgd_ctx_create(NULL, &ctx, &err))
        return fail("no OpenCL device", err);
    if (pgd_model_load(ctx, argv[1], NULL, &m, &err) || pgd_model_get_info(m, &info)) {
        status = fail(argv[1], err);
        goto done;
    }
    /* the presets crop PGD_PREPROCESS_SIZE squares: the size every family here was trained at */
    const int S = PGD_PREPROCESS_SIZE;
    x = malloc((size_t)3 * S * S * sizeof *x);
    logits = malloc((size_t)info.classes * sizeof *logits);
    if (!x || !logits) {
        fprintf(stderr, "classify: out of memory\n");
        goto done;
    }
    if (pgd_image_load(argv[2], &img, &err) ||
        pgd_image_preprocess(img, info.preprocess, x, &err)) {
        status = fail(argv[2], err);
        goto done;
    }
    if (pgd_model_forward(m, x, 1, S, S, logits, NULL, &err)) {
        status = fail("forward pass", err);
        goto done;
    }
    printf("%s on %s: %s\n", argv[2], pgd_ctx_get_device(ctx)->name, info.description);
    print_top(logits, info.classes, 5);
    status = 0;
done:
    free(x);
    free(logits);
    pgd_image_destroy(img);
    pgd_model_destroy(m);
    pgd_ctx_destroy(ctx);
    return status;
}
