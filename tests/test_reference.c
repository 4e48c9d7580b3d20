/* The fast path against the plain one: each fast kernel (matmul, embedding, attention, RoPE)
 * against its plain twin on random shapes (odd sizes, every tile remainder, every dtype, one and
 * many inputs), the plain accessor against the row-major values it was packed from, and the whole
 * fast forward pass against reference.c's on stories260K and on small random models of each dtype
 * written here; last, run --reference's option checks. (The norms' twins: tests/test_norm.c.) */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf_blocks.h"
#include "helpers.h"
#include "load.h"
#include "model.h"
#include "reference.h"
#include "state.h"

#define LEGACY    "models/stories260K.bin"
#define TOKENIZER "models/tok512.bin"

/* xorshift64*: the same numbers on every machine, one stream per test */
#define RNG_SEED 88172645463325252ull
static uint64_t rng = RNG_SEED;
static float uniform(float lo, float hi) {
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    uint32_t bits = (uint32_t)((rng * 2685821657736338717ull) >> 40); /* 24 bits */
    return lo + (hi - lo) * (float)bits / (float)(1u << 24);
}

static uint16_t bf16_bits(float f) {
    uint32_t bits;
    memcpy(&bits, &f, sizeof(bits));
    return (uint16_t)(bits >> 16);
}

/* A random fp16 value's bits: any sign and mantissa, exponents 0 (the subnormals) to 14 (up to
 * just below 1), so that every kind of finite half below 1 in magnitude comes up. */
static uint16_t random_f16_bits(void) {
    uint16_t sign = uniform(0.0f, 1.0f) < 0.5f ? 0x8000 : 0;
    uint16_t exponent = (uint16_t)(int)uniform(0.0f, 15.0f), mantissa = (int)uniform(0.0f, 1024.0f);
    return sign | (uint16_t)(exponent << 10) | mantissa;
}

/* ----------------------------------------------------------------------------
 * Matrices packed here */

/* A random stack of `layers` matrices (rows, cols) of a dtype, packed into panels by
 * matrix_pack_panel, and the value each (layer, row, col) holds, row-major, as floats. */
typedef struct {
    Matrix m;
    char *panels;
    float *values; /* (layers, rows, cols) */
    /* K-quants: |d sc q| + |dmin mn| of each value (q4_k; q6_k's |value|), the parts the kernels
     * sum apart; NULL for the other dtypes */
    float *parts;
} Packed;

/* Random K-quant blocks (rows, cols / 256) of a GGUF type: random bytes, the fp16 fields
 * random_f16_bits' (every kind of finite half below 1). */
static uint8_t *random_blocks(DType dtype, int rows, int cols) {
    size_t bytes = (size_t)rows * dtype_row_bytes(dtype, cols);
    uint8_t *blocks = malloc(bytes);
    for (size_t i = 0; i < bytes; i++) blocks[i] = (uint8_t)(int)uniform(0.0f, 256.0f);
    int block_bytes = DTYPES[dtype].block_bytes;
    for (size_t at = 0; at < bytes; at += block_bytes) {
        int fields[2] = {dtype == DTYPE_Q6_K ? 208 : 0, dtype == DTYPE_Q6_K ? 208 : 2};
        for (int f = 0; f < 2; f++) {
            uint16_t h = random_f16_bits();
            memcpy(blocks + at + fields[f], &h, sizeof(h));
        }
    }
    return blocks;
}

/* A K-quant row's values as ggml decodes them (gguf_blocks.c, held to libggml's bit for bit by
 * test_gguf_writer.py), and into parts the magnitudes of its two terms: the values with dmin 0
 * (d sc q) and with d 0 (-dmin mn), for q4_k. */
static void k_row_values(DType dtype, const uint8_t *row, int cols, float *values, float *parts) {
    if (dtype == DTYPE_Q6_K) {
        gguf_q6_K_to_f32(row, cols, values);
        for (int j = 0; j < cols; j++) parts[j] = fabsf(values[j]);
        return;
    }
    gguf_q4_K_to_f32(row, cols, values);
    size_t bytes = dtype_row_bytes(dtype, cols);
    uint8_t *zeroed = malloc(bytes);
    float *term = malloc((size_t)cols * sizeof(float));
    for (int field = 0; field < 2; field++) { /* 0: dmin zeroed, 1: d zeroed */
        memcpy(zeroed, row, bytes);
        for (size_t at = 0; at < bytes; at += 144) memset(zeroed + at + (field ? 0 : 2), 0, 2);
        gguf_q4_K_to_f32(zeroed, cols, term);
        for (int j = 0; j < cols; j++) parts[j] = (field ? parts[j] : 0.0f) + fabsf(term[j]);
    }
    free(zeroed);
    free(term);
}

/* A random stack of K-quant matrices (random_matrix's). */
static Packed random_k_matrix(DType dtype, int layers, int rows, int cols) {
    size_t n = (size_t)layers * rows * cols;
    Packed p = {.values = malloc(n * sizeof(float)), .parts = malloc(n * sizeof(float))};
    matrix_init(&p.m, dtype, rows, cols, 0);
    size_t layer_bytes = (size_t)p.m.n_panels * p.m.panel_bytes;
    p.panels = aligned_alloc(64, (layers * layer_bytes + 63) / 64 * 64);
    for (int l = 0; l < layers; l++) {
        uint8_t *blocks = random_blocks(dtype, rows, cols);
        for (int i = 0; i < rows; i++) {
            size_t at = ((size_t)l * rows + i) * cols;
            k_row_values(dtype, blocks + i * dtype_row_bytes(dtype, cols), cols, p.values + at,
                         p.parts + at);
        }
        for (int q = 0; q < p.m.n_panels; q++)
            matrix_pack_panel(&p.m, p.panels + l * layer_bytes + q * p.m.panel_bytes, blocks, NULL,
                              q);
        free(blocks);
    }
    p.m.data = p.panels;
    return p;
}

/* Columns of a test shape's `cols` for dtype d: the K-quants' rows are whole blocks of 256 (cols
 * 1 .. 192 become 256 to 1024). */
static int shape_cols(DType d, int cols) {
    return dtype_kquant(d) ? (cols / 64 + 1) * 256 : cols;
}

/* half_scales: the scales fp16 numbers, held as fp16 (panel.h's matrix_hold_half_scales, a q8_0
 * or q4_0 GGUF's) */
