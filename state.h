/* The run state's memory (model.h, RunState): its allocation for load.c, and the prefill batch's
 * size, which run can change.
 */
#ifndef STATE_H
#define STATE_H

#include <stddef.h>

#include "model.h"

/* The run state for a model of config c whose file is file_bytes long (the batch is sized by it):
 * the batch's buffers, attention scores, logits and RoPE's frequencies (set, divided by
 * rope_freqs, Weights', when not NULL), each written before
 * it is read and so left uninitialized, and the kv cache (4 KiB pages, untouched: it takes
 * memory as positions are first written). Returns 0, or -1 when out of memory, what did fit left
 * for state_free. */
int state_alloc(RunState *s, const Config *c, const float *rope_freqs, size_t file_bytes);

/* Sets s->inv_freq[i] = rope_theta^(-2i / head_size) / rope_freqs[i], the angle per position by
 * which RoPE rotates pair i of every head (model.h's rope); without rope_freqs (NULL) the divisor
 * is 1. state_alloc does it. */
void state_set_rope(RunState *s, const Config *c, const float *rope_freqs);

/* Frees what state_alloc allocated and zeroes *s; safe on a zeroed or partly allocated state. */
void state_free(RunState *s);

/* Sets the positions per prefill batch, m->state.batch (model_load picks 64 to 256 by the
 * model's size, at most seq_len), to `batch`: the batch's activations (RunState's x to q and xq:
 * batch * (4 dim + 2 hidden_dim + 1) floats and batch * xq_stride int16 values,
 * stride = max(dim, hidden_dim) rounded up to a multiple of 64) are reallocated for `batch`
 * positions, the new buffers before the old ones are freed. Prefill's logits are the same bit for
 * bit at any batch; its speed and memory change. Requires a loaded model. Returns 0 on success; a
 * batch outside 1..seq_len, or out of memory, returns -1, leaves the model as it was (its old
 * batch) and writes a one-line message into err[errlen]. The knob of llama.cpp's -b/--batch-size
 * (positions per decode call), for prefill only. */
int model_set_batch(Model *m, int batch, char *err, size_t errlen);

#endif
