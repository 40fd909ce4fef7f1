/* graph_run.c — one forward pass: the nodes in order, host values evaluated on the host (and
 * kept while the input shapes stay the same), device values as strided views over pooled
 * buffers released after their last reader, fused groups run at their last member. */
#include "graph.h"

#include <stdlib.h>
#include <string.h>

/* ---- views ------------------------------------------------------------------------------ */

static int64_t view_numel(const gview *v)
{
    int64_t n = 1;
    for (int d = 0; d < v->nd; d++)
        n *= v->dim[d];
    return n;
}

int pgd__gview_new(pgd_graph *g, int nd, const int64_t *dim, gview *v, pgd_error **err)
{
    memset(v, 0, sizeof *v);
    gbuf *b = calloc(1, sizeof *b);
    if (!b)
        return pgd_error_set(err, PGD_ERR_OUT_OF_HOST_MEMORY, "out of host memory");
    int64_t one = 1;
    int rc = pgd_tensor_create(g->ctx, nd ? nd : 1, nd ? dim : &one, &b->t, err);
    if (rc) {
        free(b);
        return rc;
    }
    b->refs = 1;
    v->b = b;
    v->nd = nd;
    int64_t s = 1;
    for (int d = nd - 1; d >= 0; d--) {
        v->dim[d] = dim[d];
        v->st[d] = s;
        s *= dim[d];
    }
    return PGD_OK;
}

void pgd__gview_drop(gview *v)
{
    if (v->b && --v->b->refs == 0) {
        pgd_tensor_destroy(v->b->t);
        free(v->b);
    }
    v->b = NULL;
}

/* The dims of v ordered by decreasing stride (ties: the earlier dim first) into perm. */
static void stride_order(const gview *v, int *perm)
{
    for (int d = 0; d < v->nd; d++)
        perm[d] = d;
    for (int i = 1; i < v->nd; i++)
        for (int j = i; j > 0; j--) {
            int a = perm[j - 1], b = perm[j];
            if (v->st[b] > v->st[a] || (v->st[b] == v->st[a] && b < a)) {
                perm[j - 1] = b;
                perm[j] = a;
            }
        }
}

/* v covers its whole buffer, each element once, in some order of its dims. */
int pgd__gview_dense(const gview *v)
{
    if (!v->b || v->off != 0 || view_numel(v) != pgd_tensor_get_numel(v->b->t))
        return 0;
    int perm[PGD_MAX_DIMS];
    stride_order(v, perm);
    int64_t s = 1;
    for (int k = v->nd - 1; k >= 0; k--) {
        int d = perm[k];
        if (v->dim[d] != 1 && v->st[d] != s)
            return 0;
        s *= v->dim[d];
    }
    return 1;
}

/* v is its buffer in row-major order (size-1 dims' strides do not matter). */
int pgd__gview_contiguous(const gview *v)
{
    if (!v->b || v->off != 0 || view_numel(v) != pgd_tensor_get_numel(v->b->t))
        return 0;
    int64_t s = 1;
    for (int d = v->nd - 1; d >= 0; d--) {
        if (v->dim[d] != 1 && v->st[d] != s)
            return 0;
        s *= v->dim[d];
    }
    return 1;
}

/* The buffer's tensor shaped as v (v must be contiguous). */
pgd_tensor *pgd__gview_tensor(const gview *v)
{
    int64_t one = 1;
    if (pgd_tensor_reshape(v->b->t, v->nd ? v->nd : 1, v->nd ? v->dim : &one, NULL))
        return NULL;
    return v->b->t;
}

int pgd__gview_materialise(pgd_graph *g, const gview *v, gview *out, pgd_error **err)
{
    if (pgd__gview_contiguous(v)) {
        *out = *v;
        out->b->refs++;
        return PGD_OK;
    }
    gview y;
    int rc = pgd__gview_new(g, v->nd, v->dim, &y, err);
    if (rc)
        return rc;
    int64_t n = pgd_tensor_get_numel(v->b->t);
    pgd_tensor_reshape(v->b->t, 1, &n, NULL);
    rc =
        pgd_copy_strided(g->ctx, v->b->t, v->off, v->nd, v->dim, v->st, pgd__gview_tensor(&y), err);
    if (rc) {
        pgd__gview_drop(&y);
        return rc;
    }
    *out = y;
    return PGD_OK;
}

/* NumPy's reshape without a copy: each group of old dims that multiplies to a group of new dims
 * must be walked with uniform steps. 0 when that is not possible (the caller copies). */