static Packed random_matrix(DType dtype, int layers, int rows, int cols, int group_size,
                            int half_scales) {
    if (dtype_kquant(dtype)) return random_k_matrix(dtype, layers, rows, cols);
    cr_assert(dtype == DTYPE_F32 || dtype == DTYPE_BF16 || dtype == DTYPE_F16 ||
                  dtype == DTYPE_Q8_0 || dtype == DTYPE_Q4_0,
              "random_matrix makes no %s values", DTYPES[dtype].name);
    Packed p = {.values = malloc((size_t)layers * rows * cols * sizeof(float))};
    matrix_init(&p.m, dtype, rows, cols, group_size);
    if (half_scales) matrix_hold_half_scales(&p.m);
    size_t layer_bytes = (size_t)p.m.n_panels * p.m.panel_bytes;
    p.panels = aligned_alloc(64, (layers * layer_bytes + 63) / 64 * 64);
    int grouped = dtype_grouped(dtype);
    int n_groups = grouped ? (cols + group_size - 1) / group_size : 1;
    size_t q4_row = ((size_t)cols + 1) / 2; /* q4_0: codes two a byte, even columns low */
    uint8_t *q4 = calloc((size_t)rows * q4_row, 1);
    float *f32 = malloc((size_t)rows * cols * sizeof(float));
    uint16_t *bf16 = malloc((size_t)rows * cols * sizeof(uint16_t));
    uint16_t *f16 = malloc((size_t)rows * cols * sizeof(uint16_t));
    int8_t *q8 = malloc((size_t)rows * cols);
    float *scales = malloc((size_t)rows * n_groups * sizeof(float));
    for (int l = 0; l < layers; l++) {
        float *expect = p.values + (size_t)l * rows * cols;
        for (int i = 0; i < rows * n_groups; i++) {
            scales[i] = uniform(0.001f, 0.01f);
            if (half_scales) scales[i] = f16_to_f32(f32_to_f16(scales[i]));
        }
        memset(q4, 0, (size_t)rows * q4_row);
        for (int i = 0; i < rows; i++) {
            for (int j = 0; j < cols; j++) {
                size_t at = (size_t)i * cols + j;
                f32[at] = uniform(-1.0f, 1.0f);
                bf16[at] = bf16_bits(f32[at]);
                f16[at] = dtype == DTYPE_F16 ? random_f16_bits() : 0; /* the others' streams kept */
                q8[at] = (int8_t)(int)uniform(-127.0f, 128.0f);
                int code = dtype == DTYPE_Q4_0 ? (int)uniform(0.0f, 16.0f) : 0;
                q4[i * q4_row + j / 2] |= (uint8_t)(code << (j % 2 * 4));
                float scale = grouped ? scales[i * n_groups + j / group_size] : 0.0f;
                expect[at] = dtype == DTYPE_F32    ? f32[at]
                             : dtype == DTYPE_BF16 ? bf16_to_f32(bf16[at])
                             : dtype == DTYPE_F16  ? f16_to_f32(f16[at])
                             : dtype == DTYPE_Q4_0 ? (code - 8) * scale
                                                   : q8[at] * scale;
            }
        }
        const void *src = dtype == DTYPE_F32    ? (const void *)f32
                          : dtype == DTYPE_BF16 ? (const void *)bf16
                          : dtype == DTYPE_F16  ? (const void *)f16
                          : dtype == DTYPE_Q4_0 ? (const void *)q4
                                                : (const void *)q8;
        for (int q = 0; q < p.m.n_panels; q++)
            matrix_pack_panel(&p.m, p.panels + l * layer_bytes + q * p.m.panel_bytes, src, scales,
                              q);
    }
    p.m.data = p.panels;
    free(f32);
    free(bf16);
    free(f16);
    free(q8);
    free(q4);
    free(scales);
    return p;
}

static void packed_free(Packed *p) {
    free(p->panels);
    free(p->values);
    free(p->parts);
}

/* Shapes with every remainder the kernels have: rows below, at and past a panel (16 lanes with
 * AVX-512, 8 with AVX2) and past a block of four panels, and (1100 rows, whose third product in
 * matmul_matches_matmul_ref has 2203) past decode's runs of 128 panels on each of two threads;
 * columns odd, below a q8_0 group, past one, and a whole number of them, (1100) past two of the
 * chunks f16 and bf16 prefill widens (matmul.c's WIDE_COLUMNS, 512) and (2100) past one of those
 * q4_0's unpacks (UNPACK_COLUMNS, 2048). */
static const int SHAPES[][2] = {{1, 1},    {3, 7},    {17, 33},   {64, 64},   {65, 100}, {130, 31},
                                {72, 129}, {40, 192}, {1100, 40}, {21, 1100}, {19, 2100}};
#define N_SHAPES (int)(sizeof(SHAPES) / sizeof(SHAPES[0]))

/* Every dtype of dtype.h's table with each of its group sizes: f32, ..., q8_0/32, q8_0/64, .... */
typedef struct {
    DType dtype;
    int group_size, half_scales;
    char name[16];
} Kind;
enum { MAX_KINDS = N_DTYPES * (MAX_GROUP_SIZES + 1) }; /* a group size of 32 twice */
static int n_kinds;
static Kind kinds[MAX_KINDS];

static void list_kinds(void) {
    n_kinds = 0;
    for (int d = 0; d < N_DTYPES; d++) {
        const int *sizes = DTYPES[d].group_sizes;
        for (int i = 0; i == 0 || (i < MAX_GROUP_SIZES && sizes[i] != 0); i++) {
            Kind *k = &kinds[n_kinds++];
            k->dtype = (DType)d;
            k->group_size = sizes[i];
            snprintf(k->name, sizeof(k->name), sizes[i] ? "%s/%d" : "%s", DTYPES[d].name, sizes[i]);
            if (sizes[i] == 32) { /* and with the fp16 scales of a GGUF's blocks */
                kinds[n_kinds] = *k;
                kinds[n_kinds].half_scales = 1;
                strcat(kinds[n_kinds++].name, "h");
            }
        }
    }
}

Test(kernels, matrix_value_reads_back_what_was_packed, .init = list_kinds) {
    for (int k = 0; k < n_kinds; k++) {
        for (int s = 0; s < N_SHAPES; s++) {
            int rows = SHAPES[s][0], cols = shape_cols(kinds[k].dtype, SHAPES[s][1]);
            Packed p = random_matrix(kinds[k].dtype, 2, rows, cols, kinds[k].group_size,
                                     kinds[k].half_scales);
            for (int l = 0; l < 2; l++)
                for (int i = 0; i < rows; i++)
                    for (int j = 0; j < cols; j++)
                        cr_assert_eq(matrix_value(&p.m, l, i, j),
                                     p.values[((size_t)l * rows + i) * cols + j],
                                     "%s (%d, %d) layer %d at (%d, %d)", kinds[k].name, rows, cols,
                                     l, i, j);
            packed_free(&p);
        }
    }
}

