/* launch/slurm.c: the Slurm backend's job and steps (see slurm.h): salloc for the run's job,
 * srun command lines for its workers, scancel to signal and to release it. */
#include "launch/slurm.h"

#include "launch/supervisor.h"

#include "runtime/base/clock.h"
#include "runtime/base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_ARGS 96

/* Appends a copy of s to argv (n entries so far, cap in all) with its bytes in buf. */
static int push(char **argv, int *n, int cap, char *buf, size_t bufcap, size_t *used,
                const char *s, gb_error *err)
{
    size_t len = strlen(s) + 1;
    if (*n + 1 >= cap || *used + len > bufcap)
        return gb_error_set(err, GB_EINVAL, "slurm: command line too long (at \"%s\")", s);
    memcpy(buf + *used, s, len);
    argv[(*n)++] = buf + *used;
    *used += len;
    argv[*n] = NULL;
    return 0;
}

/* Appends the space-separated words of line (launch.slurm.salloc_args, srun_args). */
static int push_words(char **argv, int *n, int cap, char *buf, size_t bufcap, size_t *used,
                      const char *line, gb_error *err)
{
    char word[GB_CONFIG_PATH_MAX];
    for (const char *p = line; *p;) {
        while (*p == ' ' || *p == '\t')
            p++;
        size_t len = strcspn(p, " \t");
        if (!len)
            break;
        snprintf(word, sizeof word, "%.*s", (int)len, p);
        int rc = push(argv, n, cap, buf, bufcap, used, word, err);
        if (rc)
            return rc;
        p += len;
    }
    return 0;
}

static const gb_config_slurm_role *role_of(const gb_config *cfg, const char *role)
{
    const gb_config_slurm *s = &cfg->launch.slurm;
    if (strcmp(role, "trainer") == 0)
        return &s->trainer;
    if (strcmp(role, "policy") == 0)
        return &s->policy;
    if (strcmp(role, "actor") == 0)
        return &s->actor;
    return &s->params;
}

/* Runs argv (a Slurm client) to its end, output appended to log_path (or /dev/null), within
 * timeout_s. Returns its wait status, or -1 when it could not run or ran out of time. */
static int run_tool(char *const argv[], const char *log_path, double timeout_s)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(log_path ? log_path : "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
        }
        execvp(argv[0], argv);
        dprintf(STDERR_FILENO, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int status = 0;
    for (double end = gb_now_s() + timeout_s;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return status;
        if (r < 0 && errno != EINTR)
            return -1;
        if (gb_now_s() >= end) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        gb_sleep_ms(20);
    }
}

/* Runs argv (a Slurm client) with its stdout read into out (cap bytes, NUL-terminated, the rest
 * dropped) and its stderr appended to log_path, within timeout_s. Returns its wait status, or -1
 * when it could not run or ran out of time. */
