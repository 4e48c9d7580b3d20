/* ggml's tensor blocks (gguf.h lists their layouts) read row by row: each type run reads decoded
 * to float32 as ggml's dequantize_row_* computes it (the same float operations in the same order,
 * so the same bits: tests/test_gguf_run.py holds them to libggml's own), and the types whose values
 * one of run's dtypes holds exactly regrouped into that dtype's row layout. Which GGUF type
 * becomes which dtype is dtype.c's table (GGUF_DTYPES); this file only reads blocks.
 *
 * Every function reads one row of n values, n a multiple of the type's block (gguf.h: 32 values
 * for Q4_0 .. Q8_0, 256 for the K types), from `row`, which need not be aligned.
 */
#ifndef GGUF_BLOCKS_H
#define GGUF_BLOCKS_H

#include <stdint.h>

/* To float32: out[n]. The fp16 scales are widened exactly; Q4_1, Q5_1 and the K types compute
 * d * q + m (or d * q - m) in float as ggml does, which rounds. */
void gguf_f32_to_f32(const uint8_t *row, int n, float *out);
void gguf_f16_to_f32(const uint8_t *row, int n, float *out);
void gguf_bf16_to_f32(const uint8_t *row, int n, float *out);
void gguf_q8_0_to_f32(const uint8_t *row, int n, float *out);
void gguf_q4_0_to_f32(const uint8_t *row, int n, float *out);
void gguf_q4_1_to_f32(const uint8_t *row, int n, float *out);
void gguf_q5_0_to_f32(const uint8_t *row, int n, float *out);
void gguf_q5_1_to_f32(const uint8_t *row, int n, float *out);
void gguf_q4_K_to_f32(const uint8_t *row, int n, float *out);
void gguf_q5_K_to_f32(const uint8_t *row, int n, float *out);
void gguf_q6_K_to_f32(const uint8_t *row, int n, float *out);

/* Sub-block j's (0..7) 6-bit scale and min of a Q4_K or Q5_K block's scales[12] (gguf.h): for
 * j < 4 the low 6 bits of bytes j and j + 4; else byte j + 4's nibbles with the top 2 bits of
 * bytes j - 4 and j above them. kquant.c reads its panels' scales by it too. */
void gguf_k_scale_min(const uint8_t *s, int j, int *scale, int *min);

/* Into run's q8_0 row layout with groups of 32: values (n int8) and scales (n / 32 float32), the
 * same values exactly: Q8_0's int8 and Q5_0's 5-bit q - 16 (in -16..15), each with its block's d
 * widened. */
void gguf_q8_0_as_q8_0(const uint8_t *row, int n, void *values, float *scales);
void gguf_q5_0_as_q8_0(const uint8_t *row, int n, void *values, float *scales);

/* Into run's q4_0 row layout: codes (n / 2 bytes, value j in byte j / 2, the low nibble for even
 * j) and scales (n / 32 float32): ggml's byte j of a block holds values j and j + 16, run's byte
 * j values 2j and 2j + 1; the codes and d are the same. */
void gguf_q4_0_as_q4_0(const uint8_t *row, int n, void *values, float *scales);

#endif
