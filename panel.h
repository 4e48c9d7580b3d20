/* The panel layout the weight matrices are held in (stated once, here), the memory for panels,
 * packing a row-major matrix into it, reading one value back, and the embedding lookups that read
 * a row of it.
 *
 * The products over panels are matmul.h's; reading files and placing the panels in memory is
 * load.c's. Each dtype's pack and value functions are named by its row of dtype.h's table.
 */
#ifndef PANEL_H
#define PANEL_H

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "simd.h"

/* A weight matrix of every layer, stacked: n_layers matrices (rows, cols) (one matrix for
 * token_embedding and wcls), as model_load repacks the file's row-major values for the matrix
 * kernels. Each layer's rows go in n_panels = ceil(rows / panel_rows) panels of panel_rows rows
 * (PANEL_ROWS, the SIMD width: 16 with AVX-512, 8 with AVX2, 1 in the portable build), the last
 * padded with zero rows; panel p of layer l is the panel_bytes from data + (l * n_panels + p) *
 * panel_bytes. Within a panel one column's values for all its rows are adjacent, so that one
 * vector load gives a column (row r in lane r % panel_rows):
 *   f32, bf16, f16: value (r, j) is element j * panel_rows + r % panel_rows;
 *   q8_0: group after group of group_size columns from column 0 (the last shorter when cols is not
 *     a multiple): the group's panel_rows scales (float32, or fp16 bits when half_scales), then
 *     its int8 values in column pairs,
 *     value (r, start + i) at byte (i / 2) * 2 * panel_rows + (r % panel_rows) * 2 + i % 2 after
 *     the scales; a group of odd length ends with a zero column. The value is int8 * scale.
 *   q4_0: as q8_0 with group_size 32, the values 4-bit codes in blocks of 8 columns: for columns
 *     start + i .. start + i + 7 (i a multiple of 8), 4 * panel_rows bytes at (i / 8) * 4 *
 *     panel_rows after the scales, byte (r % panel_rows) * 4 + k holding the code of (r, start + i
 *     + k) in its low nibble and of (r, start + i + 4 + k) in its high one (k = 0 .. 3); a group
 *     whose length is not a multiple of 8 is padded with code 8. The value is (code - 8) * scale.
 *     One vector load of a block is each row's 8 codes, one 32-bit lane a row.
 * A matrix (d, n) maps an n-vector to a d-vector: out[i] = sum_j w(i, j) * x[j]. */
struct Matrix {
    DType dtype;
    const void *data; /* the panels */
    int rows, cols;   /* of one layer's matrix */
    int group_size;   /* one of the dtype's group sizes (dtype.h); 0 for a dtype without */
    int panel_rows, n_panels;
    size_t panel_bytes;
    /* q8_0 and q4_0: the scales held as fp16 (2 bytes each) rather than float32, set by
     * matrix_hold_half_scales where every scale is an fp16 number (a GGUF block's): a q4_0 group
     * of 32 then takes 18 bytes a row, as in the file, not 20 */
    int half_scales;
    /* a GGUF stack whose layers are of different K-quants (Q4_K_M's attn_v and ffn_down): layer l
     * is layers[l], one layer in its own dtype and panels; NULL for a stack of one dtype */
    const struct Matrix *layers;
};

enum { PANEL_ROWS = VEC_WIDTH }; /* one vector of a column: a panel's rows */

/* How far ahead decode's tiles ask for the bytes of each of their four streams of panels
 * (matmul.c's decode_prefetch, kquant.c's prefetch_ahead): the lines this many bytes past those
 * they read next, into L1. On a Xeon with AVX-512 (a core's misses in flight set its read rate)
 * the hardware prefetchers alone had left every type that reads fewer bytes a multiply-add than
 * f32 below f32's GB/s from memory. build/stream past the L3, one thread, new / old, medians of 3
 * alternating rounds (docs/BENCH.md, 2026-12-03, 13:15): f16 1.21x, bf16 1.20x, q8_0 1.12x, q4_0
 * 1.10x, q4_k 1.12x, q6_k 1.02x (1.19x in a first comparison; the K-quants' old distance the
 * next panel), f32 1.09x; 512 and 2048 bytes were no better for f16 and bf16. */
enum { DECODE_AHEAD_BYTES = 1024 };

/* Columns a q8_0 or q4_0 group starting at column `start` takes in a panel: its length, rounded
 * up to whole pairs (q8_0) or blocks of 8 (q4_0). */
static inline int group_columns(DType dtype, int cols, int group_size, int start) {
    int len = cols - start < group_size ? cols - start : group_size;
    int unit = dtype == DTYPE_Q4_0 ? 8 : 2;
    return (len + unit - 1) / unit * unit;
}

/* Rows of m panel p holds: PANEL_ROWS, but fewer in a last panel padded with zero rows. */
static inline int matrix_panel_rows(const Matrix *m, int p) {
    int left = m->rows - p * PANEL_ROWS;
    return left < PANEL_ROWS ? left : PANEL_ROWS;
}

/* Scales one row of m has: one a group of group_size columns, the last maybe shorter (ceil(cols /
 * group_size)) for q8_0 and q4_0; 0 for a dtype without groups. */
