/* GGUF reader: the file format of llama.cpp and ggml (ggml's docs/gguf.md; the layout summary
 * opens ggml/include/gguf.h in llama.cpp's source), versions 2 and 3, little-endian. It parses
 * a file already in memory (a map of it) into its key/values and tensor infos, checks every
 * count, length, type and offset against the file, and answers typed lookups. It reads no
 * tensor's values and knows no model: which keys and tensors a llama model needs is the loader's.
 *
 * The file (every number little-endian; a string is a uint64 length, then that many bytes, no
 * NUL):
 *   "GGUF", uint32 version, uint64 tensor count, uint64 key/value count
 *   key/values: string key, uint32 value type (GgufValueType), the value; an ARRAY is a uint32
 *       element type, a uint64 element count, then the elements back to back
 *   tensor infos: string name, uint32 n_dims (at most 4), uint64 dims[n_dims] (ne[0], the
 *       fastest-moving, first: a PyTorch (rows, cols) matrix is dims {cols, rows}), uint32
 *       tensor type (ggml's type id, gguf_tensor_types), uint64 offset into the data section
 *   zero padding to the alignment (general.alignment, a uint32; 32 when absent), then the data
 *       section: every tensor at its offset, a multiple of the alignment
 *
 * Trusting nothing: a count or length that runs past the end of the file, an unknown value or
 * tensor type, a bool other than 0 or 1, an array of arrays (llama.cpp refuses them too), more
 * than 4 dims, dims whose product overflows, a row that is not whole blocks of its type, a tensor
 * whose offset is not aligned or whose data runs past the file or overlaps another's, a name
 * longer than 63 bytes (ggml's limit), a duplicate key or tensor name, an alignment that is not a
 * power of two: each fails gguf_parse with a one-line message (names shown with control and
 * non-ASCII bytes as \xNN, cut at 64 bytes). Nothing is read outside [data, data + size).
 */
#ifndef GGUF_H
#define GGUF_H

#include <stddef.h>
#include <stdint.h>

/* The value types of key/values (ggml's gguf_type). */
typedef enum {
    GGUF_UINT8,
    GGUF_INT8,
    GGUF_UINT16,
    GGUF_INT16,
    GGUF_UINT32,
    GGUF_INT32,
    GGUF_FLOAT32,
    GGUF_BOOL, /* one byte, 0 or 1 */
    GGUF_STRING,
    GGUF_ARRAY,
    GGUF_UINT64,
    GGUF_INT64,
    GGUF_FLOAT64,
    GGUF_VALUE_TYPES, /* how many */
} GgufValueType;

/* The tensor types (ggml.h's enum ggml_type), the ids the file holds, and how each stores its
 * values: a row of ne[0] values is ne[0] / values blocks of `bytes` bytes. The types llama.cpp
 * writes for the files people have; d, m and dmin are IEEE halves (fp16), qs the codes, and a
 * block's value j is x[j] (ggml-common.h's structs, ggml-quants.c's dequantize_row_*):
 *
 *   id  type  values bytes  a block
 *    0  F32      1     4    float
 *    1  F16      1     2    IEEE half
 *   30  BF16     1     2    the upper 16 bits of a float
 *    8  Q8_0    32    34    d, int8 qs[32]:        x[j] = d * qs[j]
 *    2  Q4_0    32    18    d, qs[16]: byte j holds x[j] in its low nibble and x[j + 16] in its
 *                           high one (run's own q4_0 pairs x[2j], x[2j + 1]); x = d * (q - 8)
 *    3  Q4_1    32    20    d, m, qs[16] as Q4_0:  x = d * q + m
 *    6  Q5_0    32    22    d, uint32 qh (bit j: the 5th bit of x[j]), qs[16] as Q4_0 for the
 *                           low 4 bits:            x = d * (q - 16)
 *    7  Q5_1    32    24    d, m, qh, qs[16] as Q5_0: x = d * q + m
 *   12  Q4_K   256   144    d, dmin, scales[12] (8 6-bit scales sc and 8 6-bit mins mn, one a
 *                           sub-block of 32), qs[128]: 64 values at a time, the first 32 in the
 *                           low nibbles of 32 bytes, the next 32 in their high nibbles;
 *                           x = d * sc * q - dmin * mn
 *   13  Q5_K   256   176    Q4_K's fields plus qh[32] (the 5th bits) before qs[128]
 *   14  Q6_K   256   210    ql[128] (low 4 bits), qh[64] (high 2 bits), int8 scales[16] (one a
 *                           sub-block of 16), d:     x = d * sc * (q - 32)
 *
 * llama.cpp's quantizer (src/llama-quant.cpp) mixes types: Q4_0 files hold output.weight (and a
 * tied embedding) as Q6_K; "Q4_K_M" is Q4_K with Q6_K for output.weight and for attn_v and
 * ffn_down in the first and last eighth of the layers and every third between, "Q5_K_M" Q5_K
 * with Q6_K likewise; where a row is not whole blocks of 256 the K types fall back to 32-value
 * ones (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0), and to F16 where not of 32 either. Norm
 * weights stay F32. */
