#include "helpers.h"

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
    return run_program_stdout(args, STDOUT_CAPTURED);
}

/* Output goes to temporary files rather than pipes, so neither stream can fill and block. */
RunResult run_program_stdout(const char *const *args, StdoutKind kind) {
    const char *program = getenv("NORMLLAMA_RUN");
    if (!program) program = "./run";
    char out_path[] = "/tmp/normllama-out-XXXXXX", err_path[] = "/tmp/normllama-err-XXXXXX";
    int out_fd = mkstemp(out_path), err_fd = mkstemp(err_path);
    const char *argv[64] = {program};
    int argc = 1;
    while (args[argc - 1] && argc < 63) argv[argc] = args[argc - 1], argc++;
    argv[argc] = NULL;

    pid_t pid = fork();
    if (pid == 0) {
        redirect_stdout(kind, out_fd);
        dup2(err_fd, STDERR_FILENO);
        int devnull = open("/dev/null", O_RDONLY);
        dup2(devnull, STDIN_FILENO);
        if (devnull != STDIN_FILENO) close(devnull); /* it may hold a closed stdout's number */
        signal(SIGPIPE, SIG_DFL);                    /* as a shell starts a program */
        execv(program, (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    close(out_fd);
    close(err_fd);
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
