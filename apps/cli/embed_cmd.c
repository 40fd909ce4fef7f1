/* embed_cmd.c — `pagoda embed` (L2-normalised features of many images from a headless ViT such
 * as DINO, with the list of their paths beside them) and `pagoda similar` (the nearest images of
 * an index by cosine similarity, computed as one GEMM on the device). */
#include <dirent.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app.h"
#include "commands.h"
#include "maps.h"
#include "outset.h"
#include "vit.h"

static const char embed_usage[] =
    "usage: pagoda embed [--device SEL] [--weights FILE | --random SIZE] [--pool cls|mean|both]\n"
    "                    [--preprocess P] [--batch B] [--input F.npy] [--heads H] [--quiet]\n"
    "                    [--attention-heads OUT.png] [--attention-mask OUT.png]\n"
    "                    --output FEATS.npy IMAGE|DIR...\n"
    "\n"
    "Computes a feature vector per image with a ViT that has no classifier (a self-supervised\n"
    "model such as DINO: timm's vit_*_patch16_224.dino naming) and writes them, each scaled to\n"
    "unit length, as FEATS.npy [N, D] (D doubles with --pool both), and the list of images with\n"
    "the model's settings as FEATS.npy.json, which 'pagoda similar' reads. A directory stands\n"
    "for the image files in it (.jpg, .jpeg, .png, .bmp, .webp; sorted by name, not recursive).\n"
    "Images run in batches of B (default 8); a progress line shows on a terminal.\n"
    "\n"
    "Options:\n"
    "  --weights FILE      the headless ViT checkpoint (timm naming)\n"
    "  --random SIZE       seeded random weights (ti, s, b or tiny): for timing only\n"
    "  --pool P            cls (the class token after the final norm, what timm's model gives;\n"
    "                      default), mean (the mean of the patch tokens) or both (concatenated,\n"
    "                      each normalised)\n"
    "  --preprocess P      torchvision (default: ImageNet mean/std, as DINO was trained), timm\n"
    "                      or hf\n"
    "  --batch B           images per forward pass (1..256, default 8)\n"
    "  --input F.npy       a preprocessed batch [B, 3, H, W] instead of images\n"
    "  --heads H           the attention heads, where neither the file's metadata nor a\n"
    "                      config.json beside it says (else the standard table's, said on\n"
    "                      stderr); recorded in FEATS.npy.json for 'pagoda similar'\n"
    "  --quiet             no progress line\n"
    "  --attention-heads OUT.png\n"
    "                      the last block's class-token attention of every head, one tile per\n"
    "                      head, over each image (the DINO figure): OUT-1.png, OUT-2.png, ...\n"
    "                      (OUT.png for one image)\n"
    "  --attention-mask OUT.png\n"
    "                      per head, the patches that hold 60 % of its attention mass (the\n"
    "                      DINO paper's thresholding), drawn the same way\n"
    "  --device SEL        device selector (see 'pagoda devices --help')\n"
    "\n"
    "All output files appear together when the whole run has succeeded, or none does.\n";

static const char similar_usage[] =
    "usage: pagoda similar --index FEATS.npy [--device SEL] [--topk K] [--json]\n"
    "                      [--allow-nonfinite] QUERY_IMAGE...\n"
    "\n"
    "Embeds each query image with the model and settings recorded in FEATS.npy.json (written by\n"
    "'pagoda embed') and prints the K (default 5) images of the index most similar to it by\n"
    "cosine similarity (the similarity matrix is one GEMM on the device). A query that is in\n"
    "the index finds itself first, with similarity 1. A NaN or an infinity in the index's or a\n"
    "query's features is refused (no similarity can be ranked with it), as 'pagoda classify'\n"
    "refuses non-finite logits; --allow-nonfinite ranks them anyway (null in the JSON).\n";

typedef struct embed_model {
    pgd_ctx *ctx;
    vit_model *m;
    vit_config cfg;
    model_source src;
    int pool; /* 0 cls, 1 mean, 2 both */
    pgd_preprocess preset;
    const char *heads_png, *mask_png; /* per-head maps, or NULL */
    outset out;                       /* every output (outset.h), committed at the end */
} embed_model;

