/* The sampler: picks the next token from a position's logits through a chain of stages, each off
 * by default, in this order:
 *
 *   1. repetition penalty: the logit of every token among the last repeat_last_n tokens of the
 *      context (prompt included) divided by repeat_penalty when positive, multiplied when not
 *      (Keskar et al. 2019, CTRL; llama.cpp's --repeat-penalty and --repeat-last-n);
 *   2. temperature: greedy (the argmax) at 0, else the logits divided by it and softmaxed;
 *   3. top-k: the k most likely tokens (Fan et al. 2018);
 *   4. top-p: of those, the smallest set of most likely tokens whose mass exceeds topp of their
 *      mass (the nucleus, Holtzman et al. 2020);
 *   5. min-p: of those, the tokens at least min_p times as likely as the most likely one
 *      (Nguyen et al. 2024);
 *   6. one draw from what is left, renormalized.
 *
 * Stages 3 to 5 are llama.cpp's chain in llama.cpp's order (top-k, top-p, min-p); the temperature
 * comes before them, as in llama2.c (and Hugging Face's), where llama.cpp applies it last: top-k
 * is the same either way, top-p and min-p see the tempered distribution here. With stages 1, 3 and
 * 5 off (the defaults), the sampler is llama2.c's: the same random generator (xorshift64*) and
 * procedures, so that equal seeds draw equal tokens. Also the rule for which sampled token ends a
 * text.
 *
 * It leaves the logits to the forward pass (model.h), the command line's checks to options.c,
 * and the loops that feed tokens back (and accept them into the penalty's window) to generate.c
 * and chat.c.
 */
#ifndef SAMPLER_H
#define SAMPLER_H

#include "vocab.h"

/* A candidate token of the truncating stages: its probability and id. */
typedef struct {
    float prob;
    int index;
} ProbIndex;

/* The sampler's settings, as the command line gives them. */
typedef struct {
    float temperature;    /* 0: greedy */
    float topp;           /* nucleus mass; <= 0 or >= 1: off */
    int top_k;            /* <= 0 or >= vocab_size: off */
    float min_p;          /* <= 0: off */
    float repeat_penalty; /* 1: off */
    int repeat_last_n;    /* the penalty's window in tokens, >= 0; 0: off */
    int stop_at_eos;      /* 1: EOS ends a text as BOS does; 0: BOS alone (llama2.c) */
} SamplerSettings;

typedef struct {
    int vocab_size;
    SamplerSettings set;
    unsigned long long rng_state; /* xorshift64* state, never 0 */
    unsigned long long seed;      /* rng_state at the start, which the summary prints */
    ProbIndex *candidates;        /* (vocab_size) scratch of the truncating stages */
    int *recent;                  /* (repeat_last_n) ring of the last tokens accepted */
    int *window;                  /* (repeat_last_n) scratch: the ring sorted */
    long n_accepted;              /* tokens accepted since the start (or sampler_reset) */
} Sampler;

/* A sampler of settings `set` for vocab_size tokens, its generator seeded with seed (never 0).
 * Returns 0, or -1 when out of memory (free what was made with sampler_free). */
int sampler_init(Sampler *s, int vocab_size, const SamplerSettings *set, unsigned long long seed);

void sampler_free(Sampler *s);

/* Starts over: the generator from seed, the penalty's window empty (--compare's runs). */
void sampler_reset(Sampler *s, unsigned long long seed);

/* Adds a token of the context (fed or sampled) to the penalty's window. */
void sampler_accept(Sampler *s, int token);

/* The index of the largest of x (n >= 1, not checked), the first one on a tie, as llama2.c's
 * sample_argmax: greedy decoding's token, and the top-1 that --compare checks (eval.h). */
int argmax(const float *x, int n);

/* Stage 1 on logits (vocab_size), in place: each distinct token of the window penalized once. */
void sampler_penalize(const Sampler *s, float *logits);

/* Stages 3 to 5 on probs (vocab_size, a distribution): the tokens kept, most likely first, into
 * s->candidates; returns their number (0 only when top-p alone on a flat distribution keeps none:
 * topp below 1 / vocab_size) and their summed probability in *mass, summed in that order. Tokens
 * below (1 - topp) / (vocab_size - 1) cannot be in a nucleus of the whole distribution, so with
 * top-k off they are dropped before sorting, as llama2.c does. */
int sampler_truncate(Sampler *s, const float *probs, float *mass);

/* Picks the next token from logits (vocab_size), which it overwrites (penalized, then
 * probabilities unless the temperature is 0). A draw of the generator (a float in [0, 1) from the
 * top 24 bits of xorshift64*, Vigna 2016) picks a token by inverse CDF: over the whole
 * distribution in id order when no truncating stage is on, else over the candidates, most likely
 * first, renormalized. Where llama2.c would read out of bounds the limit is taken: a temperature
 * so small that the division overflows to NaN, or a nucleus left empty, give the argmax. */
int sample(Sampler *s, float *logits);

/* Whether a sampled token ends the text, and how (vocab_end's VocabEnd; VOCAB_NOT_END: it does
 * not): BOS, which starts the next text (llama2.c stops at it alone), and EOS and an end of turn
 * unless s->set.stop_at_eos is 0 (llama.cpp stops at EOS; its --ignore-eos ignores every
 * end-of-generation token). */
VocabEnd ends_text(const Sampler *s, const Vocab *v, int token);

/* A seed for -s 0 from the real-time clock in nanoseconds, so that two runs within one second
 * differ; never 0, a state xorshift cannot leave (the nanoseconds since 1970 stay below the
 * largest -s, 2^63 - 1, until the year 2262). */
unsigned long long clock_seed(void);

#endif
