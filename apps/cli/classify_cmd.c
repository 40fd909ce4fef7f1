/* classify_cmd.c — `pagoda classify`, and the one driver under it and its aliases `pagoda vit`
 * and `pagoda nonlocal` (classify_family.h): the options parsed once (the shared ones and every
 * family's, each then checked against the family that runs), the checkpoint opened once (its
 * family detected from it by the family table's one rule, or named by --family), and the
 * family run through the same pipeline for one batch, a stream, MPI and eval. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "classify_family.h"
#include "commands.h"
#include "stream.h"

static const char usage[] =
    "usage: pagoda classify [--weights FILE | --family F --random SIZE] [options] [IMAGE...]\n"
    "\n"
    "Classifies images with whatever model the checkpoint holds: the family is detected from\n"
    "its tensor names and shapes, the family's preprocessing is used (--preprocess overrides\n"
    "where the family has presets), and the options are those of the family's command:\n"
    "\n"
    "  ViT, DeiT (timm, Hugging Face, torchvision naming)   as 'pagoda vit', including\n"
    "      --attention soft|topk:K|sample:SEED and --attention-map OUT.png\n"
    "  ResNet with or without non-local blocks (torchvision naming)\n"
    "                                                        as 'pagoda nonlocal', including\n"
    "      --affinity-map OUT.png\n"
    "  Swin Transformer V1 (torchvision, timm old and new layout, Hugging Face naming)\n"
    "      the common options below, --preprocess (default torchvision), --attention\n"
    "      soft|topk:K|sample:SEED (in every window attention), --random t|s|b|tiny\n"
    "  MLP-Mixer (timm naming: stem.proj, blocks.N.mlp_tokens / mlp_channels, head)\n"
    "      the common options below, --preprocess (default timm), --random s16|b16|l16|tiny\n"
    "\n"
    "Options of every family:\n"
    "  --weights FILE      the .safetensors checkpoint (its family is detected)\n"
    "  --family F          vit, resnet, swin or mixer: skip detection (needed with --random)\n"
    "  --random SIZE       seeded random weights of the family's size SIZE (not a trained\n"
    "                      model): vit ti|s|b|tiny, resnet 18|34|50|101|152, swin t|s|b|tiny,\n"
    "                      mixer s16|b16|l16|tiny\n"
    "  --device SEL        device selector (see 'pagoda devices --help')\n"
    "  --topk K            classes to print per image (default 5)\n"
    "  --labels FILE       class names, one per line (default: ImageNet-1k for 1000 classes)\n"
    "  --json              print the results as JSON\n"
    "  --input F.npy       a preprocessed batch [B, 3, H, W] instead of images\n"
    "  --save-input F.npy  write the preprocessed batch\n"
    "  --save-logits F.npy write the logits [B, classes]\n" CLASSIFY_HELP_TAIL "\n"
    "'pagoda vit' and 'pagoda nonlocal' remain for their families, with the same options.\n";

/* The families of the command line, in the order of family.h's table. */
static const cli_family *const cli_families[] = {&cli_vit, &cli_resnet, &cli_mixer, &cli_swin,
                                                 &cli_onnx};
enum { N_FAMILIES = sizeof cli_families / sizeof cli_families[0] };

/* Every family's options, parsed together (classify_parse adds the shared ones). */
static const struct option cli_options[] = {
    {"random", required_argument, 0, CLI_RANDOM},
    {"weights", required_argument, 0, CLI_WEIGHTS},
    {"preprocess", required_argument, 0, CLI_PREPROCESS},
    {"family", required_argument, 0, CLI_FAMILY},
    {"attention", required_argument, 0, CLI_ATTENTION},
    {"attention-map", required_argument, 0, CLI_ATTENTION_MAP},
    {"heads", required_argument, 0, CLI_HEADS},
    {"nonlocal", required_argument, 0, CLI_NONLOCAL},
    {"mode", required_argument, 0, CLI_MODE},
    {"subsample", no_argument, 0, CLI_SUBSAMPLE},
    {"no-subsample", no_argument, 0, CLI_NO_SUBSAMPLE},
    {"affinity-map", required_argument, 0, CLI_AFFINITY_MAP},
    {"query", required_argument, 0, CLI_QUERY},
    {"size", required_argument, 0, CLI_SIZE},
    {"help", no_argument, 0, 'h'},
};
enum { N_OPTIONS = sizeof cli_options / sizeof cli_options[0] };

