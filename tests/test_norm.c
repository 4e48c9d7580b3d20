/* Norm kernels against double-precision references and hand-derived values. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

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
    cr_assert_str_eq(norm_name(layernorm), "layernorm");
    cr_assert_str_eq(norm_names(), "rmsnorm|layernorm");
}
