/* libFuzzer target for gguf.c, the GGUF reader, and the SentencePiece vocabulary read from it
 * (tokenizer_load_gguf). Built and run by `make fuzz` (clang -fsanitize=fuzzer,address,undefined),
 * seeded with small real GGUF files (tests/gguf_seed.py).
 *
 * Input: a whole GGUF file (libFuzzer's buffer is exactly its size, so that a read past it is
 * caught). A refusal must be one non-empty line. A file that parses must hold what gguf.h
 * promises: every tensor's data inside the file at an aligned offset, of a known type and its
 * size from its dims, found by its name; and every typed lookup and array walk over its key/values
 * must stay inside the file (each string read is checked to be). Its vocabulary then loads or is
 * refused in one line, and a vocabulary that loads encodes and decodes a text.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "tokenizer.h"

static const uint8_t *begin, *end;

static void require_inside(const void *p, uint64_t len) {
    const uint8_t *q = p;
    if (q < begin || q > end || len > (uint64_t)(end - q)) abort();
}

/* Every lookup of the key (as a C string: a key holding a NUL finds another or none). */
static void look_up(const Gguf *g, const GgufKV *kv) {
    char key[256], err[256];
    size_t len = kv->key.len < sizeof key - 1 ? kv->key.len : sizeof key - 1;
    memcpy(key, kv->key.s, len);
    key[len] = '\0';
    uint64_t u;
    float f;
    GgufString s;
    const GgufKV *array;
    gguf_get_uint(g, key, &u, err, sizeof err);
    gguf_get_float(g, key, &f, err, sizeof err);
    if (gguf_get_string(g, key, &s, err, sizeof err) == 0) require_inside(s.s, s.len);
    if (gguf_get_array(g, key, GGUF_FLOAT32, &array, err, sizeof err) == 0)
        for (uint64_t i = 0; i < array->n; i++) (void)gguf_array_float(array, i);
    if (gguf_get_array(g, key, GGUF_INT32, &array, err, sizeof err) == 0)
        for (uint64_t i = 0; i < array->n; i++) (void)gguf_array_int32(array, i);
}

static void walk_strings(const GgufKV *kv) {
    if (kv->type != GGUF_ARRAY || kv->elem_type != GGUF_STRING) return;
    GgufString *strings = malloc((kv->n ? kv->n : 1) * sizeof *strings);
    gguf_array_strings(kv, strings);
    for (uint64_t i = 0; i < kv->n; i++) require_inside(strings[i].s, strings[i].len);
    free(strings);
}

/* Names are unique, so looking a tensor's name up finds it (unless the name holds a NUL). */
static void check_lookup(const Gguf *g, const GgufTensor *t) {
    char name[GGUF_MAX_NAME + 1];
    memcpy(name, t->name.s, t->name.len);
    name[t->name.len] = '\0';
    if (strlen(name) == t->name.len && gguf_find_tensor(g, name) != t) abort();
}

static void check_tensor(const Gguf *g, const GgufTensor *t) {
    if (t->type >= GGUF_TENSOR_TYPES || gguf_tensor_types[t->type].values == 0) abort();
    if (t->n_dims > GGUF_MAX_DIMS || t->name.len > GGUF_MAX_NAME) abort();
    if (t->offset % g->alignment != 0) abort();
    const GgufTensorType *tt = &gguf_tensor_types[t->type];
    uint64_t numel = t->dims[0] * t->dims[1] * t->dims[2] * t->dims[3];
    if (t->bytes != numel / tt->values * tt->bytes) abort();
    require_inside(t->data, t->bytes);
    require_inside(t->name.s, t->name.len);
    check_lookup(g, t);
}

/* The file's vocabulary, as run reads a GGUF's: loaded and used, or refused in one line. */
static void check_vocabulary(const Gguf *g) {
    Tokenizer t;
    char err[512];
    if (tokenizer_load_gguf(&t, g, "fuzz", err, sizeof err) != 0) {
        if (err[0] == '\0' || strchr(err, '\n')) abort();
        return;
    }
    int ids[128]; /* 3 a byte of invalid UTF-8, BOS and EOS */
    int n = tokenizer_encode(&t, "Once upon a  time\xe2\x96\x81 \xff", 1, 1, ids);
    for (int i = 1; i < n; i++) (void)tokenizer_decode(&t, ids[i - 1], ids[i]);
    tokenizer_free(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    begin = data, end = data + size;
    Gguf g;
    char err[256];
    if (gguf_parse(&g, data, size, err, sizeof err) != 0) {
        if (err[0] == '\0' || strchr(err, '\n')) abort();
        return 0;
    }
    for (uint64_t i = 0; i < g.n_kvs; i++) {
        require_inside(g.kvs[i].key.s, g.kvs[i].key.len);
        look_up(&g, &g.kvs[i]);
        walk_strings(&g.kvs[i]);
    }
    for (uint64_t i = 0; i < g.n_tensors; i++) check_tensor(&g, &g.tensors[i]);
    check_vocabulary(&g);
    gguf_free(&g);
    return 0;
}
