/* The two measuring modes (compare.h): --ppl scores a text, --compare runs one prompt under two
 * norms and prints what differs. The numbers themselves (NLL, KL, norm-input statistics) are
 * eval.c's, the timing profile.c's, the generation generate.c's; this file runs them and prints.
 */
#include "compare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval.h"
#include "generate.h"
#include "io.h"
#include "profile.h"

/* --ppl */

int *encode_ppl_text(const Vocab *v, const char *path, int *n_tokens) {
    char *text = read_text(path);
    int *tokens = malloc(vocab_max_ids(strlen(text)) * sizeof(int));
    if (!tokens) die("out of memory for the text's tokens");
    long n = vocab_encode(v, text, VOCAB_ADD_BOS, tokens);
    free(text);
    if (n < 0) die("out of memory for the text's tokens");
    if (n < 2) die("%s: the text is shorter than 2 tokens (BOS and one to predict)", path);
    *n_tokens = (int)n;
    return tokens;
}

/* --ppl's numbers as one JSON object on stdout. */
static void print_perplexity_json(const char *path, const Model *m, int n_predicted, int n_chunks,
                                  const NllSummary *s) {
    printf("{\n  \"file\": ");
    print_json_string(path);
    printf(",\n  \"norm\": \"%s\", \"tokens\": %d, \"chunks\": %d, \"chunk_len\": %d,\n",
           norm_name(m->norm), n_predicted, n_chunks, m->config.seq_len);
    printf("  \"mean_nll\": %.6g, \"standard_error\": %.6g, \"ci95_nll\": [%.6g, %.6g],\n", s->mean,
           s->standard_error, s->low, s->high);
    printf("  \"perplexity\": %.6g, \"ci95_perplexity\": [%.6g, %.6g]\n}\n", exp(s->mean),
           exp(s->low), exp(s->high));
}

void run_perplexity(Model *m, const int *tokens, int n_tokens, const PerplexityRequest *req) {
    Profile times = {0};
    m->profile = req->profile ? &times : NULL;
    int n_predicted, n_chunks;
    double *nlls = malloc((size_t)(n_tokens - 1) * sizeof(double));
    if (!nlls) die("out of memory for the tokens' NLLs");
    double start = now_seconds();
    double nll = text_nll(m, tokens, n_tokens, &n_predicted, &n_chunks, nlls);
    double elapsed = now_seconds() - start;
    double mean = nll / n_predicted;
    if (!isfinite(mean)) /* a NaN or infinite logit, as generation refuses them */
        die("the model computed a non-finite log-likelihood of %s (corrupt weights?)", req->path);
    /* the standard error over the chunks, the units of context (docs/USAGE.md) */
    NllSummary s = nll_summary(nlls, n_predicted, m->config.seq_len);
    free(nlls);
    if (req->json) {
        print_perplexity_json(req->path, m, n_predicted, n_chunks, &s);
    } else {
        write_escaped(stdout, req->path, 0);
        printf(": %d token%s predicted in %d chunk%s of up to %d, norm %s: mean NLL %.4f "
               "nats/token, perplexity %.4f\n",
               n_predicted, plural(n_predicted), n_chunks, plural(n_chunks), m->config.seq_len,
               norm_name(m->norm), mean, exp(mean));
        if (n_chunks > 1)
            printf("  standard error %.4f nats/token over the %d chunks; 95%% interval (Student's "
                   "t, %d degrees of freedom): mean NLL %.4f to %.4f, perplexity %.4f to %.4f\n",
                   s.standard_error, n_chunks, n_chunks - 1, s.low, s.high, exp(s.low),
                   exp(s.high));
        else
            printf("  no standard error: one chunk (the chunks are its units; a text longer than "
                   "%d tokens has more)\n",
                   m->config.seq_len);
    }
    finish_stdout(); /* before the speed line, so that an error is the only line */
    fprintf(stderr, "scored %d token%s, %.1f tokens/s\n", n_predicted, plural(n_predicted),
            elapsed > 0 ? n_predicted / elapsed : 0.0);
    if (req->profile) print_profile(stderr, &times, elapsed);
    m->profile = NULL; /* the profile ends with this function */
}

/* --compare */

/* Writes a printed piece for the table, escaped by write_escaped. Returns the characters
 * written, which the table pads to. */
static int write_piece(FILE *f, const char *piece) {
    return tokenizer_piece_printed(piece) ? write_escaped(f, piece, 1) : 0;
}

