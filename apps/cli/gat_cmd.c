/* gat_cmd.c — `pagoda gat`: node classification with a stack of PyTorch Geometric GATConv layers
 * (pgd_gat) on a graph file, with the accuracy when the graph carries labels. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "commands.h"
#include "gat.h"
#include "outset.h"

static const char usage[] =
    "usage: pagoda gat --weights MODEL.safetensors --graph GRAPH.safetensors [--device SEL]\n"
    "                  [--save-logits F.npy] [--save-attention F.npy] [--json]\n"
    "\n"
    "Classifies the nodes of a graph with a graph attention network (Velickovic et al. 2018):\n"
    "a stack of PyTorch Geometric GATConv layers run on the device, one pgd_gat per layer.\n"
    "\n"
    "MODEL is the state dict as PyG names it: per layer P, P.lin.weight [heads*C, F] (or\n"
    "P.lin_src.weight and P.lin_dst.weight), P.att_src and P.att_dst [1, heads, C], optionally\n"
    "P.bias and P.res.weight. Layers run in the order of __metadata__ gat.layers (e.g.\n"
    "\"conv1,conv2\"), else in the natural order of their names; __metadata__ P.concat,\n"
    "P.negative_slope and P.add_self_loops give each layer's settings (PyG's defaults: true,\n"
    "0.2, true) and gat.activation the activation between layers (elu, relu or none; default\n"
    "elu). Every tensor must be used and have exactly the expected shape.\n"
    "\n"
    "GRAPH holds x [N, F] (float), edge_index [2, E] (int64: row 0 sources, row 1 targets) and\n"
    "optionally y [N] (int64 labels) and test_mask [N] (bool); with y the accuracy is printed,\n"
    "over the test_mask nodes when there is one, else over all nodes. Every edge index is\n"
    "checked (negative or >= N is an error naming the edge). tools/golden/train-gat.py trains a "
    "GAT with\n"
    "PyG on a generated graph and writes both files.\n"
    "\n"
    "Options:\n"
    "  --weights F          the model (required)\n"
    "  --graph F            the graph (required)\n"
    "  --device SEL         the device (see 'pagoda devices --help')\n"
    "  --save-logits F.npy  write the last layer's output [N, classes] (float32)\n"
    "  --save-attention F.npy\n"
    "                       write the last layer's attention coefficients [E', heads]; row r is\n"
    "                       edge r of the edge_index PyG's GATConv returns with\n"
    "                       return_attention_weights=True: with add_self_loops, the edges that\n"
    "                       are not self loops in their order, then one loop per node 0..N-1\n"
    "  --json               print the result as JSON\n"
    "  -h, --help           show this help\n";

typedef struct gat_opts {
    const char *weights, *graph, *device, *save_logits, *save_attention;
    int json;
} gat_opts;

static int parse(int argc, char **argv, gat_opts *o)
{
    static const struct option opts[] = {{"weights", required_argument, 0, 'w'},
                                         {"graph", required_argument, 0, 'g'},
                                         {"device", required_argument, 0, 'd'},
                                         {"save-logits", required_argument, 0, 's'},
                                         {"save-attention", required_argument, 0, 'a'},
                                         {"json", no_argument, 0, 'j'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'w': o->weights = optarg; break;
        case 'g': o->graph = optarg; break;
        case 'd': o->device = optarg; break;
        case 's': o->save_logits = optarg; break;
        case 'a': o->save_attention = optarg; break;
        case 'j': o->json = 1; break;
        case 'h': fputs(usage, stdout); return -1;
        default: return app_usage_error("gat ", "bad option");
        }
    }
    if (optind < argc)
        return app_usage_error("gat ", "unexpected argument '%s'", argv[optind]);
    if (!o->weights || !o->graph)
        return app_usage_error("gat ", "--weights and --graph are required");
    return EXIT_OK;
}

/* Accuracy of argmax(logits) against y over the test_mask (all nodes without one). */
static void accuracy(const gat_graph_file *g, const float *logits, int64_t classes,
                     int64_t *correct, int64_t *counted)
{
    *correct = *counted = 0;
    for (int64_t i = 0; i < g->n; i++) {
        if (g->test_mask && !g->test_mask[i])
            continue;
        const float *row = logits + i * classes;
        int64_t best = 0;
        for (int64_t c = 1; c < classes; c++)
            if (row[c] > row[best])
                best = c;
        (*counted)++;
        *correct += best == g->y[i];
    }
}

