/* The K-quants' panels and products (kquant.h): the file's Q4_K and Q6_K blocks packed lane by
 * lane, the value readers of the plain path, and the SIMD tiles over int8 input blocks.
 */
#include "kquant.h"

#include <string.h>

#include "gguf_blocks.h"
#include "q4_dot.h"
#include "simd.h"

enum {
    SUPER = 256, /* values of a super-block */
    /* bytes of a row's super-block, in the file and in a panel */
    Q4K_BYTES = 144,
    Q6K_BYTES = 210,
    /* where a panel's super-block fields start, in units of PANEL_ROWS bytes (kquant.h) */
    Q4K_DMIN = 2,
    Q4K_WORDS = 4,
    Q4K_CODES = 16,
    Q4K_UNPACKED = KQUANT_Q4K_UNPACKED_BYTES, /* Q4K_CODES + 256 codes a byte each */
    Q6K_SCALES = 2,
    Q6K_LOW = 18,
    Q6K_HIGH = 146,
    /* the tiles: decode's 4 panels (matmul.c's BLOCK_PANELS) x 1 input; prefill's 2 x 4, as
     * q4_0's (each panel apart, 1 x 4, was no faster: 110M prefill on one thread, four
     * alternating rounds, AVX2 build 197-237 tokens/s against 220-258, AVX-512 level) */
    KQ_PANELS = 4,
    KQ_INPUTS = KQUANT_TILE_INPUTS,
};
_Static_assert((int)KQ_INPUTS <= (int)Q4_DOT_INPUTS, "q4k_tile's inputs fit q4_dots");

/* ----------------------------------------------------------------------------
 * Where a code is in a panel's super-block, and in the file's block */

/* Byte and shift of the 4-bit code (q6_k: the low 4 bits) of (lane, c) among a super-block's
 * codes: q4_0's blocks of 8 columns (panel.h). */
static size_t code_byte(int lane, int c) {
    return (size_t)(c / 8) * 4 * PANEL_ROWS + lane * 4 + c % 4;
}
static int code_shift(int c) {
    return c % 8 >= 4 ? 4 : 0;
}

/* Byte and shift of q6_k's high 2 bits of (lane, c): 4 * PANEL_ROWS bytes a sub-block of 16. */
static size_t high_byte(int lane, int c) {
    return (size_t)(c / 16) * 4 * PANEL_ROWS + lane * 4 + c % 4;
}
static int high_shift(int c) {
    return c % 16 / 4 * 2;
}

/* The 256 codes of a Q4_K block's qs in column order: 64 columns a 32 bytes, low nibbles first. */
static void q4k_file_codes(const uint8_t *qs, uint8_t codes[SUPER]) {
    for (int c = 0; c < SUPER; c += 64)
        for (int l = 0; l < 32; l++) {
            codes[c + l] = qs[c / 2 + l] & 0xf;
            codes[c + 32 + l] = qs[c / 2 + l] >> 4;
        }
}

/* The 256 6-bit codes of a Q6_K block in column order (gguf_q6_K_to_f32 says where their bits
 * are). */
static void q6k_file_codes(const uint8_t *block, uint8_t codes[SUPER]) {
    for (int half = 0; half < 2; half++) {
        const uint8_t *ql = block + 64 * half, *qh = block + 128 + 32 * half;
        for (int l = 0; l < 32; l++) {
            int low[4] = {ql[l] & 0xf, ql[l + 32] & 0xf, ql[l] >> 4, ql[l + 32] >> 4};
            for (int k = 0; k < 4; k++)
                codes[128 * half + 32 * k + l] = (uint8_t)(low[k] | (qh[l] >> (2 * k) & 3) << 4);
        }
    }
}

/* Lane r's codes (their low 4 bits) into a super-block's codes at `out`, q4_0's blocks of 8. */
static void put_nibbles(uint8_t *out, int r, const uint8_t codes[SUPER]) {
    for (int c = 0; c < SUPER; c += 8)
        for (int k = 0; k < 4; k++)
            out[code_byte(r, c + k)] =
                (uint8_t)((codes[c + k] & 0xf) | (codes[c + 4 + k] & 0xf) << 4);
}