static const char *const map_options[2] = {"--attention-heads", "--attention-mask"};

/* Stages the per-head picture(s) of image `index` of n. */
static int stage_maps(embed_model *e, const pgd_image *thumb, float *maps, int64_t mh, int64_t mw,
                      int index, int n, pgd_error **err)
{
    const char *pngs[2] = {e->heads_png, e->mask_png};
    int64_t heads = e->cfg.heads, cells = mh * mw;
    for (int k = 0; k < 2; k++) {
        if (!pngs[k])
            continue;
        if (k == 1 && map_mass_mask(maps, (int)heads, (int)cells, 0.6))
            return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "attention mask");
        char *path = app_numbered_path(pngs[k], "", index, n);
        if (!path)
            return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "attention maps");
        pgd_outfile *f = NULL;
        double view[4];
        pgd_image_preprocess_view(thumb, e->preset, view);
        int rc = outset_stage(&e->out, map_options[k], path, NULL, &f, err);
        free(path);
        if (rc)
            return rc;
        rc = map_write_grid_png_view_to(f, thumb, maps, (int)heads, (int)mw, (int)mh, view, err);
        if (!rc)
            rc = pgd_outfile_close(f, err);
        if (rc)
            return rc;
    }
    return PGD_OK;
}

static int image_name(const char *n)
{
    const char *dot = strrchr(n, '.');
    static const char *const ext[] = {".jpg", ".jpeg", ".png", ".bmp", ".webp"};
    for (size_t i = 0; dot && i < sizeof ext / sizeof *ext; i++)
        if (!strcasecmp(dot, ext[i]))
            return 1;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The image paths of the operands: files as given, directories expanded (sorted). */
static int gather(char **args, int nargs, char ***out, int *n)
{
    size_t cap = 16, cnt = 0;
    char **list = malloc(cap * sizeof *list);
    int rc = list ? EXIT_OK : EXIT_RUNTIME;
    for (int i = 0; i < nargs && !rc; i++) {
        struct stat st;
        if (stat(args[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            DIR *d = opendir(args[i]);
            if (!d) {
                char shown[1024];
                fprintf(stderr, "pagoda: error: %s: cannot read the directory\n",
                        app_term_text(args[i], shown, sizeof shown));
                rc = EXIT_RUNTIME;
                break;
            }
            size_t first = cnt;
            for (struct dirent *e; !rc && (e = readdir(d)) != NULL;) {
                if (e->d_name[0] == '.' || !image_name(e->d_name))
                    continue;
                if (cnt == cap) {
                    char **l2 = realloc(list, 2 * cap * sizeof *list);
                    if (!l2) {
                        rc = EXIT_RUNTIME;
                        break;
                    }
                    list = l2, cap *= 2;
                }
                size_t len = strlen(args[i]) + strlen(e->d_name) + 2;
                if (!(list[cnt] = malloc(len))) {
                    rc = EXIT_RUNTIME;
                    break;
                }
                snprintf(list[cnt++], len, "%s/%s", args[i], e->d_name);
            }
            closedir(d);
            qsort(list + first, cnt - first, sizeof *list, cmp_str);
            continue;
        }
        if (cnt == cap) {
            char **l2 = realloc(list, 2 * cap * sizeof *list);
            if (!l2) {
                rc = EXIT_RUNTIME;
                break;
            }
            list = l2, cap *= 2;
        }
        if (!(list[cnt++] = strdup(args[i])))
            rc = EXIT_RUNTIME;
    }
    if (rc) {
        for (size_t i = 0; list && i < cnt; i++)
            free(list[i]);
        free(list);
        fprintf(stderr, "pagoda: error: out of host memory listing the images\n");
        return EXIT_RUNTIME;
    }
    *out = list;
    *n = (int)cnt;
    return EXIT_OK;
}

static void free_list(char **l, int n)
{
    for (int i = 0; l && i < n; i++)
        free(l[i]);
    free(l);
}

/* Opens the model: a file (it must be headless) or seeded random weights of a size. */
static int model_open(embed_model *e, const char *device, const char *weights, const char *random,
                      int heads)
{
    pgd_error *err = NULL;
    char shown[1024];
    if (weights) {
        if (model_source_open(&e->src, weights, &err) || vit_source_adapt(&e->src, &err))
            return app_fail(err);
        int rc = app_vit_detect(&e->src, weights, heads, &e->cfg);
        if (rc)
            return rc;
        if (!e->cfg.headless) {
            fprintf(stderr,
                    "pagoda: error: %s has a classifier: 'pagoda embed' takes a model "
                    "without one (a self-supervised ViT such as DINO)\n",
                    app_term_text(weights, shown, sizeof shown));
            return EXIT_RUNTIME;
        }
    } else {
        if (vit_named_config(random ? random : "s", &e->cfg))
            return app_usage_error("embed ", "--random wants ti, s, b or tiny, got '%s'", random);
        e->cfg.headless = 1;
        e->cfg.classes = e->cfg.dim;
        if (vit_random_source(&e->src, &e->cfg, 1, &err))
            return app_fail(err);
    }
    int rc = app_ctx_open(device, &e->ctx);
    if (rc)
        return rc;
    if (vit_load(e->ctx, &e->src, &e->cfg, &e->m, &err))
        return app_fail(err);
    return EXIT_OK;
}

static void model_close(embed_model *e)
{
    vit_free(e->m);
    model_source_free(&e->src);
    pgd_ctx_destroy(e->ctx);
    memset(e, 0, sizeof *e);
}

/* Scales each of n rows of d floats to unit length (a zero row stays zero). */
static void normalise(float *x, int64_t n, int64_t d)
{
    for (int64_t r = 0; r < n; r++) {
        double s = 0;
        for (int64_t j = 0; j < d; j++)
            s += (double)x[r * d + j] * x[r * d + j];
        float inv = s > 0 ? (float)(1.0 / sqrt(s)) : 0.0f;
        for (int64_t j = 0; j < d; j++)
            x[r * d + j] *= inv;
    }
}

/* Features of `b` preprocessed images x [b, 3, H, W] into out [b, D·(both ? 2 : 1)], one
 * forward: with both, the class token and the patch mean side by side, each scaled to unit
 * length and the pair again. */
static int features(embed_model *e, const float *x, int b, int H, int W, float *out,
                    pgd_error **err)
{
    int64_t D = e->cfg.dim;
    vit_set_pool(e->m, e->pool == 2 ? VIT_POOL_BOTH : e->pool == 1 ? VIT_POOL_MEAN : VIT_POOL_CLS);
    int rc = vit_forward(e->m, x, b, H, W, out, NULL, NULL, NULL, err);
    if (!rc && e->pool == 2) {
        normalise(out, 2 * (int64_t)b, D); /* each half of each row */
        normalise(out, b, 2 * D);
    } else if (!rc) {
        normalise(out, b, D);
    }
    return rc;
}

/* Features of the image files paths[0..n) in batches, with a progress line on a terminal. */
static int embed_files(embed_model *e, char **paths, int n, int batch, int quiet, float *out,
                       pgd_error **err)
{
    int64_t width = e->pool == 2 ? 2 * (int64_t)e->cfg.dim : e->cfg.dim;
    int progress = !quiet && isatty(STDERR_FILENO);
    double t0 = model_now_ms();
    int rc = PGD_OK;
    for (int first = 0; first < n && !rc; first += batch) {
        int b = n - first < batch ? n - first : batch;
        float *x = NULL;
        pgd_image **thumbs = NULL;
        int64_t shape[4];
        rc = app_load_batch(paths + first, b, e->preset, 0, 0, &x, &thumbs, shape, err);
        int64_t mh = shape[2] / e->cfg.patch, mw = shape[3] / e->cfg.patch;
        int64_t per = (int64_t)e->cfg.heads * mh * mw;
        float *maps = NULL;
        if (!rc && (e->heads_png || e->mask_png)) {
            if (!(maps = malloc((size_t)(b * per) * sizeof *maps)))
                rc = pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "attention maps");
            vit_set_head_maps(e->m, maps);
        }
        if (!rc)
            rc = features(e, x, b, (int)shape[2], (int)shape[3], out + first * width, err);
        vit_set_head_maps(e->m, NULL);
        for (int i = 0; maps && !rc && i < b; i++)
            rc =
                stage_maps(e, thumbs[i], maps + (size_t)i * (size_t)per, mh, mw, first + i, n, err);
        free(maps);
        for (int i = 0; thumbs && i < b; i++)
            pgd_image_destroy(thumbs[i]);
        free(thumbs);
        pgd_free(x); /* pgd_npy_read's, or NULL */
        if (progress) {
            double s = (model_now_ms() - t0) / 1000;
            fprintf(stderr, "\rpagoda embed: %d/%d images, %.1f images/s\033[K", first + b, n,
                    s > 0 ? (first + b) / s : 0.0);
        }
    }
    if (progress)
        fprintf(stderr, "\r\033[K");
    return rc;
}

static int parse_pool(const char *s)
{
    return !strcmp(s, "cls") ? 0 : !strcmp(s, "mean") ? 1 : !strcmp(s, "both") ? 2 : -1;
}

static const char *pool_name(int p)
{
    return p == 1 ? "mean" : p == 2 ? "both" : "cls";
}

/* What `pagoda embed` was asked for. */
typedef struct embed_args {
    const char *device, *weights, *random, *input, *output, *heads_png, *mask_png;
    int pool, preset, quiet;
    int64_t batch, heads; /* heads 0: the file's or the table's */
} embed_args;

/* The options; -1 when --help printed the usage, else EXIT_OK or EXIT_USAGE. */
static int embed_parse(embed_args *a, int argc, char **argv)
{
    static const struct option opts[] = {{"device", required_argument, 0, 'd'},
                                         {"weights", required_argument, 0, 'w'},
                                         {"random", required_argument, 0, 'r'},
                                         {"pool", required_argument, 0, 'p'},
                                         {"preprocess", required_argument, 0, 'P'},
                                         {"batch", required_argument, 0, 'b'},
                                         {"input", required_argument, 0, 'i'},
                                         {"output", required_argument, 0, 'o'},
                                         {"quiet", no_argument, 0, 'q'},
                                         {"help", no_argument, 0, 'h'},
                                         {"attention-heads", required_argument, 0, 'A'},
                                         {"attention-mask", required_argument, 0, 'M'},
                                         {"heads", required_argument, 0, 'H'},
                                         {0, 0, 0, 0}};
    memset(a, 0, sizeof *a);
    a->preset = PGD_PREPROCESS_TORCHVISION;
    a->batch = 8;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': a->device = optarg; break;
        case 'w': a->weights = optarg; break;
        case 'r': a->random = optarg; break;
        case 'i': a->input = optarg; break;
        case 'o': a->output = optarg; break;
        case 'q': a->quiet = 1; break;
        case 'A': a->heads_png = optarg; break;
        case 'M': a->mask_png = optarg; break;
        case 'p':
            if ((a->pool = parse_pool(optarg)) < 0)
                return app_usage_error("embed ", "--pool wants cls, mean or both, got '%s'",
                                       optarg);
            break;
        case 'P':
            if ((a->preset = app_preset_parse(optarg)) < 0)
                return app_usage_error("embed ",
                                       "--preprocess wants torchvision, timm or hf, "
                                       "got '%s'",
                                       optarg);
            break;
        case 'b':
            if (pgd_parse_int64(optarg, 1, 256, &a->batch))
                return app_usage_error("embed ",
                                       "--batch wants a whole number from 1 to 256, "
                                       "got '%s'",
                                       optarg);
            break;
        case 'H':
            if (pgd_parse_int64(optarg, 1, 1024, &a->heads))
                return app_usage_error("embed ",
                                       "--heads wants a whole number from 1 to 1024, "
                                       "got '%s'",
                                       optarg);
            break;
        case 'h': fputs(embed_usage, stdout); return -1;
        default: return app_usage_error("embed ", "bad option");
        }
    }
    if (!a->output)
        return app_usage_error("embed ", "--output FEATS.npy is required");
    if (a->weights && a->random)
        return app_usage_error("embed ", "give --weights or --random, not both");
    if (!a->weights && !a->random)
        return app_usage_error("embed ", "give --weights FILE (a headless ViT such as DINO) or "
                                         "--random SIZE");
    if (a->input && optind < argc)
        return app_usage_error("embed ", "give images or --input F.npy, not both");
    if (!a->input && optind >= argc)
        return app_usage_error("embed ", "no images given");
    if (a->input && (a->heads_png || a->mask_png))
        return app_usage_error("embed ", "the attention pictures need image files to draw on");
    return EXIT_OK;
}

