/* SentencePiece-style BPE encoding and decoding over the loaded piece table (tokenizer.h;
 * loading the file is tokenizer_load.c's).
 *
 * Encoding follows SentencePiece's bpe_model.cc: the text is cut into code points, each becomes a
 * symbol in a doubly linked list, and a binary heap ("agenda") holds every adjacent pair whose
 * concatenation is a piece, ordered by the piece's score (highest first), then by position
 * (leftmost first). Popping a pair that is stale (one side already merged away or grown) is
 * skipped instead of searching the heap for it: lazy invalidation keeps each merge O(log n).
 */
#include <ctype.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STB_DS_IMPLEMENTATION
#include <stb_ds.h>

#include "tokenizer.h"
#include "tokenizer_pieces.h"

/* ----------------------------------------------------------------------------
 * Encoding */

/* The merge table: (left id, right id) -> id of the piece BPE joins the two into. BPE only ever
 * joins two symbols that are pieces, so one integer lookup replaces hashing their concatenated
 * text.
 *
 * It holds one pair per piece, not every split of the piece into two pieces (Llama 2: 29612 pairs
 * instead of 61249). A symbol covers a span of the text that no merge has crossed (symbols never
 * split), so the merges inside the span ran in the order BPE of the span's text alone runs them:
 * that order depends only on the scores and relative positions of the pairs inside. A piece thus
 * only ever forms as BPE of its own text forms it, by that run's last merge, and only if the run
 * ends in the piece (a "whole" piece). The pair of that last merge is the one in the table; the
 * pair of any other split would only be pushed to be popped stale, so leaving it out changes no
 * result. tokenizer_build_merges fills the table.
 *
 * Open addressing with linear probing, at most 60% full (fuller, the probes for pairs that do not
 * merge grow long enough to slow encoding); id 0 (a control piece, never in the index) marks an
 * empty slot. A found pair takes its score from vocab_scores. */
struct Merge {
    int32_t left, right, id;
};

/* The slot probing for (left, right) starts at: a Fibonacci hash of the pair, its top 32 bits
 * scaled to [0, merge_slots) by a multiply (merge_slots < 2^32). */
static size_t merge_home(const Tokenizer *t, int left, int right) {
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    uint64_t hash = (key * 0x9E3779B97F4A7C15ull) >> 32;
    return (size_t)((hash * t->merge_slots) >> 32);
}

/* The merge of pieces left and right, or NULL if BPE never joins them. */
static const struct Merge *find_merge(const Tokenizer *t, int left, int right) {
    for (size_t i = merge_home(t, left, right);; i = i + 1 < t->merge_slots ? i + 1 : 0) {
        const struct Merge *m = &t->merges[i];
        if (m->id == 0) return NULL;
        if (m->left == left && m->right == right) return m;
    }
}

