/* onnx_cmd.c — `pagoda run MODEL.onnx` (one forward pass of any ONNX model, inputs from .npy
 * files, images or seeded random data, outputs to .npy) and `pagoda info MODEL.onnx` (what the
 * model holds, what fuses, what Pagoda cannot run, its FLOPs and peak device memory). */
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "app.h"
#include "commands.h"

static const char run_usage[] =
    "usage: pagoda run MODEL.onnx [--input NAME=F.npy ...] [--image F [--preprocess P]]\n"
    "                  [--batch B] [--output-dir D] [--device SEL] [--repeat N] [--json]\n"
    "\n"
    "Runs an ONNX model (opsets 11 to 25, float32) on an OpenCL device: the shape subgraphs\n"
    "exporters emit are evaluated once on the host, matrix products with their bias, GELU/ReLU\n"
    "and residual run as fused linear layers, Conv + BatchNorm + residual + ReLU as one\n"
    "convolution, and attention blocks as fused attention. An op Pagoda lacks is an error naming\n"
    "the node, op and opset (`pagoda info MODEL.onnx` lists them all first).\n"
    "\n"
    "Inputs, in this order of preference for each graph input:\n"
    "  --input NAME=F.npy  a float32/float64 .npy array (NAME may be omitted for a model with\n"
    "                      one input: --input F.npy)\n"
    "  --image F           an image for a model with one [N, 3, 224, 224] input, preprocessed\n"
    "                      with --preprocess torchvision (default), timm or hf\n"
    "  otherwise           seeded random normal data (--seed S, default 0) of the declared\n"
    "                      shape, symbolic dims (e.g. batch) set to --batch B (default 1)\n"
    "\n"
    "Options:\n"
    "  --output-dir D   write each output as D/<name>.npy (the folder must exist)\n"
    "  --device SEL     the device (see 'pagoda devices --help')\n"
    "  --repeat N       run N times and print the median time (default 1)\n"
    "  --json           print the outputs' shapes, statistics and timings as JSON\n"
    "  -h, --help       show this help\n";

static const char info_usage[] =
    "usage: pagoda info MODEL.onnx [--json] [--batch B] [--no-run] [--device SEL]\n"
    "\n"
    "Describes an ONNX model: producer, opset, inputs and outputs (symbolic dims by name),\n"
    "parameters, the op histogram, the groups Pagoda fuses (linear, conv, attention, gelu) and\n"
    "every node it cannot run with the reason. Unless --no-run or something is unsupported, it\n"
    "then runs one forward pass on random data at batch B (default 1) and reports the FLOPs of\n"
    "its matrix products, convolutions and attention, the time, and the peak device memory.\n";

typedef struct run_opts {
    const char *model, *device, *outdir, *image;
    const char *inputs[64];
    int ninputs, json, norun;
    int64_t batch, repeat, seed;
    pgd_preprocess preset;
} run_opts;

