/* The sampler against llama2.c's run.c: the plain multinomial draw (-p 0 and -p 1 both mean "the
 * whole distribution" there), temperatures below and above 1, and top-p other than 0.9, each text
 * equal to the one llama2.c's run.c printed with the same arguments on stories260K
 * (tests/fixtures; docs/TESTING.md says how they were made). test_run.c holds -t 0 and
 * -t 1 -p 0.9. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "helpers.h"

#define MODEL     "models/stories260K.bin"
#define TOKENIZER "models/tok512.bin"

/* run's arguments after the model and tokenizer, ending in NULL, and llama2.c's text for them */
typedef struct {
    const char *args[11];
    const char *fixture;
} Case;

static void expect_llama2c_text(const Case *c) {
    char *expected = read_file(c->fixture, NULL);
    cr_assert_not_null(expected, "%s", c->fixture);
    const char *args[16] = {MODEL, "-z", TOKENIZER};
    for (int i = 0; c->args[i]; i++) args[3 + i] = c->args[i];
    RunResult r = run_program(args);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cr_assert_str_eq(r.out, expected, "%s", c->fixture);
    result_free(&r);
    free(expected);
}

Test(sampler, multinomial_with_p_0_or_1_matches_llama2c) {
    const Case cases[] = {
        {{"-t", "1.0", "-p", "0", "-s", "42", "-n", "256", NULL},
         "tests/fixtures/stories260K_t1.0_p0_s42.txt"},
        /* llama2.c prints the same text for -p 1: topp >= 1 is the whole distribution too */
        {{"-t", "1.0", "-p", "1", "-s", "42", "-n", "256", NULL},
         "tests/fixtures/stories260K_t1.0_p0_s42.txt"},
        {{"-t", "1.5", "-p", "0", "-s", "99", "-n", "256", NULL},
         "tests/fixtures/stories260K_t1.5_p0_s99.txt"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) expect_llama2c_text(&cases[i]);
}

Test(sampler, other_temperatures_and_top_p_match_llama2c) {
    const Case cases[] = {
        {{"-t", "0.8", "-p", "0.9", "-s", "7", "-n", "256", "-i", "Once upon a time", NULL},
         "tests/fixtures/stories260K_t0.8_p0.9_s7_once_upon_a_time.txt"},
        {{"-t", "0.5", "-p", "0.5", "-s", "1234", "-n", "200", "-i", "Lily", NULL},
         "tests/fixtures/stories260K_t0.5_p0.5_s1234_n200_lily.txt"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) expect_llama2c_text(&cases[i]);
}
