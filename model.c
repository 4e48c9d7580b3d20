#include "model.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define HEADER_INTS 7
#define MAX_SIZE    (1 << 20) /* bound on every header field: keeps all products far from overflow */

/* ----------------------------------------------------------------------------
 * Loading: header check, tensor layout, memory map */

static int check_config(const Config *c, char *err, size_t errlen) {
    const struct {
        const char *name;
        int value;
    } fields[] = {
        {"dim", c->dim},         {"hidden_dim", c->hidden_dim}, {"n_layers", c->n_layers},
        {"n_heads", c->n_heads}, {"n_kv_heads", c->n_kv_heads}, {"vocab_size", c->vocab_size},
        {"seq_len", c->seq_len},
    };
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        if (fields[i].value <= 0 || fields[i].value > MAX_SIZE) {
            snprintf(err, errlen, "%s is %d, outside 1..%d", fields[i].name, fields[i].value,
                     MAX_SIZE);
            return -1;
        }
    }
    if (c->dim % c->n_heads != 0) {
        snprintf(err, errlen, "dim %d is not a multiple of n_heads %d", c->dim, c->n_heads);
        return -1;
    }
    if (c->n_kv_heads > c->n_heads || c->n_heads % c->n_kv_heads != 0) {
        snprintf(err, errlen, "n_heads %d is not a multiple of n_kv_heads %d", c->n_heads,
                 c->n_kv_heads);
        return -1;
    }
    if ((c->dim / c->n_heads) % 2 != 0) {
        snprintf(err, errlen, "head_size %d (dim / n_heads) is odd; RoPE rotates pairs",
                 c->dim / c->n_heads);
        return -1;
    }
    return 0;
}

/* Points every tensor into `data` in file order; returns the number of floats they span. */
static uint64_t layout_weights(Weights *w, const Config *c, const float *data) {
    uint64_t dim = c->dim, hidden = c->hidden_dim, layers = c->n_layers;
    uint64_t head_size = c->dim / c->n_heads;
    uint64_t kv_dim = (uint64_t)c->n_kv_heads * head_size;
    uint64_t off = 0;
    w->token_embedding = data + off, off += (uint64_t)c->vocab_size * dim;
    w->attn_norm = data + off, off += layers * dim;
    w->wq = data + off, off += layers * dim * dim;
    w->wk = data + off, off += layers * kv_dim * dim;
    w->wv = data + off, off += layers * kv_dim * dim;
    w->wo = data + off, off += layers * dim * dim;
    w->ffn_norm = data + off, off += layers * dim;
    w->w1 = data + off, off += layers * hidden * dim;
    w->w2 = data + off, off += layers * dim * hidden;
    w->w3 = data + off, off += layers * hidden * dim;
    w->final_norm = data + off, off += dim;
    off += (uint64_t)c->seq_len * head_size; /* legacy RoPE cos and sin tables */
    if (c->shared_classifier) {
        w->wcls = w->token_embedding;
    } else {
        w->wcls = data + off, off += (uint64_t)c->vocab_size * dim;
    }
    return off;
}

static int alloc_state(RunState *s, const Config *c) {
    size_t head_size = c->dim / c->n_heads;
    size_t kv_dim = c->n_kv_heads * head_size;
    size_t cache = (size_t)c->n_layers * c->seq_len * kv_dim;
    s->x = calloc(c->dim, sizeof(float));
    s->xb = calloc(c->dim, sizeof(float));
    s->xb2 = calloc(c->dim, sizeof(float));
    s->hb = calloc(c->hidden_dim, sizeof(float));
    s->hb2 = calloc(c->hidden_dim, sizeof(float));
    s->q = calloc(c->dim, sizeof(float));
    s->att = calloc((size_t)c->n_heads * c->seq_len, sizeof(float));
    s->logits = calloc(c->vocab_size, sizeof(float));
    s->key_cache = calloc(cache, sizeof(float));
    s->value_cache = calloc(cache, sizeof(float));
    s->inv_freq = calloc(head_size / 2, sizeof(float));
    if (!s->x || !s->xb || !s->xb2 || !s->hb || !s->hb2 || !s->q || !s->att || !s->logits ||
        !s->key_cache || !s->value_cache || !s->inv_freq)
        return -1;
    return 0;
}

static void free_state(RunState *s) {
    free(s->x);
    free(s->xb);
    free(s->xb2);
    free(s->hb);
    free(s->hb2);
    free(s->q);
    free(s->att);
    free(s->logits);
    free(s->key_cache);
    free(s->value_cache);
    free(s->inv_freq);
    memset(s, 0, sizeof(*s));
}

static void init_rope(RunState *s, const Config *c) {
    int head_size = c->dim / c->n_heads;
    for (int i = 0; i < head_size / 2; i++)
        s->inv_freq[i] = 1.0f / powf(c->rope_theta, (float)(2 * i) / (float)head_size);
}

