/* The plain forward pass: the whole decoder for one token in plain scalar C, top to bottom as
 * llama2.c's forward(), over the same weights and run state as model.c's fast pass. It is the
 * oracle the fast pass is tested against (tests/test_reference.c), what `run --reference`
 * generates with, and the path to step through in a debugger. Its kernels are the plain ones,
 * matmul_ref, attention_ref, embedding_ref; its norms are the model's NormFn, as the fast pass's.
 */
#ifndef REFERENCE_H
#define REFERENCE_H

#include "model.h"

/* Runs `token` through m at position `pos`, as model_forward does (the same contract: positions
 * in order from 0, this position's keys and values written into m's kv cache, the logits
 * (vocab_size) owned by m and overwritten by the next call, requires 0 <= token < vocab_size and
 * 0 <= pos < seq_len), but with plain products, plain attention and llama2.c's SwiGLU in expf.
 * Its logits differ from model_forward's by float rounding alone (sums in another order, no FMA)
 * for f32, bf16 and f16 weights, for q8_0 also by the fast path's int16 inputs, and for q4_0 by
 * its int8 inputs in blocks of 32. Untimed. */
float *reference_forward(Model *m, int token, int pos);

#endif
