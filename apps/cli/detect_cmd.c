/* detect_cmd.c — `pagoda detect`: object detection with DETR (apps/models/detr.c). Images are
 * preprocessed as transformers' DetrImageProcessor does (shorter side 800, longer at most 1333,
 * bilinear, ImageNet mean/std, padded at the bottom and right to the batch's largest size with
 * a pixel mask), run as one batch, post-processed as post_process_object_detection; the
 * detections are printed (or written as JSON), drawn as labelled boxes, and each detected
 * object's last-layer cross-attention is drawn over its image (the DETR paper's figure). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wmissing-braces"
#endif
#include <stb_easy_font.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

#include "app.h"
#include "commands.h"
#include "detr.h"
#include "maps.h"
#include "outset.h"

static const char usage[] =
    "usage: pagoda detect [--device SEL] [--weights FILE] [--heads N[,M]] [--dilation true|false]\n"
    "                     [--labels FILE] [--threshold T] [--json] [--draw OUT.png]\n"
    "                     [--attention-maps PREFIX] [--save-logits F.npy] [--save-boxes F.npy]\n"
    "                     [--allow-nonfinite] [--input F.npy [--pixel-mask M.npy]] IMAGE...\n"
    "\n"
    "Detects objects with DETR (Carion et al. 2020): a ResNet backbone, a Transformer encoder\n"
    "over its feature map and a decoder whose object queries each give a class and a box. The\n"
    "images are resized as DetrImageProcessor does (shorter side 800, longer at most 1333,\n"
    "bilinear, ImageNet mean/std), padded to a common size with a pixel mask and run as one\n"
    "batch; every query whose most likely class (not \"no object\") has a probability above T is\n"
    "reported with its box in pixels of the original image, clipped to the image (the model's\n"
    "boxes, and post_process_object_detection's, may reach past it: --save-boxes keeps them).\n"
    "\n"
    "Weights: safetensors in Hugging Face naming (facebook/detr-resnet-50 and -101: transformers\n"
    "4.x names, or 5.x's state_dict() names) or the original repository's (tools/user/convert-pth\n"
    "turns its .pth into safetensors). A config.json beside the file (as save_pretrained writes\n"
    "it) gives the heads, DC5 and the label names (a bad one is an error naming the key); the\n"
    "options below override it. What neither gives is assumed (8 heads, no dilation, COCO's 91\n"
    "ids) and said so, on stderr and under \"assumed\" in the JSON. Without a file,\n"
    "detr-resnet-50.safetensors in the weights directory, else seeded random weights (said so:\n"
    "the detections then mean nothing).\n"
    "\n"
    "Options:\n"
    "  --weights FILE          the checkpoint\n"
    "  --heads N[,M]           attention heads of the encoder (N) and the decoder (M, default N)\n"
    "  --dilation true|false   whether the backbone's last stage is dilated (DETR-DC5)\n"
    "  --labels FILE           class names, one per line, line i naming class id i\n"
    "  --allow-nonfinite       run an input holding NaN or infinity, report non-finite outputs\n"
    "  --threshold T           the probability a detection must exceed (0..1, default 0.7)\n"
    "  --json                  print the detections as JSON\n"
    "  --draw OUT.png          the image with labelled boxes (OUT-1.png, ... for several)\n"
    "  --attention-maps PREFIX for every detection, the last decoder layer's cross-attention of\n"
    "                          its query over the feature map, heads averaged, over the image:\n"
    "                          PREFIX-<object>-<label>.png (PREFIX-<image>-<object>-<label>.png\n"
    "                          for several images)\n"
    "  --save-logits F.npy     the class logits [B, queries, classes + 1]\n"
    "  --save-boxes F.npy      the boxes [B, queries, 4], (cx, cy, w, h) in 0..1\n"
    "  --input F.npy           a preprocessed batch [B, 3, H, W] instead of images (boxes are "
    "then\n"
    "                          in pixels of each image's unpadded extent in the mask)\n"
    "  --pixel-mask M.npy      its pixel mask [B, H, W] (uint8, bool, int64 or float; 1 = real)\n"
    "  --device SEL            device selector (see 'pagoda devices --help')\n"
    "\n"
    "All output files appear together when the whole run has succeeded, or none does.\n";

typedef struct opts {
    const char *device, *weights, *draw, *maps, *save_logits, *save_boxes, *input, *mask;
    const char *labels;
    double threshold;
    int json, allow_nonfinite;
    int heads[2]; /* encoder, decoder; 0: not given */
    int dilation; /* 0: not given, 1 true, -1 false */
    char **images;
    int nimages;
} opts;

/* One image of the batch: its pixels (NULL with --input) and extent. */
typedef struct item {
    const char *name;
    pgd_image *img;
    int w, h;   /* the original size (boxes are scaled to it) */
    int rw, rh; /* the resized size inside the padded batch */
} item;

typedef struct run {
    opts o;
    pgd_ctx *ctx;
    model_source src;
    pgd_weights *wf;
    int random;
    detr_config cfg;
    detr_model *m;
    json_t *id2label;  /* from config.json, or NULL */
    app_labels labels; /* --labels, or none */
    char config[4096]; /* config.json's path, "" when there is none */
    item *items;
    int B, H, W;
    float *x, *mask;
    int x_npy;  /* x is pgd_npy_read's (released by pgd_free), not calloc's */
    outset out; /* every output file (outset.h): checked first, committed together */
} run;

