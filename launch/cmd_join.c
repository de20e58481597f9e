/* launch/cmd_join.c: `gearbox join REGISTRY_ENDPOINT --role actor|policy|trainer [--count K]
 * [--interface ADDR]`: workers on this host join a run that a launcher on another host is
 * running. Each asks the run's registry for a slot (launch/joins.h), which answers with its
 * index and the run's resolved config, metrics endpoint and identity: nothing is read from the
 * run directory, which this host need not see. The workers are the ones `gearbox worker` runs
 * (gb_worker_process), one process each; they register, report to the launcher, and stop by the
 * run's control at its end. SIGINT/SIGTERM to this command makes them leave the run early
 * (actors send what they hold first); the run goes on without them.
 * defines: gb_cmd_join */
#include "launch/cli.h"
#include "launch/commands.h"
#include "launch/restart_window.h"
#include "launch/run_identity.h"
#include "launch/validate.h"

#include "runtime/base/clock.h"
#include "runtime/config/config.h"
#include "runtime/run/rundir.h"
#include "runtime/streams/curve.h"
#include "runtime/streams/endpoint.h"
#include "runtime/streams/registry.h"
#include "runtime/streams/wire.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#define JOIN_MAX_COUNT 256
#define JOIN_LEAVE_GRACE_S 10.0 /* after SIGTERM, workers still running then are killed */

static atomic_int join_signal;

static void on_join_signal(int sig) { atomic_store(&join_signal, sig); }

static void join_usage(FILE *out)
{
    fprintf(out,
            "usage: gearbox join REGISTRY_ENDPOINT --role actor|policy|trainer [--count K]\n"
            "                    [--interface ADDR] [--keys DIR] [--dir DIR]\n\n"
            "Starts K workers (default 1) on this host that join a running run: they get the\n"
            "run's config and their slots from its registry (the launcher prints the endpoint,\n"
            "e.g. tcp://10.1.0.1:40125, and writes it to RUN_DIR/registry), report to its\n"
            "launcher and stop when the run ends. SIGINT/SIGTERM makes them leave early; the\n"
            "run goes on without them.\n\n"
            "  --role actor|policy  actors join as long as actors.count + actors.join_max allow;\n"
            "                       policy workers fill the slots the launcher left to joiners\n"
            "                       (policy.local < policy.count); with parameters.relay\n"
            "                       per_host this host's parameter relay joins with them\n"
            "                       (one `gearbox join --role policy` a host: use --count);\n"
            "                       a policy worker or relay that dies is started again\n"
            "                       here (launch.restart, as a trainer); a joined actor is\n"
            "                       not (join another)\n"
            "  --role trainer       trainers fill the slots trainer.local left (trainer 0 is\n"
            "                       the launcher's); they must join within\n"
            "                       trainer.rendezvous.timeout_s of the run's start; one that\n"
            "                       dies is started again here (launch.restart.max_restarts\n"
            "                       times within window_s) and the trainers form their group\n"
            "                       again with it\n"
            "  --count K            how many workers to start (default 1)\n"
            "  --interface ADDR     address (or interface name) this host's workers bind and\n"
            "                       publish; default: the address this host reaches the\n"
            "                       registry from\n"
            "  --keys DIR           a folder with copies of the run's RUN_DIR/keys/server.key\n"
            "                       and client.key (a tcp run uses CURVE by default: without\n"
            "                       them the registry does not answer); the run sends each\n"
            "                       slot its own key pair, kept in a private folder while the\n"
            "                       workers run\n"
            "  --dir DIR            trainers: where they keep their checkpoints and name their\n"
            "                       replay's shared memory on this host (default\n"
            "                       ./gearbox-join/<the run's folder name>)\n\n"
            "exit status: 0 when the workers stopped cleanly (the run ended, or they left on a\n"
            "signal), 1 when one failed or no slot was given, 2 usage error, or the run's\n"
            "config cannot run here (its environment, a policy worker's cuda device: the\n"
            "checks of gearbox check)\n");
}

/* The local address this host uses to reach the registry's host (tcp://HOST:PORT): what peers
 * on that network can connect back to. No packet is sent (a UDP socket's connect only picks the
 * route). Returns 0 or GB_EINVAL/GB_ENOTFOUND/GB_ESYS. */
