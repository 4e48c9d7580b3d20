/* End to end: the `run` binary on stories260K against llama2.c's outputs, and every bad input
 * getting one line on stderr and a non-zero exit. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"

#define MODEL     "models/stories260K.bin"
#define TOKENIZER "models/tok512.bin"

/* ----------------------------------------------------------------------------
 * Outputs of llama2.c's run.c (tests/fixtures, copied from ../shared/models/expected) */

/* The fast path, and the plain one of reference.c (--reference), give llama2.c's text. */
Test(run, greedy_matches_llama2c) {
    char *expected = read_file("tests/fixtures/stories260K_greedy_once_upon_a_time.txt", NULL);
    cr_assert_not_null(expected);
    const char *paths[] = {NULL, "--reference"};
    for (int k = 0; k < 2; k++) {
        RunResult r = run_program((const char *[]){MODEL, "-t", "0", "-n", "256", "-i",
                                                   "Once upon a time", paths[k], NULL});
        cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
        cr_assert_str_eq(r.out, expected, "%s", paths[k] ? paths[k] : "the fast path");
        cr_assert(strstr(r.err, "norm rmsnorm"), "summary names the norm: %s", r.err);
        result_free(&r);
    }
    free(expected);
}

Test(run, seeded_topp_sample_matches_llama2c) {
    char *expected = read_file("tests/fixtures/stories260K_t1.0_p0.9_s133742.txt", NULL);
    cr_assert_not_null(expected);
    RunResult r = run_program((const char *[]){MODEL, "-z", TOKENIZER, "-t", "1.0", "-p", "0.9",
                                               "-s", "133742", "-n", "256", NULL});
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cr_assert_str_eq(r.out, expected);
    result_free(&r);
    free(expected);
}

Test(run, batch_at_either_end_of_its_range_gives_the_greedy_text) {
    /* the 4 prefilled positions of the prompt in batches of 1 (as decode runs them), and in one
     * batch of a seq_len-sized (512) buffer */
    char *expected = read_file("tests/fixtures/stories260K_greedy_once_upon_a_time.txt", NULL);
    cr_assert_not_null(expected);
    const char *batches[][2] = {{"-b", "1"}, {"--batch=1", NULL}, {"--batch", "512"}};
    for (size_t k = 0; k < sizeof(batches) / sizeof(batches[0]); k++) {
        /* batches[k][1] ends the arguments when it is NULL */
        RunResult r = run_program((const char *[]){
            MODEL, "-t", "0", "-n", "256", "Once upon a time", batches[k][0], batches[k][1], NULL});
        cr_assert_eq(r.exit_code, 0, "%s: %s", batches[k][0], r.err);
        cr_assert_str_eq(r.out, expected, "%s %s", batches[k][0], batches[k][1]);
        result_free(&r);
    }
    free(expected);
}

Test(run, positional_prompt_equals_dash_i) {
    RunResult a =
        run_program((const char *[]){MODEL, "Once upon a time", "-t", "0", "-n", "40", NULL});
    RunResult b =
        run_program((const char *[]){MODEL, "-i", "Once upon a time", "-t", "0", "-n", "40", NULL});
    cr_assert_eq(a.exit_code, 0);
    cr_assert_str_eq(a.out, b.out);
    result_free(&a);
    result_free(&b);
}

Test(run, layernorm_changes_the_text) {
    char *rms = read_file("tests/fixtures/stories260K_greedy_once_upon_a_time.txt", NULL);
    RunResult r = run_program((const char *[]){MODEL, "-t", "0", "-n", "256", "--norm=layernorm",
                                               "Once upon a time", NULL});
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cr_assert(strncmp(r.out, "Once upon a time", 16) == 0, "the prompt is echoed: %s", r.out);
    cr_assert(strlen(r.out) > 40, "it generates text: %s", r.out);
    cr_assert_str_neq(r.out, rms); /* the text itself: tests/test_f64.py, from a float64 pass */
    cr_assert(strstr(r.err, "norm layernorm"), "summary names the norm: %s", r.err);
    result_free(&r);
    free(rms);
}

Test(run, steps_are_clamped_to_seq_len) {
    RunResult r = run_program((const char *[]){MODEL, "-t", "0", "-n", "100000", "Hi", NULL});
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cr_assert(strstr(r.err, "seq_len 512"), "notice: %s", r.err);
    result_free(&r);
}

/* --help exits 0 and fits an 80-column terminal */
Test(run, help_exits_zero) {
    RunResult r = run_program((const char *[]){"--help", NULL});
    cr_assert_eq(r.exit_code, 0);
    cr_assert(strstr(r.out, "--norm"));
    for (const char *line = r.out; *line;) {
        size_t len = strcspn(line, "\n");
        cr_assert_leq(len, 80, "a help line of %zu columns: %.*s", len, (int)len, line);
        line += len + (line[len] == '\n');
    }
    result_free(&r);
}

/* ----------------------------------------------------------------------------
 * Bad input: exit 1, exactly one line on stderr containing `needle` (expect_error) */

/* Writes the first `size` bytes of `src` (or of src padded with zeros) as scratch/name. */
static char *write_prefix(const char *src, const char *name, size_t size) {
    size_t n;
    char *data = read_file(src, &n);
    cr_assert_not_null(data);
    char *grown = calloc(size > n ? size : n, 1);
    memcpy(grown, data, n);
    char *path = scratch_path(name);
    cr_assert_eq(write_file(path, grown, size), 0);
    free(grown);
    free(data);
    return path;
}

/* stories260K.bin with its header replaced by header: dim, hidden_dim, n_layers, n_heads,
 * n_kv_heads, vocab_size, seq_len. */
static char *write_header(const char *name, const int32_t header[7]) {
    size_t n;
    char *data = read_file(MODEL, &n);
    memcpy(data, header, 7 * sizeof(int32_t));
    char *path = scratch_path(name);
    cr_assert_eq(write_file(path, data, n), 0);
    free(data);
    return path;
}

Test(bad_input, missing_model) {
    expect_error((const char *[]){"models/no-such-model.bin", NULL}, "cannot open model");
}

Test(bad_input, no_model_argument) {
    expect_error((const char *[]){NULL}, "no model given");
    expect_error((const char *[]){"-i", "Once upon a time", NULL}, "no model given");
}

Test(run, prompt_before_model) {
    RunResult a = run_program((const char *[]){"-i", "Once", MODEL, "-t", "0", "-n", "8", NULL});
    RunResult b = run_program((const char *[]){MODEL, "Once", "-t", "0", "-n", "8", NULL});
    cr_assert_eq(a.exit_code, 0, "stderr: %s", a.err);
    cr_assert_str_eq(a.out, b.out);
    result_free(&a);
    result_free(&b);
}

Test(run, tiny_temperature_and_topp_are_greedy_in_the_limit) {
    /* logits / 2e-38 overflow; top-p 0.001 < 1 / 512 on the near-flat distribution of
     * temperature 1e30 leaves no candidate: both fall back to the most likely token instead of
     * reading outside the candidates */
    char *greedy = read_file("tests/fixtures/stories260K_greedy_once_upon_a_time.txt", NULL);
    const char *cases[][4] = {{"-t", "2e-38", "-p", "0.9"}, {"-t", "1e30", "-p", "0.001"}};
    for (int k = 0; k < 2; k++) {
        RunResult r =
            run_program((const char *[]){MODEL, "Once upon a time", "-n", "256", cases[k][0],
                                         cases[k][1], cases[k][2], cases[k][3], NULL});
        cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
        cr_assert_str_eq(r.out, greedy, "case %d", k);
        result_free(&r);
    }
    free(greedy);
}

