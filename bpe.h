/* Byte-level BPE: the tokenizer of GPT-2, Llama 3, Qwen and SmolLM, read from a GGUF's
 * tokenizer.ggml.* keys (tokenizer.ggml.model "gpt2"), as llama.cpp and Hugging Face's tokenizers
 * encode and decode.
 *
 * The vocabulary, as the GGUF holds it (llama.cpp's convert_hf_to_gguf.py writes it from a
 * tokenizer.json; nllm_gguf.py's bpe_vocab_gguf does too):
 *   tokenizer.ggml.tokens      array of strings: the token of each id. A normal token is bytes
 *                              spelled in GPT-2's byte alphabet (bytes_to_unicode: each byte one
 *                              printable code point, the space 'Ġ' U+0120, the newline 'Ċ'
 *                              U+010A), an added token (control or user-defined) its own text
 *   tokenizer.ggml.token_type  array of int32 (llama.cpp's llama_token_type): 1 normal, 2 unknown,
 *                              3 control, 4 user-defined, 5 unused, 6 byte; absent: all normal
 *   tokenizer.ggml.merges      array of strings "LEFT RIGHT", highest priority (rank 0) first:
 *                              LEFT, RIGHT and LEFTRIGHT are normal tokens
 *   tokenizer.ggml.pre         the pre-tokenizer's family (bpe_pretok.h)
 *   tokenizer.ggml.bos_token_id, .eos_token_id, .eot_token_id  optional ids
 *   tokenizer.ggml.add_bos_token                               optional bool (default: the
 *                                                              family's, true for llama-bpe)
 *
 * Encoding (bpe_encode), in llama.cpp's and Hugging Face's order:
 *   1. added tokens are cut out of the text, leftmost first and the longest where several start
 *      at one byte (Hugging Face's leftmost-longest): user-defined ones always, control ones only
 *      when asked (BPE_PARSE_SPECIAL, llama.cpp's parse_special): plain text never becomes
 *      <|begin_of_text|> unless the caller says the text holds special tokens;
 *   2. each stretch between them is cut into words by the family's regexes;
 *   3. each word is its token if it is one and the family ignores merges (Llama 3), else its
 *      bytes become their one-byte tokens and merges run lowest rank first, leftmost first among
 *      equal ranks, until no adjacent pair has a merge.
 * Text that is not well-formed UTF-8 is encoded too (not by Hugging Face, whose text is Unicode,
 * nor equally by llama.cpp, which reads bad bytes as U+FFFD): each byte that does not start a
 * well-formed sequence is a word of its own, its byte's token. Every byte is kept, so decoding
 * the ids gives the text back, byte for byte, for any text.
 *
 * Decoding: a token's bytes (a normal token's text through the byte alphabet back to bytes, an
 * added token's text as it is); bpe_decode_stream holds the bytes of a UTF-8 character split
 * across tokens until it is complete.
 *
 * Load errors, each one line naming the problem (and the token or merge by index): a model other
 * than gpt2, an unknown pre, no tokens, a token array other than strings or over 2^31 tokens, a
 * token over 65536 bytes (BPE_MAX_TOKEN_BYTES), a token that is not well-formed UTF-8, a normal
 * token with a character outside the byte alphabet, an empty normal or added token, two equal
 * tokens, a token_type array of another length or an unknown type, one of the 256 one-byte
 * tokens missing, a merge that is not "LEFT RIGHT" or names a token (or a joined token) the
 * vocabulary lacks, two merges of one pair, a bos/eos/eot id out of range.
 */
#ifndef BPE_H
#define BPE_H

#include <stddef.h>
#include <stdint.h>

#include "bpe_pretok.h"
#include "gguf.h"

/* llama.cpp's llama_token_type, as tokenizer.ggml.token_type holds them */
enum {
    BPE_TOKEN_NORMAL = 1,
    BPE_TOKEN_UNKNOWN = 2,
    BPE_TOKEN_CONTROL = 3,
    BPE_TOKEN_USER_DEFINED = 4,
    BPE_TOKEN_UNUSED = 5,
    BPE_TOKEN_BYTE = 6,
};

