/* Reading a checkpoint into a Model: the entry points of load.c (the map, the tensors, packing);
 * format.c knows the layouts, state.h the run state (and the prefill batch's size).
 */
#ifndef LOAD_H
#define LOAD_H

#include <stddef.h>

#include "model.h"
#include "vocab.h"

/* Loads the checkpoint at `path` into m, in four steps:
 *
 * 1. Memory-maps it read-only, tells its layout by its magic (the list atop model.h) and
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
 * 4. Allocates the run state (state.h: 64-byte aligned; the kv cache in 4 KiB pages left
 *    untouched, so that it takes memory as positions are first written, not seq_len positions at
 *    load) and sets the trained norm at every site (model_set_norm; m->forward NULL: the fast
 *    pass).
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

/* The vocabulary the model file at `path` carries, into v: a normllama file's tokenizer section
 * (its remove_extra_whitespaces as the header records it), or a GGUF's tokenizer.ggml.* keys
 * (vocab.h's vocab_from_gguf: byte-level BPE or SentencePiece). Returns 0 (v loaded), 1 when the
 * file carries none (llama2.c's layouts, a normllama file written without one, a GGUF without
 * tokenizer.ggml.tokens: v left alone), or -1 with model_read_config's message or the
 * vocabulary's problem in err. */
int model_read_vocabulary(Vocab *v, const char *path, char *err, size_t errlen);

/* The chat template the model file at `path` names (a GGUF's tokenizer.chat_template, a Jinja
 * string; chat_template.h recognizes it) into *tmpl (malloc'd). Returns 0, 1 when the file names
 * none (*tmpl NULL), or -1 with model_read_config's message or the key's problem (not a string, a
 * NUL byte in it) in err. */
int model_read_chat_template(char **tmpl, const char *path, char *err, size_t errlen);

/* Frees the norms, the packed weights and the run state; safe on an empty or already-freed
 * model. */
void model_free(Model *m);

#endif
