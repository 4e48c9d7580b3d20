/* Timing for the tokenizer benchmarks (tools/bench_tokenizer.c, tools/bench_llama_tokenize.c):
 * the encoding thread's CPU time, since the machine is shared and CPU time does not count the
 * time other processes hold the core, and the median of several runs. */
#ifndef BENCH_TIME_H
#define BENCH_TIME_H

#include <stdlib.h>
#include <time.h>

static inline double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of n times (sorted in place). */
static inline double median_seconds(double *seconds, int n) {
    qsort(seconds, (size_t)n, sizeof *seconds, by_value);
    return seconds[n / 2];
}

#endif
