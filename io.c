/* run's input and output plumbing (io.h): die, the stdout checks, escaped and JSON text, text
 * files read whole. What the modes print is theirs; this file only carries it out.
 */
#include "io.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tokenizer.h"

int write_escaped(FILE *f, const char *s, int raw_high) {
    int shown = 0;
    while (*s) {
        long bad = raw_high ? -1 : tokenizer_utf8_invalid_at(s);
        const char *end = bad < 0 ? s + strlen(s) : s + bad;
        for (; s < end; s++) {
            unsigned char c = (unsigned char)*s;
            if (c == '\n') {
                shown += fprintf(f, "\\n");
            } else if (c < 0x20 || c == 0x7F) {
                shown += fprintf(f, "\\x%02X", c);
            } else {
                fputc(c, f);
                shown += (c & 0xC0) != 0x80;
            }
        }
        if (bad >= 0) shown += fprintf(f, "\\x%02X", (unsigned char)*s++);
    }
    return shown;
}

/* The output file an error would leave incomplete, which die removes: the --logits file until it
 * is closed. Its device and inode, so that die removes that file only, never one put at the
 * path since (see remove_on_error). */
static struct {
    const char *path; /* NULL: none */
    dev_t dev;
    ino_t ino;
} incomplete;

void remove_on_error(const char *path, FILE *f) {
    struct stat st;
    incomplete.path = NULL;
    if (!path || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) return;
    incomplete.path = path;
    incomplete.dev = st.st_dev;
    incomplete.ino = st.st_ino;
}

void die(const char *fmt, ...) {
    char message[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    fputs("run: ", stderr);
    write_escaped(stderr, message, 0);
    fputc('\n', stderr);
    fflush(NULL); /* the text printed before the error stays */
    struct stat st;
    if (incomplete.path && stat(incomplete.path, &st) == 0 && st.st_dev == incomplete.dev &&
        st.st_ino == incomplete.ino)
        unlink(incomplete.path);
    /* _exit rather than exit: nothing is freed on the way out of an error, and exit would have
     * LeakSanitizer call whatever a register no longer points to a leak */
    _exit(1);
}

static volatile sig_atomic_t interrupt_flag;

static void on_interrupt(int signal) {
    (void)signal;
    interrupt_flag = 1;
}

void catch_interrupt(int restart) {
    struct sigaction action = {.sa_handler = on_interrupt, .sa_flags = restart ? SA_RESTART : 0};
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, NULL);
}

int interrupted(void) {
    return interrupt_flag;
}

void clear_interrupt(void) {
    interrupt_flag = 0;
}

int stdout_reader_gone(void) {
    if (fflush(stdout) == 0 && !ferror(stdout)) return 0;
    if (errno == EPIPE) return 1;
    die("cannot write to stdout: %s", strerror(errno));
}

void finish_stdout(void) {
    if (stdout_reader_gone()) _exit(0);
}

const char *plural(long n) {
    return n == 1 ? "" : "s";
}

void require_utf8(const char *what, const char *text, char *owned) {
    long bad = tokenizer_utf8_invalid_at(text);
    if (bad < 0) return;
    unsigned char byte = (unsigned char)text[bad];
    free(owned);
    die("%s: not valid UTF-8 (byte 0x%02X at offset %ld)", what, byte, bad);
}

/* The longest text read from a file or stdin, in bytes. */
enum { MAX_TEXT = 64 << 20 };

/* Dies unless buf (len bytes read from `name`, then a NUL) holds no NUL byte and is valid UTF-8,
 * freeing buf first. */
static void require_text(char *buf, size_t len, const char *name) {
    size_t text_len = strlen(buf);
    if (text_len != len) {
        free(buf);
        die("%s: the text contains a NUL byte at offset %zu", name, text_len);
    }
    require_utf8(name, buf, buf);
}

char *read_text(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) die("%s: cannot open: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) die("%s: not a regular file", path);
    if (st.st_size == 0) die("%s: the text file is empty", path);
    if (st.st_size > MAX_TEXT) die("%s: more than %d MiB of text", path, MAX_TEXT >> 20);
    FILE *f = fopen(path, "rb");
    if (!f) die("%s: cannot open: %s", path, strerror(errno));
    size_t size = (size_t)st.st_size;
    char *buf = malloc(size + 1);
    if (!buf) die("out of memory for %s", path);
    size_t n = fread(buf, 1, size, f);
    fclose(f);
    buf[n] = '\0';
    if (n != size) {
        free(buf);
        die("%s: cannot read the whole file", path);
    }
    require_text(buf, n, path);
    return buf;
}

/* A pipe has no size to ask for first, so the buffer doubles as it fills. */
char *read_stdin_text(void) {
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap + 1);
    for (;;) {
        if (!buf) die("out of memory for the text on stdin");
        len += fread(buf + len, 1, cap - len, stdin);
        if (len > MAX_TEXT) die("stdin: more than %d MiB of text", MAX_TEXT >> 20);
        if (len < cap) break; /* the end, or an error */
        cap *= 2;
        char *grown = realloc(buf, cap + 1);
        if (!grown) free(buf);
        buf = grown;
    }
    if (ferror(stdin)) die("stdin: cannot read: %s", strerror(errno));
    if (len == 0) die("stdin: the text is empty");
    buf[len] = '\0';
    require_text(buf, len, "stdin");
    return buf;
}

void print_json_string(const char *s) {
    putchar('"');
    while (*s) {
        long bad = tokenizer_utf8_invalid_at(s);
        const char *end = bad < 0 ? s + strlen(s) : s + bad;
        for (; s < end; s++) {
            unsigned char c = (unsigned char)*s;
            if (c == '"' || c == '\\')
                printf("\\%c", c);
            else if (c < 0x20)
                printf("\\u%04x", c);
            else
                putchar(c);
        }
        if (bad >= 0) {
            printf("\\ufffd");
            s++;
        }
    }
    putchar('"');
}
