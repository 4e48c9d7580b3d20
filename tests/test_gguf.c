/* The GGUF reader (gguf.c) on files built here byte by byte from the specification (ggml's
 * docs/gguf.md): a valid file read back whole, then hostile ones, each refused with its one-line
 * message and nothing read outside the file (each file is parsed from a buffer of exactly its
 * size, so that `make sanitize` catches a read past it). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"

/* A file being built. */
typedef struct {
    uint8_t *p;
    size_t n, cap;
} Buf;

static void put(Buf *b, const void *src, size_t n) {
    if (n == 0) return; /* memcpy takes no NULL, even for 0 bytes */
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
        cr_assert_not_null(b->p);
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void u32(Buf *b, uint32_t v) {
    put(b, &v, sizeof v);
}

static void u64(Buf *b, uint64_t v) {
    put(b, &v, sizeof v);
}

static void f32(Buf *b, float v) {
    put(b, &v, sizeof v);
}

static void str(Buf *b, const char *s) {
    u64(b, strlen(s));
    put(b, s, strlen(s));
}

static void header(Buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kvs) {
    put(b, "GGUF", 4);
    u32(b, version);
    u64(b, n_tensors);
    u64(b, n_kvs);
}

/* A key and its value type; the value follows. */
static void key(Buf *b, const char *k, uint32_t type) {
    str(b, k);
    u32(b, type);
}

static void kv_u32(Buf *b, const char *k, uint32_t v) {
    key(b, k, GGUF_UINT32);
    u32(b, v);
}

/* A tensor info of up to 5 dims (more than GGUF's 4, for the hostile case). */
static void info(Buf *b, const char *name, uint32_t n_dims, const uint64_t dims[5], uint32_t type,
                 uint64_t offset) {
    str(b, name);
    u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) u64(b, dims[d]);
    u32(b, type);
    u64(b, offset);
}

static void pad_to(Buf *b, size_t align) {
    while (b->n % align) put(b, "", 1);
}

/* Parses b from a buffer of exactly its size. */
static int parse(const Buf *b, Gguf *g, char *err, size_t errlen) {
    uint8_t *copy = malloc(b->n ? b->n : 1);
    if (b->n) memcpy(copy, b->p, b->n);
    int rc = gguf_parse(g, copy, b->n, err, errlen);
    if (rc == 0) gguf_free(g);
    free(copy);
    return rc;
}

static void expect_error(Buf *b, const char *needle) {
    Gguf g;
    char err[512] = "";
    int rc = parse(b, &g, err, sizeof err);
    free(b->p);
    cr_assert_eq(rc, -1, "parsed, expected an error with \"%s\"", needle);
    cr_assert(strchr(err, '\n') == NULL && err[0] != '\0', "not one line: \"%s\"", err);
    cr_assert(strstr(err, needle), "error \"%s\" lacks \"%s\"", err, needle);
}

/* ----------------------------------------------------------------------------
 * A valid file: key/values of the kinds a llama model has, two tensors (f32, q8_0) */

#define N_KVS 9
static const float embd[3][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}, {-1, -2, -3, 0.5f}};

/* Where each section of the valid file ends, for the truncation test. */
typedef struct {
    size_t header, kvs, infos, data_start;
} Marks;

static Buf valid_file(uint32_t version, Marks *m) {
    Buf b = {0};
    header(&b, version, 2, N_KVS);
    m->header = b.n;
    key(&b, "general.architecture", GGUF_STRING);
    str(&b, "llama");
    kv_u32(&b, "general.alignment", 32);
    kv_u32(&b, "llama.block_count", 5);
    key(&b, "llama.attention.layer_norm_rms_epsilon", GGUF_FLOAT32);
    f32(&b, 1e-5f);
    key(&b, "tokenizer.ggml.tokens", GGUF_ARRAY);
    u32(&b, GGUF_STRING);
    u64(&b, 3);
    str(&b, "<unk>");
    str(&b, "");
    str(&b, "\xe2\x96\x81the");
    key(&b, "tokenizer.ggml.scores", GGUF_ARRAY);
    u32(&b, GGUF_FLOAT32);
    u64(&b, 3);
    f32(&b, 0), f32(&b, -1.5f), f32(&b, 2);
    key(&b, "tokenizer.ggml.token_type", GGUF_ARRAY);
    u32(&b, GGUF_INT32);
    u64(&b, 3);
    u32(&b, 2), u32(&b, 3), u32(&b, 1);
    key(&b, "tokenizer.ggml.add_bos_token", GGUF_BOOL);
    put(&b, "\x01", 1);
    key(&b, "test.negative", GGUF_INT32);
    u32(&b, (uint32_t)-7);
    m->kvs = b.n;
    info(&b, "token_embd.weight", 2, (uint64_t[5]){4, 3}, GGUF_TENSOR_F32, 0);
    info(&b, "blk.0.attn_q.weight", 2, (uint64_t[5]){32, 2}, GGUF_TENSOR_Q8_0, 64);
    m->infos = b.n;
    pad_to(&b, 32);
    m->data_start = b.n;
    put(&b, embd, sizeof embd); /* 48 bytes, padded to 64 */
    pad_to(&b, 32);
    for (int i = 0; i < 2 * 34; i++) put(&b, &(uint8_t){(uint8_t)i}, 1);
    return b;
}

