/* The plain forward pass (reference.h): one token through the decoder, in plain scalar C. */
#include "reference.h"

#include <math.h>

/* (v[0], v[1]) rotated by the angle whose cosine and sine are given */
static void rotate(float *v, double cos_a, double sin_a) {
    double v0 = v[0], v1 = v[1];
    v[0] = (float)(v0 * cos_a - v1 * sin_a);
    v[1] = (float)(v0 * sin_a + v1 * cos_a);
}

void rope_ref(const Config *c, const float *rope_freqs, float *q, float *k, int pos) {
    int head_size = c->dim / c->n_heads, kv_dim = c->n_kv_heads * head_size;
    for (int i = 0; i < c->dim; i += 2) {
        int pair = i % head_size; /* 2 x the pair's index within its head */
        double angle = pos * pow(c->rope_theta, -(double)pair / head_size);
        if (rope_freqs) angle /= rope_freqs[pair / 2];
        double cos_a = cos(angle), sin_a = sin(angle);
        rotate(q + i, cos_a, sin_a);
        if (i < kv_dim) rotate(k + i, cos_a, sin_a); /* k has the first kv_dim / head_size heads */
    }
}

/* out = the plain twin of m's norm at norm site `site` (model_norm_site) of x; a norm outside
 * norm.c's table (an observer) runs as it is */
static void plain_norm(const Model *m, int site, float *out, const float *x) {
    NormCall n = model_norm_site(m, site);
    NormFn plain = norm_plain(n.fn);
    (plain ? plain : n.fn)(out, x, n.weight, n.bias, m->config.dim, n.eps);
}

/* The steps shown to an observer (reference.h); nothing when obs is NULL. */
static void show(const ForwardObserver *obs, StepKind kind, const char *name, int layer,
                 const float *x, int n) {
    ForwardStep step = {.kind = kind, .name = name, .layer = layer, .x = x, .n = n};
    if (obs) obs->step(obs->ctx, &step);
}

static void show_heads(const ForwardObserver *obs, const char *name, int layer, const float *x,
                       int heads, int head_size) {
    ForwardStep step = {STEP_VECTOR, name, layer, x, NULL, heads * head_size, heads, NULL, 0};
    if (obs) obs->step(obs->ctx, &step);
}

static void show_norm(const ForwardObserver *obs, const char *name, int layer, const float *in,
                      const float *out, int n) {
    ForwardStep step = {.kind = STEP_NORM, .name = name, .layer = layer, .x = in, .y = out, .n = n};
    if (obs) obs->step(obs->ctx, &step);
}

static void show_attention(const ForwardObserver *obs, int layer, const LayerCache *cache,
                           int pos) {
    ForwardStep step = {
        .kind = STEP_ATTENTION, .name = "attention", .layer = layer, .cache = cache, .pos = pos};
    if (obs) obs->step(obs->ctx, &step);
}

float *reference_forward(Model *m, int token, int pos) {
    return reference_forward_observed(m, token, pos, NULL);
}

float *reference_forward_observed(Model *m, int token, int pos, const ForwardObserver *obs) {
    const Config *c = &m->config;
    const Weights *w = &m->weights;
    RunState *s = &m->state;
    int dim = c->dim, hidden_dim = c->hidden_dim;
    int kv_dim = c->n_kv_heads * (dim / c->n_heads);
    float *x = s->x;
    /* the token's embedding starts the residual stream */
    embedding_ref(&w->token_embedding, token, x);
    show(obs, STEP_VECTOR, "embedding", -1, x, dim);

    for (int l = 0; l < c->n_layers; l++) {
        /* attention: x += wo attention(rope(wq n(x)), rope(wk n(x)), wv n(x)) */
        plain_norm(m, 2 * l, s->xb, x);
        show_norm(obs, "attention norm", l, x, s->xb, dim);
        /* this position's key and value go straight into the cache */
        float *k = s->key_cache + ((size_t)l * c->seq_len + pos) * kv_dim;
        float *v = s->value_cache + ((size_t)l * c->seq_len + pos) * kv_dim;
        matmul_ref(s->q, &w->wq, l, s->xb);
        matmul_ref(k, &w->wk, l, s->xb);
        matmul_ref(v, &w->wv, l, s->xb);
        show_heads(obs, "q", l, s->q, c->n_heads, dim / c->n_heads);
        show_heads(obs, "k", l, k, c->n_kv_heads, dim / c->n_heads);
        show_heads(obs, "v", l, v, c->n_kv_heads, dim / c->n_heads);
        rope_ref(c, m->weights.rope_freqs, s->q, k, pos);
        LayerCache cache = model_layer_cache(m, l);
        attention_ref(&cache, s->q, s->xb, pos); /* over positions 0..pos */
        show_attention(obs, l, &cache, pos);
        matmul_ref(s->xb2, &w->wo, l, s->xb);
        for (int i = 0; i < dim; i++) x[i] += s->xb2[i];
        show(obs, STEP_VECTOR, "residual after attention", l, x, dim);

        /* feed-forward: x += w2 (silu(w1 n(x)) * w3 n(x)), silu(g) = g * sigmoid(g) */
        plain_norm(m, 2 * l + 1, s->xb, x);
        show_norm(obs, "ffn norm", l, x, s->xb, dim);
        matmul_ref(s->hb, &w->w1, l, s->xb);
        show(obs, STEP_GATE, "ffn gate", l, s->hb, hidden_dim);
        matmul_ref(s->hb2, &w->w3, l, s->xb);
        for (int i = 0; i < hidden_dim; i++)
            s->hb[i] = s->hb[i] * (1.0f / (1.0f + expf(-s->hb[i]))) * s->hb2[i];
        matmul_ref(s->xb2, &w->w2, l, s->hb);
        for (int i = 0; i < dim; i++) x[i] += s->xb2[i];
        show(obs, STEP_VECTOR, "residual after ffn", l, x, dim);
    }

    /* the final norm, then the classifier: logits = wcls n(x) */
    plain_norm(m, 2 * c->n_layers, s->xb, x);
    show_norm(obs, "final norm", -1, x, s->xb, dim);
    matmul_ref(s->logits, &w->wcls, 0, s->xb);
    show(obs, STEP_LOGITS, "logits", -1, s->logits, c->vocab_size);
    return s->logits;
}
