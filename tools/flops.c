/* flops: the machine's peak fp32 multiply-add rate, the bound of batched prefill.
 *
 *   build/flops [repeats]
 *
 * Every OpenMP thread runs CHAINS independent chains of vector FMAs (simd.h, as the matmul
 * kernel uses them) on registers only; prints the median over the repeats of the total GFLOP/s
 * (2 flops per multiply-add per lane) on stdout. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "simd.h"

/* enough independent chains to cover the FMA latency of every target */
#define CHAINS 12
#define STEPS  20000000L

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int repeats = argc > 1 ? atoi(argv[1]) : 5;
    if (repeats < 1 || repeats > 100) {
        fprintf(stderr, "flops: usage: flops [repeats 1..100]\n");
        return 1;
    }
    double *gflops = malloc(repeats * sizeof(double));
    if (!gflops) return 1;
    float checksum = 0.0f;
    for (int r = 0; r < repeats; r++) {
        double start = omp_get_wtime();
#pragma omp parallel reduction(+ : checksum)
        {
            vecf acc[CHAINS], scale = vec_set1(0.9999f), shift = vec_set1(1e-4f);
            for (int c = 0; c < CHAINS; c++) acc[c] = vec_set1(c * 1e-3f);
            for (long i = 0; i < STEPS; i++)
                for (int c = 0; c < CHAINS; c++) acc[c] = vec_fmadd(acc[c], scale, shift);
            for (int c = 0; c < CHAINS; c++) checksum += vec_sum(acc[c]); /* keeps the work */
        }
        double seconds = omp_get_wtime() - start;
        gflops[r] = 2.0 * CHAINS * VEC_WIDTH * STEPS * omp_get_max_threads() / seconds / 1e9;
    }
    qsort(gflops, repeats, sizeof(double), by_value);
    printf("%.1f\n", gflops[repeats / 2]);
    fprintf(stderr, "flops: %d threads, checksum %g\n", omp_get_max_threads(), checksum);
    free(gflops);
    return 0;
}
