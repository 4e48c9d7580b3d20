/* Times llama.cpp's tokenizer (llama_tokenize in npm's prebuilt libllama, as tests/llama_logits.c
 * links it) on a text file, for tools/bench_tokenizer.py's byte-level BPE table.
 *
 *   build/bench_llama_tokenize VOCAB.gguf FILE REPEATS
 *
 * Prints one line: the number of ids (BOS as the vocabulary adds it, control tokens' text plain)
 * and the median time of REPEATS tokenizations of the whole file, in seconds of this thread's
 * CPU time (loading and reading excluded). Errors: one line on stderr, exit 1.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench_args.h"
#include "bench_time.h"
#include "llama.h"

static void quiet(enum ggml_log_level level, const char *text, void *user_data) {
    (void)user_data;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: bench_llama_tokenize VOCAB.gguf FILE REPEATS\n");
        return 1;
    }
    int repeats = int_arg("bench_llama_tokenize", "REPEATS", argv[3], 1, 1000);
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.vocab_only = 1;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    FILE *f = fopen(argv[2], "rb");
    long size = -1;
    if (f && fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    char *text = size >= 0 ? malloc((size_t)size + 1) : NULL;
    if (!model || !text || (rewind(f), fread(text, 1, (size_t)size, f)) != (size_t)size) {
        fprintf(stderr, "bench_llama_tokenize: cannot load %s or read %s\n", argv[1], argv[2]);
        return 1;
    }
    fclose(f);
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    int cap = (int)size + 2;
    llama_token *ids = malloc((size_t)cap * sizeof *ids);
    double *seconds = malloc((size_t)repeats * sizeof *seconds);
    int n = 0;
    for (int r = 0; r < repeats; r++) {
        double start = cpu_seconds();
        n = llama_tokenize(vocab, text, (int)size, ids, cap, true, false);
        seconds[r] = cpu_seconds() - start;
    }
    printf("%d %.9f\n", n, median_seconds(seconds, repeats));
    free(seconds);
    free(ids);
    free(text);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