Test(run, byte_fallback_characters_are_echoed) {
    /* tok512 has no piece for the emoji: it is four <0xXX> tokens, printed as its four bytes */
    RunResult r = run_program((const char *[]){MODEL, "-i", "caf\xc3\xa9 \xf0\x9f\x98\x80 ok", "-n",
                                               "12", "-t", "0", NULL});
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cr_assert(strncmp(r.out, "caf\xc3\xa9 \xf0\x9f\x98\x80 ok", 12) == 0, "%s", r.out);
    result_free(&r);
}

Test(run, generated_count_in_summary) {
    /* -n 2 with the 2-token prompt "Once" (BOS, "Once") samples exactly one token */
    RunResult r = run_program((const char *[]){MODEL, "Once", "-n", "2", "-t", "0", NULL});
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cr_assert(strstr(r.err, "prompt tokens 2, generated tokens 1,"), "%s", r.err);
    result_free(&r);
}

Test(bad_input, model_is_a_directory) {
    expect_error((const char *[]){"models", NULL}, "not a regular file");
}

Test(bad_input, empty_model) {
    make_scratch();
    expect_error((const char *[]){write_prefix(MODEL, "empty.bin", 0), NULL}, "empty");
}

Test(bad_input, truncated_header) {
    make_scratch();
    expect_error((const char *[]){write_prefix(MODEL, "short.bin", 10), NULL},
                 "shorter than its 28-byte header");
}

Test(bad_input, truncated_weights) {
    make_scratch();
    expect_error((const char *[]){write_prefix(MODEL, "cut.bin", 1056540 - 4), NULL},
                 "implies 1056540");
}

Test(bad_input, trailing_bytes) {
    make_scratch();
    expect_error((const char *[]){write_prefix(MODEL, "long.bin", 1056540 + 4), NULL},
                 "implies 1056540");
}

Test(bad_input, inconsistent_headers) {
    make_scratch();
    expect_error(
        (const char *[]){write_header("a.bin", (const int32_t[7]){0, 172, 5, 8, 4, 512, 512}),
                         NULL},
        "dim is 0");
    expect_error(
        (const char *[]){write_header("b.bin", (const int32_t[7]){-64, 172, 5, 8, 4, 512, 512}),
                         NULL},
        "dim is -64");
    expect_error(
        (const char *[]){write_header("c.bin", (const int32_t[7]){64, 172, 5, 7, 7, 512, 512}),
                         NULL},
        "not a multiple of n_heads");
    expect_error(
        (const char *[]){write_header("d.bin", (const int32_t[7]){64, 172, 5, 8, 3, 512, 512}),
                         NULL},
        "not a multiple of n_kv_heads");
    expect_error(
        (const char *[]){write_header("e.bin", (const int32_t[7]){64, 172, 5, 64, 64, 512, 512}),
                         NULL},
        "head_size 1");
    expect_error(
        (const char *[]){
            write_header("f.bin", (const int32_t[7]){64, 172, 2000000, 8, 4, 512, 512}), NULL},
        "n_layers is 2000000");
    expect_error(
        (const char *[]){
            write_header("g.bin", (const int32_t[7]){64, 172, 5, 8, 4, INT32_MIN, 512}), NULL},
        "vocab_size is 0");
    expect_error(
        (const char *[]){write_header("h.bin", (const int32_t[7]){64, 172, 5, 8, 16, 512, 512}),
                         NULL},
        "not a multiple of n_kv_heads");
    expect_error(
        (const char *[]){write_header("j.bin", (const int32_t[7]){64, 172, 5, 8, 4, 2, 512}), NULL},
        "vocab_size 2 is too small");
    /* fields at the limit whose tensor sizes would wrap a 64-bit sum around */
    expect_error(
        (const char *[]){write_header("k.bin", (const int32_t[7]){1 << 20, 699048, 1 << 20, 1 << 19,
                                                                  1, -(1 << 20), 1}),
                         NULL},
        "implies 18446744073709551615");
    /* consistent, but not this file's size */
    expect_error(
        (const char *[]){write_header("i.bin", (const int32_t[7]){64, 172, 6, 8, 4, 512, 512}),
                         NULL},
        "implies");
}

Test(bad_input, fifo_model) {
    make_scratch();
    char *fifo = scratch_path("fifo.bin");
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    expect_error((const char *[]){fifo, NULL}, "not a regular file");
}

Test(bad_input, fifo_tokenizer_without_writer) {
    make_scratch();
    char *fifo = scratch_path("tok.bin");
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    expect_error((const char *[]){MODEL, "-z", fifo, NULL}, "empty tokenizer file");
}

Test(bad_input, non_finite_logits) {
    /* BOS's embedding row (id 1: bytes 28 + 256 .. 28 + 512) set to NaN poisons every logit */
    make_scratch();
    size_t n;
    char *data = read_file(MODEL, &n);
    float nan_row[64];
    for (int i = 0; i < 64; i++) nan_row[i] = NAN;
    memcpy(data + 28 + 64 * sizeof(float), nan_row, sizeof(nan_row));
    char *path = scratch_path("nan.bin");
    cr_assert_eq(write_file(path, data, n), 0);
    free(data);
    expect_error((const char *[]){path, "-z", TOKENIZER, NULL}, "non-finite logit at position 0");
    /* the --logits file, written up to the error, is removed rather than left partial */
    char *logits = scratch_path("logits.f32");
    expect_error((const char *[]){path, "-z", TOKENIZER, "--logits", logits, NULL},
                 "non-finite logit at position 0");
    cr_assert_neq(access(logits, F_OK), 0, "the partial --logits file is removed");
}

Test(bad_input, model_folder_too_long_to_look_beside) {
    make_scratch();
    char dir[1200];
    snprintf(dir, sizeof(dir), "%s", scratch);
    char part[201];
    memset(part, 'd', 200);
    part[200] = '\0';
    for (int i = 0; i < 5; i++) {
        strcat(dir, "/");
        strcat(dir, part);
        cr_assert_eq(mkdir(dir, 0700), 0);
    }
    char model[1300];
    snprintf(model, sizeof(model), "%s/m.bin", dir);
    size_t n;
    char *data = read_file(MODEL, &n);
    cr_assert_eq(write_file(model, data, n), 0);
    free(data);
    expect_error((const char *[]){model, NULL}, "too long to look beside it; use -z");
}

Test(bad_input, missing_tokenizer) {
    expect_error((const char *[]){MODEL, "-z", "models/no-such-tokenizer.bin", NULL},
                 "no-such-tokenizer.bin");
}

Test(bad_input, endless_tokenizer_device, .timeout = 30) {
    expect_error((const char *[]){MODEL, "-z", "/dev/zero", NULL},
                 "/dev/zero: tokenizer file is larger than 64 MiB");
}

