/* Weight matrices in panels (panel.h): their memory in 2 MiB pages, the panel sizes, each dtype's
 * packing and value reader (named by its row of dtype.h's table), the plain accessor and the
 * embedding lookups.
 */
#define _DEFAULT_SOURCE /* MADV_HUGEPAGE */
#include "panel.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* 2 MiB pages: on the VMs measured here a first touch of a 4 KiB page costs microseconds, which put
 * ~0.1 s of page faults into a 256-token prefill of the 110M model, and the kernels' loads miss the
 * TLB less. The last part short of 2 MiB stays in 4 KiB pages: a whole huge page there would hold
 * up to 2 MiB nothing uses, more than 10% of a 15M q8_0 model's file. */
void *panels_alloc(size_t bytes) {
    size_t whole = bytes / HUGE_PAGE * HUGE_PAGE;
    void *p;
    if (posix_memalign(&p, HUGE_PAGE, bytes + (bytes == 0)) != 0) return NULL;
    if (whole > 0) madvise(p, whole, MADV_HUGEPAGE);
    if (bytes > whole) madvise((char *)p + whole, bytes - whole, MADV_NOHUGEPAGE);
    return p;
}

/* Bytes of one panel: panel_rows rows of f32, bf16 or f16 as the file holds them, column by
 * column; q8_0 and q4_0 group by group. */
static size_t panel_bytes(const Matrix *m) {
    if (!dtype_grouped(m->dtype)) return PANEL_ROWS * dtype_row_bytes(m->dtype, m->cols);
    size_t bytes = 0;
    for (int start = 0; start < m->cols; start += m->group_size)
        bytes += group_bytes(m->dtype, group_columns(m->dtype, m->cols, m->group_size, start),
                             m->half_scales);
    return bytes;
}

void matrix_init(Matrix *m, DType dtype, int rows, int cols, int group_size) {
    *m = (Matrix){.dtype = dtype,
                  .rows = rows,
                  .cols = cols,
                  .group_size = dtype_grouped(dtype) ? group_size : 0,
                  .panel_rows = PANEL_ROWS,
                  .n_panels = (rows + PANEL_ROWS - 1) / PANEL_ROWS};
    m->panel_bytes = panel_bytes(m);
}

void matrix_hold_half_scales(Matrix *m) {
    m->half_scales = 1;
    m->panel_bytes = panel_bytes(m);
}

void matrix_pack_panel(const Matrix *m, char *dst, const void *values, const float *scales, int p) {
    DTYPES[m->dtype].pack(m, dst, values, scales, p * PANEL_ROWS, matrix_panel_rows(m, p));
}

float matrix_value(const Matrix *m, int layer, int row, int col) {
    m = matrix_layer(m, &layer);
    /* the row's panel; the row is lane `lane` of each of its columns */
    const char *panel =
        (const char *)m->data + ((size_t)layer * m->n_panels + row / PANEL_ROWS) * m->panel_bytes;
    return DTYPES[m->dtype].value(m, panel, row % PANEL_ROWS, col);
}

/* ----------------------------------------------------------------------------
 * A group of q8_0 or q4_0 values in a panel: its scales, then its values */

static float group_scale(const Matrix *m, const char *group, int lane) {
    if (m->half_scales) return f16_to_f32(((const uint16_t *)group)[lane]);
    return ((const float *)group)[lane];
}

/* Sets the scale of `lane` (exactly: with half_scales, an fp16 number's) */
static void set_group_scale(const Matrix *m, char *group, int lane, float scale) {
    if (m->half_scales)
        ((uint16_t *)group)[lane] = f32_to_f16(scale);
    else
        ((float *)group)[lane] = scale;
}

static const char *group_values(const Matrix *m, const char *group) {
    return group + PANEL_ROWS * scale_bytes(m->half_scales);
}

/* Byte of value (lane, i) in a q8_0 group's values: column pairs, a lane's pair adjacent. */
static size_t q8_byte(int lane, int i) {
    return (size_t)(i / 2) * 2 * PANEL_ROWS + lane * 2 + i % 2;
}

/* Byte offset and shift of code (lane, i) in a q4_0 group's codes: columns i - i % 8 .. + 7 take
 * 4 * PANEL_ROWS bytes, byte lane * 4 + i % 4 holding column i % 8 < 4 in its low nibble and
 * i % 8 >= 4 in its high one. */
static size_t q4_byte(int lane, int i) {
    return (size_t)(i / 8) * 4 * PANEL_ROWS + lane * 4 + i % 4;
}
static int q4_shift(int i) {
    return i % 8 >= 4 ? 4 : 0;
}

