/* demo.c — `pagoda demo`: lists the devices and runs a small end-to-end check on the default
 * device (later releases add the ViT and non-local pipelines). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "app.h"
#include "commands.h"

/* The hub checkpoints the demo runs when the Hugging Face cache has them ('pagoda pull'). */
#define DEMO_VIT "timm/vit_base_patch16_224.augreg2_in21k_ft_in1k"
#define DEMO_RESNET "timm/resnet50.tv_in1k"

static const char usage[] =
    "usage: pagoda demo [--device SEL] [--profile] [--output-dir DIR]\n"
    "\n"
    "Lists the OpenCL devices, runs a small kernel end to end on the selected device\n"
    "(upload, y = 2x + x on the device, download) and checks every element against the host,\n"
    "then runs the two pipelines on the sample image (Chelsea the cat; $PAGODA_SAMPLE_IMAGE\n"
    "overrides): the ViT-B/16 classifier ('pagoda vit') and ResNet-50 with a non-local block\n"
    "before layer3.5 ('pagoda nonlocal'), each with the checkpoint 'pagoda pull' put into\n"
    "the Hugging Face cache (no request is made):\n"
    "  " DEMO_VIT "\n"
    "  " DEMO_RESNET " (the non-local block added, identity-initialised)\n"
    "else the weights directory's, else seeded random weights (said so, with the commands\n"
    "that give real ones). The ViT's attention maps and the non-local block's affinity of\n"
    "the image centre are written as PNGs into one folder, named at the end (default\n"
    "./pagoda-demo).\n"
    "\n"
    "Options:\n"
    "  --device SEL   device selector (see 'pagoda devices --help'); default $PAGODA_DEVICE\n"
    "  --profile      print per-kernel timings at the end (also PAGODA_PROFILE=1)\n"
    "  --output-dir DIR  the folder of the pictures (made if missing; default pagoda-demo)\n"
    "  -h, --help     show this help\n";

static void list_devices(void)
{
    pgd_error *err = NULL;
    pgd_device_info *list = NULL;
    size_t n = 0;
    if (pgd_devices_list(&list, &n, &err)) {
        pgd_error_destroy(err); /* the context below reports the problem in full */
        return;
    }
    printf("OpenCL devices:\n");
    for (size_t i = 0; i < n; i++)
        printf("  %d:%d  %-40s %s, %s\n", list[i].platform_index, list[i].device_index,
               list[i].name, list[i].platform, pgd_device_type_name(list[i].type));
    pgd_free(list);
}

/* y = 2x + x on the device over a prime number of elements, compared exactly on the host. */
static int check_elementwise(pgd_ctx *ctx, int profile)
{
    enum { N = 1000003 }; /* a prime: no work-group size divides it, so edges are exercised */
    const pgd_device_info *d = pgd_ctx_get_device(ctx);
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    pgd_tensor *tx = NULL, *ty = NULL;
    pgd_error *err = NULL;
    int64_t shape[1] = {N};
    int rc = EXIT_OK;
    if (!x || !y) {
        fprintf(stderr, "pagoda: error: out of host memory\n");
        rc = EXIT_RUNTIME;
    }
    for (int i = 0; !rc && i < N; i++)
        x[i] = (float)(int)(((long)i * 7919) % 2001 - 1000) /
               8.0f; /* exact in float: results are exact */
    if (!rc && (pgd_tensor_create(ctx, 1, shape, &tx, &err) ||
                pgd_tensor_create(ctx, 1, shape, &ty, &err) || pgd_tensor_upload(tx, x, &err) ||
                pgd_scale(ctx, tx, 2.0f, ty, &err) || pgd_add(ctx, ty, tx, ty, &err) ||
                pgd_tensor_download(ty, y, &err)))
        rc = app_fail(err);
    long bad = 0;
    for (int i = 0; !rc && i < N; i++) {
        if (y[i] != 3.0f * x[i] && bad++ < 3)
            fprintf(stderr, "pagoda: error: element %d: got %g, want %g\n", i, (double)y[i],
                    3.0 * (double)x[i]);
    }
    if (bad) {
        fprintf(stderr, "pagoda: error: %ld of %d elements wrong on '%s'\n", bad, N, d->name);
        rc = EXIT_RUNTIME;
    }
    if (!rc) {
        pgd_build_stats st;
        pgd_ctx_get_build_stats(ctx, &st);
        printf("check passed: y = 2x + x over %d elements, all exact (kernel build %.0f ms, %s)\n",
               N, st.build_ms, st.disk_hits ? "from the binary cache" : "compiled");
    }
    if (!rc && profile && pgd_profile_print(ctx, stdout, &err))
        rc = app_fail(err);
    pgd_tensor_destroy(tx);
    pgd_tensor_destroy(ty);
    free(x);
    free(y);
    return rc;
}

/* `pagoda vit` and `pagoda nonlocal` on the sample image, on device d. A software rasteriser
 * manages ~0.3 GFLOP/s: ViT-B/16 would take minutes there, so it gets the two-block toy ViT
 * and ResNet-18 on a 64x64 synthetic input (1/27 of the work). */
/* Adds --weights of the cached hub checkpoint `repo` to args (and --nonlocal SITE when given:
 * a plain ResNet gets the demo's block); 1 when the cache has it. */
