/* Causal self-attention over the kv cache, fast and plain, and softmax (attention.h). */
#include "attention.h"

#include <math.h>
#include <stddef.h>

#include "matmul.h" /* PARALLEL_MIN_WORK */
#include "simd.h"

/* The largest of x[0..n-1] (n >= 1): whole vectors by lanes, then the lanes and the rest. A NaN
 * may or may not come out (max picks by position), but any NaN in x makes softmax all NaN. */
static float max_of(const float *x, int n) {
    float max = x[0];
    int i = 0;
    if (n >= VEC_WIDTH) {
        vecf m = vec_load(x);
        for (i = VEC_WIDTH; i + VEC_WIDTH <= n; i += VEC_WIDTH) m = vec_max(m, vec_load(x + i));
        float lanes[VEC_WIDTH];
        vec_store(lanes, m);
        for (int j = 0; j < VEC_WIDTH; j++)
            if (lanes[j] > max) max = lanes[j];
    }
    for (; i < n; i++)
        if (x[i] > max) max = x[i];
    return max;
}

void softmax(float *x, int n) {
    float max = max_of(x, n);
    vecf sum = vec_zero();
    for (int i = 0; i < n; i += VEC_WIDTH) {
        vec_store_upto(x + i, vec_exp(vec_sub(vec_load_upto(x + i, n - i), vec_set1(max))), n - i);
        sum = vec_add(sum, vec_load_upto(x + i, n - i)); /* the stored lanes only */
    }
    vecf total = vec_set1(vec_sum(sum));
    for (int i = 0; i < n; i += VEC_WIDTH) /* divided lane by lane: the bits of x[i] / total */
        vec_store_upto(x + i, vec_div(vec_load_upto(x + i, n - i), total), n - i);
}

/* ----------------------------------------------------------------------------
 * The plain path */

/* softmax as llama2.c writes it: the max, expf, the sum in order, the division. */
static void softmax_ref(float *x, int n) {
    float max = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] > max) max = x[i];
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    for (int i = 0; i < n; i++) x[i] /= sum;
}

void attention_ref(const LayerCache *lc, const float *q, float *out, int pos) {
    int head_size = lc->head_size, kv_dim = lc->n_kv_heads * head_size;
    for (int h = 0; h < lc->n_heads; h++) {
        const float *q_h = q + h * head_size;
        float *out_h = out + h * head_size;
        int kv_offset = h / (lc->n_heads / lc->n_kv_heads) * head_size;
        float *att = lc->att + (size_t)h * 4 * lc->seq_len;
        for (int t = 0; t <= pos; t++) {
            const float *k = lc->key_cache + (size_t)t * kv_dim + kv_offset;
            float score = 0.0f;
            for (int i = 0; i < head_size; i++) score += q_h[i] * k[i];
            att[t] = score / sqrtf((float)head_size);
        }
        softmax_ref(att, pos + 1);
        for (int i = 0; i < head_size; i++) out_h[i] = 0.0f;
        for (int t = 0; t <= pos; t++) {
            const float *v = lc->value_cache + (size_t)t * kv_dim + kv_offset;
            for (int i = 0; i < head_size; i++) out_h[i] += att[t] * v[i];
        }
    }
}

/* ----------------------------------------------------------------------------
 * The fast path */

/* out[i] = a[i] . b[i] over n values for i < 4: four query-key pairs, four queries with one key
 * (prefill) or one query with four keys (decode), summed in vector lanes (simd.h) and reduced
 * together. A pair's sum comes out the same bits in any company: its lanes see the same adds, and
 * vec_sum4 reduces each alike. */
static ALWAYS_INLINE void dot4(const float *const a[4], const float *const b[4], int n,
                               float out[4]) {
    vecf acc[4];
    for (int i = 0; i < 4; i++) acc[i] = vec_zero();
    int j = 0;
    for (; j + VEC_WIDTH <= n; j += VEC_WIDTH)
        for (int i = 0; i < 4; i++)
            acc[i] = vec_fmadd(vec_load(a[i] + j), vec_load(b[i] + j), acc[i]);
    if (j < n)
        for (int i = 0; i < 4; i++)
            acc[i] = vec_fmadd(vec_load_partial(a[i] + j, n - j), vec_load_partial(b[i] + j, n - j),
                               acc[i]);
    vec_sum4(acc[0], acc[1], acc[2], acc[3], out);
}

