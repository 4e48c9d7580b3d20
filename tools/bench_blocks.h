/* Random weights and inputs for the speed tools (tools/stream.c, gemm.c, tile.c, attend.c). Random
 * bytes are random K-quant codes and scales, but their fp16 block scales must be finite normal
 * numbers, or a product would run on NaN, infinities or subnormals (an Intel core takes a slow
 * assist for those) and time something no model file holds. */
#ifndef BENCH_BLOCKS_H
#define BENCH_BLOCKS_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "dtype.h"
#include "panel.h"

/* The fp16 scales of n K-quant blocks at `values` made 1 to 1.25 (0x3c their high byte): q4_k's d
 * and dmin lead its 144 bytes, q6_k's d ends its 210. Other dtypes are left as they are. */
static inline void finite_block_scales(DType dtype, unsigned char *values, size_t n) {
    for (size_t b = 0; b < n && dtype == DTYPE_Q4_K; b++)
        values[144 * b + 1] = values[144 * b + 3] = 0x3c;
    for (size_t b = 0; b < n && dtype == DTYPE_Q6_K; b++) values[210 * b + 209] = 0x3c;
}

/* n floats uniform in [-0.5, 0.5] (by rand), or NULL when memory runs out. */
static inline float *random_floats(size_t n) {
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; x && i < n; i++) x[i] = (float)rand() / RAND_MAX - 0.5f;
    return x;
}

/* A stack of n_layers random matrices (rows, cols) of dtype, packed, into *out; *f32 gets one
 * layer's values as floats. Returns 0, or -1 when memory runs out. */
static inline int random_matrix(Matrix *out, DType dtype, int n_layers, int rows, int cols,
                                float **f32) {
    Matrix m;
    matrix_init(&m, dtype, rows, cols, dtype_grouped(dtype) ? 32 : 0);
    size_t n = (size_t)rows * cols, layer = (size_t)m.n_panels * m.panel_bytes;
    char *panels = panels_alloc(n_layers * layer); /* in the pages run packs weights into */
    float *values = malloc(n * sizeof(float)), *scales = malloc((n / 32 + 1) * sizeof(float));
    uint16_t *bits = malloc(n * sizeof(uint16_t));
    int8_t *q8 = malloc(n);
    if (!panels || !values || !scales || !bits || !q8) return -1;
    for (size_t i = 0; i < n; i++) {
        values[i] = (float)rand() / RAND_MAX - 0.5f;
        bits[i] = (uint16_t)(0x3000 | (rand() & 0x3ff)); /* normal numbers in f16 and bf16 */
        q8[i] = (int8_t)(rand() % 255 - 127);
    }
    finite_block_scales(dtype, (unsigned char *)q8, n / 256);
    for (size_t i = 0; i < n / 32 + 1; i++) scales[i] = 0.01f;
    const void *src = dtype == DTYPE_F32                          ? (const void *)values
                      : dtype == DTYPE_BF16 || dtype == DTYPE_F16 ? (const void *)bits
                                                                  : (const void *)q8;
    for (int l = 0; l < n_layers; l++)
        for (int p = 0; p < m.n_panels; p++)
            matrix_pack_panel(&m, panels + l * layer + p * m.panel_bytes, src, scales, p);
    m.data = panels;
    free(bits), free(q8), free(scales);
    *f32 = values;
    *out = m;
    return 0;
}

#endif
