/* GGUF reader (gguf.h): the file's header, key/values and tensor infos, every count, length,
 * type and offset checked against the file before it is used. Numbers are read with memcpy in
 * the machine's byte order: little-endian, as every file run reads.
 */
#include "gguf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const GgufTensorType gguf_tensor_types[GGUF_TENSOR_TYPES] = {
    [0] = {"f32", 1, 4},         [1] = {"f16", 1, 2},         [2] = {"q4_0", 32, 18},
    [3] = {"q4_1", 32, 20},      [4] = {"q4_2", 0, 0},        [5] = {"q4_3", 0, 0},
    [6] = {"q5_0", 32, 22},      [7] = {"q5_1", 32, 24},      [8] = {"q8_0", 32, 34},
    [9] = {"q8_1", 32, 36},      [10] = {"q2_K", 256, 84},    [11] = {"q3_K", 256, 110},
    [12] = {"q4_K", 256, 144},   [13] = {"q5_K", 256, 176},   [14] = {"q6_K", 256, 210},
    [15] = {"q8_K", 256, 292},   [16] = {"iq2_xxs", 256, 66}, [17] = {"iq2_xs", 256, 74},
    [18] = {"iq3_xxs", 256, 98}, [19] = {"iq1_s", 256, 50},   [20] = {"iq4_nl", 32, 18},
    [21] = {"iq3_s", 256, 110},  [22] = {"iq2_s", 256, 82},   [23] = {"iq4_xs", 256, 136},
    [24] = {"i8", 1, 1},         [25] = {"i16", 1, 2},        [26] = {"i32", 1, 4},
    [27] = {"i64", 1, 8},        [28] = {"f64", 1, 8},        [29] = {"iq1_m", 256, 56},
    [30] = {"bf16", 1, 2},       [31] = {"q4_0_4_4", 0, 0},   [32] = {"q4_0_4_8", 0, 0},
    [33] = {"q4_0_8_8", 0, 0},   [34] = {"tq1_0", 256, 54},   [35] = {"tq2_0", 256, 66},
    [36] = {"iq4_nl_4_4", 0, 0}, [37] = {"iq4_nl_4_8", 0, 0}, [38] = {"iq4_nl_8_8", 0, 0},
    [39] = {"mxfp4", 32, 17},    [40] = {"nvfp4", 64, 36},    [41] = {"q1_0", 128, 18},
    [42] = {"q2_0", 64, 18},
};

static const char *const value_type_names[GGUF_VALUE_TYPES] = {
    "uint8", "int8",   "uint16", "int16",  "uint32", "int32",   "float32",
    "bool",  "string", "array",  "uint64", "int64",  "float64",
};

