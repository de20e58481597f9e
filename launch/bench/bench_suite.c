/* launch/bench/bench_suite.c: `gearbox bench suite [--json] [--seeds N] [--only NAME] [--set k=v ...]`:
 * time to solve on a fixed list of shipped configs, run the way a user runs them. Each seed of
 * each task is a child `gearbox run CONFIG --set experiment.seed=S --run-dir DIR` (fork/exec of
 * this executable), timed from fork to exit on CLOCK_MONOTONIC; the run's summary.json says
 * whether it solved, why it stopped, its env steps and its own wall time. The threshold is the
 * config's experiment.target_return (after --set), read with the config loader: the configs own
 * their thresholds, with a comment saying why.
 * defines: gb_bench_suite */
#include "launch/bench/bench.h"
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
};
#define SUITE_NTASKS ((int)(sizeof suite_tasks / sizeof suite_tasks[0]))
#define SUITE_MAX_SEEDS 64
#define SUITE_MAX_SETS 64
#define SUITE_DIR_MAX 1024 /* the configs folder, the temporary folder */
#define SUITE_PATH_MAX (SUITE_DIR_MAX + 128)

/* One seed of one task. */
typedef struct suite_run {
    int seed;
    int started;            /* the child ran (fork succeeded) */
    int exit_status;        /* the child's exit status; 128 + signal when killed */
    double process_seconds; /* fork to exit */
    int has_summary;
    int solved;
    char exit_reason[32];
    double env_steps, run_seconds, return_mean; /* from summary.json; NAN when absent */
    char log[SUITE_PATH_MAX]; /* the child's stdout and stderr */
    char error[160];        /* why this run is not a result (details in log); empty when it is */
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

static void suite_usage(FILE *out)
{
    fprintf(out,
            "usage: gearbox bench suite [--json] [--seeds N] [--only NAME]... [--set k=v]...\n"
            "                           [--configs DIR] [--keep]\n\n"
            "Time to solve on a fixed suite of shipped configs, run as a user runs them: each\n"
            "seed of each task is a separate `gearbox run CONFIG --set experiment.seed=S`,\n"
            "timed from fork to exit (process start to exit, start-up and stop included).\n"
            "Tasks (name: config, threshold = the config's experiment.target_return):\n");
    for (int i = 0; i < SUITE_NTASKS; i++)
        fprintf(out, "  %-24s configs/%s\n", suite_tasks[i].name, suite_tasks[i].config);
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

/* ---- summary.json ------------------------------------------------------------------------- */

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
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(r->error, sizeof r->error, "fork: %s", strerror(errno));
        return;
    }
    if (pid == 0) {
        int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
        }
        execv(exe, args);
        _exit(127);
    }
    suite_child = pid;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    suite_child = 0;
    r->process_seconds = now_s() - t0;
    r->started = 1;
    r->exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);

    char path[SUITE_PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/summary.json", run_dir);
    char *s = gb_bench_slurp(path);
    if (r->exit_status == 127 && !s) {
        snprintf(r->error, sizeof r->error, "could not start gearbox run (exit status 127)");
        r->started = 0;
        return;
    }
    if (s) {
        double solved = gb_bench_json_number(s, "solved");
        gb_bench_json_string(s, "exit_reason", r->exit_reason, sizeof r->exit_reason);
        r->env_steps = gb_bench_json_number(s, "env_steps");
        r->run_seconds = gb_bench_json_number(s, "wall_seconds");
        r->return_mean = gb_bench_json_number(s, "episode_return_mean");
        r->has_summary = !isnan(solved) && r->exit_reason[0] && !isnan(r->env_steps);
        r->solved = r->has_summary && solved == 1;
        free(s);
    }
    if (!r->has_summary)
        snprintf(r->error, sizeof r->error,
                 "no readable summary.json (gearbox run exited with status %d)", r->exit_status);
    else if (r->exit_status != 0) {
        char reason[sizeof r->exit_reason];
        memcpy(reason, r->exit_reason, sizeof reason);
        snprintf(r->error, sizeof r->error, "gearbox run exited with status %d (exit_reason %s)",
                 r->exit_status, reason);
    }
}