/* The int8 value (lane, i) of a q8_0 group's values, and the value (code - 8, in -8..7) of code
 * (lane, i) of a q4_0 group's codes. */
static int q8_value(const char *values, int lane, int i) {
    return ((const int8_t *)values)[q8_byte(lane, i)];
}
static int q4_value(const char *codes, int lane, int i) {
    return (((const uint8_t *)codes)[q4_byte(lane, i)] >> q4_shift(i) & 0xf) - 8;
}

/* The group of column col in a q8_0 or q4_0 panel: every group before it is whole (group_size
 * columns, a whole number of pairs or blocks of 8), so it starts at a multiple of one group's
 * bytes. */
static const char *group_of(const Matrix *m, const char *panel, int col) {
    return panel +
           (size_t)(col / m->group_size) * group_bytes(m->dtype, m->group_size, m->half_scales);
}

/* ----------------------------------------------------------------------------
 * Each dtype's packing and value reader (DTypeInfo's pack and value) */

/* A panel: rows first .. first + n_rows - 1 of one layer's row-major matrix at `values`, f32,
 * bf16 or f16 (element_size 4 or 2, a constant once inlined), column by column; rows past n_rows
 * are zero. */
static inline void pack_float_panel(char *dst, const char *values, size_t first, int n_rows,
                                    int cols, size_t element_size) {
    if (n_rows < PANEL_ROWS) memset(dst, 0, (size_t)cols * PANEL_ROWS * element_size);
    for (int r = 0; r < n_rows; r++) {
        const char *row = values + (first + r) * cols * element_size;
        for (int j = 0; j < cols; j++)
            memcpy(dst + ((size_t)j * PANEL_ROWS + r) * element_size, row + j * element_size,
                   element_size);
    }
}

void pack_f32(const Matrix *m, char *dst, const void *values, const float *scales, size_t first,
              int n_rows) {
    (void)scales;
    pack_float_panel(dst, values, first, n_rows, m->cols, sizeof(float));
}

void pack_16bit(const Matrix *m, char *dst, const void *values, const float *scales, size_t first,
                int n_rows) {
    (void)scales;
    pack_float_panel(dst, values, first, n_rows, m->cols, sizeof(uint16_t));
}

/* q8_0: per group, the rows' scales, then their int8 values in column pairs, copied a pair at a
 * time (byte by byte, 29% of the samples of a 1.1B q8_0 GGUF's load and 6 tokens; the pairs took
 * that run from 1.87 to 1.14 s, measured as interleave_codes says). */
void pack_q8_0(const Matrix *m, char *dst, const void *values, const float *scales, size_t first,
               int n_rows) {
    int cols = m->cols, group_size = m->group_size;
    int n_groups = matrix_row_groups(m);
    for (int start = 0; start < cols; start += group_size) {
        int columns = group_columns(DTYPE_Q8_0, cols, group_size, start);
        int8_t *q = (int8_t *)group_values(m, dst);
        memset(dst, 0, group_bytes(DTYPE_Q8_0, columns, m->half_scales));
        for (int r = 0; r < n_rows; r++) {
            set_group_scale(m, dst, r, scales[(first + r) * n_groups + start / group_size]);
            const int8_t *row = (const int8_t *)values + (first + r) * cols + start;
            int n = cols - start < columns ? cols - start : columns; /* past cols: zeros */
            for (int i = 0; i + 1 < n; i += 2) memcpy(q + q8_byte(r, i), row + i, 2); /* a pair */
            if (n % 2) q[q8_byte(r, n - 1)] = row[n - 1];
        }
        dst += group_bytes(DTYPE_Q8_0, columns, m->half_scales);
    }
}

/* Code j of a row of q4_0 codes packed two a byte (value j in byte j / 2, even j low). */
static int row_code(const uint8_t *row, int j) {
    return (row[j / 2] >> (j % 2 * 4)) & 0xf;
}

/* Codes col .. col + 7 of such a row (col even), code col + p in bits 4p .. 4p + 3; those at or
 * past cols are 8 (value 0). */
static uint32_t row_codes8(const uint8_t *row, int col, int cols) {
    uint32_t x = 0;
    if (col + 8 <= cols) { /* whole: the 4 bytes as they are */
        for (int k = 0; k < 4; k++) x |= (uint32_t)row[col / 2 + k] << 8 * k;
        return x;
    }
    for (int p = 0; p < 8; p++)
        x |= (uint32_t)(col + p < cols ? row_code(row, col + p) : 8) << 4 * p;
    return x;
}