/* "N" (both) or "N,M" (encoder, decoder), each 1..4096. */
static int parse_heads(const char *arg, int heads[2])
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s", arg);
    char *comma = strchr(buf, ',');
    if (comma)
        *comma = 0;
    int64_t v[2];
    if (strlen(arg) >= sizeof buf || pgd_parse_int64(buf, 1, 4096, &v[0]) ||
        pgd_parse_int64(comma ? comma + 1 : buf, 1, 4096, &v[1]))
        return -1;
    heads[0] = (int)v[0], heads[1] = (int)v[1];
    return 0;
}

static int parse(int argc, char **argv, opts *o)
{
    static const struct option longs[] = {{"device", required_argument, 0, 'd'},
                                          {"weights", required_argument, 0, 'w'},
                                          {"threshold", required_argument, 0, 't'},
                                          {"json", no_argument, 0, 'j'},
                                          {"draw", required_argument, 0, 'D'},
                                          {"attention-maps", required_argument, 0, 'a'},
                                          {"save-logits", required_argument, 0, 'l'},
                                          {"save-boxes", required_argument, 0, 'b'},
                                          {"input", required_argument, 0, 'i'},
                                          {"pixel-mask", required_argument, 0, 'm'},
                                          {"heads", required_argument, 0, 'H'},
                                          {"dilation", required_argument, 0, 'L'},
                                          {"labels", required_argument, 0, 'B'},
                                          {"allow-nonfinite", no_argument, 0, 'N'},
                                          {"help", no_argument, 0, 'h'},
                                          {0, 0, 0, 0}};
    memset(o, 0, sizeof *o);
    o->threshold = 0.7;
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        switch (c) {
        case 'd': o->device = optarg; break;
        case 'w': o->weights = optarg; break;
        case 't':
            if (pgd_parse_double(optarg, 0.0, 1.0, &o->threshold))
                return app_usage_error("detect ", "--threshold '%s': expected a number in 0..1",
                                       optarg);
            break;
        case 'j': o->json = 1; break;
        case 'D': o->draw = optarg; break;
        case 'a': o->maps = optarg; break;
        case 'l': o->save_logits = optarg; break;
        case 'b': o->save_boxes = optarg; break;
        case 'i': o->input = optarg; break;
        case 'm': o->mask = optarg; break;
        case 'B': o->labels = optarg; break;
        case 'N': o->allow_nonfinite = 1; break;
        case 'H':
            if (parse_heads(optarg, o->heads))
                return app_usage_error("detect ",
                                       "--heads '%s': expected N or N,M (whole numbers "
                                       "from 1 to 4096)",
                                       optarg);
            break;
        case 'L':
            o->dilation = !strcmp(optarg, "true") ? 1 : !strcmp(optarg, "false") ? -1 : 0;
            if (!o->dilation)
                return app_usage_error("detect ", "--dilation '%s': expected true or false",
                                       optarg);
            break;
        case 'h': fputs(usage, stdout); return -1;
        default:
            return app_usage_error("detect ", "unknown or incomplete option '%s'",
                                   argv[optind - 1]);
        }
    }
    o->images = argv + optind;
    o->nimages = argc - optind;
    if (o->mask && !o->input)
        return app_usage_error("detect ", "--pixel-mask goes with --input");
    if (o->input && o->nimages)
        return app_usage_error("detect ", "either --input or images, not both");
    if (!o->input && !o->nimages)
        return app_usage_error("detect ", "no image given");
    if ((o->maps && strlen(o->maps) > 3000) || (o->draw && strlen(o->draw) > 3000))
        return app_usage_error("detect ", "an output path longer than 3000 bytes");
    if (o->input && (o->draw || o->maps))
        return app_usage_error("detect ", "--draw and --attention-maps need images, not --input");
    return EXIT_OK;
}

/* ---- weights ------------------------------------------------------------------------------ */

/* An id2label as save_pretrained writes it: {"0": "N/A", "1": "person", ...}. */
static int id2label_ok(json_t *v)
{
    const char *key;
    json_t *name;
    int64_t id;
    if (!json_is_object(v))
        return 0;
    json_object_foreach(v, key, name) if (pgd_parse_int64(key, 0, INT32_MAX, &id) ||
                                          !json_is_string(name)) return 0;
    return 1;
}

/* config.json beside the weights (Hugging Face's save_pretrained): heads, dilation, id2label.
 * Read through pgd_file_read (a FIFO there cannot hang the run); a key that is there with a
 * wrong type or value is an error naming the file and the key, never a default taken silently.
 * The command line's values go over it. */
static int read_config(run *r, detr_options *dopt)
{
    json_t *cfg = NULL;
    int rc = app_side_json(r->o.weights, "config.json", r->config, sizeof r->config, &cfg);
    if (rc || !cfg) {
        r->config[0] = 0;
        return rc;
    }
    static const char *const keys[2] = {"encoder_attention_heads", "decoder_attention_heads"};
    int *heads[2] = {&dopt->enc_heads, &dopt->dec_heads};
    const char *bad = NULL, *rule = NULL;
    for (int i = 0; i < 2 && !bad; i++) {
        json_t *v = json_object_get(cfg, keys[i]);
        if (v && (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 4096))
            bad = keys[i], rule = "a whole number from 1 to 4096";
        else if (v)
            *heads[i] = (int)json_integer_value(v);
    }
    json_t *v = json_object_get(cfg, "dilation");
    if (!bad && v && !json_is_boolean(v))
        bad = "dilation", rule = "true or false";
    else if (v)
        dopt->dc5 = json_is_true(v) ? 1 : -1;
    v = json_object_get(cfg, "id2label");
    if (!bad && v && !id2label_ok(v))
        bad = "id2label", rule = "an object of class ids (\"0\", \"1\", ...) to names";
    else if (v && !bad)
        r->id2label = json_incref(v);
    json_decref(cfg);
    if (!bad)
        return EXIT_OK;
    char shown[1024];
    fprintf(stderr, "pagoda: error: %s: '%s' must be %s\n",
            app_term_text(r->config, shown, sizeof shown), bad, rule);
    return EXIT_RUNTIME;
}