/* ---- the figures ---------------------------------------------------------------------------- */

/* Median (nearest rank, as gb_bench_quantile) of v[0..n), failed entries INFINITY. */
static double median_of(double *v, int n)
{
    return n > 0 ? gb_bench_quantile(v, n, 0.5) : NAN;
}

static void suite_figures(suite_task *t)
{
    double secs[SUITE_MAX_SEEDS], steps[SUITE_MAX_SEEDS], rates[SUITE_MAX_SEEDS];
    int nrates = 0;
    t->solved = 0;
    for (int i = 0; i < t->nruns; i++) {
        const suite_run *r = &t->runs[i];
        secs[i] = r->solved ? r->process_seconds : INFINITY;
        steps[i] = r->solved ? r->env_steps : INFINITY;
        t->solved += r->solved;
        if (r->has_summary && r->run_seconds > 0)
            rates[nrates++] = r->env_steps / r->run_seconds;
    }
    t->median_s = median_of(secs, t->nruns);
    t->worst_s = t->nruns > 0 ? gb_bench_quantile(secs, t->nruns, 1.0) : NAN;
    t->median_steps = median_of(steps, t->nruns);
    t->median_rate = median_of(rates, nrates);
}

/* ---- printing ------------------------------------------------------------------------------ */

/* A figure as JSON: a number, or null (failed or none). */
static void json_figure(const char *key, double v, const char *fmt)
{
    printf("\"%s\": ", key);
    if (isfinite(v))
        printf(fmt, v);
    else
        printf("null");
}

/* s with " and \ escaped (paths, messages). */
static void json_text(const char *key, const char *s)
{
    printf("\"%s\": ", key);
    if (!s || !s[0]) {
        printf("null");
        return;
    }
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            putchar('\\');
        if ((unsigned char)*s >= 0x20)
            putchar(*s);
    }
    putchar('"');
}

static void print_json(const suite_task *tasks, int ntasks, const suite_opts *o,
                       const double load0[3], const double load1[3], const char *tmp, int ok)
{
    printf("{\"bench\": \"suite\", \"seeds\": %d, ", o->seeds);
    printf("\"load_average_before\": [%.2f, %.2f, %.2f], ", load0[0], load0[1], load0[2]);
    printf("\"load_average_after\": [%.2f, %.2f, %.2f], ", load1[0], load1[1], load1[2]);
    json_text("run_dirs", o->keep || !ok ? tmp : NULL);
    printf(", \"ok\": %s, \"tasks\": [", ok ? "true" : "false");
    for (int k = 0; k < ntasks; k++) {
        const suite_task *t = &tasks[k];
        printf("%s{\"name\": \"%s\", ", k ? ", " : "", t->name);
        json_text("config", t->config);
        printf(", ");
        json_text("env", t->env);
        printf(", ");
        json_text("algorithm", t->algorithm);
        printf(", ");
        json_figure("threshold", t->threshold, "%g");
        printf(", \"seeds\": %d, \"seeds_solved\": %d, ", t->nruns, t->solved);
        json_figure("median_seconds_to_solve", t->median_s, "%.2f");
        printf(", ");
        json_figure("worst_seconds_to_solve", t->worst_s, "%.2f");
        printf(", ");
        json_figure("median_env_steps_to_solve", t->median_steps, "%.0f");
        printf(", ");
        json_figure("median_env_steps_per_s", t->median_rate, "%.0f");
        printf(", ");
        json_text("error", t->error);
        printf(", \"runs\": [");
        for (int i = 0; i < t->nruns; i++) {
            const suite_run *r = &t->runs[i];
            printf("%s{\"seed\": %d, \"solved\": %s, ", i ? ", " : "", r->seed,
                   r->solved ? "true" : "false");
            json_text("exit_reason", r->exit_reason);
            printf(", \"exit_status\": %d, ", r->exit_status);
            json_figure("process_seconds", r->started ? r->process_seconds : NAN, "%.2f");
            printf(", ");
            json_figure("run_seconds", r->run_seconds, "%.2f");
            printf(", ");
            json_figure("env_steps", r->env_steps, "%.0f");
            printf(", ");
            json_figure("env_steps_per_s",
                        r->run_seconds > 0 ? r->env_steps / r->run_seconds : NAN, "%.0f");
            printf(", ");
            json_figure("episode_return_mean", r->return_mean, "%.2f");
            printf(", ");
            json_text("error", r->error);
            printf(", ");
            json_text("log", o->keep || !ok ? r->log : NULL);
            printf("}");
        }
        printf("]}");
    }
    printf("]}\n");
}