/* Bytes of one value of each type; 0 for STRING and ARRAY, whose size is in the file. */
static const uint64_t value_sizes[GGUF_VALUE_TYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

/* The least bytes a key/value takes (an 8-byte key length, a 4-byte type, a one-byte value) and
 * a tensor info (name length, n_dims, type, offset): a count beyond the file's bytes over these
 * is refused before anything is allocated for it. */
#define MIN_KV_BYTES     13
#define MIN_TENSOR_BYTES 24

size_t gguf_value_size(GgufValueType type) {
    return (size_t)value_sizes[type];
}

const char *gguf_value_type_name(uint32_t type) {
    return type < GGUF_VALUE_TYPES ? value_type_names[type] : "unknown";
}

int gguf_fail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

GgufShown gguf_shown(GgufString name) {
    GgufShown out;
    size_t o = 0;
    for (uint64_t i = 0; i < name.len && i < 64; i++) {
        unsigned char b = (unsigned char)name.s[i];
        if (b < 0x20 || b >= 0x7F)
            o += (size_t)snprintf(out.s + o, sizeof out.s - o, "\\x%02X", b);
        else
            out.s[o++] = (char)b;
    }
    if (name.len > 64) memcpy(out.s + o, "...", 3), o += 3;
    out.s[o] = '\0';
    return out;
}

/* ----------------------------------------------------------------------------
 * Reading the file: a cursor that never moves past its end */

typedef struct {
    const uint8_t *data;
    uint64_t size, pos;
} Cursor;

static uint64_t remaining(const Cursor *c) {
    return c->size - c->pos;
}

/* The next n bytes, or NULL (the cursor unmoved) when fewer remain. */
static const uint8_t *take(Cursor *c, uint64_t n) {
    if (n > remaining(c)) return NULL;
    const uint8_t *p = c->data + c->pos;
    c->pos += n;
    return p;
}

static int read_u32(Cursor *c, uint32_t *v) {
    const uint8_t *p = take(c, sizeof *v);
    if (p) memcpy(v, p, sizeof *v);
    return p ? 0 : -1;
}

static int read_u64(Cursor *c, uint64_t *v) {
    const uint8_t *p = take(c, sizeof *v);
    if (p) memcpy(v, p, sizeof *v);
    return p ? 0 : -1;
}

/* A string's length, then its bytes. */
typedef enum { STRING_OK, STRING_CUT /* inside the length */, STRING_PAST_END } StringResult;

static StringResult read_string(Cursor *c, GgufString *s) {
    if (read_u64(c, &s->len) != 0) return STRING_CUT;
    s->s = (const char *)take(c, s->len);
    return s->s ? STRING_OK : STRING_PAST_END;
}

typedef enum { VALUES_OK, VALUES_PAST_END, VALUES_BAD_BOOL } ValuesResult;

/* Moves past count values of a scalar or STRING type, checking that they are in the file (and
 * that a bool is 0 or 1). The count of a fixed size is checked by division, and that of strings
 * against the 8 bytes each length takes, so the loop is bounded by the file's size. */
static ValuesResult skip_values(Cursor *c, GgufValueType type, uint64_t count) {
    if (type == GGUF_STRING) {
        if (count > remaining(c) / sizeof(uint64_t)) return VALUES_PAST_END;
        GgufString s;
        for (uint64_t i = 0; i < count; i++)
            if (read_string(c, &s) != STRING_OK) return VALUES_PAST_END;
        return VALUES_OK;
    }
    uint64_t size = value_sizes[type];
    if (count > remaining(c) / size) return VALUES_PAST_END;
    const uint8_t *p = take(c, count * size);
    if (type == GGUF_BOOL)
        for (uint64_t i = 0; i < count; i++)
            if (p[i] > 1) return VALUES_BAD_BOOL;
    return VALUES_OK;
}

/* ----------------------------------------------------------------------------
 * The sections */

static int parse_header(Cursor *c, Gguf *g, char *err, size_t errlen) {
    const uint8_t *magic = take(c, 4);
    if (!magic) return gguf_fail(err, errlen, "not a GGUF file: shorter than its 4-byte magic");
    if (memcmp(magic, "GGUF", 4) != 0) {
        GgufShown m = gguf_shown((GgufString){(const char *)magic, 4});
        return gguf_fail(err, errlen, "not a GGUF file: it starts with \"%s\", not \"GGUF\"", m.s);
    }
    if (read_u32(c, &g->version) != 0) return gguf_fail(err, errlen, "file ends inside the header");
    if (g->version == 0x02000000 || g->version == 0x03000000)
        return gguf_fail(
            err, errlen,
            "a big-endian GGUF file (version %u byte-swapped): only little-endian files are read",
            g->version >> 24);
    if (g->version != 2 && g->version != 3)
        return gguf_fail(err, errlen, "GGUF version %u is not supported (versions 2 and 3 are)",
                         g->version);
    if (read_u64(c, &g->n_tensors) != 0 || read_u64(c, &g->n_kvs) != 0)
        return gguf_fail(err, errlen, "file ends inside the header");
    if (g->n_kvs > remaining(c) / MIN_KV_BYTES)
        return gguf_fail(err, errlen,
                         "key/value count %llu cannot fit in the %llu bytes after the header",
                         (unsigned long long)g->n_kvs, (unsigned long long)remaining(c));
    return 0;
}

static int parse_kv(Cursor *c, GgufKV *kv, uint64_t i, uint64_t n, char *err, size_t errlen) {
    unsigned long long num = i + 1, total = n;
    StringResult r = read_string(c, &kv->key);
    if (r != STRING_OK)
        return r == STRING_CUT
                   ? gguf_fail(err, errlen, "file ends inside key/value %llu of %llu", num, total)
                   : gguf_fail(
                         err, errlen,
                         "key/value %llu of %llu: key length %llu runs past the end of the file",
                         num, total, (unsigned long long)kv->key.len);
    GgufShown key = gguf_shown(kv->key);
    uint32_t type, elem_type;
    if (read_u32(c, &type) != 0)
        return gguf_fail(err, errlen, "file ends inside key/value %s", key.s);
    if (type >= GGUF_VALUE_TYPES)
        return gguf_fail(err, errlen, "key/value %s has unknown value type %u", key.s, type);
    kv->type = kv->elem_type = (GgufValueType)type;
    kv->n = 1;
    if (type == GGUF_ARRAY) {
        if (read_u32(c, &elem_type) != 0 || read_u64(c, &kv->n) != 0)
            return gguf_fail(err, errlen, "file ends inside key/value %s", key.s);
        if (elem_type >= GGUF_VALUE_TYPES)
            return gguf_fail(err, errlen, "key/value %s is an array of unknown value type %u",
                             key.s, elem_type);
        if (elem_type == GGUF_ARRAY)
            return gguf_fail(err, errlen,
                             "key/value %s is an array of arrays, which is not supported", key.s);
        kv->elem_type = (GgufValueType)elem_type;
    }
    kv->value = c->data + c->pos;
    ValuesResult v = skip_values(c, kv->elem_type, kv->n);
    if (v == VALUES_BAD_BOOL)
        return gguf_fail(err, errlen, "key/value %s holds a bool that is neither 0 nor 1", key.s);
    if (v == VALUES_PAST_END && type == GGUF_ARRAY)
        return gguf_fail(err, errlen,
                         "key/value %s: its array of %llu %s values runs past the end of the file",
                         key.s, (unsigned long long)kv->n, value_type_names[kv->elem_type]);
    if (v == VALUES_PAST_END)
        return gguf_fail(err, errlen, "key/value %s: its %s value runs past the end of the file",
                         key.s, value_type_names[type]);
    return 0;
}

/* One tensor info: its name, dims, type and offset, with its size from the type's blocks. */
static int parse_tensor_info(Cursor *c, GgufTensor *t, uint64_t i, char *err, size_t errlen) {
    unsigned long long num = i + 1;
    StringResult r = read_string(c, &t->name);
    if (r != STRING_OK)
        return r == STRING_CUT
                   ? gguf_fail(err, errlen, "file ends inside tensor info %llu", num)
                   : gguf_fail(err, errlen,
                               "tensor info %llu: name length %llu runs past the end of the file",
                               num, (unsigned long long)t->name.len);
    GgufShown name = gguf_shown(t->name);
    if (t->name.len > GGUF_MAX_NAME)
        return gguf_fail(err, errlen, "tensor %s: its name of %llu bytes is longer than %d", name.s,
                         (unsigned long long)t->name.len, GGUF_MAX_NAME);
    if (read_u32(c, &t->n_dims) != 0)
        return gguf_fail(err, errlen, "file ends inside tensor info %s", name.s);
    if (t->n_dims > GGUF_MAX_DIMS)
        return gguf_fail(err, errlen, "tensor %s has %u dims, more than %d", name.s, t->n_dims,
                         GGUF_MAX_DIMS);
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        t->dims[d] = 1;
        if ((uint32_t)d < t->n_dims && read_u64(c, &t->dims[d]) != 0)
            return gguf_fail(err, errlen, "file ends inside tensor info %s", name.s);
    }
    if (read_u32(c, &t->type) != 0 || read_u64(c, &t->offset) != 0)
        return gguf_fail(err, errlen, "file ends inside tensor info %s", name.s);
    if (t->type >= GGUF_TENSOR_TYPES)
        return gguf_fail(err, errlen, "tensor %s has unknown tensor type %u", name.s, t->type);
    const GgufTensorType *tt = &gguf_tensor_types[t->type];
    if (tt->values == 0)
        return gguf_fail(err, errlen, "tensor %s has type %u (%s), which ggml has removed", name.s,
                         t->type, tt->name);
    /* ggml counts values in an int64 */
    uint64_t numel = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        if (t->dims[d] != 0 && numel > (uint64_t)INT64_MAX / t->dims[d])
            return gguf_fail(err, errlen,
                             "tensor %s: dims %llu x %llu x %llu x %llu overflow 63 bits", name.s,
                             (unsigned long long)t->dims[0], (unsigned long long)t->dims[1],
                             (unsigned long long)t->dims[2], (unsigned long long)t->dims[3]);
        numel *= t->dims[d];
    }
    if (t->dims[0] % tt->values != 0)
        return gguf_fail(err, errlen,
                         "tensor %s: its rows of %llu values are not whole blocks of %u (%s)",
                         name.s, (unsigned long long)t->dims[0], tt->values, tt->name);
    if (numel / tt->values > UINT64_MAX / tt->bytes)
        return gguf_fail(err, errlen, "tensor %s: its size in bytes overflows 64 bits", name.s);
    t->bytes = numel / tt->values * tt->bytes;
    return 0;
}