Test(gguf, valid_file_reads_back_whole_in_versions_2_and_3) {
    for (uint32_t version = 2; version <= 3; version++) {
        Marks m;
        Buf b = valid_file(version, &m);
        Gguf g;
        char err[512];
        cr_assert_eq(gguf_parse(&g, b.p, b.n, err, sizeof err), 0, "%s", err);
        cr_assert_eq(g.version, version);
        cr_assert_eq(g.n_kvs, N_KVS);
        cr_assert_eq(g.alignment, 32);
        cr_assert_eq(g.data_start, m.data_start);

        uint64_t u;
        float f;
        GgufString s;
        cr_assert_eq(gguf_get_uint(&g, "llama.block_count", &u, err, sizeof err), 0);
        cr_assert_eq(u, 5);
        cr_assert_eq(gguf_get_float(&g, "llama.attention.layer_norm_rms_epsilon", &f, err, 512), 0);
        cr_assert_eq(f, 1e-5f);
        cr_assert_eq(gguf_get_string(&g, "general.architecture", &s, err, sizeof err), 0);
        cr_assert(s.len == 5 && memcmp(s.s, "llama", 5) == 0);

        const GgufKV *kv;
        GgufString tokens[3];
        cr_assert_eq(gguf_get_array(&g, "tokenizer.ggml.tokens", GGUF_STRING, &kv, err, 512), 0);
        cr_assert_eq(kv->n, 3);
        gguf_array_strings(kv, tokens);
        cr_assert(tokens[0].len == 5 && memcmp(tokens[0].s, "<unk>", 5) == 0);
        cr_assert_eq(tokens[1].len, 0);
        cr_assert(tokens[2].len == 6 && memcmp(tokens[2].s, "\xe2\x96\x81the", 6) == 0);
        cr_assert_eq(gguf_get_array(&g, "tokenizer.ggml.scores", GGUF_FLOAT32, &kv, err, 512), 0);
        cr_assert_eq(gguf_array_float(kv, 1), -1.5f);
        cr_assert_eq(gguf_get_array(&g, "tokenizer.ggml.token_type", GGUF_INT32, &kv, err, 512), 0);
        cr_assert_eq(gguf_array_int32(kv, 0), 2);

        cr_assert_eq(g.n_tensors, 2);
        const GgufTensor *t = gguf_find_tensor(&g, "token_embd.weight");
        cr_assert_not_null(t);
        cr_assert(t->n_dims == 2 && t->dims[0] == 4 && t->dims[1] == 3 && t->dims[2] == 1);
        cr_assert_eq(t->bytes, sizeof embd);
        cr_assert_eq(t->data, b.p + m.data_start);
        float x;
        memcpy(&x, t->data + (2 * 4 + 3) * sizeof(float), sizeof x);
        cr_assert_eq(x, 0.5f); /* row 2, column 3 */
        t = gguf_find_tensor(&g, "blk.0.attn_q.weight");
        cr_assert(t->type == GGUF_TENSOR_Q8_0 && t->bytes == 2 * 34 && t->offset == 64);
        cr_assert_eq(t->data[67], 67);
        cr_assert_null(gguf_find_tensor(&g, "output.weight"));
        gguf_free(&g);
        free(b.p);
    }
}

/* One typed lookup of key, as `kind` says; its return code, err its message. */
typedef enum { AS_UINT, AS_FLOAT, AS_STRING, AS_INT32_ARRAY, AS_STRING_ARRAY } Lookup;

