/* nonlocal_cmd.c — the ResNet family on the command line (classify_family.h): `pagoda
 * nonlocal`, ImageNet classification with a ResNet that carries non-local blocks and the
 * affinity map of one query pixel, and what `pagoda classify` runs for a ResNet checkpoint. */
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classify_family.h"
#include "commands.h"
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
    "  --query X,Y         the query pixel in the original image (default: its "
    "centre)\n" CLASSIFY_HELP_TAIL;

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

/* What the ResNet adds to the shared state. */
typedef struct nl_own {
    const char *aff_png, *query;
    resnet_options ro;
    int depth, size, no_nl;
    double qx, qy; /* the query pixel; -1: the image centre */
    resnet_affinity aff;
} nl_own;

static void nl_init(cli_state *s)
{
    nl_own *v = s->own;
    v->ro = (resnet_options){NULL, NULL, -1};
    v->depth = 50, v->size = PGD_PREPROCESS_SIZE, v->qx = v->qy = -1;
}

static int nl_option(cli_state *s, int c, const char *arg)
{
    nl_own *v = s->own;
    int64_t n;
    nl_mode mode;
    switch (c) {
    case CLI_NONLOCAL: v->ro.nonlocal_spec = arg; return EXIT_OK;
    case CLI_SUBSAMPLE: v->ro.subsample = 1; return EXIT_OK;
    case CLI_NO_SUBSAMPLE: v->ro.subsample = 0; return EXIT_OK;
    case CLI_AFFINITY_MAP: v->aff_png = arg; return EXIT_OK;
    case CLI_QUERY: v->query = arg; return EXIT_OK;
    case CLI_MODE:
        if (nl_mode_parse(arg, &mode) != 0)
            return app_usage_error(s->o.cmd,
                                   "--mode wants embedded_gaussian, gaussian, "
                                   "dot_product or concatenation, got '%s'",
                                   arg);
        v->ro.mode = arg;
        return EXIT_OK;
    default: /* CLI_SIZE */
        if (pgd_parse_int64(arg, 32, 4096, &n))
            return app_usage_error(s->o.cmd,
                                   "--size wants a whole number from 32 to 4096, got "
                                   "'%s'",
                                   arg);
        v->size = (int)n;
        return EXIT_OK;
    }
}

/* What the options say together; the depth of --random. */
static int nl_check(cli_state *s)
{
    nl_own *v = s->own;
    int64_t n;
    if (s->random && (pgd_parse_int64(s->random, 18, 152, &n) ||
                      (n != 18 && n != 34 && n != 50 && n != 101 && n != 152)))
        return app_usage_error(s->o.cmd, "--random wants 18, 34, 50, 101 or 152, got '%s'",
                               s->random);
    if (s->random)
        v->depth = (int)n;
    v->no_nl = v->ro.nonlocal_spec && !strcmp(v->ro.nonlocal_spec, "none");
    if (v->no_nl)
        v->ro.nonlocal_spec = NULL;
    if (v->query && parse_query(v->query, &v->qx, &v->qy) != 0)
        return app_usage_error(s->o.cmd, "--query wants X,Y pixel coordinates, got '%s'", v->query);
    if (v->query && !v->aff_png)
        return app_usage_error(s->o.cmd, "--query goes with --affinity-map");
    s->o.map_option = "--affinity-map", s->o.map_png = v->aff_png, s->o.map_tags[0] = "";
    return EXIT_OK;
}

/* The weights (a file, the default file, or seeded random ones) and the layout with the
 * non-local blocks. */