Test(kernels, embedding_equals_embedding_ref, .init = list_kinds) {
    for (int k = 0; k < n_kinds; k++) {
        for (int s = 0; s < N_SHAPES; s++) {
            int rows = SHAPES[s][0], cols = shape_cols(kinds[k].dtype, SHAPES[s][1]);
            Packed p = random_matrix(kinds[k].dtype, 1, rows, cols, kinds[k].group_size,
                                     kinds[k].half_scales);
            float *fast = malloc(cols * sizeof(float)), *plain = malloc(cols * sizeof(float));
            for (int token = 0; token < rows; token++) {
                embedding(&p.m, token, fast);
                embedding_ref(&p.m, token, plain);
                cr_assert_eq(memcmp(fast, plain, cols * sizeof(float)), 0, "%s (%d, %d) row %d",
                             kinds[k].name, rows, cols, token);
                cr_assert_eq(plain[cols - 1], p.values[(size_t)token * cols + cols - 1]);
            }
            free(fast);
            free(plain);
            packed_free(&p);
        }
    }
}

/* q8_0's products take x as quantize_input's int16 values, q4_0's as quantize_input_blocks'
 * int8 values: the input the plain product is given to match them, xq * scale (row by row of
 * (batch, cols)). */
static void as_quantized(DType dtype, float *x, int batch, int cols) {
    int16_t *xq = malloc(((size_t)cols + 64) * sizeof(int16_t));
    int8_t *x8 = malloc((size_t)cols + 32);
    float *block_scales = malloc(((size_t)cols + 31) / 32 * sizeof(float));
    int32_t *block_sums = malloc(((size_t)cols + 31) / 32 * sizeof(int32_t));
    for (int b = 0; b < batch; b++) {
        float *row = x + (size_t)b * cols, scale;
        if (dtype == DTYPE_Q8_0) {
            quantize_input(xq, &scale, row, cols);
            for (int j = 0; j < cols; j++) row[j] = xq[j] * scale;
        } else {
            quantize_input_blocks(x8, block_scales, block_sums, row, cols);
            for (int j = 0; j < cols; j++) row[j] = x8[j] * block_scales[j / 32];
        }
    }
    free(xq);
    free(x8);
    free(block_scales);
    free(block_sums);
}

/* |fast - plain| of each output within what two float sums of cols terms may differ by in any
 * order, with or without FMA: 2 cols eps sum_j |w(i, j) x[j]| (Higham 2002, eq. 3.5); for the
 * K-quants, whose kernels sum a weight's two terms (d sc q and dmin mn) apart and may cancel
 * them after, with |w| the sum of their magnitudes (parts). */
static void expect_product(const Packed *p, int layer, const float *x, const float *fast,
                           const char *what) {
    const Matrix *m = &p->m;
    float *plain = malloc(m->rows * sizeof(float));
    matmul_ref(plain, m, layer, x);
    for (int i = 0; i < m->rows; i++) {
        double bound = 0.0;
        for (int j = 0; j < m->cols; j++) {
            size_t at = ((size_t)layer * m->rows + i) * m->cols + j;
            bound += fabs((double)(p->parts ? p->parts[at] : p->values[at]) * x[j]);
        }
        bound *= 2.0 * m->cols * FLT_EPSILON;
        cr_assert_leq(fabs((double)fast[i] - plain[i]), bound + 1e-30, "%s row %d: %g vs %g", what,
                      i, fast[i], plain[i]);
    }
    free(plain);
}

/* Hand-derived: block 0's largest |x| is 16, so its step is 16 / 127 and x * 127 / 16 rounds to
 * 127, -63.5 -> -64 (to even), 7.94 -> 8 and 0.496 -> 0; block 1's step is 2 / 127; a NaN makes
 * the scale of block 2 (8 values) NaN; the values past n up to 96 are zero. */
Test(kernels, quantize_input_blocks_rounds_each_block_of_32_to_int8) {
    float x[72] = {[0] = 16.0f, [1] = -8.0f, [2] = 1.0f, [3] = 0.0625f, [32] = -2.0f, [64] = NAN};
    int8_t xq[96];
    memset(xq, 5, sizeof(xq));
    float scales[3];
    int32_t sums[3];
    quantize_input_blocks(xq, scales, sums, x, 72);
    cr_assert_eq(scales[0], 16.0f / 127.0f);
    cr_assert(xq[0] == 127 && xq[1] == -64 && xq[2] == 8 && xq[3] == 0 && sums[0] == 71);
    cr_assert(scales[1] == 2.0f / 127.0f && xq[32] == -127 && sums[1] == -127);
    cr_assert(isnan(scales[2]) && xq[64] == 0);
    /* a block whose largest |x| is 2^-127, where 127 / max overflows a float (whose 0 * inf had
     * made the scale NaN): -2^-128 is -63.5 steps, to even -64 */
    float tiny[2] = {0x1p-127f, -0x1p-128f};
    quantize_input_blocks(xq, scales, sums, tiny, 2);
    cr_assert(isfinite(scales[0]) && scales[0] > 0.0f, "%g", scales[0]);
    cr_assert(xq[0] == 127 && xq[1] == -64 && sums[0] == 63, "%d %d", xq[0], xq[1]);
    for (int j = 4; j < 96; j++)
        if (j != 32) cr_assert_eq(xq[j], 0, "xq[%d]", j);
}

/* Hand-derived: the unsigned copies of int8 inputs for q4_0's unpacked tile are the values + 128,
 * the ends -127 and 127 at 1 and 255, 0 at 128; the byte past n is not written. */
Test(kernels, offset_input_bytes_adds_128) {
    const int8_t xq[4] = {-127, 0, 127, -1};
    uint8_t offset[5];
    memset(offset, 7, sizeof(offset));
    offset_input_bytes(offset, xq, 4);
    cr_assert(offset[0] == 1 && offset[1] == 128 && offset[2] == 255 && offset[3] == 127 &&
                  offset[4] == 7,
              "%d %d %d %d %d", offset[0], offset[1], offset[2], offset[3], offset[4]);
}

