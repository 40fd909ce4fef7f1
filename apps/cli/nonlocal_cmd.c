/* nonlocal_cmd.c — `pagoda nonlocal`: ImageNet classification with a ResNet that carries
 * non-local blocks, and the affinity map of one query pixel. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "internal.h"
#include "resnet.h"

static const char usage[] =
    "usage: pagoda nonlocal [--device SEL] [--weights FILE | --random DEPTH] [--nonlocal SPEC]\n"
    "                       [--mode M] [--subsample | --no-subsample] [--topk K] [--json]\n"
    "                       [--labels FILE] [--input F.npy] [--save-input F.npy]\n"
    "                       [--save-logits F.npy] [--affinity-map OUT.png [--query X,Y]]\n"
    "                       [--profile] [IMAGE...]\n"
    "\n"
    "Classifies images with a ResNet (torchvision naming) carrying non-local blocks (Wang et al.,\n"
    "\"Non-local Neural Networks\", CVPR 2018). Images get torchvision's preprocessing (shorter\n"
    "side 256, centre crop 224, ImageNet mean/std) and are batched together.\n"
    "\n"
    "A non-local block before residual block layerL.B comes from the weights file\n"
    "(nonlocal.layerL.B.{theta,phi,g,w}.{weight,bias}, nonlocal.layerL.B.bn.*, and\n"
    "nonlocal.layerL.B.concat.weight for concatenation; __metadata__ nonlocal.mode and\n"
    "nonlocal.subsample), or from --nonlocal, which inserts blocks initialised as the paper\n"
    "does (the BN after W has gamma = 0, so each starts as the identity: a pretrained ResNet\n"
    "gains non-local blocks without changing its output).\n"
    "\n"
    "Options:\n"
    "  --device SEL        device selector (see 'pagoda devices --help')\n"
    "  --weights FILE      a .safetensors ResNet-18/34/50/101/152 (or any torchvision-named\n"
    "                      ResNet; widths and depth follow from the shapes) (default:\n"
    "                      resnet50_torchvision.safetensors in $PAGODA_WEIGHTS_DIR or\n"
    "                      ~/.local/share/pagoda/weights, with --nonlocal layer3.5 when the file\n"
    "                      has no non-local block)\n"
    "  --random DEPTH      without weights: seeded random weights, clearly not a trained model:\n"
    "                      ResNet-DEPTH (18, 34, 50, 101, 152; default 50) with a non-local block\n"
    "                      before the last block of layer3 (layer3.5 for ResNet-50; or where\n"
    "                      --nonlocal says)\n"
    "  --nonlocal SPEC     layerL.B[,layerL.B...]: insert identity-initialised blocks there;\n"
    "                      'none': no blocks added (with --random: a plain ResNet)\n"
    "  --mode M            pairwise function: embedded_gaussian (default), gaussian,\n"
    "                      dot_product or concatenation (overrides the file's)\n"
    "  --subsample         2x2 max pooling after phi and g (overrides the file's)\n"
    "  --no-subsample      no subsampling (overrides the file's)\n"
    "  --topk K            classes to print per image (default 5)\n"
    "  --labels FILE       class names, one per line (default: ImageNet-1k for 1000 classes)\n"
    "  --json              print the results as JSON\n"
    "  --input F.npy       a preprocessed input tensor [B, 3, H, W] instead of images; with\n"
    "                      neither, one synthetic image of --size S x S (default 224)\n"
    "  --save-input F.npy  write the preprocessed batch\n"
    "  --save-logits F.npy write the logits [B, classes]\n"
    "  --affinity-map OUT.png\n"
    "                      the first non-local block's affinity f(x_q, .) of the query position\n"
    "                      over all positions, blended over each image (OUT-1.png, ... for\n"
    "                      several images); needs image files\n"
    "  --query X,Y         the query pixel in the original image (default: its centre)\n"
    "  --profile           per-kernel timings at the end\n"
    "  -h, --help          show this help\n";

static int parse_query(const char *s, double *x, double *y)
{
    char *end = NULL;
    *x = strtod(s, &end);
    if (end == s || *end != ',')
        return -1;
    const char *p = end + 1;
    *y = strtod(p, &end);
    return (end == p || *end || *x < 0 || *y < 0) ? -1 : 0;
}

int cmd_nonlocal(int argc, char **argv)
{
    const char *device = NULL, *input = NULL, *save_logits = NULL, *weights = NULL;
    const char *save_input = NULL, *aff_png = NULL, *labels_path = NULL, *query = NULL;
    resnet_options ro = {NULL, NULL, -1};
    int depth = 50, random = 0, topk = 5, json = 0, profile = 0, size = PGD_PREPROCESS_SIZE;
    static const struct option opts[] = {
        {"device", required_argument, 0, 'd'},     {"random", required_argument, 0, 'r'},
        {"weights", required_argument, 0, 'w'},    {"nonlocal", required_argument, 0, 'n'},
        {"mode", required_argument, 0, 'm'},       {"subsample", no_argument, 0, 'u'},
        {"no-subsample", no_argument, 0, 'U'},     {"topk", required_argument, 0, 'k'},
        {"json", no_argument, 0, 'j'},             {"labels", required_argument, 0, 'L'},
        {"input", required_argument, 0, 'i'},      {"save-input", required_argument, 0, 'S'},
        {"save-logits", required_argument, 0, 's'}, {"affinity-map", required_argument, 0, 'A'},
        {"query", required_argument, 0, 'q'},      {"profile", no_argument, 0, 'p'},
        {"size", required_argument, 0, 'z'},
        {"help", no_argument, 0, 'h'},             {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 'd': device = optarg; break;
        case 'r':
            depth = (int)strtol(optarg, &end, 10);
            random = 1;
            if (*end || (depth != 18 && depth != 34 && depth != 50 && depth != 101 &&
                         depth != 152))
                return app_usage_error("nonlocal ", "--random wants 18, 34, 50, 101 or 152, "
                                                    "got '%s'",
                                       optarg);
            break;
        case 'w': weights = optarg; break;
        case 'n': ro.nonlocal_spec = optarg; break;
        case 'm': {
            nl_mode m;
            if (nl_mode_parse(optarg, &m) != 0)
                return app_usage_error("nonlocal ", "--mode wants embedded_gaussian, gaussian, "
                                                    "dot_product or concatenation, got '%s'",
                                       optarg);
            ro.mode = optarg;
            break;
        }
        case 'u': ro.subsample = 1; break;
        case 'U': ro.subsample = 0; break;
        case 'k':
            topk = (int)strtol(optarg, &end, 10);
            if (*end || topk < 1 || topk > 100000)
                return app_usage_error("nonlocal ", "--topk wants a positive number, got '%s'",
                                       optarg);
            break;
        case 'j': json = 1; break;
        case 'L': labels_path = optarg; break;
        case 'i': input = optarg; break;
        case 'S': save_input = optarg; break;
        case 's': save_logits = optarg; break;
        case 'A': aff_png = optarg; break;
        case 'q': query = optarg; break;
        case 'z':
            size = (int)strtol(optarg, &end, 10);
            if (*end || size < 32 || size > 4096)
                return app_usage_error("nonlocal ", "--size wants 32..4096, got '%s'", optarg);
            break;
        case 'p': profile = 1; break;
        case 'h': fputs(usage, stdout); return EXIT_OK;
        default: return app_usage_error("nonlocal ", "bad option");
        }
    }
    double qx = -1, qy = -1;
    int no_nl = ro.nonlocal_spec && !strcmp(ro.nonlocal_spec, "none");
    if (no_nl)
        ro.nonlocal_spec = NULL;
    if (query && parse_query(query, &qx, &qy) != 0)
        return app_usage_error("nonlocal ", "--query wants X,Y pixel coordinates, got '%s'",
                               query);
    if (query && !aff_png)
        return app_usage_error("nonlocal ", "--query goes with --affinity-map");
    int nimages = argc - optind;
    char **images = argv + optind;
    if (nimages && input)
        return app_usage_error("nonlocal ", "give images or --input F.npy, not both");
    if (aff_png && !nimages)
        return app_usage_error("nonlocal ", "--affinity-map needs image files to draw on");
    if (weights && random)
        return app_usage_error("nonlocal ", "give --weights or --random, not both");

    app_labels labels = {0};
    if (labels_path && app_labels_load(labels_path, &labels))
        return EXIT_RUNTIME;
    char default_path[4096];
    if (!weights && !random &&
        app_default_weights("resnet50_torchvision.safetensors", default_path,
                            sizeof default_path))
        weights = default_path;

    pgd_error *err = NULL;
    pgd_weights *wf = NULL;
    vit_source src;
    memset(&src, 0, sizeof src);
    resnet_config cfg;
    int rc = EXIT_OK, random_src = 0;
    float *x = NULL, *logits = NULL, *aff_row = NULL;
    pgd_image **loaded = NULL;
    pgd_ctx *ctx = NULL;
    resnet_model *m = NULL;
    if (weights) {
        if (pgd_weights_open(weights, &wf, &err)) {
            rc = app_fail(err);
            goto done;
        }
        vit_weights_source(&src, wf, weights);
    } else {
        nl_mode mode = NL_EMBEDDED_GAUSSIAN;
        if (ro.mode)
            nl_mode_parse(ro.mode, &mode);
        /* default: before the last block of layer3, the paper's place (layer3.5 in ResNet-50) */
        const char *spec = depth == 18    ? "layer3.1"
                           : depth == 101 ? "layer3.22"
                           : depth == 152 ? "layer3.35"
                                          : "layer3.5";
        if (no_nl)
            spec = NULL;
        else if (ro.nonlocal_spec)
            spec = ro.nonlocal_spec;
        if (resnet_random_source(&src, depth, 1000, spec, mode, 1, &err)) {
            rc = app_fail(err);
            goto done;
        }
        random_src = 1;
    }
    resnet_options use = ro;
    if (random_src)
        use.nonlocal_spec = NULL; /* the random source carries the blocks itself */
    if (resnet_detect(&src, &use, &cfg, &err)) {
        rc = app_fail(err);
        goto done;
    }
    if (weights == default_path && cfg.n_nl == 0 && !ro.nonlocal_spec && !no_nl) {
        /* the documented default: a pretrained ResNet-50 gains an identity block at layer3.5 */
        use.nonlocal_spec = "layer3.5";
        if (resnet_detect(&src, &use, &cfg, &err)) {
            rc = app_fail(err);
            goto done;
        }
    }

    int64_t shape[PGD_MAX_DIMS];
    int nd = 4;
    if (input) {
        if (pgd_npy_read(input, &x, &nd, shape, &err)) {
            rc = app_fail(err);
            goto done;
        }
        if (nd != 4 || shape[1] != 3) {
            fprintf(stderr, "pagoda: error: %s: input must be [B, 3, H, W]\n", input);
            rc = EXIT_RUNTIME;
            goto done;
        }
    } else if (nimages) {
        if (app_load_batch(images, nimages, PGD_PREPROCESS_TORCHVISION, &x, &loaded, shape,
                           &err)) {
            rc = app_fail(err);
            goto done;
        }
    } else {
        shape[0] = 1, shape[1] = 3, shape[2] = shape[3] = size;
        int64_t n = 3 * (int64_t)size * size;
        x = malloc((size_t)n * sizeof *x);
        if (!x) {
            rc = EXIT_RUNTIME;
            goto done;
        }
        for (int64_t i = 0; i < n; i++)
            x[i] = (float)sin(0.01 * (double)i) * 1.5f; /* a fixed, smooth synthetic image */
    }
    int B = (int)shape[0], H = (int)shape[2], W = (int)shape[3];
    if ((rc = app_ctx_open(device, &ctx)))
        goto done;
    if (profile)
        pgd_ctx_set_profiling(ctx, 1);
    if (labels.names && labels.count < cfg.classes) {
        fprintf(stderr, "pagoda: error: %s has %d labels but the model has %lld classes\n",
                labels_path, labels.count, (long long)cfg.classes);
        rc = EXIT_RUNTIME;
        goto done;
    }
    if (!json) {
        char sites[256] = "";
        for (int i = 0; i < cfg.n_nl; i++)
            snprintf(sites + strlen(sites), sizeof sites - strlen(sites), "%slayer%d.%d%s",
                     i ? ", " : "", cfg.nl[i].layer, cfg.nl[i].block,
                     cfg.nl[i].identity ? " (identity init)" : "");
        if (random_src)
            fprintf(stderr, "pagoda: note: seeded random weights (ResNet-%d): the classes "
                            "printed are meaningless\n",
                    depth);
        fprintf(stderr,
                "pagoda: %s: ResNet%s%d (%s blocks %d-%d-%d-%d, %lld classes); non-local: %s%s%s%s\n",
                weights ? weights : "random weights", cfg.depth ? "-" : " custom, depth ",
                cfg.depth ? cfg.depth : 2 + (cfg.bottleneck ? 3 : 2) *
                                               (cfg.blocks[0] + cfg.blocks[1] + cfg.blocks[2] +
                                                cfg.blocks[3]),
                cfg.bottleneck ? "bottleneck" : "basic", cfg.blocks[0], cfg.blocks[1],
                cfg.blocks[2], cfg.blocks[3], (long long)cfg.classes,
                cfg.n_nl ? sites : "none", cfg.n_nl ? " [" : "",
                cfg.n_nl ? nl_mode_name(cfg.mode) : "",
                cfg.n_nl ? (cfg.subsample ? ", subsampled]" : "]") : "");
    }
    if (aff_png && cfg.n_nl == 0) {
        fprintf(stderr, "pagoda: error: --affinity-map: the model has no non-local block (add "
                        "one with --nonlocal layerL.B)\n");
        rc = EXIT_RUNTIME;
        goto done;
    }
    if (resnet_load(ctx, &src, &cfg, &m, &err)) {
        rc = app_fail(err);
        goto done;
    }
    if (save_input && pgd_npy_write(save_input, x, 4, shape, &err)) {
        rc = app_fail(err);
        goto done;
    }
    logits = malloc((size_t)B * (size_t)cfg.classes * sizeof *logits);
    resnet_affinity aff;
    memset(&aff, 0, sizeof aff);
    int gh = 0, gw = 0;
    if (aff_png) {
        int64_t cells = resnet_nl_grid(m, H, W, &gh, &gw);
        aff_row = malloc((size_t)(B * (cells > 0 ? cells : 1)) * sizeof *aff_row);
        if (!aff_row) {
            rc = EXIT_RUNTIME;
            goto done;
        }
        aff.row = aff_row;
        /* per image the query differs; the first image's places it (the batch shares one) */
        int iw = pgd_image_width(loaded[0]), ih = pgd_image_height(loaded[0]);
        if (qx < 0)
            qx = iw / 2.0, qy = ih / 2.0;
        if (qx >= iw || qy >= ih) {
            fprintf(stderr, "pagoda: error: --query %s lies outside %s (%dx%d)\n", query,
                    images[0], iw, ih);
            rc = EXIT_RUNTIME;
            goto done;
        }
        /* the query as a fraction of the crop the model sees (clamped into it) */
        double v[4];
        pgd_image_preprocess_view(loaded[0], PGD_PREPROCESS_TORCHVISION, v);
        aff.qx = (qx + 0.5 - v[0]) / (v[2] - v[0]);
        aff.qy = (qy + 0.5 - v[1]) / (v[3] - v[1]);
        aff.qx = aff.qx < 0 ? 0 : aff.qx > 0.999999 ? 0.999999 : aff.qx;
        aff.qy = aff.qy < 0 ? 0 : aff.qy > 0.999999 ? 0.999999 : aff.qy;
    }
    double t[5];
    if (!logits || resnet_forward(m, x, B, H, W, logits, aff_png ? &aff : NULL, t, &err)) {
        rc = logits ? app_fail(err) : EXIT_RUNTIME;
        goto done;
    }
    if (resnet_last_split(m) < B)
        fprintf(stderr, "pagoda: note: the batch of %d images ran as passes of at most %d (%s%s%s)\n",
                B, resnet_last_split(m), pgd_ctx_get_options(ctx)->max_batch ? "$PAGODA_MAX_BATCH, or " : "",
                "what fits in the memory of ", pgd_ctx_device(ctx)->name);
    if (save_logits) {
        int64_t ls[2] = {B, cfg.classes};
        if (pgd_npy_write(save_logits, logits, 2, ls, &err)) {
            rc = app_fail(err);
            goto done;
        }
    }
    for (int b = 0; aff_png && b < B; b++) {
        char *path = app_numbered_path(aff_png, "", b, B);
        int64_t cells = (int64_t)aff.gh * aff.gw;
        /* normalise to the row's maximum so every mode draws on one scale */
        float *row = aff_row + b * cells, mx = 0;
        for (int64_t i = 0; i < cells; i++)
            mx = row[i] > mx ? row[i] : mx;
        for (int64_t i = 0; i < cells && mx > 0; i++)
            row[i] = row[i] > 0 ? row[i] / mx : 0;
        double view[4];
        pgd_image_preprocess_view(loaded[b], PGD_PREPROCESS_TORCHVISION, view);
        if (!path ||
            pgd_image_write_heatmap_png_view(path, loaded[b], row, aff.gw, aff.gh, view, &err)) {
            free(path);
            rc = path ? app_fail(err) : EXIT_RUNTIME;
            goto done;
        }
        if (!json)
            fprintf(stderr,
                    "pagoda: affinity of pixel (%.0f, %.0f) (position (%d, %d) of the input of "
                    "the block before layer%d.%d) over its %dx%d key grid, %s: written to %s\n",
                    qx, qy, aff.qj, aff.qi, cfg.nl[0].layer, cfg.nl[0].block, aff.gw, aff.gh,
                    images[b], path);
        free(path);
    }
    const pgd_device_info *d = pgd_ctx_device(ctx);
    json_t *jall = app_report_topk(logits, B, (int)cfg.classes, topk, &labels,
                                   nimages ? images : NULL,
                                   input ? input : json ? "synthetic" : "synthetic image", json);
    if (json) {
        json_t *sites = json_array();
        for (int i = 0; i < cfg.n_nl; i++) {
            char name[32];
            snprintf(name, sizeof name, "layer%d.%d", cfg.nl[i].layer, cfg.nl[i].block);
            json_array_append_new(sites, json_pack("{s:s, s:I, s:i, s:b}", "before", name,
                                                   "channels", (json_int_t)cfg.nl[i].channels,
                                                   "inner", cfg.nl[i].inner, "identity_init",
                                                   cfg.nl[i].identity));
        }
        json_t *doc = json_pack(
            "{s:s, s:o, s:{s:i, s:s, s:[i,i,i,i], s:I, s:o, s:s, s:b}, s:o, "
            "s:{s:f, s:f, s:f, s:f, s:f}}",
            "weights", weights ? weights : "random", "device", app_device_json(d), "model",
            "depth", cfg.depth, "block", cfg.bottleneck ? "bottleneck" : "basic", "blocks",
            cfg.blocks[0], cfg.blocks[1], cfg.blocks[2], cfg.blocks[3], "classes",
            (json_int_t)cfg.classes, "nonlocal", sites, "mode", nl_mode_name(cfg.mode),
            "subsample", cfg.subsample, "results", jall, "times_ms", "stem", t[0], "layers",
            t[1], "nonlocal", t[2], "head", t[3], "total", t[4]);
        rc = app_write_json(doc, NULL);
        json_decref(doc);
    } else {
        printf("%d image(s) %dx%d on %s: stem %.1f ms, residual layers %.1f ms, non-local "
               "blocks %.1f ms, head %.1f ms, total %.1f ms\n",
               B, H, W, d->name, t[0], t[1], t[2], t[3], t[4]);
    }
    if (profile && pgd_profile_print(ctx, stdout, &err))
        rc = app_fail(err);
done:
    resnet_free(m);
    pgd_ctx_destroy(ctx);
    if (random_src)
        resnet_random_free(&src);
    pgd_weights_close(wf);
    for (int i = 0; loaded && i < nimages; i++)
        pgd_image_free(loaded[i]);
    free(loaded);
    free(x);
    free(logits);
    free(aff_row);
    app_labels_free(&labels);
    return rc;
}