/* What the checkpoint, config.json and the options leave open, said on stderr. */
static void note_assumed(run *r)
{
    if (!r->random && !r->labels.count && !r->id2label && r->cfg.classes == 92)
        model_assume(&r->cfg.assumed, "labels", "\"coco\"",
                     "--labels FILE, or id2label in config.json");
    app_note_assumed(r->o.weights ? r->o.weights : "random weights", &r->cfg.assumed);
}

static int open_model(run *r)
{
    char buf[4096];
    pgd_error *err = NULL;
    int rc = app_weights_or_default(&r->o.weights, "detr-resnet-50.safetensors", buf, sizeof buf);
    if (rc)
        return rc;
    detr_options dopt = {0, 0, 0, {NULL, NULL}};
    if (r->o.weights) {
        if (pgd_weights_open(r->o.weights, &r->wf, &err))
            return app_fail(err);
        model_weights_source(&r->src, r->wf, r->o.weights);
        if ((rc = read_config(r, &dopt)))
            return rc;
    } else {
        if (detr_random_source(&r->src, 50, 1, &err))
            return app_fail(err);
        r->random = 1;
        fprintf(stderr, "pagoda: note: no DETR weights (--weights, or detr-resnet-50.safetensors "
                        "in the weights directory): seeded random weights (DETR-R50), the "
                        "detections mean nothing\n");
        app_note_real_weights("detect", "facebook/detr-resnet-50");
    }
    dopt.origin[0] = dopt.enc_heads ? r->config : NULL;
    dopt.origin[1] = dopt.dec_heads ? r->config : NULL;
    for (int i = 0; i < 2; i++)
        if (r->o.heads[i]) {
            *(i ? &dopt.dec_heads : &dopt.enc_heads) = r->o.heads[i];
            dopt.origin[i] = "--heads";
        }
    dopt.dc5 = r->o.dilation ? r->o.dilation : dopt.dc5;
    if (r->o.labels && app_labels_load(r->o.labels, &r->labels))
        return EXIT_RUNTIME;
    if (detr_detect(&r->src, &dopt, &r->cfg, &err) ||
        detr_load(r->ctx, &r->src, &r->cfg, &r->m, &err))
        return app_fail(err);
    note_assumed(r);
    return EXIT_OK;
}

static const char *label_of(const run *r, int id, char *buf, size_t size)
{
    char key[32];
    snprintf(key, sizeof key, "%d", id);
    if (id >= 0 && id < r->labels.count)
        return r->labels.names[id];
    json_t *v = r->id2label ? json_object_get(r->id2label, key) : NULL;
    if (v && json_is_string(v))
        return json_string_value(v);
    if (r->cfg.classes == 92 && detr_coco_label(id))
        return detr_coco_label(id);
    snprintf(buf, size, "class %d", id);
    return buf;
}

/* ---- preprocessing ------------------------------------------------------------------------ */

/* DetrImageProcessor's size: shorter side 800 unless the longer would pass 1333
 * (get_size_with_aspect_ratio of transformers). -1 when the shorter side would be under one
 * pixel (an aspect ratio past 2666:1), which transformers cannot resize either. */
static int target_size(int h, int w, int *oh, int *ow)
{
    double size = 800, max_size = 1333, raw = -1;
    double mn = h < w ? h : w, mx = h < w ? w : h;
    if (mx / mn * size > max_size) {
        raw = max_size * mn / mx;
        size = (double)(int)lround(raw);
    }
    int s = (int)size;
    if (s < 1)
        return -1;
    if ((h <= w && h == s) || (w <= h && w == s)) {
        *oh = h, *ow = w;
    } else if (w < h) {
        *ow = s;
        *oh = (int)((raw >= 0 ? raw : size) * h / w);
    } else {
        *oh = s;
        *ow = (int)((raw >= 0 ? raw : size) * w / h);
    }
    return 0;
}

/* Triangle-filter weights (bilinear, widened when shrinking: antialiased, as PIL resizes) from
 * n_in samples to n_out: for each output, its first input and `taps` normalised weights. */
typedef struct filt {
    int taps;
    int *first;
    float *w;
} filt;

