/* fuzz_serve.c — libFuzzer target: `pagoda serve`'s pure request handler (apps/serve/
 * serve_http.c) on any request, with two stand-in models and a stub runner (no device). The
 * gallery holds one image, a.png. The input: a flags byte (bit 0: the body passed --max-upload),
 * then "METHOD PATH[?QUERY]\n", then the body (an image, or anything). The query is cut at '&' and
 * '=' as libmicrohttpd hands the arguments over. Every response must have a status 200..599 and a
 * type; an /api/ answer must be a JSON object (a gallery image: the image itself), an error one
 * with its status; the runner must get only valid jobs. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int stub_run(void *u, const serve_job *job, json_t **out, char *msg, size_t size)
{
    (void)u, (void)msg, (void)size;
    if (!job->model || !job->img || !(job->model->tasks & job->task) ||
        (job->task & (job->task - 1)) || !(job->qx >= 0 && job->qx < 1) ||
        !(job->qy >= 0 && job->qy < 1) || !(job->threshold >= 0 && job->threshold < 1) ||
        job->device < 0 || job->device > 1)
        abort();
    if (pgd_image_get_width(job->img) * (int64_t)pgd_image_get_height(job->img) > 4096)
        abort(); /* --max-pixels */
    *out = json_pack("{s:[],s:{s:f}}", "top", "timings", "forward", 1.0);
    return *out ? 0 : 503;
}

static serve_model models[3] = {
    {.name = "random:vit_ti16",
     .family = "vit",
     .tasks = SERVE_CLASSIFY | SERVE_MAPS,
     .random = 1,
     .classes = 1000},
    {.name = "detr.safetensors", .family = "detr", .tasks = SERVE_DETECT, .classes = 91},
    {.name = "random:dino", .family = "dino", .tasks = SERVE_HEADS | SERVE_NEAREST, .random = 1},
};
static char gallery_png[] = "\x89PNG (a stand-in: served as it is)";
static serve_gallery_item gallery[1] = {
    {.name = "a.png", .data = gallery_png, .size = sizeof gallery_png - 1, .type = "image/png"}};

static void check(const serve_request *req, const serve_response *res)
{
    if (res->status < 200 || res->status > 599 || (res->status != 204 && !res->content_type))
        abort();
    if (res->size && !res->body)
        abort();
    if (strncmp(req->path, "/api/", 5) || res->status == 204)
        return;
    if (res->status == 200 && !strcmp(req->path, "/api/gallery")) { /* the image as it is */
        if (res->size != gallery[0].size || memcmp(res->body, gallery[0].data, res->size))
            abort();
        return;
    }
    json_t *doc = json_loadb(res->body, res->size, 0, NULL);
    json_t *e = json_object_get(doc, "error");
    if (!json_is_object(doc) || (res->status != 200 && !e) ||
        (e && json_integer_value(json_object_get(e, "status")) != res->status))
        abort();
    json_decref(doc);
}

/* Cuts the query into arguments (in place) as libmicrohttpd would. */
static int split_query(char *q, serve_arg *args)
{
    int n = 0;
    for (char *save = NULL, *p = strtok_r(q, "&", &save); p; p = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(p, '=');
        if (eq)
            *eq = 0;
        if (n < SERVE_MAX_ARGS)
            args[n] = (serve_arg){p, eq ? eq + 1 : NULL};
        n++;
    }
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    const uint8_t *nl = memchr(data + 1, '\n', size - 1);
    size_t line = nl ? (size_t)(nl - data) - 1 : size - 1;
    char *head = malloc(line + 1);
    if (!head)
        return 0;
    memcpy(head, data + 1, line);
    head[line] = 0;
    char *path = strchr(head, ' '), *query = NULL;
    if (path)
        *path++ = 0;
    if (path && (query = strchr(path, '?')))
        *query++ = 0;
    serve_arg args[SERVE_MAX_ARGS];
    serve_app app = {.models = models,
                     .nmodels = 3,
                     .device = {"stub 0", "stub 1"},
                     .ndevices = 2,
                     .runner = {NULL, stub_run},
                     .gallery = gallery,
                     .ngallery = 1};
    serve_limits_default(&app.limits);
    app.limits.max_pixels = 4096;
    pthread_mutex_init(&app.lock, NULL);
    serve_request req = {head,
                         path ? path : "",
                         args,
                         query ? split_query(query, args) : 0,
                         nl ? nl + 1 : NULL,
                         nl ? size - line - 2 : 0,
                         data[0] & 1};
    serve_response res;
    serve_handle(&app, &req, &res);
    check(&req, &res);
    serve_response_free(&res);
    pthread_mutex_destroy(&app.lock);
    free(head);
    return 0;
}