/* Hand-derived: the largest |x| is the last of 37 (past every whole vector of 16 or 8), 4, so the
 * step is 4 / 32767: 2 is 16383.5 steps, to even 16384, and -1 is -8191.75, -8192; the values
 * past n up to 64 are zero. A NaN among them makes the scale NaN. */
Test(kernels, quantize_input_scales_by_the_largest_value_to_int16) {
    float x[37] = {[0] = 2.0f, [1] = -1.0f, [36] = -4.0f}, scale;
    int16_t xq[64];
    memset(xq, 5, sizeof(xq));
    quantize_input(xq, &scale, x, 37);
    cr_assert_eq(scale, 4.0f / 32767.0f);
    cr_assert(xq[0] == 16384 && xq[1] == -8192 && xq[36] == -32767, "%d %d %d", xq[0], xq[1],
              xq[36]);
    for (int j = 2; j < 64; j++)
        if (j != 36) cr_assert_eq(xq[j], 0, "xq[%d]", j);
    x[20] = NAN;
    quantize_input(xq, &scale, x, 37);
    cr_assert(isnan(scale) && xq[20] == 0 && xq[36] == -32767);
}

/* out (batch, m->rows) = m's product with the batch of inputs x (batch, m->cols), m (its shape
 * and dtype set by matrix_init) packed here from the row-major values and scales
 * matrix_pack_panel takes, by matmul. */
static void product_of(Matrix *m, const void *values, const float *scales, const float *x,
                       int batch, float *out) {
    char *panels = aligned_alloc(64, (m->n_panels * m->panel_bytes + 63) / 64 * 64);
    for (int q = 0; q < m->n_panels; q++)
        matrix_pack_panel(m, panels + q * m->panel_bytes, values, scales, q);
    m->data = panels;
    QuantizedInputs xq;
    cr_assert_eq(quantized_inputs_alloc(&xq, batch, m->cols), 0);
    matmul(&(Product){out, m}, 1, x, batch, 0, &xq);
    free(panels);
    quantized_inputs_free(&xq);
}

/* The largest integer sums the q4_0 kernel meets, the inputs all at their block's largest (int8
 * 127), in decode (one input: the codes as they are, unsigned) and in a batch of 8 (prefill's
 * unpacked tile: the codes less 8, signed, times the inputs + 128, unsigned): every code 15
 * (value 7 * scale), 16 products of 15 * 127 in each int16 lane of a group, 30480, and of 7 * 255
 * unpacked, 28560; every code 0 (value -8 * scale), 16 products of -8 * 255 unpacked, -32640,
 * 0.4% above where the lane would wrap (AVX2 and AVX-512 without VNNI). out = 64 columns * 7 *
 * 0.5 = 224, and 64 * -8 * 0.5 = -256. */
Test(kernels, q4_0_product_at_the_largest_codes_and_inputs) {
    enum { ROWS = 9, COLS = 64, BATCH = 8 };
    uint8_t codes[ROWS * COLS / 2];
    float scales[ROWS * 2], x[BATCH * COLS], out[BATCH * ROWS];
    for (int i = 0; i < ROWS * 2; i++) scales[i] = 0.5f;
    for (int j = 0; j < BATCH * COLS; j++) x[j] = 1.0f;
    for (int c = 0; c < 2; c++) {
        memset(codes, c == 0 ? 0xff : 0x00, sizeof(codes));
        float expect = c == 0 ? 224.0f : -256.0f;
        for (int batch = 1; batch <= BATCH; batch += BATCH - 1) {
            Matrix m;
            matrix_init(&m, DTYPE_Q4_0, ROWS, COLS, 32);
            product_of(&m, codes, scales, x, batch, out);
            for (int i = 0; i < batch * ROWS; i++)
                cr_assert_float_eq(out[i], expect, 1e-4f, "codes %d, batch %d, out %d: %g",
                                   c == 0 ? 15 : 0, batch, i, out[i]);
        }
    }
}

/* Each input of a batch of products p[0..2], out as matmul wrote it, multiplied alone (decode's
 * tile) comes out the same bits: each output one chain of multiply-adds in the same order,
 * whatever the tile and however prefill splits the columns. */
static void expect_decode_bits(const Product *p, const float *x, int batch, int layer,
                               const QuantizedInputs *xq) {
    int cols = p[0].w->cols;
    for (int b = 0; b < batch; b++) {
        float *alone[3];
        Product one[3];
        for (int n = 0; n < 3; n++) {
            alone[n] = malloc(p[n].w->rows * sizeof(float));
            one[n] = (Product){alone[n], p[n].w};
        }
        matmul(one, 3, x + (size_t)b * cols, 1, layer, xq);
        for (int n = 0; n < 3; n++) {
            const float *batched = p[n].out + (size_t)b * p[n].w->rows;
            cr_assert(memcmp(alone[n], batched, p[n].w->rows * sizeof(float)) == 0,
                      "%s (%d, %d) batch %d input %d product %d: decode's bits differ",
                      DTYPES[p[n].w->dtype].name, p[n].w->rows, cols, batch, b, n);
            free(alone[n]);
        }
    }
}

/* The product of one row-major matrix of K-quant blocks (rows, cols) and one input x (cols),
 * computed by matmul into out. */
static void k_product(DType dtype, const uint8_t *blocks, int rows, int cols, const float *x,
                      float *out) {
    Matrix m;
    matrix_init(&m, dtype, rows, cols, 0);
    product_of(&m, blocks, NULL, x, 1, out);
}

/* The largest integer sums the K-quant kernels meet, each input at its block's largest (int8
 * +-127). q4_k: codes 15, scales 63, mins 0 (scales[12]: 4 bytes 0xff, 4 of 0, 4 of 0x0f), d =
 * 2^-10: 16 products of 15 * 127 in an int16 lane, 30480, as q4_0's; out = 256 * 15 * 63 / 1024 =
 * 236.25. q6_k: codes 63 (q - 32 = 31), scales 127, d = 2^-10, x = 1: 8 products of 63 * 127 in a
 * lane, 64008, wrap its int16 adds (not AVX512-VNNI's int32), and 8 * 32 * 127 taken off leaves
 * 31496; out = 256 * 127 * 31 / 1024 = 984.25 (x 1: int8 127 times scale 1 / 127). Codes 0 (q - 32
 * = -32) and x = -1: 0 products and 32512 taken off, the edge of int16; out = 256 * 127 * 32 / 1024
 * = 1016. */