static int filt_make(int n_in, int n_out, filt *f)
{
    double scale = (double)n_in / n_out, support = scale > 1 ? scale : 1;
    f->taps = (int)ceil(support) * 2 + 1;
    f->first = malloc((size_t)n_out * sizeof *f->first);
    f->w = calloc((size_t)n_out * f->taps, sizeof *f->w);
    if (!f->first || !f->w)
        return -1;
    for (int i = 0; i < n_out; i++) {
        double c = (i + 0.5) * scale;
        int lo = (int)floor(c - support), hi = (int)ceil(c + support);
        lo = lo < 0 ? 0 : lo;
        hi = hi > n_in ? n_in : hi;
        if (hi - lo > f->taps)
            hi = lo + f->taps;
        double sum = 0;
        float *w = f->w + (size_t)i * f->taps;
        for (int j = lo; j < hi; j++) {
            double t = 1 - fabs((j + 0.5 - c) / support);
            w[j - lo] = t > 0 ? (float)t : 0.0f;
            sum += w[j - lo];
        }
        for (int j = lo; j < hi && sum > 0; j++)
            w[j - lo] = (float)(w[j - lo] / sum);
        f->first[i] = lo;
    }
    return 0;
}

static void filt_free(filt *f)
{
    free(f->first);
    free(f->w);
}

/* The image resized to rw x rh, ImageNet-normalised, into the padded batch slot x [3, H, W]. */
static int preprocess(const pgd_image *img, int rw, int rh, int H, int W, float *x)
{
    static const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    int w = pgd_image_get_width(img), h = pgd_image_get_height(img);
    const uint8_t *px = pgd_image_get_data(img);
    filt fx = {0}, fy = {0};
    float *tmp = malloc((size_t)h * rw * 3 * sizeof *tmp);
    int rc = tmp && !filt_make(w, rw, &fx) && !filt_make(h, rh, &fy) ? 0 : -1;
    for (int y = 0; !rc && y < h; y++)
        for (int i = 0; i < rw; i++) {
            float acc[3] = {0, 0, 0};
            const float *wt = fx.w + (size_t)i * fx.taps;
            for (int k = 0; k < fx.taps && fx.first[i] + k < w; k++) {
                const uint8_t *p = px + ((size_t)y * w + fx.first[i] + k) * 3;
                for (int c = 0; c < 3; c++)
                    acc[c] += wt[k] * p[c];
            }
            for (int c = 0; c < 3; c++)
                tmp[((size_t)y * rw + i) * 3 + c] = acc[c];
        }
    for (int j = 0; !rc && j < rh; j++)
        for (int i = 0; i < rw; i++) {
            float acc[3] = {0, 0, 0};
            const float *wt = fy.w + (size_t)j * fy.taps;
            for (int k = 0; k < fy.taps && fy.first[j] + k < h; k++) {
                const float *p = tmp + ((size_t)(fy.first[j] + k) * rw + i) * 3;
                for (int c = 0; c < 3; c++)
                    acc[c] += wt[k] * p[c];
            }
            for (int c = 0; c < 3; c++)
                x[((size_t)c * H + j) * W + i] = (acc[c] / 255.0f - mean[c]) / std[c];
        }
    free(tmp);
    filt_free(&fx);
    filt_free(&fy);
    return rc;
}

static int load_images(run *r)
{
    pgd_error *err = NULL;
    r->B = r->o.nimages;
    r->items = calloc((size_t)r->B, sizeof *r->items);
    if (!r->items) {
        fprintf(stderr, "pagoda: error: out of host memory\n");
        return EXIT_RUNTIME;
    }
    for (int b = 0; b < r->B; b++) {
        item *it = &r->items[b];
        it->name = r->o.images[b];
        if (pgd_image_load(it->name, &it->img, &err))
            return app_fail(err);
        it->w = pgd_image_get_width(it->img), it->h = pgd_image_get_height(it->img);
        if (target_size(it->h, it->w, &it->rh, &it->rw)) {
            char shown[1024];
            fprintf(stderr,
                    "pagoda: error: %s: %d x %d is too narrow: resized to a longer side "
                    "of at most 1333, its shorter side would be under one pixel\n",
                    app_term_text(it->name, shown, sizeof shown), it->w, it->h);
            return EXIT_USAGE;
        }
        r->H = it->rh > r->H ? it->rh : r->H;
        r->W = it->rw > r->W ? it->rw : r->W;
    }
    size_t plane = (size_t)r->H * r->W;
    r->x = calloc((size_t)r->B * 3 * plane, sizeof *r->x);
    r->mask = calloc((size_t)r->B * plane, sizeof *r->mask);
    if (!r->x || !r->mask) {
        fprintf(stderr, "pagoda: error: out of host memory for a %d x 3 x %d x %d batch\n", r->B,
                r->H, r->W);
        return EXIT_RUNTIME;
    }
    for (int b = 0; b < r->B; b++) {
        item *it = &r->items[b];
        if (preprocess(it->img, it->rw, it->rh, r->H, r->W, r->x + (size_t)b * 3 * plane)) {
            fprintf(stderr, "pagoda: error: out of host memory resizing an image\n");
            return EXIT_RUNTIME;
        }
        for (int y = 0; y < it->rh; y++)
            for (int i = 0; i < it->rw; i++)
                r->mask[(size_t)b * plane + (size_t)y * r->W + i] = 1.0f;
    }
    return EXIT_OK;
}

