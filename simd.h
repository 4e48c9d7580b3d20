/* simd.h: the few vector operations the kernels (matmul.c, attention.c, the norms in
 * norm.c, tools/bandwidth.c and tools/flops.c) are written in, for one of three targets picked at
 * compile time:
 *   AVX-512 (-march with avx512f/bw/vl): vecf holds 16 floats;
 *   AVX2 + FMA + F16C:                   vecf holds 8 floats;
 *   anything else (the portable build):  vecf is one float, the ops plain C.
 * VEC_WIDTH is the number of floats in a vecf. The operations, the same on every target:
 *   vec_zero(), vec_set1(a)        every lane 0, or a
 *   vec_add, vec_sub, vec_mul,     lane by lane
 *   vec_div, vec_max, vec_min      (vec_max(a, b), vec_min(a, b): b where either is NaN)
 *   vec_abs(v)                     |v| lane by lane (the sign bit cleared)
 *   vec_max_lanes(v)               the largest of v's lanes, none of them NaN
 *   vec_fmadd(a, b, c)             a * b + c lane by lane, rounded once (twice in the portable
 *                                  build, whose C11 does not contract it)
 *   vec_load(p), vec_store(p, v)   VEC_WIDTH floats at p, any alignment
 *   vec_load_partial(p, n),        n < VEC_WIDTH floats: the other lanes read as zero and are not
 *   vec_store_partial(p, v, n)     written; memory past p + n is never touched
 *   vec_load_upto(p, n),           min(n, VEC_WIDTH) floats (n >= 0): a whole vector, or partial
 *   vec_store_upto(p, v, n)
 *   vec_load_bf16(p)               VEC_WIDTH bf16 values (uint16 bits) widened to floats
 *   vec_load_f16(p)                VEC_WIDTH IEEE fp16 values (uint16 bits) as floats, exactly:
 *                                  F16C's vcvtph2ps, or in the portable build dtype.h's f16_to_f32
 *                                  (a NaN stays a NaN, its payload aside)
 *   vec_sum4(a, b, c, d, out)      out[i] = the sum of the i-th vector's lanes, each vector's
 *                                  lanes added in the same tree whichever argument it is
 *   vec_sum(v)                     the sum of v's lanes, in vec_sum4's order
 *   vec_pow2i(n)                   2^n for integer-valued n in [-126, 127] (AVX2, AVX-512)
 *   vec_exp(v)                     e^v lane by lane (below), within 1 ulp of expf (the portable
 *                                  build: expf)
 * and for q8_0's integer dot products, vecw (2 * VEC_WIDTH int16) and veci (VEC_WIDTH int32):
 *   vecw_load_i8(p)                2 * VEC_WIDTH int8 values widened to int16
 *   vecw_set1_pair(p)              the int16 pair p[0], p[1] in every int32 lane
 *   veci_zero(), vec_from_veci(v)  int32 lanes, and their values as floats
 *   veci_set1(a)                   every lane a
 *   veci_dot(acc, a, b)            lane i of acc + a[2i] b[2i] + a[2i + 1] b[2i + 1] (AVX512-VNNI
 *                                  vpdpwssd, or vpmaddwd and an add): exact, the same integers
 *                                  on every target as long as a lane stays within int32
 * and for q4_0's, vecb (4 * VEC_WIDTH bytes) with vecw's lanes as int16 sums:
 *   vecb_load(p), vecb_store(p, v) 4 * VEC_WIDTH bytes at p
 *   vecb_nibbles(v, low, high)     *low the low nibble of each byte of v, *high the high one
 *                                  (0..15)
 *   vecb_set1_quad(p)              the int8 values p[0..3] in every 32-bit lane
 *   vecw_zero()                    every int16 lane 0
 *   vecw_dot_u8(acc, u, s)         int16 lane i of acc + u[2i] s[2i] + u[2i + 1] s[2i + 1],
 *                                  u's bytes unsigned, s's signed (vpmaddubsw and an add):
 *                                  exact while each pair and each lane stays within int16
 *                                  (vpmaddubsw saturates past it, the add wraps); with
 *                                  AVX512-VNNI int32 lane i of acc + the 4 products of bytes
 *                                  4i .. 4i + 3 (vpdpbusd), the same sums once widened
 *   veci_from_pairs(w)             int32 lane i = the sum of w's int16 lanes 2i and 2i + 1
 *                                  (vpmaddwd by ones; with AVX512-VNNI w itself)
 *   vecw_start(s), veci_finish(w, s)  a sum of vecw_dot_u8's that starts from the int32 lanes s:
 *                                  w = vecw_start(s), the products added to w, then
 *                                  veci_finish(w, s) = s + veci_from_pairs of the products. With
 *                                  AVX512-VNNI the int32 lanes start at s, no add; the int16
 *                                  lanes, which could not hold it, start at 0 and s is added
 *                                  once they are widened
 * and for the K-quants' (kquant.c), unpacking their scales and 6-bit codes:
 *   veci_load(p)                   VEC_WIDTH int32 at p, any alignment
 *   veci_load_i8(p)                VEC_WIDTH int8 at p widened to int32
 *   veci_add, veci_mul             lane by lane (veci_mul: the low 32 bits of the product)
 *   veci_and, veci_or, veci_shr(v, n)  bitwise; shr shifts each lane right by n (< 32), zeros in
 *   vecb_set1(c)                   the byte c in every byte
 *   vecb_and, vecb_or, vecb_sub    byte by byte (vecb_sub wrapping)
 *   vecb_shl(v, n), vecb_shr(v, n) each byte shifted by n (< 8), for bytes whose bits shifted out
 *                                  are zero (AVX shifts 16-bit lanes: a bit would cross bytes)
 *   vecw_sub(a, b)                 lane by lane: int16, wrapping as vecw_dot_u8's adds do (with
 *                                  AVX512-VNNI int32, as its lanes are)
 */
