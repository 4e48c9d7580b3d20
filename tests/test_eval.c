/* Perplexity, logit comparison and norm-site statistics: hand-derived values, and the numbers
 * that `run --ppl` and `run --compare` print against independent computations over the model. */
#include <criterion/criterion.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval.h"
#include "helpers.h"
#include "load.h"
#include "model.h"
#include "tokenizer.h"

#define MODEL     "models/stories260K.bin"
#define TOKENIZER "models/tok512.bin"
#define STORIES   "data/stories.txt"

Test(eval, token_nll_hand_checked) {
    float uniform[4] = {0, 0, 0, 0};
    cr_assert_float_eq(token_nll(uniform, 4, 2), log(4.0), 1e-12);
    /* log(e + e^2 + e^3) - 3 = 0.40760596 */
    float l[3] = {1, 2, 3};
    cr_assert_float_eq(token_nll(l, 3, 2), 0.40760596444, 1e-9);
    cr_assert_float_eq(token_nll(l, 3, 0), 2.40760596444, 1e-9);
}

Test(eval, logits_diff_hand_checked) {
    /* p = softmax(0, log 3) = (1/4, 3/4), q = (1/2, 1/2):
     * KL = 1/4 log(1/2) + 3/4 log(3/2) = 0.13081203 */
    float p[2] = {0.0f, (float)log(3.0)}, q[2] = {0.0f, 0.0f};
    LogitsDiff d = logits_diff(p, q, 2);
    cr_assert_float_eq(d.kl, 0.25 * log(0.5) + 0.75 * log(1.5), 1e-7);
    cr_assert_float_eq(d.max_abs_diff, log(3.0), 1e-6);
    cr_assert_eq(d.top1_agree, 0);
    d = logits_diff(p, p, 2);
    cr_assert_float_eq(d.kl, 0.0, 1e-15);
    cr_assert_eq(d.top1_agree, 1);
    /* a shift of all logits leaves the distribution alone */
    float shifted[2] = {5.0f, 5.0f + (float)log(3.0)};
    d = logits_diff(p, shifted, 2);
    cr_assert_float_eq(d.kl, 0.0, 1e-9);
    cr_assert_float_eq(d.max_abs_diff, 5.0, 1e-6);
}

Test(eval, site_stats_hand_checked) {
    /* x = (1, 3): mean 2, RMS sqrt(5), |mean|/RMS 2 / sqrt(5) */
    SiteStats s = {0};
    float x[2] = {1, 3}, zero[2] = {0, 0};
    site_stats_add(&s, x, 2);
    cr_assert_float_eq(s.mean, 2.0, 1e-12);
    cr_assert_float_eq(s.rms, sqrt(5.0), 1e-12);
    cr_assert_float_eq(s.mean_over_rms, 2.0 / sqrt(5.0), 1e-12);
    site_stats_add(&s, zero, 2);
    cr_assert_eq(s.count, 2);
    cr_assert_float_eq(s.mean_over_rms, 2.0 / sqrt(5.0), 1e-12);
}

/* One thread: Criterion runs tests side by side on the 2 cores; spinning OpenMP teams would
 * fight over them. */
static Model load_model(void) {
    omp_set_num_threads(1);
    Model m;
    char err[256];
    cr_assert_eq(model_load(&m, MODEL, err, sizeof(err)), 0, "%s", err);
    return m;
}

Test(eval, observer_sees_every_site_in_order) {
    Model m = load_model();
    int n_sites = 2 * m.config.n_layers + 1, dim = m.config.dim;
    SiteStats *sites = calloc(n_sites, sizeof(SiteStats));
    const int tokens[3] = {1, 403, 261};
    norm_observe_start(&m, rmsnorm, sites, n_sites);
    for (int pos = 0; pos < 3; pos++) model_forward(&m, tokens[pos], pos);
    norm_observe_stop(&m);
    cr_assert_eq(m.norm, rmsnorm);
    for (int s = 0; s < n_sites; s++) cr_assert_eq(sites[s].count, 3, "site %d", s);
    /* the first site's input is the token embedding itself (every site's statistics against a
     * float64 forward pass: tests/test_f64.py) */
    SiteStats direct = {0};
    float *row = malloc(dim * sizeof(float));
    for (int pos = 0; pos < 3; pos++) {
        embedding(&m.weights.token_embedding, tokens[pos], row);
        site_stats_add(&direct, row, dim);
    }
    free(row);
    cr_assert_float_eq(sites[0].mean, direct.mean, 1e-12);
    cr_assert_float_eq(sites[0].rms, direct.rms, 1e-12);
    free(sites);
    model_free(&m);
}

