/* tests/workers/ranks_util.h: forked ranks for the process-group tests (test_group.c,
 * test_learner_group.c). The caller forks before it has touched libtorch (no thread pools to
 * inherit); each rank's exit status is its failure count; the wait is bounded, so a rank stuck in
 * a collective fails the test instead of hanging it.
 * defines: ranks_fn, ranks_run, ranks_remove_dir */
#ifndef GB_TESTS_WORKERS_RANKS_UTIL_H
#define GB_TESTS_WORKERS_RANKS_UTIL_H

#include "test.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

enum { RANKS_MAX = 8 };

/* One rank's work: returns its failure count (test_failures_ in the child). */
typedef int (*ranks_fn)(int rank, int size, void *arg);

/* Reaps the ranks that have ended, without blocking; returns how many have, in all. */
static inline int ranks_reap_(const pid_t *pids, int *status, int *done, int n)
{
    int count = 0;
    for (int r = 0; r < n; r++) {
        if (!done[r] && waitpid(pids[r], &status[r], WNOHANG) == pids[r])
            done[r] = 1;
        count += done[r];
    }
    return count;
}

/* Forks size ranks (rank r runs fn(r, size, arg) and exits with its result, capped at 100) and
 * waits for them at most limit_s seconds, then kills what is left. Returns how many ranks failed
 * or had to be killed. */
static inline int ranks_run(int size, ranks_fn fn, void *arg, int limit_s)
{
    pid_t pids[RANKS_MAX];
    int status[RANKS_MAX], done[RANKS_MAX] = {0};
    if (size > RANKS_MAX)
        return size;
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < size; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            test_failures_ = 0; /* the rank's own checks, not the parent's failures so far */
            int failures = fn(r, size, arg);
            fflush(stderr);
            _exit(failures > 100 ? 100 : failures);
        }
        if (pids[r] < 0) {
            perror("fork");
            exit(2);
        }
    }
    TEST_WAIT_UNTIL(ranks_reap_(pids, status, done, size) == size, limit_s * 1000.0);
    int failed = 0;
    for (int r = 0; r < size; r++) {
        if (!done[r]) {
            fprintf(stderr, "rank %d still running after %d s: killed\n", r, limit_s);
            kill(pids[r], SIGKILL);
            waitpid(pids[r], &status[r], 0);
            failed++;
        } else if (!WIFEXITED(status[r]) || WEXITSTATUS(status[r]) != 0) {
            fprintf(stderr, "rank %d: %s %d\n", r, WIFEXITED(status[r]) ? "exit" : "signal",
                    WIFEXITED(status[r]) ? WEXITSTATUS(status[r]) : WTERMSIG(status[r]));
            failed++;
        }
    }
    return failed;
}

/* Removes a test's scratch directory (the stores) and everything in it. */
static inline void ranks_remove_dir(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

#endif
