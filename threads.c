/* The default thread count (threads.h): the cores other processes leave free, read from
 * /proc/loadavg's count of runnable threads when run starts. Setting it is run.c's.
 */
#include "threads.h"

#include <stdio.h>
#include <time.h>

enum { SAMPLES = 5 };

/* /proc/loadavg's running count (its fourth field, "running/total"), or -1. */
static int running_now(void) {
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f) return -1;
    int running = -1, total;
    if (fscanf(f, "%*f %*f %*f %d/%d", &running, &total) != 2) running = -1;
    fclose(f);
    return running;
}

int threads_busy_elsewhere(void) {
    int least = -1;
    for (int i = 0; i < SAMPLES; i++) {
        int running = running_now();
        if (running < 1) return -1;
        if (least < 0 || running < least) least = running;
        if (i + 1 < SAMPLES) nanosleep(&(struct timespec){0, 500000}, NULL);
    }
    return least - 1;
}

int threads_default(int cores, int busy) {
    int free_cores = cores - (busy > 0 ? busy : 0);
    return free_cores > 1 ? free_cores : 1;
}
