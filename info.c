/* --info (info.h): a model's description, from the loaded Model and the tokenizer. */
#include "info.h"

#include <stdio.h>
#include <string.h>

#include "dtype.h"
#include "io.h"

/* The matrices, in the order the forward pass uses them. */
enum { N_MATRICES = 9 };

static const char *const matrix_names[N_MATRICES] = {
    "token_embedding", "wq", "wk", "wv", "wo", "w1", "w2", "w3", "wcls"};

static void matrices(const Model *m, const Matrix *out[N_MATRICES]) {
    const Weights *w = &m->weights;
    const Matrix *all[N_MATRICES] = {
        &w->token_embedding, &w->wq, &w->wk, &w->wv, &w->wo, &w->w1, &w->w2, &w->w3, &w->wcls};
    memcpy(out, all, sizeof(all));
}

/* Bytes of one layer's values of a (rows, cols) matrix as run holds it: its rows of blocks
 * (dtype.h), and a grouped dtype's scale per group of each row (float32, or fp16: half_scales). */
static size_t matrix_bytes(const Matrix *x) {
    size_t bytes = (size_t)x->rows * dtype_row_bytes(x->dtype, x->cols);
    if (dtype_grouped(x->dtype))
        bytes += (size_t)x->rows * matrix_row_groups(x) * scale_bytes(x->half_scales);
    return bytes;
}

/* Bytes of `layers` layers of a stack: a stack of mixed K-quants (panel.h's Matrix layers) each
 * layer in its own dtype. */
static size_t stack_bytes(const Matrix *x, int layers) {
    if (!x->layers) return layers * matrix_bytes(x);
    size_t bytes = 0;
    for (int l = 0; l < layers; l++) bytes += matrix_bytes(&x->layers[l]);
    return bytes;
}

/* A matrix's dtype as named: its own, or a stack of mixed K-quants' every dtype of its layers in
 * code order ("q4_k+q6_k"), into buf. */
static const char *dtype_text(const Matrix *x, int layers, char buf[32]) {
    if (!x->layers) return DTYPES[x->dtype].name;
    size_t at = 0;
    buf[0] = '\0';
    for (int d = 0; d < N_DTYPES; d++) {
        int used = 0;
        for (int l = 0; l < layers; l++) used |= x->layers[l].dtype == (DType)d;
        if (used) at += snprintf(buf + at, 32 - at, "%s%s", at ? "+" : "", DTYPES[d].name);
    }
    return buf;
}

size_t info_weight_bytes(const Model *m) {
    const Config *c = &m->config;
    const Matrix *mat[N_MATRICES];
    matrices(m, mat);
    size_t bytes = 0;
    for (int i = 0; i < N_MATRICES; i++) {
        if (i == N_MATRICES - 1 && c->shared_classifier) continue; /* wcls is the embedding */
        int layers = i == 0 || i == N_MATRICES - 1 ? 1 : c->n_layers;
        bytes += stack_bytes(mat[i], layers);
    }
    size_t norms = (size_t)(2 * c->n_layers + 1) * c->dim; /* attention, FFN, final */
    return bytes + norms * sizeof(float) * (c->norm_bias ? 2 : 1);
}

size_t info_kv_cache_bytes(const Config *c, int context) {
    size_t kv_dim = (size_t)c->n_kv_heads * (c->dim / c->n_heads);
    return 2 * (size_t)c->n_layers * context * kv_dim * sizeof(float);
}

/* Whether every matrix has the dtype of the first. */
static int one_dtype(const Matrix *const mat[N_MATRICES]) {
    for (int i = 1; i < N_MATRICES; i++)
        if (mat[i]->dtype != mat[0]->dtype || mat[i]->layers) return 0;
    return 1;
}

/* The special tokens the description names (their names in text, ids into ids; at most 3 +
 * VOCAB_MAX_END_OF_TURN): SentencePiece's UNK, BOS and EOS; a BPE vocabulary's BOS and EOS when
 * it has them, then each token that ends a turn (vocab.h), named EOT. */
static int special_tokens(const Vocab *v, const char **names, int *ids) {
    if (v->kind == VOCAB_SENTENCEPIECE) {
        const char *sp[3] = {"UNK", "BOS", "EOS"};
        for (int i = 0; i < 3; i++) names[i] = sp[i], ids[i] = i;
        return 3;
    }
    int n = 0;
    if (vocab_bos(v) >= 0) names[n] = "BOS", ids[n++] = vocab_bos(v);
    if (vocab_eos(v) >= 0) names[n] = "EOS", ids[n++] = vocab_eos(v);
    for (int i = 0; i < v->n_end_of_turn; i++) names[n] = "EOT", ids[n++] = v->end_of_turn[i];
    return n;
}

/* The vocabulary's kind, as text (after its size) and as JSON's "kind". */
static const char *kind_text(const Vocab *v) {
    return v->kind == VOCAB_BPE ? "byte-level BPE, tokenizer.ggml.pre "
                                : "SentencePiece BPE in llama2.c's tokenizer layout";
}

