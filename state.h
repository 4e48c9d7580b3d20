/* The run state's memory and the pages of the large buffers, shared by load.c and state.c
 * (private to them; model_set_batch, the public part, is in load.h).
 */
#ifndef STATE_H
#define STATE_H

#include <stddef.h>

#include "model.h"

/* bytes of memory (uninitialized) in 2 MiB pages where the OS allows (transparent huge pages in
 * "madvise" mode or "always"), but for its last part short of 2 MiB, or NULL; free() frees it. */
void *huge_pages(size_t bytes);

/* Writes a zero at the start of each 2 MiB of a huge_pages buffer p of `bytes`, the threads taking
 * turns, and into each 4 KiB page of its last part short of 2 MiB. */
void fault_in(char *p, size_t bytes);

/* The run state for a model of config c whose file is file_bytes long (the batch is sized by it):
 * the batch's buffers, attention scores, logits and RoPE's frequencies (set), each written before
 * it is read and so left uninitialized, and the kv cache (4 KiB pages, untouched: it takes
 * memory as positions are first written). Returns 0, or -1 when out of memory, what did fit left
 * for state_free. */
int state_alloc(RunState *s, const Config *c, size_t file_bytes);

/* Frees what state_alloc allocated and zeroes *s; safe on a zeroed or partly allocated state. */
void state_free(RunState *s);

#endif