#ifndef SIMD_H
#define SIMD_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "dtype.h" /* f16_to_f32 and bf16_to_f32, where no instruction converts */

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>
#define VEC_WIDTH 16
typedef __m512 vecf;
typedef __m512i veci; /* 16 int32 */
typedef __m512i vecw; /* 32 int16 */

static inline vecf vec_zero(void) {
    return _mm512_setzero_ps();
}
static inline vecf vec_set1(float a) {
    return _mm512_set1_ps(a);
}
static inline vecf vec_add(vecf a, vecf b) {
    return _mm512_add_ps(a, b);
}
static inline vecf vec_sub(vecf a, vecf b) {
    return _mm512_sub_ps(a, b);
}
static inline vecf vec_mul(vecf a, vecf b) {
    return _mm512_mul_ps(a, b);
}
static inline vecf vec_div(vecf a, vecf b) {
    return _mm512_div_ps(a, b);
}
static inline vecf vec_max(vecf a, vecf b) {
    return _mm512_max_ps(a, b);
}
static inline vecf vec_min(vecf a, vecf b) {
    return _mm512_min_ps(a, b);
}
static inline vecf vec_abs(vecf v) {
    return _mm512_abs_ps(v);
}
static inline float vec_max_lanes(vecf v) {
    return _mm512_reduce_max_ps(v);
}
/* the exponent field n + 127, shifted into place */
static inline vecf vec_pow2i(vecf n) {
    __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
    return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
}
/* a * b + c, rounded once */
static inline vecf vec_fmadd(vecf a, vecf b, vecf c) {
    return _mm512_fmadd_ps(a, b, c);
}
static inline vecf vec_load(const float *p) {
    return _mm512_loadu_ps(p);
}
static inline vecf vec_load_partial(const float *p, int n) {
    return _mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1), p);
}
static inline void vec_store(float *p, vecf v) {
    _mm512_storeu_ps(p, v);
}
static inline void vec_store_partial(float *p, vecf v, int n) {
    _mm512_mask_storeu_ps(p, (__mmask16)((1u << n) - 1), v);
}
/* bf16 is the upper half of a float's bits: widen to 32 bits and shift into place */
static inline vecf bf16x16_to_vec(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
static inline vecf vec_load_bf16(const uint16_t *p) {
    return bf16x16_to_vec(_mm256_loadu_si256((const __m256i *)p));
}
static inline vecf vec_load_f16(const uint16_t *p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}
/* 8 floats: lanes i and i + 8 of v added */
static inline __m256 vec_fold256(vecf v) {
    return _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
}

static inline veci veci_zero(void) {
    return _mm512_setzero_si512();
}
static inline veci veci_set1(int32_t a) {
    return _mm512_set1_epi32(a);
}
static inline vecf vec_from_veci(veci v) {
    return _mm512_cvtepi32_ps(v);
}
static inline vecw vecw_load_i8(const int8_t *p) {
    return _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)p));
}
static inline vecw vecw_set1_pair(const int16_t *p) {
    int32_t pair;
    memcpy(&pair, p, sizeof(pair));
    return _mm512_set1_epi32(pair);
}
static inline veci veci_dot(veci acc, vecw a, vecw b) {
#if defined(__AVX512VNNI__)
    return _mm512_dpwssd_epi32(acc, a, b);
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
#endif
}
typedef __m512i vecb;
static inline vecb vecb_load(const uint8_t *p) {
    return _mm512_loadu_si512(p);
}
static inline void vecb_store(uint8_t *p, vecb v) {
    _mm512_storeu_si512(p, v);
}
static inline void vecb_nibbles(vecb v, vecb *low, vecb *high) {
    __m512i mask = _mm512_set1_epi8(0x0f);
    *low = _mm512_and_si512(v, mask);
    *high = _mm512_and_si512(_mm512_srli_epi16(v, 4), mask);
}
static inline vecb vecb_set1_quad(const int8_t *p) {
    int32_t quad;
    memcpy(&quad, p, sizeof(quad));
    return _mm512_set1_epi32(quad);
}
static inline vecw vecw_zero(void) {
    return _mm512_setzero_si512();
}
#if defined(__AVX512VNNI__)
/* vpdpbusd: a byte quad's four products summed into an int32 lane at once, the sum the int16
 * pairs come to in veci_from_pairs below (the same integers while those stay within int16), in one
 * instruction where the others take two */
