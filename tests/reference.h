/* reference.h — plain-C double-precision references for the kernels, used by the suites. Inputs
 * are the float data uploaded to the device; outputs are double, compared with
 * pgd_test_allclose(). Nothing here touches OpenCL. */
#ifndef PAGODA_TEST_REFERENCE_H
#define PAGODA_TEST_REFERENCE_H

#include <stddef.h>
#include <stdint.h>

/* LayerNorm of each of `rows` rows of `cols`: (x - mean) / sqrt(var + eps) * w + b with the
 * biased variance; w and b may both be NULL (identity affine). */
void pgd_ref_layernorm(const float *x, const float *w, const float *b, size_t rows, size_t cols,
                       double eps, double *y);
/* GELU, exact (erf) form. */
void pgd_ref_gelu_erf(const float *x, size_t n, double *y);
/* GELU, tanh approximation. */
void pgd_ref_gelu_tanh(const float *x, size_t n, double *y);
/* x rounded to the nearest IEEE half (ties to even; overflow to ±inf, subnormal halves kept,
 * NaN stays NaN), returned as a float: what vstore_half_rte stores and vload_half reads back. */
float pgd_ref_round_half(float x);
void pgd_ref_relu(const float *x, size_t n, double *y);
/* Row softmax of scale * x. */
void pgd_ref_softmax(const float *x, size_t rows, size_t cols, double scale, double *y);
/* y[r, c] = x[r, c] + bias[c]. */
void pgd_ref_bias_add(const float *x, const float *bias, size_t rows, size_t cols, double *y);
/* Patch embedding: img [B, C, H, W], weight [D, C, P, P], bias [D] or NULL, cls / dist [D] or
 * NULL, pos [T, D] or NULL; out [B, T, D] with T = extra + (H/P)(W/P). */
void pgd_ref_patch_embed(const float *img, size_t B, size_t C, size_t H, size_t W,
                         const float *weight, size_t D, size_t P, const float *bias,
                         const float *cls, const float *dist, const float *pos, double *out);
/* Resize of the grid part of pos [extra + gh*gw, D] to out [extra + gh2*gw2, D] as PyTorch's
 * F.interpolate does for `mode` (a pgd_resize_mode: bicubic with align_corners False or True,
 * antialiased bicubic, or bicubic with Hugging Face's scale_factor); the first `extra` rows are
 * copied. Every mode is separable: out = Wy · grid · Wxᵀ with per-axis weights. */
void pgd_ref_pos_resize(const float *pos, size_t extra, size_t gh, size_t gw, size_t gh2,
                        size_t gw2, size_t D, int mode, double *out);
/* The per-axis weights of that resize: w [out, in], row o the weights of output o on the
 * source indices (clamped border taps added to the border index). */
void pgd_ref_resize_weights(size_t in, size_t out, int mode, double *w);

/* A convolution's geometry for pgd_ref_conv2d (strides, dilations and groups at least 1). */
typedef struct pgd_ref_conv {
    size_t n, h, w, cin, cout, kh, kw, sh, sw, ph, pw, dh, dw, groups;
} pgd_ref_conv;
/* Output height and width of c (PyTorch's floor rule; 0 when the kernel does not fit). */
void pgd_ref_conv_out(const pgd_ref_conv *c, size_t *oh, size_t *ow);
/* y [n, oh, ow, cout] = act(bn(conv(x) + bias) + residual), x NHWC [n, h, w, cin], weight
 * PyTorch's [cout, cin/groups, kh, kw]; bias, residual NULL for none; bn (weight, bias, mean,
 * var, cout each) NULL for none, applied after the convolution in double (not folded); act 0
 * none, 1 ReLU, 2 exact GELU. mag (may be NULL) receives per element the sum of |terms|
 * (|w'·x| over the taps, |b'|, |residual|), the scale of a float evaluation's rounding. */
void pgd_ref_conv2d(const pgd_ref_conv *c, const float *x, const float *weight, const float *bias,
                    const float *const bn[4], double bn_eps, const float *residual, int act,
                    double *y, double *mag);
/* Pools over k x k windows of x NHWC [n, h, w, c] into [n, oh, ow, c], floor rule: max with
 * -inf padding; average with the padding counted (count_include_pad, clipped at the padded
 * edge as PyTorch does). */
void pgd_ref_maxpool2d(const float *x, size_t n, size_t h, size_t w, size_t c, size_t k, size_t s,
                       size_t p, double *y);
void pgd_ref_avgpool2d(const float *x, size_t n, size_t h, size_t w, size_t c, size_t k, size_t s,
                       size_t p, double *y);
/* y [n, c] = mean over h·w of x [n, h, w, c]. */
void pgd_ref_global_avgpool(const float *x, size_t n, size_t h, size_t w, size_t c, double *y);

