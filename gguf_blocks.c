/* ggml's blocks read row by row (gguf_blocks.h), from the block layouts of ggml-common.h and the
 * arithmetic of ggml-quants.c's dequantize_row_*.
 */
#include "gguf_blocks.h"

#include <string.h>

#include "dtype.h"

/* An IEEE half at p, which need not be aligned, as a float (exact). */
static float half_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, sizeof(h));
    return f16_to_f32(h);
}

/* ----------------------------------------------------------------------------
 * One value per element */

void gguf_f32_to_f32(const uint8_t *row, int n, float *out) {
    memcpy(out, row, (size_t)n * sizeof(float));
}

void gguf_f16_to_f32(const uint8_t *row, int n, float *out) {
    for (int j = 0; j < n; j++) out[j] = half_at(row + 2 * j);
}

void gguf_bf16_to_f32(const uint8_t *row, int n, float *out) {
    for (int j = 0; j < n; j++) {
        uint16_t h;
        memcpy(&h, row + 2 * j, sizeof(h));
        out[j] = bf16_to_f32(h);
    }
}

/* ----------------------------------------------------------------------------
 * Blocks of 32: a half d (and for Q4_1, Q5_1 a half m), Q5's uint32 qh of fifth bits, then the
 * codes. Q4_0 .. Q5_1 hold the codes of values j and j + 16 in byte j of qs[16]. */

enum { Q8_0_BYTES = 34, Q4_0_BYTES = 18, Q4_1_BYTES = 20, Q5_0_BYTES = 22, Q5_1_BYTES = 24 };

/* The 5-bit code of value j (0..31) of a Q5_0 or Q5_1 block whose qh and qs are given: qs's
 * nibble for the low four bits, qh's bit j for the fifth. */
static int q5_code(uint32_t qh, const uint8_t *qs, int j) {
    int low = j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4;
    return low | (int)((qh >> j) & 1) << 4;
}

static uint32_t u32_at(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}

void gguf_q8_0_to_f32(const uint8_t *row, int n, float *out) {
    for (int b = 0; b < n / 32; b++, row += Q8_0_BYTES) {
        float d = half_at(row);
        const int8_t *qs = (const int8_t *)(row + 2);
        for (int j = 0; j < 32; j++) out[32 * b + j] = qs[j] * d;
    }
}

void gguf_q4_0_to_f32(const uint8_t *row, int n, float *out) {
    for (int b = 0; b < n / 32; b++, row += Q4_0_BYTES) {
        float d = half_at(row);
        const uint8_t *qs = row + 2;
        for (int j = 0; j < 16; j++) {
            out[32 * b + j] = ((qs[j] & 0x0f) - 8) * d;
            out[32 * b + j + 16] = ((qs[j] >> 4) - 8) * d;
        }
    }
}

void gguf_q4_1_to_f32(const uint8_t *row, int n, float *out) {
    for (int b = 0; b < n / 32; b++, row += Q4_1_BYTES) {
        float d = half_at(row), m = half_at(row + 2);
        const uint8_t *qs = row + 4;
        for (int j = 0; j < 16; j++) {
            out[32 * b + j] = (qs[j] & 0x0f) * d + m;
            out[32 * b + j + 16] = (qs[j] >> 4) * d + m;
        }
    }
}

void gguf_q5_0_to_f32(const uint8_t *row, int n, float *out) {
    for (int b = 0; b < n / 32; b++, row += Q5_0_BYTES) {
        float d = half_at(row);
        uint32_t qh = u32_at(row + 2);
        for (int j = 0; j < 32; j++) out[32 * b + j] = (q5_code(qh, row + 6, j) - 16) * d;
    }
}

void gguf_q5_1_to_f32(const uint8_t *row, int n, float *out) {
    for (int b = 0; b < n / 32; b++, row += Q5_1_BYTES) {
        float d = half_at(row), m = half_at(row + 2);
        uint32_t qh = u32_at(row + 4);
        for (int j = 0; j < 32; j++) out[32 * b + j] = q5_code(qh, row + 8, j) * d + m;
    }
}

void gguf_q8_0_as_q8_0(const uint8_t *row, int n, void *values, float *scales) {
    int8_t *q = values;
    for (int b = 0; b < n / 32; b++, row += Q8_0_BYTES) {
        scales[b] = half_at(row);
        memcpy(q + 32 * b, row + 2, 32);
    }
}

void gguf_q5_0_as_q8_0(const uint8_t *row, int n, void *values, float *scales) {
    int8_t *q = values;
    for (int b = 0; b < n / 32; b++, row += Q5_0_BYTES) {
        scales[b] = half_at(row);
        uint32_t qh = u32_at(row + 2);
        for (int j = 0; j < 32; j++) q[32 * b + j] = (int8_t)(q5_code(qh, row + 6, j) - 16);
    }
}

