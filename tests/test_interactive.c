/* End to end: the EOS stop, prompts from files and stdin (-f, -i -), the seed in the summary,
 * --version and --help, and -m chat with scripted stdin. Chat replies are checked against
 * generation's text for the same tokens, and against greedy decoding written here over model.c's
 * forward pass for a whole transcript fed from position 0. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval.h"
#include "helpers.h"
#include "model.h"
#include "tokenizer.h"

#define MODEL     "models/stories260K.bin"
#define TOKENIZER "models/tok512.bin"

/* ----------------------------------------------------------------------------
 * The EOS stop */

/* stories260K with EOS's embedding row (shared with the classifier) set to BOS's times 1.01:
 * where BOS was the likeliest token with a positive logit (a story's end), EOS is now, so that
 * greedy replies end at EOS (stories260K itself never gives it 1e-8). Written into the scratch
 * directory. */
static char *write_eos_model(void) {
    size_t n;
    char *data = read_file(MODEL, &n);
    cr_assert_not_null(data);
    float *embedding = (float *)(data + 28); /* (vocab_size 512, dim 64) after the header */
    for (int i = 0; i < 64; i++)
        embedding[TOKEN_EOS * 64 + i] = embedding[TOKEN_BOS * 64 + i] * 1.01f;
    char *path = scratch_path("eos.bin");
    cr_assert_eq(write_file(path, data, n), 0);
    free(data);
    return path;
}

/* Generation's continuation of `prompt` (-t 0 -n steps): its stdout without the echoed prompt and
 * the final newline, leading spaces dropped as chat drops them (malloc'd). */
static char *continuation(const char *model, const char *prompt, const char *steps,
                          const char *extra) {
    RunResult r = run_program((const char *[]){model, "-z", TOKENIZER, "-t", "0", "-n", steps, "-i",
                                               prompt, extra, NULL});
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    size_t len = strlen(prompt), out_len = strlen(r.out);
    cr_assert(strncmp(r.out, prompt, len) == 0, "the prompt is echoed: %s", r.out);
    cr_assert(out_len > len && r.out[out_len - 1] == '\n', "%s", r.out);
    r.out[out_len - 1] = '\0';
    const char *text = r.out + len;
    char *copy = strdup(text + strspn(text, " "));
    result_free(&r);
    return copy;
}

Test(run, eos_ends_generation_unless_ignore_eos) {
    /* the EOS model's greedy story ends at EOS; --ignore-eos (llama2.c's rule) shows the EOS and
     * goes on */
    make_scratch();
    char *model = write_eos_model();
    const char *prompt = "Once upon a time";
    char *stopped = continuation(model, prompt, "512", NULL);
    char *full = continuation(model, prompt, "512", "--ignore-eos");
    char expected[8192];
    snprintf(expected, sizeof(expected), "%s\n</s>\n", stopped);
    cr_assert(strncmp(full, expected, strlen(expected)) == 0, "'%s' does not start with '%s'", full,
              expected);
    cr_assert_gt(strlen(full), strlen(expected), "it goes on after the EOS");
    free(stopped);
    free(full);
}

Test(bad_input, ignore_eos_where_nothing_is_sampled) {
    expect_error((const char *[]){MODEL, "--ppl", "data/stories.txt", "--ignore-eos", NULL},
                 "--ignore-eos goes with generation and --compare");
    expect_error((const char *[]){MODEL, "--tokenize", "Hi", "--ignore-eos", NULL},
                 "--ignore-eos goes with generation and --compare");
}

/* ----------------------------------------------------------------------------
 * Prompts from a file (-f) and from stdin (-f -, -i -) */

Test(prompt, from_a_file_or_stdin_equals_the_argument) {
    make_scratch();
    char *path = scratch_path("prompt.txt");
    const char *text = "Once upon a time, Lily\n"; /* the final newline is dropped */
    cr_assert_eq(write_file(path, text, strlen(text)), 0);
    RunResult arg =
        run_program((const char *[]){MODEL, "-t", "0", "-n", "64", "Once upon a time, Lily", NULL});
    cr_assert_eq(arg.exit_code, 0, "stderr: %s", arg.err);
    const char *const ways[][2] = {{"-f", path}, {"-f", "-"}, {"-i", "-"}, {"-", NULL}};
    for (int k = 0; k < 4; k++) {
        RunResult r = run_program_input(
            (const char *[]){MODEL, "-t", "0", "-n", "64", ways[k][0], ways[k][1], NULL}, text,
            strlen(text));
        cr_assert_eq(r.exit_code, 0, "%s %s: %s", ways[k][0], ways[k][1], r.err);
        cr_assert_str_eq(r.out, arg.out, "%s %s", ways[k][0], ways[k][1]);
        result_free(&r);
    }
    result_free(&arg);
}