/* A .npy of integers (uint8, bool, int32, int64) as floats; float files go to pgd_npy_read. */
static int read_mask(const char *path, float **out, int *ndim, int64_t shape[PGD_MAX_DIMS],
                     pgd_error **err)
{
    void *data = NULL;
    size_t size = 0;
    int rc = pgd_file_read(path, PGD_NPY_MAX_BYTES, &data, &size, err);
    if (rc)
        return rc;
    const unsigned char *p = data;
    size_t hl = 0, off = 0;
    if (size >= 10 && !memcmp(p, "\x93NUMPY", 6) && p[6] == 1)
        hl = p[8] | (size_t)p[9] << 8, off = 10;
    else if (size >= 12 && !memcmp(p, "\x93NUMPY", 6) && (p[6] == 2 || p[6] == 3))
        hl = p[8] | (size_t)p[9] << 8 | (size_t)p[10] << 16 | (size_t)p[11] << 24, off = 12;
    char head[10001] = {0};
    if (!off || hl > 10000 || off + hl > size) {
        pgd_free(data);
        return pgd_error_set(err, PGD_ERR_FORMAT, "%s: not a .npy file", path);
    }
    memcpy(head, p + off, hl);
    const char *d = strstr(head, "'descr': '");
    int esize = 0, sign = 0;
    if (d && (!strncmp(d + 10, "|u1'", 4) || !strncmp(d + 10, "|b1'", 4)))
        esize = 1;
    else if (d && !strncmp(d + 10, "<i4'", 4))
        esize = 4, sign = 1;
    else if (d && !strncmp(d + 10, "<i8'", 4))
        esize = 8, sign = 1;
    if (!esize) {
        pgd_free(data);
        return pgd_npy_read(path, out, ndim, shape, err); /* float32/64, or its error */
    }
    const char *s = strstr(head, "'shape': (");
    if (!strstr(head, "'fortran_order': False") || !s) {
        pgd_free(data);
        return pgd_error_set(err, PGD_ERR_FORMAT, "%s: expected a C-order array", path);
    }
    s += 10;
    *ndim = 0;
    uint64_t n = 1;
    while (*s && *s != ')' && *ndim < PGD_MAX_DIMS) {
        char *end;
        long long v = strtoll(s, &end, 10);
        if (end == s || v < 0 || v > (1LL << 31))
            break;
        shape[(*ndim)++] = v;
        n *= (uint64_t)v;
        s = end;
        while (*s == ',' || *s == ' ')
            s++;
    }
    if (*s != ')' || off + hl + n * (uint64_t)esize > size) {
        pgd_free(data);
        return pgd_error_set(err, PGD_ERR_FORMAT, "%s: bad shape or truncated data", path);
    }
    *out = malloc((size_t)n * sizeof **out + 1);
    if (!*out) {
        pgd_free(data);
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s", path);
    }
    const unsigned char *q = p + off + hl;
    for (uint64_t i = 0; i < n; i++) {
        long long v = 0;
        if (esize == 1)
            v = q[i];
        else if (esize == 4) {
            int32_t t;
            memcpy(&t, q + i * 4, 4);
            v = t;
        } else {
            int64_t t;
            memcpy(&t, q + i * 8, 8);
            v = t;
        }
        (void)sign;
        (*out)[i] = v != 0 ? 1.0f : 0.0f;
    }
    pgd_free(data);
    return PGD_OK;
}

/* A NaN or an infinity in --input is refused as classify refuses it (DETR would report "0
 * objects" for it), unless --allow-nonfinite. */
static int check_input(const run *r)
{
    pgd_error *err = NULL;
    if (r->o.allow_nonfinite ||
        !app_check_finite_batch(r->x, r->B, r->H, r->W, NULL, r->o.input, NULL, &err))
        return 0;
    app_fail(err);
    return -1;
}

static int load_input(run *r)
{
    pgd_error *err = NULL;
    int nd = 0;
    int64_t s[PGD_MAX_DIMS];
    if (pgd_npy_read(r->o.input, &r->x, &nd, s, &err))
        return app_fail(err);
    r->x_npy = 1;
    if (nd != 4 || s[1] != 3 || s[0] < 1 || s[2] < 32 || s[3] < 32 || s[2] > 8192 || s[3] > 8192 ||
        s[0] > 256) {
        fprintf(stderr,
                "pagoda: error: %s: expected a batch [B, 3, H, W] (B 1..256, H and W "
                "32..8192)\n",
                r->o.input);
        return EXIT_USAGE;
    }
    r->B = (int)s[0], r->H = (int)s[2], r->W = (int)s[3];
    size_t plane = (size_t)r->H * r->W;
    if (check_input(r))
        return EXIT_RUNTIME;
    if (r->o.mask) {
        int64_t ms[PGD_MAX_DIMS];
        if (read_mask(r->o.mask, &r->mask, &nd, ms, &err))
            return app_fail(err);
        if (nd != 3 || ms[0] != r->B || ms[1] != r->H || ms[2] != r->W) {
            fprintf(stderr, "pagoda: error: %s: expected a pixel mask [%d, %d, %d]\n", r->o.mask,
                    r->B, r->H, r->W);
            return EXIT_USAGE;
        }
    } else {
        r->mask = malloc((size_t)r->B * plane * sizeof *r->mask);
        if (!r->mask)
            return EXIT_RUNTIME;
        for (size_t i = 0; i < (size_t)r->B * plane; i++)
            r->mask[i] = 1.0f;
    }
    r->items = calloc((size_t)r->B, sizeof *r->items);
    if (!r->items)
        return EXIT_RUNTIME;
    for (int b = 0; b < r->B; b++) {
        item *it = &r->items[b];
        it->name = r->o.input;
        for (int y = 0; y < r->H; y++)
            for (int i = 0; i < r->W; i++)
                if (r->mask[(size_t)b * plane + (size_t)y * r->W + i] != 0.0f) {
                    it->h = y + 1 > it->h ? y + 1 : it->h;
                    it->w = i + 1 > it->w ? i + 1 : it->w;
                }
        if (!it->w) {
            fprintf(stderr, "pagoda: error: %s: image %d has no real pixel\n", r->o.mask, b);
            return EXIT_USAGE;
        }
        it->rw = it->w, it->rh = it->h;
    }
    return EXIT_OK;
}

