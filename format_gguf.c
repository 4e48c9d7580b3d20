/* GGUF files read as run's model (format.h's read_gguf): which architectures, their keys into
 * Config, their tensors into the layout, each layer's type into the dtype its matrix is held in
 * (dtype.h's GGUF_DTYPES). gguf.c has parsed and checked the container; this file checks the model
 * it describes. docs/FORMAT.md maps a GGUF onto run's model.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "panel.h"

/* An architecture run reads: llama.cpp's graph of it is run's with this norm. */
typedef struct {
    const char *name;    /* general.architecture */
    const char *format;  /* Model's format: "GGUF llama" */
    const char *norm;    /* norm.c's name of the norm its graph computes */
    int bias;            /* its norms carry a bias (beta) */
    const char *eps_key; /* its norms' eps, after "<name>." */
    /* RoPE rotates the pairs (i, i + head_size / 2) of a head (llama.cpp's NEOX): wq's and wk's
     * rows are in that order (Source's rotate_half) */
    int rotate_half;
} Architecture;

/* llama; and stablelm, the architecture llama.cpp runs our LayerNorm models as: pre-norm
 * LayerNorm with weight and bias, SwiGLU, RoPE on the whole head, grouped kv heads (StableLM 2's
 * graph, src/models/stablelm.cpp, without its optional q/k norms and parallel residual). */
static const Architecture ARCHITECTURES[] = {
    {"llama", "GGUF llama", "rmsnorm", 0, "attention.layer_norm_rms_epsilon", 0},
    {"stablelm", "GGUF stablelm", "layernorm", 1, "attention.layer_norm_epsilon", 1},
};

/* What reading one file needs at hand: the parse, the architecture's name (its keys' prefix),
 * which tensors the model has used (the rest are refused), the room left for the norms' pieces
 * and the matrices' layers (Layout's owned), and where messages go. */
typedef struct {
    const Gguf *g;
    const char *arch;
    unsigned char *used; /* n_tensors flags */
    const uint8_t **pieces;
    LayerTensor *layers;
    char *err;
    size_t errlen;
} Reader;

/* ----------------------------------------------------------------------------
 * Keys */

/* "<arch>.<key>" into buf[96]. */
static const char *arch_key(const Reader *r, const char *key, char buf[96]) {
    snprintf(buf, 96, "%s.%s", r->arch, key);
    return buf;
}

/* The size key "<arch>.<key>" into *out: an integer in 1..MAX_SIZE. def > 0: the value when the
 * key is missing (an optional key); 0: required. */
