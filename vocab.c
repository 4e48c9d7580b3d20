/* The tokenizer interface (vocab.h): each call passed to the kind of vocabulary the Vocab holds.
 */
#include "vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether the file at path starts with GGUF's magic and names tokenizer.ggml.model gpt2 is only
 * known once parsed; the magic alone tells a GGUF from a llama2.c tokenizer or model file. */
static int is_gguf(const char *path) {
    char magic[4];
    FILE *f = fopen(path, "rb");
    int yes = f && fread(magic, 1, 4, f) == 4 && memcmp(magic, "GGUF", 4) == 0;
    if (f) fclose(f);
    return yes;
}

/* llama.cpp's spellings of end-of-turn tokens (llama-vocab.cpp, its end-of-generation set), those
 * of the families bpe.h reads */
static const char *const END_OF_TURN[] = {"<|eot_id|>",    "<|eom_id|>",    "<|im_end|>",
                                          "<|end|>",       "<|endoftext|>", "<|end_of_text|>",
                                          "<end_of_turn>", "<EOT>"};

/* v->end_of_turn from the BPE vocabulary: its eot id, then each token spelled as one of
 * END_OF_TURN, in id order, that is not its bos or eos. */
static void find_end_of_turn(Vocab *v) {
    const Bpe *b = &v->bpe;
    v->n_end_of_turn = 0;
    if (b->eot_id >= 0 && b->eot_id != b->eos_id && b->eot_id != b->bos_id)
        v->end_of_turn[v->n_end_of_turn++] = b->eot_id;
    for (int id = 0; id < b->vocab_size && v->n_end_of_turn < VOCAB_MAX_END_OF_TURN; id++) {
        if (id == b->eot_id || id == b->eos_id || id == b->bos_id) continue;
        size_t len;
        const char *text = bpe_token_bytes(b, id, &len);
        for (size_t k = 0; k < sizeof END_OF_TURN / sizeof *END_OF_TURN; k++)
            if (text[0] == '<' && strcmp(text, END_OF_TURN[k]) == 0)
                v->end_of_turn[v->n_end_of_turn++] = id;
    }
}

int vocab_load_gguf(Vocab *v, const char *path, char *err, size_t errlen) {
    memset(v, 0, sizeof *v);
    if (!is_gguf(path)) return 1;
    v->kind = VOCAB_BPE;
    /* another tokenizer model (llama: SentencePiece) is the GGUF model loader's to read */
    int rc = bpe_load_file(&v->bpe, path, err, errlen);
    if (rc == 0) find_end_of_turn(v);
    return rc;
}