/* ---- drawing ------------------------------------------------------------------------------ */

static void fill_rect(uint8_t *px, int w, int h, int x0, int y0, int x1, int y1, const uint8_t c[3])
{
    x0 = x0 < 0 ? 0 : x0, y0 = y0 < 0 ? 0 : y0;
    x1 = x1 > w ? w : x1, y1 = y1 > h ? h : y1;
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++)
            memcpy(px + ((size_t)y * w + x) * 3, c, 3);
}

/* Text at (x, y) scaled s times, with stb_easy_font's quads (axis-aligned rectangles). */
static void draw_text(uint8_t *px, int w, int h, int x, int y, int s, const char *text,
                      const uint8_t c[3])
{
    static char quads[64 * 1024];
    int n = stb_easy_font_print(0, 0, (char *)text, NULL, quads, sizeof quads);
    for (int q = 0; q < n; q++) {
        const float *v =
            (const float *)(quads + q * 64); /* 4 vertices of 16 bytes: x, y, z, rgba */
        float qx0 = v[0], qy0 = v[1], qx1 = v[8], qy1 = v[9];
        fill_rect(px, w, h, x + (int)(qx0 * s), y + (int)(qy0 * s), x + (int)(qx1 * s),
                  y + (int)(qy1 * s), c);
    }
}

static const uint8_t palette[6][3] = {{230, 25, 75}, {60, 180, 75},  {255, 225, 25},
                                      {0, 130, 200}, {245, 130, 48}, {145, 30, 180}};

static int stage(run *r, const char *option, const char *path, pgd_outfile **f, pgd_error **err)
{
    return outset_stage(&r->out, option, path, NULL, f, err);
}

/* Every output named on the command line, checked and claimed before any work (outset.h): a
 * directory or a device as --draw, two options naming one file, are refused up front. The
 * attention maps' names hold the detected labels: their prefix is checked now, each name when
 * it is staged. */
static int claim_outputs(run *r)
{
    const opts *o = &r->o;
    int rc = EXIT_OK;
    if (o->save_logits)
        rc = outset_claim(&r->out, "--save-logits", o->save_logits);
    if (!rc && o->save_boxes)
        rc = outset_claim(&r->out, "--save-boxes", o->save_boxes);
    if (!rc)
        rc = outset_check_given("--draw", o->draw);
    if (!rc)
        rc = outset_check_given("--attention-maps", o->maps);
    for (int b = 0; !rc && o->draw && b < o->nimages; b++) {
        char *path = app_numbered_path(o->draw, "", b, o->nimages);
        rc = path ? outset_claim(&r->out, "--draw", path) : EXIT_RUNTIME;
        if (!path)
            fprintf(stderr, "pagoda: error: out of host memory\n");
        free(path);
    }
    return rc;
}

static int draw_boxes(run *r, const item *it, const detr_detection *d, int n, const char *path,
                      pgd_error **err)
{
    int w = it->w, h = it->h;
    uint8_t *px = malloc((size_t)w * h * 3);
    if (!px)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "%s", path);
    memcpy(px, pgd_image_get_data(it->img), (size_t)w * h * 3);
    int t = (w < h ? w : h) / 250 + 2, s = (w < h ? w : h) / 300 + 1;
    static const uint8_t white[3] = {255, 255, 255};
    for (int k = 0; k < n; k++) {
        const uint8_t *c = palette[d[k].label % 6];
        int x0 = (int)lroundf(d[k].box[0]), y0 = (int)lroundf(d[k].box[1]);
        int x1 = (int)lroundf(d[k].box[2]), y1 = (int)lroundf(d[k].box[3]);
        fill_rect(px, w, h, x0, y0, x1, y0 + t, c);
        fill_rect(px, w, h, x0, y1 - t, x1, y1, c);
        fill_rect(px, w, h, x0, y0, x0 + t, y1, c);
        fill_rect(px, w, h, x1 - t, y0, x1, y1, c);
        char text[160], lb[32];
        snprintf(text, sizeof text, "%.60s %.2f", label_of(r, d[k].label, lb, sizeof lb),
                 (double)d[k].score);
        /* stb_easy_font draws printable ASCII only (it indexes its table by c - 32) */
        for (char *p = text; *p; p++)
            if ((unsigned char)*p < 32 || (unsigned char)*p > 126)
                *p = '?';
        int tw = stb_easy_font_width(text) * s, th = 12 * s;
        int ty = y0 - th < 0 ? (y0 < 0 ? 0 : y0) : y0 - th;
        int tx = x0 < 0 ? 0 : x0;
        fill_rect(px, w, h, tx, ty, tx + tw + 2 * s, ty + th, c);
        draw_text(px, w, h, tx + s, ty + 2 * s, s, text, white);
    }
    pgd_outfile *f = NULL;
    int rc = stage(r, "--draw", path, &f, err);
    if (!rc)
        rc = map_write_rgb_png_to(f, px, w, h, err);
    if (!rc)
        rc = pgd_outfile_close(f, err);
    free(px);
    return rc;
}

/* The cross-attention of each detection over its image: the map cropped to the feature cells
 * that hold the image (the rest is padding). */
