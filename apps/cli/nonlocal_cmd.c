/* nonlocal_cmd.c — `pagoda nonlocal`: ImageNet classification with a ResNet that carries
 * non-local blocks, and the affinity map of one query pixel. */
#include <float.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classify.h"
#include "commands.h"
#include "stream.h"
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
    CLASSIFY_HELP_TAIL;

/* "X,Y": two finite numbers >= 0 (pgd_parse_double; no nan, inf or trailing characters). */
static int parse_query(const char *s, double *x, double *y)
{
    const char *comma = strchr(s, ',');
    char xs[64];
    if (!comma || (size_t)(comma - s) >= sizeof xs)
        return -1;
    memcpy(xs, s, (size_t)(comma - s));
    xs[comma - s] = 0;
    return pgd_parse_double(xs, 0, DBL_MAX, x) || pgd_parse_double(comma + 1, 0, DBL_MAX, y) ? -1
                                                                                         : 0;
}

/* What `pagoda nonlocal` adds to the shared classification options. */
typedef struct nl_cmd {
    classify_opts o;
    const char *weights, *aff_png, *query;
    resnet_options ro;
    int depth, random, size, no_nl;
    double qx, qy; /* the query pixel; -1: the image centre */
    char default_path[4096];
} nl_cmd;

static int parse_own(void *cmd, int c, const char *arg)
{
    nl_cmd *v = cmd;
    int64_t n;
    nl_mode mode;
    switch (c) {
    case 'w': v->weights = arg; return 0;
    case 'n': v->ro.nonlocal_spec = arg; return 0;
    case 'u': v->ro.subsample = 1; return 0;
    case 'U': v->ro.subsample = 0; return 0;
    case 'A': v->aff_png = arg; return 0;
    case 'q': v->query = arg; return 0;
    case 'r':
        v->random = 1;
        if (pgd_parse_int64(arg, 18, 152, &n) ||
            (n != 18 && n != 34 && n != 50 && n != 101 && n != 152))
            return app_usage_error("nonlocal ", "--random wants 18, 34, 50, 101 or 152, got '%s'",
                                   arg);
        v->depth = (int)n;
        return 0;
    case 'm':
        if (nl_mode_parse(arg, &mode) != 0)
            return app_usage_error("nonlocal ", "--mode wants embedded_gaussian, gaussian, "
                                                "dot_product or concatenation, got '%s'",
                                   arg);
        v->ro.mode = arg;
        return 0;
    case 'z':
        if (pgd_parse_int64(arg, 32, 4096, &n))
            return app_usage_error("nonlocal ", "--size wants a whole number from 32 to 4096, "
                                                "got '%s'", arg);
        v->size = (int)n;
        return 0;
    default: return app_usage_error("nonlocal ", "bad option");
    }
}

/* Checks what the options say together; EXIT_OK or EXIT_USAGE. */
static int check_options(nl_cmd *v)
{
    v->no_nl = v->ro.nonlocal_spec && !strcmp(v->ro.nonlocal_spec, "none");
    if (v->no_nl)
        v->ro.nonlocal_spec = NULL;
    if (v->query && parse_query(v->query, &v->qx, &v->qy) != 0)
        return app_usage_error("nonlocal ", "--query wants X,Y pixel coordinates, got '%s'",
                               v->query);
    if (v->query && !v->aff_png)
        return app_usage_error("nonlocal ", "--query goes with --affinity-map");
    if (v->weights && v->random)
        return app_usage_error("nonlocal ", "give --weights or --random, not both");
    return EXIT_OK;
}

/* The options; -1 when --help printed the usage, else EXIT_OK or EXIT_USAGE. */
static int parse(nl_cmd *v, int argc, char **argv)
{
    static const struct option own[] = {
        {"random", required_argument, 0, 'r'},       {"weights", required_argument, 0, 'w'},
        {"nonlocal", required_argument, 0, 'n'},     {"mode", required_argument, 0, 'm'},
        {"subsample", no_argument, 0, 'u'},          {"no-subsample", no_argument, 0, 'U'},
        {"affinity-map", required_argument, 0, 'A'}, {"query", required_argument, 0, 'q'},
        {"size", required_argument, 0, 'z'},         {"help", no_argument, 0, 'h'}};
    memset(v, 0, sizeof *v);
    classify_opts_init(&v->o, "nonlocal ");
    v->ro = (resnet_options){NULL, NULL, -1};
    v->depth = 50, v->size = PGD_PREPROCESS_SIZE, v->qx = v->qy = -1;
    int rc = classify_parse(&v->o, argc, argv, own, sizeof own / sizeof own[0], usage,
                            parse_own, v);
    if (rc)
        return rc;
    rc = check_options(v);
    return rc ? rc : classify_operands(&v->o, argc, argv, v->aff_png ? "--affinity-map" : NULL);
}