/* One kv head's part of a layer's cache: position t's key is keys + t * kv_dim, its value
 * values + t * kv_dim, head_size floats each; and the weights of up to 4 queries, query i's
 * weight of position t at att[i * stride + t]. */
typedef struct {
    const float *keys, *values;
    int kv_dim, head_size;
    float *att;
    int stride;
} HeadCache;

/* Columns c .. c + width * VEC_WIDTH - 1 of a head's values, a pass of mix_values: n[h] floats
 * of vector h; `whole`: every vector is whole (else the second of two may be short or empty,
 * n[1] < 1). */
typedef struct {
    const HeadCache *hc;
    int c, width, whole;
    int n[2];
} Columns;

enum { MIX_WIDEST = 8 }; /* vectors of one query's widest pass (mix_values) */

/* acc[i][h] += weight of position t for query i * vector h of value t's columns, for the queries
 * i from first_query to nq - 1: those that attend to position t. */
static ALWAYS_INLINE void mix_position(vecf acc[4][MIX_WIDEST], const Columns *cols, int t,
                                       int first_query, int nq) {
    const HeadCache *hc = cols->hc;
    const float *v = hc->values + cols->c + (size_t)t * hc->kv_dim;
    vecf value[MIX_WIDEST];
    if (cols->whole) {
        for (int h = 0; h < cols->width; h++) value[h] = vec_load(v + h * VEC_WIDTH);
    } else {
        value[0] = vec_load_upto(v, cols->n[0]);
        value[1] = cols->n[1] > 0 ? vec_load_upto(v + VEC_WIDTH, cols->n[1]) : vec_zero();
    }
    for (int i = 0; i < nq; i++) { /* from 0, so that every acc[i] is a register, not memory */
        if (i < first_query) continue;
        vecf weight = vec_set1(hc->att[(size_t)i * hc->stride + t]);
        for (int h = 0; h < cols->width; h++) acc[i][h] = vec_fmadd(weight, value[h], acc[i][h]);
    }
}

/* One pass of mix_values over the columns cols (nq, cols->width and cols->whole constants once
 * inlined): out[i]'s columns = the sum over t <= first_pos + i of query i's weight of t * value t,
 * the width * nq sums in registers, in the order of t. */
static ALWAYS_INLINE void mix_columns(const Columns *cols, int nq, int first_pos,
                                      float *const out[4]) {
    vecf acc[4][MIX_WIDEST];
    for (int i = 0; i < nq; i++)
        for (int h = 0; h < cols->width; h++) acc[i][h] = vec_zero();
    int t = 0;
    for (; t <= first_pos; t++) mix_position(acc, cols, t, 0, nq);
    for (; t <= first_pos + nq - 1; t++) mix_position(acc, cols, t, t - first_pos, nq);
    for (int i = 0; i < nq; i++)
        for (int h = 0; h < cols->width; h++) {
            int n = cols->whole ? VEC_WIDTH : cols->n[h];
            if (n > 0) vec_store_upto(out[i] + cols->c + h * VEC_WIDTH, acc[i][h], n);
        }
}

/* out[i] = the sum over t <= first_pos + i of att[i * stride + t] * value t (head_size each),
 * for the nq (1 or 4, a constant once inlined) queries, in passes over the head's columns, each
 * value vector loaded once a pass for all queries. Four queries take two vectors a pass (2 x 4
 * sums); one query takes 8 and 4 while they fit, then two, so that either way about 8
 * independent chains of multiply-adds keep the FMA pipes busy through their latency (one query's
 * two chains had waited on it: build/attend, one thread, medians of 7 to 15 alternating rounds,
 * new time / old: 110M's heads, 12 of 64, 0.83 at positions 70 and 500; 32 of 128 at 500, 0.58;
 * 15M's, 6 of 48, a pass of 4 then of 2, level, 0.95 and 1.00 at 70 and 200). Every query
 * attends to the positions up to first_pos, and query i to the next i (causal): two loops, so
 * that the first, nearly all of the work, tests no position. Each sum adds its terms in the order
 * of t, as one query alone does: the same bits in decode and prefill. */
