/* The sampler: against llama2.c's run.c, the plain multinomial draw (-p 0 and -p 1 both mean "the
 * whole distribution" there), temperatures below and above 1, and top-p other than 0.9, each text
 * equal to the one llama2.c's run.c printed with the same arguments on stories260K
 * (tests/fixtures; docs/TESTING.md says how they were made; test_run.c holds -t 0 and
 * -t 1 -p 0.9); then the chain's other stages (sampler.h) against distributions derived by hand:
 * the repetition penalty and its window, top-k, top-p after top-k (renormalized), min-p, the
 * temperature before them, and the draws' frequencies; and the options that set them, end to end
 * on stories260K. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "sampler.h"

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

/* ----------------------------------------------------------------------------
 * The chain's stages beyond llama2.c's */

/* A sampler of settings set over n tokens (freed by the caller with sampler_free). */
static Sampler make(int n, SamplerSettings set) {
    Sampler s;
    cr_assert_eq(sampler_init(&s, n, &set, 42), 0);
    return s;
}

/* Asserts that the candidates kept are ids[0..n) in that order with probabilities probs (within
 * 1e-6: sums of a few floats of about 1) and that their mass is their sum. */
static void expect_kept(Sampler *s, const float *in, int n, const int *ids, const float *probs) {
    float mass;
    int kept = sampler_truncate(s, in, &mass);
    cr_assert_eq(kept, n, "kept %d tokens, expected %d", kept, n);
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        cr_assert_eq(s->candidates[i].index, ids[i], "candidate %d", i);
        cr_expect_float_eq(s->candidates[i].prob, probs[i], 1e-6, "candidate %d", i);
        sum += probs[i];
    }
    cr_expect_float_eq(mass, sum, 1e-6);
}

static const float P[4] = {0.45f, 0.3f, 0.15f, 0.1f};

Test(sampler, top_k_keeps_the_k_most_likely) {
    Sampler s = make(4, (SamplerSettings){.temperature = 1, .top_k = 2});
    const float p[4] = {0.1f, 0.4f, 0.2f, 0.3f};
    expect_kept(&s, p, 2, (int[]){1, 3}, (float[]){0.4f, 0.3f});
    sampler_free(&s);
}

/* Top-p takes its share of what top-k left: 0.45 is not more than 0.5 of the whole (it takes 0.45
 * + 0.3), but is more than 0.5 of the two kept (0.75 / 2 = 0.375). */
Test(sampler, top_p_after_top_k_takes_its_share_of_the_mass_kept) {
    Sampler alone = make(4, (SamplerSettings){.temperature = 1, .topp = 0.5f});
    expect_kept(&alone, P, 2, (int[]){0, 1}, (float[]){0.45f, 0.3f});
    Sampler after = make(4, (SamplerSettings){.temperature = 1, .topp = 0.5f, .top_k = 2});
    expect_kept(&after, P, 1, (int[]){0}, (float[]){0.45f});
    sampler_free(&alone);
    sampler_free(&after);
}

/* min-p 0.5 keeps p >= 0.225 (0.45 and 0.3), 0.3 keeps p >= 0.135 (0.15 too); after top-p 0.8
 * (0.45 + 0.3 + 0.15 = 0.9 > 0.8: three), min-p 0.5 leaves two. */
Test(sampler, min_p_keeps_those_at_least_that_share_of_the_top) {
    Sampler half = make(4, (SamplerSettings){.temperature = 1, .min_p = 0.5f});
    expect_kept(&half, P, 2, (int[]){0, 1}, (float[]){0.45f, 0.3f});
    Sampler third = make(4, (SamplerSettings){.temperature = 1, .min_p = 0.3f});
    expect_kept(&third, P, 3, (int[]){0, 1, 2}, (float[]){0.45f, 0.3f, 0.15f});
    Sampler chain = make(4, (SamplerSettings){.temperature = 1, .topp = 0.8f, .min_p = 0.5f});
    expect_kept(&chain, P, 2, (int[]){0, 1}, (float[]){0.45f, 0.3f});
    /* top-k 3 then top-p 0.8: 0.75 passes 0.8 of the 0.9 kept (0.72), where alone it took three */
    Sampler all = make(4, (SamplerSettings){.temperature = 1, .top_k = 3, .topp = 0.8f});
    expect_kept(&all, P, 2, (int[]){0, 1}, (float[]){0.45f, 0.3f});
    sampler_free(&half);
    sampler_free(&third);
    sampler_free(&chain);
    sampler_free(&all);
}

/* CTRL's penalty 2 over the window: positive logits halved, negative doubled, each distinct token
 * once (token 0 twice in the window); a window of 2 sees only the last two tokens. */
