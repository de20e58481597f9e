/* launch/bench/bench_suite.c: `gearbox bench suite [--json] [--seeds N] [--only NAME] [--set k=v
 * ...]`: time to solve on a fixed list of shipped configs, run the way a user runs them. Each seed
 * of each task is a child `gearbox run CONFIG --set experiment.seed=S --run-dir DIR` (fork/exec of
 * this executable), timed from fork to exit on CLOCK_MONOTONIC; the run's summary.json says
 * whether it solved, why it stopped, its env steps and its own wall time. The threshold is the
 * config's experiment.target_return (after --set), read with the config loader: the configs own
 * their thresholds, with a comment saying why. A seed counts as solved only when an evaluation
 * of its policy confirms it: the run's own deciding evaluation (summary.json, solved_by
 * "evaluation"), else `gearbox eval --deterministic` of SUITE_EVAL_EPISODES episodes on its
 * final checkpoint, whose mean return must reach the threshold (not timed: after the run).
 * defines: gb_bench_suite */
#include "launch/bench/bench.h"
#include "launch/bench/bench_suite.h"
#include "launch/commands.h"
#include "runtime/config/config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef GEARBOX_CONFIGS_DIR
#define GEARBOX_CONFIGS_DIR ""
#endif

/* The suite: task name and its config file in the configs folder. Thresholds live in the
 * configs (experiment.target_return), not here. */
static const struct {
    const char *name;
    const char *config;
} suite_tasks[] = {
    {"cartpole_ppo", "cartpole_ppo.yaml"},
    {"cartpole_dqn", "cartpole_dqn.yaml"},
    {"acrobot_ppo", "acrobot_ppo.yaml"},
    {"pendulum_sac", "pendulum_sac.yaml"},
    {"mountaincar_continuous", "mountaincar_continuous_sac.yaml"},
    {"spread_ppo", "spread_ppo.yaml"},
    {"breakout_ppo", "breakout_ppo.yaml"},
    {"breakout_ppo_vtrace", "breakout_ppo_vtrace.yaml"}, /* the same, V-trace on older chunks */
    /* tasks that need memory (a policy without one cannot solve them): recurrent PPO */
    {"cartpole_novel_lstm", "cartpole_novel_lstm.yaml"},
    {"cartpole_novel_transformer", "cartpole_novel_transformer.yaml"},
    {"recall_lstm", "recall_lstm.yaml"},
    {"recall_transformer", "recall_transformer.yaml"},
    /* the same memory task with recurrent DQN (R2D2: stored state, burn-in, prioritised) */
    {"recall_r2d2", "recall_r2d2.yaml"},
    /* MuJoCo locomotion in C, with normalised observations and scaled rewards */
    {"halfcheetah_ppo", "halfcheetah_ppo.yaml"},
    {"halfcheetah_sac", "halfcheetah_sac.yaml"},
    {"hopper_ppo", "hopper_ppo.yaml"},
    {"hopper_sac", "hopper_sac.yaml"},
    /* Atari (the ALE's Breakout) under the standard preprocessing, PPO with V-trace */
    {"atari_breakout_ppo", "atari_breakout_ppo.yaml"},
};
_Static_assert(sizeof suite_tasks / sizeof suite_tasks[0] == SUITE_NTASKS,
               "SUITE_NTASKS (bench_suite.h) counts suite_tasks");