static int run_capture(char *const argv[], const char *log_path, double timeout_s, char *out,
                       size_t cap)
{
    int fds[2];
    size_t got = 0;
    out[0] = '\0';
    if (pipe2(fds, O_CLOEXEC) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        int fd = open(log_path ? log_path : "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0644);
        dup2(fds[1], STDOUT_FILENO);
        if (fd >= 0)
            dup2(fd, STDERR_FILENO);
        execvp(argv[0], argv);
        dprintf(STDERR_FILENO, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    int status = 0, late = 0;
    for (double end = gb_now_s() + timeout_s;;) {
        double left = end - gb_now_s();
        if (left <= 0) {
            late = 1;
            break;
        }
        struct pollfd p = {.fd = fds[0], .events = POLLIN};
        int r = poll(&p, 1, (int)(left * 1000) + 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            continue;
        char chunk[512];
        ssize_t n = read(fds[0], chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* end of its output */
        size_t keep = (size_t)n < cap - 1 - got ? (size_t)n : cap - 1 - got;
        memcpy(out + got, chunk, keep);
        got += keep;
        out[got] = '\0';
    }
    close(fds[0]);
    if (late)
        kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return late ? -1 : status;
}

/* Fills j->nodes with the names of the job's nodes, in Slurm's order: `squeue -j J -h -o %N`
 * (a compressed list, "n[1-3]") expanded by `scontrol show hostnames`. Returns 0 or GB_ESYS. */
static int job_nodes(gb_slurm_job *j, gb_error *err)
{
    char id[32], list[4096], names[GB_SLURM_NODES_MAX * GB_SLURM_NODE_NAME_MAX];
    snprintf(id, sizeof id, "%lld", j->id);
    char *squeue[] = {"squeue", "-j", id, "-h", "-o", "%N", NULL};
    int st = run_capture(squeue, j->log_path, 30, list, sizeof list);
    list[strcspn(list, " \t\r\n")] = '\0';
    if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || !list[0])
        return gb_error_set(err, GB_ESYS, "slurm: squeue -j %s -o %%N did not name the job's "
                            "nodes (%s)", id, j->log_path);
    char *scontrol[] = {"scontrol", "show", "hostnames", list, NULL};
    st = run_capture(scontrol, j->log_path, 30, names, sizeof names);
    if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return gb_error_set(err, GB_ESYS, "slurm: scontrol show hostnames %s failed (%s)", list,
                            j->log_path);
    j->nnodes = 0;
    for (char *save = NULL, *name = strtok_r(names, " \t\r\n", &save); name;
         name = strtok_r(NULL, " \t\r\n", &save)) {
        if (j->nnodes == GB_SLURM_NODES_MAX || strlen(name) >= GB_SLURM_NODE_NAME_MAX)
            return gb_error_set(err, GB_ESYS, "slurm: job %s has more than %d nodes or a node "
                                "name longer than %d bytes (%s)", id, GB_SLURM_NODES_MAX,
                                GB_SLURM_NODE_NAME_MAX - 1, name);
        snprintf(j->nodes[j->nnodes++], GB_SLURM_NODE_NAME_MAX, "%s", name);
    }
    if (j->nnodes != j->cfg->launch.slurm.nodes)
        return gb_error_set(err, GB_ESYS, "slurm: job %s has %d nodes (%s), not the %lld asked "
                            "for", id, j->nnodes, list, (long long)j->cfg->launch.slurm.nodes);
    GB_INFO("slurm job %s runs on %d nodes: %s", id, j->nnodes, list);
    return 0;
}

int gb_slurm_relays(const gb_config *cfg)
{
    return cfg->launch.mode == GB_LAUNCH_SLURM ? (int)cfg->launch.slurm.nodes : 1;
}

/* The job id in salloc's output ("Granted job allocation N", "Pending job allocation N"), and
 * whether it was granted. Returns the id or 0. */
static long long scan_log(const char *path, int *granted, char *last, size_t lastcap)
{
    FILE *f = fopen(path, "r");
    long long id = 0;
    *granted = 0;
    if (!f)
        return 0;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        const char *p;
        if ((p = strstr(line, "Granted job allocation ")))
            id = atoll(p + strlen("Granted job allocation ")), *granted = 1;
        else if ((p = strstr(line, "Pending job allocation ")) && !id)
            id = atoll(p + strlen("Pending job allocation "));
        if (line[0] != '\n') {
            size_t len = strcspn(line, "\n");
            if (len >= lastcap)
                len = lastcap - 1;
            memcpy(last, line, len);
            last[len] = '\0';
        }
    }
    fclose(f);
    return id;
}

/* What the run's job asks for on one node: every step's share (launch.slurm.<role>). */
static void job_request(const gb_config *cfg, long long *cpus, long long *gpus, long long *mem)
{
    const struct { const char *role; int64_t count; } roles[] = {
        {"params", 1}, {"trainer", cfg->trainer.count}, {"policy", cfg->policy.count},
        {"actor", cfg->actors.count},
        {"relay", cfg->parameters.relay == GB_RELAY_PER_HOST}}; /* a relay: params' resources */
    *cpus = *gpus = *mem = 0;
    for (int r = 0; r < 5; r++) {
        const gb_config_slurm_role *sr = role_of(cfg, roles[r].role);
        *cpus += sr->cpus * roles[r].count;
        *gpus += sr->gpus * roles[r].count;
        *mem += sr->mem_mb * roles[r].count;
    }
}

/* The salloc command line of the run's job into argv (MAX_ARGS entries, the strings in buf):
 * the whole run's resources on one node (every step's share), or whole nodes. */
static int salloc_argv(const gb_slurm_job *j, const gb_config *cfg, char **argv, char *buf,
                       size_t bufcap, gb_error *err)
{
    const gb_config_slurm *s = &cfg->launch.slurm;
    long long cpus, gpus, mem;
    job_request(cfg, &cpus, &gpus, &mem);
    char opt[GB_CONFIG_PATH_MAX + 32];
    size_t used = 0;
    int n = 0, rc = 0;
#define PUSH(str) \
    do { if (!rc) rc = push(argv, &n, MAX_ARGS, buf, bufcap, &used, (str), err); } while (0)
#define PUSHF(...) do { snprintf(opt, sizeof opt, __VA_ARGS__); PUSH(opt); } while (0)
    PUSH("salloc");
    PUSHF("--job-name=%s", j->name);
    PUSHF("--nodes=%lld", (long long)s->nodes);
    if (s->partition[0])
        PUSHF("--partition=%s", s->partition);
    if (s->account[0])
        PUSHF("--account=%s", s->account);
    if (s->time_limit[0])
        PUSHF("--time=%s", s->time_limit);
    if (s->nodes == 1) {
        PUSH("--ntasks=1");
        PUSHF("--cpus-per-task=%lld", cpus);
        if (gpus)
            PUSHF("--gpus=%lld", gpus);
        if (mem)
            PUSHF("--mem=%lld", mem);
    } else {
        PUSH("--exclusive");
    }
    if (!rc)
        rc = push_words(argv, &n, MAX_ARGS, buf, bufcap, &used, s->salloc_args, err);
    /* the allocation lasts as long as this command, which lasts as long as the launcher */
    PUSH("--");
    PUSH("tail");
    PUSHF("--pid=%d", (int)getpid());
    PUSH("-f");
    PUSH("/dev/null");
#undef PUSH
#undef PUSHF
    return rc;
}

/* Starts argv (salloc) in its own process group with its output appended to the job's log,
 * after the command line itself. Returns 0 with j->salloc set, or GB_ESYS. */
static int start_salloc(gb_slurm_job *j, char *const argv[], gb_error *err)
{
    int fd = open(j->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return gb_error_errno(err, "open %s", j->log_path);
    dprintf(fd, "$");
    for (int i = 0; argv[i]; i++)
        dprintf(fd, " %s", argv[i]);
    dprintf(fd, "\n");
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fd);
        return gb_error_errno(err, "fork for salloc");
    }
    if (pid == 0) {
        /* own process group: a Ctrl-C reaches the launcher only; it releases the job itself */
        gb_supervisor_child_setup(fd, parent);
        execvp(argv[0], argv);
        dprintf(STDERR_FILENO, "exec %s: %s (is Slurm's client installed and on PATH?)\n",
                argv[0], strerror(errno));
        _exit(127);
    }
    close(fd);
    j->salloc = pid;
    return 0;
}

/* A pending job's reason (squeue %r) into reason; "" when squeue does not say. */
static void pending_reason(const gb_slurm_job *j, char *reason, size_t cap)
{
    char id[32];
    snprintf(id, sizeof id, "%lld", j->id);
    char *argv[] = {"squeue", "-j", id, "-h", "-o", "%r", NULL};
    int st = run_capture(argv, j->log_path, 10, reason, cap);
    if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        reason[0] = '\0';
    reason[strcspn(reason, " \t\r\n")] = '\0';
}

/* The settings to change when Slurm's reason says the job can never start as asked, or NULL
 * when it may still start (Resources, Priority, a node down, a group limit: other jobs end). */
static const char *hopeless(const char *reason)
{
    static const struct { const char *reason, *fix; } never[] = {
        {"PartitionConfig", "the request exceeds what the partition's nodes have: lower "
                            "launch.slurm.<role>.cpus, gpus or mem_mb, or name another "
                            "launch.slurm.partition"},
        {"PartitionNodeLimit", "lower launch.slurm.nodes or name another launch.slurm.partition"},
        {"PartitionTimeLimit", "shorten launch.slurm.time_limit or name another partition"},
        {"BadConstraints", "the constraints cannot be met: check launch.slurm.salloc_args"},
        {"InvalidAccount", "check launch.slurm.account"},
        {"InvalidQOS", "check the QOS in launch.slurm.salloc_args"},
    };
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++)
        if (strcmp(reason, never[i].reason) == 0)
            return never[i].fix;
    /* QOS and association limits per job (QOSMaxCpuPerJobLimit, AssocMaxWallDurationPerJob...):
     * no other job's end lifts them */
    if (strstr(reason, "PerJob"))
        return "the job exceeds a per-job limit of its QOS or account: lower "
               "launch.slurm.<role>.cpus, gpus, mem_mb or launch.slurm.time_limit";
    return NULL;
}

/* A pending job's reason, asked every second: one Slurm will never grant ends the wait with the
 * reason and the settings to change; another is said once each time it changes. Returns 0 (go
 * on waiting) or GB_ECONFIG. */
static int check_pending(gb_slurm_job *j, char *said, size_t cap, gb_error *err)
{
    char reason[128];
    pending_reason(j, reason, sizeof reason);
    if (!reason[0] || strcmp(reason, "None") == 0 || strcmp(reason, said) == 0)
        return 0; /* "None": not evaluated yet, or granted since */
    snprintf(said, cap, "%s", reason);
    const char *fix = hopeless(reason);
    if (!fix) {
        GB_INFO("slurm job %lld (%s) is pending (Reason=%s): the run starts when Slurm grants it",
                j->id, j->name, reason);
        return 0;
    }
    long long cpus, gpus, mem;
    job_request(j->cfg, &cpus, &gpus, &mem);
    return gb_error_set(err, GB_ECONFIG, "slurm: job %lld can never start: Slurm holds it with "
                        "Reason=%s (the run asks for %lld CPUs, %lld GPUs and %lld MB on %lld "
                        "node(s)%s%s): %s", j->id, reason, cpus, gpus, mem,
                        (long long)j->cfg->launch.slurm.nodes,
                        j->cfg->launch.slurm.partition[0] ? " of partition " : "",
                        j->cfg->launch.slurm.partition, fix);
}

/* Follows salloc's log until the job is granted (then, for per_host relays or several trainers
 * on several nodes, reads its nodes' names), salloc ends, or *interrupted. Returns 0, GB_ESYS
 * or GB_EINTR. */
static int wait_granted(gb_slurm_job *j, atomic_int *interrupted, gb_error *err)
{
    const gb_config *cfg = j->cfg;
    pid_t pid = j->salloc;
    char last[512] = "", said[128] = "";
    int granted = 0, said_pending = 0;
    for (int tick = 0;; tick++) {
        j->id = scan_log(j->log_path, &granted, last, sizeof last);
        if (granted) {
            GB_INFO("slurm job %lld (%s) granted: watch it with `squeue -j %lld`, its steps "
                    "with `squeue -s -j %lld`", j->id, j->name, j->id, j->id);
            /* per_host relays (one a node) or several trainers (spread over them) on several
             * nodes: the nodes' names */
            return cfg->launch.slurm.nodes > 1 && (cfg->parameters.relay == GB_RELAY_PER_HOST ||
                                                   cfg->trainer.count > 1)
                       ? job_nodes(j, err)
                       : 0;
        }
        if (j->id && !said_pending) {
            GB_INFO("slurm job %lld (%s) is pending: the run starts when Slurm grants it",
                    j->id, j->name);
            said_pending = 1;
        }
        if (j->id && tick % 20 == 0) {
            int rc = check_pending(j, said, sizeof said, err);
            if (rc)
                return rc;
        }
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            j->salloc = 0;
            j->id = scan_log(j->log_path, &granted, last, sizeof last);
            char how[64];
            if (WIFEXITED(status))
                snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(status));
            else
                snprintf(how, sizeof how, "was killed by signal %d", WTERMSIG(status));
            return gb_error_set(err, GB_ESYS, "slurm: salloc %s before the job was granted: %s "
                                "(%s)", how, last[0] ? last : "no output", j->log_path);
        }
        if (atomic_load(interrupted))
            return gb_error_set(err, GB_EINTR, "slurm: interrupted while job %lld was pending",
                                j->id);
        gb_sleep_ms(50);
    }
}

