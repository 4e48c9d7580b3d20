/* The norms: the fast kernels against their plain twins (norm.c's, sums in double) on every
 * remainder of a vector, both against hand-derived values, and their properties. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "norm.h"
#include "simd.h"

#define DIM 768

/* Deterministic pseudo-random vector with a non-zero mean, so LayerNorm and RMSNorm differ. */
static void fill(float *x, int n, unsigned int seed, float offset) {
    for (int i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = offset + ((seed >> 8) / 16777216.0f - 0.5f) * 4.0f;
    }
}

static void ones(float *w, int n) {
    for (int i = 0; i < n; i++) w[i] = 1.0f;
}

Test(norm, rmsnorm_hand_checked) {
    /* x = (1, 2, 3, 4): mean of squares 30 / 4 = 7.5, so out = x / sqrt(7.5) with eps 0 */
    float x[4] = {1, 2, 3, 4}, w[4] = {1, 1, 1, 1}, out[4];
    const float expected[4] = {0.36514837f, 0.73029674f, 1.09544512f, 1.46059349f};
    NormFn fns[2] = {rmsnorm, norm_plain(rmsnorm)};
    for (int k = 0; k < 2; k++) {
        fns[k](out, x, w, NULL, 4, 1e-12f);
        for (int i = 0; i < 4; i++) cr_assert_float_eq(out[i], expected[i], 1e-6, "%d [%d]", k, i);
    }
}

Test(norm, layernorm_hand_checked) {
    /* x = (1, 2, 3, 4): mean 2.5, variance 1.25, so out = (x - 2.5) / sqrt(1.25), then
     * weight (2, 2, 2, 2) and bias (1, 1, 1, 1) */
    float x[4] = {1, 2, 3, 4}, w[4] = {2, 2, 2, 2}, b[4] = {1, 1, 1, 1}, out[4];
    const float expected[4] = {-1.68328157f, 0.10557281f, 1.89442719f, 3.68328157f};
    NormFn fns[2] = {layernorm, norm_plain(layernorm)};
    for (int k = 0; k < 2; k++) {
        fns[k](out, x, w, b, 4, 1e-12f);
        for (int i = 0; i < 4; i++) cr_assert_float_eq(out[i], expected[i], 1e-6, "%d [%d]", k, i);
    }
}

/* max_i |a[i] - b[i]| / max_i |b[i]| */
static double max_relative_gap(const float *a, const float *b, int n) {
    double gap = 0.0, largest = 0.0;
    for (int i = 0; i < n; i++) {
        gap = fmax(gap, fabs((double)a[i] - b[i]));
        largest = fmax(largest, fabs((double)b[i]));
    }
    return gap / largest;
}

Test(norm, every_norm_matches_its_plain_twin) {
    /* lengths below, at and past one and two vectors (8 and 16 lanes), odd ones, the models' */
    const int dims[] = {1, 3, 7, 8, 15, 16, 17, 31, 32, 33, 64, 65, 100, 288, 768, 4096};
    enum { MAX_DIM = 4096 };
    static float x[MAX_DIM], w[MAX_DIM], b[MAX_DIM], fast[MAX_DIM], plain[MAX_DIM];
    char names[128];
    snprintf(names, sizeof(names), "%s", norm_names());
    for (char *name = strtok(names, "|"); name; name = strtok(NULL, "|")) {
        NormFn fn = norm_by_name(name), twin = norm_plain(fn);
        cr_assert(twin && twin != fn, "%s has no plain twin", name);
        double worst = 0.0;
        for (size_t d = 0; d < sizeof(dims) / sizeof(dims[0]); d++) {
            int dim = dims[d];
            fill(x, dim, 1 + d, 0.7f);
            fill(w, dim, 2 + d, 1.0f);
            fill(b, dim, 3 + d, 0.5f); /* a bias away from 0: LayerNorm's dim 1 gives out = b */
            fn(fast, x, w, b, dim, 1e-5f);
            twin(plain, x, w, b, dim, 1e-5f);
            /* Derived: the fast sums run in 2 VEC_WIDTH chains of dim / (2 VEC_WIDTH) terms, then
             * a tree of up to 5 levels and the pad's correction: within n = dim / (2 VEC_WIDTH)
             * + 6 roundings, each sum errs by at most n u (u = FLT_EPSILON / 2) of the sum of its
             * terms' magnitudes (Higham 2002, eq. 3.5), with or without FMA. The mean square's
             * (terms of one sign) costs the output n u / 2 through the root; LayerNorm's mean
             * (terms x - shift, the shift near the mean) up to n u more of the row's largest
             * output; the root, divide and two products 4 u; the plain twin's own (double, one
             * rounding) below u: (1.5 n + 5) u. One value of 4096 left out would move RMSNorm's
             * output by about 1 / 8192 of it, 1.2e-4, 5 times this bound with AVX2. */
            double n = (dim + 2 * VEC_WIDTH - 1) / (2 * VEC_WIDTH) + 6;
            double gap = max_relative_gap(fast, plain, dim),
                   bound = (1.5 * n + 5) * FLT_EPSILON / 2;
            cr_assert_leq(gap, bound, "%s dim %d: %g (bound %g)", name, dim, gap, bound);
            worst = fmax(worst, gap / bound);
        }
        cr_log_info("%s: |fast - plain| at most %.3g of its bound", name, worst);
    }
}

