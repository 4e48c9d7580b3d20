/* The products over panels (matmul.h), top down from matmul: the inputs quantized, the thread
 * split, each dtype's tiles and their shapes, and the SIMD tiles (f32, bf16 and f16 as floats; q8_0
 * and q4_0 by integer sums); then the plain product, matmul_ref. The panel layout and its packing
 * are panel.c's, the input quantizers quantize.c's.
 */
#include "matmul.h"

#include <math.h>
#include <omp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kquant.h"
#include "q4_dot.h"
#include "q4_unpack.h"
#include "simd.h"

/* Matrix-vector and matrix-matrix products share one kernel: a tile of np panels (Matrix:
 * panel_rows rows each, one column of them per vector load) times nb input vectors, with one
 * vector accumulator per (panel, input) pair, its lanes the panel's rows. For each column j, each
 * panel's column is loaded once and each input's value x[j] broadcast once, then np * nb
 * multiply-adds: an outer product, as in the micro-kernels of GotoBLAS (Goto and van de Geijn
 * 2008). Each output is one chain of multiply-adds over j in order, whatever the tile: decode
 * (one input), prefill (a batch) and every tile shape give the same bits. Decode reads four
 * panels at a time, a quarter of a run apart, four long sequential streams for the prefetchers
 * (decode_quarters); prefill takes two panels times
 * TILE_INPUTS inputs, the panels staying in L1 and L2 while every input of the batch passes
 * them. */
enum {
    BLOCK_PANELS = 4, /* panels per unit of work among the threads; decode's tile */
    DECODE_RUN = 128, /* panels decode_quarters cuts into quarters at a time */
    /* f32 and bf16 prefill tiles: 2 x 8 accumulators of AVX-512's 32 vector registers, 2 x 6 of
     * AVX2's 16 (2 x 8 spilled: 283 -> 394 tokens/s, 110M on one thread) */
    TILE_INPUTS = VEC_WIDTH == 8 ? 6 : 8,
    TILE_INPUTS_Q8 = 4, /* q8_0's and q4_0's: 2 x 4, each with an integer sum besides */
    MAX_TILE_INPUTS = 8,
    /* a prefill float tile asks for a line of the next panels every AHEAD_COLUMNS columns
     * (ahead_share): 4 covers them from a batch of 64 on (f32, tiles of 8); 8 had left half of
     * them to batch 64 (110M f32 products, one thread: 4 gave 136 GFLOP/s, 8 gave 119); with
     * AVX-512 also the columns of one unrolled step of those tiles (float_tile) */
    AHEAD_COLUMNS = 4,
    /* q8_0's and q4_0's a line every 16 (2 and 4 a group): their panels hold about a quarter and
     * an eighth of f32's bytes, among twice as many tiles (of 4) */
    AHEAD_COLUMNS_Q8 = 16,
    /* f16 and bf16 prefill widens its panels to f32 this many columns at a time, on the stack
     * (widened_pair): two panels' 64 KiB with AVX-512, 32 KiB with AVX2 */
    WIDE_COLUMNS = 512,
    /* and q4_0's and q4_k's unpack this many (UNPACKED_BYTES, 80 KiB with AVX-512): build/gemm
     * q4_0 batch 128, one thread, 3 alternating rounds against the tiles unpacking their codes: 512
     * columns 1.06x at 110M and 1.1B, 1024 1.10x, 2048 1.11-1.12x, 4096 1.11x (fewer chunks, fewer
     * sums carried through the outputs) */
    UNPACK_COLUMNS = 2048,
    UNPACKED_BYTES = 2 * (UNPACK_COLUMNS * PANEL_ROWS + UNPACK_COLUMNS / 32 * Q4_UNPACKED_HEAD),
};
_Static_assert((int)UNPACKED_BYTES >= 2 * WIDE_COLUMNS * PANEL_ROWS * (int)sizeof(float) &&
                   (int)UNPACKED_BYTES >=
                       2 * PANEL_ROWS * UNPACK_COLUMNS / 256 * (int)KQUANT_Q4K_UNPACKED_BYTES,
               "widened_pair's chunk holds f16's, bf16's and q4_k's too");
_Static_assert((int)TILE_INPUTS_Q8 <= (int)Q4_DOT_INPUTS, "q4_group's inputs fit q4_dots");

/* Where a tile writes: input b's outputs go from out + b * stride; with `add` (the f32, q4_0 and
 * q4_k tiles') its sums start from the outputs there, a widened chunk's after the first
 * (widened_pair). */
typedef struct {
    float *out;
    size_t stride;
    int add;
} Output;

/* A tile's weights: panels of w from `panel` on, `spacing` panels apart (1 but in decode's
 * quarters, decode_quarters), rows from row0 (panel r's from row0 + r * spacing * PANEL_ROWS); in
 * prefill, `ahead`: this tile's share of the panels after its own, which it asks into L2 while it
 * runs (ahead_share). For q4_0 and q4_k, `unpacked`: the panels are a chunk widened_pair unpacked,
 * their codes a byte each (unpack_q4, kquant.h's kquant_unpack_q4_k); q4_0's less 8, signed. */
typedef struct {
    const Matrix *w;
    const char *panel;
    int row0;
    const char *ahead;
    int spacing, unpacked;
} Panels;

/* The inputs of a matrix product: x (rows of x_stride = w->cols floats), and the same quantized:
 * for q8_0 weights by quantize_input (rows of xq_stride int16, one scale each), for q4_0 by
 * quantize_input_blocks (rows of xq_stride int8, a scale and a sum per block of 32; for its
 * unpacked tiles x8_offset, the same + 128, unsigned: offset_input_bytes). */
