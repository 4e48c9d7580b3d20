/* Generation, run's default mode: the prompt fed position by position (or its positions but the
 * last batched through model_prefill), then one sampled token at a time, each fed back, until
 * the steps run out or a token ends the text; and the summary line every generating mode prints.
 *
 * It leaves the forward pass to model.h, the choice of each token to sampler.h, the command line
 * and the prompt's encoding to run.c, a conversation to chat.c and --compare's two runs to
 * compare.c (which call generate here).
 */
#ifndef GENERATE_H
#define GENERATE_H

#include <stdio.h>

#include "model.h"
#include "sampler.h"
#include "vocab.h"

/* The --logits file: its stream and its name, for the error messages. */
typedef struct {
    FILE *file;
    const char *path;
} LogitsOut;

/* What generate runs. */
typedef struct {
    const int *prompt; /* (n_prompt) ids, n_prompt >= 1, prompt[0] = BOS */
    int n_prompt;
    int steps; /* positions to run, prompt included, at most the model's seq_len */
    /* 1: the prompt's positions but the last (their next tokens are forced) go through
     * model_prefill first, which computes their logits only for logits_out; 0: one at a time */
    int batch_prompt;
    const Vocab *vocab;          /* which tokens end the text; with print, decodes it */
    int print;                   /* 1: stream the text to stdout as it is made */
    const LogitsOut *logits_out; /* NULL, or every position's logits, vocab_size float32 each */
    int profile_runs; /* run_generation: 0 no --profile; else runs to time (--repeat), the first
                       * printed, the others the same text unprinted */
} GenerateRequest;

/* Why a text (or a chat) ended: the summary line names it. */
typedef enum {
    STOP_LENGTH,        /* the positions asked for (-n, --n-predict) were run */
    STOP_CONTEXT,       /* the context (seq_len, or -c) is full */
    STOP_EOS,           /* the model gave EOS */
    STOP_EOT,           /* the model gave an end-of-turn token (vocab.h: <|eot_id|>, ...) */
    STOP_BOS,           /* the model gave BOS, the start of another text */
    STOP_INTERRUPTED,   /* Ctrl-C (SIGINT) */
    STOP_END_OF_INPUT,  /* a chat's stdin ended */
    STOP_STDOUT_CLOSED, /* stdout's reader has gone */
} StopReason;

/* The reason as the summary names it: "-n reached", "context full", "EOS", ... */
const char *stop_reason_name(StopReason r);

/* What generate made. */
typedef struct {
    int *tokens;        /* (steps + 1), the caller's: the fed and predicted tokens */
    int n_tokens;       /* tokens written, prompt included */
    int n_forward;      /* forward passes (positions run) */
    double prompt_done; /* now_seconds() at the end of the prompt's last position's forward pass,
                         * or of the run if that was earlier: it splits prompt from generation */
    StopReason stop;
} GenerateResult;

/* Runs positions 0..steps-1 of req: position pos feeds a token and predicts the one at pos + 1,
 * forced from the prompt while there is one, sampled by `sampler` after, until a token that ends
 * the text (not written: BOS, and EOS or an end of turn unless the sampler's stop_at_eos is off),
 * the last position, or a Ctrl-C (io.h's interrupted), saying which in out->stop. Each token fed is
 * accepted into the sampler's penalty window. Fills out->tokens (at most steps + 1) and the counts.
 * With m->profile set, sampling is timed as OP_SAMPLING. Dies on a non-finite logit (corrupt
 * weights) and on a failed write of the --logits file, naming it; stops early, as if the text ended
 * there, when stdout's reader is gone (print). */
void generate(Model *m, Sampler *sampler, const GenerateRequest *req, GenerateResult *out);

/* Generation, the default mode: runs req and streams the text to stdout, closes the --logits
 * file (req->logits_out, dying if that fails), then prints the summary line and, with
 * req->profile_runs set, the time per operation class (profile.h) on stderr: of the one run, or
 * the medians and ranges over profile_runs runs of the same text (the first the one printed). */
void run_generation(Model *m, Sampler *sampler, const GenerateRequest *req);

/* What a run's summary line reports. */
typedef struct {
    int n_prompt;    /* tokens given: the prompt's, or in chat every turn's */
    int n_generated; /* tokens sampled */
    int n_forward;   /* forward passes */
    double prompt_seconds, generation_seconds;
    const char *norm;
    unsigned long long seed;
    StopReason stop;
} Summary;

/* The run's summary line on stderr: prompt and generated token counts, then the speed of each
 * part as llama.cpp reports it: the prompt's positions per second of prompt_seconds, and the
 * generated positions (n_forward beyond the prompt) per second of generation_seconds ("-" when
 * there were none); the norm, the OpenMP threads of a parallel region (omp_get_max_threads, at most
 * omp_get_thread_limit), the seed (which -s takes to repeat the text) and why it stopped (as
 * llama.cpp prints "[end of text]"). The prompt rate includes the first forward pass, slower while
 * caches are cold. */
void print_summary(const Summary *s);

/* Dies unless every one of the logits (vocab_size) of position pos is finite, naming pos. */
void require_finite(const float *logits, int vocab_size, int pos);

#endif
