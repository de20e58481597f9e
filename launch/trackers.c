/* launch/trackers.c: experiment.trackers' followers (see trackers.h): checked, started beside
 * the run, waited for at its end and reported in summary.json. */
#include "launch/trackers.h"

#include "runtime/base/clock.h"
#include "runtime/base/log.h"
#include "runtime/run/rundir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef GEARBOX_DEFAULT_PYTHON
#define GEARBOX_DEFAULT_PYTHON "python3"
#endif
#ifndef GEARBOX_PYTHON_PACKAGE_DIR
#define GEARBOX_PYTHON_PACKAGE_DIR ""
#endif

extern char **environ;

static const char *const tracker_names[] = {"mlflow", "wandb"};
static const char *const export_calls[] = {"to_mlflow", "to_wandb"};

/* The Python the followers run in (see trackers.h) into out. */
static void python_path(const gb_config *cfg, char *out, size_t cap)
{
    const char *env = getenv("GEARBOX_PYTHON");
    const char *py = cfg->experiment.trackers_python[0] ? cfg->experiment.trackers_python
                     : env && env[0]                   ? env
                                                       : GEARBOX_DEFAULT_PYTHON;
    snprintf(out, cap, "%s", py);
}

/* The followers' environment: this one with GEARBOX_BIN (this command: the package checks its
 * version) and the source tree's package first on PYTHONPATH when the tree is there. Built
 * before any fork (the launcher has threads: the child only execs). Owned by the caller
 * (free_env); NULL when out of memory. */
static char **follower_env(void)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **envp = calloc(n + 3, sizeof *envp);
    if (!envp)
        return NULL;
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[len > 0 ? len : 0] = '\0';
    struct stat st;
    const char *pkg = GEARBOX_PYTHON_PACKAGE_DIR;
    int have_pkg = pkg[0] && stat(pkg, &st) == 0 && S_ISDIR(st.st_mode);
    const char *old = getenv("PYTHONPATH");
    size_t k = 0;
    int ok = 1;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "GEARBOX_BIN=", 12) != 0 &&
            (!have_pkg || strncmp(environ[i], "PYTHONPATH=", 11) != 0))
            ok &= (envp[k++] = strdup(environ[i])) != NULL;
    size_t cap = strlen(exe) + strlen(pkg) + (old ? strlen(old) : 0) + 32;
    ok &= (envp[k] = malloc(cap)) != NULL;
    if (envp[k])
        snprintf(envp[k++], cap, "GEARBOX_BIN=%s", exe);
    if (have_pkg && (ok &= (envp[k] = malloc(cap)) != NULL))
        snprintf(envp[k++], cap, "PYTHONPATH=%s%s%s", pkg, old && old[0] ? ":" : "",
                 old ? old : "");
    if (!ok) {
        for (size_t j = 0; j <= n + 2; j++)
            free(envp[j]);
        free(envp);
        return NULL;
    }
    return envp;
}

static void free_env(char **envp)
{
    for (size_t i = 0; envp && envp[i]; i++)
        free(envp[i]);
    free(envp);
}

/* Forks py with argv (argv[0] is py), stdin from in_fd, stdout and stderr to out_fd. The
 * child ignores SIGINT (a Ctrl-C stops the run; the launcher ends the follower). Returns the
 * pid, or -1 with errno. */
static pid_t spawn(const char *py, const char *const *argv, char **envp, int in_fd, int out_fd)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(out_fd, 2) < 0)
        _exit(126);
    signal(SIGINT, SIG_IGN);
    execve(py, (char *const *)argv, envp);
    if (!strchr(py, '/'))
        execvpe(py, (char *const *)argv, envp);
    dprintf(2, "exec %s: %s\n", py, strerror(errno));
    _exit(127);
}

/* Waits for pid at most seconds; then SIGTERM, and SIGKILL 5 s later. Returns its wait
 * status, *late 1 when it had to be ended. */
static int wait_for(pid_t pid, double seconds, int *late)
{
    int status = 0, sent = 0;
    double end = gb_now_s() + seconds;
    *late = 0;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid || (r < 0 && errno != EINTR))
            return status;
        if (gb_now_s() > end) {
            *late = 1;
            kill(pid, sent++ ? SIGKILL : SIGTERM);
            end = gb_now_s() + 5;
        }
        usleep(20000);
    }
}