Test(kernels, k_quant_products_at_the_largest_codes_and_inputs) {
    enum { ROWS = 9, COLS = 256 };
    uint8_t q4[ROWS][144], q6[ROWS][210];
    float x[COLS], out[ROWS];
    for (int i = 0; i < ROWS; i++) {
        memset(q4[i], 0, 144);
        memcpy(q4[i], (uint16_t[]){0x1400}, 2); /* d = 2^-10, dmin 0 */
        memset(q4[i] + 4, 0xff, 4);             /* scales 0..3 = 63, and bits 4-5 of scales 4..7 */
        memset(q4[i] + 12, 0x0f, 4);            /* bits 0-3 of scales 4..7; mins all 0 */
        memset(q4[i] + 16, 0xff, 128);
    }
    for (int j = 0; j < COLS; j++) x[j] = 1.0f;
    k_product(DTYPE_Q4_K, q4[0], ROWS, COLS, x, out);
    for (int i = 0; i < ROWS; i++)
        cr_assert_float_eq(out[i], 236.25f, 1e-4f, "q4_k row %d: %g", i, out[i]);
    for (int code = 63, sign = 1; code >= 0; code -= 63, sign = -sign) {
        for (int i = 0; i < ROWS; i++) {
            memset(q6[i], code == 63 ? 0xff : 0, 192);
            memset(q6[i] + 192, 127, 16);
            memcpy(q6[i] + 208, (uint16_t[]){0x1400}, 2);
        }
        for (int j = 0; j < COLS; j++) x[j] = (float)sign;
        k_product(DTYPE_Q6_K, q6[0], ROWS, COLS, x, out);
        float want = code == 63 ? 984.25f : 1016.0f;
        for (int i = 0; i < ROWS; i++)
            cr_assert_float_eq(out[i], want, 1e-3f, "q6_k codes %d row %d: %g", code, i, out[i]);
    }
}

Test(kernels, matmul_matches_matmul_ref, .init = list_kinds) {
    omp_set_num_threads(2); /* the split between threads too */
    const int batches[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 17};
    for (int k = 0; k < n_kinds; k++) {
        for (int s = 0; s < N_SHAPES; s++) {
            int rows = SHAPES[s][0], cols = shape_cols(kinds[k].dtype, SHAPES[s][1]);
            /* three products of one input, as wq, wk, wv: the second and third of other heights */
            Packed p[3] = {random_matrix(kinds[k].dtype, 2, rows, cols, kinds[k].group_size,
                                         kinds[k].half_scales),
                           random_matrix(kinds[k].dtype, 2, rows / 2 + 1, cols, kinds[k].group_size,
                                         kinds[k].half_scales),
                           random_matrix(kinds[k].dtype, 2, 2 * rows + 3, cols, kinds[k].group_size,
                                         kinds[k].half_scales)};
            for (size_t nb = 0; nb < sizeof(batches) / sizeof(batches[0]); nb++) {
                int batch = batches[nb], layer = nb % 2;
                float *x = malloc((size_t)batch * cols * sizeof(float)), *out[3];
                for (int i = 0; i < batch * cols; i++) x[i] = uniform(-2.0f, 2.0f);
                Product products[3];
                for (int n = 0; n < 3; n++) {
                    out[n] = malloc((size_t)batch * p[n].m.rows * sizeof(float));
                    products[n] = (Product){out[n], &p[n].m};
                }
                QuantizedInputs xq;
                cr_assert_eq(quantized_inputs_alloc(&xq, batch, cols), 0);
                matmul(products, 3, x, batch, layer, &xq);
                expect_decode_bits(products, x, batch, layer, &xq);
                if (dtype_grouped(kinds[k].dtype) || dtype_kquant(kinds[k].dtype))
                    as_quantized(kinds[k].dtype, x, batch, cols);
                for (int n = 0; n < 3; n++)
                    for (int b = 0; b < batch; b++) {
                        char what[96];
                        snprintf(what, sizeof(what), "%s (%d, %d) batch %d input %d product %d",
                                 kinds[k].name, p[n].m.rows, cols, batch, b, n);
                        expect_product(&p[n], layer, x + (size_t)b * cols,
                                       out[n] + (size_t)b * p[n].m.rows, what);
                    }
                for (int n = 0; n < 3; n++) free(out[n]);
                free(x);
                quantized_inputs_free(&xq);
            }
            for (int n = 0; n < 3; n++) packed_free(&p[n]);
        }
    }
}

Test(kernels, attention_matches_attention_ref) {
    omp_set_num_threads(2);
    /* head sizes below, at and past 16 and 32 floats (two vectors at a time), and past 64 and 128
     * (one query's passes of 4 and 8 vectors on AVX2 and AVX-512); 1, 2 and 4 query heads per kv
     * head */
    const int shapes[][3] = {{2, 2, 6},  {4, 2, 18}, {4, 1, 40},  {8, 2, 16},
                             {3, 3, 34}, {2, 1, 72}, {2, 2, 100}, {2, 1, 136}};
    const int seq_len = 40;
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        int n_heads = shapes[s][0], n_kv_heads = shapes[s][1], head_size = shapes[s][2];
        int dim = n_heads * head_size, kv_dim = n_kv_heads * head_size;
        float *keys = malloc((size_t)seq_len * kv_dim * sizeof(float));
        float *values = malloc((size_t)seq_len * kv_dim * sizeof(float));
        float *att = malloc((size_t)n_heads * 4 * seq_len * sizeof(float));
        for (int i = 0; i < seq_len * kv_dim; i++) {
            keys[i] = uniform(-1.0f, 1.0f);
            values[i] = uniform(-1.0f, 1.0f);
        }
        LayerCache lc = {keys, values, att, n_heads, n_kv_heads, head_size, seq_len};
        /* decode at several positions, and batches from several starts: every group of four
         * queries and every remainder */
        const int runs[][2] = {{0, 1}, {5, 1}, {37, 1}, {0, 9}, {3, 4}, {3, 7}, {10, 30}};
        for (size_t r = 0; r < sizeof(runs) / sizeof(runs[0]); r++) {
            int pos0 = runs[r][0], batch = runs[r][1];
            float *q = malloc((size_t)batch * dim * sizeof(float));
            float *fast = malloc((size_t)batch * dim * sizeof(float)),
                  *plain = malloc(dim * sizeof(float));
            for (int i = 0; i < batch * dim; i++) q[i] = uniform(-2.0f, 2.0f);
            attention(&lc, q, fast, pos0, batch);
            for (int b = 0; b < batch; b++) {
                /* decode (one query) gives the batch's bits: each sum in the order of t */
                attention(&lc, q + (size_t)b * dim, plain, pos0 + b, 1);
                cr_assert_arr_eq(plain, fast + (size_t)b * dim, dim * sizeof(float),
                                 "heads %d/%d of %d, pos %d: decode differs from the batch",
                                 n_heads, n_kv_heads, head_size, pos0 + b);
                attention_ref(&lc, q + (size_t)b * dim, plain, pos0 + b);
                for (int i = 0; i < dim; i++)
                    cr_assert_float_eq(fast[(size_t)b * dim + i], plain[i], 1e-5,
                                       "heads %d/%d of %d, pos %d, output %d: %g vs %g", n_heads,
                                       n_kv_heads, head_size, pos0 + b, i,
                                       fast[(size_t)b * dim + i], plain[i]);
            }
            free(q);
            free(fast);
            free(plain);
        }
        free(keys);
        free(values);
        free(att);
    }
}

