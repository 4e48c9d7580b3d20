/* The products out = x W^T of a batch of inputs and the weight matrices in panels (panel.h).
 *
 * Two paths compute the same products: matmul, the fast one (SIMD tiles of panels times inputs,
 * OpenMP threads, int16 inputs for q8_0 weights and int8 for q4_0 and the K-quants, whose tiles
 * are kquant.c's), and matmul_ref, plain scalar C over matrix_value, which the reference forward
 * pass (reference.c) and the tests use. Which matrix multiplies what is model.c's.
 */
#ifndef MATMUL_H
#define MATMUL_H

#include <stddef.h>
#include <stdint.h>

#include "panel.h"

/* The multiply-adds of a call below which the kernels (matmul, attention) open no parallel
 * region: one costs more than it saves there (measured on stories260K: dim 64 matmuls run faster
 * on one thread, and waiting threads stall on a busy machine). */
#define PARALLEL_MIN_WORK (1 << 16)

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
 * multiply-adds); each thread takes its run four panels at a time: in decode (batch 1) panels a
 * quarter of a run of up to 128 apart, four sequential streams; in prefill (batch > 1) four
 * adjacent ones, whose weights stay in cache while every input of the batch passes them, and then
 * the blocks of four that the other threads have not yet begun. Each output is one chain of
 * multiply-adds over the columns in order, whatever the batch or the tile: decode (batch 1) and
 * prefill give the same bits. */
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

/* Each dtype's tiles, which its row of dtype.h's table names (DTypeInfo's tiles): the tile of its
 * kernel that fits tile's inputs left, run; returns the inputs it took. matmul calls them. */
int tiles_f32(const Tile *tile);
int tiles_bf16(const Tile *tile);
int tiles_f16(const Tile *tile);
int tiles_q8_0(const Tile *tile);
int tiles_q4_0(const Tile *tile);
int tiles_kquant(const Tile *tile); /* q4_k's and q6_k's: kquant.c's on q4_0's int8 inputs */

#endif
