/* launch/run_local.c: the local backend of `gearbox run` (see run_local.h): run directory,
 * registry thread, metrics collection, worker processes, stop conditions, progress display,
 * metrics.csv and summary.json; and the same for a resumed run (gearbox run --resume), whose
 * counters go on from the last row of its metrics.csv. The Slurm backend is this same launcher
 * with each worker started as a step of the run's Slurm job (launch/slurm.h). */
#include "launch/run_local.h"

#include "kernels/kernels.h"
#include "runtime/run/rundir.h"
#include "launch/datawatch.h"
#include "launch/evals.h"
#include "launch/joins.h"
#include "launch/slurm.h"
#include "launch/supervisor.h"
#include "launch/watchdog.h"
#include "runtime/base/clock.h"
#include "runtime/streams/curve.h"
#include "runtime/streams/endpoint.h"
#include "runtime/base/log.h"
#include "runtime/run/metrics.h"
#include "runtime/streams/registry.h"
#include "runtime/streams/runctl.h"
#include "runtime/base/shm.h"
#include "runtime/streams/wire.h"
#include "workers/roles/worker.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
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

/* One row of metrics.csv (and of tb/, runtime/run/tensorboard.h) and what the progress line shows.
 * New columns go at the end: a resumed run's metrics.csv from an earlier gearbox is widened
 * (gb_rundir_metrics_continue). The trainer's statistics that its algorithm has not (KL for
 * DQN, Q for PPO) are empty. */
enum {
    M_TIME, M_ENV_STEPS, M_ENV_RATE, M_TRAIN_STEPS, M_TRAIN_RATE, M_SAMPLES, M_EPISODES,
    M_RETURN, M_LENGTH, M_REPLAY_SIZE, M_REPLAY_FILL, M_VERSION, M_SERVED, M_LAG, M_LOSS,
    M_ENTROPY, M_DROPS, M_REJECTED, M_SEGMENT, M_POLICY_LOSS, M_VALUE_LOSS, M_KL, M_Q, M_LR,
    M_COLLECT_MS, M_TRAIN_MS, M_COLLECT_SHARE, M_NCOLS
};
static const char *const columns[M_NCOLS] = {
    "time_s", "env_steps", "env_steps_per_s", "train_steps", "train_steps_per_s",
    "samples_trained", "episodes", "return_mean_100", "length_mean_100", "replay_size",
    "replay_fill", "policy_version", "served_version_min", "version_lag", "loss", "entropy",
    "sample_drops", "chunks_rejected", "segment", "policy_loss", "value_loss", "approx_kl",
    "q_mean", "lr", "collect_ms", "train_ms", "collect_share"};

static double or0(double v) { return isnan(v) ? 0 : v; }

/* Where a resumed run's counters go on from (all 0 for a run's first launch): its metrics.csv's
 * last row. Env steps, episodes, samples and time add up over segments; train steps come from
 * the trainers, which restore theirs with the model. */
typedef struct run_base {
    double time, env_steps, episodes, samples, train_steps;
    int segment; /* this launch's: 0, +1 per resume */
} run_base;

static void base_from_row(const double *last, run_base *b)
{
    b->time = or0(last[M_TIME]);
    b->env_steps = or0(last[M_ENV_STEPS]);
    b->episodes = or0(last[M_EPISODES]);
    b->samples = or0(last[M_SAMPLES]);
    b->train_steps = or0(last[M_TRAIN_STEPS]);
    b->segment = (int)or0(last[M_SEGMENT]) + 1;
}

/* What the stop decisions look at: the metrics and the run-control confirmations. */
typedef struct stop_view {
    gb_metrics_collector *m;
    const gb_runctl_server *rc;
    const gb_config *cfg;
    const gb_watchdog *wd;
    int64_t joiners_gone; /* actor slots below actors.count whose joined worker left unflagged */
} stop_view;

/* How many of the count workers of role have reported name = 1 (a flag: final). */
static int64_t flagged(const gb_metrics_collector *m, int role, int64_t count, const char *name)
{
    int64_t n = 0;
    for (int64_t i = 0; i < count; i++)
        n += gb_metrics_get(m, role, (int)i, name) == 1;
    return n;
}

/* Polls the metrics until done(v) or max_s passes; returns done's last answer. */
static int poll_until(const stop_view *v, double max_s, int (*done)(const stop_view *))
{
    gb_error e = {0};
    for (double end = gb_now_s() + max_s;; ) {
        if (done(v))
            return 1;
        if (gb_now_s() >= end)
            return 0;
        gb_metrics_collector_poll(v->m, 10, &e);
    }
}

/* Every trainer confirmed the end (gb_worker_confirm_ending). */
static int trainers_ending(const stop_view *v)
{
    return gb_runctl_server_confirmed(v->rc, GB_ROLE_TRAINER, GB_RUN_ENDING) >=
           v->cfg->trainer.count;
}

/* Every chunk the actors sent arrived, less what dead actors' processes lost (their chunks
 * cannot arrive any more; watchdog.h). */