/* general.alignment when present: a uint32 power of two (llama.cpp's requirement too). */
static int parse_alignment(Gguf *g, char *err, size_t errlen) {
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const GgufKV *kv = gguf_find(g, "general.alignment");
    if (!kv) return 0;
    if (kv->type != GGUF_UINT32)
        return gguf_fail(err, errlen, "general.alignment is a %s, not a uint32",
                         value_type_names[kv->type]);
    uint32_t a;
    memcpy(&a, kv->value, sizeof a);
    if (a == 0 || (a & (a - 1)) != 0)
        return gguf_fail(err, errlen, "general.alignment %u is not a power of two", a);
    g->alignment = a;
    return 0;
}

/* Each tensor's data: aligned, inside the data section, which starts at the first multiple of
 * the alignment after the tensor infos. */
static int place_tensors(Gguf *g, const Cursor *c, char *err, size_t errlen) {
    uint64_t pad = (g->alignment - c->pos % g->alignment) % g->alignment;
    g->data_start = pad <= remaining(c) ? c->pos + pad : c->size;
    uint64_t avail = c->size - g->data_start;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        GgufTensor *t = &g->tensors[i];
        GgufShown name = gguf_shown(t->name);
        if (t->offset % g->alignment != 0)
            return gguf_fail(
                err, errlen, "tensor %s: its offset %llu is not a multiple of the alignment %llu",
                name.s, (unsigned long long)t->offset, (unsigned long long)g->alignment);
        if (t->offset > avail || t->bytes > avail - t->offset)
            return gguf_fail(
                err, errlen,
                "tensor %s (offset %llu, %llu bytes) runs past the end of the file: the "
                "data section holds %llu bytes",
                name.s, (unsigned long long)t->offset, (unsigned long long)t->bytes,
                (unsigned long long)avail);
        t->data = c->data + g->data_start + t->offset;
    }
    return 0;
}

