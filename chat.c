/* -m chat (chat.h): the conversation's turns read, templated, fed and answered, one kv cache
 * for them all. Generation's pieces (the summary, the finite-logit check) are generate.c's.
 */
#include "chat.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat_template.h"
#include "generate.h"
#include "io.h"
#include "norm.h"
#include "profile.h"

/* A conversation so far: the kv cache holds its positions 0..pos-1, every turn and reply. */
typedef struct {
    Model *m;
    const Vocab *v;
    Sampler *sampler;
    int steps;        /* positions the conversation may fill: -n, at most seq_len */
    int pos;          /* positions fed */
    int ended_by_eot; /* the last reply ended at end_of_turn, which the next turn feeds first */
    int interactive;  /* stdin is a terminal: "User: " is shown before reading, not after */
    int line_no;      /* lines read from stdin */
    Summary summary;  /* counts and times of all turns */
    /* the conversation as its template renders it (chat_template.h): the messages, a reply's
     * content left empty (the kv cache holds the reply's own tokens, and each family renders a
     * message apart from the others), and the length of the rendering fed */
    ChatTemplate tmpl;
    ChatTokens tokens;
    ChatMessage *messages;
    int n_messages;
    size_t rendered;
    const char *end_text; /* the text that ends a reply, and its token's id (-1: not a token) */
    int end_of_turn;
} Chat;

/* The template of the chat: --chat-template's, else the one the model names when it is one of
 * the families (an unrecognized one is said in one line), else Llama 2's. */
static ChatTemplate choose_template(const ChatRequest *req) {
    if (req->template_override >= 0) return req->template_override;
    if (!req->model_template) return CHAT_TEMPLATE_LLAMA2;
    int t = chat_template_recognize(req->model_template);
    if (t >= 0) return t;
    fprintf(stderr,
            "run: the model's chat template is none of %s; using llama2 (--chat-template NAME "
            "chooses one)\n",
            chat_template_names());
    return CHAT_TEMPLATE_LLAMA2;
}

/* The end of a reply's token: the id of end_text when the vocabulary's special tokens spell it
 * as one (vocab_encode's VOCAB_PARSE_SPECIAL), which plain text does not; else -1. */
static int end_of_turn_id(const Vocab *v, const char *end_text) {
    int ids[2][64]; /* the end texts are short: 10 bytes */
    if (strlen(end_text) > 20) return -1;
    long special = vocab_encode(v, end_text, VOCAB_PARSE_SPECIAL, ids[0]);
    long plain = vocab_encode(v, end_text, 0, ids[1]);
    return special == 1 && (plain != 1 || ids[1][0] != ids[0][0]) ? ids[0][0] : -1;
}

/* The template and the tokens its texts name: BOS and EOS by the vocabulary's texts ("<s>" and
 * "</s>" for SentencePiece's), the end of a reply among them. */
static void open_template(Chat *c, const ChatRequest *req) {
    c->tmpl = choose_template(req);
    c->tokens =
        (ChatTokens){vocab_piece(c->v, vocab_bos(c->v)), vocab_piece(c->v, vocab_eos(c->v))};
    c->end_text = chat_template_end_of_turn(c->tmpl, &c->tokens);
    c->end_of_turn = end_of_turn_id(c->v, c->end_text);
}

static void add_message(Chat *c, const char *role, const char *content) {
    ChatMessage *grown = realloc(c->messages, (c->n_messages + 1) * sizeof(*grown));
    char *copy = strdup(content);
    if (!grown || !copy) die("out of memory for a chat turn");
    c->messages = grown;
    c->messages[c->n_messages++] = (ChatMessage){role, copy};
}

static void close_template(Chat *c) {
    for (int i = 0; i < c->n_messages; i++) free((char *)c->messages[i].content);
    free(c->messages);
}

/* The text a user turn adds (malloc'd): the conversation rendered with the turn and the
 * generation prompt, from where what was fed ends: past the previous generation prompt, the reply
 * and its end-of-turn text (its token, when the reply ended there, is fed apart). */
