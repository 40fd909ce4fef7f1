/* serve_run.c — the runner of `pagoda serve` (serve.h): one decoded image through one model,
 * into the JSON the page draws. Maps go out as small grids of bytes (each map scaled to 0..255
 * on its own), which the page colours and lays over the image itself, inside `view` (the part
 * of the image the model saw: the centre crop of its preprocessing). Called one at a time
 * (serve_http.c holds the run lock): the context is used from one thread. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "detr.h"
#include "model.h"
#include "serve.h"

enum { SIDE = PGD_PREPROCESS_SIZE, TOPK = 5 };

/* Non-finite values count as 0. */
json_t *serve_map_json(const float *map, int w, int h)
{
    float lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < w * h; i++)
        if (isfinite(map[i])) {
            lo = fminf(lo, map[i]);
            hi = fmaxf(hi, map[i]);
        }
    json_t *data = json_array();
    for (int i = 0; i < w * h; i++) {
        float t = isfinite(map[i]) && hi > lo ? (map[i] - lo) / (hi - lo) : 0.0f;
        json_array_append_new(data, json_integer(lrintf(t * 255.0f)));
    }
    return json_pack("{s:i,s:i,s:o}", "w", w, "h", h, "data", data);
}

static json_t *view_json(const double r[4])
{
    return json_pack("[f,f,f,f]", r[0], r[1], r[2], r[3]);
}

/* The top classes by softmax probability. -1 when the logits are not finite. */
static int top_json(const float *logits, int classes, json_t *doc)
{
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < classes; i++) {
        if (!isfinite(logits[i]))
            return -1;
        mx = fmax(mx, logits[i]);
    }
    for (int i = 0; i < classes; i++)
        sum += exp(logits[i] - mx);
    int best[TOPK], n = classes < TOPK ? classes : TOPK;
    for (int k = 0; k < n; k++) {
        best[k] = -1;
        for (int i = 0; i < classes; i++) {
            int used = 0;
            for (int j = 0; j < k; j++)
                used |= best[j] == i;
            if (!used && (best[k] < 0 || logits[i] > logits[best[k]]))
                best[k] = i;
        }
    }
    json_t *top = json_array();
    for (int k = 0; k < n; k++) {
        const char *name = classes == 1000 ? pgd_model_imagenet_label(best[k]) : NULL;
        char buf[32];
        snprintf(buf, sizeof buf, "class %d", best[k]);
        json_array_append_new(top,
                              json_pack("{s:i,s:s,s:f}", "index", best[k], "label",
                                        name ? name : buf, "p", exp(logits[best[k]] - mx) / sum));
    }
    json_object_set_new(doc, "top", top);
    return 0;
}

static int fail(pgd_error *err, char *msg, size_t size, int status)
{
    snprintf(msg, size, "%s", err ? pgd_error_get_message(err) : "out of host memory");
    pgd_error_destroy(err);
    return status;
}

/* The task's forward pass of a classifier, its maps into doc. */
static int classifier_pass(pgd_model *pm, const serve_job *job, const float *x, int H, int W,
                           float *logits, json_t *doc, pgd_error **err)
{
    pgd_model_info info;
    pgd_model_get_info(pm, &info);
    int gh = SIDE / (info.patch > 0 ? info.patch : 1), gw = gh, qi = 0, qj = 0, rc;
    if (job->task == SERVE_CLASSIFY)
        return pgd_model_forward(pm, x, 1, H, W, logits, NULL, err);
    if (job->task == SERVE_AFFINITY && !pgd_model_affinity_grid(pm, SIDE, SIDE, &gh, &gw))
        return pgd_error_set(err, PGD_ERR_UNSUPPORTED, "the model has no non-local block");
    float *a = malloc(sizeof *a * (size_t)gh * gw * 2);
    if (!a)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "maps of %d x %d", gw, gh);
    if (job->task == SERVE_MAPS) {
        rc = pgd_model_attention_maps(pm, x, 1, SIDE, SIDE, logits, a, a + gh * gw, err);
        if (!rc) {
            json_object_set_new(doc, "attention", serve_map_json(a, gw, gh));
            json_object_set_new(doc, "rollout", serve_map_json(a + gh * gw, gw, gh));
        }
    } else {
        rc = pgd_model_affinity(pm, x, 1, SIDE, SIDE, job->qx, job->qy, logits, a, &qi, &qj, err);
        json_t *m = rc ? NULL : serve_map_json(a, gw, gh);
        if (m) {
            json_object_set_new(m, "query", json_pack("[i,i]", qj, qi));
            json_object_set_new(doc, "affinity", m);
        }
    }
    free(a);
    return rc;
}

