/* tests/test.h: the minimal test harness every C test uses.
 * defines: CHECK, CHECK_EQ_INT, CHECK_NEAR, CHECK_OK, TEST_RUN, TEST_WAIT_UNTIL,
 *          test_main_result */
#ifndef GB_TESTS_TEST_H
#define GB_TESTS_TEST_H

#include "runtime/base/sanitizers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int test_failures_;
static int test_checks_;

#define CHECK(cond)                                                                              \
    do {                                                                                         \
        test_checks_++;                                                                          \
        if (!(cond)) {                                                                           \
            test_failures_++;                                                                    \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);             \
        }                                                                                        \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                     \
    do {                                                                                         \
        test_checks_++;                                                                          \
        if (!(cond)) {                                                                           \
            test_failures_++;                                                                    \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);             \
            fprintf(stderr, __VA_ARGS__);                                                        \
            fputc('\n', stderr);                                                                 \
        }                                                                                        \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                       \
    do {                                                                                         \
        long long a_ = (long long)(a), b_ = (long long)(b);                                      \
        CHECK_MSG(a_ == b_, "%lld != %lld", a_, b_);                                             \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                                    \
    do {                                                                                         \
        double a_ = (double)(a), b_ = (double)(b);                                               \
        CHECK_MSG(fabs(a_ - b_) <= (tol), "%.9g vs %.9g (tol %g)", a_, b_, (double)(tol));        \
    } while (0)

/* For gearbox calls that return 0 or a GB_E* code and fill a gb_error named err. */
#define CHECK_OK(call)                                                                           \
    do {                                                                                         \
        int rc_ = (call);                                                                        \
        CHECK_MSG(rc_ == 0, "%s returned %d: %s", #call, rc_, err.msg);                          \
    } while (0)

#define TEST_RUN(fn)                                                                             \
    do {                                                                                         \
        int before_ = test_failures_;                                                            \
        fn();                                                                                    \
        fprintf(stderr, "%s %s\n", test_failures_ == before_ ? "ok  " : "FAIL", #fn);            \
    } while (0)

/* Waits until cond holds, checking it every 2 ms for at most timeout_ms: synchronisation with
 * another thread or process by its observable state (stats, counters), never by a fixed sleep,
 * so a loaded machine only makes the test slower. The caller then asserts as usual. */
#define TEST_WAIT_UNTIL(cond, timeout_ms)                                                        \
    do {                                                                                         \
        struct timespec t0_, now_, nap_ = {0, 2000000};                                          \
        clock_gettime(CLOCK_MONOTONIC, &t0_);                                                    \
        while (!(cond)) {                                                                        \
            clock_gettime(CLOCK_MONOTONIC, &now_);                                               \
            if ((now_.tv_sec - t0_.tv_sec) * 1000.0 + (now_.tv_nsec - t0_.tv_nsec) / 1e6 >=      \
                (double)(timeout_ms))                                                            \
                break;                                                                           \
            nanosleep(&nap_, NULL);                                                              \
        }                                                                                        \
    } while (0)

/* 1 when built with AddressSanitizer: its quarantine keeps freed memory mapped (256 MB by
 * default), so an RSS figure after a free says nothing there. */
#define TEST_ASAN GB_ASAN

/* A field of this process's /proc/self/status in bytes ("VmRSS:", "VmHWM:": kB there), or -1. */
static inline long long test_vm_bytes(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, strlen(key)) == 0 && sscanf(line + strlen(key), "%lld", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

/* Returns main's exit status and prints a summary line. */
static inline int test_main_result(void)
{
    fprintf(stderr, "%d checks, %d failed\n", test_checks_, test_failures_);
    return test_failures_ ? 1 : 0;
}

#endif