/* ----------------------------------------------------------------------------
 * The whole forward pass */

static void load(Model *m, const char *path) {
    char err[256];
    cr_assert_eq(model_load(m, path, err, sizeof(err)), 0, "%s", err);
}

/* The largest |fast - plain| logit over n positions of `tokens`, fed to two copies of one model:
 * model_forward position by position, and also (prefill = 1) model_prefill in batches of 3. */
static double forward_gap(const char *path, NormFn norm, const int *tokens, int n, int prefill) {
    Model fast, plain;
    load(&fast, path);
    load(&plain, path);
    if (norm) fast.norm = plain.norm = norm;
    int vocab = fast.config.vocab_size;
    float *logits = malloc((size_t)n * vocab * sizeof(float));
    if (prefill) {
        char err[256];
        cr_assert_eq(model_set_batch(&fast, 3, err, sizeof(err)), 0, "%s", err);
        model_prefill(&fast, tokens, n, logits);
    } else {
        for (int pos = 0; pos < n; pos++)
            memcpy(logits + (size_t)pos * vocab, model_forward(&fast, tokens[pos], pos),
                   vocab * sizeof(float));
    }
    plain.forward = reference_forward; /* as run --reference sets it */
    double gap = 0.0;
    for (int pos = 0; pos < n; pos++) {
        const float *ref = model_forward(&plain, tokens[pos], pos);
        for (int i = 0; i < vocab; i++) {
            double d = fabs((double)logits[(size_t)pos * vocab + i] - ref[i]);
            cr_assert(isfinite(d));
            gap = d > gap ? d : gap;
        }
    }
    free(logits);
    model_free(&fast);
    model_free(&plain);
    return gap;
}

Test(forward, fast_matches_reference_on_stories260K) {
    omp_set_num_threads(1);
    /* BOS, "Once upon a time," and the first tokens of the greedy story (tok512 ids) */
    const int tokens[] = {1,   403, 407, 261, 378, 432, 383, 286, 261, 376, 268,
                          414, 410, 454, 412, 340, 426, 410, 454, 412, 340, 20};
    int n = sizeof(tokens) / sizeof(tokens[0]);
    NormFn norms[3] = {rmsnorm, layernorm, rmsnorm_eps_outside};
    for (int k = 0; k < 3; k++)
        for (int prefill = 0; prefill < 2; prefill++) {
            double gap = forward_gap(LEGACY, norms[k], tokens, n, prefill);
            cr_log_info("stories260K %s %s: max |fast - reference| logit %g", norm_name(norms[k]),
                        prefill ? "prefill" : "decode", gap);
            /* measured (AVX-512 / AVX2 / portable build), the largest under the three norms:
             * 1.6e-5 / 2.8e-5 (LayerNorm) / 1.3e-5; the bound 1.8x the largest */
            cr_assert_leq(gap, 5e-5, "%s: %g", norm_name(norms[k]), gap);
        }
}

/* A random normllama file (docs/FORMAT.md) of odd sizes: dim 24 (4 heads of 6, 2 kv heads),
 * hidden_dim 44 (q8_0 groups of 32 leave 12), 2 layers, vocab 37, seq_len 16, layernorm-trained
 * with norm biases and a separate classifier; weights uniform in +-0.3, norm weights near 1.
 * Written to path[64]. */
