/* The pre-tokenizers of byte-level BPE: the regular expressions that cut text into words before
 * merges run, one set a family, named as GGUF's tokenizer.ggml.pre names them (llama.cpp's
 * src/llama-vocab.cpp maps the same names to the same families).
 *
 *   pre         regexes, applied in turn              the family's tokenizer.json
 *   llama-bpe   LLAMA3                                Split(LLAMA3), ByteLevel(use_regex false)
 *   gpt-2       GPT2                                  ByteLevel(use_regex true)
 *   qwen2       QWEN2 (LLAMA3, digits one at a time)  NFC, Split(QWEN2), ByteLevel
 *   smollm      \p{N}, then GPT2                      Digits(individual), ByteLevel(use_regex)
 *
 * Each regex cuts every piece of the one before into its matches and the text between them
 * (Hugging Face's "Isolated" split: nothing is dropped), so the words always tile the text; a
 * regex sees only its piece, so a lookahead stops at the piece's end.
 *
 * The patterns are Hugging Face's, compiled by PCRE2 (UTF, UCP, JIT) with two changes that keep
 * the meaning Hugging Face's Rust library gives them (Oniguruma; @huggingface/tokenizers, in JS,
 * translates them to the same meaning): \s is Unicode's White_Space property (PCRE2's \s also
 * takes U+180E), and (?i:'s|...) folds ASCII letters only (PCRE2's caseless UTF matching would
 * also take U+017F, long s, for s). Unicode's tables are PCRE2's (10.42: Unicode 14).
 *
 * Source of the families: the pre_tokenizer of each family's tokenizer.json (Llama 3, GPT-2,
 * Qwen2/3, SmolLM2).
 */
#ifndef BPE_PRETOK_H
#define BPE_PRETOK_H

#include <stddef.h>
#include <stdint.h>

#define BPE_MAX_REGEXES 2

typedef struct {
    const char *pre;                    /* tokenizer.ggml.pre */
    const char *regex[BPE_MAX_REGEXES]; /* applied in turn; NULL past the last */
    /* Hugging Face's BPE ignore_merges (llama.cpp's too): a word that is a token is that token,
     * whatever the merges would make of it */
    int ignore_merges;
    int nfc; /* the text is put in Unicode NFC first (the family's normalizer) */
    /* BOS added when the file has no tokenizer.ggml.add_bos_token: llama.cpp's default for the
     * family (llama-vocab.cpp: llama-bpe adds it, the others do not) */
    int add_bos;
} BpeFamily;

/* A family with its regexes compiled (pcre2_code pointers, opaque here). */
typedef struct {
    const BpeFamily *family;
    void *code[BPE_MAX_REGEXES];
} BpePretok;

/* Compiles the family named pre[0..pre_len). Returns 0, or -1 with a one-line message in err
 * naming an unknown pre (and the known ones) or a regex PCRE2 refuses. */
int bpe_pretok_init(BpePretok *p, const char *pre, size_t pre_len, char *err, size_t errlen);
void bpe_pretok_free(BpePretok *p);

/* Cuts the well-formed UTF-8 text[0..len) into words: appends the offset where each word ends
 * (the last is len) to cuts, which has room for len entries (a word is at least one byte), and
 * returns how many it appended; 0 for len 0. -1 if PCRE2 fails (out of memory). Thread-safe for
 * a shared p. Time linear in len for the families above (no pattern of theirs backtracks more
 * than the run of spaces or line breaks it stands on). */
long bpe_pretok_split(const BpePretok *p, const char *text, size_t len, uint32_t *cuts);

#endif