int pgd__gview_reshape(const gview *v, int nd, const int64_t *dim, gview *out)
{
    int64_t od[PGD_MAX_DIMS], os[PGD_MAX_DIMS], ns[PGD_MAX_DIMS];
    int on = 0;
    for (int d = 0; d < v->nd; d++)
        if (v->dim[d] != 1) {
            od[on] = v->dim[d];
            os[on++] = v->st[d];
        }
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= dim[d];
    if (n != view_numel(v) || nd > PGD_MAX_DIMS)
        return 0;
    if (n == 0) {
        *out = *v;
        out->nd = nd;
        for (int d = 0; d < nd; d++)
            out->dim[d] = dim[d], out->st[d] = 0;
        return 1;
    }
    int oi = 0, ni = 0;
    while (ni < nd || oi < on) {
        if (ni < nd && dim[ni] == 1) {
            ns[ni++] = 0;
            continue;
        }
        if (oi >= on || ni >= nd)
            return 0;
        int o0 = oi, n0 = ni;
        int64_t po = od[oi++], pn = dim[ni++];
        while (po != pn) {
            if (po < pn) {
                if (oi >= on)
                    return 0;
                po *= od[oi++];
            } else {
                if (ni >= nd)
                    return 0;
                pn *= dim[ni++];
            }
        }
        for (int k = o0; k < oi - 1; k++)
            if (os[k] != os[k + 1] * od[k + 1])
                return 0;
        int64_t s = os[oi - 1];
        for (int k = ni - 1; k >= n0; k--) {
            ns[k] = s;
            s *= dim[k];
        }
    }
    *out = *v;
    out->nd = nd;
    for (int d = 0; d < nd; d++)
        out->dim[d] = dim[d], out->st[d] = ns[d];
    return 1;
}

/* A host tensor uploaded as a device view of the given dims (its element count). */
int pgd__graph_const_tensor(pgd_graph *g, const ghost *h, int nd, const int64_t *dim, gview *out,
                            pgd_error **err)
{
    if (!h->f)
        return pgd_error_set(err, PGD_ERR_UNSUPPORTED,
                             "%s: an integer tensor is used as device data (Pagoda computes in "
                             "float32)",
                             g->path);
    int rc = pgd__gview_new(g, nd, dim, out, err);
    if (!rc && view_numel(out) != h->n)
        rc = pgd_error_set(err, PGD_ERR_INTERNAL, "constant of %lld elements as %lld",
                           (long long)h->n, (long long)view_numel(out));
    if (!rc)
        rc = pgd_tensor_upload(pgd__gview_tensor(out), h->f, err);
    if (rc)
        pgd__gview_drop(out);
    return rc;
}

/* Input k of n as a device view: a device value's view (a new reference), or a host value
 * uploaded. */
int pgd__graph_input_view(pgd_graph *g, gnode *n, int k, gview *out, pgd_error **err)
{
    if (k >= n->nin || n->in[k] < 0)
        return pgd__graph_fail(err, PGD_ERR_FORMAT, g, n, "input %d is missing", k);
    gvalue *x = &g->values[n->in[k]];
    if (x->kind == V_DEVICE) {
        if (!x->v.b)
            return pgd__graph_fail(err, PGD_ERR_INTERNAL, g, n, "input '%s' is not computed",
                                   x->name);
        *out = x->v;
        out->b->refs++;
        return PGD_OK;
    }
    if (!x->h)
        return pgd__graph_fail(err, PGD_ERR_INTERNAL, g, n, "input '%s' is not known", x->name);
    if (!x->h->f) /* named here: const_tensor's own message cannot say which node and value */
        return pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, n,
                               "input '%s' is an integer tensor (type %d) used as device data "
                               "(Pagoda computes in float32)",
                               x->name, x->h->dtype);
    return pgd__graph_const_tensor(g, x->h, x->h->nd, x->h->dim, out, err);
}

/* ---- the pass --------------------------------------------------------------------------- */

void pgd__graph_release_all(pgd_graph *g)
{
    for (int i = 0; g->values && i < g->nvalues; i++)
        if (g->values[i].kind == V_DEVICE)
            pgd__gview_drop(&g->values[i].v);
}

static int same_shapes(pgd_graph *g, const pgd_tensor *const *inputs)
{
    if (!g->shapes_known)
        return 0;
    for (int i = 0; i < g->ninputs; i++) {
        if (pgd_tensor_get_ndim(inputs[i]) != g->in_nd[i])
            return 0;
        for (int d = 0; d < g->in_nd[i]; d++)
            if (pgd_tensor_get_dim(inputs[i], d) != g->in_dim[i][d])
                return 0;
    }
    return 1;
}

static int bind_inputs(pgd_graph *g, const pgd_tensor *const *inputs, pgd_error **err)
{
    for (int i = 0; i < g->ninputs; i++) {
        gvalue *x = &g->values[g->inputs[i]];
        const pgd_tensor *t = inputs[i];
        if (!t)
            return pgd__graph_fail(err, PGD_ERR_INVALID_ARGUMENT, g, NULL, "input '%s' is NULL",
                                   x->name);
        gview v;
        int nd = pgd_tensor_get_ndim(t);
        int64_t dim[PGD_MAX_DIMS];
        for (int d = 0; d < nd; d++)
            dim[d] = pgd_tensor_get_dim(t, d);
        /* the caller keeps its tensor: the graph works on a copy it may release early */
        int rc = pgd__gview_new(g, nd, dim, &v, err);
        if (!rc && pgd_tensor_get_numel(t))
            rc = pgd_tensor_copy(t, 0, v.b->t, 0, pgd_tensor_get_numel(t), err);
        if (rc) {
            pgd__gview_drop(&v);
            return rc;
        }
        x->v = v;
        g->in_nd[i] = nd;
        memcpy(g->in_dim[i], dim, sizeof dim);
    }
    return PGD_OK;
}

