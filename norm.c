/* The norms (norm.h): RMSNorm, RMSNorm with eps outside the root, LayerNorm, fast and plain, and
 * the table that picks one by name; the model calls them through a NormFn. */
#include "norm.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "simd.h"

/* The sums below run over vectors of VEC_WIDTH lanes (simd.h) with two accumulators, so that
 * an add need not wait for the one before it; each lane's partial sum also stays smaller than a
 * running total would, so it rounds less. */

/* sum_i x[i]^2 */
static float sum_squares(const float *x, int dim) {
    vecf acc0 = vec_zero(), acc1 = vec_zero();
    int i = 0;
    for (; i + 2 * VEC_WIDTH <= dim; i += 2 * VEC_WIDTH) {
        vecf a = vec_load(x + i), b = vec_load(x + i + VEC_WIDTH);
        acc0 = vec_fmadd(a, a, acc0);
        acc1 = vec_fmadd(b, b, acc1);
    }
    for (; i < dim; i += VEC_WIDTH) {
        vecf a = vec_load_upto(x + i, dim - i);
        acc0 = vec_fmadd(a, a, acc0);
    }
    return vec_sum(vec_add(acc0, acc1));
}

/* sum_i x[i] */
static float sum(const float *x, int dim) {
    vecf acc0 = vec_zero(), acc1 = vec_zero();
    int i = 0;
    for (; i + 2 * VEC_WIDTH <= dim; i += 2 * VEC_WIDTH) {
        acc0 = vec_add(vec_load(x + i), acc0);
        acc1 = vec_add(vec_load(x + i + VEC_WIDTH), acc1);
    }
    for (; i < dim; i += VEC_WIDTH) acc0 = vec_add(vec_load_upto(x + i, dim - i), acc0);
    return vec_sum(vec_add(acc0, acc1));
}

/* sum_i (x[i] - shift)^k over one vector d of x - shift, into acc1 (k = 1) and acc2 (k = 2) */
static inline void add_shifted(vecf d, vecf *acc1, vecf *acc2) {
    *acc1 = vec_add(d, *acc1);
    *acc2 = vec_fmadd(d, d, *acc2);
}

/* *s1 = sum_i (x[i] - shift) and *s2 = sum_i (x[i] - shift)^2, in one pass over x. The zeros
 * after a partial last vector become -shift: they are taken back out. */
static void shifted_sums(const float *x, int dim, float shift, float *s1, float *s2) {
    vecf a1 = vec_zero(), a2 = vec_zero(), b1 = vec_zero(), b2 = vec_zero();
    vecf vshift = vec_set1(shift);
    int i = 0;
    for (; i + 2 * VEC_WIDTH <= dim; i += 2 * VEC_WIDTH) {
        add_shifted(vec_sub(vec_load(x + i), vshift), &a1, &a2);
        add_shifted(vec_sub(vec_load(x + i + VEC_WIDTH), vshift), &b1, &b2);
    }
    for (; i < dim; i += VEC_WIDTH)
        add_shifted(vec_sub(vec_load_upto(x + i, dim - i), vshift), &a1, &a2);
    float pad = (float)(i - dim); /* lanes past the end of the row */
    *s1 = vec_sum(vec_add(a1, b1)) + pad * shift;
    *s2 = vec_sum(vec_add(a2, b2)) - pad * shift * shift;
}

/* What a norm does to each value before its weight: x -> scale * (x - center). */
typedef struct {
    float center, scale;
} Standardize;

/* out = weight * (scale * (x - center)) + bias (bias may be NULL: none), the last step of every
 * norm. It prefetches the row after x (the next row of a batch, or whatever follows x: a
 * prefetch never faults) while it writes this one, so that the next call finds its row in cache
 * rather than reading it from memory only after these writes. */
static void write_normalized(float *out, const float *x, const float *weight, const float *bias,
                             int dim, Standardize s) {
    vecf vcenter = vec_set1(s.center), vscale = vec_set1(s.scale);
    for (int i = 0; i < dim; i += VEC_WIDTH) {
        __builtin_prefetch(x + dim + i);
        vecf normalized = vec_mul(vscale, vec_sub(vec_load_upto(x + i, dim - i), vcenter));
        vecf y = vec_mul(vec_load_upto(weight + i, dim - i), normalized);
        if (bias) y = vec_add(y, vec_load_upto(bias + i, dim - i));
        vec_store_upto(out + i, y, dim - i);
    }
}