/* A figure for the table: "failed" (INFINITY), "-" (none) or the number. */
static const char *cell(char *buf, size_t cap, double v, const char *fmt)
{
    if (isinf(v))
        snprintf(buf, cap, "failed");
    else if (isnan(v))
        snprintf(buf, cap, "-");
    else
        snprintf(buf, cap, fmt, v);
    return buf;
}

static void print_table(const suite_task *tasks, int ntasks, const double load0[3],
                        const double load1[3])
{
    printf("%-23s %-36s %9s %6s %8s %8s %10s %10s\n", "task", "config", "threshold", "solved",
           "median_s", "worst_s", "env_steps", "steps/s");
    for (int k = 0; k < ntasks; k++) {
        const suite_task *t = &tasks[k];
        const char *cfg = strrchr(t->config, '/');
        char name[PATH_MAX + 16], th[32], sol[16], med[32], worst[32], steps[32], rate[32];
        snprintf(name, sizeof name, "configs/%s", cfg ? cfg + 1 : t->config);
        snprintf(sol, sizeof sol, "%d/%d", t->solved, t->nruns);
        printf("%-23s %-36s %9s %6s %8s %8s %10s %10s\n", t->name, name,
               cell(th, sizeof th, t->threshold, "%g"), sol,
               cell(med, sizeof med, t->median_s, "%.2f"),
               cell(worst, sizeof worst, t->worst_s, "%.2f"),
               cell(steps, sizeof steps, t->median_steps, "%.0f"),
               cell(rate, sizeof rate, t->median_rate, "%.0f"));
        if (t->error[0])
            printf("  error: %s\n", t->error);
        for (int i = 0; i < t->nruns; i++)
            if (t->runs[i].error[0])
                printf("  seed %d: error: %s\n", t->runs[i].seed, t->runs[i].error);
    }
    printf("seconds: process start to exit of `gearbox run`; env_steps: median to solve; "
           "steps/s: env_steps / the run's wall_seconds\n"
           "load average before %.2f %.2f %.2f, after %.2f %.2f %.2f\n",
           load0[0], load0[1], load0[2], load1[0], load1[1], load1[2]);
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

static int parse_opts(int argc, char **argv, suite_opts *o)
{
    memset(o, 0, sizeof *o);
    o->seeds = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (strcmp(a, "--json") == 0)
            o->json = 1;
        else if (strcmp(a, "--keep") == 0)
            o->keep = 1;
        else if (strcmp(a, "--seeds") == 0 && more) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > SUITE_MAX_SEEDS) {
                fprintf(stderr, "gearbox bench suite: --seeds takes 1..%d, not \"%s\"\n",
                        SUITE_MAX_SEEDS, argv[i]);
                return -1;
            }
            o->seeds = (int)v;
        } else if (strcmp(a, "--only") == 0 && more) {
            const char *name = argv[++i];
            int known = 0;
            for (int k = 0; k < SUITE_NTASKS; k++)
                known |= strcmp(suite_tasks[k].name, name) == 0;
            if (!known) {
                fprintf(stderr, "gearbox bench suite: --only: no task \"%s\" (see --help)\n",
                        name);
                return -1;
            }
            if (o->nonly < SUITE_NTASKS)
                o->only[o->nonly++] = name;
        } else if (strcmp(a, "--set") == 0 && more) {
            if (o->nsets == SUITE_MAX_SETS) {
                fprintf(stderr, "gearbox bench suite: more than %d --set\n", SUITE_MAX_SETS);
                return -1;
            }
            o->sets[o->nsets++] = argv[++i];
        } else if (strcmp(a, "--configs") == 0 && more) {
            o->configs = argv[++i];
            if (strlen(o->configs) >= SUITE_DIR_MAX - 1) {
                fprintf(stderr, "gearbox bench suite: --configs: the path is too long\n");
                return -1;
            }
        } else {
            fprintf(stderr, "gearbox bench suite: unknown option or missing value: %s\n", a);
            return -1;
        }
    }
    return 0;
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