static int chunks_all_received(const stop_view *v)
{
    int64_t lost_in_crash = 0, sent_extra = 0;
    gb_watchdog_ledger(v->wd, &lost_in_crash, &sent_extra);
    return flagged(v->m, GB_ROLE_ACTOR, v->cfg->actors.count, "final") + v->joiners_gone >=
               v->cfg->actors.count &&
           or0(gb_metrics_sum(v->m, GB_ROLE_TRAINER, "chunks_received")) +
                   (double)lost_in_crash >=
               or0(gb_metrics_sum(v->m, GB_ROLE_ACTOR, "chunks_sent")) + (double)sent_extra;
}

/* Stops every worker without losing a chunk on the sample stream, within the stop grace, by
 * moving the run's state (runtime/streams/runctl.h):
 *  1. ending: trainers stop waiting for their rate limiter and read everything; they confirm
 *     (up to 1/4 of the grace);
 *  2. flushing: the actors stop stepping, send what they hold and a final report, and keep
 *     their connections open (workers/roles/worker.h, gb_worker_wait_release);
 *  3. drained, once the trainers have received every chunk the actors counted as sent (up to
 *     0.35 of the grace), then released: the actors close and exit (0.15 of the grace);
 *  4. SIGTERM to the rest, SIGKILL to whatever is left when the grace runs out.
 * Whatever still goes missing shows in summary.json's sample ledger. */
static void stop_workers(gb_supervisor *sup, gb_runctl_server *rc, gb_metrics_collector *mc,
                         const gb_config *cfg, gb_watchdog *wd)
{
    /* the hand-over phases take their share of at most 4.5 s; whatever launch.stop_timeout_s
     * gives beyond that is for the workers' own stop (a trainer's final checkpoint of a large
     * replay takes longer than 4.5 s, and was killed for it) */
    double whole = cfg->launch.stop_timeout_s;
    double grace = whole < 4.5 ? whole : 4.5;
    double t0 = gb_now_s();
    stop_view v = {mc, rc, cfg, wd, 0};
    /* actors joined from other hosts (gearbox join) that were killed will send no final
     * report: count what the trainers got from them, and do not wait for them */
    if (mc) {
        int64_t local = gb_joins_local(cfg, GB_ROLE_ACTOR);
        v.joiners_gone = gb_watchdog_joiners_gone(wd, local, cfg->actors.count);
        gb_watchdog_joiners_gone(wd, cfg->actors.count, cfg->actors.count + cfg->actors.join_max);
    }
    if (mc && rc) {
        gb_runctl_server_set(rc, GB_RUN_ENDING);
        if (!poll_until(&v, 0.25 * grace, trainers_ending))
            GB_WARN("not every trainer confirmed the end of the run within %.1f s", 0.25 * grace);
        gb_runctl_server_set(rc, GB_RUN_FLUSHING);
        if (poll_until(&v, 0.35 * grace, chunks_all_received))
            gb_runctl_server_set(rc, GB_RUN_DRAINED);
        else
            GB_WARN("the trainers had not received every chunk %.1f s after the actors stopped",
                    0.35 * grace);
        gb_runctl_server_set(rc, GB_RUN_RELEASED);
        int slow = gb_supervisor_wait_role(sup, "actor", 0.15 * grace);
        if (slow)
            GB_WARN("%d actors still running after their release; stopping the rest now", slow);
    }
    int killed = gb_supervisor_stop_all(sup, whole - (gb_now_s() - t0));
    if (killed)
        GB_WARN("%d workers did not stop within %.1f s (launch.stop_timeout_s) and were killed",
                killed, whole);
    GB_DEBUG("workers stopped in %.2f s", gb_now_s() - t0);
}

/* The sample stream's books at the end of a run, from every actor's and trainer's last report:
 * whatever left an actor and never reached a trainer is lost, and is said so, never silent. */
typedef struct sample_ledger {
    int complete;
    int64_t sent, dropped, received, discarded, lost_in_crash, nonfinite, rejected;
} sample_ledger;

