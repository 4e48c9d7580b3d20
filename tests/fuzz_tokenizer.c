/* libFuzzer target for tokenizer.c: the loader, encode and decode. Built and run by `make fuzz`
 * (clang -fsanitize=fuzzer,address,undefined), from the repo root.
 *
 * Input: a 2-byte little-endian length L, then a tokenizer file, then L bytes of text (L is cut
 * to what is there; the text ends at its first NUL, as a C string does).
 *  1. The file goes through tokenizer_load. If it loads, the text is encoded into a buffer of
 *     exactly the documented size and each id decoded: every id must be in range.
 *  2. The text is encoded with models/tok512.bin (loaded once) and decoded. For well-formed UTF-8
 *     without U+2581 the decode must be the text as SentencePiece's normalizer leaves it
 *     (tok512 removes extra whitespace: no leading or trailing spaces, runs of spaces as one).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tokenizer.h"
#include "helpers.h"

static Tokenizer tok512;
static char file_path[] = "/tmp/fuzz_tokenizer.XXXXXX";

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    char err[1024];
    if (tokenizer_load(&tok512, "models/tok512.bin", err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_tokenizer: %s (run from the repo root after make models)\n", err);
        exit(1);
    }
    int fd = mkstemp(file_path);
    if (fd < 0) {
        perror("fuzz_tokenizer: mkstemp");
        exit(1);
    }
    close(fd);
    return 0;
}

/* Encodes text and concatenates the decoded ids after BOS into a new string (caller frees). */
static char *encode_decode(const Tokenizer *t, const char *text) {
    size_t len = strlen(text);
    int valid = tokenizer_utf8_invalid_at(text) < 0;
    int *ids = malloc(((valid ? len : 3 * len) + 3) * sizeof *ids);
    int n = tokenizer_encode(t, text, 1, 1, ids);
    if (ids[0] != TOKEN_BOS || ids[n - 1] != TOKEN_EOS) abort();
    size_t total = 1;
    for (int i = 1; i < n - 1; i++) {
        if (ids[i] < 0 || ids[i] >= t->vocab_size) abort();
        total += strlen(tokenizer_decode(t, ids[i - 1], ids[i]));
    }
    char *out = malloc(total), *p = out;
    for (int i = 1; i < n - 1; i++) {
        const char *piece = tokenizer_decode(t, ids[i - 1], ids[i]);
        memcpy(p, piece, strlen(piece));
        p += strlen(piece);
    }
    *p = '\0';
    free(ids);
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    size_t text_len = (size_t)(data[0] | data[1] << 8);
    if (text_len > size - 2) text_len = size - 2;
    size_t file_len = size - 2 - text_len;
    char *text = malloc(text_len + 1);
    memcpy(text, data + 2 + file_len, text_len);
    text[text_len] = '\0';

    FILE *f = fopen(file_path, "wb");
    if (!f || fwrite(data + 2, 1, file_len, f) != file_len || fclose(f) != 0) abort();
    Tokenizer t;
    char err[256];
    if (tokenizer_load(&t, file_path, err, sizeof err) == 0) {
        free(encode_decode(&t, text));
        tokenizer_free(&t);
    } else if (err[0] == '\0' || strchr(err, '\n')) {
        abort(); /* every failure names its problem on one line */
    }

    char *back = encode_decode(&tok512, text);
    if (tokenizer_utf8_invalid_at(text) < 0 && !strstr(text, "\xE2\x96\x81")) {
        char *want = malloc(text_len + 1);
        squeeze_spaces(want, text);
        if (strcmp(back, want) != 0) abort();
        free(want);
    }
    free(back);
    free(text);
    return 0;
}
