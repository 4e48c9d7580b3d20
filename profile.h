/* Wall-clock profiling by operation class, for run's --profile and --compare.
 *
 * Code under measurement calls profile_lap after each operation; a lap's time (since the previous
 * lap or profile_start) goes to that operation's class.
 */
#ifndef PROFILE_H
#define PROFILE_H

#include <stdio.h>

/* Operation classes that --profile times; the residual adds count with the projection before
 * them (OP_OUTPUT_PROJ, OP_FFN). */
typedef enum {
    OP_EMBEDDING,
    OP_NORM,
    OP_QKV,
    OP_ROPE,
    OP_ATTENTION, /* scores, softmax and mixing of the values */
    OP_OUTPUT_PROJ,
    OP_FFN,
    OP_CLASSIFIER,
    OP_SAMPLING, /* timed by the caller of model_forward */
    N_OPS
} OpClass;

/* Wall-clock time per operation class, summed over a run, measured as laps: each lap ends at a
 * profile_lap call and began at the previous one (or at profile_start). */
typedef struct {
    double seconds[N_OPS];
    long laps[N_OPS];
    double last; /* end of the previous lap, seconds on CLOCK_MONOTONIC */
} Profile;

/* Begins the next lap now. */
void profile_start(Profile *p);

/* Ends a lap: adds the time since the previous lap (or profile_start) to class `op`, one of the
 * OpClass values below N_OPS (not checked). */
void profile_lap(Profile *p, OpClass op);

/* The seconds one profile_lap call itself adds to the lap it ends (median of a calibration
 * run): subtract laps[op] times it from seconds[op] to get the operations' own time. */
double profile_lap_cost(void);

/* Seconds on CLOCK_MONOTONIC, a clock that only goes forward: differences of two calls time
 * what ran between them. */
double now_seconds(void);

/* The median of x (n >= 1 times or rates), the upper of the two middle values when n is even.
 * Sorts x in place. Repeated timings are summed up by their median, which the few runs a shared
 * machine slows down do not move. */
double median(double *x, int n);

/* The seconds of class `op` in p with the clock's own cost, lap_cost per lap (from
 * profile_lap_cost), taken out. At least 0: for a class of very short laps, a lap cost measured
 * a little high would take out more than the class's time. */
double profile_op_seconds(const Profile *p, OpClass op, double lap_cost);

/* Short name of an operation class ("embedding", "norms", ...), "?" out of range. */
const char *op_name(OpClass op);

/* Prints p to f as a table, one row per operation class: its milliseconds, with the clock's own
 * cost per lap (profile_lap_cost) taken out, its share of the run's wall-clock time `elapsed`
 * (seconds, > 0) and its laps; then their sum and the wall clock. */
void print_profile(FILE *f, const Profile *p, double elapsed);

/* print_profile over n >= 2 runs (p[n], elapsed[n]): per class the median milliseconds over the
 * runs, their least and greatest, the median's share of the median wall clock, and the calls of
 * one run; then the wall clock's median and range. */
void print_profile_runs(FILE *f, const Profile *p, const double *elapsed, int n);

#endif