static void suite_usage(FILE *out)
{
    fprintf(out,
            "usage: gearbox bench suite [--json] [--seeds N] [--only NAME]... [--set k=v]...\n"
            "                           [--configs DIR] [--keep]\n\n"
            "Time to solve on a fixed suite of shipped configs, run as a user runs them: each\n"
            "seed of each task is a separate `gearbox run CONFIG --set experiment.seed=S`,\n"
            "timed from fork to exit (process start to exit, start-up and stop included).\n"
            "A seed is solved only when an evaluation of its policy confirms the run's word:\n"
            "the run's own deciding evaluation (summary.json solved_by \"evaluation\"), else\n"
            "`gearbox eval --deterministic --episodes 10` on its final checkpoint (after the\n"
            "run, not timed), whose mean return must reach the threshold.\n"
            "Tasks (name: config, threshold = the config's experiment.target_return):\n");
    for (int i = 0; i < SUITE_NTASKS; i++)
        fprintf(out, "  %-27s configs/%s\n", suite_tasks[i].name, suite_tasks[i].config);
    fprintf(out,
            "\nPer task it prints the threshold, seeds solved / seeds, the median and worst\n"
            "seconds to solve, the median env steps to solve (a seed that did not solve counts\n"
            "as failed, never as its time: a median or worst over failed seeds reads \"failed\")\n"
            "and the median env steps/s (env_steps / the run's own wall_seconds, summary.json).\n"
            "--json: one JSON object (one line) with every run of every seed and the load\n"
            "average before and after.\n\n"
            "  --seeds N       seeds 1..N of every task (default 3)\n"
            "  --only NAME     run only this task (repeatable)\n"
            "  --set k=v       override a config key in every run (as gearbox run --set)\n"
            "  --configs DIR   where the configs are (default: ./configs when it holds them,\n"
            "                  else the source tree's configs/ this gearbox was built from)\n"
            "  --keep          keep the run directories (a folder gb-suite-* in $TMPDIR or\n"
            "                  /tmp, named on stderr; keep $TMPDIR short: the runs' Unix\n"
            "                  sockets live there)\n\n"
            "exit status: 0 every run ran and wrote its summary.json (a task that did not solve\n"
            "is a result, not an error); 1 a run could not be started, failed (gearbox run\n"
            "exited non-zero) or left no readable summary.json, or a config could not be\n"
            "read or has no experiment.target_return, or the suite was interrupted (SIGINT,\n"
            "SIGTERM: the run in progress stops, no other starts; the run directories are\n"
            "then kept);\n"
            "2 usage error\n");
}

/* ---- interruption: the suite stops after the run in progress, whose launcher stops it ------- */

static volatile sig_atomic_t suite_stop;
static volatile pid_t suite_child;

/* SIGINT from a terminal reaches the child's launcher too (same process group); SIGTERM is
 * passed on to it. Either way the run stops and writes its summary, and no further run starts. */
static void on_signal(int sig)
{
    suite_stop = 1;
    if (sig == SIGTERM && suite_child > 0)
        kill(suite_child, SIGTERM);
}

/* ---- running one seed ---------------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The run's summary.json at path into r: solved, exit_reason and env_steps must be there;
 * wall_seconds and episode_return_mean are NAN when absent or null; solved_by and the deciding
 * evaluation when the run was solved by one. Returns 0, or a GB_E* code with err saying what is
 * missing or wrong. */
static int read_summary(suite_run *r, const char *path, gb_error *err)
{
    json_t *doc;
    double solved = NAN;
    int rc = gb_json_load(path, &doc, err);
    if (rc)
        return rc;
    if (!(rc = gb_json_number(doc, "solved", &solved, err)) &&
        !(rc = gb_json_string(doc, "exit_reason", r->exit_reason,
                                    sizeof r->exit_reason, err)) &&
        !(rc = gb_json_number(doc, "env_steps", &r->env_steps, err))) {
        gb_json_number(doc, "wall_seconds", &r->run_seconds, NULL);
        gb_json_number(doc, "episode_return_mean", &r->return_mean, NULL);
        gb_json_string(doc, "solved_by", r->solved_by, sizeof r->solved_by, NULL);
        double reached = NAN;
        gb_json_number(doc, "evaluation.reached_target", &reached, NULL);
        if (solved == 1 && strcmp(r->solved_by, "evaluation") == 0 && reached == 1) {
            r->confirmed_by = "run";
            gb_json_number(doc, "evaluation.return_mean", &r->eval_return, NULL);
            gb_json_number(doc, "evaluation.episodes", &r->eval_episodes, NULL);
        }
        if (isnan(solved) || isnan(r->env_steps) || !r->exit_reason[0])
            rc = gb_error_set(err, GB_EINVAL, "solved, exit_reason or env_steps is null");
    }
    r->run_solved = !rc && solved == 1;
    json_decref(doc);
    return rc;
}