Test(bad_input, no_tokenizer_beside_model) {
    make_scratch();
    char *model = write_prefix(MODEL, "stories260K.bin", 1056540);
    expect_error((const char *[]){model, NULL}, "tok512.bin and");
}

Test(bad_input, empty_and_truncated_tokenizer) {
    make_scratch();
    expect_error((const char *[]){MODEL, "-z", write_prefix(TOKENIZER, "empty.bin", 0), NULL},
                 "empty.bin");
    expect_error((const char *[]){MODEL, "-z", write_prefix(TOKENIZER, "cut.bin", 3000), NULL},
                 "cut.bin");
}

Test(bad_input, tokenizer_vocab_size_differs) {
    expect_error((const char *[]){MODEL, "-z", "models/tokenizer.bin", NULL},
                 "has 32000 pieces but the model's vocab_size is 512");
}

Test(bad_input, options) {
    expect_error((const char *[]){MODEL, "--bogus", NULL}, "unknown option '--bogus'");
    expect_error((const char *[]){MODEL, "-q", "1", NULL}, "unknown option '-q'");
    expect_error((const char *[]){MODEL, "--norm=batchnorm", NULL}, "unknown --norm 'batchnorm'");
    expect_error((const char *[]){MODEL, "-t", "-0.5", NULL}, "-t (temperature) must be >= 0");
    expect_error((const char *[]){MODEL, "-t", "hot", NULL}, "-t needs a number");
    expect_error((const char *[]){MODEL, "-p", "1.5", NULL}, "-p (top-p) must be in [0, 1]");
    expect_error((const char *[]){MODEL, "-p", "-0.1", NULL}, "-p (top-p) must be in [0, 1]");
    /* just past 1, shown as given rather than rounded to a value inside the range */
    expect_error((const char *[]){MODEL, "-p", "1.0000001", NULL},
                 "-p (top-p) must be in [0, 1], got 1.0000001");
    expect_error((const char *[]){MODEL, "-n", "0", NULL},
                 "-n (steps) must be in 1..2147483647, got 0");
    expect_error((const char *[]){MODEL, "-n", "-3", NULL},
                 "-n (steps) must be in 1..2147483647, got -3");
    expect_error((const char *[]){MODEL, "-n", "12x", NULL}, "-n needs an integer");
    expect_error((const char *[]){MODEL, "-n", NULL}, "-n needs a value");
    expect_error((const char *[]){MODEL, "-s", "-1", NULL}, "-s (seed) must be >= 0");
    expect_error((const char *[]){MODEL, "--threads=0", NULL}, "--threads must be in 1..1024");
    expect_error((const char *[]){MODEL, "a", "b", NULL}, "unexpected argument 'b'");
    expect_error((const char *[]){MODEL, "a", "-i", "b", NULL}, "the prompt is given twice");
    expect_error((const char *[]){MODEL, "-t", "inf", NULL}, "-t is out of range");
    expect_error((const char *[]){MODEL, "-t", "1e-46", NULL}, "-t is out of range");
    expect_error((const char *[]){MODEL, "-t=-1", NULL}, "-t (temperature) must be >= 0");
    expect_error((const char *[]){MODEL, "--compare", "--logits", "/tmp/x", NULL},
                 "--logits goes with generation");
}

/* An unknown option names the nearest known one (a third of its letters edited, or one starting
 * the other); -p's text that is not a number says what -p is here. */
Test(bad_input, unknown_options_suggest_the_nearest) {
    expect_error((const char *[]){MODEL, "--tmp", "0.5", NULL},
                 "unknown option '--tmp' (did you mean --temp? see run --help)");
    expect_error((const char *[]){MODEL, "--top_k", "5", NULL}, "(did you mean --top-k?");
    expect_error((const char *[]){MODEL, "--seeds", "5", NULL}, "(did you mean --seed?");
    expect_error((const char *[]){MODEL, "--ctx", "5", NULL}, "(did you mean --ctx-size?");
    expect_error((const char *[]){MODEL, "--n_predict=5", NULL}, "(did you mean --n-predict?");
    expect_error((const char *[]){MODEL, "-p", "Once upon a time", NULL},
                 "-p needs a number, got 'Once upon a time' (-p is top-p here, as in llama2.c; "
                 "the prompt is --prompt TEXT (-i), -f FILE or the argument after MODEL)");
    expect_error((const char *[]){MODEL, "--top-k", "-1", NULL}, "--top-k must be >= 0, got -1");
    expect_error((const char *[]){MODEL, "--min-p", "1.5", NULL}, "--min-p must be in [0, 1]");
    expect_error((const char *[]){MODEL, "--repeat-penalty", "0", NULL},
                 "--repeat-penalty must be > 0, got 0");
    expect_error((const char *[]){MODEL, "--repeat-last-n", "-2", NULL},
                 "--repeat-last-n must be >= -1, got -2");
    expect_error((const char *[]){MODEL, "--top-k", "4", "--ppl", "data/stories.txt", NULL},
                 "--top-k goes with generation and --compare, not with --ppl");
    expect_error((const char *[]){MODEL, "-n", "9", "--n-predict", "4", NULL},
                 "give -n (positions, the prompt's included) or --n-predict (generated tokens), "
                 "not both");
    expect_error((const char *[]){MODEL, "-m", "chat", "--n-predict", "4", NULL},
                 "--n-predict goes with -m generate, not with -m chat");
    expect_error((const char *[]){MODEL, "-c", "8", "--tokenize", "x", NULL},
                 "--ctx-size sizes the kv cache, which --tokenize uses none of");
}

/* llama.cpp's other names for the same options (common/arg.cpp: --temperature, --prompt,
 * --predict, --system-prompt, --batch-size): each prints what the name it stands for prints,
 * which differs from what leaving the option out prints, so that the name is not ignored. */
Test(run, llama_cpp_names_do_what_ours_do) {
    enum { OURS, THEIRS, NEITHER };
    static const struct {
        const char *args[3][12]; /* after MODEL: with our name, with llama.cpp's, without */
        const char *input;       /* stdin, for -m chat; NULL: none */
    } cases[] = {
        {.args = {{"-s", "7", "-n", "40", "-t", "0", "Once"},
                  {"-s", "7", "-n", "40", "--temperature", "0", "Once"},
                  {"-s", "7", "-n", "40", "Once"}}},
        {.args = {{"-t", "0", "-n", "40", "-i", "Lily"},
                  {"-t", "0", "-n", "40", "--prompt", "Lily"},
                  {"-t", "0", "-n", "40"}}},
        {.args = {{"-t", "0", "--n-predict", "5", "Once"},
                  {"-t", "0", "--predict", "5", "Once"},
                  {"-t", "0", "Once"}}},
        {.args = {{"-t", "0", "-n", "60", "-m", "chat", "-y", "You tell stories."},
                  {"-t", "0", "-n", "60", "-m", "chat", "--system-prompt", "You tell stories."},
                  {"-t", "0", "-n", "60", "-m", "chat"}},
         .input = "Tell me a story.\n"},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        RunResult r[3];
        for (int v = OURS; v <= NEITHER; v++) {
            const char *args[16] = {MODEL};
            for (int i = 0; cases[k].args[v][i]; i++) args[i + 1] = cases[k].args[v][i];
            const char *in = cases[k].input;
            r[v] = in ? run_program_input(args, in, strlen(in)) : run_program(args);
            cr_assert_eq(r[v].exit_code, 0, "case %zu, %d: %s", k, v, r[v].err);
        }
        cr_assert_str_eq(r[THEIRS].out, r[OURS].out, "case %zu", k);
        cr_assert_str_neq(r[NEITHER].out, r[OURS].out, "case %zu: the option changes nothing", k);
        for (int v = OURS; v <= NEITHER; v++) result_free(&r[v]);
    }
    /* --batch-size changes no text (its logits are the same at any batch): its errors are -b's */
    expect_error((const char *[]){MODEL, "--batch-size", "0", NULL},
                 "--batch must be in 1..seq_len, got 0");
    expect_error((const char *[]){MODEL, "--batch-size", "8", "--ppl", "data/stories.txt", NULL},
                 "--batch goes with generation's prefill");
}