static int string_cmp(GgufString a, GgufString b) {
    int r = memcmp(a.s, b.s, a.len < b.len ? a.len : b.len);
    return r != 0 ? r : (a.len > b.len) - (a.len < b.len);
}

static int cmp_kv_keys(const void *a, const void *b) {
    return string_cmp((*(const GgufKV *const *)a)->key, (*(const GgufKV *const *)b)->key);
}

static int cmp_tensor_names(const void *a, const void *b) {
    return string_cmp((*(const GgufTensor *const *)a)->name, (*(const GgufTensor *const *)b)->name);
}

static int cmp_tensor_offsets(const void *a, const void *b) {
    uint64_t x = (*(const GgufTensor *const *)a)->offset;
    uint64_t y = (*(const GgufTensor *const *)b)->offset;
    return (x > y) - (x < y);
}

/* Pointers to the n items of `size` bytes at items, sorted by cmp (caller frees; NULL when
 * memory runs out). Sorting keeps the checks below O(n log n) for a hostile file's counts. */
static const void **sorted(const void *items, uint64_t n, size_t size,
                           int (*cmp)(const void *, const void *)) {
    const void **p = malloc((n ? n : 1) * sizeof *p);
    if (!p) return NULL;
    for (uint64_t i = 0; i < n; i++) p[i] = (const char *)items + i * size;
    qsort(p, n, sizeof *p, cmp);
    return p;
}

