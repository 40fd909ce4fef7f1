/* graph.h — the ONNX graph path's own declarations (runtime/graph/ only).
 *
 * A model is loaded once (graph_load.c: protobuf-c parse, checks, topological order, which
 * values are known on the host), its fusions are found once from its structure (graph_fuse.c),
 * and every run interprets the nodes in order (graph_run.c, graph_ops.c): values known on the
 * host (initialisers, Constant nodes and everything computed from them and from shapes — the
 * shape subgraphs exporters emit) are evaluated on the host (graph_host.c) and kept while the
 * input shapes stay the same; the rest runs on the device through the public op API only.
 * Device values are strided views over pooled buffers, so Transpose, Reshape, Slice, Squeeze,
 * Unsqueeze, Gather of one index, Split and Expand move no data: a consumer that needs a
 * contiguous tensor copies once (pgd_copy_strided), and the fused attention and the CNN ops
 * read the views directly. */
#ifndef PGD_GRAPH_H
#define PGD_GRAPH_H

#include "onnx.pb-c.h"
#include "pagoda.h"
#include "pagoda_util.h"

#include <stdint.h>

/* ONNX TensorProto.DataType codes used here. */
enum {
    G_FLOAT = 1,
    G_UINT8 = 2,
    G_INT8 = 3,
    G_UINT16 = 4,
    G_INT16 = 5,
    G_INT32 = 6,
    G_INT64 = 7,
    G_STRING = 8,
    G_BOOL = 9,
    G_FLOAT16 = 10,
    G_DOUBLE = 11,
    G_UINT32 = 12,
    G_UINT64 = 13,
    G_BFLOAT16 = 16
};

/* A host tensor: floats (FLOAT, FLOAT16, DOUBLE, BFLOAT16 held as float) or integers (every
 * integer type and BOOL held as int64). */
typedef struct ghost {
    int dtype; /* the ONNX type it stands for */
    int nd;
    int64_t dim[PGD_MAX_DIMS];
    int64_t n;
    float *f;   /* n floats, or NULL */
    int64_t *i; /* n integers, or NULL */
} ghost;

/* A pooled device buffer shared by the views over it. */
typedef struct gbuf {
    pgd_tensor *t;
    int refs;
} gbuf;

/* A device value: a strided view of float32 elements over a buffer. */
typedef struct gview {
    gbuf *b;
    int64_t off;
    int nd;
    int64_t dim[PGD_MAX_DIMS], st[PGD_MAX_DIMS];
} gview;

enum { V_ABSENT = 0, V_CONST, V_HOST, V_DEVICE };

typedef struct gvalue {
    const char *name;
    int kind;      /* V_*: CONST from the file, HOST computed on the host, DEVICE at run time */
    int dtype;     /* declared or inferred ONNX type (0: unknown) */
    ghost *h;      /* CONST and HOST values once known */
    gview v;       /* DEVICE values while live */
    int producer;  /* node index, or -1 */
    int graph_in;  /* index among the graph inputs + 1, or 0 */
    int graph_out; /* index among the graph outputs + 1, or 0 */
    int uses;      /* consuming nodes */
    int last_use;  /* the last node position (in run order) that reads it */
} gvalue;

/* Fused groups (graph_fuse.c). The group runs at its tail node; its other members are skipped. */
enum { F_NONE = 0, F_LINEAR, F_CONV, F_ATTENTION, F_GELU };

typedef struct gfuse {
    int kind;
    int tail; /* node index the group runs at */
    int head; /* the MatMul/Gemm/Conv node, or the first MatMul of attention */
    pgd_act act;
    int residual; /* value index, or -1 */
    int bias;     /* value index, or -1 (linear: the added constant) */
    int out;      /* the value the group produces */
    /* attention: q, k (as K, not Kᵀ), v value indices and the scale found */
    int q, k, v, mask, k_transposed;
    float scale;
} gfuse;

typedef struct gnode {
    const Onnx__NodeProto *p;
    const char *op; /* p->op_type */
    int nin, nout;
    int *in, *out; /* value indices (-1: an absent optional input) */
    int host;      /* every output is known on the host */
    int fuse;      /* index into g->fuses + 1 when a member, else 0 */
    void *prep;    /* a prepared layer (pgd_linear / pgd_conv2d), made on first run */
    void (*prep_free)(void *);
} gnode;