static void print_text(const Model *m, const Vocab *v, const InfoRequest *req) {
    const Config *c = &m->config;
    const Matrix *mat[N_MATRICES];
    matrices(m, mat);
    int head_size = c->dim / c->n_heads;
    write_escaped(stdout, req->model_path, 0);
    printf("\n  format        %s\n", m->format);
    printf("  architecture  llama: pre-norm decoder, RoPE attention with grouped kv heads, "
           "SwiGLU feed-forward\n");
    printf("  shape         dim %d, hidden_dim %d, n_layers %d, n_heads %d, n_kv_heads %d, "
           "head_size %d\n",
           c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads, head_size);
    printf("  dtype         ");
    char buf[32];
    if (one_dtype(mat)) {
        printf("%s, every matrix", DTYPES[mat[0]->dtype].name);
    } else {
        for (int i = 0; i < N_MATRICES; i++)
            printf("%s%s %s", i ? ", " : "", matrix_names[i], dtype_text(mat[i], c->n_layers, buf));
    }
    if (mat[0]->dtype == DTYPE_Q8_0 || mat[0]->dtype == DTYPE_Q4_0)
        printf(" (groups of %d)", mat[0]->group_size);
    printf("; norms f32\n");
    printf("  classifier    %s\n",
           c->shared_classifier ? "the token embedding (shared)" : "its own matrix (wcls)");
    printf("  norm          %s, eps %g, %s\n", norm_name(c->trained_norm), c->norm_eps,
           c->norm_bias ? "weight and bias" : "weight, no bias");
    printf("  rope          theta %g, pairs (2i, 2i + 1), %s\n", c->rope_theta,
           m->weights.rope_freqs ? "frequencies divided by the file's rope_freqs (Llama 3)"
                                 : "no scaling");
    printf("  vocabulary    %d pieces: %s%s (", vocab_size(v), kind_text(v),
           v->kind == VOCAB_BPE ? v->bpe.pretok.family->pre : "");
    write_escaped(stdout, req->tokenizer_path, 0);
    printf(")\n  special      ");
    int ids[3 + VOCAB_MAX_END_OF_TURN];
    const char *names[3 + VOCAB_MAX_END_OF_TURN];
    int n = special_tokens(v, names, ids);
    for (int i = 0; i < n; i++) {
        printf("%s %s %d '", i ? "," : "", names[i], ids[i]);
        write_escaped(stdout, vocab_decode(v, -1, ids[i]), 0);
        printf("'");
    }
    printf("\n");
    printf("  seq_len       %d", c->seq_len);
    if (req->context < c->seq_len) printf(" (-c: a context of %d)", req->context);
    size_t weights = info_weight_bytes(m), kv = info_kv_cache_bytes(c, req->context);
    printf("\n  memory        weights %zu bytes (%.2f MiB), kv cache %zu bytes (%.2f MiB) at %d "
           "positions\n",
           weights, weights / 1048576.0, kv, kv / 1048576.0, req->context);
}

static void print_json(const Model *m, const Vocab *v, const InfoRequest *req) {
    const Config *c = &m->config;
    const Matrix *mat[N_MATRICES];
    matrices(m, mat);
    printf("{\n  \"model\": ");
    print_json_string(req->model_path);
    printf(",\n  \"format\": ");
    print_json_string(m->format);
    printf(",\n  \"architecture\": \"llama\",\n");
    printf("  \"dim\": %d, \"hidden_dim\": %d, \"n_layers\": %d, \"n_heads\": %d, "
           "\"n_kv_heads\": %d, \"head_size\": %d, \"vocab_size\": %d, \"seq_len\": %d,\n",
           c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads, c->dim / c->n_heads,
           c->vocab_size, c->seq_len);
    printf("  \"dtypes\": {");
    char buf[32];
    for (int i = 0; i < N_MATRICES; i++)
        printf("%s\"%s\": \"%s\"", i ? ", " : "", matrix_names[i],
               dtype_text(mat[i], c->n_layers, buf));
    printf(", \"norms\": \"f32\"},\n  \"group_size\": %d,\n", mat[0]->group_size);
    printf("  \"shared_classifier\": %s,\n", c->shared_classifier ? "true" : "false");
    printf("  \"norm\": \"%s\", \"norm_eps\": %g, \"norm_bias\": %s,\n", norm_name(c->trained_norm),
           c->norm_eps, c->norm_bias ? "true" : "false");
    printf("  \"rope_theta\": %g, \"rope_scaling\": %s,\n", c->rope_theta,
           m->weights.rope_freqs ? "\"rope_freqs\"" : "null");
    printf("  \"tokenizer\": {\"path\": ");
    print_json_string(req->tokenizer_path);
    printf(", \"kind\": \"%s\", ", v->kind == VOCAB_BPE ? "byte-level-bpe" : "sentencepiece-bpe");
    if (v->kind == VOCAB_BPE) printf("\"pre\": \"%s\", ", v->bpe.pretok.family->pre);
    printf("\"vocab_size\": %d, \"special\": {", vocab_size(v));
    int ids[3 + VOCAB_MAX_END_OF_TURN];
    const char *names[3 + VOCAB_MAX_END_OF_TURN];
    int n = special_tokens(v, names, ids), n_eot = 0;
    for (int i = 0; i < n; i++) { /* "unk", "bos", "eos"; the ends of turn as one list */
        int eot = strcmp(names[i], "EOT") == 0;
        printf("%s", i ? ", " : "");
        char key[4] = {names[i][0] | 0x20, names[i][1] | 0x20, names[i][2] | 0x20}; /* "bos" */
        if (eot && !n_eot++) printf("\"end_of_turn\": [");
        if (!eot) printf("\"%s\": ", key);
        printf("{\"id\": %d, \"piece\": ", ids[i]);
        print_json_string(vocab_decode(v, -1, ids[i]));
        printf("}");
    }
    printf("%s}},\n  \"context\": %d,\n  \"weight_bytes\": %zu,\n  \"kv_cache_bytes\": %zu\n}\n",
           n_eot ? "]" : "", req->context, info_weight_bytes(m),
           info_kv_cache_bytes(c, req->context));
}

void print_info(const Model *m, const Vocab *v, const InfoRequest *req) {
    if (req->json)
        print_json(m, v, req);
    else
        print_text(m, v, req);
}