/* No two keys and no two tensor names alike; no two tensors' data overlapping. */
static int check_unique(const Gguf *g, char *err, size_t errlen) {
    const GgufKV **kvs = (const GgufKV **)sorted(g->kvs, g->n_kvs, sizeof *g->kvs, cmp_kv_keys);
    const GgufTensor **names =
        (const GgufTensor **)sorted(g->tensors, g->n_tensors, sizeof *g->tensors, cmp_tensor_names);
    const GgufTensor **offs = (const GgufTensor **)sorted(g->tensors, g->n_tensors,
                                                          sizeof *g->tensors, cmp_tensor_offsets);
    int rc = kvs && names && offs ? 0 : gguf_fail(err, errlen, "out of memory reading the file");
    for (uint64_t i = 1; rc == 0 && i < g->n_kvs; i++)
        if (string_cmp(kvs[i - 1]->key, kvs[i]->key) == 0)
            rc = gguf_fail(err, errlen, "duplicate key %s", gguf_shown(kvs[i]->key).s);
    for (uint64_t i = 1; rc == 0 && i < g->n_tensors; i++)
        if (string_cmp(names[i - 1]->name, names[i]->name) == 0)
            rc = gguf_fail(err, errlen, "duplicate tensor name %s", gguf_shown(names[i]->name).s);
    /* the tensor reaching furthest so far: one starting before its end overlaps it */
    const GgufTensor *reach = NULL;
    for (uint64_t i = 0; rc == 0 && i < g->n_tensors; i++) {
        const GgufTensor *t = offs[i];
        if (t->bytes == 0) continue;
        if (reach && t->offset < reach->offset + reach->bytes)
            rc = gguf_fail(err, errlen, "tensors %s and %s overlap in the file",
                           gguf_shown(reach->name).s, gguf_shown(t->name).s);
        if (!reach || t->offset + t->bytes > reach->offset + reach->bytes) reach = t;
    }
    free(kvs);
    free(names);
    free(offs);
    return rc;
}

int gguf_parse(Gguf *g, const uint8_t *data, size_t size, char *err, size_t errlen) {
    *g = (Gguf){0};
    Cursor c = {data, size, 0};
    if (parse_header(&c, g, err, errlen) != 0) return -1;
    g->kvs = calloc(g->n_kvs ? g->n_kvs : 1, sizeof *g->kvs);
    if (!g->kvs)
        return gguf_fail(err, errlen, "out of memory for %llu key/values",
                         (unsigned long long)g->n_kvs);
    int rc = 0;
    for (uint64_t i = 0; rc == 0 && i < g->n_kvs; i++)
        rc = parse_kv(&c, &g->kvs[i], i, g->n_kvs, err, errlen);
    if (rc == 0 && g->n_tensors > remaining(&c) / MIN_TENSOR_BYTES)
        rc = gguf_fail(err, errlen,
                       "tensor count %llu cannot fit in the %llu bytes after the key/values",
                       (unsigned long long)g->n_tensors, (unsigned long long)remaining(&c));
    if (rc == 0 && !(g->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensors)))
        rc = gguf_fail(err, errlen, "out of memory for %llu tensor infos",
                       (unsigned long long)g->n_tensors);
    for (uint64_t i = 0; rc == 0 && i < g->n_tensors; i++)
        rc = parse_tensor_info(&c, &g->tensors[i], i, err, errlen);
    if (rc == 0) rc = parse_alignment(g, err, errlen);
    if (rc == 0) rc = place_tensors(g, &c, err, errlen);
    if (rc == 0) rc = check_unique(g, err, errlen);
    if (rc != 0) gguf_free(g);
    return rc;
}

void gguf_free(Gguf *g) {
    free(g->kvs);
    free(g->tensors);
    *g = (Gguf){0};
}

/* ----------------------------------------------------------------------------
 * Lookups */

static int string_is(GgufString s, const char *text) {
    size_t len = strlen(text);
    return s.len == len && memcmp(s.s, text, len) == 0;
}

const GgufKV *gguf_find(const Gguf *g, const char *key) {
    for (uint64_t i = 0; i < g->n_kvs; i++)
        if (string_is(g->kvs[i].key, key)) return &g->kvs[i];
    return NULL;
}

const GgufTensor *gguf_find_tensor(const Gguf *g, const char *name) {
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (string_is(g->tensors[i].name, name)) return &g->tensors[i];
    return NULL;
}

