/* Times tokenizer_encode on a text file, for tools/bench_tokenizer.py.
 *
 *   build/bench_tokenizer TOKENIZER FILE REPEATS
 *
 * Prints one line: the number of ids (BOS included) and the median time of REPEATS encodes of the
 * whole file, in seconds of this thread's CPU time (loading and reading excluded): the machine is
 * shared, and CPU time does not count the time other processes hold the core.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tokenizer.h"

static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int repeats = argc == 4 ? atoi(argv[3]) : 0;
    if (repeats < 1) {
        fprintf(stderr, "usage: bench_tokenizer TOKENIZER FILE REPEATS\n");
        return 1;
    }
    char err[1024];
    Tokenizer t;
    if (tokenizer_load(&t, argv[1], err, sizeof err) != 0) {
        fprintf(stderr, "bench_tokenizer: %s\n", err);
        return 1;
    }
    FILE *f = fopen(argv[2], "rb");
    if (!f || fseek(f, 0, SEEK_END) != 0) {
        fprintf(stderr, "bench_tokenizer: cannot read %s\n", argv[2]);
        return 1;
    }
    long size = ftell(f);
    rewind(f);
    char *text = malloc((size_t)size + 1);
    int *ids = malloc(((size_t)size * 3 + 3) * sizeof *ids);
    double *seconds = malloc((size_t)repeats * sizeof *seconds);
    if (!text || !ids || !seconds || fread(text, 1, (size_t)size, f) != (size_t)size) {
        fprintf(stderr, "bench_tokenizer: cannot read %s\n", argv[2]);
        return 1;
    }
    fclose(f);
    text[size] = '\0';
    int n = 0;
    for (int r = 0; r < repeats; r++) {
        double start = cpu_seconds();
        n = tokenizer_encode(&t, text, 1, 0, ids);
        seconds[r] = cpu_seconds() - start;
    }
    qsort(seconds, (size_t)repeats, sizeof *seconds, by_value);
    printf("%d %.9f\n", n, seconds[repeats / 2]);
    free(seconds);
    free(ids);
    free(text);
    tokenizer_free(&t);
    return 0;
}