static inline vecw vecw_dot_u8(vecw acc, vecb u, vecb s) {
    return _mm512_dpbusd_epi32(acc, u, s);
}
static inline veci veci_from_pairs(vecw w) {
    return w;
}
#else
static inline vecw vecw_dot_u8(vecw acc, vecb u, vecb s) {
    return _mm512_add_epi16(acc, _mm512_maddubs_epi16(u, s));
}
static inline veci veci_from_pairs(vecw w) {
    return _mm512_madd_epi16(w, _mm512_set1_epi16(1));
}
#endif

#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
/* (every CPU with AVX2 has F16C; requiring it leaves no widening path that no test could run) */
#include <immintrin.h>
#define VEC_WIDTH 8
typedef __m256 vecf;
typedef __m256i veci; /* 8 int32 */
typedef __m256i vecw; /* 16 int16 */

static inline vecf vec_zero(void) {
    return _mm256_setzero_ps();
}
static inline vecf vec_set1(float a) {
    return _mm256_set1_ps(a);
}
static inline vecf vec_add(vecf a, vecf b) {
    return _mm256_add_ps(a, b);
}
static inline vecf vec_sub(vecf a, vecf b) {
    return _mm256_sub_ps(a, b);
}
static inline vecf vec_mul(vecf a, vecf b) {
    return _mm256_mul_ps(a, b);
}
static inline vecf vec_div(vecf a, vecf b) {
    return _mm256_div_ps(a, b);
}
static inline vecf vec_max(vecf a, vecf b) {
    return _mm256_max_ps(a, b);
}
static inline vecf vec_min(vecf a, vecf b) {
    return _mm256_min_ps(a, b);
}
static inline vecf vec_abs(vecf v) {
    return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}
