/* --trace POS: one token through the forward pass, for students. The prompt's positions before POS
 * run through the plain pass (reference.c), then position POS runs observed, and each step is
 * printed in the order the pass takes it, with its shape and a few numbers: the embedding's RMS;
 * per layer each norm's input mean and RMS and output RMS, the q, k and v RMS, each head's top
 * attention weights and the positions they fall on, the feed-forward gate's share of active
 * (positive) units, the residual stream's mean and RMS after each block; the final norm; the
 * logits' top 5 with their tokens. As text, or with --json as one JSON object (each head's whole
 * row of weights too) for tools/plot_trace.py. tests/test_trace.py checks the numbers against
 * hooks in nllm_model.py's PyTorch model.
 *
 * It leaves the pass to reference.h (whose observer it is), the prompt and the checks of POS to
 * run.c.
 */
#ifndef TRACE_H
#define TRACE_H

#include "model.h"
#include "vocab.h"

typedef struct {
    const int *prompt; /* (n_prompt) ids, BOS first */
    int n_prompt;
    int pos;  /* the position traced, 0 <= pos < n_prompt */
    int json; /* 1: one JSON object */
} TraceRequest;

/* Runs req's prompt up to position req->pos on m and prints the trace of that position on
 * stdout. */
void run_trace(Model *m, const Vocab *v, const TraceRequest *req);

#endif