/* The NLL the documented chunking gives, computed here on its own: long double log-sum-exp over
 * the logits of a fresh pass per chunk, chunk boundaries from the text index. */
static long double reference_nll(Model *m, const int *tokens, int n, int *n_chunks,
                                 long double *chunk_nll) {
    int seq_len = m->config.seq_len, vocab = m->config.vocab_size;
    long double total = 0.0L;
    *n_chunks = 0;
    int pos = 0;
    for (int j = 1; j < n; j++) {
        if ((j - 1) % seq_len == 0) pos = 0, (*n_chunks)++;
        int input = pos == 0 ? 1 : tokens[j - 1];
        const float *logits = model_forward(m, input, pos++);
        long double sum = 0.0L;
        for (int i = 0; i < vocab; i++) sum += expl((long double)logits[i]);
        total += logl(sum) - logits[tokens[j]];
        if (chunk_nll) chunk_nll[*n_chunks - 1] += logl(sum) - logits[tokens[j]];
    }
    return total;
}

Test(eval, text_nll_matches_reference_across_chunks) {
    Model m = load_model();
    enum { N = 1200 }; /* 1199 text tokens: chunks of 512, 512 and 175 */
    int *tokens = malloc(N * sizeof(int));
    tokens[0] = 1;
    for (int i = 1; i < N; i++) tokens[i] = 3 + (i * 7919) % 509;
    int n_predicted, n_chunks, ref_chunks;
    double nll = text_nll(&m, tokens, N, &n_predicted, &n_chunks, NULL);
    long double ref = reference_nll(&m, tokens, N, &ref_chunks, NULL);
    cr_assert_eq(n_predicted, N - 1);
    cr_assert_eq(n_chunks, 3);
    cr_assert_eq(ref_chunks, 3);
    cr_assert_float_eq(nll, (double)ref, 1e-6 * fabs((double)ref));
    free(tokens);
    model_free(&m);
}

/* nll_summary against values derived by hand: blocks of 2 of 1..6 have means 1.5, 3.5 and 5.5,
 * mean 3.5, se^2 = 2 (2^2 + 0 + 2^2) / (2 x 6) = 4 / 3, and t(2) = 4.303; of 1..5, blocks [1, 2],
 * [3, 4], [5], weighted by their lengths: mean 3, se^2 = (2 x 1.5^2 + 2 x 0.5^2 + 2^2) / (2 x 5)
 * = 0.9; one block has no error. */
Test(eval, nll_summary_hand_checked) {
    NllSummary s = nll_summary((double[]){1, 2, 3, 4, 5, 6}, 6, 2);
    cr_assert_eq(s.n_blocks, 3);
    cr_assert_float_eq(s.mean, 3.5, 1e-12);
    cr_assert_float_eq(s.standard_error, sqrt(4.0 / 3), 1e-12);
    cr_assert_float_eq(s.low, 3.5 - 4.303 * sqrt(4.0 / 3), 1e-12);
    cr_assert_float_eq(s.high, 3.5 + 4.303 * sqrt(4.0 / 3), 1e-12);
    s = nll_summary((double[]){1, 2, 3, 4, 5}, 5, 2);
    cr_assert_float_eq(s.mean, 3, 1e-12);
    cr_assert_float_eq(s.standard_error, sqrt(0.9), 1e-12);
    s = nll_summary((double[]){1, 2, 3}, 3, 8);
    cr_assert_eq(s.n_blocks, 1);
    cr_assert_eq(s.standard_error, 0);
    cr_assert_eq(s.low, 2);
    /* Student's t: the table's ends and the expansion beyond, against the exact quantiles */
    cr_assert_float_eq(student_t_975(1), 12.706, 1e-9);
    cr_assert_float_eq(student_t_975(30), 2.042, 1e-9);
    cr_assert_float_eq(student_t_975(31), 2.039513, 2e-5);
    cr_assert_float_eq(student_t_975(100), 1.983972, 2e-5);
    cr_assert_float_eq(student_t_975(1000000), 1.959966, 2e-5);
}