/* Lane r's codes' high 2 bits into a q6_k super-block's at `out`, 4 a byte. */
static void put_high_bits(uint8_t *out, int r, const uint8_t codes[SUPER]) {
    for (int c = 0; c < SUPER; c += 16)
        for (int k = 0; k < 4; k++)
            out[high_byte(r, c + k)] =
                (uint8_t)(codes[c + k] >> 4 | (codes[c + 4 + k] >> 4) << 2 |
                          (codes[c + 8 + k] >> 4) << 4 | (codes[c + 12 + k] >> 4) << 6);
}

static float half_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, sizeof(h));
    return f16_to_f32(h);
}

/* ----------------------------------------------------------------------------
 * Packing and the values */

/* Super-block sb of row first + r of the file's rows at `values`. */
static const uint8_t *file_block(const Matrix *m, const void *values, size_t row, int sb,
                                 int block_bytes) {
    return (const uint8_t *)values + row * dtype_row_bytes(m->dtype, m->cols) +
           (size_t)sb * block_bytes;
}

void pack_q4_k(const Matrix *m, char *dst, const void *values, const float *scales, size_t first,
               int n_rows) {
    (void)scales;
    memset(dst, 0, m->panel_bytes);
    for (int sb = 0; sb < m->cols / SUPER; sb++) {
        uint8_t *out = (uint8_t *)dst + (size_t)sb * Q4K_BYTES * PANEL_ROWS;
        for (int r = 0; r < n_rows; r++) {
            const uint8_t *block = file_block(m, values, first + r, sb, Q4K_BYTES);
            memcpy(out + 2 * r, block, 2);
            memcpy(out + Q4K_DMIN * PANEL_ROWS + 2 * r, block + 2, 2);
            for (int k = 0; k < 3; k++)
                memcpy(out + Q4K_WORDS * PANEL_ROWS + (k * PANEL_ROWS + r) * 4, block + 4 + 4 * k,
                       4);
            uint8_t codes[SUPER];
            q4k_file_codes(block + 16, codes);
            put_nibbles(out + Q4K_CODES * PANEL_ROWS, r, codes);
        }
    }
}

void pack_q6_k(const Matrix *m, char *dst, const void *values, const float *scales, size_t first,
               int n_rows) {
    (void)scales;
    memset(dst, 0, m->panel_bytes);
    for (int sb = 0; sb < m->cols / SUPER; sb++) {
        uint8_t *out = (uint8_t *)dst + (size_t)sb * Q6K_BYTES * PANEL_ROWS;
        for (int r = 0; r < n_rows; r++) {
            const uint8_t *block = file_block(m, values, first + r, sb, Q6K_BYTES);
            memcpy(out + 2 * r, block + 208, 2);
            for (int s = 0; s < 16; s++) out[(Q6K_SCALES + s) * PANEL_ROWS + r] = block[192 + s];
            uint8_t codes[SUPER];
            q6k_file_codes(block, codes);
            put_nibbles(out + Q6K_LOW * PANEL_ROWS, r, codes);
            put_high_bits(out + Q6K_HIGH * PANEL_ROWS, r, codes);
        }
    }
}

float value_q4_k(const Matrix *m, const char *panel, int lane, int col) {
    (void)m;
    const uint8_t *sb = (const uint8_t *)panel + (size_t)(col / SUPER) * Q4K_BYTES * PANEL_ROWS;
    int c = col % SUPER, sc, mn;
    uint8_t scales[12];
    for (int k = 0; k < 3; k++)
        memcpy(scales + 4 * k, sb + Q4K_WORDS * PANEL_ROWS + (k * PANEL_ROWS + lane) * 4, 4);
    gguf_k_scale_min(scales, c / 32, &sc, &mn);
    int code = sb[Q4K_CODES * PANEL_ROWS + code_byte(lane, c)] >> code_shift(c) & 0xf;
    float d1 = half_at(sb + 2 * lane) * sc,
          m1 = half_at(sb + Q4K_DMIN * PANEL_ROWS + 2 * lane) * mn;
    return d1 * code - m1;
}