void gguf_q4_0_as_q4_0(const uint8_t *row, int n, void *values, float *scales) {
    uint8_t *codes = values;
    for (int b = 0; b < n / 32; b++, row += Q4_0_BYTES) {
        scales[b] = half_at(row);
        const uint8_t *qs = row + 2;
        for (int j = 0; j < 16; j += 2) { /* values j, j + 1 and j + 16, j + 17 */
            codes[16 * b + j / 2] = (uint8_t)((qs[j] & 0x0f) | (qs[j + 1] & 0x0f) << 4);
            codes[16 * b + 8 + j / 2] = (uint8_t)((qs[j] >> 4) | (qs[j + 1] & 0xf0));
        }
    }
}

/* ----------------------------------------------------------------------------
 * Blocks of 256 (the K types). Q4_K and Q5_K: half d, half dmin, 12 bytes of 6-bit scales and
 * mins (8 of each, one a sub-block of 32), [Q5_K: qh[32], bit 2k + (0 or 1) of qh[l] the fifth
 * bit of value l of sub-block 2k or 2k + 1], qs[128]: each 64 values, the first 32 in the low
 * nibbles of 32 bytes, the next 32 in their high ones. */

enum { Q4_K_BYTES = 144, Q5_K_BYTES = 176, Q6_K_BYTES = 210 };

/* Scale and min of sub-block j (0..7) from the 12 packed bytes: j < 4 in the low 6 bits of
 * bytes j and j + 4; j >= 4 split between the nibbles of byte j + 4 and the top 2 bits of bytes
 * j - 4 (scale) and j (min). */
void gguf_k_scale_min(const uint8_t *s, int j, int *scale, int *min) {
    if (j < 4) {
        *scale = s[j] & 63;
        *min = s[j + 4] & 63;
    } else {
        *scale = (s[j + 4] & 0x0f) | (s[j - 4] >> 6) << 4;
        *min = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

/* Q4_K and Q5_K, qh NULL for Q4_K. */
static void k4_k5_to_f32(const uint8_t *row, int n, float *out, int block_bytes, int has_qh) {
    for (int b = 0; b < n / 256; b++, row += block_bytes) {
        float d = half_at(row), dmin = half_at(row + 2);
        const uint8_t *scales = row + 4, *qh = has_qh ? row + 16 : NULL;
        const uint8_t *qs = row + (has_qh ? 48 : 16);
        for (int sub = 0; sub < 8; sub++) { /* sub-block of 32: nibbles of qs[32 * (sub / 2)..] */
            int scale, min;
            gguf_k_scale_min(scales, sub, &scale, &min);
            float d1 = d * scale, m1 = dmin * min;
            const uint8_t *q = qs + 32 * (sub / 2);
            for (int l = 0; l < 32; l++) {
                int code = sub % 2 ? q[l] >> 4 : q[l] & 0x0f;
                if (qh && (qh[l] >> sub & 1)) code += 16;
                *out++ = d1 * code - m1;
            }
        }
    }
}

void gguf_q4_K_to_f32(const uint8_t *row, int n, float *out) {
    k4_k5_to_f32(row, n, out, Q4_K_BYTES, 0);
}

void gguf_q5_K_to_f32(const uint8_t *row, int n, float *out) {
    k4_k5_to_f32(row, n, out, Q5_K_BYTES, 1);
}

/* Q6_K: ql[128] (low 4 bits), qh[64] (high 2 bits), int8 scales[16] (one a sub-block of 16),
 * half d; value = d * scale * (q - 32). In each half of 128 values, for l < 32, byte ql[l] holds
 * values l (low nibble) and l + 64 (high), ql[l + 32] values l + 32 and l + 96, and qh[l] the
 * high bits of l, l + 32, l + 64, l + 96 in that order, two bits each. */
void gguf_q6_K_to_f32(const uint8_t *row, int n, float *out) {
    for (int b = 0; b < n / 256; b++, row += Q6_K_BYTES) {
        const uint8_t *ql = row, *qh = row + 128;
        const int8_t *sc = (const int8_t *)(row + 192);
        float d = half_at(row + 208);
        for (int half = 0; half < 2; half++, ql += 64, qh += 32, sc += 8, out += 128) {
            for (int l = 0; l < 32; l++) {
                int q[4] = {ql[l] & 0x0f, ql[l + 32] & 0x0f, ql[l] >> 4, ql[l + 32] >> 4};
                for (int k = 0; k < 4; k++) {
                    int code = (q[k] | ((qh[l] >> (2 * k)) & 3) << 4) - 32;
                    out[l + 32 * k] = d * sc[l / 16 + 2 * k] * code;
                }
            }
        }
    }
}
