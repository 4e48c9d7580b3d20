/* Norm kernels against double-precision references and hand-derived values. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "norm.h"

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

static void rmsnorm_ref(double *out, const float *x, const float *w, int n, double eps) {
    double ss = 0.0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    double inv = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++) out[i] = w[i] * x[i] * inv;
}

static void layernorm_ref(double *out, const float *x, const float *w, const float *b, int n,
                          double eps) {
    double mean = 0.0, var = 0.0;
    for (int i = 0; i < n; i++) mean += x[i];
    mean /= n;
    for (int i = 0; i < n; i++) var += (x[i] - mean) * (x[i] - mean);
    var /= n;
    for (int i = 0; i < n; i++) out[i] = w[i] * (x[i] - mean) / sqrt(var + eps) + (b ? b[i] : 0.0);
}

Test(norm, rmsnorm_hand_checked) {
    /* x = (1, 2, 3, 4): mean of squares 30 / 4 = 7.5, so out = x / sqrt(7.5) with eps 0 */
    float x[4] = {1, 2, 3, 4}, w[4] = {1, 1, 1, 1}, out[4];
    rmsnorm(out, x, w, NULL, 4, 1e-12f);
    const float expected[4] = {0.36514837f, 0.73029674f, 1.09544512f, 1.46059349f};
    for (int i = 0; i < 4; i++) cr_assert_float_eq(out[i], expected[i], 1e-6);
}

Test(norm, layernorm_hand_checked) {
    /* x = (1, 2, 3, 4): mean 2.5, variance 1.25, so out = (x - 2.5) / sqrt(1.25), then
     * weight (2, 2, 2, 2) and bias (1, 1, 1, 1) */
    float x[4] = {1, 2, 3, 4}, w[4] = {2, 2, 2, 2}, b[4] = {1, 1, 1, 1}, out[4];
    layernorm(out, x, w, b, 4, 1e-12f);
    const float expected[4] = {-1.68328157f, 0.10557281f, 1.89442719f, 3.68328157f};
    for (int i = 0; i < 4; i++) cr_assert_float_eq(out[i], expected[i], 1e-6);
}

Test(norm, matches_double_reference) {
    float x[DIM], w[DIM], b[DIM], out[DIM];
    double ref[DIM];
    fill(x, DIM, 1, 0.7f);
    fill(w, DIM, 2, 1.0f);
    fill(b, DIM, 3, 0.0f);
    rmsnorm(out, x, w, NULL, DIM, 1e-5f);
    rmsnorm_ref(ref, x, w, DIM, 1e-5);
    for (int i = 0; i < DIM; i++) cr_assert_float_eq(out[i], ref[i], 1e-5, "rmsnorm[%d]", i);
    layernorm(out, x, w, b, DIM, 1e-5f);
    layernorm_ref(ref, x, w, b, DIM, 1e-5);
    for (int i = 0; i < DIM; i++) cr_assert_float_eq(out[i], ref[i], 1e-5, "layernorm[%d]", i);
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
    cr_assert_str_eq(norm_names(), "rmsnorm|layernorm|rmsnorm_eps_outside");
}

Test(norm, eps_outside_hand_checked) {
    /* x = (3, 4): rms = sqrt(12.5) = 3.5355339; eps 0.5 outside gives x / 4.0355339, inside
     * x / sqrt(13) = x / 3.6055513 */
    float x[2] = {3, 4}, w[2] = {1, 1}, out[2];
    rmsnorm_eps_outside(out, x, w, NULL, 2, 0.5f);
    cr_assert_float_eq(out[0], 3.0 / 4.0355339, 1e-6);
    cr_assert_float_eq(out[1], 4.0 / 4.0355339, 1e-6);
    rmsnorm(out, x, w, NULL, 2, 0.5f);
    cr_assert_float_eq(out[0], 3.0 / 3.6055513, 1e-6);
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
static double relative_error(const float *a, const double *ref, int n) {
    double num = 0.0, den = 0.0;
    for (int i = 0; i < n; i++) {
        num += (a[i] - ref[i]) * (a[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return sqrt(num / den);
}

Test(norm, layernorm_variance_is_stable_under_large_offset) {
    enum { N = 4096 };
    static float x[N], w[N], out[N];
    static double ref[N];
    unsigned int seed = 42;
    for (int i = 0; i < N; i++) x[i] = (float)(1e4 + gaussian(&seed));
    ones(w, N);
    /* the input is hard: the textbook E[x^2] - E[x]^2 in fp32 is far from the variance (~1) */
    float s = 0.0f, ss = 0.0f;
    for (int i = 0; i < N; i++) s += x[i], ss += x[i] * x[i];
    float naive_var = ss / N - (s / N) * (s / N);
    cr_assert(fabsf(naive_var - 1.0f) > 0.5f, "naive variance %g happens to be right", naive_var);
    layernorm(out, x, w, NULL, N, 1e-5f);
    layernorm_ref(ref, x, w, NULL, N, 1e-5);
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

Test(norm, f16_and_bf16_decoding_hand_checked) {
    cr_assert_eq(f16_to_f32(0x3c00), 1.0f);
    cr_assert_eq(f16_to_f32(0xc000), -2.0f);
    cr_assert_eq(f16_to_f32(0x7bff), 65504.0f);
    cr_assert_eq(f16_to_f32(0x0001), ldexpf(1.0f, -24)); /* smallest subnormal */
    cr_assert_eq(f16_to_f32(0x8000), 0.0f);
    cr_assert(isinf(f16_to_f32(0x7c00)));
    cr_assert(isnan(f16_to_f32(0x7e00)));
    cr_assert_eq(f16_to_f32(0x63d0), 1000.0f);
    cr_assert_eq(bf16_to_f32(0x3f80), 1.0f);
    cr_assert_eq(bf16_to_f32(0x447a), 1000.0f);
    cr_assert_eq(bf16_to_f32(0xc040), -3.0f);
}

Test(norm, magnitude_1000_in_16bit_storage) {
    /* the sum of squares is ~4e9, far past fp16's 65504: accumulating in fp16 would give inf */
    enum { N = 4096 };
    static uint16_t h[N], bh[N];
    static float decoded[N], w[N], b[N], out[N];
    static double ref[N];
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
        rmsnorm_ref(ref, decoded, w, N, 1e-5);
        for (int i = 0; i < N; i++) cr_assert(isfinite(out[i]));
        cr_assert_lt(relative_error(out, ref, N), 1e-5, "rmsnorm, type %d", t);
        norm_16bit((NormCall){layernorm, w, b, 1e-5f}, decoders[t], out, inputs[t], N);
        layernorm_ref(ref, decoded, w, b, N, 1e-5);
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
        norm_16bit((NormCall){fn, w, NULL, 1e-5f}, f16_to_f32, out, zeros16, N);
        for (int i = 0; i < N; i++) cr_assert_eq(out[i], 0.0f, "%s fp16 [%d]", name, i);
        norm_16bit((NormCall){fn, w, NULL, 1e-5f}, bf16_to_f32, out, zeros16, N);
        for (int i = 0; i < N; i++) cr_assert_eq(out[i], 0.0f, "%s bf16 [%d]", name, i);
    }
    cr_assert_eq(n_norms, 3);
}
