/* The sampler of sampler.h: greedy, temperature, top-p, and the xorshift64* generator behind
 * them, step by step as llama2.c's run.c takes them. The logits come from the caller (model.h's
 * forward pass), the softmax from attention.h's kernel; the loops that feed the tokens back are
 * generate.c's and chat.c's.
 */
#include "sampler.h"

#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "attention.h"
#include "tokenizer.h"

/* xorshift64* (Vigna 2016), upper 32 bits. */
static unsigned int random_u32(unsigned long long *state) {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return (unsigned int)((*state * 0x2545F4914F6CDD1Dull) >> 32);
}

/* Uniform in [0, 1) from the top 24 bits, the float mantissa's width. */
static float random_f32(unsigned long long *state) {
    return (random_u32(state) >> 8) / 16777216.0f;
}

/* Inverse-CDF draw from probs (n) with coin in [0, 1). */
static int sample_full(const float *probs, int n, float coin) {
    float cdf = 0.0f;
    for (int i = 0; i < n; i++) {
        cdf += probs[i];
        if (coin < cdf) return i;
    }
    return n - 1; /* rounding left the cdf just under 1 */
}

static int by_prob_desc(const void *a, const void *b) {
    float pa = ((const ProbIndex *)a)->prob, pb = ((const ProbIndex *)b)->prob;
    return (pa < pb) - (pa > pb);
}

/* Nucleus sampling (Holtzman et al. 2020): draw from the smallest set of most likely tokens
 * whose mass exceeds topp. Tokens below (1 - topp) / (n - 1) cannot be in that set, so they are
 * dropped before sorting, as llama2.c does. Returns -1 when none is left. */
static int sample_topp(const float *probs, int n, float topp, ProbIndex *candidates, float coin) {
    float cutoff = (1.0f - topp) / (n - 1);
    int n_cand = 0;
    for (int i = 0; i < n; i++) {
        if (probs[i] >= cutoff) {
            candidates[n_cand].index = i;
            candidates[n_cand].prob = probs[i];
            n_cand++;
        }
    }
    if (n_cand == 0) return -1; /* topp below 1 / n on a flat distribution (llama2.c reads [-1]) */
    qsort(candidates, n_cand, sizeof(ProbIndex), by_prob_desc);
    float mass = 0.0f;
    int last = n_cand - 1;
    for (int i = 0; i < n_cand; i++) {
        mass += candidates[i].prob;
        if (mass > topp) {
            last = i;
            break;
        }
    }
    float r = coin * mass;
    float cdf = 0.0f;
    for (int i = 0; i <= last; i++) {
        cdf += candidates[i].prob;
        if (r < cdf) return candidates[i].index;
    }
    return candidates[last].index;
}

unsigned long long clock_seed(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long long seed = (unsigned long long)ts.tv_sec * 1000000000ull + ts.tv_nsec;
    return seed ? seed : 1;
}

int ends_text(const Sampler *s, int token) {
    return token == TOKEN_BOS || (s->stop_at_eos && token == TOKEN_EOS);
}

int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

int sample(Sampler *s, float *logits) {
    int best = argmax(logits, s->vocab_size);
    if (s->temperature == 0.0f) return best;
    for (int i = 0; i < s->vocab_size; i++) logits[i] /= s->temperature;
    softmax(logits, s->vocab_size);
    /* a temperature so small that logits / temperature overflow leaves NaNs: its limit is greedy */
    if (isnan(logits[best])) return best;
    float coin = random_f32(&s->rng_state);
    if (s->topp <= 0.0f || s->topp >= 1.0f) return sample_full(logits, s->vocab_size, coin);
    int token = sample_topp(logits, s->vocab_size, s->topp, s->candidates, coin);
    return token >= 0 ? token : best; /* an empty nucleus: its limit is the top token */
}