/* Formats "<path>: <what>" into err, where `what` comes from a check's own message. */
static int fail(char *err, size_t errlen, const char *path, const char *what) {
    snprintf(err, errlen, "%s: %s", path, what);
    return -1;
}

int model_load(Model *m, const char *path, char *err, size_t errlen) {
    memset(m, 0, sizeof(*m));
    char what[256];
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        snprintf(what, sizeof(what), "cannot open model: %s", strerror(errno));
        return fail(err, errlen, path, what);
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return fail(err, errlen, path, "not a regular file");
    }
    size_t size = (size_t)st.st_size;
    if (size == 0) {
        close(fd);
        return fail(err, errlen, path, "model file is empty");
    }
    if (size < HEADER_INTS * sizeof(int32_t)) {
        close(fd);
        snprintf(what, sizeof(what), "model file is %zu bytes, shorter than its %zu-byte header",
                 size, HEADER_INTS * sizeof(int32_t));
        return fail(err, errlen, path, what);
    }
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd); /* the mapping stays valid */
    if (map == MAP_FAILED) {
        snprintf(what, sizeof(what), "cannot map model: %s", strerror(errno));
        return fail(err, errlen, path, what);
    }

    int32_t h[HEADER_INTS];
    memcpy(h, map, sizeof(h));
    Config *c = &m->config;
    c->dim = h[0];
    c->hidden_dim = h[1];
    c->n_layers = h[2];
    c->n_heads = h[3];
    c->n_kv_heads = h[4];
    c->shared_classifier = h[5] > 0;
    c->vocab_size = h[5] == INT32_MIN ? 0 : abs(h[5]);
    c->seq_len = h[6];
    c->norm_eps = 1e-5f;
    c->rope_theta = 10000.0f;
    if (check_config(c, what, sizeof(what)) != 0) {
        munmap(map, size);
        memset(m, 0, sizeof(*m));
        return fail(err, errlen, path, what);
    }
    const float *data = (const float *)((const char *)map + sizeof(h));
    uint64_t expected = sizeof(h) + layout_weights(&m->weights, c, data) * sizeof(float);
    if (expected != size) {
        munmap(map, size);
        memset(m, 0, sizeof(*m));
        snprintf(what, sizeof(what),
                 "file is %zu bytes but its header (dim %d, hidden_dim %d, n_layers %d, "
                 "vocab_size %d, seq_len %d) implies %llu",
                 size, h[0], h[1], h[2], h[5], h[6], (unsigned long long)expected);
        return fail(err, errlen, path, what);
    }
    m->map = map;
    m->map_size = size;
    m->norm = rmsnorm;
    if (alloc_state(&m->state, c) != 0) {
        model_free(m);
        return fail(err, errlen, path, "out of memory for the run state and kv cache");
    }
    init_rope(&m->state, c);
    return 0;
}

void model_free(Model *m) {
    if (m->map) munmap(m->map, m->map_size);
    free_state(&m->state);
    memset(m, 0, sizeof(*m));
}

/* The only cost of profiling when it is off: one predictable branch per lap. */
static inline void lap(Profile *p, OpClass op) {
    if (p) profile_lap(p, op);
}

/* ----------------------------------------------------------------------------
 * The forward pass */

/* out = w x. w: (d, n) row-major, x: (n), out: (d). Rows in parallel. */
static void matmul(float *out, const float *x, const float *w, int n, int d) {
#pragma omp parallel for
    for (int i = 0; i < d; i++) {
        const float *row = w + (size_t)i * n;
        float sum = 0.0f;
        for (int j = 0; j < n; j++) sum += row[j] * x[j];
        out[i] = sum;
    }
}

/* Rotates each pair (v[2i], v[2i+1]) of every head in v (n = heads * head_size) by the angle
 * pos * inv_freq[i]: RoPE (Su et al. 2021, eq. 34) in the interleaved pairing that llama2.c
 * and Meta's Llama reference use. */
static void rope(float *v, int n, int head_size, int pos, const float *inv_freq) {
    for (int i = 0; i < n; i += 2) {
        float angle = pos * inv_freq[(i % head_size) / 2];
        float cos_a = cosf(angle), sin_a = sinf(angle);
        float v0 = v[i], v1 = v[i + 1];
        v[i] = v0 * cos_a - v1 * sin_a;
        v[i + 1] = v0 * sin_a + v1 * cos_a;
    }
}

