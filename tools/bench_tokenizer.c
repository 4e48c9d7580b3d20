/* Times a tokenizer's encode on a text file, for tools/bench_tokenizer.py.
 *
 *   build/bench_tokenizer TOKENIZER FILE REPEATS
 *
 * TOKENIZER is a llama2.c tokenizer file (tokenizer.c, BOS first) or a GGUF of a byte-level BPE
 * vocabulary (bpe.c, BOS as the vocabulary adds it). Prints one line: the number of ids and the
 * median time of REPEATS encodes of the whole file, in seconds of this thread's CPU time
 * (loading and reading excluded).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_args.h"
#include "bench_time.h"
#include "bpe.h"
#include "tokenizer.h"

/* The text of the file (NUL-terminated) and its size, or NULL. */
static char *read_all(const char *path, long *size) {
    FILE *f = fopen(path, "rb");
    if (!f || fseek(f, 0, SEEK_END) != 0 || (*size = ftell(f)) < 0) {
        if (f) fclose(f);
        return NULL;
    }
    rewind(f);
    char *text = malloc((size_t)*size + 1);
    if (text && fread(text, 1, (size_t)*size, f) != (size_t)*size) {
        free(text);
        text = NULL;
    }
    fclose(f);
    if (text) text[*size] = '\0';
    return text;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: bench_tokenizer TOKENIZER FILE REPEATS\n");
        return 1;
    }
    int repeats = int_arg("bench_tokenizer", "REPEATS", argv[3], 1, 1000);
    char err[1024];
    Tokenizer t;
    Bpe b;
    int is_bpe = strlen(argv[1]) > 5 && strcmp(argv[1] + strlen(argv[1]) - 5, ".gguf") == 0;
    if ((is_bpe ? bpe_load_file(&b, argv[1], err, sizeof err)
                : tokenizer_load(&t, argv[1], err, sizeof err)) != 0) {
        fprintf(stderr, "bench_tokenizer: %s\n", err);
        return 1;
    }
    long size = 0;
    char *text = read_all(argv[2], &size);
    size_t room = is_bpe ? bpe_max_ids(&b, (size_t)size) : (size_t)size * 3 + 3;
    int *ids = malloc(room * sizeof *ids);
    double *seconds = malloc((size_t)repeats * sizeof *seconds);
    if (!text || !ids || !seconds) {
        fprintf(stderr, "bench_tokenizer: cannot read %s\n", argv[2]);
        return 1;
    }
    long n = 0;
    for (int r = 0; r < repeats; r++) {
        double start = cpu_seconds();
        n = is_bpe ? bpe_encode(&b, text, (size_t)size, BPE_ADD_BOS, ids)
                   : tokenizer_encode(&t, text, 1, 0, ids);
        seconds[r] = cpu_seconds() - start;
    }
    printf("%ld %.9f\n", n, median_seconds(seconds, repeats));
    free(seconds);
    free(ids);
    free(text);
    if (is_bpe)
        bpe_free(&b);
    else
        tokenizer_free(&t);
    return 0;
}
