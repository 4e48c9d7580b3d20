/* --tokenize and --tokenize-file (tokenize.h): the tokenizer alone, its ids listed or its speed
 * on a file. The encoding is the vocabulary's (vocab.h); this file reads the input and prints.
 */
#include "tokenize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io.h"
#include "profile.h"

/* One id per line with its piece, as llama.cpp's tokenize tool prints them; control bytes in a
 * piece are escaped so that each id keeps to one line. */
static void print_ids(const Vocab *v, const int *ids, long n) {
    for (long i = 0; i < n; i++) {
        printf("%6d -> '", ids[i]);
        write_escaped(stdout, vocab_piece(v, ids[i]), 0);
        printf("'\n");
    }
}

static void print_ids_json(const Vocab *v, const int *ids, long n) {
    printf("{\"ids\": [");
    for (long i = 0; i < n; i++) printf("%s%d", i ? ", " : "", ids[i]);
    printf("], \"pieces\": [");
    for (long i = 0; i < n; i++) {
        if (i) printf(", ");
        print_json_string(vocab_piece(v, ids[i]));
    }
    printf("]}\n");
}

void run_tokenize(const Vocab *v, const char *text, const char *path, int json) {
    char *file_text = path ? read_text(path) : NULL;
    const char *input = file_text ? file_text : text;
    require_utf8("--tokenize text", input, file_text);
    size_t size = strlen(input);
    int *ids = malloc(vocab_max_ids(size) * sizeof *ids);
    if (!ids) die("out of memory for %zu bytes of text", size);
    double start = now_seconds();
    long n = vocab_encode(v, input, VOCAB_ADD_BOS, ids);
    double seconds = now_seconds() - start;
    if (n < 0) die("out of memory encoding %zu bytes of text", size);
    if (path) {
        write_escaped(stdout, path, 0);
        printf(": %ld token%s (BOS included) from %zu byte%s in %.3f s, %.1f MB/s\n", n, plural(n),
               size, plural((long)size), seconds, seconds > 0 ? size / seconds / 1e6 : 0.0);
    } else if (json)
        print_ids_json(v, ids, n);
    else
        print_ids(v, ids, n);
    free(ids);
    free(file_text);
}

int run_tokenize_gguf(const char *model_path, const char *text, const char *path, int json) {
    Vocab v;
    char err[1024];
    int rc = vocab_load_gguf(&v, model_path, err, sizeof err);
    if (rc < 0) die("%s", err);
    if (rc == 0) {
        run_tokenize(&v, text, path, json);
        vocab_free(&v);
    }
    return rc;
}
