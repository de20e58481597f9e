/* launch/evals.c: evaluation videos during a run, as `gearbox eval` children (evals.h). */
#include "launch/evals.h"

#include "runtime/clock.h"
#include "runtime/log.h"
#include "workers/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

void gb_evals_init(gb_evals *ev, const char *run_dir, const char *exe, int64_t every,
                   int64_t episodes, int64_t seed, int64_t env_steps)
{
    memset(ev, 0, sizeof *ev);
    ev->every = every;
    ev->episodes = episodes;
    ev->seed = seed;
    ev->last_step = -1;
    if (every > 0)
        ev->next = (env_steps / every + 1) * every;
    snprintf(ev->run_dir, sizeof ev->run_dir, "%s", run_dir);
    snprintf(ev->exe, sizeof ev->exe, "%s", exe);
}

/* Logs how the evaluation child ended. */
static void reaped(gb_evals *ev, int status)
{
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        GB_INFO("evaluation at %lld env steps done: videos/eval_%lld.mp4",
                (long long)ev->pid_env_steps, (long long)ev->pid_env_steps);
    } else {
        ev->failed++;
        GB_WARN("evaluation at %lld env steps failed (%s %d): see logs/eval_%lld.log",
                (long long)ev->pid_env_steps, WIFEXITED(status) ? "exit status" : "signal",
                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                (long long)ev->pid_env_steps);
    }
    ev->pid = 0;
}

/* Starts `gearbox eval` on checkpoint set trainer-0 for the evaluation at env_steps. */
static void start(gb_evals *ev, int64_t env_steps)
{
    char video[2400], json[2400], log[2400], episodes[32], seed[32];
    snprintf(video, sizeof video, "%s/videos", ev->run_dir);
    if (mkdir(video, 0777) != 0 && errno != EEXIST) {
        GB_WARN("evaluation: cannot make %s: %s", video, strerror(errno));
        return;
    }
    snprintf(video, sizeof video, "%s/videos/eval_%lld.mp4", ev->run_dir, (long long)env_steps);
    snprintf(json, sizeof json, "%s/videos/eval_%lld.json", ev->run_dir, (long long)env_steps);
    snprintf(log, sizeof log, "%s/logs/eval_%lld.log", ev->run_dir, (long long)env_steps);
    snprintf(episodes, sizeof episodes, "%lld", (long long)ev->episodes);
    snprintf(seed, sizeof seed, "%lld", (long long)ev->seed);
    pid_t pid = fork();
    if (pid < 0) {
        GB_WARN("evaluation: fork: %s", strerror(errno));
        return;
    }
    if (pid == 0) {
        int out = open(json, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        int err = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (out < 0 || err < 0 || in < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 ||
            dup2(err, 2) < 0)
            _exit(126);
        signal(SIGINT, SIG_IGN); /* the launcher ends it (gb_evals_finish), not a Ctrl-C */
        execl(ev->exe, ev->exe, "eval", ev->run_dir, "--checkpoint", "trainer-0",
              "--episodes", episodes, "--deterministic", "--json", "--seed", seed, "--video",
              video, (char *)NULL);
        fprintf(stderr, "exec %s: %s\n", ev->exe, strerror(errno));
        _exit(127);
    }
    ev->pid = pid;
    ev->pid_env_steps = env_steps;
    ev->started++;
    GB_INFO("evaluation at %lld env steps started on checkpoint step %lld (pid %d)",
            (long long)env_steps, (long long)ev->last_step, (int)pid);
}

void gb_evals_poll(gb_evals *ev, int64_t env_steps)
{
    if (ev->every <= 0)
        return;
    int status;
    if (ev->pid > 0 && waitpid(ev->pid, &status, WNOHANG) == ev->pid)
        reaped(ev, status);
    if (env_steps >= ev->next) {
        ev->pending = 1;
        ev->next = (env_steps / ev->every + 1) * ev->every;
    }
    if (!ev->pending || ev->pid > 0)
        return;
    char dir[2100];
    snprintf(dir, sizeof dir, "%s/checkpoints", ev->run_dir);
    gb_checkpoint_files ck;
    gb_error err = {0};
    if (gb_checkpoint_find(dir, "trainer-0", &ck, &err) != 0 || ck.step == ev->last_step)
        return; /* no checkpoint yet, or none newer than the last evaluated: wait for one */
    ev->last_step = ck.step;
    ev->pending = 0;
    start(ev, env_steps);
}

/* Waits up to wait_s for the running evaluation, then stops it (SIGTERM, then SIGKILL every
 * 5 s) and reaps it. */
static void wait_child(gb_evals *ev, double wait_s)
{
    if (ev->pid <= 0)
        return;
    GB_INFO("waiting up to %.0f s for the evaluation at %lld env steps", wait_s,
            (long long)ev->pid_env_steps);
    int status, sig = 0;
    double deadline = gb_now_s() + wait_s;
    for (;;) {
        pid_t r = waitpid(ev->pid, &status, WNOHANG);
        if (r == ev->pid) {
            reaped(ev, status);
            return;
        }
        if (r < 0 && errno != EINTR) {
            ev->pid = 0;
            return;
        }
        if (gb_now_s() >= deadline) {
            sig = sig == 0 ? SIGTERM : SIGKILL;
            GB_WARN("evaluation at %lld env steps still running: sending %s",
                    (long long)ev->pid_env_steps, sig == SIGTERM ? "SIGTERM" : "SIGKILL");
            kill(ev->pid, sig);
            deadline = gb_now_s() + 5;
        }
        usleep(20000);
    }
}

void gb_evals_finish(gb_evals *ev, int64_t env_steps, double wait_s)
{
    if (ev->every <= 0)
        return;
    wait_child(ev, wait_s);
    ev->next = INT64_MAX; /* no new crossing: only one still pending starts */
    gb_evals_poll(ev, env_steps);
    wait_child(ev, wait_s);
}
