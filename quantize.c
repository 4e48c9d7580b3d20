/* The inputs of the integer products quantized (quantize.h): int16 for q8_0's tiles, int8 blocks
 * of 32 for q4_0's and the K-quants', and the memory a batch of them takes.
 */
#include "quantize.h"

#include <math.h>
#include <stdlib.h>

#include "align.h"
#include "simd.h"

/* The largest |x[j]| of x[0 .. n - 1] that is not NaN (a NaN is caught where it is quantized), or
 * 0. In vectors: the scalar loop, which GCC 12 left scalar, was 60% of quantize_input_blocks and
 * that a seventh of q4_0's prefill products (build/gemm 110M q4_0, perf, one thread). */
static float abs_max(const float *x, int n) {
    vecf max = vec_zero();
    for (int j = 0; j < n; j += VEC_WIDTH) /* vec_max keeps max's lane where |x[j]| is NaN */
        max = vec_max(vec_abs(vec_load_upto(x + j, n - j)), max);
    return vec_max_lanes(max);
}

void quantize_input(int16_t *xq, float *scale, const float *x, int n) {
    float max = abs_max(x, n);
    /* in double: 32767 / max overflows a float for max below 1e-34, and 0 * inf made a finite
     * input's scale NaN */
    double inv = max > 0.0f ? 32767.0 / max : 0.0;
    int bad = 0; /* an input that is NaN, or infinite (then max is, inv 0 and x * inv NaN) */
    for (int j = 0; j < n; j++) {
        double v = x[j] * inv;
        int ok = fabs(v) <= 32767.5; /* converting anything else to int16 is undefined */
        xq[j] = ok ? (int16_t)nearbyint(v) : 0;
        bad |= !ok;
    }
    *scale = bad ? NAN : max / 32767.0f;
    for (int j = n; j % 64 != 0; j++) xq[j] = 0; /* a short last group is read by column pairs */
}

void quantize_input_blocks(int8_t *xq, float *scales, int32_t *sums, const float *x, int n) {
    for (int start = 0; start < n; start += 32) {
        int len = n - start < 32 ? n - start : 32;
        const float *v = x + start;
        float max = abs_max(v, len);
        double inv = max > 0.0f ? 127.0 / max : 0.0; /* double and bad: as quantize_input's */
        int bad = 0, sum = 0;
        for (int j = 0; j < len; j++) {
            double q = v[j] * inv;
            int ok = fabs(q) <= 127.5;
            xq[start + j] = ok ? (int8_t)nearbyint(q) : 0;
            sum += xq[start + j];
            bad |= !ok;
        }
        scales[start / 32] = bad ? NAN : max / 127.0f;
        sums[start / 32] = sum;
    }
    for (int j = n; j % 32 != 0; j++)
        xq[j] = 0; /* a short last group is read 8 columns at a time */
}

void offset_input_bytes(uint8_t *offset, const int8_t *xq, int n) {
    for (int j = 0; j < n; j++) offset[j] = (uint8_t)(xq[j] + 128);
}

/* The bytes of one input of `stride` values in xq's values memory: q4_0's int8 values, their
 * unsigned copies and a scale and a sum a block of 32, 2.25 a value, which hold q8_0's int16
 * values too. */
static size_t input_bytes(size_t stride) {
    return 2 * stride + stride / 32 * (sizeof(float) + sizeof(int32_t));
}

int quantized_inputs_alloc(QuantizedInputs *xq, int batch, int cols) {
    /* a cache line of bytes, and a row of int16 inputs' whole pairs of groups of 64 */
    size_t stride = round_up_64(cols), values = (size_t)batch * stride;
    *xq = (QuantizedInputs){.stride = stride};
    xq->values = aligned_alloc(64, round_up_64(batch * input_bytes(stride)));
    xq->scales = aligned_alloc(64, round_up_64((size_t)batch * sizeof(float)));
    if (!xq->values || !xq->scales) return -1;
    /* q4_0's int8 values, their unsigned copies, then its blocks' scales and sums */
    char *q4 = (char *)xq->values;
    xq->bytes = (int8_t *)q4;
    xq->offset_bytes = (uint8_t *)(q4 + values);
    xq->block_scales = (float *)(q4 + 2 * values);
    xq->block_sums = (int32_t *)(q4 + 2 * values + values / 32 * sizeof(float));
    return 0;
}

void quantized_inputs_free(QuantizedInputs *xq) {
    free(xq->values);
    free(xq->scales);
    *xq = (QuantizedInputs){0};
}

size_t quantized_input_bytes(int cols) {
    return input_bytes(round_up_64(cols)) + sizeof(float);
}