/* A non-local block (Wang et al. 2018) as tools/golden/make-nonlocal-golden.py's PyTorch module
 * defines it, on x NHWC [b, h, w, c] with inner width ci: θ, φ, g 1x1 convolutions (weights [ci,
 * c], biases [ci] or NULL), φ and g (and for the Gaussian form the keys x) max-pooled 2x2 stride 2
 * (floor) when subsampling, f by mode (a pgd_nonlocal_mode: softmax of θ·φ, softmax of x·x, θ·φ /
 * N', ReLU(w_θ·θ + w_φ·φ) / N' with concat_w [2ci]), y = f·g, z = x + BN(W·y + W_b) with W [c, ci],
 * W_b [c] or NULL and bn = {γ, β, mean, var} (bn[0] NULL: none). */
typedef struct pgd_ref_nonlocal {
    size_t b, h, w, c, ci;
    int mode, subsample;
    const float *theta_w, *theta_b, *phi_w, *phi_b, *g_w, *g_b, *w_w, *w_b;
    const float *bn[4];
    double bn_eps;
    const float *concat_w;
} pgd_ref_nonlocal;
/* z [b, h, w, c] as above. aff (NULL: not wanted) receives [b, N'] the row f(q, ·) of query
 * position q = qi·w + qj. mag (may be NULL) receives per element of z the scale of a float
 * evaluation's rounding: |x| + |b'| + Σ_k |W'[c, k]|·Σ_j |f|·|g_jk|, with |f| the sum of the
 * absolute terms of f for the dot and concatenation forms. */
void pgd_ref_nonlocal_block(const pgd_ref_nonlocal *p, const float *x, size_t q, double *z,
                            double *aff, double *mag);

/* A matrix inside a float array: element (b, r, c) of the stored matrix is at
 * off + b·batch_stride + r·ld + c (pgd_matrix's addressing). */
typedef struct pgd_ref_mat {
    const float *p;
    int64_t off, ld, batch_stride;
} pgd_ref_mat;
/* out(b, m, n) = act(alpha·Σ_k op(A)(b, m, k)·op(B)(b, k, n) + beta·C0(b, m, n) + bias[n])
 * + R(b, m, n), op(A) M x K (stored K x M with ta), op(B) K x N (stored N x K with tb). C0 is
 * read only when beta != 0; bias and R may be NULL; act 0 none, 1 ReLU, 2 exact GELU. C0, R and
 * out are addressed with c's offset, ld and batch stride (c.p unused); out's other elements are
 * left alone. */
void pgd_ref_gemm_strided(int ta, int tb, int64_t M, int64_t N, int64_t K, int64_t batch,
                          double alpha, pgd_ref_mat a, pgd_ref_mat b, double beta, const float *C0,
                          pgd_ref_mat c, const float *bias, int act, const float *R, double *out);

/* Attention O = softmax(Q·Kᵀ·scale + mask)·V for the views of `a` over q, k, v and the mask m
 * (NULL when a->mask.t is NULL): O as doubles at O's view positions in `o`, and, with p not
 * NULL, the probabilities of a's probs rows densely as pgd_attention writes them. A causally
 * hidden key gets weight 0; a fully masked row gives zeros. NaN follows PyTorch: a NaN or +inf
 * score makes its row NaN (probabilities too), a NaN in V reaches every row, even through a
 * weight of 0. Hard modes (a->mode) as pgd_attention defines them: top-k keeps the k highest
 * scores (ties to the lower key index), sample picks the first key whose cumulative probability
 * (in double) exceeds pgd_attention_uniform(); there a NaN in V reaches only kept keys' rows. */
struct pgd_attention_args;
void pgd_ref_attention(const struct pgd_attention_args *a, const float *q, const float *k,
                       const float *v, const float *m, double *o, double *p);

/* One GATConv layer as PyTorch Geometric computes it in eval mode, on x [n, f] and the edges
 * edge_index [2, e] (int64, sources then destinations): h = x·Wᵀ (w [heads·c, f]; h_dst from
 * w_dst when not NULL), e_ij = LeakyReLU(att_src·h_j + att_dst·h_i, slope) per head, α the
 * softmax of e over each node's incoming edges, out_i = Σ α_ij h_j, heads concatenated or
 * averaged, + x·res_wᵀ (NULL: none), + bias (NULL: none), act 0 none, 1 ELU, 2 ReLU. With
 * add_loops, PyG's rule: self loops dropped, one appended per node. y [n, out width]; alpha
 * (NULL: not wanted) [e', heads] in that edge order; mag (may be NULL) per element of y the
 * sum of |terms| (Σ α|h| per head, averaged like y, + |res| + |bias|). Returns e'. */