/* The image list written beside the features. */
static int write_list(const embed_args *a, const embed_model *e, char **paths, int n, int64_t width,
                      pgd_outfile *fj, pgd_error **err)
{
    json_t *imgs = json_array();
    for (int i = 0; i < n; i++) {
        char name[4200];
        if (a->input)
            snprintf(name, sizeof name, "%s[%d]", a->input, i);
        json_array_append_new(imgs, app_json_text(a->input ? name : paths[i]));
    }
    /* The weights by absolute path, so that 'pagoda similar' finds them from anywhere; one that
     * is absolute already stays as it is, links unresolved (a hub snapshot's link has the
     * repository's config.json beside it, its blob has not). */
    char *abs = !a->weights            ? NULL
                : a->weights[0] == '/' ? strdup(a->weights)
                                       : realpath(a->weights, NULL);
    json_t *doc = json_pack("{s:o, s:o, s:s, s:s, s:i, s:i, s:o}", "weights",
                            a->weights ? app_json_text(abs ? abs : a->weights) : json_null(),
                            "random", a->random ? app_json_text(a->random) : json_null(), "pool",
                            pool_name(a->pool), "preprocess", app_preset_name(e->preset), "dim",
                            (int)width, "heads", e->cfg.heads, "images", imgs);
    int rc = PGD_OK;
    if (!doc || json_dumpf(doc, pgd_outfile_get_stream(fj), JSON_INDENT(1)))
        rc = pgd_error_set(err, PGD_ERR_IO, "%s: writing the image list", pgd_outfile_get_path(fj));
    json_decref(doc);
    free(abs);
    return rc;
}