float value_q6_k(const Matrix *m, const char *panel, int lane, int col) {
    (void)m;
    const uint8_t *sb = (const uint8_t *)panel + (size_t)(col / SUPER) * Q6K_BYTES * PANEL_ROWS;
    int c = col % SUPER;
    int scale = (int8_t)sb[(Q6K_SCALES + c / 16) * PANEL_ROWS + lane];
    int code = (sb[Q6K_LOW * PANEL_ROWS + code_byte(lane, c)] >> code_shift(c) & 0xf) |
               (sb[Q6K_HIGH * PANEL_ROWS + high_byte(lane, c)] >> high_shift(c) & 3) << 4;
    return half_at(sb + 2 * lane) * scale * (code - 32);
}

void kquant_unpack_q4_k(Matrix *chunk, char *to, const Matrix *w, const char *panel, int np,
                        int from) {
    char *at = to;
    for (int r = 0; r < np; r++) {
        const uint8_t *sb = (const uint8_t *)panel + (size_t)r * w->panel_bytes +
                            (size_t)from / SUPER * Q4K_BYTES * PANEL_ROWS;
        for (int c = 0; c < chunk->cols; c += SUPER, sb += Q4K_BYTES * PANEL_ROWS) {
            memcpy(at, sb, Q4K_CODES * PANEL_ROWS);
            at += Q4K_CODES * PANEL_ROWS;
            for (int i = 0; i < SUPER; i += 8) {
                vecb low, high;
                unpack_block(sb + Q4K_CODES * PANEL_ROWS + code_byte(0, i), 0, &low, &high);
                vecb_store((uint8_t *)at, low);
                vecb_store((uint8_t *)at + 4 * PANEL_ROWS, high);
                at += 8 * PANEL_ROWS;
            }
        }
        if (r == 0) chunk->panel_bytes = (size_t)(at - to);
    }
}

/* ----------------------------------------------------------------------------
 * The tiles */

/* Super-block k / 8 (k an input block of 32 columns) of panel r of t. */
static ALWAYS_INLINE const uint8_t *super_block(const KTile *t, int r, int k, int bytes) {
    return (const uint8_t *)t->panel + (size_t)r * t->spacing * t->w->panel_bytes +
           (size_t)(k / 8) * bytes * PANEL_ROWS;
}

/* Input b's block k: its int8 values from column 32k + i, its scale and its scale * sum. */
static ALWAYS_INLINE const int8_t *input_at(const KTile *t, int b, int k, int i) {
    return t->x8 + b * t->x8_stride + 32 * k + i;
}
static ALWAYS_INLINE float input_scale(const KTile *t, int b, int k) {
    return t->x8_scale[b * t->x8_stride / 32 + k];
}
static ALWAYS_INLINE float input_scaled_sum(const KTile *t, int b, int k) {
    size_t block = b * t->x8_stride / 32 + k;
    return t->x8_scale[block] * t->x8_sum[block];
}

/* Decode asks for the bytes of input block k's share of each super-block (an eighth)
 * DECODE_AHEAD_BYTES (panel.h) past the share it reads: 110M Q4_K_M decode had run 1.08x and 1.05x
 * on one and two threads asking for the next panel of the tile's stream, 0.85x without (EPYC,
 * medians of 5 alternating runs); on a Xeon with AVX-512 the fixed distance read q4_k at 1.01-1.13x
 * and q6_k at 0.96-1.27x the next panel's rate from memory (panel.h). The share's lines at constant
 * offsets from its start, unrolled, where a loop had run from a start that moved with k:
 * build/stream q4_k (2048, 768) in cache 1.09x (one thread, 9 alternating rounds). */
static ALWAYS_INLINE void prefetch_ahead(const KTile *t, int r, int k, int bytes) {
    int share = bytes * PANEL_ROWS / 8;
    const char *at = (const char *)super_block(t, r, k, bytes) + k % 8 * share + DECODE_AHEAD_BYTES;
    UNROLL
    for (int o = 0; o < share; o += 64) __builtin_prefetch(at + o);
}

/* Prefill's widest tile asks for its share of the next panels (kquant.h's ahead) into L2, the
 * lines of input block k's columns, as matmul.c's tiles do: the tiles of a batch pass the next
 * panels' bytes in turn, so that the next pair's first tile finds them in L2. */
static ALWAYS_INLINE void prefetch_share(const KTile *t, int k) {
    UNROLL
    for (int i = 0; i < 32 / KQUANT_AHEAD_COLUMNS; i++)
        __builtin_prefetch(t->ahead + ((size_t)k * 32 / KQUANT_AHEAD_COLUMNS + i) * 64, 0, 2);
}

