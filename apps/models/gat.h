/* gat.h — a stack of PyTorch Geometric GATConv layers (pgd_gat) read from a state dict as PyG
 * writes it, and the graph files `pagoda gat` reads. Written against pagoda.h only. */
#ifndef PAGODA_GAT_MODEL_H
#define PAGODA_GAT_MODEL_H

#include <stdint.h>

#include "model.h"
#include "pagoda.h"

#define GAT_MAX_LAYERS 64

/* One layer as found in the file. */
typedef struct gat_layer_info {
    char prefix[256]; /* "conv1": the tensors are <prefix>.att_src, ... */
    pgd_gat_desc desc;
    int add_self_loops; /* PyG's default 1 */
    int lin_dst;        /* weights named lin_src/lin_dst (0: lin) */
    int bias, residual;
} gat_layer_info;

typedef struct gat_model {
    int n_layers;
    gat_layer_info info[GAT_MAX_LAYERS];
    pgd_gat *layers[GAT_MAX_LAYERS];
    pgd_gat_act act;      /* between layers (gat.activation; default ELU) */
    const char *act_name; /* "elu", "relu", "none" */
} gat_model;

/* Loads the layers of `src`. A layer is a prefix P with P.att_src [1, H, C] and P.att_dst
 * [1, H, C]; its weight is P.lin.weight [H·C, F], or P.lin_src.weight and P.lin_dst.weight
 * (older PyG, or a bipartite layer); P.bias [out width] and P.res.weight [out width, F] are
 * optional. The order is __metadata__ "gat.layers" (comma-separated prefixes) when present,
 * else the prefixes sorted with their numbers compared as numbers (conv2 before conv10).
 * Per layer from __metadata__: P.concat (true/false; default true, or false when H > 1 and the
 * bias has C elements), P.negative_slope (default 0.2), P.add_self_loops (default true); P.heads,
 * when present, must agree with att_src. "gat.activation" (elu, relu or none; default elu) runs
 * between layers. Each layer's input width must be the previous layer's output width. Every
 * tensor of the file must be consumed; edge features (lin_edge, att_edge) are refused by name.
 * On error *out is NULL. */
int gat_model_load(pgd_ctx *ctx, const model_source *src, gat_model **out, pgd_error **err);
void gat_model_free(gat_model *m);
/* The width of the input and of the output. */
int64_t gat_model_in(const gat_model *m);
int64_t gat_model_out(const gat_model *m);

/* A graph file: x [N, F] (float), edge_index [2, E] (I64), and optionally y [N] (I64 or I32)
 * and test_mask [N] (BOOL or U8); train_mask and val_mask may be present (not read); any other
 * tensor is an error naming it. Labels must lie in 0..2^31-1 (PGD_ERR_FORMAT naming the node).
 * Edge indices are checked against N by pgd_gat_graph_create. */
typedef struct gat_graph_file {
    int64_t n, f, e;
    float *x;
    int64_t *edge_index; /* [2, E] */
    int64_t *y;          /* [N] or NULL */
    uint8_t *test_mask;  /* [N] or NULL */
} gat_graph_file;
int gat_graph_load(const char *path, gat_graph_file *g, pgd_error **err);
void gat_graph_free(gat_graph_file *g);

/* Runs the model on the graph: logits [N, out] (caller's array). With alpha not NULL, *alpha
 * receives the last layer's attention coefficients [*alpha_rows, H] (malloc'd, the caller
 * frees) and *alpha_edges its edge_index [2, *alpha_rows] (malloc'd; may be NULL if not
 * wanted). times (may be NULL) receives [graph build ms, forward ms]. */
int gat_model_run(pgd_ctx *ctx, const gat_model *m, const gat_graph_file *g, float *logits,
                  float **alpha, int64_t **alpha_edges, int64_t *alpha_rows, double times[2],
                  pgd_error **err);

#endif