static int nl_open(cli_state *s)
{
    nl_own *v = s->own;
    resnet_config *cfg = s->cfg;
    pgd_error *err = NULL;
    resnet_options use = v->ro;
    if (!s->weights) {
        nl_mode mode = NL_EMBEDDED_GAUSSIAN;
        if (v->ro.mode)
            nl_mode_parse(v->ro.mode, &mode);
        /* default: before the last block of layer3, the paper's place (layer3.5 in ResNet-50) */
        const char *spec = v->depth == 18    ? "layer3.1"
                           : v->depth == 101 ? "layer3.22"
                           : v->depth == 152 ? "layer3.35"
                                             : "layer3.5";
        spec = v->no_nl ? NULL : v->ro.nonlocal_spec ? v->ro.nonlocal_spec : spec;
        if (resnet_random_source(&s->src, v->depth, 1000, spec, mode, 1, &err))
            return app_fail(err);
        use.nonlocal_spec = NULL; /* the random source carries the blocks itself */
        snprintf(s->random_label, sizeof s->random_label, "ResNet-%d", v->depth);
    }
    if (resnet_detect(&s->src, &use, cfg, &err))
        return app_fail(err);
    if (s->weights == s->default_path && cfg->n_nl == 0 && !v->ro.nonlocal_spec && !v->no_nl) {
        /* the documented default: a pretrained ResNet-50 gains an identity block at layer3.5 */
        use.nonlocal_spec = "layer3.5";
        if (resnet_detect(&s->src, &use, cfg, &err))
            return app_fail(err);
    }
    app_note_assumed(s->weights ? s->weights : "random weights", &cfg->assumed);
    if (v->aff_png && cfg->n_nl == 0) {
        fprintf(stderr, "pagoda: error: --affinity-map: the model has no non-local block (add "
                        "one with --nonlocal layerL.B)\n");
        return EXIT_RUNTIME;
    }
    s->preset = PGD_PREPROCESS_TORCHVISION;
    s->side_h = s->side_w = v->size;
    s->classes = (int)cfg->classes;
    return EXIT_OK;
}

static void nl_describe(const cli_state *s)
{
    const nl_own *v = s->own;
    const resnet_config *cfg = s->cfg;
    if (s->o.json)
        return;
    char sites[256] = "";
    for (int i = 0; i < cfg->n_nl; i++)
        snprintf(sites + strlen(sites), sizeof sites - strlen(sites), "%slayer%d.%d%s",
                 i ? ", " : "", cfg->nl[i].layer, cfg->nl[i].block,
                 cfg->nl[i].identity ? " (identity init)" : "");
    if (!s->weights) {
        fprintf(stderr,
                "pagoda: note: seeded random weights (ResNet-%d): the classes printed "
                "are meaningless\n",
                v->depth);
        app_note_real_weights("nonlocal", "timm/resnet50.tv_in1k");
    }
    int blocks = cfg->blocks[0] + cfg->blocks[1] + cfg->blocks[2] + cfg->blocks[3];
    char shown[1024];
    fprintf(stderr,
            "pagoda: %s: ResNet%s%d (%s blocks %d-%d-%d-%d, %lld classes); non-local: %s%s%s%s\n",
            app_term_text(s->weights ? s->weights : "random weights", shown, sizeof shown),
            cfg->depth ? "-" : " custom, depth ",
            cfg->depth ? cfg->depth : 2 + (cfg->bottleneck ? 3 : 2) * blocks,
            cfg->bottleneck ? "bottleneck" : "basic", cfg->blocks[0], cfg->blocks[1],
            cfg->blocks[2], cfg->blocks[3], (long long)cfg->classes, cfg->n_nl ? sites : "none",
            cfg->n_nl ? " [" : "", cfg->n_nl ? nl_mode_name(cfg->mode) : "",
            cfg->n_nl ? (cfg->subsample ? ", subsampled]" : "]") : "");
}

static void nl_stream_label(const cli_state *s, char *buf, size_t size)
{
    const resnet_config *cfg = s->cfg;
    snprintf(buf, size, "ResNet%s, %d non-local block(s) %s%s",
             cfg->bottleneck ? " (bottleneck)" : "", cfg->n_nl,
             cfg->n_nl ? nl_mode_name(cfg->mode) : "", cfg->subsample ? " subsampled" : "");
}

/* Places the --query pixel of the first image on the crop the model sees (the batch shares
 * one query) and allocates the affinity rows. */