/* --n-predict counts generated tokens as llama.cpp's -n does; -c ends the text at its context. */
Test(run, n_predict_counts_generated_tokens_and_ctx_size_limits_the_context) {
    RunResult r = run_program(
        (const char *[]){MODEL, "-t", "0", "--n-predict", "7", "Once upon a time", NULL});
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cr_assert(strstr(r.err, "prompt tokens 5, generated tokens 7,"), "%s", r.err);
    RunResult c = run_program((const char *[]){MODEL, "-t", "0", "-c", "20", "Once upon a time",
                                               NULL}); /* 20 positions: 4 fed, 16 sampled */
    cr_assert_eq(c.exit_code, 0, "%s", c.err);
    cr_assert(strstr(c.err, "prompt tokens 5, generated tokens 16,"), "%s", c.err);
    RunResult all = run_program(
        (const char *[]){MODEL, "-t", "0", "--ctx-size", "20", "--n-predict", "-1", "Once", NULL});
    cr_assert(strstr(all.err, "prompt tokens 2, generated tokens 19,"), "%s", all.err);
    RunResult big = run_program((const char *[]){MODEL, "-t", "0", "-c", "600", "-n", "3", NULL});
    cr_assert(strstr(big.err, "run: -c 600 is more than seq_len 512; the context is 512 "
                              "positions\n"),
              "%s", big.err);
    result_free(&r);
    result_free(&c);
    result_free(&all);
    result_free(&big);
}

/* --info against the shapes of llama2.c's stories260K (dim 64, hidden_dim 172, 5 layers, 8 heads, 4
 * kv heads, 512 tokens and positions) and the bytes they make, by hand: f32 weights, the
 * embedding 512 x 64, per layer wq and wo 64 x 64, wk and wv 32 x 64, w1, w2, w3 172 x 64, the
 * norms 11 x 64, (32768 + 5 x 45312 + 704) x 4 = 1040128; the kv cache 2 x 5 x 512 x 32 x 4 =
 * 655360. The llama2.c version 2 file holds q8_0 in groups of 64 (a row: 64 bytes and a 4-byte
 * scale) but for w2, dequantized to f32 at load (its groups straddle rows): 512 x 68 + 5 x
 * (4352 + 2 x 2176 + 4352 + 2 x 11696 + 172 x 64 x 4) + 2816 = 440032. */
Test(run, info_describes_the_model_file) {
    RunResult r = run_program((const char *[]){MODEL, "--info", "--json", NULL});
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    const char *want[] = {"\"format\": \"llama2.c legacy\"",
                          "\"dim\": 64, \"hidden_dim\": 172, \"n_layers\": 5, \"n_heads\": 8, "
                          "\"n_kv_heads\": 4, \"head_size\": 8, \"vocab_size\": 512, "
                          "\"seq_len\": 512",
                          "\"wq\": \"f32\"",
                          "\"norm\": \"rmsnorm\", \"norm_eps\": 1e-05, \"norm_bias\": false",
                          "\"rope_theta\": 10000",
                          "\"bos\": {\"id\": 1, \"piece\": \"\\u000a<s>\\u000a\"}",
                          "\"weight_bytes\": 1040128",
                          "\"kv_cache_bytes\": 655360"};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        cr_assert(strstr(r.out, want[i]), "'%s' not in %s", want[i], r.out);
    RunResult c = run_program((const char *[]){MODEL, "--info", "-c", "100", NULL});
    cr_assert(strstr(c.out, "kv cache 128000 bytes (0.12 MiB) at 100 positions"), "%s", c.out);
    RunResult v2 = run_program(
        (const char *[]){"models/stories260K_ak42_v2_q8.bin", "-z", TOKENIZER, "--info", NULL});
    if (access("models/stories260K_ak42_v2_q8.bin", R_OK) != 0) {
        cr_log_warn("skipped run::info_describes_the_model_file's llama2.c version 2 part: "
                    "models/stories260K_ak42_v2_q8.bin is not there (mirror only)");
    } else {
        cr_assert_eq(v2.exit_code, 0, "%s", v2.err);
        cr_assert(strstr(v2.out, "dtype         token_embedding q8_0, wq q8_0, wk q8_0, wv q8_0, "
                                 "wo q8_0, w1 q8_0, w2 f32, w3 q8_0, wcls q8_0 (groups of 64)"),
                  "%s", v2.out);
        cr_assert(strstr(v2.out, "weights 440032 bytes"), "%s", v2.out);
    }
    expect_error((const char *[]){MODEL, "--info", "-t", "0", NULL},
                 "-t does not go with --info, which describes the model file");
    result_free(&r);
    result_free(&c);
    result_free(&v2);
}

Test(bad_input, batch_values) {
    const struct {
        const char *args[4]; /* after MODEL, up to the first NULL */
        const char *needle;
    } cases[] = {
        {{"--batch=0"}, "run: --batch must be in 1..seq_len, got 0"},
        {{"-b", "-3"}, "run: --batch must be in 1..seq_len, got -3"},
        {{"--batch=4294967297"}, "run: --batch must be in 1..seq_len, got 4294967297"},
        {{"--batch=513"}, "run: --batch: batch 513 is not in 1..512 (the model's seq_len)"},
        /* -n past seq_len gets its notice only once every check has passed */
        {{"-n", "1000", "--batch=513"}, "run: --batch: batch 513 is not in 1..512"},
        {{"--batch=12x"}, "run: --batch needs an integer, got '12x'"},
        {{"-b", "seven"}, "run: -b needs an integer, got 'seven'"},
        {{"--batch="}, "run: --batch needs an integer, got ''"},
        {{"-b"}, "run: -b needs a value"},
        {{"--batch=8", "--prefill=serial"}, "it conflicts with --prefill=serial"},
        {{"--prefill=serial", "-b", "8"}, "it conflicts with --prefill=serial"},
        {{"--batch=8", "--ppl", "data/stories.txt"}, "--batch goes with generation's prefill"},
        {{"--batch=8", "--compare"}, "--batch goes with generation's prefill"},
        {{"--batch=8", "--tokenize", "Hi"}, "--batch goes with generation's prefill"},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        const char *args[6] = {MODEL};
        memcpy(args + 1, cases[k].args, sizeof(cases[k].args));
        expect_error(args, cases[k].needle);
    }
}