#define BPE_MAX_TOKEN_BYTES 65536 /* Llama 3's longest token is 128 bytes, Qwen's 256 */

/* bpe_encode's flags */
#define BPE_ADD_BOS       1 /* BOS first if the vocabulary adds one (llama.cpp's add_special) */
#define BPE_PARSE_SPECIAL 2 /* control tokens' text in the input is those tokens */

struct BpeMerge; /* private: (left id, right id) -> rank, joined id */

typedef struct {
    int vocab_size;
    char *text;          /* every token's bytes, back to back, each followed by a NUL */
    size_t *offsets;     /* vocab_size + 1: token i is text[offsets[i] .. offsets[i + 1] - 1) */
    unsigned char *type; /* vocab_size token types (BPE_TOKEN_*) */
    int max_token_bytes;
    int bos_id, eos_id, eot_id; /* -1: none */
    int add_bos;                /* tokenizer.ggml.add_bos_token, or the family's default */
    int n_merges;
    BpePretok pretok;
    /* private: the lookups encode uses, built at load */
    int byte_ids[256];     /* the normal token of each byte */
    int32_t *normal_index; /* normal tokens' bytes -> id: open addressing, -1 empty */
    int32_t *added_index;  /* control and user-defined tokens' text -> id */
    size_t index_mask;     /* both indexes have index_mask + 1 slots */
    int added_lengths[64]; /* distinct lengths of the added tokens, longest first */
    int n_added_lengths;   /* 0: none (more than 64 distinct lengths: tried at every length) */
    unsigned char added_first[256]; /* 1 where some added token starts with that byte */
    struct BpeMerge *merges;        /* open addressing over (left, right) */
    size_t merge_mask;
} Bpe;

/* Loads the vocabulary of a parsed GGUF into b (b owns what it holds; g may go). Returns 0; 1
 * when tokenizer.ggml.model names another tokenizer (err says which); or -1 with one line in err
 * (see above). b is zeroed unless it returns 0. */
int bpe_load_gguf(Bpe *b, const Gguf *g, char *err, size_t errlen);

/* Maps the GGUF file at path, parses it and loads its vocabulary (bpe_load_gguf); returns as
 * that does, with the file's own errors too (cannot open, not a GGUF: gguf_parse's message),
 * each message naming path. */
int bpe_load_file(Bpe *b, const char *path, char *err, size_t errlen);

void bpe_free(Bpe *b);

/* The room bpe_encode needs for a text of len bytes: len + 1 (an id is at least a byte, and
 * BOS), or 3 len + 1 when the family puts text in NFC (which makes a text at most 3 times
 * longer in UTF-8: Unicode's bound of 3 code points for one, each no longer than it). */
size_t bpe_max_ids(const Bpe *b, size_t len);

/* Encodes text[0..len) (any bytes) into ids, which has room for bpe_max_ids(b, len); returns how
 * many ids it wrote, or -1 out of memory. flags: BPE_ADD_BOS | BPE_PARSE_SPECIAL. Thread-safe
 * for a shared b. Time linear in len for text of words (a word of n bytes costs O(n log n)). */
long bpe_encode(const Bpe *b, const char *text, size_t len, int flags, int *ids);

/* The bytes of token id (*len of them; NUL-terminated), or "" for an id out of range. */
const char *bpe_token_bytes(const Bpe *b, int id, size_t *len);

/* Decoding token after token for printing: complete UTF-8 characters go out, the start of one
 * split across tokens is held (up to 3 bytes) until its last byte comes; bytes that cannot start
 * or continue a character go out as they are, so that what comes out, flushed, is exactly the
 * bytes of the tokens. */
typedef struct {
    unsigned char held[4];
    int n_held;
} BpeStream;

/* Writes what token id releases into out (room for b->max_token_bytes + 4) and returns how many
 * bytes; bpe_stream_flush writes what is held (at most 3 bytes) at the end of the stream. */
size_t bpe_decode_stream(const Bpe *b, BpeStream *s, int id, char *out);
size_t bpe_stream_flush(BpeStream *s, char *out);

#endif
