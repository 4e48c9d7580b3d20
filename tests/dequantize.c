/* Our side of the block decoders' oracle test (tests/test_gguf_run.py): decodes a file of whole
 * blocks of one GGUF type with dtype.h's GGUF_DTYPES row (gguf_blocks.c) as llama_logits
 * --dequantize does with ggml's, so that the two outputs can be compared bit for bit.
 *
 *   dequantize TYPE IN OUT      TYPE a ggml type id run reads; OUT: float32 values
 *   dequantize TYPE IN OUT --as-dtype   the values the dtype holding TYPE gets (repacked or
 *       converted, dtype.h's GgufReading), read back as float32: the loader's rows, one row; a
 *       type read in place packed as one row into a panel (panel.h) and read back by
 *       matrix_value, the plain path's reader (kquant.c's for Q4_K and Q6_K)
 *
 * Errors: one line on stderr, exit 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "gguf.h"
#include "panel.h"

static void die(const char *what, const char *name) {
    fprintf(stderr, "dequantize: error: %s %s\n", what, name);
    exit(1);
}

/* Row values (n) in dtype d's row layout (values, scales) as float32. */
static void dtype_values(DType d, const void *values, const float *scales, int n, float *out) {
    for (int j = 0; j < n; j++) {
        if (d == DTYPE_Q8_0)
            out[j] = ((const int8_t *)values)[j] * scales[j / 32];
        else if (d == DTYPE_Q4_0)
            out[j] = ((((const uint8_t *)values)[j / 2] >> (j % 2 * 4) & 0xf) - 8) * scales[j / 32];
        else
            die("no dtype values for", DTYPES[d].name);
    }
}

int main(int argc, char **argv) {
    if (argc != 4 && !(argc == 5 && strcmp(argv[4], "--as-dtype") == 0))
        die("usage: dequantize TYPE IN OUT [--as-dtype]", "");
    const GgufDType *t = gguf_dtype((uint32_t)atoi(argv[1]));
    if (!t) die("run does not read type", argv[1]);
    FILE *f = fopen(argv[2], "rb");
    if (!f) die("cannot open", argv[2]);
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    rewind(f);
    const GgufTensorType *type = &gguf_tensor_types[t->ggml_type];
    if (bytes <= 0 || bytes % type->bytes != 0) die("not whole blocks:", argv[2]);
    int n = (int)(bytes / type->bytes * type->values);
    unsigned char *blocks = malloc((size_t)bytes);
    float *out = malloc((size_t)n * sizeof(float)), *scales = malloc((size_t)n * sizeof(float));
    int8_t *values = malloc((size_t)n);
    if (!blocks || !out || !scales || !values ||
        fread(blocks, 1, (size_t)bytes, f) != (size_t)bytes)
        die("cannot read", argv[2]);
    fclose(f);
    if (argc == 4) {
        t->to_f32(blocks, n, out);
    } else if (t->reading == GGUF_REPACKED) {
        t->repack(blocks, n, values, scales);
        dtype_values(t->dtype, values, scales, n, out);
    } else if (t->reading == GGUF_CONVERTED) {
        t->to_f32(blocks, n, out);
        quantize_q8_0_row(out, n, 32, values, scales);
        dtype_values(DTYPE_Q8_0, values, scales, n, out);
    } else { /* in place */
        Matrix m;
        matrix_init(&m, t->dtype, 1, n, 0);
        char *panel = aligned_alloc(64, (m.panel_bytes + 63) / 64 * 64);
        if (!panel) die("out of memory for", argv[2]);
        matrix_pack_panel(&m, panel, blocks, NULL, 0);
        m.data = panel;
        for (int j = 0; j < n; j++) out[j] = matrix_value(&m, 0, 0, j);
        free(panel);
    }
    f = fopen(argv[3], "wb");
    if (!f || fwrite(out, sizeof(float), (size_t)n, f) != (size_t)n || fclose(f) != 0)
        die("cannot write", argv[3]);
    free(blocks);
    free(out);
    free(scales);
    free(values);
    return 0;
}
