/* The model: its configuration, its weights, its run state, and the forward pass of a LLaMA-style
 * decoder written as its equations (model.c). The kernels it calls are panel.h's embedding
 * lookup, matmul.h's products, attention.h's attention and norm.h's norms; reading a file into a
 * Model is load.h's; the plain forward pass beside this one is reference.h's, chosen in its place
 * through Model's forward.
 *
 * model_load (load.h) reads five file layouts, told apart by their first four bytes:
 *   - normllama's own format (magic "NLLM"): docs/FORMAT.md, the one export.py writes;
 *   - GGUF (magic "GGUF", versions 2 and 3), llama.cpp's, of the llama architecture, or of
 *     stablelm as export.py writes our LayerNorm models for llama.cpp (format_gguf.c);
 *   - llama2.c "version 1" (magic "ak42", version 1): fp32, norms first;
 *   - llama2.c "version 2" (magic "ak42", version 2): int8 with one fp32 scale per group;
 *   - llama2.c's legacy layout (no magic: the file starts with dim).
 * docs/FORMAT.md lists the header and tensor order of each. Norm weights and biases are fp32;
 * the matrices are one of dtype.h's dtypes, f32, bf16, f16, q8_0, q4_0, q4_k or q6_k (normllama
 * files the first five; a version 2 file's int8 as q8_0, or dequantized to f32, see model_load; a
 * GGUF's types as dtype.h's GGUF_DTYPES says), copied at load into the panel layout of Matrix
 * (panel.h).
 */
#ifndef MODEL_H
#define MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "attention.h"
#include "matmul.h"
#include "norm.h"
#include "profile.h"

/* The model's shape and hyperparameters, from the file's header. Derived from them and used
 * throughout: head_size = dim / n_heads, the width of one attention head, and kv_dim =
 * n_kv_heads * head_size, the width of one position's keys (or values) in the kv cache. */
typedef struct {
    int dim;        /* residual stream width */
    int hidden_dim; /* SwiGLU inner width */
    int n_layers;
    int n_heads;           /* query heads */
    int n_kv_heads;        /* key/value heads; n_heads / n_kv_heads query heads share each */
    int vocab_size;        /* always positive here; see shared_classifier */
    int seq_len;           /* longest sequence: size of the kv cache */
    int shared_classifier; /* 1: logits use token_embedding as the classifier */
    float norm_eps;        /* eps of every norm; 1e-5 for llama2.c files */
    float rope_theta;      /* RoPE base, 10000 for llama2.c files */
    NormFn trained_norm;   /* the norm the model was trained with; rmsnorm for llama2.c files */
    int norm_bias;         /* 1: the norms carry a bias (beta); Weights' *_norm_bias are set */
} Config;

typedef struct {
    Matrix token_embedding;  /* (vocab_size, dim) */
    const float *attn_norm;  /* (n_layers, dim) weight (gamma) of the pre-attention norm */
    Matrix wq;               /* (n_layers, n_heads * head_size, dim) */
    Matrix wk;               /* (n_layers, kv_dim, dim) */
    Matrix wv;               /* (n_layers, kv_dim, dim) */
    Matrix wo;               /* (n_layers, dim, n_heads * head_size) */
    const float *ffn_norm;   /* (n_layers, dim) weight (gamma) of the pre-FFN norm */
    Matrix w1;               /* (n_layers, hidden_dim, dim) */
    Matrix w2;               /* (n_layers, dim, hidden_dim) */
    Matrix w3;               /* (n_layers, hidden_dim, dim) */
    const float *final_norm; /* (dim) weight (gamma) of the norm before the classifier */
    /* the norms' biases (beta), as their weights, or NULL when the file has none */
    const float *attn_norm_bias;  /* (n_layers, dim) */
    const float *ffn_norm_bias;   /* (n_layers, dim) */
    const float *final_norm_bias; /* (dim) */
    /* each norm site's learned scalar (log eps or alpha: norm_scalar of the trained norm), or
     * NULL when the trained norm learns none */
    const float *attn_norm_scalar;  /* (n_layers) */
    const float *ffn_norm_scalar;   /* (n_layers) */
    const float *final_norm_scalar; /* (1) */
    Matrix wcls;                    /* (vocab_size, dim); token_embedding when shared */
    /* (head_size / 2) divisors of RoPE's frequencies, pair i's angle pos * rope_theta^(-2i /
     * head_size) / rope_freqs[i]: Llama 3's scaling, as a GGUF's rope_freqs.weight holds it
     * (llama.cpp's freq_factors); NULL when the file has none (no scaling) */
    const float *rope_freqs;
} Weights;

/* Activations of up to `batch` positions run together (one in decode, a batch of the prompt in
 * prefill), row b for position pos0 + b; and the kv cache of all positions so far. */
typedef struct {
    int batch;          /* model_load's 64 to 256 by the model's size (at most seq_len), or
                           model_set_batch's */
    float *x;           /* (batch, dim) residual stream */
    float *xb;          /* (batch, dim) normed input of a block; attention output before wo */
    float *xb2;         /* (batch, dim) output of a block before the residual add */
    float *hb;          /* (batch, hidden_dim) gate, then SwiGLU output */
    float *hb2;         /* (batch, hidden_dim) up projection */
    float *q;           /* (batch, n_heads * head_size) */
    float *att;         /* (n_heads, 4, seq_len) attention weights of up to 4 queries */
    float *logits;      /* (vocab_size) model_forward's */
    float *key_cache;   /* (n_layers, seq_len, kv_dim) */
    float *value_cache; /* (n_layers, seq_len, kv_dim) */
    float *inv_freq;    /* (head_size / 2) RoPE frequencies theta^(-2i / head_size), each
                           divided by Weights' rope_freqs[i] when the file has them */
    /* the inputs of a q8_0 or q4_0 matrix product, quantized (matmul.h): (batch, xq.stride) int16
     * values and one scale per input, or in the same bytes q4_0's int8 values and blocks; stride =
     * max(dim, hidden_dim) rounded up to a multiple of 64 */
    QuantizedInputs xq;
} RunState;

