/* Weight matrices and their products: the panel layout the weights are held in (stated once,
 * here), packing a row-major matrix into it, reading one value back, and the products out = x W^T
 * of a batch of inputs.
 *
 * Two paths compute the same products: matmul, the fast one (SIMD tiles of panels times inputs,
 * OpenMP threads, int16 inputs for q8_0 weights and int8 for q4_0), and matmul_ref / embedding_ref,
 * plain scalar C over matrix_value, which the reference forward pass (reference.c) and the tests
 * use. What this file leaves to others: reading files and placing the panels in memory (load.c),
 * and which matrix multiplies what (model.c).
 */
#ifndef MATMUL_H
#define MATMUL_H

#include <stddef.h>
#include <stdint.h>

/* The multiply-adds of a call below which the kernels (matmul, attention) open no parallel
 * region: one costs more than it saves there (measured on stories260K: dim 64 matmuls run faster
 * on one thread, and waiting threads stall on a busy machine). */
#define PARALLEL_MIN_WORK (1 << 16)

/* Element type of the weight matrices in a file (the header's dtype code); norms stay f32. */
typedef enum {
    DTYPE_F32 = 0,  /* float32 */
    DTYPE_BF16 = 1, /* bfloat16: the upper 16 bits of a float32 */
    DTYPE_Q8_0 = 2, /* int8 with one float32 scale per group of group_size values of a row */
    DTYPE_F16 = 3,  /* IEEE 754 binary16 */
    DTYPE_Q4_0 = 4, /* 4-bit codes with one float32 scale per group of 32 values of a row */
} DType;

/* A weight matrix of every layer, stacked: n_layers matrices (rows, cols) (one matrix for
 * token_embedding and wcls), as model_load repacks the file's row-major values for the matrix
 * kernels. Each layer's rows go in n_panels = ceil(rows / panel_rows) panels of panel_rows rows
 * (the SIMD width: 16 with AVX-512, 8 with AVX2, 1 in the portable build), the last padded with
 * zero rows; panel p of layer l is the panel_bytes from data + (l * n_panels + p) * panel_bytes.
 * Within a panel one column's values for all its rows are adjacent, so that one vector load gives
 * a column (row r in lane r % panel_rows):
 *   f32, bf16, f16: value (r, j) is element j * panel_rows + r % panel_rows;
 *   q8_0: group after group of group_size columns from column 0 (the last shorter when cols is not
 *     a multiple): the group's panel_rows float32 scales, then its int8 values in column pairs,
 *     value (r, start + i) at byte (i / 2) * 2 * panel_rows + (r % panel_rows) * 2 + i % 2 after
 *     the scales; a group of odd length ends with a zero column. The value is int8 * scale.
 *   q4_0: as q8_0 with group_size 32, the values 4-bit codes in blocks of 8 columns: for columns
 *     start + i .. start + i + 7 (i a multiple of 8), 4 * panel_rows bytes at (i / 8) * 4 *
 *     panel_rows after the scales, byte (r % panel_rows) * 4 + k holding the code of (r, start + i
 *     + k) in its low nibble and of (r, start + i + 4 + k) in its high one (k = 0 .. 3); a group
 *     whose length is not a multiple of 8 is padded with code 8. The value is (code - 8) * scale.
 *     One vector load of a block is each row's 8 codes, one 32-bit lane a row.
 * A matrix (d, n) maps an n-vector to a d-vector: out[i] = sum_j w(i, j) * x[j]. */
typedef struct {
    DType dtype;
    const void *data; /* the panels */
    int rows, cols;   /* of one layer's matrix */
    int group_size;   /* q8_0 (32 or 64) and q4_0 (32) only */
    int panel_rows, n_panels;
    size_t panel_bytes;
} Matrix;

/* Sets m's shape and dtype and the panel fields derived from them (panel_rows, n_panels,
 * panel_bytes); data is left NULL for the caller to point at packed panels. group_size: 32 or 64
 * for q8_0 (not checked here), 32 for q4_0 whatever is given, ignored otherwise. */
void matrix_init(Matrix *m, DType dtype, int rows, int cols, int group_size);

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

