/* dtype.h: the table's facts against the file format's (docs/FORMAT.md) and hand-derived sizes,
 * and the 16-bit conversions against hand-checked values. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>

#include "dtype.h"

Test(dtype, codes_and_names_are_the_headers) {
    /* FORMAT.md's dtype codes: 0 f32, 1 bf16, 2 q8_0, 3 f16, 4 q4_0; then the K-quants, which
     * only GGUF files hold (5 and 6 are refused in a normllama header) */
    const char *names[] = {"f32", "bf16", "q8_0", "f16", "q4_0", "q4_k", "q6_k"};
    cr_assert_eq(N_DTYPES, 7);
    for (int d = 0; d < N_DTYPES; d++) {
        cr_assert_str_eq(DTYPES[d].name, names[d], "code %d", d);
        cr_assert_eq(DTYPES[d].kind == TENSOR_GGUF, d >= 5, "code %d", d);
        cr_assert_eq(dtype_kquant(d), d >= 5, "code %d", d);
    }
}

Test(dtype, row_bytes_of_seven_values) {
    /* 7 values: 4 bytes each, 2, 1, and q4_0's codes two a byte, the last byte half padding */
    cr_assert_eq(dtype_row_bytes(DTYPE_F32, 7), 28);
    cr_assert_eq(dtype_row_bytes(DTYPE_BF16, 7), 14);
    cr_assert_eq(dtype_row_bytes(DTYPE_F16, 7), 14);
    cr_assert_eq(dtype_row_bytes(DTYPE_Q8_0, 7), 7);
    cr_assert_eq(dtype_row_bytes(DTYPE_Q4_0, 7), 4);
    /* gguf.h's K blocks: 144 and 210 bytes a 256 values */
    cr_assert_eq(dtype_row_bytes(DTYPE_Q4_K, 512), 288);
    cr_assert_eq(dtype_row_bytes(DTYPE_Q6_K, 256), 210);
}

Test(dtype, group_sizes) {
    cr_assert(dtype_group_size_ok(DTYPE_Q8_0, 32) && dtype_group_size_ok(DTYPE_Q8_0, 64));
    cr_assert(!dtype_group_size_ok(DTYPE_Q8_0, 48) && !dtype_group_size_ok(DTYPE_Q8_0, 0));
    cr_assert(dtype_group_size_ok(DTYPE_Q4_0, 32) && !dtype_group_size_ok(DTYPE_Q4_0, 64));
    for (DType d = DTYPE_F32; d < N_DTYPES; d++) {
        int grouped = d == DTYPE_Q8_0 || d == DTYPE_Q4_0;
        cr_assert_eq(dtype_grouped(d), grouped, "%s", DTYPES[d].name);
        cr_assert_eq(dtype_group_size_ok(d, 0), !grouped, "%s with group_size 0", DTYPES[d].name);
    }
}

Test(dtype, f16_and_bf16_decoding_hand_checked) {
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

/* Every fp16 number back to its own bits (panel.h's fp16 scales hold a GGUF's exactly), and the
 * roundings by hand: halfway cases to the even neighbour, 65520 (halfway past 65504) to infinity,
 * below 2^-14 to multiples of 2^-24. */
Test(dtype, f32_to_f16_round_trips_every_f16_and_rounds_to_even) {
    for (uint32_t h = 0; h <= 0xffff; h++)
        cr_assert_eq(f32_to_f16(f16_to_f32((uint16_t)h)), h, "fp16 bits 0x%04x", (unsigned)h);
    cr_assert_eq(f32_to_f16(1.0f + ldexpf(1.0f, -11)), 0x3c00);     /* 1 + half a step: to 1 */
    cr_assert_eq(f32_to_f16(1.0f + 3 * ldexpf(1.0f, -11)), 0x3c02); /* 1 + 1.5 steps: to 2 */
    cr_assert_eq(f32_to_f16(1.0f + ldexpf(1.0f, -11) + ldexpf(1.0f, -20)), 0x3c01);
    cr_assert_eq(f32_to_f16(-65519.0f), 0xfbff);
    cr_assert_eq(f32_to_f16(65520.0f), 0x7c00);
    cr_assert_eq(f32_to_f16(1e6f), 0x7c00);
    cr_assert_eq(f32_to_f16(ldexpf(1.0f, -25)), 0x0000);     /* half of 2^-24: to 0 */
    cr_assert_eq(f32_to_f16(3 * ldexpf(1.0f, -25)), 0x0002); /* 1.5 x 2^-24: to 2 x */
    cr_assert_eq(f32_to_f16(ldexpf(1.0f, -14) - ldexpf(1.0f, -26)), 0x0400); /* up to a normal */
    cr_assert_eq(f32_to_f16(0.1f), 0x2e66);
    cr_assert_eq(f32_to_f16(NAN) & 0x7c00, 0x7c00);
    cr_assert_neq(f32_to_f16(NAN) & 0x3ff, 0);
}
