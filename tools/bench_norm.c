/* Norm microbenchmark: rmsnorm and layernorm over rows x dim fp32 matrices, against a streaming
 * kernel that reads and writes the same bytes once (the memory-bandwidth bound).
 *
 *   build/bench_norm [REPEATS]
 *
 * Prints one tab-separated line per shape: dim, rows, and the median seconds of rmsnorm,
 * layernorm and the stream kernel over REPEATS runs (default 11), all with OpenMP over rows and
 * the thread count OpenMP chooses (OMP_NUM_THREADS). tools/bench_norm.py turns this into the
 * table, next to PyTorch.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "norm.h"

/* 32 * 512 * 768: the articles' (batch, sequence, dim) shape; every dim gets this many floats */
#define ELEMENTS (32L * 512 * 768)

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Applies the norm to each row of x (rows, dim) into out, rows split over the threads. */
static void norm_rows(NormCall norm, float *out, const float *x, long rows, int dim) {
#pragma omp parallel for schedule(static)
    for (long r = 0; r < rows; r++)
        norm.fn(out + r * dim, x + r * dim, norm.weight, norm.bias, dim, norm.eps);
}

/* out = 2 x: one read and one write of every element, as a norm needs at least. */
static void stream(float *out, const float *x, long n) {
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) out[i] = 2.0f * x[i];
}

int main(int argc, char **argv) {
    int repeats = argc > 1 ? atoi(argv[1]) : 11;
    if (repeats < 1 || repeats > 1000) {
        fprintf(stderr, "bench_norm: REPEATS must be in 1..1000\n");
        return 1;
    }
    static const int dims[] = {64, 288, 768, 2048, 4096, 8192, 16384};
    float *x = malloc(ELEMENTS * sizeof(float)), *out = malloc(ELEMENTS * sizeof(float));
    float *weight = malloc(16384 * sizeof(float)), *bias = malloc(16384 * sizeof(float));
    double *t = malloc(repeats * sizeof(double));
    if (!x || !out || !weight || !bias || !t) {
        fprintf(stderr, "bench_norm: out of memory\n");
        return 1;
    }
    /* first touch by the threads that will use the pages */
#pragma omp parallel for schedule(static)
    for (long i = 0; i < ELEMENTS; i++) {
        x[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 0.9f;
        out[i] = 0.0f;
    }
    for (int i = 0; i < 16384; i++) weight[i] = 1.0f + i % 7 * 0.01f, bias[i] = 0.01f * (i % 3);
    printf("threads\t%d\n", omp_get_max_threads());
    for (size_t d = 0; d < sizeof(dims) / sizeof(dims[0]); d++) {
        int dim = dims[d];
        long rows = ELEMENTS / dim;
        double median[3];
        for (int k = 0; k < 3; k++) {
            for (int r = 0; r < repeats; r++) {
                double start = now_seconds();
                if (k == 0) norm_rows((NormCall){rmsnorm, weight, NULL, 1e-5f}, out, x, rows, dim);
                if (k == 1)
                    norm_rows((NormCall){layernorm, weight, bias, 1e-5f}, out, x, rows, dim);
                if (k == 2) stream(out, x, rows * dim);
                t[r] = now_seconds() - start;
            }
            qsort(t, repeats, sizeof(double), by_value);
            median[k] = t[repeats / 2];
        }
        printf("%d\t%ld\t%.9f\t%.9f\t%.9f\n", dim, rows, median[0], median[1], median[2]);
    }
    free(x);
    free(out);
    free(weight);
    free(bias);
    free(t);
    return 0;
}
