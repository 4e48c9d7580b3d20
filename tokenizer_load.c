/* Loading a tokenizer: llama2.c's tokenizer file (see tokenizer.h for its layout), from a file or
 * from memory, read, checked entry by entry and copied into the piece table, its index and the
 * merge table; or the same table built from arrays of pieces, a GGUF's SentencePiece vocabulary
 * among them. Encoding and decoding are tokenizer.c's; the piece table's helpers are
 * tokenizer_pieces.h's. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"
#include "tokenizer_pieces.h"

/* A max_token_length above this is not a tokenizer file (Llama 2's is 27). */
#define MAX_TOKEN_LENGTH_LIMIT 65536

/* ----------------------------------------------------------------------------
 * Loading */

static uint32_t read_u32le(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int32_t read_i32le(const unsigned char *p) {
    uint32_t u = read_u32le(p);
    int32_t i;
    memcpy(&i, &u, sizeof i);
    return i;
}

static float read_f32le(const unsigned char *p) {
    uint32_t u = read_u32le(p);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Reads the whole file; plain stdio loop so that directories and pipes fail or work cleanly. */
/* Far above any vocabulary's file (Llama 2's is 0.4 MiB), and a bound on what reading an endless
 * input costs. */
#define MAX_TOKENIZER_BYTES (64 << 20)

static unsigned char *read_file(const char *path, size_t *size, char *err, size_t errlen) {
    /* O_NONBLOCK, then back to blocking: a FIFO without a writer reads as empty instead of
     * blocking the open, and a pipe with one still streams. */
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd >= 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (!f) {
        snprintf(err, errlen, "%s: cannot open tokenizer file: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        if (cap >= MAX_TOKENIZER_BYTES) { /* a device or pipe that never ends (/dev/zero) */
            snprintf(err, errlen, "%s: tokenizer file is larger than %d MiB", path,
                     MAX_TOKENIZER_BYTES >> 20);
            free(buf);
            fclose(f);
            return NULL;
        }
        unsigned char *bigger = realloc(buf, cap * 2);
        if (!bigger) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    if (!buf) {
        snprintf(err, errlen, "%s: out of memory reading tokenizer file", path);
    } else if (ferror(f)) {
        snprintf(err, errlen, "%s: cannot read tokenizer file: %s", path, strerror(errno));
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *size = n;
    return buf;
}

/* Writes piece into out[outlen] for an error message: printable ASCII as is, other bytes as
 * \xHH, cut short with "..." if long. */
static void describe_piece(char *out, size_t outlen, const char *piece) {
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)piece; *p; p++) {
        if (n + 8 >= outlen) {
            strcpy(out + n, "...");
            return;
        }
        if (*p >= 0x20 && *p < 0x7F && *p != '"' && *p != '\\')
            out[n++] = (char)*p;
        else
            n += (size_t)snprintf(out + n, outlen - n, "\\x%02X", *p);
    }
    out[n] = '\0';
}

/* What the first pass learns of a file: its header's max_token_length, the number of entries, and
 * the bytes their pieces take NUL-terminated. */
typedef struct {
    int max_len, count;
    size_t text_bytes;
} Entries;

/* The first pass: checks the header and every entry of the file's bytes data[0..size) (size <=
 * MAX_TOKENIZER_BYTES), counting them into *e, so that the copy cannot fail but for memory.
 * Returns 0, or -1 with "<path>: <problem>" in err[errlen]. */
static int check_entries(const unsigned char *data, size_t size, Entries *e, const char *path,
                         char *err, size_t errlen) {
    if (size == 0) {
        snprintf(err, errlen, "%s: empty tokenizer file", path);
        return -1;
    }
    if (size < 4) {
        snprintf(err, errlen, "%s: truncated header (%zu bytes, need 4)", path, size);
        return -1;
    }
    int max_len = read_i32le(data);
    if (max_len <= 0 || max_len > MAX_TOKEN_LENGTH_LIMIT) {
        snprintf(err, errlen, "%s: bad max_token_length %d in header", path, max_len);
        return -1;
    }
    int count = 0;
    size_t text_bytes = 0;
    for (size_t pos = 4; pos < size; count++) {
        if (count == INT_MAX) {
            snprintf(err, errlen, "%s: too many pieces", path);
            return -1;
        }
        if (size - pos < 8) {
            snprintf(err, errlen,
                     "%s: truncated entry %d (score and length need 8 bytes, %zu left)", path,
                     count, size - pos);
            return -1;
        }
        /* encode's merge heap orders pairs by score: a NaN compares false both ways */
        float score = read_f32le(data + pos);
        if (score != score) {
            snprintf(err, errlen, "%s: score of entry %d is NaN", path, count);
            return -1;
        }
        int len = read_i32le(data + pos + 4);
        pos += 8;
        if (len < 0) {
            snprintf(err, errlen, "%s: negative piece length %d in entry %d", path, len, count);
            return -1;
        }
        if (len > max_len) {
            snprintf(err, errlen, "%s: piece length %d in entry %d exceeds max_token_length %d",
                     path, len, count, max_len);
            return -1;
        }
        if ((size_t)len > size - pos) {
            snprintf(err, errlen, "%s: piece length %d in entry %d runs past the end of the file",
                     path, len, count);
            return -1;
        }
        if (memchr(data + pos, '\0', (size_t)len)) {
            snprintf(err, errlen, "%s: piece in entry %d contains a NUL byte", path, count);
            return -1;
        }
        pos += (size_t)len;
        text_bytes += (size_t)len + 1;
    }
    if (count == 0) {
        snprintf(err, errlen, "%s: no pieces after the header", path);
        return -1;
    }
    *e = (Entries){max_len, count, text_bytes};
    return 0;
}

/* The piece table of e->count pieces taking e->text_bytes NUL-terminated: the block of texts, the
 * offsets, the scores and an index of twice as many slots, allocated (uninitialized). Returns -1
 * when out of memory. */
static int alloc_table(Tokenizer *t, const Entries *e) {
    t->pieces = malloc(e->text_bytes);
    t->piece_offsets = malloc(((size_t)e->count + 1) * sizeof *t->piece_offsets);
    t->vocab_scores = malloc((size_t)e->count * sizeof *t->vocab_scores);
    size_t slots = 16;
    while (slots < 2 * (size_t)e->count) slots *= 2;
    t->index = malloc(slots * sizeof *t->index);
    if (!t->pieces || !t->piece_offsets || !t->vocab_scores || !t->index) return -1;
    t->vocab_size = e->count;
    t->max_token_length = e->max_len;
    t->index_mask = slots - 1;
    return 0;
}

/* The second pass: the scores and the pieces, NUL-terminated, copied into one block, and an index
 * of twice as many slots allocated (uninitialized). Returns -1 when out of memory. */
static int copy_pieces(Tokenizer *t, const unsigned char *data, const Entries *e) {
    if (alloc_table(t, e) != 0) return -1;
    uint32_t offset = 0; /* fits: text_bytes < size <= MAX_TOKENIZER_BYTES */
    size_t pos = 4;
    for (int i = 0; i < e->count; i++) {
        t->vocab_scores[i] = read_f32le(data + pos);
        int len = read_i32le(data + pos + 4);
        pos += 8;
        memcpy(t->pieces + offset, data + pos, (size_t)len);
        t->pieces[offset + (uint32_t)len] = '\0';
        t->piece_offsets[i] = offset;
        offset += (uint32_t)len + 1;
        pos += (size_t)len;
    }
    t->piece_offsets[e->count] = offset;
    return 0;
}

/* Every piece must be distinct: an id that can never be produced, or a lookup that depends on
 * which copy wins, means the file is not a SentencePiece vocabulary. All pieces go into the index
 * to find two equal ones (index_pieces then empties it). Returns 0, or -1 naming the two ids. */
static int check_distinct(Tokenizer *t, const char *path, char *err, size_t errlen) {
    memset(t->index, 0xFF, (t->index_mask + 1) * sizeof *t->index); /* every slot -1 */
    for (int i = 0; i < t->vocab_size; i++) {
        size_t slot = index_find(t, piece_text(t, i), piece_len(t, i));
        if (t->index[slot] >= 0) {
            char shown[64];
            describe_piece(shown, sizeof shown, piece_text(t, i));
            snprintf(err, errlen, "%s: duplicate piece \"%s\" at ids %d and %d", path, shown,
                     t->index[slot], i);
            return -1;
        }
        t->index[slot] = i;
    }
    return 0;
}

/* The lookups encode and decode use: the index of the pieces text is made of, the byte pieces,
 * the ASCII characters' ids, and the two normalizer options the pieces imply. */
static void index_pieces(Tokenizer *t) {
    memset(t->index, 0xFF, (t->index_mask + 1) * sizeof *t->index);
    for (int b = 0; b < 256; b++) t->byte_tokens[b] = -1;
    t->split_at_spaces = 1;
    for (int i = 0; i < t->vocab_size; i++) {
        const char *piece = piece_text(t, i);
        int b = byte_piece_value(piece);
        if (b >= 0) t->byte_tokens[b] = i;
        if (!indexed(t, i)) continue;
        t->index[index_find(t, piece, piece_len(t, i))] = i;
        for (int k = 1; piece[k]; k++)
            if (piece[k] == ' ' && piece[k - 1] != ' ') t->split_at_spaces = 0;
    }
    t->remove_extra_whitespaces = 1;
    for (int i = 0; i < t->vocab_size && t->remove_extra_whitespaces; i++)
        if (strstr(piece_text(t, i), "  ")) t->remove_extra_whitespaces = 0;
    for (int b = 0; b < 256; b++) {
        t->byte_pieces[2 * b] = (char)b;
        t->byte_pieces[2 * b + 1] = '\0';
    }
    for (int c = 1; c < 0x80; c++) {
        char one = (char)c;
        t->ascii_ids[c] = piece_id(t, &one, 1);
    }
    t->ascii_ids[0] = -1;
}

/* The file's bytes (checked, then copied) into t's piece table. Returns 0, or -1 with "<name>:
 * <problem>" in err. */
static int read_entries(Tokenizer *t, const unsigned char *data, size_t size, const char *name,
                        char *err, size_t errlen) {
    Entries e;
    if (check_entries(data, size, &e, name, err, errlen) != 0) return -1;
    if (copy_pieces(t, data, &e) != 0) {
        snprintf(err, errlen, "%s: out of memory for %d pieces", name, e.count);
        return -1;
    }
    return 0;
}

/* The lookups of a filled piece table: the distinct check, the index, the normalizer options
 * (remove_extra_whitespaces as recorded, or -1: guessed), the merge table. On failure frees t.
 * Returns 0, or -1 with "<name>: <problem>" in err. */
static int finish(Tokenizer *t, int remove_extra_whitespaces, const char *name, char *err,
                  size_t errlen) {
    int rc = check_distinct(t, name, err, errlen);
    if (rc == 0) {
        index_pieces(t);
        if (remove_extra_whitespaces >= 0) t->remove_extra_whitespaces = remove_extra_whitespaces;
        if (tokenizer_build_merges(t) != 0) {
            snprintf(err, errlen, "%s: out of memory for the merge tables", name);
            rc = -1;
        }
    }
    if (rc != 0) tokenizer_free(t);
    return rc;
}

int tokenizer_load(Tokenizer *t, const char *path, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    size_t size;
    unsigned char *data = read_file(path, &size, err, errlen);
    if (!data) return -1;
    int rc = read_entries(t, data, size, path, err, errlen);
    /* the file's buffer goes before the tables are built (moving the pieces to its front and
     * shrinking it would save the copy, but freeing it lets glibc raise its mmap threshold to the
     * buffer's size: encode's per-call buffers for a text up to about that size then come from the
     * heap, rather than from fresh mappings faulted in on every call, which cost a quarter of
     * encode's time at 100 KB) */
    free(data);
    if (rc != 0) {
        tokenizer_free(t);
        return -1;
    }
    return finish(t, -1, path, err, errlen);
}

int tokenizer_load_bytes(Tokenizer *t, const unsigned char *data, size_t size, const char *name,
                         char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    if (size > MAX_TOKENIZER_BYTES) {
        snprintf(err, errlen, "%s: tokenizer is larger than %d MiB", name,
                 MAX_TOKENIZER_BYTES >> 20);
        return -1;
    }
    if (read_entries(t, data, size, name, err, errlen) != 0) {
        tokenizer_free(t);
        return -1;
    }
    return finish(t, -1, name, err, errlen);
}

/* ----------------------------------------------------------------------------
 * From arrays */

/* Checks the arrays as check_entries checks a file's entries, counting them into *e. */
static int check_pieces(const TokenizerPieces *p, Entries *e, const char *name, char *err,
                        size_t errlen) {
    if (p->vocab_size <= 0) {
        snprintf(err, errlen, "%s: no pieces in the vocabulary", name);
        return -1;
    }
    *e = (Entries){1, p->vocab_size, 0};
    for (int i = 0; i < p->vocab_size; i++) {
        size_t len = p->lengths[i];
        if (len > MAX_TOKEN_LENGTH_LIMIT) {
            snprintf(err, errlen, "%s: piece %d is %zu bytes, longer than %d", name, i, len,
                     MAX_TOKEN_LENGTH_LIMIT);
            return -1;
        }
        if (memchr(p->pieces[i], '\0', len)) {
            snprintf(err, errlen, "%s: piece %d contains a NUL byte", name, i);
            return -1;
        }
        if (p->scores[i] != p->scores[i]) {
            snprintf(err, errlen, "%s: score of piece %d is NaN", name, i);
            return -1;
        }
        if ((int)len > e->max_len) e->max_len = (int)len;
        e->text_bytes += len + 1;
        if (e->text_bytes > MAX_TOKENIZER_BYTES) {
            snprintf(err, errlen, "%s: the pieces take more than %d MiB", name,
                     MAX_TOKENIZER_BYTES >> 20);
            return -1;
        }
    }
    return 0;
}

int tokenizer_from_pieces(Tokenizer *t, const TokenizerPieces *p, const char *name, char *err,
                          size_t errlen) {
    memset(t, 0, sizeof *t);
    Entries e;
    if (check_pieces(p, &e, name, err, errlen) != 0) return -1;
    if (alloc_table(t, &e) != 0 || (p->not_text && !(t->not_text = malloc(e.count)))) {
        tokenizer_free(t);
        snprintf(err, errlen, "%s: out of memory for %d pieces", name, e.count);
        return -1;
    }
    uint32_t offset = 0; /* fits: text_bytes <= MAX_TOKENIZER_BYTES */
    for (int i = 0; i < e.count; i++) {
        t->vocab_scores[i] = p->scores[i];
        t->piece_offsets[i] = offset;
        memcpy(t->pieces + offset, p->pieces[i], p->lengths[i]);
        offset += (uint32_t)p->lengths[i];
        t->pieces[offset++] = '\0';
    }
    t->piece_offsets[e.count] = offset;
    if (p->not_text) memcpy(t->not_text, p->not_text, e.count);
    return finish(t, p->remove_extra_whitespaces, name, err, errlen);
}

/* ----------------------------------------------------------------------------
 * A GGUF's SentencePiece vocabulary */

/* llama_token_type's control and unused pieces, which text never becomes. */
#define GGUF_TOKEN_CONTROL 3
#define GGUF_TOKEN_UNUSED  5

/* A piece's text with each U+2581 (SentencePiece's space, e2 96 81) a space, into out (room for
 * s.len bytes); returns its length. */
static size_t plain_spaces(GgufString s, char *out) {
    size_t n = 0;
    for (uint64_t i = 0; i < s.len; i++) {
        if (i + 2 < s.len && memcmp(s.s + i, "\xe2\x96\x81", 3) == 0) {
            out[n++] = ' ';
            i += 2;
        } else {
            out[n++] = s.s[i];
        }
    }
    return n;
}

/* An optional array key of `type` into *out: NULL when absent, else read with the typed lookup;
 * the messages name the key. */
static int optional_array(const Gguf *g, const char *key, GgufValueType type, const GgufKV **out,
                          char *err, size_t errlen) {
    *out = NULL;
    if (!gguf_find(g, key)) return 0;
    return gguf_get_array(g, key, type, out, err, errlen);
}

/* 0 when the array (NULL: absent) has one element for each of the n tokens, else -1 and err. */
static int one_per_token(const GgufKV *kv, const char *key, uint64_t n, char *err, size_t errlen) {
    if (!kv || kv->n == n) return 0;
    snprintf(err, errlen, "%s has %llu elements, not one for each of the %llu tokens", key,
             (unsigned long long)kv->n, (unsigned long long)n);
    return -1;
}

/* The special ids this tokenizer takes (tokenizer.h's TOKEN_*): a GGUF's, when it names them, must
 * be these. Then the two normalizer options: the dummy prefix this encoder always adds, and
 * remove_extra_whitespaces into *remove (-1 when not recorded). */
static int check_gguf_options(const Gguf *g, int *remove, char *err, size_t errlen) {
    static const struct {
        const char *key;
        int id;
    } ids[] = {{"tokenizer.ggml.unknown_token_id", TOKEN_UNK},
               {"tokenizer.ggml.bos_token_id", TOKEN_BOS},
               {"tokenizer.ggml.eos_token_id", TOKEN_EOS}};
    for (int i = 0; i < 3; i++) {
        uint64_t v;
        if (!gguf_find(g, ids[i].key)) continue;
        if (gguf_get_uint(g, ids[i].key, &v, err, errlen) != 0) return -1;
        if (v != (uint64_t)ids[i].id) {
            snprintf(err, errlen,
                     "%s is %llu; this run's SentencePiece tokenizer takes <unk> 0, <s> 1, </s> 2",
                     ids[i].key, (unsigned long long)v);
            return -1;
        }
    }
    const GgufKV *kv = gguf_find(g, "tokenizer.ggml.add_space_prefix");
    if (kv && (kv->type != GGUF_BOOL || kv->value[0] != 1)) {
        snprintf(err, errlen,
                 "tokenizer.ggml.add_space_prefix is %s; this run's SentencePiece "
                 "encoder always adds the dummy prefix",
                 kv->type == GGUF_BOOL ? "false" : "not a bool");
        return -1;
    }
    *remove = -1;
    kv = gguf_find(g, "tokenizer.ggml.remove_extra_whitespaces");
    if (kv && kv->type != GGUF_BOOL) {
        snprintf(err, errlen, "tokenizer.ggml.remove_extra_whitespaces is a %s, not a bool",
                 gguf_value_type_name(kv->type));
        return -1;
    }
    if (kv) *remove = kv->value[0];
    return 0;
}

/* The tokenizer.ggml.* keys checked and read into p's arrays, which `owned` (one block) holds.
 * Returns 0, -1 with the problem in err, or -2 out of memory. */
static int gguf_pieces(const Gguf *g, TokenizerPieces *p, void **owned, char *err, size_t errlen) {
    GgufString model;
    if (gguf_get_string(g, "tokenizer.ggml.model", &model, err, errlen) != 0) return -1;
    if (model.len != 5 || memcmp(model.s, "llama", 5) != 0) {
        snprintf(err, errlen,
                 "tokenizer.ggml.model is %s; run reads SentencePiece (llama) and byte-level BPE "
                 "(gpt2) vocabularies",
                 gguf_shown(model).s);
        return -1;
    }
    const GgufKV *tokens, *scores, *types;
    if (gguf_get_array(g, "tokenizer.ggml.tokens", GGUF_STRING, &tokens, err, errlen) != 0 ||
        optional_array(g, "tokenizer.ggml.scores", GGUF_FLOAT32, &scores, err, errlen) != 0 ||
        one_per_token(scores, "tokenizer.ggml.scores", tokens->n, err, errlen) != 0 ||
        optional_array(g, "tokenizer.ggml.token_type", GGUF_INT32, &types, err, errlen) != 0 ||
        one_per_token(types, "tokenizer.ggml.token_type", tokens->n, err, errlen) != 0 ||
        check_gguf_options(g, &p->remove_extra_whitespaces, err, errlen) != 0)
        return -1;
    if (tokens->n > INT_MAX) {
        snprintf(err, errlen, "tokenizer.ggml.tokens has %llu pieces, too many",
                 (unsigned long long)tokens->n);
        return -1;
    }
    size_t n = (size_t)tokens->n, text = 0;
    GgufString *strings = malloc(n * sizeof(*strings) + 1);
    if (!strings) return -2;
    gguf_array_strings(tokens, strings);
    for (size_t i = 0; i < n; i++) {
        /* a U+2581 (3 bytes) becomes one: past this, the piece is too long whatever it holds */
        if (strings[i].len > 3 * MAX_TOKEN_LENGTH_LIMIT) {
            snprintf(err, errlen, "tokenizer.ggml.tokens: piece %zu is %llu bytes, longer than %d",
                     i, (unsigned long long)strings[i].len, MAX_TOKEN_LENGTH_LIMIT);
            free(strings);
            return -1;
        }
        text += strings[i].len; /* within the file: no overflow */
    }
    char *block = malloc(n * (sizeof(char *) + sizeof(size_t) + sizeof(float) + 1) + text + 1);
    if (!block) {
        free(strings);
        return -2;
    }
    const char **pieces = (const char **)block;
    size_t *lengths = (size_t *)(pieces + n);
    float *values = (float *)(lengths + n);
    unsigned char *not_text = (unsigned char *)(values + n);
    char *texts = (char *)(not_text + n);
    for (size_t i = 0; i < n; i++) {
        pieces[i] = texts;
        lengths[i] = plain_spaces(strings[i], texts);
        texts += lengths[i];
        values[i] = scores ? gguf_array_float(scores, i) : 0.0f;
        int32_t type = types ? gguf_array_int32(types, i) : 1;
        not_text[i] = i > TOKEN_EOS && (type == GGUF_TOKEN_CONTROL || type == GGUF_TOKEN_UNUSED);
    }
    free(strings);
    *p = (TokenizerPieces){(int)n, pieces, lengths, values, not_text, p->remove_extra_whitespaces};
    *owned = block;
    return 0;
}

int tokenizer_load_gguf(Tokenizer *t, const Gguf *g, const char *name, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    TokenizerPieces p;
    void *owned = NULL;
    char what[512];
    int rc = gguf_pieces(g, &p, &owned, what, sizeof(what));
    if (rc == -2) snprintf(what, sizeof(what), "out of memory for the vocabulary");
    if (rc != 0) {
        snprintf(err, errlen, "%s: %s", name, what);
        return -1;
    }
    rc = tokenizer_from_pieces(t, &p, name, err, errlen);
    free(owned);
    return rc;
}

int tokenizer_first_difference(const Tokenizer *a, const Tokenizer *b) {
    int n = a->vocab_size < b->vocab_size ? a->vocab_size : b->vocab_size;
    for (int i = 0; i < n; i++) {
        if (a->vocab_scores[i] != b->vocab_scores[i]) return i;
        if (i > TOKEN_EOS && (piece_len(a, i) != piece_len(b, i) ||
                              memcmp(piece_text(a, i), piece_text(b, i), piece_len(a, i)) != 0))
            return i;
    }
    return a->vocab_size == b->vocab_size ? -1 : n;
}

void tokenizer_free(Tokenizer *t) {
    free(t->pieces);
    free(t->piece_offsets);
    free(t->vocab_scores);
    free(t->index);
    free(t->merges);
    free(t->whole_piece);
    free(t->not_text);
    memset(t, 0, sizeof *t);
}
