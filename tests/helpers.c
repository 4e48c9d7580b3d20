#include "helpers.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

char *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc(n + 1);
    if (buf && fread(buf, 1, n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (!buf) return NULL;
    buf[n] = '\0';
    if (size) *size = (size_t)n;
    return buf;
}

int write_file(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t written = fwrite(data, 1, size, f);
    return (fclose(f) == 0 && written == size) ? 0 : -1;
}

/* Points the child's stdout (descriptor 1) as `kind` says, captured_fd being the temporary file
 * of STDOUT_CAPTURED. */
static void redirect_stdout(StdoutKind kind, int captured_fd) {
    if (kind == STDOUT_CAPTURED) {
        dup2(captured_fd, STDOUT_FILENO);
    } else if (kind == STDOUT_FULL) {
        int full = open("/dev/full", O_WRONLY);
        dup2(full, STDOUT_FILENO);
        close(full);
    } else if (kind == STDOUT_CLOSED) {
        close(STDOUT_FILENO);
    } else {
        int fds[2];
        if (pipe(fds) != 0) _exit(126);
        close(fds[0]);
        dup2(fds[1], STDOUT_FILENO);
        close(fds[1]);
    }
    close(captured_fd);
}

RunResult run_program(const char *const *args) {
    ProgramIO io = {.input = NULL, .out = STDOUT_CAPTURED};
    return run_program_io(args, &io);
}

RunResult run_program_input(const char *const *args, const char *input, size_t size) {
    ProgramIO io = {.input = input, .size = size, .out = STDOUT_CAPTURED};
    return run_program_io(args, &io);
}

RunResult run_program_stdout(const char *const *args, StdoutKind kind) {
    ProgramIO io = {.input = NULL, .out = kind};
    return run_program_io(args, &io);
}

/* Output goes to temporary files rather than pipes, so neither stream can fill and block; so
 * does the input, which then ends where a pipe's writer would close it. */
RunResult run_program_io(const char *const *args, const ProgramIO *io) {
    const char *program = getenv("NORMLLAMA_RUN");
    if (!program) program = "./run";
    char out_path[] = "/tmp/normllama-out-XXXXXX", err_path[] = "/tmp/normllama-err-XXXXXX";
    char in_path[] = "/tmp/normllama-in-XXXXXX";
    int out_fd = mkstemp(out_path), err_fd = mkstemp(err_path);
    const char *input = io->input;
    size_t size = io->size;
    int in_fd = input ? mkstemp(in_path) : open("/dev/null", O_RDONLY);
    if (input && (write(in_fd, input, size) != (ssize_t)size || lseek(in_fd, 0, SEEK_SET) != 0))
        in_fd = -1; /* the child then reads a closed stdin: the test sees the failure */
    const char *argv[64] = {program};
    int argc = 1;
    while (args[argc - 1] && argc < 63) argv[argc] = args[argc - 1], argc++;
    argv[argc] = NULL;

    pid_t pid = fork();
    if (pid == 0) {
        redirect_stdout(io->out, out_fd);
        dup2(err_fd, STDERR_FILENO);
        if (in_fd >= 0)
            dup2(in_fd, STDIN_FILENO);
        else
            close(STDIN_FILENO);
        if (in_fd > STDIN_FILENO) close(in_fd);
        signal(SIGPIPE, SIG_DFL); /* as a shell starts a program */
        execv(program, (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    close(out_fd);
    close(err_fd);
    close(in_fd);
    if (input) unlink(in_path);
    RunResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = read_file(out_path, NULL);
    r.err = read_file(err_path, NULL);
    unlink(out_path);
    unlink(err_path);
    return r;
}

void result_free(RunResult *r) {
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

void expect_error(const char *const *args, const char *needle) {
    expect_error_input(args, NULL, 0, needle);
}

void expect_error_input(const char *const *args, const char *input, size_t size,
                        const char *needle) {
    RunResult r = run_program_input(args, input, size);
    cr_assert_eq(r.exit_code, 1, "exit code %d for '%s', stderr: %s", r.exit_code, needle, r.err);
    cr_assert_eq(count_lines(r.err), 1, "one line expected: %s", r.err);
    cr_assert(strstr(r.err, needle), "'%s' not in: %s", needle, r.err);
    cr_assert_str_eq(r.out, "", "nothing on stdout: %s", r.out);
    result_free(&r);
}

char scratch[64];

void make_scratch(void) {
    snprintf(scratch, sizeof(scratch), "/tmp/normllama-test-XXXXXX");
    cr_assert_not_null(mkdtemp(scratch));
}

char *scratch_path(const char *name) {
    static char paths[4][128];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, 128, "%s/%s", scratch, name);
    return p;
}
