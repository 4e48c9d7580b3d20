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

/* Where run_program_stdout points the program's stdout. */
typedef enum {
    STDOUT_CAPTURED,    /* a temporary file, read into RunResult.out (what run_program does) */
    STDOUT_FULL,        /* /dev/full: every write fails with ENOSPC */
    STDOUT_CLOSED,      /* descriptor 1 closed */
    STDOUT_PIPE_CLOSED, /* a pipe whose reader has gone: writes fail with EPIPE (or SIGPIPE) */
} StdoutKind;

/* run_program with stdout as `kind` says; RunResult.out is "" unless STDOUT_CAPTURED. */
RunResult run_program_stdout(const char *const *args, StdoutKind kind);

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