static ALWAYS_INLINE void mix_values(const HeadCache *hc, int nq, int first_pos,
                                     float *const out[4]) {
    int c = 0;
    if (nq == 1) {
        for (; c + MIX_WIDEST * VEC_WIDTH <= hc->head_size; c += MIX_WIDEST * VEC_WIDTH)
            mix_columns(&(Columns){hc, c, MIX_WIDEST, 1, {0}}, 1, first_pos, out);
        for (; c + 4 * VEC_WIDTH <= hc->head_size; c += 4 * VEC_WIDTH)
            mix_columns(&(Columns){hc, c, 4, 1, {0}}, 1, first_pos, out);
    }
    for (; c < hc->head_size; c += 2 * VEC_WIDTH)
        mix_columns(&(Columns){hc, c, 2, 0, {hc->head_size - c, hc->head_size - c - VEC_WIDTH}}, nq,
                    first_pos, out);
}

/* Causal attention of nq (1 or 4, a constant once inlined) query heads q[i] at positions
 * first_pos + i over the cached positions 0..first_pos + i, into out[i] (head_size each): scores
 * q . k / sqrt(head_size), softmax, the values mixed by the weights (hc->att: nq rows, scratch). */
static ALWAYS_INLINE void attend(const HeadCache *hc, const float *const q[4], float *const out[4],
                                 int nq, int first_pos) {
    float sqrt_head_size = sqrtf((float)hc->head_size); /* divided by: rounds as llama2.c */
    float scores[4], *att = hc->att;
    if (nq == 1) { /* one query, four keys at a time (the missing ones of the last four repeat) */
        const float *qs[4] = {q[0], q[0], q[0], q[0]};
        for (int t = 0; t <= first_pos; t += 4) {
            int nk = first_pos + 1 - t < 4 ? first_pos + 1 - t : 4;
            const float *keys[4];
            for (int i = 0; i < 4; i++)
                keys[i] = hc->keys + (size_t)(t + (i < nk ? i : 0)) * hc->kv_dim;
            dot4(qs, keys, hc->head_size, scores);
            for (int i = 0; i < nk; i++) att[t + i] = scores[i] / sqrt_head_size;
        }
    } else { /* four queries, one key at a time, up to the last query's position: the scores of
              * the earlier queries past their own positions are computed but never used */
        for (int t = 0; t <= first_pos + 3; t++) {
            const float *k = hc->keys + (size_t)t * hc->kv_dim, *keys[4] = {k, k, k, k};
            dot4(q, keys, hc->head_size, scores);
            for (int i = 0; i < 4; i++)
                att[(size_t)i * hc->stride + t] = scores[i] / sqrt_head_size;
        }
    }
    for (int i = 0; i < nq; i++) softmax(att + (size_t)i * hc->stride, first_pos + i + 1);
    mix_values(hc, nq, first_pos, out);
}

/* Query head h of attention(): its queries four at a time, then the rest one by one; lc->att's
 * four seq_len rows of head h are its scratch. */
static void attention_head(const LayerCache *lc, const float *q, float *out, int pos0, int batch,
                           int h) {
    int head_size = lc->head_size, dim = lc->n_heads * head_size;
    int kv_dim = lc->n_kv_heads * head_size;
    int kv_head = h / (lc->n_heads / lc->n_kv_heads); /* shared by n_heads / n_kv_heads heads */
    size_t off = (size_t)kv_head * head_size;
    HeadCache hc = {lc->key_cache + off,
                    lc->value_cache + off,
                    kv_dim,
                    head_size,
                    lc->att + (size_t)h * 4 * lc->seq_len,
                    lc->seq_len};
    int b = 0;
    for (; b + 4 <= batch; b += 4) {
        const float *qs[4];
        float *outs[4];
        for (int i = 0; i < 4; i++) {
            qs[i] = q + (size_t)(b + i) * dim + h * head_size;
            outs[i] = out + (size_t)(b + i) * dim + h * head_size;
        }
        attend(&hc, qs, outs, 4, pos0 + b);
    }
    for (; b < batch; b++) {
        const float *qs[4] = {q + (size_t)b * dim + h * head_size};
        float *outs[4] = {out + (size_t)b * dim + h * head_size};
        attend(&hc, qs, outs, 1, pos0 + b);
    }
}

void attention(const LayerCache *lc, const float *q, float *out, int pos0, int batch) {
    size_t work = (size_t)lc->n_heads * batch * (pos0 + batch) * lc->head_size * 2;
    if (work < PARALLEL_MIN_WORK) { /* no region: see matmul */
        for (int h = 0; h < lc->n_heads; h++) attention_head(lc, q, out, pos0, batch, h);
        return;
    }
#pragma omp parallel for
    for (int h = 0; h < lc->n_heads; h++) attention_head(lc, q, out, pos0, batch, h);
}
