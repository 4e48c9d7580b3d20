/* gemm: batched prefill's matrix products alone, timed against the multiply-add peak
 * (tools/flops.c) and, where the library is installed, OpenBLAS's sgemm on the same shapes.
 *
 *   build/gemm SHAPE DTYPE [batch] [repeats]     e.g. OMP_NUM_THREADS=1 build/gemm 110M f32 128
 *   build/gemm square [n] [repeats]              OpenBLAS alone, n x n x n (default 3072)
 *
 * SHAPE is export.py's 15M, 110M or 1.1B (dim, hidden_dim, n_layers); the products are one
 * forward pass's over a batch of positions, as model.c calls matmul: wq, wk and wv (dim, dim) in
 * one call, wo (dim, dim), w1 and w3 (hidden_dim, dim) in one, w2 (dim, hidden_dim), layer after
 * layer, the weights random (their values do not change the time; the kv heads are taken equal to
 * the heads, so the 1.1B's wk and wv are larger than TinyLlama's). Prints the fastest of the
 * repeats in GFLOP/s, 2 per multiply-add, by the process's CPU time shared among its threads (a
 * machine shared with other work deschedules it: its CPU time is what the products took while
 * they ran; a thread waiting at a barrier counts as busy unless OMP_WAIT_POLICY=passive), and, with
 * libopenblas.so.0 (Debian's libopenblas0-pthread), its cblas_sgemm over the same f32 products on
 * as many threads (OMP_NUM_THREADS): a measured ceiling. `square` times OpenBLAS's sgemm alone on
 * one large square product, where a tuned GEMM is at its fastest, so as to read what such a GEMM
 * reaches of the peak on this machine (issue 29, goal 2). */
#include <dlfcn.h>
#include <omp.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_args.h"
#include "bench_blocks.h"
#include "matmul.h"

enum { WQ, WK, WV, WO, W1, W3, W2, N_WEIGHTS };

typedef struct {
    const char *name;
    int dim, hidden_dim, n_layers;
} Shape;

static const Shape SHAPES[] = {
    {"15M", 288, 768, 6}, {"110M", 768, 2048, 12}, {"1.1B", 2048, 5632, 22}};

/* One forward pass's weights and a batch's buffers. */
typedef struct {
    Matrix w[N_WEIGHTS];
    float *f32[N_WEIGHTS]; /* each weight's first layer row-major, for OpenBLAS */
    float *x, *out[3];     /* x (batch, hidden_dim); out[k] (batch, hidden_dim) */
    int batch, n_layers;
    QuantizedInputs xq;
} Pass;

/* The process's CPU seconds: every thread's time running, not waiting for a core. */
static double cpu_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* CPU seconds of one pass of matmul over every layer. */
static double matmul_pass(Pass *p) {
    double start = cpu_seconds();
    float **o = p->out;
    for (int l = 0; l < p->n_layers; l++) {
        Matrix *w = p->w;
        matmul((Product[]){{o[0], &w[WQ]}, {o[1], &w[WK]}, {o[2], &w[WV]}}, 3, p->x, p->batch, l,
               &p->xq);
        matmul(&(Product){o[0], &w[WO]}, 1, p->x, p->batch, l, &p->xq);
        matmul((Product[]){{o[0], &w[W1]}, {o[1], &w[W3]}}, 2, p->x, p->batch, l, &p->xq);
        matmul(&(Product){o[0], &w[W2]}, 1, p->x, p->batch, l, &p->xq);
    }
    return cpu_seconds() - start;
}

typedef void (*Sgemm)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha,
                      const float *a, int lda, const float *b, int ldb, float beta, float *c,
                      int ldc);

/* CPU seconds of the same products by OpenBLAS's sgemm, out (batch, rows) = x W^T, one layer's
 * weights for every layer (OpenBLAS packs them anyway). */
static double sgemm_pass(Pass *p, Sgemm sgemm) {
    double start = cpu_seconds();
    for (int l = 0; l < p->n_layers; l++)
        for (int k = 0; k < N_WEIGHTS; k++) {
            const Matrix *w = &p->w[k];
            sgemm(101, 111, 112, p->batch, w->rows, w->cols, 1.0f, p->x, w->cols, p->f32[k],
                  w->cols, 0.0f, p->out[0], w->rows); /* row-major; x as is, W transposed */
        }
    return cpu_seconds() - start;
}

/* Debian's OpenBLAS (libopenblas0-pthread)'s cblas_sgemm, set to as many threads as OpenMP's, and
 * in *core the name of the kernels it chose ("?" if it does not say); NULL if not installed. Its
 * run-time choice of kernels by CPU model fell back to Prescott's SSE3 ones on a Xeon it did not
 * know (family 6 model 207, AVX-512): 19-25 GFLOP/s on one thread at 110M, where SkylakeX's ran
 * 86-95. So unless OPENBLAS_CORETYPE is set, the core is named from the CPU's instructions:
 * SkylakeX with AVX-512, Zen on AMD with AVX2 (what it picks on an EPYC), Haswell otherwise with
 * AVX2. */
static Sgemm blas_open(const char **core) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    const char *type = __builtin_cpu_supports("avx512f") ? "SkylakeX"
                       : !__builtin_cpu_supports("avx2") ? NULL
                       : __builtin_cpu_is("amd")         ? "Zen"
                                                         : "Haswell";
    if (type) setenv("OPENBLAS_CORETYPE", type, 0);
