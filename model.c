#define _DEFAULT_SOURCE /* MADV_HUGEPAGE, MADV_DONTNEED */
#include "model.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <omp.h>
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
#define NLLM_MAGIC 0x4d4c4c4eu /* "NLLM" */
#define AK42_MAGIC 0x616b3432u /* "24ka" on disk: llama2.c writes the number 0x616b3432 */

#define NLLM_VERSION  1
#define LEGACY_HEADER 28  /* 7 int32 */
#define FIXED_HEADER  256 /* normllama and llama2.c version 1/2 headers, zero-padded */

/* normllama: offset of the uint32 group_size of q8_0 weights (0 for other dtypes), the header's
 * last field; the reserved zero bytes follow */
#define NLLM_GROUP_SIZE_OFF 64
static const char *const dtype_names[] = {"f32", "bf16", "q8_0"};

/* Bytes of one value of a row-major matrix of this dtype (q8_0: the int8, its scales apart). */
static size_t value_bytes(DType dtype) {
    return dtype == DTYPE_F32 ? sizeof(float) : dtype == DTYPE_BF16 ? sizeof(uint16_t) : 1;
}

/* The q8_0 group sizes the kernels are built for (tile). */
static int q8_group_size_ok(uint64_t group_size) {
    return group_size == 32 || group_size == 64;
}

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
    TENSOR_NORM, /* a norm's weight or bias: f32, copied out of the map at load */
    TENSOR_BF16,
    TENSOR_I8,       /* q8_0 values; their scales follow as a TENSOR_F32 */
    TENSOR_AK42_Q8,  /* llama2.c version 2, groups within rows: read in place as q8_0 */
    TENSOR_AK42_F32, /* llama2.c version 2, groups across rows: dequantized at load */
    TENSOR_SKIP,     /* float32 data run does not use */
} TensorKind;
typedef struct {
    const char *name;
    const float **vec; /* where a vector or scales pointer goes, or NULL */
    const void **mat;  /* where a matrix's values pointer goes, or NULL */
    uint64_t numel;
    TensorKind kind;
    /* TENSOR_AK42_*: stored as `parts` equal pieces (one per layer), each its int8 values
     * followed by one fp32 scale per group_size values of that piece (the scales not
     * float-aligned in general) */
    uint64_t parts;
} TensorSpec;

/* A matrix row-major, in the map or dequantized (version 2), until model_load packs it into
 * `matrix`: layer l's values (rows, cols) start value_stride bytes after layer l - 1's values, and
 * its scales scale_stride bytes after layer l - 1's scales. The strides are one layer's values
 * and one layer's scales (the layers back to back), except for a version 2 matrix read as q8_0,
 * where both are a whole piece: a layer's values, then its scales. */
typedef struct {
    Matrix *matrix;
    const void *values;  /* layer 0's (rows, cols): float, uint16_t (bf16) or int8_t (q8_0) */
    const float *scales; /* q8_0: layer 0's (rows, ceil(cols / group_size)); else NULL */
    uint64_t value_stride, scale_stride;
    int layers;
    int in_map; /* 1: values and scales point into the file map; 0: into a dequantized copy */
    int pieces; /* 1: the version 2 q8_0 case, values and scales alternating layer by layer */
} Source;

typedef struct {
    TensorSpec tensors[32]; /* at most 24: normllama q8_0 with norm biases */
    int n;
    Source sources[12]; /* at most 9: every matrix, wcls included */
    int n_sources;
    uint64_t start;      /* file offset of the first tensor */
    uint64_t align;      /* every tensor starts at a multiple of this (1: packed) */
    uint64_t group_size; /* TENSOR_AK42_* only */
} Layout;

static void add_vector(Layout *l, const char *name, const float **dst, uint64_t numel) {
    l->tensors[l->n++] =
        (TensorSpec){.name = name, .vec = dst, .numel = numel, .kind = TENSOR_NORM, .parts = 1};
}

static void skip(Layout *l, const char *name, uint64_t numel) {
    l->tensors[l->n++] =
        (TensorSpec){.name = name, .numel = numel, .kind = TENSOR_SKIP, .parts = 1};
}

/* Whether a tensor is llama2.c version 2's int8, read as q8_0 or dequantized at load. */
static int is_ak42(TensorKind kind) {
    return kind == TENSOR_AK42_Q8 || kind == TENSOR_AK42_F32;
}

/* Bytes of a llama2.c version 2 piece of n values: the int8 values, then their scales. */
static uint64_t ak42_piece_bytes(uint64_t n, uint64_t group_size) {
    return n + n / group_size * sizeof(float);
}

/* A stacked matrix (layers, rows, cols) stored as `kind`; q8_0 (TENSOR_I8) values are followed
 * by their scales tensor (layers * rows, ceil(cols / group_size)). Sets m's shape and dtype (q8_0
 * for TENSOR_AK42_Q8 too, f32 for TENSOR_AK42_F32) and adds it to the sources to pack. */
static void add_matrix(Layout *l, const char *name, Matrix *m, uint64_t layers, int rows, int cols,
                       TensorKind kind, int group_size) {
    int q8 = kind == TENSOR_I8 || kind == TENSOR_AK42_Q8;
    m->dtype = kind == TENSOR_BF16 ? DTYPE_BF16 : q8 ? DTYPE_Q8_0 : DTYPE_F32;
    m->rows = rows;
    m->cols = cols;
    m->group_size = q8 ? group_size : 0;
    uint64_t per_layer = (uint64_t)rows * cols;
    uint64_t n_groups = q8 ? ((uint64_t)cols + group_size - 1) / group_size : 0;
    uint64_t element = value_bytes(m->dtype);
    Source *src = &l->sources[l->n_sources++];
    *src = (Source){.matrix = m,
                    .values = NULL, /* set by layout_place */
                    .scales = NULL,
                    .value_stride = per_layer * element,
                    .scale_stride = rows * n_groups * sizeof(float),
                    .layers = (int)layers,
                    .in_map = kind != TENSOR_AK42_F32,
                    .pieces = kind == TENSOR_AK42_Q8};
    if (src->pieces) /* a piece per layer: its values, then its scales */
        src->value_stride = src->scale_stride = ak42_piece_bytes(per_layer, group_size);
    /* a version 2 piece holds the scales too: layout_place sets both from this one tensor */
    const float **scales = kind == TENSOR_AK42_Q8 ? &src->scales : NULL;
    l->tensors[l->n++] = (TensorSpec){.name = name,
                                      .vec = scales,
                                      .mat = &src->values,
                                      .numel = layers * per_layer,
                                      .kind = kind,
                                      .parts = layers};
    if (kind == TENSOR_I8) /* the scales, a tensor of their own */
        l->tensors[l->n++] = (TensorSpec){.name = name,
                                          .vec = &src->scales,
                                          .numel = layers * rows * n_groups,
                                          .kind = TENSOR_F32,
                                          .parts = 1};
}

static uint64_t align_up(uint64_t off, uint64_t align) {
    return (off + align - 1) / align * align;
}