static int add_hub_weights(char **args, int *n, const char *repo, const char *site, char **path)
{
    *path = pull_cached_weights(repo);
    if (!*path)
        return 0;
    args[(*n)++] = "--weights", args[(*n)++] = *path;
    if (site)
        args[(*n)++] = "--nonlocal", args[(*n)++] = (char *)site;
    return 1;
}

static int run_models(const pgd_device_info *d, char *image, int have_image, const char *dir)
{
    char attention[4200], affinity[4200];
    snprintf(attention, sizeof attention, "%s/attention.png", dir);
    snprintf(affinity, sizeof affinity, "%s/affinity.png", dir);
    char sel[32];
    snprintf(sel, sizeof sel, "%d:%d", d->platform_index, d->device_index);
    int soft = d->software_rasteriser;
    printf("\nViT-B/16 (pagoda vit):\n");
    if (!have_image)
        printf("(no sample image found: a synthetic input instead)\n");
    fflush(stdout);
    char *vargv[16] = {"vit", "--device", sel, "--topk", "3"};
    char *nargv[16] = {"nonlocal", "--device", sel, "--topk", "3"};
    int vargc = 5, nargc = 5;
    if (soft) {
        vargv[vargc++] = "--random", vargv[vargc++] = "tiny";
        nargv[nargc++] = "--random", nargv[nargc++] = "18", nargv[nargc++] = "--nonlocal";
        nargv[nargc++] = "layer3.1", nargv[nargc++] = "--size", nargv[nargc++] = "64";
    }
    char *vw = NULL, *nw = NULL;
    /* checkpoints pulled into the hub cache (pagoda pull) first */
    int vreal = !soft && add_hub_weights(vargv, &vargc, DEMO_VIT, NULL, &vw);
    int nreal = !soft && add_hub_weights(nargv, &nargc, DEMO_RESNET, "layer3.5", &nw);
    if (!soft && have_image) {
        vargv[vargc++] = "--attention-map", vargv[vargc++] = attention;
        vargv[vargc++] = image;
        nargv[nargc++] = "--affinity-map", nargv[nargc++] = affinity;
        nargv[nargc++] = image;
    }
    vargv[vargc] = nargv[nargc] = NULL;
    if (vreal)
        printf("(weights: hf:%s, from the Hugging Face cache)\n", DEMO_VIT);
    fflush(stdout);
    int rc = cmd_vit(vargc, vargv);
    if (rc == EXIT_OK) {
        printf("\nResNet-50 + non-local block before layer3.5 (pagoda nonlocal):\n");
        if (nreal)
            printf("(weights: hf:%s, from the Hugging Face cache; the non-local block "
                   "identity-initialised)\n",
                   DEMO_RESNET);
        fflush(stdout);
        rc = cmd_nonlocal(nargc, nargv);
    }
    int real = vreal + nreal;
    free(vw);
    free(nw);
    if (rc == EXIT_OK && !soft && real < 2)
        printf("\nFor real classes: pagoda pull %s; pagoda pull %s (then the demo runs them)\n",
               DEMO_VIT, DEMO_RESNET);
    if (rc == EXIT_OK && !soft && have_image) {
        char shown[1024];
        printf("\nThe pictures are in %s/: attention.png (the ViT's last-layer attention), "
               "attention-rollout.png (its rollout over the layers), affinity.png (the non-local "
               "block's affinity of the image centre)\n",
               app_term_text(dir, shown, sizeof shown));
    }
    return rc;
}

int cmd_demo(int argc, char **argv)
{
    const char *device = NULL, *dir = "pagoda-demo";
    int profile = 0;
    static const struct option opts[] = {{"device", required_argument, 0, 'd'},
                                         {"profile", no_argument, 0, 'p'},
                                         {"output-dir", required_argument, 0, 'o'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'd')
            device = optarg;
        else if (c == 'p')
            profile = 1;
        else if (c == 'o')
            dir = optarg;
        else if (c == 'h') {
            fputs(usage, stdout);
            return EXIT_OK;
        } else
            return app_usage_error("demo ", "bad option");
    }
    if (optind < argc)
        return app_usage_error("demo ", "unexpected argument '%s'", argv[optind]);
    /* Checked before any work: a $PAGODA_SAMPLE_IMAGE that cannot be read is an error. */
    char image[4096];
    int have_image = app_sample_image(image, sizeof image);
    if (have_image < 0)
        return EXIT_USAGE;
    struct stat st;
    char shown[1024];
    if (!*dir || (mkdir(dir, 0777) && (stat(dir, &st) || !S_ISDIR(st.st_mode)))) {
        fprintf(stderr,
                "pagoda: error: --output-dir '%s': cannot make the folder, or it is "
                "not one\n",
                app_term_text(dir, shown, sizeof shown));
        return EXIT_USAGE;
    }
    list_devices();
    pgd_ctx *ctx = NULL;
    int rc = app_ctx_open(device, &ctx);
    if (rc)
        return rc;
    if (profile)
        pgd_ctx_set_profiling(ctx, 1);
    const pgd_device_info *d = pgd_ctx_get_device(ctx);
    printf("running on %d:%d %s (%s)\n", d->platform_index, d->device_index, d->name, d->platform);
    rc = check_elementwise(ctx, profile);
    if (rc == EXIT_OK)
        rc = run_models(d, image, have_image, dir);
    pgd_ctx_destroy(ctx);
    return rc;
}