static json_t *layers_json(const gat_model *m)
{
    json_t *a = json_array();
    for (int i = 0; a && i < m->n_layers; i++) {
        const gat_layer_info *L = &m->info[i];
        json_array_append_new(
            a, json_pack("{s:o, s:I, s:I, s:I, s:b, s:b, s:f, s:b, s:b}", "name",
                         app_json_text(L->prefix), "in_channels", (json_int_t)L->desc.in_channels,
                         "heads", (json_int_t)L->desc.heads, "out_channels",
                         (json_int_t)L->desc.out_channels, "concat", L->desc.concat,
                         "add_self_loops", L->add_self_loops, "negative_slope",
                         (double)L->desc.negative_slope, "bias", L->bias, "residual", L->residual));
    }
    return a;
}

static void print_text(const gat_opts *o, pgd_ctx *ctx, const gat_model *m, const gat_graph_file *g,
                       int64_t edges2, const double t[2], int64_t correct, int64_t counted)
{
    char buf[512];
    printf("model     %s: %d GATConv layers, %s between layers\n",
           app_term_text(o->weights, buf, sizeof buf), m->n_layers, m->act_name);
    for (int i = 0; i < m->n_layers; i++) {
        const gat_layer_info *L = &m->info[i];
        printf("          %s: %lld -> %lld head%s x %lld (%s)%s%s\n",
               app_term_text(L->prefix, buf, sizeof buf), (long long)L->desc.in_channels,
               (long long)L->desc.heads, L->desc.heads > 1 ? "s" : "",
               (long long)L->desc.out_channels, L->desc.concat ? "concat" : "mean",
               L->add_self_loops ? ", self loops" : "", L->residual ? ", residual" : "");
    }
    printf("graph     %s: %lld nodes x %lld features, %lld edges (%lld attended)\n",
           app_term_text(o->graph, buf, sizeof buf), (long long)g->n, (long long)g->f,
           (long long)g->e, (long long)edges2);
    printf("device    %s\n", app_term_text(pgd_ctx_get_device(ctx)->name, buf, sizeof buf));
    printf("time      graph %.2f ms, forward %.2f ms\n", t[0], t[1]);
    if (g->y && counted)
        printf("accuracy  %.4f (%lld of %lld %s)\n", (double)correct / (double)counted,
               (long long)correct, (long long)counted, g->test_mask ? "test nodes" : "nodes");
    else if (g->y)
        printf("accuracy  - (test_mask selects no node)\n");
}

/* Opens the outputs (checked before the run), runs, writes; the files appear only when all went
 * well. */
