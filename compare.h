/* The modes that measure the norms: --ppl FILE (mean negative log-likelihood and perplexity of a
 * text) and --compare (one prompt under two norms: both continuations, the next-token
 * distributions teacher-forced along the first one's text, the inputs of every norm call site,
 * and the speed), printed as text or, with --json, as one JSON object.
 *
 * It leaves the measures themselves to eval.h, the timing to profile.h, generation to
 * generate.h, and the checks of the command line (which norms, which options go together) to
 * run.c.
 */
#ifndef COMPARE_H
#define COMPARE_H

#include "model.h"
#include "norm.h"
#include "sampler.h"
#include "vocab.h"

/* The ids of the text in the file at path (read_text's checks) in v, BOS first when v adds one
 * (vocab_encode): *n_tokens of them,
 * at least 2 (malloc'd; the caller frees). Dies on a file that cannot be read, or that is
 * shorter than 2 tokens (nothing to predict). */
int *encode_ppl_text(const Vocab *v, const char *path, int *n_tokens);

/* What --ppl runs. */
typedef struct {
    const char *path; /* the text's file, named in the output */
    int profile;      /* 1: the time per operation class on stderr */
    int json;         /* 1: one JSON object */
} PerplexityRequest;

/* --ppl: scores tokens (n_tokens >= 2, BOS first, from the file at req->path) under m in chunks of
 * up to seq_len positions, each from BOS (eval.h's text_nll), and prints on stdout the tokens
 * predicted, chunks, norm, mean NLL in nats per token and perplexity exp(mean NLL), then the
 * standard error of the mean NLL over the chunks (eval.h's nll_summary) and the 95% interval of
 * the mean NLL and of the perplexity (exp of its ends); or with req->json the same as JSON. The
 * speed, and with profile set the time per operation class, go to stderr. Dies on a non-finite
 * NLL. */
void run_perplexity(Model *m, const int *tokens, int n_tokens, const PerplexityRequest *req);

/* The most timed rounds --compare and --profile take (--repeat). */
enum { MAX_ROUNDS = 100 };

/* What --compare runs. */
typedef struct {
    const int *prompt; /* (n_prompt) ids, BOS first */
    int n_prompt;
    int steps;              /* positions each generation runs, prompt included, at most seq_len */
    NormFn norms[2];        /* A and B, different, each one model_check_norm accepts */
    int json;               /* 1: print JSON */
    int rounds;             /* timed rounds per norm, at most MAX_ROUNDS; 0: 5 */
    int summary_only;       /* 1: the text without the texts and the tables by position and site */
    const char *model_path; /* named in the JSON */
} CompareRequest;

/* --compare: generates from req's prompt under norm A and under norm B, each restarting the
 * sampler from its present state (equal draws), req->rounds rounds taking turns for the speed
 * (tokens/s: the median, the range, B's over A's round by round); teacher-forces A's text under
 * both, comparing B's next-token distribution with A's at every position (KL(A || B), top-1
 * agreement, max |dlogit|) and observing the inputs of every norm call site (mean, RMS,
 * |mean|/RMS); times req->rounds profiled teacher-forced passes per norm for the norms' share of
 * the time (median). Prints it all on stdout, as tables or as JSON. Leaves m->norm at B's. */
void run_compare(Model *m, const Vocab *v, Sampler *sampler, const CompareRequest *req);

#endif