struct pgd_graph {
    pgd_ctx *ctx;
    char *path;
    int external_ok; /* external data may be read (beside path); 0 for nameless bytes */
    Onnx__ModelProto *model;
    void *file; /* the file's bytes (protobuf-c keeps pointers into nothing; freed at destroy) */
    int64_t opset;
    int nvalues, nnodes, nfuses;
    gvalue *values;
    gnode *nodes;
    int *order; /* node indices in run order */
    gfuse *fuses;
    int ninputs, noutputs;
    int *inputs, *outputs; /* value indices */
    /* The input shapes the host values were computed for. */
    int shapes_known;
    int64_t in_dim[64][PGD_MAX_DIMS];
    int in_nd[64];
    /* statistics of the last run */
    double flops;
    int steps;
};

/* graph_load.c */
int pgd__graph_value(const pgd_graph *g, const char *name);
const Onnx__AttributeProto *pgd__graph_attr(const gnode *n, const char *name);
int64_t pgd__graph_attr_i(const gnode *n, const char *name, int64_t dflt);
float pgd__graph_attr_f(const gnode *n, const char *name, float dflt);
int pgd__graph_attr_ints(const gnode *n, const char *name, const int64_t **v);
const char *pgd__graph_attr_s(const gnode *n, const char *name, const char *dflt);
int pgd__graph_tensor_to_host(const pgd_graph *g, const Onnx__TensorProto *t, const char *what,
                              ghost **out, pgd_error **err);
int pgd__graph_fail(pgd_error **err, int code, const pgd_graph *g, const gnode *n, const char *fmt,
                    ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* graph_guard.c */
int pgd__graph_check_nesting(const void *data, size_t size, const char *path, pgd_error **err);
int pgd__graph_check_strings(const Onnx__ModelProto *m, const char *path, pgd_error **err);
char *pgd__graph_utf8_copy(const char *s);
int pgd__graph_error_context(const pgd_graph *g, const gnode *n, int rc, pgd_error **err);
int pgd__graph_host_only_run(pgd_graph *g, int64_t max_elems, pgd_error **err);

/* graph_host.c */
extern int64_t pgd__ghost_max_elems;
ghost *pgd__ghost_new(int dtype, int nd, const int64_t *dim);
void pgd__ghost_free(ghost *h);
int pgd__ghost_is_float(int dtype);
int pgd__graph_host_supported(const char *op);
int pgd__graph_host_eval(pgd_graph *g, gnode *n, pgd_error **err);
double pgd__ghost_get(const ghost *h, int64_t k);
int pgd__graph_ints(pgd_graph *g, gnode *n, int k, const char *attr, int64_t *v, int max);

/* graph_fuse.c */
int pgd__graph_fuse(pgd_graph *g, pgd_error **err);

/* graph_run.c */
int pgd__graph_run(pgd_graph *g, const pgd_tensor *const *inputs, pgd_tensor **outputs,
                   pgd_error **err);
int pgd__graph_device_supported(const char *op);
void pgd__graph_release_all(pgd_graph *g);

/* graph_ops.c: one device node (not fused) */
int pgd__graph_exec_node(pgd_graph *g, gnode *n, pgd_error **err);
/* views */
int pgd__gview_new(pgd_graph *g, int nd, const int64_t *dim, gview *v, pgd_error **err);
void pgd__gview_drop(gview *v);
int pgd__gview_dense(const gview *v);
int pgd__gview_contiguous(const gview *v);
int pgd__gview_materialise(pgd_graph *g, const gview *v, gview *out, pgd_error **err);
pgd_tensor *pgd__gview_tensor(const gview *v);
int pgd__gview_reshape(const gview *v, int nd, const int64_t *dim, gview *out);
int pgd__graph_const_tensor(pgd_graph *g, const ghost *h, int nd, const int64_t *dim, gview *out,
                            pgd_error **err);
int pgd__graph_input_view(pgd_graph *g, gnode *n, int k, gview *out, pgd_error **err);

/* graph_layers.c */
int pgd__graph_exec_conv(pgd_graph *g, gnode *n, const gfuse *f, pgd_error **err);
int pgd__graph_exec_pool(pgd_graph *g, gnode *n, pgd_error **err);
int pgd__graph_exec_rowop(pgd_graph *g, gnode *n, pgd_error **err);
int pgd__graph_exec_matmul(pgd_graph *g, gnode *n, pgd_error **err);
int pgd__graph_reshape_dims(const int64_t *xdim, int xnd, int64_t xn, const int64_t *spec,
                            int nspec, int allowzero, int64_t *dim);
/* graph_layers.c: fused groups */
int pgd__graph_exec_fused(pgd_graph *g, gfuse *f, pgd_error **err);

#endif