typedef struct {
    const float *x;
    const int16_t *xq;
    const float *xq_scale;
    const int8_t *x8;
    const uint8_t *x8_offset;
    const float *x8_scale;
    const int32_t *x8_sum;
    size_t xq_stride, x_stride;
} Inputs;

/* One call of a dtype's tiles (DTypeInfo's tiles): np panels of p times the inputs from `in` on,
 * `inputs` of them left in the batch, into o. */
struct Tile {
    Output o;
    Inputs in;
    Panels p;
    int np, inputs;
};

/* One matmul call as its threads share it: product k has panels first[k] .. first[k + 1] - 1. */
typedef struct {
    const Product *products;
    int n;
    int first[4];
    Inputs in;
    int batch, layer;
} Call;

/* The form of a q8_0 or q4_0 matrix's groups the tile is made for: its group_size and
 * half_scales, and for q4_0 whether its codes are unpacked (Panels'), constants. */
typedef struct {
    int size, half_scales, unpacked;
} GroupForm;

/* Where a q8_0 or q4_0 tile reads: at[r], the group of panel r it is at (its scales, then its
 * values); the scales fp16 or float32 (Matrix's half_scales), q4_0's codes unpacked or not
 * (GroupForm's), constants once inlined. */
typedef struct {
    const char *at[BLOCK_PANELS];
    int half_scales, unpacked;
} Groups;

/* matmul's helpers, in the order they follow it, so that the file reads from matmul down */
static int run_start(int n, int t, int threads);
static Inputs inputs_of(const float *x, int cols, const QuantizedInputs *xq);
static int widened_batch(DType dtype, int batch);
static void quantize_row(const QuantizedInputs *xq, DType dtype, const float *x, int b, int cols,
                         int unpacked);
static void matmul_panels(const Call *call, int from, int to);
static const char *panel_at(const Matrix *m, int layer, int p);
static int decode_quarters(Output o, Inputs in, const Matrix *m, int layer, int p, int end);
static void panel_block(Output o, Inputs in, int batch, Panels p, int np);
static void widened_pair(Output o, Inputs in, int batch, Panels at, int np);
static void widen(float *wide, Panels p, int np, int from, int columns);
static Inputs inputs_from(Inputs in, int b);
static const char *ahead_share(Panels at, int np, int b, int from);
static ALWAYS_INLINE int tiles(const Tile *t, DType d, int widest);
static ALWAYS_INLINE void tile_nb(const Tile *t, int nb, int np, DType d, int widest);
static ALWAYS_INLINE void tile(const Tile *t, int nb, int np, DType d);
static ALWAYS_INLINE void float_tile(Output o, Inputs in, int nb, Panels p, int np, DType dtype);
static ALWAYS_INLINE void load_columns(vecf column[BLOCK_PANELS], const char *const panel[], int j,
                                       int np, DType dtype);
static ALWAYS_INLINE void multiply_column(vecf acc[BLOCK_PANELS][MAX_TILE_INPUTS],
                                          const vecf column[BLOCK_PANELS], Inputs in, int j, int nb,
                                          int np);
static ALWAYS_INLINE vecf panel_column(const char *panel, int j, DType dtype);
static ALWAYS_INLINE void decode_prefetch(const char *const at[], int bytes);
static ALWAYS_INLINE void ahead_prefetch(const char *ahead, int j, int every);
static ALWAYS_INLINE void grouped_tile(Output o, Inputs in, int nb, Panels p, int np,
                                       GroupForm form);
static Inputs inputs_at_column(Inputs in, int start);
static ALWAYS_INLINE vecf group_scales(const Groups *g, int r);
static ALWAYS_INLINE void q8_group(vecf acc[BLOCK_PANELS][MAX_TILE_INPUTS], Groups *g, Inputs in,
                                   int nb, int np, int columns);
static ALWAYS_INLINE void q4_group(vecf acc[BLOCK_PANELS][MAX_TILE_INPUTS], Groups *g, Inputs in,
                                   int nb, int np, int columns);
static ALWAYS_INLINE void start_tile(Output o, vecf acc[BLOCK_PANELS][MAX_TILE_INPUTS], int nb,
                                     int np, Panels p);
static ALWAYS_INLINE void zero_sums(veci sums[BLOCK_PANELS][MAX_TILE_INPUTS], int nb, int np);
static ALWAYS_INLINE void store_tile(Output o, vecf acc[BLOCK_PANELS][MAX_TILE_INPUTS],
                                     const float *scale, int nb, int np, Panels p);

/* ----------------------------------------------------------------------------
 * matmul: the inputs, the threads, the tiles */

