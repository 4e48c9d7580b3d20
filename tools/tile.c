/* tile: prefill's widest tile alone, its panels and inputs in L1, against the multiply-add peak
 * (tools/flops.c): what matmul.c's tile instructions give on this machine with nothing to wait
 * for, the ceiling beside which prefill's products (tools/gemm.c) are read (issue 29, goal 2).
 *
 *   build/tile DTYPE [columns] [repeats]     e.g. OMP_NUM_THREADS=1 build/tile q4_0
 *
 * DTYPE f32 (f16's and bf16's prefill runs the f32 tile too, over its panels widened once a
 * batch), q8_0 or q4_0 (its codes unpacked, as prefill's widened_pair unpacks them): one tile of
 * two panels (2 * PANEL_ROWS rows) times the kernel's widest run of inputs (TILE_INPUTS,
 * TILE_INPUTS_Q8), `columns` columns of them (default 256: f32's panels 32 KiB and its inputs 8,
 * within a 48 KiB L1), again and again, on each OpenMP thread its own. Prints the fastest of the
 * repeats in GFLOP/s, 2 per multiply-add, by each thread's CPU time, the threads' rates added. The
 * tile is matmul.c's own code: this file includes matmul.c, whose tiles are static. */
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "bench_args.h"
#include "bench_blocks.h"
#include "matmul.c"

/* The calling thread's CPU seconds. */
static double thread_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* GFLOP/s of dtype's widest tile over `columns` columns on this thread, its own weights and
 * inputs, run for about `flop` multiply-add operations; 0 when memory runs out, -1 when its
 * outputs are not matmul's for the same weights and inputs, bit for bit (matmul.c: each output
 * one chain whatever the tile), and what was timed was something else. */
static double tile_rate(DType dtype, int columns, double flop) {
    int inputs = dtype == DTYPE_F32 ? TILE_INPUTS : TILE_INPUTS_Q8, rows = 2 * PANEL_ROWS;
    double call_flop = 2.0 * rows * columns * inputs;
    long calls = (long)(flop / call_flop) + 1;
    Matrix w, chunk;
    float *w_values, *x = random_floats((size_t)inputs * columns);
    float *out = malloc((size_t)inputs * rows * sizeof(float));
    float *ref = malloc((size_t)inputs * rows * sizeof(float));
    char *unpacked = aligned_alloc(64, UNPACKED_BYTES);
    QuantizedInputs xq;
    int ok = !random_matrix(&w, dtype, 1, rows, columns, &w_values) && x && out && ref &&
             unpacked && !quantized_inputs_alloc(&xq, inputs, columns);
#pragma omp barrier /* every thread here, so that their timed loops run side by side */
    if (!ok) return 0.0;
    for (int b = 0; b < inputs; b++) quantize_row(&xq, dtype, x, b, columns, 1); /* as prefill's */
    Inputs in = inputs_of(x, columns, &xq);
    /* the next panels it asks for are its own, as if the batch had one pair of panels */
    Panels p = {&w, w.data, 0, w.data, 1, 0};
    if (dtype == DTYPE_Q4_0) {
        matrix_init(&chunk, DTYPE_Q4_0, rows, columns, 32);
        q4_unpack(&chunk, unpacked, &w, w.data, 2, 0);
        chunk.data = unpacked;
        p = (Panels){&chunk, unpacked, 0, unpacked, 1, 1};
    }
    Tile t = {{out, (size_t)rows, 0}, in, p, 2, inputs};
    double start = thread_seconds();
    for (long i = 0; i < calls; i++) DTYPES[dtype].tiles(&t);
    double seconds = thread_seconds() - start;
    /* matmul's own way to the same bits: for q4_0 the tile of packed codes (a batch of 4 is
     * not unpacked), whose sums are the same integers; on one thread (its parallel region nested
     * in the caller's) */
    matmul(&(Product){ref, &w}, 1, x, inputs, 0, &xq);
    int same = !memcmp(ref, out, (size_t)inputs * rows * sizeof(float));
    free((void *)w.data), free(w_values), free(x), free(out), free(ref), free(unpacked);
    quantized_inputs_free(&xq);
    return same ? call_flop * calls / seconds / 1e9 : -1.0;
}

int main(int argc, char **argv) {
    int dtype = -1;
    const DType kinds[] = {DTYPE_F32, DTYPE_Q8_0, DTYPE_Q4_0};
    for (int k = 0; argc > 1 && k < 3; k++)
        if (!strcmp(argv[1], DTYPES[kinds[k]].name)) dtype = kinds[k];
    if (dtype < 0 || argc > 4) {
        fprintf(stderr, "tile: usage: tile f32|q8_0|q4_0 [columns] [repeats]\n");
        return 1;
    }
    /* columns: whole groups of 32, q8_0's and q4_0's (and q4_0's unpacked chunk holds
     * UNPACK_COLUMNS) */
    int columns = argc > 2 ? int_arg("tile", "columns", argv[2], 32, UNPACK_COLUMNS) : 256;
    int repeats = argc > 3 ? int_arg("tile", "repeats", argv[3], 1, 1000) : 3;
    if (columns % 32) {
        fprintf(stderr, "tile: columns: \"%s\" is not a multiple of 32\n", argv[2]);
        return 1;
    }
    double best = 0.0;
    int failed = 0, differed = 0, threads = 0;
    for (int r = 0; r < repeats; r++) {
        double total = 0.0;
#pragma omp parallel reduction(+ : total, failed, differed)
        {
            if (omp_get_thread_num() == 0) threads = omp_get_num_threads();
            double rate = tile_rate((DType)dtype, columns, 5e10); /* 1/4 s at 200 GFLOP/s */
            total += rate;
            failed += rate == 0.0;
            differed += rate < 0.0;
        }
        best = total > best ? total : best;
    }
    if (failed || differed) {
        fprintf(stderr, "tile: %s\n", failed ? "out of memory" : "its outputs are not matmul's");
        return 1;
    }
    printf("tile %s columns %d threads %d: %.1f GFLOP/s\n", DTYPES[dtype].name, columns, threads,
           best);
    return 0;
}
