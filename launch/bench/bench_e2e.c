/* launch/bench/bench_e2e.c: `gearbox bench e2e [--json] [--config FILE] [--set k=v ...] [--keep]`:
 * runs an experiment as a user would (a child `gearbox run`, default configs/cartpole_ppo.yaml)
 * and reports its throughput and time to solve from the run directory it wrote, which is
 * removed afterwards unless --keep is given or the run left no summary. */
#include "launch/bench/bench.h"
#include "launch/commands.h"
#include "runtime/run/rundir.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The samples_trained column of metrics.csv's last row. */
static double last_samples_trained(const char *csv_path)
{
    char *text = gb_bench_slurp(csv_path);
    if (!text)
        return NAN;
    int col = -1, i = 0;
    for (char *p = text; *p && *p != '\n'; i++) {
        size_t len = strcspn(p, ",\n");
        if (len == strlen("samples_trained") && strncmp(p, "samples_trained", len) == 0)
            col = i;
        p += len;
        if (*p == ',')
            p++;
    }
    char *last = NULL;
    for (char *p = strchr(text, '\n'); p && p[1]; p = strchr(p + 1, '\n'))
        last = p + 1;
    double v = NAN;
    if (last && col >= 0) {
        char *p = last;
        for (int c = 0; c < col && p; c++) {
            p = strchr(p, ',');
            if (p)
                p++;
        }
        if (p && *p != ',' && *p != '\n')
            v = strtod(p, NULL);
    }
    free(text);
    return v;
}

static void bench_usage(FILE *out)
{
    fprintf(out, "usage: gearbox bench e2e [--json] [--config FILE] [--set k=v ...] [--keep]\n");
}

typedef struct e2e_opts {
    const char *config;
    char *sets[64];
    int nsets, keep;
} e2e_opts;

static int on_option(void *ctx, int val, const char *arg)
{
    e2e_opts *o = ctx;
    if (val == 'c')
        o->config = arg;
    else if (val == 'k')
        o->keep = 1;
    else if (o->nsets < 64)
        o->sets[o->nsets++] = (char *)arg;
    else {
        bench_usage(stderr);
        return -1;
    }
    return 0;
}

/* Runs `gearbox run CONFIG --run-dir run_dir ...` (this executable) and waits for it; returns
 * its wait status, or -1 when this executable cannot be found. */
static int run_child(const e2e_opts *o, const char *run_dir)
{
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) {
        perror("gearbox bench e2e: readlink");
        return -1;
    }
    exe[len] = '\0';
    char *args[8 + 2 * 64];
    int n = 0;
    args[n++] = exe;
    args[n++] = "run";
    args[n++] = (char *)o->config;
    args[n++] = "--run-dir";
    args[n++] = (char *)run_dir;
    args[n++] = "--set";
    args[n++] = "launch.progress=off";
    for (int i = 0; i < o->nsets; i++) {
        args[n++] = "--set";
        args[n++] = o->sets[i];
    }
    args[n] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        execv(exe, args);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
}

/* summary.json's figures the report shows (NAN where absent: warned about on stderr). */
enum { ENV_STEPS, WALL, SOLVED, RETURN, ACTORS, POLICIES, TRAINERS, NFIGURES };
static const char *const figure_keys[NFIGURES] = {
    "env_steps",     "wall_seconds",     "solved",          "episode_return_mean",
    "workers.actors", "workers.policies", "workers.trainers"};

/* Prints the run's figures, from run_dir's summary.json and metrics.csv. Returns 0, or -1 when
 * the run wrote no readable summary (the reason on stderr). */
static int report(const e2e_opts *o, const char *run_dir, int status, int json)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/summary.json", run_dir);
    json_t *summary;
    gb_error err = {0};
    if (gb_json_load(path, &summary, &err)) {
        fprintf(stderr, "gearbox bench e2e: the run wrote no readable summary.json (exit status "
                "%d: %s); see %s/logs\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1, err.msg,
                run_dir);
        return -1;
    }
    double f[NFIGURES];
    for (int i = 0; i < NFIGURES; i++)
        if (gb_json_number(summary, figure_keys[i], &f[i], &err))
            fprintf(stderr, "gearbox bench e2e: %s: %s\n", path, err.msg);
    json_decref(summary);
    snprintf(path, sizeof path, "%s/metrics.csv", run_dir);
    double samples = last_samples_trained(path);
    double wall = f[WALL];
    double env_rate = wall > 0 ? f[ENV_STEPS] / wall : NAN;
    double train_rate = wall > 0 ? samples / wall : NAN;
    char solve[32];
    if (f[SOLVED] == 1)
        snprintf(solve, sizeof solve, "%.2f", wall);
    else
        snprintf(solve, sizeof solve, "null");
    const char *kept = o->keep ? run_dir : "";
    if (json)
        printf("{\"bench\": \"e2e\", \"config\": \"%s\", \"env_steps_per_s\": %.0f, "
               "\"train_samples_per_s\": %.0f, \"seconds_to_solve\": %s, \"env_steps\": %.0f, "
               "\"wall_seconds\": %.2f, \"episode_return_mean\": %.1f, \"actors\": %.0f, "
               "\"policies\": %.0f, \"trainers\": %.0f, \"run_dir\": %s%s%s}\n",
               o->config, env_rate, train_rate, solve, f[ENV_STEPS], wall, f[RETURN],
               f[ACTORS], f[POLICIES], f[TRAINERS], o->keep ? "\"" : "",
               o->keep ? run_dir : "null", o->keep ? "\"" : "");
    else
        printf("e2e %s: %.0f env steps/s, %.0f trained samples/s, %s (mean return %.1f after "
               "%.0f env steps in %.1f s); %.0f actors, %.0f policy, %.0f trainer workers%s%s\n",
               o->config, env_rate, train_rate, f[SOLVED] == 1 ? "solved" : "not solved",
               f[RETURN], f[ENV_STEPS], wall, f[ACTORS], f[POLICIES], f[TRAINERS],
               o->keep ? "; run in " : "", kept);
    return 0;
}

int gb_bench_e2e(int argc, char **argv, int json)
{
    if (gb_wants_help(argc, argv)) {
        bench_usage(stdout);
        return GB_EXIT_OK;
    }
    static const struct option longs[] = {
        {"config", required_argument, NULL, 'c'}, {"set", required_argument, NULL, 's'},
        {"keep", no_argument, NULL, 'k'}, GB_BENCH_OPTION_JSON, {0}};
    e2e_opts o = {.config = "configs/cartpole_ppo.yaml"};
    if (gb_bench_options(argc, argv, longs, 0, on_option, &o, bench_usage))
        return GB_EXIT_USAGE;
    char dir[] = "/tmp/gearbox-bench-e2e-XXXXXX", run_dir[PATH_MAX];
    if (!mkdtemp(dir)) {
        perror("gearbox bench e2e: mkdtemp");
        return GB_EXIT_FAILURE;
    }
    snprintf(run_dir, sizeof run_dir, "%s/run", dir);
    int status = run_child(&o, run_dir);
    if (status == -1 || report(&o, run_dir, status, json))
        return GB_EXIT_FAILURE;
    if (!o.keep && gb_bench_remove_tree(dir) != 0)
        fprintf(stderr, "gearbox bench e2e: could not remove %s: %s\n", dir, strerror(errno));
    return GB_EXIT_OK;
}
