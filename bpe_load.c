/* Loading a byte-level BPE vocabulary from a GGUF's tokenizer.ggml.* keys (bpe.h lists them and
 * the errors): every token checked and turned into its bytes, the token indexes, the merge table.
 * Encoding and decoding are bpe.c's; the tables' helpers bpe_tables.h's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bpe.h"
#include "bpe_tables.h"

/* A token or merge for a message. */
static GgufShown shown(const char *text, size_t len) {
    return gguf_shown((GgufString){text, len});
}

/* ----------------------------------------------------------------------------
 * GPT-2's byte alphabet (bytes_to_unicode in GPT-2's encoder.py): the printable bytes '!'..'~',
 * 0xA1..0xAC and 0xAE..0xFF are their own code points; the other 68, in order, are U+0100 on. */

static void byte_alphabet(unsigned code_of_byte[256], int byte_of_code[0x144]) {
    for (int c = 0; c < 0x144; c++) byte_of_code[c] = -1;
    unsigned next = 0x100;
    for (int byte = 0; byte < 256; byte++) {
        int printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) ||
                        (byte >= 0xAE && byte <= 0xFF);
        code_of_byte[byte] = printable ? (unsigned)byte : next++;
        byte_of_code[code_of_byte[byte]] = byte;
    }
}

/* Decodes the well-formed UTF-8 s[0..len), spelled in the byte alphabet, into out (room for len
 * bytes: each code point is at least one byte and stands for one). Returns the number of bytes,
 * or -1 at a code point outside the alphabet. */
static long from_alphabet(const int byte_of_code[0x144], const char *s, size_t len, char *out) {
    const unsigned char *u = (const unsigned char *)s;
    long n = 0;
    for (size_t i = 0; i < len;) {
        unsigned c = u[i];
        unsigned code = c < 0x80 ? c : c < 0xE0 ? (c & 0x1F) << 6 | (u[i + 1] & 0x3F) : 0x144;
        i += c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        if (code >= 0x144 || byte_of_code[code] < 0) return -1;
        out[n++] = (char)byte_of_code[code];
    }
    return n;
}

static int utf8_valid(const char *s, size_t len) {
    for (size_t i = 0; i < len;) {
        int n = utf8_sequence((const unsigned char *)s + i, len - i);
        if (n == 0) return 0;
        i += (size_t)n;
    }
    return 1;
}

/* ----------------------------------------------------------------------------
 * The tokens */

/* The token types: tokenizer.ggml.token_type, or every token normal without it. */
static int read_types(Bpe *b, const Gguf *g, char *err, size_t errlen) {
    for (int i = 0; i < b->vocab_size; i++) b->type[i] = BPE_TOKEN_NORMAL;
    if (!gguf_find(g, "tokenizer.ggml.token_type")) return 0;
    const GgufKV *kv;
    if (gguf_get_array(g, "tokenizer.ggml.token_type", GGUF_INT32, &kv, err, errlen) != 0)
        return -1;
    if (kv->n != (uint64_t)b->vocab_size)
        return gguf_fail(err, errlen, "tokenizer.ggml.token_type has %llu types for %d tokens",
                         (unsigned long long)kv->n, b->vocab_size);
    for (int i = 0; i < b->vocab_size; i++) {
        int32_t t = gguf_array_int32(kv, (uint64_t)i);
        if (t < BPE_TOKEN_NORMAL || t > BPE_TOKEN_BYTE)
            return gguf_fail(err, errlen, "token %d has type %d, not one of llama.cpp's 1..6", i,
                             t);
        b->type[i] = (unsigned char)t;
    }
    return 0;
}

/* Checks every token and copies its bytes into b->text: a normal token's through the byte
 * alphabet, another's as it is. strings: the GGUF's tokens. */