static void write_random_model(char *path, DType dtype, int group_size) {
    enum { DIM = 24, HIDDEN = 44, LAYERS = 2, HEADS = 4, KV_HEADS = 2, VOCAB = 37, SEQ = 16 };
    snprintf(path, 64, "/tmp/normllama-reference-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    FILE *f = fdopen(fd, "wb");
    uint32_t header[64] = {0x4d4c4c4e, 1, DIM, HIDDEN, LAYERS, HEADS, KV_HEADS, VOCAB, SEQ};
    float theta = 10000.0f, eps = 1e-5f;
    memcpy(&header[9], &theta, 4);
    memcpy(&header[10], &eps, 4);
    header[11] = 1; /* layernorm */
    header[12] = 1; /* norm biases */
    header[13] = 0; /* separate classifier */
    header[14] = dtype;
    header[15] = 64; /* alignment */
    header[16] = dtype_grouped(dtype) ? group_size : 0;
    fwrite(header, sizeof(header), 1, f);
    const int kv_dim = KV_HEADS * (DIM / HEADS);
    /* (count, rows, cols): count 0 marks a norm (rows values near 1, or near 0 for a bias) */
    const int tensors[][3] = {{1, VOCAB, DIM},       {0, LAYERS * DIM, 1},  {-1, LAYERS * DIM, 1},
                              {LAYERS, DIM, DIM},    {LAYERS, kv_dim, DIM}, {LAYERS, kv_dim, DIM},
                              {LAYERS, DIM, DIM},    {0, LAYERS * DIM, 1},  {-1, LAYERS * DIM, 1},
                              {LAYERS, HIDDEN, DIM}, {LAYERS, DIM, HIDDEN}, {LAYERS, HIDDEN, DIM},
                              {0, DIM, 1},           {-1, DIM, 1},          {1, VOCAB, DIM}};
    for (size_t t = 0; t < sizeof(tensors) / sizeof(tensors[0]); t++) {
        int count = tensors[t][0], rows = tensors[t][1], cols = tensors[t][2];
        fseek(f, (ftell(f) + 63) / 64 * 64, SEEK_SET);
        if (count <= 0) {
            for (int i = 0; i < rows; i++) {
                float v = count == 0 ? uniform(0.8f, 1.2f) : uniform(-0.1f, 0.1f);
                fwrite(&v, 4, 1, f);
            }
            continue;
        }
        size_t n = (size_t)count * rows * cols;
        uint8_t codes = 0; /* q4_0: two a byte (every row is even here), the first low */
        for (size_t i = 0; i < n; i++) {
            float v = uniform(-0.3f, 0.3f);
            uint16_t h = bf16_bits(v), half = dtype == DTYPE_F16 ? random_f16_bits() : 0;
            int8_t q = (int8_t)(int)uniform(-127.0f, 128.0f);
            if (dtype == DTYPE_F32) fwrite(&v, 4, 1, f);
            if (dtype == DTYPE_BF16) fwrite(&h, 2, 1, f);
            if (dtype == DTYPE_F16) fwrite(&half, 2, 1, f);
            if (dtype == DTYPE_Q8_0) fwrite(&q, 1, 1, f);
            codes = i % 2 ? (uint8_t)(codes | (q & 0xf) << 4) : (uint8_t)(q & 0xf);
            if (dtype == DTYPE_Q4_0 && i % 2) fwrite(&codes, 1, 1, f);
        }
        if (dtype_grouped(dtype)) { /* the scales, a tensor of their own */
            fseek(f, (ftell(f) + 63) / 64 * 64, SEEK_SET);
            size_t n_scales = (size_t)count * rows * ((cols + group_size - 1) / group_size);
            for (size_t i = 0; i < n_scales; i++) {
                float scale = uniform(0.3f, 0.4f) / (dtype == DTYPE_Q4_0 ? 8.0f : 127.0f);
                fwrite(&scale, 4, 1, f);
            }
        }
    }
    cr_assert_eq(fclose(f), 0);
}

/* The largest |rope - rope_ref| over every position of the model at path, on random q and k, as a
 * fraction of its bound; rope reads the run state's inv_freq, which state.c fills at load (here
 * again with divisors: Llama 3's rope_freqs, or NULL). */
static double rope_gap(const char *path, const float *divisors) {
    Model m;
    load(&m, path);
    const Config *c = &m.config;
    state_set_rope(&m.state, c, divisors);
    int head_size = c->dim / c->n_heads, kv_dim = c->n_kv_heads * head_size;
    float *q = malloc(c->dim * sizeof(float)), *k = malloc(kv_dim * sizeof(float));
    float *fast = malloc((c->dim + kv_dim) * sizeof(float));
    double worst = 0.0;
    for (int pos = 0; pos < c->seq_len; pos++) {
        for (int i = 0; i < c->dim; i++) q[i] = uniform(-2.0f, 2.0f);
        for (int i = 0; i < kv_dim; i++) k[i] = uniform(-2.0f, 2.0f);
        memcpy(fast, q, c->dim * sizeof(float));
        memcpy(fast + c->dim, k, kv_dim * sizeof(float));
        rope(c, m.state.inv_freq, fast, fast + c->dim, pos);
        rope_ref(c, divisors, q, k, pos);
        for (int i = 0; i < c->dim + kv_dim; i++) {
            const float *v = i < c->dim ? q + i : k + (i - c->dim);
            const float *pair = v - i % 2;
            /* Derived: inv_freq = 1 / powf(theta, 2j / head_size) errs by the exponent's rounding
             * times ln(theta) (9.2 u for 10000), powf's 1 ulp and the divide's half: 11 u, and
             * the angle pos * inv_freq by 0.5 u more, 12 u of the angle (u = FLT_EPSILON / 2);
             * a divisor's divide 0.5 u more (13 u); cosf, sinf and the rotation's two products
             * and sum add 4 u of the pair's size. */
            int pair_index = (i % head_size) / 2;
            double angle = pos * pow(c->rope_theta, -2.0 * pair_index / head_size) /
                           (divisors ? divisors[pair_index] : 1.0);
            double size = fabs(pair[0]) + fabs(pair[1]);
            double bound = size * (13.0 * angle + 4.0) * FLT_EPSILON / 2;
            cr_assert_leq(fabs((double)fast[i] - *v), bound, "pos %d value %d: %.9g vs %.9g", pos,
                          i, fast[i], *v);
            worst = fmax(worst, fabs((double)fast[i] - *v) / bound);
        }
    }
    free(q);
    free(k);
    free(fast);
    model_free(&m);
    return worst;
}

Test(kernels, rope_matches_rope_ref) {
    /* stories260K: 8 heads of 8, 4 kv heads, 512 positions; the random model: 4 heads of 6, 2 kv
     * heads, 16 positions */
    char path[64];
    write_random_model(path, DTYPE_F32, 0);
    const char *paths[2] = {LEGACY, path};
    /* Llama 3's divisors as convert_hf_to_gguf.py makes them: 1 for the fast pairs, the factor 8
     * for the slow ones, smoothed between (of heads of 8 and 6: 4 and 3 pairs) */
    const float llama3[4] = {1.0f, 2.5f, 8.0f, 8.0f};
    for (int i = 0; i < 2; i++) {
        cr_log_info("%s: |rope - rope_ref| at most %.3g of its bound", paths[i],
                    rope_gap(paths[i], NULL));
        cr_log_info("%s with rope_freqs: at most %.3g of its bound", paths[i],
                    rope_gap(paths[i], llama3));
    }
    unlink(path);
}

Test(kernels, rope_divides_each_pairs_frequency_by_rope_freqs) {
    /* one head of two pairs, theta 5e5 (Llama 3's), divisors 1 and 8, position 100: pair 0 turns
     * by 100 rad, pair 1 by 100 / (sqrt(5e5) * 8) = 0.0176776695 rad; (1, 0) becomes (cos, sin):
     * cos 100 = 0.862318872, sin 100 = -0.506365641, cos 0.0176776695 = 0.999843754, sin
     * 0.0176776695 = 0.0176767488 (by hand in double) */
    Config c = {.dim = 4, .n_heads = 1, .n_kv_heads = 1, .rope_theta = 5e5f};
    const float divisors[2] = {1.0f, 8.0f};
    const double want[4] = {0.862318872, -0.506365641, 0.999843754, 0.0176767488};
    float q[4] = {1, 0, 1, 0}, k[4] = {1, 0, 1, 0};
    rope_ref(&c, divisors, q, k, 100);
    /* fast: inv_freq as state_set_rope makes it (1 and 1 / (sqrt(5e5) * 8) in float) */
    float inv_freq[2] = {1.0f, 1.0f / powf(5e5f, 0.5f) / 8.0f};
    float fq[4] = {1, 0, 1, 0}, fk[4] = {1, 0, 1, 0};
    rope(&c, inv_freq, fq, fk, 100);
    for (int i = 0; i < 4; i++) {
        /* the hand values' 9 digits (5e-10) and float's rounding of a value near 1 (6e-8), and
         * cosf's and sinf's ulp: 100 rad is exact in float, the other angle off by 1e-9 */
        double tol = 2e-7;
        cr_assert_float_eq(q[i], want[i], tol, "rope_ref value %d: %.9g", i, q[i]);
        cr_assert_float_eq(k[i], want[i], tol, "rope_ref key %d: %.9g", i, k[i]);
        cr_assert_float_eq(fq[i], want[i], tol, "rope value %d: %.9g", i, fq[i]);
        cr_assert_float_eq(fk[i], want[i], tol, "rope key %d: %.9g", i, fk[i]);
    }
    /* and without the divisor the second pair turns 8 times as far: cos 0.141421356 = 0.990016656
     */
    float plain[4] = {1, 0, 1, 0}, plain_k[4] = {1, 0, 1, 0};
    rope_ref(&c, NULL, plain, plain_k, 100);
    cr_assert_float_eq(plain[2], 0.990016656, 2e-7);
}

/* How far the fast forward pass's logits may be from reference_forward's on the random model of
 * kind k. f32, bf16 and f16 differ by rounding alone; q8_0's fast path also rounds its inputs to
 * int16 (about 4.5 digits), q4_0's to int8 in blocks of 32, steps up to 258 times as coarse.
 * Measured (AVX-512 / AVX2 / portable build): f32 1.4e-6 / 1.0e-6 / 1.1e-6, bf16 1.2e-6 /
 * 1.4e-6 / 1.2e-6, f16 2.6e-6 / 2.5e-6 / 2.0e-6; q8_0 2.8e-4 / 3.1e-4 / 3.8e-4 (groups of 32),
 * 3.5e-4 / 4.6e-4 / 4.1e-4 (64); q4_0 0.0607 in all three (its inputs' rounding, the same bits in
 * every build). Each bound is the largest measurement with a margin of 1.6x to 1.9x for the sums'
 * order (which moved stories260K's gap 2.1x between two builds, above), and 1.3x for q4_0. */
static double forward_tolerance(const Kind *k) {
    if (k->dtype == DTYPE_F32 || k->dtype == DTYPE_BF16 || k->dtype == DTYPE_F16) return 5e-6;
    if (k->dtype == DTYPE_Q8_0 && k->group_size == 32) return 6e-4;
    if (k->dtype == DTYPE_Q8_0 && k->group_size == 64) return 8e-4;
    if (k->dtype == DTYPE_Q4_0) return 0.08;
    cr_assert_fail("no measured tolerance for %s", k->name);
    return 0.0;
}

Test(forward, fast_matches_reference_on_random_models_of_each_dtype, .init = list_kinds) {
    omp_set_num_threads(1);
    const int tokens[16] = {1, 5, 36, 2, 17, 17, 0, 30, 8, 9, 21, 33, 4, 4, 12, 26};
    for (int k = 0; k < n_kinds; k++) {
        char path[64];
        /* GGUF only: test_gguf_writer.py's Q4_K_M, and the fp16 scales of its q8_0 and q4_0 */
        if (dtype_kquant(kinds[k].dtype) || kinds[k].half_scales) continue;
        rng = RNG_SEED; /* each kind's model its own, whatever kinds come before it */
        write_random_model(path, kinds[k].dtype, kinds[k].group_size);
        for (int prefill = 0; prefill < 2; prefill++) {
            double gap = forward_gap(path, NULL, tokens, 16, prefill);
            cr_log_info("random %s %s: max |fast - reference| logit %g", kinds[k].name,
                        prefill ? "prefill" : "decode", gap);
            cr_assert_leq(gap, forward_tolerance(&kinds[k]), "%s: %g", kinds[k].name, gap);
        }
        unlink(path);
    }
}

/* ----------------------------------------------------------------------------
 * The run state's memory */

/* KiB of this process's resident memory (VmRSS in /proc/self/status), or -1. */
static long resident_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
    if (f) fclose(f);
    return kib;
}

