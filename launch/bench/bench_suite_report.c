/* launch/bench/bench_suite_report.c: `gearbox bench suite`'s figures (medians over seeds, failed
 * seeds as failed, never as their time) and its report, as JSON or as a table. */
#include "launch/bench/bench.h"
#include "launch/bench/bench_suite.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Median (nearest rank, as gb_bench_quantile) of v[0..n), failed entries INFINITY. */
static double median_of(double *v, int n)
{
    return n > 0 ? gb_bench_quantile(v, n, 0.5) : NAN;
}

void gb_bench_suite_figures(suite_task *t)
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

void gb_bench_suite_print_json(const suite_task *tasks, int ntasks, const suite_opts *o,
                               const double load0[3], const double load1[3], const char *tmp,
                               int ok)
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
            printf("%s{\"seed\": %d, \"solved\": %s, \"run_solved\": %s, ", i ? ", " : "",
                   r->seed, r->solved ? "true" : "false", r->run_solved ? "true" : "false");
            json_text("solved_by", r->solved_by);
            printf(", ");
            json_text("confirmed_by", r->confirmed_by);
            printf(", ");
            json_figure("evaluation_return_mean", r->eval_return, "%.2f");
            printf(", ");
            json_figure("evaluation_episodes", r->eval_episodes, "%.0f");
            printf(", ");
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

void gb_bench_suite_print_table(const suite_task *tasks, int ntasks, const double load0[3],
                                const double load1[3])
{
    printf("%-27s %-36s %9s %6s %8s %8s %10s %10s\n", "task", "config", "threshold", "solved",
           "median_s", "worst_s", "env_steps", "steps/s");
    for (int k = 0; k < ntasks; k++) {
        const suite_task *t = &tasks[k];
        const char *cfg = strrchr(t->config, '/');
        char name[PATH_MAX + 16], th[32], sol[16], med[32], worst[32], steps[32], rate[32];
        snprintf(name, sizeof name, "configs/%s", cfg ? cfg + 1 : t->config);
        snprintf(sol, sizeof sol, "%d/%d", t->solved, t->nruns);
        printf("%-27s %-36s %9s %6s %8s %8s %10s %10s\n", t->name, name,
               cell(th, sizeof th, t->threshold, "%g"), sol,
               cell(med, sizeof med, t->median_s, "%.2f"),
               cell(worst, sizeof worst, t->worst_s, "%.2f"),
               cell(steps, sizeof steps, t->median_steps, "%.0f"),
               cell(rate, sizeof rate, t->median_rate, "%.0f"));
        if (t->error[0])
            printf("  error: %s\n", t->error);
        for (int i = 0; i < t->nruns; i++) {
            const suite_run *r = &t->runs[i];
            if (r->error[0])
                printf("  seed %d: error: %s\n", r->seed, r->error);
            else if (r->run_solved && !r->solved)
                printf("  seed %d: the run said solved (by %s), an evaluation of its policy "
                       "returned %.2f: not solved\n", r->seed,
                       r->solved_by[0] ? r->solved_by : "?", r->eval_return);
        }
    }
    printf("solved: seeds whose run said solved and an evaluation of the policy confirmed it "
           "(the run's own, or gearbox eval --deterministic of its final checkpoint)\n");
    printf("seconds: process start to exit of `gearbox run`; env_steps: median to solve; "
           "steps/s: env_steps / the run's wall_seconds\n"
           "load average before %.2f %.2f %.2f, after %.2f %.2f %.2f\n",
           load0[0], load0[1], load0[2], load1[0], load1[1], load1[2]);
}