/* Every output checked and claimed before the work (outset.h): the features, their list
 * (FEATS.npy.json) and, once the images are known (n of them), the per-image maps. */
static int claim_outputs(embed_model *e, const embed_args *a, const char *jpath, int n)
{
    const char *pngs[2] = {a->heads_png, a->mask_png};
    int rc = EXIT_OK;
    if (n < 0) {
        rc = outset_claim(&e->out, "--output", a->output);
        if (!rc)
            rc = outset_claim(&e->out, "--output (its image list)", jpath);
        for (int k = 0; !rc && k < 2; k++)
            rc = outset_check_given(map_options[k], pngs[k]);
        return rc;
    }
    for (int k = 0; !rc && k < 2; k++)
        for (int i = 0; !rc && pngs[k] && i < n; i++) {
            char *path = app_numbered_path(pngs[k], "", i, n);
            rc = path ? outset_claim(&e->out, map_options[k], path) : EXIT_RUNTIME;
            if (!path)
                fprintf(stderr, "pagoda: error: out of host memory\n");
            free(path);
        }
    return rc;
}

/* The inputs: the --input batch into *x (shape) or the image paths (directories expanded). */
static int embed_inputs(const embed_args *a, int argc, char **argv, float **x, int64_t *shape,
                        char ***paths, int *n)
{
    pgd_error *err = NULL;
    if (a->input) {
        int nd = 0;
        if (pgd_npy_read(a->input, x, &nd, shape, &err))
            return app_fail(err);
        if (nd != 4 || shape[1] != 3 || shape[0] < 1)
            return pgd_error_set(&err, PGD_ERR_SHAPE, "%s: input must be [B, 3, H, W]", a->input),
                   app_fail(err);
        *n = (int)shape[0];
        return EXIT_OK;
    }
    int rc = gather(argv + optind, argc - optind, paths, n);
    if (!rc && *n == 0) {
        fprintf(stderr, "pagoda: error: no image files (.jpg, .jpeg, .png, .bmp, .webp) found\n");
        rc = EXIT_RUNTIME;
    }
    return rc;
}

