/* The model: configuration, weights, run state and the forward pass of a LLaMA-style decoder.
 *
 * model_load reads four file layouts, told apart by their first four bytes:
 *   - normllama's own format (magic "NLLM"): docs/FORMAT.md, the one export.py writes;
 *   - llama2.c "version 1" (magic "ak42", version 1): fp32, norms first;
 *   - llama2.c "version 2" (magic "ak42", version 2): int8 with one fp32 scale per group;
 *   - llama2.c's legacy layout (no magic: the file starts with dim).
 * docs/FORMAT.md lists the header and tensor order of each. Norm weights and biases are fp32;
 * the matrices are f32, bf16 or q8_0 (normllama files; a version 2 file's int8 as q8_0, or
 * dequantized to f32, see model_load), copied at load into the panel layout of Matrix.
 * A matrix (d, n) maps an n-vector to a d-vector: out[i] = sum_j w(i, j) * x[j].
 */
#ifndef MODEL_H
#define MODEL_H

#include <stddef.h>
#include <stdint.h>

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

/* Element type of the weight matrices in a file (the header's dtype code); norms stay f32. */
typedef enum {
    DTYPE_F32 = 0,  /* float32 */
    DTYPE_BF16 = 1, /* bfloat16: the upper 16 bits of a float32 */
    DTYPE_Q8_0 = 2, /* int8 with one float32 scale per group of group_size values of a row */
} DType;

/* A weight matrix of every layer, stacked: n_layers matrices (rows, cols) (one matrix for
 * token_embedding and wcls), as model_load repacks the file's row-major values for the matrix
 * kernels. Each layer's rows go in n_panels = ceil(rows / panel_rows) panels of panel_rows rows
 * (the SIMD width: 16 with AVX-512, 8 with AVX2, 1 in the portable build), the last padded with
 * zero rows; panel p of layer l is the panel_bytes from data + (l * n_panels + p) * panel_bytes.
 * Within a panel one column's values for all its rows are adjacent, so that one vector load gives
 * a column (row r in lane r % panel_rows):
 *   f32, bf16: value (r, j) is element j * panel_rows + r % panel_rows;
 *   q8_0: group after group of group_size columns from column 0 (the last shorter when cols is not
 *     a multiple): the group's panel_rows float32 scales, then its int8 values in column pairs,
 *     value (r, start + i) at byte (i / 2) * 2 * panel_rows + (r % panel_rows) * 2 + i % 2 after
 *     the scales; a group of odd length ends with a zero column. The value is int8 * scale. */
typedef struct {
    DType dtype;
    const void *data; /* the panels */
    int rows, cols;   /* of one layer's matrix */
    int group_size;   /* q8_0 only */
    int panel_rows, n_panels;
    size_t panel_bytes;
} Matrix;

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
    Matrix wcls;                  /* (vocab_size, dim); token_embedding when shared */
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
    float *inv_freq;    /* (head_size / 2) RoPE frequencies theta^(-2i / head_size) */
    /* the inputs of a q8_0 matrix product, quantized: (batch, xq_stride) int16 values, zero
     * from each input's length to the next multiple of 64, and one scale per input */
    int16_t *xq;
    float *xq_scale;
    int xq_stride; /* max(dim, hidden_dim) rounded up to a multiple of 64 */
} RunState;

typedef struct {
    Config config;
    Weights weights;
    RunState state;
    NormFn norm;        /* applied at every norm site; config.trained_norm after model_load */
    float *norms;       /* every norm's weight and bias, copied from the file (Weights points in) */
    void *packed;       /* every matrix, in panels (Matrix), in 2 MiB pages where the OS allows
                           (the last part short of 2 MiB in 4 KiB pages) */
    const char *format; /* name of the file layout read, e.g. "normllama v1" */
    Profile *profile;   /* NULL (model_load's choice): no timing, one untaken branch per lap */
} Model;

/* Loads the checkpoint at `path` into m, in four steps:
 *
 * 1. Memory-maps it read-only, tells its layout by its magic (see the top of this file) and
 *    checks its header against itself and the whole tensor layout against the file size before
 *    reading any tensor.
 * 2. Copies the norms' weights and biases out of the map, and every matrix into panels (Matrix)
 *    in one allocation, asked to be backed by 2 MiB pages but for its last part short of 2 MiB
 *    (the kernels' loads then miss the TLB far less than through the map's 4 KiB pages). The
 *    map's pages are given back as they are copied, so that peak memory holds the weights once,
 *    and the map is gone once all is copied: the file is not read again, and may change while
 *    the model runs.
 * 3. llama2.c version 2 matrices (w[i] = q[i] * scale[i / group_size] over each layer's flattened
 *    tensor, as llama2.c's export.py quantized them) are packed from the file's per-layer pieces
 *    as q8_0 with the file's group size when their rows hold whole groups and that size is 32 or
 *    64 (the same values and scales, the q8_0 kernels); otherwise (groups straddling rows, which
 *    q8_0 cannot express: stories260K's w2) they are first dequantized to f32, and held twice at
 *    4 bytes a weight while they are packed.
 * 4. Allocates the run state (64-byte aligned; the kv cache in 2 MiB pages as the weights and
 *    resident from the start: memory grows with the header's seq_len) and sets m->norm to the
 *    trained norm.
 *
 * Returns 0 on success. On failure (missing, unreadable, empty or truncated file; unknown version
 * or weight dtype; q8_0 group_size other than 32 or 64, a group_size with another dtype;
 * impossible header such as non-positive sizes, dim % n_heads != 0, n_heads % n_kv_heads != 0,
 * odd head_size, a flag other than 0/1, eps outside (0, 1) or RoPE base outside (1, 1e12),
 * alignment not a power of two in 4..4096; file size other than the header implies; out of
 * memory) returns -1, leaves `m` empty and writes a one-line message naming the file and the
 * problem into err[errlen]. */