typedef struct pgd_ref_gat {
    size_t n, f, c, heads;
    int concat, add_loops, act;
    double slope;
    const float *w, *w_dst, *att_src, *att_dst, *bias, *res_w;
} pgd_ref_gat;
size_t pgd_ref_gat_layer(const pgd_ref_gat *p, const float *x, const int64_t *edge_index, size_t e,
                         double *y, double *alpha, double *mag);

/* ---- broadcasting elementwise ops and reductions (pgd_binary, pgd_unary, pgd_reduce) ---- */

/* The flat index, in a tensor of rank nd and shape `shape`, of the element that NumPy's
 * broadcasting reads for flat index i of an output of rank ny and shape yshape. */
size_t pgd_ref_bcast_index(size_t i, int ny, const int64_t *yshape, int nd, const int64_t *shape);
/* a op b in double for a pgd_binary_op (max and min NaN when either is NaN). */
double pgd_ref_binary(int op, double a, double b);
/* op(x) in double for a pgd_unary_op (GELU and SiLU of -inf: 0). */
double pgd_ref_unary(int op, double x);
/* op (a pgd_reduce_op) of x [shape] over the dims with mask[d] set, into y in row-major order of
 * the kept dims (argmax / argmin: the first best index over the reduced dims in row-major
 * order, NaN counting as the best). mag (may be NULL) receives per output the sum of |x|
 * (over the count for mean), the scale of a float sum's rounding. */
void pgd_ref_reduce(int op, const float *x, int nd, const int64_t *shape, const int *mask,
                    double *y, double *mag);

/* Layout references (pgd_transpose ... pgd_space_to_depth): y by index arithmetic over y's
 * coordinates, written without the launchers' stride geometry. */
void pgd_ref_transpose(const double *x, int nd, const int64_t *shape, const int *perm, double *y);
/* The indices a Python slice start:end:step takes of an axis of n (into idx when not NULL);
 * returns their count. */
int64_t pgd_ref_slice_indices(int64_t n, int64_t start, int64_t end, int64_t step, int64_t *idx);
/* y [yshape] = x at the coordinates idx[d][...] along each dim d. */
void pgd_ref_slice(const double *x, int nd, const int64_t *shape, int64_t *const *idx,
                   const int64_t *yshape, double *y);
void pgd_ref_concat(int n, const double *const *xs, int nd, const int64_t *const *shapes, int axis,
                    double *y);
void pgd_ref_gather(const double *x, int nd, const int64_t *shape, int axis, const int64_t *idx,
                    int idx_nd, const int64_t *idx_shape, double *y);
void pgd_ref_pad(const double *x, int nd, const int64_t *shape, const int64_t *pads, int mode,
                 double value, double *y);
void pgd_ref_depth_to_space(const double *x, const int64_t *shape, int block, int crd, double *y);
void pgd_ref_space_to_depth(const double *x, const int64_t *shape, int block, double *y);

/* Normalisation references in double: x viewed [outer, n, inner] along the softmax axis,
 * [rows, cols] groups for LayerNorm and RMSNorm (w, b NULL: none; mean, rstd NULL: not
 * wanted), [n, channels, inner] for batch and group norm. */
void pgd_ref_softmax_axis(const float *x, int64_t outer, int64_t n, int64_t inner, double scale,
                          int log_form, double *y);
void pgd_ref_layernorm_groups(const float *x, int64_t rows, int64_t cols, const float *w,
                              const float *b, double eps, double *y, double *mean, double *rstd);
void pgd_ref_rmsnorm(const float *x, int64_t rows, int64_t cols, const float *w, double eps,
                     double *y);
void pgd_ref_batch_norm(const float *x, int64_t n, int64_t channels, int64_t inner,
                        const float *mean, const float *var, const float *w, const float *b,
                        double eps, double *y);
void pgd_ref_group_norm(const float *x, int64_t n, int64_t channels, int64_t inner, int groups,
                        const float *w, const float *b, double eps, double *y);

/* numpy.matmul in double: a (na dims, shape sa) times b (nb, sb), 1-D operands promoted;
 * y row-major in the result's shape. */
void pgd_ref_matmul(const float *a, int na, const int64_t *sa, const float *b, int nb,
                    const int64_t *sb, double *y);

/* pgd_pool2d in double on x [n, h, w, c] (NHWC) into y [n, oh, ow, c]; idx (may be NULL) the
 * max pool's indices h·W + w. */
void pgd_ref_pool2d(const float *x, int64_t n, int64_t h, int64_t w, int64_t c,
                    const pgd_pool_desc *d, int64_t oh, int64_t ow, double *y, double *idx);

#endif
