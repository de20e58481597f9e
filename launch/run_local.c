/* launch/run_local.c: the local backend of `gearbox run` (see run_local.h): the launcher's
 * run control, one function a state: open (run directory, registry thread, metrics collection,
 * run keys), spawn (the worker processes), watch (failures, metrics.csv rows, progress), decide
 * (the run contract's stop rules, runtime/run/contract.h), drain (launch/run_drain.h) and summarise
 * (summary.json); and the same for a resumed run (gearbox run --resume), whose counters go on
 * from the last row of its metrics.csv (launch/run_rows.h). The Slurm backend is this same
 * launcher with each worker started as a step of the run's Slurm job (launch/slurm.h). */
#include "launch/run_local.h"

#include "launch/datawatch.h"
#include "launch/evals.h"
#include "launch/joins.h"
#include "launch/run_drain.h"
#include "launch/run_identity.h"
#include "launch/run_rows.h"
#include "launch/run_spawn.h"
#include "launch/slurm.h"
#include "launch/supervisor.h"
#include "launch/trackers.h"
#include "launch/validate.h"
#include "launch/watchdog.h"
#include "runtime/base/clock.h"
#include "runtime/run/contract.h"
#include "runtime/streams/curve.h"
#include "runtime/streams/endpoint.h"
#include "runtime/base/log.h"
#include "runtime/run/metrics.h"
#include "runtime/streams/registry.h"
#include "runtime/run/rundir.h"
#include "runtime/streams/runctl.h"
#include "runtime/base/shm.h"
#include "runtime/streams/wire.h"
#include "workers/roles/worker.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

static atomic_int interrupted; /* the signal that asked us to stop, 0 = none */

static void on_signal(int sig) { atomic_store(&interrupted, sig); }

typedef struct registry_thread {
    gb_registry_server *server;
    atomic_int stop;
    int rc;
    gb_error err;
} registry_thread;

static void *registry_main(void *arg)
{
    registry_thread *t = arg;
    t->rc = gb_registry_server_run(t->server, &t->stop, &t->err);
    return NULL;
}

/* Everything one launch owns, through every state; torn down in close_all. */
typedef struct launch {
    const gb_config *cfg;
    const gb_cli *cli;
    int on_slurm;
    gb_rundir rd;
    gb_supervisor sup;
    gb_watchdog wd;
    gb_joins joins; /* slots for workers joining from other hosts (gearbox join) */
    int joins_ready;
    gb_evals evals; /* evaluations, and the verdict on them (experiment.eval_every); zeroed: off */
    gb_slurm_job slurm;
    const gb_slurm_job *job; /* &slurm on Slurm: every worker is one of its steps */
    gb_datawatch dw;
    gb_trackers trackers; /* experiment.trackers' followers */
    void *zctx;
    gb_curve *curve;
    registry_thread reg;
    pthread_t reg_thread;
    int reg_started;
    gb_metrics_collector *mc;
    gb_runctl_server *runctl;
    char reg_ep[GB_REGISTRY_ENDPOINT_MAX], met_ep[GB_REGISTRY_ENDPOINT_MAX], exe[PATH_MAX];
    int relays; /* per_host parameter relays this launcher starts */
    double t0;
    gb_run_base base;
    double row[GB_NCOLS];
    gb_run_rates rates; /* the rows written, for the rates */
    double decided_return, decided_length; /* the training episodes' window at the stop */
    gb_run_summary summary; /* what summary.json holds */
    gb_run_vouch vouch; /* the episodes' claim against the trainers' received steps */
    int live, show; /* the progress line: in place (a terminal), shown at all */
    const char *exit_reason;
    int solved; /* the stop rule said solved, and nothing failed at the end but a worker */
    char error_text[GB_ERROR_MSG_MAX + 256];
    int status;
    gb_error err;
} launch;

/* Ends the run with a cause: error_text from fmt, logged as an error. */
static void fail_with(launch *L, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(L->error_text, sizeof L->error_text, fmt, ap);
    va_end(ap);
    GB_ERROR("%s", L->error_text);
}

/* ---- open ------------------------------------------------------------------------------ */

/* Replaces ep (what was asked to bind, "tcp://ADDR:*") by the address peers connect to: the
 * port the registry server (or else the metrics collector) got, a wildcard address made this
 * host's name (runtime/streams/endpoint.h). */