/* Eight codes (code p in nibble p) in a panel's order: byte i holds codes i (low) and i + 4.
 * Two swaps: the middle bytes, then the middle nibbles of each half. Packed code by code, half
 * of the samples of a 1.1B q4_0 GGUF's load and 6 tokens were in pack_q4_0 (perf), and this took
 * that run from 1.74 to 0.98 s (one thread, medians of 5 alternating rounds, docs/BENCH.md). */
static uint32_t interleave_codes(uint32_t x) {
    x = (x & 0xff0000ffu) | (x & 0x0000ff00u) << 8 | (x & 0x00ff0000u) >> 8; /* 0 1 4 5 2 3 6 7 */
    return (x & 0xf00ff00fu) | (x & 0x00f000f0u) << 4 | (x & 0x0f000f00u) >> 4; /* 0 4 1 5 ... */
}

/* q4_0 (codes row-major two a byte): per group, the rows' scales, then their codes in blocks of 8
 * columns; padding codes are 8 (value 0). */
void pack_q4_0(const Matrix *m, char *dst, const void *values, const float *scales, size_t first,
               int n_rows) {
    int cols = m->cols, n_groups = matrix_row_groups(m);
    size_t row_bytes = dtype_row_bytes(DTYPE_Q4_0, cols);
    for (int start = 0; start < cols; start += 32) {
        int columns = group_columns(DTYPE_Q4_0, cols, 32, start);
        uint8_t *q = (uint8_t *)group_values(m, dst);
        memset(dst, 0, PANEL_ROWS * scale_bytes(m->half_scales));
        memset(q, 0x88, (size_t)PANEL_ROWS * columns / 2);
        for (int r = 0; r < n_rows; r++) {
            set_group_scale(m, dst, r, scales[(first + r) * n_groups + start / 32]);
            const uint8_t *row = (const uint8_t *)values + (first + r) * row_bytes;
            for (int i = 0; i < columns; i += 8) {
                uint32_t block = interleave_codes(row_codes8(row, start + i, cols));
                for (int k = 0; k < 4; k++) q[q4_byte(r, i) + k] = (uint8_t)(block >> 8 * k);
            }
        }
        dst += group_bytes(DTYPE_Q4_0, columns, m->half_scales);
    }
}

float value_f32(const Matrix *m, const char *panel, int lane, int col) {
    (void)m;
    return ((const float *)panel)[(size_t)col * PANEL_ROWS + lane];
}

float value_bf16(const Matrix *m, const char *panel, int lane, int col) {
    (void)m;
    return bf16_to_f32(((const uint16_t *)panel)[(size_t)col * PANEL_ROWS + lane]);
}

float value_f16(const Matrix *m, const char *panel, int lane, int col) {
    (void)m;
    return f16_to_f32(((const uint16_t *)panel)[(size_t)col * PANEL_ROWS + lane]);
}

float value_q8_0(const Matrix *m, const char *panel, int lane, int col) {
    const char *group = group_of(m, panel, col);
    return q8_value(group_values(m, group), lane, col % m->group_size) *
           group_scale(m, group, lane);
}

float value_q4_0(const Matrix *m, const char *panel, int lane, int col) {
    const char *group = group_of(m, panel, col);
    return q4_value(group_values(m, group), lane, col % m->group_size) *
           group_scale(m, group, lane);
}

/* ----------------------------------------------------------------------------
 * The embedding lookups */

void embedding_ref(const Matrix *w, int token, float *out) {
    for (int j = 0; j < w->cols; j++) out[j] = matrix_value(w, 0, token, j);
}

void embedding(const Matrix *w, int token, float *out) {
    const char *panel = (const char *)w->data + (size_t)(token / PANEL_ROWS) * w->panel_bytes;
    int lane = token % PANEL_ROWS, n = w->cols;
    if (!dtype_grouped(w->dtype)) { /* f32, bf16, f16: a value a column */
        float (*value)(const Matrix *, const char *, int, int) = DTYPES[w->dtype].value;
        for (int j = 0; j < n; j++) out[j] = value(w, panel, lane, j);
        return;
    }
    int q4 = w->dtype == DTYPE_Q4_0;
    for (int start = 0; start < n; start += w->group_size) {
        int columns = group_columns(w->dtype, n, w->group_size, start);
        float scale = group_scale(w, panel, lane);
        const char *q = group_values(w, panel);
        for (int i = 0; i < columns && start + i < n; i++)
            out[start + i] = (q4 ? q4_value(q, lane, i) : q8_value(q, lane, i)) * scale;
        panel += group_bytes(w->dtype, columns, w->half_scales);
    }
}