int cmd_embed(int argc, char **argv)
{
    embed_args a;
    int rc = embed_parse(&a, argc, argv);
    if (rc)
        return rc < 0 ? EXIT_OK : rc;
    char **paths = NULL;
    int n = 0;
    float *x = NULL, *feats = NULL;
    int64_t shape[PGD_MAX_DIMS];
    pgd_error *err = NULL;
    embed_model e = {0};
    e.pool = a.pool;
    e.preset = (pgd_preprocess)a.preset;
    e.heads_png = a.heads_png;
    e.mask_png = a.mask_png;
    pgd_outfile *fo = NULL, *fj = NULL;
    char jpath[4096];
    snprintf(jpath, sizeof jpath, "%s.json", a.output);
    rc = claim_outputs(&e, &a, jpath, -1);
    if (!rc)
        rc = embed_inputs(&a, argc, argv, &x, shape, &paths, &n);
    if (!rc && !a.input)
        rc = claim_outputs(&e, &a, jpath, n);
    if (!rc)
        rc = model_open(&e, a.device, a.weights, a.random, (int)a.heads);
    int64_t width = a.pool == 2 ? 2 * (int64_t)e.cfg.dim : e.cfg.dim;
    if (!rc && !(feats = malloc((size_t)n * (size_t)width * sizeof *feats))) {
        fprintf(stderr, "pagoda: error: out of host memory for %d features\n", n);
        rc = EXIT_RUNTIME;
    }
    /* Outputs are staged (their temporary files made) before the work, committed after it. */
    if (!rc && (outset_stage(&e.out, "--output", a.output, NULL, &fo, &err) ||
                outset_stage(&e.out, "--output (its image list)", jpath, NULL, &fj, &err)))
        rc = app_fail(err);
    if (!rc && (a.input ? features(&e, x, n, (int)shape[2], (int)shape[3], feats, &err)
                        : embed_files(&e, paths, n, (int)a.batch, a.quiet, feats, &err)))
        rc = app_fail(err);
    int64_t fs[2] = {n, width};
    if (!rc &&
        (pgd_npy_write_to(fo, feats, 2, fs, &err) || write_list(&a, &e, paths, n, width, fj, &err)))
        rc = app_fail(err);
    if (!rc)
        rc = outset_commit(&e.out, 1);
    if (!rc && !a.quiet)
        fprintf(stderr,
                "pagoda: %d feature vectors of %lld (%s pooling) written to %s, the "
                "image list to %s\n",
                n, (long long)width, pool_name(a.pool), a.output, jpath);
    outset_free(&e.out); /* a run that did not commit leaves no output */
    model_close(&e);
    free(feats);
    free(x);
    free_list(paths, n);
    return rc;
}