static int address_towards(const char *endpoint, char *out, size_t cap, gb_error *err)
{
    char host[256], service[16];
    int port;
    if (gb_endpoint_tcp_split(endpoint, host, sizeof host, &port) != 0)
        return gb_error_set(err, GB_EINVAL, "registry endpoint '%s': expected tcp://HOST:PORT",
                            endpoint);
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM}, *ai = NULL;
    int g = getaddrinfo(host, service, &hints, &ai);
    if (g != 0)
        return gb_error_set(err, GB_ENOTFOUND, "registry host '%s': %s", host, gai_strerror(g));
    int fd = socket(AF_INET, SOCK_DGRAM, 0), rc = 0;
    struct sockaddr_in self;
    socklen_t len = sizeof self;
    if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 ||
        getsockname(fd, (struct sockaddr *)&self, &len) != 0 ||
        !inet_ntop(AF_INET, &self.sin_addr, out, (socklen_t)cap))
        rc = gb_error_errno(err, "no route from this host to the registry's %s", host);
    if (fd >= 0)
        close(fd);
    freeaddrinfo(ai);
    return rc;
}

/* The run's config from a join answer (every answer carries the same), with streams.interface
 * set to this host's address, validated for what runs here (launch/validate.h: the role's
 * environment and device; GB_ECONFIG: this host cannot run it). */
static int read_config(const gb_registry_join_reply *slot, int role, const char *interface,
                       gb_config *cfg, gb_error *err)
{
    gb_config_marks *marks = NULL;
    int rc = gb_config_load_string(cfg, &marks, "the run's config (from its registry)",
                                   slot->config, slot->config_len, err);
    if (rc == 0 && cfg->streams.transport == GB_TRANSPORT_TCP) {
        char set[GB_CONFIG_NAME_MAX + 32];
        snprintf(set, sizeof set, "streams.interface=\"%s\"", interface);
        rc = gb_config_apply_set(cfg, marks, set, 1, err);
    }
    if (rc == 0)
        rc = gb_config_finish(cfg, marks, err);
    /* with the messages `gearbox check` gives, before any worker starts here */
    gb_validate_here here = role == GB_ROLE_POLICY    ? GB_VALIDATE_JOIN_POLICY
                            : role == GB_ROLE_TRAINER ? GB_VALIDATE_JOIN_TRAINER
                                                      : GB_VALIDATE_JOIN_ACTOR;
    if (rc == 0 && role != GB_ROLE_RELAY)
        rc = gb_validate_check(cfg, marks, &here, err);
    gb_config_marks_free(marks);
    return rc;
}

/* A registry client that only asks (no heartbeat thread: ttl must exceed it), on a context of
 * its own, speaking as role/index: with the run's client key (keys, index < 0), or with that
 * worker's own key pair (index >= 0), or (keys NULL) without credentials. */
typedef struct asker {
    void *zctx;
    gb_curve *curve;
    gb_registry_client *reg;
} asker;

static int asker_open(asker *k, const char *registry, const char *keys, int role, int index,
                      gb_error *err)
{
    memset(k, 0, sizeof *k);
    gb_registry_client_opts ro = {.endpoint = registry, .timeout_ms = 10000, .heartbeat_ms = 0,
                                  .ttl_ms = 1, .role = role, .index = index < 0 ? 0 : index};
    k->zctx = zmq_ctx_new();
    int rc = k->zctx ? 0 : gb_error_set(err, GB_EZMQ, "zmq_ctx_new failed");
    if (rc == 0 && keys)
        rc = index < 0 ? gb_curve_run_attach(&k->curve, k->zctx, keys, err)
                       : gb_run_identity_attach(&k->curve, k->zctx, keys, role, index, err);
    if (rc == 0)
        rc = gb_registry_client_open(&k->reg, k->zctx, &ro, err);
    return rc;
}

static void asker_close(asker *k)
{
    gb_registry_client_close(k->reg);
    gb_curve_detach(k->curve);
    if (k->zctx)
        zmq_ctx_term(k->zctx);
    memset(k, 0, sizeof *k);
}

/* Asks the registry for count slots of role and reads the run's config from the first answer
 * (read_config): a host that cannot run it takes no further slot. */