static double number_after(const char *s, const char *key) {
    const char *p = strstr(s, key);
    cr_assert_not_null(p, "'%s' not in output", key);
    return strtod(p + strlen(key), NULL);
}

Test(eval, ppl_output_matches_reference) {
    char *text = read_file(STORIES, NULL);
    cr_assert_not_null(text);
    Tokenizer t;
    char err[256];
    cr_assert_eq(tokenizer_load(&t, TOKENIZER, err, sizeof(err)), 0, "%s", err);
    int *tokens = malloc((strlen(text) + 3) * sizeof(int));
    int n = tokenizer_encode(&t, text, 1, 0, tokens);
    Model m = load_model();
    const char *norms[2] = {"rmsnorm", "layernorm"};
    for (int k = 0; k < 2; k++) {
        m.norm = norm_by_name(norms[k]);
        int chunks;
        long double chunk_nll[8] = {0};
        double mean = (double)(reference_nll(&m, tokens, n, &chunks, chunk_nll) / (n - 1));
        /* the standard error over the chunks of 512, 512, 512 and 201 tokens, weighted by their
         * lengths (eval.h), and Student's t at 3 degrees of freedom, 3.182 */
        cr_assert_eq(chunks, 4);
        double squares = 0;
        for (int c = 0; c < chunks; c++) {
            int len = c + 1 < chunks ? 512 : n - 1 - 512 * (chunks - 1);
            double d = (double)(chunk_nll[c] / len) - mean;
            squares += len * d * d;
        }
        double se = sqrt(squares / (3.0 * (n - 1)));
        char flag[32];
        snprintf(flag, sizeof(flag), "--norm=%s", norms[k]);
        RunResult r =
            run_program((const char *[]){MODEL, "--ppl", STORIES, flag, "--threads=1", NULL});
        cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
        char expected[128];
        snprintf(expected, sizeof(expected), "%d tokens predicted in %d chunks of up to 512", n - 1,
                 chunks);
        cr_assert(strstr(r.out, expected), "'%s' not in %s", expected, r.out);
        cr_assert_float_eq(number_after(r.out, "mean NLL "), mean, 1e-4, "%s", norms[k]);
        cr_assert_float_eq(number_after(r.out, "perplexity "), exp(mean), 1e-3 * exp(mean));
        cr_assert_float_eq(number_after(r.out, "standard error "), se, 1e-4, "%s", r.out);
        cr_assert_float_eq(number_after(r.out, "3 degrees of freedom): mean NLL "),
                           mean - 3.182 * se, 1e-4, "%s", r.out);
        result_free(&r);
        r = run_program(
            (const char *[]){MODEL, "--ppl", STORIES, flag, "--threads=1", "--json", NULL});
        cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
        cr_assert_float_eq(number_after(r.out, "\"standard_error\": "), se, 1e-5, "%s", r.out);
        cr_assert_float_eq(number_after(r.out, "\"ci95_nll\": ["), mean - 3.182 * se, 1e-4);
        cr_assert_float_eq(number_after(r.out, "\"perplexity\": "), exp(mean), 1e-4 * exp(mean));
        result_free(&r);
    }
    model_free(&m);
    tokenizer_free(&t);
    free(tokens);
    free(text);
}

/* run --compare=rmsnorm,B (greedy, -n 48) against the same numbers recomputed here: A's text is
 * the prompt and greedy rmsnorm tokens up to position 48, all 49 of them fed when teacher
 * forcing; KL and agreement in double. Returns the mean KL. */