/* The family options as given, in order, applied once the family is known. */
typedef struct given {
    int n;
    int code[64];
    const char *arg[64];
} given;

static int record(void *p, int c, const char *arg)
{
    given *g = p;
    if (g->n == 64)
        return app_usage_error("classify ", "more than 64 model options");
    g->code[g->n] = c;
    g->arg[g->n++] = arg;
    return EXIT_OK;
}

static const char *option_name(int c)
{
    for (int i = 0; i < N_OPTIONS; i++)
        if (cli_options[i].val == c)
            return cli_options[i].name;
    return "?";
}

static const cli_family *family_named(const char *name)
{
    for (int i = 0; i < N_FAMILIES; i++)
        for (int k = 0; k < 3 && cli_families[i]->names[k]; k++)
            if (!strcmp(name, cli_families[i]->names[k]))
                return cli_families[i];
    return NULL;
}

/* The option c with its value into s: the options every family shares here, the family's own
 * through its hook; one the family does not take is a usage error naming it. */
static int apply(cli_state *s, int c, const char *arg, int fixed)
{
    const cli_family *f = s->cf;
    int takes = 0;
    for (const int *o = f->options; *o; o++)
        takes |= *o == c;
    if (c == CLI_FAMILY)
        return fixed ? app_usage_error(s->o.cmd, "--family is an option of 'pagoda classify'")
                     : EXIT_OK; /* read before */
    if (!takes)
        return app_usage_error(s->o.cmd, "--%s is not an option of the %s family", option_name(c),
                               f->label);
    switch (c) {
    case CLI_WEIGHTS: s->weights = arg; return EXIT_OK;
    case CLI_RANDOM: s->random = arg; return EXIT_OK;
    case CLI_ATTENTION: return classify_parse_attention(s->o.cmd, arg, &s->attention);
    case CLI_PREPROCESS:
        s->preset = app_preset_parse(arg);
        if (s->preset < 0)
            return app_usage_error(s->o.cmd,
                                   "--preprocess wants torchvision, timm or hf, got "
                                   "'%s'",
                                   arg);
        return EXIT_OK;
    default: return f->option(s, c, arg);
    }
}

/* The family of `pagoda classify`: --family, else the checkpoint's by family_detect (the
 * checkpoint stays open in s->src for the run). */
static int choose_family(cli_state *s, const given *g)
{
    const char *name = NULL, *weights = NULL;
    for (int i = 0; i < g->n; i++) {
        if (g->code[i] == CLI_FAMILY)
            name = g->arg[i];
        if (g->code[i] == CLI_WEIGHTS)
            weights = g->arg[i];
    }
    if (name && !(s->cf = family_named(name)))
        return app_usage_error("classify ", "--family wants vit, resnet, swin or mixer, got '%s'",
                               name);
    if (!s->cf && !weights)
        return app_usage_error("classify ", "give --weights FILE (its family is detected), or "
                                            "--family F for seeded random weights");
    pgd_error *err = NULL;
    if (weights && model_source_open(&s->src, weights, &err))
        return app_fail(err);
    if (s->cf)
        return EXIT_OK;
    const model_family *mf = NULL;
    if (family_detect(&s->src, NULL, &mf, &err)) {
        char shown[1024];
        fprintf(stderr,
                "pagoda: classify: %s is not a checkpoint of a family Pagoda knows "
                "(ViT/DeiT, ResNet, Swin, MLP-Mixer); as a ViT:\n",
                app_term_text(weights, shown, sizeof shown));
        return app_fail(err);
    }
    for (int i = 0; i < N_FAMILIES && !s->cf; i++)
        if (cli_families[i]->family == mf)
            s->cf = cli_families[i];
    return EXIT_OK;
}

