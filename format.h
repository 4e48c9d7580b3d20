/* The file layouts model_load reads (model.h's list; docs/FORMAT.md): for each, its header, the
 * checks on it, and the table of tensors it implies, in file order, with their sizes and where each
 * goes in the Model. Reading the tensors out of the file and packing them is load.c's; this header
 * is private to the two.
 */
#ifndef FORMAT_H
#define FORMAT_H

#include <stddef.h>
#include <stdint.h>

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
} TensorSpec;

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
    int in_map; /* 1: values and scales point into the file map; 0: into a dequantized copy */
    int pieces; /* 1: the version 2 q8_0 case, values and scales alternating layer by layer */
} Source;

typedef struct {
    TensorSpec tensors[32]; /* at most 24: normllama q8_0 or q4_0 with norm biases */
    int n;
    Source sources[12]; /* at most 9: every matrix, wcls included */
    int n_sources;
    uint64_t start;      /* file offset of the first tensor */
    uint64_t align;      /* every tensor starts at a multiple of this (1: packed) */
    uint64_t group_size; /* of the file's q8_0, q4_0 or llama2.c version 2 groups; 0 otherwise */
} Layout;

/* Reads the header at map (the whole file, size bytes) into m->config and m->format, the tensors'
 * layout into l and the matrices' shapes and dtypes (matrix_init) into m->weights, and checks the
 * header (model_load's list of refusals) and the layout against the file size; reads no tensor.
 * Returns 0, or -1 with the problem, without the path, in what[whatlen]. */
int read_layout(Model *m, const char *map, size_t size, Layout *l, char *what, size_t whatlen);

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