static double check_compare(const char *b_name) {
    char flag[64];
    snprintf(flag, sizeof(flag), "--compare=rmsnorm,%s", b_name);
    RunResult r = run_program((const char *[]){MODEL, "Once upon a time", "-t", "0", "-n", "48",
                                               flag, "--json", "--threads=1", NULL});
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    Tokenizer t;
    char err[256];
    cr_assert_eq(tokenizer_load(&t, TOKENIZER, err, sizeof(err)), 0, "%s", err);
    Model m = load_model();
    int vocab = m.config.vocab_size;
    enum { N = 49 };
    int tokens[N + 3];
    int n_prompt = tokenizer_encode(&t, "Once upon a time", 1, 0, tokens);
    float *logits = malloc(N * (size_t)vocab * sizeof(float));
    for (int pos = 0; pos < N; pos++) {
        const float *l = model_forward(&m, tokens[pos], pos);
        memcpy(logits + (size_t)pos * vocab, l, vocab * sizeof(float));
        if (pos + 1 >= n_prompt && pos + 1 < N) {
            int best = 0;
            for (int i = 1; i < vocab; i++)
                if (l[i] > l[best]) best = i;
            tokens[pos + 1] = best;
        }
    }
    model_set_norm(&m, norm_by_name(b_name));
    double kl_sum = 0.0;
    int agree = 0;
    for (int pos = 0; pos < N; pos++) {
        const float *q = model_forward(&m, tokens[pos], pos);
        const float *p = logits + (size_t)pos * vocab;
        double max_p = p[0], max_q = q[0];
        int top_p = 0, top_q = 0;
        for (int i = 1; i < vocab; i++) {
            if (p[i] > max_p) max_p = p[i], top_p = i;
            if (q[i] > max_q) max_q = q[i], top_q = i;
        }
        double zp = 0.0, zq = 0.0;
        for (int i = 0; i < vocab; i++) zp += exp(p[i] - max_p), zq += exp(q[i] - max_q);
        for (int i = 0; i < vocab; i++) {
            double lp = p[i] - max_p - log(zp), lq = q[i] - max_q - log(zq);
            kl_sum += exp(lp) * (lp - lq);
        }
        agree += top_p == top_q;
    }
    cr_assert_eq((int)number_after(r.out, "\"summary\": {\"positions\": "), N);
    cr_assert_float_eq(number_after(r.out, "\"mean_kl\": "), kl_sum / N, 1e-5 * kl_sum / N, "%s",
                       b_name);
    cr_assert_float_eq(number_after(r.out, "\"top1_agreement\": "), (double)agree / N, 1e-5, "%s",
                       b_name);
    cr_log_info("stories260K, rmsnorm -> %s: mean KL %.4g nats, top-1 agreement %d / %d", b_name,
                kl_sum / N, agree, N);
    free(logits);
    model_free(&m);
    tokenizer_free(&t);
    result_free(&r);
    return kl_sum / N;
}

Test(eval, compare_numbers_match_reference) {
    check_compare("layernorm");
}

Test(eval, compare_measures_the_siblings_swapped_into_an_rmsnorm_model) {
    /* pRMSNorm's RMS from 4 of stories260K's 64 values moves the model; RMSNorm + bias without
     * a bias is RMSNorm bit for bit: no change at all */
    cr_assert_gt(check_compare("prmsnorm"), 1e-3);
    cr_assert_eq(check_compare("rmsnorm_bias"), 0.0);
}

Test(eval, ppl_matches_pytorch_reference) {
    /* tests/fixtures/ppl_stories_stories260K.txt: "norm tokens mean_nll" lines written by
     * tests/make_ppl_fixture.py (PyTorch in float64 on stories260K.pt, SentencePiece ids) */
    char *fixture = read_file("tests/fixtures/ppl_stories_stories260K.txt", NULL);
    cr_assert_not_null(fixture);
    int lines = 0;
    for (char *line = strtok(fixture, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        char norm[32];
        int n_tokens;
        double mean_nll;
        cr_assert_eq(sscanf(line, "%31s %d %lf", norm, &n_tokens, &mean_nll), 3, "%s", line);
        char flag[48], expected[64];
        snprintf(flag, sizeof(flag), "--norm=%s", norm);
        RunResult r =
            run_program((const char *[]){MODEL, "--ppl", STORIES, flag, "--threads=1", NULL});
        cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
        snprintf(expected, sizeof(expected), ": %d tokens predicted", n_tokens);
        cr_assert(strstr(r.out, expected), "'%s' not in %s", expected, r.out);
        /* printed to 4 decimals; fp32 against float64 adds well under 1e-4 */
        cr_assert_float_eq(number_after(r.out, "mean NLL "), mean_nll, 2e-4, "%s: %s", norm, r.out);
        result_free(&r);
    }
    cr_assert_eq(lines, 2);
    free(fixture);
}
