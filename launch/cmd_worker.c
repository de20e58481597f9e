/* launch/cmd_worker.c: `gearbox worker --role R --index I --run-dir DIR --registry EP --metrics EP`:
 * one worker process, started by `gearbox run` (not by hand). It reads DIR/config.yaml, logs to
 * stderr (the launcher points that at DIR/logs/<role>-<index>.log), finds its peers through the
 * registry, reports to the launcher's metrics endpoint, follows the run's state through run
 * control (runtime/streams/runctl.h, on the registry's socket) and stops cleanly on SIGTERM/SIGINT.
 * gb_worker_process is that worker once its config is known: `gearbox join` (cmd_join.c) runs
 * it with the config the registry sent. */
#include "launch/commands.h"
#include "runtime/config/config.h"
#include "runtime/streams/curve.h"
#include "runtime/base/log.h"
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
                 "--keys DIR: the run's CURVE keys (default DIR/keys) when streams.curve is\n"
                 "on.\n");
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

int gb_cmd_worker(int argc, char **argv)
{
    if (gb_wants_help(argc, argv)) {
        worker_usage(stdout);
        return GB_EXIT_OK;
    }
    const char *role = NULL, *run_dir = NULL, *registry = NULL, *metrics = NULL;
    const char *record = NULL; /* --record DIR (gearbox run --record) */
    const char *keys = NULL;   /* --keys DIR: the run's CURVE keys; default RUN_DIR/keys */
    int index = -1, incarnation = 0; /* --incarnation N: the launcher's Nth restart of it */
    int segment = 0;                 /* --segment N: the run's Nth resume (gearbox run --resume) */
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--role") == 0)
            role = argv[i + 1];
        else if (strcmp(argv[i], "--index") == 0)
            index = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--run-dir") == 0)
            run_dir = argv[i + 1];
        else if (strcmp(argv[i], "--registry") == 0)
            registry = argv[i + 1];
        else if (strcmp(argv[i], "--metrics") == 0)
            metrics = argv[i + 1];
        else if (strcmp(argv[i], "--record") == 0)
            record = argv[i + 1];
        else if (strcmp(argv[i], "--keys") == 0)
            keys = argv[i + 1];
        else if (strcmp(argv[i], "--incarnation") == 0)
            incarnation = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--segment") == 0)
            segment = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "gearbox worker: unknown option %s\n", argv[i]);
            return GB_EXIT_USAGE;
        }
    }
    int r = -1;
    for (size_t i = 0; role && i < sizeof roles / sizeof roles[0]; i++)
        if (strcmp(role, roles[i].name) == 0)
            r = (int)i;
    if (r < 0 || index < 0 || !run_dir || !registry || !metrics || (argc - 1) % 2) {
        worker_usage(stderr);
        return GB_EXIT_USAGE;
    }

    static gb_config cfg;
    gb_error err = {0};
    char path[2048];
    snprintf(path, sizeof path, "%s/config.yaml", run_dir);
    if (gb_config_read(&cfg, path, NULL, 0, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return GB_EXIT_USAGE;
    }
    gb_worker_process_opts o = {.role = role, .index = index, .incarnation = incarnation,
                                .segment = segment, .run_dir = run_dir, .registry = registry,
                                .metrics = metrics, .record = record, .keys = keys};
    return gb_worker_process(&cfg, &o);
}

int gb_worker_process(const gb_config *cfg, const gb_worker_process_opts *o)
{
    const char *role = o->role, *run_dir = o->run_dir, *registry = o->registry;
    const char *metrics = o->metrics, *record = o->record;
    int index = o->index, incarnation = o->incarnation, segment = o->segment;
    int r = -1;
    for (size_t i = 0; role && i < sizeof roles / sizeof roles[0]; i++)
        if (strcmp(role, roles[i].name) == 0)
            r = (int)i;
    if (r < 0)
        return GB_EXIT_USAGE;
    gb_error err = {0};
    launcher_pid = getppid();
    gb_log_init(role, index, (gb_log_level)cfg->experiment.log_level);
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    void *zctx = zmq_ctx_new();
    gb_registry_client *reg = NULL;
    gb_metrics_sender *ms = NULL;
    gb_runctl_client *runctl = NULL;
    gb_registry_client_opts ro = {.endpoint = registry,
                                  .timeout_ms = (int)cfg->streams.registry_timeout_ms,
                                  .heartbeat_ms = (int)cfg->streams.heartbeat_ms,
                                  .ttl_ms = (int)cfg->streams.ttl_ms,
                                  .role = roles[r].role,
                                  .index = index};
    gb_curve *curve = NULL;
    int rc = zctx ? 0 : gb_error_set(&err, GB_EZMQ, "zmq_ctx_new failed");
    /* every tcp socket of this process uses the run's keys: attached before any is opened */
    if (rc == 0 && gb_config_streams_curve(&cfg->streams)) {
        char kd[2048];
        if (!o->keys && !run_dir)
            rc = gb_error_set(&err, GB_EINVAL, "the run uses CURVE on tcp: this worker needs the "
                              "run's keys folder (gearbox join --keys DIR, a copy of RUN_DIR/%s)",
                              GB_CURVE_KEYS_DIR);
        snprintf(kd, sizeof kd, "%s/%s", run_dir ? run_dir : "", GB_CURVE_KEYS_DIR);
        if (rc == 0)
            rc = gb_curve_run_attach(&curve, zctx, o->keys ? o->keys : kd, &err);
    }
    if (rc == 0)
        rc = gb_registry_client_open(&reg, zctx, &ro, &err);
    if (rc == 0)
        rc = gb_metrics_sender_open(&ms, zctx, metrics, roles[r].role, index, &err);
    if (rc == 0)
        gb_metrics_sender_set_incarnation(ms, incarnation);
    /* Actors stop when the run starts flushing; the others when the launcher's SIGTERM says. */
    gb_runctl_client_opts co = {.endpoint = registry, .role = roles[r].role, .index = index,
                                .stop = &stop_flag,
                                .stop_at = roles[r].role == GB_ROLE_ACTOR ? GB_RUN_FLUSHING
                                                                          : GB_RUN_RUNNING};
    /* A worker joined from another host (gearbox join) is no child of the launcher: no SIGTERM
     * from it, no parent-death signal when it dies. Run control stops it (policy workers once
     * the actors are released), or the launcher's silence does. */
    if (o->joined) {
        if (roles[r].role != GB_ROLE_ACTOR)
            co.stop_at = GB_RUN_RELEASED;
        co.lost_after_ms = GB_JOIN_LOST_MS;
    }
    if (rc == 0)
        rc = gb_runctl_client_open(&runctl, zctx, &co, &err);
    if (rc == 0) {
        gb_worker w = {.cfg = cfg, .role = roles[r].role, .index = index,
                       .incarnation = incarnation, .segment = segment, .run_dir = run_dir,
                       .zctx = zctx, .registry = reg, .metrics = ms, .runctl = runctl,
                       .stop = &stop_flag, .record_dir = record,
                       .joined = o->joined};
        if (incarnation)
            GB_INFO("worker started (pid %d), restart %d", (int)getpid(), incarnation);
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
    if (rc)
        GB_ERROR("%s", err.msg);
    else
        GB_INFO("worker stopped");
    gb_runctl_client_close(runctl);
    gb_metrics_sender_close(ms);
    gb_registry_client_close(reg);
    if (curve && gb_curve_refused(curve))
        GB_WARN("refused %llu connections without the run's keys",
                (unsigned long long)gb_curve_refused(curve));
    gb_curve_detach(curve);
    if (zctx)
        zmq_ctx_term(zctx);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
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
