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

#define MAX_SIZE (1 << 20) /* bound on every header field, so each tensor size fits in 64 bits */

/* First four bytes, read as a little-endian uint32. */
#define NLLM_MAGIC    0x4d4c4c4eu /* "NLLM" */
#define AK42_MAGIC    0x616b3432u /* "24ka" on disk: llama2.c writes the number 0x616b3432 */
#define NLLM_VERSION  1
#define LEGACY_HEADER 28  /* 7 int32 */
#define FIXED_HEADER  256 /* normllama and llama2.c version 1/2 headers, zero-padded */

/* Weight dtypes of the normllama header; bf16 and q8_0 are reserved for a later version. */
enum { DTYPE_F32 = 0, DTYPE_BF16 = 1, DTYPE_Q8_0 = 2 };
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

/* One tensor of a file layout, in file order. */
typedef enum { TENSOR_F32, TENSOR_Q8, TENSOR_SKIP } TensorKind;
typedef struct {
    const char *name;
    const float **dst; /* where its fp32 data goes; NULL for TENSOR_SKIP */
    uint64_t numel;
    TensorKind kind;
    /* TENSOR_Q8: stored as `parts` equal pieces (one per layer), each its int8 values followed
     * by one fp32 scale per group_size values of that piece */
    uint64_t parts;
} TensorSpec;

typedef struct {
    TensorSpec tensors[20];
    int n;
    uint64_t start;      /* file offset of the first tensor */
    uint64_t align;      /* every tensor starts at a multiple of this (1: packed) */
    uint64_t group_size; /* TENSOR_Q8 only */
} Layout;

static void add(Layout *l, const char *name, const float **dst, uint64_t numel, TensorKind kind,
                uint64_t parts) {
    l->tensors[l->n++] = (TensorSpec){name, dst, numel, kind, parts};
}

static uint64_t align_up(uint64_t off, uint64_t align) {
    return (off + align - 1) / align * align;
}

static uint64_t tensor_bytes(const TensorSpec *t, uint64_t group_size) {
    if (t->kind == TENSOR_Q8) return t->numel + t->numel / group_size * sizeof(float);
    return t->numel * sizeof(float);
}

/* The file size a layout implies: the end of its last tensor. Header fields up to MAX_SIZE make
 * a tensor at most 2^63 bytes, so stopping past 2^62 (no real file) keeps the sum from wrapping. */
static uint64_t layout_end(const Layout *l) {
    uint64_t off = l->start;
    for (int i = 0; i < l->n && off <= (1ull << 62); i++)
        off = align_up(off, l->align) + tensor_bytes(&l->tensors[i], l->group_size);
    return off <= (1ull << 62) ? off : UINT64_MAX;
}

/* Number of floats the TENSOR_Q8 tensors dequantize to. */
static uint64_t layout_q8_numel(const Layout *l) {
    uint64_t n = 0;
    for (int i = 0; i < l->n; i++)
        if (l->tensors[i].kind == TENSOR_Q8) n += l->tensors[i].numel;
    return n;
}

/* Sets every tensor's pointer: into the map for fp32, into `owned` (dequantized) for int8. Only
 * called once layout_end has matched the file size, so every read is inside the map. */
