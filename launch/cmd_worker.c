/* launch/cmd_worker.c: `gearbox worker --role R --index I --run-dir DIR --registry EP
 * --metrics EP`: one worker process, started by `gearbox run` (not by hand). It reads
 * DIR/config.yaml, logs to stderr (the launcher points that at DIR/logs/<role>-<index>.log), finds
 * its peers through the registry, reports to the launcher's metrics endpoint, follows the run's
 * state through run control (runtime/streams/runctl.h, on the registry's socket) and stops cleanly
 * on SIGTERM/SIGINT. gb_worker_process is that worker once its config is known: `gearbox join`
 * (cmd_join.c) runs it with the config the registry sent. */
#include "launch/cli.h"
#include "launch/commands.h"
#include "launch/run_identity.h"
#include "launch/supervisor.h"
#include "runtime/config/config.h"
#include "runtime/streams/curve.h"
#include "runtime/base/log.h"
#include "runtime/base/sanitizers.h"
#include "runtime/run/metrics.h"
#include "runtime/streams/registry.h"
#include "runtime/streams/runctl.h"
#include "runtime/streams/wire.h"
#include "workers/roles/worker.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>


static atomic_int stop_flag;
static pid_t launcher_pid; /* the parent at start: the launcher */

static void on_signal(int sig)
{
    (void)sig;
    atomic_store(&stop_flag, 1);
    /* The launcher is gone (this is its PR_SET_PDEATHSIG, launch/supervisor.c): nobody will
     * release the actors or wait for a clean stop, so a stop that blocks on it must not keep
     * this process alive: SIGALRM (default action: terminate) ends it in 1 s at the latest. */
    if (getppid() != launcher_pid)
        alarm(1);
}

static void worker_usage(FILE *out)
{
    fprintf(out, "usage: gearbox worker --role actor|policy|trainer|params|relay --index I\n"
                 "                      --run-dir DIR --registry ENDPOINT --metrics ENDPOINT\n"
                 "                      [--segment N] [--incarnation N] [--keys DIR]\n\n"
                 "Runs one worker process of a run. `gearbox run` starts these; you do not need\n"
                 "to. The worker reads DIR/config.yaml, finds its peers through the registry and\n"
                 "reports to the launcher's metrics endpoint; SIGTERM stops it cleanly.\n"
                 "--keys DIR: the run's keys (default DIR/keys), where this worker's own key\n"
                 "pair is (ROLE-I.key): it proves its identity with it unless streams.curve is\n"
                 "off.\n");
}

static const struct {
    const char *name;
    int role;
    int (*main)(gb_worker *, gb_error *);
} roles[] = {
    {"actor", GB_ROLE_ACTOR, gb_actor_main},
    {"policy", GB_ROLE_POLICY, gb_policy_main},
    {"trainer", GB_ROLE_TRAINER, gb_trainer_main},
    {"params", GB_ROLE_PARAMS, gb_params_main},
    {"relay", GB_ROLE_RELAY, gb_relay_main},
};

enum { OPT_ROLE = 256, OPT_INDEX, OPT_RUN_DIR, OPT_REGISTRY, OPT_METRICS, OPT_RECORD, OPT_KEYS,
       OPT_INCARNATION, OPT_SEGMENT };

/* The options the launcher gives (launch/run_local.c builds them, launch/supervisor.c adds
 * --incarnation on a restart); each takes a value. */
static const struct option worker_options[] = {
    {"role", required_argument, NULL, OPT_ROLE},
    {"index", required_argument, NULL, OPT_INDEX},
    {"run-dir", required_argument, NULL, OPT_RUN_DIR},
    {"registry", required_argument, NULL, OPT_REGISTRY},
    {"metrics", required_argument, NULL, OPT_METRICS},
    {"record", required_argument, NULL, OPT_RECORD},
    {"keys", required_argument, NULL, OPT_KEYS},
    {"incarnation", required_argument, NULL, OPT_INCARNATION},
    {"segment", required_argument, NULL, OPT_SEGMENT},
    {NULL, 0, NULL, 0},
};