/* x [3, SIDE, SIDE] resampled (bilinear, pixel centres aligned) to [3, H, W] in place: x holds
 * 3 * max(SIDE^2, H * W) floats. For models that take only their own size (an MLP-Mixer, an
 * ONNX model of a fixed input) when it is not SIDE. */
static void resample(float *x, int H, int W)
{
    float *src = malloc(sizeof *src * 3 * SIDE * SIDE);
    if (!src)
        return;
    memcpy(src, x, sizeof *src * 3 * SIDE * SIDE);
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < H; y++) {
            double fy = fmin(fmax((y + 0.5) * SIDE / H - 0.5, 0), SIDE - 1);
            int y0 = (int)fy, y1 = y0 + 1 < SIDE ? y0 + 1 : y0;
            for (int i = 0; i < W; i++) {
                double fx = fmin(fmax((i + 0.5) * SIDE / W - 0.5, 0), SIDE - 1);
                int x0 = (int)fx, x1 = x0 + 1 < SIDE ? x0 + 1 : x0;
                const float *p = src + (size_t)c * SIDE * SIDE;
                double ay = fy - y0, ax = fx - x0;
                x[((size_t)c * H + y) * W + i] =
                    (float)((1 - ay) * ((1 - ax) * p[y0 * SIDE + x0] + ax * p[y0 * SIDE + x1]) +
                            ay * ((1 - ax) * p[y1 * SIDE + x0] + ax * p[y1 * SIDE + x1]));
            }
        }
    free(src);
}

static int run_classifier(pgd_model *pm, const serve_job *job, json_t *doc, char *msg, size_t size)
{
    pgd_model_info info;
    pgd_model_get_info(pm, &info);
    pgd_error *err = NULL;
    double rect[4];
    /* an MLP-Mixer or a fixed-size ONNX model runs at its own size, the rest at SIDE */
    int fixed = info.family == PGD_MODEL_MIXER || info.family == PGD_MODEL_ONNX;
    int H = fixed ? info.input_h : SIDE, W = fixed ? info.input_w : SIDE;
    size_t n = (size_t)3 * (H * W > SIDE * SIDE ? H * W : SIDE * SIDE);
    float *x = malloc(sizeof *x * n), *logits = malloc(sizeof *logits * info.classes);
    if (!x || !logits) {
        free(x), free(logits);
        return fail(NULL, msg, size, 503);
    }
    double t0 = model_now_ms();
    int rc = pgd_image_preprocess(job->img, info.preprocess, x, &err);
    if (!rc)
        rc = pgd_image_preprocess_view(job->img, info.preprocess, rect);
    if (!rc && (H != SIDE || W != SIDE))
        resample(x, H, W);
    double t1 = model_now_ms();
    if (!rc)
        rc = classifier_pass(pm, job, x, H, W, logits, doc, &err);
    double t2 = model_now_ms();
    int status = rc ? fail(err, msg, size, rc == PGD_ERR_OUT_OF_HOST_MEMORY ? 503 : 500) : 0;
    if (!status && top_json(logits, info.classes, doc))
        status = 500, snprintf(msg, size, "the model's output holds NaN or infinity");
    if (!status) {
        json_object_set_new(doc, "view", view_json(rect));
        json_object_set_new(doc, "timings",
                            json_pack("{s:f,s:f}", "preprocess", t1 - t0, "forward", t2 - t1));
    }
    free(x);
    free(logits);
    return status;
}

/* DetrImageProcessor's steps at a smaller size: the shorter side to `side` (the longer at
 * most side * 1333 / 800), bilinear, ImageNet mean and std; x [3, H, W]. */
static float *detr_input(const pgd_image *img, int side, int *H, int *W)
{
    static const float mean[3] = {0.485f, 0.456f, 0.406f}, sd[3] = {0.229f, 0.224f, 0.225f};
    int w = pgd_image_get_width(img), h = pgd_image_get_height(img);
    double s = (double)side / (w < h ? w : h), lim = side * 1333.0 / 800.0;
    if ((w > h ? w : h) * s > lim)
        s = lim / (w > h ? w : h);
    *W = (int)lround(w * s), *H = (int)lround(h * s);
    *W = *W < 32 ? 32 : *W, *H = *H < 32 ? 32 : *H;
    float *x = malloc(sizeof *x * 3 * (size_t)*H * *W);
    const uint8_t *px = pgd_image_get_data(img);
    for (int y = 0; x && y < *H; y++) {
        double fy = fmin(fmax((y + 0.5) * h / *H - 0.5, 0), h - 1);
        int y0 = (int)fy, y1 = y0 + 1 < h ? y0 + 1 : y0;
        for (int i = 0; i < *W; i++) {
            double fx = fmin(fmax((i + 0.5) * w / *W - 0.5, 0), w - 1);
            int x0 = (int)fx, x1 = x0 + 1 < w ? x0 + 1 : x0;
            double ay = fy - y0, ax = fx - x0;
            for (int c = 0; c < 3; c++) {
                double v = (1 - ay) * ((1 - ax) * px[((size_t)y0 * w + x0) * 3 + c] +
                                       ax * px[((size_t)y0 * w + x1) * 3 + c]) +
                           ay * ((1 - ax) * px[((size_t)y1 * w + x0) * 3 + c] +
                                 ax * px[((size_t)y1 * w + x1) * 3 + c]);
                x[((size_t)c * *H + y) * *W + i] = ((float)(v / 255.0) - mean[c]) / sd[c];
            }
        }
    }
    return x;
}