/* Sub-block j's 6-bit scale and min of every lane from the three words of a q4_k super-block
 * (gguf_k_scale_min's bits: j < 4 the low 6 bits of bytes j and j + 4; else byte j + 4's nibbles,
 * with bits 6-7 of bytes j - 4 and j as bits 4-5). */
static ALWAYS_INLINE void q4k_scale_min(const uint8_t *words, int j, veci *scale, veci *min) {
    veci w0 = veci_load(words), w1 = veci_load(words + 4 * PANEL_ROWS);
    veci six = veci_set1(63), four = veci_set1(15), top = veci_set1(0x30);
    if (j < 4) {
        *scale = veci_and(veci_shr(w0, 8 * j), six);
        *min = veci_and(veci_shr(w1, 8 * j), six);
    } else {
        veci w2 = veci_load(words + 8 * PANEL_ROWS);
        int at = 8 * (j - 4);
        *scale = veci_or(veci_and(veci_shr(w2, at), four), veci_and(veci_shr(w0, at + 2), top));
        *min = veci_or(veci_and(veci_shr(w2, at + 4), four), veci_and(veci_shr(w1, at + 2), top));
    }
}

/* acc[r][b] = 0, or with t->add the outputs there (a chunk's sums carried on). */
static ALWAYS_INLINE void start_acc(const KTile *t, vecf acc[KQ_PANELS][KQ_INPUTS], int nb,
                                    int np) {
    UNROLL
    for (int r = 0; r < np; r++) {
        int row = t->row0 + r * t->spacing * PANEL_ROWS;
        UNROLL
        for (int b = 0; b < nb; b++)
            acc[r][b] = t->add ? vec_load_upto(t->out + b * t->out_stride + row, t->w->rows - row)
                               : vec_zero();
    }
}

static ALWAYS_INLINE void store_acc(const KTile *t, vecf acc[KQ_PANELS][KQ_INPUTS], int nb,
                                    int np) {
    UNROLL
    for (int r = 0; r < np; r++) {
        int row = t->row0 + r * t->spacing * PANEL_ROWS;
        UNROLL
        for (int b = 0; b < nb; b++)
            vec_store_upto(t->out + b * t->out_stride + row, acc[r][b], t->w->rows - row);
    }
}

/* q4_k: np panels times nb inputs, input block (= sub-block of 32) by input block:
 * acc += (d * sc) * s * float(codes . x8) - (dmin * mn) * (s * S), codes . x8 by q4_dot.h's
 * q4_dots, the q4_0 tile's step (its codes are held as q4_0's, or unpacked: KTile's), within int16
 * over a block. */
static ALWAYS_INLINE void q4k_tile(const KTile *t, int nb, int np, int unpacked) {
    int bytes = unpacked ? Q4K_UNPACKED : Q4K_BYTES;
    vecf acc[KQ_PANELS][KQ_INPUTS];
    start_acc(t, acc, nb, np);
    for (int k = 0; k < t->w->cols / 32; k++) {
        vecw sums[KQ_PANELS][Q4_DOT_INPUTS];
        Q4Codes codes = {.unpacked = unpacked};
        const int8_t *x8[Q4_DOT_INPUTS];
        UNROLL
        for (int r = 0; r < np; r++) /* a block of 32 columns: 16 bytes a row, or 32 unpacked */
            codes.at[r] = super_block(t, r, k, bytes) + Q4K_CODES * PANEL_ROWS +
                          (size_t)(k % 8) * (unpacked ? 32 : 16) * PANEL_ROWS;
        UNROLL
        for (int b = 0; b < nb; b++) x8[b] = input_at(t, b, k, 0);
        UNROLL
        for (int r = 0; r < np; r++) { /* q4_dots adds to its sums */
            UNROLL
            for (int b = 0; b < nb; b++) sums[r][b] = vecw_zero();
        }
        q4_dots(sums, &codes, x8, nb, np, 32);
        if (nb == KQ_INPUTS) prefetch_share(t, k);
        UNROLL
        for (int r = 0; r < np; r++) {
            const uint8_t *sb = super_block(t, r, k, bytes);
            veci sc, mn;
            q4k_scale_min(sb + Q4K_WORDS * PANEL_ROWS, k % 8, &sc, &mn);
            vecf d_sc = vec_mul(vec_load_f16((const uint16_t *)sb), vec_from_veci(sc));
            vecf dmin = vec_load_f16((const uint16_t *)(sb + Q4K_DMIN * PANEL_ROWS));
            vecf minus_dmin_mn = vec_mul(vec_sub(vec_zero(), dmin), vec_from_veci(mn));
            UNROLL
            for (int b = 0; b < nb; b++) {
                vecf dot = vec_from_veci(veci_from_pairs(sums[r][b]));
                acc[r][b] =
                    vec_fmadd(dot, vec_mul(d_sc, vec_set1(input_scale(t, b, k))), acc[r][b]);
                acc[r][b] =
                    vec_fmadd(minus_dmin_mn, vec_set1(input_scaled_sum(t, b, k)), acc[r][b]);
            }
            if (nb == 1) prefetch_ahead(t, r, k, Q4K_BYTES);
        }
    }
    store_acc(t, acc, nb, np);
}

