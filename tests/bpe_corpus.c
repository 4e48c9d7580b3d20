/* Encodes and decodes a corpus of strings with bpe.c, for tests/bpe_parity.py.
 *
 *   build/bpe_corpus VOCAB.gguf CORPUS [--bos] [--special]
 *
 * CORPUS holds one string per line as the hex of its bytes ("-" for the empty string), so any
 * byte can be in a string. For each line, stdout gets the ids of bpe_encode (BOS first with
 * --bos; control tokens parsed with --special), space separated, a tab, and the hex of the
 * decoded bytes: bpe_decode_stream over every id, then the flush ("-" if empty). Exit status 1
 * with a message on stderr for bad input.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe.h"

static int hex_value(int c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Decodes the hex line (len characters, no newline) in place; its byte count, or -1. */
static long unhex(char *line, size_t len) {
    if (len == 1 && line[0] == '-') return 0;
    if (len % 2) return -1;
    for (size_t i = 0; i < len / 2; i++) {
        int hi = hex_value(line[2 * i]), lo = hex_value(line[2 * i + 1]);
        if (hi < 0 || lo < 0) return -1;
        line[i] = (char)(hi * 16 + lo);
    }
    return (long)(len / 2);
}

static void print_hex(const char *s, size_t n, size_t *printed) {
    for (size_t i = 0; i < n; i++) printf("%02x", (unsigned char)s[i]);
    *printed += n;
}

static void encode_line(const Bpe *b, const char *text, size_t len, int flags) {
    int *ids = malloc(bpe_max_ids(b, len) * sizeof *ids);
    char *out = malloc((size_t)b->max_token_bytes + 4);
    long n = ids && out ? bpe_encode(b, text, len, flags, ids) : -1;
    if (n < 0) {
        fprintf(stderr, "bpe_corpus: out of memory\n");
        exit(1);
    }
    for (long i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    putchar('\t');
    BpeStream s = {0};
    size_t printed = 0;
    for (long i = 0; i < n; i++) print_hex(out, bpe_decode_stream(b, &s, ids[i], out), &printed);
    print_hex(out, bpe_stream_flush(&s, out), &printed);
    if (!printed) putchar('-');
    putchar('\n');
    free(ids);
    free(out);
}

int main(int argc, char **argv) {
    int flags = 0;
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--bos") == 0)
            flags |= BPE_ADD_BOS;
        else if (strcmp(argv[i], "--special") == 0)
            flags |= BPE_PARSE_SPECIAL;
        else
            argc = 0;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: bpe_corpus VOCAB.gguf CORPUS [--bos] [--special]\n");
        return 1;
    }
    char err[1024];
    Bpe b;
    if (bpe_load_file(&b, argv[1], err, sizeof err) != 0) {
        fprintf(stderr, "bpe_corpus: %s\n", err);
        return 1;
    }
    FILE *f = fopen(argv[2], "r");
    if (!f) {
        fprintf(stderr, "bpe_corpus: cannot open %s\n", argv[2]);
        return 1;
    }
    char *line = NULL;
    size_t cap = 0;
    for (ssize_t len; (len = getline(&line, &cap, f)) > 0;) {
        if (line[len - 1] == '\n') len--;
        long n = unhex(line, (size_t)len);
        if (n < 0) {
            fprintf(stderr, "bpe_corpus: %s: a line is not hex\n", argv[2]);
            return 1;
        }
        encode_line(&b, line, (size_t)n, flags);
    }
    free(line);
    fclose(f);
    bpe_free(&b);
    return 0;
}