void matmul(const Product *p, int n, const float *x, int batch, int layer,
            const QuantizedInputs *xq) {
    int cols = p[0].w->cols;
    DType dtype = p[0].w->dtype;
    Call call = {
        .products = p, .n = n, .in = inputs_of(x, cols, xq), .batch = batch, .layer = layer};
    int unpacked = widened_batch(dtype, batch);
    size_t work = 0;
    for (int k = 0; k < n; k++) {
        call.first[k + 1] = call.first[k] + p[k].w->n_panels;
        work += (size_t)p[k].w->rows * cols * batch;
    }
    if (batch == 1 || work < PARALLEL_MIN_WORK)
        for (int b = 0; b < batch; b++) quantize_row(xq, dtype, x, b, cols, unpacked);
    if (work < PARALLEL_MIN_WORK) { /* a region costs ~1.5 us even when it runs on one thread */
        matmul_panels(&call, 0, call.first[n]);
        return;
    }
    /* Decode: each thread its contiguous run, the panels in order for its prefetches. Prefill:
     * each thread takes its run's blocks from the front, then the blocks of the others' runs not
     * yet taken, so that a thread slowed by the machine is helped at the end rather than waited
     * for (two threads, 256-token prompts, medians of 7 alternating rounds: 110M f16 1.025x,
     * q8_0 1.022x, 15M q4_0 1.036x, one thread level; decode taking blocks so ran 0.82x to
     * 0.99x). */
    if (batch == 1) {
#pragma omp parallel
        {
            int thread = omp_get_thread_num(), threads = omp_get_num_threads();
            matmul_panels(&call, run_start(call.first[n], thread, threads),
                          run_start(call.first[n], thread + 1, threads));
        }
        return;
    }
    atomic_int next[omp_get_max_threads()]; /* each run's first panel not yet taken */
#pragma omp parallel
    {
        int thread = omp_get_thread_num(), threads = omp_get_num_threads();
        atomic_init(&next[thread], run_start(call.first[n], thread, threads));
        /* the batch's rows quantized among the threads (serial, they were a tenth of q8_0's and a
         * seventh of q4_0's prefill products on one thread); the loop's barrier also waits for
         * every run's start */
#pragma omp for schedule(static)
        for (int b = 0; b < batch; b++) quantize_row(xq, dtype, x, b, cols, unpacked);
        for (int k = 0; k < threads; k++) {
            int run = (thread + k) % threads, end = run_start(call.first[n], run + 1, threads);
            for (int p; (p = atomic_fetch_add(&next[run], BLOCK_PANELS)) < end;)
                matmul_panels(&call, p, p + BLOCK_PANELS < end ? p + BLOCK_PANELS : end);
        }
    }
}

/* The first panel of thread t's run among `threads` equal runs of n panels. */
static int run_start(int n, int t, int threads) {
    return (int)((long long)n * t / threads);
}

/* The inputs x (rows of cols floats) and their quantized forms in xq, as the tiles read them. */
static Inputs inputs_of(const float *x, int cols, const QuantizedInputs *xq) {
    return (Inputs){.x = x,
                    .xq = xq->values,
                    .xq_scale = xq->scales,
                    .x8 = xq->bytes,
                    .x8_offset = xq->offset_bytes,
                    .x8_scale = xq->block_scales,
                    .x8_sum = xq->block_sums,
                    .xq_stride = xq->stride,
                    .x_stride = cols};
}

/* Whether a batch of `batch` inputs goes over dtype's panels made over once a batch
 * (widened_pair): f16 and bf16 widened, q4_0's and q4_k's codes unpacked, from two widest tiles
 * on. */
static int widened_batch(DType dtype, int batch) {
    return ((dtype == DTYPE_F16 || dtype == DTYPE_BF16) && batch >= 2 * TILE_INPUTS) ||
           (dtype == DTYPE_Q4_0 && batch >= 2 * TILE_INPUTS_Q8) ||
           (dtype == DTYPE_Q4_K && batch >= 2 * KQUANT_TILE_INPUTS);
}

/* Row b of the batch x (rows of cols) as the tiles of `dtype` read it: q8_0's quantized by
 * quantize_input, q4_0's by quantize_input_blocks (and, for panels `unpacked`, offset), into xq's
 * row b; the other dtypes read x itself. */
static void quantize_row(const QuantizedInputs *xq, DType dtype, const float *x, int b, int cols,
                         int unpacked) {
    size_t at = (size_t)b * xq->stride;
    const float *row = x + (size_t)b * cols;
    if (dtype == DTYPE_Q8_0)
        quantize_input(xq->values + at, &xq->scales[b], row, cols);
    else if (dtype == DTYPE_Q4_0 || dtype_kquant(dtype))
        quantize_input_blocks(xq->bytes + at, xq->block_scales + at / 32, xq->block_sums + at / 32,
                              row, cols);
    if (dtype == DTYPE_Q4_0 && unpacked)
        offset_input_bytes(xq->offset_bytes + at, xq->bytes + at, (cols + 31) / 32 * 32);
}

/* The call's panels from .. to - 1, up to BLOCK_PANELS at a time. */
static void matmul_panels(const Call *call, int from, int to) {
    for (int k = 0; k < call->n; k++) {
        int layer = call->layer;
        const Matrix *m = matrix_layer(call->products[k].w, &layer);
        const int *first = call->first;
        int p = (from > first[k] ? from : first[k]) - first[k];
        int end = (to < first[k + 1] ? to : first[k + 1]) - first[k];
        Output o = {call->products[k].out, (size_t)m->rows, 0};
        if (call->batch == 1) p = decode_quarters(o, call->in, m, layer, p, end);
        for (; p < end; p += BLOCK_PANELS) {
            int np = end - p < BLOCK_PANELS ? end - p : BLOCK_PANELS;
            panel_block(o, call->in, call->batch,
                        (Panels){m, panel_at(m, layer, p), p * PANEL_ROWS, NULL, 1, 0}, np);
        }
    }
}

/* Panel p of layer `layer` of m. */
static const char *panel_at(const Matrix *m, int layer, int p) {
    return (const char *)m->data + ((size_t)layer * m->n_panels + p) * m->panel_bytes;
}

/* Decode over panels p .. end - 1 of layer `layer` of m, in runs of up to DECODE_RUN panels, each
 * cut into BLOCK_PANELS quarters: tile i takes panel i of each quarter, so that the tile's four
 * loads of a column come from four long sequential streams, which the hardware prefetchers
 * follow, where four adjacent panels are four streams of one panel each, begun anew every tile.
 * Returns the first panel left over (fewer than BLOCK_PANELS, for the tiles of adjacent panels).
 * Each output's sum is the tile's as before: the same bits. build/stream, one thread, medians of 3
 * alternating rounds against adjacent panels with prefetches a block ahead (docs/BENCH.md,
 * 2026-12-03): q4_0 at 110M's w1 (2048, 768) 29.1 against 19.1 GB/s (f32 28.5), q8_0 28.4
 * against 25.6; at 1.1B's w1 (5632, 2048) q4_0 32.6 against 28.8, q8_0 29.3 against 29.2, where
 * quarters of a whole run of 704 panels had read q8_0 at 0.89x (runs of 32 or 64 panels as fast
 * as 128); with the streams, prefetches a block ahead gained nothing more for the float, q8_0 and
 * q4_0 tiles, and were dropped. */