int gb_slurm_allocate(gb_slurm_job *j, const gb_config *cfg, const char *log_path,
                      atomic_int *interrupted, gb_error *err)
{
    memset(j, 0, sizeof *j);
    j->cfg = cfg;
    snprintf(j->name, sizeof j->name, "gearbox:%s", cfg->experiment.name);
    snprintf(j->log_path, sizeof j->log_path, "%s", log_path);
    char *argv[MAX_ARGS], buf[8192];
    int rc = salloc_argv(j, cfg, argv, buf, sizeof buf, err);
    if (rc == 0)
        rc = start_salloc(j, argv, err);
    if (rc == 0)
        rc = wait_granted(j, interrupted, err);
    return rc;
}

int gb_slurm_step_argv(const gb_slurm_job *j, const char *role, int index,
                       char *const worker_argv[], char **out, int cap, char *buf, size_t bufcap,
                       gb_error *err)
{
    const gb_config_slurm_role *sr = role_of(j->cfg, role);
    char opt[GB_CONFIG_PATH_MAX + 32];
    size_t used = 0;
    int n = 0, rc = 0;
#define PUSH(str) \
    do { if (!rc) rc = push(out, &n, cap, buf, bufcap, &used, (str), err); } while (0)
#define PUSHF(...) do { snprintf(opt, sizeof opt, __VA_ARGS__); PUSH(opt); } while (0)
    PUSH("srun");
    PUSHF("--jobid=%lld", j->id);
    PUSHF("--job-name=%s-%d", role, index);
    PUSH("--nodes=1");
    PUSH("--ntasks=1");
    /* per_host relays on several nodes: relay k on node k, policy i beside relay i mod nodes */
    int per_node = j->nnodes > 1 && j->cfg->parameters.relay == GB_RELAY_PER_HOST;
    int relay = strcmp(role, "relay") == 0, policy = strcmp(role, "policy") == 0;
    if (per_node && relay && (index < 0 || index >= j->nnodes))
        return gb_error_set(err, GB_EINVAL, "slurm: relay %d but the job has %d nodes", index,
                            j->nnodes);
    if (per_node && (relay || policy)) {
        const char *node = j->nodes[index % j->nnodes];
        PUSHF("--nodelist=%s", node);
        PUSHF("--export=ALL,GEARBOX_HOST=%s", node);
    }
    /* several trainers on several nodes: trainer i on node i mod nodes (their replay shards
     * and learning spread over the job's machines, not wherever Slurm packs them) */
    if (j->nnodes > 1 && j->cfg->trainer.count > 1 && strcmp(role, "trainer") == 0)
        PUSHF("--nodelist=%s", j->nodes[index % j->nnodes]);
    PUSHF("--cpus-per-task=%lld", (long long)sr->cpus);
    if (sr->gpus)
        PUSHF("--gpus=%lld", (long long)sr->gpus);
    if (sr->mem_mb)
        PUSHF("--mem=%lld", (long long)sr->mem_mb);
    PUSH("--exact"); /* only its own share: the other steps run beside it */
    PUSH("--quiet");
    if (!rc)
        rc = push_words(out, &n, cap, buf, bufcap, &used, j->cfg->launch.slurm.srun_args, err);
    PUSH("--");
    for (int i = 0; worker_argv[i]; i++)
        PUSH(worker_argv[i]);
#undef PUSH
#undef PUSHF
    if (rc)
        return rc;
    /* supervisor children are exec'd with execv: srun needs its path */
    static char srun_path[1024];
    if (!srun_path[0]) {
        const char *path = getenv("PATH");
        snprintf(srun_path, sizeof srun_path, "srun");
        for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
            size_t len = strcspn(p, ":");
            char cand[1024];
            snprintf(cand, sizeof cand, "%.*s/srun", (int)len, p);
            if (len && access(cand, X_OK) == 0) {
                snprintf(srun_path, sizeof srun_path, "%s", cand);
                break;
            }
            p += len + (p[len] == ':');
        }
    }
    out[0] = srun_path;
    return 0;
}