static inline float vec_max_lanes(vecf v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m)); /* lanes 0, 1 of 4 */
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}
static inline vecf vec_pow2i(vecf n) {
    __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
}
static inline vecf vec_fmadd(vecf a, vecf b, vecf c) {
    return _mm256_fmadd_ps(a, b, c);
}
static inline vecf vec_load(const float *p) {
    return _mm256_loadu_ps(p);
}
static inline void vec_store(float *p, vecf v) {
    _mm256_storeu_ps(p, v);
}
static inline vecf vec_load_bf16(const uint16_t *p) {
    __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}
static inline vecf vec_load_f16(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}
static inline __m256 vec_fold256(vecf v) {
    return v;
}

static inline veci veci_zero(void) {
    return _mm256_setzero_si256();
}
static inline veci veci_set1(int32_t a) {
    return _mm256_set1_epi32(a);
}
static inline vecf vec_from_veci(veci v) {
    return _mm256_cvtepi32_ps(v);
}
static inline vecw vecw_load_i8(const int8_t *p) {
    return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)p));
}
static inline vecw vecw_set1_pair(const int16_t *p) {
    int32_t pair;
    memcpy(&pair, p, sizeof(pair));
    return _mm256_set1_epi32(pair);
}
static inline veci veci_dot(veci acc, vecw a, vecw b) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
}
typedef __m256i vecb;
static inline vecb vecb_load(const uint8_t *p) {
    return _mm256_loadu_si256((const __m256i *)p);
}
static inline void vecb_store(uint8_t *p, vecb v) {
    _mm256_storeu_si256((__m256i *)p, v);
}
static inline void vecb_nibbles(vecb v, vecb *low, vecb *high) {
    __m256i mask = _mm256_set1_epi8(0x0f);
    *low = _mm256_and_si256(v, mask);
    *high = _mm256_and_si256(_mm256_srli_epi16(v, 4), mask);
}
static inline vecb vecb_set1_quad(const int8_t *p) {
    int32_t quad;
    memcpy(&quad, p, sizeof(quad));
    return _mm256_set1_epi32(quad);
}
static inline vecw vecw_zero(void) {
    return _mm256_setzero_si256();
}
static inline vecw vecw_dot_u8(vecw acc, vecb u, vecb s) {
    return _mm256_add_epi16(acc, _mm256_maddubs_epi16(u, s));
}
static inline veci veci_from_pairs(vecw w) {
    return _mm256_madd_epi16(w, _mm256_set1_epi16(1));
}

#else
#define VEC_WIDTH 1
typedef float vecf;
typedef int32_t veci;
typedef struct {
    int32_t v[2];
} vecw;

static inline vecf vec_zero(void) {
    return 0.0f;
}
static inline vecf vec_set1(float a) {
    return a;
}
static inline vecf vec_add(vecf a, vecf b) {
    return a + b;
}
static inline vecf vec_sub(vecf a, vecf b) {
    return a - b;
}
static inline vecf vec_mul(vecf a, vecf b) {
    return a * b;
}
static inline vecf vec_div(vecf a, vecf b) {
    return a / b;
}
static inline vecf vec_max(vecf a, vecf b) {
    return a > b ? a : b;
}
static inline vecf vec_min(vecf a, vecf b) {
    return a < b ? a : b;
}
static inline vecf vec_abs(vecf v) {
    return fabsf(v);
}
static inline float vec_max_lanes(vecf v) {
    return v;
}
static inline vecf vec_fmadd(vecf a, vecf b, vecf c) {
    return a * b + c;
}
static inline vecf vec_load(const float *p) {
    return *p;
}
static inline void vec_store(float *p, vecf v) {
    *p = v;
}
static inline vecf vec_load_bf16(const uint16_t *p) {
    return bf16_to_f32(*p);
}
static inline vecf vec_load_f16(const uint16_t *p) {
    return f16_to_f32(*p);
}

