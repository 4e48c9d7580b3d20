/* options: run's command line as one table (options.c). Each option is one row: its names, the
 * kind of its value (which parser reads it), its help lines and its checks (a range; the modes
 * and options it is refused with, each with its message). From the table come --help's text,
 * the parser and the checks across options, as llama.cpp's common_arg rows give its --help, its
 * parser and the examples each option is used by.
 *
 * The modes: plain generation (none of the below), -m chat, --compare, --ppl, --tokenize,
 * --tokenize-file, --info and --trace; an option states where it may not be used by refusing those
 * modes.
 */
#ifndef OPTIONS_H
#define OPTIONS_H

#include "norm.h"

/* What the command line asks for, every option checked (values, ranges, the options together). */
typedef struct {
    const char *model_path;
    const char *tokenizer_path; /* NULL: look beside the model */
    const char *prompt;         /* NULL: no prompt, generation starts from BOS */
    const char *prompt_file;    /* -f FILE, or "-" (-f - or -i -): the prompt is read from it */
    int chat;                   /* -m chat: a conversation in the model's chat template */
    const char *system_prompt;  /* -y: chat's system prompt; NULL: asked for on a terminal */
    int chat_template;          /* --chat-template: a ChatTemplate; -1: the model's, else llama2 */
    int ignore_eos;             /* --ignore-eos: only BOS ends a text, as in llama2.c */
    float temperature;
    float topp;
    int top_k;                 /* 0: off */
    float min_p;               /* 0: off */
    float repeat_penalty;      /* 1: off */
    int repeat_last_n;         /* the penalty's window in tokens; -1: the whole context */
    long long seed;            /* >= 0; 0: from the clock */
    int steps;                 /* positions to run, prompt included, as llama2.c counts them */
    int n_predict;             /* --n-predict: tokens to generate, -1 until the context is full;
                                  NO_N_PREDICT when not given (then steps counts) */
    int ctx_size;              /* -c: positions the kv cache holds, at most seq_len; 0: seq_len */
    int threads;               /* 0: OMP_NUM_THREADS, else the free cores (threads.c) */
    NormFn norm;               /* NULL: the norm the model was trained with */
    const char *logits_path;   /* NULL: do not write logits */
    const char *tokenize_text; /* --tokenize: print the ids of this text instead of generating */
    const char *tokenize_file; /* --tokenize-file: count the tokens of this file, time it */
    int json;                  /* --json: --tokenize or --compare print JSON */
    int profile;               /* --profile: time per operation class */
    int reference;             /* --reference: the plain forward pass, reference.c */
    const char *ppl_path;      /* --ppl FILE: perplexity mode */
    int compare;               /* --compare[=A,B]: compare mode */
    int info;                  /* --info: describe the model file */
    int trace_pos;             /* --trace POS: the position traced; -1: none */
    int repeat;       /* --repeat: timed rounds (--compare) or runs (--profile); 0: default */
    int summary_only; /* --summary: --compare's summary alone */
    NormFn compare_with[2];
    int serial_prompt; /* --prefill=serial: the prompt one position at a time, not in batches */
    int batch;         /* --batch: positions per prefill batch; 0: the model's default */
} Options;

#define NO_N_PREDICT (-2)

/* The options of argv, read in order: an argument with a leading '-' (other than "-" alone) is an
 * option, "-x VALUE", "--name=VALUE" or "--name VALUE"; the others are MODEL, then PROMPT. --help
 * and --version print and exit with status 0 where they stand. Dies (io.h) on an unknown option,
 * a bad value, or options that do not go together. */
Options options_parse(int argc, char **argv);

#endif