void gb_slurm_signal_steps(void *arg)
{
    gb_slurm_job *j = arg;
    if (!j->id)
        return;
    char id[32];
    snprintf(id, sizeof id, "%lld", j->id);
    char *argv[] = {"scancel", "--signal=TERM", id, NULL};
    int st = run_tool(argv, j->log_path, 10);
    if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        GB_WARN("slurm: scancel --signal=TERM %s failed (%s)", id, j->log_path);
}

int gb_slurm_release(gb_slurm_job *j, gb_error *err)
{
    int rc = 0;
    if (j->id) {
        char id[32];
        snprintf(id, sizeof id, "%lld", j->id);
        char *argv[] = {"scancel", id, NULL};
        int st = run_tool(argv, j->log_path, 30);
        if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            rc = gb_error_set(err, GB_ESYS, "slurm: scancel %s failed (%s): cancel it by hand",
                              id, j->log_path);
        else
            GB_INFO("slurm job %s cancelled", id);
    }
    if (j->salloc > 0) {
        /* the job is cancelled (or was never granted: salloc cancels a pending one on
         * SIGTERM); salloc would wait for its command (tail) a while before it ends: end both */
        int status;
        double end = gb_now_s() + 5;
        char path[64], list[256] = "";
        snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)j->salloc, (int)j->salloc);
        FILE *f = fopen(path, "r");
        if (f) { /* salloc's command: tail, which salloc may not pass a signal to */
            size_t got = fread(list, 1, sizeof list - 1, f);
            list[got] = '\0';
            fclose(f);
        }
        for (char *p = list, *e; *p; p = e) {
            long child = strtol(p, &e, 10);
            if (e == p)
                break;
            if (child > 0)
                kill((pid_t)child, SIGTERM);
        }
        kill(j->salloc, SIGTERM);
        while (waitpid(j->salloc, &status, WNOHANG) == 0) {
            if (gb_now_s() >= end) {
                kill(-j->salloc, SIGKILL);
                waitpid(j->salloc, &status, 0);
                break;
            }
            gb_sleep_ms(20);
        }
        j->salloc = 0;
    }
    j->id = 0;
    return rc;
}
