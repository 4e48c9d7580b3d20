/* SentencePiece-style BPE tokenizer over llama2.c's tokenizer file, or over the same vocabulary
 * held elsewhere: a model file's own (a normllama tokenizer section, a GGUF's tokenizer.ggml.*
 * keys) or any array of pieces.
 *
 * File layout (little-endian), as llama2.c's tokenizer.py writes it:
 *   int32 max_token_length
 *   vocab_size times: float32 score, int32 len, len bytes of the piece (no terminator)
 * The file does not store vocab_size: it is the number of entries up to the end of the file.
 * Ids 0, 1, 2 are <unk>, <s> (BOS) and </s> (EOS); ids 3..258 are the byte pieces <0x00>..<0xFF>.
 */
#ifndef TOKENIZER_H
#define TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

#define TOKEN_UNK 0
#define TOKEN_BOS 1
#define TOKEN_EOS 2

struct Merge; /* private: (left id, right id) -> merged id */

typedef struct {
    char *pieces;            /* all vocab_size pieces, each NUL-terminated, back to back */
    uint32_t *piece_offsets; /* vocab_size + 1 offsets: piece i is pieces + piece_offsets[i],
                                piece_offsets[i + 1] - piece_offsets[i] - 1 bytes long */
    float *vocab_scores;     /* vocab_size merge scores: higher merges first */
    int vocab_size;
    int max_token_length;
    int byte_tokens[256]; /* id of the piece <0xXX> for each byte, -1 if the vocabulary lacks it */
    /* SentencePiece's normalizer option remove_extra_whitespaces, which the file does not store:
     * 1 = drop leading and trailing spaces and squeeze runs of spaces (U+0020 only) to one before
     * encoding. A vocabulary that records it (a normllama tokenizer section, a GGUF's
     * tokenizer.ggml.remove_extra_whitespaces) sets it; otherwise tokenizer_load guesses 1 when no
     * piece holds two spaces in a row: the normalizer then never let "  " reach the trainer, as
     * for the vocabularies llama2.c trains (tok512: remove_extra_whitespaces true), while Llama
     * 2's (false) has the piece "  " (a vocabulary trained with the option off that has no such
     * piece is guessed wrong: only the record tells). Set it after loading to override.
     * llama2.c's encode behaves as 0. */
    int remove_extra_whitespaces;
    /* private */
    int split_at_spaces;     /* 1 if no piece holds a non-space followed by a space (see encode) */
    unsigned char *not_text; /* NULL, or vocab_size flags: control and unused pieces past id 2
                                (tokenizer_from_pieces), which text never becomes */
    int ascii_ids[128];      /* id of each ASCII character's piece, -1 if none */
    int32_t *index;          /* piece text -> id: open addressing, index_mask + 1 ids, -1 = empty */
    size_t index_mask;
    struct Merge *merges; /* open-addressing table of merge_slots slots */
    size_t merge_slots;
    unsigned char *whole_piece; /* vocab_size bits: BPE of the piece's text alone gives the piece */
    char byte_pieces[512];      /* byte b as the string byte_pieces + 2 * b, returned by decode */
} Tokenizer;

/* Loads the tokenizer file at `path` into `t` (all fields owned by `t`).
 * Returns 0 on success. On failure returns -1, leaves `t` empty (zeroed, safe to free), and writes
 * a one-line message naming the file and the problem into err[errlen]: missing or unreadable
 * file, empty file, a file (or endless device or pipe) over 64 MiB, header shorter than 4 bytes,
 * header max_token_length <= 0 or > 65536, an entry whose score/length is cut short, a piece length
 * that is negative, above max_token_length or past the end of the file, a piece holding a NUL byte,
 * a NaN score, two equal pieces, no pieces at all. Never reads past the end of the file. The lookup
 * index holds the pieces text can be made of, as SentencePiece's piece map does: not the control
 * pieces (ids 0..2) nor the byte pieces "<0xXX>" (those are in byte_tokens). */
int tokenizer_load(Tokenizer *t, const char *path, char *err, size_t errlen);

/* tokenizer_load on the file's bytes data[0..size) (size <= 64 MiB), already in memory: a
 * normllama file's tokenizer section. `name` stands for the file in messages. */
int tokenizer_load_bytes(Tokenizer *t, const unsigned char *data, size_t size, const char *name,
                         char *err, size_t errlen);

/* A vocabulary given as arrays, in the tokenizer file's convention (spaces plain): vocab_size
 * pieces (pieces[i] of lengths[i] bytes, no NUL inside), their scores, and optionally which are
 * not text (not_text: control and unused pieces past id 2; NULL: none). remove_extra_whitespaces
 * 1 or 0 as the vocabulary records it, -1 to guess as tokenizer_load does. */
typedef struct {
    int vocab_size;
    const char *const *pieces;
    const size_t *lengths;
    const float *scores;
    const unsigned char *not_text;
    int remove_extra_whitespaces;
} TokenizerPieces;

/* Builds t from p (copied: t owns what it holds). The same checks as tokenizer_load (no pieces, a
 * NUL in a piece, a NaN score, two equal pieces), the messages naming `name`. Returns 0, or -1
 * with t empty and the message in err. */
int tokenizer_from_pieces(Tokenizer *t, const TokenizerPieces *p, const char *name, char *err,
                          size_t errlen);