static int take_worker(void *ctx, int opt, const char *arg)
{
    gb_worker_process_opts *o = ctx;
    switch (opt) {
    case OPT_ROLE: o->role = arg; return 0;
    case OPT_INDEX: o->index = atoi(arg); return 0;
    case OPT_RUN_DIR: o->run_dir = arg; return 0;
    case OPT_REGISTRY: o->registry = arg; return 0;
    case OPT_METRICS: o->metrics = arg; return 0;
    case OPT_RECORD: o->record = arg; return 0; /* gearbox run --record */
    case OPT_KEYS: o->keys = arg; return 0;     /* the run's CURVE keys; default RUN_DIR/keys */
    case OPT_INCARNATION: o->incarnation = atoi(arg); return 0; /* the launcher's Nth restart */
    case OPT_SEGMENT: o->segment = atoi(arg); return 0; /* the run's Nth resume */
    case GB_CLI_NO_VALUE: worker_usage(stderr); return -1;
    default:
        fprintf(stderr, "gearbox worker: unknown option %s\n", arg);
        return -1;
    }
}

/* The index of role in roles[], or -1. */
static int find_role(const char *role)
{
    for (size_t i = 0; role && i < sizeof roles / sizeof roles[0]; i++)
        if (strcmp(role, roles[i].name) == 0)
            return (int)i;
    return -1;
}