static void ledger_take(const gb_metrics_collector *m, const gb_config *cfg,
                        const gb_watchdog *wd, sample_ledger *l)
{
    static const struct { int role; const char *name; } roles[] = {
        {GB_ROLE_ACTOR, "actor"}, {GB_ROLE_TRAINER, "trainer"}};
    char missing[256] = "";
    size_t used = 0;
    int nmissing = 0;
    for (int r = 0; r < 2; r++) {
        int64_t count = roles[r].role == GB_ROLE_ACTOR ? cfg->actors.count : cfg->trainer.count;
        for (int64_t i = 0; i < count; i++) {
            if (gb_metrics_get(m, roles[r].role, (int)i, "final") == 1)
                continue;
            if (nmissing++ < 8 && used < sizeof missing)
                used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%s-%lld",
                                         used ? ", " : "", roles[r].name, (long long)i);
        }
    }
    l->complete = nmissing == 0;
    l->sent = (int64_t)or0(gb_metrics_sum(m, GB_ROLE_ACTOR, "chunks_sent"));
    l->dropped = (int64_t)or0(gb_metrics_sum(m, GB_ROLE_ACTOR, "sample_drops"));
    l->received = (int64_t)or0(gb_metrics_sum(m, GB_ROLE_TRAINER, "chunks_received"));
    l->discarded = (int64_t)or0(gb_metrics_sum(m, GB_ROLE_TRAINER, "chunks_discarded_at_stop"));
    l->nonfinite = (int64_t)or0(gb_metrics_sum(m, GB_ROLE_TRAINER, "chunks_nonfinite"));
    l->rejected = (int64_t)or0(gb_metrics_sum(m, GB_ROLE_TRAINER, "chunks_rejected"));
    int64_t sent_extra = 0;
    gb_watchdog_ledger(wd, &l->lost_in_crash, &sent_extra);
    l->sent += sent_extra;
    if (l->lost_in_crash)
        GB_WARN("sample ledger: %lld chunks sent never reached a trainer or went down with one "
                "(lost_in_crash: restarted workers)", (long long)l->lost_in_crash);
    /* A restarted trainer goes on with its predecessor's books (workers/roles/trainer_books.h), so
     * trainer restarts keep the ledger exact, but for two cases that cannot be: a killed trainer
     * whose books were in its own memory (no room in /dev/shm), and chunks an actor dropped
     * (a restarted trainer counts every number it did not get as lost; actors never drop). */
    int trainer_restarts = gb_watchdog_restarts_of(wd, "trainer");
    if (l->complete && wd->books_lost) {
        l->complete = 0;
        GB_WARN("sample ledger incomplete: a killed trainer kept its books in process memory "
                "(its shared segment could not be made); what it received is not known "
                "(summary.json: samples.lost = null)");
    } else if (l->complete && trainer_restarts && l->dropped) {
        l->complete = 0;
        GB_WARN("sample ledger incomplete: actors dropped %lld chunks and a trainer was "
                "restarted; dropped and lost chunks cannot be told apart (summary.json: "
                "samples.lost = null)", (long long)l->dropped);
    } else if (!l->complete)
        GB_WARN("sample ledger incomplete: no final report from %s%s (killed or died); chunks "
                "lost in transport are unknown (summary.json: samples.lost = null)", missing,
                nmissing > 8 ? ", ..." : "");
    else if (l->sent - l->lost_in_crash != l->received)
        GB_WARN("sample ledger: actors sent %lld chunks, trainers received %lld: %lld lost in "
                "transport", (long long)l->sent, (long long)l->received,
                (long long)(l->sent - l->lost_in_crash - l->received));
    if (l->dropped)
        GB_WARN("sample stream: actors dropped %lld chunks no trainer accepted in time",
                (long long)l->dropped);
}

/* One row at t seconds into this launch (b: where a resumed run goes on from). */
static void sample_metrics(const gb_metrics_collector *m, double t, const double *prev,
                           const run_base *b, double *row)
{
    row[M_TIME] = b->time + t;
    /* steps in the chunks the actors sent: those still being filled when the run stops (or
     * dropped) never reach a trainer (summary.json: env_steps_unsent) */
    row[M_ENV_STEPS] = b->env_steps + or0(gb_metrics_sum(m, GB_ROLE_ACTOR, "env_steps_sent"));
    /* data-parallel trainers take each step together: a step is one, not one per trainer. A
     * resumed trainer counts on from its checkpoint (before it reports: the last row's) */
    double train = gb_metrics_max(m, GB_ROLE_TRAINER, "train_steps");
    row[M_TRAIN_STEPS] = isnan(train) ? b->train_steps : train;
    double dt = prev ? t - (prev[M_TIME] - b->time) : t;
    row[M_ENV_RATE] =
        dt > 0 ? (row[M_ENV_STEPS] - (prev ? prev[M_ENV_STEPS] : b->env_steps)) / dt : 0;
    row[M_TRAIN_RATE] =
        dt > 0 ? (row[M_TRAIN_STEPS] - (prev ? prev[M_TRAIN_STEPS] : b->train_steps)) / dt : 0;
    row[M_SAMPLES] = b->samples + or0(gb_metrics_sum(m, GB_ROLE_TRAINER, "samples_trained"));
    row[M_EPISODES] = b->episodes + (double)gb_metrics_episodes(m);
    row[M_RETURN] = gb_metrics_return_mean(m);
    row[M_LENGTH] = gb_metrics_length_mean(m);
    row[M_REPLAY_SIZE] = gb_metrics_sum(m, GB_ROLE_TRAINER, "replay_size");
    double cap = gb_metrics_sum(m, GB_ROLE_TRAINER, "replay_capacity");
    row[M_REPLAY_FILL] = cap > 0 ? row[M_REPLAY_SIZE] / cap : NAN;
    row[M_VERSION] = gb_metrics_max(m, GB_ROLE_TRAINER, "policy_version");
    row[M_SERVED] = gb_metrics_min(m, GB_ROLE_POLICY, "policy_version");
    /* the trainer reports every metrics interval, the policy workers too: the served version
     * can be newer than the last reported trained one; that is no lag */
    row[M_LAG] = fmax(0.0, row[M_VERSION] - row[M_SERVED]);
    row[M_LOSS] = gb_metrics_get(m, GB_ROLE_TRAINER, 0, "loss");
    row[M_ENTROPY] = gb_metrics_get(m, GB_ROLE_TRAINER, 0, "entropy");
    row[M_POLICY_LOSS] = gb_metrics_get(m, GB_ROLE_TRAINER, 0, "policy_loss");
    row[M_VALUE_LOSS] = gb_metrics_get(m, GB_ROLE_TRAINER, 0, "value_loss");
    row[M_KL] = gb_metrics_get(m, GB_ROLE_TRAINER, 0, "approx_kl");
    row[M_Q] = gb_metrics_get(m, GB_ROLE_TRAINER, 0, "q_mean");
    row[M_LR] = gb_metrics_get(m, GB_ROLE_TRAINER, 0, "lr");
    /* trainer 0's collection against its training step (CUDA events on a GPU) */
    row[M_COLLECT_MS] = gb_metrics_get(m, GB_ROLE_TRAINER, 0, "collect_ms");
    row[M_TRAIN_MS] = gb_metrics_get(m, GB_ROLE_TRAINER, 0, "train_ms");
    row[M_COLLECT_SHARE] = gb_metrics_get(m, GB_ROLE_TRAINER, 0, "collect_share");
    row[M_DROPS] = or0(gb_metrics_sum(m, GB_ROLE_ACTOR, "sample_drops"));
    row[M_REJECTED] = or0(gb_metrics_sum(m, GB_ROLE_TRAINER, "chunks_rejected"));
    row[M_SEGMENT] = b->segment;
}

