/* The default thread count: the cores that other processes leave free when run starts.
 *
 * A parallel region waits for its slowest thread, so a thread that shares its core with another
 * busy process holds every region up by scheduler time slices: with one of this machine's two
 * cores kept busy, 110M f32 decode on 2 threads fell from about 50 to 5.5 tokens/s (issue 18's
 * measurement; 42.9 on 1 thread against 21.3 on 2 in make bench of 2026-12-01). run gives the
 * cores other processes are using to them. Not seen: a process started in the same few
 * milliseconds (two runs started together both take every core), and the priority of what runs
 * (a nice 19 spinner counts as a whole core). It leaves the
 * --threads option and OMP_NUM_THREADS, which win over this, to run.c.
 */
#ifndef THREADS_H
#define THREADS_H

/* The number of processes and threads other than the caller that were runnable at every one of
 * a few samples of /proc/loadavg's running count (its fourth field, "running/total") taken
 * 0.5 ms apart (2 ms in all): the minimum less one, the caller itself, so that a process that ran
 * for a moment is not counted but one keeping a core busy is. Call it before the first OpenMP
 * parallel region, while the caller is its process's one thread. -1 when /proc/loadavg cannot be
 * read or parsed (a system without it). Source: proc(5) on /proc/loadavg. */
int threads_busy_elsewhere(void);

/* The thread count for `cores` processors (omp_get_num_procs()) when `busy` of them are taken by
 * others (threads_busy_elsewhere; -1, unknown, counts as 0): cores - busy, at least 1 for any
 * ints given. */
int threads_default(int cores, int busy);

#endif