static int get_size(Reader *r, const char *key, int def, int *out) {
    char name[96];
    uint64_t v;
    if (def > 0 && !gguf_find(r->g, arch_key(r, key, name))) {
        *out = def;
        return 0;
    }
    if (gguf_get_uint(r->g, arch_key(r, key, name), &v, r->err, r->errlen) != 0) return -1;
    if (v < 1 || v > MAX_SIZE) {
        snprintf(r->err, r->errlen, "%s is %llu, outside 1..%d", name, (unsigned long long)v,
                 MAX_SIZE);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* The float key "<arch>.<key>" into *out; def when it is missing. */
static int get_float(Reader *r, const char *key, float def, float *out) {
    char name[96];
    if (!gguf_find(r->g, arch_key(r, key, name))) {
        *out = def;
        return 0;
    }
    return gguf_get_float(r->g, name, out, r->err, r->errlen);
}

/* The architecture the file names, or NULL with the problem in err. */
static const Architecture *architecture(const Gguf *g, char *err, size_t errlen) {
    GgufString name;
    if (gguf_get_string(g, "general.architecture", &name, err, errlen) != 0) return NULL;
    for (size_t i = 0; i < sizeof(ARCHITECTURES) / sizeof(ARCHITECTURES[0]); i++)
        if (name.len == strlen(ARCHITECTURES[i].name) &&
            memcmp(name.s, ARCHITECTURES[i].name, name.len) == 0)
            return &ARCHITECTURES[i];
    snprintf(err, errlen,
             "general.architecture is %s; this run reads llama, and stablelm as normllama's "
             "LayerNorm export writes it",
             gguf_shown(name).s);
    return NULL;
}

/* Refuses what the keys ask of the graph that run does not compute: experts, scaled RoPE, a RoPE
 * over part of the head, heads of another width than dim / n_heads. */
static int check_graph_keys(Reader *r, int head_size) {
    char name[96];
    int v;
    if (gguf_find(r->g, arch_key(r, "expert_count", name))) {
        uint64_t experts;
        if (gguf_get_uint(r->g, name, &experts, r->err, r->errlen) != 0) return -1;
        if (experts > 0) {
            snprintf(r->err, r->errlen, "%s is %llu: mixture-of-experts models are not supported",
                     name, (unsigned long long)experts);
            return -1;
        }
    }
    if (gguf_find(r->g, arch_key(r, "rope.scaling.type", name))) {
        GgufString type;
        if (gguf_get_string(r->g, name, &type, r->err, r->errlen) != 0) return -1;
        if (type.len != 4 || memcmp(type.s, "none", 4) != 0) {
            snprintf(r->err, r->errlen, "%s is %s: scaled RoPE is not supported", name,
                     gguf_shown(type).s);
            return -1;
        }
    }
    const char *widths[] = {"rope.dimension_count", "attention.key_length",
                            "attention.value_length"};
    for (int i = 0; i < 3; i++) {
        if (get_size(r, widths[i], head_size, &v) != 0) return -1;
        if (v != head_size) {
            snprintf(
                r->err, r->errlen,
                "%s is %d, not head_size %d (embedding_length / head_count): RoPE over part of "
                "a head and heads of another width are not supported",
                arch_key(r, widths[i], name), v, head_size);
            return -1;
        }
    }
    return 0;
}

/* The norm the model was trained with: normllama.norm (the norm.c name our exports record) when
 * the file has it, which must be the one the architecture's graph computes, else that one. */
static int trained_norm(Reader *r, const Architecture *a, Config *c) {
    c->trained_norm = norm_by_name(a->norm);
    c->norm_bias = a->bias;
    GgufString s;
    if (!gguf_find(r->g, "normllama.norm")) return 0;
    if (gguf_get_string(r->g, "normllama.norm", &s, r->err, r->errlen) != 0) return -1;
    if (s.len != strlen(a->norm) || memcmp(s.s, a->norm, s.len) != 0) {
        snprintf(r->err, r->errlen, "normllama.norm is %s, but a %s model's norm is %s",
                 gguf_shown(s).s, a->name, a->norm);
        return -1;
    }
    return 0;
}

/* The Config of the keys and of token_embd.weight's rows (vocab_size) and output.weight's presence
 * (a classifier of its own), checked as every layout's is. */
static int read_config(Reader *r, const Architecture *a, Config *c) {
    *c = (Config){0};
    const GgufTensor *embedding = gguf_find_tensor(r->g, "token_embd.weight");
    if (!embedding || embedding->n_dims != 2 || embedding->dims[1] > MAX_SIZE) {
        snprintf(r->err, r->errlen, "tensor token_embd.weight is %s",
                 embedding ? "not a matrix of at most 2^20 rows" : "missing");
        return -1;
    }
    c->vocab_size = (int)embedding->dims[1];
    c->shared_classifier = gguf_find_tensor(r->g, "output.weight") == NULL;
    if (get_size(r, "embedding_length", 0, &c->dim) ||
        get_size(r, "block_count", 0, &c->n_layers) ||
        get_size(r, "feed_forward_length", 0, &c->hidden_dim) ||
        get_size(r, "attention.head_count", 0, &c->n_heads) ||
        get_size(r, "attention.head_count_kv", c->n_heads, &c->n_kv_heads) ||
        get_size(r, "context_length", 0, &c->seq_len) ||
        get_float(r, a->eps_key, -1.0f, &c->norm_eps) ||
        get_float(r, "rope.freq_base", 10000.0f, &c->rope_theta))
        return -1;
    char name[96];
    if (c->norm_eps == -1.0f) {
        snprintf(r->err, r->errlen, "key %s is missing", arch_key(r, a->eps_key, name));
        return -1;
    }
    int vocab;
    if (get_size(r, "vocab_size", c->vocab_size, &vocab) != 0) return -1;
    if (vocab != c->vocab_size) {
        snprintf(r->err, r->errlen, "%s is %d but token_embd.weight has %d rows",
                 arch_key(r, "vocab_size", name), vocab, c->vocab_size);
        return -1;
    }
    if (trained_norm(r, a, c) != 0 || check_config(c, r->err, r->errlen) != 0) return -1;
    return check_graph_keys(r, c->dim / c->n_heads);
}

/* ----------------------------------------------------------------------------
 * Tensors */

/* "<fmt formatted with layer>" into buf[64]: a tensor's name. */
static const char *tensor_name(const char *fmt, int layer, char buf[64]) {
    snprintf(buf, 64, fmt, layer);
    return buf;
}

/* The tensor `name`, a vector of cols values (rows 0) or a (rows, cols) matrix (dims {cols,
 * rows}), marked used; or NULL with the problem in err: missing, a type run does not read, other
 * dims, a vector other than f32. */
static const GgufTensor *find_tensor(Reader *r, const char *name, uint64_t rows, uint64_t cols) {
    const GgufTensor *t = gguf_find_tensor(r->g, name);
    if (!t) {
        snprintf(r->err, r->errlen, "tensor %s is missing", name);
        return NULL;
    }
    r->used[t - r->g->tensors] = 1;
    const char *type = gguf_tensor_types[t->type].name;
    if (!gguf_dtype(t->type)) {
        snprintf(r->err, r->errlen,
                 "tensor %s is %s, a type this run does not read (f32, f16, bf16, q8_0, q4_0, "
                 "q4_1, q5_0, q5_1, q4_K, q5_K, q6_K)",
                 name, type);
        return NULL;
    }
    uint32_t n_dims = rows ? 2 : 1;
    if (t->n_dims != n_dims || t->dims[0] != cols || (rows && t->dims[1] != rows)) {
        char want[48];
        if (rows)
            snprintf(want, sizeof(want), "%llu x %llu", (unsigned long long)cols,
                     (unsigned long long)rows);
        else
            snprintf(want, sizeof(want), "%llu", (unsigned long long)cols);
        snprintf(r->err, r->errlen,
                 "tensor %s has dims %llu x %llu (%u dims), expected %s from the model's keys",
                 name, (unsigned long long)t->dims[0], (unsigned long long)t->dims[1], t->n_dims,
                 want);
        return NULL;
    }
    if (!rows && t->type != GGUF_TENSOR_F32) {
        snprintf(r->err, r->errlen, "tensor %s is %s; a norm's weight or bias must be f32", name,
                 type);
        return NULL;
    }
    return t;
}

/* A stack of norm vectors of dim values (fmt "blk.%d.attn_norm.weight", or a name alone when
 * layers is 1) as a TensorSpec whose pieces are their data. */
static int add_norm(Reader *r, Layout *l, const char *fmt, const float **dst, int layers, int dim) {
    const uint8_t **pieces = r->pieces;
    char name[64];
    for (int i = 0; i < layers; i++) {
        const GgufTensor *t = find_tensor(r, tensor_name(fmt, i, name), 0, (uint64_t)dim);
        if (!t) return -1;
        pieces[i] = t->data;
    }
    r->pieces += layers;
    l->tensors[l->n++] = (TensorSpec){.name = fmt,
                                      .vec = dst,
                                      .numel = (uint64_t)layers * dim,
                                      .kind = TENSOR_NORM,
                                      .parts = (uint64_t)layers,
                                      .pieces = pieces};
    return 0;
}

/* The dtype holding two matrices, or two layers of one, held as a and b: the same one; for two
 * K-quants a, each keeping its own (a stack's layers are then held each in its dtype, panel.h's
 * Matrix layers, and the products multiply the same int8 inputs); q8_0 for two other quantized
 * ones (a q4_0 or K-quant layer is then converted); else f32, which holds every type's values
 * exactly. matmul multiplies wq, wk and wv together, and w1 and w3, in one call. */
static DType join(DType a, DType b) {
    if (a == b || (dtype_kquant(a) && dtype_kquant(b))) return a;
    int quantized_a = dtype_grouped(a) || dtype_kquant(a);
    return quantized_a && (dtype_grouped(b) || dtype_kquant(b)) ? DTYPE_Q8_0 : DTYPE_F32;
}

typedef struct {
    int layers, rows, cols;
} Shape;

/* A stack of matrices (fmt as add_norm's): their tensors and types as the next s.layers
 * LayerTensors, and the Source that packs them, its matrix in the dtype that holds all its
 * layers (join; the groups of matmul are joined after). */
static int add_matrix(Reader *r, Layout *l, const char *fmt, Matrix *m, Shape s) {
    LayerTensor *layers = r->layers;
    char name[64];
    DType dtype = DTYPE_F32;
    for (int i = 0; i < s.layers; i++) {
        const GgufTensor *t = find_tensor(r, tensor_name(fmt, i, name), s.rows, s.cols);
        if (!t) return -1;
        layers[i] = (LayerTensor){t->data, gguf_dtype(t->type)};
        dtype = i == 0 ? layers[i].type->dtype : join(dtype, layers[i].type->dtype);
    }
    r->layers += s.layers;
    matrix_init(m, dtype, s.rows, s.cols, 32);
    l->sources[l->n_sources++] = (Source){.matrix = m, .layers = s.layers, .layer_tensors = layers};
    return 0;
}

/* Holds the matrices multiplied together (matmul.h) in one dtype. */
static void join_products(Matrix *a, Matrix *b, Matrix *c) {
    DType d = join(a->dtype, b->dtype);
    if (c) d = join(d, c->dtype);
    if (dtype_kquant(d)) return; /* all K-quants: each keeps its own */
    Matrix *all[3] = {a, b, c};
    for (int i = 0; i < 3 && all[i]; i++) matrix_init(all[i], d, all[i]->rows, all[i]->cols, 32);
}

/* The q8_0 and q4_0 matrices whose every layer is repacked from GGUF blocks of their own dtype
 * (Q8_0, Q4_0; Q5_0 as q8_0), whose scales are the blocks' fp16 numbers: held as fp16 (panel.h's
 * matrix_hold_half_scales), as the file holds them. A layer converted by way of float32 has
 * float32 scales (quantize_q8_0_row's), and keeps its matrix's in float32. */
static void hold_half_scales(Layout *l) {
    for (int i = 0; i < l->n_sources; i++) {
        Matrix *m = l->sources[i].matrix;
        int all = m->dtype == DTYPE_Q8_0 || m->dtype == DTYPE_Q4_0;
        for (int k = 0; all && k < l->sources[i].layers; k++) {
            const GgufDType *t = l->sources[i].layer_tensors[k].type;
            all = t->reading == GGUF_REPACKED && t->dtype == m->dtype;
        }
        if (all && m->group_size == 32) matrix_hold_half_scales(m);
    }
}

/* rope_freqs.weight's divisors, when the file has them: each finite and positive (a zero would
 * make every angle of its pair infinite). */
static int check_rope_freqs(Reader *r) {
    const GgufTensor *t = gguf_find_tensor(r->g, "rope_freqs.weight");
    for (uint64_t i = 0; t && i < t->dims[0]; i++) {
        float v;
        memcpy(&v, t->data + i * sizeof v, sizeof v);
        if (!(v > 0.0f && v < INFINITY)) {
            snprintf(r->err, r->errlen, "rope_freqs.weight[%llu] is %g, not a positive divisor",
                     (unsigned long long)i, v);
            return -1;
        }
    }
    return 0;
}

/* Every tensor of the model, in normllama's order (format.c's normllama_layout). */
static int add_tensors(Reader *r, Layout *l, Weights *w, const Config *c, int rotate_half) {
    int dim = c->dim, hidden = c->hidden_dim, n = c->n_layers;
    int head_size = dim / c->n_heads, kv_dim = c->n_kv_heads * head_size;
    if (add_matrix(r, l, "token_embd.weight", &w->token_embedding,
                   (Shape){1, c->vocab_size, dim}) ||
        add_norm(r, l, "blk.%d.attn_norm.weight", &w->attn_norm, n, dim) ||
        (c->norm_bias && add_norm(r, l, "blk.%d.attn_norm.bias", &w->attn_norm_bias, n, dim)) ||
        add_matrix(r, l, "blk.%d.attn_q.weight", &w->wq, (Shape){n, dim, dim}) ||
        add_matrix(r, l, "blk.%d.attn_k.weight", &w->wk, (Shape){n, kv_dim, dim}) ||
        add_matrix(r, l, "blk.%d.attn_v.weight", &w->wv, (Shape){n, kv_dim, dim}) ||
        add_matrix(r, l, "blk.%d.attn_output.weight", &w->wo, (Shape){n, dim, dim}) ||
        add_norm(r, l, "blk.%d.ffn_norm.weight", &w->ffn_norm, n, dim) ||
        (c->norm_bias && add_norm(r, l, "blk.%d.ffn_norm.bias", &w->ffn_norm_bias, n, dim)) ||
        add_matrix(r, l, "blk.%d.ffn_gate.weight", &w->w1, (Shape){n, hidden, dim}) ||
        add_matrix(r, l, "blk.%d.ffn_down.weight", &w->w2, (Shape){n, dim, hidden}) ||
        add_matrix(r, l, "blk.%d.ffn_up.weight", &w->w3, (Shape){n, hidden, dim}) ||
        add_norm(r, l, "output_norm.weight", &w->final_norm, 1, dim) ||
        (c->norm_bias && add_norm(r, l, "output_norm.bias", &w->final_norm_bias, 1, dim)) ||
        (!c->shared_classifier &&
         add_matrix(r, l, "output.weight", &w->wcls, (Shape){1, c->vocab_size, dim})) ||
        /* Llama 3's RoPE scaling, the divisor of each pair's frequency (llama.cpp's
         * freq_factors; convert_hf_to_gguf.py writes it from config.json's rope_scaling) */
        (gguf_find_tensor(r->g, "rope_freqs.weight") &&
         add_norm(r, l, "rope_freqs.weight", &w->rope_freqs, 1, head_size / 2)))
        return -1;
    join_products(&w->wq, &w->wk, &w->wv);
    join_products(&w->w1, &w->w3, NULL);
    hold_half_scales(l);
    l->sources[1].rotate_half = l->sources[2].rotate_half = rotate_half ? head_size : 0;
    for (uint64_t i = 0; i < r->g->n_tensors; i++) {
        if (!r->used[i]) {
            const GgufString *name = &r->g->tensors[i].name;
            snprintf(r->err, r->errlen, "tensor %s is not part of the %s model run reads",
                     gguf_shown(*name).s, r->arch);
            return -1;
        }
    }
    return 0;
}

/* What the sources' layers are converted from and to, into l->converted: "q4_K, q6_K as q8_0",
 * pairs of a GGUF type read other than exactly and the dtype it becomes. */
static void note_conversions(Layout *l) {
    uint32_t from[24];
    DType to[24];
    int n = 0;
    for (int i = 0; i < l->n_sources; i++) {
        const Source *s = &l->sources[i];
        for (int k = 0; k < s->layers; k++) {
            const GgufDType *t = s->layer_tensors[k].type;
            int own = t->dtype == s->matrix->dtype ||
                      (dtype_kquant(t->dtype) && dtype_kquant(s->matrix->dtype));
            if (t->reading != GGUF_CONVERTED && own) continue;
            int seen = 0;
            for (int j = 0; j < n; j++)
                seen |= from[j] == t->ggml_type && to[j] == s->matrix->dtype;
            if (!seen && n < 24) {
                from[n] = t->ggml_type;
                to[n++] = s->matrix->dtype;
            }
        }
    }
    size_t at = 0, len = sizeof(l->converted);
    l->converted[0] = '\0';
    for (int d = 0; d < N_DTYPES; d++) {
        int first = 1;
        for (int j = 0; j < n && at < len; j++) {
            if (to[j] != (DType)d) continue;
            at += snprintf(l->converted + at, len - at, "%s%s", first ? (at ? "; " : "") : ", ",
                           gguf_tensor_types[from[j]].name);
            first = 0;
        }
        if (!first && at < len)
            at += snprintf(l->converted + at, len - at, " as %s", DTYPES[d].name);
    }
}

/* tokenizer.ggml.tokens, when the file has a vocabulary: as many pieces as the embedding has
 * rows. */
static int check_vocabulary(Reader *r, Layout *l, const Config *c) {
    const GgufKV *tokens;
    if (!gguf_find(r->g, "tokenizer.ggml.tokens")) return 0; /* none: -z gives one */
    if (gguf_get_array(r->g, "tokenizer.ggml.tokens", GGUF_STRING, &tokens, r->err, r->errlen))
        return -1;
    if (tokens->n != (uint64_t)c->vocab_size) {
        snprintf(r->err, r->errlen,
                 "tokenizer.ggml.tokens has %llu pieces but token_embd.weight has %d rows "
                 "(vocab_size)",
                 (unsigned long long)tokens->n, c->vocab_size);
        return -1;
    }
    l->has_vocab = 1;
    return 0;
}

int read_gguf(Model *m, const char *map, size_t size, Layout *l, char *what, size_t whatlen) {
    *l = (Layout){.placed = 1, .align = 1};
    if (!(l->gguf = calloc(1, sizeof(*l->gguf)))) {
        snprintf(what, whatlen, "out of memory for the GGUF file's tables");
        return -1;
    }
    if (gguf_parse(l->gguf, (const uint8_t *)map, size, what, whatlen) != 0) {
        free(l->gguf);
        l->gguf = NULL;
        return -1;
    }
    const Gguf *g = l->gguf;
    const Architecture *a = architecture(g, what, whatlen);
    if (!a) return -1;
    Reader r = {.g = g, .arch = a->name, .err = what, .errlen = whatlen};
    Config *c = &m->config;
    if (read_config(&r, a, c) != 0) return -1;
    /* every layer's norms (up to 4) and matrices (7), and the final norm, its bias, rope_freqs,
     * the embedding and the classifier */
    size_t layers = (size_t)c->n_layers;
    size_t pieces = (4 * layers + 3) * sizeof(*r.pieces),
           tensors = (7 * layers + 2) * sizeof(*r.layers);
    if (!(l->owned = calloc(1, pieces + tensors + g->n_tensors))) {
        snprintf(what, whatlen, "out of memory for the GGUF file's tables");
        return -1;
    }
    r.pieces = l->owned;
    r.layers = (LayerTensor *)((char *)l->owned + pieces);
    r.used = (unsigned char *)l->owned + pieces + tensors;
    if (add_tensors(&r, l, &m->weights, c, a->rotate_half) != 0 || check_rope_freqs(&r) != 0)
        return -1;
    if (check_vocabulary(&r, l, c) != 0) return -1;
    note_conversions(l);
    m->format = a->format;
    return 0;
}
