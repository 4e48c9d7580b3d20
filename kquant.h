/* llama.cpp's K-quants held as they are: the Q4_K and Q6_K blocks of a GGUF file (gguf.h lists
 * them), the two types of its Q4_K_M files, re-laid in panels (panel.h) without a byte more, their
 * pack and value functions and their tiles (the rows of dtype.h's table for q4_k and q6_k).
 *
 * A panel of a K-quant (PANEL_ROWS rows, row r in lane r % PANEL_ROWS, as panel.h's) is its rows'
 * super-blocks of 256 columns one after another, each the same bytes as its rows' file blocks,
 * lane by lane so that one vector load gives a field of every row:
 *   q4_k, 144 * PANEL_ROWS bytes a super-block: d[PANEL_ROWS], dmin[PANEL_ROWS] (fp16); the 12
 *     bytes of 6-bit scales and mins as three 32-bit words a row, word k of every row together
 *     (word k of lane r at (k * PANEL_ROWS + r) * 4: bytes 4k .. 4k + 3 of the block's scales[12],
 *     little-endian); then the 256 4-bit codes as q4_0's (panel.h): 4 * PANEL_ROWS bytes a block of
 *     8 columns, byte lane * 4 + k holding column k's code in its low nibble and column 4 + k's in
 *     its high one. Value (lane, c) = d * sc * code - dmin * mn, sc and mn sub-block c / 32's
 *     (gguf_k_scale_min), in float as ggml's dequantize_row_q4_K.
 *   q6_k, 210 * PANEL_ROWS bytes a super-block: d[PANEL_ROWS] (fp16); int8 scales[16][PANEL_ROWS];
 *     the codes' low 4 bits as q4_k's codes (128 * PANEL_ROWS bytes); their high 2 bits, 4 *
 *     PANEL_ROWS bytes a sub-block of 16 columns, byte lane * 4 + k holding columns k, 4 + k, 8 + k
 *     and 12 + k in bits 0-1, 2-3, 4-5 and 6-7. Value (lane, c) = d * scales[c / 16] * (code - 32),
 *     as ggml's dequantize_row_q6_K.
 * Rows are whole super-blocks (a GGUF's K-type rows are); a short last panel's padding rows are
 * zero bytes, value 0.
 *
 * The tiles multiply inputs quantized in int8 blocks of 32 (matmul.h's quantize_input_blocks, the
 * q4_0 products' inputs): for input block k, scale s and sum S of its int8 values x8, a q4_k
 * sub-block of 32 adds s * (d * sc * (codes . x8) - dmin * mn * S), a q6_k sub-block of 16 adds
 * s * d * scale * ((codes . x8) - 32 * (its 16 x8's sum)); the dot products in integers (vpmaddubsw
 * of the unsigned codes by the int8 inputs), exact.
 */
#ifndef KQUANT_H
#define KQUANT_H

#include <stddef.h>
#include <stdint.h>

#include "panel.h"

/* The prefill tile's inputs (the widest), and how often it asks for a cache line of its share
 * of the next panels (KTile's ahead), which matmul.c's ahead_share computes from both: a line an
 * input block (a line every 16 columns, as q4_0's, was no faster: 110M q4_k and q6_k, batch 64,
 * one thread, 5 alternating rounds). */
enum { KQUANT_TILE_INPUTS = 4, KQUANT_AHEAD_COLUMNS = 32 };

/* Bytes of a row's q4_k super-block as kquant_unpack_q4_k leaves it (144 packed). */
enum { KQUANT_Q4K_UNPACKED_BYTES = 272 };

/* One call of the K-quants' tiles: np panels of w (1, 2, or 4 in decode) from `panel` on,
 * `spacing` panels apart (matmul.c's Panels), rows from row0 (panel r's from row0 + r * spacing *
 * PANEL_ROWS), times the inputs (`inputs` of them left in the batch),
 * quantized: input b's int8 values from x8 + b * x8_stride, its blocks' scales and sums from
 * x8_scale and x8_sum + b * x8_stride / 32; input b's outputs go from out + b * out_stride. In
 * prefill, `ahead` is the tile's share of the panels after its own: a tile of KQUANT_TILE_INPUTS
 * asks for the line ahead + 64 * (j / KQUANT_AHEAD_COLUMNS) into L2 at column j; with `add` the
 * sums start from the outputs there (a chunk's after the first: matmul.c's widened_pair); with
 * `unpacked`, q4_k panels as kquant_unpack_q4_k left them. */
typedef struct {
    float *out;
    size_t out_stride;
    const Matrix *w;
    const char *panel, *ahead;
    int row0, spacing, np;
    const int8_t *x8;
    const float *x8_scale;
    const int32_t *x8_sum;
    size_t x8_stride;
    int inputs, add, unpacked;
} KTile;

/* Runs the tile that fits t (decode's 4 panels x 1 input, else its 1 or 2 panels times 4, 2 or 1
 * inputs) for w's dtype, q4_k or q6_k; returns the inputs it took. Each output is the same chain
 * of operations whatever the tile: decode and prefill give the same bits. */
int kquant_tiles(const KTile *t);

/* The super-blocks of the np q4_k panels at `panel` (of matrix w) from column `from` (a multiple of
 * 256) on, to chunk->cols columns, unpacked at `to`, one panel after the other, and chunk->
 * panel_bytes set to a panel's bytes there (KQUANT_Q4K_UNPACKED_BYTES a row's super-block): each
 * super-block's d, dmin and scale words as they are, then its codes a byte each, as q4_dot.h's
 * unpack_block reads them unpacked. For prefill, which multiplies them by every input of a batch
 * (matmul.c's widened_pair). */
void kquant_unpack_q4_k(Matrix *chunk, char *to, const Matrix *w, const char *panel, int np,
                        int from);

/* DTypeInfo's pack and value of q4_k and q6_k: pack takes `values`, rows of the file's blocks
 * (cols / 256 blocks a row); scales is unused. */
void pack_q4_k(const Matrix *m, char *dst, const void *values, const float *scales, size_t first,
               int n_rows);
void pack_q6_k(const Matrix *m, char *dst, const void *values, const float *scales, size_t first,
               int n_rows);
float value_q4_k(const Matrix *m, const char *panel, int lane, int col);
float value_q6_k(const Matrix *m, const char *panel, int lane, int col);

#endif