/* Starts exe with args (NULL-ended), its stdout to out_path and stderr appended to log_path,
 * and waits for it (a SIGTERM to the suite is passed on). Returns its exit status (128 +
 * signal when killed), or -1 when fork failed. Blocks. */
static int run_child(const char *exe, char **args, const char *out_path, const char *log_path)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int log = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        int out = out_path ? open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)
                           : log;
        if (log >= 0 && out >= 0) {
            dup2(out, STDOUT_FILENO);
            dup2(log, STDERR_FILENO);
        }
        execv(exe, args);
        _exit(127);
    }
    suite_child = pid;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    suite_child = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* A seed the run called solved, without an evaluation of its own that decided: `gearbox eval
 * RUN_DIR --deterministic --episodes SUITE_EVAL_EPISODES --json --seed S` on its final
 * checkpoint, its JSON in RUN_DIR/confirm.json and its messages in the seed's log. Fills
 * r->eval_return and r->eval_episodes, or r->error when it failed. Then the seed is solved
 * when an evaluation reached the threshold. Blocks. */
static void confirm(const char *exe, const char *run_dir, const suite_task *t, suite_run *r)
{
    if (r->run_solved && !r->confirmed_by && !suite_stop) {
        char json[SUITE_PATH_MAX + 16], episodes[16], seed[16];
        snprintf(json, sizeof json, "%s/confirm.json", run_dir);
        snprintf(episodes, sizeof episodes, "%d", SUITE_EVAL_EPISODES);
        snprintf(seed, sizeof seed, "%d", r->seed);
        char *args[] = {(char *)exe, "eval", (char *)run_dir, "--deterministic", "--episodes",
                        episodes, "--json", "--seed", seed, NULL};
        int status = run_child(exe, args, json, r->log);
        json_t *doc = NULL;
        gb_error err = {0};
        if (status != 0 || gb_json_load(json, &doc, &err) ||
            gb_json_number(doc, "return_mean", &r->eval_return, &err) ||
            gb_json_number(doc, "episodes", &r->eval_episodes, &err))
            snprintf(r->error, sizeof r->error, "the evaluation confirming the solved run "
                     "failed (gearbox eval: exit status %d%s%.200s)", status,
                     err.msg[0] ? ": " : "", err.msg);
        else
            r->confirmed_by = "eval";
        json_decref(doc);
    }
    r->solved = r->run_solved && r->confirmed_by && r->eval_return >= t->threshold;
}

/* Runs `exe run CONFIG --set experiment.seed=S --run-dir DIR/<task>-s<S> --set
 * launch.progress=off [--set ...]` with its output in DIR/<task>-s<S>.log, waits for it and
 * reads its summary.json into r. Blocks for the whole run. Never fails itself: what went wrong
 * is in r->error. */
