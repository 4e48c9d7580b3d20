/* -m chat (chat.h): the conversation's turns read, templated, fed and answered, one kv cache
 * for them all. Generation's pieces (the summary, the finite-logit check) are generate.c's.
 */
#include "chat.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "generate.h"
#include "io.h"
#include "norm.h"
#include "profile.h"

/* A conversation so far: the kv cache holds its positions 0..pos-1, every turn and reply. */
typedef struct {
    Model *m;
    const Tokenizer *t;
    Sampler *sampler;
    int steps;        /* positions the conversation may fill: -n, at most seq_len */
    int pos;          /* positions fed */
    int ended_by_eos; /* the last reply ended at EOS, which the next turn feeds first */
    int interactive;  /* stdin is a terminal: "User: " is shown before reading, not after */
    int line_no;      /* lines read from stdin */
    Summary summary;  /* counts and times of all turns */
} Chat;

/* The text of a user turn in the Llama 2 chat template (malloc'd), as Meta's reference code and
 * llama2.c write it: "[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST]" for the first turn
 * when there is a system prompt, else "[INST] {user} [/INST]". */
static char *chat_turn_text(const char *system, const char *user) {
    size_t len = strlen(user) + (system ? strlen(system) : 0) + 64;
    char *text = malloc(len);
    if (!text) die("out of memory for a chat turn");
    if (system && system[0])
        snprintf(text, len, "[INST] <<SYS>>\n%s\n<</SYS>>\n\n%s [/INST]", system, user);
    else
        snprintf(text, len, "[INST] %s [/INST]", user);
    return text;
}

/* Reads one line of stdin into *line (getline's buffer, *cap bytes) without its "\n" or "\r\n",
 * after showing `marker` on a terminal. Returns 0 at the end of stdin, or at a Ctrl-C (before or
 * during the read), which ends the chat (summary.stop says which). Dies on a read error, or a line
 * with a NUL byte or not valid UTF-8 (named by its number). */
static int read_line(Chat *c, const char *marker, char **line, size_t *cap) {
    if (c->interactive) {
        fputs(marker, stdout);
        finish_stdout();
    }
    errno = 0;
    catch_interrupt(0); /* a Ctrl-C now ends the wait for a line */
    ssize_t n = interrupted() ? -1 : getline(line, cap, stdin);
    catch_interrupt(1);
    if (n < 0) {
        if (interrupted()) {
            clearerr(stdin);
            c->summary.stop = STOP_INTERRUPTED;
        } else if (ferror(stdin)) {
            die("stdin: cannot read: %s", strerror(errno));
        }
        if (c->interactive) putchar('\n'); /* the shell's prompt on a line of its own */
        return 0;
    }
    c->line_no++;
    if (n > 0 && (*line)[n - 1] == '\n') (*line)[--n] = '\0';
    if (n > 0 && (*line)[n - 1] == '\r') (*line)[--n] = '\0';
    char what[64];
    snprintf(what, sizeof(what), "stdin line %d", c->line_no);
    if (strlen(*line) != (size_t)n) die("%s: a NUL byte at offset %zu", what, strlen(*line));
    require_utf8(what, *line, NULL);
    return 1;
}

/* Reads the next user turn, skipping empty lines; 0 at the end of stdin. A turn read from a pipe
 * or file is echoed after "User: ", so that stdout is the whole transcript. */
static int read_turn(Chat *c, char **line, size_t *cap) {
    do {
        if (!read_line(c, "User: ", line, cap)) return 0;
    } while ((*line)[0] == '\0');
    if (!c->interactive) printf("User: %s\n", *line);
    return 1;
}

/* The one line that ends a full conversation: stdout's text first, then the notice on stderr. */
static void say_context_full(Chat *c, const char *what) {
    int seq_len = c->m->config.seq_len;
    c->summary.stop = STOP_CONTEXT;
    finish_stdout();
    fprintf(stderr, "run: the context is full: %s (%d positions: %s %d); the chat ends\n", what,
            c->steps, c->steps < seq_len ? "-n" : "seq_len",
            c->steps < seq_len ? c->steps : seq_len);
}

/* Feeds a user turn (system: the system prompt for the first turn, or NULL): the EOS that ended
 * the last reply (closing it, as Meta's template does), then BOS and the templated text. Returns
 * the logits of its last position, or NULL, saying so, when the turn does not fit in the
 * positions left. */