int gb_bench_suite(int argc, char **argv, int json)
{
    if (gb_wants_help(argc, argv)) {
        suite_usage(stdout);
        return GB_EXIT_OK;
    }
    suite_opts o;
    if (parse_opts(argc, argv, &o) != 0) {
        suite_usage(stderr);
        return GB_EXIT_USAGE;
    }
    o.json = json;
    char exe[PATH_MAX], dir[SUITE_DIR_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) {
        perror("gearbox bench suite: readlink /proc/self/exe");
        return GB_EXIT_FAILURE;
    }
    exe[len] = '\0';
    configs_dir(&o, dir, sizeof dir);

    static suite_task tasks[SUITE_NTASKS];
    int ntasks = 0, ok = 1;
    for (int k = 0; k < SUITE_NTASKS; k++) {
        if (!wanted(&o, suite_tasks[k].name))
            continue;
        suite_task *t = &tasks[ntasks++];
        memset(t, 0, sizeof *t);
        t->name = suite_tasks[k].name;
        if (suite_task_load(t, dir, suite_tasks[k].config, &o) != 0) {
            fprintf(stderr, "gearbox bench suite: %s: %s\n", t->name, t->error);
            ok = 0;
        }
    }
    const char *tmpdir = getenv("TMPDIR");
    char tmp[SUITE_DIR_MAX];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s/gb-suite-XXXXXX",
                         tmpdir && tmpdir[0] ? tmpdir : "/tmp") >= sizeof tmp - 64) {
        fprintf(stderr, "gearbox bench suite: TMPDIR is too long\n");
        return GB_EXIT_FAILURE;
    }
    if (!mkdtemp(tmp)) {
        fprintf(stderr, "gearbox bench suite: mkdtemp %s: %s\n", tmp, strerror(errno));
        return GB_EXIT_FAILURE;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: waitpid returns EINTR and waits again */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    double load0[3] = {NAN, NAN, NAN}, load1[3] = {NAN, NAN, NAN};
    getloadavg(load0, 3);
    for (int k = 0; k < ntasks; k++) {
        suite_task *t = &tasks[k];
        if (t->error[0])
            continue;
        for (int s = 1; s <= o.seeds && !suite_stop; s++) {
            suite_run *r = &t->runs[t->nruns++];
            memset(r, 0, sizeof *r);
            r->seed = s;
            r->env_steps = r->run_seconds = r->return_mean = NAN;
            suite_run_seed(exe, tmp, t, &o, r);
            if (r->error[0]) {
                ok = 0;
                fprintf(stderr, "gearbox bench suite: %s seed %d: %s (see %s)\n", t->name, s,
                        r->error, r->log);
            } else
                fprintf(stderr, "%s seed %d: %s (%s), %.0f env steps, %.2f s process, %.2f s "
                        "run, mean return %.2f\n", t->name, s,
                        r->solved ? "solved" : "not solved", r->exit_reason, r->env_steps,
                        r->process_seconds, r->run_seconds, r->return_mean);
        }
        suite_figures(t);
    }
    getloadavg(load1, 3);
    if (suite_stop) {
        fprintf(stderr, "gearbox bench suite: interrupted: the figures cover the runs that "
                        "ended\n");
        ok = 0;
    }
    if (json)
        print_json(tasks, ntasks, &o, load0, load1, tmp, ok);
    else
        print_table(tasks, ntasks, load0, load1);
    if (o.keep || !ok)
        fprintf(stderr, "gearbox bench suite: run directories kept in %s\n", tmp);
    else if (gb_bench_remove_tree(tmp) != 0)
        fprintf(stderr, "gearbox bench suite: could not remove %s: %s\n", tmp, strerror(errno));
    return ok ? GB_EXIT_OK : GB_EXIT_FAILURE;
}
