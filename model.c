#define _DEFAULT_SOURCE /* MAP_POPULATE */
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

#include "simd.h"

#define MAX_SIZE (1 << 20) /* bound on every header field, so each tensor size fits in 64 bits */
/* Multiply-adds below which a parallel region costs more than it saves (measured on stories260K:
 * dim 64 matmuls run faster on one thread, and waiting threads stall on a busy machine). */
#define PARALLEL_MIN_WORK (1 << 16)

/* First four bytes, read as a little-endian uint32. */
#define NLLM_MAGIC    0x4d4c4c4eu /* "NLLM" */
#define AK42_MAGIC    0x616b3432u /* "24ka" on disk: llama2.c writes the number 0x616b3432 */
#define NLLM_VERSION  1
#define LEGACY_HEADER 28  /* 7 int32 */
#define FIXED_HEADER  256 /* normllama and llama2.c version 1/2 headers, zero-padded */

#define Q8_HEADER_OFF 64 /* normllama: uint32 group_size of q8_0 weights, 0 for other dtypes */
static const char *const dtype_names[] = {"f32", "bf16", "q8_0"};

/* Trained-norm codes of the normllama header, in norm.c's naming. */
static const char *const norm_codes[] = {"rmsnorm", "layernorm"};

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
    if (c->vocab_size < 3) {
        snprintf(err, errlen, "vocab_size %d is too small: ids 0, 1, 2 are <unk>, <s>, </s>",
                 c->vocab_size);
        return -1;
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
    /* written so that NaN fails too */
    if (!(c->norm_eps > 0.0f && c->norm_eps < 1.0f)) {
        snprintf(err, errlen, "norm_eps is %g, outside (0, 1)", c->norm_eps);
        return -1;
    }
    if (!(c->rope_theta > 1.0f && c->rope_theta < 1e12f)) {
        snprintf(err, errlen, "rope_theta is %g, outside (1, 1e12)", c->rope_theta);
        return -1;
    }
    return 0;
}

/* One tensor of a file layout, in file order, and how it is stored. */
typedef enum {
    TENSOR_F32,
    TENSOR_BF16,
    TENSOR_I8,      /* q8_0 values; their scales follow as a TENSOR_F32 */
    TENSOR_Q8_AK42, /* llama2.c version 2: int8 and scales, dequantized at load */
    TENSOR_SKIP,    /* float32 data run does not use */
} TensorKind;
typedef struct {
    const char *name;
    const float **vec; /* where a vector or scales pointer goes, or NULL */
    const void **mat;  /* where a matrix's data pointer goes, or NULL */
    uint64_t numel;
    TensorKind kind;
    /* TENSOR_Q8_AK42: stored as `parts` equal pieces (one per layer), each its int8 values
     * followed by one fp32 scale per group_size values of that piece */
    uint64_t parts;
} TensorSpec;

typedef struct {
    TensorSpec tensors[32];
    int n;
    uint64_t start;      /* file offset of the first tensor */
    uint64_t align;      /* every tensor starts at a multiple of this (1: packed) */
    uint64_t group_size; /* TENSOR_Q8_AK42 only */
} Layout;

static void add_vector(Layout *l, const char *name, const float **dst, uint64_t numel) {
    l->tensors[l->n++] = (TensorSpec){name, dst, NULL, numel, TENSOR_F32, 1};
}

static void skip(Layout *l, const char *name, uint64_t numel) {
    l->tensors[l->n++] = (TensorSpec){name, NULL, NULL, numel, TENSOR_SKIP, 1};
}

/* A stacked matrix (layers, rows, cols) stored as `kind`; q8_0 (TENSOR_I8) values are followed
 * by their scales tensor (layers * rows, ceil(cols / group_size)). Sets m's shape and dtype. */
static void add_matrix(Layout *l, const char *name, Matrix *m, uint64_t layers, int rows, int cols,
                       TensorKind kind, int group_size) {
    m->dtype = kind == TENSOR_BF16 ? DTYPE_BF16 : kind == TENSOR_I8 ? DTYPE_Q8_0 : DTYPE_F32;
    m->rows = rows;
    m->cols = cols;
    m->group_size = kind == TENSOR_I8 ? group_size : 0;
    uint64_t stacked_rows = layers * (uint64_t)rows;
    l->tensors[l->n++] =
        (TensorSpec){name, NULL, &m->data, stacked_rows * (uint64_t)cols, kind, layers};
    if (kind == TENSOR_I8) {
        uint64_t n_groups = ((uint64_t)cols + group_size - 1) / group_size;
        l->tensors[l->n++] =
            (TensorSpec){name, &m->scales, NULL, stacked_rows * n_groups, TENSOR_F32, 1};
    }
}

static uint64_t align_up(uint64_t off, uint64_t align) {
    return (off + align - 1) / align * align;
}

static uint64_t tensor_bytes(const TensorSpec *t, uint64_t group_size) {
    switch (t->kind) {
    case TENSOR_BF16:
        return t->numel * sizeof(uint16_t);
    case TENSOR_I8:
        return t->numel;
    case TENSOR_Q8_AK42:
        return t->numel + t->numel / group_size * sizeof(float);
    default:
        return t->numel * sizeof(float);
    }
}

/* The file size a layout implies: the end of its last tensor. Header fields up to MAX_SIZE make
 * a tensor at most 2^63 bytes, so stopping past 2^62 (no real file) keeps the sum from wrapping. */
static uint64_t layout_end(const Layout *l) {
    uint64_t off = l->start;
    for (int i = 0; i < l->n && off <= (1ull << 62); i++)
        off = align_up(off, l->align) + tensor_bytes(&l->tensors[i], l->group_size);
    return off <= (1ull << 62) ? off : UINT64_MAX;
}

/* Number of floats the TENSOR_Q8_AK42 tensors dequantize to. */
static uint64_t layout_q8_numel(const Layout *l) {
    uint64_t n = 0;
    for (int i = 0; i < l->n; i++)
        if (l->tensors[i].kind == TENSOR_Q8_AK42) n += l->tensors[i].numel;
    return n;
}

/* llama2.c version 2: each piece's int8 values, then one scale per group_size of them, into
 * `owned`. */
