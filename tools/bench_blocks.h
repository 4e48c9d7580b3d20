/* Random K-quant blocks for the speed tools (tools/stream.c, tools/gemm.c): random bytes are
 * random codes and scales, but their fp16 block scales must be finite normal numbers, or a
 * product would run on NaN, infinities or subnormals (an Intel core takes a slow assist for
 * those) and time something no model file holds. */
#ifndef BENCH_BLOCKS_H
#define BENCH_BLOCKS_H

#include <stddef.h>

#include "dtype.h"

/* The fp16 scales of n K-quant blocks at `values` made 1 to 1.25 (0x3c their high byte): q4_k's d
 * and dmin lead its 144 bytes, q6_k's d ends its 210. Other dtypes are left as they are. */
static inline void finite_block_scales(DType dtype, unsigned char *values, size_t n) {
    for (size_t b = 0; b < n && dtype == DTYPE_Q4_K; b++)
        values[144 * b + 1] = values[144 * b + 3] = 0x3c;
    for (size_t b = 0; b < n && dtype == DTYPE_Q6_K; b++) values[210 * b + 209] = 0x3c;
}

#endif