static int copy_tokens(Bpe *b, const GgufString *strings, const int byte_of_code[0x144], char *err,
                       size_t errlen) {
    size_t total = 0;
    for (int i = 0; i < b->vocab_size; i++) {
        const GgufString *s = &strings[i];
        if (s->len > BPE_MAX_TOKEN_BYTES)
            return gguf_fail(err, errlen, "token %d is %llu bytes long, more than %d", i,
                             (unsigned long long)s->len, BPE_MAX_TOKEN_BYTES);
        if (!utf8_valid(s->s, s->len))
            return gguf_fail(err, errlen, "token %d \"%s\" is not valid UTF-8", i,
                             shown(s->s, s->len).s);
        if (s->len == 0 && (b->type[i] == BPE_TOKEN_NORMAL || b->type[i] == BPE_TOKEN_CONTROL ||
                            b->type[i] == BPE_TOKEN_USER_DEFINED))
            return gguf_fail(err, errlen, "token %d is empty", i);
        total += s->len + 1;
    }
    b->text = malloc(total);
    if (!b->text) return gguf_fail(err, errlen, "out of memory for %zu bytes of tokens", total);
    size_t at = 0;
    for (int i = 0; i < b->vocab_size; i++) {
        const GgufString *s = &strings[i];
        b->offsets[i] = at;
        if (b->type[i] == BPE_TOKEN_NORMAL) {
            long n = from_alphabet(byte_of_code, s->s, s->len, b->text + at);
            if (n < 0)
                return gguf_fail(
                    err, errlen,
                    "normal token %d \"%s\" has a character outside GPT-2's byte alphabet", i,
                    shown(s->s, s->len).s);
            at += (size_t)n;
        } else {
            memcpy(b->text + at, s->s, s->len);
            at += s->len;
        }
        b->text[at++] = '\0';
        if ((int)(at - b->offsets[i] - 1) > b->max_token_bytes)
            b->max_token_bytes = (int)(at - b->offsets[i] - 1);
    }
    b->offsets[b->vocab_size] = at;
    return 0;
}

/* The two token indexes (normal tokens by their bytes; control and user-defined ones by their
 * text), refusing two equal tokens of one index, and what the added tokens' matching needs. */
static int index_tokens(Bpe *b, char *err, size_t errlen) {
    size_t slots = 16;
    while (slots < 2 * (size_t)b->vocab_size) slots *= 2;
    b->index_mask = slots - 1;
    b->normal_index = malloc(slots * sizeof *b->normal_index);
    b->added_index = malloc(slots * sizeof *b->added_index);
    if (!b->normal_index || !b->added_index)
        return gguf_fail(err, errlen, "out of memory for the index");
    memset(b->normal_index, 0xFF, slots * sizeof *b->normal_index);
    memset(b->added_index, 0xFF, slots * sizeof *b->added_index);
    int many_lengths = 0;
    for (int i = 0; i < b->vocab_size; i++) {
        int added = b->type[i] == BPE_TOKEN_CONTROL || b->type[i] == BPE_TOKEN_USER_DEFINED;
        if (!added && b->type[i] != BPE_TOKEN_NORMAL) continue;
        int32_t *index = added ? b->added_index : b->normal_index;
        size_t slot = index_slot(b, index, token_text(b, i), token_len(b, i));
        if (index[slot] >= 0)
            return gguf_fail(err, errlen, "tokens %d and %d are both \"%s\"", index[slot], i,
                             shown(token_text(b, i), token_len(b, i)).s);
        index[slot] = i;
        if (!added) continue;
        b->added_first[(unsigned char)token_text(b, i)[0]] = 1;
        int len = (int)token_len(b, i), k = 0;
        while (k < b->n_added_lengths && b->added_lengths[k] > len) k++;
        if (k < b->n_added_lengths && b->added_lengths[k] == len) continue;
        if (b->n_added_lengths == 64) {
            many_lengths = 1;
            continue;
        }
        memmove(b->added_lengths + k + 1, b->added_lengths + k,
                (size_t)(b->n_added_lengths - k) * sizeof *b->added_lengths);
        b->added_lengths[k] = len;
        b->n_added_lengths++;
    }
    if (many_lengths) b->n_added_lengths = 0; /* encode then tries every length */
    for (int byte = 0; byte < 256; byte++) {
        char c = (char)byte;
        b->byte_ids[byte] = b->normal_index[index_slot(b, b->normal_index, &c, 1)];
        if (b->byte_ids[byte] < 0)
            return gguf_fail(err, errlen,
                             "no normal token is the byte 0x%02X (byte-level BPE needs all "
                             "256)",
                             byte);
    }
    return 0;
}

/* ----------------------------------------------------------------------------
 * The merges */

/* The normal token spelled s[0..len) in the byte alphabet, or -1; buf has room for len bytes. */
static int alphabet_token(const Bpe *b, const int byte_of_code[0x144], const char *s, size_t len,
                          char *buf) {
    long n = from_alphabet(byte_of_code, s, len, buf);
    return n <= 0 ? -1 : b->normal_index[index_slot(b, b->normal_index, buf, (size_t)n)];
}