static int decode_quarters(Output o, Inputs in, const Matrix *m, int layer, int p, int end) {
    while (end - p >= BLOCK_PANELS) {
        int quarter = (end - p < DECODE_RUN ? end - p : DECODE_RUN) / BLOCK_PANELS;
        for (int i = 0; i < quarter; i++)
            panel_block(
                o, in, 1,
                (Panels){m, panel_at(m, layer, p + i), (p + i) * PANEL_ROWS, NULL, quarter, 0},
                BLOCK_PANELS);
        p += quarter * BLOCK_PANELS;
    }
    return p;
}

/* np (<= BLOCK_PANELS) panels of p times the batch inputs, into o, by the tiles of the panels'
 * dtype (its row of dtype.h's table), or for f16 and bf16 in a batch of two widest tiles or more
 * by the f32 tiles over the panels widened (widened_pair). A batch's inputs go by the widest
 * tiles, then the rest by 4, 2 and 1: a 2 x 1 tile is one multiply-add chain per panel, waiting
 * on its latency, so that 4 leftover inputs as 2 x 1 tiles took a fifth of AVX2's prefill (batch
 * 64, tiles of 6). */
static void panel_block(Output o, Inputs in, int batch, Panels p, int np) {
    const Matrix *w = p.w;
    int (*run_tile)(const Tile *) = DTYPES[w->dtype].tiles;
    if (batch == 1 && np == BLOCK_PANELS) {
        run_tile(&(Tile){o, in, p, BLOCK_PANELS, 1});
        return;
    }
    int widened = widened_batch(w->dtype, batch);
    for (int k = 0; k < np; k += 2) {
        Panels at = {w, p.panel + k * w->panel_bytes, p.row0 + k * PANEL_ROWS, NULL, 1, 0};
        int np_tile = np - k >= 2 ? 2 : 1;
        if (widened) {
            widened_pair(o, in, batch, at, np_tile);
            continue;
        }
        for (int b = 0; b < batch;) {
            Output ob = {o.out + (size_t)b * o.stride, o.stride, 0};
            at.ahead = ahead_share(at, np_tile, b, 0);
            b += run_tile(&(Tile){ob, inputs_from(in, b), at, np_tile, batch - b});
        }
    }
}

/* The f16, bf16, q4_0 or q4_k panels `at` (np of them, 1 or 2) times the batch inputs, into o:
 * WIDE_COLUMNS (q4_0 and q4_k: UNPACK_COLUMNS) of the panels' columns at a time made over on the
 * stack, f16 and bf16 widened to f32 panels (the values exactly) for the f32 tiles, q4_0's and
 * q4_k's codes unpacked to a byte each for their own tiles (unpack_q4, kquant_unpack_q4_k), then
 * every input of the batch passed over them, its sums carried from one chunk to the next through o
 * (a float stored and loaded back is the same float): each output the same one chain of
 * multiply-adds over j in order as in the tiles over the panels themselves, the same bits. Those
 * convert each panel's column once per tile of inputs (vcvtph2ps; for bf16 a widening and a shift;
 * for the 4-bit codes two ands and a shift), beside its multiply-adds; here, once a batch. On a
 * Xeon with AVX-512, 110M prefill of a 257-token prompt (`./run 110M-DTYPE.gguf PROMPT -n 258`), 12
 * alternating rounds, new / old medians: one thread f16 1.12x, bf16 1.08x; two threads f16 1.04x,
 * bf16 1.03x (37 of the 48 pairs faster; docs/BENCH.md, 2026-12-03, 16:20). q4_0 and Q4_K_M on the
 * same Xeon, the 256-token prefill (`./run MODEL.gguf PROMPT -n 257`), 5 alternating rounds (110M
 * q4_0 7), new / old medians, one thread and two: q4_0 15M 1.08x, 1.02x; 110M 1.07x, 1.08x; 1.1B
 * 1.06x, 1.08x, every pair faster; Q4_K_M (mostly q4_k, whose products ran 1.06x at 110M and 1.10x
 * at 1.1B) 110M 1.02x, 1.03x; 1.1B 1.02x, 1.06x (docs/BENCH.md, 2026-12-04, 21:45). Not measured
 * with AVX2. */
static void widened_pair(Output o, Inputs in, int batch, Panels at, int np) {
    const Matrix *w = at.w;
    int unpacks = w->dtype == DTYPE_Q4_0 || w->dtype == DTYPE_Q4_K;
    _Alignas(64) char made[UNPACKED_BYTES];
    float *wide = (float *)made;
    int step = unpacks ? UNPACK_COLUMNS : WIDE_COLUMNS;
    for (int from = 0; from < w->cols; from += step) {
        int columns = w->cols - from < step ? w->cols - from : step;
        Matrix chunk;
        Inputs chunk_in = in;
        if (unpacks) {
            matrix_init(&chunk, w->dtype, w->rows, columns, w->group_size);
            if (w->dtype == DTYPE_Q4_0)
                q4_unpack(&chunk, made, w, at.panel, np, from);
            else
                kquant_unpack_q4_k(&chunk, made, w, at.panel, np, from);
            chunk_in = inputs_at_column(in, from);
        } else {
            matrix_init(&chunk, DTYPE_F32, w->rows, columns, 0);
            widen(wide, at, np, from, columns);
            chunk_in.x += from;
        }
        chunk.data = made;
        for (int b = 0; b < batch;) {
            Output ob = {o.out + (size_t)b * o.stride, o.stride, from > 0};
            Panels p = {&chunk, made, at.row0, ahead_share(at, np, b, from), 1, unpacks};
            Tile t = {ob, inputs_from(chunk_in, b), p, np, batch - b};
            b += DTYPES[chunk.dtype].tiles(&t);
        }
    }
}

