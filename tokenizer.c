/* SentencePiece-style BPE tokenizer over llama2.c's tokenizer file (see tokenizer.h).
 *
 * Encoding follows SentencePiece's bpe_model.cc: the text is cut into code points, each becomes a
 * symbol in a doubly linked list, and a binary heap ("agenda") holds every adjacent pair whose
 * concatenation is a piece, ordered by the piece's score (highest first), then by position
 * (leftmost first). Popping a pair that is stale (one side already merged away or grown) is
 * skipped instead of searching the heap for it: lazy invalidation keeps each merge O(log n).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STB_DS_IMPLEMENTATION
#include <stb/stb_ds.h>

#include "tokenizer.h"

/* The element type of the stb_ds string hash map: key is a piece (pointing into the tokenizer's
 * piece storage, not copied), value its id. */
struct PieceIndex {
    char *key;
    int value;
};

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

/* Returns the byte b when piece is exactly "<0xXX>" (two upper-case hex digits, as SentencePiece
 * names its byte pieces), else -1. */
static int byte_piece_value(const char *piece) {
    static const char hex[] = "0123456789ABCDEF";
    if (strncmp(piece, "<0x", 3) != 0 || piece[3] == '\0' || piece[4] == '\0' || piece[5] != '>' ||
        piece[6] != '\0')
        return -1;
    const char *hi = strchr(hex, piece[3]), *lo = strchr(hex, piece[4]);
    if (!hi || !lo) return -1;
    return (int)(hi - hex) * 16 + (int)(lo - hex);
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

static int build_merges(Tokenizer *t);
static int mark_whole_pieces(Tokenizer *t);
static int piece_id(const Tokenizer *t, const char *s);

int tokenizer_load(Tokenizer *t, const char *path, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    size_t size;
    unsigned char *data = read_file(path, &size, err, errlen);
    if (!data) return -1;

    if (size == 0) {
        snprintf(err, errlen, "%s: empty tokenizer file", path);
        goto fail;
    }
    if (size < 4) {
        snprintf(err, errlen, "%s: truncated header (%zu bytes, need 4)", path, size);
        goto fail;
    }
    int max_len = read_i32le(data);
    if (max_len <= 0 || max_len > MAX_TOKEN_LENGTH_LIMIT) {
        snprintf(err, errlen, "%s: bad max_token_length %d in header", path, max_len);
        goto fail;
    }

    /* First pass: validate every entry and count them, so the second pass cannot fail. */
    int count = 0;
    size_t text_bytes = 0;
    for (size_t pos = 4; pos < size; count++) {
        if (count == INT_MAX) {
            snprintf(err, errlen, "%s: too many pieces", path);
            goto fail;
        }
        if (size - pos < 8) {
            snprintf(err, errlen,
                     "%s: truncated entry %d (score and length need 8 bytes, %zu left)", path,
                     count, size - pos);
            goto fail;
        }
        int len = read_i32le(data + pos + 4);
        pos += 8;
        if (len < 0) {
            snprintf(err, errlen, "%s: negative piece length %d in entry %d", path, len, count);
            goto fail;
        }
        if (len > max_len) {
            snprintf(err, errlen, "%s: piece length %d in entry %d exceeds max_token_length %d",
                     path, len, count, max_len);
            goto fail;
        }
        if ((size_t)len > size - pos) {
            snprintf(err, errlen, "%s: piece length %d in entry %d runs past the end of the file",
                     path, len, count);
            goto fail;
        }
        if (memchr(data + pos, '\0', (size_t)len)) {
            snprintf(err, errlen, "%s: piece in entry %d contains a NUL byte", path, count);
            goto fail;
        }
        pos += (size_t)len;
        text_bytes += (size_t)len + 1;
    }
    if (count == 0) {
        snprintf(err, errlen, "%s: no pieces after the header", path);
        goto fail;
    }

    /* Second pass: copy the pieces, NUL-terminated, into one block. */
    t->vocab = malloc((size_t)count * sizeof *t->vocab);
    t->vocab_scores = malloc((size_t)count * sizeof *t->vocab_scores);
    t->piece_storage = malloc(text_bytes);
    if (!t->vocab || !t->vocab_scores || !t->piece_storage) {
        snprintf(err, errlen, "%s: out of memory for %d pieces", path, count);
        goto fail;
    }
    t->vocab_size = count;
    t->max_token_length = max_len;
    char *text = t->piece_storage;
    size_t pos = 4;
    for (int i = 0; i < count; i++) {
        t->vocab_scores[i] = read_f32le(data + pos);
        int len = read_i32le(data + pos + 4);
        pos += 8;
        memcpy(text, data + pos, (size_t)len);
        text[len] = '\0';
        t->vocab[i] = text;
        text += len + 1;
        pos += (size_t)len;
    }
    free(data);
    data = NULL;

    /* Every piece must be distinct: an id that can never be produced, or a lookup that depends
     * on which copy wins, means the file is not a SentencePiece vocabulary. */
    struct PieceIndex *seen = NULL;
    for (int i = 0; i < count; i++) {
        ptrdiff_t slot = shgeti(seen, t->vocab[i]);
        if (slot >= 0) {
            char shown[64];
            describe_piece(shown, sizeof shown, t->vocab[i]);
            snprintf(err, errlen, "%s: duplicate piece \"%s\" at ids %d and %d", path, shown,
                     seen[slot].value, i);
            shfree(seen);
            goto fail;
        }
        shput(seen, t->vocab[i], i);
    }
    shfree(seen);

    /* Index: as SentencePiece's pieces_ map, only the pieces text can be made of. The control
     * pieces (ids 0..2) and the byte pieces are left out, so a literal "<s>" or "<0x41>" in the
     * text is never merged into them. */
    for (int b = 0; b < 256; b++) t->byte_tokens[b] = -1;
    t->split_at_spaces = 1;
    for (int i = 0; i < count; i++) {
        const char *piece = t->vocab[i];
        int b = byte_piece_value(piece);
        if (b >= 0) {
            t->byte_tokens[b] = i;
            continue;
        }
        if (i <= TOKEN_EOS || piece[0] == '\0') continue;
        shput(t->index, piece, i);
        for (int k = 1; piece[k]; k++)
            if (piece[k] == ' ' && piece[k - 1] != ' ') t->split_at_spaces = 0;
    }
    t->remove_extra_whitespaces = 1;
    for (int i = 0; i < count && t->remove_extra_whitespaces; i++)
        if (strstr(t->vocab[i], "  ")) t->remove_extra_whitespaces = 0;
    for (int b = 0; b < 256; b++) {
        t->byte_pieces[2 * b] = (char)b;
        t->byte_pieces[2 * b + 1] = '\0';
    }
    for (int c = 1; c < 0x80; c++) {
        char one[2] = {(char)c, '\0'};
        t->ascii_ids[c] = piece_id(t, one);
    }
    t->ascii_ids[0] = -1;
    if (build_merges(t) != 0 || mark_whole_pieces(t) != 0) {
        snprintf(err, errlen, "%s: out of memory for the merge tables", path);
        goto fail;
    }
    return 0;

fail:
    free(data);
    tokenizer_free(t);
    return -1;
}

void tokenizer_free(Tokenizer *t) {
    free(t->vocab);
    free(t->vocab_scores);
    free(t->piece_storage);
    shfree(t->index);
    free(t->merges);
    free(t->whole_piece);
    memset(t, 0, sizeof *t);
}

/* ----------------------------------------------------------------------------
 * Encoding */

/* Id of the NUL-terminated piece s, or -1. Uses stb_ds's _ts lookup, which does not write into
 * the map (plain shgeti stores its result in the map's header), so encode can take a const
 * Tokenizer and be called from several threads. */
static int piece_id(const Tokenizer *t, const char *s) {
    if (!t->index) return -1; /* stb_ds would allocate on a lookup in an empty map */
    ptrdiff_t slot;
    stbds_hmget_key_ts(t->index, sizeof *t->index, (void *)(uintptr_t)s, sizeof t->index->key,
                       &slot, STBDS_HM_STRING);
    return slot < 0 ? -1 : t->index[slot].value;
}

/* The merge table: for every piece that splits into two pieces, the key (left id, right id)
 * gives the piece's id and score. BPE only ever joins two symbols that are pieces, and their
 * concatenation is a piece exactly when the table has their ids, so one integer lookup replaces
 * hashing the concatenated string. Open addressing with linear probing, at most half full; key 0
 * (the control piece 0 twice, never in the index) marks an empty slot. The score sits in the slot
 * (16 bytes either way) to save a second cache miss into vocab_scores. */
struct Merge {
    uint64_t key;
    int id;
    float score;
};

static uint64_t merge_key(int left, int right) {
    return (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
}

static size_t merge_slot(const Tokenizer *t, uint64_t key) {
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & t->merge_mask; /* Fibonacci hashing */
}

/* The slot of the merge of pieces left and right, or NULL if their concatenation is no piece. */
static const struct Merge *find_merge(const Tokenizer *t, int left, int right) {
    uint64_t key = merge_key(left, right);
    for (size_t i = merge_slot(t, key);; i = (i + 1) & t->merge_mask) {
        if (t->merges[i].key == key) return &t->merges[i];
        if (t->merges[i].key == 0) return NULL;
    }
}

/* Fills t->merges from the index: each indexed piece against each split into two indexed
 * pieces. Splits into lengths no piece has are skipped, which keeps a hostile file of long pieces
 * from costing the square of its size. Returns 0, or -1 out of memory. */
static int build_merges(Tokenizer *t) {
    struct Merge *found = NULL; /* stb_ds array */
    char *half = malloc((size_t)t->max_token_length + 1);
    char *has_len = calloc((size_t)t->max_token_length + 1, 1);
    if (!half || !has_len) {
        free(half);
        free(has_len);
        return -1;
    }
    for (ptrdiff_t i = 0; i < shlen(t->index); i++) has_len[strlen(t->index[i].key)] = 1;
    for (ptrdiff_t i = 0; i < shlen(t->index); i++) {
        const char *piece = t->index[i].key;
        size_t len = strlen(piece);
        for (size_t k = 1; k < len; k++) {
            if (!has_len[k] || !has_len[len - k]) continue;
            memcpy(half, piece, k);
            half[k] = '\0';
            int left = piece_id(t, half), right = piece_id(t, piece + k);
            if (left >= 0 && right >= 0)
                arrput(found, ((struct Merge){merge_key(left, right), t->index[i].value,
                                              t->vocab_scores[t->index[i].value]}));
        }
    }
    free(half);
    free(has_len);
    size_t cap = 16;
    while (cap < 2 * (size_t)arrlen(found)) cap *= 2;
    t->merges = calloc(cap, sizeof *t->merges);
    if (!t->merges) {
        arrfree(found);
        return -1;
    }
    t->merge_mask = cap - 1;
    for (ptrdiff_t j = 0; j < arrlen(found); j++) {
        size_t i = merge_slot(t, found[j].key);
        while (t->merges[i].key != 0) i = (i + 1) & t->merge_mask;
        t->merges[i] = found[j];
    }
    arrfree(found);
    return 0;
}

/* Length of the well-formed UTF-8 sequence at s (1..4), or 0 if s[0] does not start one
 * (stray continuation byte, overlong form, surrogate, above U+10FFFF, or cut short). */
static int utf8_length(const unsigned char *s) {
    unsigned c = s[0];
    int n;
    unsigned cp;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF)
        n = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4)
        n = 4, cp = c & 0x07;
    else
        return 0;
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0; /* also stops at the terminating NUL */
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

long tokenizer_utf8_invalid_at(const char *text) {
    const unsigned char *s = (const unsigned char *)text;
    for (long pos = 0; s[pos];) {
        int len = utf8_length(s + pos);
        if (len == 0) return pos;
        pos += len;
    }
    return -1;
}

/* A symbol is a span of the working text; merged-away symbols have len 0. */
typedef struct {
    int start, len;
    int prev, next; /* neighbours in the list, -1 at the ends */
    int id;
    int frozen; /* a byte-fallback byte: never merges (SentencePiece's byte pieces are not in
                   its piece map) */
} Symbol;

/* A candidate merge of symbols left and right into piece id. len is their total length when the
 * pair was made; if it no longer matches, one side has changed and the pair is stale. */
typedef struct {
    float score;
    int left, right;
    int len;
    int id;
} Pair;

/* Heap order: higher score first, then the leftmost pair (SymbolPairComparator in bpe_model.cc;
 * symbol indices grow left to right, so "leftmost" is "smaller left index"). */
static int pair_before(const Pair *a, const Pair *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void heap_push(Pair *heap, int *n, Pair p) {
    int i = (*n)++;
    while (i > 0) {
        int parent = (i - 1) / 2;
        if (!pair_before(&p, &heap[parent])) break;
        heap[i] = heap[parent];
        i = parent;
    }
    heap[i] = p;
}

static Pair heap_pop(Pair *heap, int *n) {
    Pair top = heap[0], last = heap[--*n];
    int i = 0;
    for (;;) {
        int child = 2 * i + 1;
        if (child >= *n) break;
        if (child + 1 < *n && pair_before(&heap[child + 1], &heap[child])) child++;
        if (!pair_before(&heap[child], &last)) break;
        heap[i] = heap[child];
        i = child;
    }
    if (*n > 0) heap[i] = last;
    return top;
}

/* Pushes the pair (left, right) if their concatenation is a piece. */
static void try_pair(const Tokenizer *t, const Symbol *syms, int left, int right, Pair *heap,
                     int *n_heap) {
    if (left < 0 || right < 0 || syms[left].frozen || syms[right].frozen) return;
    const struct Merge *m = find_merge(t, syms[left].id, syms[right].id);
    if (!m) return;
    Pair p = {m->score, left, right, syms[left].len + syms[right].len, m->id};
    heap_push(heap, n_heap, p);
}

/* SentencePiece's normalizer for these vocabularies (identity rules), from text into work (room
 * for 3 * strlen(text) + 2 bytes); returns the normalized length. In order of effect:
 *  - a byte that does not start well-formed UTF-8 becomes U+FFFD (what SentencePiece's
 *    normalizer does, consuming one byte);
 *  - with remove_extra_whitespaces, leading spaces go and runs of spaces become one (U+0020
 *    only, as SentencePiece);
 *  - a literal U+2581 becomes a space: SentencePiece escapes spaces as U+2581 after the steps
 *    above, so it cannot tell the two apart afterwards, and the .bin's pieces use plain spaces;
 *  - the dummy prefix: a space before the text;
 *  - with remove_extra_whitespaces, trailing spaces (escaped ones and U+2581 alike) go. */
static int normalize(const Tokenizer *t, const char *text, char *work) {
    const unsigned char *s = (const unsigned char *)text;
    int squeeze = t->remove_extra_whitespaces;
    int n = 0, prev_space = 1; /* at the start, leading spaces are squeezed away */
    work[n++] = ' ';
    while (*s) {
        if (*s == ' ') {
            if (!(squeeze && prev_space)) work[n++] = ' ';
            prev_space = 1;
            s++;
            continue;
        }
        prev_space = 0;
        int len = utf8_length(s);
        if (len == 0) {
            memcpy(work + n, "\xEF\xBF\xBD", 3);
            n += 3;
            s++;
        } else if (len == 3 && memcmp(s, "\xE2\x96\x81", 3) == 0) {
            work[n++] = ' ';
            s += 3;
        } else {
            memcpy(work + n, s, (size_t)len);
            n += len;
            s += len;
        }
    }
    /* SentencePiece strips trailing spaces after escaping them, so a trailing U+2581 and the
     * dummy prefix of a text of nothing else go too. */
    if (squeeze)
        while (n > 0 && work[n - 1] == ' ') n--;
    work[n] = '\0';
    return n;
}

/* SentencePiece's BPE over the normalized, well-formed UTF-8 span work[0..n), n > 0: writes the
 * ids into tokens and returns how many. syms and heap have room for n and 3n entries. */
static int bpe(const Tokenizer *t, char *work, int n, Symbol *syms, Pair *heap, int *tokens) {
    /* Code points become symbols; ones the vocabulary lacks become frozen byte symbols. */
    int n_syms = 0;
    for (int pos = 0; pos < n;) {
        unsigned char c = (unsigned char)work[pos];
        int cp_len = utf8_length((const unsigned char *)work + pos), id;
        if (c < 0x80) {
            id = t->ascii_ids[c];
        } else {
            char saved = work[pos + cp_len];
            work[pos + cp_len] = '\0';
            id = piece_id(t, work + pos);
            work[pos + cp_len] = saved;
        }
        if (id >= 0) {
            syms[n_syms] = (Symbol){pos, cp_len, n_syms - 1, n_syms + 1, id, 0};
            n_syms++;
            pos += cp_len;
            continue;
        }
        for (int i = 0; i < cp_len; i++, pos++) {
            int b = (unsigned char)work[pos];
            int byte_id = t->byte_tokens[b] >= 0 ? t->byte_tokens[b] : TOKEN_UNK;
            syms[n_syms] = (Symbol){pos, 1, n_syms - 1, n_syms + 1, byte_id, 1};
            n_syms++;
        }
    }
    syms[n_syms - 1].next = -1;

    /* n - 1 initial pairs, and each of the at most n - 1 merges pushes at most 2: 3n. */
    int n_heap = 0;
    for (int i = 0; i + 1 < n_syms; i++) try_pair(t, syms, i, i + 1, heap, &n_heap);
    while (n_heap > 0) {
        Pair p = heap_pop(heap, &n_heap);
        Symbol *l = &syms[p.left], *r = &syms[p.right];
        if (l->len == 0 || r->len == 0 || l->len + r->len != p.len) continue; /* stale */
        l->len = p.len;
        l->id = p.id;
        l->next = r->next;
        if (r->next >= 0) syms[r->next].prev = p.left;
        r->len = 0;
        try_pair(t, syms, l->prev, p.left, heap, &n_heap);
        try_pair(t, syms, p.left, l->next, heap, &n_heap);
    }

    int n_tokens = 0;
    for (int i = 0; i >= 0; i = syms[i].next) tokens[n_tokens++] = syms[i].id;
    return n_tokens;
}

/* Sets t->whole_piece[id] for each indexed piece that BPE, given the piece's text alone,
 * encodes as that one piece: a segment equal to such a piece needs no BPE. Most frequent words
 * are such pieces. Returns 0, or -1 out of memory. */
static int mark_whole_pieces(Tokenizer *t) {
    size_t max_len = (size_t)t->max_token_length;
    t->whole_piece = calloc((size_t)t->vocab_size, 1);
    char *text = malloc(max_len + 1);
    Symbol *syms = malloc(max_len * sizeof *syms);
    Pair *heap = malloc(3 * max_len * sizeof *heap);
    int *ids = malloc(max_len * sizeof *ids);
    int ok = t->whole_piece && text && syms && heap && ids;
    for (ptrdiff_t i = 0; ok && i < shlen(t->index); i++) {
        const char *piece = t->index[i].key;
        int len = (int)strlen(piece);
        if (tokenizer_utf8_invalid_at(piece) >= 0) continue; /* bpe takes well-formed text */
        memcpy(text, piece, (size_t)len + 1);
        t->whole_piece[t->index[i].value] =
            bpe(t, text, len, syms, heap, ids) == 1 && ids[0] == t->index[i].value;
    }
    free(text);
    free(syms);
    free(heap);
    free(ids);
    return ok ? 0 : -1;
}

/* Where the next segment after work[start] begins: a space that follows a non-space, or n. With
 * t->split_at_spaces no piece holds a non-space followed by a space, so no merge can cross such a
 * point and BPE on each segment alone gives the ids BPE on the whole text gives. Without it the
 * whole text is one segment. */
static int segment_end(const Tokenizer *t, const char *work, int n, int start) {
    if (!t->split_at_spaces) return n;
    for (int p = start + 1; p < n; p++)
        if (work[p] == ' ' && work[p - 1] != ' ') return p;
    return n;
}

/* Segments no longer than this are remembered during one encode: in prose most are words that
 * come back again and again, and BPE of a segment depends only on its bytes. */
#define CACHED_SEGMENT_MAX 32

/* The element type of the per-call segment cache (stb_ds string map): the segment's ids are
 * tokens[first .. first + count), written when it first appeared. */
typedef struct {
    int first, count;
} IdSpan;

struct SegmentIds {
    char *key;
    IdSpan value;
};

/* BPE over each segment of the normalized text work[0..n) (see segment_end), short segments
 * from the cache; writes the ids into tokens and returns how many. keys has room for 2n bytes:
 * the cached segments, each NUL-terminated, which the cache's keys point to. */
static int encode_segments(const Tokenizer *t, char *work, int n, Symbol *syms, Pair *heap,
                           char *keys, int *tokens) {
    struct SegmentIds *cache = NULL;
    int n_tokens = 0;
    for (int start = 0, end; start < n; start = end) {
        end = segment_end(t, work, n, start);
        if (end - start > CACHED_SEGMENT_MAX) {
            n_tokens += bpe(t, work + start, end - start, syms, heap, tokens + n_tokens);
            continue;
        }
        char saved = work[end];
        work[end] = '\0';
        int id = piece_id(t, work + start);
        ptrdiff_t slot = id >= 0 && t->whole_piece[id] ? -1 : shgeti(cache, work + start);
        work[end] = saved;
        if (id >= 0 && t->whole_piece[id]) {
            tokens[n_tokens++] = id;
            continue;
        }
        if (slot >= 0) {
            memcpy(tokens + n_tokens, tokens + cache[slot].value.first,
                   (size_t)cache[slot].value.count * sizeof *tokens);
            n_tokens += cache[slot].value.count;
            continue;
        }
        int count = bpe(t, work + start, end - start, syms, heap, tokens + n_tokens);
        memcpy(keys, work + start, (size_t)(end - start));
        keys[end - start] = '\0';
        shput(cache, keys, ((IdSpan){n_tokens, count}));
        keys += end - start + 1;
        n_tokens += count;
    }
    shfree(cache);
    return n_tokens;
}

int tokenizer_encode(const Tokenizer *t, const char *text, int bos, int eos, int *tokens) {
    int n_tokens = 0;
    if (bos) tokens[n_tokens++] = TOKEN_BOS;
    size_t text_len = strlen(text);
    if (text_len > 0) {
        /* the normalized text (up to 3 bytes per input byte) and every count must fit an int */
        char *work = text_len < (size_t)INT_MAX / 3 - 3 ? malloc(3 * text_len + 2) : NULL;
        int n = work ? normalize(t, text, work) : 0;
        int longest = 0;
        for (int start = 0, end; start < n; start = end) {
            end = segment_end(t, work, n, start);
            if (end - start > longest) longest = end - start;
        }
        Symbol *syms = malloc((size_t)longest * sizeof *syms);
        Pair *heap = malloc(3 * (size_t)longest * sizeof *heap);
        char *keys = malloc(2 * (size_t)n + 1);
        if (work && (n == 0 || (syms && heap && keys))) {
            n_tokens += encode_segments(t, work, n, syms, heap, keys, tokens + n_tokens);
        } else {
            tokens[n_tokens++] = TOKEN_UNK; /* out of memory: nothing better to give */
        }
        free(work);
        free(syms);
        free(heap);
        free(keys);
    }
    if (eos) tokens[n_tokens++] = TOKEN_EOS;
    return n_tokens;
}

/* ----------------------------------------------------------------------------
 * Decoding */

const char *tokenizer_decode(const Tokenizer *t, int prev_token, int token) {
    if (token < 0 || token >= t->vocab_size) return "";
    const char *piece = t->vocab[token];
    /* SentencePiece drops the dummy-prefix space of the first piece. */
    if (prev_token == TOKEN_BOS && piece[0] == ' ') piece++;
    int b = byte_piece_value(piece);
    if (b >= 0) piece = t->byte_pieces + 2 * b;
    return piece;
}

void tokenizer_print_piece(const char *piece) {
    if (!piece || piece[0] == '\0') return;
    if (piece[1] == '\0') {
        unsigned char c = (unsigned char)piece[0];
        /* a raw control byte; bytes from 0x80 up are parts of UTF-8 characters, so they print */
        if (c < 0x80 && !(isprint(c) || isspace(c))) return;
    }
    fputs(piece, stdout);
}