typedef struct Model Model;

/* One position's forward pass with model_forward's contract (below), run in place of the fast one:
 * reference_forward (reference.h) is the one. */
typedef float *(*ForwardFn)(Model *m, int token, int pos);

struct Model {
    Config config;
    Weights weights;
    RunState state;
    NormFn norm;        /* applied at every norm site; config.trained_norm after model_load */
    int site_scalars;   /* 1: norm is given each site's learned scalar (Weights' *_norm_scalar)
                           in place of norm_eps (model_set_norm) */
    float *norms;       /* every norm's weight and bias, copied from the file (Weights points in) */
    void *packed;       /* every matrix, in panels (Matrix), in 2 MiB pages where the OS allows
                           (the last part short of 2 MiB in 4 KiB pages) */
    const char *format; /* name of the file layout read, e.g. "normllama v1" */
    Profile *profile;   /* NULL (model_load's choice): no timing, one untaken branch per lap */
    ForwardFn forward;  /* NULL (model_load's): model_forward and model_prefill run model.c's
                           fast pass; else this one, a position at a time (run --reference sets
                           reference_forward) */
    /* what model_load converted rather than read exactly (a GGUF's types, dtype.h): "q4_K, q6_K
     * as q8_0"; "" when nothing */
    char converted[128];
};

/* Runs one token through the model at position `pos` and returns the logits (vocab_size),
 * owned by `m` and overwritten by the next call. Writes this position's keys and values into
 * the kv cache and attends over positions 0..pos, so positions must be fed in order from 0.
 * Requires 0 <= token < vocab_size and 0 <= pos < seq_len (the caller checks).
 * Matches llama2.c's forward(): pre-norm blocks, pairwise RoPE on q and k, grouped kv heads,
 * SwiGLU feed-forward, final norm, classifier; every norm is m->norm with its site's weight,
 * bias and scalar (model_norm_site). With m->profile set, adds each operation class's time to it
 * (every class but OP_SAMPLING). With m->forward set, returns its logits instead (untimed). */
float *model_forward(Model *m, int token, int pos);

/* Runs tokens[0..n) through the model at positions 0..n-1 as batches of m->state.batch
 * positions: each weight matrix is read once per batch and multiplied with all of its positions
 * (matrix-matrix product), attention is causal within the batch and over the earlier ones. Fills
 * the kv cache as n calls of model_forward would, so generation continues with model_forward at
 * position n; every position's logits are the ones model_forward gives (same kernels, same
 * order: equal bit for bit). If `logits` is not NULL it receives them, (n, vocab_size); if NULL
 * the classifier is skipped (a prompt's next tokens are known). Requires 1 <= n <= seq_len and
 * 0 <= tokens[i] < vocab_size (the caller checks). With m->profile set, times the same
 * operation classes as model_forward. With m->forward set, runs it position by position
 * (untimed). */
void model_prefill(Model *m, const int *tokens, int n, float *logits);

/* Rotates each pair (v[2i], v[2i+1]) of every head of the query q (dim = n_heads * head_size)
 * and key k (kv_dim) by the angle pos * inv_freq[i], inv_freq = RunState's (head_size / 2): RoPE
 * (Su et al. 2021, eq. 34) in the interleaved pairing that llama2.c and Meta's Llama reference
 * use. The fast pass's; the plain one has its own, rope_ref (reference.h). */
void rope(const Config *c, const float *inv_freq, float *q, float *k, int pos);

/* Norm site `site` of m, numbered in model_forward's order (2 l: layer l's attention norm,
 * 2 l + 1: its ffn norm, 2 n_layers: the final norm): m->norm with that site's weight, bias (NULL
 * when the file has none) and scalar, the site's learned one (Weights' *_norm_scalar) when
 * m->site_scalars, else norm_eps. Requires 0 <= site <= 2 n_layers (not checked). */
NormCall model_norm_site(const Model *m, int site);

/* Whether m can run norm fn: 0, or -1 with the reason in err[errlen] when fn reads per-site
 * parameters the file does not hold (a learned log eps, DyT's alpha: only a model trained with
 * that norm has them). */
int model_check_norm(const Model *m, NormFn fn, char *err, size_t errlen);

/* Makes fn, which model_check_norm accepts, the norm of every site: m->norm, and
 * m->site_scalars, 1 when fn reads the file's per-site scalars. */
void model_set_norm(Model *m, NormFn fn);

/* When m->norm leaves some of the file's norm parameters unread (its biases; the learned log eps
 * or alpha of the norm it was trained with), writes what into notice[len] as a sentence and
 * returns 1; else returns 0. */
int model_unread_norm_parameters(const Model *m, char *notice, size_t len);

/* Layer l's part of m's kv cache (positions 0..seq_len - 1) and the heads' shape, for
 * attention and attention_ref; att is m's scratch. */
LayerCache model_layer_cache(const Model *m, int l);

#endif