/* "a uint32", "an int8", "an array": the type of a value for a message. */
static const char *with_article(GgufValueType type, char buf[16]) {
    const char *name = value_type_names[type];
    snprintf(buf, 16, "%s %s", name[0] == 'i' || name[0] == 'a' ? "an" : "a", name);
    return buf;
}

/* The key's entry, or NULL with err saying it is missing. */
static const GgufKV *require(const Gguf *g, const char *key, char *err, size_t errlen) {
    const GgufKV *kv = gguf_find(g, key);
    if (!kv) gguf_fail(err, errlen, "key %s is missing", key);
    return kv;
}

int gguf_get_uint(const Gguf *g, const char *key, uint64_t *out, char *err, size_t errlen) {
    const GgufKV *kv = require(g, key, err, errlen);
    if (!kv) return -1;
    /* read as the low bytes of a uint64 (little-endian), then sign-extended for signed types */
    uint64_t size = value_sizes[kv->type], u = 0;
    int is_signed = kv->type == GGUF_INT8 || kv->type == GGUF_INT16 || kv->type == GGUF_INT32 ||
                    kv->type == GGUF_INT64;
    int is_int = is_signed || kv->type == GGUF_UINT8 || kv->type == GGUF_UINT16 ||
                 kv->type == GGUF_UINT32 || kv->type == GGUF_UINT64;
    char buf[16];
    if (!is_int)
        return gguf_fail(err, errlen, "%s is %s, not an integer", key, with_article(kv->type, buf));
    memcpy(&u, kv->value, size);
    if (is_signed && size < 8 && (u >> (8 * size - 1)) != 0) u |= UINT64_MAX << (8 * size);
    if (is_signed && (int64_t)u < 0)
        return gguf_fail(err, errlen, "%s is %lld, negative", key, (long long)(int64_t)u);
    *out = u;
    return 0;
}

int gguf_get_float(const Gguf *g, const char *key, float *out, char *err, size_t errlen) {
    const GgufKV *kv = require(g, key, err, errlen);
    if (!kv) return -1;
    char buf[16];
    if (kv->type == GGUF_FLOAT32) {
        memcpy(out, kv->value, sizeof *out);
    } else if (kv->type == GGUF_FLOAT64) {
        double d;
        memcpy(&d, kv->value, sizeof d);
        *out = (float)d;
    } else {
        return gguf_fail(err, errlen, "%s is %s, not a float", key, with_article(kv->type, buf));
    }
    return 0;
}

int gguf_get_string(const Gguf *g, const char *key, GgufString *out, char *err, size_t errlen) {
    const GgufKV *kv = require(g, key, err, errlen);
    if (!kv) return -1;
    char buf[16];
    if (kv->type != GGUF_STRING)
        return gguf_fail(err, errlen, "%s is %s, not a string", key, with_article(kv->type, buf));
    gguf_array_strings(kv, out);
    return 0;
}

int gguf_get_array(const Gguf *g, const char *key, GgufValueType elem_type, const GgufKV **out,
                   char *err, size_t errlen) {
    const GgufKV *kv = require(g, key, err, errlen);
    if (!kv) return -1;
    char buf[16];
    if (kv->type != GGUF_ARRAY)
        return gguf_fail(err, errlen, "%s is %s, not an array of %s", key,
                         with_article(kv->type, buf), value_type_names[elem_type]);
    if (kv->elem_type != elem_type)
        return gguf_fail(err, errlen, "%s is an array of %s, not of %s", key,
                         value_type_names[kv->elem_type], value_type_names[elem_type]);
    *out = kv;
    return 0;
}

float gguf_array_float(const GgufKV *kv, uint64_t i) {
    float v;
    memcpy(&v, kv->value + i * sizeof v, sizeof v);
    return v;
}

int32_t gguf_array_int32(const GgufKV *kv, uint64_t i) {
    int32_t v;
    memcpy(&v, kv->value + i * sizeof v, sizeof v);
    return v;
}

void gguf_array_strings(const GgufKV *kv, GgufString *out) {
    Cursor c = {kv->value, UINT64_MAX, 0}; /* parse checked that they are in the file */
    for (uint64_t i = 0; i < kv->n; i++) read_string(&c, &out[i]);
}