static void human(double v, char *buf, size_t n)
{
    if (isnan(v))
        snprintf(buf, n, "-");
    else if (fabs(v) >= 1e6)
        snprintf(buf, n, "%.2fM", v / 1e6);
    else if (fabs(v) >= 1e4)
        snprintf(buf, n, "%.1fk", v / 1e3);
    else
        snprintf(buf, n, "%.0f", v);
}

static void progress(const double *row, int live)
{
    char steps[32], rate[32], train[32], trate[32];
    human(row[M_ENV_STEPS], steps, sizeof steps);
    human(row[M_ENV_RATE], rate, sizeof rate);
    human(row[M_TRAIN_STEPS], train, sizeof train);
    human(row[M_TRAIN_RATE], trate, sizeof trate);
    char line[256];
    char fill[16] = "-", ret[16] = "-", lag[16] = "-";
    if (!isnan(row[M_REPLAY_FILL]))
        snprintf(fill, sizeof fill, "%.0f%%", 100 * row[M_REPLAY_FILL]);
    if (!isnan(row[M_RETURN]))
        snprintf(ret, sizeof ret, "%.1f", row[M_RETURN]);
    if (!isnan(row[M_LAG]))
        snprintf(lag, sizeof lag, "%.0f", row[M_LAG]);
    snprintf(line, sizeof line,
             "%6.1fs  env %s (%s/s)  train %s (%s/s)  replay %s  return %s  lag %s",
             row[M_TIME], steps, rate, train, trate, fill, ret, lag);
    if (live)
        fprintf(stderr, "\r\033[K%s", line);
    else
        fprintf(stderr, "%s\n", line);
    fflush(stderr);
}

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
        GB_INFO("registry %s: workers on other hosts join with `gearbox join %s --role actor`",
                reg_ep, reg_ep);
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

static int spawn_role(gb_supervisor *sup, const gb_rundir *rd, const char *exe, const char *role,
                      int count, const char *reg_ep, const char *met_ep, const char *record,
                      int segment, const gb_slurm_job *job, gb_error *err)
{
    for (int i = 0; i < count; i++) {
        char index[16], seg[16], log_rel[64], log_path[2048];
        snprintf(index, sizeof index, "%d", i);
        snprintf(seg, sizeof seg, "%d", segment);
        snprintf(log_rel, sizeof log_rel, "logs/%s-%d.log", role, i);
        int rc = gb_rundir_file(rd, log_rel, log_path, sizeof log_path, err);
        if (rc)
            return rc;
        char *argv[] = {(char *)exe,         "worker",          "--role",   (char *)role,
                        "--index",           index,             "--run-dir", (char *)rd->path,
                        "--registry",        (char *)reg_ep,    "--metrics", (char *)met_ep,
                        NULL,                NULL,              NULL,
                        NULL,                NULL};
        int n = 12;
        if (record) { /* gearbox run --record DIR */
            argv[n++] = "--record";
            argv[n++] = (char *)record;
        }
        if (segment) { /* gearbox run --resume: its own random streams */
            argv[n++] = "--segment";
            argv[n++] = seg;
        }
        char *step[GB_CHILD_MAX_ARGS + 1], step_buf[GB_CHILD_ARGS_BYTES];
        if (job && (rc = gb_slurm_step_argv(job, role, i, argv, step, GB_CHILD_MAX_ARGS + 1,
                                            step_buf, sizeof step_buf, err)))
            return rc;
        if ((rc = gb_supervisor_spawn(sup, role, i, job ? step : argv, log_path, err)))
            return rc;
    }
    return 0;
}

