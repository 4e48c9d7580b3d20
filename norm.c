#include "norm.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

/* Independent partial sums: they let the compiler keep LANES running sums in vector registers
 * (no -ffast-math needed), and each partial sum stays LANES times smaller, so it rounds less. */
#define LANES 16

/* sum_i (x[i] - shift)^2 */
static float sum_squares(const float *x, int dim, float shift) {
    float acc[LANES] = {0};
    int i = 0;
    for (; i + LANES <= dim; i += LANES)
        for (int j = 0; j < LANES; j++) acc[j] += (x[i + j] - shift) * (x[i + j] - shift);
    float ss = 0.0f;
    for (int j = 0; j < LANES; j++) ss += acc[j];
    for (; i < dim; i++) ss += (x[i] - shift) * (x[i] - shift);
    return ss;
}

/* sum_i (x[i] - shift) */
static float sum(const float *x, int dim, float shift) {
    float acc[LANES] = {0};
    int i = 0;
    for (; i + LANES <= dim; i += LANES)
        for (int j = 0; j < LANES; j++) acc[j] += x[i + j] - shift;
    float s = 0.0f;
    for (int j = 0; j < LANES; j++) s += acc[j];
    for (; i < dim; i++) s += x[i] - shift;
    return s;
}

void rmsnorm(float *out, const float *x, const float *weight, const float *bias, int dim,
             float eps) {
    (void)bias;
    float inv_rms = 1.0f / sqrtf(sum_squares(x, dim, 0.0f) / dim + eps);
    for (int i = 0; i < dim; i++) out[i] = weight[i] * (inv_rms * x[i]);
}

void rmsnorm_eps_outside(float *out, const float *x, const float *weight, const float *bias,
                         int dim, float eps) {
    (void)bias;
    float inv = 1.0f / (sqrtf(sum_squares(x, dim, 0.0f) / dim) + eps);
    for (int i = 0; i < dim; i++) out[i] = weight[i] * (inv * x[i]);
}

void layernorm(float *out, const float *x, const float *weight, const float *bias, int dim,
               float eps) {
    /* Shifted data (Chan, Golub & LeVeque 1983, eq. 1.7): with d = x - shift, the mean is
     * shift + mean(d) and the variance mean(d^2) - mean(d)^2, which cancels nothing as long as
     * shift is near the mean. shift is the fp32 mean of the first block; blocks of BLOCK values
     * stay in L1 between their two sums, so a long row is streamed from memory twice (here and
     * for the output), as in rmsnorm. */
    enum { BLOCK = 1024 };
    int first = dim < BLOCK ? dim : BLOCK;
    float shift = sum(x, first, 0.0f) / first;
    float s1 = 0.0f, s2 = 0.0f;
    for (int b = 0; b < dim; b += BLOCK) {
        int n = dim - b < BLOCK ? dim - b : BLOCK;
        s1 += sum(x + b, n, shift);
        s2 += sum_squares(x + b, n, shift);
    }
    float mean = shift + s1 / dim;
    float var = s2 / dim - (s1 / dim) * (s1 / dim);
    float inv_std = 1.0f / sqrtf((var > 0.0f ? var : 0.0f) + eps);
    if (bias) {
        for (int i = 0; i < dim; i++) out[i] = weight[i] * (inv_std * (x[i] - mean)) + bias[i];
    } else {
        for (int i = 0; i < dim; i++) out[i] = weight[i] * (inv_std * (x[i] - mean));
    }
}

/* ----------------------------------------------------------------------------
 * 16-bit storage types, decoded by their bits (C11 has no half-precision type) */

float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31;
    uint32_t exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    float magnitude;
    if (exponent == 0) { /* zero or subnormal: mantissa * 2^-24 */
        magnitude = ldexpf((float)mantissa, -24);
    } else if (exponent == 0x1f) { /* infinity or NaN */
        uint32_t bits = 0x7f800000u | (mantissa << 13);
        memcpy(&magnitude, &bits, sizeof(bits));
    } else {
        uint32_t bits = ((exponent - 15 + 127) << 23) | (mantissa << 13);
        memcpy(&magnitude, &bits, sizeof(bits));
    }
    uint32_t bits;
    memcpy(&bits, &magnitude, sizeof(bits));
    bits |= sign;
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

void norm_16bit(NormFn fn, float (*to_f32)(uint16_t), float *out, const uint16_t *x,
                const float *weight, const float *bias, int dim, float eps) {
    for (int i = 0; i < dim; i++) out[i] = to_f32(x[i]);
    fn(out, out, weight, bias, dim, eps);
}

/* ----------------------------------------------------------------------------
 * Selection by name */

static const struct {
    const char *name;
    NormFn fn;
} norms[] = {
    {"rmsnorm", rmsnorm},
    {"layernorm", layernorm},
    {"rmsnorm_eps_outside", rmsnorm_eps_outside},
};

#define N_NORMS (sizeof(norms) / sizeof(norms[0]))

NormFn norm_by_name(const char *name) {
    for (size_t i = 0; i < N_NORMS; i++)
        if (strcmp(norms[i].name, name) == 0) return norms[i].fn;
    return NULL;
}

const char *norm_name(NormFn fn) {
    for (size_t i = 0; i < N_NORMS; i++)
        if (norms[i].fn == fn) return norms[i].name;
    return "?";
}

const char *norm_names(void) {
    static char names[128];
    if (names[0] == '\0') {
        for (size_t i = 0; i < N_NORMS; i++) {
            if (i > 0) strcat(names, "|");
            strcat(names, norms[i].name);
        }
    }
    return names;
}
