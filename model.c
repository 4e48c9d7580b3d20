/* The forward pass of the decoder (model.h), as its equations: embedding; per layer, the
 * attention block x += wo attention(rope(wq n(x)), rope(wk n(x)), wv n(x)) and the feed-forward
 * block x += w2 (silu(w1 n(x)) * w3 n(x)); the final norm and the classifier. One pass runs a
 * batch of positions (one in decode). How the products, attention and norms are computed fast is
 * matmul.c's, attention.c's and norm.c's; the plain pass is reference.c's.
 */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "simd.h"

/* The only cost of profiling when it is off: one predictable branch per lap. */
static inline void lap(Profile *p, OpClass op) {
    if (p) profile_lap(p, op);
}

void rope(const Config *c, const float *inv_freq, float *q, float *k, int pos) {
    int dim = c->dim, head_size = dim / c->n_heads, kv_dim = c->n_kv_heads * head_size;
    for (int i = 0; i < head_size; i += 2) { /* each angle's cosine and sine once, for all heads */
        float angle = pos * inv_freq[i / 2];
        float cos_a = cosf(angle), sin_a = sinf(angle);
        for (int j = i; j < dim; j += head_size) {  /* pair i of each head */
            float *key = j < kv_dim ? k + j : NULL; /* k has the first kv_dim / head_size heads */
            float q0 = q[j], q1 = q[j + 1];
            q[j] = q0 * cos_a - q1 * sin_a;
            q[j + 1] = q0 * sin_a + q1 * cos_a;
            if (key) {
                float k0 = key[0], k1 = key[1];
                key[0] = k0 * cos_a - k1 * sin_a;
                key[1] = k0 * sin_a + k1 * cos_a;
            }
        }
    }
}

/* SwiGLU (Shazeer 2020, eq. 6) on n values of the projections: gate[i] = silu(gate[i]) * up[i]. */
static void swiglu(float *gate, const float *up, int n) {
    for (int i = 0; i < n; i += VEC_WIDTH) {
        vecf g = vec_load_upto(gate + i, n - i), one = vec_set1(1.0f);
        vecf sigmoid = vec_div(one, vec_add(one, vec_exp(vec_sub(vec_zero(), g))));
        vec_store_upto(gate + i, vec_mul(vec_mul(g, sigmoid), vec_load_upto(up + i, n - i)), n - i);
    }
}

static void residual_add(float *x, const float *delta, int n) {
    for (int i = 0; i < n; i++) x[i] += delta[i];
}

/* Layer l's slice of a stacked (n_layers, dim) norm weight or bias; NULL stays NULL (no bias). */
static const float *layer_slice(const float *stack, int l, int dim) {
    return stack ? stack + (size_t)l * dim : NULL;
}

NormCall model_norm_site(const Model *m, int site) {
    const Weights *w = &m->weights;
    int l = site / 2, dim = m->config.dim;
    const float *weight = w->final_norm, *bias = w->final_norm_bias, *scalar = w->final_norm_scalar;
    if (l < m->config.n_layers) {
        int ffn = site % 2;
        weight = layer_slice(ffn ? w->ffn_norm : w->attn_norm, l, dim);
        bias = layer_slice(ffn ? w->ffn_norm_bias : w->attn_norm_bias, l, dim);
        scalar = layer_slice(ffn ? w->ffn_norm_scalar : w->attn_norm_scalar, l, 1);
    }
    return (NormCall){m->norm, weight, bias, m->site_scalars ? *scalar : m->config.norm_eps};
}

/* What a norm's per-site scalar is, for messages */
static const char *scalar_words(NormScalar s) {
    return s == NORM_TAKES_ALPHA ? "alpha" : "learned log eps";
}

int model_check_norm(const Model *m, NormFn fn, char *err, size_t errlen) {
    NormScalar wanted = norm_scalar(fn);
    if (wanted == NORM_TAKES_EPS || wanted == norm_scalar(m->config.trained_norm)) return 0;
    snprintf(err, errlen,
             "norm %s needs each norm site's %s, which a model trained with %s does not have "
             "(only one trained with %s does)",
             norm_name(fn), scalar_words(wanted), norm_name(m->config.trained_norm), norm_name(fn));
    return -1;
}

void model_set_norm(Model *m, NormFn fn) {
    m->norm = fn;
    m->site_scalars = norm_scalar(fn) != NORM_TAKES_EPS;
}

int model_unread_norm_parameters(const Model *m, char *notice, size_t len) {
    const Config *c = &m->config;
    int biases = c->norm_bias && !norm_reads_bias(m->norm);
    NormScalar trained = norm_scalar(c->trained_norm);
    int scalars = trained != NORM_TAKES_EPS && !m->site_scalars;
    if (!biases && !scalars) return 0;
    snprintf(notice, len, "the model was trained with %s; %s ignores %s%s%s%s",
             norm_name(c->trained_norm), norm_name(m->norm), biases ? "its norm biases" : "",
             biases && scalars ? " and " : "", scalars ? "each norm site's " : "",
             scalars ? scalar_words(trained) : "");
    return 1;
}

/* out[b] = m->norm(x[b]) at norm site `site` (model_norm_site) for the rows b < rows of (rows, dim)
 * out and x: every norm of the model, through the one NormFn (docs/NORMS.md). out may be x. */