/* The last non-empty line of text (into out; "" when none). */
static void last_line(const char *text, char *out, size_t cap)
{
    size_t n = strlen(text);
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' '))
        n--;
    size_t s = n;
    while (s > 0 && text[s - 1] != '\n')
        s--;
    snprintf(out, cap, "%.*s", (int)(n - s), text + s);
}

int gb_trackers_check(const gb_config *cfg, const gb_config_marks *marks, gb_error *err)
{
    const gb_config_int_list *tr = &cfg->experiment.trackers;
    if (tr->n == 0)
        return 0;
    for (int i = 0; i < tr->n; i++)
        for (int j = 0; j < i; j++)
            if (tr->v[i] == tr->v[j])
                return gb_config_fail_key(marks, "experiment.trackers", err,
                                          "%s is named twice", tracker_names[tr->v[i]]);
    char py[GB_CONFIG_PATH_MAX];
    python_path(cfg, py, sizeof py);
    const char *key = cfg->experiment.trackers_python[0] ? "experiment.trackers_python"
                                                         : "experiment.trackers";
    /* NULL-ended */
    const char *argv[5 + GB_TRACKERS_MAX] = {py, "-m", "gearbox.follow", "--probe"};
    for (int i = 0; i < tr->n; i++)
        argv[4 + i] = tracker_names[tr->v[i]];
    int fds[2] = {-1, -1}, devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    char **envp = follower_env();
    pid_t pid = -1;
    if (devnull >= 0 && envp && pipe2(fds, O_CLOEXEC) == 0)
        pid = spawn(py, argv, envp, devnull, fds[1]);
    int saved = errno;
    free_env(envp);
    if (devnull >= 0)
        close(devnull);
    if (fds[1] >= 0)
        close(fds[1]);
    if (pid < 0) {
        if (fds[0] >= 0)
            close(fds[0]);
        return gb_error_set(err, GB_ESYS, "experiment.trackers: starting %s: %s", py,
                            strerror(saved));
    }
    char text[4096] = "";
    size_t got = 0;
    ssize_t r;
    while ((r = read(fds[0], text + got, sizeof text - 1 - got)) > 0 ||
           (r < 0 && errno == EINTR))
        got += r > 0 ? (size_t)r : 0;
    text[got] = '\0';
    close(fds[0]);
    int late, status = wait_for(pid, 60, &late);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    char line[1024];
    last_line(text, line, sizeof line);
    const char *how = strstr(text, "No module named 'gearbox'")
                          ? " (install the package into it: pip install ./launch/python)"
                          : "";
    return gb_config_fail_key(marks, key, err, "the trackers' Python %s cannot run them: %s%s",
                              py, line[0] ? line : "it failed", how);
}

void gb_trackers_start(gb_trackers *t, const gb_config *cfg, const char *run_dir)
{
    memset(t, 0, sizeof *t);
    const gb_config_int_list *tr = &cfg->experiment.trackers;
    char py[GB_CONFIG_PATH_MAX], uri[GB_CONFIG_PATH_MAX + PATH_MAX + 16], cwd[PATH_MAX] = "";
    python_path(cfg, py, sizeof py);
    const char *root = cfg->experiment.run_root;
    if (cfg->experiment.mlflow_uri[0])
        snprintf(uri, sizeof uri, "%s", cfg->experiment.mlflow_uri);
    else if (root[0] == '/' || !getcwd(cwd, sizeof cwd))
        snprintf(uri, sizeof uri, "%s/mlruns", root);
    else
        snprintf(uri, sizeof uri, "%s/%s/mlruns", cwd, root);
    char **envp = tr->n ? follower_env() : NULL;
    for (int i = 0; i < tr->n && i < GB_TRACKERS_MAX; i++) {
        const char *name = tracker_names[tr->v[i]];
        t->kind[t->n] = (int)tr->v[i];
        t->fd[t->n] = -1;
        char log[PATH_MAX + 64];
        snprintf(log, sizeof log, "%s/logs/tracker-%s.log", run_dir, name);
        const char *argv[] = {py, "-m", "gearbox.follow", run_dir, name, "--mlflow-uri", uri,
                              NULL};
        int fds[2] = {-1, -1};
        int out = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
        pid_t pid = -1;
        if (envp && out >= 0 && pipe2(fds, O_CLOEXEC) == 0)
            pid = spawn(py, argv, envp, fds[0], out);
        if (pid < 0)
            snprintf(t->why[t->n], sizeof t->why[t->n], "could not start %.160s: %s", py,
                     !envp ? "out of memory" : strerror(errno));
        else
            GB_INFO("tracker %s: pid %d (logs/tracker-%s.log)", name, (int)pid, name);
        if (out >= 0)
            close(out);
        if (fds[0] >= 0)
            close(fds[0]);
        t->pid[t->n] = pid > 0 ? pid : 0;
        t->fd[t->n] = pid > 0 ? fds[1] : -1;
        if (pid <= 0 && fds[1] >= 0)
            close(fds[1]);
        t->n++;
    }
    free_env(envp);
}

