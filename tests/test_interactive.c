/* End to end: the EOS stop, prompts from files and stdin (-f, -i -), the seed in the summary,
 * --version and --help, and -m chat with scripted stdin. Chat replies are checked against
 * generation's text for the same tokens, and against greedy decoding written here over model.c's
 * forward pass for a whole transcript fed from position 0; Ctrl-C (SIGINT sent by the test) in
 * generation and in a chat, and the stop reason the summary gives. */
#define _GNU_SOURCE /* F_SETPIPE_SZ */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "load.h"
#include "model.h"
#include "sampler.h"
#include "tokenizer.h"

#define MODEL     "models/stories260K.bin"
#define TOKENIZER "models/tok512.bin"

/* ----------------------------------------------------------------------------
 * The EOS stop */

/* stories260K with EOS's embedding row (shared with the classifier) set to BOS's times 1.01:
 * where BOS was the likeliest token with a positive logit (a story's end), EOS is now, so that
 * greedy replies end at EOS (stories260K itself never gives it 1e-8). Written into the scratch
 * directory. */
static char *write_eos_model(void) {
    size_t n;
    char *data = read_file(MODEL, &n);
    cr_assert_not_null(data);
    float *embedding = (float *)(data + 28); /* (vocab_size 512, dim 64) after the header */
    for (int i = 0; i < 64; i++)
        embedding[TOKEN_EOS * 64 + i] = embedding[TOKEN_BOS * 64 + i] * 1.01f;
    char *path = scratch_path("eos.bin");
    cr_assert_eq(write_file(path, data, n), 0);
    free(data);
    return path;
}

/* Generation's continuation of `prompt` (-t 0 -n steps): its stdout without the echoed prompt and
 * the final newline, leading spaces dropped as chat drops them (malloc'd). */
static char *continuation(const char *model, const char *prompt, const char *steps,
                          const char *extra) {
    RunResult r = run_program((const char *[]){model, "-z", TOKENIZER, "-t", "0", "-n", steps, "-i",
                                               prompt, extra, NULL});
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    size_t len = strlen(prompt), out_len = strlen(r.out);
    cr_assert(strncmp(r.out, prompt, len) == 0, "the prompt is echoed: %s", r.out);
    cr_assert(out_len > len && r.out[out_len - 1] == '\n', "%s", r.out);
    r.out[out_len - 1] = '\0';
    const char *text = r.out + len;
    char *copy = strdup(text + strspn(text, " "));
    result_free(&r);
    return copy;
}

Test(run, eos_ends_generation_unless_ignore_eos) {
    /* the EOS model's greedy story ends at EOS; --ignore-eos (llama2.c's rule) shows the EOS and
     * goes on */
    make_scratch();
    char *model = write_eos_model();
    const char *prompt = "Once upon a time";
    char *stopped = continuation(model, prompt, "512", NULL);
    char *full = continuation(model, prompt, "512", "--ignore-eos");
    char expected[8192];
    snprintf(expected, sizeof(expected), "%s\n</s>\n", stopped);
    cr_assert(strncmp(full, expected, strlen(expected)) == 0, "'%s' does not start with '%s'", full,
              expected);
    cr_assert_gt(strlen(full), strlen(expected), "it goes on after the EOS");
    free(stopped);
    free(full);
    RunResult r = run_program(
        (const char *[]){model, "-z", TOKENIZER, "-t", "0", "-n", "512", "Once upon a time", NULL});
    cr_assert(strstr(r.err, ", stop EOS\n"), "%s", r.err);
    result_free(&r);
}

/* The summary's stop reason: the steps run (-n), the context full (seq_len, or -c), BOS
 * (stories260K's greedy story ends at position 346, docs/USAGE.md); EOS is above, Ctrl-C and a
 * chat's end below. */
