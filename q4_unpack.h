/* q4_0's panels as prefill multiplies them: matmul.c unpacks a chunk of a batch's q4_0 panels once
 * (widened_pair) into the form its unpacked tile reads (q4_group), as kquant.h's
 * kquant_unpack_q4_k does for q4_k's.
 */
#ifndef Q4_UNPACK_H
#define Q4_UNPACK_H

#include <stdint.h>

#include "panel.h"

/* The bytes of an unpacked group's head: its PANEL_ROWS float32 scales and int32 sum starts,
 * before its codes. */
enum { Q4_UNPACKED_HEAD = PANEL_ROWS * (int)(sizeof(float) + sizeof(int32_t)) };

/* The group of the np q4_0 panels of w from `panel` on that starts at column `from` (a multiple of
 * 32) and those after it, to chunk->cols columns, unpacked at `to`, one panel after the other, and
 * chunk->panel_bytes set to a panel's bytes there: each group's PANEL_ROWS scales as float32 (from
 * fp16 exactly where half_scales), its PANEL_ROWS starts (int32: -128 times the sum of the row's
 * codes less 8), then its blocks of 8 columns as q4_dot.h's unpack_block reads them unpacked, a
 * block's low nibbles and then its high ones, a byte each, less 8 (signed). The tile multiplies
 * these by the inputs + 128 (matmul.c's x8_offset), which it can as vpdpbusd's signed and unsigned
 * bytes: its sums start from the start, which takes the 128s' products off again, so that the sum
 * is the codes less 8 times the inputs, the same integer as the packed tile's codes times the
 * inputs less 8 times their sum (matmul.c's q4_group): the same bits. */
void q4_unpack(Matrix *chunk, char *to, const Matrix *w, const char *panel, int np, int from);

#endif