int gb_trackers_finish(gb_trackers *t, const gb_rundir *rd, const gb_run_summary *written)
{
    if (t->n == 0)
        return 0;
    const char *run_dir = rd->path;
    for (int i = 0; i < t->n; i++)
        if (t->fd[i] >= 0) {
            close(t->fd[i]); /* the run ended: the follower logs what is left and the summary */
            t->fd[i] = -1;
        }
    char why[GB_TRACKERS_MAX][256];
    int failed = 0;
    for (int i = 0; i < t->n; i++) {
        const char *name = tracker_names[t->kind[i]];
        snprintf(why[i], sizeof why[i], "%s", t->why[i]);
        if (t->pid[i] > 0) {
            int late, status = wait_for(t->pid[i], GB_TRACKERS_WAIT_S, &late);
            char log[PATH_MAX + 64], tail[8192] = "", line[256];
            snprintf(log, sizeof log, "%s/logs/tracker-%s.log", run_dir, name);
            FILE *f = fopen(log, "rb");
            if (f) {
                if (fseek(f, -(long)(sizeof tail - 1), SEEK_END) != 0)
                    rewind(f);
                tail[fread(tail, 1, sizeof tail - 1, f)] = '\0';
                fclose(f);
            }
            /* the follower's own verdict, else what it printed last (a crash) */
            char mark[64];
            snprintf(mark, sizeof mark, "gearbox tracker %s failed: ", name);
            char *said = NULL;
            for (char *p = strstr(tail, mark); p; p = strstr(p + 1, mark))
                said = p;
            if (said) {
                said += strlen(mark);
                snprintf(line, sizeof line, "%.*s", (int)strcspn(said, "\n"), said);
            } else {
                last_line(tail, line, sizeof line);
            }
            if (late)
                snprintf(why[i], sizeof why[i], "did not finish within %.0f s of the run's end",
                         GB_TRACKERS_WAIT_S);
            else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                snprintf(why[i], sizeof why[i], "%s", line[0] ? line : "it failed");
            t->pid[i] = 0;
        }
        if (why[i][0]) {
            failed++;
            fprintf(stderr, "gearbox run: tracker %s failed: %s (%s/logs/tracker-%s.log); the "
                    "run directory is complete: export it afterwards with python -c 'import "
                    "gearbox; gearbox.%s(\"%s\")'\n", name, why[i], run_dir, name,
                    export_calls[t->kind[i]], run_dir);
            GB_ERROR("tracker %s failed: %s", name, why[i]);
        } else {
            GB_INFO("tracker %s: done", name);
        }
    }
    gb_run_tracker out[GB_TRACKERS_MAX];
    for (int i = 0; i < t->n; i++)
        out[i] = (gb_run_tracker){tracker_names[t->kind[i]], why[i][0] ? why[i] : NULL};
    gb_run_summary s = written ? *written : (gb_run_summary){0};
    s.trackers = out;
    s.ntrackers = t->n;
    gb_error err = {0};
    if (written && gb_rundir_write_summary(rd, &s, &err) != 0) {
        fprintf(stderr, "gearbox run: summary.json: adding the trackers' outcome: %s\n",
                err.msg);
        failed += failed == 0;
    }
    return failed;
}
