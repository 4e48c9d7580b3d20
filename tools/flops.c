/* flops: the machine's peak multiply-add rate of each kind of product the matmul kernels use,
 * the bound of batched prefill.
 *
 *   build/flops [repeats] [f32|i16|i8]
 *
 * f32 (the default): vector FMAs, as the f32, bf16 and f16 tiles use them; i16: int16 pairs
 * multiplied and summed into int32 lanes (vpmaddwd and an add, or AVX512-VNNI's vpdpwssd:
 * veci_dot), q8_0's; i8: unsigned by signed bytes summed in pairs into int16 lanes (vpmaddubsw and
 * an add), or with AVX512-VNNI in quads into int32 lanes (vpdpbusd): vecw_dot_u8, q4_0's.
 * Every OpenMP thread runs independent chains of them (simd.h) on registers only, timed by
 * its own CPU time (on a machine shared with other work, the time it ran, not the time it waited
 * for a core: wall time gave 76 to 102 GFLOP/s at a load of 12 on two cores); prints the median
 * over the repeats of the total rate (the threads' rates added) in G operations/s, 2 per
 * multiply-add of one product (so that f32's is GFLOP/s), on stdout. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_args.h"
#include "simd.h"

/* enough independent chains to cover the FMA latency of every target */
#define CHAINS 12
#define STEPS  20000000L
/* the integer kinds' chains, each with operands of its own: 8 on AVX2 (with the 6 operands, 14 of
 * its 16 vector registers; 8 cover a latency of 4 cycles at 2 a cycle), 12 with AVX-512's 32 */
#define INT_CHAINS (VEC_WIDTH == 16 ? 12 : 8)
/* Every loop over them unrolled whole: simd.h's UNROLL stops at 8, and with AVX-512's 12 chains
 * GCC 12 kept the accumulators in memory (a Xeon with AVX512-VNNI, one thread: each step a load,
 * a vpdpbusd and a store, i8 85 and i16 40 G operations/s; with only the chains' loops unrolled,
 * a store a step, 254 and 126; all unrolled, 697 and 345, beside f32's 163) */
#if defined(__GNUC__)
#define UNROLL_CHAINS _Pragma("GCC unroll 16")
#else
#define UNROLL_CHAINS
#endif

/* Hides v's value from the compiler: it must assume v changed. (simd.h's OPAQUE does nothing in
 * the portable build, whose chains must stay in the loop too.) */
#if VEC_WIDTH > 1
#define HIDE(v) __asm__("" : "+v"(v))
#else
#define HIDE(v) __asm__("" : "+m"(v))
#endif

/* The INT_CHAINS chains acc[c] = dot(acc[c], a[c / 4], b[c % 4]) from `zero`, STEPS steps, the
 * operands a[0 ..] and b[0 .. 3] copies of `operand` (of type T), hidden at each step, and the
 * accumulators after it: a macro, for the two integer kinds' vector types. */
#define INT_CHAIN_STEPS(acc, zero, T, operand, dot)                                                \
    do {                                                                                           \
        T a[INT_CHAINS / 4], b[4];                                                                 \
        UNROLL_CHAINS                                                                              \
        for (int c = 0; c < INT_CHAINS; c++) acc[c] = zero;                                        \
        UNROLL_CHAINS                                                                              \
        for (int k = 0; k < INT_CHAINS / 4; k++) a[k] = operand;                                   \
        UNROLL_CHAINS                                                                              \
        for (int k = 0; k < 4; k++) b[k] = operand;                                                \
        for (long i = 0; i < STEPS; i++) {                                                         \
            UNROLL_CHAINS                                                                          \
            for (int k = 0; k < INT_CHAINS / 4; k++) HIDE(a[k]);                                   \
            UNROLL_CHAINS                                                                          \
            for (int k = 0; k < 4; k++) HIDE(b[k]);                                                \
            UNROLL_CHAINS                                                                          \
            for (int c = 0; c < INT_CHAINS; c++) acc[c] = dot(acc[c], a[c / 4], b[c % 4]);         \
            UNROLL_CHAINS                                                                          \
            for (int c = 0; c < INT_CHAINS; c++) HIDE(acc[c]);                                     \
        }                                                                                          \
    } while (0)