/* One merge, "LEFT RIGHT" (split at the first space after the first byte, as llama.cpp does),
 * into the table. */
static int add_merge(Bpe *b, const int byte_of_code[0x144], GgufString m, int rank, char *err,
                     size_t errlen) {
    const char *space = m.len > 1 ? memchr(m.s + 1, ' ', m.len - 1) : NULL;
    if (!space || !utf8_valid(m.s, m.len))
        return gguf_fail(err, errlen, "merge %d \"%s\" is not two tokens and a space", rank,
                         shown(m.s, m.len).s);
    size_t left_len = (size_t)(space - m.s), right_len = m.len - left_len - 1;
    char buf[2 * BPE_MAX_TOKEN_BYTES];
    if (m.len > sizeof buf)
        return gguf_fail(err, errlen, "merge %d is %llu bytes long", rank,
                         (unsigned long long)m.len);
    int left = alphabet_token(b, byte_of_code, m.s, left_len, buf);
    int right = alphabet_token(b, byte_of_code, space + 1, right_len, buf);
    int joined = -1;
    if (left >= 0 && right >= 0) {
        size_t l = token_len(b, left), r = token_len(b, right);
        memcpy(buf, token_text(b, left), l);
        memcpy(buf + l, token_text(b, right), r);
        joined = b->normal_index[index_slot(b, b->normal_index, buf, l + r)];
    }
    if (left < 0 || right < 0 || joined < 0)
        return gguf_fail(err, errlen, "merge %d \"%s\" names a token the vocabulary lacks (%s)",
                         rank, shown(m.s, m.len).s,
                         left < 0    ? "left"
                         : right < 0 ? "right"
                                     : "the two joined");
    size_t slot = merge_slot(b, left, right);
    if (b->merges[slot].left >= 0)
        return gguf_fail(err, errlen, "merges %d and %d are both \"%s\"", b->merges[slot].rank,
                         rank, shown(m.s, m.len).s);
    b->merges[slot] = (struct BpeMerge){left, right, rank, joined};
    return 0;
}

static int read_merges(Bpe *b, const Gguf *g, const int byte_of_code[0x144], char *err,
                       size_t errlen) {
    const GgufKV *kv;
    if (gguf_get_array(g, "tokenizer.ggml.merges", GGUF_STRING, &kv, err, errlen) != 0) return -1;
    if (kv->n >= INT32_MAX)
        return gguf_fail(err, errlen, "tokenizer.ggml.merges has too many merges");
    b->n_merges = (int)kv->n;
    size_t slots = 16;
    while (slots < 2 * kv->n) slots *= 2;
    b->merge_mask = slots - 1;
    b->merges = malloc(slots * sizeof *b->merges);
    GgufString *merges = malloc((kv->n ? kv->n : 1) * sizeof *merges);
    if (!b->merges || !merges) {
        free(merges);
        return gguf_fail(err, errlen, "out of memory for %llu merges", (unsigned long long)kv->n);
    }
    for (size_t i = 0; i < slots; i++) b->merges[i].left = -1;
    gguf_array_strings(kv, merges);
    int rc = 0;
    for (int i = 0; i < b->n_merges && rc == 0; i++)
        rc = add_merge(b, byte_of_code, merges[i], i, err, errlen);
    free(merges);
    return rc;
}

/* ----------------------------------------------------------------------------
 * The rest: model, pre, special ids */

/* An optional token id key: -1 when absent, else it must name a token. */
static int read_id(const Bpe *b, const Gguf *g, const char *key, int *id, char *err,
                   size_t errlen) {
    *id = -1;
    if (!gguf_find(g, key)) return 0;
    uint64_t v;
    if (gguf_get_uint(g, key, &v, err, errlen) != 0) return -1;
    if (v >= (uint64_t)b->vocab_size)
        return gguf_fail(err, errlen, "%s is %llu, past the %d tokens", key, (unsigned long long)v,
                         b->vocab_size);
    *id = (int)v;
    return 0;
}