static void write_text(FILE *f, const Vocab *v, const int *tokens, int n) {
    for (int i = 1; i < n; i++) write_piece(f, vocab_decode(v, tokens[i - 1], tokens[i]));
}

/* The text of tokens[0..n) (vocab_decode's: as generation prints it, but for a BPE vocabulary's
 * control tokens, shown by their text), one string (malloc'd), so that a character spread over
 * byte tokens is whole when the string is checked for UTF-8. */
static char *printed_text(const Vocab *v, const int *tokens, int n) {
    size_t len = 0;
    for (int i = 1; i < n; i++) {
        const char *piece = vocab_decode(v, tokens[i - 1], tokens[i]);
        if (tokenizer_piece_printed(piece)) len += strlen(piece);
    }
    char *text = malloc(len + 1), *end = text;
    if (!text) die("out of memory for the --compare text");
    for (int i = 1; i < n; i++) {
        const char *piece = vocab_decode(v, tokens[i - 1], tokens[i]);
        if (tokenizer_piece_printed(piece)) end = stpcpy(end, piece);
    }
    *end = '\0';
    return text;
}

/* Timed rounds per norm (--repeat, 5 by default), of generation and of teacher-forced passes;
 * medians over them resist the shared machine's hiccups, and their range shows the noise. */
enum { DEFAULT_ROUNDS = 5 };

/* What one norm did in --compare. */
typedef struct {
    NormFn norm;
    int *tokens; /* generated: prompt and continuation */
    int n_tokens;
    double tokens_per_s;       /* generation, forward passes (prompt included) per second: median */
    double speeds[MAX_ROUNDS]; /* each round's, in the order run */
    int rounds;
    SiteStats *sites;           /* (n_sites) inputs of each norm call site, teacher-forced */
    Profile passes[MAX_ROUNDS]; /* teacher-forced, one profile per round */
} NormRun;

/* Feeds tokens[0..n) from position 0; logits (n, vocab_size) receives each position's logits
 * when not NULL. */
static void teacher_force(Model *m, const int *tokens, int n, float *logits) {
    int vocab_size = m->config.vocab_size;
    for (int pos = 0; pos < n; pos++) {
        const float *l = model_forward(m, tokens[pos], pos);
        if (logits) memcpy(logits + (size_t)pos * vocab_size, l, vocab_size * sizeof(float));
    }
}

/* The name of norm call site `site`, numbered in model_forward's order (see norm_observe_start):
 * "layer L attention", "layer L ffn", ..., "final". */
static void site_name(char *out, size_t len, int site, int n_layers) {
    if (site == 2 * n_layers)
        snprintf(out, len, "final");
    else
        snprintf(out, len, "layer %d %s", site / 2, site % 2 ? "ffn" : "attention");
}

/* Median over the timing passes of one class's seconds, the clock's cost per lap taken out. */
static double op_seconds(const NormRun *r, OpClass op, double lap_cost) {
    double t[MAX_ROUNDS];
    for (int i = 0; i < r->rounds; i++) t[i] = profile_op_seconds(&r->passes[i], op, lap_cost);
    return median(t, r->rounds);
}

/* The norms' share of the forward time (sum of the classes' medians). */
static double norm_share(const NormRun *r, double lap_cost) {
    double total = 0.0;
    for (int op = 0; op < OP_SAMPLING; op++) total += op_seconds(r, op, lap_cost);
    return total > 0.0 ? op_seconds(r, OP_NORM, lap_cost) / total : 0.0;
}

/* What --compare measured: norm A's and norm B's runs, and A's text teacher-forced under both. */
typedef struct {
    NormRun runs[2];
    unsigned long long seed; /* the sampler's at the start of each generation */
    float temperature, topp; /* the sampler's */
    SamplerSettings sampler; /* its other stages, named when on */
    int steps;               /* positions each generation runs */
    int n_prompt;
    int first_difference; /* the first position where the two texts differ */
    int same;             /* 1 if the two texts are the same, tokens and length */
    int n;                /* positions teacher-forced along A's text, runs[0].tokens */
    LogitsDiff *diffs;    /* (n) B's next-token distribution against A's, per position */
    int n_layers;         /* the model's, for the names of the sites */
    int n_sites;          /* norm call sites, 2 * n_layers + 1 (see norm_observe_start) */
    double lap_cost;      /* the clock's own cost per profile lap, seconds */
} Comparison;