typedef enum { KIND_F32, KIND_I16, KIND_I8 } Kind;

/* The calling thread's CPU seconds. */
static double thread_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The chains of one thread; returns a sum of their lanes so that the work is kept. */
static double run_chains(Kind kind) {
    double checksum = 0.0;
    if (kind == KIND_F32) {
        vecf acc[CHAINS], scale = vec_set1(0.9999f), shift = vec_set1(1e-4f);
        for (int c = 0; c < CHAINS; c++) acc[c] = vec_set1(c * 1e-3f);
        for (long i = 0; i < STEPS; i++)
            for (int c = 0; c < CHAINS; c++) acc[c] = vec_fmadd(acc[c], scale, shift);
        for (int c = 0; c < CHAINS; c++) checksum += vec_sum(acc[c]);
        return checksum;
    }
    /* ones read from memory the compiler cannot see into: each step adds 2 to a lane, which
     * stays within int32 (i16) and wraps int16 lanes where the vectors do (i8; 4 to an int32
     * lane with vpdpbusd). Chain c multiplies its own pair of operands, hidden from the compiler
     * at each step: GCC had hoisted the one product of constants out of the loop, and the rates
     * were of the adds alone (i16 111, i8 223 G operations/s on the EPYC; 121-136 and
     * 248-268 with the products in the loop). The accumulators are hidden after their step too, and
     * every loop unrolled whole, or GCC 12 kept 6 of the 8 on the stack, at the hoisted loop's
     * rate. */
    static volatile int8_t one = 1;
    int16_t pair[2] = {one, one};
    int8_t quad[4] = {one, one, one, one};
    if (kind == KIND_I16) {
        veci acc[INT_CHAINS];
        INT_CHAIN_STEPS(acc, veci_zero(), vecw, vecw_set1_pair(pair), veci_dot);
        UNROLL_CHAINS
        for (int c = 0; c < INT_CHAINS; c++) checksum += vec_sum(vec_from_veci(acc[c]));
        return checksum;
    }
    vecw acc[INT_CHAINS];
    INT_CHAIN_STEPS(acc, vecw_zero(), vecb, vecb_set1_quad(quad), vecw_dot_u8);
    UNROLL_CHAINS
    for (int c = 0; c < INT_CHAINS; c++)
        checksum += vec_sum(vec_from_veci(veci_from_pairs(acc[c])));
    return checksum;
}

int main(int argc, char **argv) {
    int repeats = argc > 1 ? int_arg("flops", "repeats", argv[1], 1, 100) : 5;
    const char *name = argc > 2 ? argv[2] : "f32";
    Kind kind = !strcmp(name, "f32") ? KIND_F32 : !strcmp(name, "i16") ? KIND_I16 : KIND_I8;
    if (argc > 3 || (kind == KIND_I8 && strcmp(name, "i8") != 0)) {
        fprintf(stderr, "flops: usage: flops [repeats 1..100] [f32|i16|i8]\n");
        return 1;
    }
    /* multiply-adds per chain step: a float per lane; two int16 products per int32 lane; four
     * byte products per int32's worth of int16 lanes */
    int per_step = VEC_WIDTH * (kind == KIND_F32 ? 1 : kind == KIND_I16 ? 2 : 4);
    double *rates = malloc(repeats * sizeof(double));
    if (!rates) return 1;
    double checksum = 0.0;
    for (int r = 0; r < repeats; r++) {
        double rate = 0.0;
#pragma omp parallel reduction(+ : checksum, rate)
        {
            double start = thread_seconds();
            checksum += run_chains(kind);
            rate += 2.0 * (kind == KIND_F32 ? CHAINS : INT_CHAINS) * per_step * STEPS /
                    (thread_seconds() - start) / 1e9;
        }
        rates[r] = rate;
    }
    qsort(rates, repeats, sizeof(double), by_value);
    printf("%.1f\n", rates[repeats / 2]);
    fprintf(stderr, "flops: %s, %d threads, checksum %g\n", name, omp_get_max_threads(), checksum);
    free(rates);
    return 0;
}
