/* The file layouts (format.h): each one's header, the checks on it and the table of its tensors.
 */
#include "format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* First four bytes, read as a little-endian uint32. */
#define NLLM_MAGIC 0x4d4c4c4eu /* "NLLM" */
#define AK42_MAGIC 0x616b3432u /* "24ka" on disk: llama2.c writes the number 0x616b3432 */
#define GGUF_MAGIC 0x46554747u /* "GGUF" */

#define NLLM_VERSION  1
#define LEGACY_HEADER 28  /* 7 int32 */
#define FIXED_HEADER  256 /* normllama and llama2.c version 1/2 headers, zero-padded */

/* normllama: offsets of the uint32 group_size of q8_0 and q4_0 weights (0 for other dtypes), and
 * of the tokenizer section's uint32 size in bytes (0: none) and flags, the header's last field;
 * the reserved zero bytes follow */
#define NLLM_GROUP_SIZE_OFF      64
#define NLLM_VOCAB_BYTES_OFF     68
#define NLLM_VOCAB_FLAGS_OFF     72
#define NLLM_RESERVED_OFF        76
#define NLLM_VOCAB_FLAGS_DEFINED 1u /* bit 0: remove_extra_whitespaces */

/* Trained-norm codes of the normllama header, in norm.c's naming (nllm_format.NORM_CODES). */
static const char *const norm_codes[] = {
    "rmsnorm", "layernorm", "rmsnorm_bias", "rmsnorm_learned_eps", "prmsnorm", "dyt", "identity"};
#define N_NORM_CODES (sizeof(norm_codes) / sizeof(norm_codes[0]))

/* The per-site scalar tensors of a model trained with a norm that learns one (norm_scalar):
 * names of the attention, ffn and final norms' */
static const char *const site_scalar_names[][3] = {
    [NORM_TAKES_LOG_EPS] = {"attn_norm_log_eps", "ffn_norm_log_eps", "final_norm_log_eps"},
    [NORM_TAKES_ALPHA] = {"attn_norm_alpha", "ffn_norm_alpha", "final_norm_alpha"},
};

/* ----------------------------------------------------------------------------
 * Headers, their checks and the tensor layouts */