void rmsnorm(float *out, const float *x, const float *weight, const float *bias, int dim,
             float eps) {
    (void)bias;
    float inv_rms = 1.0f / sqrtf(sum_squares(x, dim) / dim + eps);
    write_normalized(out, x, weight, NULL, dim, (Standardize){0.0f, inv_rms});
}

void rmsnorm_eps_outside(float *out, const float *x, const float *weight, const float *bias,
                         int dim, float eps) {
    (void)bias;
    float inv = 1.0f / (sqrtf(sum_squares(x, dim) / dim) + eps);
    write_normalized(out, x, weight, NULL, dim, (Standardize){0.0f, inv});
}

void layernorm(float *out, const float *x, const float *weight, const float *bias, int dim,
               float eps) {
    /* Shifted data (Chan, Golub & LeVeque 1983, eq. 1.7): with d = x - shift, the mean is
     * shift + mean(d) and the variance mean(d^2) - mean(d)^2, which cancels nothing as long as
     * shift is near the mean. shift is the mean of the first SHIFT_SAMPLE values: near the mean
     * for any row not dominated by outliers, and cheap, so that the row is read once for both
     * sums and once for the output, as in rmsnorm. */
    enum { SHIFT_SAMPLE = 64 };
    int first = dim < SHIFT_SAMPLE ? dim : SHIFT_SAMPLE;
    float shift = sum(x, first) / first;
    float s1, s2;
    shifted_sums(x, dim, shift, &s1, &s2);
    float mean = shift + s1 / dim;
    float var = s2 / dim - (s1 / dim) * (s1 / dim);
    float inv_std = 1.0f / sqrtf((var > 0.0f ? var : 0.0f) + eps);
    write_normalized(out, x, weight, bias, dim, (Standardize){mean, inv_std});
}

/* ----------------------------------------------------------------------------
 * The plain path: each equation as written, sums in double */

/* out = weight * x * scale, each value rounded once to fp32 */
static void write_scaled(float *out, const float *x, const float *weight, int dim, double scale) {
    for (int i = 0; i < dim; i++) out[i] = (float)(weight[i] * (x[i] * scale));
}

/* mean_i x[i]^2, in double */
static double mean_square(const float *x, int dim) {
    double ss = 0.0;
    for (int i = 0; i < dim; i++) ss += (double)x[i] * x[i];
    return ss / dim;
}

static void rmsnorm_ref(float *out, const float *x, const float *weight, const float *bias, int dim,
                        float eps) {
    (void)bias;
    write_scaled(out, x, weight, dim, 1.0 / sqrt(mean_square(x, dim) + eps));
}

static void rmsnorm_eps_outside_ref(float *out, const float *x, const float *weight,
                                    const float *bias, int dim, float eps) {
    (void)bias;
    write_scaled(out, x, weight, dim, 1.0 / (sqrt(mean_square(x, dim)) + eps));
}

static void layernorm_ref(float *out, const float *x, const float *weight, const float *bias,
                          int dim, float eps) {
    double mean = 0.0, var = 0.0;
    for (int i = 0; i < dim; i++) mean += x[i];
    mean /= dim;
    for (int i = 0; i < dim; i++) var += (x[i] - mean) * (x[i] - mean);
    var /= dim;
    double inv_std = 1.0 / sqrt(var + eps);
    for (int i = 0; i < dim; i++)
        out[i] = (float)(weight[i] * ((x[i] - mean) * inv_std) + (bias ? bias[i] : 0.0));
}

/* ----------------------------------------------------------------------------
 * Selection by name */

static const struct {
    const char *name;
    NormFn fn, plain;
} norms[] = {
    {"rmsnorm", rmsnorm, rmsnorm_ref},
    {"layernorm", layernorm, layernorm_ref},
    {"rmsnorm_eps_outside", rmsnorm_eps_outside, rmsnorm_eps_outside_ref},
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

NormFn norm_plain(NormFn fn) {
    for (size_t i = 0; i < N_NORMS; i++)
        if (norms[i].fn == fn) return norms[i].plain;
    return NULL;
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
