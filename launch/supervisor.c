/* launch/supervisor.c: worker processes (see supervisor.h). */
#include "launch/supervisor.h"

#include "runtime/base/clock.h"
#include "runtime/base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

void gb_supervisor_child_setup(int log_fd, pid_t parent)
{
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
        _exit(1); /* the launcher died before prctl took effect */
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0)
        dup2(devnull, STDIN_FILENO);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
}

extern char **environ;

void gb_supervisor_last_words(const char *msg)
{
    const char *v = getenv(GB_LAST_WORDS_ENV);
    char *end = NULL;
    long fd = v ? strtol(v, &end, 10) : -1;
    struct stat st;
    if (fd < 3 || !end || *end || fstat((int)fd, &st) != 0 || !S_ISFIFO(st.st_mode))
        return;
    size_t len = strnlen(msg, 255);
    ssize_t w = write((int)fd, msg, len);
    (void)w;
    close((int)fd);
}

/* The environment of a child with last words: the launcher's, and GEARBOX_LAST_WORDS_FD=fd
 * (made before the fork: nothing but async-signal-safe calls after it). NULL: out of memory. */
static char **words_environ(int fd, char *var, size_t cap)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 2, sizeof *env);
    if (!env)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], GB_LAST_WORDS_ENV "=", sizeof GB_LAST_WORDS_ENV) != 0)
            env[k++] = environ[i];
    snprintf(var, cap, GB_LAST_WORDS_ENV "=%d", fd);
    env[k++] = var;
    env[k] = NULL;
    return env;
}

/* Forks c's command line with stdout and stderr appended to its log; with words (a local
 * worker), a pipe for its last words. */
static int start(gb_child *c, int words, gb_error *err)
{
    int fd = open(c->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return gb_error_errno(err, "open %s", c->log_path);
    if (c->words_fd >= 0)
        close(c->words_fd);
    c->words_fd = -1;
    c->last_words[0] = '\0';
    int p[2] = {-1, -1};
    char var[64];
    char **env = NULL;
    if (words && pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0 &&
        !(env = words_environ(p[1], var, sizeof var))) {
        close(p[0]);
        close(p[1]);
        p[0] = p[1] = -1;
    }
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd);
        if (p[0] >= 0) {
            close(p[0]);
            close(p[1]);
        }
        free(env);
        return gb_error_errno(err, "fork for %s-%d", c->role, c->index);
    }
    if (pid == 0) {
        gb_supervisor_child_setup(fd, parent);
        if (env) { /* the write end stays open across exec */
            fcntl(p[1], F_SETFD, 0);
            execve(c->argv[0], c->argv, env);
        }
        execv(c->argv[0], c->argv);
        dprintf(STDERR_FILENO, "exec %s: %s\n", c->argv[0], strerror(errno));
        _exit(127);
    }
    close(fd);
    free(env);
    if (p[1] >= 0)
        close(p[1]);
    c->words_fd = p[0];
    setpgid(pid, pid); /* also from the parent: no race with the first signal */
    c->pid = pid;
    c->running = 1;
    c->reported = 0;
    c->killed = 0;
    c->status = 0;
    c->started_s = gb_now_s();
    return 0;
}

/* Copies argv (NULL-terminated) into c->args, leaving room for "--incarnation N". */
static int keep_argv(gb_child *c, char *const argv[], gb_error *err)
{
    size_t used = 0;
    int n = 0;
    for (; argv[n]; n++) {
        size_t len = strlen(argv[n]) + 1;
        if (n + 2 >= GB_CHILD_MAX_ARGS || used + len + 32 > sizeof c->args)
            return gb_error_set(err, GB_EINVAL, "%s-%d: command line too long", c->role,
                                c->index);
        memcpy(c->args + used, argv[n], len);
        c->argv[n] = c->args + used;
        used += len;
    }
    c->argv[n] = NULL;
    return 0;
}

int gb_supervisor_spawn(gb_supervisor *s, const char *role, int index, char *const argv[],
                        const char *log_path, gb_error *err)
{
    if (s->n == GB_SUPERVISOR_MAX_CHILDREN)
        return gb_error_set(err, GB_EFULL, "more than %d worker processes",
                            GB_SUPERVISOR_MAX_CHILDREN);
    gb_child *c = &s->children[s->n];
    memset(c, 0, sizeof *c);
    snprintf(c->role, sizeof c->role, "%s", role);
    c->index = index;
    snprintf(c->log_path, sizeof c->log_path, "%s", log_path);
    c->words_fd = -1;
    int rc = keep_argv(c, argv, err);
    if (rc == 0 && (rc = start(c, !s->stop_hook, err)) == 0)
        s->n++;
    return rc;
}

