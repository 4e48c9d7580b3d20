/* The piece table and its index, shared inside the tokenizer: tokenizer_load.c builds them from the
 * file, tokenizer.c encodes and decodes through them. Not for other files: tokenizer.h is the
 * tokenizer's interface. The layout of the table (pieces, piece_offsets, index) is tokenizer.h's
 * Tokenizer. */
#ifndef TOKENIZER_PIECES_H
#define TOKENIZER_PIECES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tokenizer.h"

/* Returns the byte b when piece is exactly "<0xXX>" (two upper-case hex digits, as SentencePiece
 * names its byte pieces), else -1. */
static inline int byte_piece_value(const char *piece) {
    static const char hex[] = "0123456789ABCDEF";
    if (strncmp(piece, "<0x", 3) != 0 || piece[3] == '\0' || piece[4] == '\0' || piece[5] != '>' ||
        piece[6] != '\0')
        return -1;
    const char *hi = strchr(hex, piece[3]), *lo = strchr(hex, piece[4]);
    if (!hi || !lo) return -1;
    return (int)(hi - hex) * 16 + (int)(lo - hex);
}

/* ----------------------------------------------------------------------------
 * The piece index: piece text -> id
 *
 * Open addressing with linear probing over ids (-1 = empty), a power of two of slots, at most half
 * full: 256 KiB for Llama 2's 32000 pieces. A slot holds only the id: a probe compares the text
 * in place, through piece_offsets. */

static inline const char *piece_text(const Tokenizer *t, int id) {
    return t->pieces + t->piece_offsets[id];
}

static inline size_t piece_len(const Tokenizer *t, int id) {
    return t->piece_offsets[id + 1] - t->piece_offsets[id] - 1;
}

/* The slot probing for s[0..len) starts at: FNV-1a of the bytes, spread to the high bits by a
 * Fibonacci multiply, where the slot is taken from. */
static inline size_t index_home(const Tokenizer *t, const char *s, size_t len) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001B3ull;
    return (size_t)((h * 0x9E3779B97F4A7C15ull) >> 32) & t->index_mask;
}

/* The slot of the piece s[0..len): the one holding its id, or the empty one where it would go. */
static inline size_t index_find(const Tokenizer *t, const char *s, size_t len) {
    size_t i = index_home(t, s, len);
    for (int id; (id = t->index[i]) >= 0; i = (i + 1) & t->index_mask)
        if (piece_len(t, id) == len && memcmp(piece_text(t, id), s, len) == 0) break;
    return i;
}

/* Id of the indexed piece s[0..len), or -1. */
static inline int piece_id(const Tokenizer *t, const char *s, size_t len) {
    return t->index[index_find(t, s, len)];
}

/* 1 if piece id belongs in the index. As SentencePiece's pieces_ map, it holds only the pieces
 * text can be made of: not the control pieces (ids 0..2, and those not_text marks), the byte
 * pieces (those are in byte_tokens) nor an empty piece, so a literal "<s>" or "<0x41>" in the text
 * is never merged into them. */
static inline int indexed(const Tokenizer *t, int id) {
    const char *piece = piece_text(t, id);
    return id > TOKEN_EOS && piece[0] != '\0' && byte_piece_value(piece) < 0 &&
           !(t->not_text && t->not_text[id]);
}

/* Fills the merge table and whole_piece from the loaded pieces (tokenizer.c, where the merges are
 * used). Returns 0, or -1 out of memory. */
int tokenizer_build_merges(Tokenizer *t);

#endif
