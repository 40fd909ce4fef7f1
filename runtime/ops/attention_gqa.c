/* attention_gqa.c — grouped-query and multi-query attention (fewer key/value heads than query
 * heads) on the fused kernels without copying K or V: query head h reads key/value head
 * h / (heads / kv_heads), as PyTorch's scaled_dot_product_attention(enable_gqa=True) and
 * repeat_interleave do. The query heads that share a key/value head's position g in their
 * group are one strided view (offset g heads, head stride `group` heads), so the call is
 * `group` launches of the ordinary fused attention over kv_heads heads each. */
#include <string.h>

#include "internal.h"

pgd_status pgd_attention_gqa(pgd_ctx *ctx, const pgd_attention_args *a, int64_t kv_heads,
                             pgd_error **err)
{
    if (!a)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT, "attention: args is NULL");
    if (kv_heads < 1 || a->heads < 1 || a->heads % kv_heads)
        return pgd__error_set(err, PGD_ERR_INVALID_ARGUMENT,
                              "attention: %lld key/value heads do not divide the %lld query "
                              "heads",
                              (long long)kv_heads, (long long)a->heads);
    if (kv_heads == a->heads)
        return pgd_attention(ctx, a, err);
    if (a->probs)
        return pgd__error_set(err, PGD_ERR_UNSUPPORTED,
                              "attention: probabilities with grouped key/value heads (%lld query "
                              "heads, %lld key/value heads): give probs NULL",
                              (long long)a->heads, (long long)kv_heads);
    if (a->mode != PGD_ATTENTION_SOFT)
        return pgd__error_set(err, PGD_ERR_UNSUPPORTED,
                              "attention: hard attention (top-k, sampled) with grouped key/value "
                              "heads is not supported");
    int64_t group = a->heads / kv_heads;
    int rc = PGD_OK;
    for (int64_t g = 0; g < group && !rc; g++) {
        pgd_attention_args s = *a;
        s.heads = kv_heads;
        s.q.offset += g * a->q.head_stride;
        s.q.head_stride *= group;
        s.o.offset += g * a->o.head_stride;
        s.o.head_stride *= group;
        if (s.mask.t && a->mask.head_stride) {
            s.mask.offset += g * a->mask.head_stride;
            s.mask.head_stride *= group;
        }
        rc = pgd_attention(ctx, &s, err);
    }
    return rc;
}