int gb_cmd_worker(int argc, char **argv)
{
    if (gb_wants_help(argc, argv)) {
        worker_usage(stdout);
        return GB_EXIT_OK;
    }
    gb_worker_process_opts o = {.index = -1};
    if (gb_cli_getopt(argc, argv, "", worker_options, take_worker, &o) != 0)
        return GB_EXIT_USAGE;
    if (find_role(o.role) < 0 || o.index < 0 || !o.run_dir || !o.registry || !o.metrics) {
        worker_usage(stderr);
        return GB_EXIT_USAGE;
    }
    static gb_config cfg;
    gb_error err = {0};
    char path[2048];
    snprintf(path, sizeof path, "%s/config.yaml", o.run_dir);
    if (gb_config_read(&cfg, path, NULL, 0, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return GB_EXIT_USAGE;
    }
    return gb_worker_process(&cfg, &o);
}

/* What a worker process holds open while it runs. */
typedef struct worker_links {
    void *zctx;
    gb_curve *curve;
    gb_registry_client *reg;
    gb_metrics_sender *ms;
    gb_runctl_client *runctl;
} worker_links;

/* Every socket of this process speaks as this worker (its own key pair, launch/run_identity.h):
 * attached before any is opened. */
static int attach_keys(worker_links *l, const gb_config *cfg, const gb_worker_process_opts *o,
                       int role, gb_error *err)
{
    if (!gb_run_identities_on(cfg))
        return 0;
    if (!o->keys && !o->run_dir)
        return gb_error_set(err, GB_EINVAL, "the run gives each worker its own keys: this worker "
                            "needs them (gearbox join --keys DIR, a copy of RUN_DIR/%s)",
                            GB_CURVE_KEYS_DIR);
    char kd[2048];
    snprintf(kd, sizeof kd, "%s/%s", o->run_dir ? o->run_dir : "", GB_CURVE_KEYS_DIR);
    return gb_run_identity_attach(&l->curve, l->zctx, o->keys ? o->keys : kd, role, o->index,
                                  err);
}

/* Opens the worker's context, keys, registry client, metrics sender and run control. Returns
 * 0 or the error; what was opened stays in l for close_links. */
static int open_links(worker_links *l, const gb_config *cfg, const gb_worker_process_opts *o,
                      int role, gb_error *err)
{
    l->zctx = zmq_ctx_new();
    gb_registry_client_opts ro = {.endpoint = o->registry,
                                  .timeout_ms = (int)cfg->streams.registry_timeout_ms,
                                  .heartbeat_ms = (int)cfg->streams.heartbeat_ms,
                                  .ttl_ms = (int)cfg->streams.ttl_ms,
                                  .role = role,
                                  .index = o->index};
    int rc = l->zctx ? 0 : gb_error_set(err, GB_EZMQ, "zmq_ctx_new failed");
    if (rc == 0)
        rc = attach_keys(l, cfg, o, role, err);
    if (rc == 0)
        rc = gb_registry_client_open(&l->reg, l->zctx, &ro, err);
    if (rc == 0)
        rc = gb_metrics_sender_open(&l->ms, l->zctx, o->metrics, role, o->index, err);
    if (rc == 0)
        gb_metrics_sender_set_incarnation(l->ms, o->incarnation);
    /* Actors stop when the run starts flushing; the others when the launcher's SIGTERM says. */
    gb_runctl_client_opts co = {.endpoint = o->registry, .role = role, .index = o->index,
                                .stop = &stop_flag,
                                .stop_at = role == GB_ROLE_ACTOR ? GB_RUN_FLUSHING
                                                                 : GB_RUN_RUNNING};
    /* A worker joined from another host (gearbox join) is no child of the launcher: no SIGTERM
     * from it, no parent-death signal when it dies. Run control stops it (policy workers once
     * the actors are released), or the launcher's silence does. */
    if (o->joined) {
        if (role != GB_ROLE_ACTOR)
            co.stop_at = GB_RUN_RELEASED;
        co.lost_after_ms = GB_JOIN_LOST_MS;
    }
    if (rc == 0)
        rc = gb_runctl_client_open(&l->runctl, l->zctx, &co, err);
    return rc;
}

static void close_links(worker_links *l)
{
    gb_runctl_client_close(l->runctl);
    gb_metrics_sender_close(l->ms);
    gb_registry_client_close(l->reg);
    if (l->curve && gb_curve_refused(l->curve))
        GB_WARN("refused %llu connections without the run's keys",
                (unsigned long long)gb_curve_refused(l->curve));
    gb_curve_detach(l->curve);
    if (l->zctx)
        zmq_ctx_term(l->zctx);
}

/* Runs the worker until it stops (SIGTERM/SIGINT, run control); installs its signal handlers.
 * Returns the process exit status: GB_EXIT_OK, GB_EXIT_FAILURE (its error logged), or
 * GB_EXIT_USAGE (unknown role). Outside sanitizer builds it does not return but ends the
 * process (_exit) once everything of its own is closed. */
int gb_worker_process(const gb_config *cfg, const gb_worker_process_opts *o)
{
    int r = find_role(o->role);
    if (r < 0)
        return GB_EXIT_USAGE;
    gb_error err = {0};
    launcher_pid = getppid();
    gb_log_init(o->role, o->index, (gb_log_level)cfg->experiment.log_level);
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    worker_links l = {0};
    int rc = open_links(&l, cfg, o, roles[r].role, &err);
    if (rc == 0) {
        gb_worker w = {.cfg = cfg, .role = roles[r].role, .index = o->index,
                       .incarnation = o->incarnation, .segment = o->segment,
                       .run_dir = o->run_dir, .zctx = l.zctx, .registry = l.reg,
                       .metrics = l.ms, .runctl = l.runctl, .stop = &stop_flag,
                       .record_dir = o->record, .joined = o->joined};
        if (o->incarnation)
            GB_INFO("worker started (pid %d), restart %d", (int)getpid(), o->incarnation);
        else
            GB_INFO("worker started (pid %d)", (int)getpid());
        rc = roles[r].main(&w, &err);
    }
    /* A stop requested from outside (SIGTERM/SIGINT, run control) interrupts blocking calls
     * (EINTR in zmq_poll, a peer already gone): what fails that way after it is part of
     * stopping, not an error. A worker that stopped itself (gb_worker_stop_self) does not get
     * this pass, and a timeout is a failure whoever asked for the stop: it says something did
     * not answer, which a stop does not explain. */
    if (rc && atomic_load(&stop_flag) && (rc == GB_EZMQ || rc == GB_EINTR || rc == GB_ECLOSED)) {
        GB_INFO("stopping interrupted a wait: %s", err.msg);
        rc = 0;
    }
    /* its log (stderr) could not be written, the disk full say: a failure the launcher names */
    if (rc == 0 && gb_log_stderr_errno())
        rc = gb_error_set(&err, GB_EIO, "writing this worker's log failed: %s",
                          strerror(gb_log_stderr_errno()));
    if (rc) {
        GB_ERROR("%s", err.msg);
        gb_supervisor_last_words(err.msg); /* the launcher's summary says why, disk full or not */
    } else {
        GB_INFO("worker stopped");
    }
    close_links(&l);
#if !GB_ASAN && !GB_TSAN
    /* Everything of the worker's own is closed and written: the process ends here, without
     * what libtorch registered for exit in the policy worker and the trainer (static
     * destructors, the unmapping of its 286 libraries), which took about 0.1 s of every run's
     * stop after the trainer's final checkpoint. Sanitizer builds return as before, so that
     * LeakSanitizer still checks every worker. */
    fflush(NULL);
    _exit(rc ? GB_EXIT_FAILURE : GB_EXIT_OK);
#endif
    return rc ? GB_EXIT_FAILURE : GB_EXIT_OK;
}