/* The SentencePiece vocabulary of a GGUF file (gguf.h; `name` for messages), as llama.cpp's
 * "llama" tokenizer reads it: tokenizer.ggml.model "llama", tokenizer.ggml.tokens (U+2581 for a
 * space, as SentencePiece writes it), .scores (float32, 0 when absent), .token_type (int32:
 * 3 control and 5 unused pieces are not text; absent: all normal), .bos_token_id 1,
 * .eos_token_id 2 and .unknown_token_id 0 when present (the ids this tokenizer takes),
 * .add_space_prefix true when present, .remove_extra_whitespaces (absent: guessed). Returns 0,
 * or -1 with a one-line message naming the key. */
int tokenizer_load_gguf(Tokenizer *t, const Gguf *g, const char *name, char *err, size_t errlen);

/* The first id at which two vocabularies differ, in piece or score (ids 0..2 compared by score
 * alone: a file writes <s> as "\n<s>\n" where a GGUF writes "<s>"), or -1 when they agree;
 * vocab_size when one is longer. */
int tokenizer_first_difference(const Tokenizer *a, const Tokenizer *b);

/* Frees what tokenizer_load allocated; safe on an empty or already-freed tokenizer. */
void tokenizer_free(Tokenizer *t);

/* Encodes UTF-8 `text` into ids as SentencePiece's BPE (bpe_model.cc, normalizer.cc) does for
 * the Llama 2 style vocabularies: optional BOS; the text normalized (each byte that does not start
 * well-formed UTF-8 becomes U+FFFD, as SentencePiece does; spaces squeezed as
 * t->remove_extra_whitespaces says; a literal U+2581 taken as a space, as SentencePiece cannot
 * tell it from an escaped space; a dummy-prefix space before the text if anything is left); every
 * code point mapped to its piece or, when the vocabulary lacks it, to its UTF-8 bytes as <0xXX>
 * pieces; then merges of adjacent pairs whose concatenation is a piece, highest score first,
 * leftmost first among equal scores; optional EOS. The ids equal SentencePieceProcessor.encode's
 * (tests/tokenizer_parity.py checks >1000 strings, invalid UTF-8 included).
 * `tokens` must hold strlen(text) + 3 ids if text is well-formed UTF-8, else 3 * strlen(text) + 3
 * (an invalid byte can become the three byte pieces of U+FFFD). Returns the number of ids written.
 *
 * Algorithm: SentencePiece's (linked list of symbols, binary heap of candidate pairs with lazy
 * invalidation), O(n log n) in the text length, with pairs looked up by their two ids in a merge
 * table made at load. It runs on each stretch between a non-space and a space separately when no
 * piece spans such a point (true of both Llama 2 vocabularies), which gives the same ids with a
 * small working set; a stretch that is a piece BPE keeps whole (known from load) costs one
 * lookup, and short stretches seen before in the same call are copied from their first ids.
 * Pieces are in the .bin's convention (plain spaces, where SentencePiece writes U+2581).
 * Byte-fallback bytes never merge. A byte missing from byte_tokens gives TOKEN_UNK. If its
 * buffers cannot be allocated the text gives TOKEN_UNK (the per-call word cache, an stb_ds map,
 * assumes its allocations succeed). Thread-safe for a shared `t` (encode only reads it). */
int tokenizer_encode(const Tokenizer *t, const char *text, int bos, int eos, int *tokens);

/* Returns the offset of the first byte of the NUL-terminated `text` that does not start a
 * well-formed UTF-8 sequence (stray continuation byte, overlong form, surrogate, code point past
 * U+10FFFF, or a sequence cut short), or -1 if the whole text is well-formed (RFC 3629). */
long tokenizer_utf8_invalid_at(const char *text);

/* Returns piece `id` as the file stores it (NUL-terminated, spaces plain, byte pieces as "<0xXX>"),
 * owned by `t`. Out-of-range ids give "". */
const char *tokenizer_piece(const Tokenizer *t, int id);

/* Returns the text of `token` as it should be printed after `prev_token`: the leading space of
 * the first piece after BOS is dropped (SentencePiece's dummy prefix), and a byte piece <0xXX>
 * becomes the single byte (so <0x00> gives ""). As llama2.c's decode. Concatenated over encode's
 * ids after BOS, this gives SentencePiece's decode of them, which for well-formed UTF-8 is the
 * text after the normalization encode describes (tests/tokenizer_parity.py), with one
 * difference: when remove_extra_whitespaces is set and the text starts with a literal U+2581,
 * SentencePiece drops every leading space while this keeps the U+2581 as a space. The returned
 * string is owned by `t`. Out-of-range ids give "". */
const char *tokenizer_decode(const Tokenizer *t, int prev_token, int token);

/* Whether tokenizer_print_piece prints `piece`: not when it is NULL, empty or a single ASCII byte
 * that is neither printable nor whitespace (a raw control byte), as llama2.c's safe_printf skips
 * them; unlike it, single bytes from 0x80 up print, since byte-fallback tokens spell UTF-8
 * characters (an emoji is four). */
int tokenizer_piece_printed(const char *piece);

/* Writes `piece` to stdout when tokenizer_piece_printed says so. */
void tokenizer_print_piece(const char *piece);

#endif
