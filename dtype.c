/* The weight dtypes' table (dtype.h), the GGUF types' table, the 16-bit conversions and q8_0's
 * quantizer. */
#include "dtype.h"

#include <math.h>

#include "gguf.h"
#include "gguf_blocks.h"
#include "kquant.h"
#include "matmul.h"
#include "panel.h"

const DTypeInfo DTYPES[N_DTYPES] = {
    [DTYPE_F32] = {"f32", TENSOR_F32, 1, 4, {0}, pack_f32, value_f32, tiles_f32},
    [DTYPE_BF16] = {"bf16", TENSOR_BF16, 1, 2, {0}, pack_16bit, value_bf16, tiles_bf16},
    [DTYPE_Q8_0] = {"q8_0", TENSOR_I8, 1, 1, {32, 64}, pack_q8_0, value_q8_0, tiles_q8_0},
    [DTYPE_F16] = {"f16", TENSOR_F16, 1, 2, {0}, pack_16bit, value_f16, tiles_f16},
    [DTYPE_Q4_0] = {"q4_0", TENSOR_Q4, 2, 1, {32}, pack_q4_0, value_q4_0, tiles_q4_0},
    [DTYPE_Q4_K] = {"q4_k", TENSOR_GGUF, 256, 144, {0}, pack_q4_k, value_q4_k, tiles_kquant},
    [DTYPE_Q6_K] = {"q6_k", TENSOR_GGUF, 256, 210, {0}, pack_q6_k, value_q6_k, tiles_kquant},
};

static const GgufDType GGUF_DTYPES[] = {
    {GGUF_TENSOR_F32, DTYPE_F32, GGUF_IN_PLACE, NULL, gguf_f32_to_f32},
    {GGUF_TENSOR_F16, DTYPE_F16, GGUF_IN_PLACE, NULL, gguf_f16_to_f32},
    {GGUF_TENSOR_BF16, DTYPE_BF16, GGUF_IN_PLACE, NULL, gguf_bf16_to_f32},
    {GGUF_TENSOR_Q8_0, DTYPE_Q8_0, GGUF_REPACKED, gguf_q8_0_as_q8_0, gguf_q8_0_to_f32},
    {GGUF_TENSOR_Q4_0, DTYPE_Q4_0, GGUF_REPACKED, gguf_q4_0_as_q4_0, gguf_q4_0_to_f32},
    {GGUF_TENSOR_Q5_0, DTYPE_Q8_0, GGUF_REPACKED, gguf_q5_0_as_q8_0, gguf_q5_0_to_f32},
    {GGUF_TENSOR_Q4_1, DTYPE_Q8_0, GGUF_CONVERTED, NULL, gguf_q4_1_to_f32},
    {GGUF_TENSOR_Q5_1, DTYPE_Q8_0, GGUF_CONVERTED, NULL, gguf_q5_1_to_f32},
    {GGUF_TENSOR_Q4_K, DTYPE_Q4_K, GGUF_IN_PLACE, NULL, gguf_q4_K_to_f32},
    {GGUF_TENSOR_Q5_K, DTYPE_Q8_0, GGUF_CONVERTED, NULL, gguf_q5_K_to_f32},
    {GGUF_TENSOR_Q6_K, DTYPE_Q6_K, GGUF_IN_PLACE, NULL, gguf_q6_K_to_f32},
};

const GgufDType *gguf_dtype(uint32_t ggml_type) {
    for (size_t i = 0; i < sizeof(GGUF_DTYPES) / sizeof(GGUF_DTYPES[0]); i++)
        if (GGUF_DTYPES[i].ggml_type == ggml_type) return &GGUF_DTYPES[i];
    return NULL;
}

int dtype_grouped(DType d) {
    return DTYPES[d].group_sizes[0] != 0;
}

int dtype_kquant(DType d) {
    return DTYPES[d].kind == TENSOR_GGUF;
}

int dtype_group_size_ok(DType d, uint32_t group_size) {
    if (!dtype_grouped(d)) return group_size == 0;
    for (int i = 0; i < MAX_GROUP_SIZES; i++)
        if (DTYPES[d].group_sizes[i] != 0 && (uint32_t)DTYPES[d].group_sizes[i] == group_size)
            return 1;
    return 0;
}

size_t dtype_row_bytes(DType d, int cols) {
    const DTypeInfo *t = &DTYPES[d];
    return ((size_t)cols + t->block_size - 1) / t->block_size * t->block_bytes;
}

/* Moves the exponent from float32's bias (127) to fp16's (15), then rounds away the 13 low
 * mantissa bits; below fp16's smallest normal the value is a multiple of 2^-24, rounded by lrintf
 * (the default rounding: to nearest, ties to even). */
uint16_t f32_to_f16(float x) {
    uint32_t bits;
    memcpy(&bits, &x, sizeof(bits));
    uint16_t sign = (uint16_t)(bits >> 16 & 0x8000);
    uint32_t magnitude = bits & 0x7fffffffu;
    if (magnitude > 0x7f800000u) { /* NaN: a zero payload would read as infinity */
        uint16_t payload = (uint16_t)(magnitude >> 13 & 0x3ff);
        return sign | 0x7c00 | (payload ? payload : 0x200);
    }
    if (magnitude >= 0x477ff000u) return sign | 0x7c00; /* 65520, halfway past 65504, and up */
    if (magnitude < 0x38800000u) return sign | (uint16_t)lrintf(fabsf(x) * 0x1p24f); /* < 2^-14 */
    uint32_t rebiased = magnitude - (112u << 23);
    rebiased += 0xfff + (rebiased >> 13 & 1); /* ties to even */
    return sign | (uint16_t)(rebiased >> 13);
}

/* C11 has no half-precision type: the value is put together from the bits. */
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

void quantize_q8_0_row(const float *x, int n, int group_size, int8_t *values, float *scales) {
    for (int start = 0; start < n; start += group_size) {
        int end = n - start < group_size ? n : start + group_size;
        float amax = 0.0f;
        for (int j = start; j < end; j++) amax = fmaxf(amax, fabsf(x[j]));
        float scale = amax / 127.0f;
        scales[start / group_size] = scale;
        for (int j = start; j < end; j++)
            values[j] =
                scale > 0.0f ? (int8_t)fminf(fmaxf(rintf(x[j] / scale), -127.0f), 127.0f) : 0;
    }
}
