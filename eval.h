/* Measuring what a norm does to a model: negative log-likelihood and perplexity of a text, the
 * distance between two next-token distributions, and statistics of the vectors each norm call
 * site receives. Used by run's --ppl and --compare modes.
 */
#ifndef EVAL_H
#define EVAL_H

#include "model.h"

/* -log softmax(logits)[target] in nats, computed in double as logsumexp(logits) - logits[target].
 * logits: (n), n >= 1. Requires 0 <= target < n (not checked). A NaN or infinite logit gives a
 * non-finite result, which the caller must refuse (run --ppl does). */
double token_nll(const float *logits, int n, int target);

/* How far the next-token distribution q (from logits_q) is from p (from logits_p). */
typedef struct {
    double kl;           /* KL(p || q) = sum_i p_i (log p_i - log q_i), nats, in double */
    int top1_agree;      /* 1 if both argmaxes are the same token */
    double max_abs_diff; /* max_i |logits_p[i] - logits_q[i]| */
} LogitsDiff;

/* Compares two logit vectors of length n (n >= 1, not checked), each turned into a distribution
 * by a softmax in double. */
LogitsDiff logits_diff(const float *logits_p, const float *logits_q, int n);

/* The summed NLL (nats) of every text token of `tokens` under `m`, teacher-forced; with nlls not
 * NULL, each token's into nlls (n_tokens - 1, in the text's order).
 * tokens: (n_tokens), tokens[0] = BOS, n_tokens >= 2, every id below vocab_size (not checked);
 * the text tokens are tokens[1..]. They are cut into chunks of at most seq_len tokens; each chunk
 * is fed from position 0 starting with BOS (BOS, then the chunk's tokens but its last), so every
 * text token is predicted exactly once, with the context of its own chunk. Sets *n_predicted
 * (= n_tokens - 1) and *n_chunks.
 * Perplexity is exp(result / *n_predicted), as llama.cpp's perplexity tool reports it; llama.cpp
 * differs in scoring only the second half of each chunk. */
double text_nll(Model *m, const int *tokens, int n_tokens, int *n_predicted, int *n_chunks,
                double *nlls);

/* The mean of per-token NLLs and its uncertainty. Neighbouring tokens' NLLs are not independent
 * (a hard passage makes several hard tokens), so the standard error is taken over blocks: the
 * tokens in order cut into blocks of `block` (the last one shorter), whose means are nearly
 * independent when the blocks are longer than the dependence (batch means; run --ppl's blocks
 * are its chunks, docs/USAGE.md says why): se^2 = sum_i n_i (m_i - mean)^2 / ((B - 1) N) over
 * the B blocks of n_i tokens and mean m_i, N tokens in all (sd(m_i) / sqrt(B) for equal blocks).
 * The 95% interval is mean +- t * se with Student's t at B - 1 degrees of freedom. */
typedef struct {
    double mean;           /* nats per token */
    double standard_error; /* of the mean; 0 with one block */
    int n_blocks;
    double low, high; /* the 95% interval of the mean (the mean itself with one block) */
} NllSummary;

/* The summary of nll (n >= 1 values) in blocks of `block` (>= 1) tokens. */
NllSummary nll_summary(const double *nll, int n, int block);

/* Student's t distribution's 0.975 quantile at df >= 1 degrees of freedom: a table to 30, then
 * the Cornish-Fisher expansion about the normal's 1.959964 (within 2e-5 of the exact value from
 * df 31 on). */
double student_t_975(int df);

/* Running sums over the input vectors of one norm call site. */
typedef struct {
    double mean;          /* sum of mean(x) */
    double rms;           /* sum of sqrt(mean(x^2)) */
    double mean_over_rms; /* sum of |mean(x)| / sqrt(mean(x^2)), 0 for an all-zero x */
    long count;           /* vectors seen; divide the sums by it for averages */
} SiteStats;

/* Adds the statistics of x (dim, dim >= 1) to s. */
void site_stats_add(SiteStats *s, const float *x, int dim);

/* Installs on `m` a NormFn that records, for every call, the statistics of its input into
 * sites[call % n_sites] and then applies `inner` (given the scalars inner takes at each site,
 * model_set_norm; model_check_norm must accept it). model_forward calls the norm in a fixed order
 * (layer 0 attention, layer 0 FFN, ..., layer n_layers - 1 FFN, final), so with
 * n_sites = 2 * n_layers + 1 and the count starting at 0 each site gets its own entry.
 * sites: (n_sites), n_sites >= 1, zeroed by the caller. One observer at a time: the state is
 * global, as NormFn carries no context. */
void norm_observe_start(Model *m, NormFn inner, SiteStats *sites, int n_sites);

/* Ends observing: puts the `inner` norm of norm_observe_start back on `m`. */
void norm_observe_stop(Model *m);

#endif
