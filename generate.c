/* Generation (generate.h): the loop that feeds the prompt and then each sampled token back, and
 * the default mode's output around it. The forward pass is model.c's, the sampling sampler.c's.
 */
#include "generate.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io.h"
#include "norm.h"
#include "profile.h"

const char *stop_reason_name(StopReason r) {
    static const char *names[] = {
        [STOP_LENGTH] = "-n reached",
        [STOP_CONTEXT] = "context full",
        [STOP_EOS] = "EOS",
        [STOP_EOT] = "end of turn",
        [STOP_BOS] = "BOS",
        [STOP_INTERRUPTED] = "interrupted",
        [STOP_END_OF_INPUT] = "end of input",
        [STOP_STDOUT_CLOSED] = "stdout closed",
    };
    return names[r];
}

void print_summary(const Summary *s) {
    int prompt_forward = s->n_forward < s->n_prompt ? s->n_forward : s->n_prompt;
    fprintf(stderr, "prompt tokens %d, generated tokens %d, prompt %.1f tokens/s, ", s->n_prompt,
            s->n_generated, s->prompt_seconds > 0 ? prompt_forward / s->prompt_seconds : 0.0);
    if (s->n_forward > s->n_prompt && s->generation_seconds > 0)
        fprintf(stderr, "generation %.1f tokens/s, ",
                (s->n_forward - s->n_prompt) / s->generation_seconds);
    else
        fprintf(stderr, "generation - tokens/s, ");
    int threads = omp_get_max_threads(); /* a region's team, OMP_THREAD_LIMIT applied */
    if (omp_get_thread_limit() < threads) threads = omp_get_thread_limit();
    fprintf(stderr, "norm %s, threads %d, seed %llu, stop %s\n", s->norm, threads, s->seed,
            stop_reason_name(s->stop));
}

void require_finite(const float *logits, int vocab_size, int pos) {
    for (int i = 0; i < vocab_size; i++)
        if (!isfinite(logits[i]))
            die("the model computed a non-finite logit at position %d (corrupt weights?)", pos);
}

/* Whether token next ends the text (sampler.h's ends_text), into *stop. */
static int ends_here(const Vocab *v, const Sampler *sampler, int next, StopReason *stop) {
    VocabEnd end = ends_text(sampler, v, next);
    if (end == VOCAB_NOT_END) return 0;
    *stop = end == VOCAB_END_BOS ? STOP_BOS : end == VOCAB_END_EOS ? STOP_EOS : STOP_EOT;
    return 1;
}

void generate(Model *m, Sampler *sampler, const GenerateRequest *req, GenerateResult *out) {
    const int *prompt = req->prompt;
    int n_prompt = req->n_prompt, steps = req->steps;
    const LogitsOut *logits_out = req->logits_out;
    int vocab_size = m->config.vocab_size;
    int n_prefill = req->batch_prompt ? (n_prompt - 1 < steps ? n_prompt - 1 : steps) : 0;
    float *prefill_logits = NULL;
    if (n_prefill > 0 && logits_out &&
        !(prefill_logits = malloc((size_t)n_prefill * vocab_size * sizeof(float))))
        die("out of memory for the prompt's logits");
    if (n_prefill > 0) model_prefill(m, prompt, n_prefill, prefill_logits);
    int *tokens = out->tokens;
    int n = 0;
    int token = tokens[n++] = prompt[0];
    int pos = 0;
    VocabStream stream = {0};
    out->stop = steps == m->config.seq_len ? STOP_CONTEXT : STOP_LENGTH; /* unless one below */
    while (pos < steps) {
        if (interrupted()) {
            out->stop = STOP_INTERRUPTED;
            break;
        }
        sampler_accept(sampler, token); /* the penalty's window: every token of the context */
        float *logits = pos >= n_prefill ? model_forward(m, token, pos)
                        : prefill_logits ? prefill_logits + (size_t)pos * vocab_size
                                         : NULL; /* not needed: the next token is forced */
        if (logits_out &&
            fwrite(logits, sizeof(float), vocab_size, logits_out->file) != (size_t)vocab_size)
            die("cannot write --logits file %s: %s", logits_out->path, strerror(errno));
        if (logits) require_finite(logits, vocab_size, pos);
        if (pos == n_prompt - 1) out->prompt_done = now_seconds();
        int next;
        if (pos + 1 < n_prompt) {
            next = prompt[pos + 1];
        } else {
            if (m->profile) profile_start(m->profile);
            next = sample(sampler, logits);
            if (m->profile) profile_lap(m->profile, OP_SAMPLING);
        }
        pos++;
        if (ends_here(req->vocab, sampler, next, &out->stop)) break;
        if (req->print) {
            vocab_print(req->vocab, &stream, token, next);
            if (stdout_reader_gone()) { /* as if the text ended here */
                out->stop = STOP_STDOUT_CLOSED;
                break;
            }
        }
        token = tokens[n++] = next;
    }
    if (req->print) vocab_stream_end(req->vocab, &stream);
    free(prefill_logits);
    out->n_tokens = n;
    out->n_forward = pos;
    if (pos < n_prompt) out->prompt_done = now_seconds();
}