/* Bytes a tensor takes in the file. */
static uint64_t tensor_bytes(const TensorSpec *t, uint64_t group_size) {
    switch (t->kind) {
    case TENSOR_BF16:
        return t->numel * sizeof(uint16_t);
    case TENSOR_I8:
        return t->numel;
    case TENSOR_AK42_Q8:
    case TENSOR_AK42_F32:
        return ak42_piece_bytes(t->numel, group_size);
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

/* Bytes a tensor takes in memory of its own once layout_place has converted it: 4 per value of
 * a llama2.c version 2 tensor dequantized; 0 for the tensors read in place from the map. */
static uint64_t owned_bytes(const TensorSpec *t) {
    return t->kind == TENSOR_AK42_F32 ? t->numel * sizeof(float) : 0;
}

static uint64_t layout_owned_bytes(const Layout *l) {
    uint64_t n = 0;
    for (int i = 0; i < l->n; i++) n += owned_bytes(&l->tensors[i]);
    return n;
}

/* Floats of all the norms' weights and biases (TENSOR_NORM), which the model keeps. */
static uint64_t layout_norm_floats(const Layout *l) {
    uint64_t n = 0;
    for (int i = 0; i < l->n; i++)
        if (l->tensors[i].kind == TENSOR_NORM) n += l->tensors[i].numel;
    return n;
}

/* A TENSOR_AK42_F32's pieces dequantized into `owned`: value j of a piece times the scale of
 * its group j / group_size. Points the matrix's values there. */
static void dequantize_ak42(const TensorSpec *t, const char *piece, uint64_t gs, float *owned) {
    uint64_t n = t->numel / t->parts;
    *t->mat = owned;
    for (uint64_t p = 0; p < t->parts; p++, piece += ak42_piece_bytes(n, gs)) {
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

/* How far the pages of a tensor in the file map have been given back. */
typedef struct {
    const char *released; /* pages before this are given back */
    int in_map;
} Release;

/* Gives the whole pages of the map before `consumed` (everything read of this tensor so far)
 * back to the OS: the page cache still holds them, but they leave this process's resident memory,
 * which would otherwise peak at the weights twice. */
static void release_pages(Release *r, const void *consumed) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t from = ((uintptr_t)r->released + page - 1) / page * page;
    uintptr_t to = (uintptr_t)consumed / page * page;
    if (!r->in_map || to <= from) return;
    madvise((void *)from, to - from, MADV_DONTNEED);
    r->released = (const char *)to;
}

/* Sets every tensor's pointer: the norms' into `norms` (layout_norm_floats), copied there; the
 * matrices' into the map, or for llama2.c version 2's int8 with groups across rows into `owned`
 * (owned_bytes each), dequantized there. A version 2 q8_0 matrix's scales
 * follow its first layer's values: its groups lie within rows, so a piece's scales in order are
 * its rows' groups in order, (rows, cols / group_size) as q8_0's; and with a group size of 32 or
 * 64 every piece's values and scales take a multiple of 4 bytes (read_ak42 checks that a piece
 * holds whole groups), so the scales are float-aligned. Only called once layout_end has matched
 * the file size, so every read is inside the map. */
static void layout_place(const Layout *l, const char *map, char *owned, float *norms) {
    uint64_t off = l->start;
    for (int i = 0; i < l->n; i++) {
        const TensorSpec *t = &l->tensors[i];
        off = align_up(off, l->align);
        const char *data = map + off;
        uint64_t bytes = tensor_bytes(t, l->group_size);
        if (t->kind == TENSOR_NORM) {
            memcpy(norms, data, bytes);
            *t->vec = norms;
            norms += t->numel;
        } else if (t->kind == TENSOR_AK42_F32) {
            dequantize_ak42(t, data, l->group_size, (float *)owned);
            release_pages(&(Release){data, 1}, data + bytes); /* packing reads the copy */
            owned += owned_bytes(t);
        } else if (t->kind == TENSOR_AK42_Q8) {
            *t->mat = data;
            *t->vec = (const float *)(data + t->numel / t->parts);
        } else {
            if (t->vec) *t->vec = (const float *)data;
            if (t->mat) *t->mat = data;
        }
        off += bytes;
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

/* How a llama2.c version 2 matrix of `cols` columns is loaded: as q8_0 when its rows hold whole
 * groups of the flattened tensor and the q8_0 kernels take the group size, the file's groups then
 * being exactly q8_0's row groups; otherwise groups straddle rows (stories260K's w2: rows of 172
 * values, groups of 64), which q8_0 cannot express, and it is dequantized to f32. */
static TensorKind ak42_kind(int cols, uint64_t group_size) {
    return q8_group_size_ok(group_size) && cols % group_size == 0 ? TENSOR_AK42_Q8
                                                                  : TENSOR_AK42_F32;
}

/* llama2.c version 1 (fp32) and 2 (int8 groups, norms kept fp32): norms first, then embedding,
 * attention and feed-forward matrices, classifier when not shared. A version 2 matrix's dtype
 * depends on its cols alone, so the matrices matmul_batch multiplies together (wq, wk, wv; w1,
 * w3: all dim columns) share one, as do the embedding and the classifier. */
static void ak42_layout(Layout *l, Weights *w, const Config *c, int version, uint64_t group_size) {
    int dim = c->dim, hidden = c->hidden_dim, kv_dim = c->n_kv_heads * (dim / c->n_heads);
    TensorKind k = version == 2 ? ak42_kind(dim, group_size) : TENSOR_F32; /* cols = dim */
    TensorKind k_w2 = version == 2 ? ak42_kind(hidden, group_size) : TENSOR_F32;
    int gs = (int)group_size;
    uint64_t layers = c->n_layers;
    *l = (Layout){.start = FIXED_HEADER, .align = 1, .group_size = group_size};
    add_vector(l, "attn_norm", &w->attn_norm, layers * dim);
    add_vector(l, "ffn_norm", &w->ffn_norm, layers * dim);
    add_vector(l, "final_norm", &w->final_norm, dim);
    add_matrix(l, "token_embedding", &w->token_embedding, 1, c->vocab_size, dim, k, gs);
    add_matrix(l, "wq", &w->wq, layers, dim, dim, k, gs);
    add_matrix(l, "wk", &w->wk, layers, kv_dim, dim, k, gs);
    add_matrix(l, "wv", &w->wv, layers, kv_dim, dim, k, gs);
    add_matrix(l, "wo", &w->wo, layers, dim, dim, k, gs);
    add_matrix(l, "w1", &w->w1, layers, hidden, dim, k, gs);
    add_matrix(l, "w2", &w->w2, layers, dim, hidden, k_w2, gs);
    add_matrix(l, "w3", &w->w3, layers, hidden, dim, k, gs);
    if (!c->shared_classifier) add_matrix(l, "wcls", &w->wcls, 1, c->vocab_size, dim, k, gs);
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

/* read_legacy, read_ak42 and read_normllama each read and check a header (the caller has checked
 * that the file holds it) into m->config and m->format, and build the file's layout. Each returns
 * 0, or -1 with the problem in err. */

/* llama2.c legacy header: the 7 int32 sizes alone, no magic. */
static int read_legacy(Model *m, const char *map, Layout *l, char *err, size_t errlen) {
    Config *c = &m->config;
    read_sizes(c, map);
    int32_t vocab = c->vocab_size;
    c->shared_classifier = vocab > 0; /* llama2.c: a negative vocab_size means a separate wcls */
    /* abs(INT32_MIN) would overflow: 0 instead, which check_config refuses */
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
        if (is_ak42(t->kind) && t->numel / t->parts % group_size != 0) {
            snprintf(err, errlen, "%s has %llu values%s, not a multiple of group_size %d", t->name,
                     (unsigned long long)(t->numel / t->parts), t->parts > 1 ? " per layer" : "",
                     group_size);
            return -1;
        }
    }
    m->format = version == 1 ? "llama2.c version 1" : "llama2.c version 2 (int8)";
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
    uint32_t group_size = read_u32(map + NLLM_GROUP_SIZE_OFF);
    if (dtype == DTYPE_Q8_0 && !q8_group_size_ok(group_size)) {
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
    for (int i = NLLM_GROUP_SIZE_OFF + 4; i < FIXED_HEADER; i++) {
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

/* ----------------------------------------------------------------------------
 * Packing: the file's row-major matrices into panels (model.h, Matrix) */

enum { PANEL_ROWS = VEC_WIDTH }; /* one vector of a column: a panel's rows */

#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#define UNROLL        _Pragma("GCC unroll 8")
#else
#define ALWAYS_INLINE inline
#define UNROLL
#endif

#define HUGE_PAGE  (2u << 20)
#define PACK_CHUNK 64 /* panels packed among the threads between two returns of map pages */

/* Columns a q8_0 group starting at column `start` takes in a panel: its length, rounded up to
 * whole pairs. */
static int q8_group_columns(int cols, int group_size, int start) {
    int len = cols - start < group_size ? cols - start : group_size;
    return (len + 1) / 2 * 2;
}

/* Bytes of a q8_0 group of `columns` (even) columns in a panel: its scales, then its values. */
static size_t q8_group_bytes(int columns) {
    return PANEL_ROWS * (sizeof(float) + columns);
}

static int panels_of(int rows) {
    return (rows + PANEL_ROWS - 1) / PANEL_ROWS;
}

static size_t panel_bytes(DType dtype, int cols, int group_size) {
    if (dtype == DTYPE_F32) return (size_t)cols * PANEL_ROWS * sizeof(float);
    if (dtype == DTYPE_BF16) return (size_t)cols * PANEL_ROWS * sizeof(uint16_t);
    size_t bytes = 0;
    for (int start = 0; start < cols; start += group_size)
        bytes += q8_group_bytes(q8_group_columns(cols, group_size, start));
    return bytes;
}

/* Bytes of the whole stack of a source's matrix in panels, rounded up to a cache line. */
static size_t packed_bytes(const Source *src) {
    const Matrix *m = src->matrix;
    size_t n_panels = panels_of(m->rows);
    return (src->layers * n_panels * panel_bytes(m->dtype, m->cols, m->group_size) + 63) / 64 * 64;
}

/* bytes of memory (uninitialized) in 2 MiB pages where the OS allows (transparent huge pages in
 * "madvise" mode or "always"), or NULL. The large buffers (weights, kv cache) live there: on the
 * VMs measured here a first touch of a 4 KiB page costs microseconds, which put ~0.1 s of page
 * faults into a 256-token prefill of the 110M model, and the kernels' loads miss the TLB less.
 * The last part short of 2 MiB stays in 4 KiB pages: a whole huge page there would hold up to
 * 2 MiB nothing uses, more than 10% of a 15M q8_0 model's file. */
static void *huge_pages(size_t bytes) {
    size_t whole = bytes / HUGE_PAGE * HUGE_PAGE;
    void *p;
    if (posix_memalign(&p, HUGE_PAGE, bytes + (bytes == 0)) != 0) return NULL;
    if (whole > 0) madvise(p, whole, MADV_HUGEPAGE);
    if (bytes > whole) madvise((char *)p + whole, bytes - whole, MADV_NOHUGEPAGE);
    return p;
}

/* Writes a zero at the start of each 2 MiB of a huge_pages buffer, the threads taking turns, and
 * into each 4 KiB page of its last part short of 2 MiB: the first write to a page has the kernel
 * zero all of it, the slow part of allocating (about 1.5 GB/s on one thread on the VMs measured
 * here), now done in parallel at load rather than in the first forward passes. */
static void fault_in(char *p, size_t bytes) {
    size_t whole = bytes / HUGE_PAGE * HUGE_PAGE;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
#pragma omp parallel for schedule(static, 1)
    for (size_t off = 0; off < whole; off += HUGE_PAGE) p[off] = 0;
    for (size_t off = whole; off < bytes; off += page) p[off] = 0;
}

/* A panel: rows first .. first + n_rows - 1 of one layer's row-major matrix at `values`, f32 or
 * bf16 (element_size 4 or 2, a constant once inlined), column by column; rows past n_rows are
 * zero. */
static ALWAYS_INLINE void pack_float_panel(char *dst, const char *values, size_t first, int n_rows,
                                           int cols, size_t element_size) {
    if (n_rows < PANEL_ROWS) memset(dst, 0, (size_t)cols * PANEL_ROWS * element_size);
    for (int r = 0; r < n_rows; r++) {
        const char *row = values + (first + r) * cols * element_size;
        for (int j = 0; j < cols; j++)
            memcpy(dst + ((size_t)j * PANEL_ROWS + r) * element_size, row + j * element_size,
                   element_size);
    }
}

/* The same for q8_0: per group, the rows' scales, then their int8 values in column pairs. */
static void pack_q8_panel(char *dst, const int8_t *values, const float *scales, size_t first,
                          int n_rows, int cols, int group_size) {
    int n_groups = (cols + group_size - 1) / group_size;
    for (int start = 0; start < cols; start += group_size) {
        int columns = q8_group_columns(cols, group_size, start);
        float *group_scales = (float *)dst;
        int8_t *q = (int8_t *)(dst + PANEL_ROWS * sizeof(float));
        memset(dst, 0, q8_group_bytes(columns));
        for (int r = 0; r < n_rows; r++) {
            group_scales[r] = scales[(first + r) * n_groups + start / group_size];
            const int8_t *row = values + (first + r) * cols;
            for (int i = 0; i < columns && start + i < cols; i++)
                q[(i / 2) * 2 * PANEL_ROWS + r * 2 + i % 2] = row[start + i];
        }
        dst += q8_group_bytes(columns);
    }
}

/* Layer l's values and scales in a source. */
static const char *layer_values(const Source *src, int l) {
    return (const char *)src->values + l * src->value_stride;
}

static const float *layer_scales(const Source *src, int l) {
    return (const float *)((const char *)src->scales + l * src->scale_stride);
}

/* pack_matrix numbers the panels of all layers together: panel q is panel q % n_panels of layer
 * q / n_panels. One past the last row of that layer which panel q reads. */
static int panel_end_row(const Matrix *m, int q) {
    int row = (q % m->n_panels + 1) * PANEL_ROWS;
    return row < m->rows ? row : m->rows;
}

/* Packs panel q (numbered as in panel_end_row) of a source into dst (panel_bytes). */
static void pack_panel(const Source *src, char *dst, int q) {
    const Matrix *m = src->matrix;
    int layer = q / m->n_panels, row = q % m->n_panels * PANEL_ROWS;
    int n_rows = m->rows - row < PANEL_ROWS ? m->rows - row : PANEL_ROWS;
    const char *values = layer_values(src, layer);
    if (m->dtype == DTYPE_Q8_0)
        pack_q8_panel(dst, (const int8_t *)values, layer_scales(src, layer), row, n_rows, m->cols,
                      m->group_size);
    else if (m->dtype == DTYPE_BF16)
        pack_float_panel(dst, values, row, n_rows, m->cols, sizeof(uint16_t));
    else
        pack_float_panel(dst, values, row, n_rows, m->cols, sizeof(float));
}

/* Packs a source's stack of matrices into dst (packed_bytes(src)) and points its Matrix there:
 * PACK_CHUNK panels at a time among the threads (the slow part is the page faults: each file page
 * is read in as it is first touched, and where the OS gave no 2 MiB pages, each new page of dst
 * that fault_in did not reach is zeroed as it is first written), giving the map's pages back after
 * each chunk. */
static void pack_matrix(const Source *src, char *dst) {
    Matrix *m = src->matrix;
    m->panel_rows = PANEL_ROWS;
    m->n_panels = panels_of(m->rows);
    m->panel_bytes = panel_bytes(m->dtype, m->cols, m->group_size);
    m->data = dst;
    size_t element = value_bytes(m->dtype);
    int n_groups = m->dtype == DTYPE_Q8_0 ? (m->cols + m->group_size - 1) / m->group_size : 0;
    Release values = {src->values, src->in_map}, scales = {(const char *)src->scales, src->in_map};
    int n_panels = src->layers * m->n_panels;
    for (int q0 = 0; q0 < n_panels; q0 += PACK_CHUNK) {
        int q1 = n_panels - q0 < PACK_CHUNK ? n_panels : q0 + PACK_CHUNK;
#pragma omp parallel for
        for (int q = q0; q < q1; q++) pack_panel(src, dst + (size_t)q * m->panel_bytes, q);
        int layer = (q1 - 1) / m->n_panels;
        size_t end = panel_end_row(m, q1 - 1);
        release_pages(&values, layer_values(src, layer) + end * m->cols * element);
        /* pieces: the values' release takes each layer's scales along once the next layer's
         * values pass them; a release of the scales would give back rows of values not packed
         * yet, whose refaults map their neighbours back for good (1.6 MiB at 110M) */
        if (m->dtype == DTYPE_Q8_0 && !src->pieces)
            release_pages(&scales, layer_scales(src, layer) + end * n_groups);
    }
    if (src->pieces) release_pages(&values, layer_values(src, src->layers)); /* the last scales */
}

/* Packs every source of the layout into one allocation of huge_pages, m->packed. Returns -1 when
 * out of memory. */
static int pack_weights(Model *m, const Layout *l) {
    size_t total = 0;
    for (int i = 0; i < l->n_sources; i++) total += packed_bytes(&l->sources[i]);
    char *packed = huge_pages(total);
    if (!packed) return -1;
    m->packed = packed;
    fault_in(packed, total);
    for (int i = 0; i < l->n_sources; i++) {
        pack_matrix(&l->sources[i], packed);
        packed += packed_bytes(&l->sources[i]);
    }
    return 0;
}

/* bytes of memory at a 64-byte boundary (a cache line: whole-vector loads of a row never
 * straddle two lines, which cost prefill a quarter of its speed with calloc's 16-byte
 * alignment), or NULL */
static void *aligned(size_t bytes) {
    return aligned_alloc(64, (bytes + 63) / 64 * 64 + (bytes == 0) * 64);
}

/* int16 values per row of xq: the widest input of a product (dim or hidden_dim), rounded up so
 * that each row starts on a cache line. */
static size_t xq_stride_of(const Config *c) {
    size_t widest = c->dim > c->hidden_dim ? c->dim : c->hidden_dim;
    return (widest + 63) / 64 * 64;
}

/* Bytes per position of the buffers that grow with the batch (alloc_batch's): x, xb, xb2 and q
 * of dim floats, hb and hb2 of hidden_dim, a row of xq and its scale. */
static size_t batch_row_bytes(const Config *c) {
    return sizeof(float) * (4 * (size_t)c->dim + 2 * (size_t)c->hidden_dim + 1) +
           sizeof(int16_t) * xq_stride_of(c);
}

/* Positions per prefill batch. Each batch reads every weight from memory once, so a longer
 * batch reads less per token (128 positions rather than 64: +5% prefill tokens/s at 110M f32 on
 * two threads); the batch's activations are held to about 1% of the weights file's bytes, for
 * the memory bound (docs/BENCH.md), as a multiple of 64 from 64 to 256, and no more than seq_len. */
static int batch_positions(const Config *c, size_t file_bytes) {
    size_t batch = file_bytes / 100 / batch_row_bytes(c) / 64 * 64;
    batch = batch < 64 ? 64 : batch > 256 ? 256 : batch;
    return c->seq_len < (int)batch ? c->seq_len : (int)batch;
}

/* The buffers that grow with the batch (RunState's x to q, xq and xq_scale) for `batch`
 * positions, left uninitialized: every forward pass writes a position's rows before it reads
 * them, and pages never written stay out of resident memory, so a short prompt and decode touch
 * only the first rows (decode at 15M: 12 KiB of the batch's 768 KiB, peak 24.5 MiB rather than
 * 25.3 for q8_0). Returns -1 when out of memory; what did fit is left for free_batch. */
static int alloc_batch(RunState *s, const Config *c, int batch) {
    size_t rows = batch;
    s->batch = batch;
    s->x = aligned(rows * c->dim * sizeof(float));
    s->xb = aligned(rows * c->dim * sizeof(float));
    s->xb2 = aligned(rows * c->dim * sizeof(float));
    s->hb = aligned(rows * c->hidden_dim * sizeof(float));
    s->hb2 = aligned(rows * c->hidden_dim * sizeof(float));
    s->q = aligned(rows * c->dim * sizeof(float));
    s->xq_stride = xq_stride_of(c);
    s->xq = aligned(rows * s->xq_stride * sizeof(int16_t));
    s->xq_scale = aligned(rows * sizeof(float));
    if (!s->x || !s->xb || !s->xb2 || !s->hb || !s->hb2 || !s->q || !s->xq || !s->xq_scale)
        return -1;
    return 0;
}

static void free_batch(RunState *s) {
    free(s->x);
    free(s->xb);
    free(s->xb2);
    free(s->hb);
    free(s->hb2);
    free(s->q);
    free(s->xq);
    free(s->xq_scale);
}

/* The run state for a model of config c: the batch's buffers (alloc_batch), attention scores,
 * logits and RoPE's frequencies, each written before it is read and so left uninitialized, and
 * the kv cache. Returns -1 when out of memory; what did fit is left for free_state. */
static int alloc_state(RunState *s, const Config *c, size_t file_bytes) {
    size_t head_size = c->dim / c->n_heads;
    size_t kv_dim = c->n_kv_heads * head_size;
    size_t cache = (size_t)c->n_layers * c->seq_len * kv_dim;
    if (alloc_batch(s, c, batch_positions(c, file_bytes)) != 0) return -1;
    s->att = aligned((size_t)c->n_heads * 4 * c->seq_len * sizeof(float));
    s->logits = aligned(c->vocab_size * sizeof(float));
    /* each position is written before it is read; faulted in now, as llama.cpp clears its cache
     * at load: left to the first positions, the kernel's zeroing of the new pages took ~30 ms of
     * a 256-token prefill at 110M */
    s->key_cache = huge_pages(cache * sizeof(float));
    s->value_cache = huge_pages(cache * sizeof(float));
    if (s->key_cache) fault_in((char *)s->key_cache, cache * sizeof(float));
    if (s->value_cache) fault_in((char *)s->value_cache, cache * sizeof(float));
    s->inv_freq = aligned((head_size / 2) * sizeof(float));
    if (!s->att || !s->logits || !s->key_cache || !s->value_cache || !s->inv_freq) return -1;
    return 0;
}

static void free_state(RunState *s) {
    free_batch(s);
    free(s->att);
    free(s->logits);
    free(s->key_cache);
    free(s->value_cache);
    free(s->inv_freq);
    memset(s, 0, sizeof(*s));
}

/* inv_freq[i] = rope_theta^(-2i / head_size): the angle per position by which RoPE rotates pair
 * i of every head (rope). */
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

/* Reads the header into m->config and m->format, the tensors' layout into l and the matrices'
 * shapes and dtypes into m->weights, and checks the layout against the file size; reads no
 * tensor. On failure writes the problem into what[whatlen], without the path. */
static int read_layout(Model *m, const char *map, size_t size, Layout *l, char *what,
                       size_t whatlen) {
    uint32_t magic = read_u32(map);
    size_t header = magic == NLLM_MAGIC || magic == AK42_MAGIC ? FIXED_HEADER : LEGACY_HEADER;
    if (size < header) {
        snprintf(what, whatlen, "model file is %zu bytes, shorter than its %zu-byte header", size,
                 header);
        return -1;
    }
    int rc = magic == NLLM_MAGIC   ? read_normllama(m, map, l, what, whatlen)
             : magic == AK42_MAGIC ? read_ak42(m, map, l, what, whatlen)
                                   : read_legacy(m, map, l, what, whatlen);
    if (rc != 0) return -1;
    const Config *c = &m->config;
    uint64_t expected = layout_end(l);
    if (expected != size) {
        snprintf(what, whatlen,
                 "file is %zu bytes but its %s header (dim %d, hidden_dim %d, n_layers %d, "
                 "vocab_size %d, seq_len %d) implies %llu",
                 size, m->format, c->dim, c->hidden_dim, c->n_layers, c->vocab_size, c->seq_len,
                 (unsigned long long)expected);
        return -1;
    }
    return 0;
}

/* Reads the header and the layout (read_layout), then sets the weights: the norms copied into
 * m->norms, the matrices packed into m->packed; nothing points into the map afterwards. */
static int load_weights(Model *m, const char *map, size_t size, char *what, size_t whatlen) {
    Layout l;
    if (read_layout(m, map, size, &l, what, whatlen) != 0) return -1;
    uint64_t owned_size = layout_owned_bytes(&l);
    char *owned = NULL;
    if (owned_size > 0 && !(owned = malloc(owned_size))) {
        snprintf(what, whatlen, "out of memory for %llu bytes of converted weights",
                 (unsigned long long)owned_size);
        return -1;
    }
    if (!(m->norms = malloc(layout_norm_floats(&l) * sizeof(float)))) {
        free(owned);
        snprintf(what, whatlen, "out of memory for the norms' weights");
        return -1;
    }
    layout_place(&l, map, owned, m->norms);
    int rc = pack_weights(m, &l);
    free(owned);
    if (rc != 0) {
        snprintf(what, whatlen, "out of memory for the weights");
        return -1;
    }
    if (m->config.shared_classifier) m->weights.wcls = m->weights.token_embedding;
    return 0;
}

/* Maps the checkpoint at path read-only into *map, its size into *size. On failure writes
 * "<path>: <problem>" into err[errlen]. */
static int map_file(const char *path, char **map, size_t *size, char *err, size_t errlen) {
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
    *size = (size_t)st.st_size;
    if (*size == 0) {
        close(fd);
        return fail(err, errlen, path, "model file is empty");
    }
    if (*size < sizeof(uint32_t)) {
        close(fd);
        return fail(err, errlen, path, "model file is shorter than its 4-byte magic");
    }
    void *p = mmap(NULL, *size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd); /* the mapping stays valid */
    if (p == MAP_FAILED) {
        snprintf(what, sizeof(what), "cannot map model: %s", strerror(errno));
        return fail(err, errlen, path, what);
    }
    *map = p;
    return 0;
}

int model_read_config(Config *c, const char *path, char *err, size_t errlen) {
    char *map;
    size_t size;
    if (map_file(path, &map, &size, err, errlen) != 0) return -1;
    Model m = {0}; /* a scratch model for read_layout; only its config is kept */
    Layout l;
    char what[256];
    int rc = read_layout(&m, map, size, &l, what, sizeof(what));
    if (rc == 0)
        *c = m.config;
    else
        fail(err, errlen, path, what);
    munmap(map, size);
    return rc;
}

int model_load(Model *m, const char *path, char *err, size_t errlen) {
    memset(m, 0, sizeof(*m));
    char *map;
    size_t size;
    if (map_file(path, &map, &size, err, errlen) != 0) return -1;
    char what[256];
    int rc = load_weights(m, map, size, what, sizeof(what));
    /* every weight is copied: the file is not read again, so that changing or truncating it while
     * the model runs does no harm (a read of a truncated map's page faults with SIGBUS) */
    munmap(map, size);
    if (rc != 0) {
        model_free(m);
        return fail(err, errlen, path, what);
    }
    m->norm = m->config.trained_norm;
    if (alloc_state(&m->state, &m->config, size) != 0) {
        model_free(m);
        return fail(err, errlen, path, "out of memory for the run state and kv cache");
    }
    init_rope(&m->state, &m->config);
    return 0;
}

int model_set_batch(Model *m, int batch, char *err, size_t errlen) {
    if (batch < 1 || batch > m->config.seq_len) {
        snprintf(err, errlen, "batch %d is not in 1..%d (the model's seq_len)", batch,
                 m->config.seq_len);
        return -1;
    }
    /* the new buffers first, so that the model keeps its batch when they do not fit */
    RunState fresh = m->state;
    if (alloc_batch(&fresh, &m->config, batch) != 0) {
        free_batch(&fresh);
        snprintf(err, errlen, "out of memory for the activations of a batch of %d positions",
                 batch);
        return -1;
    }
    free_batch(&m->state);
    m->state = fresh;
    return 0;
}

void model_free(Model *m) {
    free(m->norms);
    free(m->packed);
    free_state(&m->state);
    memset(m, 0, sizeof(*m));
}

/* The only cost of profiling when it is off: one predictable branch per lap. */
static inline void lap(Profile *p, OpClass op) {
    if (p) profile_lap(p, op);
}

/* ----------------------------------------------------------------------------
 * The forward pass */

/* Matrix-vector and matrix-matrix products share one kernel: a tile of np panels (model.h,
 * Matrix: panel_rows rows each, one column of them per vector load) times nb input vectors, with
 * one vector accumulator per (panel, input) pair, its lanes the panel's rows. For each column j,
 * each panel's column is loaded once and each input's value x[j] broadcast once, then np * nb
 * multiply-adds: an outer product, as in the micro-kernels of GotoBLAS (Goto and van de Geijn
 * 2008). Each output is one chain of multiply-adds over j in order, whatever the tile: decode
 * (one input), prefill (a batch) and every tile shape give the same bits. Decode reads four
 * panels at a time, four sequential streams for the prefetcher; prefill takes two panels times
 * TILE_INPUTS inputs, the panels staying in L1 and L2 while every input of the batch passes
 * them. */
enum {
    BLOCK_PANELS = 4, /* panels per unit of work among the threads; decode's tile */
    /* f32 and bf16 prefill tiles: 2 x 8 accumulators of AVX-512's 32 vector registers, 2 x 6 of
     * AVX2's 16 (2 x 8 spilled: 283 -> 394 tokens/s, 110M on one thread) */
    TILE_INPUTS = VEC_WIDTH == 8 ? 6 : 8,
    TILE_INPUTS_Q8 = 4, /* q8_0's: 2 x 4, each with an integer sum besides */
    MAX_TILE_INPUTS = 8,
    /* Decode asks for each bf16 and q8_0 panel's bytes this far ahead of its loads: +15% (bf16)
     * and +30% (q8_0) tokens/s at 110M on one thread, +15-20% on two (alternating runs); f32,
     * which moves more bytes per instruction, gained nothing. */
    PREFETCH_AHEAD = 1024,
};

/* Column j of the panel at `panel` (f32 or bf16, a constant once inlined) as floats. */
static ALWAYS_INLINE vecf panel_column(const char *panel, int j, DType dtype) {
    if (dtype == DTYPE_BF16) return vec_load_bf16((const uint16_t *)panel + (size_t)j * PANEL_ROWS);
    return vec_load((const float *)panel + (size_t)j * PANEL_ROWS);
}

/* out[b * out_stride + row0 + r * PANEL_ROWS + i] = lane i of acc[r][b] times scale[b] (NULL: 1),
 * for the rows below w->rows (a short last panel's padding rows are not stored). */
static ALWAYS_INLINE void store_tile(float *out, size_t out_stride,
                                     vecf acc[BLOCK_PANELS][MAX_TILE_INPUTS], const float *scale,
                                     int nb, int np, const Matrix *w, int row0) {
    UNROLL
    for (int r = 0; r < np; r++) {
        int row = row0 + r * PANEL_ROWS;
        UNROLL
        for (int b = 0; b < nb; b++) {
            vecf v = scale ? vec_mul(acc[r][b], vec_set1(scale[b])) : acc[r][b];
            vec_store_upto(out + (size_t)b * out_stride + row, v, w->rows - row);
        }
    }
}

/* The f32 or bf16 tile: np panels from `panel` (rows row0 .. row0 + np * PANEL_ROWS - 1 of one
 * layer) times the nb inputs x: (nb, w->cols), into out: (nb, out_stride). */
static ALWAYS_INLINE void float_tile(float *out, size_t out_stride, const float *x, int nb,
                                     const Matrix *w, const char *panel, int np, int row0,
                                     DType dtype) {
    vecf acc[BLOCK_PANELS][MAX_TILE_INPUTS];
    UNROLL
    for (int r = 0; r < np; r++) {
        UNROLL
        for (int b = 0; b < nb; b++) acc[r][b] = vec_zero();
    }
    for (int j = 0; j < w->cols; j++) {
        vecf column[BLOCK_PANELS];
        UNROLL
        for (int r = 0; r < np; r++) {
            column[r] = panel_column(panel + r * w->panel_bytes, j, dtype);
            if (nb == 1 && dtype == DTYPE_BF16)
                __builtin_prefetch(panel + r * w->panel_bytes +
                                   (size_t)j * PANEL_ROWS * sizeof(uint16_t) + PREFETCH_AHEAD);
        }
        UNROLL
        for (int b = 0; b < nb; b++) {
            vecf xj = vec_set1(x[(size_t)b * w->cols + j]);
            UNROLL
            for (int r = 0; r < np; r++) acc[r][b] = vec_fmadd(column[r], xj, acc[r][b]);
        }
    }
    store_tile(out, out_stride, acc, NULL, nb, np, w, row0);
}

/* q8_0, one group (columns start .. start + columns - 1, columns even) of the tile's panels,
 * whose group begins at group[r] (its scales, then its values) and moves past it: acc[r][b] +=
 * scales * (int8 values . int16 inputs b), the integer sums exact, column pair by column pair. */
static ALWAYS_INLINE void q8_group(vecf acc[BLOCK_PANELS][MAX_TILE_INPUTS],
                                   const char *group[BLOCK_PANELS], const int16_t *xq,
                                   size_t xq_stride, int nb, int np, int start, int columns) {
    veci sums[BLOCK_PANELS][MAX_TILE_INPUTS];
    UNROLL
    for (int r = 0; r < np; r++) {
        UNROLL
        for (int b = 0; b < nb; b++) sums[r][b] = veci_zero();
    }
    UNROLL
    for (int i = 0; i < columns; i += 2) {
        vecw pair[MAX_TILE_INPUTS];
        UNROLL
        for (int b = 0; b < nb; b++) pair[b] = vecw_set1_pair(xq + b * xq_stride + start + i);
        UNROLL
        for (int r = 0; r < np; r++) {
            const int8_t *q = (const int8_t *)(group[r] + PANEL_ROWS * sizeof(float));
            vecw w = vecw_load_i8(q + (size_t)i * PANEL_ROWS);
            if (nb == 1) __builtin_prefetch(q + (size_t)i * PANEL_ROWS + PREFETCH_AHEAD);
            UNROLL
            for (int b = 0; b < nb; b++) sums[r][b] = veci_dot(sums[r][b], w, pair[b]);
        }
    }
    UNROLL
    for (int r = 0; r < np; r++) {
        vecf scale = vec_load((const float *)group[r]);
        UNROLL
        for (int b = 0; b < nb; b++)
            acc[r][b] = vec_fmadd(vec_from_veci(sums[r][b]), scale, acc[r][b]);
        group[r] += q8_group_bytes(columns);
    }
}

/* The q8_0 tile: as float_tile with the inputs quantized (input b is xq_scale[b] * xq[b], rows of
 * xq_stride int16): each group's dot product is an integer sum, converted and scaled by the
 * weights' scale once; the input's scale multiplies the total. group_size (= w->group_size) a
 * constant once inlined, so the group loop unrolls. */
static ALWAYS_INLINE void q8_tile(float *out, size_t out_stride, const int16_t *xq,
                                  size_t xq_stride, const float *xq_scale, int nb, const Matrix *w,
                                  const char *panel, int np, int row0, int group_size) {
    vecf acc[BLOCK_PANELS][MAX_TILE_INPUTS];
    const char *group[BLOCK_PANELS];
    UNROLL
    for (int r = 0; r < np; r++) {
        group[r] = panel + r * w->panel_bytes;
        UNROLL
        for (int b = 0; b < nb; b++) acc[r][b] = vec_zero();
    }
    int full = w->cols / group_size * group_size;
    for (int start = 0; start < full; start += group_size)
        q8_group(acc, group, xq, xq_stride, nb, np, start, group_size);
    if (full < w->cols) /* the shorter last group */
        q8_group(acc, group, xq, xq_stride, nb, np, full,
                 q8_group_columns(w->cols, group_size, full));
    store_tile(out, out_stride, acc, xq_scale, nb, np, w, row0);
}

/* xq = round(x / scale) as int16, scale = max |x| / 32767 (0 for a zero vector: xq all 0), for
 * the n values of x; xq's values from n up to the next multiple of 64 (the row's xq_stride at
 * most) are zero: a short last group is read by column pairs, one value past n. About 4.5
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

/* The inputs of a matrix product: x (rows of w->cols floats), and for q8_0 weights the same
 * quantized by quantize_input (rows of xq_stride int16, one scale each). */
typedef struct {
    const float *x;
    const int16_t *xq;
    const float *xq_scale;
    size_t xq_stride;
} Inputs;

/* The inputs from input b on. */
static Inputs inputs_from(Inputs in, int b, int cols) {
    return (Inputs){in.x + (size_t)b * cols, in.xq + b * in.xq_stride, in.xq_scale + b,
                    in.xq_stride};
}

/* One tile of np panels times nb inputs, both constants once inlined, in w's dtype. */
static ALWAYS_INLINE void tile(float *out, size_t out_stride, Inputs in, int nb, const Matrix *w,
                               const char *panel, int np, int row0) {
    if (w->dtype == DTYPE_Q8_0 && w->group_size == 32)
        q8_tile(out, out_stride, in.xq, in.xq_stride, in.xq_scale, nb, w, panel, np, row0, 32);
    else if (w->dtype == DTYPE_Q8_0) /* model_load allows 32 and 64 */
        q8_tile(out, out_stride, in.xq, in.xq_stride, in.xq_scale, nb, w, panel, np, row0, 64);
    else if (w->dtype == DTYPE_BF16)
        float_tile(out, out_stride, in.x, nb, w, panel, np, row0, DTYPE_BF16);
    else
        float_tile(out, out_stride, in.x, nb, w, panel, np, row0, DTYPE_F32);
}

/* The tile shapes the products use: decode's 4 x 1, and otherwise np (1 or 2) x nb, nb the
 * tile's inputs (TILE_INPUTS, or TILE_INPUTS_Q8 for q8_0) or, for a batch's last inputs (and
 * decode's last panels of a matrix), 4, 2 or 1. Each shape is its own code, its accumulators in
 * registers. */
static void tile_4x1(float *out, size_t out_stride, Inputs in, const Matrix *w, const char *panel,
                     int row0) {
    tile(out, out_stride, in, 1, w, panel, 4, row0);
}

static ALWAYS_INLINE void tile_np(float *out, size_t out_stride, Inputs in, int nb, const Matrix *w,
                                  const char *panel, int np, int row0) {
    if (nb == 1)
        tile(out, out_stride, in, 1, w, panel, np, row0);
    else if (nb == 2)
        tile(out, out_stride, in, 2, w, panel, np, row0);
    else if (nb == 4)
        tile(out, out_stride, in, 4, w, panel, np, row0);
    else if (w->dtype == DTYPE_Q8_0)
        tile(out, out_stride, in, TILE_INPUTS_Q8, w, panel, np, row0);
    else
        tile(out, out_stride, in, TILE_INPUTS, w, panel, np, row0);
}

static void tile_2xn(float *out, size_t out_stride, Inputs in, int nb, const Matrix *w,
                     const char *panel, int row0) {
    tile_np(out, out_stride, in, nb, w, panel, 2, row0);
}

static void tile_1xn(float *out, size_t out_stride, Inputs in, int nb, const Matrix *w,
                     const char *panel, int row0) {
    tile_np(out, out_stride, in, nb, w, panel, 1, row0);
}

/* np (<= BLOCK_PANELS) panels from `panel`, rows from row0, times the batch inputs, into out:
 * (batch, out_stride). A batch's inputs go by whole tiles, then the rest by 4, 2 and 1: a 2 x 1
 * tile is one multiply-add chain per panel, waiting on its latency, so that 4 leftover inputs
 * as 2 x 1 tiles took a fifth of AVX2's prefill (batch 64, tiles of 6). */
static void panel_block(float *out, size_t out_stride, Inputs in, int batch, const Matrix *w,
                        const char *panel, int np, int row0) {
    if (batch == 1 && np == BLOCK_PANELS) {
        tile_4x1(out, out_stride, in, w, panel, row0);
        return;
    }
    int tile_inputs = w->dtype == DTYPE_Q8_0 ? TILE_INPUTS_Q8 : TILE_INPUTS;
    for (int p = 0; p < np; p += 2) {
        const char *at = panel + p * w->panel_bytes;
        int row = row0 + p * PANEL_ROWS;
        for (int b = 0, nb = tile_inputs; b < batch; b += nb) {
            while (batch - b < nb) nb = nb > 4 ? 4 : nb / 2;
            (np - p >= 2 ? tile_2xn : tile_1xn)(out + (size_t)b * out_stride, out_stride,
                                                inputs_from(in, b, w->cols), nb, w, at, row);
        }
    }
}

/* matmul_batch's panels from .. to - 1 of all its products (numbered in order: product k has
 * first[k] .. first[k + 1] - 1), up to BLOCK_PANELS at a time. */
static void matmul_panels(float *const out[], const Matrix *const w[], int n, const int first[],
                          Inputs in, int batch, int layer, int from, int to) {
    for (int k = 0; k < n; k++) {
        const Matrix *m = w[k];
        int p = (from > first[k] ? from : first[k]) - first[k];
        int end = (to < first[k + 1] ? to : first[k + 1]) - first[k];
        for (; p < end; p += BLOCK_PANELS) {
            int np = end - p < BLOCK_PANELS ? end - p : BLOCK_PANELS;
            const char *panel =
                (const char *)m->data + ((size_t)layer * m->n_panels + p) * m->panel_bytes;
            panel_block(out[k], m->rows, in, batch, m, panel, np, p * PANEL_ROWS);
        }
    }
}

/* out[k] = x W_k^T for k < n (at most 3), W_k layer `layer` of w[k]: (w[k]->rows, cols); all
 * n matrices have cols = w[0]->cols columns and one dtype; x: (batch, cols), out[k]: (batch,
 * w[k]->rows); batch <= s->batch. The panels of all n products (wq, wk, wv of one input, or w1,
 * w3), numbered in order, are split into one contiguous run per thread, equal to within a panel (a
 * split by blocks of four left one thread a third more of 15M's w2 than the other), in one parallel
 * region: one fork and join and, for q8_0, one quantization of x (into s->xq). Each thread takes
 * its run up to BLOCK_PANELS panels at a time, whose weights are read from memory once and stay in
 * cache while every input of the batch passes them (batched prefill's matrix-matrix product);
 * with batch 1 this is decode's matrix-vector product. */
static void matmul_batch(RunState *s, int n, float *const out[], const Matrix *const w[],
                         const float *x, int batch, int layer) {
    int cols = w[0]->cols;
    Inputs in = {x, s->xq, s->xq_scale, s->xq_stride};
    if (w[0]->dtype == DTYPE_Q8_0)
        for (int b = 0; b < batch; b++)
            quantize_input(s->xq + (size_t)b * s->xq_stride, &s->xq_scale[b], x + (size_t)b * cols,
                           cols);
    int first[4] = {0}; /* product k has panels first[k] .. first[k + 1] - 1 */
    size_t work = 0;
    for (int k = 0; k < n; k++) {
        first[k + 1] = first[k] + w[k]->n_panels;
        work += (size_t)w[k]->rows * cols * batch;
    }
    if (work < PARALLEL_MIN_WORK) { /* a region costs ~1.5 us even when it runs on one thread */
        matmul_panels(out, w, n, first, in, batch, layer, 0, first[n]);
        return;
    }
#pragma omp parallel
    {
        int thread = omp_get_thread_num(), threads = omp_get_num_threads();
        matmul_panels(out, w, n, first, in, batch, layer,
                      (int)((long long)first[n] * thread / threads),
                      (int)((long long)first[n] * (thread + 1) / threads));
    }
}

void model_embedding(const Model *m, int token, float *out) {
    const Matrix *w = &m->weights.token_embedding;
    const char *panel = (const char *)w->data + (size_t)(token / PANEL_ROWS) * w->panel_bytes;
    int lane = token % PANEL_ROWS, n = w->cols;
    if (w->dtype == DTYPE_Q8_0) {
        for (int start = 0; start < n; start += w->group_size) {
            int columns = q8_group_columns(n, w->group_size, start);
            float scale = ((const float *)panel)[lane];
            const int8_t *q = (const int8_t *)(panel + PANEL_ROWS * sizeof(float));
            for (int i = 0; i < columns && start + i < n; i++)
                out[start + i] = q[(i / 2) * 2 * PANEL_ROWS + lane * 2 + i % 2] * scale;
            panel += q8_group_bytes(columns);
        }
    } else {
        for (int j = 0; j < n; j++)
            out[j] = w->dtype == DTYPE_BF16
                         ? bf16_to_f32(((const uint16_t *)panel)[(size_t)j * PANEL_ROWS + lane])
                         : ((const float *)panel)[(size_t)j * PANEL_ROWS + lane];
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
 * values + t * kv_dim, head_size floats each. */
typedef struct {
    const float *keys, *values;
    int kv_dim, head_size;
} HeadCache;

/* acc[i][h] += weights[i * stride + t] * vector h of value t (at v, n[h] floats, the second may
 * be empty) for the queries i from first_query to nq - 1: those that attend to position t. */
static ALWAYS_INLINE void mix_position(vecf acc[4][2], const float *v, const int n[2],
                                       const float *weights, int stride, int t, int first_query,
                                       int nq) {
    vecf value[2] = {vec_load_upto(v, n[0]),
                     n[1] > 0 ? vec_load_upto(v + VEC_WIDTH, n[1]) : vec_zero()};
    for (int i = 0; i < nq; i++) { /* from 0, so that every acc[i] is a register, not memory */
        if (i < first_query) continue;
        vecf weight = vec_set1(weights[(size_t)i * stride + t]);
        for (int h = 0; h < 2; h++) acc[i][h] = vec_fmadd(weight, value[h], acc[i][h]);
    }
}

/* out[i] = the sum over t <= first_pos + i of weights[i * stride + t] * value t (head_size each),
 * for the nq (1 or 4, a constant once inlined) queries: two vectors of the head at a time (the
 * second may be short or empty), the 2 * nq sums in registers, independent chains that keep the
 * multiply-adds busy, and each value vector loaded once for all queries. Every query attends to
 * the positions up to first_pos, and query i to the next i (causal): two loops, so that the first,
 * nearly all of the work, tests no position. Each sum adds its terms in the order of t, as one
 * query alone does: the same bits in decode and prefill. */
static ALWAYS_INLINE void mix_values(const HeadCache *hc, const float *weights, int stride, int nq,
                                     int first_pos, float *const out[4]) {
    for (int c = 0; c < hc->head_size; c += 2 * VEC_WIDTH) {
        int n[2] = {hc->head_size - c, hc->head_size - c - VEC_WIDTH}; /* floats left, or < 1 */
        const float *values = hc->values + c;
        vecf acc[4][2];
        for (int i = 0; i < nq; i++) acc[i][0] = acc[i][1] = vec_zero();
        int t = 0;
        for (; t <= first_pos; t++)
            mix_position(acc, values + (size_t)t * hc->kv_dim, n, weights, stride, t, 0, nq);
        for (; t <= first_pos + nq - 1; t++)
            mix_position(acc, values + (size_t)t * hc->kv_dim, n, weights, stride, t, t - first_pos,
                         nq);
        for (int i = 0; i < nq; i++)
            for (int h = 0; h < 2 && n[h] > 0; h++)
                vec_store_upto(out[i] + c + h * VEC_WIDTH, acc[i][h], n[h]);
    }
}

/* Causal attention of nq (1 or 4, a constant once inlined) query heads q[i] at positions
 * first_pos + i over the cached positions 0..first_pos + i, into out[i] (head_size each): scores
 * q . k / sqrt(head_size), softmax, the values mixed by the weights. att: nq rows of stride
 * floats, scratch. */
static ALWAYS_INLINE void attend(const HeadCache *hc, const float *const q[4], float *const out[4],
                                 int nq, int first_pos, float *att, int stride) {
    float sqrt_head_size = sqrtf((float)hc->head_size); /* divided by: rounds as llama2.c */
    float scores[4];
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
            for (int i = 0; i < 4; i++) att[(size_t)i * stride + t] = scores[i] / sqrt_head_size;
        }
    }
    for (int i = 0; i < nq; i++) softmax(att + (size_t)i * stride, first_pos + i + 1);
    mix_values(hc, att, stride, nq, first_pos, out);
}

/* Query head h of attention(): its queries four at a time, then the rest one by one; s->att's
 * four seq_len rows of head h are its scratch. */
static void attention_head(RunState *s, const Config *c, int l, int pos0, int batch, const float *q,
                           float *out, int h) {
    int dim = c->dim, head_size = dim / c->n_heads;
    int kv_dim = c->n_kv_heads * head_size;
    int kv_head = h / (c->n_heads / c->n_kv_heads); /* shared by n_heads / n_kv_heads heads */
    size_t off = (size_t)l * c->seq_len * kv_dim + kv_head * head_size;
    HeadCache hc = {s->key_cache + off, s->value_cache + off, kv_dim, head_size};
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

/* Causal multi-head attention for the positions pos0 .. pos0 + batch - 1 of layer l: query b
 * (row b of q: (batch, n_heads * head_size)) attends over the cached positions 0..pos0 + b, into
 * row b of out (same shape). Heads in parallel, one parallel region for the whole batch. */
static void attention(RunState *s, const Config *c, int l, int pos0, int batch, const float *q,
                      float *out) {
    size_t work = (size_t)c->n_heads * batch * (pos0 + batch) * (c->dim / c->n_heads) * 2;
    if (work < PARALLEL_MIN_WORK) { /* no region: see matmul_batch */
        for (int h = 0; h < c->n_heads; h++) attention_head(s, c, l, pos0, batch, q, out, h);
        return;
    }
#pragma omp parallel for
    for (int h = 0; h < c->n_heads; h++) attention_head(s, c, l, pos0, batch, q, out, h);
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

    for (int b = 0; b < batch; b++) model_embedding(m, tokens[b], s->x + (size_t)b * dim);
    lap(prof, OP_EMBEDDING);

    for (int l = 0; l < c->n_layers; l++) {
        /* attention block: x += wo attention(rope(wq n(x)), rope(wk n(x)), wv n(x)) */
        for (int b = 0; b < batch; b++)
            m->norm(s->xb + (size_t)b * dim, s->x + (size_t)b * dim, w->attn_norm + (size_t)l * dim,
                    layer_bias(w->attn_norm_bias, l, dim), dim, c->norm_eps);
        lap(prof, OP_NORM);
        /* wk and wv write straight into the kv cache: rows pos0 .. pos0 + batch - 1 of layer l */
        size_t cache_off = ((size_t)l * c->seq_len + pos0) * kv_dim;
        float *k = s->key_cache + cache_off;
        float *v = s->value_cache + cache_off;
        matmul_batch(s, 3, (float *[]){s->q, k, v}, (const Matrix *[]){&w->wq, &w->wk, &w->wv},
                     s->xb, batch, l);
        lap(prof, OP_QKV);
        if (batch == 1) { /* no region: see matmul_batch */
            rope(s->q, dim, k, kv_dim, head_size, pos0, s->inv_freq);
        } else {
#pragma omp parallel for
            for (int b = 0; b < batch; b++)
                rope(s->q + (size_t)b * dim, dim, k + (size_t)b * kv_dim, kv_dim, head_size,
                     pos0 + b, s->inv_freq);
        }
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