/* q6_k's 6-bit codes of a block of 8 columns (i = 0 or 8 in its sub-block of 16): the low
 * nibbles' codes (columns i .. i + 3) and the high ones' (i + 4 .. i + 7) with their high 2 bits
 * from `high` (kquant.h's bits 0-1, 2-3 for i = 0; 4-5, 6-7 for i = 8) put in as bits 4-5. */
static ALWAYS_INLINE void q6k_codes(vecb *low, vecb *high, vecb bits, int i) {
    if (i == 0) {
        *low = vecb_or(*low, vecb_shl(vecb_and(bits, vecb_set1(0x03)), 4));
        *high = vecb_or(*high, vecb_shl(vecb_and(bits, vecb_set1(0x0c)), 2));
    } else {
        *low = vecb_or(*low, vecb_and(bits, vecb_set1(0x30)));
        *high = vecb_or(*high, vecb_shr(vecb_and(bits, vecb_set1(0xc0)), 2));
    }
}

/* q6_k: as q4k_tile, an input block's two sub-blocks of 16 each with its scale:
 * acc += d * s * float(sum over the two of scale * ((codes . x8) - 32 * (their x8's sum))). The
 * 32 * sums come from vpmaddubsw of 32s by the inputs, once per input for all panels. A lane's 8
 * products in a sub-block come to at most 8 * 63 * 127 = 64008 with the codes as they are, past
 * int16, but to at most 8 * 32 * 127 = 32512 once the 32s' are taken off: the int16 adds wrap,
 * and the difference, within int16, comes out exact (with AVX512-VNNI the lanes are vpdpbusd's
 * int32, and nothing wraps). Each block of 8 columns goes as q4_dots: the panels' codes first,
 * then input by input, each sum made at its block (OPAQUE): build/gemm 110M q6_k at batch 128
 * 1.32x on one thread, 1.17x on two (6 alternating rounds, medians 66.0 against 50.0 and 111.3
 * against 95.5 GFLOP/s; stack loads and stores of the 2 x 4 tile 240 before, 135 after). Decode
 * (one input) takes its four panels one at a time, the same sums: four panels' codes, 8 vectors,
 * had left 123 stack loads and stores an input block, one panel's 52; build/stream q6_k (2048, 768)
 * on one thread 1.21x in cache and 1.09x from memory (6-7 alternating rounds; on two threads
 * 0.95-1.03x, within the noise). */