static int take_slots(const char *registry, const char *keys, int role, int count,
                      const char *interface, gb_config *cfg, gb_registry_join_reply *slots,
                      gb_error *err)
{
    asker k;
    int rc = asker_open(&k, registry, keys, role, -1, err);
    for (int taken = 0; rc == 0 && taken < count; taken++) {
        if ((rc = gb_registry_join(k.reg, role, &slots[taken], err))) {
            gb_error_prefix(err, "joining %s", registry);
            if (rc == GB_ETIMEOUT && !keys)
                gb_error_prefix(err, "no answer without --keys (a run gives each worker its "
                                "own keys unless streams.curve is off)");
        } else if (taken == 0) {
            rc = read_config(&slots[0], role, interface, cfg, err);
        }
    }
    asker_close(&k);
    return rc;
}

/* Starts worker k again after it failed (again(ctx, k): its new pid, or 0 when it is not). */
typedef pid_t (*join_again_fn)(void *ctx, int k);

/* Waits for every child; on this command's SIGINT/SIGTERM passes SIGTERM on and kills what
 * still runs JOIN_LEAVE_GRACE_S later. A child that fails before that is started again where
 * again says so (not actors). Returns 0 when all exited 0. */
static int wait_workers(pid_t *pids, int n, join_again_fn again, void *ctx)
{
    int live = n, failed = 0, forwarded = 0;
    struct timespec t0 = {0}, now;
    while (live > 0) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid > 0) {
            for (int i = 0; i < n; i++)
                if (pids[i] == pid) {
                    pids[i] = 0;
                    live--;
                    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                        fprintf(stderr, "gearbox join: worker (pid %d) %s %d\n", (int)pid,
                                WIFEXITED(status) ? "exited with status" : "killed by signal",
                                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
                        if (!forwarded && again && (pids[i] = again(ctx, i)) > 0)
                            live++;
                        else
                            failed++;
                    }
                }
            continue;
        }
        if (pid < 0 && errno != EINTR)
            break;
        int sig = atomic_load(&join_signal);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (sig && !forwarded) {
            fprintf(stderr, "gearbox join: %s: the workers leave the run\n", strsignal(sig));
            for (int i = 0; i < n; i++)
                if (pids[i])
                    kill(pids[i], SIGTERM);
            forwarded = 1;
            t0 = now;
        } else if (forwarded == 1 && (double)(now.tv_sec - t0.tv_sec) +
                                             1e-9 * (double)(now.tv_nsec - t0.tv_nsec) >
                                         JOIN_LEAVE_GRACE_S) {
            fprintf(stderr, "gearbox join: %d workers still running %.0f s after the signal: "
                    "killed\n", live, JOIN_LEAVE_GRACE_S);
            for (int i = 0; i < n; i++)
                if (pids[i])
                    kill(pids[i], SIGKILL);
            forwarded = 2;
        }
        usleep(20000);
    }
    return failed;
}

typedef struct join_args {
    const char *registry, *role_name, *interface, *keys, *dir;
    int count;
} join_args;

enum { OPT_ROLE = 256, OPT_COUNT, OPT_INTERFACE, OPT_KEYS, OPT_DIR };

static int take_join(void *ctx, int opt, const char *arg)
{
    join_args *a = ctx;
    switch (opt) {
    case OPT_ROLE: a->role_name = arg; return 0;
    case OPT_COUNT: a->count = atoi(arg); return 0;
    case OPT_INTERFACE: a->interface = arg; return 0;
    case OPT_KEYS: a->keys = arg; return 0;
    case OPT_DIR: a->dir = arg; return 0;
    case GB_CLI_POSITIONAL:
        if (!a->registry) {
            a->registry = arg;
            return 0;
        }
        break;
    }
    fprintf(stderr, "gearbox join: unexpected argument '%s'\n", arg);
    join_usage(stderr);
    return -1;
}

/* Parses argv into a (count 1 unless given) and checks it. Returns GB_EXIT_OK or
 * GB_EXIT_USAGE with the reason printed. */
