/* Encodes and decodes a corpus of strings with tokenizer.c, for tests/tokenizer_parity.py.
 *
 *   build/tokenize_corpus TOKENIZER CORPUS
 *
 * CORPUS holds one string per line as the hex of its bytes ("-" for the empty string), so any
 * byte but NUL can be in a string. For each line, stdout gets the ids of tokenizer_encode (BOS
 * first), space separated, a tab, and the hex of the decoded text: tokenizer_decode over the ids
 * after BOS, concatenated ("-" if empty). Exit status 1 with a message on stderr for bad input.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

static int hex_value(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Decodes the hex line (without its newline) in place; returns 0, or -1 on a malformed line. */
static int unhex(char *line, size_t len) {
    if (len == 1 && line[0] == '-') {
        line[0] = '\0';
        return 0;
    }
    if (len % 2) return -1;
    for (size_t i = 0; i < len / 2; i++) {
        int hi = hex_value(line[2 * i]), lo = hex_value(line[2 * i + 1]);
        if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) return -1; /* NUL would end the string */
        line[i] = (char)(hi * 16 + lo);
    }
    line[len / 2] = '\0';
    return 0;
}

static void print_hex(const char *s) {
    if (!*s) fputc('-', stdout);
    for (; *s; s++) printf("%02x", (unsigned char)*s);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: tokenize_corpus TOKENIZER CORPUS\n");
        return 1;
    }
    char err[1024];
    Tokenizer t;
    if (tokenizer_load(&t, argv[1], err, sizeof err) != 0) {
        fprintf(stderr, "tokenize_corpus: %s\n", err);
        return 1;
    }
    FILE *f = fopen(argv[2], "r");
    if (!f) {
        fprintf(stderr, "tokenize_corpus: cannot open %s\n", argv[2]);
        return 1;
    }
    char *line = NULL, *decoded = NULL;
    size_t cap = 0;
    ssize_t got;
    for (int line_no = 1; (got = getline(&line, &cap, f)) > 0; line_no++) {
        size_t len = (size_t)got;
        if (line[len - 1] == '\n') len--;
        if (unhex(line, len) != 0) {
            fprintf(stderr, "tokenize_corpus: %s:%d: malformed hex\n", argv[2], line_no);
            return 1;
        }
        size_t text_len = strlen(line);
        int *ids = malloc((3 * text_len + 3) * sizeof *ids);
        if (!ids) {
            fprintf(stderr, "tokenize_corpus: out of memory\n");
            return 1;
        }
        int n = tokenizer_encode(&t, line, 1, 0, ids);
        size_t decoded_len = 0;
        for (int i = 1; i < n; i++) decoded_len += strlen(tokenizer_decode(&t, ids[i - 1], ids[i]));
        decoded = realloc(decoded, decoded_len + 1);
        if (!decoded) {
            fprintf(stderr, "tokenize_corpus: out of memory\n");
            return 1;
        }
        size_t used = 0;
        for (int i = 0; i < n; i++) {
            printf("%s%d", i ? " " : "", ids[i]);
            if (i == 0) continue;
            const char *piece = tokenizer_decode(&t, ids[i - 1], ids[i]);
            memcpy(decoded + used, piece, strlen(piece));
            used += strlen(piece);
        }
        decoded[used] = '\0';
        fputc('\t', stdout);
        print_hex(decoded);
        fputc('\n', stdout);
        free(ids);
    }
    free(line);
    free(decoded);
    fclose(f);
    tokenizer_free(&t);
    return 0;
}