/* An index: its features [N, D] and the image list with the model's settings. */
typedef struct embed_index {
    json_t *meta, *imgs;
    const char *weights, *random;
    int pool, preset, heads; /* heads 0: not recorded (an older list) */
    float *feats;
    int64_t n, d;
} embed_index;

static void index_free(embed_index *ix)
{
    json_decref(ix->meta);
    pgd_free(ix->feats); /* pgd_npy_read's */
    memset(ix, 0, sizeof *ix);
}

/* Reads FEATS.npy and FEATS.npy.json; prints the error and returns EXIT_RUNTIME on failure. */
static int index_open(const char *path, embed_index *ix)
{
    memset(ix, 0, sizeof *ix);
    pgd_error *err = NULL;
    char jpath[4096];
    snprintf(jpath, sizeof jpath, "%s.json", path);
    void *text = NULL;
    size_t size = 0;
    if (pgd_file_read(jpath, UINT64_C(64) << 20, &text, &size, &err))
        return app_fail(err);
    json_error_t je;
    ix->meta = json_loadb(text, size, 0, &je);
    pgd_free(text);
    ix->imgs = ix->meta ? json_object_get(ix->meta, "images") : NULL;
    ix->weights = json_string_value(json_object_get(ix->meta, "weights"));
    ix->random = json_string_value(json_object_get(ix->meta, "random"));
    const char *mp = json_string_value(json_object_get(ix->meta, "pool"));
    const char *mpre = json_string_value(json_object_get(ix->meta, "preprocess"));
    ix->pool = mp ? parse_pool(mp) : -1;
    ix->preset = mpre ? app_preset_parse(mpre) : -1;
    json_t *mh = json_object_get(ix->meta, "heads");
    ix->heads = json_is_integer(mh) && json_integer_value(mh) >= 1 && json_integer_value(mh) <= 1024
                    ? (int)json_integer_value(mh)
                : mh ? -1
                     : 0;
    if (!json_is_array(ix->imgs) || (!ix->weights && !ix->random) || ix->pool < 0 ||
        ix->preset < 0 || ix->heads < 0) {
        fprintf(stderr, "pagoda: error: %s: not an image list written by 'pagoda embed'\n", jpath);
        return EXIT_RUNTIME;
    }
    int nd = 0;
    int64_t is[PGD_MAX_DIMS];
    if (pgd_npy_read(path, &ix->feats, &nd, is, &err))
        return app_fail(err);
    size_t nimg = json_array_size(ix->imgs);
    if (nd != 2 || is[0] != (int64_t)nimg || is[0] < 1) {
        fprintf(stderr,
                "pagoda: error: %s: features must be [%zu, D] for the %zu images of "
                "%s\n",
                path, nimg, nimg, jpath);
        return EXIT_RUNTIME;
    }
    ix->n = is[0];
    ix->d = is[1];
    return EXIT_OK;
}