/* The detections above the threshold, each with its cross-attention over the feature grid. */
static json_t *boxes_json(const serve_weights *w, const float *logits, const float *boxes,
                          const float *cross, int fh, int fw, const serve_job *job)
{
    const detr_config *c = detr_get_config(w->detr);
    detr_detection *d = malloc(sizeof *d * (size_t)c->queries);
    json_t *list = json_array();
    int iw = pgd_image_get_width(job->img), ih = pgd_image_get_height(job->img);
    int n = d ? detr_postprocess(logits, boxes, c->queries, c->classes, (float)job->threshold, iw,
                                 ih, d)
              : 0;
    for (int k = 0; k < n; k++) {
        float b[4];
        detr_clip_box(d[k].box, iw, ih, b);
        const char *name = c->classes == 92 ? detr_coco_label(d[k].label) : NULL;
        char buf[32];
        snprintf(buf, sizeof buf, "class %d", d[k].label);
        json_array_append_new(
            list, json_pack("{s:s,s:f,s:[f,f,f,f],s:o}", "label", name ? name : buf, "score",
                            d[k].score, "box", b[0], b[1], b[2], b[3], "attention",
                            serve_map_json(cross + (size_t)d[k].query * fh * fw, fw, fh)));
    }
    free(d);
    return list;
}

static int run_detr(serve_weights *w, const serve_job *job, json_t *doc, char *msg, size_t size)
{
    const detr_config *c = detr_get_config(w->detr);
    int H, W, fh, fw;
    double t0 = model_now_ms();
    float *x = detr_input(job->img, w->detr_side, &H, &W);
    double t1 = model_now_ms();
    detr_feature_size(w->detr, H, W, &fh, &fw);
    float *logits = malloc(sizeof *logits * (size_t)c->queries * c->classes);
    float *boxes = malloc(sizeof *boxes * (size_t)c->queries * 4);
    float *cross = malloc(sizeof *cross * (size_t)c->queries * fh * fw);
    pgd_error *err = NULL;
    int status = 0;
    if (!x || !logits || !boxes || !cross)
        status = fail(NULL, msg, size, 503);
    detr_output out = {logits, boxes, cross};
    if (!status && detr_forward(w->detr, x, NULL, 1, H, W, &out, NULL, &err))
        status = fail(err, msg, size, 500);
    double t2 = model_now_ms();
    if (!status && model_first_nonfinite(logits, c->queries * c->classes) >= 0)
        status = 500, snprintf(msg, size, "the model's output holds NaN or infinity");
    if (!status) {
        int iw = pgd_image_get_width(job->img), ih = pgd_image_get_height(job->img);
        json_object_set_new(doc, "boxes", boxes_json(w, logits, boxes, cross, fh, fw, job));
        json_object_set_new(doc, "view", json_pack("[i,i,i,i]", 0, 0, iw, ih));
        json_object_set_new(doc, "input", json_pack("[i,i]", W, H));
        json_object_set_new(doc, "threshold", json_real(job->threshold));
        json_object_set_new(doc, "timings",
                            json_pack("{s:f,s:f}", "preprocess", t1 - t0, "forward", t2 - t1));
    }
    free(x), free(logits), free(boxes), free(cross);
    return status;
}

int serve_run_job(void *u, const serve_job *job, json_t **out, char *msg, size_t size)
{
    serve_weights *w = job->model->handle[job->device];
    json_t *doc = json_object();
    if (!doc)
        return fail(NULL, msg, size, 503);
    int status = w->detr   ? run_detr(w, job, doc, msg, size)
                 : w->dino ? serve_dino_run(w, u, job, doc, msg, size)
                           : run_classifier(w->pm, job, doc, msg, size);
    if (status) {
        json_decref(doc);
        return status;
    }
    *out = doc;
    return 0;
}