/* The runs of --profile --repeat after the first: the same text (the sampler restarted from its
 * seed), not printed, each timed into times[i] and elapsed[i]; fewer after a Ctrl-C. Returns the
 * runs made, the first included. */
static int repeat_generation(Model *m, Sampler *sampler, const GenerateRequest *req,
                             GenerateResult *result, Profile *times, double *elapsed) {
    GenerateRequest quiet = *req;
    quiet.print = 0;
    quiet.logits_out = NULL;
    int runs = 1;
    for (; runs < req->profile_runs && !interrupted(); runs++) {
        sampler_reset(sampler, sampler->seed);
        m->profile = &times[runs];
        double start = now_seconds();
        generate(m, sampler, &quiet, result);
        elapsed[runs] = now_seconds() - start;
    }
    return runs;
}

void run_generation(Model *m, Sampler *sampler, const GenerateRequest *req) {
    int n_runs = req->profile_runs > 1 ? req->profile_runs : 1;
    Profile *times = calloc(n_runs, sizeof(Profile));
    double *elapsed = calloc(n_runs, sizeof(double));
    GenerateResult result = {.tokens = malloc((req->steps + 1) * sizeof(int))};
    if (!result.tokens || !times || !elapsed) die("out of memory for the tokens");
    m->profile = req->profile_runs ? &times[0] : NULL;
    double start = now_seconds();
    catch_interrupt(1); /* Ctrl-C ends the text, and the summary says so */
    generate(m, sampler, req, &result);
    const LogitsOut *logits_out = req->logits_out;
    if (logits_out && fclose(logits_out->file) != 0)
        die("cannot write --logits file %s: %s", logits_out->path, strerror(errno));
    remove_on_error(NULL, NULL); /* the file is complete */
    printf("\n");
    finish_stdout(); /* the summary on stderr comes after the text, also in a shared log */
    double end = now_seconds();
    elapsed[0] = end - start;
    Summary summary = {.n_prompt = req->n_prompt,
                       .n_generated = result.n_tokens - req->n_prompt,
                       .n_forward = result.n_forward,
                       .prompt_seconds = result.prompt_done - start,
                       .generation_seconds = end - result.prompt_done,
                       .norm = norm_name(m->norm),
                       .seed = sampler->seed,
                       .stop = result.stop};
    print_summary(&summary);
    if (req->profile_runs == 1) print_profile(stderr, &times[0], elapsed[0]);
    if (req->profile_runs > 1) {
        int runs = repeat_generation(m, sampler, req, &result, times, elapsed);
        print_profile_runs(stderr, times, elapsed, runs);
    }
    m->profile = NULL; /* the profile ends with this function */
    free(result.tokens);
    free(times);
    free(elapsed);
}