/* Generates from the prompt under each norm, into r->tokens and r->tokens_per_s. The norms take
 * turns, r->rounds rounds, so that neither gets the cold caches; each round makes the same
 * texts, as both norms draw the same random numbers (the sampler restarts from `seed`). */
static void generate_under_both(Model *m, Sampler *sampler, const GenerateRequest *request,
                                unsigned long long seed, NormRun runs[2]) {
    for (int i = 0; i < runs[0].rounds; i++) {
        for (int k = 0; k < 2; k++) {
            NormRun *r = &runs[k];
            model_set_norm(m, r->norm);
            sampler_reset(sampler, seed);
            double start = now_seconds();
            GenerateResult result = {.tokens = r->tokens};
            generate(m, sampler, request, &result);
            double elapsed = now_seconds() - start;
            r->n_tokens = result.n_tokens;
            r->speeds[i] = elapsed > 0 ? result.n_forward / elapsed : 0.0;
        }
    }
    for (int k = 0; k < 2; k++) {
        double sorted[MAX_ROUNDS];
        memcpy(sorted, runs[k].speeds, runs[k].rounds * sizeof(double));
        runs[k].tokens_per_s = median(sorted, runs[k].rounds);
    }
}

/* The spread of x (n >= 1): its least and greatest values. */
static void range_of(const double *x, int n, double *lo, double *hi) {
    *lo = *hi = x[0];
    for (int i = 1; i < n; i++) *lo = x[i] < *lo ? x[i] : *lo, *hi = x[i] > *hi ? x[i] : *hi;
}

/* B's generation speed over A's, round by round (each round runs both, in turn): the median,
 * the range and the rounds where B was faster. */
typedef struct {
    double median, lo, hi;
    int b_faster;
} SpeedRatio;

static SpeedRatio speed_ratio(const NormRun runs[2]) {
    double ratio[MAX_ROUNDS] = {0};
    SpeedRatio s = {0};
    for (int i = 0; i < runs[0].rounds; i++) {
        ratio[i] = runs[0].speeds[i] > 0 ? runs[1].speeds[i] / runs[0].speeds[i] : 0.0;
        s.b_faster += ratio[i] > 1.0;
    }
    range_of(ratio, runs[0].rounds, &s.lo, &s.hi);
    s.median = median(ratio, runs[0].rounds);
    return s;
}

/* Teacher-forces tokens[0..n) under A's norm, then B's, comparing B's logits with A's position by
 * position into diffs (n); the norm call sites are observed in both passes, into each run's
 * sites. */
static void teacher_force_both(Model *m, const int *tokens, int n, NormRun runs[2], int n_sites,
                               LogitsDiff *diffs) {
    int vocab_size = m->config.vocab_size;
    float *logits_a = malloc((size_t)n * vocab_size * sizeof(float));
    if (!logits_a) die("out of memory for --compare");
    norm_observe_start(m, runs[0].norm, runs[0].sites, n_sites);
    teacher_force(m, tokens, n, logits_a);
    norm_observe_stop(m);
    norm_observe_start(m, runs[1].norm, runs[1].sites, n_sites);
    for (int pos = 0; pos < n; pos++)
        diffs[pos] = logits_diff(logits_a + (size_t)pos * vocab_size,
                                 model_forward(m, tokens[pos], pos), vocab_size);
    norm_observe_stop(m);
    free(logits_a);
}

/* Runs req's prompt under its two norms into cmp (v: which tokens end a text): both texts and
 * their speed, A's text teacher-forced under both (next-token distributions, norm inputs), and
 * req->rounds profiled teacher-forced passes per norm, without the observer. */
