/* The weight dtypes, one row each in one table (dtype.c), as ggml's type_traits: what a file
 * holds of a matrix in that dtype, how it goes into panels (panel.h) and which tiles multiply it
 * (matmul.c). Adding a dtype is a row here plus its pack, value and tiles functions. A second
 * table says which dtype each GGUF tensor type run reads becomes, and how (GGUF_DTYPES). Beside
 * the tables, the half-precision and bfloat16 conversions that reading such values takes, and
 * q8_0's quantizer, which the GGUF types converted at load go through.
 */
#ifndef DTYPE_H
#define DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Element type of the weight matrices, its value the normllama header's dtype code (FORMAT.md);
 * DTYPES is indexed by it. Norms stay f32 whatever the dtype. */
typedef enum {
    DTYPE_F32 = 0,  /* float32 */
    DTYPE_BF16 = 1, /* bfloat16: the upper 16 bits of a float32 */
    DTYPE_Q8_0 = 2, /* int8 with one scale per group of group_size values of a row (float32;
                     * fp16 from a GGUF: panel.h's half_scales) */
    DTYPE_F16 = 3,  /* IEEE 754 binary16 */
    DTYPE_Q4_0 = 4, /* 4-bit codes with one scale per group of 32 values of a row (as q8_0's) */
    DTYPE_Q4_K = 5, /* ggml's Q4_K blocks of 256 (kquant.h): read from GGUF files only */
    DTYPE_Q6_K = 6, /* ggml's Q6_K blocks of 256 (kquant.h): read from GGUF files only */
    N_DTYPES
} DType;

/* How a tensor is stored in a file (format.c's layouts): a weight dtype's own kind (its row's),
 * or one of the kinds the layouts add. */
typedef enum {
    TENSOR_F32,
    TENSOR_NORM, /* a norm's weight or bias: f32, copied out of the map at load */
    TENSOR_BF16,
    TENSOR_F16,
    TENSOR_I8,       /* q8_0 values; their scales follow as a TENSOR_F32 */
    TENSOR_Q4,       /* q4_0 codes, two a byte; their scales follow as a TENSOR_F32 */
    TENSOR_AK42_Q8,  /* llama2.c version 2, groups within rows: read in place as q8_0 */
    TENSOR_AK42_F32, /* llama2.c version 2, groups across rows: dequantized at load */
    TENSOR_SKIP,     /* float32 data run does not use */
    TENSOR_GGUF,     /* a K-quant's blocks: only a GGUF file holds them, never a normllama one */
} TensorKind;

typedef struct Matrix Matrix; /* panel.h: a stack of weight matrices in panels */
typedef struct Tile Tile;     /* matmul.c: panels of a matrix times some inputs, and the outputs */

enum { MAX_GROUP_SIZES = 2 };

/* One weight dtype. A row of a file's row-major matrix (normllama, FORMAT.md) is blocks of
 * block_size values, block_bytes each, the last padded to a whole block; a grouped dtype's scales
 * are a tensor of their own, one float32 per group of group_size values of a row. A block is the
 * file's unit and a group the panels' (q4_0: blocks of 2 codes a byte, groups of 32). */
typedef struct {
    const char *name; /* as the header's code is spelled in messages, export.py's --dtype */
    TensorKind kind;  /* how a normllama file stores a matrix of it */
    int block_size, block_bytes;
    /* the group sizes the tiles are built for, the rest 0; none for a dtype without scales */
    int group_sizes[MAX_GROUP_SIZES];
    /* Packs rows first .. first + n_rows - 1 (n_rows <= m->panel_rows) of one layer's row-major
     * matrix into the panel at dst (panel.h, matrix_pack_panel). */
    void (*pack)(const Matrix *m, char *dst, const void *values, const float *scales, size_t first,
                 int n_rows);
    /* Value (lane, col) of the panel at `panel`, lane its row (panel.h, matrix_value). */
    float (*value)(const Matrix *m, const char *panel, int lane, int col);
    /* Runs the tile of matmul.c's kernels that fits (matmul.h); returns the inputs it took. */
    int (*tiles)(const Tile *tile);
} DTypeInfo;

