/* Timing the forward pass by operation class (profile.h), for --profile and --compare. */
#include "profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void profile_start(Profile *p) {
    p->last = now_seconds();
}

void profile_lap(Profile *p, OpClass op) {
    double t = now_seconds();
    p->seconds[op] += t - p->last;
    p->laps[op]++;
    p->last = t;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double median(double *x, int n) {
    qsort(x, n, sizeof(double), by_value);
    return x[n / 2];
}

double profile_lap_cost(void) {
    enum { ROUNDS = 15, LAPS = 1000 };
    double cost[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        Profile p = {0};
        profile_start(&p);
        double t0 = p.last;
        for (int i = 0; i < LAPS; i++) profile_lap(&p, OP_EMBEDDING);
        cost[r] = (p.last - t0) / LAPS;
    }
    return median(cost, ROUNDS);
}

double profile_op_seconds(const Profile *p, OpClass op, double lap_cost) {
    double t = p->seconds[op] - p->laps[op] * lap_cost;
    return t < 0.0 ? 0.0 : t;
}

const char *op_name(OpClass op) {
    static const char *names[N_OPS] = {"embedding", "norms",      "qkv",
                                       "rope",      "attention",  "output projection",
                                       "ffn",       "classifier", "sampling"};
    return op >= 0 && op < N_OPS ? names[op] : "?";
}

void print_profile(FILE *f, const Profile *p, double elapsed) {
    double lap_cost = profile_lap_cost();
    fprintf(f,
            "profile: time per operation class over the run (each lap's clock cost, %.0f ns, "
            "taken out)\n",
            lap_cost * 1e9);
    fprintf(f, "  %-18s %10s %7s %9s\n", "operation", "ms", "share", "calls");
    double total = 0.0;
    for (int op = 0; op < N_OPS; op++) {
        double t = profile_op_seconds(p, op, lap_cost);
        total += t;
        fprintf(f, "  %-18s %10.3f %6.1f%% %9ld\n", op_name(op), t * 1e3, 100.0 * t / elapsed,
                p->laps[op]);
    }
    fprintf(f, "  %-18s %10.3f %6.1f%%\n", "sum", total * 1e3, 100.0 * total / elapsed);
    fprintf(f, "  %-18s %10.3f %6.1f%%\n", "wall clock", elapsed * 1e3, 100.0);
}

/* The median, least and greatest of x (n >= 1), x sorted in place. */
static void summarize(double *x, int n, double out[3]) {
    out[0] = median(x, n);
    out[1] = x[0];
    out[2] = x[n - 1];
}

void print_profile_runs(FILE *f, const Profile *p, const double *elapsed, int n) {
    double lap_cost = profile_lap_cost();
    double *x = malloc(n * sizeof(double)), wall[3];
    if (!x) return; /* the profile is an extra: without memory, none */
    for (int i = 0; i < n; i++) x[i] = elapsed[i];
    summarize(x, n, wall);
    fprintf(f,
            "profile: time per operation class, the median of %d runs of the same text and their "
            "range (each lap's clock cost, %.0f ns, taken out)\n",
            n, lap_cost * 1e9);
    fprintf(f, "  %-18s %10s %10s %10s %7s %9s\n", "operation", "ms", "min", "max", "share",
            "calls");
    for (int op = 0; op < N_OPS; op++) {
        double t[3];
        for (int i = 0; i < n; i++) x[i] = profile_op_seconds(&p[i], op, lap_cost);
        summarize(x, n, t);
        fprintf(f, "  %-18s %10.3f %10.3f %10.3f %6.1f%% %9ld\n", op_name(op), t[0] * 1e3,
                t[1] * 1e3, t[2] * 1e3, 100.0 * t[0] / wall[0], p[0].laps[op]);
    }
    fprintf(f, "  %-18s %10.3f %10.3f %10.3f %6.1f%%\n", "wall clock", wall[0] * 1e3, wall[1] * 1e3,
            wall[2] * 1e3, 100.0);
    free(x);
}
