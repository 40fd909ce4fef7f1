/* graph_api.c — the public doors of the graph path: inputs and outputs as the file declares
 * them, a run, and a report of what the graph holds (ops, fusions, what is not supported). */
#include "graph.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

int pgd_graph_num_inputs(const pgd_graph *g)
{
    return g ? g->ninputs : 0;
}

int pgd_graph_num_outputs(const pgd_graph *g)
{
    return g ? g->noutputs : 0;
}

static void io_info(const Onnx__ValueInfoProto *vi, const char *name, pgd_graph_io *out)
{
    memset(out, 0, sizeof *out);
    out->name = name;
    out->ndim = -1;
    const Onnx__TypeProto *tp = vi ? vi->type : NULL;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
        return;
    out->elem_type = tp->tensor_type->elem_type;
    const Onnx__TensorShapeProto *sp = tp->tensor_type->shape;
    if (!sp || sp->n_dim > PGD_MAX_DIMS)
        return;
    out->ndim = (int)sp->n_dim;
    for (size_t d = 0; d < sp->n_dim; d++) {
        const Onnx__TensorShapeProto__Dimension *dm = sp->dim[d];
        out->shape[d] = dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE
                            ? dm->dim_value
                            : -1;
        out->dim_name[d] = dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM
                               ? dm->dim_param
                               : NULL;
    }
}

static const Onnx__ValueInfoProto *find_vi(Onnx__ValueInfoProto **list, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (list[i]->name && !strcmp(list[i]->name, name))
            return list[i];
    return NULL;
}

pgd_status pgd_graph_get_input(const pgd_graph *g, int i, pgd_graph_io *out)
{
    if (!g || !out || i < 0 || i >= g->ninputs)
        return PGD_ERR_INVALID_ARGUMENT;
    const char *name = g->values[g->inputs[i]].name;
    const Onnx__GraphProto *gp = g->model->graph;
    io_info(find_vi(gp->input, gp->n_input, name), name, out);
    return PGD_OK;
}

pgd_status pgd_graph_get_output(const pgd_graph *g, int i, pgd_graph_io *out)
{
    if (!g || !out || i < 0 || i >= g->noutputs)
        return PGD_ERR_INVALID_ARGUMENT;
    const char *name = g->values[g->outputs[i]].name;
    const Onnx__GraphProto *gp = g->model->graph;
    io_info(find_vi(gp->output, gp->n_output, name), name, out);
    return PGD_OK;
}

pgd_status pgd_graph_run(pgd_graph *g, const pgd_tensor *const *inputs, pgd_tensor **outputs,
                         pgd_error **err)
{
    if (!g || (!inputs && g->ninputs) || !outputs)
        return pgd_error_set(err, PGD_ERR_INVALID_ARGUMENT, "graph_run: NULL argument");
    for (int i = 0; i < g->noutputs; i++)
        outputs[i] = NULL;
    return pgd__graph_run(g, inputs, outputs, err);
}

double pgd_graph_flops(const pgd_graph *g)
{
    return g ? g->flops : 0;
}

static const char *fuse_name(int kind)
{
    switch (kind) {
    case F_LINEAR: return "linear";
    case F_CONV: return "conv";
    case F_ATTENTION: return "attention";
    default: return "gelu";
    }
}

static json_t *io_json(const pgd_graph *g, int output)
{
    json_t *a = json_array();
    for (int i = 0; i < (output ? g->noutputs : g->ninputs); i++) {
        pgd_graph_io io;
        if (output)
            pgd_graph_get_output(g, i, &io);
        else
            pgd_graph_get_input(g, i, &io);
        json_t *shape = json_array();
        for (int d = 0; d < io.ndim; d++)
            json_array_append_new(shape, io.dim_name[d]     ? json_string(io.dim_name[d])
                                         : io.shape[d] >= 0 ? json_integer(io.shape[d])
                                                            : json_null());
        json_array_append_new(a, json_pack("{s:s, s:i, s:o}", "name", io.name, "elem_type",
                                           io.elem_type, "shape", shape));
    }
    return a;
}

char *pgd_graph_report(const pgd_graph *g)
{
    if (!g)
        return NULL;
    json_t *ops = json_object(), *unsup = json_array(), *fused = json_array();
    json_t *kinds = json_object();
    int64_t params = 0;
    for (int i = 0; i < g->nvalues; i++)
        if (g->values[i].kind == V_CONST && g->values[i].h && g->values[i].producer < 0)
            params += g->values[i].h->n;
    for (int oi = 0; oi < g->nnodes; oi++) {
        const gnode *n = &g->nodes[g->order[oi]];
        json_t *c = json_object_get(ops, n->op);
        json_object_set_new(ops, n->op, json_integer(c ? json_integer_value(c) + 1 : 1));
        const char *dom = n->p->domain ? n->p->domain : "";
        const char *why = NULL;
        if (*dom && strcmp(dom, "ai.onnx"))
            why = "a custom domain";
        else if (!n->host && !n->fuse && !pgd__graph_device_supported(n->op))
            why = pgd__graph_host_supported(n->op) ? "only on constants (here it reads device "
                                                     "data)"
                                                   : "not implemented";
        if (why)
            json_array_append_new(unsup, json_pack("{s:s, s:s, s:s, s:I}", "node",
                                                   n->p->name ? n->p->name : "", "op", n->op,
                                                   "reason", why, "opset", (json_int_t)g->opset));
    }
    for (int f = 0; f < g->nfuses; f++) {
        const gfuse *fu = &g->fuses[f];
        json_t *names = json_array();
        for (int oi = 0; oi < g->nnodes; oi++) {
            const gnode *n = &g->nodes[g->order[oi]];
            if (n->fuse == f + 1)
                json_array_append_new(names, json_string(n->op));
        }
        const char *k = fuse_name(fu->kind);
        json_t *c = json_object_get(kinds, k);
        json_object_set_new(kinds, k, json_integer(c ? json_integer_value(c) + 1 : 1));
        json_array_append_new(
            fused, json_pack("{s:s, s:s, s:o, s:b}", "kind", k, "at",
                             g->nodes[fu->tail].p->name ? g->nodes[fu->tail].p->name : "", "ops",
                             names, "residual", fu->residual >= 0));
    }
    const Onnx__ModelProto *m = g->model;
    char *file = pgd__graph_utf8_copy(g->path); /* a file name need not be UTF-8 */
    json_t *r = json_pack(
        "{s:s, s:I, s:I, s:s, s:i, s:I, s:o, s:o, s:o, s:o, s:o, s:o}", "file", file ? file : "",
        "ir_version", (json_int_t)m->ir_version, "opset", (json_int_t)g->opset, "producer",
        m->producer_name ? m->producer_name : "", "nodes", g->nnodes, "parameters",
        (json_int_t)params, "inputs", io_json(g, 0), "outputs", io_json(g, 1), "ops", ops,
        "fusions", kinds, "fused", fused, "unsupported", unsup);
    char *s = r ? json_dumps(r, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(r);
    free(file);
    return s;
}