extern const DTypeInfo DTYPES[N_DTYPES];

/* How a GGUF tensor of a type run reads becomes a matrix of one of its dtypes. */
typedef enum {
    GGUF_IN_PLACE,  /* the dtype's own row layout (F32, F16, BF16, Q4_K, Q6_K): packed from the
                       file as it is */
    GGUF_REPACKED,  /* the same values regrouped into the dtype's rows, fp16 scales widened to f32
                       (Q8_0 and Q5_0 as q8_0, Q4_0 as q4_0): exact */
    GGUF_CONVERTED, /* decoded to float32, then quantized to the dtype (q8_0 in groups of 32): the
                       values move by up to half a q8_0 step, max |w| / 254 of their group */
} GgufReading;

/* One GGUF tensor type (ggml's id, gguf.h) as run reads it. Rows are whole blocks of the type. */
typedef struct {
    uint32_t ggml_type;
    DType dtype; /* the dtype it is held in (q8_0 and q4_0 in groups of 32) */
    GgufReading reading;
    /* GGUF_REPACKED: a row of n values into the dtype's row layout (values and scales, as a
     * normllama file holds them, FORMAT.md); NULL otherwise */
    void (*repack)(const uint8_t *row, int n, void *values, float *scales);
    /* any: a row of n values to float32, as ggml's dequantize_row_* gives them */
    void (*to_f32)(const uint8_t *row, int n, float *out);
} GgufDType;

/* The GGUF type's row of GGUF_DTYPES, or NULL for a type run does not read (a one-line error
 * names it). q8_0 and q4_0 keep their values exactly, and Q4_K and Q6_K (llama.cpp's Q4_K_M mix)
 * are held in their own blocks as q4_k and q6_k; the types that other quantizations of llama.cpp's
 * Q4_0 and Q5_K_M files mix in (Q4_1, Q5_1, Q5_K) are converted to q8_0 (docs/MODELS.md says
 * what that costs); Q5_0 fits q8_0 exactly. */
const GgufDType *gguf_dtype(uint32_t ggml_type);

/* Whether a dtype's values come in groups with a scale each (q8_0 and q4_0). */
int dtype_grouped(DType d);

/* Whether d is a K-quant (q4_k, q6_k): blocks of 256 with their scales inside, whose products
 * read the inputs in int8 blocks of 32 as q4_0's do (matmul.h's quantize_input_blocks). Layers of
 * different K-quants may share a stack, and products of them one matmul call. */
int dtype_kquant(DType d);

/* Whether group_size fits d: one of its group sizes, or 0 for a dtype without groups. */
int dtype_group_size_ok(DType d, uint32_t group_size);

/* Bytes of a row of cols values in a file (q8_0: the int8 values, q4_0: the codes two a byte, cols
 * rounded up to even; the scales apart). */
size_t dtype_row_bytes(DType d, int cols);

/* The value of an IEEE 754 binary16 (fp16) number given by its bits; subnormals, infinities and
 * NaN included. */
float f16_to_f32(uint16_t h);

/* The fp16 bits of x rounded to the nearest fp16 number (ties to even): past 65504 infinity (from
 * 65520 on), below 2^-14 a subnormal or zero, NaN a NaN (the top 10 bits of its payload kept, so
 * that every fp16 number comes back from f16_to_f32 to its own bits). */
uint16_t f32_to_f16(float x);

/* x (n values) as q8_0 in groups of group_size along the row, the last one shorter when n is not
 * a multiple: scale = max |x| / 127 of its group (in float), values round(x / scale) (half to
 * even) in -127..127, a group of zeros scale 0; as nllm_format.py's quantize_q8_0. values: n
 * int8, scales: ceil(n / group_size) floats. */
void quantize_q8_0_row(const float *x, int n, int group_size, int8_t *values, float *scales);

/* The value of a bfloat16 number given by its bits (the upper half of an fp32). Inline: the
 * embedding lookup calls it per weight. */
static inline float bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

#endif