static void norm_rows(const Model *m, float *out, const float *x, int site, int rows) {
    int dim = m->config.dim;
    NormCall n = model_norm_site(m, site);
    for (int b = 0; b < rows; b++)
        n.fn(out + (size_t)b * dim, x + (size_t)b * dim, n.weight, n.bias, dim, n.eps);
}

LayerCache model_layer_cache(const Model *m, int l) {
    const Config *c = &m->config;
    int head_size = c->dim / c->n_heads;
    size_t off = (size_t)l * c->seq_len * c->n_kv_heads * head_size;
    return (LayerCache){m->state.key_cache + off,
                        m->state.value_cache + off,
                        m->state.att,
                        c->n_heads,
                        c->n_kv_heads,
                        head_size,
                        c->seq_len};
}

/* Runs the batch (<= m->state.batch) tokens at positions pos0 .. pos0 + batch - 1 through the
 * model, row b of the run state for position pos0 + b; if logits is not NULL, writes their
 * logits into it, (batch, vocab_size). Decode is a batch of one. */
static void forward_positions(Model *m, const int *tokens, int batch, int pos0, float *logits) {
    const Config *c = &m->config;
    const Weights *w = &m->weights;
    RunState *s = &m->state;
    int dim = c->dim, hidden = c->hidden_dim;
    int kv_dim = c->n_kv_heads * (dim / c->n_heads);
    Profile *prof = m->profile;

    for (int b = 0; b < batch; b++)
        embedding(&w->token_embedding, tokens[b], s->x + (size_t)b * dim);
    lap(prof, OP_EMBEDDING);

    for (int l = 0; l < c->n_layers; l++) {
        /* attention block: x += wo attention(rope(wq n(x)), rope(wk n(x)), wv n(x)) */
        norm_rows(m, s->xb, s->x, 2 * l, batch);
        lap(prof, OP_NORM);
        /* wk and wv write straight into the kv cache: rows pos0 .. pos0 + batch - 1 of layer l */
        LayerCache cache = model_layer_cache(m, l);
        float *k = s->key_cache + ((size_t)l * c->seq_len + pos0) * kv_dim;
        float *v = s->value_cache + ((size_t)l * c->seq_len + pos0) * kv_dim;
        matmul((Product[]){{s->q, &w->wq}, {k, &w->wk}, {v, &w->wv}}, 3, s->xb, batch, l, &s->xq);
        lap(prof, OP_QKV);
        if (batch == 1) { /* no region: see matmul */
            rope(c, s->inv_freq, s->q, k, pos0);
        } else {
#pragma omp parallel for
            for (int b = 0; b < batch; b++)
                rope(c, s->inv_freq, s->q + (size_t)b * dim, k + (size_t)b * kv_dim, pos0 + b);
        }
        lap(prof, OP_ROPE);
        /* position pos0 + b attends over 0..pos0 + b: causal within the batch */
        attention(&cache, s->q, s->xb, pos0, batch);
        lap(prof, OP_ATTENTION);
        matmul(&(Product){s->xb2, &w->wo}, 1, s->xb, batch, l, &s->xq);
        residual_add(s->x, s->xb2, batch * dim);
        lap(prof, OP_OUTPUT_PROJ);

        /* feed-forward block: x += w2 (silu(w1 n(x)) * w3 n(x)) */
        norm_rows(m, s->xb, s->x, 2 * l + 1, batch);
        lap(prof, OP_NORM);
        matmul((Product[]){{s->hb, &w->w1}, {s->hb2, &w->w3}}, 2, s->xb, batch, l, &s->xq);
        swiglu(s->hb, s->hb2, batch * hidden);
        matmul(&(Product){s->xb2, &w->w2}, 1, s->hb, batch, l, &s->xq);
        residual_add(s->x, s->xb2, batch * dim);
        lap(prof, OP_FFN);
    }

    if (logits) {
        norm_rows(m, s->x, s->x, 2 * c->n_layers, batch);
        lap(prof, OP_NORM);
        matmul(&(Product){logits, &w->wcls}, 1, s->x, batch, 0, &s->xq);
        lap(prof, OP_CLASSIFIER);
    }
}

float *model_forward(Model *m, int token, int pos) {
    if (m->forward) return m->forward(m, token, pos);
    if (m->profile) profile_start(m->profile);
    forward_positions(m, &token, 1, pos, m->state.logits);
    return m->state.logits;
}

void model_prefill(Model *m, const int *tokens, int n, float *logits) {
    int batch = m->state.batch, vocab_size = m->config.vocab_size;
    if (m->forward) { /* the pass chosen in place of this one: a position at a time */
        for (int pos = 0; pos < n; pos++) {
            const float *l = m->forward(m, tokens[pos], pos);
            if (logits) memcpy(logits + (size_t)pos * vocab_size, l, vocab_size * sizeof(float));
        }
        return;
    }
    if (m->profile) profile_start(m->profile);
    for (int pos0 = 0; pos0 < n; pos0 += batch)
        forward_positions(m, tokens + pos0, n - pos0 < batch ? n - pos0 : batch, pos0,
                          logits ? logits + (size_t)pos0 * vocab_size : NULL);
}
