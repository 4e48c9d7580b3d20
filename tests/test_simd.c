/* simd.h's vec_exp against libm's expf, vec_load_f16 against dtype.c's f16_to_f32, and softmax
 * (attention.c, which uses it) against a double-precision reference and hand-derived values. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "model.h"
#include "norm.h"
#include "simd.h"

/* vec_exp of x in lane 0 (the other lanes 0) */
static float exp_lane0(float x) {
    float in[VEC_WIDTH] = {x}, out[VEC_WIDTH];
    vec_store(out, vec_exp(vec_load(in)));
    return out[0];
}

/* |a - b| in units of b's last place (subnormal spacing below the normal range) */
static double ulps(float a, float b) {
    int e;
    frexpf(b, &e);
    double ulp = fmax(ldexp(1.0, e - 24), ldexp(1.0, -149));
    return fabs((double)a - (double)b) / ulp;
}

Test(vec_exp, within_one_ulp_of_expf_over_the_whole_float_range) {
    /* every 257th bit pattern of the floats whose exp is finite and not 0: 16 million of them,
     * the normal range and the subnormal results (below -87.3) alike */
    double worst = 0.0;
    float worst_x = 0.0f;
    for (uint64_t u = 0; u < 0x100000000ull; u += 257) {
        uint32_t bits = (uint32_t)u;
        float x, in[VEC_WIDTH], out[VEC_WIDTH];
        memcpy(&x, &bits, sizeof(x));
        if (!(x > -103.9f && x < 88.72f)) continue;
        for (int i = 0; i < VEC_WIDTH; i++) in[i] = x;
        vec_store(out, vec_exp(vec_load(in)));
        double e = ulps(out[0], expf(x));
        if (e > worst) worst = e, worst_x = x;
    }
    cr_assert_leq(worst, 1.0, "%.3f ulp at x = %.9g", worst, worst_x);
}

Test(vec_exp, hand_derived_values_and_the_ends_of_the_range) {
    cr_assert_eq(exp_lane0(0.0f), 1.0f);
    cr_assert_eq(exp_lane0(-0.0f), 1.0f);
    cr_assert_float_eq(exp_lane0(1.0f), 2.71828183f, 2.4e-7f);
    cr_assert_float_eq(exp_lane0(logf(3.0f)), 3.0f, 3.6e-7f);
    cr_assert_float_eq(exp_lane0(88.0f), 1.65163625e38f, 2e31f);
    /* the smallest subnormal, 2^-149, is e^-103.28; past -103.98 the result rounds to 0 */
    cr_assert_eq(exp_lane0(-103.0f), expf(-103.0f));
    cr_assert_eq(exp_lane0(-104.0f), 0.0f);
    cr_assert_eq(exp_lane0(-1e30f), 0.0f);
    cr_assert_eq(exp_lane0(-INFINITY), 0.0f);
    cr_assert(isinf(exp_lane0(88.73f)) && exp_lane0(88.73f) > 0, "e^88.73 overflows");
    cr_assert(isinf(exp_lane0(INFINITY)), "e^inf");
    cr_assert(isnan(exp_lane0(NAN)), "e^NaN is NaN");
}

Test(softmax, matches_a_double_reference_and_sums_to_one) {
    enum { N = 37 }; /* two vectors and a partial one on every target */
    float x[N];
    double ref[N], max = -INFINITY, sum = 0.0;
    for (int i = 0; i < N; i++) {
        x[i] = (float)(i * 7 % 11) - 4.5f + i * 0.25f;
        max = fmax(max, x[i]);
    }
    for (int i = 0; i < N; i++) sum += ref[i] = exp(x[i] - max);
    softmax(x, N);
    double total = 0.0;
    for (int i = 0; i < N; i++) {
        cr_assert_float_eq(x[i], ref[i] / sum, 2e-7 * ref[i] / sum + 1e-12, "x[%d]", i);
        total += x[i];
    }
    cr_assert_float_eq(total, 1.0, 1e-6);
}

Test(softmax, hand_derived_values) {
    /* softmax(0, log 3) = (1/4, 3/4); one value is 1 */
    float x[2] = {0.0f, logf(3.0f)}, one[1] = {-50.0f};
    softmax(x, 2);
    cr_assert_float_eq(x[0], 0.25f, 1e-7f);
    cr_assert_float_eq(x[1], 0.75f, 1e-7f);
    softmax(one, 1);
    cr_assert_eq(one[0], 1.0f);
}

Test(softmax, a_nan_makes_every_weight_nan) {
    float x[20];
    for (int i = 0; i < 20; i++) x[i] = (float)i;
    x[17] = NAN;
    softmax(x, 20);
    for (int i = 0; i < 20; i++) cr_assert(isnan(x[i]), "x[%d] = %g", i, x[i]);
}

Test(vec_load_f16, equals_f16_to_f32_for_every_bit_pattern) {
    /* F16C's vcvtph2ps in the AVX2 and AVX-512 builds, norm.c's bit arithmetic in the portable
     * one: the same value for all 65536 halves (NaN for NaN; F16C quiets a signalling one) */
    uint16_t h[VEC_WIDTH];
    for (uint32_t u = 0; u < 0x10000; u += VEC_WIDTH) {
        for (int i = 0; i < VEC_WIDTH; i++) h[i] = (uint16_t)(u + i);
        float out[VEC_WIDTH];
        vec_store(out, vec_load_f16(h));
        for (int i = 0; i < VEC_WIDTH; i++) {
            float want = f16_to_f32(h[i]);
            if (isnan(want))
                cr_assert(isnan(out[i]), "0x%04x: %g, not NaN", h[i], out[i]);
            else
                cr_assert(memcmp(&out[i], &want, sizeof(want)) == 0, "0x%04x: %g, not %g", h[i],
                          out[i], want);
        }
    }
}
