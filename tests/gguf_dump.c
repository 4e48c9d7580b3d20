/* Prints what gguf.c reads from a GGUF file, for tests/test_gguf_writer.py to compare with
 * llama.cpp's own reader (gguf-py's GGUFReader) on real files: ours, gguf-py's and those of
 * llama.cpp's quantizer.
 *
 * usage: gguf_dump FILE. One line each (strings as hex, floats with 9 significant digits):
 *   version V / alignment A / data_start D
 *   kv KEY TYPE VALUE   or   kv KEY array ELEM_TYPE N VALUE...
 *   tensor NAME TYPE_ID N_DIMS DIM... FILE_OFFSET BYTES
 * A file gguf.c refuses: its message on stderr, exit 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "helpers.h"

static void print_hex(const char *s, uint64_t len) {
    for (uint64_t i = 0; i < len; i++) printf("%02x", (unsigned char)s[i]);
    if (len == 0) printf("-");
}

/* One value of a scalar type at p (unaligned); strings are printed by the caller. */
static void print_scalar(GgufValueType type, const uint8_t *p) {
    union {
        uint8_t u8;
        int8_t i8;
        uint16_t u16;
        int16_t i16;
        uint32_t u32;
        int32_t i32;
        float f32;
        uint64_t u64;
        int64_t i64;
        double f64;
    } v;
    memcpy(&v, p, gguf_value_size(type));
    switch (type) {
    case GGUF_UINT8:
    case GGUF_BOOL:
        printf("%u", v.u8);
        break;
    case GGUF_INT8:
        printf("%d", v.i8);
        break;
    case GGUF_UINT16:
        printf("%u", v.u16);
        break;
    case GGUF_INT16:
        printf("%d", v.i16);
        break;
    case GGUF_UINT32:
        printf("%u", v.u32);
        break;
    case GGUF_INT32:
        printf("%d", v.i32);
        break;
    case GGUF_FLOAT32:
        printf("%.9g", v.f32);
        break;
    case GGUF_UINT64:
        printf("%llu", (unsigned long long)v.u64);
        break;
    case GGUF_INT64:
        printf("%lld", (long long)v.i64);
        break;
    default:
        printf("%.17g", v.f64);
    }
}

static void print_kv(const GgufKV *kv) {
    printf("kv ");
    print_hex(kv->key.s, kv->key.len);
    printf(" %s", gguf_value_type_name(kv->type));
    if (kv->type == GGUF_ARRAY)
        printf(" %s %llu", gguf_value_type_name(kv->elem_type), (unsigned long long)kv->n);
    if (kv->elem_type == GGUF_STRING) {
        GgufString *s = malloc((kv->n ? kv->n : 1) * sizeof *s);
        gguf_array_strings(kv, s);
        for (uint64_t i = 0; i < kv->n; i++) putchar(' '), print_hex(s[i].s, s[i].len);
        free(s);
    } else {
        for (uint64_t i = 0; i < kv->n; i++) {
            putchar(' ');
            print_scalar(kv->elem_type, kv->value + i * gguf_value_size(kv->elem_type));
        }
    }
    putchar('\n');
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: gguf_dump FILE\n");
        return 2;
    }
    size_t size;
    uint8_t *data = (uint8_t *)read_file(argv[1], &size);
    if (!data) {
        fprintf(stderr, "gguf_dump: cannot read %s\n", argv[1]);
        return 1;
    }
    Gguf g;
    char err[512];
    if (gguf_parse(&g, data, size, err, sizeof err) != 0) {
        fprintf(stderr, "gguf_dump: %s: %s\n", argv[1], err);
        return 1;
    }
    printf("version %u\nalignment %llu\ndata_start %llu\n", g.version,
           (unsigned long long)g.alignment, (unsigned long long)g.data_start);
    for (uint64_t i = 0; i < g.n_kvs; i++) print_kv(&g.kvs[i]);
    for (uint64_t i = 0; i < g.n_tensors; i++) {
        const GgufTensor *t = &g.tensors[i];
        printf("tensor ");
        print_hex(t->name.s, t->name.len);
        printf(" %u %u", t->type, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++) printf(" %llu", (unsigned long long)t->dims[d]);
        printf(" %llu %llu\n", (unsigned long long)(t->data - data), (unsigned long long)t->bytes);
    }
    gguf_free(&g);
    free(data);
    return 0;
}