static int read_specials(Bpe *b, const Gguf *g, char *err, size_t errlen) {
    if (read_id(b, g, "tokenizer.ggml.bos_token_id", &b->bos_id, err, errlen) != 0 ||
        read_id(b, g, "tokenizer.ggml.eos_token_id", &b->eos_id, err, errlen) != 0 ||
        read_id(b, g, "tokenizer.ggml.eot_token_id", &b->eot_id, err, errlen) != 0)
        return -1;
    const GgufKV *add_bos = gguf_find(g, "tokenizer.ggml.add_bos_token");
    if (add_bos && add_bos->type != GGUF_BOOL)
        return gguf_fail(err, errlen, "tokenizer.ggml.add_bos_token is a %s, not a bool",
                         gguf_value_type_name(add_bos->type));
    b->add_bos = add_bos ? add_bos->value[0] : b->pretok.family->add_bos;
    return 0;
}

/* tokenizer.ggml.model must be gpt2 (else 1) and tokenizer.ggml.pre a known family. */
static int read_model(Bpe *b, const Gguf *g, char *err, size_t errlen) {
    GgufString model, pre;
    if (gguf_get_string(g, "tokenizer.ggml.model", &model, err, errlen) != 0) return -1;
    if (model.len != 4 || memcmp(model.s, "gpt2", 4) != 0) {
        gguf_fail(err, errlen, "tokenizer.ggml.model is \"%s\", not gpt2 (byte-level BPE)",
                  shown(model.s, model.len).s);
        return 1;
    }
    if (gguf_get_string(g, "tokenizer.ggml.pre", &pre, err, errlen) != 0) return -1;
    return bpe_pretok_init(&b->pretok, pre.s, pre.len, err, errlen);
}

/* The tokens: their strings read, each checked and copied, then indexed. */
static int read_tokens(Bpe *b, const Gguf *g, const int byte_of_code[0x144], char *err,
                       size_t errlen) {
    const GgufKV *kv;
    if (gguf_get_array(g, "tokenizer.ggml.tokens", GGUF_STRING, &kv, err, errlen) != 0) return -1;
    if (kv->n == 0) return gguf_fail(err, errlen, "tokenizer.ggml.tokens is empty");
    if (kv->n >= INT32_MAX)
        return gguf_fail(err, errlen, "tokenizer.ggml.tokens has too many tokens");
    b->vocab_size = (int)kv->n;
    b->type = malloc(kv->n);
    b->offsets = malloc((kv->n + 1) * sizeof *b->offsets);
    GgufString *strings = malloc(kv->n * sizeof *strings);
    int rc =
        b->type && b->offsets && strings ? 0 : gguf_fail(err, errlen, "out of memory for tokens");
    if (rc == 0) {
        gguf_array_strings(kv, strings);
        rc = read_types(b, g, err, errlen);
    }
    if (rc == 0) rc = copy_tokens(b, strings, byte_of_code, err, errlen);
    free(strings);
    return rc == 0 ? index_tokens(b, err, errlen) : -1;
}

int bpe_load_gguf(Bpe *b, const Gguf *g, char *err, size_t errlen) {
    memset(b, 0, sizeof *b);
    unsigned code_of_byte[256];
    int byte_of_code[0x144];
    byte_alphabet(code_of_byte, byte_of_code);
    int rc = read_model(b, g, err, errlen);
    if (rc == 0) rc = read_tokens(b, g, byte_of_code, err, errlen);
    if (rc == 0) rc = read_merges(b, g, byte_of_code, err, errlen);
    if (rc == 0) rc = read_specials(b, g, err, errlen);
    if (rc != 0) bpe_free(b);
    return rc;
}

int bpe_load_file(Bpe *b, const char *path, char *err, size_t errlen) {
    memset(b, 0, sizeof *b);
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        gguf_fail(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode) || st.st_size == 0) {
        close(fd);
        return gguf_fail(err, errlen, "%s: not a GGUF file (%s)", path,
                         S_ISREG(st.st_mode) ? "empty" : "not a regular file");
    }
    size_t size = (size_t)st.st_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return gguf_fail(err, errlen, "%s: cannot map: %s", path, strerror(errno));
    Gguf g;
    char why[768];
    int rc = gguf_parse(&g, map, size, why, sizeof why);
    if (rc == 0) {
        rc = bpe_load_gguf(b, &g, why, sizeof why);
        gguf_free(&g);
    }
    munmap(map, size);
    if (rc != 0) gguf_fail(err, errlen, "%s: %s", path, why);
    return rc;
}

void bpe_free(Bpe *b) {
    free(b->text);
    free(b->offsets);
    free(b->type);
    free(b->normal_index);
    free(b->added_index);
    free(b->merges);
    bpe_pretok_free(&b->pretok);
    memset(b, 0, sizeof *b);
}