static int bound_endpoint(const gb_registry_server *reg, const gb_metrics_collector *mc,
                          char *ep, size_t cap, gb_error *err)
{
    char bound[GB_REGISTRY_ENDPOINT_MAX];
    if (reg)
        snprintf(bound, sizeof bound, "%s", gb_registry_server_endpoint(reg));
    else if (gb_metrics_collector_endpoint(mc, bound, sizeof bound, err))
        return err->code;
    return gb_endpoint_connectable(bound, ep, cap, err);
}

/* Says where workers join this run (gearbox join): in the run directory's file "registry" (one
 * line), for the user and for scripts, and with tcp in the log. */
static void announce_registry(const gb_rundir *rd, const gb_config *cfg, const char *reg_ep)
{
    if (cfg->streams.transport == GB_TRANSPORT_TCP) {
        if (gb_config_streams_curve(&cfg->streams)) /* without the keys a joiner gets no answer */
            GB_INFO("registry %s: workers on other hosts join with `gearbox join %s --role actor "
                    "--keys DIR`, DIR a copy of %s/keys", reg_ep, reg_ep, rd->path);
        else
            GB_INFO("registry %s: workers on other hosts join with `gearbox join %s --role "
                    "actor`", reg_ep, reg_ep);
        if (strncmp(reg_ep, "tcp://127.", 10) == 0)
            GB_WARN("streams.interface %s is a loopback address: no other host can join this "
                    "run", cfg->streams.interface);
    }
    char path[2048];
    gb_error e;
    FILE *f = gb_rundir_file(rd, "registry", path, sizeof path, &e) == 0 ? fopen(path, "w")
                                                                           : NULL;
    int bad = !f || fprintf(f, "%s\n", reg_ep) < 0;
    if ((f && fclose(f) != 0) || bad)
        GB_WARN("%s/registry not written", rd->path);
}

/* The path of this executable, for starting workers. */
static int self_path(char *out, size_t n, gb_error *err)
{
    ssize_t len = readlink("/proc/self/exe", out, n - 1);
    if (len <= 0)
        return gb_error_errno(err, "readlink /proc/self/exe");
    out[len] = '\0';
    return 0;
}

/* The run directory (a new one, or the resumed one), the launcher's log in it and the signals
 * that stop the run. Returns 0, or 1 (said on stderr). */