/* Columns from .. from + columns - 1 of the np f16 or bf16 panels of p widened to f32 panels of
 * `columns` columns, one after the other at wide. */
static void widen(float *wide, Panels p, int np, int from, int columns) {
    for (int r = 0; r < np; r++) {
        const char *panel = p.panel + (size_t)r * p.w->panel_bytes;
        float *to = wide + (size_t)r * columns * PANEL_ROWS;
        if (p.w->dtype == DTYPE_F16)
            for (int j = 0; j < columns; j++)
                vec_store(to + (size_t)j * PANEL_ROWS, panel_column(panel, from + j, DTYPE_F16));
        else
            for (int j = 0; j < columns; j++)
                vec_store(to + (size_t)j * PANEL_ROWS, panel_column(panel, from + j, DTYPE_BF16));
    }
}

/* The inputs from input b on. */
static Inputs inputs_from(Inputs in, int b) {
    size_t at = b * in.xq_stride, block = at / 32;
    return (Inputs){in.x + (size_t)b * in.x_stride,
                    in.xq + at,
                    in.xq_scale + b,
                    in.x8 + at,
                    in.x8_offset + at,
                    in.x8_scale + block,
                    in.x8_sum + block,
                    in.xq_stride,
                    in.x_stride};
}

/* The share of the np panels after those of `at` that the widest tile of inputs from b on asks
 * for (a line every AHEAD_COLUMNS columns, AHEAD_COLUMNS_Q8 for q8_0 and q4_0, kquant.h's
 * KQUANT_AHEAD_COLUMNS for the K-quants), from its part for column `from` on (a chunk's,
 * widened_pair's; 0 for all the columns): the tiles of one batch pass those panels' bytes in
 * turn, so that the next tiles' weights come from L2, where the first tile of each pair had
 * waited on L3 and memory (110M f32 products at batch 128 ran 1.12x, at batch 64 1.24x; q8_0 and
 * q4_0 at batch 64 1.18x and 1.09x; q4_k and q6_k at batch 64 1.09x and 1.12x). Past the
 * matrix's last panels it points at memory that is not needed, or not there: a prefetch does not
 * fault. */
static const char *ahead_share(Panels at, int np, int b, int from) {
    int width = TILE_INPUTS, every = AHEAD_COLUMNS;
    if (dtype_grouped(at.w->dtype)) width = TILE_INPUTS_Q8, every = AHEAD_COLUMNS_Q8;
    if (dtype_kquant(at.w->dtype)) width = KQUANT_TILE_INPUTS, every = KQUANT_AHEAD_COLUMNS;
    size_t lines = (size_t)(b / width) * (at.w->cols / every) + from / every;
    return at.panel + (size_t)np * at.w->panel_bytes + lines * 64;
}

/* Each dtype's tiles are a function of their own, named by its row of dtype.h's table: inlined
 * all into one function, GCC 12 kept the f32 tile's accumulators on the stack, not in registers
 * (f32 prefill at 110M fell to 0.55x once q4_0 joined them). */
int tiles_f32(const Tile *t) {
    return tiles(t, DTYPE_F32, TILE_INPUTS);
}
int tiles_bf16(const Tile *t) {
    return tiles(t, DTYPE_BF16, TILE_INPUTS);
}
int tiles_f16(const Tile *t) {
    return tiles(t, DTYPE_F16, TILE_INPUTS);
}
int tiles_q8_0(const Tile *t) {
    return tiles(t, DTYPE_Q8_0, TILE_INPUTS_Q8);
}
int tiles_q4_0(const Tile *t) {
    return tiles(t, DTYPE_Q4_0, TILE_INPUTS_Q8);
}
int tiles_kquant(const Tile *t) {
    return kquant_tiles(&(KTile){t->o.out, t->o.stride, t->p.w, t->p.panel, t->p.ahead, t->p.row0,
                                 t->p.spacing, t->np, t->in.x8, t->in.x8_scale, t->in.x8_sum,
                                 t->in.xq_stride, t->inputs, t->o.add, t->p.unpacked});
}

/* The tile shapes of dtype d's kernel, each its own code with its accumulators in registers:
 * decode's BLOCK_PANELS x 1 (t->np = BLOCK_PANELS), and otherwise np (t->np, 1 or 2) x nb, nb the
 * kernel's widest (TILE_INPUTS, or TILE_INPUTS_Q8 for q8_0 and q4_0) or, for a batch's last
 * inputs (and decode's last panels of a matrix), the largest of 4, 2 and 1 that t->inputs holds.
 * d and widest are constants once inlined. Returns nb. */
static ALWAYS_INLINE int tiles(const Tile *t, DType d, int widest) {
    if (t->np == BLOCK_PANELS) {
        tile(t, 1, BLOCK_PANELS, d);
        return 1;
    }
    int nb = widest;
    while (t->inputs < nb) nb = nb > 4 ? 4 : nb / 2;
    if (t->np == 2)
        tile_nb(t, nb, 2, d, widest);
    else
        tile_nb(t, nb, 1, d, widest);
    return nb;
}

