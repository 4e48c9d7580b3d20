/* --tokenize and --tokenize-file (tokenize.h): the tokenizer alone, its ids listed or its speed
 * on a file. The encoding is tokenizer.c's; this file reads the input and prints.
 */
#include "tokenize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io.h"
#include "profile.h"

/* One id per line with its piece, as llama.cpp's tokenize tool prints them; control bytes in a
 * piece are escaped so that each id keeps to one line. */
static void print_ids(const Tokenizer *t, const int *ids, int n) {
    for (int i = 0; i < n; i++) {
        printf("%6d -> '", ids[i]);
        write_escaped(stdout, shown_piece(t, ids[i]), 0);
        printf("'\n");
    }
}

static void print_ids_json(const Tokenizer *t, const int *ids, int n) {
    printf("{\"ids\": [");
    for (int i = 0; i < n; i++) printf("%s%d", i ? ", " : "", ids[i]);
    printf("], \"pieces\": [");
    for (int i = 0; i < n; i++) {
        if (i) printf(", ");
        print_json_string(shown_piece(t, ids[i]));
    }
    printf("]}\n");
}

void run_tokenize(const Tokenizer *t, const char *text, const char *path, int json) {
    char *file_text = path ? read_text(path) : NULL;
    const char *input = file_text ? file_text : text;
    require_utf8("--tokenize text", input, file_text);
    size_t size = strlen(input);
    int *ids = malloc((size + 3) * sizeof *ids); /* well-formed UTF-8: one id per byte at most */
    if (!ids) die("out of memory for %zu bytes of text", size);
    double start = now_seconds();
    int n = tokenizer_encode(t, input, 1, 0, ids);
    double seconds = now_seconds() - start;
    if (path) {
        write_escaped(stdout, path, 0);
        printf(": %d token%s (BOS included) from %zu byte%s in %.3f s, %.1f MB/s\n", n, plural(n),
               size, plural((long)size), seconds, seconds > 0 ? size / seconds / 1e6 : 0.0);
    } else if (json)
        print_ids_json(t, ids, n);
    else
        print_ids(t, ids, n);
    free(ids);
    free(file_text);
}
