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

int gb_bench_e2e(int argc, char **argv, int json)
{
    if (gb_wants_help(argc, argv)) {
        bench_usage(stdout);
        return GB_EXIT_OK;
    }
    const char *config = "configs/cartpole_ppo.yaml";
    char *sets[64];
    int nsets = 0, keep = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            config = argv[++i];
        else if (strcmp(argv[i], "--set") == 0 && i + 1 < argc && nsets < 64)
            sets[nsets++] = argv[++i];
        else if (strcmp(argv[i], "--keep") == 0)
            keep = 1;
        else if (strcmp(argv[i], "--json") != 0) {
            bench_usage(stderr);
            return GB_EXIT_USAGE;
        }
    }
    char dir[] = "/tmp/gearbox-bench-e2e-XXXXXX", run_dir[PATH_MAX], exe[PATH_MAX];
    if (!mkdtemp(dir)) {
        perror("gearbox bench e2e: mkdtemp");
        return GB_EXIT_FAILURE;
    }
    snprintf(run_dir, sizeof run_dir, "%s/run", dir);
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) {
        perror("gearbox bench e2e: readlink");
        return GB_EXIT_FAILURE;
    }
    exe[len] = '\0';
    char *args[8 + 2 * 64];
    int n = 0;
    args[n++] = exe;
    args[n++] = "run";
    args[n++] = (char *)config;
    args[n++] = "--run-dir";
    args[n++] = run_dir;
    args[n++] = "--set";
    args[n++] = "launch.progress=off";
    for (int i = 0; i < nsets; i++) {
        args[n++] = "--set";
        args[n++] = sets[i];
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
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/summary.json", run_dir);
    char *summary = gb_bench_slurp(path);
    if (!summary) {
        fprintf(stderr, "gearbox bench e2e: the run wrote no summary.json (exit status %d); "
                "see %s/logs\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1, run_dir);
        return GB_EXIT_FAILURE;
    }
    double env_steps = gb_bench_json_number(summary, "env_steps");
    double wall = gb_bench_json_number(summary, "wall_seconds");
    double solved = gb_bench_json_number(summary, "solved");
    double ret = gb_bench_json_number(summary, "episode_return_mean");
    double actors = gb_bench_json_number(summary, "actors"), policies = gb_bench_json_number(summary, "policies"),
           trainers = gb_bench_json_number(summary, "trainers");
    snprintf(path, sizeof path, "%s/metrics.csv", run_dir);
    double samples = last_samples_trained(path);
    double env_rate = wall > 0 ? env_steps / wall : NAN;
    double train_rate = wall > 0 ? samples / wall : NAN;
    char solve[32];
    if (solved == 1)
        snprintf(solve, sizeof solve, "%.2f", wall);
    else
        snprintf(solve, sizeof solve, "null");
    if (json)
        printf("{\"bench\": \"e2e\", \"config\": \"%s\", \"env_steps_per_s\": %.0f, "
               "\"train_samples_per_s\": %.0f, \"seconds_to_solve\": %s, \"env_steps\": %.0f, "
               "\"wall_seconds\": %.2f, \"episode_return_mean\": %.1f, \"actors\": %.0f, "
               "\"policies\": %.0f, \"trainers\": %.0f, \"run_dir\": %s%s%s}\n",
               config, env_rate, train_rate, solve, env_steps, wall, ret, actors, policies,
               trainers, keep ? "\"" : "", keep ? run_dir : "null", keep ? "\"" : "");
    else
        printf("e2e %s: %.0f env steps/s, %.0f trained samples/s, %s (mean return %.1f after "
               "%.0f env steps in %.1f s); %.0f actors, %.0f policy, %.0f trainer workers%s%s\n",
               config, env_rate, train_rate, solved == 1 ? "solved" : "not solved", ret,
               env_steps, wall, actors, policies, trainers, keep ? "; run in " : "",
               keep ? run_dir : "");
    free(summary);
    if (!keep && gb_bench_remove_tree(dir) != 0)
        fprintf(stderr, "gearbox bench e2e: could not remove %s: %s\n", dir, strerror(errno));
    return GB_EXIT_OK;
}