/* Drops the device values whose last reader has run (graph outputs are kept). */
static void release_after(pgd_graph *g, gnode *n, int oi)
{
    for (int k = 0; k < n->nin; k++) {
        int vi = n->in[k];
        if (vi < 0)
            continue;
        gvalue *x = &g->values[vi];
        if (x->kind == V_DEVICE && x->last_use <= oi && !x->graph_out)
            pgd__gview_drop(&x->v);
    }
    for (int k = 0; k < n->nout; k++) {
        int vi = n->out[k];
        if (vi >= 0 && g->values[vi].kind == V_DEVICE && !g->values[vi].uses &&
            !g->values[vi].graph_out)
            pgd__gview_drop(&g->values[vi].v);
    }
}

static int run_nodes(pgd_graph *g, int keep_host, pgd_error **err)
{
    for (int oi = 0; oi < g->nnodes; oi++) {
        gnode *n = &g->nodes[g->order[oi]];
        int rc = PGD_OK;
        if (n->host) {
            if (!keep_host)
                rc = pgd__graph_host_eval(g, n, err);
        } else if (n->fuse) {
            gfuse *f = &g->fuses[n->fuse - 1];
            if (f->tail == g->order[oi])
                rc = pgd__graph_exec_fused(g, f, err);
        } else {
            rc = pgd__graph_exec_node(g, n, err);
        }
        if (rc) /* the op API's message, prefixed with the file and node */
            return pgd__graph_error_context(g, n, rc, err);
        release_after(g, n, oi);
    }
    return PGD_OK;
}

int pgd__graph_run(pgd_graph *g, const pgd_tensor *const *inputs, pgd_tensor **outputs,
                   pgd_error **err)
{
    int keep_host = same_shapes(g, inputs);
    g->flops = 0;
    g->steps = 0;
    int rc = bind_inputs(g, inputs, err);
    if (!rc) {
        g->shapes_known = 0;
        rc = run_nodes(g, keep_host, err);
        g->shapes_known = !rc;
    }
    for (int i = 0; !rc && i < g->noutputs; i++) {
        gvalue *y = &g->values[g->outputs[i]];
        gview m;
        if (y->kind != V_DEVICE && y->h && !y->h->f) {
            rc = pgd__graph_fail(err, PGD_ERR_UNSUPPORTED, g, NULL,
                                 "output '%s' is an integer tensor (type %d) computed on the "
                                 "host: Pagoda's outputs are float32 device tensors",
                                 y->name, y->h->dtype);
        } else if (y->kind != V_DEVICE) {
            rc = y->h ? pgd__graph_const_tensor(g, y->h, y->h->nd, y->h->dim, &m, err)
                      : pgd__graph_fail(err, PGD_ERR_INTERNAL, g, NULL, "output '%s' unknown",
                                        y->name);
        } else if (!y->v.b) {
            /* an op that leaves one of its outputs unmade must have refused; never read NULL */
            rc = pgd__graph_fail(err, PGD_ERR_INTERNAL, g, NULL, "output '%s' was not computed",
                                 y->name);
        } else {
            gview tmp;
            /* a fresh buffer the caller owns, never one shared with another output */
            rc = pgd__gview_new(g, y->v.nd, y->v.dim, &tmp, err);
            if (!rc) {
                int64_t n = pgd_tensor_get_numel(y->v.b->t);
                pgd_tensor *tt = pgd__gview_tensor(&tmp);
                pgd_tensor_reshape(y->v.b->t, 1, &n, NULL);
                if (!tmp.nd) /* a scalar: the copy wants [] where the new buffer is [1] */
                    pgd_tensor_reshape(tt, 0, NULL, NULL);
                rc = pgd_copy_strided(g->ctx, y->v.b->t, y->v.off, y->v.nd, y->v.dim, y->v.st, tt,
                                      err);
                if (rc)
                    pgd__gview_drop(&tmp);
            }
            m = tmp;
        }
        if (!rc) {
            if (!m.nd) /* a scalar output is [] for the caller, not the buffer's [1] */
                pgd_tensor_reshape(m.b->t, 0, NULL, NULL);
            outputs[i] = m.b->t;
            free(m.b); /* the tensor now belongs to the caller */
        }
    }
    if (rc)
        for (int i = 0; i < g->noutputs; i++) {
            pgd_tensor_destroy(outputs[i]);
            outputs[i] = NULL;
        }
    pgd__graph_release_all(g);
    return rc;
}