/* Prints (or appends to `results`) the k most similar images of each query's row of sim. */
static void report_nearest(const embed_index *ix, char **queries, int nq, const float *sim,
                           int64_t topk, json_t *results)
{
    for (int q = 0; q < nq; q++) {
        const float *row = sim + (size_t)q * (size_t)ix->n;
        int64_t k = topk < ix->n ? topk : ix->n;
        char shown[1024];
        json_t *hits = results ? json_array() : NULL;
        if (!results)
            printf("%s:\n", app_term_text(queries[q], shown, sizeof shown));
        /* Selection by repeated arg-max (k is small); ties to the lower index. */
        char *taken = calloc((size_t)ix->n, 1);
        for (int64_t r = 0; taken && r < k; r++) {
            int64_t best = -1;
            for (int64_t j = 0; j < ix->n; j++)
                if (!taken[j] && (best < 0 || row[j] > row[best]))
                    best = j;
            taken[best] = 1;
            const char *path = json_string_value(json_array_get(ix->imgs, (size_t)best));
            json_t *sv = isfinite(row[best]) ? json_real(row[best]) : json_null();
            if (results)
                json_array_append_new(hits,
                                      json_pack("{s:i, s:o, s:o}", "rank", (int)r + 1, "similarity",
                                                sv, "image", app_json_text(path ? path : "?")));
            else
                json_decref(sv);
            if (!results)
                printf("  %2lld  %.4f  %s\n", (long long)r + 1, row[best],
                       app_term_text(path ? path : "?", shown, sizeof shown));
        }
        free(taken);
        if (results)
            json_array_append_new(results, json_pack("{s:o, s:o}", "query",
                                                     app_json_text(queries[q]), "nearest", hits));
    }
}

/* The first non-finite feature of x [n, d] (the index's, or the queries' from the model) is
 * refused as classify refuses non-finite logits: EXIT_RUNTIME naming the row's image. */
static int refuse_nonfinite(const float *x, int64_t n, int64_t d, const char *what,
                            const embed_index *ix, char **queries)
{
    int64_t bad = model_first_nonfinite(x, n * d);
    if (bad < 0)
        return EXIT_OK;
    const char *img =
        queries ? queries[bad / d] : json_string_value(json_array_get(ix->imgs, (size_t)(bad / d)));
    char shown[1024], ishown[1024];
    fprintf(stderr,
            "pagoda: error: %s: the features of %s (row %lld) are not finite (%g at "
            "column %lld) (--allow-nonfinite ranks them anyway)\n",
            app_term_text(what, shown, sizeof shown),
            app_term_text(img ? img : "?", ishown, sizeof ishown), (long long)(bad / d),
            isnan(x[bad]) ? (double)NAN : (double)x[bad], (long long)(bad % d));
    return EXIT_RUNTIME;
}