enum {
    GGUF_TENSOR_F32 = 0,
    GGUF_TENSOR_F16 = 1,
    GGUF_TENSOR_Q4_0 = 2,
    GGUF_TENSOR_Q4_1 = 3,
    GGUF_TENSOR_Q5_0 = 6,
    GGUF_TENSOR_Q5_1 = 7,
    GGUF_TENSOR_Q8_0 = 8,
    GGUF_TENSOR_Q4_K = 12,
    GGUF_TENSOR_Q5_K = 13,
    GGUF_TENSOR_Q6_K = 14,
    GGUF_TENSOR_BF16 = 30,
    GGUF_TENSOR_TYPES = 43, /* ids 0..42: ggml's of release 0.4.0 */
};

/* Every id below GGUF_TENSOR_TYPES: its name and block (ggml's type traits, printed by the
 * prebuilt libggml of tests/package.json); values 0 for the ids ggml has removed (4, 5: Q4_2,
 * Q4_3; 31-33 and 36-38: repacked layouts ggml no longer reads from files). */
typedef struct {
    const char *name; /* ggml's: "q4_K" */
    uint32_t values;  /* values a block; 0: removed */
    uint32_t bytes;   /* bytes a block */
} GgufTensorType;
extern const GgufTensorType gguf_tensor_types[GGUF_TENSOR_TYPES];

#define GGUF_MAX_DIMS          4
#define GGUF_MAX_NAME          63 /* bytes of a tensor name: ggml's GGML_MAX_NAME 64 with the NUL */
#define GGUF_DEFAULT_ALIGNMENT 32

/* A string of the file, in place: not NUL-terminated. */
typedef struct {
    const char *s;
    uint64_t len;
} GgufString;

typedef struct {
    GgufString key;
    GgufValueType type;
    GgufValueType elem_type; /* ARRAY: its elements' type (never ARRAY) */
    uint64_t n;              /* ARRAY: its element count; 1 for a single value */
    const uint8_t *value;    /* the value's bytes (an ARRAY's first element's), unaligned */
} GgufKV;

typedef struct {
    GgufString name;
    uint32_t n_dims;
    uint64_t dims[GGUF_MAX_DIMS]; /* ne[0] first; those past n_dims are 1 */
    uint32_t type;                /* an id of gguf_tensor_types, not removed */
    uint64_t offset;              /* into the data section, a multiple of the alignment */
    uint64_t bytes;               /* its data's size */
    const uint8_t *data;          /* its data in the file: data_start + offset */
} GgufTensor;

typedef struct {
    uint32_t version;    /* 2 or 3 */
    uint64_t alignment;  /* general.alignment, or 32 */
    uint64_t data_start; /* file offset of the data section */
    GgufKV *kvs;         /* in file order */
    uint64_t n_kvs;
    GgufTensor *tensors; /* in file order */
    uint64_t n_tensors;
} Gguf;

/* Parses the GGUF file of `size` bytes at data (kept: g points into it) into g. Returns 0, or -1
 * with the problem on one line in err[errlen] (g then holds nothing to free). */
int gguf_parse(Gguf *g, const uint8_t *data, size_t size, char *err, size_t errlen);
void gguf_free(Gguf *g);

/* The key/value or tensor of that name, or NULL. */
const GgufKV *gguf_find(const Gguf *g, const char *key);
const GgufTensor *gguf_find_tensor(const Gguf *g, const char *name);

/* Typed lookups: 0 with *out set, or -1 with err naming the key and what is wrong: missing, or
 * of another type ("llama.block_count is a string, not an integer").
 *   gguf_get_uint: any integer type whose value is >= 0 (writers use uint32, uint64, int32)
 *   gguf_get_float: FLOAT32, or FLOAT64 narrowed
 *   gguf_get_string: STRING
 *   gguf_get_array: an ARRAY of elem_type elements */
int gguf_get_uint(const Gguf *g, const char *key, uint64_t *out, char *err, size_t errlen);
int gguf_get_float(const Gguf *g, const char *key, float *out, char *err, size_t errlen);
int gguf_get_string(const Gguf *g, const char *key, GgufString *out, char *err, size_t errlen);
int gguf_get_array(const Gguf *g, const char *key, GgufValueType elem_type, const GgufKV **out,
                   char *err, size_t errlen);

/* Element i (< kv->n, not checked) of a FLOAT32 or INT32 array. */
float gguf_array_float(const GgufKV *kv, uint64_t i);
int32_t gguf_array_int32(const GgufKV *kv, uint64_t i);

/* The strings of a STRING array, all kv->n of them, into out[kv->n]; or of a STRING value, its
 * one string into out[0] (its n is 1). */
void gguf_array_strings(const GgufKV *kv, GgufString *out);

/* Writes printf's fmt into err[errlen] and returns -1: the one-line errors of the reader and of
 * the code that reads a GGUF's keys (bpe_load.c). */
int gguf_fail(char *err, size_t errlen, const char *fmt, ...);

/* A string of the file (a name, a token) for a message: at most its first 64 bytes, control and
 * non-ASCII bytes as \xNN (a newline must not break the message's one line), "..." when cut. */
typedef struct {
    char s[64 * 4 + 4];
} GgufShown;
GgufShown gguf_shown(GgufString s);

/* The name of a value type ("uint32", "array"), for messages; "unknown" past the last. */
const char *gguf_value_type_name(uint32_t type);

/* Bytes of one value of a scalar type (type < GGUF_VALUE_TYPES); 0 for STRING and ARRAY. */
size_t gguf_value_size(GgufValueType type);

#endif