static int open_rundir(launch *L)
{
    const gb_cli *cli = L->cli;
    if (cli->resume ? gb_rundir_reopen(&L->rd, L->cfg, cli->resume, &L->err)
                    : gb_rundir_create(&L->rd, L->cfg, cli->run_dir, &L->err)) {
        fprintf(stderr, "gearbox run: %s%s\n", cli->resume ? "--resume: " : "", L->err.msg);
        return 1;
    }
    char log_path[2048];
    if (gb_rundir_file(&L->rd, "logs/launcher.log", log_path, sizeof log_path, &L->err) == 0)
        gb_log_open_file(log_path);
    GB_INFO("run directory %s", L->rd.path);
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

/* The run's sockets: CURVE keys (tcp), the registry and metrics endpoints, run control, the
 * metrics collector, the joins' slots and the registry server; then the watchdog. */
static int open_services(launch *L)
{
    const gb_config *cfg = L->cfg;
    gb_error *err = &L->err;
    int rc = L->zctx ? 0 : gb_error_set(err, GB_EZMQ, "zmq_ctx_new failed");
    /* a key pair a worker in RUN_DIR/keys (a resume keeps them): CURVE on tcp, PLAIN on ipc */
    if (rc == 0)
        rc = gb_run_identities_open(cfg, L->rd.path, L->zctx, &L->curve, err);
    /* on tcp every endpoint is on streams.interface, the launcher's too: workers on other
     * hosts reach them (launch/joins.h) */
    if (rc == 0)
        rc = gb_endpoint_make(L->reg_ep, sizeof L->reg_ep, cfg->streams.transport, L->rd.path,
                              cfg->streams.interface, "registry", err);
    if (rc == 0)
        rc = gb_endpoint_make(L->met_ep, sizeof L->met_ep, cfg->streams.transport, L->rd.path,
                              cfg->streams.interface, "metrics", err);
    if (rc == 0) /* the workers' sockets too, before any starts */
        rc = gb_worker_sockets_fit(cfg, L->rd.path, cfg->parameters.relay ==
                                   GB_RELAY_PER_HOST ? gb_slurm_relays(cfg) : 0, err);
    if (rc == 0)
        rc = gb_runctl_server_open(&L->runctl, err);
    if (rc == 0)
        rc = gb_metrics_collector_open(&L->mc, L->zctx, L->met_ep, err);
    if (rc == 0)
        rc = bound_endpoint(NULL, L->mc, L->met_ep, sizeof L->met_ep, err);
    if (rc == 0 && (rc = gb_joins_init(&L->joins, cfg, L->met_ep, L->rd.path, err)) == 0)
        L->joins_ready = 1;
    gb_registry_server_opts ro = {.endpoint = L->reg_ep, .max_ttl_ms = 60000,
                                  .runctl = L->runctl, .join = gb_joins_answer,
                                  .join_arg = &L->joins};
    if (rc == 0)
        rc = gb_registry_server_open(&L->reg.server, L->zctx, &ro, err);
    if (rc == 0)
        rc = bound_endpoint(L->reg.server, NULL, L->reg_ep, sizeof L->reg_ep, err);
    if (rc == 0)
        announce_registry(&L->rd, cfg, L->reg_ep);
    if (rc == 0)
        rc = gb_watchdog_init(&L->wd, cfg, &L->sup, L->mc, L->t0, err);
    double low, high; /* the environment's own rewards: reported returns within their range */
    if (rc == 0 && gb_validate_reward_range(cfg, &low, &high))
        gb_metrics_collector_bound_return_range(L->mc, low, high);
    /* a restarted one of several trainers, the launcher's or a joined one: the group's next
     * generation */
    L->wd.runctl = L->joins.runctl = L->runctl;
    L->joins.mc = L->mc;
    gb_datawatch_init(&L->dw, cfg);
    return rc;
}

/* Only the run's own workers may report (a forged report must not end the run): declares them
 * to the collector, the per_host relays included. */
static int expect_workers(launch *L)
{
    const gb_config *cfg = L->cfg;
    gb_error *err = &L->err;
    int rc = gb_metrics_collector_expect(L->mc, GB_ROLE_PARAMS, 1, err);
    /* per_host relays: this host's, or one a node of a multi-node Slurm job (launch/slurm.h) */
    L->relays = cfg->parameters.relay == GB_RELAY_PER_HOST ? gb_slurm_relays(cfg) : 0;
    if (rc == 0 && L->relays) { /* and those of hosts whose policy workers join (joins.h) */
        L->joins.relay_next = L->relays; /* joiners' relays after the launcher's own */
        L->joins.relay_end = L->relays - 1 + gb_joins_relays(cfg);
        rc = gb_metrics_collector_expect(L->mc, GB_ROLE_RELAY, L->joins.relay_end, err);
    }
    if (rc == 0)
        rc = gb_metrics_collector_expect(L->mc, GB_ROLE_TRAINER, cfg->trainer.count, err);
    if (rc == 0)
        rc = gb_metrics_collector_expect(L->mc, GB_ROLE_POLICY, cfg->policy.count, err);
    if (rc == 0)
        rc = gb_metrics_collector_expect(L->mc, GB_ROLE_ACTOR,
                                         cfg->actors.count + cfg->actors.join_max, err);
    return rc;
}

/* The registry thread, metrics.csv (new, or continued after its last row: the base), the
 * evaluations and, on Slurm, the run's job. */
static int open_outputs(launch *L)
{
    const gb_config *cfg = L->cfg;
    gb_error *err = &L->err;
    int rc = 0;
    if (pthread_create(&L->reg_thread, NULL, registry_main, &L->reg) != 0)
        rc = gb_error_errno(err, "pthread_create");
    L->reg_started = rc == 0;
    double last[GB_NCOLS];
    if (rc == 0 && !L->cli->resume)
        rc = gb_rundir_metrics_open(&L->rd, gb_contract_columns(), GB_NCOLS, err);
    if (rc == 0 && L->cli->resume &&
        (rc = gb_rundir_metrics_continue(&L->rd, gb_contract_columns(), GB_NCOLS, last,
                                         err)) == 0) {
        gb_run_rows_base(last, &L->base);
        GB_INFO("resuming (segment %d) after %.0f env steps, %.0f episodes, %.1f s",
                L->base.segment, L->base.env_steps, L->base.episodes, L->base.time);
        L->base.sets_left = gb_run_resume_sets(L->rd.path, cfg); /* trainer.count changed */
    }
    if (rc == 0)
        rc = self_path(L->exe, sizeof L->exe, err);
    if (rc == 0)
        gb_evals_init(&L->evals, &(gb_evals_opts){
            .rd = &L->rd, .run_dir = L->rd.path, .exe = L->exe, .env_steps = L->base.env_steps,
            .every = cfg->experiment.eval_every, .episodes = cfg->experiment.eval_episodes,
            .seed = cfg->experiment.seed, .target = cfg->experiment.target_return,
            .ctl = L->runctl, .hold = cfg->experiment.eval_hold,
            .hold_wait_s = cfg->experiment.eval_hold_wait_s});
    if (rc == 0 && L->on_slurm) { /* the run's job first: every worker is one of its steps */
        char slurm_log[2048];
        rc = gb_rundir_file(&L->rd, "logs/slurm.log", slurm_log, sizeof slurm_log, err);
        if (rc == 0)
            rc = gb_slurm_allocate(&L->slurm, cfg, slurm_log, &interrupted, err);
        if (rc == GB_EINTR)
            L->exit_reason = "interrupted";
        L->job = &L->slurm;
        L->sup.stop_hook = gb_slurm_signal_steps;
        L->sup.stop_arg = &L->slurm;
        L->sup.kill_term_s = 3; /* SIGTERM to an srun cancels its step: no step left behind */
    }
    return rc;
}

/* ---- watch and decide ------------------------------------------------------------------ */

/* What ends a run besides the stop rules: a worker that died or hung past its restarts, data
 * that became unusable, a signal. Sets exit_reason and error_text; returns 1 to end now. */
static int failed(launch *L)
{
    gb_child *dead = NULL;
    const char *why = NULL;
    if (gb_watchdog_check(&L->wd, &dead, L->error_text, sizeof L->error_text, &why)) {
        if (L->live)
            fputc('\n', stderr);
        GB_ERROR("%s; the end of its log (%s):", L->error_text, dead->log_path);
        gb_log_tail(dead->log_path, 20, "    | ", stderr);
        L->exit_reason = why;
        return 1;
    }
    if (gb_datawatch_check(&L->dw, L->mc, L->error_text, sizeof L->error_text)) {
        if (L->live)
            fputc('\n', stderr);
        GB_ERROR("%s", L->error_text);
        L->exit_reason = "unusable_data";
        return 1;
    }
    int sig = atomic_load(&interrupted);
    if (sig) {
        L->exit_reason = "interrupted";
        snprintf(L->error_text, sizeof L->error_text, "stopped by signal %d (%s)", sig,
                 strsignal(sig));
        return 1;
    }
    return 0;
}

/* Writes the row to metrics.csv (and tb/) and shows progress. A full disk (or any write
 * failure) in the run directory ends the run: returns 1 then. */
static int write_row(launch *L, double now, double *next_plain)
{
    if (gb_rundir_metrics_row(&L->rd, L->row, GB_NCOLS, &L->err)) {
        fail_with(L, "metrics: %s", L->err.msg);
        return 1;
    }
    if (gb_log_file_errno()) {
        fail_with(L, "logs/launcher.log: write: %s", strerror(gb_log_file_errno()));
        return 1;
    }
    gb_run_rates_add(&L->rates, L->row);
    if (L->show && (L->live || now >= *next_plain)) {
        gb_run_rows_progress(L->row, L->live);
        *next_plain = now + 5.0;
    }
    return 0;
}

/* Watches the run until it must end; decides by the run contract's stop rules (on this
 * segment's episodes: the mean return's window; with the verdict by evaluation, on the
 * evaluations, one asked for at once when the window reaches the target) when it ends well. */
static void watch(launch *L)
{
    const gb_config *cfg = L->cfg;
    L->live = cfg->launch.progress == GB_PROGRESS_LINE ||
              (cfg->launch.progress == GB_PROGRESS_AUTO && isatty(STDERR_FILENO));
    L->show = cfg->launch.progress != GB_PROGRESS_OFF;
    double next_row = L->t0 + gb_contract_row_interval(cfg, 0), next_plain = L->t0 + 5.0;
    for (;;) {
        if (gb_metrics_collector_poll(L->mc, 50, &L->err) < 0) {
            snprintf(L->error_text, sizeof L->error_text, "metrics: %s", L->err.msg);
            return;
        }
        double now = gb_now_s();
        if (failed(L))
            return;
        gb_run_rows_sample(L->mc, now - L->t0, &L->rates, &L->base, L->row);
        gb_runctl_server_set_env_steps(L->runctl, (int64_t)L->row[GB_COL_ENV_STEPS]);
        /* a finished evaluation goes to tb/: a write failure ends the run, as metrics.csv's */
        if (gb_evals_poll(&L->evals, (int64_t)L->row[GB_COL_ENV_STEPS], L->mc, &L->err)) {
            fail_with(L, "evaluation: %s", L->err.msg);
            return;
        }
        if (now >= next_row) {
            if (write_row(L, now, &next_plain))
                return;
            next_row = now + gb_contract_row_interval(cfg, now - L->t0);
        }
        int64_t episodes = gb_metrics_episodes(L->mc);
        double mean = gb_metrics_return_mean(L->mc);
        int reached = gb_contract_target_reached(cfg, episodes, mean);
        if (reached) /* an evaluation for the verdict, unless one is under way */
            gb_evals_verdict_due(&L->evals, (int64_t)L->row[GB_COL_TRAIN_STEPS]);
        /* episodes the trainers' received steps do not cover decide nothing yet (run_rows.h) */
        if (cfg->experiment.eval_every <= 0 && !gb_run_rows_vouched(L->mc, reached, &L->vouch))
            episodes = 0;
        const char *reason = L->evals.solved ? "solved"
                                             : gb_contract_stop_reason(
                                                   cfg, (int64_t)L->row[GB_COL_ENV_STEPS],
                                                   episodes, mean, L->row[GB_COL_TIME]);
        if (reason) {
            L->exit_reason = reason;
            L->status = 0;
            return;
        }
    }
}

/* ---- drain ----------------------------------------------------------------------------- */

/* Stops the workers (launch/run_drain.h), releases the Slurm job, takes their last reports
 * into the last row and finishes the evaluations. A worker that failed while stopping (its
 * final checkpoint, say) or had to be killed fails the run, whatever ended it. Returns the
 * launch's wall time. */
static double drain(launch *L)
{
    double wall = gb_now_s() - L->t0;
    if (L->show && L->live)
        fputc('\n', stderr);
    GB_INFO("%s: stopping the workers", L->exit_reason); /* from here a death fails it */
    gb_run_drain(&L->sup, L->runctl, L->mc, L->cfg, &L->wd);
    if (L->on_slurm && gb_slurm_release(&L->slurm, &L->err)) { /* nothing left in squeue */
        GB_ERROR("%s", L->err.msg);
        L->status = 1;
    }
    /* Workers send a last report as they stop: take it (not a fixed 100 ms wait any more). */
    if (L->mc) {
        gb_run_last_reports(L->mc, L->cfg);
        gb_run_rows_sample(L->mc, wall, &L->rates, &L->base, L->row);
        /* the window the stop was decided on: episodes that finished while the workers
         * stopped count in `episodes`, not in the mean (summary.json's is this row's) */
        L->row[GB_COL_RETURN] = L->decided_return;
        L->row[GB_COL_LENGTH] = L->decided_length;
        gb_rundir_metrics_row(&L->rd, L->row, GB_NCOLS, &L->err);
    }
    /* a video being made is finished, not cut off; one still waiting for a checkpoint is made
     * from the final one (the trainers wrote it as they stopped) */
    if (gb_evals_finish(&L->evals, (int64_t)L->row[GB_COL_ENV_STEPS], 120, L->mc,
                        &L->err) &&
        L->status == 0) {
        L->status = 1;
        L->exit_reason = "error";
        fail_with(L, "evaluation: %s", L->err.msg);
    }
    /* a window at the target whose last chunks were on their way when the budget stopped
     * the run: solved once the trainers received them (run_rows.h) */
    if (L->mc && L->vouch.need > 0 && gb_run_rows_vouched(L->mc, 1, &L->vouch) &&
        L->status == 0 && (strcmp(L->exit_reason, "max_env_steps") == 0 ||
                           strcmp(L->exit_reason, "max_seconds") == 0))
        L->exit_reason = "solved";
    /* an evaluation of a checkpoint from within the budget that reached the target after the
     * budget stopped the run (it was running, or played the final checkpoint): solved */
    if (L->evals.solved && L->status == 0 && (strcmp(L->exit_reason, "max_env_steps") == 0 ||
                                              strcmp(L->exit_reason, "max_seconds") == 0)) {
        GB_INFO("solved: the evaluation at %lld env steps reached the target",
                (long long)L->evals.decided.env_steps);
        L->exit_reason = "solved";
    }
    /* a worker that failed while stopping changes the exit, not that the run was solved */
    L->solved = strcmp(L->exit_reason, "solved") == 0;
    char failed_workers[512];
    if (gb_supervisor_failures(&L->sup, failed_workers, sizeof failed_workers) &&
        L->status == 0) {
        L->status = 1;
        L->exit_reason = "worker_failed";
        fail_with(L, "while the run stopped: %s", failed_workers);
    }
    return wall;
}

/* ---- summarise ------------------------------------------------------------------------- */

/* Writes summary.json (the run contract's keys) after a launch of wall seconds, and keeps what
 * it holds in L->summary. A summary that cannot be written fails the run: returns -1, else 0. */
static int summarise(launch *L, double wall)
{
    const gb_config *cfg = L->cfg;
    gb_run_ledger ledger = {0};
    if (L->mc)
        gb_run_ledger_take(L->mc, cfg, &L->wd, &ledger);
    /* every step the actors took; env_steps counts those in chunks they sent */
    double taken = L->mc ? gb_metrics_sum(L->mc, GB_ROLE_ACTOR, "env_steps") : 0;
    taken = isnan(taken) ? 0 : taken;
    gb_run_summary s;
    gb_contract_summary_init(&s, cfg, L->on_slurm ? "slurm" : "local");
    s.env_steps = L->mc ? gb_run_rows_env_steps(L->mc, &L->base)
                        : (int64_t)L->row[GB_COL_ENV_STEPS];
    s.env_steps_unsent = (int64_t)fmax(0.0, taken - (L->mc ? gb_run_rows_sent_steps(L->mc) : 0));
    s.train_steps = (int64_t)L->row[GB_COL_TRAIN_STEPS];
    s.wall_seconds = L->base.time + wall;
    s.episode_return_mean = L->decided_return; /* the last row's */
    s.episodes = (int64_t)L->base.episodes + (L->mc ? gb_metrics_episodes(L->mc) : 0);
    s.solved = L->solved;
    s.evaluation = L->evals.solved ? L->evals.decided : L->evals.last;
    s.evaluations = L->evals.finished;
    s.exit_reason = L->exit_reason;
    s.error = L->error_text[0] ? L->error_text : NULL;
    s.has_samples = L->mc != NULL;
    gb_run_ledger_summary(&ledger, &s);
    s.restarts = L->wd.restarts;
    s.nrestarts = L->wd.nrestarts;
    if (L->joins_ready) {
        pthread_mutex_lock(&L->joins.lock);
        s.joined = L->joins.joined;
        s.joined_restarts = L->joins.restarts;
        pthread_mutex_unlock(&L->joins.lock);
    }
    s.auth_refused = gb_run_rows_auth_refused(L->mc, gb_config_streams_curve(&L->cfg->streams)
                                                          ? L->curve : NULL); /* tcp's */
    s.reports_rejected = L->mc ? gb_run_rows_reports_rejected(L->mc) : 0;
    s.registry_rejected = L->reg.server ? (int64_t)gb_registry_server_rejected(L->reg.server) : 0;
    s.segment = L->base.segment, s.trainer_sets_left = L->base.sets_left;
    s.segment_env_steps = (int64_t)L->base.env_steps;
    s.segment_seconds = wall;
    L->summary = s; /* the trackers' outcome is added to it (gb_trackers_finish) */
    int rc = gb_rundir_write_summary(&L->rd, &s, &L->err) ? -1 : 0;
    if (rc) {
        /* the run's record is lost: say why where the user sees it, and fail */
        fprintf(stderr, "gearbox run: summary.json not written: %s (the run ended: %s%s%s)\n",
                L->err.msg, L->exit_reason, L->error_text[0] ? ": " : "", L->error_text);
        GB_ERROR("summary.json: %s", L->err.msg);
        L->status = 1;
    }
    char by[128] = "";
    if (s.solved && s.evaluation.valid) /* the verdict by evaluation (launch/evals.h) */
        snprintf(by, sizeof by, " (by evaluation: %.2f)", s.evaluation.return_mean);
    GB_INFO("%s%s after %.1f s: %lld env steps (%.0f/s), %lld train steps, training episodes' "
            "mean return %.1f; %s/summary.json", L->exit_reason, by, wall,
            (long long)s.env_steps,
            wall > 0 ? ((double)s.env_steps - L->base.env_steps) / wall : 0.0,
            (long long)s.train_steps, s.episode_return_mean, L->rd.path);
    return rc;
}

/* ---- close ----------------------------------------------------------------------------- */

static void close_all(launch *L)
{
    if (L->reg_started) {
        atomic_store(&L->reg.stop, 1);
        pthread_join(L->reg_thread, NULL);
    }
    gb_watchdog_free(&L->wd);
    gb_metrics_collector_close(L->mc);
    gb_registry_server_close(L->reg.server);
    if (L->joins_ready)
        gb_joins_free(&L->joins);
    gb_runctl_server_close(L->runctl);
    /* a trainer that stops cleanly removes its segments itself (workers/roles/trainer.c);
     * what is left is a failed or killed trainer's replay and ledger, kept for a restart */
    int removed = 0;
    if (gb_shm_unlink_run(L->rd.path, &removed, &L->err))
        GB_WARN("shared memory of the run: %s", L->err.msg);
    else if (removed)
        GB_WARN("removed %d shared-memory segments that a trainer which did not stop cleanly "
                "left", removed);
    gb_rundir_close(&L->rd);
    gb_curve_detach(L->curve);
    if (L->zctx)
        zmq_ctx_term(L->zctx);
    gb_log_close();
}

int gb_run_local(const gb_config *cfg, const gb_cli *cli)
{
    static launch L; /* large (the supervisor's children, the joins' slots): not on the stack */
    gb_log_init("launcher", -1, (gb_log_level)cfg->experiment.log_level);
    /* cfg passed launch/validate.h (gb_cmd_run): its environment and devices are there */
    L.cfg = cfg;
    L.cli = cli;
    L.on_slurm = cfg->launch.mode == GB_LAUNCH_SLURM;
    L.exit_reason = "error";
    L.status = 1;
    if (open_rundir(&L))
        return 1;
    gb_trackers_start(&L.trackers, cfg, L.rd.path);
    L.zctx = zmq_ctx_new();
    L.t0 = gb_now_s();
    int rc = open_services(&L);
    if (rc == 0 && (rc = expect_workers(&L)) == 0)
        rc = open_outputs(&L);
    gb_run_spawn_opts so = {.cfg = cfg, .sup = &L.sup, .rd = &L.rd, .exe = L.exe,
                            .reg_ep = L.reg_ep, .met_ep = L.met_ep, .record = cli->record,
                            .segment = L.base.segment, .job = L.job, .relays = L.relays};
    if (rc == 0)
        rc = gb_run_spawn(&so, &L.err);
    if (rc)
        fail_with(&L, "%s", L.err.msg);
    else
        watch(&L);
    /* the window the stop was decided on: the last row's and summary.json's (see drain) */
    L.decided_return = L.mc ? gb_metrics_return_mean(L.mc) : NAN;
    L.decided_length = L.mc ? gb_metrics_length_mean(L.mc) : NAN;
    double wall = drain(&L);
    const gb_run_summary *written = summarise(&L, wall) == 0 ? &L.summary : NULL;
    if (gb_trackers_finish(&L.trackers, &L.rd, written) && L.status == 0)
        L.status = 1; /* a tracker failed: said on stderr and in summary.json */
    close_all(&L);
    return L.status;
}