static int parse_join(int argc, char **argv, join_args *a)
{
    static const struct option options[] = {
        {"role", required_argument, NULL, OPT_ROLE},
        {"count", required_argument, NULL, OPT_COUNT},
        {"interface", required_argument, NULL, OPT_INTERFACE},
        {"keys", required_argument, NULL, OPT_KEYS},
        {"dir", required_argument, NULL, OPT_DIR},
        {NULL, 0, NULL, 0},
    };
    *a = (join_args){.count = 1};
    if (gb_cli_getopt(argc, argv, "", options, take_join, a) != 0)
        return GB_EXIT_USAGE;
    int role = a->role_name ? gb_role_from_name(a->role_name) : GB_ROLE_NONE;
    if (!a->registry ||
        (role != GB_ROLE_ACTOR && role != GB_ROLE_POLICY && role != GB_ROLE_TRAINER) ||
        a->count < 1 || a->count > JOIN_MAX_COUNT) {
        fprintf(stderr, "gearbox join: need REGISTRY_ENDPOINT, --role actor|policy|trainer and "
                "1 <= --count <= %d\n", JOIN_MAX_COUNT);
        join_usage(stderr);
        return GB_EXIT_USAGE;
    }
    return GB_EXIT_OK;
}

/* A joined host holds only its own slots' credentials (runtime/streams/curve.h): when the run
 * answered each slot with its key pair, they go with the run's identities and a copy of the
 * server key (from keys, the folder --keys names) into a new private folder (0700, files 0600)
 * that the workers read, dir (cap bytes); removed by drop_slot_keys. Returns 0 with dir "" for
 * a run without identities, or the error. */
static int slot_keys(const char *keys, const gb_registry_join_reply *slots, int n,
                     const char *const *roles, char *dir, size_t cap, gb_error *err)
{
    dir[0] = '\0';
    if (!slots[0].key[0] || !slots[0].identities)
        return 0;
    if (!keys)
        return gb_error_set(err, GB_EINVAL, "the run gives each worker its own keys: join with "
                            "--keys DIR (a copy of RUN_DIR/%s/server.key and client.key)",
                            GB_CURVE_KEYS_DIR);
    snprintf(dir, cap, "%s/gearbox-join-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir))
        return gb_error_errno(err, "mkdtemp %s", dir);
    char path[2200], pub[GB_CURVE_KEY_Z85], sec[GB_CURVE_KEY_Z85], name[GB_CURVE_ID_MAX];
    snprintf(path, sizeof path, "%s/server.key", keys);
    int rc = gb_curve_keypair_read(path, pub, sec, err);
    if (rc == 0) {
        snprintf(path, sizeof path, "%s/server.key", dir);
        rc = gb_curve_keypair_save(path, pub, sec, err);
    }
    snprintf(path, sizeof path, "%s/identities", dir);
    FILE *f = rc == 0 ? fopen(path, "wxe") : NULL;
    if (rc == 0 && (!f || fwrite(slots[0].identities, 1, slots[0].identities_len, f) !=
                               slots[0].identities_len))
        rc = gb_error_errno(err, "write %s", path);
    if (f && fclose(f) != 0 && rc == 0)
        rc = gb_error_errno(err, "close %s", path);
    for (int k = 0; rc == 0 && k < n; k++) {
        snprintf(name, sizeof name, "%s/%d", roles[k], slots[k].index);
        if (sscanf(slots[k].key, "%40s %40s", pub, sec) != 2)
            rc = gb_error_set(err, GB_EPROTO, "the run sent no key pair for %s", name);
        if (rc == 0)
            rc = gb_curve_identity_file(dir, name, path, sizeof path, err);
        if (rc == 0)
            rc = gb_curve_keypair_save(path, pub, sec, err);
    }
    explicit_bzero(sec, sizeof sec);
    return rc;
}

/* Removes the folder slot_keys made (its files are one level deep). */
static void drop_slot_keys(const char *dir)
{
    if (!dir[0])
        return;
    char cmd_path[2200];
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.') {
            snprintf(cmd_path, sizeof cmd_path, "%s/%s", dir, e->d_name);
            unlink(cmd_path);
        }
    if (d)
        closedir(d);
    rmdir(dir);
}

/* Where trainers joined here keep their checkpoints and name their replay's shared memory:
 * dir, else ./gearbox-join/<the run's folder name>; made (with its parents) when missing.
 * Returns 0 or GB_EINVAL/GB_ESYS. */
static int trainer_place(const char *dir, const char *run, char *out, size_t cap, gb_error *err)
{
    const char *base = strrchr(run, '/');
    base = base ? base + 1 : run;
    int n = dir ? snprintf(out, cap, "%s", dir) : snprintf(out, cap, "gearbox-join/%s", base);
    if (n < 0 || (size_t)n >= cap || (!dir && !base[0]))
        return gb_error_set(err, GB_EINVAL, "trainers' folder: no name from '%s'", run);
    return gb_rundir_make_dirs(out, err);
}