static char *turn_text(Chat *c, const char *user) {
    if (c->n_messages > 0 && strcmp(c->messages[c->n_messages - 1].role, "user") == 0)
        add_message(c, "assistant", "");
    add_message(c, "user", user);
    char *all = chat_template_render(c->tmpl, c->messages, c->n_messages, 1, &c->tokens);
    if (!all) die("out of memory for a chat turn");
    const char *from = all + c->rendered; /* each rendering starts with the one before */
    const char *end = c->rendered ? strstr(from, c->end_text) : NULL;
    if (end) from = end + strlen(c->end_text);
    char *text = strdup(from);
    if (!text) die("out of memory for a chat turn");
    c->rendered = strlen(all);
    free(all);
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

/* Feeds a user turn: the end-of-turn token that ended the last reply (closing it, as the
 * template does), then the text the turn adds to the rendering. Returns the logits of its last
 * position, or NULL, saying so, when the turn does not fit in the positions left. */
static float *feed_turn(Chat *c, const char *user) {
    char *text = turn_text(c, user);
    int *ids = malloc((vocab_max_ids(strlen(text)) + 1) * sizeof(int));
    if (!ids) die("out of memory for a chat turn");
    int n = c->ended_by_eot;
    ids[0] = c->end_of_turn; /* kept only when the last reply ended at it */
    /* a special token's text is that token, as llama.cpp's parse_special reads it */
    long n_text = vocab_encode(c->v, text, VOCAB_PARSE_SPECIAL, ids + n);
    if (n_text < 0) die("out of memory for a chat turn");
    n += n_text;
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
 * "Assistant: " (its leading spaces dropped) until a token that ends_text or the template's end of
 * turn, which is not fed, or a Ctrl-C, after which the next turn starts with the end-of-turn token
 * as after a reply that ended there.
 * Returns 1, or 0, saying so, when the reply fills the last position: that token is shown, as
 * generation shows the one predicted at its last position. */
static int chat_reply(Chat *c, float *logits) {
    double start = now_seconds();
    /* prev: the reply is decoded as a text of its own, as after BOS */
    int vocab_size = c->m->config.vocab_size, prev = vocab_bos(c->v), at_start = 1, done = 1;
    VocabStream *stream = calloc(1, sizeof *stream);
    if (!stream) die("out of memory for a reply");
    fputs("Assistant: ", stdout);
    for (;;) {
        int next = sample(c->sampler, logits);
        if (ends_text(c->sampler, c->v, next) != VOCAB_NOT_END || next == c->end_of_turn) {
            c->ended_by_eot = next == c->end_of_turn;
            break;
        }
        c->summary.n_generated++;
        const char *text;
        size_t len = vocab_text(c->v, stream, prev, next, &text);
        for (; at_start && len > 0 && text[0] == ' '; len--) text++;
        at_start = at_start && len == 0;
        fwrite(text, 1, len, stdout);
        finish_stdout();
        if (interrupted()) { /* the reply stops; the chat goes on */
            c->ended_by_eot = c->end_of_turn >= 0;
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
    vocab_stream_end(c->v, stream);
    free(stream);
    putchar('\n');
    finish_stdout(); /* the reply whole before the next turn is waited for */
    c->summary.generation_seconds += now_seconds() - start;
    if (!done) say_context_full(c, "the reply reached the last position");
    return done;
}

void run_chat(Model *m, const Vocab *v, Sampler *sampler, const ChatRequest *req) {
    const char *first_turn = req->first_turn;
    Chat c = {.m = m, .v = v, .sampler = sampler, .steps = req->steps};
    open_template(&c, req);
    c.interactive = isatty(STDIN_FILENO);
    c.summary.norm = norm_name(m->norm);
    c.summary.seed = sampler->seed;
    c.summary.stop = STOP_END_OF_INPUT;
    catch_interrupt(1);
    char *line = NULL;
    size_t cap = 0;
    int more = 1;
    if (req->system_prompt) {
        if (req->system_prompt[0]) add_message(&c, "system", req->system_prompt);
    } else if (c.interactive) {
        more = read_line(&c, "System prompt (optional): ", &line, &cap);
        if (more && line[0]) add_message(&c, "system", line); /* an empty one is none */
    }
    if (more && first_turn[0]) {
        printf("User: %s\n", first_turn);
        float *logits = feed_turn(&c, first_turn);
        more = logits && chat_reply(&c, logits);
    }
    while (more && read_turn(&c, &line, &cap)) {
        float *logits = feed_turn(&c, line);
        more = logits && chat_reply(&c, logits);
    }
    finish_stdout();
    c.summary.n_forward = c.pos;
    print_summary(&c.summary);
    close_template(&c);
    free(line);
}