int gb_supervisor_restart(gb_supervisor *s, gb_child *c, gb_error *err)
{
    (void)s;
    if (c->running)
        return gb_error_set(err, GB_EINVAL, "%s-%d is still running", c->role, c->index);
    /* "--incarnation N" goes last: the first restart appends it, later ones rewrite N */
    int n = 0;
    while (c->argv[n])
        n++;
    if (!c->incarnation) {
        char *end = c->argv[n - 1] + strlen(c->argv[n - 1]) + 1;
        memcpy(end, "--incarnation", sizeof "--incarnation");
        c->argv[n++] = end;
        c->argv[n++] = end + sizeof "--incarnation";
        c->argv[n] = NULL;
    }
    c->incarnation++;
    snprintf(c->argv[n - 1], 16, "%d", c->incarnation);
    return start(c, !s->stop_hook, err);
}

void gb_supervisor_kill(gb_supervisor *s, gb_child *c)
{
    if (!c->running)
        return;
    if (s->kill_term_s > 0) { /* srun: SIGTERM cancels its step (supervisor.h) */
        kill(c->pid, SIGTERM);
        double deadline = gb_now_s() + s->kill_term_s;
        int status = 0;
        while (gb_now_s() < deadline) {
            pid_t r = waitpid(c->pid, &status, WNOHANG);
            if (r == c->pid || (r < 0 && errno != EINTR)) {
                c->running = 0;
                c->reported = 1;
                c->status = r == c->pid ? status : 0;
                return;
            }
            gb_sleep_ms(10);
        }
    }
    kill(-c->pid, SIGKILL);
    kill(c->pid, SIGKILL);
    int status = 0;
    while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR) {
    }
    c->running = 0;
    c->reported = 1; /* the caller killed it: it knows */
    c->status = status;
}

/* What an ended child wrote to its last-words pipe (one line, cut to fit), then the pipe
 * closed. */
static void read_last_words(gb_child *c)
{
    if (c->words_fd < 0)
        return;
    ssize_t got = read(c->words_fd, c->last_words, sizeof c->last_words - 1);
    c->last_words[got > 0 ? got : 0] = '\0';
    char *nl = strchr(c->last_words, '\n');
    if (nl)
        *nl = '\0';
    close(c->words_fd);
    c->words_fd = -1;
}

gb_child *gb_supervisor_reap(gb_supervisor *s)
{
    gb_child *first = NULL;
    for (int i = 0; i < s->n; i++) {
        gb_child *c = &s->children[i];
        if (c->running) {
            int status;
            pid_t r = waitpid(c->pid, &status, WNOHANG);
            if (r == c->pid || (r < 0 && errno == ECHILD)) {
                c->running = 0;
                c->status = r == c->pid ? status : 0;
                read_last_words(c);
            }
        }
        if (!c->running && !c->reported && !first) {
            c->reported = 1;
            first = c;
        }
    }
    return first;
}

int gb_supervisor_running(const gb_supervisor *s)
{
    int n = 0;
    for (int i = 0; i < s->n; i++)
        n += s->children[i].running;
    return n;
}

static int running_of(const gb_supervisor *s, const char *role)
{
    int n = 0;
    for (int i = 0; i < s->n; i++)
        n += s->children[i].running && strcmp(s->children[i].role, role) == 0;
    return n;
}

/* 10 ms of waiting for children: the while_waiting hook's, or a sleep. */
static void wait_a_little(gb_supervisor *s)
{
    if (s->while_waiting)
        s->while_waiting(s->waiting_arg, 10);
    else
        gb_sleep_ms(10);
}

int gb_supervisor_wait_role(gb_supervisor *s, const char *role, double grace_s)
{
    double deadline = gb_now_s() + grace_s;
    while (running_of(s, role) && gb_now_s() < deadline) {
        gb_supervisor_reap(s);
        if (running_of(s, role))
            wait_a_little(s);
    }
    return running_of(s, role);
}

/* Whether c may run on at now, past the stop's deadline: it is busy (s->busy), or was within
 * the last settle seconds (it still has to end after its work). Says so when it starts to. */
