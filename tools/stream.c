/* stream: the GB/s at which decode's matrix-vector product (matmul.c, batch 1) reads one dtype's
 * panels when they come from memory, not cache: the measurement behind decode_ahead's prefetch
 * distance.
 *
 *   build/stream dtype threads [rows cols layers]
 *
 * dtype is the header code (0 f32, 1 bf16, 2 q8_0, 3 f16, 4 q4_0; q8_0 in groups of 32) or a
 * GGUF block type's (5 q4_k, 6 q6_k: cols a multiple of 256, random blocks); the
 * default shape is 1.1B's w1 (5632, 2048) in 24 layers (1.1 GB of f32 panels, less for the
 * others), far past the L3. Random weights (packed by matrix_pack_panel) and inputs; matmul runs
 * over the layers in turn 20 times each, best of 7 runs. Prints G multiply-adds/s and GB/s of
 * panels read on stdout. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_args.h"
#include "bench_blocks.h"
#include "matmul.h"

int main(int argc, char **argv) {
    if (argc != 3 && argc != 6) {
        fprintf(stderr, "stream: usage: stream dtype threads [rows cols layers]\n");
        return 1;
    }
    int dtype = int_arg("stream", "dtype", argv[1], 0, DTYPE_Q6_K);
    int threads = int_arg("stream", "threads", argv[2], 1, 1024);
    /* rows * cols stays an int (2^30 at most), 20 * layers too */
    int rows = argc == 6 ? int_arg("stream", "rows", argv[3], 1, 32768) : 5632;
    int cols = argc == 6 ? int_arg("stream", "cols", argv[4], 32, 32768) : 2048;
    int layers = argc == 6 ? int_arg("stream", "layers", argv[5], 1, 1000) : 24, reps = 20 * layers;
    int multiple = dtype_kquant((DType)dtype) ? 256 : 32;
    if (cols % multiple) {
        fprintf(stderr, "stream: cols: \"%s\" is not a multiple of %d\n", argv[4], multiple);
        return 1;
    }
    Matrix m;
    matrix_init(&m, (DType)dtype, rows, cols, 32);
    size_t layer_bytes = (size_t)m.n_panels * m.panel_bytes;
    char *panels = panels_alloc(layers * layer_bytes); /* in the pages run packs weights into */
    /* source values: 4 bytes each covers every dtype's row-major input; bf16 and f16 get finite
     * bits (0x3c in each value's high byte) */
    unsigned char *values = malloc((size_t)rows * cols * 4);
    float *scales = malloc((size_t)rows * cols / 32 * sizeof(float));
    float *x = malloc(cols * sizeof(float)), *out = malloc(rows * sizeof(float));
    QuantizedInputs xq;
    if (!panels || !values || !scales || !x || !out || quantized_inputs_alloc(&xq, 1, cols) != 0) {
        fprintf(stderr, "stream: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < (size_t)rows * cols * 4; i++)
        values[i] = (dtype == 1 || dtype == 3) && i % 2 ? 0x3c : (unsigned char)rand();
    finite_block_scales((DType)dtype, values, (size_t)rows * cols / 256);
    for (int i = 0; i < rows * cols / 32; i++) scales[i] = 0.01f;
    for (int j = 0; j < cols; j++) x[j] = (rand() % 1000) / 500.0f - 1.0f;
    for (int l = 0; l < layers; l++)
        for (int q = 0; q < m.n_panels; q++)
            matrix_pack_panel(&m, panels + l * layer_bytes + (size_t)q * m.panel_bytes, values,
                              scales, q);
    m.data = panels;
    omp_set_num_threads(threads);
    double best = 1e30;
    for (int k = 0; k < 7; k++) {
        double t = omp_get_wtime();
        for (int r = 0; r < reps; r++) matmul(&(Product){out, &m}, 1, x, 1, r % layers, &xq);
        t = omp_get_wtime() - t;
        best = t < best ? t : best;
    }
    printf("dtype %d, %d threads, (%d, %d) x %d layers: %.1f G multiply-adds/s, %.1f GB/s\n", dtype,
           threads, rows, cols, layers, (double)rows * cols * reps / best / 1e9,
           (double)layer_bytes * reps / best / 1e9);
    fprintf(stderr, "stream: out[0] %g\n", out[0]); /* keeps the work */
    return 0;
}