/* In-place softmax over x[0..n). */
static void softmax(float *x, int n) {
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

/* Causal multi-head attention of the current query s->q over cached positions 0..pos of layer
 * `l`, into s->xb (n_heads * head_size). Query head h reads kv head h / (n_heads / n_kv_heads). */
static void attention(RunState *s, const Config *c, int l, int pos) {
    int head_size = c->dim / c->n_heads;
    int kv_dim = c->n_kv_heads * head_size;
    int heads_per_kv = c->n_heads / c->n_kv_heads;
    size_t layer_off = (size_t)l * c->seq_len * kv_dim;
    float scale = sqrtf((float)head_size); /* divided, not multiplied, to round as llama2.c */
#pragma omp parallel for
    for (int h = 0; h < c->n_heads; h++) {
        const float *q = s->q + h * head_size;
        float *att = s->att + (size_t)h * c->seq_len;
        int kv_off = (h / heads_per_kv) * head_size;
        for (int t = 0; t <= pos; t++) {
            const float *k = s->key_cache + layer_off + (size_t)t * kv_dim + kv_off;
            float score = 0.0f;
            for (int i = 0; i < head_size; i++) score += q[i] * k[i];
            att[t] = score / scale;
        }
        softmax(att, pos + 1);
        float *out = s->xb + h * head_size;
        memset(out, 0, head_size * sizeof(float));
        for (int t = 0; t <= pos; t++) {
            const float *v = s->value_cache + layer_off + (size_t)t * kv_dim + kv_off;
            for (int i = 0; i < head_size; i++) out[i] += att[t] * v[i];
        }
    }
}

/* SwiGLU (Shazeer 2020, eq. 6) on the projections: gate[i] = silu(gate[i]) * up[i]. */
static void swiglu(float *gate, const float *up, int n) {
    for (int i = 0; i < n; i++) {
        float g = gate[i];
        gate[i] = g * (1.0f / (1.0f + expf(-g))) * up[i];
    }
}

static void residual_add(float *x, const float *delta, int n) {
    for (int i = 0; i < n; i++) x[i] += delta[i];
}

float *model_forward(Model *m, int token, int pos) {
    const Config *c = &m->config;
    const Weights *w = &m->weights;
    RunState *s = &m->state;
    int dim = c->dim, hidden = c->hidden_dim;
    int head_size = dim / c->n_heads;
    int kv_dim = c->n_kv_heads * head_size;
    Profile *prof = m->profile;
    if (prof) profile_start(prof);

    memcpy(s->x, w->token_embedding + (size_t)token * dim, dim * sizeof(float));
    lap(prof, OP_EMBEDDING);

    for (int l = 0; l < c->n_layers; l++) {
        /* attention block: x += wo attention(rope(wq n(x)), rope(wk n(x)), wv n(x)) */
        m->norm(s->xb, s->x, w->attn_norm + (size_t)l * dim, NULL, dim, c->norm_eps);
        lap(prof, OP_NORM);
        size_t cache_off = ((size_t)l * c->seq_len + pos) * kv_dim;
        float *k = s->key_cache + cache_off;
        float *v = s->value_cache + cache_off;
        matmul(s->q, s->xb, w->wq + (size_t)l * dim * dim, dim, dim);
        matmul(k, s->xb, w->wk + (size_t)l * kv_dim * dim, dim, kv_dim);
        matmul(v, s->xb, w->wv + (size_t)l * kv_dim * dim, dim, kv_dim);
        lap(prof, OP_QKV);
        rope(s->q, dim, head_size, pos, s->inv_freq);
        rope(k, kv_dim, head_size, pos, s->inv_freq);
        lap(prof, OP_ROPE);
        attention(s, c, l, pos);
        lap(prof, OP_ATTENTION);
        matmul(s->xb2, s->xb, w->wo + (size_t)l * dim * dim, dim, dim);
        residual_add(s->x, s->xb2, dim);
        lap(prof, OP_OUTPUT_PROJ);

        /* feed-forward block: x += w2 (silu(w1 n(x)) * w3 n(x)) */
        m->norm(s->xb, s->x, w->ffn_norm + (size_t)l * dim, NULL, dim, c->norm_eps);
        lap(prof, OP_NORM);
        matmul(s->hb, s->xb, w->w1 + (size_t)l * hidden * dim, dim, hidden);
        matmul(s->hb2, s->xb, w->w3 + (size_t)l * hidden * dim, dim, hidden);
        swiglu(s->hb, s->hb2, hidden);
        matmul(s->xb2, s->hb, w->w2 + (size_t)l * dim * hidden, hidden, dim);
        residual_add(s->x, s->xb2, dim);
        lap(prof, OP_FFN);
    }

    m->norm(s->x, s->x, w->final_norm, NULL, dim, c->norm_eps);
    lap(prof, OP_NORM);
    matmul(s->logits, s->x, w->wcls, dim, c->vocab_size);
    lap(prof, OP_CLASSIFIER);
    return s->logits;
}