/* What the workers of this join are started from, again too. */
typedef struct join_run {
    const join_args *a;
    const gb_config *cfg;
    gb_registry_join_reply *slots; /* [count + relay] */
    int relay;                     /* slots[count]: this host's relay */
    const char *keys;              /* the folder the workers read their keys from */
    const char *run_dir;           /* see start_workers */
    pid_t parent;
    gb_restart_window restarts[JOIN_MAX_COUNT + 1]; /* per slot: when it was started again */
} join_run;

/* Forks the worker of slot k running gb_worker_process. Returns its pid, or -1. */
static pid_t fork_worker(const join_run *r, int k)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        perror("gearbox join: fork");
    if (pid != 0)
        return pid;
    /* a worker dies with this command (killed, say): it must not outlive its parent */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != r->parent)
        _exit(GB_EXIT_FAILURE);
    const gb_registry_join_reply *slot = &r->slots[k];
    gb_worker_process_opts o = {.role = k == r->a->count ? "relay" : r->a->role_name,
                                .index = slot->index, .incarnation = slot->incarnation,
                                .run_dir = r->run_dir, .registry = r->a->registry,
                                .metrics = slot->metrics, .keys = r->keys, .joined = 1};
    _exit(gb_worker_process(r->cfg, &o));
}

/* The slot whose worker is pids[i]: the relay first (slots[count]: the policy workers look it
 * up by this host's name), then slots 0 .. count - 1. */
static int slot_of(const join_run *r, int i)
{
    return r->relay ? (i == 0 ? r->a->count : i - 1) : i;
}

/* Forks one process a slot (the relay's first, when there is one), until all are started or
 * this command is signalled. The run directory is the launcher's: only a worker on its host
 * (ipc) uses it; trainers here keep theirs in trainer_dir. Returns how many were started (their
 * pids in pids). */
static int start_workers(join_run *r, const char *trainer_dir, pid_t *pids)
{
    r->run_dir = r->cfg->streams.transport == GB_TRANSPORT_IPC ? r->slots[0].run
                 : trainer_dir[0]                              ? trainer_dir
                                                               : NULL;
    r->parent = getpid();
    int started = 0, count = r->a->count, total = count + r->relay;
    for (; started < total && !atomic_load(&join_signal); started++) {
        if ((pids[started] = fork_worker(r, slot_of(r, started))) < 0) {
            atomic_store(&join_signal, SIGTERM); /* the ones started leave again */
            break;
        }
    }
    return started;
}

/* join_again_fn (pids[i], slot_of's slot k): the launcher is asked for the slot again as that
 * worker (its own key pair), which gives the next incarnation (and moves a trainers' group
 * on); then its worker starts again (a trainer re-attaches its replay and ledger from this
 * host's shared memory; a policy worker or relay binds its last port again, where its peers
 * reconnect), up to launch.restart.max_restarts times a slot within any window_s (the
 * watchdog's window, counted here per slot). Joined actors are not started again (joins.h). */
static pid_t worker_again(void *ctx, int i)
{
    join_run *r = ctx;
    const gb_config_restart *rb = &r->cfg->launch.restart;
    const double now = gb_now_s();
    const int k = slot_of(r, i);
    const int role = k == r->a->count ? GB_ROLE_RELAY : gb_role_from_name(r->a->role_name);
    const char *name = gb_role_name(role);
    if (role == GB_ROLE_ACTOR)
        return 0;
    int index = r->slots[k].index;
    if (!gb_restart_window_allows(&r->restarts[k], now, rb->max_restarts, rb->window_s)) {
        fprintf(stderr, "gearbox join: %s %d is not started again: %lld restarts within %g s "
                "already (launch.restart)\n", name, index, (long long)rb->max_restarts,
                rb->window_s);
        return 0;
    }
    gb_registry_join_reply again;
    gb_error err = {0};
    asker q;
    int rc = asker_open(&q, r->a->registry,
                        r->keys && gb_run_identities_on(r->cfg) ? r->keys : NULL, role, index,
                        &err);
    if (rc == 0 && (rc = gb_registry_join_again(q.reg, role, index, &again, &err)) == 0) {
        r->slots[k].incarnation = again.incarnation;
        gb_registry_join_reply_free(&again);
    }
    asker_close(&q);
    if (rc) {
        fprintf(stderr, "gearbox join: %s %d cannot take its slot again: %s\n", name, index,
                err.msg);
        return 0;
    }
    gb_restart_window_note(&r->restarts[k], now); /* without memory: counts as not noted */
    pid_t pid = fork_worker(r, k);
    fprintf(stderr, "gearbox join: %s %d started again (incarnation %d, pid %d)\n", name, index,
            r->slots[k].incarnation, (int)pid);
    return pid > 0 ? pid : 0;
}