static void compare_norms(Comparison *cmp, Model *m, const Vocab *v, Sampler *sampler,
                          const CompareRequest *req) {
    const Config *c = &m->config;
    memset(cmp, 0, sizeof(*cmp));
    cmp->seed = sampler->rng_state;
    cmp->temperature = sampler->set.temperature;
    cmp->topp = sampler->set.topp;
    cmp->sampler = sampler->set;
    cmp->steps = req->steps;
    cmp->n_prompt = req->n_prompt;
    cmp->n_layers = c->n_layers;
    cmp->n_sites = 2 * c->n_layers + 1;
    for (int k = 0; k < 2; k++) {
        NormRun *r = &cmp->runs[k];
        r->norm = req->norms[k];
        r->rounds = req->rounds ? req->rounds : DEFAULT_ROUNDS;
        r->tokens = malloc((req->steps + 1) * sizeof(int));
        r->sites = calloc(cmp->n_sites, sizeof(SiteStats));
        if (!r->tokens || !r->sites) die("out of memory for --compare");
    }
    NormRun *a = &cmp->runs[0], *b = &cmp->runs[1];
    GenerateRequest request = {
        .prompt = req->prompt, .n_prompt = req->n_prompt, .steps = req->steps, .vocab = v};
    generate_under_both(m, sampler, &request, cmp->seed, cmp->runs);
    int split = 0;
    while (split < a->n_tokens && split < b->n_tokens && a->tokens[split] == b->tokens[split])
        split++;
    cmp->first_difference = split;
    cmp->same = split == a->n_tokens && split == b->n_tokens;

    /* A's text holds up to steps + 1 tokens, the last never fed; the kv cache holds seq_len */
    cmp->n = a->n_tokens < c->seq_len ? a->n_tokens : c->seq_len;
    cmp->diffs = malloc(cmp->n * sizeof(LogitsDiff));
    if (!cmp->diffs) die("out of memory for --compare");
    teacher_force_both(m, a->tokens, cmp->n, cmp->runs, cmp->n_sites, cmp->diffs);

    /* the timing passes, without the observer's cost */
    for (int k = 0; k < 2; k++) {
        model_set_norm(m, cmp->runs[k].norm);
        for (int i = 0; i < cmp->runs[k].rounds; i++) {
            m->profile = &cmp->runs[k].passes[i];
            teacher_force(m, a->tokens, cmp->n, NULL);
        }
        m->profile = NULL;
    }
    cmp->lap_cost = profile_lap_cost();
}

static void free_comparison(Comparison *cmp) {
    for (int k = 0; k < 2; k++) {
        free(cmp->runs[k].tokens);
        free(cmp->runs[k].sites);
    }
    free(cmp->diffs);
}

/* The sampler's stages beyond -t and -p that are on, as options (json 0) or JSON keys. */
static void print_sampler_extras(const SamplerSettings *set, int json) {
    if (set->top_k > 0) printf(json ? " \"top_k\": %d," : " --top-k %d", set->top_k);
    if (set->min_p > 0) printf(json ? " \"min_p\": %g," : " --min-p %g", set->min_p);
    if (set->repeat_penalty != 1.0f)
        printf(json ? " \"repeat_penalty\": %g, \"repeat_last_n\": %d,"
                    : " --repeat-penalty %g --repeat-last-n %d",
               set->repeat_penalty, set->repeat_last_n);
}

/* Sums and maxima of the per-position differences, for the summary line. */
typedef struct {
    double kl_sum, kl_max, diff_sum, diff_max; /* diff: max_abs_diff, the largest |dlogit| */
    int agree;                                 /* positions where the top-1 tokens agree */
    int kl_max_pos;
} DiffSummary;

static DiffSummary summarize_diffs(const LogitsDiff *diffs, int n) {
    DiffSummary s = {0};
    for (int pos = 0; pos < n; pos++) {
        s.kl_sum += diffs[pos].kl;
        if (diffs[pos].kl > s.kl_max) s.kl_max = diffs[pos].kl, s.kl_max_pos = pos;
        s.diff_sum += diffs[pos].max_abs_diff;
        if (diffs[pos].max_abs_diff > s.diff_max) s.diff_max = diffs[pos].max_abs_diff;
        s.agree += diffs[pos].top1_agree;
    }
    return s;
}