Test(prompt, longer_than_an_argument_can_be) {
    /* 70000 times " a", one token each: 140000 bytes, past the kernel's 128 KiB for one argument */
    make_scratch();
    size_t size = 140000;
    char *text = malloc(size + 1);
    for (size_t i = 0; i < size; i += 2) memcpy(text + i, " a", 2);
    char *path = scratch_path("long.txt");
    cr_assert_eq(write_file(path, text, size), 0);
    expect_error((const char *[]){MODEL, "-f", path, NULL},
                 "the prompt is 70001 tokens, longer than the model's seq_len 512");
    expect_error_input((const char *[]){MODEL, "-i", "-", NULL}, text, size,
                       "the prompt is 70001 tokens, longer than the model's seq_len 512");
    free(text);
}

Test(bad_input, prompt_files) {
    make_scratch();
    char *empty = scratch_path("empty.txt"), *bad = scratch_path("bad.txt");
    cr_assert_eq(write_file(empty, "", 0), 0);
    cr_assert_eq(write_file(bad, "caf\xc3 au lait", 12), 0);
    expect_error((const char *[]){MODEL, "-f", empty, NULL}, "empty.txt: the text file is empty");
    expect_error((const char *[]){MODEL, "-f", bad, NULL},
                 "bad.txt: not valid UTF-8 (byte 0xC3 at offset 3)");
    expect_error((const char *[]){MODEL, "-f", "/nonexistent/p.txt", NULL},
                 "/nonexistent/p.txt: cannot open");
    expect_error((const char *[]){MODEL, "-f", "models", NULL}, "models: not a regular file");
    expect_error_input((const char *[]){MODEL, "-f", "-", NULL}, "", 0, "stdin: the text is empty");
    expect_error_input((const char *[]){MODEL, "-i", "-", NULL}, "caf\xc3", 4,
                       "stdin: not valid UTF-8 (byte 0xC3 at offset 3)");
    expect_error_input((const char *[]){MODEL, "-i", "-", NULL}, "ab\0c", 4,
                       "stdin: the text contains a NUL byte at offset 2");
    expect_error((const char *[]){MODEL, "-i", "Once", "-f", empty, NULL},
                 "the prompt is given twice");
    expect_error((const char *[]){MODEL, "-f", empty, "Once", NULL}, "unexpected argument 'Once'");
    expect_error((const char *[]){MODEL, "--ppl", "data/stories.txt", "-f", empty, NULL},
                 "--ppl reads its text from FILE; drop the prompt");
}

/* ----------------------------------------------------------------------------
 * The seed, --version, --help */

/* The seed in a run's summary line. */
static unsigned long long summary_seed(const char *err) {
    const char *p = strstr(err, ", seed ");
    cr_assert_not_null(p, "no seed in: %s", err);
    return strtoull(p + 7, NULL, 10);
}

Test(run, the_summary_gives_the_seed_to_repeat_a_text) {
    const char *args[] = {MODEL, "-n", "48", "-s", "0", "Lily", NULL};
    RunResult a = run_program(args), b = run_program(args);
    cr_assert_eq(a.exit_code, 0, "stderr: %s", a.err);
    unsigned long long seed_a = summary_seed(a.err), seed_b = summary_seed(b.err);
    cr_assert_neq(seed_a, 0);
    cr_assert_neq(seed_a, seed_b, "two runs from the clock, within a second");
    char seed[32];
    snprintf(seed, sizeof(seed), "%llu", seed_a);
    args[4] = seed;
    RunResult c = run_program(args);
    cr_assert_eq(c.exit_code, 0, "stderr: %s", c.err);
    cr_assert_str_eq(c.out, a.out, "-s %s repeats the text", seed);
    cr_assert_eq(summary_seed(c.err), seed_a);
    result_free(&a);
    result_free(&b);
    result_free(&c);
}

Test(run, version) {
    RunResult r = run_program((const char *[]){"--version", NULL});
    cr_assert_eq(r.exit_code, 0);
    unsigned major, minor;
    char end;
    cr_assert_eq(sscanf(r.out, "normllama %u.%u%c", &major, &minor, &end), 3, "%s", r.out);
    cr_assert_eq(end, '\n', "%s", r.out);
    cr_assert_eq(count_lines(r.out), 1, "%s", r.out);
    result_free(&r);
}

Test(run, help_ends_with_examples) {
    RunResult r = run_program((const char *[]){"--help", NULL});
    cr_assert_eq(r.exit_code, 0);
    const char *examples = strstr(r.out, "\nexamples:\n");
    cr_assert_not_null(examples, "%s", r.out);
    int n = 0;
    for (const char *line = examples + 11; *line; line = strchr(line, '\n') + 1, n++)
        cr_assert(strncmp(line, "  run models/", 13) == 0, "not an example: %s", line);
    cr_assert(n >= 3 && n <= 5, "%d examples", n);
    cr_assert(strstr(r.out, "--ignore-eos"));
    result_free(&r);
}