static void dequantize_ak42(const TensorSpec *t, const char *piece, uint64_t gs, float *owned) {
    uint64_t n = t->numel / t->parts;
    for (uint64_t p = 0; p < t->parts; p++, piece += n + n / gs * sizeof(float)) {
        const int8_t *q = (const int8_t *)piece;
        const char *scales = piece + n; /* not float-aligned in general */
        for (uint64_t g = 0; g < n / gs; g++) {
            float scale;
            memcpy(&scale, scales + g * sizeof(float), sizeof(float));
            for (uint64_t j = g * gs; j < (g + 1) * gs; j++) owned[j] = q[j] * scale;
        }
        owned += n;
    }
}

/* Sets every tensor's pointer: into the map, or into `owned` (dequantized) for llama2.c's int8.
 * Only called once layout_end has matched the file size, so every read is inside the map. */
static void layout_place(const Layout *l, const char *map, float *owned) {
    uint64_t off = l->start;
    for (int i = 0; i < l->n; i++) {
        const TensorSpec *t = &l->tensors[i];
        off = align_up(off, l->align);
        const void *data = map + off;
        if (t->kind == TENSOR_Q8_AK42) {
            dequantize_ak42(t, map + off, l->group_size, owned);
            data = owned;
            owned += t->numel;
        }
        if (t->vec) *t->vec = data;
        if (t->mat) *t->mat = data;
        off += tensor_bytes(t, l->group_size);
    }
}

/* llama2.c legacy: embedding, per-kind stacked layer tensors, final norm, the unused RoPE tables,
 * classifier when not shared. */
static void legacy_layout(Layout *l, Weights *w, const Config *c) {
    TensorKind k = TENSOR_F32;
    int dim = c->dim, hidden = c->hidden_dim, kv_dim = c->n_kv_heads * (dim / c->n_heads);
    uint64_t layers = c->n_layers;
    *l = (Layout){.start = LEGACY_HEADER, .align = 1};
    add_matrix(l, "token_embedding", &w->token_embedding, 1, c->vocab_size, dim, k, 0);
    add_vector(l, "attn_norm", &w->attn_norm, layers * dim);
    add_matrix(l, "wq", &w->wq, layers, dim, dim, k, 0);
    add_matrix(l, "wk", &w->wk, layers, kv_dim, dim, k, 0);
    add_matrix(l, "wv", &w->wv, layers, kv_dim, dim, k, 0);
    add_matrix(l, "wo", &w->wo, layers, dim, dim, k, 0);
    add_vector(l, "ffn_norm", &w->ffn_norm, layers * dim);
    add_matrix(l, "w1", &w->w1, layers, hidden, dim, k, 0);
    add_matrix(l, "w2", &w->w2, layers, dim, hidden, k, 0);
    add_matrix(l, "w3", &w->w3, layers, hidden, dim, k, 0);
    add_vector(l, "final_norm", &w->final_norm, dim);
    skip(l, "rope tables", (uint64_t)c->seq_len * (dim / c->n_heads));
    if (!c->shared_classifier) add_matrix(l, "wcls", &w->wcls, 1, c->vocab_size, dim, k, 0);
}

/* llama2.c version 1 (fp32) and 2 (int8 groups, norms kept fp32): norms first, then embedding,
 * attention and feed-forward matrices, classifier when not shared. */
static void ak42_layout(Layout *l, Weights *w, const Config *c, int version, uint64_t group_size) {
    TensorKind k = version == 2 ? TENSOR_Q8_AK42 : TENSOR_F32;
    int dim = c->dim, hidden = c->hidden_dim, kv_dim = c->n_kv_heads * (dim / c->n_heads);
    uint64_t layers = c->n_layers;
    *l = (Layout){.start = FIXED_HEADER, .align = 1, .group_size = group_size};
    add_vector(l, "attn_norm", &w->attn_norm, layers * dim);
    add_vector(l, "ffn_norm", &w->ffn_norm, layers * dim);
    add_vector(l, "final_norm", &w->final_norm, dim);
    add_matrix(l, "token_embedding", &w->token_embedding, 1, c->vocab_size, dim, k, 0);
    add_matrix(l, "wq", &w->wq, layers, dim, dim, k, 0);
    add_matrix(l, "wk", &w->wk, layers, kv_dim, dim, k, 0);
    add_matrix(l, "wv", &w->wv, layers, kv_dim, dim, k, 0);
    add_matrix(l, "wo", &w->wo, layers, dim, dim, k, 0);
    add_matrix(l, "w1", &w->w1, layers, hidden, dim, k, 0);
    add_matrix(l, "w2", &w->w2, layers, dim, hidden, k, 0);
    add_matrix(l, "w3", &w->w3, layers, hidden, dim, k, 0);
    if (!c->shared_classifier) add_matrix(l, "wcls", &w->wcls, 1, c->vocab_size, dim, k, 0);
}

/* normllama: legacy order without the RoPE tables, each norm followed by its bias when the file
 * has biases, matrices as `k` (q8_0 scales after their values), every tensor aligned. */
static void normllama_layout(Layout *l, Weights *w, const Config *c, uint64_t align, TensorKind k,
                             int group_size) {
    int dim = c->dim, hidden = c->hidden_dim, kv_dim = c->n_kv_heads * (dim / c->n_heads);
    uint64_t layers = c->n_layers;
    int gs = group_size;
    *l = (Layout){.start = align_up(FIXED_HEADER, align), .align = align};
    add_matrix(l, "token_embedding", &w->token_embedding, 1, c->vocab_size, dim, k, gs);
    add_vector(l, "attn_norm", &w->attn_norm, layers * dim);
    if (c->norm_bias) add_vector(l, "attn_norm_bias", &w->attn_norm_bias, layers * dim);
    add_matrix(l, "wq", &w->wq, layers, dim, dim, k, gs);
    add_matrix(l, "wk", &w->wk, layers, kv_dim, dim, k, gs);
    add_matrix(l, "wv", &w->wv, layers, kv_dim, dim, k, gs);
    add_matrix(l, "wo", &w->wo, layers, dim, dim, k, gs);
    add_vector(l, "ffn_norm", &w->ffn_norm, layers * dim);
    if (c->norm_bias) add_vector(l, "ffn_norm_bias", &w->ffn_norm_bias, layers * dim);
    add_matrix(l, "w1", &w->w1, layers, hidden, dim, k, gs);
    add_matrix(l, "w2", &w->w2, layers, dim, hidden, k, gs);
    add_matrix(l, "w3", &w->w3, layers, hidden, dim, k, gs);
    add_vector(l, "final_norm", &w->final_norm, dim);
    if (c->norm_bias) add_vector(l, "final_norm_bias", &w->final_norm_bias, dim);
    if (!c->shared_classifier) add_matrix(l, "wcls", &w->wcls, 1, c->vocab_size, dim, k, gs);
}