/* One product of a matmul call: out (batch, w->rows) = x W^T, W layer `layer` of w. */
typedef struct {
    float *out;
    const Matrix *w;
} Product;

/* Scratch for a q8_0 or q4_0 product's inputs, quantized: for q8_0, (batch, stride) int16 values
 * and one scale per input (quantize_input); for q4_0, (batch, stride) int8 values with a scale and
 * the values' sum per block of 32 (quantize_input_blocks), rows of stride / 32 blocks. */
typedef struct {
    int16_t *values;
    float *scales;
    int8_t *bytes;
    float *block_scales;
    int32_t *block_sums;
    size_t stride; /* at least the widest input rounded up to a multiple of 64 */
} QuantizedInputs;

/* Allocates xq for `batch` inputs of up to `cols` values (stride: cols rounded up to a multiple
 * of 64), 64-byte aligned and left uninitialized: batch * stride int16 values and batch scales;
 * q4_0's int8 values, block scales and sums take 1.25 of those values' 2 bytes each, in the same
 * memory (every matmul quantizes its own input before reading it, so the two are never needed at
 * once). Returns 0, or -1 when out of memory, what did fit left for quantized_inputs_free. */
int quantized_inputs_alloc(QuantizedInputs *xq, int batch, int cols);
void quantized_inputs_free(QuantizedInputs *xq);

/* Bytes quantized_inputs_alloc takes per input of up to `cols` values. */
size_t quantized_input_bytes(int cols);

/* The products p[k] for k < n (at most 3) of one input batch x: (batch, cols), cols = p[0].w->cols
 * for all n, which share one dtype (wq, wk, wv; or w1, w3). For q8_0 and q4_0, x is quantized once
 * into xq (batch rows), and each product is computed against those int16 (q8_0) or int8 (q4_0)
 * values. The panels of all n products, numbered in order, are split into one contiguous run per
 * thread, equal to within a panel, in one parallel region (none below PARALLEL_MIN_WORK
 * multiply-adds); each thread takes its run up to four panels at a time, whose weights stay in
 * cache while every input of the batch passes them. Each output is one chain of multiply-adds over
 * the columns in order, whatever the batch or the tile: decode (batch 1) and prefill give the same
 * bits. */
void matmul(const Product *p, int n, const float *x, int batch, int layer,
            const QuantizedInputs *xq);

/* out (w->rows) = W x for layer `layer` of w and one input x (w->cols): out[i] = sum_j w(i, j) *
 * x[j], the sum in float in the order of j, each weight read by matrix_value. The plain product
 * matmul is tested against. */
void matmul_ref(float *out, const Matrix *w, int layer, const float *x);

/* xq = round(x / scale) as int16, scale = max |x| / 32767 (0 for a zero vector: xq all 0), for
 * the n values of x; xq's values from n up to the next multiple of 64 are zero (xq holds that
 * many). About 4.5 significant digits for all but values far below the largest, against the
 * weights' int8. A NaN or infinite value makes scale NaN (and its xq 0), so that the product comes
 * out non-finite as the other dtypes' would. matmul's q8_0 inputs. */
void quantize_input(int16_t *xq, float *scale, const float *x, int n);

/* The n values of x in blocks of 32 (the last shorter when n is not a multiple): xq holds n
 * rounded up to a multiple of 32 int8 values, scales and sums ceil(n / 32). For block k,
 * xq = round(x / scales[k]) (half to even) as int8 in -127..127, scales[k] = max |x| / 127 over the
 * block (0 for an all-zero block), sums[k] = the sum of its xq; xq's values from n up to the next
 * multiple of 32 are zero. About 2.4 significant digits, beside the weights' 4 bits; a NaN or
 * infinite value makes its block's scale NaN (and its xq 0), any finite block a finite one.
 * matmul's q4_0 inputs, as llama.cpp quantizes the inputs of its q4_0 products (int8 blocks of 32,
 * its q8_0). */
void quantize_input_blocks(int8_t *xq, float *scales, int32_t *sums, const float *x, int n);

#endif