static int draw_maps(run *r, int b, const detr_detection *d, int n, const float *cross,
                     pgd_error **err)
{
    const item *it = &r->items[b];
    int fh, fw;
    detr_feature_size(r->m, r->H, r->W, &fh, &fw);
    int vh = 0, vw = 0;
    for (int y = 0; y < fh; y++)
        vh += (int)floorf((float)y * ((float)r->H / (float)fh)) < it->rh;
    for (int x = 0; x < fw; x++)
        vw += (int)floorf((float)x * ((float)r->W / (float)fw)) < it->rw;
    float *map = malloc((size_t)fh * fw * sizeof *map);
    if (!map)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "attention maps");
    int rc = PGD_OK;
    for (int k = 0; k < n && !rc; k++) {
        const float *row = cross + ((size_t)b * r->cfg.queries + d[k].query) * fh * fw;
        for (int y = 0; y < vh; y++)
            memcpy(map + (size_t)y * vw, row + (size_t)y * fw, (size_t)vw * sizeof *map);
        char lb[32], path[4096];
        char label[64];
        snprintf(label, sizeof label, "%s", label_of(r, d[k].label, lb, sizeof lb));
        for (char *c = label; *c; c++)
            if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9')))
                *c = '_';
        if (r->B > 1)
            snprintf(path, sizeof path, "%s-%d-%d-%s.png", r->o.maps, b + 1, k + 1, label);
        else
            snprintf(path, sizeof path, "%s-%d-%s.png", r->o.maps, k + 1, label);
        pgd_outfile *f = NULL;
        double full[4] = {0, 0, it->w, it->h};
        rc = stage(r, "--attention-maps", path, &f, err);
        if (!rc)
            rc = map_write_png_view_to(f, it->img, map, vw, vh, full, err);
        if (!rc)
            rc = pgd_outfile_close(f, err);
    }
    free(map);
    return rc;
}

/* ---- the run ------------------------------------------------------------------------------ */

static json_t *detection_json(const run *r, const detr_detection *d)
{
    char lb[32];
    return json_pack("{s:o, s:i, s:f, s:[f, f, f, f], s:i}", "label",
                     app_json_text(label_of(r, d->label, lb, sizeof lb)), "id", d->label, "score",
                     (double)d->score, "box", (double)d->box[0], (double)d->box[1],
                     (double)d->box[2], (double)d->box[3], "query", d->query);
}

static json_t *model_json(const run *r)
{
    const detr_config *c = &r->cfg;
    return json_pack("{s:s, s:b, s:i, s:i, s:i, s:i, s:i, s:i, s:b}", "naming",
                     detr_naming_name(c->naming), "random", r->random, "queries", (int)c->queries,
                     "classes", (int)c->classes, "encoder_layers", c->enc_layers, "decoder_layers",
                     c->dec_layers, "encoder_heads", (int)c->enc_heads, "decoder_heads",
                     (int)c->dec_heads, "dilation", c->backbone.dc5);
}

static int report(run *r, const float *logits, const float *boxes, const float *cross,
                  const double *t)
{
    const detr_config *c = &r->cfg;
    pgd_error *err = NULL;
    detr_detection *d = malloc((size_t)c->queries * sizeof *d);
    json_t *doc = r->o.json ? json_object() : NULL, *imgs = r->o.json ? json_array() : NULL;
    if (!d || (r->o.json && (!doc || !imgs)))
        return EXIT_RUNTIME;
    int rc = PGD_OK;
    for (int b = 0; b < r->B && !rc; b++) {
        const item *it = &r->items[b];
        int n = detr_postprocess(logits + (size_t)b * c->queries * c->classes,
                                 boxes + (size_t)b * c->queries * 4, c->queries, c->classes,
                                 (float)r->o.threshold, it->w, it->h, d);
        for (int k = 0; k < n; k++) /* shown clipped; --save-boxes has them raw */
            detr_clip_box(d[k].box, it->w, it->h, d[k].box);
        char shown[1024], lb[32], lshown[256];
        if (r->o.json) {
            json_t *dets = json_array();
            for (int k = 0; k < n; k++)
                json_array_append_new(dets, detection_json(r, &d[k]));
            json_array_append_new(imgs, json_pack("{s:o, s:i, s:i, s:o}", "image",
                                                  app_json_text(it->name), "width", it->w, "height",
                                                  it->h, "detections", dets));
        } else {
            printf("%s (%d x %d): %d object%s above %.2f\n",
                   app_term_text(it->name, shown, sizeof shown), it->w, it->h, n, n == 1 ? "" : "s",
                   r->o.threshold);
            for (int k = 0; k < n; k++)
                printf("  %-16s %.3f  [%.1f, %.1f, %.1f, %.1f]\n",
                       app_term_text(label_of(r, d[k].label, lb, sizeof lb), lshown, sizeof lshown),
                       (double)d[k].score, (double)d[k].box[0], (double)d[k].box[1],
                       (double)d[k].box[2], (double)d[k].box[3]);
        }
        if (r->o.draw) {
            char *path = app_numbered_path(r->o.draw, "", b, r->B);
            rc = path ? draw_boxes(r, it, d, n, path, &err)
                      : pgd_error_set(&err, PGD_ERR_OUT_OF_HOST_MEMORY, "--draw");
            free(path);
        }
        if (!rc && r->o.maps)
            rc = draw_maps(r, b, d, n, cross, &err);
    }
    free(d);
    if (r->o.json) {
        json_object_set_new(doc, "model", model_json(r));
        json_object_set_new(doc, "assumed", app_assumed_json(&c->assumed));
        json_object_set_new(doc, "threshold", json_real(r->o.threshold));
        json_object_set_new(doc, "input", json_pack("[i, i, i, i]", r->B, 3, r->H, r->W));
        json_object_set_new(doc, "times_ms",
                            json_pack("{s:f, s:f, s:f, s:f}", "backbone", t[0], "encoder", t[1],
                                      "decoder", t[2], "total", t[3]));
        json_object_set_new(doc, "images", imgs);
    }
    if (rc) {
        json_decref(doc);
        return app_fail(err);
    }
    if (!r->o.json)
        printf("time: %.1f ms (backbone %.1f, encoder %.1f, decoder %.1f) for %d x 3 x %d x %d\n",
               t[3], t[0], t[1], t[2], r->B, r->H, r->W);
    return r->o.json ? app_print_json(doc) : EXIT_OK;
}

