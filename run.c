/* run: generate text from a LLaMA-style checkpoint.
 *
 *   ./run MODEL [PROMPT] [options]
 *
 * Loads the model and its tokenizer, feeds the prompt, then samples one token at a time and
 * streams the text to stdout; a summary goes to stderr (--logits also writes every position's
 * logits to a file, --profile adds the time per operation class). options.c holds the options.
 * The other modes: -m chat (a conversation in the model's chat template, user turns read from
 * stdin), --tokenize TEXT and --tokenize-file FILE run the tokenizer alone, and two measure the
 * norms: --ppl FILE (perplexity of a text) and --compare (the same prompt under two norms: texts,
 * next-token distributions, norm inputs, speed).
 *
 * This file holds the set-up (threads, the model's header, the tokenizer, the prompt, all checked
 * before the weights load) and main, which runs one mode. It leaves the command line (the
 * options, their help and their checks) to options.c, and each mode to its own file: generation
 * to generate.c, -m chat to chat.c, --ppl and --compare to compare.c, --tokenize to tokenize.c;
 * --info to info.c, --trace to trace.c, the sampler to sampler.c, and the error exit, stdout's
 * checks, escaping and text reading to io.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chat.h"
#include "compare.h"
#include "generate.h"
#include "info.h"
#include "io.h"
#include "load.h"
#include "model.h"
#include "norm.h"
#include "options.h"
#include "reference.h"
#include "sampler.h"
#include "state.h"
#include "threads.h"
#include "tokenize.h"
#include "tokenizer.h"
#include "trace.h"

/* ----------------------------------------------------------------------------
 * Set-up: the thread count, then the input files found and checked before the weights load */

/* Dies when OMP_NUM_THREADS asks for more threads than --threads allows: libgomp starts them all
 * (100000 overflowed its stack in the first parallel region). Its first level is the one read;
 * a value libgomp cannot parse (0, "abc") it reports itself and replaces with the default. */
static void require_env_threads(void) {
    const char *env = getenv("OMP_NUM_THREADS");
    if (env && omp_get_max_threads() > 1024)
        die("OMP_NUM_THREADS=%s is more than 1024 threads (give --threads=N, 1..1024)", env);
}

/* Whether OMP_NUM_THREADS starts with a thread count libgomp takes, a positive integer. Empty, 0
 * or not a number, libgomp warns and would run on every core: run's own default applies then. */
static int env_threads_given(void) {
    const char *env = getenv("OMP_NUM_THREADS");
    if (!env) return 0;
    char *end;
    long n = strtol(env, &end, 10);
    return end != env && n > 0;
}

/* Dies with err, the loader's message about `path` given as the model (as_model 1) or as the
 * tokenizer (0); but when the file is a regular file that loads as the other kind, says that
 * instead: the two were given the wrong way round. */
static void die_loading(const char *path, int as_model, const char *err) {
    struct stat st;
    char other_err[1024];
    Tokenizer t;
    Config c;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
        if (as_model && tokenizer_load(&t, path, other_err, sizeof(other_err)) == 0)
            die("%s looks like a tokenizer file, not a model (the model comes first; give the "
                "tokenizer with -z)",
                path);
        if (!as_model && model_read_config(&c, path, other_err, sizeof(other_err)) == 0)
            die("%s looks like a model file, not a tokenizer (-z takes a tokenizer file such as "
                "tok512.bin)",
                path);
    }
    die("%s", err);
}

/* Finds the tokenizer beside the model: tok<vocab_size>.bin, then tokenizer.bin. */
static void find_tokenizer(const char *model_path, int vocab_size, char *out, size_t outlen) {
    const char *slash = strrchr(model_path, '/');
    int dir_len = slash ? (int)(slash - model_path + 1) : 0;
    if (dir_len > 1000) die("the model's folder name is too long to look beside it; use -z");
    char tried[2][1024];
    snprintf(tried[0], sizeof(tried[0]), "%.*stok%d.bin", dir_len, model_path, vocab_size);
    snprintf(tried[1], sizeof(tried[1]), "%.*stokenizer.bin", dir_len, model_path);
    for (int i = 0; i < 2; i++) {
        if (access(tried[i], R_OK) == 0) {
            snprintf(out, outlen, "%s", tried[i]);
            return;
        }
    }
    die("no tokenizer found for vocab_size %d: tried %s and %s (give one with -z)", vocab_size,
        tried[0], tried[1]);
}