static ALWAYS_INLINE void q6k_tile(const KTile *t, int nb, int np) {
    vecf acc[KQ_PANELS][KQ_INPUTS];
    start_acc(t, acc, nb, np);
    const vecb thirty_two = vecb_set1(32);
    int group = nb == 1 ? 1 : np; /* panels whose codes are live at once */
    for (int k = 0; k < t->w->cols / 32; k++) {
        veci isums[KQ_PANELS][KQ_INPUTS];
        if (nb == KQ_INPUTS) prefetch_share(t, k);
        UNROLL
        for (int h = 0; h < 2; h++) {
            int s = k % 8 * 2 + h; /* the sub-block of 16 in its super-block */
            vecw sums[KQ_PANELS][KQ_INPUTS], offsets[KQ_INPUTS];
            UNROLL
            for (int b = 0; b < nb; b++) {
                offsets[b] = vecw_zero();
                UNROLL
                for (int r = 0; r < np; r++) sums[r][b] = vecw_zero();
            }
            UNROLL
            for (int i = 0; i < 16; i += 8) {
                UNROLL
                for (int r0 = 0; r0 < np; r0 += group) { /* a group's codes, then each input */
                    vecb low[KQ_PANELS], high[KQ_PANELS];
                    UNROLL
                    for (int r = r0; r < r0 + group; r++) {
                        const uint8_t *sb = super_block(t, r, k, Q6K_BYTES);
                        vecb_nibbles(
                            vecb_load(sb + Q6K_LOW * PANEL_ROWS + code_byte(0, 16 * s + i)),
                            &low[r], &high[r]);
                        q6k_codes(&low[r], &high[r],
                                  vecb_load(sb + Q6K_HIGH * PANEL_ROWS + high_byte(0, 16 * s)), i);
                    }
                    UNROLL
                    for (int b = 0; b < nb; b++) {
                        vecb low_quad = vecb_set1_quad(input_at(t, b, k, 16 * h + i));
                        vecb high_quad = vecb_set1_quad(input_at(t, b, k, 16 * h + i + 4));
                        if (r0 == 0) {
                            offsets[b] = vecw_dot_u8(vecw_dot_u8(offsets[b], thirty_two, low_quad),
                                                     thirty_two, high_quad);
                            OPAQUE(offsets[b]);
                        }
                        UNROLL
                        for (int r = r0; r < r0 + group; r++) {
                            sums[r][b] = vecw_dot_u8(vecw_dot_u8(sums[r][b], low[r], low_quad),
                                                     high[r], high_quad);
                            OPAQUE(sums[r][b]); /* made here: see OPAQUE */
                        }
                    }
                }
            }
            UNROLL
            for (int r = 0; r < np; r++) {
                const int8_t *scales = (const int8_t *)super_block(t, r, k, Q6K_BYTES);
                veci scale = veci_load_i8(scales + (Q6K_SCALES + s) * PANEL_ROWS);
                UNROLL
                for (int b = 0; b < nb; b++) {
                    veci sum = veci_mul(veci_from_pairs(vecw_sub(sums[r][b], offsets[b])), scale);
                    isums[r][b] = h == 0 ? sum : veci_add(isums[r][b], sum);
                }
            }
        }
        UNROLL
        for (int r = 0; r < np; r++) {
            vecf d = vec_load_f16((const uint16_t *)super_block(t, r, k, Q6K_BYTES));
            UNROLL
            for (int b = 0; b < nb; b++)
                acc[r][b] = vec_fmadd(vec_from_veci(isums[r][b]),
                                      vec_mul(d, vec_set1(input_scale(t, b, k))), acc[r][b]);
            if (nb == 1) prefetch_ahead(t, r, k, Q6K_BYTES);
        }
    }
    store_acc(t, acc, nb, np);
}

/* One tile of np panels times nb inputs of t's dtype, all constants once inlined. */
static ALWAYS_INLINE void tile(const KTile *t, int nb, int np) {
    if (t->w->dtype == DTYPE_Q6_K)
        q6k_tile(t, nb, np);
    else if (t->unpacked)
        q4k_tile(t, nb, np, 1);
    else
        q4k_tile(t, nb, np, 0);
}

/* The tile of np (1 or 2) panels times nb (1, 2 or KQ_INPUTS) inputs, nb a constant in each
 * branch. */
static ALWAYS_INLINE void tile_nb(const KTile *t, int nb, int np) {
    if (nb == KQ_INPUTS)
        tile(t, KQ_INPUTS, np);
    else if (nb == 2)
        tile(t, 2, np);
    else
        tile(t, 1, np);
}

int kquant_tiles(const KTile *t) {
    if (t->np == KQ_PANELS) {
        tile(t, 1, KQ_PANELS);
        return 1;
    }
    int nb = t->inputs >= KQ_INPUTS ? KQ_INPUTS : t->inputs >= 2 ? 2 : 1;
    if (t->np == 2)
        tile_nb(t, nb, 2);
    else
        tile_nb(t, nb, 1);
    return nb;
}
