/* serve_http.c — the pure request handler of `pagoda serve` (serve.h): no socket, no file, no
 * clock but the decode's timer. Every path a request can take ends in a response with a
 * status; text from the request is shown only after serve_quote made it short printable ASCII
 * (so it cannot break the JSON or the HTML around it). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve.h"
#include "serve_assets.h"

void serve_limits_default(serve_limits *l)
{
    l->max_upload = 16u << 20;
    l->max_pixels = 6000LL * 6000LL;
    l->max_connections = 64;
    l->per_ip = 16;
    l->timeout_s = 20;
    l->rate = 4;
    l->burst = 16;
    l->queue = 8;
}

void serve_response_free(serve_response *res)
{
    if (res->owned)
        free(res->body);
    res->body = NULL;
    res->owned = 0;
}

/* Request text for a message: at most 64 bytes, every byte outside printable ASCII and the
 * characters HTML and JSON treat specially as '?'. */
static const char *serve_quote(const char *s, char *buf, size_t size)
{
    size_t n = 0;
    for (; s && *s && n + 1 < size && n < 64; s++)
        buf[n++] = (*s >= 0x20 && *s < 0x7f && !strchr("<>&\"'\\", *s)) ? *s : '?';
    if (s && *s && n + 4 < size)
        memcpy(buf + n, "...", 3), n += 3;
    buf[n] = 0;
    return buf;
}

static void set_owned(serve_response *res, int status, const char *type, char *body)
{
    res->status = status;
    res->content_type = type;
    res->body = body;
    res->size = body ? strlen(body) : 0;
    res->owned = body != NULL;
    if (!body) { /* out of memory: a fixed answer */
        res->status = 500;
        res->content_type = "text/plain; charset=utf-8";
        res->body = (char *)"pagoda serve: out of memory\n";
        res->size = strlen(res->body);
    }
}

static const char *reason(int status)
{
    switch (status) {
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 503: return "Service Unavailable";
    default: return status >= 500 ? "Internal Server Error" : "Error";
    }
}

static const char html_error[] =
    "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
    "<title>%d %s - pagoda serve</title><link rel=\"stylesheet\" href=\"/style.css\"></head>\n"
    "<body><main class=\"error-page\"><h1>%d %s</h1><p id=\"error\">%s</p>"
    "<p><a href=\"/\">Back to the page</a></p></main></body></html>\n";