/* sim [nq, N] = queries [nq, D] · indexᵀ, one GEMM on the context's device. */
static int similarities(pgd_ctx *ctx, const embed_index *ix, const float *qf, int nq, float *sim,
                        pgd_error **err)
{
    int64_t sq[2] = {nq, ix->d}, sx[2] = {ix->n, ix->d}, ss[2] = {nq, ix->n};
    pgd_tensor *ti = NULL, *tq = NULL, *ts = NULL;
    int rc = pgd_tensor_create_from(ctx, 2, sx, ix->feats, &ti, err);
    if (!rc)
        rc = pgd_tensor_create_from(ctx, 2, sq, qf, &tq, err);
    if (!rc)
        rc = pgd_tensor_create(ctx, 2, ss, &ts, err);
    pgd_gemm_args g = {.trans_b = 1, .alpha = 1.0f};
    if (!rc)
        rc = pgd_gemm(ctx, &g, tq, ti, ts, err);
    if (!rc)
        rc = pgd_tensor_download(ts, sim, err);
    pgd_tensor_destroy(ti);
    pgd_tensor_destroy(tq);
    pgd_tensor_destroy(ts);
    return rc;
}

int cmd_similar(int argc, char **argv)
{
    static const struct option opts[] = {{"device", required_argument, 0, 'd'},
                                         {"index", required_argument, 0, 'x'},
                                         {"topk", required_argument, 0, 'k'},
                                         {"json", no_argument, 0, 'j'},
                                         {"allow-nonfinite", no_argument, 0, 'N'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *device = NULL, *index = NULL;
    int64_t topk = 5;
    int json = 0, allow = 0, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': device = optarg; break;
        case 'x': index = optarg; break;
        case 'j': json = 1; break;
        case 'N': allow = 1; break;
        case 'k':
            if (pgd_parse_int64(optarg, 1, 100000, &topk))
                return app_usage_error("similar ",
                                       "--topk wants a whole number from 1 to "
                                       "100000, got '%s'",
                                       optarg);
            break;
        case 'h': fputs(similar_usage, stdout); return EXIT_OK;
        default: return app_usage_error("similar ", "bad option");
        }
    }
    if (!index)
        return app_usage_error("similar ", "--index FEATS.npy is required");
    if (optind >= argc)
        return app_usage_error("similar ", "no query images given");
    embed_index ix;
    embed_model e = {0};
    pgd_error *err = NULL;
    int rc = index_open(index, &ix), nq = argc - optind;
    if (!rc && !allow)
        rc = refuse_nonfinite(ix.feats, ix.n, ix.d, index, &ix, NULL);
    e.pool = ix.pool;
    e.preset = (pgd_preprocess)(ix.preset < 0 ? 0 : ix.preset);
    if (!rc)
        rc = model_open(&e, device, ix.weights, ix.random, ix.heads);
    int64_t width = e.pool == 2 ? 2 * (int64_t)e.cfg.dim : e.cfg.dim;
    if (!rc && ix.d != width) {
        fprintf(stderr, "pagoda: error: %s holds %lld-wide features but its model gives %lld\n",
                index, (long long)ix.d, (long long)width);
        rc = EXIT_RUNTIME;
    }
    float *qf = NULL, *sim = NULL;
    if (!rc && (!(qf = malloc((size_t)nq * (size_t)width * sizeof *qf)) ||
                !(sim = malloc((size_t)nq * (size_t)ix.n * sizeof *sim)))) {
        fprintf(stderr, "pagoda: error: out of host memory\n");
        rc = EXIT_RUNTIME;
    }
    if (!rc && embed_files(&e, argv + optind, nq, 8, 1, qf, &err))
        rc = app_fail(err);
    if (!rc && !allow)
        rc = refuse_nonfinite(qf, nq, width, ix.weights ? ix.weights : "random weights", &ix,
                              argv + optind);
    if (!rc && similarities(e.ctx, &ix, qf, nq, sim, &err))
        rc = app_fail(err);
    json_t *results = json && !rc ? json_array() : NULL;
    if (!rc)
        report_nearest(&ix, argv + optind, nq, sim, topk, results);
    if (!rc && json)
        rc = app_print_json(
            json_pack("{s:o, s:o}", "index", app_json_text(index), "results", results));
    model_close(&e);
    free(qf);
    free(sim);
    index_free(&ix);
    return rc;
}