static int may_run_on(gb_supervisor *s, gb_child *c, double now, double last, double settle)
{
    const char *what = s->busy && now < last ? s->busy(s->busy_arg, c) : NULL;
    if (what) {
        if (c->busy_until == 0)
            GB_INFO("%s-%d is writing %s: the stop waits for it (up to %.0f s)", c->role,
                    c->index, what, last - now);
        c->busy_until = now + settle < last ? now + settle : last;
    }
    return now < c->busy_until;
}

int gb_supervisor_stop_all(gb_supervisor *s, double grace_s)
{
    if (s->stop_hook && gb_supervisor_running(s))
        s->stop_hook(s->stop_arg); /* Slurm steps: the workers get SIGTERM, not their sruns */
    else
        for (int i = 0; i < s->n; i++)
            if (s->children[i].running)
                kill(-s->children[i].pid, SIGTERM); /* the whole group: what a worker forked */
    double deadline = gb_now_s() + grace_s;
    double last = deadline + (s->busy_max_s > 0 ? s->busy_max_s : 0);
    double settle = grace_s > 2 ? grace_s : 2;
    for (int i = 0; i < s->n; i++)
        s->children[i].busy_until = 0;
    int killed = 0;
    for (;;) {
        gb_supervisor_reap(s);
        double now = gb_now_s();
        int left = 0;
        for (int i = 0; i < s->n; i++) {
            gb_child *c = &s->children[i];
            if (!c->running || now < deadline || may_run_on(s, c, now, last, settle)) {
                left += c->running;
                continue;
            }
            gb_supervisor_kill(s, c);
            c->killed = 1;
            killed++;
        }
        if (!left)
            return killed;
        wait_a_little(s);
    }
}

int gb_supervisor_failures(const gb_supervisor *s, char *buf, size_t n)
{
    int count = 0;
    size_t used = 0;
    if (n)
        buf[0] = '\0';
    for (int i = 0; i < s->n; i++) {
        const gb_child *c = &s->children[i];
        if (c->running)
            continue;
        char how[384];
        if (c->killed)
            snprintf(how, sizeof how, "did not stop within the grace and was killed");
        else if (WIFEXITED(c->status) && WEXITSTATUS(c->status) == 0)
            continue;
        else if (WIFSIGNALED(c->status) && WTERMSIG(c->status) == SIGTERM)
            continue; /* the stop's own SIGTERM, before the worker installed its handler */
        else
            gb_child_describe(c, how, sizeof how);
        if (count++ < 4 && used < n)
            used += (size_t)snprintf(buf + used, n - used, "%s%s-%d %s", used ? "; " : "",
                                     c->role, c->index, how);
    }
    if (count > 4 && used < n)
        snprintf(buf + used, n - used, "; and %d more", count - 4);
    return count;
}

void gb_child_describe(const gb_child *c, char *buf, size_t n)
{
    if (WIFEXITED(c->status) && c->last_words[0])
        snprintf(buf, n, "exited with status %d (%s)", WEXITSTATUS(c->status), c->last_words);
    else if (WIFEXITED(c->status))
        snprintf(buf, n, "exited with status %d", WEXITSTATUS(c->status));
    else if (WIFSIGNALED(c->status))
        snprintf(buf, n, "killed by signal %d (%s)", WTERMSIG(c->status),
                 strsignal(WTERMSIG(c->status)));
    else
        snprintf(buf, n, "ended (status 0x%x)", c->status);
}

void gb_log_tail(const char *path, int lines, const char *prefix, FILE *out)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(out, "%s(no log at %s)\n", prefix, path);
        return;
    }
    /* Read at most the last 64 KB and print its last `lines` lines. */
    char buf[65536];
    long size = 0;
    if (fseek(f, 0, SEEK_END) == 0)
        size = ftell(f);
    long start = size > (long)sizeof buf - 1 ? size - (long)sizeof buf + 1 : 0;
    fseek(f, start, SEEK_SET);
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[got] = '\0';
    char *p = buf + got;
    int seen = 0;
    while (p > buf) {
        if (p[-1] == '\n' && p != buf + got && ++seen > lines)
            break;
        p--;
    }
    while (*p) {
        char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        fprintf(out, "%s%.*s\n", prefix, (int)len, p);
        if (!nl)
            break;
        p = nl + 1;
    }
}