Test(run, the_summary_says_why_generation_stopped) {
    const struct {
        const char *args[6];
        const char *stop;
    } cases[] = {
        {{"-n", "20"}, ", stop -n reached\n"},
        {{"--n-predict", "3"}, ", stop -n reached\n"},
        {{"-c", "30"}, ", stop context full\n"},
        {{"-n", "40", "--ignore-eos", "-c", "40"}, ", stop context full\n"},
        {{"-n", "512"}, ", stop BOS\n"},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        const char *args[12] = {MODEL, "-t", "0", "-i", "Once upon a time"};
        for (int i = 0; i < 6 && cases[k].args[i]; i++) args[5 + i] = cases[k].args[i];
        RunResult r = run_program(args);
        cr_assert_eq(r.exit_code, 0, "%s", r.err);
        cr_assert(strstr(r.err, cases[k].stop), "case %zu: '%s' not in %s", k, cases[k].stop,
                  r.err);
        result_free(&r);
    }
}

/* ----------------------------------------------------------------------------
 * Ctrl-C: the test sends SIGINT at a point it controls. stdout is a pipe the test has shrunk to
 * one page and filled but for `room` bytes, so that run blocks writing the text there, mid-way;
 * the signal is sent then, and the pipe drained. */

typedef struct {
    pid_t pid;
    int in, out;      /* the test's ends of run's stdin and stdout */
    int out_writer;   /* the test's copy of stdout's writing end, to fill the pipe */
    char err[64];     /* run's stderr, a file */
    size_t filler;    /* bytes the test wrote into the pipe first, not yet read back */
    char text[16384]; /* what run wrote to stdout so far, the filler left out */
    size_t len;
} Piped;

enum { PIPE_PAGE = 4096 };

/* Fills the (drained) pipe but for room bytes. */
static void piped_fill(Piped *p, size_t room) {
    static char filler[PIPE_PAGE];
    memset(filler, '#', sizeof(filler));
    cr_assert_eq(write(p->out_writer, filler, PIPE_PAGE - room), (ssize_t)(PIPE_PAGE - room));
    p->filler += PIPE_PAGE - room;
}

