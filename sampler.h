/* The sampler: picks the next token from a position's logits, greedily (temperature 0), from the
 * whole tempered distribution, or from its nucleus (top-p). Same random generator (xorshift64*)
 * and procedures as llama2.c's run.c, so that equal seeds draw equal tokens; and the rule for
 * which sampled token ends a text.
 *
 * It leaves the logits to the forward pass (model.h), the command line's checks of -t, -p and -s
 * to run.c, and the loops that feed tokens back to generate.c and chat.c.
 */
#ifndef SAMPLER_H
#define SAMPLER_H

/* A candidate token of top-p sampling: its probability and id. */
typedef struct {
    float prob;
    int index;
} ProbIndex;

typedef struct {
    int vocab_size;
    float temperature; /* 0: greedy */
    float topp;        /* nucleus mass; <= 0 or >= 1 samples from the whole distribution */
    unsigned long long rng_state; /* xorshift64* state, never 0 */
    unsigned long long seed;      /* rng_state at the start, which the summary prints */
    ProbIndex *candidates;        /* (vocab_size) scratch for top-p, the caller's */
    int stop_at_eos;              /* 1: EOS ends a text as BOS does; 0: BOS alone (llama2.c) */
} Sampler;

/* The index of the largest of x (n >= 1, not checked), the first one on a tie, as llama2.c's
 * sample_argmax: greedy decoding's token, and the top-1 that --compare checks (eval.h). */
int argmax(const float *x, int n);

/* Picks the next token from logits (vocab_size), which it overwrites with probabilities unless
 * the temperature is 0 (greedy: the argmax, the first on a tie). Otherwise the logits are
 * divided by the temperature and softmaxed, and one draw of the generator (a float in [0, 1)
 * from the top 24 bits of xorshift64*, Vigna 2016) picks a token by inverse CDF, over the whole
 * distribution when topp <= 0 or >= 1, else over the nucleus (Holtzman et al. 2020): the
 * smallest set of most likely tokens whose mass exceeds topp, after dropping, as llama2.c does,
 * the tokens below (1 - topp) / (vocab_size - 1). Where llama2.c would read out of bounds the
 * limit is taken: a temperature so small that the division overflows to NaN, or a nucleus left
 * empty, give the argmax. */
int sample(Sampler *s, float *logits);

/* Whether a sampled token ends the text: BOS, which starts the next text (llama2.c stops at it
 * alone), and EOS unless s->stop_at_eos is 0 (llama.cpp stops at EOS). */
int ends_text(const Sampler *s, int token);

/* A seed for -s 0 from the real-time clock in nanoseconds, so that two runs within one second
 * differ; never 0, a state xorshift cannot leave (the nanoseconds since 1970 stay below the
 * largest -s, 2^63 - 1, until the year 2262). */
unsigned long long clock_seed(void);

#endif