int model_load(Model *m, const char *path, char *err, size_t errlen);

/* model_load's step 1 alone: maps the checkpoint at `path`, reads its header into *c and checks
 * it and the layout against the file size, then unmaps it; no weight is read or copied, so it
 * takes microseconds where model_load takes seconds for a large model (run checks the tokenizer,
 * the prompt and the --ppl text against the header, and --tokenize runs, before the weights are
 * loaded). Returns 0 on success; on failure returns -1, leaves *c alone and writes the one-line
 * message model_load would give into err[errlen]. */
int model_read_config(Config *c, const char *path, char *err, size_t errlen);

/* Sets the positions per prefill batch, m->state.batch (model_load picks 64 to 256 by the
 * model's size, at most seq_len), to `batch`: the batch's activations (RunState's x to q, xq and
 * xq_scale: batch * (4 dim + 2 hidden_dim + 1) floats and batch * xq_stride int16 values,
 * xq_stride = max(dim, hidden_dim) rounded up to a multiple of 64) are reallocated for `batch`
 * positions, the new buffers before the old ones are freed. Prefill's logits are the same bit for
 * bit at any batch; its speed and memory change. Requires a loaded model. Returns 0 on success; a
 * batch outside 1..seq_len, or out of memory, returns -1, leaves the model as it was (its old
 * batch) and writes a one-line message into err[errlen]. The knob of llama.cpp's -b/--batch-size
 * (positions per decode call), for prefill only. */
int model_set_batch(Model *m, int batch, char *err, size_t errlen);

/* Frees the norms, the packed weights and the run state; safe on an empty or already-freed
 * model. */
void model_free(Model *m);

/* The token embedding lookup, as llama2.c's forward() starts: writes row `token` of
 * token_embedding (vocab_size, dim) into out (dim floats), the values the file holds (bf16
 * widened; q8_0 as int8 * its group's scale), read from the packed panels. Requires
 * 0 <= token < vocab_size (the caller checks; nothing is checked here). */
void model_embedding(const Model *m, int token, float *out);

/* Runs one token through the model at position `pos` and returns the logits (vocab_size),
 * owned by `m` and overwritten by the next call. Writes this position's keys and values into
 * the kv cache and attends over positions 0..pos, so positions must be fed in order from 0.
 * Requires 0 <= token < vocab_size and 0 <= pos < seq_len (the caller checks).
 * Matches llama2.c's forward(): pre-norm blocks, pairwise RoPE on q and k, grouped kv heads,
 * SwiGLU feed-forward, final norm, classifier; every norm is m->norm, given the norm biases
 * (NULL when the file has none; rmsnorm ignores them). With m->profile set, adds each operation
 * class's time to it (every class but OP_SAMPLING). */
float *model_forward(Model *m, int token, int pos);

/* Runs tokens[0..n) through the model at positions 0..n-1 as batches of m->state.batch
 * positions: each weight matrix is read once per batch and multiplied with all of its positions
 * (matrix-matrix product), attention is causal within the batch and over the earlier ones. Fills
 * the kv cache as n calls of model_forward would, so generation continues with model_forward at
 * position n; every position's logits are the ones model_forward gives (same kernels, same
 * order: equal bit for bit). If `logits` is not NULL it receives them, (n, vocab_size); if NULL
 * the classifier is skipped (a prompt's next tokens are known). Requires 1 <= n <= seq_len and
 * 0 <= tokens[i] < vocab_size (the caller checks). With m->profile set, times the same
 * operation classes as model_forward. */
void model_prefill(Model *m, const int *tokens, int n, float *logits);

/* In-place softmax over x (n >= 1): x[i] = exp(x[i] - max) / sum_j exp(x[j] - max), the max
 * subtracted so that no exp overflows, as llama2.c's softmax, which the attention weights and the
 * sampler both use; exp is simd.h's vec_exp (within 1 ulp of expf; expf itself in the portable
 * build) and the sum goes in vector lanes, so that the weights may differ from llama2.c's in the
 * last bit. A NaN in x makes every x[i] NaN. */
void softmax(float *x, int n);

#endif
