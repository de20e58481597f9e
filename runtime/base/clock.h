/* runtime/base/clock.h: monotonic, wall and CPU clocks.
 * defines: gb_now_ns, gb_now_s, gb_wall_s, gb_thread_cpu_s, gb_process_cpu_s, gb_sleep_ms */
#ifndef GB_RUNTIME_CLOCK_H
#define GB_RUNTIME_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Monotonic time in nanoseconds (CLOCK_MONOTONIC); for durations and deadlines. */
static inline uint64_t gb_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Monotonic time in seconds. */
static inline double gb_now_s(void) { return (double)gb_now_ns() * 1e-9; }

/* Wall-clock time in seconds since the epoch (for timestamps in files, not for durations). */
static inline double gb_wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU seconds of the calling thread (a benchmark's rate per CPU second holds on a loaded machine,
 * where wall-clock rates swing with the other processes' load). */
static inline double gb_thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU seconds of the whole process, every thread's (libtorch's intra-op threads included). */
static inline double gb_process_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Sleeps ms milliseconds (resumes after signals until the time is up). */
void gb_sleep_ms(double ms);

#endif