/* The weights (a file, the default file, or seeded random ones) and the layout with the
 * non-local blocks (the caller frees the source with model_source_free). */
static int open_model(nl_cmd *v, model_source *src, resnet_config *cfg)
{
    pgd_error *err = NULL;
    if (!v->random && app_weights_or_default(&v->weights, "resnet50_torchvision.safetensors",
                                             v->default_path, sizeof v->default_path))
        return EXIT_USAGE;
    resnet_options use = v->ro;
    if (v->weights) {
        if (model_source_open(src, v->weights, &err))
            return app_fail(err);
    } else {
        nl_mode mode = NL_EMBEDDED_GAUSSIAN;
        if (v->ro.mode)
            nl_mode_parse(v->ro.mode, &mode);
        /* default: before the last block of layer3, the paper's place (layer3.5 in ResNet-50) */
        const char *spec = v->depth == 18 ? "layer3.1" : v->depth == 101 ? "layer3.22"
                           : v->depth == 152 ? "layer3.35" : "layer3.5";
        spec = v->no_nl ? NULL : v->ro.nonlocal_spec ? v->ro.nonlocal_spec : spec;
        if (resnet_random_source(src, v->depth, 1000, spec, mode, 1, &err))
            return app_fail(err);
        use.nonlocal_spec = NULL; /* the random source carries the blocks itself */
    }
    if (resnet_detect(src, &use, cfg, &err))
        return app_fail(err);
    if (v->weights == v->default_path && cfg->n_nl == 0 && !v->ro.nonlocal_spec && !v->no_nl) {
        /* the documented default: a pretrained ResNet-50 gains an identity block at layer3.5 */
        use.nonlocal_spec = "layer3.5";
        if (resnet_detect(src, &use, cfg, &err))
            return app_fail(err);
    }
    app_note_assumed(v->weights ? v->weights : "random weights", &cfg->assumed);
    if (v->aff_png && cfg->n_nl == 0) {
        fprintf(stderr, "pagoda: error: --affinity-map: the model has no non-local block (add "
                        "one with --nonlocal layerL.B)\n");
        return EXIT_RUNTIME;
    }
    return EXIT_OK;
}

static void describe(const nl_cmd *v, const resnet_config *cfg)
{
    if (v->o.json)
        return;
    char sites[256] = "";
    for (int i = 0; i < cfg->n_nl; i++)
        snprintf(sites + strlen(sites), sizeof sites - strlen(sites), "%slayer%d.%d%s",
                 i ? ", " : "", cfg->nl[i].layer, cfg->nl[i].block,
                 cfg->nl[i].identity ? " (identity init)" : "");
    if (!v->weights)
        fprintf(stderr, "pagoda: note: seeded random weights (ResNet-%d): the classes printed "
                        "are meaningless\n",
                v->depth);
    int blocks = cfg->blocks[0] + cfg->blocks[1] + cfg->blocks[2] + cfg->blocks[3];
    char shown[1024];
    fprintf(stderr,
            "pagoda: %s: ResNet%s%d (%s blocks %d-%d-%d-%d, %lld classes); non-local: %s%s%s%s\n",
            app_term_text(v->weights ? v->weights : "random weights", shown, sizeof shown),
            cfg->depth ? "-" : " custom, depth ",
            cfg->depth ? cfg->depth : 2 + (cfg->bottleneck ? 3 : 2) * blocks,
            cfg->bottleneck ? "bottleneck" : "basic", cfg->blocks[0], cfg->blocks[1],
            cfg->blocks[2], cfg->blocks[3], (long long)cfg->classes, cfg->n_nl ? sites : "none",
            cfg->n_nl ? " [" : "", cfg->n_nl ? nl_mode_name(cfg->mode) : "",
            cfg->n_nl ? (cfg->subsample ? ", subsampled]" : "]") : "");
}

/* Places the --query pixel of the first image on the crop the model sees (the batch shares
 * one query) and allocates the affinity rows. */