int check_config(const Config *c, char *err, size_t errlen) {
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

uint64_t ak42_piece_bytes(uint64_t n, uint64_t group_size) {
    return n + n / group_size * sizeof(float);
}

/* The dtype a matrix stored as `kind` is held in: the weight dtype whose kind it is (dtype.h),
 * q8_0 for llama2.c version 2's groups within rows, and f32 for any other float32 data. */
static DType dtype_of_kind(TensorKind kind) {
    for (int d = 0; d < N_DTYPES; d++)
        if (DTYPES[d].kind == kind) return (DType)d;
    return kind == TENSOR_AK42_Q8 ? DTYPE_Q8_0 : DTYPE_F32;
}

/* A stack of `layers` matrices (rows, cols), as add_matrix takes it. */
typedef struct {
    uint64_t layers;
    int rows, cols;
} Stack;

/* A stacked matrix stored as `kind`; a grouped dtype's values (q8_0's TENSOR_I8, q4_0's
 * TENSOR_Q4) are followed by their scales tensor (layers * rows, ceil(cols / group_size)),
 * group_size the layout's. Sets m's shape and dtype (dtype_of_kind) and adds it to the sources to
 * pack. */
static void add_matrix(Layout *l, const char *name, Matrix *m, Stack s, TensorKind kind) {
    int group_size = (int)l->group_size;
    matrix_init(m, dtype_of_kind(kind), s.rows, s.cols, group_size);
    uint64_t layers = s.layers, rows = s.rows, per_layer = rows * s.cols;
    int grouped = dtype_grouped(m->dtype);
    uint64_t n_groups = (uint64_t)matrix_row_groups(m);
    Source *src = &l->sources[l->n_sources++];
    *src = (Source){.matrix = m,
                    .values = NULL, /* set by layout_place */
                    .scales = NULL,
                    .value_stride = rows * dtype_row_bytes(m->dtype, s.cols),
                    .scale_stride = rows * n_groups * sizeof(float),
                    .layers = (int)layers,
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
    if (grouped && kind != TENSOR_AK42_Q8) /* the scales, a tensor of their own */
        l->tensors[l->n++] = (TensorSpec){.name = name,
                                          .vec = &src->scales,
                                          .numel = layers * rows * n_groups,
                                          .kind = TENSOR_F32,
                                          .parts = 1};
}

uint64_t align_up(uint64_t off, uint64_t align) {
    return (off + align - 1) / align * align;
}

uint64_t tensor_bytes(const TensorSpec *t, uint64_t group_size) {
    if (is_ak42(t->kind)) return ak42_piece_bytes(t->numel, group_size);
    /* whole blocks: a q4_0 matrix's rows are even (read_normllama checks hidden_dim; dim is) */
    const DTypeInfo *d = &DTYPES[dtype_of_kind(t->kind)];
    return t->numel / d->block_size * d->block_bytes;
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
uint64_t owned_bytes(const TensorSpec *t) {
    return t->kind == TENSOR_AK42_F32 ? t->numel * sizeof(float) : 0;
}

uint64_t layout_owned_bytes(const Layout *l) {
    uint64_t n = 0;
    for (int i = 0; i < l->n; i++) n += owned_bytes(&l->tensors[i]);
    return n;
}

uint64_t layout_norm_floats(const Layout *l) {
    uint64_t n = 0;
    for (int i = 0; i < l->n; i++)
        if (l->tensors[i].kind == TENSOR_NORM) n += l->tensors[i].numel;
    return n;
}

/* llama2.c legacy: embedding, per-kind stacked layer tensors, final norm, the unused RoPE tables,
 * classifier when not shared. */
static void legacy_layout(Layout *l, Weights *w, const Config *c) {
    TensorKind k = TENSOR_F32;
    int dim = c->dim, hidden = c->hidden_dim, kv_dim = c->n_kv_heads * (dim / c->n_heads);
    uint64_t layers = c->n_layers;
    *l = (Layout){.start = LEGACY_HEADER, .align = 1};
    add_matrix(l, "token_embedding", &w->token_embedding, (Stack){1, c->vocab_size, dim}, k);
    add_vector(l, "attn_norm", &w->attn_norm, layers * dim);
    add_matrix(l, "wq", &w->wq, (Stack){layers, dim, dim}, k);
    add_matrix(l, "wk", &w->wk, (Stack){layers, kv_dim, dim}, k);
    add_matrix(l, "wv", &w->wv, (Stack){layers, kv_dim, dim}, k);
    add_matrix(l, "wo", &w->wo, (Stack){layers, dim, dim}, k);
    add_vector(l, "ffn_norm", &w->ffn_norm, layers * dim);
    add_matrix(l, "w1", &w->w1, (Stack){layers, hidden, dim}, k);
    add_matrix(l, "w2", &w->w2, (Stack){layers, dim, hidden}, k);
    add_matrix(l, "w3", &w->w3, (Stack){layers, hidden, dim}, k);
    add_vector(l, "final_norm", &w->final_norm, dim);
    skip(l, "rope tables", (uint64_t)c->seq_len * (dim / c->n_heads));
    if (!c->shared_classifier) add_matrix(l, "wcls", &w->wcls, (Stack){1, c->vocab_size, dim}, k);
}

/* How a llama2.c version 2 matrix of `cols` columns is loaded: as q8_0 when its rows hold whole
 * groups of the flattened tensor and the q8_0 kernels take the group size, the file's groups then
 * being exactly q8_0's row groups; otherwise groups straddle rows (stories260K's w2: rows of 172
 * values, groups of 64), which q8_0 cannot express, and it is dequantized to f32. */
static TensorKind ak42_kind(int cols, uint64_t group_size) {
    return dtype_group_size_ok(DTYPE_Q8_0, group_size) && cols % group_size == 0 ? TENSOR_AK42_Q8
                                                                                 : TENSOR_AK42_F32;
}

/* llama2.c version 1 (fp32) and 2 (int8 groups, norms kept fp32): norms first, then embedding,
 * attention and feed-forward matrices, classifier when not shared. A version 2 matrix's dtype
 * depends on its cols alone, so the matrices matmul multiplies together (wq, wk, wv; w1,
 * w3: all dim columns) share one, as do the embedding and the classifier. */
static void ak42_layout(Layout *l, Weights *w, const Config *c, int version, uint64_t group_size) {
    int dim = c->dim, hidden = c->hidden_dim, kv_dim = c->n_kv_heads * (dim / c->n_heads);
    TensorKind k = version == 2 ? ak42_kind(dim, group_size) : TENSOR_F32; /* cols = dim */
    TensorKind k_w2 = version == 2 ? ak42_kind(hidden, group_size) : TENSOR_F32;
    uint64_t layers = c->n_layers;
    *l = (Layout){.start = FIXED_HEADER, .align = 1, .group_size = group_size};
    add_vector(l, "attn_norm", &w->attn_norm, layers * dim);
    add_vector(l, "ffn_norm", &w->ffn_norm, layers * dim);
    add_vector(l, "final_norm", &w->final_norm, dim);
    add_matrix(l, "token_embedding", &w->token_embedding, (Stack){1, c->vocab_size, dim}, k);
    add_matrix(l, "wq", &w->wq, (Stack){layers, dim, dim}, k);
    add_matrix(l, "wk", &w->wk, (Stack){layers, kv_dim, dim}, k);
    add_matrix(l, "wv", &w->wv, (Stack){layers, kv_dim, dim}, k);
    add_matrix(l, "wo", &w->wo, (Stack){layers, dim, dim}, k);
    add_matrix(l, "w1", &w->w1, (Stack){layers, hidden, dim}, k);
    add_matrix(l, "w2", &w->w2, (Stack){layers, dim, hidden}, k_w2);
    add_matrix(l, "w3", &w->w3, (Stack){layers, hidden, dim}, k);
    if (!c->shared_classifier) add_matrix(l, "wcls", &w->wcls, (Stack){1, c->vocab_size, dim}, k);
}

/* normllama: legacy order without the RoPE tables, each norm followed by its bias when the file
 * has biases and then by its per-site scalar when the trained norm learns one, matrices as `k`
 * (q8_0 scales after their values), every tensor aligned. */
static void normllama_layout(Layout *l, Weights *w, const Config *c, uint64_t align, TensorKind k,
                             int group_size) {
    int dim = c->dim, hidden = c->hidden_dim, kv_dim = c->n_kv_heads * (dim / c->n_heads);
    uint64_t layers = c->n_layers;
    NormScalar scalar = norm_scalar(c->trained_norm);
    const char *const *scalar_names = site_scalar_names[scalar];
    *l = (Layout){.start = align_up(FIXED_HEADER, align), .align = align, .group_size = group_size};
    add_matrix(l, "token_embedding", &w->token_embedding, (Stack){1, c->vocab_size, dim}, k);
    add_vector(l, "attn_norm", &w->attn_norm, layers * dim);
    if (c->norm_bias) add_vector(l, "attn_norm_bias", &w->attn_norm_bias, layers * dim);
    if (scalar != NORM_TAKES_EPS) add_vector(l, scalar_names[0], &w->attn_norm_scalar, layers);
    add_matrix(l, "wq", &w->wq, (Stack){layers, dim, dim}, k);
    add_matrix(l, "wk", &w->wk, (Stack){layers, kv_dim, dim}, k);
    add_matrix(l, "wv", &w->wv, (Stack){layers, kv_dim, dim}, k);
    add_matrix(l, "wo", &w->wo, (Stack){layers, dim, dim}, k);
    add_vector(l, "ffn_norm", &w->ffn_norm, layers * dim);
    if (c->norm_bias) add_vector(l, "ffn_norm_bias", &w->ffn_norm_bias, layers * dim);
    if (scalar != NORM_TAKES_EPS) add_vector(l, scalar_names[1], &w->ffn_norm_scalar, layers);
    add_matrix(l, "w1", &w->w1, (Stack){layers, hidden, dim}, k);
    add_matrix(l, "w2", &w->w2, (Stack){layers, dim, hidden}, k);
    add_matrix(l, "w3", &w->w3, (Stack){layers, hidden, dim}, k);
    add_vector(l, "final_norm", &w->final_norm, dim);
    if (c->norm_bias) add_vector(l, "final_norm_bias", &w->final_norm_bias, dim);
    if (scalar != NORM_TAKES_EPS) add_vector(l, scalar_names[2], &w->final_norm_scalar, 1);
    if (!c->shared_classifier) add_matrix(l, "wcls", &w->wcls, (Stack){1, c->vocab_size, dim}, k);
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

/* The header's dtype codes and names, "0 f32, 1 bf16, ...", into out[len], for the message on an
 * unknown one. */
static void list_dtypes(char *out, size_t len) {
    size_t at = 0;
    for (int d = 0; d < N_DTYPES && at < len; d++)
        if (DTYPES[d].kind != TENSOR_GGUF)
            at += snprintf(out + at, len - at, "%s%d %s", d ? ", " : "", d, DTYPES[d].name);
}

/* A grouped dtype's group sizes, "32 or 64", into out[len]. */
static void list_group_sizes(const DTypeInfo *d, char *out, size_t len) {
    size_t at = 0;
    for (int i = 0; i < MAX_GROUP_SIZES && d->group_sizes[i] != 0 && at < len; i++)
        at += snprintf(out + at, len - at, "%s%d", i ? " or " : "", d->group_sizes[i]);
}

/* "normllama v1 <dtype>", the format's name with a file of that dtype. */
static const char *normllama_format(DType dtype) {
    static char names[N_DTYPES][32];
    if (names[dtype][0] == '\0')
        snprintf(names[dtype], sizeof(names[dtype]), "normllama v1 %s", DTYPES[dtype].name);
    return names[dtype];
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
    if (norm >= N_NORM_CODES) {
        snprintf(err, errlen,
                 "unknown trained norm code %u (0 rmsnorm, 1 layernorm, 2 rmsnorm_bias, "
                 "3 rmsnorm_learned_eps, 4 prmsnorm, 5 dyt, 6 identity)",
                 norm);
        return -1;
    }
    c->trained_norm = norm_by_name(norm_codes[norm]);
    if (check_flag("norm_bias", bias, err, errlen) != 0) return -1;
    if (check_flag("shared_classifier", shared, err, errlen) != 0) return -1;
    c->norm_bias = bias;
    c->shared_classifier = shared;
    if (dtype >= N_DTYPES || DTYPES[dtype].kind == TENSOR_GGUF) { /* K-quants: GGUF files' */
        char codes[128];
        list_dtypes(codes, sizeof(codes));
        snprintf(err, errlen, "unknown weight dtype %u (%s)", dtype, codes);
        return -1;
    }
    const DTypeInfo *d = &DTYPES[dtype];
    uint32_t group_size = read_u32(map + NLLM_GROUP_SIZE_OFF);
    if (!dtype_group_size_ok(dtype, group_size)) {
        if (dtype_grouped(dtype)) {
            char sizes[64];
            list_group_sizes(d, sizes, sizeof(sizes));
            snprintf(err, errlen, "%s group_size is %u, not %s", d->name, group_size, sizes);
        } else {
            snprintf(err, errlen, "group_size is %u but %s weights have no groups (must be 0)",
                     group_size, d->name);
        }
        return -1;
    }
    if (align < 4 || align > 4096 || (align & (align - 1)) != 0) {
        snprintf(err, errlen, "alignment is %u, not a power of two in 4..4096", align);
        return -1;
    }
    uint32_t vocab_bytes = read_u32(map + NLLM_VOCAB_BYTES_OFF);
    uint32_t vocab_flags = read_u32(map + NLLM_VOCAB_FLAGS_OFF);
    if ((vocab_flags & ~NLLM_VOCAB_FLAGS_DEFINED) != 0 || (vocab_bytes == 0 && vocab_flags != 0)) {
        snprintf(err, errlen, "tokenizer flags are 0x%x, not 0 or 1%s", vocab_flags,
                 vocab_bytes == 0 ? " with a tokenizer section" : "");
        return -1;
    }
    for (int i = NLLM_RESERVED_OFF; i < FIXED_HEADER; i++) {
        if (map[i] != 0) {
            snprintf(err, errlen, "reserved header byte %d is not zero", i);
            return -1;
        }
    }
    if (check_config(c, err, errlen) != 0) return -1;
    /* a row of the file holds whole blocks, w2's hidden_dim values too (dim is even: head_size
     * is); q4_0's blocks of two codes a byte are the only ones longer than a value so far */
    if (c->hidden_dim % d->block_size != 0) {
        snprintf(err, errlen, "hidden_dim %d is odd; %s packs two codes a byte along w2's rows",
                 c->hidden_dim, d->name);
        return -1;
    }
    normllama_layout(l, &m->weights, c, align, d->kind, (int)group_size);
    l->has_vocab = vocab_bytes != 0;
    l->vocab_bytes = vocab_bytes;
    l->vocab_flags = vocab_flags;
    m->format = normllama_format(dtype);
    return 0;
}

void layout_free(Layout *l) {
    if (l->gguf) gguf_free(l->gguf);
    free(l->gguf);
    free(l->owned);
    l->gguf = NULL;
    l->owned = NULL;
}

int read_layout(Model *m, const char *map, size_t size, Layout *l, char *what, size_t whatlen) {
    uint32_t magic = read_u32(map);
    *l = (Layout){0};
    if (magic == GGUF_MAGIC) return read_gguf(m, map, size, l, what, whatlen);
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
    if (l->has_vocab && expected != UINT64_MAX) { /* the tokenizer section ends the file */
        l->vocab_offset = align_up(expected, l->align);
        expected = l->vocab_offset + l->vocab_bytes;
    }
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