Test(bad_input, options_a_mode_would_ignore) {
    /* --ppl and --tokenize sample nothing and --compare runs its passes serially: a sampler
     * option or --prefill there would change nothing, and is refused rather than ignored */
    const struct {
        const char *args[4]; /* after MODEL, up to the first NULL */
        const char *needle;
    } cases[] = {
        {{"--ppl", "data/stories.txt", "-n", "5"}, "run: -n goes with generation and --compare"},
        {{"-t", "0", "--ppl", "data/stories.txt"}, "run: -t goes with generation and --compare"},
        {{"--tokenize", "Hi", "-s", "7"}, "run: -s goes with generation and --compare"},
        {{"--tokenize-file", "data/stories.txt", "-p", "0.5"}, "run: -p goes with generation"},
        {{"--tokenize", "Hi", "--norm=layernorm"}, "run: --norm changes the forward pass"},
        {{"--compare", "--prefill=serial"}, "run: --prefill goes with generation, not with"},
        {{"--prefill=batch", "--ppl", "data/stories.txt"}, "run: --prefill goes with generation"},
        {{"--tokenize", "Hi", "--prefill=serial"}, "run: --prefill goes with generation"},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        const char *args[6] = {MODEL};
        memcpy(args + 1, cases[k].args, sizeof(cases[k].args));
        expect_error(args, cases[k].needle);
    }
}

Test(bad_input, prompt_longer_than_seq_len) {
    /* each " a" is one token: 600 of them exceed seq_len 512 */
    char prompt[1300] = "";
    for (int i = 0; i < 600; i++) strcat(prompt, " a");
    expect_error((const char *[]){MODEL, prompt, NULL}, "longer than the model's seq_len 512");
    /* -n past seq_len is clamped with a notice, but an error is then the only line */
    expect_error((const char *[]){MODEL, "-n", "600", prompt, NULL},
                 "longer than the model's seq_len 512");
}

Test(bad_input, prompt_longer_than_steps) {
    expect_error((const char *[]){MODEL, "Once upon a time", "-n", "3", NULL}, "more than -n 3");
}

Test(bad_input, invalid_utf8_prompt) {
    expect_error((const char *[]){MODEL, "caf\xc3", NULL}, "not valid UTF-8");
    expect_error((const char *[]){MODEL, "\xc0\xaf", NULL}, "not valid UTF-8");
    expect_error((const char *[]){MODEL, "\xed\xa0\x80", NULL}, "not valid UTF-8");
}

/* ----------------------------------------------------------------------------
 * --tokenize, --json, --tokenize-file. Ids from SentencePiece (tok512.model): "Hello world" is
 * 346 " He", 306 "ll", 414 "o", 263 " w", 304 "or", 341 "ld"; 'a"b\c' + newline is
 * 261 " a", 436 '"', 430 "b", 500 "\", 429 "c", 13 "<0x0A>". */

Test(tokenize, prints_ids_and_pieces) {
    RunResult r = run_program((const char *[]){MODEL, "--tokenize", "Hello world", NULL});
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cr_assert_str_eq(r.out, "     1 -> '<s>'\n"
                            "   346 -> ' He'\n"
                            "   306 -> 'll'\n"
                            "   414 -> 'o'\n"
                            "   263 -> ' w'\n"
                            "   304 -> 'or'\n"
                            "   341 -> 'ld'\n");
    result_free(&r);
}

Test(tokenize, json_escapes_pieces) {
    RunResult r = run_program((const char *[]){MODEL, "--json", "--tokenize", "a\"b\\c\n", NULL});
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cr_assert_str_eq(r.out, "{\"ids\": [1, 261, 436, 430, 500, 429, 13], \"pieces\": [\"<s>\", "
                            "\" a\", \"\\\"\", \"b\", \"\\\\\", \"c\", \"<0x0A>\"]}\n");
    result_free(&r);
}

Test(tokenize, empty_text_is_bos) {
    RunResult r = run_program((const char *[]){MODEL, "--tokenize", "", "--json", NULL});
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cr_assert_str_eq(r.out, "{\"ids\": [1], \"pieces\": [\"<s>\"]}\n");
    result_free(&r);
}

Test(tokenize, file_count) {
    make_scratch();
    char *path = scratch_path("hello.txt");
    cr_assert_eq(write_file(path, "Hello world", 11), 0);
    RunResult r = run_program((const char *[]){MODEL, "--tokenize-file", path, NULL});
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cr_assert(strstr(r.out, ": 7 tokens (BOS included) from 11 bytes in "), "%s", r.out);
    cr_assert(strstr(r.out, " MB/s\n"), "%s", r.out);
    result_free(&r);
}

Test(bad_input, tokenize) {
    make_scratch();
    char *empty = scratch_path("empty.txt"), *nul = scratch_path("nul.txt");
    char *bad = scratch_path("bad.txt");
    cr_assert_eq(write_file(empty, "", 0), 0);
    cr_assert_eq(write_file(nul, "ab\0cd", 5), 0);
    cr_assert_eq(write_file(bad, "caf\xc3 au lait", 12), 0);
    expect_error((const char *[]){MODEL, "--tokenize-file", "/nonexistent/x.txt", NULL},
                 "/nonexistent/x.txt: cannot open");
    expect_error((const char *[]){MODEL, "--tokenize-file", empty, NULL}, "the text file is empty");
    expect_error((const char *[]){MODEL, "--tokenize-file", scratch, NULL}, scratch);
    expect_error((const char *[]){MODEL, "--tokenize-file", nul, NULL}, "NUL byte at offset 2");
    expect_error((const char *[]){MODEL, "--tokenize-file", bad, NULL},
                 "bad.txt: not valid UTF-8 (byte 0xC3 at offset 3)");
    expect_error((const char *[]){MODEL, "--tokenize", "x\xff", NULL},
                 "--tokenize text: not valid UTF-8 (byte 0xFF at offset 1)");
    expect_error((const char *[]){MODEL, "--tokenize", NULL}, "--tokenize needs a value");
    expect_error((const char *[]){MODEL, "--json", NULL},
                 "--json goes with --tokenize, --compare, --ppl, --info or --trace");
    expect_error((const char *[]){MODEL, "--tokenize", "a", "--tokenize-file", bad, NULL},
                 "not both");
    expect_error((const char *[]){MODEL, "Once", "--tokenize", "a", NULL}, "take no prompt");
    expect_error((const char *[]){MODEL, "-z", "models/tokenizer.bin", "--tokenize", "a", NULL},
                 "has 32000 pieces but the model's vocab_size is 512");
}

/* ----------------------------------------------------------------------------
 * --profile, --compare, --ppl */

