/* tests/workers/torch/group_ranks.h: the process-group tests' ranks (test_group.c,
 * test_group_failures.c): each rank a child forked from a clean process runs a rank_fn on a copy
 * of the options with its own rank; groups meet in a fresh FileStore under a temporary folder.
 * defines: group_dir, rank_fn, run_ranks, file_opts, open_met */
#ifndef GB_TESTS_WORKERS_TORCH_GROUP_RANKS_H
#define GB_TESTS_WORKERS_TORCH_GROUP_RANKS_H

#include "workers/ranks_util.h"
#include "test.h"
#include "workers/torch/group.h"

#include <stdio.h>

static char group_dir[] = "/tmp/gb_group_XXXXXX"; /* mkdtemp'd by main */
static int store_seq; /* a fresh FileStore path per group */

/* Each rank runs a rank_fn on a copy of the options with its own rank. */
typedef int (*rank_fn)(gb_group_opts *o);
typedef struct {
    gb_group_opts o;
    rank_fn fn;
} rank_job;

static inline int run_job(int rank, int size, void *arg)
{
    rank_job *job = arg;
    gb_group_opts o = job->o;
    o.rank = rank;
    return job->fn(&o);
}

/* Forks o.size ranks of fn; returns how many failed (ranks_util.h). */
static inline int run_ranks(gb_group_opts o, rank_fn fn, int limit_s)
{
    rank_job job = {o, fn};
    return ranks_run(o.size, run_job, &job, limit_s);
}

static inline gb_group_opts file_opts(int size, double timeout_s)
{
    static char path[64][256];
    int k = store_seq++ % 64;
    snprintf(path[k], sizeof path[k], "%s/store%d", group_dir, store_seq);
    gb_group_opts o = {.size = size, .store_path = path[k], .prefix = "test/",
                       .timeout_s = timeout_s};
    return o;
}

/* Opens the group and meets every rank past the rendezvous (a barrier: rank 0 may still be
 * connecting when rank 1's open returns). NULL when either fails. */
static inline gb_group *open_met(gb_group_opts *o, gb_error *out)
{
    gb_error err = {0};
    gb_group *g = NULL;
    CHECK_OK(gb_group_open(o, &g, &err));
    if (g && gb_group_barrier(g, &err) != 0) {
        CHECK_MSG(0, "barrier: %s", err.msg);
        gb_group_close(g);
        g = NULL;
    }
    *out = err;
    return g;
}

#endif