static void piped_start(Piped *p, const char *const *args) {
    int in[2], out[2];
    cr_assert_eq(pipe(in), 0);
    cr_assert_eq(pipe(out), 0);
    cr_assert_eq(fcntl(out[1], F_SETPIPE_SZ, PIPE_PAGE), PIPE_PAGE);
    snprintf(p->err, sizeof(p->err), "/tmp/normllama-err-XXXXXX");
    int err_fd = mkstemp(p->err);
    const char *argv[32] = {getenv("NORMLLAMA_RUN") ? getenv("NORMLLAMA_RUN") : "./run"};
    for (int i = 0; args[i]; i++) argv[i + 1] = args[i];
    p->pid = fork();
    if (p->pid == 0) {
        dup2(in[0], STDIN_FILENO);
        dup2(out[1], STDOUT_FILENO);
        dup2(err_fd, STDERR_FILENO);
        close(in[0]), close(in[1]), close(out[0]), close(out[1]), close(err_fd);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(in[0]), close(err_fd);
    p->in = in[1], p->out = out[0], p->out_writer = out[1];
    p->filler = p->len = 0;
}

/* Reads what stdout holds now (without blocking; waiting up to timeout_ms for the first byte)
 * into p->text, the filler dropped; 0 at its end. */
static int piped_read(Piped *p, int timeout_ms) {
    struct pollfd fd = {p->out, POLLIN, 0};
    while (poll(&fd, 1, timeout_ms) == 1) {
        char buf[4096];
        ssize_t n = read(p->out, buf, sizeof(buf));
        if (n <= 0) return 0;
        size_t skip = (size_t)n < p->filler ? (size_t)n : p->filler, keep = n - skip;
        p->filler -= skip;
        cr_assert_lt(p->len + keep, sizeof(p->text));
        memcpy(p->text + p->len, buf + skip, keep);
        p->len += keep;
        p->text[p->len] = '\0';
        timeout_ms = 0;
    }
    return 1;
}

/* Waits (up to 60 s) until `ready` holds for p, checking every millisecond. */
static void wait_until(Piped *p, int (*ready)(Piped *p), const char *what) {
    for (int i = 0; i < 60000 && !ready(p); i++) nanosleep(&(struct timespec){0, 1000000}, NULL);
    cr_assert(ready(p), "timed out waiting until %s; stdout so far: %s", what, p->text);
}

/* Whether run is in the system call whose /proc/PID/syscall line ("number arg0 ...") starts with
 * x86_64 or arm64 (the numbers of read and write differ). */
static int in_syscall(const Piped *p, const char *x86_64, const char *arm64) {
    char path[64], line[128] = "";
    snprintf(path, sizeof(path), "/proc/%d/syscall", (int)p->pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char *got = fgets(line, sizeof(line), f);
    fclose(f);
    return got &&
           (strncmp(line, x86_64, strlen(x86_64)) == 0 || strncmp(line, arm64, strlen(arm64)) == 0);
}

/* Whether run is blocked reading stdin (read of descriptor 0), what it wrote read meanwhile. */
static int reading_stdin(Piped *p) {
    piped_read(p, 0);
    return in_syscall(p, "0 0x0 ", "63 0x0 ");
}

/* Drains stdout to its end, waits for run and returns its exit status; stderr into err. */
static int piped_finish(Piped *p, char **err) {
    close(p->in);
    close(p->out_writer);
    while (piped_read(p, 60000)) continue;
    close(p->out);
    int status;
    waitpid(p->pid, &status, 0);
    *err = read_file(p->err, NULL);
    unlink(p->err);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Whether run is blocked writing its text: the pipe is full but for less than a piece (a write
 * that does not fit whole waits) and run is in write(1, ...). */
static int pipe_full(Piped *p) {
    int n = 0;
    ioctl(p->out, FIONREAD, &n);
    return n > PIPE_PAGE - 32 && in_syscall(p, "1 0x1 ", "64 0x1 ");
}

Test(run, ctrl_c_stops_generation_with_the_summary) {
    /* 100 bytes into the greedy story (--ignore-eos -n 512: longer than that) */
    const char *args[] = {MODEL, "-t", "0", "-n", "512", "-i", "Once upon a time", NULL};
    RunResult full = run_program(args);
    Piped p;
    piped_start(&p, args);
    piped_fill(&p, 100);
    wait_until(&p, pipe_full, "run blocks writing its text");
    kill(p.pid, SIGINT);
    char *err;
    int status = piped_finish(&p, &err);
    cr_assert_eq(status, 0, "%s", err);
    cr_assert(strstr(err, ", stop interrupted\n"), "%s", err);
    /* a prefix of the whole text, ended by a newline, of at least the 100 bytes written */
    cr_assert_geq(p.len, 100);
    cr_assert_lt(p.len, strlen(full.out), "stopped early: %s", p.text);
    cr_assert_eq(strncmp(p.text, full.out, p.len - 1), 0, "%s", p.text);
    cr_assert_eq(p.text[p.len - 1], '\n');
    free(err);
    result_free(&full);
}

Test(bad_input, ignore_eos_where_nothing_is_sampled) {
    expect_error((const char *[]){MODEL, "--ppl", "data/stories.txt", "--ignore-eos", NULL},
                 "--ignore-eos goes with generation and --compare");
    expect_error((const char *[]){MODEL, "--tokenize", "Hi", "--ignore-eos", NULL},
                 "--ignore-eos goes with generation and --compare");
}

/* ----------------------------------------------------------------------------
 * Prompts from a file (-f) and from stdin (-f -, -i -) */

Test(prompt, from_a_file_or_stdin_equals_the_argument) {
    make_scratch();
    char *path = scratch_path("prompt.txt");
    const char *text = "Once upon a time, Lily\n"; /* the final newline is dropped */
    cr_assert_eq(write_file(path, text, strlen(text)), 0);
    RunResult arg =
        run_program((const char *[]){MODEL, "-t", "0", "-n", "64", "Once upon a time, Lily", NULL});
    cr_assert_eq(arg.exit_code, 0, "stderr: %s", arg.err);
    const char *const ways[][2] = {{"-f", path}, {"-f", "-"}, {"-i", "-"}, {"-", NULL}};
    for (int k = 0; k < 4; k++) {
        RunResult r = run_program_input(
            (const char *[]){MODEL, "-t", "0", "-n", "64", ways[k][0], ways[k][1], NULL}, text,
            strlen(text));
        cr_assert_eq(r.exit_code, 0, "%s %s: %s", ways[k][0], ways[k][1], r.err);
        cr_assert_str_eq(r.out, arg.out, "%s %s", ways[k][0], ways[k][1]);
        result_free(&r);
    }
    result_free(&arg);
}

Test(prompt, longer_than_an_argument_can_be) {
    /* 70000 times " a", one token each: 140000 bytes, past the kernel's 128 KiB for one argument */
    make_scratch();
    size_t size = 140000;
    char *text = malloc(size + 1);
    for (size_t i = 0; i < size; i += 2) memcpy(text + i, " a", 2);
    char *path = scratch_path("long.txt");
    cr_assert_eq(write_file(path, text, size), 0);
    expect_error((const char *[]){MODEL, "-f", path, NULL},
                 "the prompt is 70001 tokens, longer than the model's seq_len 512");
    expect_error_input((const char *[]){MODEL, "-i", "-", NULL}, text, size,
                       "the prompt is 70001 tokens, longer than the model's seq_len 512");
    free(text);
}

Test(bad_input, prompt_files) {
    make_scratch();
    char *empty = scratch_path("empty.txt"), *bad = scratch_path("bad.txt");
    cr_assert_eq(write_file(empty, "", 0), 0);
    cr_assert_eq(write_file(bad, "caf\xc3 au lait", 12), 0);
    expect_error((const char *[]){MODEL, "-f", empty, NULL}, "empty.txt: the text file is empty");
    expect_error((const char *[]){MODEL, "-f", bad, NULL},
                 "bad.txt: not valid UTF-8 (byte 0xC3 at offset 3)");
    expect_error((const char *[]){MODEL, "-f", "/nonexistent/p.txt", NULL},
                 "/nonexistent/p.txt: cannot open");
    expect_error((const char *[]){MODEL, "-f", "models", NULL}, "models: not a regular file");
    expect_error_input((const char *[]){MODEL, "-f", "-", NULL}, "", 0, "stdin: the text is empty");
    expect_error_input((const char *[]){MODEL, "-i", "-", NULL}, "caf\xc3", 4,
                       "stdin: not valid UTF-8 (byte 0xC3 at offset 3)");
    expect_error_input((const char *[]){MODEL, "-i", "-", NULL}, "ab\0c", 4,
                       "stdin: the text contains a NUL byte at offset 2");
    expect_error((const char *[]){MODEL, "-i", "Once", "-f", empty, NULL},
                 "the prompt is given twice");
    expect_error((const char *[]){MODEL, "-f", empty, "Once", NULL}, "unexpected argument 'Once'");
    expect_error((const char *[]){MODEL, "--ppl", "data/stories.txt", "-f", empty, NULL},
                 "--ppl reads its text from FILE; drop the prompt");
}

/* ----------------------------------------------------------------------------
 * The seed, --version, --help */

/* The seed in a run's summary line. */
static unsigned long long summary_seed(const char *err) {
    const char *p = strstr(err, ", seed ");
    cr_assert_not_null(p, "no seed in: %s", err);
    return strtoull(p + 7, NULL, 10);
}

Test(run, the_summary_gives_the_seed_to_repeat_a_text) {
    const char *args[] = {MODEL, "-n", "48", "-s", "0", "Lily", NULL};
    RunResult a = run_program(args), b = run_program(args);
    cr_assert_eq(a.exit_code, 0, "stderr: %s", a.err);
    unsigned long long seed_a = summary_seed(a.err), seed_b = summary_seed(b.err);
    cr_assert_neq(seed_a, 0);
    cr_assert_neq(seed_a, seed_b, "two runs from the clock, within a second");
    char seed[32];
    snprintf(seed, sizeof(seed), "%llu", seed_a);
    args[4] = seed;
    RunResult c = run_program(args);
    cr_assert_eq(c.exit_code, 0, "stderr: %s", c.err);
    cr_assert_str_eq(c.out, a.out, "-s %s repeats the text", seed);
    cr_assert_eq(summary_seed(c.err), seed_a);
    result_free(&a);
    result_free(&b);
    result_free(&c);
}

Test(run, version) {
    RunResult r = run_program((const char *[]){"--version", NULL});
    cr_assert_eq(r.exit_code, 0);
    unsigned major, minor;
    char end;
    cr_assert_eq(sscanf(r.out, "normllama %u.%u%c", &major, &minor, &end), 3, "%s", r.out);
    cr_assert_eq(end, '\n', "%s", r.out);
    cr_assert_eq(count_lines(r.out), 1, "%s", r.out);
    result_free(&r);
}

Test(run, help_ends_with_examples) {
    RunResult r = run_program((const char *[]){"--help", NULL});
    cr_assert_eq(r.exit_code, 0);
    const char *examples = strstr(r.out, "\nexamples:\n");
    cr_assert_not_null(examples, "%s", r.out);
    int n = 0;
    for (const char *line = examples + 11; *line; line = strchr(line, '\n') + 1, n++)
        cr_assert(strncmp(line, "  run models/", 13) == 0, "not an example: %s", line);
    cr_assert(n >= 3 && n <= 5, "%d examples", n);
    cr_assert(strstr(r.out, "--ignore-eos"));
    result_free(&r);
}

/* ----------------------------------------------------------------------------
 * Chat (-m chat) */

#define SYSTEM "You tell stories."
#define TURN1  "Tell me a story about a cat."
#define TURN2  "What happened next?"

/* The Llama 2 chat template, as Meta's reference code writes a turn (spelled out here, not
 * taken from run.c). */
static char *templated(const char *system, const char *user) {
    static char text[2][1024];
    static int next;
    char *t = text[next++ % 2];
    if (system)
        snprintf(t, 1024, "[INST] <<SYS>>\n%s\n<</SYS>>\n\n%s [/INST]", system, user);
    else
        snprintf(t, 1024, "[INST] %s [/INST]", user);
    return t;
}

/* Runs a greedy chat on model with input on stdin; extra: more arguments (NULL-terminated) or
 * NULL. */
static RunResult chat(const char *model, const char *input, const char *const *extra) {
    const char *args[16] = {model, "-z", TOKENIZER, "-m", "chat", "-t", "0"};
    int n = 7;
    while (extra && *extra) args[n++] = *extra++;
    args[n] = NULL;
    return run_program_input(args, input, strlen(input));
}

/* The reply after the k-th "Assistant: " of a chat's stdout (k from 0), up to its newline
 * (static buffer). */
static const char *reply(const char *out, int k) {
    static char text[8192];
    const char *p = out;
    for (int i = 0; i <= k; i++) {
        p = strstr(p, "Assistant: ");
        cr_assert_not_null(p, "reply %d missing: %s", k, out);
        p += strlen("Assistant: ");
    }
    const char *end = strstr(p, "\nUser: ");
    size_t n = end ? (size_t)(end - p) : strlen(p) - 1;
    snprintf(text, sizeof(text), "%.*s", (int)n, p);
    return text;
}

/* ----------------------------------------------------------------------------
 * Greedy decoding over model.c, the reference for a reply after a whole transcript */

typedef struct {
    Model m;
    Tokenizer t;
    int ids[1024]; /* the transcript: turns and replies, as the kv cache should hold them */
    int n;
} Transcript;

static void transcript_open(Transcript *s, const char *model) {
    char err[512];
    cr_assert_eq(model_load(&s->m, model, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(tokenizer_load(&s->t, TOKENIZER, err, sizeof(err)), 0, "%s", err);
    s->n = 0;
}

static void transcript_close(Transcript *s) {
    model_free(&s->m);
    tokenizer_free(&s->t);
}

/* Appends BOS and the ids of text. */
static void add_turn(Transcript *s, const char *text) {
    s->n += tokenizer_encode(&s->t, text, 1, 0, s->ids + s->n);
}

/* Feeds the whole transcript from position 0, then appends greedy tokens until EOS or BOS
 * (returned, not appended), or one past the last position of the context (-1: the one predicted
 * there, not fed); the reply's text (printed pieces, leading spaces dropped) goes to
 * text[size]. */
static int greedy_reply(Transcript *s, char *text, size_t size) {
    const float *logits = NULL;
    for (int pos = 0; pos < s->n; pos++) logits = model_forward(&s->m, s->ids[pos], pos);
    int start = s->n;
    int next;
    while ((next = argmax(logits, s->m.config.vocab_size)) != TOKEN_EOS && next != TOKEN_BOS) {
        s->ids[s->n] = next;
        if (s->n++ == s->m.config.seq_len) {
            next = -1;
            break;
        }
        logits = model_forward(&s->m, next, s->n - 1);
    }
    text[0] = '\0';
    for (int i = start; i < s->n; i++) {
        const char *piece = tokenizer_decode(&s->t, s->ids[i - 1], s->ids[i]);
        if (tokenizer_piece_printed(piece)) strncat(text, piece, size - strlen(text) - 1);
    }
    memmove(text, text + strspn(text, " "), strlen(text) + 1 - strspn(text, " "));
    return next;
}

/* The number in the summary line after `label` ("generated tokens "). */
static int summary_count(const char *err, const char *label) {
    const char *p = strstr(err, label);
    cr_assert_not_null(p, "'%s' not in: %s", label, err);
    return atoi(p + strlen(label));
}

Test(chat, first_reply_continues_the_templated_prompt) {
    /* the first turn is BOS and the templated text, as generation encodes that text as a prompt
     * (and runs it through batched prefill, where chat feeds one position at a time) */
    const char *systems[] = {SYSTEM, NULL};
    char *replies[2];
    for (int k = 0; k < 2; k++) {
        const char *extra[] = {systems[k] ? "-y" : NULL, systems[k], NULL};
        RunResult r = chat(MODEL, TURN1 "\n", extra);
        cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
        replies[k] = continuation(MODEL, templated(systems[k], TURN1), "512", NULL);
        char expected[8192];
        snprintf(expected, sizeof(expected), "User: %s\nAssistant: %s\n", TURN1, replies[k]);
        cr_assert_str_eq(r.out, expected, "with -y: %d", !k);
        cr_assert_gt(strlen(replies[k]), 100, "a story: %s", replies[k]);
        result_free(&r);
    }
    cr_assert_str_neq(replies[0], replies[1], "-y changes the reply");
    free(replies[0]);
    free(replies[1]);
}

/* Two turns: the second reply must be what greedy decoding gives after the whole transcript,
 * fed from position 0: the kv cache kept the first turn and reply. With stories260K the first
 * reply ends at BOS (a story's end); with the EOS model at EOS, which the next turn feeds first,
 * closing the reply as Meta's template does. */
static void check_two_turns(const char *model, int ends_with) {
    RunResult r = chat(model, TURN1 "\n" TURN2 "\n", (const char *[]){"-y", SYSTEM, NULL});
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    Transcript s;
    transcript_open(&s, model);
    char text[8192];
    add_turn(&s, templated(SYSTEM, TURN1));
    int n_prompt = s.n;
    cr_assert_eq(greedy_reply(&s, text, sizeof(text)), ends_with, "the first reply's end");
    cr_assert_str_eq(reply(r.out, 0), text);
    int n_generated = s.n - n_prompt;
    if (ends_with == TOKEN_EOS) s.ids[s.n++] = TOKEN_EOS;
    int before = s.n;
    add_turn(&s, templated(NULL, TURN2));
    n_prompt += s.n - before + (ends_with == TOKEN_EOS);
    before = s.n;
    greedy_reply(&s, text, sizeof(text));
    cr_assert_str_eq(reply(r.out, 1), text, "the second reply");
    n_generated += s.n - before;
    cr_assert_eq(summary_count(r.err, "prompt tokens "), n_prompt, "%s", r.err);
    cr_assert_eq(summary_count(r.err, "generated tokens "), n_generated, "%s", r.err);
    transcript_close(&s);

    /* the test can fail: the second turn alone gets another reply */
    RunResult alone = chat(model, TURN2 "\n", NULL);
    cr_assert_eq(alone.exit_code, 0, "stderr: %s", alone.err);
    char *second = strdup(reply(r.out, 1));
    cr_assert_str_neq(reply(alone.out, 0), second);
    free(second);
    result_free(&alone);
    result_free(&r);
}

Test(chat, the_kv_cache_keeps_the_conversation) {
    check_two_turns(MODEL, TOKEN_BOS);
}

Test(chat, a_reply_ends_at_eos) {
    make_scratch();
    char *model = write_eos_model();
    check_two_turns(model, TOKEN_EOS);
    /* generation without the EOS stop shows the EOS (as its piece "\n</s>\n") where the reply
     * ended */
    RunResult r = chat(model, TURN1 "\n", NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    char *full = continuation(model, templated(NULL, TURN1), "512", "--ignore-eos");
    char expected[8192];
    snprintf(expected, sizeof(expected), "%s\n</s>\n", reply(r.out, 0));
    cr_assert(strncmp(full, expected, strlen(expected)) == 0, "'%s' does not start with '%s'", full,
              expected);
    free(full);
    result_free(&r);
}

Test(chat, says_when_the_context_is_full) {
    /* -n 40: the first turn (17 positions) fits, the reply reaches the last position; its last
     * token is shown, as generation -n 40 shows the one predicted at position 39 */
    RunResult r = chat(MODEL, TURN1 "\n" TURN2 "\n", (const char *[]){"-n", "40", NULL});
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    char *expected = continuation(MODEL, templated(NULL, TURN1), "40", NULL);
    cr_assert_str_eq(reply(r.out, 0), expected);
    cr_assert_null(strstr(r.out, TURN2), "the second turn is not read: %s", r.out);
    cr_assert(strstr(r.err, "run: the context is full: the reply reached the last position (40 "
                            "positions: -n 40); the chat ends\n"),
              "%s", r.err);
    cr_assert_eq(count_lines(r.err), 2, "the notice and the summary: %s", r.err);
    cr_assert(strstr(r.err, ", stop context full\n"), "%s", r.err);
    free(expected);
    result_free(&r);

    /* a turn that does not fit is not fed: -n 12 against BOS and 16 ids of "[INST] ... [/INST]" */
    Transcript s;
    transcript_open(&s, MODEL);
    add_turn(&s, templated(NULL, TURN1));
    char needle[128];
    snprintf(needle, sizeof(needle), "the turn needs %d positions, 12 are left", s.n);
    transcript_close(&s);
    r = chat(MODEL, TURN1 "\n", (const char *[]){"-n", "12", NULL});
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cr_assert_str_eq(r.out, "User: " TURN1 "\n");
    cr_assert(strstr(r.err, needle), "'%s' not in: %s", needle, r.err);
    cr_assert(strstr(r.err, "prompt tokens 0, generated tokens 0,"), "%s", r.err);
    result_free(&r);
}

Test(chat, ends_at_the_end_of_stdin) {
    RunResult r = chat(MODEL, "", NULL);
    cr_assert_eq(r.exit_code, 0, "stderr: %s", r.err);
    cr_assert_str_eq(r.out, "");
    cr_assert(strstr(r.err, "prompt tokens 0, generated tokens 0,"), "%s", r.err);
    cr_assert(strstr(r.err, ", stop end of input\n"), "%s", r.err);
    cr_assert_eq(count_lines(r.err), 1, "the summary alone: %s", r.err);
    result_free(&r);
    /* empty lines are skipped, a last line without its newline is a turn, and -i gives the
     * first turn as a line of stdin would */
    RunResult a = chat(MODEL, "\n\r\n" TURN1, NULL);
    RunResult b = chat(MODEL, "", (const char *[]){"-i", TURN1, NULL});
    RunResult c = chat(MODEL, TURN1 "\r\n", NULL);
    cr_assert_eq(a.exit_code, 0, "stderr: %s", a.err);
    cr_assert(strncmp(a.out, "User: " TURN1 "\nAssistant: ", 35) == 0, "%s", a.out);
    cr_assert_str_eq(a.out, b.out);
    cr_assert_str_eq(a.out, c.out);
    result_free(&a);
    result_free(&b);
    result_free(&c);
}

Test(chat, samples_as_seeded) {
    /* at -t 1 the replies follow the seed: equal seeds, equal chats; the summary gives it */
    const char *extra[] = {"-t", "1", "-s", "7", NULL};
    RunResult a = chat(MODEL, TURN1 "\n" TURN2 "\n", extra);
    RunResult b = chat(MODEL, TURN1 "\n" TURN2 "\n", extra);
    extra[3] = "8";
    RunResult c = chat(MODEL, TURN1 "\n" TURN2 "\n", extra);
    cr_assert_eq(a.exit_code, 0, "stderr: %s", a.err);
    cr_assert_str_eq(a.out, b.out);
    cr_assert_str_neq(a.out, c.out);
    cr_assert(strstr(a.err, ", seed 7, "), "%s", a.err);
    result_free(&a);
    result_free(&b);
    result_free(&c);
}

Test(bad_input, chat) {
    const char *input = "caf\xc3\n";
    expect_error_input((const char *[]){MODEL, "-m", "chat", NULL}, input, strlen(input),
                       "stdin line 1: not valid UTF-8 (byte 0xC3 at offset 3)");
    expect_error_input((const char *[]){MODEL, "-m", "chat", NULL}, "\na\0b\n", 5,
                       "stdin line 2: a NUL byte at offset 1");
    expect_error((const char *[]){MODEL, "-m", "talk", NULL},
                 "unknown -m 'talk' (expected generate or chat)");
    expect_error((const char *[]){MODEL, "-y", SYSTEM, NULL}, "-y (the system prompt) goes with");
    expect_error((const char *[]){MODEL, "-m", "chat", "--ignore-eos", NULL},
                 "--ignore-eos goes with generation and --compare, not with -m chat");
    expect_error((const char *[]){MODEL, "-m", "chat", "-i", "-", NULL},
                 "-m chat reads its turns from stdin");
    expect_error((const char *[]){MODEL, "-m", "chat", "--compare", NULL},
                 "-m chat is a mode of its own");
    expect_error((const char *[]){MODEL, "-m", "chat", "--logits", "/tmp/x", NULL},
                 "--logits goes with -m generate, not with -m chat");
    expect_error((const char *[]){MODEL, "-m", "chat", "-b", "8", NULL},
                 "--batch goes with -m generate");
    expect_error((const char *[]){MODEL, "-m", "chat", "--profile", NULL},
                 "--profile goes with -m generate");
}

/* Sends turn (a line) to the chat in p and a Ctrl-C once run is blocked writing 40 bytes into
 * its reply; returns the reply's text once run waits for the next turn (a static buffer). */
static const char *interrupted_reply(Piped *p, const char *turn) {
    char head[256];
    snprintf(head, sizeof(head), "User: %s\nAssistant: ", turn);
    size_t start = p->len;
    piped_fill(p, strlen(head) + 40);
    cr_assert_eq(write(p->in, turn, strlen(turn)), (ssize_t)strlen(turn));
    cr_assert_eq(write(p->in, "\n", 1), 1);
    wait_until(p, pipe_full, "run blocks 40 bytes into the reply");
    kill(p->pid, SIGINT);
    wait_until(p, reading_stdin, "run, the reply stopped, waits for the next turn");
    cr_assert_eq(strncmp(p->text + start, head, strlen(head)), 0, "%s", p->text);
    static char text[4096];
    snprintf(text, sizeof(text), "%s", p->text + start + strlen(head));
    return text;
}

Test(chat, ctrl_c_stops_a_reply_and_a_second_at_the_prompt_ends_the_chat) {
    const char *args[] = {MODEL, "-z", TOKENIZER, "-m", "chat", "-t", "0", NULL};
    RunResult whole = chat(MODEL, TURN1 "\n", NULL);
    const char *full = reply(whole.out, 0);
    cr_assert_gt(strlen(full), 60, "a reply long enough to stop 40 bytes in: %s", full);
    Piped p;
    piped_start(&p, args);
    /* the reply stopped early: a prefix of the whole one, then the newline ending it */
    const char *stopped = interrupted_reply(&p, TURN1);
    size_t n = strlen(stopped) - 1;
    cr_assert_eq(stopped[n], '\n', "%s", p.text);
    cr_assert(n >= 40 && n < strlen(full), "%zu bytes of %zu: %s", n, strlen(full), p.text);
    cr_assert_eq(strncmp(stopped, full, n), 0, "'%s' starts '%s'", full, stopped);
    /* the chat goes on: the next turn gets a reply (stopped too: stories260K's run to the
     * context's end); then a Ctrl-C at the prompt ends the chat with the summary */
    stopped = interrupted_reply(&p, TURN2);
    cr_assert_geq(strlen(stopped), 41, "%s", p.text);
    cr_assert_eq(stopped[strlen(stopped) - 1], '\n', "%s", p.text);
    kill(p.pid, SIGINT);
    char *err;
    cr_assert_eq(piped_finish(&p, &err), 0, "%s", err);
    cr_assert(strstr(err, ", stop interrupted\n"), "%s", err);
    cr_assert_eq(count_lines(err), 1, "the summary alone: %s", err);
    free(err);
    result_free(&whole);
}