static void suite_run_seed(const char *exe, const char *tmp, const suite_task *t,
                           const suite_opts *o, suite_run *r)
{
    char run_dir[SUITE_PATH_MAX], seed_set[64];
    snprintf(run_dir, sizeof run_dir, "%.*s/%.40s-s%d", SUITE_DIR_MAX, tmp, t->name, r->seed);
    snprintf(r->log, sizeof r->log, "%.*s/%.40s-s%d.log", SUITE_DIR_MAX, tmp, t->name,
             r->seed);
    const char *log_path = r->log;
    snprintf(seed_set, sizeof seed_set, "experiment.seed=%d", r->seed);
    char *args[12 + 2 * SUITE_MAX_SETS];
    int n = 0;
    args[n++] = (char *)exe;
    args[n++] = "run";
    args[n++] = (char *)t->config;
    args[n++] = "--run-dir";
    args[n++] = run_dir;
    args[n++] = "--set";
    args[n++] = "launch.progress=off";
    for (int i = 0; i < o->nsets; i++) {
        args[n++] = "--set";
        args[n++] = (char *)o->sets[i];
    }
    args[n++] = "--set"; /* last: the suite's seed wins over a --set of the user's */
    args[n++] = seed_set;
    args[n] = NULL;

    double t0 = now_s();
    int status = run_child(exe, args, NULL, log_path);
    if (status < 0) {
        snprintf(r->error, sizeof r->error, "fork: %s", strerror(errno));
        return;
    }
    r->process_seconds = now_s() - t0;
    r->started = 1;
    r->exit_status = status;

    char path[SUITE_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/summary.json", run_dir);
    gb_error err = {0};
    if (r->exit_status == 127 && access(path, F_OK) != 0) {
        snprintf(r->error, sizeof r->error, "could not start gearbox run (exit status 127)");
        r->started = 0;
        return;
    }
    r->has_summary = read_summary(r, path, &err) == 0;
    if (r->has_summary && r->exit_status == 0)
        confirm(exe, run_dir, t, r);
    if (!r->has_summary)
        snprintf(r->error, sizeof r->error, "no readable summary.json (gearbox run exited with "
                 "status %d): %.240s", r->exit_status, err.msg);
    else if (r->exit_status != 0) {
        char reason[sizeof r->exit_reason];
        memcpy(reason, r->exit_reason, sizeof reason);
        snprintf(r->error, sizeof r->error, "gearbox run exited with status %d (exit_reason %s)",
                 r->exit_status, reason);
    }
}

/* ---- setting up ----------------------------------------------------------------------------- */

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The configs folder: --configs, else ./configs when it holds the suite's first config, else
 * the source tree's (GEARBOX_CONFIGS_DIR, compiled in). */
static void configs_dir(const suite_opts *o, char *out, size_t cap)
{
    if (o->configs)
        snprintf(out, cap, "%s", o->configs);
    else
        gb_bench_configs_dir(suite_tasks[0].config, out, cap);
}

/* Resolves the task's config and reads its threshold, env and algorithm (with the --set
 * overrides). Returns 0, or -1 with t->error set. */
static int suite_task_load(suite_task *t, const char *dir, const char *file, const suite_opts *o)
{
    static gb_config cfg; /* large: off the stack */
    gb_error err = {0};
    snprintf(t->config, sizeof t->config, "%.*s/%.64s", SUITE_DIR_MAX, dir, file);
    t->threshold = t->median_s = t->worst_s = t->median_steps = t->median_rate = NAN;
    if (!file_exists(t->config)) {
        snprintf(t->error, sizeof t->error,
                 "%.*s/%.64s: no such config (--configs DIR names the folder)", SUITE_DIR_MAX,
                 dir, file);
        return -1;
    }
    if (gb_config_read(&cfg, t->config, o->sets, o->nsets, &err) != 0) {
        snprintf(t->error, sizeof t->error, "%s", err.msg);
        return -1;
    }
    snprintf(t->env, sizeof t->env, "%s", cfg.env.name);
    t->algorithm = gb_config_enum_name("trainer.algorithm.name", (int)cfg.trainer.algorithm.name);
    t->threshold = cfg.experiment.target_return;
    if (isnan(t->threshold)) {
        snprintf(t->error, sizeof t->error,
                 "%.*s/%.64s has no experiment.target_return: nothing to solve", SUITE_DIR_MAX,
                 dir, file);
        return -1;
    }
    return 0;
}

/* One option into o; returns 0, or -1 after saying why (and the usage). */
static int on_option(void *ctx, int val, const char *arg)
{
    suite_opts *o = ctx;
    char *end;
    long v;
    int known = 0;
    switch (val) {
    case 'k':
        o->keep = 1;
        return 0;
    case 'n':
        v = strtol(arg, &end, 10);
        if (*end || v < 1 || v > SUITE_MAX_SEEDS) {
            fprintf(stderr, "gearbox bench suite: --seeds takes 1..%d, not \"%s\"\n",
                    SUITE_MAX_SEEDS, arg);
            break;
        }
        o->seeds = (int)v;
        return 0;
    case 'o':
        for (int k = 0; k < SUITE_NTASKS; k++)
            known |= strcmp(suite_tasks[k].name, arg) == 0;
        if (!known) {
            fprintf(stderr, "gearbox bench suite: --only: no task \"%s\" (see --help)\n", arg);
            break;
        }
        if (o->nonly < SUITE_NTASKS)
            o->only[o->nonly++] = arg;
        return 0;
    case 's':
        if (o->nsets == SUITE_MAX_SETS) {
            fprintf(stderr, "gearbox bench suite: more than %d --set\n", SUITE_MAX_SETS);
            break;
        }
        o->sets[o->nsets++] = arg;
        return 0;
    default: /* --configs */
        o->configs = arg;
        if (strlen(o->configs) < SUITE_DIR_MAX - 1)
            return 0;
        fprintf(stderr, "gearbox bench suite: --configs: the path is too long\n");
        break;
    }
    suite_usage(stderr);
    return -1;
}

static int parse_opts(int argc, char **argv, suite_opts *o)
{
    static const struct option longs[] = {
        {"keep", no_argument, NULL, 'k'},       {"seeds", required_argument, NULL, 'n'},
        {"only", required_argument, NULL, 'o'}, {"set", required_argument, NULL, 's'},
        {"configs", required_argument, NULL, 'c'}, GB_BENCH_OPTION_JSON, {0}};
    memset(o, 0, sizeof *o);
    o->seeds = 3;
    return gb_bench_options(argc, argv, longs, 0, on_option, o, suite_usage);
}

static int wanted(const suite_opts *o, const char *name)
{
    if (o->nonly == 0)
        return 1;
    for (int i = 0; i < o->nonly; i++)
        if (strcmp(o->only[i], name) == 0)
            return 1;
    return 0;
}

/* The wanted tasks into tasks, their configs read from dir. Returns how many; *ok is cleared
 * when one cannot be read (said on stderr; the task stays, with its error). */
static int load_tasks(const suite_opts *o, const char *dir, suite_task *tasks, int *ok)
{
    int ntasks = 0;
    for (int k = 0; k < SUITE_NTASKS; k++) {
        if (!wanted(o, suite_tasks[k].name))
            continue;
        suite_task *t = &tasks[ntasks++];
        memset(t, 0, sizeof *t);
        t->name = suite_tasks[k].name;
        if (suite_task_load(t, dir, suite_tasks[k].config, o) != 0) {
            fprintf(stderr, "gearbox bench suite: %s: %s\n", t->name, t->error);
            *ok = 0;
        }
    }
    return ntasks;
}

/* The seed's line on stderr: solved (and by what) or not, its figures. */
static void report_seed(const suite_task *t, const suite_run *r)
{
    char by[160] = "";
    if (r->run_solved)
        snprintf(by, sizeof by, "; %s evaluation: %.2f over %.0f episodes%s",
                 r->confirmed_by && strcmp(r->confirmed_by, "run") == 0 ? "the run's"
                                                                        : "gearbox eval's",
                 r->eval_return, r->eval_episodes,
                 r->solved ? "" : ", below the threshold: the run's word is not confirmed");
    fprintf(stderr, "%s seed %d: %s (%s%s%s), %.0f env steps, %.2f s process, %.2f s run, "
            "mean return %.2f%s\n", t->name, r->seed, r->solved ? "solved" : "not solved",
            r->exit_reason, r->solved_by[0] ? ", by " : "", r->solved_by, r->env_steps,
            r->process_seconds, r->run_seconds, r->return_mean, by);
}

/* Every seed of every task that loaded, one after the other (until a stop request), each with
 * a line on stderr, then the task's figures. Returns 1 when every run is a result, else 0. */
static int run_tasks(const char *exe, const char *tmp, suite_task *tasks, int ntasks,
                     const suite_opts *o)
{
    int ok = 1;
    for (int k = 0; k < ntasks; k++) {
        suite_task *t = &tasks[k];
        if (t->error[0])
            continue;
        for (int s = 1; s <= o->seeds && !suite_stop; s++) {
            suite_run *r = &t->runs[t->nruns++];
            memset(r, 0, sizeof *r);
            r->seed = s;
            r->env_steps = r->run_seconds = r->return_mean = NAN;
            r->eval_return = r->eval_episodes = NAN;
            suite_run_seed(exe, tmp, t, o, r);
            if (r->error[0]) {
                ok = 0;
                fprintf(stderr, "gearbox bench suite: %s seed %d: %s (see %s)\n", t->name, s,
                        r->error, r->log);
            } else
                report_seed(t, r);
        }
        gb_bench_suite_figures(t);
    }
    return ok;
}

/* A fresh folder for the run directories ($TMPDIR or /tmp), with SIGINT and SIGTERM turned
 * into a stop request. Returns 0, or -1 after saying why. */
static int suite_prepare(char *tmp, size_t cap)
{
    const char *tmpdir = getenv("TMPDIR");
    if ((size_t)snprintf(tmp, cap, "%s/gb-suite-XXXXXX", tmpdir && tmpdir[0] ? tmpdir : "/tmp")
        >= cap - 64) {
        fprintf(stderr, "gearbox bench suite: TMPDIR is too long\n");
        return -1;
    }
    if (!mkdtemp(tmp)) {
        fprintf(stderr, "gearbox bench suite: mkdtemp %s: %s\n", tmp, strerror(errno));
        return -1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: waitpid returns EINTR and waits again */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    return 0;
}

int gb_bench_suite(int argc, char **argv, int json)
{
    if (gb_wants_help(argc, argv)) {
        suite_usage(stdout);
        return GB_EXIT_OK;
    }
    suite_opts o;
    if (parse_opts(argc, argv, &o) != 0)
        return GB_EXIT_USAGE;
    o.json = json;
    char exe[PATH_MAX], dir[SUITE_DIR_MAX], tmp[SUITE_DIR_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) {
        perror("gearbox bench suite: readlink /proc/self/exe");
        return GB_EXIT_FAILURE;
    }
    exe[len] = '\0';
    configs_dir(&o, dir, sizeof dir);
    static suite_task tasks[SUITE_NTASKS];
    int ok = 1, ntasks = load_tasks(&o, dir, tasks, &ok);
    if (suite_prepare(tmp, sizeof tmp))
        return GB_EXIT_FAILURE;
    double load0[3] = {NAN, NAN, NAN}, load1[3] = {NAN, NAN, NAN};
    getloadavg(load0, 3);
    ok &= run_tasks(exe, tmp, tasks, ntasks, &o);
    getloadavg(load1, 3);
    if (suite_stop) {
        fprintf(stderr, "gearbox bench suite: interrupted: the figures cover the runs that "
                        "ended\n");
        ok = 0;
    }
    if (json)
        gb_bench_suite_print_json(tasks, ntasks, &o, load0, load1, tmp, ok);
    else
        gb_bench_suite_print_table(tasks, ntasks, load0, load1);
    if (o.keep || !ok)
        fprintf(stderr, "gearbox bench suite: run directories kept in %s\n", tmp);
    else if (gb_bench_remove_tree(tmp) != 0)
        fprintf(stderr, "gearbox bench suite: could not remove %s: %s\n", tmp, strerror(errno));
    return ok ? GB_EXIT_OK : GB_EXIT_FAILURE;
}