Test(norm, rmsnorm_output_has_unit_rms) {
    float x[DIM], w[DIM], out[DIM];
    fill(x, DIM, 4, 0.3f);
    ones(w, DIM);
    rmsnorm(out, x, w, NULL, DIM, 1e-5f);
    double ss = 0.0;
    for (int i = 0; i < DIM; i++) ss += (double)out[i] * out[i];
    cr_assert_float_eq(sqrt(ss / DIM), 1.0, 1e-4);
}

Test(norm, layernorm_output_has_zero_mean_unit_variance) {
    float x[DIM], w[DIM], out[DIM];
    fill(x, DIM, 5, 3.0f);
    ones(w, DIM);
    layernorm(out, x, w, NULL, DIM, 1e-5f);
    double mean = 0.0, var = 0.0;
    for (int i = 0; i < DIM; i++) mean += out[i];
    mean /= DIM;
    for (int i = 0; i < DIM; i++) var += (out[i] - mean) * (out[i] - mean);
    cr_assert_float_eq(mean, 0.0, 1e-5);
    cr_assert_float_eq(var / DIM, 1.0, 1e-4);
}

Test(norm, rmsnorm_is_scale_invariant) {
    float x[DIM], scaled[DIM], w[DIM], a[DIM], b[DIM];
    fill(x, DIM, 6, 0.5f);
    fill(w, DIM, 7, 1.0f);
    for (int i = 0; i < DIM; i++) scaled[i] = 37.0f * x[i];
    /* eps breaks the invariance slightly; a tiny one shows the exact property */
    rmsnorm(a, x, w, NULL, DIM, 1e-12f);
    rmsnorm(b, scaled, w, NULL, DIM, 1e-12f);
    for (int i = 0; i < DIM; i++) cr_assert_float_eq(a[i], b[i], 1e-5, "[%d]", i);
}

Test(norm, layernorm_is_shift_invariant) {
    float x[DIM], shifted[DIM], w[DIM], a[DIM], b[DIM];
    fill(x, DIM, 8, 0.0f);
    fill(w, DIM, 9, 1.0f);
    for (int i = 0; i < DIM; i++) shifted[i] = x[i] + 5.0f;
    layernorm(a, x, w, NULL, DIM, 1e-5f);
    layernorm(b, shifted, w, NULL, DIM, 1e-5f);
    for (int i = 0; i < DIM; i++) cr_assert_float_eq(a[i], b[i], 1e-4, "[%d]", i);
}

Test(norm, rmsnorm_is_not_shift_invariant) {
    /* the property that separates the two norms: a shift moves RMSNorm's output */
    float x[DIM], shifted[DIM], w[DIM], a[DIM], b[DIM];
    fill(x, DIM, 10, 0.0f);
    ones(w, DIM);
    for (int i = 0; i < DIM; i++) shifted[i] = x[i] + 5.0f;
    rmsnorm(a, x, w, NULL, DIM, 1e-5f);
    rmsnorm(b, shifted, w, NULL, DIM, 1e-5f);
    double max_diff = 0.0;
    for (int i = 0; i < DIM; i++) max_diff = fmax(max_diff, fabs(a[i] - b[i]));
    cr_assert_gt(max_diff, 0.5);
}

Test(norm, zero_row_gives_zeros) {
    float x[DIM] = {0}, w[DIM], out[DIM];
    ones(w, DIM);
    rmsnorm(out, x, w, NULL, DIM, 1e-5f);
    for (int i = 0; i < DIM; i++) cr_assert_eq(out[i], 0.0f);
    layernorm(out, x, w, NULL, DIM, 1e-5f);
    for (int i = 0; i < DIM; i++) cr_assert_eq(out[i], 0.0f);
}