int gb_cmd_join(int argc, char **argv)
{
    if (gb_wants_help(argc, argv)) {
        join_usage(stdout);
        return GB_EXIT_OK;
    }
    join_args a;
    if (parse_join(argc, argv, &a) != GB_EXIT_OK)
        return GB_EXIT_USAGE;
    int role = gb_role_from_name(a.role_name), count = a.count;
    gb_error err = {0};
    char addr[256] = "";
    if (a.interface)
        snprintf(addr, sizeof addr, "%s", a.interface);
    else if (strncmp(a.registry, "tcp://", 6) == 0 &&
             address_towards(a.registry, addr, sizeof addr, &err)) {
        fprintf(stderr, "gearbox join: %s (name the address with --interface)\n", err.msg);
        return GB_EXIT_FAILURE;
    }
    static gb_config cfg, relay_cfg;
    /* slots[count]: this host's relay, when its policy workers join a per_host relay run */
    static gb_registry_join_reply slots[JOIN_MAX_COUNT + 1];
    if (take_slots(a.registry, a.keys, role, count, addr, &cfg, slots, &err)) {
        fprintf(stderr, "gearbox join: %s\n", err.msg);
        return err.code == GB_ECONFIG ? GB_EXIT_USAGE : GB_EXIT_FAILURE;
    }
    int relay = role == GB_ROLE_POLICY && cfg.parameters.relay == GB_RELAY_PER_HOST;
    if (relay && take_slots(a.registry, a.keys, GB_ROLE_RELAY, 1, addr, &relay_cfg,
                            &slots[count], &err)) {
        fprintf(stderr, "gearbox join: this host's parameter relay: %s\n", err.msg);
        for (int i = 0; i < count; i++)
            gb_registry_join_reply_free(&slots[i]);
        return GB_EXIT_FAILURE;
    }
    fprintf(stderr, "gearbox join: run %s: %d %s workers (", slots[0].run, count, a.role_name);
    for (int i = 0; i < count; i++)
        fprintf(stderr, "%s%d", i ? ", " : "index ", slots[i].index);
    fprintf(stderr, ")%s%s%s\n", addr[0] ? " on " : "", addr,
            relay ? ", and this host's parameter relay" : "");

    struct sigaction sa = {0};
    sa.sa_handler = on_join_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    static pid_t pids[JOIN_MAX_COUNT + 1];
    static char keys[2048];
    const char *roles[JOIN_MAX_COUNT + 1];
    for (int i = 0; i < count + relay; i++)
        roles[i] = i < count ? a.role_name : "relay";
    int total = count + relay, started = 0;
    static char trainer_dir[2048];
    static join_run run;
    run = (join_run){.a = &a, .cfg = &cfg, .slots = slots, .relay = relay};
    if (slot_keys(a.keys, slots, total, roles, keys, sizeof keys, &err) == 0 &&
        (role != GB_ROLE_TRAINER ||
         trainer_place(a.dir, slots[0].run, trainer_dir, sizeof trainer_dir, &err) == 0)) {
        run.keys = keys[0] ? keys : a.keys;
        started = start_workers(&run, trainer_dir, pids);
    } else {
        fprintf(stderr, "gearbox join: %s\n", err.msg);
    }
    int failed = wait_workers(pids, started, worker_again, &run);
    for (int i = 0; i < total; i++)
        gb_restart_window_free(&run.restarts[i]);
    drop_slot_keys(keys);
    for (int i = 0; i < total; i++)
        gb_registry_join_reply_free(&slots[i]);
    fprintf(stderr, "gearbox join: %d of %d workers stopped cleanly\n", started - failed, total);
    return failed || started < total ? GB_EXIT_FAILURE : GB_EXIT_OK;
}
