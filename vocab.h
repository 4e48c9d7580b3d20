/* The tokenizer interface: one set of calls over the two kinds of vocabulary run reads, so that a
 * mode needs not know which it has. A kind tag says which of the two a Vocab holds:
 *   VOCAB_SENTENCEPIECE  tokenizer.h's Tokenizer: llama2.c's tokenizer files (tok512.bin), the
 *                        Llama 2 style vocabularies
 *   VOCAB_BPE            bpe.h's Bpe: byte-level BPE, read from a GGUF whose tokenizer.ggml.model
 *                        is gpt2 (Llama 3, GPT-2, Qwen, SmolLM)
 * Today --tokenize goes through it; the GGUF model loader picks the kind from the file's
 * tokenizer.ggml.model (gpt2: vocab_load_gguf; llama: a SentencePiece vocabulary) and the modes
 * that generate move to it as they learn byte-level BPE.
 */
#ifndef VOCAB_H
#define VOCAB_H

#include <stddef.h>

#include "bpe.h"
#include "tokenizer.h"

typedef enum { VOCAB_SENTENCEPIECE, VOCAB_BPE } VocabKind;

typedef struct {
    VocabKind kind;
    Tokenizer sp; /* VOCAB_SENTENCEPIECE */
    Bpe bpe;      /* VOCAB_BPE */
} Vocab;

/* vocab_encode's flags */
#define VOCAB_ADD_BOS 1 /* BOS first (a BPE vocabulary's if its add_bos_token says so) */
#define VOCAB_PARSE_SPECIAL                                                                        \
    2 /* BPE: control tokens' text is those tokens (SentencePiece: none)                           \
       */

/* Loads the byte-level BPE vocabulary of the GGUF file at path. Returns 0 (v holds it), 1 when
 * the file is not a GGUF or its tokenizer.ggml.model is not gpt2 (not this kind: v empty), or -1
 * with a one-line message naming path (a GGUF that does not load, a gpt2 vocabulary that bpe.h
 * refuses). */
int vocab_load_gguf(Vocab *v, const char *path, char *err, size_t errlen);

/* A Vocab over a loaded SentencePiece tokenizer (copied: free one of the two, not both). */
Vocab vocab_sentencepiece(const Tokenizer *t);

void vocab_free(Vocab *v);

int vocab_size(const Vocab *v);

/* Room vocab_encode needs for a text of len bytes (SentencePiece's invalid UTF-8 takes three ids
 * a byte). */
size_t vocab_max_ids(size_t len);

/* Encodes the NUL-terminated text (flags VOCAB_*) into ids; returns how many, or -1 out of
 * memory (BPE). */
long vocab_encode(const Vocab *v, const char *text, int flags, int *ids);

/* The text of token id as --tokenize shows it (NUL-terminated, owned by v): SentencePiece's
 * piece with its control pieces named (io.h's shown_piece), a BPE token's bytes. */
const char *vocab_piece(const Vocab *v, int id);

#endif