/* The prompt the options give (the caller frees): -i's or PROMPT's text; the file of -f, or
 * stdin for "-", with one final newline dropped, as llama.cpp's -f does (a file's last line ends
 * in one); "" when there is none. Dies as read_text does. */
static char *read_prompt(const Options *o) {
    char *text = !o->prompt_file                    ? strdup(o->prompt ? o->prompt : "")
                 : strcmp(o->prompt_file, "-") == 0 ? read_stdin_text()
                                                    : read_text(o->prompt_file);
    if (!text) die("out of memory for the prompt");
    size_t len = strlen(text);
    if (o->prompt_file && len > 0 && text[len - 1] == '\n') text[len - 1] = '\0';
    return text;
}

/* Dies when the --logits file `logits_path` is the file at `path` (same device and inode), the
 * model or the tokenizer: opening it for writing would empty a file run reads (the model stays
 * mapped, and reading a truncated map faults). */
static void refuse_logits_over(const char *logits_path, const char *path, const char *what) {
    struct stat a, b;
    if (stat(logits_path, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino)
        die("--logits file %s is the %s; writing it would destroy it", logits_path, what);
}

/* The prompt's ids, BOS first when the vocabulary adds one (*n_prompt of them; the caller
 * frees). Dies on a prompt longer than the model's seq_len or than -n (steps), and on no ids. */
static int *encode_prompt(const Vocab *v, const char *prompt, const Config *c, int steps,
                          int *n_prompt) {
    int *ids = malloc(vocab_max_ids(strlen(prompt)) * sizeof(int));
    if (!ids) die("out of memory for the prompt");
    long n = vocab_encode(v, prompt, VOCAB_ADD_BOS, ids);
    if (n < 0) die("out of memory for the prompt");
    if (n == 0) die("the prompt is empty and the vocabulary adds no BOS: give a prompt");
    if (n > c->seq_len)
        die("the prompt is %ld tokens, longer than the model's seq_len %d", n, c->seq_len);
    if (n > steps)
        die("the prompt is %ld tokens, more than -n %d (which counts the prompt tokens)", n, steps);
    *n_prompt = (int)n;
    return ids;
}

/* Dies unless the tokenizer (read from path) has the model's vocab_size pieces. */
static void require_vocab(const Tokenizer *t, const char *path, const Config *c) {
    if (t->vocab_size != c->vocab_size)
        die("%s has %d pieces but the model's vocab_size is %d", path, t->vocab_size,
            c->vocab_size);
}

/* The end of a mode: what main allocated freed, everything written to stdout checked. Returns
 * main's status, 0. */
static int finish(char *prompt, int *prompt_tokens, Vocab *v, Model *m) {
    free(prompt_tokens);
    free(prompt);
    vocab_free(v);
    model_free(m);
    finish_stdout();
    return 0;
}

/* Dies unless the tokenizer file at `path` (-z) holds the vocabulary the model file carries,
 * `own`: the same pieces with the same scores. */
static void require_same_vocab(const Tokenizer *own, const char *path, const char *model_path) {
    char err[1024];
    Tokenizer given;
    if (tokenizer_load(&given, path, err, sizeof(err)) != 0) die_loading(path, 0, err);
    int id = tokenizer_first_difference(&given, own);
    int n_given = given.vocab_size;
    tokenizer_free(&given);
    if (id >= 0 && n_given != own->vocab_size)
        die("-z %s has %d pieces but %s carries a vocabulary of %d (leave out -z to use it)", path,
            n_given, model_path, own->vocab_size);
    if (id >= 0)
        die("-z %s contradicts the vocabulary %s carries at piece %d (leave out -z to use it)",
            path, model_path, id);
}

/* The vocabulary into v: the model file's own when it carries one (a -z must then hold the
 * same), else -z's tokenizer file or one found beside the model (found: room for its path).
 * Returns the path the vocabulary came from. */
static const char *load_vocab(const Options *o, const Config *header, Vocab *v, char found[1024]) {
    char err[1024];
    int rc = model_read_vocabulary(v, o->model_path, err, sizeof(err));
    if (rc < 0) die("%s", err);
    if (rc == 0 && o->tokenizer_path && v->kind == VOCAB_BPE)
        die("-z %s: %s carries a byte-level BPE vocabulary of its own (leave out -z)",
            o->tokenizer_path, o->model_path);
    if (rc == 0) {
        if (o->tokenizer_path) require_same_vocab(&v->sp, o->tokenizer_path, o->model_path);
        return o->model_path;
    }
    Tokenizer *t = &v->sp;
    *v = (Vocab){.kind = VOCAB_SENTENCEPIECE};
    const char *path = o->tokenizer_path;
    if (!path) {
        find_tokenizer(o->model_path, header->vocab_size, found, 1024);
        path = found;
    }
    if (tokenizer_load(t, path, err, sizeof(err)) != 0) die_loading(path, 0, err);
    require_vocab(t, path, header);
    return path;
}

/* ----------------------------------------------------------------------------
 * main: every check, then one mode */

int main(int argc, char **argv) {
    /* a closed stdout would let the first file opened take its descriptor, and the text go there */
    if (fcntl(STDOUT_FILENO, F_GETFD) == -1) die("cannot write to stdout: %s", strerror(errno));
    signal(SIGPIPE, SIG_IGN); /* a closed pipe shows as EPIPE (see stdout_reader_gone) */
    Options o = options_parse(argc, argv);
    if (o.threads > 0)
        omp_set_num_threads(o.threads);
    else if (env_threads_given())
        require_env_threads();
    else /* before the first parallel region: this is still the process's one thread */
        omp_set_num_threads(threads_default(omp_get_num_procs(), threads_busy_elsewhere()));
    signal(SIGXFSZ, SIG_IGN); /* past a file size limit, writes fail (EFBIG) with an error line */
    char *prompt = read_prompt(&o);
    require_utf8("the prompt", prompt, prompt);

    /* a GGUF's byte-level BPE vocabulary tokenizes alone (vocab.h) */
    if ((o.tokenize_text || o.tokenize_file) &&
        run_tokenize_gguf(o.model_path, o.tokenize_text, o.tokenize_file, o.json) == 0) {
        free(prompt);
        finish_stdout();
        return 0;
    }
    /* the header first: --tokenize and the checks of the tokenizer, the prompt and the --ppl text
     * need no weights, whose load takes seconds for a large model */
    char err[1024];
    Config header;
    if (model_read_config(&header, o.model_path, err, sizeof(err)) != 0)
        die_loading(o.model_path, 1, err);
    /* -c: the positions the kv cache holds (the context), at most seq_len */
    int seq_len = header.seq_len, ctx = o.ctx_size && o.ctx_size < seq_len ? o.ctx_size : seq_len;
    if (o.ctx_size > seq_len)
        fprintf(stderr, "run: -c %d is more than seq_len %d; the context is %d positions\n",
                o.ctx_size, seq_len, seq_len);
    header.seq_len = ctx;
    int steps_given = o.steps != 0; /* -n given: clamping it to seq_len is worth a notice */
    if (!o.steps) o.steps = o.chat ? ctx : 256;     /* no -n: 256, a chat the context */
    if (o.n_predict != NO_N_PREDICT) o.steps = ctx; /* counted from the prompt's end below */
    char found[1024];
    Vocab vocab;
    const char *tokenizer_path = load_vocab(&o, &header, &vocab, found);
    if (o.tokenize_text || o.tokenize_file) {
        run_tokenize(&vocab, o.tokenize_text, o.tokenize_file, o.json);
        vocab_free(&vocab);
        free(prompt);
        finish_stdout();
        return 0;
    }
    int n_prompt = 0, n_text = 0;
    /* a chat's first turn is checked against the context as it is fed */
    int *prompt_tokens =
        o.ppl_path || o.chat ? NULL : encode_prompt(&vocab, prompt, &header, o.steps, &n_prompt);
    int *text_tokens = o.ppl_path ? encode_ppl_text(&vocab, o.ppl_path, &n_text) : NULL;
    char *chat_template = NULL; /* the one the model names */
    if (o.chat && model_read_chat_template(&chat_template, o.model_path, err, sizeof(err)) < 0)
        die("%s", err);
    if (o.logits_path) {
        refuse_logits_over(o.logits_path, o.model_path, "model file");
        refuse_logits_over(o.logits_path, tokenizer_path, "tokenizer file");
    }

    Model model;
    if (model_load(&model, o.model_path, err, sizeof(err)) != 0) die("%s", err);
    const Config *c = &model.config;
    if (c->vocab_size != header.vocab_size || c->seq_len != seq_len) /* the checks above */
        die("%s: the file changed while it was read", o.model_path);
    if (o.info) {
        InfoRequest request = {o.model_path, tokenizer_path, ctx, o.json};
        print_info(&model, &vocab, &request);
        return finish(prompt, prompt_tokens, &vocab, &model);
    }
    for (int k = 0; k < 2; k++) { /* the norms asked for, by --norm or --compare */
        NormFn asked = o.compare ? o.compare_with[k] : o.norm;
        if (asked && model_check_norm(&model, asked, err, sizeof(err)) != 0)
            die("%s: %s", o.model_path, err);
    }
    model.config.seq_len = ctx; /* the kv cache's layout (model.h) takes the stride from it */
    if (o.norm) model_set_norm(&model, o.norm);
    if (o.trace_pos >= 0) {
        if (o.trace_pos >= n_prompt)
            die("--trace %d: the prompt has %d token%s, positions 0..%d (BOS is position 0)",
                o.trace_pos, n_prompt, plural(n_prompt), n_prompt - 1);
        TraceRequest request = {prompt_tokens, n_prompt, o.trace_pos, o.json};
        run_trace(&model, &vocab, &request);
        return finish(prompt, prompt_tokens, &vocab, &model);
    }
    if (o.reference) model.forward = reference_forward;
    if (o.batch && model_set_batch(&model, o.batch, err, sizeof(err)) != 0) die("--batch: %s", err);
    LogitsOut logits_out = {NULL, o.logits_path};
    if (o.logits_path && !(logits_out.file = fopen(o.logits_path, "wb")))
        die("cannot open --logits file %s: %s", o.logits_path, strerror(errno));
    if (o.logits_path) remove_on_error(o.logits_path, logits_out.file);

    /* notices after every check, so that an error is the only line */
    if (model.converted[0])
        fprintf(stderr, "run: %s: converted at load: %s (not the file's values exactly)\n",
                o.model_path, model.converted);
    char notice[256];
    if (model_unread_norm_parameters(&model, notice, sizeof(notice)))
        fprintf(stderr, "run: %s\n", notice);
    if (o.ppl_path) {
        PerplexityRequest request = {o.ppl_path, o.profile, o.json};
        run_perplexity(&model, text_tokens, n_text, &request);
        free(text_tokens);
        return finish(prompt, prompt_tokens, &vocab, &model);
    }
    if (o.n_predict != NO_N_PREDICT) /* the prompt's last position predicts the first token */
        o.steps = o.n_predict < 0 || o.n_predict > ctx - (n_prompt - 1)
                      ? ctx
                      : n_prompt - 1 + o.n_predict;
    if (o.steps > c->seq_len) {
        if (steps_given)
            fprintf(stderr, "run: -n %d is more than %s %d; running %d position%s\n", o.steps,
                    ctx < seq_len ? "-c" : "seq_len", c->seq_len, c->seq_len, plural(c->seq_len));
        o.steps = c->seq_len;
    }

    SamplerSettings settings = {
        .temperature = o.temperature,
        .topp = o.topp,
        .top_k = o.top_k,
        .min_p = o.min_p,
        .repeat_penalty = o.repeat_penalty,
        .repeat_last_n = o.repeat_last_n < 0 || o.repeat_last_n > ctx ? ctx : o.repeat_last_n,
        .stop_at_eos = !o.ignore_eos,
    };
    Sampler sampler;
    if (sampler_init(&sampler, c->vocab_size, &settings,
                     o.seed ? (unsigned long long)o.seed : clock_seed()) != 0)
        die("out of memory for the sampler");

    if (o.compare) {
        CompareRequest request = {.prompt = prompt_tokens,
                                  .n_prompt = n_prompt,
                                  .steps = o.steps,
                                  .norms = {o.compare_with[0], o.compare_with[1]},
                                  .json = o.json,
                                  .rounds = o.repeat,
                                  .summary_only = o.summary_only,
                                  .model_path = o.model_path};
        run_compare(&model, &vocab, &sampler, &request);
    } else if (o.chat) {
        ChatRequest request = {.system_prompt = o.system_prompt,
                               .first_turn = prompt,
                               .steps = o.steps,
                               .model_template = chat_template,
                               .template_override = o.chat_template};
        run_chat(&model, &vocab, &sampler, &request);
    } else {
        GenerateRequest request = {.prompt = prompt_tokens,
                                   .n_prompt = n_prompt,
                                   .steps = o.steps,
                                   .batch_prompt = !o.serial_prompt,
                                   .vocab = &vocab,
                                   .print = 1,
                                   .logits_out = o.logits_path ? &logits_out : NULL,
                                   .profile_runs = o.profile ? (o.repeat ? o.repeat : 1) : 0};
        run_generation(&model, &sampler, &request);
    }

    sampler_free(&sampler);
    free(chat_template);
    return finish(prompt, prompt_tokens, &vocab, &model);
}
