/* The run state (model.h, RunState): memory for the activations and the kv cache, the positions
 * per prefill batch, RoPE's frequency table, and the kv cache's pages, taken as positions advance.
 * Reading the weights (and the 2 MiB pages they live in) is load.c's.
 */
#define _DEFAULT_SOURCE /* MADV_NOHUGEPAGE */
#include "state.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "align.h"

/* The kv cache's memory: 4 KiB pages, none touched here. Each position is written before it is
 * read, and the kernel zeroes a page at its first write, so the cache takes memory as positions
 * advance, as llama2.c's calloc'd cache does, rather than seq_len positions at load (at 110M,
 * 72 MiB where a 384-position run uses 27). Huge pages would hand out 2 MiB of a layer's
 * positions at a time. */
static void *lazy_pages(size_t bytes) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    void *p;
    if (posix_memalign(&p, page, bytes + (bytes == 0)) != 0) return NULL;
    madvise(p, bytes + (bytes == 0), MADV_NOHUGEPAGE);
    return p;
}

/* bytes of memory at a 64-byte boundary (a cache line: whole-vector loads of a row never
 * straddle two lines, which cost prefill a quarter of its speed with calloc's 16-byte
 * alignment), or NULL */
static void *aligned(size_t bytes) {
    return aligned_alloc(64, round_up_64(bytes) + (bytes == 0) * 64);
}

/* The widest input of a product: dim or hidden_dim. */
static int widest_input(const Config *c) {
    return c->dim > c->hidden_dim ? c->dim : c->hidden_dim;
}

/* Bytes per position of the buffers that grow with the batch (alloc_batch's): x, xb, xb2 and q
 * of dim floats, hb and hb2 of hidden_dim, an input of xq. */
static size_t batch_row_bytes(const Config *c) {
    return sizeof(float) * (4 * (size_t)c->dim + 2 * (size_t)c->hidden_dim) +
           quantized_input_bytes(widest_input(c));
}

/* Positions per prefill batch. Each batch reads every weight from memory once, so a longer
 * batch reads less per token (128 positions rather than 64: +5% prefill tokens/s at 110M f32 on
 * two threads); the batch's activations are held to about 1% of the weights file's bytes, for
 * the memory bound (docs/BENCH.md), as a multiple of 64 from 64 to 256, and no more than seq_len.
 */
static int batch_positions(const Config *c, size_t file_bytes) {
    size_t batch = file_bytes / 100 / batch_row_bytes(c) / 64 * 64;
    batch = batch < 64 ? 64 : batch > 256 ? 256 : batch;
    return c->seq_len < (int)batch ? c->seq_len : (int)batch;
}

/* The buffers that grow with the batch (RunState's x to q and xq) for `batch`
 * positions, left uninitialized: every forward pass writes a position's rows before it reads
 * them, and pages never written stay out of resident memory, so a short prompt and decode touch
 * only the first rows (decode at 15M: 12 KiB of the batch's 768 KiB, peak 24.5 MiB rather than
 * 25.3 for q8_0). Returns -1 when out of memory; what did fit is left for free_batch. */
static int alloc_batch(RunState *s, const Config *c, int batch) {
    size_t rows = batch;
    s->batch = batch;
    s->x = aligned(rows * c->dim * sizeof(float));
    s->xb = aligned(rows * c->dim * sizeof(float));
    s->xb2 = aligned(rows * c->dim * sizeof(float));
    s->hb = aligned(rows * c->hidden_dim * sizeof(float));
    s->hb2 = aligned(rows * c->hidden_dim * sizeof(float));
    s->q = aligned(rows * c->dim * sizeof(float));
    /* q4_0's inputs share the int16 values' memory, so the batch keeps its positions (counting
     * both had halved 110M f32's batch to 64) */
    int xq = quantized_inputs_alloc(&s->xq, batch, widest_input(c));
    return !s->x || !s->xb || !s->xb2 || !s->hb || !s->hb2 || !s->q || xq != 0 ? -1 : 0;
}

static void free_batch(RunState *s) {
    free(s->x);
    free(s->xb);
    free(s->xb2);
    free(s->hb);
    free(s->hb2);
    free(s->q);
    quantized_inputs_free(&s->xq);
}

void state_set_rope(RunState *s, const Config *c, const float *rope_freqs) {
    int head_size = c->dim / c->n_heads;
    for (int i = 0; i < head_size / 2; i++) {
        s->inv_freq[i] = 1.0f / powf(c->rope_theta, (float)(2 * i) / (float)head_size);
        if (rope_freqs) s->inv_freq[i] /= rope_freqs[i];
    }
}

int state_alloc(RunState *s, const Config *c, const float *rope_freqs, size_t file_bytes) {
    size_t head_size = c->dim / c->n_heads;
    size_t kv_dim = c->n_kv_heads * head_size;
    size_t cache = (size_t)c->n_layers * c->seq_len * kv_dim;
    if (alloc_batch(s, c, batch_positions(c, file_bytes)) != 0) return -1;
    s->att = aligned((size_t)c->n_heads * 4 * c->seq_len * sizeof(float));
    s->logits = aligned(c->vocab_size * sizeof(float));
    s->key_cache = lazy_pages(cache * sizeof(float));
    s->value_cache = lazy_pages(cache * sizeof(float));
    s->inv_freq = aligned((head_size / 2) * sizeof(float));
    if (!s->att || !s->logits || !s->key_cache || !s->value_cache || !s->inv_freq) return -1;
    state_set_rope(s, c, rope_freqs);
    return 0;
}

void state_free(RunState *s) {
    free_batch(s);
    free(s->att);
    free(s->logits);
    free(s->key_cache);
    free(s->value_cache);
    free(s->inv_freq);
    memset(s, 0, sizeof(*s));
}

int model_set_batch(Model *m, int batch, char *err, size_t errlen) {
    if (batch < 1 || batch > m->config.seq_len) {
        snprintf(err, errlen, "batch %d is not in 1..%d (the model's seq_len)", batch,
                 m->config.seq_len);
        return -1;
    }
    /* the new buffers first, so that the model keeps its batch when they do not fit */
    RunState fresh = m->state;
    if (alloc_batch(&fresh, &m->config, batch) != 0) {
        free_batch(&fresh);
        snprintf(err, errlen, "out of memory for the activations of a batch of %d positions",
                 batch);
        return -1;
    }
    free_batch(&m->state);
    m->state = fresh;
    return 0;
}
