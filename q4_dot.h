/* The dot products of 4-bit codes by int8 inputs (or, as q4_0's prefill unpacks them, of the
 * codes less 8 by the inputs + 128): the inner step of both the q4_0 tile (matmul.c's q4_group)
 * and the Q4_K tile (kquant.c's q4k_tile). Both hold their codes in q4_0's blocks of 8 columns
 * (panel.h) and both read the inputs as quantize_input_blocks' int8 blocks of 32, so the step is
 * one: it lives here so that a change to it (an instruction set, the order of its sums) reaches
 * both tiles alike. The scales and the sums' starts, which differ, stay with the tiles.
 */
#ifndef Q4_DOT_H
#define Q4_DOT_H

#include <stddef.h>
#include <stdint.h>

#include "panel.h"
#include "simd.h"

enum {
    Q4_DOT_INPUTS = 4, /* the most inputs a call takes: the q4_0 and Q4_K tiles' widest */
    Q4_DOT_PANELS = 4, /* and the most panels: decode's */
};

/* Where q4_dots reads each panel's codes (at[r]), and in which form: q4_0's blocks of 8 columns
 * (panel.h: 4 * PANEL_ROWS bytes a block, two codes a byte), or `unpacked` (a constant once
 * inlined): each block's low nibbles then its high ones, a byte each (8 * PANEL_ROWS bytes a
 * block; unpack_block), as q4_0's and q4_k's prefill unpacks a batch's panels once (matmul.c's
 * widened_pair). With `signed_codes` (unpacked only, a constant once inlined) those bytes are the
 * codes less 8 (-8..7), and the inputs they meet are unsigned bytes (q4_unpack.h). */
typedef struct {
    const uint8_t *at[Q4_DOT_PANELS];
    int unpacked, signed_codes;
} Q4Codes;

/* One block's codes as q4_dots multiplies them: *low the codes of the block's columns 0..3 (one
 * byte each, 4 to a row's 32-bit lane), *high of 4..7, from `block` (packed, or unpacked as
 * Q4Codes' says). */
static ALWAYS_INLINE void unpack_block(const uint8_t *block, int unpacked, vecb *low, vecb *high) {
    if (unpacked) {
        *low = vecb_load(block);
        *high = vecb_load(block + 4 * PANEL_ROWS);
    } else {
        vecb_nibbles(vecb_load(block), low, high);
    }
}

/* sums[r][b] += panel r's codes . input b's bytes over `columns` columns (a multiple of 8), the
 * codes from codes->at[r] (Q4Codes), the inputs from x8[b] (int8 values, or with signed codes
 * unsigned bytes); np panels (at most 4, decode's) and nb <= Q4_DOT_INPUTS inputs, constants once
 * inlined. The caller starts the sums (simd.h's vecw_start).
 * One vector load of a block is each row's 8 codes in a 32-bit lane, the low nibbles columns 0..3
 * and the high ones 4..7, so that vecw_dot_u8 (vpmaddubsw) multiplies the codes (unsigned 0..15)
 * by 4 broadcast inputs, or 4 broadcast unsigned inputs by the signed codes, and adds pairs into
 * int16 lanes, two per row (vpdpbusd's int32 lanes, one per row, with AVX512-VNNI). Exact while a
 * lane stays within int16: 16 products a block of 32 come to at most 16 * 15 * 127 = 30480 of
 * codes and int8 inputs (-127..127), 16 * 8 * 255 = 32640 of signed codes (-8..7) and unsigned
 * inputs (the test q4_0_product_at_the_largest_codes_and_inputs meets both). Each block of 8
 * columns loads the panels' codes first, then passes each input's two broadcasts to all of them,
 * so that the live vectors are the sums, the panels' codes and one input's (2 x 4 tile on AVX2:
 * 8 + 4 + 2 of the 16 registers), and OPAQUE makes each sum at its block (simd.h: GCC had moved
 * them all to the group's end and held the products on the stack). q4_0's 2 x 4 prefill products
 * at 110M ran 1.27x (build/gemm, one thread, median of 8 alternating rounds: 103.6 against 81.4
 * GFLOP/s). */
static ALWAYS_INLINE void q4_dots(vecw sums[][Q4_DOT_INPUTS], const Q4Codes *codes,
                                  const int8_t *const x8[], int nb, int np, int columns) {
    int block_bytes = (codes->unpacked ? 8 : 4) * PANEL_ROWS;
    UNROLL
    for (int i = 0; i < columns; i += 8) {
        vecb low[Q4_DOT_PANELS], high[Q4_DOT_PANELS];
        UNROLL
        for (int r = 0; r < np; r++)
            unpack_block(codes->at[r] + (size_t)(i / 8) * block_bytes, codes->unpacked, &low[r],
                         &high[r]);
        UNROLL
        for (int b = 0; b < nb; b++) {
            vecb low_quad = vecb_set1_quad(x8[b] + i), high_quad = vecb_set1_quad(x8[b] + i + 4);
            UNROLL
            for (int r = 0; r < np; r++)
                sums[r][b] =
                    codes->signed_codes
                        ? vecw_dot_u8(vecw_dot_u8(sums[r][b], low_quad, low[r]), high_quad, high[r])
                        : vecw_dot_u8(vecw_dot_u8(sums[r][b], low[r], low_quad), high[r],
                                      high_quad);
        }
        UNROLL
        for (int r = 0; r < np; r++) {
            UNROLL
            for (int b = 0; b < nb; b++) OPAQUE(sums[r][b]); /* made here: see OPAQUE */
        }
    }
}

#endif
