/* The default thread count (threads.h): hand-checked counts, and a process kept busy beside the
 * test counted as busy. */
#include <criterion/criterion.h>
#include <omp.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "threads.h"

#define MODEL     "models/stories260K.bin"
#define TOKENIZER "models/tok512.bin"

Test(threads, default_is_the_free_cores_and_at_least_one) {
    cr_assert_eq(threads_default(2, 0), 2);
    cr_assert_eq(threads_default(2, 1), 1);
    cr_assert_eq(threads_default(2, 3), 1);
    cr_assert_eq(threads_default(2, -1), 2, "unknown counts as none busy");
    cr_assert_eq(threads_default(8, 3), 5);
    cr_assert_eq(threads_default(1, 0), 1);
}

/* n children that spin until killed (each runnable at every sample, whatever the cores) into
 * children[n]. */
static void spin(pid_t *children, int n) {
    for (int i = 0; i < n; i++) {
        children[i] = fork();
        cr_assert_geq(children[i], 0);
        if (children[i] == 0) {
            alarm(10); /* a bound, should the test die before killing it */
            for (volatile unsigned long k = 0;; k++) {
            }
        }
    }
    nanosleep(&(struct timespec){0, 50000000}, NULL);
}

static void stop(pid_t *children, int n) {
    for (int i = 0; i < n; i++) {
        kill(children[i], SIGKILL);
        waitpid(children[i], NULL, 0);
    }
}

Test(threads, spinning_processes_are_counted_busy) {
    pid_t children[2];
    spin(children, 2);
    int busy = threads_busy_elsewhere();
    stop(children, 2);
    cr_log_info("busy elsewhere beside two spinning children: %d", busy);
    cr_assert_geq(busy, 2, "two spinning children, %d counted", busy);
}

/* The threads the summary line names ("..., threads N, seed ..."), or -1. */
static int summary_threads(const char *err) {
    const char *p = strstr(err, ", threads ");
    int n = -1;
    if (p) sscanf(p, ", threads %d", &n);
    return n;
}

Test(threads, run_leaves_busy_cores_to_others_unless_told) {
    const char *args[] = {MODEL, "-z", TOKENIZER, "-n", "8", "-t", "0", NULL, NULL};
    pid_t children[2];
    spin(children, 2);
    RunResult r = run_program(args);
    args[7] = "--threads=2";
    RunResult told = run_program(args);
    stop(children, 2);
    int most = omp_get_num_procs() - 2 > 1 ? omp_get_num_procs() - 2 : 1;
    cr_assert_eq(r.exit_code, 0, "%s", r.err);
    cr_assert(summary_threads(r.err) >= 1 && summary_threads(r.err) <= most,
              "%d cores, two busy: at most %d threads, but %s", omp_get_num_procs(), most, r.err);
    cr_assert_eq(summary_threads(told.err), 2, "%s", told.err);
    result_free(&r);
    result_free(&told);
}

/* An OMP_NUM_THREADS that libgomp cannot use (empty, 0, not a number) leaves run's own default
 * in force: libgomp warns in one line, the run succeeds with at most cores - 2 threads beside
 * two spinners. */
Test(threads, unusable_omp_num_threads_keeps_the_free_cores_default) {
    const char *values[] = {"", "0", "abc"};
    const char *args[] = {MODEL, "-z", TOKENIZER, "-n", "8", "-t", "0", NULL};
    int most = omp_get_num_procs() - 2 > 1 ? omp_get_num_procs() - 2 : 1;
    pid_t children[2];
    spin(children, 2);
    for (int i = 0; i < 3; i++) {
        setenv("OMP_NUM_THREADS", values[i], 1);
        RunResult r = run_program(args);
        cr_assert_eq(r.exit_code, 0, "OMP_NUM_THREADS='%s': %s", values[i], r.err);
        int n = summary_threads(r.err);
        cr_assert(n >= 1 && n <= most, "OMP_NUM_THREADS='%s': %d threads: %s", values[i], n, r.err);
        result_free(&r);
    }
    stop(children, 2);
}
