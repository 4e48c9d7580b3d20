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

/* RoPE as rope (model.h) computes it, written plainly as llama2.c's forward() does, but with each
 * angle pos * rope_theta^(-i / head_size) (pair i / 2 of a head, i even), its cosine and sine,
 * and each rotation in double, rounded once to fp32: no table of frequencies (RunState's
 * inv_freq is the fast pass's). q: (n_heads * head_size), k: (kv_dim). */
void rope_ref(const Config *c, float *q, float *k, int pos);

#endif
