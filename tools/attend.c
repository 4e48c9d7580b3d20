/* attend: decode's attention alone (attention.c, one query against a layer's kv cache), the
 * measurement behind mix_values' passes.
 *
 *   build/attend n_heads head_size pos      e.g. OMP_NUM_THREADS=1 build/attend 12 64 70
 *
 * One query at position pos over pos + 1 cached positions of random keys and values, n_heads
 * heads of head_size each (as many kv heads: 110M is 12 64, 15M 6 48; n_heads * head_size up to
 * 8192, pos up to 16383); at short contexts the cache is a few hundred KiB to a few MiB, so that it
 * comes mostly from cache. Prints microseconds a call, the best of 15 runs of about 200,000
 * positions' work each. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "attention.h"
#include "bench_args.h"
#include "bench_blocks.h"

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "attend: usage: attend n_heads head_size pos\n");
        return 1;
    }
    int n_heads = int_arg("attend", "n_heads", argv[1], 1, 256);
    int head_size = int_arg("attend", "head_size", argv[2], 1, 1024);
    int pos = int_arg("attend", "pos", argv[3], 0, 16383), seq_len = pos + 1;
    size_t dim = (size_t)n_heads * head_size;
    if (dim > 8192) { /* keys and values of up to 16384 positions: 1 GiB at most */
        fprintf(stderr, "attend: n_heads * head_size = %zu is past 8192\n", dim);
        return 1;
    }
    float *keys = random_floats(seq_len * dim), *values = random_floats(seq_len * dim);
    float *att = malloc((size_t)n_heads * 4 * seq_len * sizeof(float));
    float *q = random_floats(dim), *out = malloc(dim * sizeof(float));
    if (!keys || !values || !att || !q || !out) {
        fprintf(stderr, "attend: out of memory\n");
        return 1;
    }
    LayerCache lc = {keys, values, att, n_heads, n_heads, head_size, seq_len};
    int calls = 200000 / seq_len + 1;
    double best = 1e30;
    for (int r = 0; r < 15; r++) {
        double t = omp_get_wtime();
        for (int i = 0; i < calls; i++) attention(&lc, q, out, pos, 1);
        t = omp_get_wtime() - t;
        best = t < best ? t : best;
    }
    printf("attend: %d heads of %d, position %d: %.3f us a call\n", n_heads, head_size, pos,
           best / calls * 1e6);
    fprintf(stderr, "attend: out[0] %g\n", out[0]); /* keeps the work */
    return 0;
}
