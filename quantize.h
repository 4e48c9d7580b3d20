/* The inputs of the integer products, quantized: int16 values with one scale an input for q8_0
 * weights (quantize_input), int8 blocks of 32 with a scale and a sum each for q4_0's and the
 * K-quants' (quantize_input_blocks), and the scratch a batch of them takes (QuantizedInputs). The
 * products that read them are matmul.h's.
 */
#ifndef QUANTIZE_H
#define QUANTIZE_H

#include <stddef.h>
#include <stdint.h>

/* Scratch for a q8_0 or q4_0 product's inputs, quantized: for q8_0, (batch, stride) int16 values
 * and one scale per input (quantize_input); for q4_0, (batch, stride) int8 values with a scale and
 * the values' sum per block of 32 (quantize_input_blocks), rows of stride / 32 blocks, and for
 * the tiles that multiply them by signed codes the same values + 128 as unsigned bytes
 * (offset_input_bytes). */
typedef struct {
    int16_t *values;
    float *scales;
    int8_t *bytes;
    uint8_t *offset_bytes;
    float *block_scales;
    int32_t *block_sums;
    size_t stride; /* at least the widest input rounded up to a multiple of 64 */
} QuantizedInputs;

/* Allocates xq for `batch` inputs of up to `cols` values (stride: cols rounded up to a multiple
 * of 64), 64-byte aligned and left uninitialized: batch * stride int16 values and batch scales;
 * q4_0's int8 values, their unsigned copies, block scales and sums take 2.25 bytes a value in the
 * same memory (every matmul quantizes its own input before reading it, so the two are never
 * needed at once). Returns 0, or -1 when out of memory, what did fit left for
 * quantized_inputs_free. */
int quantized_inputs_alloc(QuantizedInputs *xq, int batch, int cols);
void quantized_inputs_free(QuantizedInputs *xq);

/* Bytes quantized_inputs_alloc takes per input of up to `cols` values. */
size_t quantized_input_bytes(int cols);

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

/* offset[j] = xq[j] + 128 (1..255 for quantize_input_blocks' -127..127) for the n values of xq:
 * AVX512-VNNI's and AVX2's byte products (vpdpbusd, vpmaddubsw) take one side unsigned, and
 * matmul's unpacked q4_0 tile makes the inputs that side (its codes signed). */
void offset_input_bytes(uint8_t *offset, const int8_t *xq, int n);

#endif
