/* Measuring what a norm does (eval.h): NLL and perplexity, KL and logit differences, the
 * statistics of each norm site's input; run.c prints them. */
#include "eval.h"

#include <math.h>

#include "sampler.h"

/* log(sum_i exp(x[i])) in double, x: (n); the largest x[i] is taken out first, so that no exp
 * overflows. */
static double log_sum_exp(const float *x, int n) {
    double max = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] > max) max = x[i];
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += exp(x[i] - max);
    return max + log(sum);
}

double token_nll(const float *logits, int n, int target) {
    return log_sum_exp(logits, n) - logits[target];
}

LogitsDiff logits_diff(const float *logits_p, const float *logits_q, int n) {
    double lse_p = log_sum_exp(logits_p, n), lse_q = log_sum_exp(logits_q, n);
    LogitsDiff d = {.top1_agree = argmax(logits_p, n) == argmax(logits_q, n)};
    for (int i = 0; i < n; i++) {
        double log_p = logits_p[i] - lse_p, log_q = logits_q[i] - lse_q;
        d.kl += exp(log_p) * (log_p - log_q);
        double diff = fabs((double)logits_p[i] - logits_q[i]);
        if (diff > d.max_abs_diff) d.max_abs_diff = diff;
    }
    return d;
}

double text_nll(Model *m, const int *tokens, int n_tokens, int *n_predicted, int *n_chunks,
                double *nlls) {
    int seq_len = m->config.seq_len, vocab_size = m->config.vocab_size;
    double nll = 0.0;
    *n_chunks = 0;
    /* text tokens [start, end) form one chunk; position p feeds BOS or tokens[start + p - 1] */
    for (int start = 1; start < n_tokens; start += seq_len) {
        int end = start + seq_len < n_tokens ? start + seq_len : n_tokens;
        for (int pos = 0; pos < end - start; pos++) {
            int input = pos == 0 ? tokens[0] : tokens[start + pos - 1];
            const float *logits = model_forward(m, input, pos);
            double token = token_nll(logits, vocab_size, tokens[start + pos]);
            if (nlls) nlls[start + pos - 1] = token;
            nll += token;
        }
        (*n_chunks)++;
    }
    *n_predicted = n_tokens - 1;
    return nll;
}

double student_t_975(int df) {
    static const double table[31] = {0,     12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365,
                                     2.306, 2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
                                     2.120, 2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069,
                                     2.064, 2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
    if (df <= 30) return table[df];
    double z = 1.959964, v = df, z2 = z * z;
    return z + z * (z2 + 1) / (4 * v) + z * ((5 * z2 + 16) * z2 + 3) / (96 * v * v) +
           z * (((3 * z2 + 19) * z2 + 17) * z2 - 15) / (384 * v * v * v);
}

NllSummary nll_summary(const double *nll, int n, int block) {
    NllSummary s = {0};
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += nll[i];
    s.mean = sum / n;
    s.n_blocks = (n + block - 1) / block;
    double squares = 0.0; /* sum_i n_i (m_i - mean)^2 */
    for (int b = 0; b < s.n_blocks; b++) {
        int start = b * block, end = start + block < n ? start + block : n;
        double block_sum = 0.0;
        for (int i = start; i < end; i++) block_sum += nll[i];
        double d = block_sum / (end - start) - s.mean;
        squares += (end - start) * d * d;
    }
    if (s.n_blocks > 1) s.standard_error = sqrt(squares / ((s.n_blocks - 1.0) * n));
    double half = s.n_blocks > 1 ? student_t_975(s.n_blocks - 1) * s.standard_error : 0.0;
    s.low = s.mean - half;
    s.high = s.mean + half;
    return s;
}

void site_stats_add(SiteStats *s, const float *x, int dim) {
    double sum = 0.0, ss = 0.0;
    for (int i = 0; i < dim; i++) sum += x[i], ss += (double)x[i] * x[i];
    double mean = sum / dim, rms = sqrt(ss / dim);
    s->mean += mean;
    s->rms += rms;
    s->mean_over_rms += rms > 0.0 ? fabs(mean) / rms : 0.0;
    s->count++;
}

static struct {
    NormFn inner;
    SiteStats *sites;
    int n_sites;
    long calls;
} observer;

static void observing_norm(float *out, const float *x, const float *weight, const float *bias,
                           int dim, float eps) {
    site_stats_add(&observer.sites[observer.calls++ % observer.n_sites], x, dim);
    observer.inner(out, x, weight, bias, dim, eps);
}

void norm_observe_start(Model *m, NormFn inner, SiteStats *sites, int n_sites) {
    observer.inner = inner;
    observer.sites = sites;
    observer.n_sites = n_sites;
    observer.calls = 0;
    model_set_norm(m, inner); /* the scalars inner takes at each site */
    m->norm = observing_norm;
}

void norm_observe_stop(Model *m) {
    model_set_norm(m, observer.inner);
}