int gb_run_local(const gb_config *cfg, const gb_cli *cli)
{
    static gb_rundir rd;
    static gb_supervisor sup;
    static gb_watchdog wd;
    static gb_joins joins; /* slots for workers joining from other hosts (gearbox join) */
    static gb_evals evals; /* evaluation videos (experiment.eval_every); zeroed: off */
    int joins_ready = 0;
    static gb_slurm_job slurm;
    const int on_slurm = cfg->launch.mode == GB_LAUNCH_SLURM;
    gb_datawatch dw;
    gb_error err = {0};
    gb_log_init("launcher", -1, (gb_log_level)cfg->experiment.log_level);
    /* a cuda trainer this build or machine cannot run fails here, before any worker starts
     * (on Slurm the trainers' nodes have the GPUs: only the build is checked; the trainer
     * checks the rest, libtorch's CUDA included) */
    if (cfg->trainer.device == GB_DEVICE_CUDA &&
        (!gb_kernels_cuda_built() || (!on_slurm && gb_kernels_device_count() < 1))) {
        fprintf(stderr, "%s: trainer.device: cuda: %s; use cpu\n", cfg->source,
                !gb_kernels_cuda_built() ? "this gearbox was built without CUDA"
                                         : "no CUDA device is visible here");
        return 2;
    }
    if (cfg->policy.device == GB_DEVICE_CUDA && !on_slurm && gb_kernels_cuda_built() &&
        gb_kernels_device_count() < 1) {
        fprintf(stderr, "%s: policy.device: cuda: no CUDA device is visible here; use cpu\n",
                cfg->source);
        return 2;
    }
    if (cli->resume ? gb_rundir_reopen(&rd, cfg, cli->resume, &err)
                    : gb_rundir_create(&rd, cfg, cli->run_dir, &err)) {
        fprintf(stderr, "gearbox run: %s%s\n", cli->resume ? "--resume: " : "", err.msg);
        return 1;
    }
    char log_path[2048];
    if (gb_rundir_file(&rd, "logs/launcher.log", log_path, sizeof log_path, &err) == 0)
        gb_log_open_file(log_path);
    GB_INFO("run directory %s", rd.path);

    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    const char *exit_reason = "error";
    char error_text[GB_ERROR_MSG_MAX + 256] = "";
    int status = 1;
    void *zctx = zmq_ctx_new();
    registry_thread reg = {0};
    pthread_t reg_thread;
    int reg_started = 0;
    gb_metrics_collector *mc = NULL;
    gb_runctl_server *runctl = NULL;
    char reg_ep[GB_REGISTRY_ENDPOINT_MAX], met_ep[GB_REGISTRY_ENDPOINT_MAX], exe[PATH_MAX];
    double t0 = gb_now_s();
    int live = 0, show = 0;
    double row[M_NCOLS] = {0}, prev[M_NCOLS] = {0}, last[M_NCOLS];
    int have_prev = 0;
    run_base base = {0};

    gb_curve *curve = NULL;
    int rc = zctx ? 0 : gb_error_set(&err, GB_EZMQ, "zmq_ctx_new failed");
    /* tcp with CURVE: the run's key pairs, made once (a resume keeps them), in RUN_DIR/keys;
     * every worker loads them from there (gearbox worker --keys) */
    if (rc == 0 && gb_config_streams_curve(&cfg->streams)) {
        char kd[2048];
        snprintf(kd, sizeof kd, "%s/%s", rd.path, GB_CURVE_KEYS_DIR);
        if (!cli->resume)
            rc = gb_curve_run_keys_create(rd.path, &err);
        if (rc == 0)
            rc = gb_curve_run_attach(&curve, zctx, kd, &err);
    }
    /* on tcp every endpoint is on streams.interface, the launcher's too: workers on other
     * hosts reach them (launch/joins.h) */
    if (rc == 0)
        rc = gb_endpoint_make(reg_ep, sizeof reg_ep, cfg->streams.transport, rd.path,
                              cfg->streams.interface, "registry", &err);
    if (rc == 0)
        rc = gb_endpoint_make(met_ep, sizeof met_ep, cfg->streams.transport, rd.path,
                              cfg->streams.interface, "metrics", &err);
    if (rc == 0)
        rc = gb_runctl_server_open(&runctl, &err);
    if (rc == 0)
        rc = gb_metrics_collector_open(&mc, zctx, met_ep, &err);
    if (rc == 0)
        rc = bound_endpoint(NULL, mc, met_ep, sizeof met_ep, &err);
    if (rc == 0 && (rc = gb_joins_init(&joins, cfg, met_ep, rd.path, &err)) == 0)
        joins_ready = 1;
    gb_registry_server_opts ro = {.endpoint = reg_ep, .max_ttl_ms = 60000, .runctl = runctl,
                                  .join = gb_joins_answer, .join_arg = &joins};
    if (rc == 0)
        rc = gb_registry_server_open(&reg.server, zctx, &ro, &err);
    if (rc == 0)
        rc = bound_endpoint(reg.server, NULL, reg_ep, sizeof reg_ep, &err);
    if (rc == 0)
        announce_registry(&rd, cfg, reg_ep);
    if (rc == 0)
        rc = gb_watchdog_init(&wd, cfg, &sup, mc, t0, &err);
    gb_datawatch_init(&dw, cfg);
    /* only the run's own workers may report (a forged report must not end the run) */
    if (rc == 0)
        rc = gb_metrics_collector_expect(mc, GB_ROLE_PARAMS, 1, &err);
    /* per_host relays: this host's, or one a node of a multi-node Slurm job (launch/slurm.h) */
    int relays = cfg->parameters.relay == GB_RELAY_PER_HOST ? gb_slurm_relays(cfg) : 0;
    if (rc == 0 && relays) { /* and those of hosts whose policy workers join (launch/joins.h) */
        joins.relay_next = relays; /* joiners' relays after the launcher's own */
        joins.relay_end = relays - 1 + gb_joins_relays(cfg);
        rc = gb_metrics_collector_expect(mc, GB_ROLE_RELAY, joins.relay_end, &err);
    }
    if (rc == 0)
        rc = gb_metrics_collector_expect(mc, GB_ROLE_TRAINER, cfg->trainer.count, &err);
    if (rc == 0)
        rc = gb_metrics_collector_expect(mc, GB_ROLE_POLICY, cfg->policy.count, &err);
    if (rc == 0)
        rc = gb_metrics_collector_expect(mc, GB_ROLE_ACTOR,
                                         cfg->actors.count + cfg->actors.join_max, &err);
    if (rc == 0 && pthread_create(&reg_thread, NULL, registry_main, &reg) != 0)
        rc = gb_error_errno(&err, "pthread_create");
    reg_started = rc == 0;
    if (rc == 0 && !cli->resume)
        rc = gb_rundir_metrics_open(&rd, columns, M_NCOLS, &err);
    if (rc == 0 && cli->resume &&
        (rc = gb_rundir_metrics_continue(&rd, columns, M_NCOLS, last, &err)) == 0) {
        base_from_row(last, &base);
        GB_INFO("resuming (segment %d) after %.0f env steps, %.0f episodes, %.1f s", base.segment,
                base.env_steps, base.episodes, base.time);
    }
    if (rc == 0)
        rc = self_path(exe, sizeof exe, &err);
    if (rc == 0)
        gb_evals_init(&evals, &rd, rd.path, exe, cfg->experiment.eval_every,
                      cfg->experiment.eval_episodes, cfg->experiment.seed,
                      (int64_t)base.env_steps);
    const gb_slurm_job *job = NULL;
    if (rc == 0 && on_slurm) { /* the run's job first: every worker is one of its steps */
        char slurm_log[2048];
        rc = gb_rundir_file(&rd, "logs/slurm.log", slurm_log, sizeof slurm_log, &err);
        if (rc == 0)
            rc = gb_slurm_allocate(&slurm, cfg, slurm_log, &interrupted, &err);
        if (rc == GB_EINTR)
            exit_reason = "interrupted";
        job = &slurm;
        sup.stop_hook = gb_slurm_signal_steps;
        sup.stop_arg = &slurm;
        sup.kill_term_s = 3; /* SIGTERM to an srun cancels its step: no step left behind */
    }
    if (rc == 0)
        rc = spawn_role(&sup, &rd, exe, "params", 1, reg_ep, met_ep, NULL,
                        base.segment, job, &err);
    if (rc == 0 && relays)
        rc = spawn_role(&sup, &rd, exe, "relay", relays, reg_ep, met_ep, NULL, base.segment,
                        job, &err);
    if (rc == 0)
        rc = spawn_role(&sup, &rd, exe, "trainer", (int)cfg->trainer.count, reg_ep, met_ep,
                        cli->record, base.segment, job, &err);
    if (rc == 0)
        rc = spawn_role(&sup, &rd, exe, "policy", (int)gb_joins_local(cfg, GB_ROLE_POLICY),
                        reg_ep, met_ep, NULL, base.segment, job, &err);
    if (rc == 0)
        rc = spawn_role(&sup, &rd, exe, "actor", (int)gb_joins_local(cfg, GB_ROLE_ACTOR),
                        reg_ep, met_ep, NULL, base.segment, job, &err);
    if (rc) {
        snprintf(error_text, sizeof error_text, "%s", err.msg);
        GB_ERROR("%s", err.msg);
        goto stop;
    }
    GB_INFO("started %lld actors x %lld envs, %lld policy, %lld trainer workers and the "
            "parameter service%s", (long long)gb_joins_local(cfg, GB_ROLE_ACTOR),
            (long long)cfg->actors.envs_per_actor, (long long)gb_joins_local(cfg, GB_ROLE_POLICY),
            (long long)cfg->trainer.count, on_slurm ? " as steps of the slurm job" : "");

    live = cfg->launch.progress == GB_PROGRESS_LINE ||
               (cfg->launch.progress == GB_PROGRESS_AUTO && isatty(STDERR_FILENO));
    show = cfg->launch.progress != GB_PROGRESS_OFF;
    double next_row = t0 + cfg->experiment.metrics_interval_s;
    double next_plain = t0 + 5.0;
    for (;;) {
        if (gb_metrics_collector_poll(mc, 50, &err) < 0) {
            snprintf(error_text, sizeof error_text, "metrics: %s", err.msg);
            break;
        }
        double now = gb_now_s(), t = now - t0;
        gb_child *dead = NULL;
        const char *why_reason = NULL;
        if (gb_watchdog_check(&wd, &dead, error_text, sizeof error_text, &why_reason)) {
            if (live)
                fputc('\n', stderr);
            GB_ERROR("%s; the end of its log (%s):", error_text, dead->log_path);
            gb_log_tail(dead->log_path, 20, "    | ", stderr);
            exit_reason = why_reason;
            break;
        }
        if (gb_datawatch_check(&dw, mc, error_text, sizeof error_text)) {
            if (live)
                fputc('\n', stderr);
            GB_ERROR("%s", error_text);
            exit_reason = "unusable_data";
            break;
        }
        int sig = atomic_load(&interrupted);
        if (sig) {
            exit_reason = "interrupted";
            snprintf(error_text, sizeof error_text, "stopped by signal %d (%s)", sig,
                     strsignal(sig));
            break;
        }
        sample_metrics(mc, t, have_prev ? prev : NULL, &base, row);
        gb_runctl_server_set_env_steps(runctl, (int64_t)row[M_ENV_STEPS]);
        /* a finished evaluation goes to tb/: a write failure ends the run, as metrics.csv's */
        if (gb_evals_poll(&evals, (int64_t)row[M_ENV_STEPS], &err)) {
            snprintf(error_text, sizeof error_text, "evaluation: %s", err.msg);
            GB_ERROR("%s", error_text);
            break;
        }
        if (now >= next_row) {
            /* a full disk (or any write failure) in the run directory ends the run */
            if (gb_rundir_metrics_row(&rd, row, M_NCOLS, &err)) {
                snprintf(error_text, sizeof error_text, "metrics: %s", err.msg);
                GB_ERROR("%s", error_text);
                break;
            }
            if (gb_log_file_errno()) {
                snprintf(error_text, sizeof error_text, "logs/launcher.log: write: %s",
                         strerror(gb_log_file_errno()));
                GB_ERROR("%s", error_text);
                break;
            }
            memcpy(prev, row, sizeof row);
            have_prev = 1;
            next_row = now + cfg->experiment.metrics_interval_s;
            if (show && (live || now >= next_plain)) {
                progress(row, live);
                next_plain = now + 5.0;
            }
        }
        double target = cfg->experiment.target_return;
        if (!isnan(target) && gb_metrics_episodes(mc) >= GB_METRICS_WINDOW &&
            gb_metrics_return_mean(mc) >= target) {
            exit_reason = "solved";
            status = 0;
            break;
        }
        if (cfg->experiment.max_env_steps > 0 &&
            row[M_ENV_STEPS] >= (double)cfg->experiment.max_env_steps) {
            exit_reason = "max_env_steps";
            status = 0;
            break;
        }
        if (cfg->experiment.max_seconds > 0 && row[M_TIME] >= cfg->experiment.max_seconds) {
            exit_reason = "max_seconds";
            status = 0;
            break;
        }
    }
stop:;
    double wall = gb_now_s() - t0;
    if (show && live)
        fputc('\n', stderr);
    /* The mean the stop was decided on (and `solved` judged by): episodes that finish while
     * the workers stop still count in `episodes`, but do not move this figure. */
    double decided_return = mc ? gb_metrics_return_mean(mc) : NAN;
    GB_INFO("%s: stopping the workers", exit_reason); /* from here a worker's death fails it */
    stop_workers(&sup, runctl, mc, cfg, &wd);
    if (on_slurm && gb_slurm_release(&slurm, &err)) { /* after its steps: nothing left in squeue */
        GB_ERROR("%s", err.msg);
        status = 1;
    }
    /* Workers send a last report as they stop: take it. */
    if (mc) {
        gb_metrics_collector_poll(mc, 100, &err);
        sample_metrics(mc, wall, have_prev ? prev : NULL, &base, row);
        gb_rundir_metrics_row(&rd, row, M_NCOLS, &err);
    }
    /* a video being made is finished, not cut off; one still waiting for a checkpoint is made
     * from the final one (the trainers wrote it as they stopped) */
    if (gb_evals_finish(&evals, (int64_t)row[M_ENV_STEPS], 120, &err) && status == 0) {
        status = 1;
        exit_reason = "error";
        snprintf(error_text, sizeof error_text, "evaluation: %s", err.msg);
        GB_ERROR("%s", error_text);
    }
    /* A worker that failed while stopping (its final checkpoint, say) or had to be killed
     * fails the run, whatever ended it. */
    int solved = strcmp(exit_reason, "solved") == 0;
    char failed[512];
    if (gb_supervisor_failures(&sup, failed, sizeof failed) && status == 0) {
        status = 1;
        exit_reason = "worker_failed";
        snprintf(error_text, sizeof error_text, "while the run stopped: %s", failed);
        GB_ERROR("%s", error_text);
    }
    sample_ledger ledger = {0};
    if (mc)
        ledger_take(mc, cfg, &wd, &ledger);
    /* every step the actors took; env_steps counts those in chunks they sent */
    double steps_taken = mc ? or0(gb_metrics_sum(mc, GB_ROLE_ACTOR, "env_steps")) : 0;
    /* refused for want of the run's keys: the launcher's own sockets and every worker's */
    int64_t refused = -1, joined = 0;
    if (curve) {
        refused = (int64_t)gb_curve_refused(curve);
        for (int role = 1; mc && role < GB_ROLE_END; role++)
            refused += (int64_t)or0(gb_metrics_sum(mc, role, "auth_refused"));
    }
    if (joins_ready) {
        pthread_mutex_lock(&joins.lock);
        joined = joins.joined;
        pthread_mutex_unlock(&joins.lock);
    }
    gb_run_summary s = {
        .mode = on_slurm ? "slurm" : "local",
        .env_steps = (int64_t)row[M_ENV_STEPS],
        .env_steps_unsent = (int64_t)fmax(0.0, base.env_steps + steps_taken - row[M_ENV_STEPS]),
        .train_steps = (int64_t)row[M_TRAIN_STEPS],
        .wall_seconds = base.time + wall,
        .episode_return_mean = decided_return,
        .episodes = (int64_t)base.episodes + (mc ? gb_metrics_episodes(mc) : 0),
        .target_return = cfg->experiment.target_return,
        .solved = solved,
        .exit_reason = exit_reason,
        .error = error_text[0] ? error_text : NULL,
        .actors = cfg->actors.count,
        .policies = cfg->policy.count,
        .trainers = cfg->trainer.count,
        .envs = cfg->actors.count * cfg->actors.envs_per_actor,
        .has_samples = mc != NULL,
        .ledger_complete = ledger.complete,
        .chunks_sent = ledger.sent,
        .chunks_dropped = ledger.dropped,
        .chunks_received = ledger.received,
        .chunks_discarded = ledger.discarded,
        .chunks_lost_in_crash = ledger.lost_in_crash,
        .restarts = wd.restarts,
        .nrestarts = wd.nrestarts,
        .chunks_nonfinite = ledger.nonfinite,
        .chunks_rejected = ledger.rejected,
        .joined = joined,
        .auth_refused = refused,
        .segment = base.segment,
        .segment_env_steps = (int64_t)base.env_steps,
        .segment_seconds = wall,
    };
    if (gb_rundir_write_summary(&rd, &s, &err)) {
        /* the run's record is lost: say why where the user sees it, and fail */
        fprintf(stderr, "gearbox run: summary.json not written: %s (the run ended: %s%s%s)\n",
                err.msg, exit_reason, error_text[0] ? ": " : "", error_text);
        GB_ERROR("summary.json: %s", err.msg);
        status = 1;
    }
    GB_INFO("%s after %.1f s: %lld env steps (%.0f/s), %lld train steps, mean return %.1f; "
            "%s/summary.json", exit_reason, wall, (long long)s.env_steps,
            wall > 0 ? ((double)s.env_steps - base.env_steps) / wall : 0.0,
            (long long)s.train_steps,
            s.episode_return_mean, rd.path);
    if (reg_started) {
        atomic_store(&reg.stop, 1);
        pthread_join(reg_thread, NULL);
    }
    gb_watchdog_free(&wd);
    gb_metrics_collector_close(mc);
    gb_registry_server_close(reg.server);
    if (joins_ready)
        gb_joins_free(&joins);
    gb_runctl_server_close(runctl);
    /* the replay segments a trainer left for its restart (workers/roles/trainer.c): the run is over */
    int removed = 0;
    if (gb_shm_unlink_run(rd.path, &removed, &err))
        GB_WARN("shared memory of the run: %s", err.msg);
    else if (removed)
        GB_INFO("removed %d shared-memory segments a trainer left", removed);
    gb_rundir_close(&rd);
    gb_curve_detach(curve);
    if (zctx)
        zmq_ctx_term(zctx);
    gb_log_close();
    return status;
}
