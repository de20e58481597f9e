/* launch/bench/bench_suite.h: what `gearbox bench suite`'s runner (bench_suite.c) hands to its
 * report (bench_suite_report.c): the tasks, their seeds' runs and the options.
 * defines: suite_run, suite_task, suite_opts, SUITE_*, gb_bench_suite_figures,
 *          gb_bench_suite_print_json, gb_bench_suite_print_table */
#ifndef GB_LAUNCH_BENCH_SUITE_H
#define GB_LAUNCH_BENCH_SUITE_H

#include "runtime/config/config.h"

#define SUITE_NTASKS 18 /* the tasks of bench_suite.c's suite_tasks */
#define SUITE_MAX_SEEDS 64
#define SUITE_MAX_SETS 64
#define SUITE_DIR_MAX 1024 /* the configs folder, the temporary folder */
#define SUITE_PATH_MAX (SUITE_DIR_MAX + 128)
#define SUITE_EVAL_EPISODES 10 /* episodes of the evaluation that confirms a solved seed */

/* One seed of one task. */
typedef struct suite_run {
    int seed;
    int started;            /* the child ran (fork succeeded) */
    int exit_status;        /* the child's exit status; 128 + signal when killed */
    double process_seconds; /* fork to exit */
    int has_summary;
    int solved;             /* the run said solved and an evaluation confirmed it */
    int run_solved;         /* the run said solved (summary.json) */
    char solved_by[24];     /* what the run's verdict rests on (summary.json; "" when absent) */
    const char *confirmed_by; /* "run": its own deciding evaluation; "eval": gearbox eval
                                 --deterministic of its final checkpoint; NULL: none ran */
    double eval_return;     /* that evaluation's mean return; NAN: none */
    double eval_episodes;   /* its episodes */
    char exit_reason[32];
    double env_steps, run_seconds, return_mean; /* from summary.json; NAN when absent */
    char log[SUITE_PATH_MAX]; /* the child's stdout and stderr */
    char error[320];        /* why this run is not a result (details in log); empty when it is */
} suite_run;

typedef struct suite_task {
    const char *name;
    char config[SUITE_PATH_MAX]; /* the resolved path */
    char env[GB_CONFIG_NAME_MAX];
    const char *algorithm;
    double threshold;       /* NAN: none (an error) */
    char error[sizeof(((gb_error *)0)->msg) + SUITE_PATH_MAX]; /* the config could not be
                                                                  read; empty otherwise */
    suite_run runs[SUITE_MAX_SEEDS];
    int nruns, solved;
    double median_s, worst_s, median_steps, median_rate; /* INFINITY: failed; NAN: none */
} suite_task;

typedef struct suite_opts {
    int json, seeds, keep;
    const char *only[SUITE_NTASKS];
    int nonly;
    const char *configs; /* --configs DIR, or NULL */
    const char *sets[SUITE_MAX_SETS];
    int nsets;
} suite_opts;

/* The task's figures from its runs: seeds solved, the median and worst process seconds to solve
 * and median env steps to solve (a seed that did not solve: INFINITY, failed), the median env
 * steps/s. */
void gb_bench_suite_figures(suite_task *t);

/* The suite's results on stdout: one JSON object (one line) with every run, and the load
 * averages before (load0) and after (load1); tmp: where the run directories are (named when
 * they are kept: o->keep, or !ok). */
void gb_bench_suite_print_json(const suite_task *tasks, int ntasks, const suite_opts *o,
                               const double load0[3], const double load1[3], const char *tmp,
                               int ok);
/* The same as a table for people. */
void gb_bench_suite_print_table(const suite_task *tasks, int ntasks, const double load0[3],
                                const double load1[3]);

#endif
