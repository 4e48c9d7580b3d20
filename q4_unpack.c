/* q4_0's panels unpacked for prefill (q4_unpack.h): the codes a byte each, less 8, and each
 * group's sum starts beside its scales.
 */
#include "q4_unpack.h"

#include <string.h>

#include "q4_dot.h"
#include "simd.h"

void q4_unpack(Matrix *chunk, char *to, const Matrix *w, const char *panel, int np, int from) {
    size_t packed_group = group_bytes(DTYPE_Q4_0, 32, w->half_scales);
    char *at = to;
    for (int r = 0; r < np; r++) {
        const char *group = panel + (size_t)r * w->panel_bytes + (size_t)from / 32 * packed_group;
        for (int column = from; column < from + chunk->cols; column += 32) {
            const uint8_t *codes =
                (const uint8_t *)group + PANEL_ROWS * scale_bytes(w->half_scales);
            vec_store((float *)at, w->half_scales ? vec_load_f16((const uint16_t *)group)
                                                  : vec_load((const float *)group));
            char *sum_starts = at + PANEL_ROWS * sizeof(float);
            at += Q4_UNPACKED_HEAD;
            vecw code_sums = vecw_zero();
            for (int i = 0; i < group_columns(DTYPE_Q4_0, w->cols, 32, column); i += 8) {
                vecb low, high;
                unpack_block(codes + (size_t)i / 8 * 4 * PANEL_ROWS, 0, &low, &high);
                low = vecb_sub(low, vecb_set1(8));
                high = vecb_sub(high, vecb_set1(8));
                code_sums =
                    vecw_dot_u8(vecw_dot_u8(code_sums, vecb_set1(1), low), vecb_set1(1), high);
                vecb_store((uint8_t *)at, low);
                vecb_store((uint8_t *)at + 4 * PANEL_ROWS, high);
                at += 8 * PANEL_ROWS;
            }
            veci sum_start = veci_mul(veci_from_pairs(code_sums), veci_set1(-128));
            memcpy(sum_starts, &sum_start, PANEL_ROWS * sizeof(int32_t));
            group += packed_group;
        }
        if (r == 0) chunk->panel_bytes = (size_t)(at - to);
    }
}
