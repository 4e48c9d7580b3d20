/* bandwidth: the machine's DRAM read bandwidth, as decode of a model larger than the caches sees
 * it.
 *
 *   build/bandwidth [MiB] [repeats]
 *
 * Sums a MiB-sized float array (default 2048 MiB, far past any L3) with all OpenMP threads, as a
 * matrix-vector product streams its weights, and prints the median GB/s (1e9 bytes/s) over the
 * repeats on stdout. */
#define _DEFAULT_SOURCE /* madvise */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "bench_args.h"
#include "simd.h"

/* This thread's share of sum(a[0..n)), in four vector accumulators (simd.h) so that the adds
 * keep up with memory: one running sum would wait on each add, and measure add latency. */
static float sum_part(const float *a, size_t n) {
    size_t per = (n / omp_get_num_threads() + 4 * VEC_WIDTH - 1) / (4 * VEC_WIDTH) * 4 * VEC_WIDTH;
    size_t start = per * omp_get_thread_num(), end = start + per < n ? start + per : n;
    vecf acc[4] = {vec_zero(), vec_zero(), vec_zero(), vec_zero()};
    size_t i = start;
    for (; i + 4 * VEC_WIDTH <= end; i += 4 * VEC_WIDTH)
        for (int k = 0; k < 4; k++) acc[k] = vec_add(acc[k], vec_load(a + i + k * VEC_WIDTH));
    float sum = vec_sum(vec_add(vec_add(acc[0], acc[1]), vec_add(acc[2], acc[3])));
    for (; i < end; i++) sum += a[i];
    return sum;
}

#define HUGE_PAGE (2u << 20)

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    /* at most 1 TiB */
    size_t mib = argc > 1 ? (size_t)int_arg("bandwidth", "MiB", argv[1], 1, 1 << 20) : 2048;
    int repeats = argc > 2 ? int_arg("bandwidth", "repeats", argv[2], 1, 100) : 7;
    size_t n = mib * 1024 * 1024 / sizeof(float);
    /* in 2 MiB pages where the kernel allows (transparent huge pages): faulting in a GiB of 4 KiB
     * pages takes seconds on a VM, which make bench would pay before every measurement */
    /* aligned_alloc's size must be a multiple of the alignment (C11): an odd MiB rounds up */
    size_t bytes = (n * sizeof(float) + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
    float *a = aligned_alloc(HUGE_PAGE, bytes);
    if (a) madvise(a, bytes, MADV_HUGEPAGE);
    if (!a) {
        fprintf(stderr, "bandwidth: cannot allocate %zu MiB\n", mib);
        return 1;
    }
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) a[i] = (float)(i & 7); /* touch every page on its thread */

    double *gbs = malloc(repeats * sizeof(double));
    double checksum = 0.0;
    for (int r = 0; r < repeats; r++) {
        double start = omp_get_wtime();
        float sum = 0.0f;
#pragma omp parallel reduction(+ : sum)
        sum = sum_part(a, n);
        gbs[r] = n * sizeof(float) / (omp_get_wtime() - start) / 1e9;
        checksum += sum; /* keeps the reads from being optimized away */
    }
    qsort(gbs, repeats, sizeof(double), by_value);
    printf("%.2f\n", gbs[repeats / 2]);
    fprintf(stderr, "bandwidth: %zu MiB, %d threads, checksum %g\n", mib, omp_get_max_threads(),
            checksum);
    free(gbs);
    free(a);
    return 0;
}
