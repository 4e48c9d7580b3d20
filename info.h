/* --info: what a model file holds and what running it takes, read from the loaded Model (its
 * Config, its matrices' dtypes, the layout's name) and the tokenizer, so that every layout
 * load.c reads (normllama, llama2.c's, GGUF) is described the same way: format and version,
 * architecture and shape, the matrices' dtypes (each kind's where they differ), the norm and its
 * eps, RoPE, the vocabulary and its special tokens, seq_len, and the bytes of the weights and of
 * the kv cache at full context. As text, or with --json as one JSON object.
 *
 * It leaves loading to load.h and the command line to run.c.
 */
#ifndef INFO_H
#define INFO_H

#include "model.h"
#include "vocab.h"

/* Where the description's facts come from, besides the model. */
typedef struct {
    const char *model_path;
    const char *tokenizer_path;
    int context; /* the positions the kv cache holds: seq_len, or -c's */
    int json;    /* 1: one JSON object */
} InfoRequest;

/* Prints the description of m (loaded) and its vocabulary v on stdout. */
void print_info(const Model *m, const Vocab *v, const InfoRequest *req);

/* Bytes of m's weights in their dtypes, unpadded: each matrix's values (f32 4, bf16 and f16 2,
 * q8_0 1 and a scale per group, q4_0 half a byte and a scale per 32; a scale float32, or fp16
 * where the matrix holds half_scales) and the norms'
 * float32 weights and biases; a shared classifier counted once. */
size_t info_weight_bytes(const Model *m);

/* Bytes of the kv cache holding `context` positions: keys and values, float32, of every layer,
 * 2 * n_layers * context * kv_dim * 4. */
size_t info_kv_cache_bytes(const Config *c, int context);

#endif