static inline veci veci_zero(void) {
    return 0;
}
static inline veci veci_set1(int32_t a) {
    return a;
}
static inline vecf vec_from_veci(veci v) {
    return (float)v;
}
static inline vecw vecw_load_i8(const int8_t *p) {
    return (vecw){{p[0], p[1]}};
}
static inline vecw vecw_set1_pair(const int16_t *p) {
    return (vecw){{p[0], p[1]}};
}
static inline veci veci_dot(veci acc, vecw a, vecw b) {
    return acc + a.v[0] * b.v[0] + a.v[1] * b.v[1];
}
typedef struct {
    uint8_t v[4];
} vecb;
static inline vecb vecb_load(const uint8_t *p) {
    return (vecb){{p[0], p[1], p[2], p[3]}};
}
static inline void vecb_store(uint8_t *p, vecb v) {
    memcpy(p, v.v, 4);
}
static inline void vecb_nibbles(vecb v, vecb *low, vecb *high) {
    for (int k = 0; k < 4; k++) {
        low->v[k] = v.v[k] & 0xf;
        high->v[k] = v.v[k] >> 4;
    }
}
static inline vecb vecb_set1_quad(const int8_t *p) {
    vecb v;
    memcpy(v.v, p, 4);
    return v;
}
static inline vecw vecw_zero(void) {
    return (vecw){{0, 0}};
}
static inline vecw vecw_dot_u8(vecw acc, vecb u, vecb s) {
    for (int k = 0; k < 2; k++)
        acc.v[k] += u.v[2 * k] * (int8_t)s.v[2 * k] + u.v[2 * k + 1] * (int8_t)s.v[2 * k + 1];
    return acc;
}
static inline veci veci_from_pairs(vecw w) {
    return w.v[0] + w.v[1];
}
#endif

#if VEC_WIDTH != 16
/* Without masked loads, a partial vector goes through a zero-padded copy. */
static inline vecf vec_load_partial(const float *p, int n) {
    float pad[VEC_WIDTH] = {0};
    memcpy(pad, p, n * sizeof(float));
    return vec_load(pad);
}
static inline void vec_store_partial(float *p, vecf v, int n) {
    float pad[VEC_WIDTH];
    vec_store(pad, v);
    memcpy(p, pad, n * sizeof(float));
}
#endif

static inline vecf vec_load_upto(const float *p, int n) {
    return n >= VEC_WIDTH ? vec_load(p) : vec_load_partial(p, n);
}
static inline void vec_store_upto(float *p, vecf v, int n) {
    if (n >= VEC_WIDTH)
        vec_store(p, v);
    else
        vec_store_partial(p, v, n);
}

#if VEC_WIDTH > 1
/* The sums of the lanes of a, b, c and d, as (sum a, sum b, sum c, sum d); each vector's lanes
 * are added in the same tree whichever argument it is, so a dot product comes out the same
 * bits whether it is reduced alone or with three others. */
static inline void vec_sum4(vecf a, vecf b, vecf c, vecf d, float out[4]) {
    __m256 ab = _mm256_hadd_ps(vec_fold256(a), vec_fold256(b)); /* pairs of a, b per 128 bits */
    __m256 cd = _mm256_hadd_ps(vec_fold256(c), vec_fold256(d));
    __m256 abcd = _mm256_hadd_ps(ab, cd); /* quads: a b c d | a b c d */
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1)));
}
#else
static inline void vec_sum4(vecf a, vecf b, vecf c, vecf d, float out[4]) {
    out[0] = a, out[1] = b, out[2] = c, out[3] = d;
}
#endif

#if VEC_WIDTH > 1
/* e^x: x = n ln 2 + r with n = round(x / ln 2) and |r| <= ln 2 / 2 (ln 2 in two parts, so that r
 * is exact to a float's precision for |n| <= 252), e^r by its Taylor series to r^7 (the next
 * term below 0.1 ulp), times 2^n as 2^(n/2) 2^(n - n/2), so that results towards 0 round once
 * into the subnormals and overflow to infinity as expf's do. x is first clamped to +-174, past
 * which e^x is 0 or infinity anyway; a NaN passes through (vec_max and vec_min return their second
 * operand). The scheme of Cody and Waite (Software Manual for the Elementary Functions, 1980). */