static int parse(int argc, char **argv, run_opts *o, int info)
{
    static const struct option opts[] = {{"input", required_argument, 0, 'i'},
                                         {"image", required_argument, 0, 'I'},
                                         {"preprocess", required_argument, 0, 'p'},
                                         {"batch", required_argument, 0, 'b'},
                                         {"output-dir", required_argument, 0, 'o'},
                                         {"device", required_argument, 0, 'd'},
                                         {"repeat", required_argument, 0, 'r'},
                                         {"seed", required_argument, 0, 's'},
                                         {"json", no_argument, 0, 'j'},
                                         {"no-run", no_argument, 0, 'n'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *cmd = info ? "info " : "run ";
    int c;
    o->batch = 1, o->repeat = 1;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == 'i' && !info && o->ninputs < 64)
            o->inputs[o->ninputs++] = optarg;
        else if (c == 'I' && !info)
            o->image = optarg;
        else if (c == 'p' && !info) {
            int p = app_preset_parse(optarg);
            if (p < 0)
                return app_usage_error(cmd, "--preprocess wants torchvision, timm or hf");
            o->preset = (pgd_preprocess)p;
        } else if (c == 'b') {
            if (pgd_parse_int64(optarg, 1, 4096, &o->batch))
                return app_usage_error(cmd, "--batch wants 1..4096, got '%s'", optarg);
        } else if (c == 'r' && !info) {
            if (pgd_parse_int64(optarg, 1, 100000, &o->repeat))
                return app_usage_error(cmd, "--repeat wants 1..100000, got '%s'", optarg);
        } else if (c == 's') {
            if (pgd_parse_int64(optarg, 0, INT64_MAX, &o->seed))
                return app_usage_error(cmd, "--seed wants a non-negative integer");
        } else if (c == 'o' && !info)
            o->outdir = optarg;
        else if (c == 'd')
            o->device = optarg;
        else if (c == 'j')
            o->json = 1;
        else if (c == 'n' && info)
            o->norun = 1;
        else if (c == 'h') {
            fputs(info ? info_usage : run_usage, stdout);
            return -1;
        } else
            return app_usage_error(cmd, "bad option");
    }
    if (optind != argc - 1)
        return app_usage_error(cmd, "give one MODEL.onnx");
    o->model = argv[optind];
    return EXIT_OK;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A normal deviate from a counter-based generator (reproducible across machines). */
static float normal_at(uint64_t seed, uint64_t i)
{
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull + 1;
    double u[2];
    for (int k = 0; k < 2; k++) {
        z ^= z >> 31, z *= 0x94D049BB133111EBull, z ^= z >> 29, z *= 0xBF58476D1CE4E5B9ull;
        z ^= z >> 32;
        u[k] = ((double)(z >> 11) + 0.5) / 9007199254740992.0;
    }
    return (float)(sqrt(-2 * log(u[0])) * cos(6.283185307179586 * u[1]));
}

/* The --input given for graph input i (by name, or the only unnamed one). */
static const char *input_file(const run_opts *o, const pgd_graph_io *io, int nin)
{
    size_t len = strlen(io->name);
    for (int k = 0; k < o->ninputs; k++) {
        const char *eq = strchr(o->inputs[k], '=');
        if (eq && (size_t)(eq - o->inputs[k]) == len && !strncmp(o->inputs[k], io->name, len))
            return eq + 1;
        if (!eq && nin == 1)
            return o->inputs[k];
    }
    return NULL;
}

static int make_input(pgd_ctx *ctx, const run_opts *o, const pgd_graph_io *io, int nin,
                      pgd_tensor **out, const char **source)
{
    pgd_error *err = NULL;
    const char *file = input_file(o, io, nin);
    float *data = NULL;
    int nd = io->ndim;
    int64_t shape[PGD_MAX_DIMS];
    int rc;
    if (file) {
        if ((rc = pgd_npy_read(file, &data, &nd, shape, &err)))
            return app_fail(err);
        *source = file;
    } else if (o->image) {
        if (nin != 1 || io->ndim != 4 || (io->shape[1] != 3 && io->shape[1] >= 0) ||
            (io->shape[2] != 224 && io->shape[2] >= 0) ||
            (io->shape[3] != 224 && io->shape[3] >= 0))
            return app_usage_error("run ",
                                   "--image needs a model with one [N, 3, 224, 224] "
                                   "input ('%s' is not)",
                                   io->name);
        float *img = NULL;
        int64_t ishape[4];
        if (app_load_batch((char **)&o->image, 1, o->preset, 0, 1, &img, NULL, ishape, &err))
            return app_fail(err);
        nd = 4;
        shape[0] = o->batch, shape[1] = 3, shape[2] = 224, shape[3] = 224;
        data = malloc(sizeof(float) * 3 * 224 * 224 * (size_t)o->batch);
        for (int64_t b = 0; data && b < o->batch; b++)
            memcpy(data + b * 3 * 224 * 224, img, sizeof(float) * 3 * 224 * 224);
        free(img);
        *source = o->image;
    } else {
        if (nd < 0)
            return app_usage_error("run ",
                                   "input '%s' has no declared shape: give "
                                   "--input %s=F.npy",
                                   io->name, io->name);
        int64_t n = 1;
        for (int d = 0; d < nd; d++) {
            shape[d] = io->shape[d] >= 0 ? io->shape[d] : o->batch;
            n *= shape[d];
        }
        if (n > ((int64_t)1 << 30))
            return app_usage_error("run ", "input '%s' would hold %lld elements", io->name,
                                   (long long)n);
        data = malloc(sizeof(float) * (size_t)(n ? n : 1));
        for (int64_t k = 0; data && k < n; k++)
            data[k] = normal_at((uint64_t)o->seed, (uint64_t)k);
        *source = "random";
    }
    if (!data)
        return app_usage_error("run ", "out of host memory");
    if (io->elem_type && io->elem_type != 1) {
        free(data);
        return app_usage_error("run ", "input '%s' has ONNX type %d; Pagoda runs float32 inputs",
                               io->name, io->elem_type);
    }
    rc = pgd_tensor_create_from(ctx, nd, shape, data, out, &err);
    free(data);
    return rc ? app_fail(err) : EXIT_OK;
}

/* The output's name as a file name: anything but [A-Za-z0-9._-] becomes '_'. */
static void safe_name(const char *name, char *buf, size_t size)
{
    size_t k = 0;
    for (; name[k] && k + 1 < size; k++) {
        char c = name[k];
        buf[k] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                         c == '.' || c == '-' || c == '_'
                     ? c
                     : '_';
    }
    buf[k] = 0;
    if (!k || buf[0] == '.')
        buf[0] = '_', buf[k ? k : 1] = 0;
}

static json_t *output_json(const pgd_graph_io *io, pgd_tensor *t, const float *h)
{
    json_t *shape = json_array();
    int64_t n = pgd_tensor_get_numel(t), arg = 0;
    double sum = 0, mn = INFINITY, mx = -INFINITY;
    for (int d = 0; d < pgd_tensor_get_ndim(t); d++)
        json_array_append_new(shape, json_integer(pgd_tensor_get_dim(t, d)));
    for (int64_t k = 0; k < n; k++) {
        sum += h[k];
        if (h[k] > mx)
            mx = h[k], arg = k;
        mn = h[k] < mn ? h[k] : mn;
    }
    return json_pack("{s:s, s:o, s:f, s:f, s:f, s:I}", "name", io->name, "shape", shape, "mean",
                     n ? sum / (double)n : 0.0, "min", n ? mn : 0.0, "max", n ? mx : 0.0, "argmax",
                     (json_int_t)arg);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Runs the graph `repeat` times on inputs; outs receive the last run's outputs. */
static int timed_runs(pgd_ctx *ctx, pgd_graph *gr, pgd_tensor **ins, pgd_tensor **outs,
                      int64_t repeat, double *first, double *median)
{
    double *t = calloc((size_t)repeat, sizeof(double));
    pgd_error *err = NULL;
    int nout = pgd_graph_num_outputs(gr);
    for (int64_t r = 0; t && r < repeat; r++) {
        for (int k = 0; k < nout; k++)
            pgd_tensor_destroy(outs[k]), outs[k] = NULL;
        double t0 = now_s();
        if (pgd_graph_run(gr, (const pgd_tensor *const *)ins, outs, &err) ||
            pgd_ctx_finish(ctx, &err)) {
            free(t);
            return app_fail(err);
        }
        t[r] = now_s() - t0;
    }
    if (!t)
        return app_usage_error("run ", "out of host memory");
    *first = t[0];
    qsort(t + (repeat > 1), (size_t)(repeat - (repeat > 1)), sizeof(double), cmp_double);
    *median = repeat > 1 ? t[1 + (repeat - 1) / 2] : t[0];
    free(t);
    return EXIT_OK;
}

static int write_outputs(pgd_graph *gr, pgd_tensor **outs, const run_opts *o, json_t *arr)
{
    pgd_error *err = NULL;
    for (int k = 0; k < pgd_graph_num_outputs(gr); k++) {
        pgd_graph_io io;
        pgd_graph_get_output(gr, k, &io);
        int64_t n = pgd_tensor_get_numel(outs[k]), shape[PGD_MAX_DIMS];
        float *h = malloc(sizeof(float) * (size_t)(n ? n : 1));
        if (!h)
            return app_usage_error("run ", "out of host memory");
        if (pgd_tensor_download(outs[k], h, &err)) {
            free(h);
            return app_fail(err);
        }
        for (int d = 0; d < pgd_tensor_get_ndim(outs[k]); d++)
            shape[d] = pgd_tensor_get_dim(outs[k], d);
        if (o->outdir) {
            char name[200], path[4096];
            safe_name(io.name, name, sizeof name);
            snprintf(path, sizeof path, "%s/%s.npy", o->outdir, name);
            if (pgd_npy_write(path, h, pgd_tensor_get_ndim(outs[k]), shape, &err)) {
                free(h);
                return app_fail(err);
            }
            if (!o->json)
                printf("wrote %s\n", path);
        }
        json_t *j = output_json(&io, outs[k], h);
        if (!o->json) {
            char sh[128];
            printf("%s %s mean %.6g min %.6g max %.6g argmax %lld\n", io.name,
                   pgd_tensor_shape_str(outs[k], sh, sizeof sh),
                   json_real_value(json_object_get(j, "mean")),
                   json_real_value(json_object_get(j, "min")),
                   json_real_value(json_object_get(j, "max")),
                   (long long)json_integer_value(json_object_get(j, "argmax")));
        }
        json_array_append_new(arr, j);
        free(h);
    }
    return EXIT_OK;
}

static int run_model(const run_opts *o, int info)
{
    pgd_ctx *ctx = NULL;
    pgd_graph *gr = NULL;
    pgd_error *err = NULL;
    int rc = app_ctx_open(o->device, &ctx);
    if (rc)
        return rc;
    double t0 = now_s();
    if (pgd_graph_load(ctx, o->model, &gr, &err)) {
        pgd_ctx_destroy(ctx);
        return app_fail(err);
    }
    double t_load = now_s() - t0;
    char *report = pgd_graph_report(gr);
    json_t *rep = report ? json_loads(report, 0, NULL) : json_object();
    free(report);
    size_t nunsup = json_array_size(json_object_get(rep, "unsupported"));
    int nin = pgd_graph_num_inputs(gr), nout = pgd_graph_num_outputs(gr);
    pgd_tensor *ins[64] = {0}, *outs[64] = {0};
    json_t *outj = json_array();
    double first = 0, median = 0;
    int ran = 0;
    if (!(info && (o->norun || nunsup))) {
        for (int i = 0; i < nin && !rc; i++) {
            pgd_graph_io io;
            const char *src;
            pgd_graph_get_input(gr, i, &io);
            rc = make_input(ctx, o, &io, nin, &ins[i], &src);
        }
        pgd_ctx_memory_reset_peak(ctx);
        if (!rc)
            rc = timed_runs(ctx, gr, ins, outs, info ? 2 : o->repeat, &first, &median);
        if (!rc && !info)
            rc = write_outputs(gr, outs, o, outj);
        ran = !rc;
    }
    pgd_memory_stats ms;
    pgd_ctx_get_memory_stats(ctx, &ms);
    json_t *timing = json_pack("{s:f, s:f, s:f, s:f, s:I}", "load_s", t_load, "first_s", first,
                               "median_s", median, "gflop", pgd_graph_flops(gr) / 1e9,
                               "peak_device_bytes", (json_int_t)ms.peak_bytes);
    if (!rc && (info || o->json)) {
        json_t *doc =
            info ? json_incref(rep)
                 : json_pack("{s:s, s:o}", "model", o->model, "outputs", json_incref(outj));
        json_object_set_new(doc, "device", app_device_json(pgd_ctx_get_device(ctx)));
        if (ran)
            json_object_set(doc, "run", timing);
        if (o->json || !info)
            rc = app_print_json(doc);
        else {
            char *s = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
            puts(s ? s : "{}");
            free(s);
            json_decref(doc);
        }
    } else if (!rc) {
        printf("%s: %d nodes, load %.3f s, first run %.3f s, median %.4f s, %.2f GFLOP, peak "
               "device memory %.1f MiB\n",
               o->model, (int)json_integer_value(json_object_get(rep, "nodes")), t_load, first,
               median, pgd_graph_flops(gr) / 1e9, (double)ms.peak_bytes / 1048576.0);
    }
    json_decref(timing);
    json_decref(outj);
    json_decref(rep);
    for (int i = 0; i < 64; i++)
        pgd_tensor_destroy(ins[i]), pgd_tensor_destroy(outs[i]);
    (void)nout;
    pgd_graph_destroy(gr);
    pgd_ctx_destroy(ctx);
    return rc;
}

int cmd_run(int argc, char **argv)
{
    run_opts o = {0};
    int rc = parse(argc, argv, &o, 0);
    return rc < 0 ? EXIT_OK : rc ? rc : run_model(&o, 0);
}

int cmd_info(int argc, char **argv)
{
    run_opts o = {0};
    int rc = parse(argc, argv, &o, 1);
    return rc < 0 ? EXIT_OK : rc ? rc : run_model(&o, 1);
}