static int run(const gat_opts *o, outset *out, pgd_ctx *ctx, const gat_model *m,
               const gat_graph_file *g)
{
    pgd_error *err = NULL;
    pgd_outfile *fl = NULL, *fa = NULL;
    if (o->save_logits && outset_open(out, "--save-logits", o->save_logits, NULL, &fl))
        return EXIT_RUNTIME;
    if (o->save_attention && outset_open(out, "--save-attention", o->save_attention, NULL, &fa))
        return EXIT_RUNTIME;
    int64_t classes = gat_model_out(m), rows = 0;
    float *logits = malloc((size_t)(g->n * classes) * sizeof *logits), *alpha = NULL;
    double t[2] = {0, 0};
    int rc = logits ? PGD_OK : pgd_error_set(&err, PGD_ERR_OUT_OF_HOST_MEMORY, "logits");
    if (!rc)
        rc = gat_model_run(ctx, m, g, logits, o->save_attention ? &alpha : NULL, NULL, &rows, t,
                           &err);
    if (!rc && fl) {
        int64_t s[2] = {g->n, classes};
        rc = pgd_npy_write_to(fl, logits, 2, s, &err);
    }
    if (!rc && fa) {
        int64_t s[2] = {rows, m->info[m->n_layers - 1].desc.heads};
        rc = pgd_npy_write_to(fa, alpha, 2, s, &err);
    }
    if (rc)
        rc = app_fail(err);
    else
        rc = outset_commit(out, 1);
    int64_t correct = 0, counted = 0;
    if (!rc && g->y)
        accuracy(g, logits, classes, &correct, &counted);
    if (!rc && o->json) {
        json_t *doc = json_pack(
            "{s:o, s:o, s:o, s:I, s:I, s:I, s:I, s:o, s:s, s:f, s:f}", "device",
            app_json_text(pgd_ctx_get_device(ctx)->name), "weights", app_json_text(o->weights),
            "graph", app_json_text(o->graph), "nodes", (json_int_t)g->n, "features",
            (json_int_t)g->f, "edges", (json_int_t)g->e, "classes", (json_int_t)classes, "layers",
            layers_json(m), "activation", m->act_name, "graph_ms", t[0], "forward_ms", t[1]);
        if (doc && g->y && counted) {
            json_object_set_new(doc, "accuracy", json_real((double)correct / (double)counted));
            json_object_set_new(doc, "correct", json_integer(correct));
            json_object_set_new(doc, "evaluated", json_integer(counted));
        }
        rc = app_print_json(doc);
    } else if (!rc) {
        /* The edges the last layer attends over: E, or with PyG's rule E - loops + N. */
        int64_t e2 = g->e;
        if (m->info[m->n_layers - 1].add_self_loops) {
            for (int64_t k = 0; k < g->e; k++)
                e2 -= g->edge_index[k] == g->edge_index[g->e + k];
            e2 += g->n;
        }
        print_text(o, ctx, m, g, e2, t, correct, counted);
    }
    free(logits);
    free(alpha);
    return rc;
}

/* Both outputs checked before the graph and the model load (outset.h): two names for one file
 * (a and ./a), a directory or a device, are refused up front. */
static int claim_outputs(const gat_opts *o, outset *out)
{
    int rc = EXIT_OK;
    if (o->save_logits)
        rc = outset_claim(out, "--save-logits", o->save_logits);
    if (!rc && o->save_attention)
        rc = outset_claim(out, "--save-attention", o->save_attention);
    return rc;
}

int cmd_gat(int argc, char **argv)
{
    gat_opts o;
    memset(&o, 0, sizeof o);
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc < 0 ? EXIT_OK : rc;
    pgd_error *err = NULL;
    gat_graph_file g;
    outset out = {0};
    if ((rc = claim_outputs(&o, &out))) {
        outset_free(&out);
        return rc;
    }
    if (gat_graph_load(o.graph, &g, &err)) {
        outset_free(&out);
        return app_fail(err);
    }
    pgd_ctx *ctx = NULL;
    if ((rc = app_ctx_open(o.device, &ctx))) {
        gat_graph_free(&g);
        outset_free(&out);
        return rc;
    }
    model_source src;
    gat_model *m = NULL;
    rc = model_source_open(&src, o.weights, &err);
    if (!rc)
        rc = gat_model_load(ctx, &src, &m, &err);
    model_source_free(&src);
    if (rc)
        rc = app_fail(err);
    else
        rc = run(&o, &out, ctx, m, &g);
    outset_free(&out);
    gat_model_free(m);
    gat_graph_free(&g);
    pgd_ctx_destroy(ctx);
    return rc;
}
