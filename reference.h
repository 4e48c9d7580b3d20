/* The plain forward pass: the whole decoder for one token in plain scalar C, top to bottom as
 * llama2.c's forward(), over the same weights and run state as model.c's fast pass. It is the
 * oracle the fast pass is tested against (tests/test_reference.c), what `run --reference`
 * generates with (run sets it as the model's forward), and the path to step through in a
 * debugger. It shares no arithmetic with the fast pass: its kernels are the plain ones,
 * matmul_ref, attention_ref, embedding_ref, its norms the plain twins of the model's NormFn
 * (norm_plain), and its RoPE is rope_ref below.
 */
#ifndef REFERENCE_H
#define REFERENCE_H

#include "model.h"

/* Runs `token` through m at position `pos`, as model_forward does (the same contract: positions
 * in order from 0, this position's keys and values written into m's kv cache, the logits
 * (vocab_size) owned by m and overwritten by the next call, requires 0 <= token < vocab_size and
 * 0 <= pos < seq_len), but with plain products, plain attention, plain norms (sums in double),
 * rope_ref and llama2.c's SwiGLU in expf. A norm outside norm.c's table (eval.h's observer, which
 * wraps one) has no plain twin and is applied as it is. Its logits differ from model_forward's by
 * float rounding alone (sums in another order, no FMA, the norms' and RoPE's angles in double)
 * for f32, bf16 and f16 weights, for q8_0 also by the fast path's int16 inputs, and for q4_0 by
 * its int8 inputs in blocks of 32. Untimed. */
float *reference_forward(Model *m, int token, int pos);

/* A step of the plain pass, as reference_forward_observed shows it to an observer (run --trace):
 * the step's vectors as the pass holds them at that point, valid during the call. */
typedef enum {
    STEP_VECTOR,    /* x: the embedding, q, k, v (before RoPE, which keeps their RMS), or the
                       residual stream after a block */
    STEP_NORM,      /* x: a norm's input, y: its output (weight and bias applied) */
    STEP_ATTENTION, /* cache->att: each head's attention weights over positions 0..pos */
    STEP_GATE,      /* x: the feed-forward gate w1 n(x), before SiLU */
    STEP_LOGITS,    /* x: the logits */
} StepKind;

typedef struct {
    StepKind kind;
    const char *name; /* "embedding", "attention norm", "q", ..., "logits" */
    int layer;        /* -1 outside the layers */
    const float *x, *y;
    int n;     /* the length of x (and y) */
    int heads; /* q, k, v: the heads x holds, n / heads values each; 0 otherwise */
    const LayerCache *cache;
    int pos;
} ForwardStep;

typedef struct {
    void (*step)(void *ctx, const ForwardStep *s);
    void *ctx;
} ForwardObserver;

/* reference_forward, each step shown to obs (NULL: none) in the order the pass takes them:
 * embedding; per layer attention norm, q, k, v, attention, the residual after attention, ffn norm,
 * ffn gate, the residual after the feed-forward block; final norm; logits. */
float *reference_forward_observed(Model *m, int token, int pos, const ForwardObserver *obs);

/* RoPE as rope (model.h) computes it, written plainly as llama2.c's forward() does, but with each
 * angle pos * rope_theta^(-i / head_size) / rope_freqs[i / 2] (pair i / 2 of a head, i even;
 * rope_freqs Weights' Llama 3 divisors, NULL for none), its cosine and sine, and each rotation
 * in double, rounded once to fp32: no table of frequencies (RunState's inv_freq is the fast
 * pass's). q: (n_heads * head_size), k: (kv_dim). */
void rope_ref(const Config *c, const float *rope_freqs, float *q, float *k, int pos);

#endif
