/* The sampler of sampler.h: the repetition penalty, greedy, temperature, top-k, top-p, min-p, and
 * the xorshift64* generator behind them, the steps llama2.c's run.c has taken as it takes them. The
 * logits come from the caller (model.h's forward pass), the softmax from attention.h's kernel; the
 * loops that feed the tokens back are generate.c's and chat.c's.
 */
#include "sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention.h"

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

static int by_id(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int sampler_init(Sampler *s, int vocab_size, const SamplerSettings *set, unsigned long long seed) {
    *s = (Sampler){.vocab_size = vocab_size, .set = *set, .rng_state = seed, .seed = seed};
    int window = set->repeat_last_n > 0 ? set->repeat_last_n : 1;
    s->candidates = malloc(vocab_size * sizeof(ProbIndex));
    s->recent = malloc(window * sizeof(int));
    s->window = malloc(window * sizeof(int));
    return s->candidates && s->recent && s->window ? 0 : -1;
}

void sampler_free(Sampler *s) {
    free(s->candidates);
    free(s->recent);
    free(s->window);
}

void sampler_reset(Sampler *s, unsigned long long seed) {
    s->rng_state = seed;
    s->n_accepted = 0;
}

void sampler_accept(Sampler *s, int token) {
    if (s->set.repeat_last_n > 0) s->recent[s->n_accepted % s->set.repeat_last_n] = token;
    s->n_accepted++;
}

void sampler_penalize(const Sampler *s, float *logits) {
    float penalty = s->set.repeat_penalty;
    int n = s->n_accepted < s->set.repeat_last_n ? (int)s->n_accepted : s->set.repeat_last_n;
    if (penalty == 1.0f || n == 0) return;
    /* sorted, a token repeated in the window is penalized once, as llama.cpp does */
    memcpy(s->window, s->recent, n * sizeof(int));
    qsort(s->window, n, sizeof(int), by_id);
    for (int i = 0; i < n; i++) {
        if (i > 0 && s->window[i] == s->window[i - 1]) continue;
        float *l = &logits[s->window[i]];
        *l = *l > 0.0f ? *l / penalty : *l * penalty;
    }
}

/* Moves the k most likely of c (n > k) to its front, in no order (Hoare's quickselect). */
static void select_top_k(ProbIndex *c, int n, int k) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        float pivot = c[lo + (hi - lo) / 2].prob;
        int i = lo, j = hi;
        while (i <= j) {
            while (c[i].prob > pivot) i++;
            while (c[j].prob < pivot) j--;
            if (i <= j) {
                ProbIndex t = c[i];
                c[i++] = c[j];
                c[j--] = t;
            }
        }
        if (k - 1 <= j)
            hi = j;
        else if (k - 1 >= i)
            lo = i;
        else
            return;
    }
}

int sampler_truncate(Sampler *s, const float *probs, float *mass) {
    const SamplerSettings *set = &s->set;
    int n = s->vocab_size, best = argmax(probs, n);
    int top_k = set->top_k > 0 && set->top_k < n ? set->top_k : 0;
    int topp = set->topp > 0.0f && set->topp < 1.0f;
    /* the most a token can have and be dropped by every stage on: none is dropped before its
     * stage would keep it (llama2.c's cutoff holds for a nucleus of the whole distribution, and
     * min-p's for a set top-p does not renormalize after) */
    float floor = 0.0f;
    if (topp && !top_k) floor = (1.0f - set->topp) / (n - 1);
    if (set->min_p > 0.0f && !(topp && top_k)) floor = fmaxf(floor, set->min_p * probs[best]);
    ProbIndex *c = s->candidates;
    int n_cand = 0;
    for (int i = 0; i < n; i++) {
        if (probs[i] >= floor) {
            c[n_cand].index = i;
            c[n_cand].prob = probs[i];
            n_cand++;
        }
    }
    if (n_cand == 0) return 0; /* topp below 1 / n on a flat distribution (llama2.c reads [-1]) */
    float kept = 1.0f;         /* the mass top-p takes its share of: the distribution's */
    if (top_k && top_k < n_cand) {
        select_top_k(c, n_cand, top_k);
        n_cand = top_k;
        kept = 0.0f;
        for (int i = 0; i < n_cand; i++) kept += c[i].prob;
    }
    qsort(c, n_cand, sizeof(ProbIndex), by_prob_desc);
    float sum = 0.0f;
    int last = n_cand - 1;
    for (int i = 0; i < n_cand; i++) {
        sum += c[i].prob;
        if (topp && sum > set->topp * kept) {
            last = i;
            break;
        }
    }
    if (set->min_p > 0.0f) {
        int keep = 1;
        while (keep <= last && c[keep].prob >= set->min_p * c[0].prob) keep++;
        if (keep <= last) {
            last = keep - 1;
            sum = 0.0f;
            for (int i = 0; i <= last; i++) sum += c[i].prob;
        }
    }
    *mass = sum;
    return last + 1;
}

unsigned long long clock_seed(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long long seed = (unsigned long long)ts.tv_sec * 1000000000ull + ts.tv_nsec;
    return seed ? seed : 1;
}

VocabEnd ends_text(const Sampler *s, const Vocab *v, int token) {
    VocabEnd end = vocab_end(v, token);
    return end == VOCAB_END_BOS || s->set.stop_at_eos ? end : VOCAB_NOT_END;
}

int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

int sample(Sampler *s, float *logits) {
    const SamplerSettings *set = &s->set;
    sampler_penalize(s, logits);
    int best = argmax(logits, s->vocab_size);
    if (set->temperature == 0.0f) return best;
    for (int i = 0; i < s->vocab_size; i++) logits[i] /= set->temperature;
    softmax(logits, s->vocab_size);
    /* a temperature so small that logits / temperature overflow leaves NaNs: its limit is greedy */
    if (isnan(logits[best])) return best;
    float coin = random_f32(&s->rng_state);
    int truncating = (set->topp > 0.0f && set->topp < 1.0f) ||
                     (set->top_k > 0 && set->top_k < s->vocab_size) || set->min_p > 0.0f;
    if (!truncating) return sample_full(logits, s->vocab_size, coin);
    float mass;
    int n = sampler_truncate(s, logits, &mass);
    if (n == 0) return best; /* an empty nucleus: its limit is the top token */
    float r = coin * mass, cdf = 0.0f;
    for (int i = 0; i < n; i++) {
        cdf += s->candidates[i].prob;
        if (r < cdf) return s->candidates[i].index;
    }
    return s->candidates[n - 1].index;
}
