/* Norm microbenchmark: every norm of run's table (norm_names(): rmsnorm, layernorm and the
 * siblings) over rows x dim fp32 matrices, against a streaming kernel that reads and writes the
 * same bytes once (the memory-bandwidth bound).
 *
 *   build/bench_norm [REPEATS]
 *
 * Prints "threads N", then "norms" and the norms' names in the table's order, then one
 * tab-separated line per shape: dim, rows, the median seconds of each norm and of the stream
 * kernel over REPEATS runs (default 11), all with OpenMP over rows and the thread count OpenMP
 * chooses (OMP_NUM_THREADS). tools/bench_norm.py turns this into the tables, next to PyTorch.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_args.h"
#include "norm.h"

/* 32 * 512 * 768: the articles' (batch, sequence, dim) shape; every dim gets this many floats */
#define ELEMENTS    (32L * 512 * 768)
#define MAX_REPEATS 1000

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

/* The norm named name with its parameters as a model passes them: its scalar (eps 1e-5, or its
 * log, or DyT's alpha 0.5, the paper's default) and bias where it reads one. */
static NormCall norm_call(const char *name, const float *weight, const float *bias) {
    NormFn fn = norm_by_name(name);
    NormScalar scalar = norm_scalar(fn);
    float eps = scalar == NORM_TAKES_LOG_EPS ? -11.512925f /* log(1e-5) */
                : scalar == NORM_TAKES_ALPHA ? 0.5f
                                             : 1e-5f;
    return (NormCall){fn, weight, norm_reads_bias(fn) ? bias : NULL, eps};
}

/* The median seconds of `repeats` (at most MAX_REPEATS) runs of norm (or of the stream kernel,
 * norm.fn NULL). */
static double median_seconds(NormCall norm, float *out, const float *x, long rows, int dim,
                             int repeats) {
    double t[MAX_REPEATS];
    for (int r = 0; r < repeats; r++) {
        double start = now_seconds();
        if (norm.fn)
            norm_rows(norm, out, x, rows, dim);
        else
            stream(out, x, rows * dim);
        t[r] = now_seconds() - start;
    }
    qsort(t, repeats, sizeof(double), by_value);
    return t[repeats / 2];
}

int main(int argc, char **argv) {
    int repeats = argc > 1 ? int_arg("bench_norm", "REPEATS", argv[1], 1, MAX_REPEATS) : 11;
    static const int dims[] = {64, 288, 768, 2048, 4096, 8192, 16384};
    float *x = malloc(ELEMENTS * sizeof(float)), *out = malloc(ELEMENTS * sizeof(float));
    float *weight = malloc(16384 * sizeof(float)), *bias = malloc(16384 * sizeof(float));
    if (!x || !out || !weight || !bias) {
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
    /* the table's names, split at '|' in a copy of norm_names() */
    char names[256];
    const char *norms[32];
    int n_norms = 0;
    snprintf(names, sizeof(names), "%s", norm_names());
    for (char *save, *name = strtok_r(names, "|", &save); name && n_norms < 32;
         name = strtok_r(NULL, "|", &save))
        norms[n_norms++] = name;
    printf("threads\t%d\nnorms", omp_get_max_threads());
    for (int k = 0; k < n_norms; k++) printf("\t%s", norms[k]);
    printf("\n");
    for (size_t d = 0; d < sizeof(dims) / sizeof(dims[0]); d++) {
        int dim = dims[d];
        long rows = ELEMENTS / dim;
        printf("%d\t%ld", dim, rows);
        for (int k = 0; k < n_norms; k++)
            printf("\t%.9f",
                   median_seconds(norm_call(norms[k], weight, bias), out, x, rows, dim, repeats));
        printf("\t%.9f\n", median_seconds((NormCall){0}, out, x, rows, dim, repeats));
    }
    free(x);
    free(out);
    free(weight);
    free(bias);
    return 0;
}