static int lookup(const Gguf *g, Lookup kind, const char *key, char *err, size_t errlen) {
    uint64_t u;
    float f;
    GgufString s;
    const GgufKV *kv;
    switch (kind) {
    case AS_UINT:
        return gguf_get_uint(g, key, &u, err, errlen);
    case AS_FLOAT:
        return gguf_get_float(g, key, &f, err, errlen);
    case AS_STRING:
        return gguf_get_string(g, key, &s, err, errlen);
    case AS_INT32_ARRAY:
        return gguf_get_array(g, key, GGUF_INT32, &kv, err, errlen);
    default:
        return gguf_get_array(g, key, GGUF_STRING, &kv, err, errlen);
    }
}

Test(gguf, typed_lookups_name_the_key_and_the_problem) {
    const struct {
        Lookup kind;
        const char *key, *message;
    } cases[] = {
        {AS_UINT, "general.architecture", "general.architecture is a string, not an integer"},
        {AS_UINT, "llama.context_length", "key llama.context_length is missing"},
        {AS_UINT, "test.negative", "test.negative is -7, negative"},
        {AS_FLOAT, "llama.block_count", "llama.block_count is a uint32, not a float"},
        {AS_STRING, "tokenizer.ggml.tokens", "tokenizer.ggml.tokens is an array, not a string"},
        {AS_INT32_ARRAY, "tokenizer.ggml.scores",
         "tokenizer.ggml.scores is an array of float32, not of int32"},
        {AS_STRING_ARRAY, "llama.block_count",
         "llama.block_count is a uint32, not an array of string"},
    };
    Marks m;
    Buf b = valid_file(3, &m);
    Gguf g;
    char err[512];
    cr_assert_eq(gguf_parse(&g, b.p, b.n, err, sizeof err), 0, "%s", err);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert_eq(lookup(&g, cases[i].kind, cases[i].key, err, sizeof err), -1);
        cr_assert_str_eq(err, cases[i].message);
    }
    gguf_free(&g);
    free(b.p);
}

/* ----------------------------------------------------------------------------
 * Hostile files */

/* Every prefix of the valid file is refused, naming the section it ends in. */
Test(gguf_hostile, truncated_inside_every_section) {
    Marks m;
    Buf b = valid_file(3, &m);
    for (size_t n = 0; n < b.n; n++) {
        Buf cut = {0};
        put(&cut, b.p, n);
        const char *needle = n < 4          ? "shorter than its 4-byte magic"
                             : n < m.header ? "file ends inside the header"
                             : n < m.kvs    ? "key/value"
                             : n < m.infos  ? "tensor"
                                            : "runs past the end of the file";
        expect_error(&cut, needle);
    }
    free(b.p);
}

Test(gguf_hostile, header) {
    Buf b = {0};
    put(&b, "GGML\x03\0\0\0", 8);
    expect_error(&b, "not a GGUF file: it starts with \"GGML\", not \"GGUF\"");
    b = (Buf){0};
    header(&b, 1, 0, 0);
    expect_error(&b, "GGUF version 1 is not supported (versions 2 and 3 are)");
    b = (Buf){0};
    header(&b, 0x03000000, 0, 0);
    expect_error(&b, "a big-endian GGUF file (version 3 byte-swapped)");
    b = (Buf){0};
    header(&b, 3, 0, 1ull << 40);
    expect_error(&b, "key/value count 1099511627776 cannot fit in the 0 bytes after the header");
    b = (Buf){0};
    header(&b, 3, 1ull << 40, 0);
    expect_error(&b, "tensor count 1099511627776 cannot fit in the 0 bytes after the key/values");
}