static int affinity_setup(nl_cmd *v, classify_run *r, const resnet_model *m, resnet_affinity *aff)
{
    int gh = 0, gw = 0;
    int64_t cells = resnet_nl_grid(m, r->H, r->W, &gh, &gw);
    aff->row = malloc((size_t)(r->B * (cells > 0 ? cells : 1)) * sizeof *aff->row);
    if (!aff->row) {
        fprintf(stderr, "pagoda: error: out of host memory for the affinity map\n");
        return EXIT_RUNTIME;
    }
    /* r->loaded holds thumbnails: the query is in the source image's pixels. */
    int iw = pgd_image_source_width(r->loaded[0]), ih = pgd_image_source_height(r->loaded[0]);
    double sx = (double)pgd_image_width(r->loaded[0]) / iw,
           sy = (double)pgd_image_height(r->loaded[0]) / ih;
    if (v->qx < 0)
        v->qx = iw / 2.0, v->qy = ih / 2.0;
    if (v->qx >= iw || v->qy >= ih) {
        char shown[1024];
        fprintf(stderr, "pagoda: error: --query %s lies outside %s (%dx%d)\n", v->query,
                app_term_text(v->o.images[0], shown, sizeof shown), iw, ih);
        return EXIT_RUNTIME;
    }
    /* the query as a fraction of the crop the model sees (clamped into it) */
    double c[4];
    pgd_image_preprocess_view(r->loaded[0], PGD_PREPROCESS_TORCHVISION, c);
    aff->qx = ((v->qx + 0.5) * sx - c[0]) / (c[2] - c[0]);
    aff->qy = ((v->qy + 0.5) * sy - c[1]) / (c[3] - c[1]);
    aff->qx = aff->qx < 0 ? 0 : aff->qx > 0.999999 ? 0.999999 : aff->qx;
    aff->qy = aff->qy < 0 ? 0 : aff->qy > 0.999999 ? 0.999999 : aff->qy;
    return EXIT_OK;
}

/* Scales each image's affinity row to its maximum (every mode on one scale) and draws it. */
static int affinity_draw(const nl_cmd *v, classify_run *r, const resnet_config *cfg,
                         resnet_affinity *aff)
{
    int64_t cells = (int64_t)aff->gh * aff->gw;
    for (int b = 0; b < r->B; b++) {
        float *row = aff->row + b * cells, mx = 0;
        for (int64_t i = 0; i < cells; i++)
            mx = row[i] > mx ? row[i] : mx;
        for (int64_t i = 0; i < cells && mx > 0; i++)
            row[i] = row[i] > 0 ? row[i] / mx : 0;
    }
    char what[256];
    snprintf(what, sizeof what,
             "affinity of pixel (%.0f, %.0f) (position (%d, %d) of the input of the block before "
             "layer%d.%d) over its %dx%d key grid",
             v->qx, v->qy, aff->qj, aff->qi, cfg->nl[0].layer, cfg->nl[0].block, aff->gw, aff->gh);
    return classify_draw_maps(&v->o, r, v->aff_png, "", aff->row, aff->gw, aff->gh,
                              PGD_PREPROCESS_TORCHVISION, what);
}

/* The model's non-finite diagnosis, in the classify path's form. */
static int diagnose(void *model, const float *image, int H, int W, model_probe *p, pgd_error **err)
{
    return resnet_find_nonfinite(model, image, H, W, p, err);
}

/* The model's description in the JSON report. */
static json_t *model_json(const resnet_config *cfg)
{
    json_t *sites = json_array();
    for (int i = 0; i < cfg->n_nl; i++) {
        char name[32];
        snprintf(name, sizeof name, "layer%d.%d", cfg->nl[i].layer, cfg->nl[i].block);
        json_array_append_new(sites, json_pack("{s:s, s:I, s:I, s:b}", "before", name, "channels",
                                               (json_int_t)cfg->nl[i].channels, "inner",
                                               (json_int_t)cfg->nl[i].inner, "identity_init",
                                               cfg->nl[i].identity));
    }
    return json_pack("{s:i, s:s, s:[i,i,i,i], s:I, s:o, s:s, s:b, s:o}", "depth", cfg->depth,
                     "block", cfg->bottleneck ? "bottleneck" : "basic", "blocks", cfg->blocks[0],
                     cfg->blocks[1], cfg->blocks[2], cfg->blocks[3], "classes",
                     (json_int_t)cfg->classes, "nonlocal", sites, "mode", nl_mode_name(cfg->mode),
                     "subsample", cfg->subsample, "assumed", app_assumed_json(&cfg->assumed));
}