int vocab_from_gguf(Vocab *v, const Gguf *g, const char *name, char *err, size_t errlen) {
    memset(v, 0, sizeof *v);
    char why[768];
    int rc = bpe_load_gguf(&v->bpe, g, why, sizeof why);
    if (rc == 0) {
        v->kind = VOCAB_BPE;
        find_end_of_turn(v);
        return 0;
    }
    if (rc < 0) return gguf_fail(err, errlen, "%s: %s", name, why);
    v->kind = VOCAB_SENTENCEPIECE;
    return tokenizer_load_gguf(&v->sp, g, name, err, errlen);
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

int vocab_bos(const Vocab *v) {
    return v->kind == VOCAB_BPE ? v->bpe.bos_id : TOKEN_BOS;
}

int vocab_eos(const Vocab *v) {
    return v->kind == VOCAB_BPE ? v->bpe.eos_id : TOKEN_EOS;
}

/* SentencePiece's special whose text starts text, the longest (-1: none): BOS and EOS by their
 * names, the control pieces (specials[0..n)) by their text. */
static int sp_special_at(const Tokenizer *t, const int *specials, int n, const char *text) {
    int found = -1;
    size_t found_len = 0;
    for (int i = 0; i < n; i++) {
        const char *s = shown_piece(t, specials[i]);
        size_t len = strlen(s);
        if (len > found_len && strncmp(text, s, len) == 0) found = specials[i], found_len = len;
    }
    return found;
}

/* vocab_encode of SentencePiece with VOCAB_PARSE_SPECIAL: each special's text its token, the
 * text between encoded apart. Returns how many ids, or -1 out of memory. */
static long sp_encode_special(const Tokenizer *t, const char *text, int bos, int *ids) {
    int *specials = malloc((t->vocab_size + 2) * sizeof *specials), n = 0;
    char *copy = strdup(text);
    if (!specials || !copy) {
        free(specials);
        free(copy);
        return -1;
    }
    specials[n++] = TOKEN_BOS;
    specials[n++] = TOKEN_EOS;
    for (int id = TOKEN_EOS + 1; t->not_text && id < t->vocab_size; id++)
        if (t->not_text[id] && tokenizer_piece(t, id)[0]) /* "" is in every text */
            specials[n++] = id;
    long n_ids = 0;
    if (bos) ids[n_ids++] = TOKEN_BOS;
    for (char *at = copy, *from = copy;; at++) {
        int id = *at ? sp_special_at(t, specials, n, at) : -1;
        if (*at && id < 0) continue;
        char kept = *at;
        *at = '\0';
        if (at > from) n_ids += tokenizer_encode(t, from, 0, 0, ids + n_ids);
        *at = kept;
        if (id < 0) break;
        ids[n_ids++] = id;
        from = at + strlen(shown_piece(t, id));
        at = from - 1;
    }
    free(specials);
    free(copy);
    return n_ids;
}

long vocab_encode(const Vocab *v, const char *text, int flags, int *ids) {
    if (v->kind == VOCAB_SENTENCEPIECE && (flags & VOCAB_PARSE_SPECIAL))
        return sp_encode_special(&v->sp, text, flags & VOCAB_ADD_BOS, ids);
    if (v->kind == VOCAB_SENTENCEPIECE)
        return tokenizer_encode(&v->sp, text, flags & VOCAB_ADD_BOS, 0, ids);
    int bpe_flags = (flags & VOCAB_ADD_BOS ? BPE_ADD_BOS : 0) |
                    (flags & VOCAB_PARSE_SPECIAL ? BPE_PARSE_SPECIAL : 0);
    return bpe_encode(&v->bpe, text, strlen(text), bpe_flags, ids);
}

VocabEnd vocab_end(const Vocab *v, int id) {
    if (v->kind == VOCAB_SENTENCEPIECE)
        return id == TOKEN_BOS ? VOCAB_END_BOS : id == TOKEN_EOS ? VOCAB_END_EOS : VOCAB_NOT_END;
    if (id == v->bpe.eos_id) return VOCAB_END_EOS; /* GPT-2's is its bos too: the end first */
    if (id == v->bpe.bos_id) return VOCAB_END_BOS;
    for (int i = 0; i < v->n_end_of_turn; i++)
        if (id == v->end_of_turn[i]) return VOCAB_END_EOT;
    return VOCAB_NOT_END;
}

size_t vocab_text(const Vocab *v, VocabStream *s, int prev, int id, const char **text) {
    if (v->kind == VOCAB_SENTENCEPIECE) {
        *text = tokenizer_decode(&v->sp, prev, id);
        return tokenizer_piece_printed(*text) ? strlen(*text) : 0;
    }
    *text = s->out;
    if (id < 0 || id >= v->bpe.vocab_size || v->bpe.type[id] == BPE_TOKEN_CONTROL) return 0;
    return bpe_decode_stream(&v->bpe, &s->bpe, id, s->out);
}

void vocab_print(const Vocab *v, VocabStream *s, int prev, int id) {
    const char *text;
    size_t len = vocab_text(v, s, prev, id, &text);
    fwrite(text, 1, len, stdout);
}

void vocab_stream_end(const Vocab *v, VocabStream *s) {
    char out[4];
    if (v->kind == VOCAB_BPE) fwrite(out, 1, bpe_stream_flush(&s->bpe, out), stdout);
}

const char *shown_piece(const Tokenizer *t, int id) {
    static const char *control[] = {"<unk>", "<s>", "</s>"};
    return id <= TOKEN_EOS ? control[id] : tokenizer_piece(t, id);
}

const char *vocab_decode(const Vocab *v, int prev, int id) {
    size_t len;
    return v->kind == VOCAB_BPE ? bpe_token_bytes(&v->bpe, id, &len)
                                : tokenizer_decode(&v->sp, prev, id);
}

const char *vocab_piece(const Vocab *v, int id) {
    size_t len;
    return v->kind == VOCAB_BPE ? bpe_token_bytes(&v->bpe, id, &len) : shown_piece(&v->sp, id);
}