static inline vecf vec_exp(vecf x) {
    const float log2e = 1.44269504f, ln2_hi = 0.693145752f, ln2_lo = 1.42860677e-6f;
    const float round = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    x = vec_min(vec_set1(174.0f), vec_max(vec_set1(-174.0f), x));
    vecf n = vec_sub(vec_fmadd(x, vec_set1(log2e), vec_set1(round)), vec_set1(round));
    vecf r = vec_fmadd(n, vec_set1(-ln2_hi), x);
    r = vec_fmadd(n, vec_set1(-ln2_lo), r);
    vecf p = vec_set1(1.0f / 5040.0f);
    p = vec_fmadd(p, r, vec_set1(1.0f / 720.0f));
    p = vec_fmadd(p, r, vec_set1(1.0f / 120.0f));
    p = vec_fmadd(p, r, vec_set1(1.0f / 24.0f));
    p = vec_fmadd(p, r, vec_set1(1.0f / 6.0f));
    p = vec_fmadd(p, r, vec_set1(0.5f));
    p = vec_fmadd(p, r, vec_set1(1.0f));
    p = vec_fmadd(p, r, vec_set1(1.0f));
    vecf half = vec_sub(vec_fmadd(n, vec_set1(0.5f), vec_set1(round)), vec_set1(round));
    return vec_mul(vec_mul(p, vec_pow2i(half)), vec_pow2i(vec_sub(n, half)));
}
#else
static inline vecf vec_exp(vecf x) {
    return expf(x);
}
#endif

#if VEC_WIDTH == 16
static inline veci veci_load(const void *p) {
    return _mm512_loadu_si512(p);
}
static inline veci veci_load_i8(const int8_t *p) {
    return _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p));
}
static inline veci veci_add(veci a, veci b) {
    return _mm512_add_epi32(a, b);
}
static inline veci veci_mul(veci a, veci b) {
    return _mm512_mullo_epi32(a, b);
}
static inline veci veci_and(veci a, veci b) {
    return _mm512_and_si512(a, b);
}
static inline veci veci_or(veci a, veci b) {
    return _mm512_or_si512(a, b);
}
static inline veci veci_shr(veci v, int n) {
    return _mm512_srl_epi32(v, _mm_cvtsi32_si128(n));
}
static inline vecb vecb_set1(uint8_t c) {
    return _mm512_set1_epi8((char)c);
}
static inline vecb vecb_and(vecb a, vecb b) {
    return _mm512_and_si512(a, b);
}
static inline vecb vecb_or(vecb a, vecb b) {
    return _mm512_or_si512(a, b);
}
static inline vecb vecb_sub(vecb a, vecb b) {
    return _mm512_sub_epi8(a, b);
}
static inline vecb vecb_shl(vecb v, int n) {
    return _mm512_sll_epi16(v, _mm_cvtsi32_si128(n));
}
static inline vecb vecb_shr(vecb v, int n) {
    return _mm512_srl_epi16(v, _mm_cvtsi32_si128(n));
}
static inline vecw vecw_sub(vecw a, vecw b) {
#if defined(__AVX512VNNI__)
    return _mm512_sub_epi32(a, b); /* vecw_dot_u8's int32 lanes */
#else
    return _mm512_sub_epi16(a, b);
#endif
}
#elif VEC_WIDTH == 8
static inline veci veci_load(const void *p) {
    return _mm256_loadu_si256((const __m256i *)p);
}
static inline veci veci_load_i8(const int8_t *p) {
    return _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p));
}
static inline veci veci_add(veci a, veci b) {
    return _mm256_add_epi32(a, b);
}
static inline veci veci_mul(veci a, veci b) {
    return _mm256_mullo_epi32(a, b);
}
static inline veci veci_and(veci a, veci b) {
    return _mm256_and_si256(a, b);
}
static inline veci veci_or(veci a, veci b) {
    return _mm256_or_si256(a, b);
}
static inline veci veci_shr(veci v, int n) {
    return _mm256_srl_epi32(v, _mm_cvtsi32_si128(n));
}
static inline vecb vecb_set1(uint8_t c) {
    return _mm256_set1_epi8((char)c);
}
static inline vecb vecb_and(vecb a, vecb b) {
    return _mm256_and_si256(a, b);
}
static inline vecb vecb_or(vecb a, vecb b) {
    return _mm256_or_si256(a, b);
}
static inline vecb vecb_sub(vecb a, vecb b) {
    return _mm256_sub_epi8(a, b);
}
static inline vecb vecb_shl(vecb v, int n) {
    return _mm256_sll_epi16(v, _mm_cvtsi32_si128(n));
}
static inline vecb vecb_shr(vecb v, int n) {
    return _mm256_srl_epi16(v, _mm_cvtsi32_si128(n));
}
static inline vecw vecw_sub(vecw a, vecw b) {
    return _mm256_sub_epi16(a, b);
}
#else
static inline veci veci_load(const void *p) {
    int32_t v;
    memcpy(&v, p, sizeof(v));
    return v;
}
static inline veci veci_load_i8(const int8_t *p) {
    return p[0];
}
static inline veci veci_add(veci a, veci b) {
    return a + b;
}
static inline veci veci_mul(veci a, veci b) {
    return (veci)((uint32_t)a * (uint32_t)b);
}
static inline veci veci_and(veci a, veci b) {
    return a & b;
}
static inline veci veci_or(veci a, veci b) {
    return a | b;
}
static inline veci veci_shr(veci v, int n) {
    return (veci)((uint32_t)v >> n);
}
static inline vecb vecb_set1(uint8_t c) {
    return (vecb){{c, c, c, c}};
}
static inline vecb vecb_and(vecb a, vecb b) {
    for (int k = 0; k < 4; k++) a.v[k] &= b.v[k];
    return a;
}
static inline vecb vecb_or(vecb a, vecb b) {
    for (int k = 0; k < 4; k++) a.v[k] |= b.v[k];
    return a;
}
static inline vecb vecb_sub(vecb a, vecb b) {
    for (int k = 0; k < 4; k++) a.v[k] = (uint8_t)(a.v[k] - b.v[k]);
    return a;
}
static inline vecb vecb_shl(vecb v, int n) {
    for (int k = 0; k < 4; k++) v.v[k] = (uint8_t)(v.v[k] << n);
    return v;
}
static inline vecb vecb_shr(vecb v, int n) {
    for (int k = 0; k < 4; k++) v.v[k] >>= n;
    return v;
}
static inline vecw vecw_sub(vecw a, vecw b) {
    return (vecw){{a.v[0] - b.v[0], a.v[1] - b.v[1]}};
}
#endif