Test(run, profile_counts_every_operation) {
    /* 256 positions of 5 layers: 11 norm calls each (2 per layer and the final one), one QKV,
     * RoPE, attention, output projection and FFN lap per layer; 252 sampled tokens (positions
     * 4..255, after the 5 prompt tokens). --prefill=serial: one model_forward per position
     * (batched prefill laps once per batch of positions) */
    char *expected = read_file("tests/fixtures/stories260K_greedy_once_upon_a_time.txt", NULL);
    RunResult r =
        run_program((const char *[]){MODEL, "-t", "0", "-n", "256", "--profile", "--threads=1",
                                     "--prefill=serial", "Once upon a time", NULL});
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cr_assert_str_eq(r.out, expected, "profiling does not change the text");
    const struct {
        const char *name;
        int calls;
    } ops[] = {{"embedding", 256}, {"norms", 2816},     {"qkv", 1280},
               {"rope", 1280},     {"attention", 1280}, {"output projection", 1280},
               {"ffn", 1280},      {"classifier", 256}, {"sampling", 252}};
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        const char *line = strstr(r.err, ops[i].name);
        cr_assert_not_null(line, "%s missing: %s", ops[i].name, r.err);
        const char *end = strchr(line, '\n');
        while (end[-1] == ' ') end--;
        const char *last = end;
        while (last[-1] != ' ') last--;
        cr_assert_eq(atoi(last), ops[i].calls, "%s calls in: %.*s", ops[i].name, (int)(end - line),
                     line);
    }
    result_free(&r);
    free(expected);
}

/* The line of `out` that starts with `prefix`, without it, up to the newline (static buffer). */
static const char *line_after(const char *out, const char *prefix) {
    static char line[4096];
    const char *p = strstr(out, prefix);
    cr_assert_not_null(p, "'%s' not in: %s", prefix, out);
    p += strlen(prefix);
    size_t n = strcspn(p, "\n");
    snprintf(line, sizeof(line), "%.*s", (int)n, p);
    return line;
}

Test(run, compare_shows_both_greedy_texts) {
    RunResult a = run_program(
        (const char *[]){MODEL, "-t", "0", "-n", "100", "--threads=1", "Once upon a time", NULL});
    RunResult b = run_program((const char *[]){MODEL, "-t", "0", "-n", "100", "--threads=1",
                                               "--norm=layernorm", "Once upon a time", NULL});
    RunResult c = run_program((const char *[]){MODEL, "-t", "0", "-n", "100", "--threads=1",
                                               "--compare", "Once upon a time", NULL});
    cr_assert_eq(c.exit_code, 0, "stderr: %s", c.err);
    /* compare mode writes a text on one line, its newlines as \n */
    char *texts[2] = {a.out, b.out}, shown[2][4096];
    for (int k = 0; k < 2; k++) {
        size_t len = strlen(texts[k]) - 1, j = 0; /* without run's final newline */
        for (size_t i = 0; i < len && j + 2 < sizeof(shown[k]); i++) {
            if (texts[k][i] == '\n')
                shown[k][j++] = '\\', shown[k][j++] = 'n';
            else
                shown[k][j++] = texts[k][i];
        }
        shown[k][j] = '\0';
    }
    cr_assert_str_eq(line_after(c.out, "A rmsnorm    "), shown[0]);
    cr_assert_str_eq(line_after(c.out, "B layernorm  "), shown[1]);
    /* the greedy texts agree up to "she saw a big," and then go " r"(ed) and " s"(hiny): the
     * float64 forward pass's greedy texts part there too (tests/test_f64.py) */
    cr_assert_str_eq(line_after(c.out, "first difference at position "),
                     "40 (continuation token 36): A ' r', B ' s'");
    /* the table's first input is BOS, by its SentencePiece name as --tokenize shows it */
    cr_assert(strncmp(line_after(c.out, "max|dlogit|\n"), "    0  '<s>' ", 13) == 0, "%s", c.out);
    cr_assert(strstr(c.out, "layer 4 ffn"));
    cr_assert(strstr(c.out, "final"));
    cr_assert(strstr(c.out, "top-1 agreement"));
    result_free(&a);
    result_free(&b);
    result_free(&c);
}

/* The number after key in s (asserting it is there). */
static double value_after(const char *s, const char *key) {
    const char *p = strstr(s, key);
    cr_assert_not_null(p, "'%s' not in %s", key, s);
    return strtod(p + strlen(key), NULL);
}

/* --repeat N: the speed as the median and range over N rounds (compare) or runs (profile), each
 * median inside its range; --summary leaves out the texts and the tables by position and site. */
Test(run, repeat_reports_medians_and_ranges_and_summary_shortens_compare) {
    RunResult r = run_program((const char *[]){MODEL, "-t", "0", "-n", "40", "--compare",
                                               "--summary", "--repeat", "3", "Once", NULL});
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cr_assert(strstr(r.out, "speed over 3 rounds taking turns"), "%s", r.out);
    cr_assert(strstr(r.out, "summary: mean KL "), "%s", r.out);
    cr_assert_null(strstr(r.out, "input token"), "no table by position: %s", r.out);
    cr_assert_null(strstr(r.out, "layer 0 attention"), "no table by site: %s", r.out);
    cr_assert_null(strstr(r.out, "\nA rmsnorm"), "no texts: %s", r.out);
    cr_assert(strstr(r.out, "B faster in "), "%s", r.out);
    cr_assert(strstr(r.out, " of 3\n"), "%s", r.out);
    const char *row = strstr(r.out, "\nrmsnorm ");
    cr_assert_not_null(row, "%s", r.out);
    double median, lo, hi;
    cr_assert_eq(sscanf(row, "\nrmsnorm %lf %lf %lf", &median, &lo, &hi), 3, "%s", row);
    cr_assert(lo <= median && median <= hi, "%g not in %g..%g", median, lo, hi);
    RunResult j = run_program((const char *[]){MODEL, "-t", "0", "-n", "20", "--compare", "--json",
                                               "--repeat", "2", "Once", NULL});
    cr_assert_eq(value_after(j.out, "\"rounds\": "), 2, "%s", j.out);
    cr_assert_leq(value_after(j.out, "\"tokens_per_s_min\": "),
                  value_after(j.out, "\"tokens_per_s\": "));
    cr_assert(strstr(j.out, "\"speed_ratio_b_over_a\": {\"median\": "), "%s", j.out);
    RunResult p = run_program(
        (const char *[]){MODEL, "-t", "0", "-n", "30", "--profile", "--repeat", "3", "Once", NULL});
    cr_assert_eq(p.exit_code, 0, "%s", p.err);
    cr_assert(strstr(p.err, "the median of 3 runs of the same text"), "%s", p.err);
    const char *ffn = strstr(p.err, "  ffn ");
    cr_assert_not_null(ffn, "%s", p.err);
    long calls;
    cr_assert_eq(sscanf(ffn, "  ffn %lf %lf %lf %*f%% %ld", &median, &lo, &hi, &calls), 4, "%s",
                 ffn);
    cr_assert(lo <= median && median <= hi, "%g not in %g..%g", median, lo, hi);
    cr_assert_eq(calls, 30 * 5, "one run's calls: 30 positions x 5 layers"); /* 1 + 29 */
    expect_error((const char *[]){MODEL, "--repeat", "3", "x", NULL},
                 "--repeat goes with --compare or --profile");
    expect_error((const char *[]){MODEL, "--summary", "x", NULL}, "--summary goes with --compare");
    expect_error((const char *[]){MODEL, "--compare", "--summary", "--json", "x", NULL},
                 "--summary shortens --compare's text; --json has every number");
    expect_error((const char *[]){MODEL, "--compare", "--repeat", "101", "x", NULL},
                 "--repeat must be in 1..100, got 101");
    result_free(&r);
    result_free(&j);
    result_free(&p);
}