Test(norm, in_place) {
    float x[DIM], w[DIM], out[DIM];
    fill(x, DIM, 11, 1.0f);
    fill(w, DIM, 12, 1.0f);
    layernorm(out, x, w, NULL, DIM, 1e-5f);
    layernorm(x, x, w, NULL, DIM, 1e-5f);
    for (int i = 0; i < DIM; i++) cr_assert_eq(out[i], x[i]);
}

Test(norm, selection_by_name) {
    cr_assert_eq(norm_by_name("rmsnorm"), rmsnorm);
    cr_assert_eq(norm_by_name("layernorm"), layernorm);
    cr_assert_null(norm_by_name("RMSNorm"));
    cr_assert_null(norm_by_name(""));
    cr_assert_eq(norm_by_name("rmsnorm_eps_outside"), rmsnorm_eps_outside);
    cr_assert_str_eq(norm_name(layernorm), "layernorm");
    NormFn twins[3] = {norm_plain(rmsnorm), norm_plain(layernorm), norm_plain(rmsnorm_eps_outside)};
    for (int k = 0; k < 3; k++) {
        cr_assert(twins[k] && twins[k] != rmsnorm && twins[k] != layernorm);
        cr_assert(twins[k] != rmsnorm_eps_outside && twins[k] != twins[(k + 1) % 3]);
        cr_assert_null(norm_plain(twins[k])); /* a twin is no norm of the table */
        cr_assert_str_eq(norm_name(twins[k]), "?");
    }
    cr_assert_str_eq(norm_names(), "rmsnorm|layernorm|rmsnorm_eps_outside");
}

Test(norm, eps_outside_hand_checked) {
    /* x = (3, 4): rms = sqrt(12.5) = 3.5355339; eps 0.5 outside gives x / 4.0355339, inside
     * x / sqrt(13) = x / 3.6055513 */
    float x[2] = {3, 4}, w[2] = {1, 1}, out[2];
    NormFn outside[2] = {rmsnorm_eps_outside, norm_plain(rmsnorm_eps_outside)};
    NormFn inside[2] = {rmsnorm, norm_plain(rmsnorm)};
    for (int k = 0; k < 2; k++) {
        outside[k](out, x, w, NULL, 2, 0.5f);
        cr_assert_float_eq(out[0], 3.0 / 4.0355339, 1e-6);
        cr_assert_float_eq(out[1], 4.0 / 4.0355339, 1e-6);
        inside[k](out, x, w, NULL, 2, 0.5f);
        cr_assert_float_eq(out[0], 3.0 / 3.6055513, 1e-6);
    }
}

