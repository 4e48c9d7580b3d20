/* Test helpers: run the `run` binary as a subprocess and capture what it prints. */
#ifndef TESTS_HELPERS_H
#define TESTS_HELPERS_H

#include <stddef.h>

typedef struct {
    int exit_code; /* the exit status, or 128 + signal number if it was killed */
    char *out;     /* everything written to stdout, NUL-terminated; free with result_free */
    char *err;     /* everything written to stderr, NUL-terminated */
} RunResult;

/* Runs the program under test ($NORMLLAMA_RUN, default ./run) with the NULL-terminated
 * argument list args (without argv[0]) and waits for it. */
RunResult run_program(const char *const *args);

void result_free(RunResult *r);

/* Reads a whole file into a NUL-terminated buffer (caller frees); NULL if it cannot. */
char *read_file(const char *path, size_t *size);

/* Writes size bytes to path; returns 0 on success. */
int write_file(const char *path, const void *data, size_t size);

/* Number of '\n'-terminated lines in s. */
int count_lines(const char *s);

/* SentencePiece's remove_extra_whitespaces, written independently of tokenizer.c: no leading or
 * trailing spaces, runs of spaces squeezed to one. out must hold strlen(in) + 1 bytes. */
static inline void squeeze_spaces(char *out, const char *in) {
    while (*in == ' ') in++;
    char *o = out;
    for (; *in; in++)
        if (!(*in == ' ' && (in[1] == ' ' || in[1] == '\0'))) *o++ = *in;
    while (o > out && o[-1] == ' ') o--;
    *o = '\0';
}

#endif