void serve_error(serve_response *res, int json, int status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* request text comes quoted (serve_quote); the rest (a decoder's message) is made
     * printable ASCII here too: JSON takes only valid UTF-8, HTML no markup */
    for (char *p = msg; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f || strchr("<>&", *p))
            *p = '?';
    char *body = NULL;
    if (json) {
        json_t *doc = json_pack("{s:{s:i,s:s,s:s}}", "error", "status", status, "reason",
                                reason(status), "message", msg);
        body = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
        json_decref(doc);
    } else {
        size_t n = sizeof html_error + 2 * strlen(reason(status)) + strlen(msg) + 16;
        if ((body = malloc(n)))
            snprintf(body, n, html_error, status, reason(status), status, reason(status), msg);
    }
    set_owned(res, status, json ? "application/json" : "text/html; charset=utf-8", body);
}

static void send_json(serve_response *res, json_t *doc)
{
    char *body = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    set_owned(res, 200, "application/json", body);
}

serve_model *serve_model_find(serve_app *app, const char *name)
{
    for (int i = 0; name && i < app->nmodels; i++)
        if (!strcmp(app->models[i].name, name))
            return &app->models[i];
    return NULL;
}

static const char *const task_names[SERVE_NTASKS] = {"classify", "maps",  "affinity",
                                                     "detect",   "heads", "nearest"};

static json_t *tasks_json(int tasks)
{
    json_t *a = json_array();
    for (int i = 0; i < SERVE_NTASKS; i++)
        if (tasks & (1 << i))
            json_array_append_new(a, json_string(task_names[i]));
    return a;
}

static void api_models(serve_app *app, serve_response *res)
{
    json_t *list = json_array();
    int random = 0;
    for (int i = 0; i < app->nmodels; i++) {
        const serve_model *m = &app->models[i];
        random |= m->random;
        json_array_append_new(list, json_pack("{s:s,s:s,s:s,s:o,s:b,s:i}", "name", m->name,
                                              "family", m->family, "description", m->description,
                                              "tasks", tasks_json(m->tasks), "random", m->random,
                                              "classes", m->classes));
    }
    json_t *l =
        json_pack("{s:I,s:I,s:i}", "max_upload", (json_int_t)app->limits.max_upload, "max_pixels",
                  (json_int_t)app->limits.max_pixels, "timeout_s", (int)app->limits.timeout_s);
    json_t *gallery = json_array(), *devices = json_array();
    for (int i = 0; i < app->ngallery; i++)
        json_array_append_new(gallery, json_string(app->gallery[i].name));
    for (int i = 0; i < app->ndevices; i++)
        json_array_append_new(devices, json_string(app->device[i]));
    send_json(res, json_pack("{s:s,s:o,s:o,s:o,s:o,s:s}", "device", app->device[0], "devices",
                             devices, "models", list, "gallery", gallery, "limits", l,
                             "real_weights", random ? SERVE_REAL_WEIGHTS : ""));
}

/* The value of argument `key`, "" for a key without one; NULL when absent. A key given twice
 * is refused by check_args. */
static const char *arg(const serve_request *req, const char *key)
{
    for (int i = 0; i < req->nargs; i++)
        if (!strcmp(req->args[i].key, key))
            return req->args[i].value ? req->args[i].value : "";
    return NULL;
}

static int check_args(const serve_request *req, serve_response *res)
{
    static const char *const known[] = {"model", "task", "qx", "qy", "threshold", "device"};
    char q[80];
    if (req->nargs > SERVE_MAX_ARGS) {
        serve_error(res, 1, 400, "more than %d query arguments", SERVE_MAX_ARGS);
        return -1;
    }
    for (int i = 0; i < req->nargs; i++) {
        int ok = 0;
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            ok |= req->args[i].key && !strcmp(req->args[i].key, known[k]);
        if (!ok) {
            serve_error(res, 1, 400,
                        "unknown argument '%s' (model, task, qx, qy, threshold, device)",
                        serve_quote(req->args[i].key, q, sizeof q));
            return -1;
        }
        for (int j = 0; j < i; j++)
            if (!strcmp(req->args[j].key, req->args[i].key)) {
                serve_error(res, 1, 400, "argument '%s' given twice",
                            serve_quote(req->args[i].key, q, sizeof q));
                return -1;
            }
    }
    return 0;
}

/* A query coordinate or a threshold: a decimal in [0, 1) (absent: fallback). */
static int parse_unit(const char *s, double fallback, double *out)
{
    if (!s) {
        *out = fallback;
        return 0;
    }
    char *end;
    double v = strtod(s, &end);
    if (!*s || *end || !isfinite(v) || v < 0 || v >= 1)
        return -1;
    *out = v;
    return 0;
}

/* The job's model, task and query from the arguments; -1 with the error response set. */
static int parse_job(serve_app *app, const serve_request *req, serve_job *job, serve_response *res)
{
    char q[80];
    if (check_args(req, res))
        return -1;
    const char *name = arg(req, "model"), *task = arg(req, "task");
    if (!name || !*name) {
        serve_error(res, 1, 400, "no model: give ?model=NAME (GET /api/models lists them)");
        return -1;
    }
    if (!(job->model = serve_model_find(app, name))) {
        serve_error(res, 1, 404, "no model named '%s' (GET /api/models lists them)",
                    serve_quote(name, q, sizeof q));
        return -1;
    }
    job->task = 0;
    for (int i = 0; i < SERVE_NTASKS; i++)
        if (!strcmp(task ? task : "classify", task_names[i]))
            job->task = 1 << i;
    if (!job->task) {
        serve_error(res, 1, 400,
                    "unknown task '%s' (classify, maps, affinity, detect, heads, "
                    "nearest)",
                    serve_quote(task, q, sizeof q));
        return -1;
    }
    if (!(job->model->tasks & job->task)) {
        serve_error(res, 1, 400, "model '%s' does not do '%s'", job->model->name, task);
        return -1;
    }
    const char *dev = arg(req, "device");
    char *end = NULL;
    long d = dev ? strtol(dev, &end, 10) : 0;
    if (dev && (!*dev || *end || d < 0 || d >= app->ndevices)) {
        serve_error(res, 1, 400, "device is an index of GET /api/models' devices, 0..%d",
                    app->ndevices - 1);
        return -1;
    }
    job->device = (int)d;
    if (parse_unit(arg(req, "qx"), 0.5, &job->qx) || parse_unit(arg(req, "qy"), 0.5, &job->qy) ||
        parse_unit(arg(req, "threshold"), 0.7, &job->threshold)) {
        serve_error(res, 1, 400,
                    "qx, qy (fractions of the image) and threshold are decimals in "
                    "[0, 1)");
        return -1;
    }
    return 0;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* The upload decoded into *img; -1 with the error response set. */
static int decode(serve_app *app, const serve_request *req, pgd_image **img, serve_response *res)
{
    if (!req->body_size) {
        serve_error(res, 1, 400,
                    "no image: POST the image file (JPEG, PNG, WebP or BMP) as "
                    "the request body");
        return -1;
    }
    pgd_error *err = NULL;
    int rc = pgd_image_load_memory(req->body, req->body_size, "the upload", img, &err);
    if (rc) {
        int status = rc == PGD_ERR_UNSUPPORTED          ? 415
                     : rc == PGD_ERR_TOO_LARGE          ? 413
                     : rc == PGD_ERR_OUT_OF_HOST_MEMORY ? 503
                                                        : 422;
        serve_error(res, 1, status, "not an image Pagoda reads: %s",
                    err ? pgd_error_get_message(err) : "decode failed");
        pgd_error_destroy(err);
        return -1;
    }
    int64_t px = (int64_t)pgd_image_get_width(*img) * pgd_image_get_height(*img);
    if (px > app->limits.max_pixels) {
        serve_error(res, 1, 413,
                    "the image is %d x %d pixels; this server takes at most %lld "
                    "(--max-pixels)",
                    pgd_image_get_width(*img), pgd_image_get_height(*img),
                    (long long)app->limits.max_pixels);
        pgd_image_destroy(*img);
        *img = NULL;
        return -1;
    }
    return 0;
}

/* The upload decoded and run, one at a time on the device (decoding under the same lock bounds
 * the memory of decoded images to one); at most limits.queue waiting (else 503). */
static json_t *run_queued(serve_app *app, const serve_request *req, serve_job *job,
                          serve_response *res, pgd_image **img, double *decode_ms)
{
    pthread_mutex_lock(&app->lock);
    int busy = app->waiting >= app->limits.queue;
    if (!busy)
        app->waiting++;
    pthread_mutex_unlock(&app->lock);
    if (busy) {
        serve_error(res, 1, 503, "busy: %u runs are waiting for the device (--queue)",
                    app->limits.queue);
        res->retry_after = 2;
        return NULL;
    }
    static pthread_mutex_t run_lock = PTHREAD_MUTEX_INITIALIZER;
    char msg[400] = "";
    json_t *out = NULL;
    int status = -1;
    pthread_mutex_lock(&run_lock);
    double t0 = now_ms();
    if (!decode(app, req, img, res)) {
        *decode_ms = now_ms() - t0;
        job->img = *img;
        status = app->runner.run(app->runner.u, job, &out, msg, sizeof msg);
    }
    pthread_mutex_unlock(&run_lock);
    pthread_mutex_lock(&app->lock);
    app->waiting--;
    pthread_mutex_unlock(&app->lock);
    if (status < 0) /* the decode's error is in res */
        return NULL;
    if (status || !out) {
        json_decref(out);
        serve_error(res, 1, status ? status : 500, "%s", msg[0] ? msg : "the run failed");
        return NULL;
    }
    return out;
}

static void api_run(serve_app *app, const serve_request *req, serve_response *res)
{
    if (strcmp(req->method, "POST")) {
        serve_error(res, 1, 405, "POST the image to /api/run?model=NAME&task=TASK");
        res->allow = "POST";
        return;
    }
    if (req->body_too_large) {
        serve_error(res, 1, 413, "the upload is larger than %zu bytes (--max-upload)",
                    app->limits.max_upload);
        return;
    }
    serve_job job = {0};
    pgd_image *img = NULL;
    if (parse_job(app, req, &job, res))
        return;
    double decode_ms = 0;
    json_t *doc = run_queued(app, req, &job, res, &img, &decode_ms);
    if (doc) { /* what the handler knows, beside the runner's results */
        json_t *t = json_object_get(doc, "timings");
        if (json_is_object(t))
            json_object_set_new(t, "decode", json_real(decode_ms));
        json_object_set_new(doc, "model", json_string(job.model->name));
        json_object_set_new(doc, "task", json_string(task_names[__builtin_ctz(job.task)]));
        json_object_set_new(doc, "device", json_string(app->device[job.device]));
        json_object_set_new(doc, "image",
                            json_pack("{s:i,s:i}", "width", pgd_image_get_width(img), "height",
                                      pgd_image_get_height(img)));
        send_json(res, doc);
    }
    pgd_image_destroy(img);
}

/* GET /api/gallery?name=NAME: an image of --gallery, by its name in the list. */
static void api_gallery(serve_app *app, const serve_request *req, serve_response *res)
{
    char q[80];
    const char *name =
        req->nargs == 1 && !strcmp(req->args[0].key, "name") ? req->args[0].value : NULL;
    if (!name) {
        serve_error(res, 1, 400, "give ?name=NAME, one of the gallery's (GET /api/models)");
        return;
    }
    for (int i = 0; i < app->ngallery; i++)
        if (!strcmp(app->gallery[i].name, name)) {
            res->status = 200;
            res->content_type = app->gallery[i].type;
            res->body = app->gallery[i].data;
            res->size = app->gallery[i].size;
            return;
        }
    serve_error(res, 1, 404, "no gallery image named '%s'", serve_quote(name, q, sizeof q));
}

/* The embedded page: a URL path to its asset and type. */
static int static_file(const serve_request *req, serve_response *res)
{
    static const char *const map[][3] = {{"/", "index", "text/html; charset=utf-8"},
                                         {"/index.html", "index", "text/html; charset=utf-8"},
                                         {"/app.js", "app", "text/javascript; charset=utf-8"},
                                         {"/style.css", "style", "text/css; charset=utf-8"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        if (strcmp(req->path, map[i][0]))
            continue;
        for (const serve_asset *a = serve_static_files; a->name; a++)
            if (!strcmp(a->name, map[i][1])) {
                res->status = 200;
                res->content_type = map[i][2];
                res->body = (char *)a->text;
                res->size = strlen(a->text);
                return 1;
            }
    }
    return 0;
}

void serve_handle(serve_app *app, const serve_request *req, serve_response *res)
{
    memset(res, 0, sizeof *res);
    char q[80];
    const char *path = req->path ? req->path : "";
    int api = !strncmp(path, "/api/", 5);
    if (!req->method || !*req->method) {
        serve_error(res, api, 400, "no method");
        return;
    }
    if (!strcmp(path, "/api/run")) {
        api_run(app, req, res);
        return;
    }
    if (strcmp(req->method, "GET") && strcmp(req->method, "HEAD")) {
        serve_error(res, api, 405, "%s is not served here (GET, or POST to /api/run)",
                    serve_quote(req->method, q, sizeof q));
        res->allow = "GET, HEAD";
        return;
    }
    if (!strcmp(path, "/api/gallery")) {
        api_gallery(app, req, res);
        return;
    }
    if (api && check_args(req, res) == 0 && req->nargs) {
        serve_error(res, 1, 400, "%s takes no arguments", serve_quote(path, q, sizeof q));
        return;
    }
    if (res->status)
        return;
    if (!strcmp(path, "/api/models"))
        api_models(app, res);
    else if (!strcmp(path, "/api/health"))
        send_json(res, json_pack("{s:b}", "ok", 1));
    else if (!strcmp(path, "/favicon.ico"))
        res->status = 204;
    else if (!static_file(req, res))
        serve_error(res, api, 404, "nothing at '%s' (the page is at /, the API under /api/)",
                    serve_quote(path, q, sizeof q));
}
