/* The weight dtypes' table (dtype.h) and the 16-bit conversions. */
#include "dtype.h"

#include <math.h>

#include "matmul.h"
#include "panel.h"

const DTypeInfo DTYPES[N_DTYPES] = {
    [DTYPE_F32] = {"f32", TENSOR_F32, 1, 4, {0}, pack_f32, value_f32, tiles_f32},
    [DTYPE_BF16] = {"bf16", TENSOR_BF16, 1, 2, {0}, pack_16bit, value_bf16, tiles_bf16},
    [DTYPE_Q8_0] = {"q8_0", TENSOR_I8, 1, 1, {32, 64}, pack_q8_0, value_q8_0, tiles_q8_0},
    [DTYPE_F16] = {"f16", TENSOR_F16, 1, 2, {0}, pack_16bit, value_f16, tiles_f16},
    [DTYPE_Q4_0] = {"q4_0", TENSOR_Q4, 2, 1, {32}, pack_q4_0, value_q4_0, tiles_q4_0},
};

int dtype_grouped(DType d) {
    return DTYPES[d].group_sizes[0] != 0;
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
