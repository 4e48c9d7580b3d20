/* Sizes in whole cache lines: aligned_alloc takes a size that is a multiple of its alignment, and
 * every buffer the kernels read by whole vectors starts on a 64-byte line (load.c, quantize.c,
 * state.c). */
#ifndef ALIGN_H
#define ALIGN_H

#include <stddef.h>

/* n rounded up to a multiple of 64. */
static inline size_t round_up_64(size_t n) {
    return (n + 63) / 64 * 64;
}

#endif