static float *feed_turn(Chat *c, const char *system, const char *user) {
    char *text = chat_turn_text(system, user);
    int *ids = malloc((strlen(text) + 4) * sizeof(int));
    if (!ids) die("out of memory for a chat turn");
    int n = c->ended_by_eos;
    ids[0] = TOKEN_EOS; /* kept only when the last reply ended at EOS */
    n += tokenizer_encode(c->t, text, 1, 0, ids + n);
    free(text);
    float *logits = NULL;
    if (c->pos + n > c->steps) {
        char what[128];
        snprintf(what, sizeof(what), "the turn needs %d positions, %d are left", n,
                 c->steps - c->pos);
        say_context_full(c, what);
    } else {
        double start = now_seconds();
        for (int i = 0; i < n; i++, c->pos++) {
            sampler_accept(c->sampler, ids[i]);
            logits = model_forward(c->m, ids[i], c->pos);
        }
        c->summary.prompt_seconds += now_seconds() - start;
        c->summary.n_prompt += n;
        require_finite(logits, c->m->config.vocab_size, c->pos - 1);
    }
    free(ids);
    return logits;
}

/* Samples the reply from `logits` (those of the turn's last position) and streams it after
 * "Assistant: " (its leading spaces dropped) until a token that ends_text, which is not fed, or a
 * Ctrl-C, after which the next turn starts with EOS as after a reply that ended there.
 * Returns 1, or 0, saying so, when the reply fills the last position: that token is shown, as
 * generation shows the one predicted at its last position. */
static int chat_reply(Chat *c, float *logits) {
    double start = now_seconds();
    /* prev: the reply is decoded as a text of its own, as after BOS */
    int vocab_size = c->m->config.vocab_size, prev = TOKEN_BOS, at_start = 1, done = 1;
    fputs("Assistant: ", stdout);
    for (;;) {
        int next = sample(c->sampler, logits);
        if (ends_text(c->sampler, next)) {
            c->ended_by_eos = next == TOKEN_EOS;
            break;
        }
        c->summary.n_generated++;
        const char *piece = tokenizer_decode(c->t, prev, next);
        if (at_start && tokenizer_piece_printed(piece)) {
            piece += strspn(piece, " ");
            at_start = piece[0] == '\0';
        }
        tokenizer_print_piece(piece);
        finish_stdout();
        if (interrupted()) { /* the reply stops; the chat goes on */
            c->ended_by_eos = 1;
            break;
        }
        if (c->pos == c->steps) {
            done = 0;
            break;
        }
        sampler_accept(c->sampler, next);
        logits = model_forward(c->m, next, c->pos);
        require_finite(logits, vocab_size, c->pos++);
        prev = next;
    }
    /* a Ctrl-C during the turn's feeding or the reply was for the reply, even one that came as it
     * ended by itself: not for the wait for the next turn, which it would end */
    clear_interrupt();
    putchar('\n');
    finish_stdout(); /* the reply whole before the next turn is waited for */
    c->summary.generation_seconds += now_seconds() - start;
    if (!done) say_context_full(c, "the reply reached the last position");
    return done;
}

void run_chat(Model *m, const Tokenizer *t, Sampler *sampler, const ChatRequest *req) {
    const char *first_turn = req->first_turn;
    Chat c = {.m = m, .t = t, .sampler = sampler, .steps = req->steps};
    c.interactive = isatty(STDIN_FILENO);
    c.summary.norm = norm_name(m->norm);
    c.summary.seed = sampler->seed;
    c.summary.stop = STOP_END_OF_INPUT;
    catch_interrupt(1);
    char *line = NULL, *system = NULL;
    size_t cap = 0;
    int more = 1;
    if (req->system_prompt) {
        system = strdup(req->system_prompt);
        if (!system) die("out of memory for the system prompt");
    } else if (c.interactive) {
        more = read_line(&c, "System prompt (optional): ", &line, &cap);
        system = line; /* the next read gets a buffer of its own */
        line = NULL, cap = 0;
    }
    if (more && first_turn[0]) {
        printf("User: %s\n", first_turn);
        float *logits = feed_turn(&c, system, first_turn);
        more = logits && chat_reply(&c, logits);
        free(system);
        system = NULL;
    }
    while (more && read_turn(&c, &line, &cap)) {
        float *logits = feed_turn(&c, system, line);
        more = logits && chat_reply(&c, logits);
        free(system); /* the first turn alone has it */
        system = NULL;
    }
    finish_stdout();
    c.summary.n_forward = c.pos;
    print_summary(&c.summary);
    free(system);
    free(line);
}