/* Standard normal draws by Box-Muller over the generator of fill(). */
static double gaussian(unsigned int *seed) {
    *seed = *seed * 1664525u + 1013904223u;
    double u1 = ((*seed >> 8) + 1.0) / 16777217.0;
    *seed = *seed * 1664525u + 1013904223u;
    double u2 = (*seed >> 8) / 16777216.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* ||a - ref|| / ||ref|| */
static double relative_error(const float *a, const float *ref, int n) {
    double num = 0.0, den = 0.0;
    for (int i = 0; i < n; i++) {
        num += ((double)a[i] - ref[i]) * ((double)a[i] - ref[i]);
        den += (double)ref[i] * ref[i];
    }
    return sqrt(num / den);
}

Test(norm, layernorm_variance_is_stable_under_large_offset) {
    enum { N = 4096 };
    static float x[N], w[N], out[N], ref[N];
    unsigned int seed = 42;
    for (int i = 0; i < N; i++) x[i] = (float)(1e4 + gaussian(&seed));
    ones(w, N);
    /* the input is hard: the textbook E[x^2] - E[x]^2 in fp32 is far from the variance (~1) */
    float s = 0.0f, ss = 0.0f;
    for (int i = 0; i < N; i++) s += x[i], ss += x[i] * x[i];
    float naive_var = ss / N - (s / N) * (s / N);
    cr_assert(fabsf(naive_var - 1.0f) > 0.5f, "naive variance %g happens to be right", naive_var);
    layernorm(out, x, w, NULL, N, 1e-5f);
    norm_plain(layernorm)(ref, x, w, NULL, N, 1e-5f);
    double err = relative_error(out, ref, N);
    cr_log_info("layernorm relative error %g against double (limit 1e-3)", err);
    cr_assert_lt(err, 1e-3, "relative error %g", err);
}

/* fp32 -> fp16 bits, round to nearest even; normal range only (all the tests need). */
static uint16_t to_f16(float f) {
    uint32_t b;
    memcpy(&b, &f, sizeof(b));
    uint32_t sign = (b >> 16) & 0x8000, exponent = (b >> 23) & 0xff, mantissa = b & 0x7fffff;
    uint32_t h = sign | ((exponent - 127 + 15) << 10) | (mantissa >> 13);
    uint32_t rest = mantissa & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
    return (uint16_t)h;
}

static uint16_t to_bf16(float f) {
    uint32_t b;
    memcpy(&b, &f, sizeof(b));
    b += 0x7fff + ((b >> 16) & 1);
    return (uint16_t)(b >> 16);
}

/* A norm over 16-bit storage: out = norm(to_f32(x)), with fp32 arithmetic throughout.
 * to_f32: f16_to_f32 or bf16_to_f32. x: (dim) in that storage type; out and the norm's weight and
 * bias: (dim) fp32. Decoding into fp32 before any arithmetic is what keeps e.g. a sum of squares
 * of 4096 values of magnitude 1000 (4e9) finite: fp16's largest finite value is 65504. */
static void norm_16bit(NormCall norm, float (*to_f32)(uint16_t), float *out, const uint16_t *x,
                       int dim) {
    for (int i = 0; i < dim; i++) out[i] = to_f32(x[i]);
    norm.fn(out, out, norm.weight, norm.bias, dim, norm.eps);
}

Test(norm, magnitude_1000_in_16bit_storage) {
    /* the sum of squares is ~4e9, far past fp16's 65504: accumulating in fp16 would give inf */
    enum { N = 4096 };
    static uint16_t h[N], bh[N];
    static float decoded[N], w[N], b[N], out[N], ref[N];
    fill(w, N, 13, 1.0f);
    fill(b, N, 14, 0.0f);
    fill(decoded, N, 15, 0.0f);
    for (int i = 0; i < N; i++) {
        float v = 1000.0f + 200.0f * decoded[i];
        h[i] = to_f16(v);
        bh[i] = to_bf16(v);
    }
    float (*decoders[2])(uint16_t) = {f16_to_f32, bf16_to_f32};
    const uint16_t *inputs[2] = {h, bh};
    for (int t = 0; t < 2; t++) {
        for (int i = 0; i < N; i++) decoded[i] = decoders[t](inputs[t][i]);
        norm_16bit((NormCall){rmsnorm, w, NULL, 1e-5f}, decoders[t], out, inputs[t], N);
        norm_plain(rmsnorm)(ref, decoded, w, NULL, N, 1e-5f);
        for (int i = 0; i < N; i++) cr_assert(isfinite(out[i]));
        cr_assert_lt(relative_error(out, ref, N), 1e-5, "rmsnorm, type %d", t);
        norm_16bit((NormCall){layernorm, w, b, 1e-5f}, decoders[t], out, inputs[t], N);
        norm_plain(layernorm)(ref, decoded, w, b, N, 1e-5f);
        for (int i = 0; i < N; i++) cr_assert(isfinite(out[i]));
        cr_assert_lt(relative_error(out, ref, N), 1e-4, "layernorm, type %d", t);
    }
}

Test(norm, zero_row_gives_zeros_for_every_norm_and_type) {
    enum { N = 64 };
    float x[N] = {0}, w[N], out[N];
    uint16_t zeros16[N] = {0};
    ones(w, N);
    char names[128];
    snprintf(names, sizeof(names), "%s", norm_names());
    int n_norms = 0;
    for (char *name = strtok(names, "|"); name; name = strtok(NULL, "|"), n_norms++) {
        NormFn fn = norm_by_name(name);
        fn(out, x, w, NULL, N, 1e-5f);
        for (int i = 0; i < N; i++) cr_assert_eq(out[i], 0.0f, "%s fp32 [%d]", name, i);
        norm_plain(fn)(out, x, w, NULL, N, 1e-5f);
        for (int i = 0; i < N; i++) cr_assert_eq(out[i], 0.0f, "%s plain [%d]", name, i);
        norm_16bit((NormCall){fn, w, NULL, 1e-5f}, f16_to_f32, out, zeros16, N);
        for (int i = 0; i < N; i++) cr_assert_eq(out[i], 0.0f, "%s fp16 [%d]", name, i);
        norm_16bit((NormCall){fn, w, NULL, 1e-5f}, bf16_to_f32, out, zeros16, N);
        for (int i = 0; i < N; i++) cr_assert_eq(out[i], 0.0f, "%s bf16 [%d]", name, i);
    }
    cr_assert_eq(n_norms, 3);
}