Test(state, kv_cache_takes_memory_as_positions_advance) {
    /* the random f32 model with seq_len 2^20 (the header's int32 at byte 32): its kv cache is
     * 2 x 2 layers x 2^20 positions x 12 floats, 192 MiB, and its attention scores 64 MiB */
    char path[64];
    write_random_model(path, DTYPE_F32, 0);
    FILE *f = fopen(path, "r+b");
    uint32_t seq_len = 1u << 20;
    cr_assert(f && fseek(f, 32, SEEK_SET) == 0 && fwrite(&seq_len, 4, 1, f) == 1);
    cr_assert_eq(fclose(f), 0);
    long before = resident_kib();
    Model m;
    load(&m, path);
    long loaded = resident_kib();
    for (int pos = 0; pos < 4096; pos++) model_forward(&m, pos % 37, pos);
    long used = resident_kib();
    cr_log_info("resident memory: +%ld KiB at load, +%ld KiB after 4096 positions (their kv "
                "cache 768 KiB; all 2^20 positions' 196608 KiB)",
                loaded - before, used - before);
    cr_assert_lt(loaded - before, 8192, "+%ld KiB at load", loaded - before);
    cr_assert_lt(used - before, 8192, "+%ld KiB after 4096 positions", used - before);
    model_free(&m);
    unlink(path);
}

Test(reference_mode, options_it_would_ignore_are_errors) {
    const char *flags[3][3] = {{"--profile", NULL}, {"--batch=4", NULL}, {"--tokenize", "Hi"}};
    for (int i = 0; i < 3; i++) {
        RunResult r = run_program((const char *[]){LEGACY, "-z", TOKENIZER, "--reference",
                                                   flags[i][0], flags[i][1], NULL});
        cr_assert_eq(r.exit_code, 1, "%s: exit %d", flags[i][0], r.exit_code);
        cr_assert_eq(count_lines(r.err), 1, "%s", r.err);
        cr_assert(strstr(r.err, "--reference runs the plain pass"), "%s", r.err);
        cr_assert_str_eq(r.out, "");
        result_free(&r);
    }
}