#if VEC_WIDTH == 16 && defined(__AVX512VNNI__)
static inline vecw vecw_start(veci s) {
    return s;
}
static inline veci veci_finish(vecw w, veci s) {
    (void)s; /* w started there */
    return w;
}
#else
static inline vecw vecw_start(veci s) {
    (void)s;
    return vecw_zero();
}
static inline veci veci_finish(vecw w, veci s) {
    return veci_add(veci_from_pairs(w), s);
}
#endif

/* The sum of v's lanes, in vec_sum4's order. */
static inline float vec_sum(vecf v) {
    float sums[4];
    vec_sum4(v, v, v, v, sums);
    return sums[0];
}

/* For the kernels built on these (matmul.c, attention.c): a helper inlined into its caller
 * whatever the compiler's estimate, so that its shape arguments become constants there; and a loop
 * unrolled whole. */
#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#define UNROLL        _Pragma("GCC unroll 8")
#else
#define ALWAYS_INLINE inline
#define UNROLL
#endif

/* OPAQUE(v): the compiler must take v as made here, in a register: an empty asm statement, no
 * instruction. The kernels use it to compute a sum of products where it is written: GCC 12 moved
 * each int16 sum of a q4_0 group (single-use adds, a chain a sum) to the group's end, keeping
 * every input and code it reads live until there, and the 2 x 4 tile held its products on the
 * stack (257 vector loads and stores there; with each sum made at its block, 168, the rest the
 * float accumulators, once a group). Nothing in the portable build, whose plain C is left plain. */
#if defined(__GNUC__) && VEC_WIDTH > 1
#define OPAQUE(v) __asm__("" : "+v"(v))
#else
#define OPAQUE(v) ((void)(v))
#endif

#endif