static void add_merge(Tokenizer *t, int left, int right, int id) {
    size_t i = merge_home(t, left, right);
    while (t->merges[i].id != 0) i = i + 1 < t->merge_slots ? i + 1 : 0;
    t->merges[i] = (struct Merge){left, right, id};
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
    Pair p = {t->vocab_scores[m->id], left, right, syms[left].len + syms[right].len, m->id};
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
static int bpe(const Tokenizer *t, const char *work, int n, Symbol *syms, Pair *heap, int *tokens) {
    /* Code points become symbols; ones the vocabulary lacks become frozen byte symbols. */
    int n_syms = 0;
    for (int pos = 0; pos < n;) {
        unsigned char c = (unsigned char)work[pos];
        int cp_len = utf8_length((const unsigned char *)work + pos), id;
        if (c < 0x80)
            id = t->ascii_ids[c];
        else
            id = piece_id(t, work + pos, (size_t)cp_len);
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

/* 1 if text can hold piece id: it is indexed and well-formed UTF-8, as normalized text is. */
static int formable(const Tokenizer *t, int id) {
    return indexed(t, id) && tokenizer_utf8_invalid_at(piece_text(t, id)) < 0;
}

/* Fills the merge table and the whole_piece bits by running BPE over the text of each formable
 * piece, shortest first. Such a run forms only shorter pieces before its last merge, and their
 * pairs are in the table by then, so it ends in one symbol (a piece of one character, whole), in
 * two symbols that are pieces (the last merge: whole, and the pair goes in the table), or
 * otherwise (the piece never forms). Returns 0, or -1 out of memory. */
int tokenizer_build_merges(Tokenizer *t) {
    size_t max_len = (size_t)t->max_token_length;
    size_t n_multi = 0; /* pieces of more than one character: the most pairs there can be */
    /* counting sort by length: shorter[len] = how many pieces to run are shorter than len */
    size_t *shorter = calloc(max_len + 2, sizeof *shorter);
    if (!shorter) return -1;
    for (int id = 0; id < t->vocab_size; id++) {
        if (!formable(t, id)) continue;
        size_t len = piece_len(t, id);
        shorter[len + 1]++;
        n_multi += (size_t)utf8_length((const unsigned char *)piece_text(t, id)) < len;
    }
    for (size_t len = 1; len <= max_len + 1; len++) shorter[len] += shorter[len - 1];
    size_t n_runs = shorter[max_len + 1];
    int *order = malloc((n_runs + 1) * sizeof *order);
    t->merge_slots = n_multi * 5 / 3 + 1; /* n_multi / 0.6, and one slot empty at least */
    t->merges = calloc(t->merge_slots, sizeof *t->merges);
    t->whole_piece = calloc(((size_t)t->vocab_size + 7) / 8, 1);
    Symbol *syms = malloc(max_len * sizeof *syms);
    Pair *heap = malloc(3 * max_len * sizeof *heap);
    int *ids = malloc(max_len * sizeof *ids);
    int ok = order && t->merges && t->whole_piece && syms && heap && ids;
    for (int id = 0; ok && id < t->vocab_size; id++)
        if (formable(t, id)) order[shorter[piece_len(t, id)]++] = id;
    for (size_t k = 0; ok && k < n_runs; k++) {
        int id = order[k];
        int n = bpe(t, piece_text(t, id), (int)piece_len(t, id), syms, heap, ids);
        int joined = n == 2 && indexed(t, ids[0]) && indexed(t, ids[1]); /* not byte pieces */
        if (joined) add_merge(t, ids[0], ids[1], id);
        if ((n == 1 && ids[0] == id) || joined)
            t->whole_piece[id / 8] |= (unsigned char)(1u << id % 8);
    }
    free(shorter);
    free(order);
    free(syms);
    free(heap);
    free(ids);
    return ok ? 0 : -1;
}

static int is_whole_piece(const Tokenizer *t, int id) {
    return t->whole_piece[id / 8] >> id % 8 & 1;
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

/* encode's buffers for a text of n normalized bytes whose longest segment is `longest`: bpe's
 * symbols and heap (longest and 3 longest entries), and room for 2n bytes of keys, the cached
 * segments, each NUL-terminated, which the cache's keys point to. */
typedef struct {
    Symbol *syms;
    Pair *heap;
    char *keys;
} Scratch;

/* BPE over each segment of the normalized text work[0..n) (see segment_end), short segments
 * from the cache; writes the ids into tokens and returns how many. */
static int encode_segments(const Tokenizer *t, char *work, int n, Scratch scratch, int *tokens) {
    Symbol *syms = scratch.syms;
    Pair *heap = scratch.heap;
    char *keys = scratch.keys;
    struct SegmentIds *cache = NULL;
    int n_tokens = 0;
    for (int start = 0, end; start < n; start = end) {
        end = segment_end(t, work, n, start);
        if (end - start > CACHED_SEGMENT_MAX) {
            n_tokens += bpe(t, work + start, end - start, syms, heap, tokens + n_tokens);
            continue;
        }
        int id = piece_id(t, work + start, (size_t)(end - start));
        if (id >= 0 && is_whole_piece(t, id)) {
            tokens[n_tokens++] = id;
            continue;
        }
        char saved = work[end];
        work[end] = '\0';
        ptrdiff_t slot = shgeti(cache, work + start);
        work[end] = saved;
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
        Scratch s = {malloc((size_t)longest * sizeof *s.syms),
                     malloc(3 * (size_t)longest * sizeof *s.heap), malloc(2 * (size_t)n + 1)};
        if (work && (n == 0 || (s.syms && s.heap && s.keys))) {
            n_tokens += encode_segments(t, work, n, s, tokens + n_tokens);
        } else {
            tokens[n_tokens++] = TOKEN_UNK; /* out of memory: nothing better to give */
        }
        free(work);
        free(s.syms);
        free(s.heap);
        free(s.keys);
    }
    if (eos) tokens[n_tokens++] = TOKEN_EOS;
    return n_tokens;
}

/* ----------------------------------------------------------------------------
 * Decoding */

const char *tokenizer_piece(const Tokenizer *t, int id) {
    return id >= 0 && id < t->vocab_size ? piece_text(t, id) : "";
}

const char *tokenizer_decode(const Tokenizer *t, int prev_token, int token) {
    const char *piece = tokenizer_piece(t, token);
    /* SentencePiece drops the dummy-prefix space of the first piece. */
    if (prev_token == TOKEN_BOS && piece[0] == ' ') piece++;
    int b = byte_piece_value(piece);
    if (b >= 0) piece = t->byte_pieces + 2 * b;
    return piece;
}

int tokenizer_piece_printed(const char *piece) {
    if (!piece || piece[0] == '\0') return 0;
    unsigned char c = (unsigned char)piece[0];
    /* a raw control byte; bytes from 0x80 up are parts of UTF-8 characters, so they print */
    return !(piece[1] == '\0' && c < 0x80 && !(isprint(c) || isspace(c)));
}

void tokenizer_print_piece(const char *piece) {
    if (tokenizer_piece_printed(piece)) fputs(piece, stdout);
}