#endif
    void *blas = dlopen("libopenblas.so.0", RTLD_NOW);
    if (!blas) return NULL;
    const char *(*corename)(void) = (const char *(*)(void))dlsym(blas, "openblas_get_corename");
    void (*set_threads)(int) = (void (*)(int))dlsym(blas, "openblas_set_num_threads");
    if (set_threads) set_threads(omp_get_max_threads());
    *core = corename ? corename() : "?";
    return (Sgemm)dlsym(blas, "cblas_sgemm");
}

/* OpenBLAS's sgemm on n x n x n (c = a b, row-major), fastest of `repeats`, in GFLOP/s by CPU
 * time over the threads (as main's); 0 when memory runs out. */
static double square_rate(Sgemm sgemm, int n, int repeats) {
    size_t values = (size_t)n * n;
    float *a = random_floats(values), *b = random_floats(values);
    float *c = malloc(values * sizeof(float));
    double best = 1e30;
    if (!a || !b || !c) {
        free(a), free(b), free(c);
        return 0.0;
    }
    for (int r = 0; r < repeats; r++) {
        double start = cpu_seconds();
        sgemm(101, 111, 111, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double t = cpu_seconds() - start;
        best = t < best ? t : best;
    }
    free(a), free(b), free(c);
    return 2.0 * n * n * n * omp_get_max_threads() / best / 1e9;
}

/* build/gemm square [n] [repeats]: main's OpenBLAS row alone, on a square product. */
static int square_main(int argc, char **argv) {
    int n = argc > 2 ? int_arg("gemm", "n", argv[2], 64, 8192) : 3072;
    int repeats = argc > 3 ? int_arg("gemm", "repeats", argv[3], 1, 1000) : 3;
    const char *core = "?";
    Sgemm sgemm = blas_open(&core);
    if (!sgemm) {
        fprintf(stderr, "gemm: square needs OpenBLAS (libopenblas.so.0, libopenblas0-pthread)\n");
        return 1;
    }
    double rate = square_rate(sgemm, n, repeats);
    if (rate == 0.0) {
        fprintf(stderr, "gemm: out of memory\n");
        return 1;
    }
    printf("square %d threads %d: OpenBLAS sgemm %.1f GFLOP/s (core %s)\n", n,
           omp_get_max_threads(), rate, core);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "square") && argc <= 4) return square_main(argc, argv);
    const Shape *s = NULL;
    for (size_t i = 0; argc > 1 && i < sizeof(SHAPES) / sizeof(SHAPES[0]); i++)
        if (!strcmp(argv[1], SHAPES[i].name)) s = &SHAPES[i];
    int dtype = -1;
    for (int d = 0; argc > 2 && d < N_DTYPES; d++)
        if (!strcmp(argv[2], DTYPES[d].name)) dtype = d;
    if (!s || dtype < 0 || argc > 5) {
        fprintf(stderr, "gemm: usage: gemm 15M|110M|1.1B DTYPE [batch] [repeats], or gemm square "
                        "[n] [repeats]; DTYPE one of");
        for (int d = 0; d < N_DTYPES; d++) fprintf(stderr, " %s", DTYPES[d].name);
        fprintf(stderr, "\n");
        return 1;
    }
    int batch = argc > 3 ? int_arg("gemm", "batch", argv[3], 1, 1024) : 128;
    int repeats = argc > 4 ? int_arg("gemm", "repeats", argv[4], 1, 1000) : 5;
    Pass p = {.batch = batch, .n_layers = s->n_layers};
    int shape[N_WEIGHTS][2] = {
        {s->dim, s->dim},        {s->dim, s->dim},        {s->dim, s->dim},       {s->dim, s->dim},
        {s->hidden_dim, s->dim}, {s->hidden_dim, s->dim}, {s->dim, s->hidden_dim}};
    double flop = 0.0;
    int failed = 0;
    for (int k = 0; k < N_WEIGHTS; k++) {
        failed |= random_matrix(&p.w[k], dtype, s->n_layers, shape[k][0], shape[k][1], &p.f32[k]);
        flop += 2.0 * shape[k][0] * shape[k][1] * batch * s->n_layers;
    }
    size_t values = (size_t)batch * s->hidden_dim;
    p.x = random_floats(values);
    for (int k = 0; k < 3; k++) p.out[k] = malloc(values * sizeof(float));
    if (failed || !p.x || !p.out[0] || !p.out[1] || !p.out[2] ||
        quantized_inputs_alloc(&p.xq, batch, s->hidden_dim)) {
        fprintf(stderr, "gemm: out of memory\n");
        return 1;
    }
    const char *core = "?";
    Sgemm sgemm = blas_open(&core);
    double best = 1e30, best_blas = 1e30;
    for (int r = 0; r < repeats; r++) { /* the two take turns */
        double t = matmul_pass(&p);
        best = t < best ? t : best;
        if (sgemm && dtype == DTYPE_F32) {
            t = sgemm_pass(&p, sgemm);
            best_blas = t < best_blas ? t : best_blas;
        }
    }
    int threads = omp_get_max_threads();
    printf("%s %s batch %d threads %d: matmul %.1f GFLOP/s", s->name, DTYPES[dtype].name, batch,
           threads, flop * threads / best / 1e9);
    if (best_blas < 1e30)
        printf(", OpenBLAS sgemm %.1f GFLOP/s (core %s)", flop * threads / best_blas / 1e9, core);
    printf("\n");
    return 0;
}
