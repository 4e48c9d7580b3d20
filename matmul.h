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
#include "quantize.h"

/* The multiply-adds of a call below which the kernels (matmul, attention) open no parallel
 * region: one costs more than it saves there (measured on stories260K: dim 64 matmuls run faster
 * on one thread, and waiting threads stall on a busy machine). */
#define PARALLEL_MIN_WORK (1 << 16)

/* One product of a matmul call: out (batch, w->rows) = x W^T, W layer `layer` of w. */
typedef struct {
    float *out;
    const Matrix *w;
} Product;

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

/* Each dtype's tiles, which its row of dtype.h's table names (DTypeInfo's tiles): the tile of its
 * kernel that fits tile's inputs left, run; returns the inputs it took. matmul calls them. */
int tiles_f32(const Tile *tile);
int tiles_bf16(const Tile *tile);
int tiles_f16(const Tile *tile);
int tiles_q8_0(const Tile *tile);
int tiles_q4_0(const Tile *tile);
int tiles_kquant(const Tile *tile); /* q4_k's and q6_k's: kquant.c's on q4_0's int8 inputs */

#endif