/* The tile of nb (1, 2, 4 or widest) inputs, nb a constant in each branch. */
static ALWAYS_INLINE void tile_nb(const Tile *t, int nb, int np, DType d, int widest) {
    if (nb == 1)
        tile(t, 1, np, d);
    else if (nb == 2)
        tile(t, 2, np, d);
    else if (nb == 4)
        tile(t, 4, np, d);
    else
        tile(t, widest, np, d);
}

/* One tile of np panels times nb inputs in dtype d, all three constants once inlined. */
static ALWAYS_INLINE void tile(const Tile *t, int nb, int np, DType d) {
    const Matrix *w = t->p.w;
    if (d == DTYPE_Q4_0 && t->p.unpacked) /* float32 scales */
        grouped_tile(t->o, t->in, nb, t->p, np, (GroupForm){32, 0, 1});
    else if ((d == DTYPE_Q4_0 || d == DTYPE_Q8_0) && w->half_scales) /* group_size 32 */
        grouped_tile(t->o, t->in, nb, t->p, np, (GroupForm){32, 1, 0});
    else if (d == DTYPE_Q4_0 || (d == DTYPE_Q8_0 && w->group_size == 32))
        grouped_tile(t->o, t->in, nb, t->p, np, (GroupForm){32, 0, 0});
    else if (d == DTYPE_Q8_0) /* dtype.h's q8_0 group sizes: 32 and 64 */
        grouped_tile(t->o, t->in, nb, t->p, np, (GroupForm){64, 0, 0});
    else
        float_tile(t->o, t->in, nb, t->p, np, d);
}

/* ----------------------------------------------------------------------------
 * The f32, bf16 and f16 tile */

/* The f32, bf16 or f16 tile: np panels of p (rows row0 .. row0 + np * PANEL_ROWS - 1 of one layer)
 * times the nb inputs in.x (rows of in.x_stride, w->cols of them read), into o (or added to it:
 * o.add). */
static ALWAYS_INLINE void float_tile(Output o, Inputs in, int nb, Panels p, int np, DType dtype) {
    const Matrix *w = p.w;
    vecf acc[BLOCK_PANELS][MAX_TILE_INPUTS];
    start_tile(o, acc, nb, np, p);
    const char *panel[BLOCK_PANELS];
    UNROLL
    for (int r = 0; r < np; r++) panel[r] = p.panel + (size_t)r * p.spacing * w->panel_bytes;
    vecf column[BLOCK_PANELS];
    int j = 0;
    /* prefill's widest tiles go AHEAD_COLUMNS columns a step, unrolled, the step's prefetch
     * (ahead_prefetch) at its head, rather than a column at a time testing j for it:
     * build/gemm 110M f32 batch 128, one thread, 4 alternating rounds, 166-177 against 152-153
     * GFLOP/s (8 columns a step 167-170; tiles of 2 x 12 and 2 x 14 inputs 148-166). With AVX-512's
     * 32 registers only: in AVX2's 16, GCC 12 spilled an accumulator (the same Xeon, an AVX2 build,
     * 3 alternating rounds: 90-95 against 102-108) */
    if (nb == TILE_INPUTS && VEC_WIDTH == 16)
        for (; j + AHEAD_COLUMNS <= w->cols; j += AHEAD_COLUMNS) {
            ahead_prefetch(p.ahead, j, AHEAD_COLUMNS);
            UNROLL
            for (int k = 0; k < AHEAD_COLUMNS; k++) {
                load_columns(column, panel, j + k, np, dtype);
                multiply_column(acc, column, in, j + k, nb, np);
            }
        }
    int column_bytes = PANEL_ROWS * (dtype == DTYPE_F32 ? 4 : 2);
    for (; j < w->cols; j++) {
        load_columns(column, panel, j, np, dtype);
        if (np == BLOCK_PANELS && j * column_bytes % 64 == 0) { /* decode */
            const char *at[BLOCK_PANELS];
            UNROLL
            for (int r = 0; r < np; r++) at[r] = panel[r] + (size_t)j * column_bytes;
            decode_prefetch(at, 64);
        }
        /* the column loop's prefetch: AVX2's and the portable build's tiles, AVX-512's last */
        if (nb == TILE_INPUTS && j % AHEAD_COLUMNS == 0) ahead_prefetch(p.ahead, j, AHEAD_COLUMNS);
        multiply_column(acc, column, in, j, nb, np);
    }
    store_tile(o, acc, NULL, nb, np, p);
}

/* column[r] = column j of panel[r] (f32, bf16 or f16) as floats, for the tile's np panels. */
static ALWAYS_INLINE void load_columns(vecf column[BLOCK_PANELS], const char *const panel[], int j,
                                       int np, DType dtype) {
    UNROLL
    for (int r = 0; r < np; r++) column[r] = panel_column(panel[r], j, dtype);
}

/* acc[r][b] += column[r] * input b's x[j]: one column's np * nb multiply-adds, each input's value
 * broadcast once. */
static ALWAYS_INLINE void multiply_column(vecf acc[BLOCK_PANELS][MAX_TILE_INPUTS],
                                          const vecf column[BLOCK_PANELS], Inputs in, int j, int nb,
                                          int np) {
    UNROLL
    for (int b = 0; b < nb; b++) {
        vecf xj = vec_set1(in.x[b * in.x_stride + j]);
        UNROLL
        for (int r = 0; r < np; r++) acc[r][b] = vec_fmadd(column[r], xj, acc[r][b]);
    }
}

/* Column j of the panel at `panel` (f32, bf16 or f16, a constant once inlined) as floats. */
static ALWAYS_INLINE vecf panel_column(const char *panel, int j, DType dtype) {
    if (dtype == DTYPE_BF16) return vec_load_bf16((const uint16_t *)panel + (size_t)j * PANEL_ROWS);
    if (dtype == DTYPE_F16) return vec_load_f16((const uint16_t *)panel + (size_t)j * PANEL_ROWS);
    return vec_load((const float *)panel + (size_t)j * PANEL_ROWS);
}