/* The comparison as one JSON object on stdout, with the same numbers as the text form. */
static void print_comparison_json(const Comparison *cmp, const Vocab *v, const char *model_path) {
    const NormRun *runs = cmp->runs;
    const int *seq = runs[0].tokens;
    int n = cmp->n;
    DiffSummary s = summarize_diffs(cmp->diffs, n);
    printf("{\n  \"model\": ");
    print_json_string(model_path);
    printf(",\n  \"norms\": [\"%s\", \"%s\"],\n", norm_name(runs[0].norm), norm_name(runs[1].norm));
    printf("  \"temperature\": %g, \"topp\": %g, \"seed\": %llu, \"steps\": %d,", cmp->temperature,
           cmp->topp, cmp->seed, cmp->steps);
    print_sampler_extras(&cmp->sampler, 1);
    printf("\n");
    printf("  \"n_prompt\": %d,\n  \"texts\": [", cmp->n_prompt);
    for (int k = 0; k < 2; k++) {
        char *text = printed_text(v, runs[k].tokens, runs[k].n_tokens);
        printf("%s", k ? ", " : "");
        print_json_string(text);
        free(text);
    }
    printf("],\n  \"first_difference\": %d,\n", cmp->same ? -1 : cmp->first_difference);
    printf("  \"positions\": [\n");
    for (int pos = 0; pos < n; pos++)
        printf("    {\"pos\": %d, \"token\": %d, \"kl\": %.6g, \"top1_agree\": %s, "
               "\"max_abs_dlogit\": %.6g}%s\n",
               pos, seq[pos], cmp->diffs[pos].kl, cmp->diffs[pos].top1_agree ? "true" : "false",
               cmp->diffs[pos].max_abs_diff, pos + 1 < n ? "," : "");
    printf("  ],\n  \"summary\": {\"positions\": %d, \"mean_kl\": %.6g, \"max_kl\": %.6g, "
           "\"max_kl_pos\": %d, \"top1_agreement\": %.6g, \"mean_max_abs_dlogit\": %.6g, "
           "\"max_abs_dlogit\": %.6g},\n",
           n, s.kl_sum / n, s.kl_max, s.kl_max_pos, (double)s.agree / n, s.diff_sum / n,
           s.diff_max);
    printf("  \"sites\": [\n");
    for (int site = 0; site < cmp->n_sites; site++) {
        char name[32];
        site_name(name, sizeof(name), site, cmp->n_layers);
        printf("    {\"site\": \"%s\"", name);
        for (int k = 0; k < 2; k++) {
            const SiteStats *st = &runs[k].sites[site];
            printf(", \"%s\": {\"mean\": %.6g, \"rms\": %.6g, \"mean_over_rms\": %.6g}",
                   k ? "b" : "a", st->mean / st->count, st->rms / st->count,
                   st->mean_over_rms / st->count);
        }
        printf("}%s\n", site + 1 < cmp->n_sites ? "," : "");
    }
    printf("  ],\n  \"speed\": [\n");
    for (int k = 0; k < 2; k++) {
        double lo, hi;
        range_of(runs[k].speeds, runs[k].rounds, &lo, &hi);
        printf("    {\"norm\": \"%s\", \"tokens_per_s\": %.6g, \"tokens_per_s_min\": %.6g, "
               "\"tokens_per_s_max\": %.6g, \"norm_share\": %.6g, \"op_seconds\": {",
               norm_name(runs[k].norm), runs[k].tokens_per_s, lo, hi,
               norm_share(&runs[k], cmp->lap_cost));
        for (int op = 0; op < OP_SAMPLING; op++)
            printf("%s\"%s\": %.6g", op ? ", " : "", op_name(op),
                   op_seconds(&runs[k], op, cmp->lap_cost));
        printf("}}%s\n", k ? "" : ",");
    }
    SpeedRatio r = speed_ratio(runs);
    printf("  ],\n  \"rounds\": %d,\n  \"speed_ratio_b_over_a\": {\"median\": %.6g, \"min\": %.6g, "
           "\"max\": %.6g, \"b_faster_rounds\": %d},\n",
           runs[0].rounds, r.median, r.lo, r.hi, r.b_faster);
    printf("  \"lap_cost_s\": %.6g\n}\n", cmp->lap_cost);
}

/* The speed: each norm's generation tokens/s, median and range over the rounds, its norms' share
 * of the teacher-forced time (median), and B's speed over A's round by round. */
static void print_speed(const Comparison *cmp) {
    const NormRun *runs = cmp->runs;
    printf("\nspeed over %d round%s taking turns (tokens/s: generation, the median and the range; "
           "norm share: teacher-forced, the median; clock cost %.0f ns per lap taken out)\n",
           runs[0].rounds, plural(runs[0].rounds), cmp->lap_cost * 1e9);
    printf("%-22s %12s %12s %12s %12s\n", "norm", "tokens/s", "min", "max", "norm share");
    for (int k = 0; k < 2; k++) {
        double lo, hi;
        range_of(runs[k].speeds, runs[k].rounds, &lo, &hi);
        printf("%-22s %12.1f %12.1f %12.1f %11.2f%%\n", norm_name(runs[k].norm),
               runs[k].tokens_per_s, lo, hi, 100.0 * norm_share(&runs[k], cmp->lap_cost));
    }
    SpeedRatio r = speed_ratio(runs);
    printf("B / A tokens/s, round by round: median %.3f, %.3f to %.3f; B faster in %d of %d\n",
           r.median, r.lo, r.hi, r.b_faster, runs[0].rounds);
}