static int affinity_setup(nl_own *v, const char *image, classify_run *r, const resnet_model *m,
                          pgd_error **err)
{
    resnet_affinity *aff = &v->aff;
    int gh = 0, gw = 0;
    int64_t cells = resnet_nl_grid(m, r->H, r->W, &gh, &gw);
    aff->row = malloc((size_t)(r->B * (cells > 0 ? cells : 1)) * sizeof *aff->row);
    if (!aff->row)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY,
                             "out of host memory for the affinity map");
    /* r->loaded holds thumbnails: the query is in the source image's pixels. */
    int iw = pgd_image_get_source_width(r->loaded[0]),
        ih = pgd_image_get_source_height(r->loaded[0]);
    double sx = (double)pgd_image_get_width(r->loaded[0]) / iw,
           sy = (double)pgd_image_get_height(r->loaded[0]) / ih;
    if (v->qx < 0)
        v->qx = iw / 2.0, v->qy = ih / 2.0;
    if (v->qx >= iw || v->qy >= ih) {
        char shown[1024];
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT, "--query %s lies outside %s (%dx%d)",
                             v->query, app_term_text(image, shown, sizeof shown), iw, ih);
    }
    /* the query as a fraction of the crop the model sees (clamped into it) */
    double c[4];
    pgd_image_preprocess_view(r->loaded[0], PGD_PREPROCESS_TORCHVISION, c);
    aff->qx = ((v->qx + 0.5) * sx - c[0]) / (c[2] - c[0]);
    aff->qy = ((v->qy + 0.5) * sy - c[1]) / (c[3] - c[1]);
    aff->qx = aff->qx < 0 ? 0 : aff->qx > 0.999999 ? 0.999999 : aff->qx;
    aff->qy = aff->qy < 0 ? 0 : aff->qy > 0.999999 ? 0.999999 : aff->qy;
    return PGD_OK;
}

/* The forward, with the affinity row of the query when --affinity-map asks. */
static int nl_run(cli_state *s, void *model, classify_run *r, double *t, int *split,
                  pgd_error **err)
{
    nl_own *v = s->own;
    int rc = v->aff_png ? affinity_setup(v, s->o.images[0], r, model, err) : PGD_OK;
    if (!rc)
        rc = resnet_forward(model, r->x, r->B, r->H, r->W, r->logits, v->aff_png ? &v->aff : NULL,
                            t, err);
    *split = resnet_last_split(model);
    return rc;
}

/* Scales each image's affinity row to its maximum (every mode on one scale) and draws it. */
static int nl_draw(cli_state *s, classify_run *r)
{
    nl_own *v = s->own;
    const resnet_config *cfg = s->cfg;
    resnet_affinity *aff = &v->aff;
    if (!v->aff_png)
        return EXIT_OK;
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
    return classify_draw_maps(&s->o, r, v->aff_png, "", aff->row, aff->gw, aff->gh,
                              PGD_PREPROCESS_TORCHVISION, what);
}

/* The model's description in the JSON report. */
static json_t *nl_json(const cli_state *s)
{
    const resnet_config *cfg = s->cfg;
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

static void nl_release(cli_state *s)
{
    nl_own *v = s->own;
    if (v)
        free(v->aff.row);
}

static const int nl_options[] = {
    CLI_RANDOM,       CLI_WEIGHTS,      CLI_NONLOCAL, CLI_MODE, CLI_SUBSAMPLE,
    CLI_NO_SUBSAMPLE, CLI_AFFINITY_MAP, CLI_QUERY,    CLI_SIZE, 0};
static const classify_stage nl_stages[5] = {{"stem", "stem"},
                                            {"layers", "residual layers"},
                                            {"nonlocal", "non-local blocks"},
                                            {"head", "head"},
                                            {"total", "total"}};

const cli_family cli_resnet = {
    .family = &family_resnet,
    .names = {"resnet", "nonlocal"},
    .cmd = "nonlocal ",
    .label = "ResNet",
    .default_weights = "resnet50_torchvision.safetensors",
    .options = nl_options,
    .own_size = sizeof(nl_own),
    .init = nl_init,
    .option = nl_option,
    .check = nl_check,
    .open = nl_open,
    .describe = nl_describe,
    .stream_label = nl_stream_label,
    .forward = nl_run,
    .draw = nl_draw,
    .json = nl_json,
    .stages = nl_stages,
    .nstages = 5,
    .release = nl_release,
};

int cmd_nonlocal(int argc, char **argv)
{
    return classify_family_main(&cli_resnet, usage, argc, argv);
}