/* Decode's tile asks for the lines DECODE_AHEAD_BYTES (panel.h) past the `bytes` it reads next from
 * at[r], in each of its four streams (decode_quarters), into L1. */
static ALWAYS_INLINE void decode_prefetch(const char *const at[], int bytes) {
    UNROLL
    for (int r = 0; r < BLOCK_PANELS; r++) {
        UNROLL
        for (int o = 0; o < bytes; o += 64)
            __builtin_prefetch(at[r] + o + DECODE_AHEAD_BYTES, 0, 3);
    }
}

/* A prefill tile's line of its share of the next panels (ahead_share) for column j, into L2 (hint
 * 2: prefetcht1), a line every `every` columns. */
static ALWAYS_INLINE void ahead_prefetch(const char *ahead, int j, int every) {
    __builtin_prefetch(ahead + (size_t)(j / every) * 64, 0, 2);
}

/* ----------------------------------------------------------------------------
 * The q8_0 and q4_0 tile */

/* The q8_0 and q4_0 tile: as float_tile with the inputs quantized: each group's dot product is
 * an integer sum, converted and scaled by the weights' scale once. q8_0's input b is xq_scale[b] *
 * xq[b] (rows of xq_stride int16), its scale multiplying the total; q4_0's is x8 (rows of
 * xq_stride int8) times a scale per block of 32, multiplying each group's sum. form (w's
 * group_size and half_scales) constants once inlined, so the group loop unrolls. */
static ALWAYS_INLINE void grouped_tile(Output o, Inputs in, int nb, Panels p, int np,
                                       GroupForm form) {
    const Matrix *w = p.w;
    int group_size = form.size;
    vecf acc[BLOCK_PANELS][MAX_TILE_INPUTS];
    start_tile(o, acc, nb, np, p);
    Groups g = {.half_scales = form.half_scales, .unpacked = form.unpacked};
    UNROLL
    for (int r = 0; r < np; r++) g.at[r] = p.panel + (size_t)r * p.spacing * w->panel_bytes;
    int full = w->cols / group_size * group_size, q4 = w->dtype == DTYPE_Q4_0;
    for (int start = 0; start < full; start += group_size) {
        Inputs at = inputs_at_column(in, start);
        if (nb == TILE_INPUTS_Q8) { /* ahead_share, into L2 */
            UNROLL
            for (int i = 0; i < group_size; i += AHEAD_COLUMNS_Q8)
                ahead_prefetch(p.ahead, start + i, AHEAD_COLUMNS_Q8);
        }
        if (np == BLOCK_PANELS)
            decode_prefetch(g.at, group_bytes(w->dtype, group_size, g.half_scales));
        if (q4)
            q4_group(acc, &g, at, nb, np, group_size);
        else
            q8_group(acc, &g, at, nb, np, group_size);
    }
    if (full < w->cols) { /* the shorter last group */
        Inputs at = inputs_at_column(in, full);
        int columns = group_columns(w->dtype, w->cols, group_size, full);
        if (q4)
            q4_group(acc, &g, at, nb, np, columns);
        else
            q8_group(acc, &g, at, nb, np, columns);
    }
    store_tile(o, acc, q4 ? NULL : in.xq_scale, nb, np, p); /* q4_0's scaled each block */
}

/* The inputs from column `start` (a multiple of 32) on: the quantized values and blocks only,
 * which q8_group and q4_group read. */
static Inputs inputs_at_column(Inputs in, int start) {
    in.xq += start;
    in.x8 += start;
    in.x8_offset += start;
    in.x8_scale += start / 32;
    in.x8_sum += start / 32;
    return in;
}

/* The scales of the group of panel r the tile is at, as floats. */
static ALWAYS_INLINE vecf group_scales(const Groups *g, int r) {
    if (g->half_scales) return vec_load_f16((const uint16_t *)g->at[r]);
    return vec_load((const float *)g->at[r]);
}

/* q8_0, one group (`columns` columns, an even number, from the one in.xq points at) of the tile's
 * panels, whose group begins at g->at[r] (its scales, then its values) and moves past it:
 * acc[r][b] += scales * (int8 values . int16 inputs b), the integer sums exact, column pair by
 * column pair. */
static ALWAYS_INLINE void q8_group(vecf acc[BLOCK_PANELS][MAX_TILE_INPUTS], Groups *g, Inputs in,
                                   int nb, int np, int columns) {
    veci sums[BLOCK_PANELS][MAX_TILE_INPUTS];
    zero_sums(sums, nb, np);
    UNROLL
    for (int i = 0; i < columns; i += 2) {
        vecw pair[MAX_TILE_INPUTS];
        UNROLL
        for (int b = 0; b < nb; b++) pair[b] = vecw_set1_pair(in.xq + b * in.xq_stride + i);
        UNROLL
        for (int r = 0; r < np; r++) {
            const int8_t *q = (const int8_t *)(g->at[r] + PANEL_ROWS * scale_bytes(g->half_scales));
            vecw w = vecw_load_i8(q + (size_t)i * PANEL_ROWS);
            UNROLL
            for (int b = 0; b < nb; b++) sums[r][b] = veci_dot(sums[r][b], w, pair[b]);
        }
    }
    UNROLL
    for (int r = 0; r < np; r++) {
        vecf scale = group_scales(g, r);
        UNROLL
        for (int b = 0; b < nb; b++)
            acc[r][b] = vec_fmadd(vec_from_veci(sums[r][b]), scale, acc[r][b]);
        g->at[r] += group_bytes(DTYPE_Q8_0, columns, g->half_scales);
    }
}