static int save_npy(run *r, const char *option, const char *path, const float *data, int64_t last)
{
    pgd_error *err = NULL;
    pgd_outfile *f = NULL;
    int64_t s[3] = {r->B, r->cfg.queries, last};
    if (stage(r, option, path, &f, &err) || pgd_npy_write_to(f, data, 3, s, &err) ||
        pgd_outfile_close(f, &err))
        return app_fail(err);
    return EXIT_OK;
}

/* A NaN or an infinity in the outputs (x: [B, queries, last]) is refused as classify refuses
 * it, unless --allow-nonfinite: no detection can be read from them (a NaN score passes no
 * threshold, and the run would say "0 objects"). */
static int refuse_nonfinite(const run *r, const float *x, int64_t n, int64_t last, const char *what)
{
    int64_t bad = r->o.allow_nonfinite ? -1 : model_first_nonfinite(x, n);
    if (bad < 0)
        return EXIT_OK;
    int64_t per = r->cfg.queries * last;
    char shown[1024];
    fprintf(stderr,
            "pagoda: error: %s: the %s are not finite (%g at query %lld, index %lld of "
            "image %lld) (--allow-nonfinite reports them anyway)\n",
            app_term_text(r->items[bad / per].name, shown, sizeof shown), what,
            isnan(x[bad]) ? (double)NAN : (double)x[bad], (long long)(bad % per / last),
            (long long)(bad % last), (long long)(bad / per));
    return EXIT_RUNTIME;
}

static int detect(run *r)
{
    const detr_config *c = &r->cfg;
    size_t nl = (size_t)r->B * c->queries * c->classes, nb = (size_t)r->B * c->queries * 4;
    int fh, fw;
    detr_feature_size(r->m, r->H, r->W, &fh, &fw);
    size_t nc = r->o.maps ? (size_t)r->B * c->queries * fh * fw : 0;
    float *logits = malloc(nl * sizeof *logits), *boxes = malloc(nb * sizeof *boxes);
    float *cross = nc ? malloc(nc * sizeof *cross) : NULL;
    int rc = EXIT_OK;
    if (!logits || !boxes || (nc && !cross)) {
        fprintf(stderr, "pagoda: error: out of host memory for the outputs\n");
        rc = EXIT_RUNTIME;
    }
    pgd_error *err = NULL;
    double t[4] = {0};
    detr_output out = {logits, boxes, cross};
    if (!rc && detr_forward(r->m, r->x, r->mask, r->B, r->H, r->W, &out, t, &err))
        rc = app_fail(err);
    if (!rc)
        rc = refuse_nonfinite(r, logits, (int64_t)nl, c->classes, "logits");
    if (!rc)
        rc = refuse_nonfinite(r, boxes, (int64_t)nb, 4, "boxes");
    if (!rc && r->o.save_logits)
        rc = save_npy(r, "--save-logits", r->o.save_logits, logits, c->classes);
    if (!rc && r->o.save_boxes)
        rc = save_npy(r, "--save-boxes", r->o.save_boxes, boxes, 4);
    if (!rc)
        rc = report(r, logits, boxes, cross, t);
    free(logits);
    free(boxes);
    free(cross);
    return rc;
}

static void run_free(run *r)
{
    for (int b = 0; r->items && b < r->B; b++)
        pgd_image_destroy(r->items[b].img);
    free(r->items);
    if (r->x_npy)
        pgd_free(r->x);
    else
        free(r->x);
    free(r->mask);
    outset_free(&r->out); /* a run that did not commit leaves no output */
    detr_free(r->m);
    model_source_free(&r->src);
    pgd_weights_destroy(r->wf);
    json_decref(r->id2label);
    app_labels_free(&r->labels);
    pgd_ctx_destroy(r->ctx);
}

int cmd_detect(int argc, char **argv)
{
    run r;
    memset(&r, 0, sizeof r);
    int rc = parse(argc, argv, &r.o);
    if (rc)
        return rc < 0 ? EXIT_OK : rc;
    rc = claim_outputs(&r);
    if (!rc)
        rc = r.o.input ? load_input(&r) : load_images(&r);
    if (!rc)
        rc = app_ctx_open(r.o.device, &r.ctx);
    if (!rc)
        rc = open_model(&r);
    if (!rc)
        rc = detect(&r);
    if (!rc)
        rc = outset_commit(&r.out, 1);
    run_free(&r);
    return rc;
}
