/* vit_cmd.c — `pagoda vit`: ViT classification of images or an input tensor. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "internal.h"
#include "labels.h"
#include "vit.h"

static const char usage[] =
    "usage: pagoda vit [--device SEL] [--weights FILE | --random SIZE] [--heads H] [--topk K]\n"
    "                  [--json] [--preprocess P] [--input F.npy] [--save-input F.npy]\n"
    "                  [--save-logits F.npy] [--attention-map OUT.png] [--profile] [IMAGE...]\n"
    "\n"
    "Classifies images (JPEG, PNG, BMP; batched together) with a Vision Transformer. Each image\n"
    "is preprocessed as the weights were trained (--preprocess overrides), or the input is an\n"
    ".npy tensor [B, 3, H, W] of preprocessed images (H and W multiples of the patch size;\n"
    "other sizes than the trained one resample the position embeddings as the weights' library\n"
    "does: timm antialiased bicubic, torchvision align_corners, Hugging Face its scale factor).\n"
    "\n"
    "Options:\n"
    "  --device SEL        device selector (see 'pagoda devices --help')\n"
    "  --weights FILE      a .safetensors checkpoint in timm, Hugging Face or torchvision\n"
    "                      naming (depth, width, patch, grid, classes follow from it)\n"
    "                      (default: vit_b16_timm.safetensors in $PAGODA_WEIGHTS_DIR or\n"
    "                      ~/.local/share/pagoda/weights, as tools/download-weights stores it)\n"
    "  --random SIZE       without weights: seeded random weights, clearly not a trained model: ti (ViT-Ti/16),\n"
    "                      s (ViT-S/16), b (ViT-B/16, default) or tiny (2 blocks of width 32)\n"
    "  --heads H           number of attention heads (default: the standard table by width)\n"
    "  --topk K            classes to print per image (default 5)\n"
    "  --labels FILE       class names, one per line (default: ImageNet-1k for 1000 classes)\n"
    "  --json              print the results as JSON\n"
    "  --preprocess P      torchvision (shorter side 256 bilinear, crop 224, ImageNet mean/std),\n"
    "                      timm (shorter side 248 bicubic, crop 224, mean/std 0.5) or hf (resize\n"
    "                      224x224 bilinear, mean/std 0.5); default: the weights' naming\n"
    "  --input F.npy       the input tensor instead of images; with neither, one synthetic\n"
    "                      224x224 image\n"
    "  --save-input F.npy  write the preprocessed batch [B, 3, H, W]\n"
    "  --attention-map OUT.png\n"
    "                      the last block's class-token attention (mean over heads) blended\n"
    "                      over each image as OUT.png, and the attention rollout across all\n"
    "                      blocks as OUT-rollout.png (OUT-1.png, OUT-rollout-1.png, ... for\n"
    "                      several images)\n"
    "  --save-logits F.npy write the logits [B, classes]\n"
    "  --profile           per-kernel timings at the end\n"
    "  -h, --help          show this help\n";

static int random_config(const char *name, vit_config *c)
{
    memset(c, 0, sizeof *c);
    c->family = VIT_TIMM;
    c->patch = 16;
    c->grid_h = c->grid_w = 14;
    c->extra = 1;
    c->classes = 1000;
    c->eps = 1e-6f;
    if (!strcmp(name, "ti"))
        c->dim = 192, c->depth = 12, c->heads = 3;
    else if (!strcmp(name, "s"))
        c->dim = 384, c->depth = 12, c->heads = 6;
    else if (!strcmp(name, "b"))
        c->dim = 768, c->depth = 12, c->heads = 12;
    else if (!strcmp(name, "tiny")) {
        c->dim = 32, c->depth = 2, c->heads = 2, c->patch = 8, c->grid_h = c->grid_w = 4;
        c->classes = 10;
    } else
        return -1;
    c->mlp = 4 * c->dim;
    return 0;
}

int cmd_vit(int argc, char **argv)
{
    const char *device = NULL, *input = NULL, *save_logits = NULL, *random = NULL, *weights = NULL;
    const char *preprocess = NULL, *save_input = NULL, *attn_png = NULL, *labels_path = NULL;
    app_labels labels = {0};
    int heads = 0, topk = 5, json = 0, profile = 0;
    static const struct option opts[] = {
        {"device", required_argument, 0, 'd'}, {"random", required_argument, 0, 'r'},
        {"weights", required_argument, 0, 'w'}, {"preprocess", required_argument, 0, 'P'},
        {"save-input", required_argument, 0, 'S'}, {"labels", required_argument, 0, 'L'}, {"attention-map", required_argument, 0, 'A'},
        {"heads", required_argument, 0, 'H'},  {"topk", required_argument, 0, 'k'},
        {"json", no_argument, 0, 'j'},         {"input", required_argument, 0, 'i'},
        {"save-logits", required_argument, 0, 's'}, {"profile", no_argument, 0, 'p'},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 'd': device = optarg; break;
        case 'r': random = optarg; break;
        case 'w': weights = optarg; break;
        case 'P': preprocess = optarg; break;
        case 'S': save_input = optarg; break;
        case 'A': attn_png = optarg; break;
        case 'L': labels_path = optarg; break;
        case 'i': input = optarg; break;
        case 's': save_logits = optarg; break;
        case 'j': json = 1; break;
        case 'p': profile = 1; break;
        case 'H':
            heads = (int)strtol(optarg, &end, 10);
            if (*end || heads < 1 || heads > 1024)
                return app_usage_error("vit ", "--heads wants 1..1024, got '%s'", optarg);
            break;
        case 'k':
            topk = (int)strtol(optarg, &end, 10);
            if (*end || topk < 1 || topk > 100000)
                return app_usage_error("vit ", "--topk wants a positive number, got '%s'", optarg);
            break;
        case 'h': fputs(usage, stdout); return EXIT_OK;
        default: return app_usage_error("vit ", "bad option");
        }
    }
    if (labels_path && app_labels_load(labels_path, &labels))
        return EXIT_RUNTIME;
    int nimages = argc - optind;
    char **images = argv + optind;
    if (nimages && input)
        return app_usage_error("vit ", "give images or --input F.npy, not both");
    if (attn_png && !nimages)
        return app_usage_error("vit ", "--attention-map needs image files to draw on");
    int preset = -1;
    if (preprocess) {
        preset = !strcmp(preprocess, "torchvision") ? PGD_PREPROCESS_TORCHVISION
                 : !strcmp(preprocess, "timm")      ? PGD_PREPROCESS_TIMM
                 : !strcmp(preprocess, "hf")        ? PGD_PREPROCESS_HF
                                                    : -1;
        if (preset < 0)
            return app_usage_error("vit ", "--preprocess wants torchvision, timm or hf, got '%s'",
                                   preprocess);
    }
    vit_config cfg;
    vit_source src;
    pgd_weights *wf = NULL;
    pgd_error *err = NULL;
    char default_path[4096];
    if (!weights && !random && app_default_weights("vit_b16_timm.safetensors", default_path, sizeof default_path))
        weights = default_path;
    if (!random)
        random = "b";
    if (weights) {
        if (pgd_weights_open(weights, &wf, &err))
            return app_fail(err);
        vit_weights_source(&src, wf, weights);
        if (vit_detect(&src, heads, &cfg, &err)) {
            pgd_weights_close(wf);
            return app_fail(err);
        }
    } else {
        if (random_config(random, &cfg) != 0)
            return app_usage_error("vit ", "--random wants ti, s, b or tiny, got '%s'", random);
        if (heads)
            cfg.heads = heads;
        if (cfg.dim % cfg.heads)
            return app_usage_error("vit ", "width %d is not divisible by %d heads", cfg.dim,
                                   cfg.heads);
        vit_random_source(&src, &cfg, 1);
    }

    float *x = NULL, *logits = NULL, *map = NULL, *roll = NULL;
    pgd_image **loaded = NULL;
    int64_t shape[PGD_MAX_DIMS];
    int nd = 4;
    if (input) {
        if (pgd_npy_read(input, &x, &nd, shape, &err)) {
            pgd_weights_close(wf);
            return app_fail(err);
        }
        if (nd != 4 || shape[1] != 3) {
            free(x);
            pgd_weights_close(wf);
            fprintf(stderr, "pagoda: error: %s: input must be [B, 3, H, W]\n", input);
            return EXIT_RUNTIME;
        }
    } else if (nimages) {
        if (preset < 0)
            preset = cfg.family == VIT_HF ? PGD_PREPROCESS_HF
                     : cfg.family == VIT_TORCHVISION ? PGD_PREPROCESS_TORCHVISION
                                                     : PGD_PREPROCESS_TIMM;
        if (app_load_batch(images, nimages, (pgd_preprocess)preset, &x, &loaded, shape, &err)) {
            pgd_weights_close(wf);
            return app_fail(err);
        }
    } else {
        int64_t side = (int64_t)cfg.patch * cfg.grid_h;
        shape[0] = 1, shape[1] = 3, shape[2] = shape[3] = side;
        x = malloc((size_t)(3 * side * side) * sizeof *x);
        if (!x) {
            pgd_weights_close(wf);
            return EXIT_RUNTIME;
        }
        for (int64_t i = 0; i < 3 * side * side; i++)
            x[i] = (float)sin(0.01 * (double)i) * 1.5f; /* a fixed, smooth synthetic image */
    }
    int B = (int)shape[0], H = (int)shape[2], W = (int)shape[3];
    pgd_ctx *ctx = NULL;
    vit_model *m = NULL;
    int rc = EXIT_OK;
    if ((rc = app_ctx_open(device, &ctx))) {
        free(x);
        pgd_weights_close(wf);
        return rc;
    }
    if (profile)
        pgd_ctx_set_profiling(ctx, 1);
    if (labels.names && labels.count < cfg.classes) {
        fprintf(stderr, "pagoda: error: %s has %d labels but the model has %d classes\n",
                labels_path, labels.count, cfg.classes);
        rc = EXIT_RUNTIME;
        goto done;
    }
    if (!json && !weights)
        fprintf(stderr, "pagoda: note: seeded random weights (%s, width %d, depth %d, %d heads): "
                        "the classes printed are meaningless\n",
                random, cfg.dim, cfg.depth, cfg.heads);
    if (!json && weights)
        fprintf(stderr, "pagoda: %s: %s ViT, width %d, depth %d, %d heads, patch %d, %dx%d grid, "
                        "%d classes\n",
                weights, vit_family_name(cfg.family), cfg.dim, cfg.depth, cfg.heads, cfg.patch,
                cfg.grid_h, cfg.grid_w, cfg.classes);
    if (vit_load(ctx, &src, &cfg, &m, &err)) {
        rc = app_fail(err);
        goto done;
    }
    if (save_input && pgd_npy_write(save_input, x, 4, shape, &err)) {
        rc = app_fail(err);
        goto done;
    }
    logits = malloc((size_t)B * (size_t)cfg.classes * sizeof *logits);
    int mh = H / cfg.patch, mw = W / cfg.patch;
    if (attn_png && (!(map = malloc((size_t)(B * mh * mw) * sizeof *map)) ||
                     !(roll = malloc((size_t)(B * mh * mw) * sizeof *roll)))) {
        rc = EXIT_RUNTIME;
        goto done;
    }
    double t[4];
    if (!logits || vit_forward(m, x, B, H, W, logits, map, roll, t, &err)) {
        rc = logits ? app_fail(err) : EXIT_RUNTIME;
        goto done;
    }
    if (vit_last_split(m) < B)
        fprintf(stderr, "pagoda: note: the batch of %d images ran as passes of at most %d (%s%s%s)\n",
                B, vit_last_split(m), pgd_ctx_get_options(ctx)->max_batch ? "$PAGODA_MAX_BATCH, or " : "",
                "what fits in the memory of ", pgd_ctx_device(ctx)->name);
    if (save_logits) {
        int64_t ls[2] = {B, cfg.classes};
        if (pgd_npy_write(save_logits, logits, 2, ls, &err)) {
            rc = app_fail(err);
            goto done;
        }
    }
    for (int b = 0; map && b < B; b++) {
        for (int kind = 0; kind < 2; kind++) {
            /* OUT.png (last layer) and OUT-rollout.png; with several images OUT-1.png, ... */
            char *path = app_numbered_path(attn_png, kind ? "-rollout" : "", b, B);
            if (!path) {
                rc = EXIT_RUNTIME;
                goto done;
            }
            const float *heat = (kind ? roll : map) + b * mh * mw;
            double view[4];
            pgd_image_preprocess_view(loaded[b], (pgd_preprocess)preset, view);
            if (pgd_image_write_heatmap_png_view(path, loaded[b], heat, mw, mh, view, &err)) {
                free(path);
                rc = app_fail(err);
                goto done;
            }
            if (!json)
                fprintf(stderr, "pagoda: %s of %s written to %s\n",
                        kind ? "attention rollout" : "last-layer attention", images[b], path);
            free(path);
        }
    }
    const pgd_device_info *d = pgd_ctx_device(ctx);
    json_t *jall = app_report_topk(logits, B, cfg.classes, topk, &labels,
                                   nimages ? images : NULL,
                                   input ? input : json ? "synthetic" : "synthetic image", json);
    if (json) {
        json_t *doc = json_pack("{s:s, s:o, s:{s:s, s:i, s:i, s:i, s:i}, s:o, s:{s:f, s:f, s:f, s:f}}",
                                "weights", weights ? weights : "random", "device", app_device_json(d), "model",
                                "family", vit_family_name(cfg.family), "width", cfg.dim, "depth",
                                cfg.depth, "heads", cfg.heads, "patch", cfg.patch, "results", jall,
                                "times_ms", "embed", t[0], "blocks", t[1], "head", t[2], "total",
                                t[3]);
        rc = app_write_json(doc, NULL);
        json_decref(doc);
    } else {
        printf("%d image(s) %dx%d on %s: embed %.1f ms, blocks %.1f ms, head %.1f ms, total "
               "%.1f ms\n",
               B, H, W, d->name, t[0], t[1], t[2], t[3]);
    }
    if (profile && pgd_profile_print(ctx, stdout, &err))
        rc = app_fail(err);
done:
    vit_free(m);
    pgd_weights_close(wf);
    for (int i = 0; loaded && i < nimages; i++)
        pgd_image_free(loaded[i]);
    free(loaded);
    free(map);
    free(roll);
    app_labels_free(&labels);
    pgd_ctx_destroy(ctx);
    free(x);
    free(logits);
    return rc;
}