Test(gguf_hostile, lengths_and_counts_past_the_end) {
    Buf b = {0};
    header(&b, 3, 0, 1);
    u64(&b, 1ull << 63); /* a key's length */
    put(&b, "general.name", 12);
    expect_error(&b, "key/value 1 of 1: key length 9223372036854775808 runs past the end of the "
                     "file");
    b = (Buf){0};
    header(&b, 3, 0, 1);
    key(&b, "general.name", GGUF_STRING);
    u64(&b, 1ull << 63);
    put(&b, "stories", 7);
    expect_error(&b, "key/value general.name: its string value runs past the end of the file");
    b = (Buf){0};
    header(&b, 3, 0, 1);
    key(&b, "tokenizer.ggml.scores", GGUF_ARRAY);
    u32(&b, GGUF_FLOAT32);
    u64(&b, 1ull << 40);
    f32(&b, 1), f32(&b, 2);
    expect_error(&b, "key/value tokenizer.ggml.scores: its array of 1099511627776 float32 values "
                     "runs past the end of the file");
    b = (Buf){0};
    header(&b, 3, 0, 1);
    key(&b, "tokenizer.ggml.tokens", GGUF_ARRAY);
    u32(&b, GGUF_STRING);
    u64(&b, 1ull << 40);
    str(&b, "a"), str(&b, "b");
    expect_error(&b, "its array of 1099511627776 string values runs past the end");
    b = (Buf){0};
    header(&b, 3, 0, 1);
    key(&b, "tokenizer.ggml.tokens", GGUF_ARRAY); /* 3 strings, the third's length too long */
    u32(&b, GGUF_STRING);
    u64(&b, 3);
    str(&b, "a"), str(&b, "b"), u64(&b, 100), put(&b, "c", 1);
    expect_error(&b, "its array of 3 string values runs past the end");
    b = (Buf){0};
    header(&b, 3, 1, 0);
    u64(&b, UINT64_MAX); /* a tensor name's length */
    u32(&b, 0), u32(&b, 0), u64(&b, 0);
    expect_error(&b, "tensor info 1: name length 18446744073709551615 runs past the end");
}

Test(gguf_hostile, value_types) {
    Buf b = {0};
    header(&b, 3, 0, 1);
    key(&b, "general.name", 13);
    u64(&b, 0);
    expect_error(&b, "key/value general.name has unknown value type 13");
    b = (Buf){0};
    header(&b, 3, 0, 1);
    key(&b, "x.list", GGUF_ARRAY);
    u32(&b, 0xFFFFFFFF);
    u64(&b, 0);
    expect_error(&b, "key/value x.list is an array of unknown value type 4294967295");
    b = (Buf){0};
    header(&b, 3, 0, 1);
    key(&b, "x.nested", GGUF_ARRAY);
    u32(&b, GGUF_ARRAY);
    u64(&b, 1);
    u32(&b, GGUF_UINT8), u64(&b, 1), put(&b, "\x05", 1);
    expect_error(&b, "key/value x.nested is an array of arrays, which is not supported");
    b = (Buf){0};
    header(&b, 3, 0, 1);
    key(&b, "tokenizer.ggml.add_bos_token", GGUF_BOOL);
    put(&b, "\x02", 1);
    expect_error(&b, "key/value tokenizer.ggml.add_bos_token holds a bool that is neither 0 nor 1");
}

Test(gguf_hostile, alignment) {
    Buf b = {0};
    header(&b, 3, 0, 1);
    kv_u32(&b, "general.alignment", 48);
    expect_error(&b, "general.alignment 48 is not a power of two");
    b = (Buf){0};
    header(&b, 3, 0, 1);
    kv_u32(&b, "general.alignment", 0);
    expect_error(&b, "general.alignment 0 is not a power of two");
    b = (Buf){0};
    header(&b, 3, 0, 1);
    key(&b, "general.alignment", GGUF_STRING);
    str(&b, "32");
    expect_error(&b, "general.alignment is a string, not a uint32");
}

/* A file of one key/value and the tensor infos given, then `data` bytes of data section. */
static Buf tensors_file(int n, const char *const names[], const uint64_t dims[][5],
                        const uint32_t n_dims_types_offsets[][3], size_t data) {
    Buf b = {0};
    header(&b, 3, (uint64_t)n, 1);
    kv_u32(&b, "general.alignment", 32);
    for (int i = 0; i < n; i++)
        info(&b, names[i], n_dims_types_offsets[i][0], dims[i], n_dims_types_offsets[i][1],
             n_dims_types_offsets[i][2]);
    pad_to(&b, 32);
    for (size_t i = 0; i < data; i++) put(&b, "", 1);
    return b;
}

/* One tensor of n_dims dims, type and offset, over a data section of `data` bytes. */
static void expect_tensor_error(const uint64_t dims[5], uint32_t n_dims, uint32_t type,
                                uint64_t offset, size_t data, const char *needle) {
    Buf b = tensors_file(1, (const char *[]){"blk.0.attn_q.weight"}, (const uint64_t(*)[5])dims,
                         (const uint32_t[][3]){{n_dims, type, (uint32_t)offset}}, data);
    expect_error(&b, needle);
}