static void layout_place(const Layout *l, const char *map, float *owned) {
    uint64_t off = l->start;
    for (int i = 0; i < l->n; i++) {
        const TensorSpec *t = &l->tensors[i];
        off = align_up(off, l->align);
        if (t->kind == TENSOR_F32) {
            *t->dst = (const float *)(map + off);
        } else if (t->kind == TENSOR_Q8) {
            *t->dst = owned;
            uint64_t n = t->numel / t->parts, gs = l->group_size;
            const char *piece = map + off;
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
        off += tensor_bytes(t, l->group_size);
    }
}

/* Shapes shared by every layout's tensor list. */
typedef struct {
    uint64_t embed, norms, attn, kv, ffn;
} Sizes;

static Sizes sizes_of(const Config *c) {
    uint64_t dim = c->dim, layers = c->n_layers;
    uint64_t kv_dim = (uint64_t)c->n_kv_heads * (dim / c->n_heads);
    return (Sizes){.embed = (uint64_t)c->vocab_size * dim,
                   .norms = layers * dim,
                   .attn = layers * dim * dim,
                   .kv = layers * kv_dim * dim,
                   .ffn = layers * (uint64_t)c->hidden_dim * dim};
}

/* llama2.c legacy: embedding, per-kind stacked layer tensors, final norm, the unused RoPE tables,
 * classifier when not shared. */
static void legacy_layout(Layout *l, Weights *w, const Config *c) {
    Sizes s = sizes_of(c);
    TensorKind k = TENSOR_F32;
    uint64_t layers = c->n_layers;
    *l = (Layout){.start = LEGACY_HEADER, .align = 1};
    add(l, "token_embedding", &w->token_embedding, s.embed, k, 1);
    add(l, "attn_norm", &w->attn_norm, s.norms, k, layers);
    add(l, "wq", &w->wq, s.attn, k, layers);
    add(l, "wk", &w->wk, s.kv, k, layers);
    add(l, "wv", &w->wv, s.kv, k, layers);
    add(l, "wo", &w->wo, s.attn, k, layers);
    add(l, "ffn_norm", &w->ffn_norm, s.norms, k, layers);
    add(l, "w1", &w->w1, s.ffn, k, layers);
    add(l, "w2", &w->w2, s.ffn, k, layers);
    add(l, "w3", &w->w3, s.ffn, k, layers);
    add(l, "final_norm", &w->final_norm, c->dim, k, 1);
    add(l, "rope tables", NULL, (uint64_t)c->seq_len * (c->dim / c->n_heads), TENSOR_SKIP, 1);
    if (!c->shared_classifier) add(l, "wcls", &w->wcls, s.embed, k, 1);
}

/* llama2.c version 1 (fp32) and 2 (int8 groups, norms kept fp32): norms first, then embedding,
 * attention and feed-forward matrices, classifier when not shared. */
static void ak42_layout(Layout *l, Weights *w, const Config *c, int version, uint64_t group_size) {
    Sizes s = sizes_of(c);
    TensorKind k = version == 2 ? TENSOR_Q8 : TENSOR_F32;
    uint64_t layers = c->n_layers;
    *l = (Layout){.start = FIXED_HEADER, .align = 1, .group_size = group_size};
    add(l, "attn_norm", &w->attn_norm, s.norms, TENSOR_F32, layers);
    add(l, "ffn_norm", &w->ffn_norm, s.norms, TENSOR_F32, layers);
    add(l, "final_norm", &w->final_norm, c->dim, TENSOR_F32, 1);
    add(l, "token_embedding", &w->token_embedding, s.embed, k, 1);
    add(l, "wq", &w->wq, s.attn, k, layers);
    add(l, "wk", &w->wk, s.kv, k, layers);
    add(l, "wv", &w->wv, s.kv, k, layers);
    add(l, "wo", &w->wo, s.attn, k, layers);
    add(l, "w1", &w->w1, s.ffn, k, layers);
    add(l, "w2", &w->w2, s.ffn, k, layers);
    add(l, "w3", &w->w3, s.ffn, k, layers);
    if (!c->shared_classifier) add(l, "wcls", &w->wcls, s.embed, k, 1);
}

/* normllama: legacy order without the RoPE tables, each norm followed by its bias when the file
 * has biases, every tensor aligned. */
static void normllama_layout(Layout *l, Weights *w, const Config *c, uint64_t align) {
    Sizes s = sizes_of(c);
    TensorKind k = TENSOR_F32;
    uint64_t layers = c->n_layers;
    *l = (Layout){.start = align_up(FIXED_HEADER, align), .align = align};
    add(l, "token_embedding", &w->token_embedding, s.embed, k, 1);
    add(l, "attn_norm", &w->attn_norm, s.norms, k, layers);
    if (c->norm_bias) add(l, "attn_norm_bias", &w->attn_norm_bias, s.norms, k, layers);
    add(l, "wq", &w->wq, s.attn, k, layers);
    add(l, "wk", &w->wk, s.kv, k, layers);
    add(l, "wv", &w->wv, s.kv, k, layers);
    add(l, "wo", &w->wo, s.attn, k, layers);
    add(l, "ffn_norm", &w->ffn_norm, s.norms, k, layers);
    if (c->norm_bias) add(l, "ffn_norm_bias", &w->ffn_norm_bias, s.norms, k, layers);
    add(l, "w1", &w->w1, s.ffn, k, layers);
    add(l, "w2", &w->w2, s.ffn, k, layers);
    add(l, "w3", &w->w3, s.ffn, k, layers);
    add(l, "final_norm", &w->final_norm, c->dim, k, 1);
    if (c->norm_bias) add(l, "final_norm_bias", &w->final_norm_bias, c->dim, k, 1);
    if (!c->shared_classifier) add(l, "wcls", &w->wcls, s.embed, k, 1);
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
        if (t->kind == TENSOR_Q8 && t->numel / t->parts % group_size != 0) {
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
    if (dtype == DTYPE_BF16 || dtype == DTYPE_Q8_0) {
        snprintf(err, errlen,
                 "weight dtype %u (%s) is reserved and not supported yet (only 0, f32)", dtype,
                 dtype == DTYPE_BF16 ? "bf16" : "q8_0");
        return -1;
    }
    if (dtype != DTYPE_F32) {
        snprintf(err, errlen, "unknown weight dtype %u (0 is f32)", dtype);
        return -1;
    }
    if (align < 4 || align > 4096 || (align & (align - 1)) != 0) {
        snprintf(err, errlen, "alignment is %u, not a power of two in 4..4096", align);
        return -1;
    }
    for (int i = 64; i < FIXED_HEADER; i++) {
        if (map[i] != 0) {
            snprintf(err, errlen, "reserved header byte %d is not zero", i);
            return -1;
        }
    }
    if (check_config(c, err, errlen) != 0) return -1;
    normllama_layout(l, &m->weights, c, align);
    m->format = "normllama v1";
    return 0;
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
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd); /* the mapping stays valid */
    if (map == MAP_FAILED) {
        snprintf(what, sizeof(what), "cannot map model: %s", strerror(errno));
        return fail(err, errlen, path, what);
    }
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

/* out = w x. w: (d, n) row-major, x: (n), out: (d). Rows in parallel. */
static void matmul(float *out, const float *x, const float *w, int n, int d) {
#pragma omp parallel for
    for (int i = 0; i < d; i++) {
        const float *row = w + (size_t)i * n;
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
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

/* Layer l's slice of a stacked (n_layers, dim) bias, or NULL when the model has none. */
static const float *layer_bias(const float *bias, int l, int dim) {
    return bias ? bias + (size_t)l * dim : NULL;
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
        m->norm(s->xb, s->x, w->attn_norm + (size_t)l * dim, layer_bias(w->attn_norm_bias, l, dim),
                dim, c->norm_eps);
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
        m->norm(s->xb, s->x, w->ffn_norm + (size_t)l * dim, layer_bias(w->ffn_norm_bias, l, dim),
                dim, c->norm_eps);
        lap(prof, OP_NORM);
        matmul(s->hb, s->xb, w->w1 + (size_t)l * hidden * dim, dim, hidden);
        matmul(s->hb2, s->xb, w->w3 + (size_t)l * hidden * dim, dim, hidden);
        swiglu(s->hb, s->hb2, hidden);
        matmul(s->xb2, s->hb, w->w2 + (size_t)l * dim * hidden, hidden, dim);
        residual_add(s->x, s->xb2, dim);
        lap(prof, OP_FFN);
    }

    m->norm(s->x, s->x, w->final_norm, w->final_norm_bias, dim, c->norm_eps);
    lap(prof, OP_NORM);
    matmul(s->logits, s->x, w->wcls, dim, c->vocab_size);
    lap(prof, OP_CLASSIFIER);
    return s->logits;
}