/* Parses the options, picks the family, applies its options and opens the model. */
static int prepare(cli_state *s, const cli_family *fixed, const char *help, int argc, char **argv)
{
    given g = {0};
    s->preset = -1;
    classify_opts_init(&s->o, fixed ? fixed->cmd : "classify ");
    int rc = classify_parse(&s->o, argc, argv, cli_options, N_OPTIONS, help, record, &g);
    if (rc)
        return rc;
    s->cf = fixed;
    if (!fixed && (rc = choose_family(s, &g)))
        return rc;
    s->o.cmd = s->cf->cmd;
    if (!(s->cfg = calloc(1, s->cf->family->cfg_size)) ||
        (s->cf->own_size && !(s->own = calloc(1, s->cf->own_size)))) {
        fprintf(stderr, "pagoda: error: out of host memory\n");
        return EXIT_RUNTIME;
    }
    if (s->cf->init)
        s->cf->init(s);
    for (int i = 0; i < g.n && !rc; i++)
        rc = apply(s, g.code[i], g.arg[i], fixed != NULL);
    if (!rc && s->weights && s->random)
        rc = app_usage_error(s->o.cmd, "give --weights or --random, not both");
    if (!rc && s->cf->check)
        rc = s->cf->check(s);
    if (!rc)
        rc = classify_operands(&s->o, argc, argv, s->o.map_png ? s->o.map_option : NULL);
    /* the family's default file when neither --weights nor --random is given */
    if (!rc && !s->random && s->cf->default_weights &&
        app_weights_or_default(&s->weights, s->cf->default_weights, s->default_path,
                               sizeof s->default_path))
        rc = EXIT_USAGE;
    if (!rc && s->weights && !s->src.u) {
        pgd_error *err = NULL;
        if (model_source_open(&s->src, s->weights, &err))
            rc = app_fail(err);
    }
    return rc ? rc : s->cf->open(s);
}

/* The stream: the family's model on each device (stream.c). */
static int run_stream(cli_state *s)
{
    int rc = classify_stream_check(&s->o, s->o.map_png ? s->o.map_option : NULL);
    if (rc)
        return rc;
    s->o.map_png = NULL;
    s->cf->describe(s);
    stream_model m = {s->cf->family,
                      s->cfg,
                      &s->src,
                      s->attention,
                      s->weights,
                      s->weights ? NULL : s->random_label,
                      ""};
    s->cf->stream_label(s, m.label, sizeof m.label);
    return classify_stream(&s->o, (pgd_preprocess)s->preset, s->classes, &m);
}

/* One batch: load, forward (with the family's maps), checks, outputs, report. */
static int run_batch(cli_state *s, classify_run *r)
{
    const model_family *f = s->cf->family;
    pgd_error *err = NULL;
    void *model = NULL;
    s->cf->describe(s);
    if (f->load(r->ctx, &s->src, s->cfg, &model, &err))
        return app_fail(err);
    if (f->set_attention)
        f->set_attention(model, s->attention.mode, s->attention.topk, s->attention.seed);
    int rc = classify_prepare(&s->o, r), split = r->B;
    double t[8] = {0};
    if (!rc && (s->cf->forward ? s->cf->forward(s, model, r, t, &split, &err)
                               : f->forward(model, r->x, r->B, r->H, r->W, r->logits, NULL, &err)))
        rc = app_fail(err);
    if (!rc)
        rc = classify_check_logits(&s->o, r, f->find_nonfinite, model);
    if (!rc)
        rc = classify_after_forward(&s->o, r, split);
    if (!rc && s->cf->draw)
        rc = s->cf->draw(s, r);
    if (!rc)
        rc = classify_emit(&s->o, r, s->weights, s->o.json ? s->cf->json(s) : NULL, s->cf->stages,
                           t, s->cf->nstages);
    if (!rc)
        rc = classify_finish(&s->o, r);
    f->free(model);
    return rc;
}

int classify_family_main(const cli_family *fixed, const char *help, int argc, char **argv)
{
    cli_state s;
    memset(&s, 0, sizeof s);
    int rc = prepare(&s, fixed, help, argc, argv);
    if (rc < 0)
        rc = EXIT_OK; /* --help */
    else if (!rc && classify_streaming(&s.o))
        rc = run_stream(&s);
    else if (!rc) {
        classify_run r = {0};
        rc = classify_begin(&s.o, (pgd_preprocess)s.preset, s.side_h, s.side_w, s.classes, &r);
        if (!rc)
            rc = run_batch(&s, &r);
        classify_free(&r);
    }
    if (s.cf && s.cf->release)
        s.cf->release(&s);
    model_source_free(&s.src);
    free(s.cfg);
    free(s.own);
    return rc;
}

int cmd_classify(int argc, char **argv)
{
    return classify_family_main(NULL, usage, argc, argv);
}