/* q4_0, one group (`columns` columns, a multiple of 8, from the one in.x8 points at) of the
 * tile's panels, as q8_group: acc[r][b] += scales * input b's block scale * ((codes - 8) . int8
 * inputs b). The codes' dot products are q4_dot.h's (the Q4_K tile's too), within int16 over a
 * group of 32 and widened once a group. Packed, the codes are multiplied as they are, and the sums
 * start from -8 times the sum of the group's inputs (from quantize_input_blocks); unpacked, the
 * codes less 8 times the inputs + 128 start from q4_unpack's starts (-128 times the codes less 8):
 * the same integer either way. The starts are where AVX512-VNNI's sums begin (simd.h's
 * vecw_start), so that its unpacked tile takes no subtraction a sum (the other targets add the
 * start once widened, where they subtracted): on the Xeon of docs/BENCH.md (2026-12-05, 09:30), one
 * thread, 3 alternating rounds against the subtraction, build/tile q4_0 428-449 against 387-393
 * GFLOP/s, build/gemm q4_0 batch 128 110M 322-330 against 301-307, 1.1B 374-415 against 342-356. */
static ALWAYS_INLINE void q4_group(vecf acc[BLOCK_PANELS][MAX_TILE_INPUTS], Groups *g, Inputs in,
                                   int nb, int np, int columns) {
    vecw sums[BLOCK_PANELS][Q4_DOT_INPUTS];
    veci start[BLOCK_PANELS][Q4_DOT_INPUTS];
    Q4Codes codes = {.unpacked = g->unpacked, .signed_codes = g->unpacked};
    const int8_t *x8[Q4_DOT_INPUTS];
    size_t head = g->unpacked ? Q4_UNPACKED_HEAD : PANEL_ROWS * scale_bytes(g->half_scales);
    UNROLL
    for (int r = 0; r < np; r++) {
        codes.at[r] = (const uint8_t *)(g->at[r] + head);
        UNROLL
        for (int b = 0; b < nb; b++) {
            start[r][b] = g->unpacked ? veci_load(g->at[r] + PANEL_ROWS * sizeof(float))
                                      : veci_set1(-8 * in.x8_sum[(size_t)b * in.xq_stride / 32]);
            sums[r][b] = vecw_start(start[r][b]);
        }
    }
    UNROLL
    for (int b = 0; b < nb; b++)
        x8[b] = g->unpacked ? (const int8_t *)(in.x8_offset + b * in.xq_stride)
                            : in.x8 + b * in.xq_stride;
    q4_dots(sums, &codes, x8, nb, np, columns);
    UNROLL
    for (int r = 0; r < np; r++) {
        vecf scale = group_scales(g, r);
        UNROLL
        for (int b = 0; b < nb; b++) {
            veci sum = veci_finish(sums[r][b], start[r][b]);
            vecf input_scale = vec_set1(in.x8_scale[(size_t)b * in.xq_stride / 32]);
            acc[r][b] = vec_fmadd(vec_from_veci(sum), vec_mul(scale, input_scale), acc[r][b]);
        }
        g->at[r] += g->unpacked ? head + (size_t)PANEL_ROWS * columns /* q4_unpack's */
                                : group_bytes(DTYPE_Q4_0, columns, g->half_scales);
    }
}

/* acc[r][b] for the np panels of p and nb inputs: 0, or with o.add the outputs there (a chunk's
 * sums carried on, widened_pair's). */
static ALWAYS_INLINE void start_tile(Output o, vecf acc[BLOCK_PANELS][MAX_TILE_INPUTS], int nb,
                                     int np, Panels p) {
    UNROLL
    for (int r = 0; r < np; r++) {
        int row = p.row0 + r * p.spacing * PANEL_ROWS;
        UNROLL
        for (int b = 0; b < nb; b++)
            acc[r][b] =
                o.add ? vec_load_upto(o.out + b * o.stride + row, p.w->rows - row) : vec_zero();
    }
}

/* Zeroes the int32 sums of a tile's np panels and nb inputs (q8_group's; q4_group's are int16
 * vecw, a type of their own in the portable build). */
static ALWAYS_INLINE void zero_sums(veci sums[BLOCK_PANELS][MAX_TILE_INPUTS], int nb, int np) {
    UNROLL
    for (int r = 0; r < np; r++) {
        UNROLL
        for (int b = 0; b < nb; b++) sums[r][b] = veci_zero();
    }
}

/* o.out[b * o.stride + row0 + r * PANEL_ROWS + i] = lane i of acc[r][b] times scale[b] (NULL: 1),
 * for the rows below w->rows (a short last panel's padding rows are not stored). */
static ALWAYS_INLINE void store_tile(Output o, vecf acc[BLOCK_PANELS][MAX_TILE_INPUTS],
                                     const float *scale, int nb, int np, Panels p) {
    UNROLL
    for (int r = 0; r < np; r++) {
        int row = p.row0 + r * p.spacing * PANEL_ROWS;
        UNROLL
        for (int b = 0; b < nb; b++) {
            vecf v = scale ? vec_mul(acc[r][b], vec_set1(scale[b])) : acc[r][b];
            vec_store_upto(o.out + (size_t)b * o.stride + row, v, p.w->rows - row);
        }
    }
}

/* ----------------------------------------------------------------------------
 * The plain product */

void matmul_ref(float *out, const Matrix *w, int layer, const float *x) {
    for (int i = 0; i < w->rows; i++) {
        float sum = 0.0f;
        for (int j = 0; j < w->cols; j++) sum += matrix_value(w, layer, i, j) * x[j];
        out[i] = sum;
    }
}