Test(gguf_hostile, tensor_shapes_and_types) {
    expect_tensor_error((uint64_t[5]){2, 2, 2, 2, 2}, 5, GGUF_TENSOR_F32, 0, 128,
                        "tensor blk.0.attn_q.weight has 5 dims, more than 4");
    expect_tensor_error((uint64_t[5]){1ull << 32, 1ull << 31}, 2, GGUF_TENSOR_F32, 0, 0,
                        "dims 4294967296 x 2147483648 x 1 x 1 overflow 63 bits");
    /* 2^62 values fit ggml's int64 count, 2^64 bytes of f32 do not */
    expect_tensor_error((uint64_t[5]){1ull << 31, 1ull << 31}, 2, GGUF_TENSOR_F32, 0, 0,
                        "its size in bytes overflows 64 bits");
    expect_tensor_error((uint64_t[5]){64, 64}, 2, GGUF_TENSOR_TYPES, 0, 0,
                        "tensor blk.0.attn_q.weight has unknown tensor type 43");
    expect_tensor_error((uint64_t[5]){64, 64}, 2, 4, 0, 0,
                        "has type 4 (q4_2), which ggml has removed");
    expect_tensor_error((uint64_t[5]){33, 2}, 2, GGUF_TENSOR_Q8_0, 0, 128,
                        "its rows of 33 values are not whole blocks of 32 (q8_0)");
    expect_tensor_error((uint64_t[5]){256, 1}, 2, GGUF_TENSOR_Q4_K, 0, 128,
                        "(offset 0, 144 bytes) runs past the end of the file: the data section "
                        "holds 128 bytes");
    expect_tensor_error((uint64_t[5]){8}, 1, GGUF_TENSOR_F32, 16, 64,
                        "its offset 16 is not a multiple of the alignment 32");
    expect_tensor_error((uint64_t[5]){8}, 1, GGUF_TENSOR_F32, 64, 64,
                        "(offset 64, 32 bytes) runs past the end of the file");
}

Test(gguf_hostile, names) {
    const uint64_t dims[2][5] = {{8}, {8}};
    Buf b = tensors_file(2, (const char *[]){"output_norm.weight", "output_norm.weight"}, dims,
                         (const uint32_t[][3]){{1, 0, 0}, {1, 0, 32}}, 64);
    expect_error(&b, "duplicate tensor name output_norm.weight");
    char long_name[65];
    memset(long_name, 'a', 64), long_name[64] = '\0';
    b = tensors_file(1, (const char *[]){long_name}, dims, (const uint32_t[][3]){{1, 0, 0}}, 32);
    expect_error(&b, "its name of 64 bytes is longer than 63");
    b = (Buf){0};
    header(&b, 3, 0, 3);
    kv_u32(&b, "llama.block_count", 5);
    kv_u32(&b, "general.alignment", 32);
    kv_u32(&b, "llama.block_count", 6);
    expect_error(&b, "duplicate key llama.block_count");
    /* a name's newline and escape byte are shown, keeping the message one line */
    b = (Buf){0};
    header(&b, 3, 0, 2);
    kv_u32(&b, "a\nb\x1b[31m", 1);
    kv_u32(&b, "a\nb\x1b[31m", 2);
    expect_error(&b, "duplicate key a\\x0Ab\\x1B[31m");
}

Test(gguf_hostile, overlapping_tensors) {
    /* a: bytes 0..63 (16 floats), b: 32..63 inside it; the empty c at 32 overlaps nothing */
    const uint64_t dims[3][5] = {{16}, {8}, {0}};
    Buf b = tensors_file(3, (const char *[]){"a", "b", "c"}, dims,
                         (const uint32_t[][3]){{1, 0, 0}, {1, 0, 32}, {1, 0, 32}}, 64);
    expect_error(&b, "tensors a and b overlap in the file");
    const uint64_t reordered[3][5] = {{8}, {0}, {16}};
    b = tensors_file(3, (const char *[]){"b", "c", "a"}, reordered,
                     (const uint32_t[][3]){{1, 0, 32}, {1, 0, 0}, {1, 0, 0}}, 64);
    expect_error(&b, "tensors a and b overlap in the file");
    /* back to back out of order (c at 0, b at 64), an empty a at the end: no overlap */
    b = tensors_file(3, (const char *[]){"b", "a", "c"}, reordered,
                     (const uint32_t[][3]){{1, 0, 64}, {1, 0, 96}, {1, 0, 0}}, 96);
    Gguf g;
    char err[512];
    cr_assert_eq(parse(&b, &g, err, sizeof err), 0, "%s", err);
    free(b.p);
}