/* The comparison as tables on stdout: both texts and where they part, the next-token
 * distributions position by position, the norm inputs per call site, and the speed. */
static void print_comparison_text(const Comparison *cmp, const Vocab *v, int summary_only) {
    const NormRun *runs = cmp->runs;
    const int *seq = runs[0].tokens;
    int n = cmp->n, split = cmp->first_difference;
    DiffSummary s = summarize_diffs(cmp->diffs, n);
    printf("compare %s (A) and %s (B): -t %g -p %g -s %llu -n %d", norm_name(runs[0].norm),
           norm_name(runs[1].norm), cmp->temperature, cmp->topp, cmp->seed, cmp->steps);
    print_sampler_extras(&cmp->sampler, 0);
    printf("\n%s", summary_only ? "" : "\n");
    for (int k = 0; k < 2 && !summary_only; k++) {
        printf("%c %-10s ", "AB"[k], norm_name(runs[k].norm));
        write_text(stdout, v, runs[k].tokens, runs[k].n_tokens);
        printf("\n");
    }
    if (cmp->same) {
        printf("\nthe two texts are the same (%d token%s)\n", n, plural(n));
    } else {
        printf("\nfirst difference at position %d (continuation token %d): A '", split,
               split - cmp->n_prompt + 1);
        if (split < runs[0].n_tokens)
            write_piece(stdout, vocab_decode(v, seq[split - 1], seq[split]));
        printf("', B '");
        if (split < runs[1].n_tokens)
            write_piece(stdout, vocab_decode(v, seq[split - 1], runs[1].tokens[split]));
        printf("'%s\n", split < runs[0].n_tokens && split < runs[1].n_tokens ? "" : " (end)");
    }

    printf("\nteacher-forced along A's text (%d position%s): next-token distributions\n", n,
           plural(n));
    if (!summary_only)
        printf("%5s  %-14s %12s %5s %12s\n", "pos", "input token", "KL(A||B)", "top1",
               "max|dlogit|");
    for (int pos = 0; pos < n && !summary_only; pos++) {
        printf("%5d  '", pos);
        int width = write_piece(stdout, vocab_piece(v, seq[pos]));
        printf("'%*s %12.4g %5s %12.4g\n", width < 12 ? 12 - width : 0, "", cmp->diffs[pos].kl,
               cmp->diffs[pos].top1_agree ? "yes" : "no", cmp->diffs[pos].max_abs_diff);
    }
    printf("summary: mean KL %.4g nats, max KL %.4g at position %d, top-1 agreement %d/%d "
           "(%.1f%%), max|dlogit| mean %.4g max %.4g\n",
           s.kl_sum / n, s.kl_max, s.kl_max_pos, s.agree, n, 100.0 * s.agree / n, s.diff_sum / n,
           s.diff_max);

    if (summary_only) {
        print_speed(cmp);
        return;
    }
    printf("\nnorm inputs per call site (averages over the %d position%s of each vector's "
           "statistic)\n",
           n, plural(n));
    printf("%-18s %10s %10s %12s %14s\n", "site", "mean", "RMS", "|mean|/RMS", "|mean|/RMS (B)");
    for (int site = 0; site < cmp->n_sites; site++) {
        char name[32];
        site_name(name, sizeof(name), site, cmp->n_layers);
        const SiteStats *a = &runs[0].sites[site], *b = &runs[1].sites[site];
        printf("%-18s %10.4f %10.4f %12.4f %14.4f\n", name, a->mean / a->count, a->rms / a->count,
               a->mean_over_rms / a->count, b->mean_over_rms / b->count);
    }

    print_speed(cmp);
}

void run_compare(Model *m, const Vocab *v, Sampler *sampler, const CompareRequest *req) {
    Comparison cmp;
    compare_norms(&cmp, m, v, sampler, req);
    if (req->json)
        print_comparison_json(&cmp, v, req->model_path);
    else
        print_comparison_text(&cmp, v, req->summary_only);
    free_comparison(&cmp);
}
