/* The tokenizer interface: one set of calls over the two kinds of vocabulary run reads, so that a
 * mode needs not know which it has. A kind tag says which of the two a Vocab holds:
 *   VOCAB_SENTENCEPIECE  tokenizer.h's Tokenizer: llama2.c's tokenizer files (tok512.bin), the
 *                        Llama 2 style vocabularies
 *   VOCAB_BPE            bpe.h's Bpe: byte-level BPE, read from a GGUF whose tokenizer.ggml.model
 *                        is gpt2 (Llama 3, GPT-2, Qwen, SmolLM)
 * Every mode goes through it (--tokenize, generation, --ppl, -m chat, --compare, --trace,
 * --info); the model loader picks the kind from a GGUF's tokenizer.ggml.model (gpt2: byte-level
 * BPE; llama: SentencePiece).
 */
#ifndef VOCAB_H
#define VOCAB_H

#include <stddef.h>

#include "bpe.h"
#include "tokenizer.h"

typedef enum { VOCAB_SENTENCEPIECE, VOCAB_BPE } VocabKind;

#define VOCAB_MAX_END_OF_TURN 8

typedef struct {
    VocabKind kind;
    Tokenizer sp; /* VOCAB_SENTENCEPIECE */
    Bpe bpe;      /* VOCAB_BPE */
    /* VOCAB_BPE: the tokens that end a turn, as llama.cpp's end-of-generation set takes them
     * (llama-vocab.cpp): tokenizer.ggml.eot_token_id, and the tokens spelled <|eot_id|>,
     * <|eom_id|>, <|im_end|>, <|end|>, <|endoftext|>, <|end_of_text|>, <end_of_turn> or <EOT>
     * other than the eos and bos ids (which end a text as themselves) */
    int end_of_turn[VOCAB_MAX_END_OF_TURN];
    int n_end_of_turn;
} Vocab;

/* What a token does to the text being generated (vocab_end). */
typedef enum {
    VOCAB_NOT_END,
    VOCAB_END_BOS, /* the start of another text: SentencePiece's <s>, a BPE vocabulary's bos */
    VOCAB_END_EOS, /* the end of the text: </s>, a BPE vocabulary's eos */
    VOCAB_END_EOT, /* the end of a turn (end_of_turn above) */
} VocabEnd;

/* Streaming decode for printing, one per text (zeroed to start): the start of a UTF-8 character
 * split across BPE tokens, and the bytes a token releases. */
typedef struct {
    BpeStream bpe;
    char out[BPE_MAX_TOKEN_BYTES + 4];
} VocabStream;

/* vocab_encode's flags */
#define VOCAB_ADD_BOS 1 /* BOS first (a BPE vocabulary's if its add_bos_token says so) */
/* the texts of control tokens are those tokens, as llama.cpp's parse_special: BPE's control
 * tokens; SentencePiece's BOS and EOS as "<s>" and "</s>" and its control pieces, the text
 * between them encoded as texts of their own (each with SentencePiece's leading space, as
 * llama.cpp's after a special token) */
#define VOCAB_PARSE_SPECIAL 2

/* Loads the byte-level BPE vocabulary of the GGUF file at path. Returns 0 (v holds it), 1 when
 * the file is not a GGUF or its tokenizer.ggml.model is not gpt2 (not this kind: v empty), or -1
 * with a one-line message naming path (a GGUF that does not load, a gpt2 vocabulary that bpe.h
 * refuses). */
int vocab_load_gguf(Vocab *v, const char *path, char *err, size_t errlen);

/* The vocabulary of a parsed GGUF (name for messages): byte-level BPE when tokenizer.ggml.model
 * is gpt2, else SentencePiece's (tokenizer_load_gguf). Returns 0, or -1 with a one-line message
 * naming name. */
int vocab_from_gguf(Vocab *v, const Gguf *g, const char *name, char *err, size_t errlen);

/* A Vocab over a loaded SentencePiece tokenizer (copied: free one of the two, not both). */
Vocab vocab_sentencepiece(const Tokenizer *t);

void vocab_free(Vocab *v);

int vocab_size(const Vocab *v);

/* The ids of BOS and EOS (-1: a BPE vocabulary without one). */
int vocab_bos(const Vocab *v);
int vocab_eos(const Vocab *v);

/* Room vocab_encode needs for a text of len bytes (SentencePiece's invalid UTF-8 takes three ids
 * a byte). */
size_t vocab_max_ids(size_t len);

/* Encodes the NUL-terminated text (flags VOCAB_*) into ids; returns how many, or -1 out of
 * memory (BPE). */
long vocab_encode(const Vocab *v, const char *text, int flags, int *ids);

/* How piece `id` of t (0 <= id < vocab_size, not checked) is shown in --tokenize's list and
 * --compare's table: control pieces by their SentencePiece names "<unk>", "<s>", "</s>" (the
 * .bin stores BOS and EOS as "\n<s>\n" and "\n</s>\n"), others as stored, spaces plain. */
const char *shown_piece(const Tokenizer *t, int id);

/* The text of token id as --tokenize shows it (NUL-terminated, owned by v): SentencePiece's
 * piece with its control pieces named (shown_piece), a BPE token's bytes. */
const char *vocab_piece(const Vocab *v, int id);

/* The text of token id after token prev, whole: SentencePiece's tokenizer_decode (the dummy
 * prefix's space dropped after BOS, a byte piece its byte); a BPE token's bytes, a control
 * token's text included (llama.cpp's token_to_piece with special). Owned by v; "" out of range. */
const char *vocab_decode(const Vocab *v, int prev, int id);

/* Whether token id ends the text (and how): VOCAB_NOT_END for an ordinary token. */
VocabEnd vocab_end(const Vocab *v, int id);

/* Writes the text of token id, which follows token prev, to stdout as generation streams it:
 * SentencePiece's piece as tokenizer_decode and tokenizer_print_piece give it (the dummy
 * prefix's space dropped after BOS); a BPE token's bytes, but the start of a UTF-8 character
 * held in s until its last byte comes, and nothing for a control token (as llama.cpp prints
 * without --special). vocab_stream_end writes what s holds at the end of the text. */
void vocab_print(const Vocab *v, VocabStream *s, int prev, int id);

/* What vocab_print writes for id, into *text (owned by v or s) and its length in bytes. */
size_t vocab_text(const Vocab *v, VocabStream *s, int prev, int id, const char **text);
void vocab_stream_end(const Vocab *v, VocabStream *s);

#endif
