/* Causal self-attention over one layer's kv cache, and the softmax it (and the sampler) uses.
 *
 * attention is the fast path (SIMD dot products four at a time, four queries sharing each loaded
 * key and value, heads in parallel); attention_ref is the same equation in plain scalar C, for the
 * reference forward pass (reference.c) and the tests. Filling the cache, RoPE and the
 * projections around attention are model.c's.
 */
#ifndef ATTENTION_H
#define ATTENTION_H

/* One layer's kv cache and the shape of its heads: position t's keys are the kv_dim =
 * n_kv_heads * head_size floats at key_cache + t * kv_dim (kv head g at offset g * head_size), its
 * values likewise in value_cache; query head h reads kv head h / (n_heads / n_kv_heads). att is
 * scratch for the attention weights, (n_heads, 4, seq_len). */
typedef struct {
    const float *key_cache, *value_cache; /* (seq_len, kv_dim) */
    float *att;
    int n_heads, n_kv_heads, head_size, seq_len;
} LayerCache;

/* Causal multi-head attention (Vaswani et al. 2017, eq. 1) of the positions pos0 .. pos0 +
 * batch - 1: query b (row b of q: (batch, n_heads * head_size)) attends over the cached positions
 * 0..pos0 + b, whose keys and values must be in the cache:
 *   out_h = sum_t softmax_t(q_h . k_t / sqrt(head_size)) v_t
 * into row b of out (same shape as q). Heads in parallel, one parallel region for the whole batch
 * (none below matmul.h's PARALLEL_MIN_WORK multiply-adds). Each output is the same bits whatever
 * the batch. Requires pos0 + batch <= seq_len (unchecked). */
void attention(const LayerCache *lc, const float *q, float *out, int pos0, int batch);

/* The same for one query row q at position pos, in plain C: each score a float sum over the head
 * in order, the softmax of expf, each output a sum over t in order. */
void attention_ref(const LayerCache *lc, const float *q, float *out, int pos);

/* In-place softmax over x (n >= 1): x[i] = exp(x[i] - max) / sum_j exp(x[j] - max), the max
 * subtracted so that no exp overflows, as llama2.c's softmax, which the attention weights and the
 * sampler both use; exp is simd.h's vec_exp (within 1 ulp of expf; expf itself in the portable
 * build) and the sum goes in vector lanes, so that the weights may differ from llama2.c's in the
 * last bit. A NaN in x makes every x[i] NaN. */
void softmax(float *x, int n);

#endif
