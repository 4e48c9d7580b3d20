/* Reading a checkpoint into a Model, and the run state's size: the entry points of load.c (the
 * map, the tensors, packing) and state.c (the run state); format.c knows the layouts.
 */
#ifndef LOAD_H
#define LOAD_H

#include <stddef.h>

#include "model.h"

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
 * model's size, at most seq_len), to `batch`: the batch's activations (RunState's x to q and xq:
 * batch * (4 dim + 2 hidden_dim + 1) floats and batch * xq_stride int16 values,
 * stride = max(dim, hidden_dim) rounded up to a multiple of 64) are reallocated for `batch`
 * positions, the new buffers before the old ones are freed. Prefill's logits are the same bit for
 * bit at any batch; its speed and memory change. Requires a loaded model. Returns 0 on success; a
 * batch outside 1..seq_len, or out of memory, returns -1, leaves the model as it was (its old
 * batch) and writes a one-line message into err[errlen]. The knob of llama.cpp's -b/--batch-size
 * (positions per decode call), for prefill only. */
int model_set_batch(Model *m, int batch, char *err, size_t errlen);

/* Frees the norms, the packed weights and the run state; safe on an empty or already-freed
 * model. */
void model_free(Model *m);

#endif