Test(sampler, repetition_penalty_over_its_window) {
    Sampler s = make(5, (SamplerSettings){.repeat_penalty = 2, .repeat_last_n = 8});
    int context[] = {0, 1, 0, 3};
    for (int i = 0; i < 4; i++) sampler_accept(&s, context[i]);
    float logits[5] = {2, -1, 0.5f, 1, 0};
    sampler_penalize(&s, logits);
    const float want[5] = {1, -2, 0.5f, 0.5f, 0};
    for (int i = 0; i < 5; i++) cr_expect_float_eq(logits[i], want[i], 0, "token %d", i);
    sampler_free(&s);

    Sampler last2 = make(5, (SamplerSettings){.repeat_penalty = 2, .repeat_last_n = 2});
    for (int i = 0; i < 4; i++) sampler_accept(&last2, context[i]);
    float l2[5] = {2, -1, 0.5f, 1, 0};
    sampler_penalize(&last2, l2);
    const float want2[5] = {1, -1, 0.5f, 0.5f, 0}; /* the window: 0, 3 */
    for (int i = 0; i < 5; i++) cr_expect_float_eq(l2[i], want2[i], 0, "token %d", i);
    /* greedy sees the penalty: 1.5 beats the halved 2 */
    float greedy[5] = {2, 1.5f, 0, 0, 0};
    last2.set.temperature = 0;
    cr_assert_eq(sample(&last2, greedy), 1);
    sampler_reset(&last2, 7); /* an empty window: no penalty */
    float fresh[5] = {2, 1.5f, 0, 0, 0};
    cr_assert_eq(sample(&last2, fresh), 0);
    sampler_free(&last2);
}

/* Draws from logits log P under a chain, counted over N draws, against the distribution derived
 * by hand: each frequency within 5 standard deviations of a binomial, sqrt(p (1 - p) / N) <= 0.0025
 * at N = 40000, so 0.0125; a token the chain drops is never drawn. */
static void expect_frequencies(SamplerSettings set, const float want[4]) {
    enum { N = 40000 };
    Sampler s = make(4, set);
    int count[4] = {0};
    for (int i = 0; i < N; i++) {
        float logits[4];
        for (int k = 0; k < 4; k++) logits[k] = logf(P[k]);
        count[sample(&s, logits)]++;
    }
    for (int k = 0; k < 4; k++) {
        if (want[k] == 0)
            cr_expect_eq(count[k], 0, "token %d dropped, drawn %d times", k, count[k]);
        cr_expect_float_eq((double)count[k] / N, want[k], 0.0125, "token %d: %d of %d", k, count[k],
                           N);
    }
    sampler_free(&s);
}

Test(sampler, draws_follow_the_truncated_distribution) {
    /* top-k 3: 0.45, 0.3, 0.15 renormalized by 0.9 */
    expect_frequencies((SamplerSettings){.temperature = 1, .top_k = 3},
                       (float[]){0.5f, 1 / 3.0f, 1 / 6.0f, 0});
    /* temperature 0.5 squares the probabilities before min-p sees them: 0.2025, 0.09, 0.0225,
     * 0.01 over 0.325; min-p 0.1 keeps p >= 0.0623, dropping 0.0308 (at temperature 1 it would
     * keep all four); the three renormalized by 0.315 */
    expect_frequencies((SamplerSettings){.temperature = 0.5f, .min_p = 0.1f},
                       (float[]){0.2025f / 0.315f, 0.09f / 0.315f, 0.0225f / 0.315f, 0});
    /* no stage on: the whole distribution */
    expect_frequencies((SamplerSettings){.temperature = 1}, P);
}

/* End to end: --top-k 1 at temperature 1 is greedy; llama.cpp's names give llama2.c's text. */
Test(sampler, top_k_1_is_greedy_and_long_names_are_the_short_ones) {
    RunResult greedy = run_program((const char *[]){MODEL, "-t", "0", "-n", "60", "Lily", NULL});
    RunResult top1 =
        run_program((const char *[]){MODEL, "--top-k", "1", "-s", "9", "-n", "60", "Lily", NULL});
    cr_assert_eq(top1.exit_code, 0, "%s", top1.err);
    cr_assert_str_eq(top1.out, greedy.out);
    RunResult shorts = run_program_input(
        (const char *[]){MODEL, "-t", "0.8", "-p", "0.95", "-s", "5", "-f", "-", NULL}, "Tim", 3);
    RunResult longs = run_program_input((const char *[]){MODEL, "--temp", "0.8", "--top-p", "0.95",
                                                         "--seed", "5", "--file", "-", NULL},
                                        "Tim", 3);
    cr_assert_eq(longs.exit_code, 0, "%s", longs.err);
    cr_assert_str_eq(longs.out, shorts.out);
    result_free(&greedy);
    result_free(&top1);
    result_free(&shorts);
    result_free(&longs);
}

/* The penalty changes a seeded text, and --repeat-last-n 0 (an empty window) turns it off. */
Test(sampler, repeat_penalty_changes_the_text_unless_its_window_is_empty) {
    const char *base[] = {MODEL, "-s", "3", "-n", "120", "Lily", NULL, NULL, NULL, NULL, NULL};
    RunResult plain = run_program(base);
    base[6] = "--repeat-penalty", base[7] = "1.3";
    RunResult penalized = run_program(base);
    base[8] = "--repeat-last-n", base[9] = "0";
    RunResult off = run_program(base);
    cr_assert_eq(penalized.exit_code, 0, "%s", penalized.err);
    cr_assert_str_neq(penalized.out, plain.out);
    cr_assert_str_eq(off.out, plain.out);
    result_free(&plain);
    result_free(&penalized);
    result_free(&off);
}
