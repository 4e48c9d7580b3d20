/* --trace (trace.h): the observer of reference.c's plain pass that prints each step. */
#include "trace.h"

#include <math.h>
#include <stdio.h>

#include "io.h"
#include "reference.h"

enum { TOP_HEAD = 3, TOP_LOGITS = 5 };

typedef struct {
    const Vocab *v;
    int json;
    int n_steps; /* printed so far (JSON's commas) */
    int prev;    /* the token before the traced one, for the pieces' decoding */
} Tracer;

static double mean_of(const float *x, int n) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += x[i];
    return sum / n;
}

static double rms_of(const float *x, int n) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += (double)x[i] * x[i];
    return sqrt(sum / n);
}

/* The k largest of x (n), largest first, into top (their indices); k <= n. */
static void top_k(const float *x, int n, int k, int *top) {
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int i = 0; i < n; i++) {
            int taken = 0;
            for (int q = 0; q < j; q++) taken |= top[q] == i;
            if (!taken && (best < 0 || x[i] > x[best])) best = i;
        }
        top[j] = best;
    }
}

/* The step's name and layer, then its shape (dims, n_dims of them), as text or JSON. */
static void begin_step(Tracer *tr, const ForwardStep *s, const int *dims, int n_dims) {
    if (tr->json) {
        printf("%s\n    {\"step\": \"%s\", \"layer\": %d, \"shape\": [", tr->n_steps ? "," : "",
               s->name, s->layer);
        for (int i = 0; i < n_dims; i++) printf("%s%d", i ? ", " : "", dims[i]);
        printf("]");
    } else {
        char name[64], shape[32];
        if (s->layer >= 0)
            snprintf(name, sizeof(name), "layer %d %s", s->layer, s->name);
        else
            snprintf(name, sizeof(name), "%s", s->name);
        int len = snprintf(shape, sizeof(shape), "[");
        for (int i = 0; i < n_dims; i++)
            len += snprintf(shape + len, sizeof(shape) - len, "%s%d", i ? " x " : "", dims[i]);
        snprintf(shape + len, sizeof(shape) - len, "]");
        printf("%-32s %-10s ", name, shape);
    }
    tr->n_steps++;
}

/* A number of the step, "key": value in JSON, "label value" in text. */
static void number(const Tracer *tr, const char *key, const char *label, double v) {
    if (tr->json)
        printf(", \"%s\": %.6g", key, v);
    else
        printf(" %s %.4f", label, v);
}

static void show_heads(Tracer *tr, const ForwardStep *s) {
    const LayerCache *lc = s->cache;
    int n = s->pos + 1, k = n < TOP_HEAD ? n : TOP_HEAD;
    begin_step(tr, s, (int[]){lc->n_heads, n}, 2);
    printf(tr->json ? ", \"heads\": [" : "heads x positions 0..%d: the top weights @ position\n",
           s->pos);
    for (int h = 0; h < lc->n_heads; h++) {
        const float *att = lc->att + (size_t)h * 4 * lc->seq_len;
        int top[TOP_HEAD];
        top_k(att, n, k, top);
        if (tr->json) {
            printf("%s\n      {\"head\": %d, \"top\": [", h ? "," : "", h);
            for (int j = 0; j < k; j++)
                printf("%s{\"pos\": %d, \"weight\": %.6g}", j ? ", " : "", top[j], att[top[j]]);
            printf("], \"weights\": [");
            for (int t = 0; t < n; t++) printf("%s%.6g", t ? ", " : "", att[t]);
            printf("]}");
        } else {
            printf("%*shead %d:", 34, "", h);
            for (int j = 0; j < k; j++) printf("  %.3f @%d", att[top[j]], top[j]);
            printf("\n");
        }
    }
    if (tr->json) printf("]}");
}

static void show_logits(Tracer *tr, const ForwardStep *s) {
    int top[TOP_LOGITS];
    top_k(s->x, s->n, TOP_LOGITS, top);
    double max = s->x[top[0]], sum = 0.0;
    for (int i = 0; i < s->n; i++) sum += exp(s->x[i] - max);
    begin_step(tr, s, &s->n, 1);
    printf(tr->json ? ", \"top\": [" : "top %d:", TOP_LOGITS);
    for (int j = 0; j < TOP_LOGITS; j++) {
        const char *piece = vocab_decode(tr->v, tr->prev, top[j]);
        double p = exp(s->x[top[j]] - max) / sum;
        if (tr->json) {
            printf("%s{\"id\": %d, \"piece\": ", j ? ", " : "", top[j]);
            print_json_string(piece);
            printf(", \"logit\": %.6g, \"prob\": %.6g}", s->x[top[j]], p);
        } else {
            printf("%s '", j ? "," : "");
            write_escaped(stdout, piece, 0);
            printf("' %.3f (%d)", p, top[j]);
        }
    }
    printf(tr->json ? "]}" : "\n");
}

static void trace_step(void *ctx, const ForwardStep *s) {
    Tracer *tr = ctx;
    if (s->kind == STEP_ATTENTION || s->kind == STEP_LOGITS) {
        (s->kind == STEP_ATTENTION ? show_heads : show_logits)(tr, s);
        return;
    }
    int by_head = s->heads > 0; /* q, k, v: (heads, head_size) */
    begin_step(tr, s, by_head ? (int[]){s->heads, s->n / s->heads} : &s->n, by_head ? 2 : 1);
    if (s->kind == STEP_NORM) {
        number(tr, "input_mean", "input mean", mean_of(s->x, s->n));
        number(tr, "input_rms", "RMS", rms_of(s->x, s->n));
        number(tr, "output_rms", "-> output RMS", rms_of(s->y, s->n));
    } else if (s->kind == STEP_GATE) {
        int active = 0;
        for (int i = 0; i < s->n; i++) active += s->x[i] > 0.0f;
        number(tr, "active_share", "active (> 0) share", (double)active / s->n);
    } else {
        if (!by_head) number(tr, "mean", "mean", mean_of(s->x, s->n));
        number(tr, "rms", "RMS", rms_of(s->x, s->n));
    }
    printf(tr->json ? "}" : "\n");
}

void run_trace(Model *m, const Vocab *v, const TraceRequest *req) {
    for (int pos = 0; pos < req->pos; pos++) reference_forward(m, req->prompt[pos], pos);
    int token = req->prompt[req->pos];
    Tracer tr = {v, req->json, 0, token};
    const char *piece = vocab_decode(v, req->pos > 0 ? req->prompt[req->pos - 1] : -1, token);
    if (req->json) {
        printf("{\n  \"pos\": %d, \"token\": %d, \"piece\": ", req->pos, token);
        print_json_string(piece);
        printf(", \"norm\": \"%s\",\n  \"steps\": [", norm_name(m->norm));
    } else {
        printf("trace of position %d, token %d '", req->pos, token);
        write_escaped(stdout, piece, 0);
        printf("', under %s (the plain pass, reference.c)\n", norm_name(m->norm));
    }
    ForwardObserver obs = {trace_step, &tr};
    reference_forward_observed(m, token, req->pos, &obs);
    if (req->json) printf("\n  ]\n}\n");
}