static int report(const nl_cmd *v, classify_run *r, const resnet_config *cfg, const double t[5])
{
    static const classify_stage stages[5] = {{"stem", "stem"},
                                             {"layers", "residual layers"},
                                             {"nonlocal", "non-local blocks"},
                                             {"head", "head"},
                                             {"total", "total"}};
    return classify_emit(&v->o, r, v->weights, v->o.json ? model_json(cfg) : NULL, stages, t, 5);
}

/* Loads the model, runs the batch, draws the affinity map, reports. */
static int run(nl_cmd *v, const model_source *src, const resnet_config *cfg, classify_run *r)
{
    pgd_error *err = NULL;
    resnet_model *m = NULL;
    resnet_affinity aff;
    memset(&aff, 0, sizeof aff);
    describe(v, cfg);
    if (resnet_load(r->ctx, src, cfg, &m, &err))
        return app_fail(err);
    int rc = classify_prepare(&v->o, r);
    if (!rc && v->aff_png)
        rc = affinity_setup(v, r, m, &aff);
    double t[5];
    if (!rc && resnet_forward(m, r->x, r->B, r->H, r->W, r->logits, v->aff_png ? &aff : NULL, t,
                              &err))
        rc = app_fail(err);
    if (!rc)
        rc = classify_check_logits(&v->o, r, diagnose, m);
    if (!rc)
        rc = classify_after_forward(&v->o, r, resnet_last_split(m));
    if (!rc && v->aff_png)
        rc = affinity_draw(v, r, cfg, &aff);
    if (!rc)
        rc = report(v, r, cfg, t);
    if (!rc)
        rc = classify_finish(&v->o, r);
    resnet_free(m);
    free(aff.row);
    return rc;
}

/* The model on each device of a stream. */
typedef struct nl_stream {
    const model_source *src;
    const resnet_config *cfg;
} nl_stream;

static int stream_load(void *cmd, pgd_ctx *ctx, void **model)
{
    nl_stream *ns = cmd;
    pgd_error *err = NULL;
    resnet_model *m = NULL;
    if (resnet_load(ctx, ns->src, ns->cfg, &m, &err))
        return app_fail(err);
    *model = m;
    return EXIT_OK;
}

static int stream_forward(void *model, const float *x, int B, int H, int W, float *logits,
                          pgd_error **err)
{
    double t[5];
    return resnet_forward(model, x, B, H, W, logits, NULL, t, err);
}

static void stream_release(void *model)
{
    resnet_free(model);
}

static int run_stream(nl_cmd *v, const model_source *src, const resnet_config *cfg)
{
    int rc = classify_stream_check(&v->o, v->aff_png ? "--affinity-map" : NULL);
    if (rc)
        return rc;
    describe(v, cfg);
    nl_stream ns = {src, cfg};
    classify_model m = {&ns, stream_load, stream_forward, stream_release, v->weights, NULL, ""};
    char depth[48];
    snprintf(depth, sizeof depth, "ResNet-%d", v->depth);
    m.random = v->weights ? NULL : depth;
    snprintf(m.family, sizeof m.family, "ResNet%s, %d non-local block(s) %s%s",
             cfg->bottleneck ? " (bottleneck)" : "", cfg->n_nl,
             cfg->n_nl ? nl_mode_name(cfg->mode) : "", cfg->subsample ? " subsampled" : "");
    return classify_stream(&v->o, PGD_PREPROCESS_TORCHVISION, (int)cfg->classes, &m);
}

int cmd_nonlocal(int argc, char **argv)
{
    nl_cmd v;
    int rc = parse(&v, argc, argv);
    if (rc)
        return rc < 0 ? EXIT_OK : rc;
    model_source src = {0};
    resnet_config cfg;
    classify_run r = {0};
    rc = open_model(&v, &src, &cfg);
    if (!rc && classify_streaming(&v.o)) {
        rc = run_stream(&v, &src, &cfg);
        model_source_free(&src);
        return rc;
    }
    v.o.map_option = "--affinity-map", v.o.map_png = v.aff_png, v.o.map_tags[0] = "";
    if (!rc)
        rc = classify_begin(&v.o, PGD_PREPROCESS_TORCHVISION, v.size, v.size, (int)cfg.classes,
                            &r);
    if (!rc)
        rc = run(&v, &src, &cfg, &r);
    classify_free(&r);
    model_source_free(&src);
    return rc;
}
