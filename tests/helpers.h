/* Test helpers: run the `run` binary as a subprocess and capture what it prints, expect its
 * one-line errors, and scratch files for the tests. */
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

/* Where the program's stdout goes. */
typedef enum {
    STDOUT_CAPTURED,    /* a temporary file, read into RunResult.out (what run_program does) */
    STDOUT_FULL,        /* /dev/full: every write fails with ENOSPC */
    STDOUT_CLOSED,      /* descriptor 1 closed */
    STDOUT_PIPE_CLOSED, /* a pipe whose reader has gone: writes fail with EPIPE (or SIGPIPE) */
} StdoutKind;

/* The program's stdin and stdout: size bytes of input (NULL: /dev/null) and where stdout goes. */
typedef struct {
    const char *input;
    size_t size;
    StdoutKind out;
} ProgramIO;

/* run_program with stdin and stdout as io says; RunResult.out is "" unless STDOUT_CAPTURED. */
RunResult run_program_io(const char *const *args, const ProgramIO *io);

/* As run_program, with the size bytes of input (NULL: nothing, /dev/null) on its stdin. */
RunResult run_program_input(const char *const *args, const char *input, size_t size);

/* As run_program, with stdout as `kind` says. */
RunResult run_program_stdout(const char *const *args, StdoutKind kind);

void result_free(RunResult *r);

/* Reads a whole file into a NUL-terminated buffer (caller frees); NULL if it cannot. */
char *read_file(const char *path, size_t *size);

/* Writes size bytes to path; returns 0 on success. */
int write_file(const char *path, const void *data, size_t size);

/* Runs args (as run_program) and asserts a bad-input exit: status 1, exactly one line on stderr,
 * containing `needle`, and nothing on stdout. */
void expect_error(const char *const *args, const char *needle);

/* expect_error with the size bytes of input on stdin (as run_program_input). */
void expect_error_input(const char *const *args, const char *input, size_t size,
                        const char *needle);

/* A scratch directory per test (make_scratch asserts it is made), left to the OS's tmp cleaning;
 * scratch_path gives name inside it, in one of four buffers used in turn. */
extern char scratch[64];
void make_scratch(void);
char *scratch_path(const char *name);

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