static inline int matrix_row_groups(const Matrix *m) {
    return dtype_grouped(m->dtype) ? (m->cols + m->group_size - 1) / m->group_size : 0;
}

/* Bytes of one scale of a q8_0 or q4_0 panel: fp16 or float32 (Matrix's half_scales). */
static inline size_t scale_bytes(int half_scales) {
    return half_scales ? sizeof(uint16_t) : sizeof(float);
}

/* Bytes of a q8_0 or q4_0 group of `columns` (a whole number of its units) columns in a panel:
 * its scales (scale_bytes each), then its values (a byte each, or two a byte). */
static inline size_t group_bytes(DType dtype, int columns, int half_scales) {
    return PANEL_ROWS * (scale_bytes(half_scales) + (dtype == DTYPE_Q4_0 ? columns / 2 : columns));
}

/* The matrix to read layer `layer` of m from, *layer set to its layer there: m itself, or for a
 * stack of mixed K-quants the layer's own matrix (layer 0 of it). */
static inline const Matrix *matrix_layer(const Matrix *m, int *layer) {
    if (!m->layers) return m;
    const Matrix *one = &m->layers[*layer];
    *layer = 0;
    return one;
}

#define HUGE_PAGE (2u << 20)

/* `bytes` of memory for panels, HUGE_PAGE-aligned and asked to be backed by 2 MiB pages but for
 * its last part short of 2 MiB; NULL when out of memory; free() frees it. Where model_load packs
 * the weights, and where the speed tools put theirs, so that they measure the same pages. */
void *panels_alloc(size_t bytes);

/* Sets m's shape and dtype and the panel fields derived from them (panel_rows, n_panels,
 * panel_bytes); data is left NULL for the caller to point at packed panels. group_size: one of
 * the dtype's group sizes (dtype.h; not checked here), ignored for a dtype without groups. */
void matrix_init(Matrix *m, DType dtype, int rows, int cols, int group_size);

/* Has q8_0 or q4_0 matrix m (group_size 32) hold its scales as fp16 (half_scales) and sets
 * panel_bytes for it: for scales that are all fp16 numbers, which pack then holds exactly. With
 * them decode reads a q4_0 file's 18 bytes a group row rather than 20 (q8_0's 34 rather than 36),
 * and memory holds the file's bytes: `build/stream 4 T 5632 2048 96` (q4_0 past the L3), a scratch
 * build with fp16 scales against float32, 5 alternating rounds, medians of the ratios of G
 * multiply-adds/s: one thread 1.16x, two 1.11x; 1.1B q4_0 GGUF decode end to end (3 rounds) 1.21x
 * and 1.08x, peak memory 631.8 -> 570.3 MiB (docs/BENCH.md, 2026-12-04). */
void matrix_hold_half_scales(Matrix *m);

/* Packs panel p (rows p * panel_rows ..) of one layer's row-major matrix into dst (m->panel_bytes):
 * values (m->rows, m->cols) of m's dtype (float, bf16 or f16 bits, int8, or q4_0's codes two a
 * byte, value j of a row in byte j / 2 of the row's ceil(cols / 2), the low nibble for even j), and
 * for q8_0 and q4_0 scales (m->rows, ceil(cols / group_size)); scales is unused for f32, bf16 and
 * f16. Padding rows and columns are written as zero. */
void matrix_pack_panel(const Matrix *m, char *dst, const void *values, const float *scales, int p);

/* Value (row, col) of layer `layer` of m, read from the panels: the one place the plain path
 * reads a weight. Requires 0 <= layer < the stack's layers, row < rows, col < cols (unchecked). */
float matrix_value(const Matrix *m, int layer, int row, int col);

/* Row `token` of token_embedding w (vocab_size, dim) into out (dim floats): the values the file
 * holds (bf16 and f16 widened; q8_0 as int8 * its group's scale, q4_0 as (code - 8) * scale).
 * Requires 0 <= token < w->rows. The fast lookup walks the panel group by group; embedding_ref
 * reads each value by matrix_value, the same values exactly. */
void embedding(const Matrix *w, int token, float *out);
void embedding_ref(const Matrix *w, int token, float *out);

/* Each dtype's pack and value functions, which its row of dtype.h's table names (bf16 and f16
 * pack alike): the pack and value functions of DTypeInfo. */
void pack_f32(const Matrix *m, char *dst, const void *values, const float *scales, size_t first,
              int n_rows);
void pack_16bit(const Matrix *m, char *dst, const void *values, const float *scales, size_t first,
                int n_rows);
void pack_q8_0(const Matrix *m, char *dst, const void *values, const float *scales, size_t first,
               int n_rows);
void pack_q4_0(const Matrix *m, char *dst, const void *values, const float *scales, size_t first,
               int n_rows);
float value_f32(const Matrix *m, const char *panel, int lane, int col);
float value_bf16(const Matrix *m, const char *panel, int lane, int col);
float value_f16(const Matrix *m, const char *panel, int lane, int col);
float value_q8_0(const Matrix *m, const char *panel, int lane, int col);
float value_q4_0(const Matrix *m, const char *panel, int lane, int col);

#endif
