/* The tokenizer interface (vocab.h): each call passed to the kind of vocabulary the Vocab holds.
 */
#include "vocab.h"

#include <stdio.h>
#include <string.h>

#include "io.h"

/* Whether the file at path starts with GGUF's magic and names tokenizer.ggml.model gpt2 is only
 * known once parsed; the magic alone tells a GGUF from a llama2.c tokenizer or model file. */
static int is_gguf(const char *path) {
    char magic[4];
    FILE *f = fopen(path, "rb");
    int yes = f && fread(magic, 1, 4, f) == 4 && memcmp(magic, "GGUF", 4) == 0;
    if (f) fclose(f);
    return yes;
}

int vocab_load_gguf(Vocab *v, const char *path, char *err, size_t errlen) {
    memset(v, 0, sizeof *v);
    if (!is_gguf(path)) return 1;
    v->kind = VOCAB_BPE;
    /* another tokenizer model (llama: SentencePiece) is the GGUF model loader's to read */
    return bpe_load_file(&v->bpe, path, err, errlen);
}

Vocab vocab_sentencepiece(const Tokenizer *t) {
    Vocab v = {.kind = VOCAB_SENTENCEPIECE, .sp = *t};
    return v;
}

void vocab_free(Vocab *v) {
    if (v->kind == VOCAB_BPE)
        bpe_free(&v->bpe);
    else
        tokenizer_free(&v->sp);
}

int vocab_size(const Vocab *v) {
    return v->kind == VOCAB_BPE ? v->bpe.vocab_size : v->sp.vocab_size;
}

size_t vocab_max_ids(size_t len) {
    return 3 * len + 3;
}

long vocab_encode(const Vocab *v, const char *text, int flags, int *ids) {
    if (v->kind == VOCAB_SENTENCEPIECE)
        return tokenizer_encode(&v->sp, text, flags & VOCAB_ADD_BOS, 0, ids);
    int bpe_flags = (flags & VOCAB_ADD_BOS ? BPE_ADD_BOS : 0) |
                    (flags & VOCAB_PARSE_SPECIAL ? BPE_PARSE_SPECIAL : 0);
    return bpe_encode(&v->bpe, text, strlen(text), bpe_flags, ids);
}

const char *vocab_piece(const Vocab *v, int id) {
    size_t len;
    return v->kind == VOCAB_BPE ? bpe_token_bytes(&v->bpe, id, &len) : shown_piece(&v->sp, id);
}