static int32_t read_i32(const char *p) {
    int32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static uint32_t read_u32(const char *p) {
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

static float read_f32(const char *p) {
    float v;
    memcpy(&v, p, sizeof(v));
    return v;
}

/* dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len as 7 int32 at p, with
 * llama2.c's defaults for what its files do not store. */
static void read_sizes(Config *c, const char *p) {
    c->dim = read_i32(p);
    c->hidden_dim = read_i32(p + 4);
    c->n_layers = read_i32(p + 8);
    c->n_heads = read_i32(p + 12);
    c->n_kv_heads = read_i32(p + 16);
    c->vocab_size = read_i32(p + 20);
    c->seq_len = read_i32(p + 24);
    c->norm_eps = 1e-5f;
    c->rope_theta = 10000.0f;
    c->trained_norm = rmsnorm;
}

/* Checks that a header flag is 0 or 1. */
static int check_flag(const char *name, uint32_t v, char *err, size_t errlen) {
    if (v <= 1) return 0;
    snprintf(err, errlen, "%s flag is %u, not 0 or 1", name, v);
    return -1;
}

/* Reads and checks the header of a file of `size` >= its header size, and builds its layout.
 * Returns 0, or -1 with the problem in err. */
static int read_legacy(Model *m, const char *map, Layout *l, char *err, size_t errlen) {
    Config *c = &m->config;
    read_sizes(c, map);
    int32_t vocab = c->vocab_size;
    c->shared_classifier = vocab > 0; /* llama2.c: a negative vocab_size means a separate wcls */
    c->vocab_size = vocab == INT32_MIN ? 0 : abs(vocab);
    if (c->dim > MAX_SIZE) {
        snprintf(err, errlen,
                 "unknown magic 0x%08x: not normllama (NLLM), not llama2.c version 1/2 (ak42), "
                 "and too large for a llama2.c legacy dim",
                 (unsigned)c->dim);
        return -1;
    }
    if (check_config(c, err, errlen) != 0) return -1;
    legacy_layout(l, &m->weights, c);
    m->format = "llama2.c legacy";
    return 0;
}

/* llama2.c version 1/2 header: magic, int32 version, 7 int32 sizes (offset 8), uint8
 * shared_classifier (offset 36), version 2 only: int32 group_size (offset 37, unaligned). */
static int read_ak42(Model *m, const char *map, Layout *l, char *err, size_t errlen) {
    Config *c = &m->config;
    int32_t version = read_i32(map + 4);
    if (version != 1 && version != 2) {
        snprintf(err, errlen, "unknown llama2.c version %d (this run reads versions 1 and 2)",
                 version);
        return -1;
    }
    read_sizes(c, map + 8);
    uint8_t shared = (uint8_t)map[36];
    if (check_flag("shared_classifier", shared, err, errlen) != 0) return -1;
    c->shared_classifier = shared;
    if (check_config(c, err, errlen) != 0) return -1;
    int32_t group_size = version == 2 ? read_i32(map + 37) : 1;
    if (group_size <= 0 || group_size > MAX_SIZE) {
        snprintf(err, errlen, "group_size is %d, outside 1..%d", group_size, MAX_SIZE);
        return -1;
    }
    ak42_layout(l, &m->weights, c, version, (uint64_t)group_size);
    for (int i = 0; i < l->n; i++) {
        const TensorSpec *t = &l->tensors[i];
        if (t->kind == TENSOR_Q8_AK42 && t->numel / t->parts % group_size != 0) {
            snprintf(err, errlen, "%s has %llu values%s, not a multiple of group_size %d", t->name,
                     (unsigned long long)(t->numel / t->parts), t->parts > 1 ? " per layer" : "",
                     group_size);
            return -1;
        }
    }
    m->format = version == 1 ? "llama2.c version 1" : "llama2.c version 2 (int8, dequantized)";
    return 0;
}

/* normllama header: see docs/FORMAT.md. */
static int read_normllama(Model *m, const char *map, Layout *l, char *err, size_t errlen) {
    Config *c = &m->config;
    uint32_t version = read_u32(map + 4);
    if (version != NLLM_VERSION) {
        snprintf(err, errlen, "unknown normllama version %u (this run reads version %d)", version,
                 NLLM_VERSION);
        return -1;
    }
    read_sizes(c, map + 8);
    c->rope_theta = read_f32(map + 36);
    c->norm_eps = read_f32(map + 40);
    uint32_t norm = read_u32(map + 44), bias = read_u32(map + 48), shared = read_u32(map + 52);
    uint32_t dtype = read_u32(map + 56), align = read_u32(map + 60);
    if (norm >= sizeof(norm_codes) / sizeof(norm_codes[0])) {
        snprintf(err, errlen, "unknown trained norm code %u (0 rmsnorm, 1 layernorm)", norm);
        return -1;
    }
    c->trained_norm = norm_by_name(norm_codes[norm]);
    if (check_flag("norm_bias", bias, err, errlen) != 0) return -1;
    if (check_flag("shared_classifier", shared, err, errlen) != 0) return -1;
    c->norm_bias = bias;
    c->shared_classifier = shared;
    if (dtype >= sizeof(dtype_names) / sizeof(dtype_names[0])) {
        snprintf(err, errlen, "unknown weight dtype %u (0 f32, 1 bf16, 2 q8_0)", dtype);
        return -1;
    }
    uint32_t group_size = read_u32(map + Q8_HEADER_OFF);
    if (dtype == DTYPE_Q8_0 && group_size != 32 && group_size != 64) {
        snprintf(err, errlen, "q8_0 group_size is %u, not 32 or 64", group_size);
        return -1;
    }
    if (dtype != DTYPE_Q8_0 && group_size != 0) {
        snprintf(err, errlen, "group_size is %u but %s weights have no groups (must be 0)",
                 group_size, dtype_names[dtype]);
        return -1;
    }
    if (align < 4 || align > 4096 || (align & (align - 1)) != 0) {
        snprintf(err, errlen, "alignment is %u, not a power of two in 4..4096", align);
        return -1;
    }
    for (int i = Q8_HEADER_OFF + 4; i < FIXED_HEADER; i++) {
        if (map[i] != 0) {
            snprintf(err, errlen, "reserved header byte %d is not zero", i);
            return -1;
        }
    }
    if (check_config(c, err, errlen) != 0) return -1;
    const TensorKind kinds[] = {TENSOR_F32, TENSOR_BF16, TENSOR_I8};
    normllama_layout(l, &m->weights, c, align, kinds[dtype], (int)group_size);
    static const char *const formats[] = {"normllama v1 f32", "normllama v1 bf16",
                                          "normllama v1 q8_0"};
    m->format = formats[dtype];
    return 0;
}

/* bytes of memory at a 64-byte boundary (a cache line: whole-vector loads of a row never
 * straddle two lines, which cost prefill a quarter of its speed with calloc's 16-byte
 * alignment), or NULL */
static void *aligned(size_t bytes) {
    return aligned_alloc(64, (bytes + 63) / 64 * 64 + (bytes == 0) * 64);
}

/* aligned(bytes), zeroed */
static void *zeroed(size_t bytes) {
    void *p = aligned(bytes);
    if (p) memset(p, 0, bytes);
    return p;
}

static int alloc_state(RunState *s, const Config *c) {
    size_t head_size = c->dim / c->n_heads;
    size_t kv_dim = c->n_kv_heads * head_size;
    size_t cache = (size_t)c->n_layers * c->seq_len * kv_dim;
    s->batch = c->seq_len < 64 ? c->seq_len : 64;
    size_t rows = s->batch;
    s->x = zeroed(rows * c->dim * sizeof(float));
    s->xb = zeroed(rows * c->dim * sizeof(float));
    s->xb2 = zeroed(rows * c->dim * sizeof(float));
    s->hb = zeroed(rows * c->hidden_dim * sizeof(float));
    s->hb2 = zeroed(rows * c->hidden_dim * sizeof(float));
    s->q = zeroed(rows * c->dim * sizeof(float));
    s->att = zeroed((size_t)c->n_heads * 4 * c->seq_len * sizeof(float));
    s->logits = zeroed(c->vocab_size * sizeof(float));
    s->key_cache = aligned(cache * sizeof(float)); /* each position is written before it is read */
    s->value_cache = aligned(cache * sizeof(float));
    s->inv_freq = zeroed((head_size / 2) * sizeof(float));
    int widest = c->dim > c->hidden_dim ? c->dim : c->hidden_dim;
    s->xq_stride = (widest + 63) / 64 * 64;
    s->xq = zeroed(rows * s->xq_stride * sizeof(int16_t));
    s->xq_scale = zeroed(rows * sizeof(float));
    if (!s->x || !s->xb || !s->xb2 || !s->hb || !s->hb2 || !s->q || !s->att || !s->logits ||
        !s->key_cache || !s->value_cache || !s->inv_freq || !s->xq || !s->xq_scale)
        return -1;
    return 0;
}

static void free_state(RunState *s) {
    free(s->x);
    free(s->xq);
    free(s->xq_scale);
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

/* Checks the header and the layout against the file size, then sets the weights. */
static int load_weights(Model *m, const char *map, size_t size, char *what, size_t whatlen) {
    uint32_t magic = read_u32(map);
    size_t header = magic == NLLM_MAGIC || magic == AK42_MAGIC ? FIXED_HEADER : LEGACY_HEADER;
    if (size < header) {
        snprintf(what, whatlen, "model file is %zu bytes, shorter than its %zu-byte header", size,
                 header);
        return -1;
    }
    Layout l;
    int rc = magic == NLLM_MAGIC   ? read_normllama(m, map, &l, what, whatlen)
             : magic == AK42_MAGIC ? read_ak42(m, map, &l, what, whatlen)
                                   : read_legacy(m, map, &l, what, whatlen);
    if (rc != 0) return -1;
    const Config *c = &m->config;
    uint64_t expected = layout_end(&l);
    if (expected != size) {
        snprintf(what, whatlen,
                 "file is %zu bytes but its %s header (dim %d, hidden_dim %d, n_layers %d, "
                 "vocab_size %d, seq_len %d) implies %llu",
                 size, m->format, c->dim, c->hidden_dim, c->n_layers, c->vocab_size, c->seq_len,
                 (unsigned long long)expected);
        return -1;
    }
    uint64_t q8 = layout_q8_numel(&l);
    if (q8 > 0 && !(m->owned = malloc(q8 * sizeof(float)))) {
        snprintf(what, whatlen, "out of memory for %llu dequantized weights",
                 (unsigned long long)q8);
        return -1;
    }
    layout_place(&l, map, m->owned);
    if (c->shared_classifier) m->weights.wcls = m->weights.token_embedding;
    return 0;
}

/* Makes every page of the map resident before the first forward pass. MAP_POPULATE (Linux)
 * maps them all, as llama.cpp does, and reading one byte per page pays what the first read of a
 * page still costs after that: on the VMs measured here about 1.4 us a page, 0.15 s for a 110M
 * fp32 model, which otherwise lands in the first token (whose forward pass took 0.12 s instead
 * of 0.009 s) and in the prompt's speed. */
static void touch_pages(const char *map, size_t size) {
    long page = sysconf(_SC_PAGESIZE);
    volatile char sink = 0; /* keeps the reads */
    for (size_t off = 0; off<size; off += page> 0 ? (size_t)page : 4096) sink ^= map[off];
}

int model_load(Model *m, const char *path, char *err, size_t errlen) {
    memset(m, 0, sizeof(*m));
    char what[256];
    int fd = open(path, O_RDONLY | O_NONBLOCK); /* a FIFO must not block before the check below */
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
    if (size < sizeof(uint32_t)) {
        close(fd);
        return fail(err, errlen, path, "model file is shorter than its 4-byte magic");
    }
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    close(fd); /* the mapping stays valid */
    if (map == MAP_FAILED) {
        snprintf(what, sizeof(what), "cannot map model: %s", strerror(errno));
        return fail(err, errlen, path, what);
    }
    touch_pages(map, size);
    m->map = map;
    m->map_size = size;
    if (load_weights(m, map, size, what, sizeof(what)) != 0) {
        model_free(m);
        return fail(err, errlen, path, what);
    }
    m->norm = m->config.trained_norm;
    if (alloc_state(&m->state, &m->config) != 0) {
        model_free(m);
        return fail(err, errlen, path, "out of memory for the run state and kv cache");
    }
    init_rope(&m->state, &m->config);
    return 0;
}

void model_free(Model *m) {
    if (m->map) munmap(m->map, m->map_size);
    free(m->owned);
    free_state(&m->state);
    memset(m, 0, sizeof(*m));
}

/* The only cost of profiling when it is off: one predictable branch per lap. */
static inline void lap(Profile *p, OpClass op) {
    if (p) profile_lap(p, op);
}

/* ----------------------------------------------------------------------------
 * The forward pass */

/* Matrix-vector and matrix-matrix products share one kernel: a tile of TILE_ROWS weight rows
 * times up to TILE_BATCH input vectors, with one vector accumulator (simd.h) per (row, input)
 * pair. Each weight vector loaded is used for every input of the tile and each input vector for
 * every row, so the loads per multiply-add fall as the tile grows; TILE_ROWS independent
 * accumulators also keep the FMA unit busy while each one waits for its last add. A tile's rows
 * are far apart (i, i + step, i + 2 step, ...; step = rows / TILE_ROWS rounded up): each is then
 * its own sequential stream for the hardware prefetcher, where adjacent rows read in turn looked
 * scattered to it and made memory-bound decode 25% slower (measured on the 15M shape). A dot
 * product comes out the same bits in a tile of one input (decode) as of four (prefill): each
 * accumulator sees the same adds in the same order, and vec_sum4 reduces each the same way. */
enum { TILE_ROWS = 4, TILE_BATCH = 4 };

#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

/* Values j..j + len of weight row `row` (of the stack of all layers) as floats, len <=
 * VEC_WIDTH: f32 as stored, bf16 widened (q8_0 has its own tile, dot_tile_q8). */
static ALWAYS_INLINE vecf weight_vector(const Matrix *w, size_t row, int j, int len) {
    size_t at = row * w->cols + j;
    if (w->dtype == DTYPE_BF16) {
        const uint16_t *p = (const uint16_t *)w->data + at;
        return len == VEC_WIDTH ? vec_load_bf16(p) : vec_load_bf16_partial(p, len);
    }
    const float *p = (const float *)w->data + at;
    return len == VEC_WIDTH ? vec_load(p) : vec_load_partial(p, len);
}

/* acc[r][b] += weights (j..j + len) of row rows[r] times the same values of input b */
static ALWAYS_INLINE void tile_step(vecf acc[TILE_ROWS][TILE_BATCH], const Matrix *w,
                                    const size_t rows[TILE_ROWS], const float *x, int nb, int j,
                                    int len) {
    vecf xv[TILE_BATCH];
    for (int b = 0; b < nb; b++) {
        const float *p = x + (size_t)b * w->cols + j;
        xv[b] = len == VEC_WIDTH ? vec_load(p) : vec_load_partial(p, len);
    }
    for (int r = 0; r < TILE_ROWS; r++) {
        vecf wv = weight_vector(w, rows[r], j, len);
        for (int b = 0; b < nb; b++) acc[r][b] = vec_fmadd(wv, xv[b], acc[r][b]);
    }
}

/* out[b * out_stride + r * step] = row (first + r * step) of w . x[b] for r < n_rows (<=
 * TILE_ROWS) and b < nb (<= TILE_BATCH); x: (nb, w->cols). The missing rows of a short tile
 * repeat its first row and are not stored, so the loop has one shape. Inlined with nb a
 * constant, the accumulators live in registers. */
static ALWAYS_INLINE void dot_tile(float *out, size_t out_stride, const float *x, int nb,
                                   const Matrix *w, size_t first, size_t step, int n_rows) {
    vecf acc[TILE_ROWS][TILE_BATCH];
    size_t rows[TILE_ROWS];
    for (int r = 0; r < TILE_ROWS; r++) {
        rows[r] = first + (r < n_rows ? r * step : 0);
        for (int b = 0; b < nb; b++) acc[r][b] = vec_zero();
    }
    int j = 0;
    for (; j + VEC_WIDTH <= w->cols; j += VEC_WIDTH) tile_step(acc, w, rows, x, nb, j, VEC_WIDTH);
    if (j < w->cols) tile_step(acc, w, rows, x, nb, j, w->cols - j);
    for (int b = 0; b < nb; b++) {
        float sums[TILE_ROWS];
        vec_sum4(acc[0][b], acc[1][b], acc[2][b], acc[3][b], sums);
        for (int r = 0; r < n_rows; r++) out[(size_t)b * out_stride + r * step] = sums[r];
    }
}

/* q8_0, one group of every row of a tile: acc[r][b] += (scale of row r's group g) * (int8
 * weights . int16 inputs b) over the group's len values from start. The integer sums are exact;
 * with len a constant (inlined) the loops unroll whole and acc stays in registers. */
static ALWAYS_INLINE void q8_group(vecf acc[TILE_ROWS][TILE_BATCH],
                                   const int8_t *const rows[TILE_ROWS],
                                   const float *const scales[TILE_ROWS], const int16_t *xq,
                                   size_t xq_stride, int nb, int g, int start, int len) {
#pragma GCC unroll 4
    for (int r = 0; r < TILE_ROWS; r++) {
        veci sums[TILE_BATCH];
        for (int b = 0; b < nb; b++) sums[b] = veci_zero();
        int j = 0;
        for (; j + 2 * VEC_WIDTH <= len; j += 2 * VEC_WIDTH) {
            vecw wv = vecw_load_i8(rows[r] + start + j);
            for (int b = 0; b < nb; b++)
                sums[b] = veci_dot(sums[b], wv, vecw_load_i16(xq + b * xq_stride + start + j));
        }
        if (j < len) {
            vecw wv = vecw_load_i8_partial(rows[r] + start + j, len - j);
            for (int b = 0; b < nb; b++)
                sums[b] = veci_dot(sums[b], wv, vecw_load_i16(xq + b * xq_stride + start + j));
        }
        vecf scale = vec_set1(scales[r][g]);
        for (int b = 0; b < nb; b++)
            acc[r][b] = vec_fmadd(vec_from_veci(sums[b]), scale, acc[r][b]);
    }
}

/* q8_0 with quantized inputs: input b is xq_scale[b] * xq[b] (int16), so that a group's dot
 * product with the int8 weights is an exact integer sum, converted and scaled by its weight
 * scale once; the input's scale multiplies the total. Shapes and tiles as dot_tile; xq: (nb,
 * xq_stride); group_size (= w->group_size) a constant once inlined. */
static ALWAYS_INLINE void dot_tile_q8(float *out, size_t out_stride, const int16_t *xq,
                                      size_t xq_stride, const float *xq_scale, int nb,
                                      const Matrix *w, size_t first, size_t step, int n_rows,
                                      int group_size) {
    int n = w->cols, n_groups = (n + group_size - 1) / group_size, full = n / group_size;
    vecf acc[TILE_ROWS][TILE_BATCH];
    const int8_t *rows[TILE_ROWS];
    const float *scales[TILE_ROWS];
    for (int r = 0; r < TILE_ROWS; r++) {
        size_t row = first + (r < n_rows ? r * step : 0);
        rows[r] = (const int8_t *)w->data + row * n;
        scales[r] = w->scales + row * n_groups;
        for (int b = 0; b < nb; b++) acc[r][b] = vec_zero();
    }
    for (int g = 0; g < full; g++)
        q8_group(acc, rows, scales, xq, xq_stride, nb, g, g * group_size, group_size);
    if (full < n_groups) /* the shorter last group */
        q8_group(acc, rows, scales, xq, xq_stride, nb, full, full * group_size,
                 n - full * group_size);
    for (int b = 0; b < nb; b++) {
        float sums[TILE_ROWS];
        vec_sum4(acc[0][b], acc[1][b], acc[2][b], acc[3][b], sums);
        for (int r = 0; r < n_rows; r++)
            out[(size_t)b * out_stride + r * step] = xq_scale[b] * sums[r];
    }
}

/* xq = round(x / scale) as int16, scale = max |x| / 32767 (0 for a zero vector: xq all 0), for
 * the n values of x; xq's values from n up to the next multiple of 64 are zero. About 4.5
 * significant digits for all but values far below the largest, against the weights' int8. A
 * NaN or infinite value makes scale NaN (and its xq 0, as converting it is undefined), so that
 * the product comes out non-finite as the other dtypes' would. */
static void quantize_input(int16_t *xq, float *scale, const float *x, int n) {
    float max = 0.0f;
    for (int j = 0; j < n; j++) max = fabsf(x[j]) > max ? fabsf(x[j]) : max;
    float inv = max > 0.0f ? 32767.0f / max : 0.0f;
    int bad = 0; /* an input that is NaN, or infinite (then max is, inv 0 and x * inv NaN) */
    for (int j = 0; j < n; j++) {
        float v = x[j] * inv;
        int ok = fabsf(v) <= 32767.5f;
        xq[j] = ok ? (int16_t)nearbyintf(v) : 0;
        bad |= !ok;
    }
    *scale = bad ? NAN : max / 32767.0f;
    for (int j = n; j % 64 != 0; j++) xq[j] = 0;
}

/* The inputs of a matrix product from input b on: x (rows of w->cols floats), and for q8_0
 * weights the same quantized by quantize_input (rows of xq_stride int16, one scale each). */
typedef struct {
    const float *x;
    const int16_t *xq;
    const float *xq_scale;
    size_t xq_stride;
} Inputs;

static Inputs inputs_from(Inputs in, int b, int cols) {
    return (Inputs){in.x + (size_t)b * cols, in.xq + b * in.xq_stride, in.xq_scale + b,
                    in.xq_stride};
}

/* One tile of rows first + r * step (r < n_rows) times nb inputs (a constant once inlined). */
static ALWAYS_INLINE void tile(float *out, size_t out_stride, Inputs in, int nb, const Matrix *w,
                               size_t first, size_t step, int n_rows) {
    if (w->dtype == DTYPE_Q8_0 && w->group_size == 32)
        dot_tile_q8(out, out_stride, in.xq, in.xq_stride, in.xq_scale, nb, w, first, step, n_rows,
                    32);
    else if (w->dtype == DTYPE_Q8_0) /* model_load allows 32 and 64 */
        dot_tile_q8(out, out_stride, in.xq, in.xq_stride, in.xq_scale, nb, w, first, step, n_rows,
                    64);
    else
        dot_tile(out, out_stride, in.x, nb, w, first, step, n_rows);
}

static void tile_1(float *out, size_t out_stride, Inputs in, const Matrix *w, size_t first,
                   size_t step, int n_rows) {
    tile(out, out_stride, in, 1, w, first, step, n_rows);
}

static void tile_4(float *out, size_t out_stride, Inputs in, const Matrix *w, size_t first,
                   size_t step, int n_rows) {
    tile(out, out_stride, in, TILE_BATCH, w, first, step, n_rows);
}

/* out[k] = x W_k^T for k < n (at most 3), W_k layer `layer` of w[k]: (w[k]->rows, cols); all
 * n matrices have cols = w[0]->cols columns and one dtype; x: (batch, cols), out[k]: (batch,
 * w[k]->rows); batch <= s->batch. The tiles of all n products (wq, wk, wv of one input, or w1,
 * w3) are split among the threads in one parallel region, so that they cost one fork and join
 * and, for q8_0, one quantization of x (into s->xq). A tile's weights are read from memory once
 * and stay in cache while every input of the batch passes them (batched prefill's matrix-matrix
 * product); with batch 1 this is decode's matrix-vector product. */
static void matmul_batch(RunState *s, int n, float *const out[], const Matrix *const w[],
                         const float *x, int batch, int layer) {
    int cols = w[0]->cols;
    Inputs in = {x, s->xq, s->xq_scale, s->xq_stride};
    if (w[0]->dtype == DTYPE_Q8_0)
        for (int b = 0; b < batch; b++)
            quantize_input(s->xq + (size_t)b * s->xq_stride, &s->xq_scale[b], x + (size_t)b * cols,
                           cols);
    int tiles[4] = {0}; /* product k has tiles tiles[k] .. tiles[k + 1] - 1 */
    size_t work = 0;
    for (int k = 0; k < n; k++) {
        tiles[k + 1] = tiles[k] + (w[k]->rows + TILE_ROWS - 1) / TILE_ROWS;
        work += (size_t)w[k]->rows * cols * batch;
    }
#pragma omp parallel for if (work >= PARALLEL_MIN_WORK)
    for (int t = 0; t < tiles[n]; t++) {
        int k = 0;
        while (t >= tiles[k + 1]) k++;
        const Matrix *m = w[k];
        int i = t - tiles[k], step = tiles[k + 1] - tiles[k]; /* tile i: rows i + r * step */
        int n_rows = 0;
        while (n_rows < TILE_ROWS && i + n_rows * step < m->rows) n_rows++;
        size_t first = (size_t)layer * m->rows + i;
        int b = 0;
        for (; b + TILE_BATCH <= batch; b += TILE_BATCH)
            tile_4(out[k] + (size_t)b * m->rows + i, m->rows, inputs_from(in, b, cols), m, first,
                   step, n_rows);
        for (; b < batch; b++)
            tile_1(out[k] + (size_t)b * m->rows + i, m->rows, inputs_from(in, b, cols), m, first,
                   step, n_rows);
    }
}

/* Row `row` of w as floats: out (w->cols). The token embedding lookup. */
static void matrix_row(float *out, const Matrix *w, size_t row) {
    int n = w->cols;
    if (w->dtype == DTYPE_BF16) {
        const uint16_t *r = (const uint16_t *)w->data + row * n;
        for (int j = 0; j < n; j++) out[j] = bf16_to_f32(r[j]);
    } else if (w->dtype == DTYPE_Q8_0) {
        const int8_t *r = (const int8_t *)w->data + row * n;
        const float *scales = w->scales + row * ((n + w->group_size - 1) / w->group_size);
        for (int j = 0; j < n; j++) out[j] = r[j] * scales[j / w->group_size];
    } else {
        memcpy(out, (const float *)w->data + row * n, n * sizeof(float));
    }
}

/* Rotates each pair (v[2i], v[2i+1]) of every head of the query q (dim = n_heads * head_size)
 * and key k (kv_dim) by the angle pos * inv_freq[i]: RoPE (Su et al. 2021, eq. 34) in the
 * interleaved pairing that llama2.c and Meta's Llama reference use. Each angle's cosine and sine
 * are computed once for all heads. */
static void rope(float *q, int dim, float *k, int kv_dim, int head_size, int pos,
                 const float *inv_freq) {
    for (int i = 0; i < head_size; i += 2) {
        float angle = pos * inv_freq[i / 2];
        float cos_a = cosf(angle), sin_a = sinf(angle);
        for (int h = i; h < dim; h += head_size) {
            float *v = h < kv_dim ? k + h : NULL; /* k has the first kv_dim / head_size heads */
            float q0 = q[h], q1 = q[h + 1];
            q[h] = q0 * cos_a - q1 * sin_a;
            q[h + 1] = q0 * sin_a + q1 * cos_a;
            if (v) {
                float k0 = v[0], k1 = v[1];
                v[0] = k0 * cos_a - k1 * sin_a;
                v[1] = k0 * sin_a + k1 * cos_a;
            }
        }
    }
}

void softmax(float *x, int n) {
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

/* out[i] = q[i] . k over n values for i < nq (1 or 4, a constant once inlined), summed in
 * vector lanes (simd.h): the four queries share each load of k and one reduction. A query's sum
 * comes out the same bits either way (its lanes see the same adds; vec_sum4 reduces each alike). */
static ALWAYS_INLINE void dot_queries(const float *const q[4], int nq, const float *k, int n,
                                      float out[4]) {
    vecf acc[4];
    for (int i = 0; i < nq; i++) acc[i] = vec_zero();
    int j = 0;
    for (; j + VEC_WIDTH <= n; j += VEC_WIDTH) {
        vecf kv = vec_load(k + j);
        for (int i = 0; i < nq; i++) acc[i] = vec_fmadd(vec_load(q[i] + j), kv, acc[i]);
    }
    if (j < n) {
        vecf kv = vec_load_partial(k + j, n - j);
        for (int i = 0; i < nq; i++)
            acc[i] = vec_fmadd(vec_load_partial(q[i] + j, n - j), kv, acc[i]);
    }
    for (int i = nq; i < 4; i++) acc[i] = acc[0];
    vec_sum4(acc[0], acc[1], acc[2], acc[3], out);
}

/* y += a x over n values */
static void axpy(float *y, float a, const float *x, int n) {
    vecf va = vec_set1(a);
    int i = 0;
    for (; i + VEC_WIDTH <= n; i += VEC_WIDTH)
        vec_store(y + i, vec_fmadd(va, vec_load(x + i), vec_load(y + i)));
    if (i < n)
        vec_store_partial(
            y + i, vec_fmadd(va, vec_load_partial(x + i, n - i), vec_load_partial(y + i, n - i)),
            n - i);
}

/* One kv head's part of a layer's cache: position t's key is keys + t * kv_dim, its value
 * values + t * kv_dim, head_size floats each. */
typedef struct {
    const float *keys, *values;
    int kv_dim, head_size;
} HeadCache;

/* Causal attention of nq (1 or 4, a constant once inlined) query heads q[i] at positions
 * first_pos + i over the cached positions 0..first_pos + i, into out[i] (head_size each): scores
 * q . k / sqrt(head_size), softmax, the values mixed by the weights. att: nq rows of stride
 * floats, scratch. */
static ALWAYS_INLINE void attend(const HeadCache *hc, const float *const q[4], float *const out[4],
                                 int nq, int first_pos, float *att, int stride) {
    float scale = sqrtf((float)hc->head_size); /* divided, not multiplied, to round as llama2.c */
    for (int t = 0; t <= first_pos + nq - 1; t++) { /* later queries' keys: the others ignore */
        float scores[4];
        dot_queries(q, nq, hc->keys + (size_t)t * hc->kv_dim, hc->head_size, scores);
        for (int i = 0; i < nq; i++) att[(size_t)i * stride + t] = scores[i] / scale;
    }
    for (int i = 0; i < nq; i++) {
        float *weights = att + (size_t)i * stride;
        int pos = first_pos + i;
        softmax(weights, pos + 1);
        memset(out[i], 0, hc->head_size * sizeof(float));
        for (int t = 0; t <= pos; t++)
            axpy(out[i], weights[t], hc->values + (size_t)t * hc->kv_dim, hc->head_size);
    }
}

/* Causal multi-head attention for the positions pos0 .. pos0 + batch - 1 of layer l: query b
 * (row b of q: (batch, n_heads * head_size)) attends over the cached positions 0..pos0 + b, into
 * row b of out (same shape); s->att is scratch, four seq_len rows per head. Query head h reads
 * kv head h / (n_heads / n_kv_heads). Heads in parallel, one parallel region for the whole batch;
 * within a head, the queries go four at a time. */
static void attention(RunState *s, const Config *c, int l, int pos0, int batch, const float *q,
                      float *out) {
    int dim = c->dim, head_size = dim / c->n_heads;
    int kv_dim = c->n_kv_heads * head_size;
    int heads_per_kv = c->n_heads / c->n_kv_heads;
    size_t layer_off = (size_t)l * c->seq_len * kv_dim;
    size_t work = (size_t)c->n_heads * batch * (pos0 + batch) * head_size * 2;
#pragma omp parallel for if (work >= PARALLEL_MIN_WORK)
    for (int h = 0; h < c->n_heads; h++) {
        int kv_off = (h / heads_per_kv) * head_size;
        HeadCache hc = {s->key_cache + layer_off + kv_off, s->value_cache + layer_off + kv_off,
                        kv_dim, head_size};
        float *att = s->att + (size_t)h * 4 * c->seq_len;
        int b = 0;
        for (; b + 4 <= batch; b += 4) {
            const float *qs[4];
            float *outs[4];
            for (int i = 0; i < 4; i++) {
                qs[i] = q + (size_t)(b + i) * dim + h * head_size;
                outs[i] = out + (size_t)(b + i) * dim + h * head_size;
            }
            attend(&hc, qs, outs, 4, pos0 + b, att, c->seq_len);
        }
        for (; b < batch; b++) {
            const float *qs[4] = {q + (size_t)b * dim + h * head_size};
            float *outs[4] = {out + (size_t)b * dim + h * head_size};
            attend(&hc, qs, outs, 1, pos0 + b, att, c->seq_len);
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

/* Layer l's slice of a stacked (n_layers, dim) bias, or NULL when the model has none. */
static const float *layer_bias(const float *bias, int l, int dim) {
    return bias ? bias + (size_t)l * dim : NULL;
}

/* Runs the batch (<= m->state.batch) tokens at positions pos0 .. pos0 + batch - 1 through the
 * model, row b of the run state for position pos0 + b; if logits is not NULL, writes their
 * logits into it, (batch, vocab_size). Decode is a batch of one. */
static void forward_positions(Model *m, const int *tokens, int batch, int pos0, float *logits) {
    const Config *c = &m->config;
    const Weights *w = &m->weights;
    RunState *s = &m->state;
    int dim = c->dim, hidden = c->hidden_dim;
    int head_size = dim / c->n_heads;
    int kv_dim = c->n_kv_heads * head_size;
    Profile *prof = m->profile;

    for (int b = 0; b < batch; b++)
        matrix_row(s->x + (size_t)b * dim, &w->token_embedding, tokens[b]);
    lap(prof, OP_EMBEDDING);

    for (int l = 0; l < c->n_layers; l++) {
        /* attention block: x += wo attention(rope(wq n(x)), rope(wk n(x)), wv n(x)) */
        for (int b = 0; b < batch; b++)
            m->norm(s->xb + (size_t)b * dim, s->x + (size_t)b * dim, w->attn_norm + (size_t)l * dim,
                    layer_bias(w->attn_norm_bias, l, dim), dim, c->norm_eps);
        lap(prof, OP_NORM);
        size_t cache_off = ((size_t)l * c->seq_len + pos0) * kv_dim; /* (batch, kv_dim) */
        float *k = s->key_cache + cache_off;
        float *v = s->value_cache + cache_off;
        matmul_batch(s, 3, (float *[]){s->q, k, v}, (const Matrix *[]){&w->wq, &w->wk, &w->wv},
                     s->xb, batch, l);
        lap(prof, OP_QKV);
        for (int b = 0; b < batch; b++)
            rope(s->q + (size_t)b * dim, dim, k + (size_t)b * kv_dim, kv_dim, head_size, pos0 + b,
                 s->inv_freq);
        lap(prof, OP_ROPE);
        /* position pos0 + b attends over 0..pos0 + b: causal within the batch */
        attention(s, c, l, pos0, batch, s->q, s->xb);
        lap(prof, OP_ATTENTION);
        matmul_batch(s, 1, &s->xb2, (const Matrix *[]){&w->wo}, s->xb, batch, l);
        residual_add(s->x, s->xb2, batch * dim);
        lap(prof, OP_OUTPUT_PROJ);

        /* feed-forward block: x += w2 (silu(w1 n(x)) * w3 n(x)) */
        for (int b = 0; b < batch; b++)
            m->norm(s->xb + (size_t)b * dim, s->x + (size_t)b * dim, w->ffn_norm + (size_t)l * dim,
                    layer_bias(w->ffn_norm_bias, l, dim), dim, c->norm_eps);
        lap(prof, OP_NORM);
        matmul_batch(s, 2, (float *[]){s->hb, s->hb2}, (const Matrix *[]){&w->w1, &w->w3}, s->xb,
                     batch, l);
        swiglu(s->hb, s->hb2, batch * hidden);
        matmul_batch(s, 1, &s->xb2, (const Matrix *[]){&w->w2}, s->hb, batch, l);
        residual_add(s->x, s->xb2, batch * dim);
        lap(prof, OP_FFN);
    }

    if (logits) {
        for (int b = 0; b < batch; b++)
            m->norm(s->x + (size_t)b * dim, s->x + (size_t)b * dim, w->final_norm,
                    w->final_norm_bias, dim, c->norm_eps);
        lap(prof, OP_NORM);
        matmul_batch(s, 1, &logits, (const Matrix *[]){&w->wcls}, s->x, batch, 0);
        lap(prof, OP_CLASSIFIER);
    }
}

float *model_forward(Model *m, int token, int pos) {
    if (m->profile) profile_start(m->profile);
    forward_positions(m, &token, 1, pos, m->state.logits);
    return m->state.logits;
}

void model_prefill(Model *m, const int *tokens, int n, float *logits) {
    int batch = m->state.batch;
    if (m->profile) profile_start(m->profile);
    for (int pos0 = 0; pos0 < n; pos0 += batch)
        forward_positions(m, tokens + pos0, n - pos0 < batch ? n - pos0 : batch, pos0,
                          logits ? logits + (size_t)pos0 * m->config.vocab_size : NULL);
}
