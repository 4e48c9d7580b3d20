/* The file layouts model_load reads (model.h's list; docs/FORMAT.md): for each, its header, the
 * checks on it, and the table of tensors it implies, in file order, with their sizes and where each
 * goes in the Model. Reading the tensors out of the file and packing them is load.c's; this header
 * is private to the two.
 */
#ifndef FORMAT_H
#define FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "gguf.h"
#include "model.h"

/* One tensor of a file layout, in file order, and how it is stored (TensorKind: dtype.h). */
typedef struct {
    const char *name;
    const float **vec; /* where a vector or scales pointer goes, or NULL */
    const void **mat;  /* where a matrix's values pointer goes, or NULL */
    uint64_t numel;
    TensorKind kind;
    /* TENSOR_AK42_*: stored as `parts` equal pieces (one per layer), each its int8 values
     * followed by one fp32 scale per group_size values of that piece (the scales not
     * float-aligned in general) */
    uint64_t parts;
    /* GGUF: the `parts` tensors (one per layer, numel / parts values each) in the map, which
     * layout_place copies in order; NULL: the tensor is at the layout's running offset */
    const uint8_t *const *pieces;
} TensorSpec;

/* A GGUF matrix's layer: its own tensor in the map, of its own type (dtype.h's GgufDType). */
typedef struct {
    const uint8_t *data;
    const GgufDType *type;
} LayerTensor;

/* A matrix row-major, in the map or dequantized (version 2), until model_load packs it into
 * `matrix`: layer l's values (rows, cols) start value_stride bytes after layer l - 1's values, and
 * its scales scale_stride bytes after layer l - 1's scales. The strides are one layer's values
 * and one layer's scales (the layers back to back), except for a version 2 matrix read as q8_0,
 * where both are a whole piece: a layer's values, then its scales. */
typedef struct {
    Matrix *matrix;
    const void *values;  /* layer 0's (rows, cols): float, uint16_t (bf16, f16), int8_t (q8_0) or
                            codes (q4_0) */
    const float *scales; /* q8_0: layer 0's (rows, ceil(cols / group_size)); else NULL */
    uint64_t value_stride, scale_stride;
    int layers;
    int pieces; /* 1: the version 2 q8_0 case, values and scales alternating layer by layer */
    /* GGUF: each layer's tensor (`layers` of them), read into the matrix's dtype as its type says
     * (in place, repacked or converted); values, scales and the strides are unused. NULL for the
     * other layouts. */
    const LayerTensor *layer_tensors;
    /* GGUF stablelm's wq and wk: head_size, their rows within each head in rotate-half order (file
     * row i of a head holds our row 2i, file row head_size / 2 + i our row 2i + 1; model.h's RoPE
     * pairs (2i, 2i + 1)); 0: rows in order */
    int rotate_half;
} Source;

typedef struct {
    TensorSpec tensors[32]; /* at most 27: normllama q8_0 or q4_0, norm biases and scalars */
    int n;
    Source sources[12]; /* at most 9: every matrix, wcls included */
    int n_sources;
    uint64_t start;      /* file offset of the first tensor */
    uint64_t align;      /* every tensor starts at a multiple of this (1: packed) */
    uint64_t group_size; /* of the file's q8_0, q4_0 or llama2.c version 2 groups; 0 otherwise */
    /* 1 (GGUF): every tensor's place is the file's own, checked by gguf_parse, and set by the
     * reader (TensorSpec's pieces, Source's layer_tensors): no running offset, and no size the
     * layout implies */
    int placed;
    /* the vocabulary the file carries: a normllama tokenizer section (vocab_bytes of llama2.c's
     * tokenizer layout at vocab_offset, vocab_flags its normalizer bits, FORMAT.md), or a GGUF's
     * tokenizer.ggml.* keys (has_vocab); none in llama2.c's layouts */
    int has_vocab;
    uint64_t vocab_offset, vocab_bytes;
    uint32_t vocab_flags;
    Gguf *gguf;  /* GGUF: the parsed file, pointing into the map */
    void *owned; /* GGUF: the tables of pieces and layer tensors */
    /* what the reader converts rather than reads exactly, for run's notice: "q4_K, q6_K as q8_0";
     * "" when nothing */
    char converted[128];
} Layout;

/* Reads the header at map (the whole file, size bytes) into m->config and m->format, the tensors'
 * layout into l and the matrices' shapes and dtypes (matrix_init) into m->weights, and checks the
 * header (model_load's list of refusals) and the layout against the file size; reads no tensor.
 * Returns 0, or -1 with the problem, without the path, in what[whatlen]. Either way, layout_free
 * frees what l holds. */
int read_layout(Model *m, const char *map, size_t size, Layout *l, char *what, size_t whatlen);

/* read_layout's reader of GGUF files (format_gguf.c): the keys into m->config, the tensors into
 * l's pieces and sources; l->gguf the parsed file. */
int read_gguf(Model *m, const char *map, size_t size, Layout *l, char *what, size_t whatlen);

void layout_free(Layout *l);

/* The checks every layout's header passes (model_load's list). Returns 0, or -1 with the
 * problem in err. */
int check_config(const Config *c, char *err, size_t errlen);

/* The bound on every size field of a header, so that each tensor size fits in 64 bits. */
#define MAX_SIZE (1 << 20)

/* Bytes a tensor takes in the file (group_size: the layout's). */
uint64_t tensor_bytes(const TensorSpec *t, uint64_t group_size);

/* Bytes a tensor takes in memory of its own once converted: 4 per value of a llama2.c version 2
 * tensor dequantized (TENSOR_AK42_F32); 0 for the tensors read in place from the map. Summed over
 * the layout by layout_owned_bytes. */
uint64_t owned_bytes(const TensorSpec *t);
uint64_t layout_owned_bytes(const Layout *l);

/* Floats of all the norms' weights and biases (TENSOR_NORM), which the model keeps. */
uint64_t layout_norm_floats(const Layout *l);

/* Bytes of a llama2.c version 2 piece of n values: the int8 values, then their scales. */
uint64_t ak42_piece_bytes(uint64_t n, uint64_t group_size);

/* off rounded up to a multiple of align. */
uint64_t align_up(uint64_t off, uint64_t align);

#endif