Test(run, compare_texts_keep_characters_spelled_in_byte_tokens) {
    /* tok512 spells "é" and "日" in byte-fallback tokens (0xC3 0xA9, 0xE6 0x97 0xA5): generation
     * prints those bytes, and --compare's texts must show them as generation did */
    const char *prompt = "caf\xc3\xa9 \xe6\x97\xa5";
    RunResult a = run_program((const char *[]){MODEL, "-t", "0", "-n", "12", prompt, NULL});
    cr_assert_eq(a.exit_code, 0, "stderr: %s", a.err);
    cr_assert(strncmp(a.out, prompt, strlen(prompt)) == 0, "generation echoes it: %s", a.out);
    RunResult c =
        run_program((const char *[]){MODEL, "-t", "0", "-n", "12", "--compare", prompt, NULL});
    cr_assert_eq(c.exit_code, 0, "stderr: %s", c.err);
    a.out[strcspn(a.out, "\n")] = '\0'; /* the 12 positions stay on one line */
    cr_assert_str_eq(line_after(c.out, "A rmsnorm    "), a.out);
    RunResult j = run_program(
        (const char *[]){MODEL, "-t", "0", "-n", "12", "--compare", "--json", prompt, NULL});
    cr_assert_eq(j.exit_code, 0, "stderr: %s", j.err);
    char texts[256];
    snprintf(texts, sizeof(texts), "\"texts\": [\"%s", prompt);
    cr_assert(strstr(j.out, texts), "'%s' not in: %s", texts, j.out);
    result_free(&a);
    result_free(&c);
    result_free(&j);
}

Test(run, compare_eps_placement_is_close) {
    RunResult r = run_program((const char *[]){MODEL, "-t", "0", "-n", "64", "--threads=1",
                                               "--compare=rmsnorm,rmsnorm_eps_outside", "--json",
                                               "Hi", NULL});
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cr_assert(strstr(r.out, "\"first_difference\": -1"), "same greedy text: %s", r.out);
    cr_assert(strstr(r.out, "\"top1_agreement\": 1,"), "%s", r.out);
    result_free(&r);
}

Test(run, compare_json_is_valid_utf8_for_a_model_path_that_is_not) {
    /* a path is bytes: 0xFF in it becomes U+FFFD in the JSON string, not a raw byte */
    make_scratch();
    char *path = scratch_path("m\xff.bin");
    size_t size;
    char *bytes = read_file(MODEL, &size);
    cr_assert_not_null(bytes);
    cr_assert_eq(write_file(path, bytes, size), 0);
    free(bytes);
    RunResult r = run_program(
        (const char *[]){path, "-z", TOKENIZER, "--compare", "--json", "-n", "12", "Hi", NULL});
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cr_assert(strstr(r.out, "m\\ufffd.bin\","), "%s", r.out);
    cr_assert_null(strchr(r.out, '\xff'), "no raw 0xFF byte in the JSON");
    result_free(&r);
}

Test(bad_input, ppl_files) {
    make_scratch();
    expect_error((const char *[]){MODEL, "--ppl", "no-such-text.txt", NULL},
                 "no-such-text.txt: cannot open");
    expect_error((const char *[]){MODEL, "--ppl", "models", NULL}, "models: not a regular file");
    char *empty = scratch_path("empty.txt");
    cr_assert_eq(write_file(empty, "", 0), 0);
    expect_error((const char *[]){MODEL, "--ppl", empty, NULL}, "the text file is empty");
    /* remove_extra_whitespaces leaves nothing of it: BOS alone, nothing to predict */
    char *spaces = scratch_path("spaces.txt");
    cr_assert_eq(write_file(spaces, "   ", 3), 0);
    expect_error((const char *[]){MODEL, "--ppl", spaces, NULL}, "shorter than 2 tokens");
    char *bad = scratch_path("bad.txt");
    cr_assert_eq(write_file(bad, "caf\xc3", 4), 0);
    expect_error((const char *[]){MODEL, "--ppl", bad, NULL}, "not valid UTF-8");
    char *nul = scratch_path("nul.txt");
    cr_assert_eq(write_file(nul, "a\0b", 3), 0);
    expect_error((const char *[]){MODEL, "--ppl", nul, NULL}, "contains a NUL byte");
}

Test(bad_input, mode_options) {
    expect_error((const char *[]){MODEL, "--ppl", NULL}, "--ppl needs a value");
    expect_error((const char *[]){MODEL, "Hi", "--ppl", "data/stories.txt", NULL},
                 "--ppl reads its text from FILE; drop the prompt");
    const char *modes[][5] = {
        {"--ppl", "data/stories.txt", "--compare"},
        {"--tokenize", "Hi", "--compare"},
        {"--tokenize", "Hi", "--ppl", "data/stories.txt"},
        {"--tokenize-file", "data/stories.txt", "--compare"},
    };
    for (size_t k = 0; k < sizeof(modes) / sizeof(modes[0]); k++) {
        const char *args[6] = {MODEL};
        memcpy(args + 1, modes[k], sizeof(modes[k]));
        expect_error(args, "--compare, --ppl and --tokenize are separate modes; give one");
    }
    expect_error((const char *[]){MODEL, "--tokenize", "Hi", "--profile", NULL},
                 "--profile times forward passes, which --tokenize runs none of");
    expect_error((const char *[]){MODEL, "-n", "99999999999", NULL},
                 "-n (steps) must be in 1..2147483647, got 99999999999");
    expect_error((const char *[]){MODEL, "--compare", "--norm=layernorm", NULL},
                 "name them with --compare=A,B instead of --norm");
    expect_error((const char *[]){MODEL, "--compare", "--profile", NULL},
                 "--compare times both norms itself");
    expect_error((const char *[]){MODEL, "--compare=rmsnorm", NULL},
                 "--compare needs two norms as A,B, got 'rmsnorm'");
    /* a separate A,B would otherwise be taken for the prompt */
    expect_error((const char *[]){MODEL, "--compare", "layernorm,rmsnorm", NULL},
                 "--compare takes its norms as --compare=layernorm,rmsnorm, with '='");
    expect_error((const char *[]){MODEL, "--compare=rmsnorm,layernorm,rmsnorm", NULL},
                 "--compare needs two norms as A,B");
    expect_error((const char *[]){MODEL, "--compare=rmsnorm,batchnorm", NULL},
                 "unknown norm 'batchnorm' in --compare");
    expect_error((const char *[]){MODEL, "--compare=,layernorm", NULL}, "unknown norm ''");
    expect_error((const char *[]){MODEL, "--compare=layernorm,layernorm", NULL},
                 "two different norms, got 'layernorm' twice");
    expect_error((const char *[]){MODEL, "--profile=1", NULL}, "unknown option '--profile=1'");
}

Test(run, compare_at_full_seq_len) {
    /* a 501-token prompt and -n 512: A's text reaches 513 tokens, one more than the kv cache
     * holds; teacher forcing must stop at seq_len (the sanitizer build checks the bounds) */
    char prompt[1100] = "";
    for (int i = 0; i < 500; i++) strcat(prompt, " a");
    RunResult r = run_program(
        (const char *[]){MODEL, "-t", "0", "-n", "512", "--threads=1", "--compare", prompt, NULL});
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cr_assert(strstr(r.out, "teacher-forced along A's text (512 positions)"), "%s", r.out);
    result_free(&r);
}

