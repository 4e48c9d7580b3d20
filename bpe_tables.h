/* The lookups of byte-level BPE, shared inside it: bpe_load.c builds them, bpe.c encodes and
 * decodes through them. Not for other files: bpe.h is the tokenizer's interface; the tables'
 * layout is bpe.h's Bpe.
 *
 * Both are open addressing with linear probing, at most half full, over a power of two of
 * slots, and read-only once built, so that threads can encode with one Bpe at once (stb_ds's
 * maps write a temporary into the table on every lookup).
 *   - a token index: the token's bytes -> id, a slot holding only the id (-1 empty); a probe
 *     compares the bytes in place, through offsets;
 *   - the merge table: (left id, right id) -> the merge's rank and the id of the joined token.
 */
#ifndef BPE_TABLES_H
#define BPE_TABLES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "bpe.h"

struct BpeMerge {
    int32_t left, right; /* left -1: an empty slot */
    int32_t rank, id;
};

static inline const char *token_text(const Bpe *b, int id) {
    return b->text + b->offsets[id];
}

static inline size_t token_len(const Bpe *b, int id) {
    return b->offsets[id + 1] - b->offsets[id] - 1;
}

/* FNV-1a of the bytes, spread to the high bits by a Fibonacci multiply, where the slot is taken
 * from. */
static inline size_t text_home(const char *s, size_t len, size_t mask) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001B3ull;
    return (size_t)((h * 0x9E3779B97F4A7C15ull) >> 32) & mask;
}

/* The slot of s[0..len) in index: the one holding its id, or the empty one where it would go. */
static inline size_t index_slot(const Bpe *b, const int32_t *index, const char *s, size_t len) {
    size_t i = text_home(s, len, b->index_mask);
    for (int id; (id = index[i]) >= 0; i = (i + 1) & b->index_mask)
        if (token_len(b, id) == len && memcmp(token_text(b, id), s, len) == 0) break;
    return i;
}

static inline size_t merge_home(int32_t left, int32_t right, size_t mask) {
    uint64_t key = (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 40) & mask;
}

/* The slot of the pair (left, right): the one holding its merge, or the empty one. */
static inline size_t merge_slot(const Bpe *b, int32_t left, int32_t right) {
    size_t i = merge_home(left, right, b->merge_mask);
    while (b->merges[i].left >= 0 && !(b->merges[i].left == left && b->merges[i].right == right))
        i = (i + 1) & b->merge_mask;
    return i;
}

/* Length of the well-formed UTF-8 sequence at s[0..n) (1..4), or 0 if s[0] does not start one
 * (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, or cut short). */
static inline int utf8_sequence(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    int len = c >= 0xC2 && c <= 0xDF   ? 2
              : c >= 0xE0 && c <= 0xEF ? 3
              : c >= 0xF0 && c <= 0xF4 ? 4
                                       : 0;
    if (len == 0 || (size_t)len > n) return 0;
    for (int i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    /* the second byte's range after E0 (no overlong), ED (no surrogate), F0 (no overlong), F4
     * (not past U+10FFFF) */
    unsigned second = s[1];
    if ((c == 0xE0 && second < 0xA0) || (c == 0xED && second > 0x9F) ||
        (c == 0xF0 && second < 0x90) || (c == 0xF4 && second > 0x8F))
        return 0;
    return len;
}

#endif