/* ----------------------------------------------------------------------------
 * stdout: a failed write is an error; a reader gone (`run ... | head`) ends quietly */

/* Each mode that prints to stdout, with stdout on /dev/full and closed: exit 1 and one line
 * naming stdout; into a pipe whose reader has gone: status 0 and nothing on stderr. */
Test(bad_input, failed_writes_to_stdout) {
    const char *modes[][10] = {
        {MODEL, "-t", "0", "-n", "20", "Once", NULL},
        {MODEL, "-m", "chat", "-t", "0", "-n", "40", "-i", "Hi", NULL},
        {"--version", NULL},
        {MODEL, "--ppl", "data/stories.txt", NULL},
        {MODEL, "--tokenize", "Once upon a time", NULL},
        {MODEL, "-t", "0", "-n", "20", "--compare", "--json", NULL},
        {"--help", NULL},
    };
    const struct {
        StdoutKind kind;
        const char *error; /* NULL: none, status 0 */
    } outs[] = {
        {STDOUT_FULL, "run: cannot write to stdout: No space left on device"},
        {STDOUT_CLOSED, "run: cannot write to stdout: Bad file descriptor"},
        {STDOUT_PIPE_CLOSED, NULL},
    };
    for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
        for (size_t k = 0; k < sizeof(outs) / sizeof(outs[0]); k++) {
            RunResult r = run_program_stdout(modes[m], outs[k].kind);
            if (outs[k].error) {
                cr_assert_eq(r.exit_code, 1, "%s (%zu): exit %d, stderr: %s", modes[m][1], k,
                             r.exit_code, r.err);
                cr_assert_eq(count_lines(r.err), 1, "%s (%zu): one line: %s", modes[m][1], k,
                             r.err);
                cr_assert(strstr(r.err, outs[k].error), "%s (%zu): %s", modes[m][1], k, r.err);
            } else {
                cr_assert_eq(r.exit_code, 0, "%s: exit %d into a closed pipe, stderr: %s",
                             modes[m][1], r.exit_code, r.err);
                cr_assert_str_eq(r.err, "", "%s: quiet into a closed pipe", modes[m][1]);
            }
            result_free(&r);
        }
    }
}

/* The thread count from the environment is bounded as --threads is; --threads overrides it. */
Test(bad_input, omp_num_threads_out_of_range) {
    setenv("OMP_NUM_THREADS", "100000", 1);
    expect_error((const char *[]){MODEL, "-n", "8", "Hi", NULL},
                 "OMP_NUM_THREADS=100000 is more than 1024 threads");
    RunResult r = run_program((const char *[]){MODEL, "-n", "8", "--threads=2", "Hi", NULL});
    cr_assert_eq(r.exit_code, 0, "with --threads: %s", r.err);
    result_free(&r);
}

/* A name with a newline, a terminal's escape code or a byte that is not UTF-8 is printed
 * escaped, as --tokenize escapes pieces, so that the error stays one line of plain text. */
Test(bad_input, names_are_escaped_in_errors) {
    expect_error((const char *[]){"no\nsuch\x1b[31m.bin", NULL}, "no\\nsuch\\x1B[31m.bin");
    expect_error((const char *[]){MODEL, "-z", "tok\r\n.bin", NULL}, "tok\\x0D\\n.bin");
    expect_error((const char *[]){MODEL, "--ppl", "t\n.txt", NULL}, "t\\n.txt: cannot open");
    expect_error((const char *[]){MODEL, "--norm=rms\nnorm", NULL}, "unknown --norm 'rms\\nnorm'");
    expect_error((const char *[]){MODEL, "--a\nb", NULL}, "unknown option '--a\\nb'");
    expect_error((const char *[]){MODEL, "--caf\xc3\xa9\xff", NULL},
                 "unknown option '--caf\xc3\xa9\\xFF'");
}

/* ----------------------------------------------------------------------------
 * Messages that misled */

/* stories260K.bin with seq_len 1: its rope tables (seq_len * head_size floats, the file's last
 * bytes, as the classifier is shared) cut to one row. */
static char *write_seq_len_1_model(void) {
    size_t n;
    char *data = read_file(MODEL, &n);
    cr_assert_not_null(data);
    int32_t seq_len = 1;
    memcpy(data + 24, &seq_len, sizeof(seq_len));
    char *path = scratch_path("seq_len_1.bin");
    cr_assert_eq(write_file(path, data, n - 511 * 8 * sizeof(float)), 0);
    free(data);
    return path;
}

Test(run, counts_of_one_are_singular_and_no_notice_about_an_n_not_given) {
    make_scratch();
    char *model = write_seq_len_1_model();
    RunResult r = run_program((const char *[]){model, "-z", TOKENIZER, "-t", "0", NULL});
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cr_assert_eq(count_lines(r.err), 1, "the summary alone, no notice about -n: %s", r.err);
    result_free(&r);
    r = run_program((const char *[]){model, "-z", TOKENIZER, "-t", "0", "-n", "3", NULL});
    cr_assert(strstr(r.err, "run: -n 3 is more than seq_len 1; running 1 position\n"), "%s", r.err);
    result_free(&r);
    r = run_program((const char *[]){model, "-z", TOKENIZER, "-t", "0", "--compare", NULL});
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cr_assert_str_eq(r.err, "", "no notice about -n");
    cr_assert(strstr(r.out, "the two texts are the same (1 token)\n"), "%s", r.out);
    cr_assert(strstr(r.out, "teacher-forced along A's text (1 position):"), "%s", r.out);
    cr_assert(strstr(r.out, "averages over the 1 position of"), "%s", r.out);
    result_free(&r);
    /* BOS and " a": one token predicted */
    char *text = scratch_path("a.txt");
    cr_assert_eq(write_file(text, "a", 1), 0);
    r = run_program((const char *[]){MODEL, "--ppl", text, NULL});
    cr_assert(strstr(r.out, ": 1 token predicted in 1 chunk of up to 512,"), "%s", r.out);
    cr_assert(strstr(r.err, "scored 1 token,"), "%s", r.err);
    result_free(&r);
    r = run_program((const char *[]){MODEL, "--tokenize-file", text, NULL});
    cr_assert(strstr(r.out, ": 2 tokens (BOS included) from 1 byte in"), "%s", r.out);
    result_free(&r);
}

Test(bad_input, integer_out_of_range_is_not_a_non_integer) {
    expect_error((const char *[]){MODEL, "-n", "99999999999999999999", NULL},
                 "-n is out of range, got '99999999999999999999'");
    expect_error((const char *[]){MODEL, "-s", "-99999999999999999999", NULL},
                 "-s is out of range, got '-99999999999999999999'");
}

/* The model and the tokenizer given the wrong way round: the error says which kind the file is. */
Test(bad_input, model_and_tokenizer_swapped) {
    expect_error((const char *[]){MODEL, "-z", MODEL, NULL},
                 "run: models/stories260K.bin looks like a model file, not a tokenizer");
    expect_error((const char *[]){TOKENIZER, NULL},
                 "run: models/tok512.bin looks like a tokenizer file, not a model");
    expect_error((const char *[]){TOKENIZER, "-z", MODEL, NULL},
                 "run: models/tok512.bin looks like a tokenizer file, not a model");
}
