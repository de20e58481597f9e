/* launch/watchdog.c: restarts of dead and hung workers (see watchdog.h).
 *
 * Which roles come back: actors (they lose at most the chunks they had not sent), policy workers
 * (they fetch the latest parameters at start; actors ask again when a request times out), the
 * parameter service (the trainer's next push refills it), a parameter relay (it fetches the
 * service's latest at start; its policy workers reconnect to it) and a lone trainer: it
 * re-attaches the replay its predecessor left in the run's shared memory (every committed item
 * kept), goes on with its predecessor's sample ledger (workers/roles/trainer_ledger.h) and reloads
 * its last model checkpoint (workers/roles/trainer.c). One of several data-parallel trainers does
 * not come back: the others wait in a collective for a rank that would have to rejoin a new group;
 * its death ends the run, as before.
 *
 * Whom to blame for silence: a worker blocked on backpressure stops reporting too (an actor
 * waits in its send while the trainers do not read). So a silent trainer or parameter service is
 * dealt with first, and actors are taken as hung only while every trainer reports. */
#include "launch/watchdog.h"

#include "runtime/base/clock.h"
#include "runtime/base/log.h"
#include "runtime/streams/sample_stream.h"
#include "runtime/streams/wire.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int role_of(const gb_child *c) { return gb_role_from_name(c->role); }

/* Counters that continue across restarts, per role (gb_metrics_collector_carry). */
static const char *const actor_counters[] = {"env_steps", "env_steps_sent", "episodes",
                                             "chunks_sent", "sample_drops",
                                             "inference_timeouts"};
static const char *const policy_counters[] = {"requests", "rows", "batches"};
/* A trainer's chunks_received, chunks_nonfinite and chunks_discarded_at_stop go on in its
 * ledger in shared memory (workers/roles/trainer_ledger.h): a restarted one reports them whole. */
static const char *const trainer_counters[] = {"chunks_rejected"};
/* Counters that only grow within one process (a report that says otherwise is refused:
 * runtime/run/metrics.h); the ledger's go on across a trainer's restarts in its shared memory. */
static const char *const trainer_growing[] = {"chunks_received", "chunks_nonfinite",
                                              "chunks_discarded_at_stop", "chunks_lost_in_crash",
                                              "env_steps_received", "samples_trained"};

int gb_watchdog_init(gb_watchdog *wd, const gb_config *cfg, gb_supervisor *sup,
                     gb_metrics_collector *mc, double t0, gb_error *err)
{
    memset(wd, 0, sizeof *wd);
    wd->cfg = cfg;
    wd->sup = sup;
    wd->mc = mc;
    wd->t0 = t0;
    int rc = gb_metrics_collector_carry(mc, GB_ROLE_ACTOR, actor_counters,
                                        (int)(sizeof actor_counters / sizeof *actor_counters),
                                        err);
    if (rc == 0)
        rc = gb_metrics_collector_carry(mc, GB_ROLE_POLICY, policy_counters,
                                        (int)(sizeof policy_counters / sizeof *policy_counters),
                                        err);
    if (rc == 0)
        rc = gb_metrics_collector_carry(mc, GB_ROLE_TRAINER, trainer_counters,
                                        (int)(sizeof trainer_counters / sizeof *trainer_counters),
                                        err);
    if (rc == 0)
        rc = gb_metrics_collector_counters(mc, GB_ROLE_TRAINER, trainer_growing,
                                           (int)(sizeof trainer_growing / sizeof *trainer_growing),
                                           err);
    /* the run's guard bounds returns; where the environment declares a reward range, the
     * launcher narrows the bound to it (gb_validate_reward_range) */
    gb_metrics_collector_bound_returns(mc, cfg->trainer.chunk_guard.max_abs_reward);
    return rc;
}

void gb_watchdog_free(gb_watchdog *wd)
{
    free(wd->restarts);
    gb_restart_window_free(&wd->window);
    free(wd->dead);
    memset(wd, 0, sizeof *wd);
}

/* Every role the launcher starts; one of several trainers only where the others can form their
 * group again with its restart (run control tells them the group's next generation). */
static int restartable(const gb_watchdog *wd, const gb_child *c)
{
    int role = role_of(c);
    return role == GB_ROLE_ACTOR || role == GB_ROLE_POLICY || role == GB_ROLE_PARAMS ||
           role == GB_ROLE_RELAY ||
           (role == GB_ROLE_TRAINER && (wd->cfg->trainer.count == 1 || wd->runctl));
}

/* Room for one more restart in wd->restarts. Returns 0, or -1 without memory. */
static int grow_restarts(gb_watchdog *wd)
{
    if (wd->nrestarts < wd->restarts_cap)
        return 0;
    int cap = wd->restarts_cap ? 2 * wd->restarts_cap : 16;
    gb_run_restart *r = realloc(wd->restarts, (size_t)cap * sizeof *r);
    if (!r)
        return -1;
    wd->restarts = r;
    wd->restarts_cap = cap;
    return 0;
}

/* Notes what actor (index, incarnation)'s process had reported (the sample ledger's view of
 * it). */
static void remember_actor(gb_watchdog *wd, int index, int incarnation)
{
    gb_error e = {0};
    gb_metrics_collector_poll(wd->mc, 0, &e); /* reports it sent before dying */
    if (gb_metrics_incarnation(wd->mc, GB_ROLE_ACTOR, index) != incarnation)
        return; /* it never reported: nothing sent that anyone counted */
    if (wd->ndead == wd->dead_cap) {
        int cap = wd->dead_cap ? 2 * wd->dead_cap : 16;
        gb_dead_actor *d = realloc(wd->dead, (size_t)cap * sizeof *d);
        if (!d)
            return;
        wd->dead = d;
        wd->dead_cap = cap;
    }
    /* the collector adds earlier processes' counts: take those off */
    int64_t sent = 0, dropped = 0;
    for (int i = 0; i < wd->ndead; i++)
        if (wd->dead[i].index == index) {
            sent += wd->dead[i].sent;
            dropped += wd->dead[i].dropped;
        }
    double s = gb_metrics_get(wd->mc, GB_ROLE_ACTOR, index, "chunks_sent");
    double d = gb_metrics_get(wd->mc, GB_ROLE_ACTOR, index, "sample_drops");
    wd->dead[wd->ndead++] = (gb_dead_actor){
        .index = index,
        .incarnation = incarnation,
        .sent = (isnan(s) ? 0 : (int64_t)s) - sent,
        .dropped = (isnan(d) ? 0 : (int64_t)d) - dropped,
    };
}

/* Notes whether trainer c's process kept its sample ledger where its successor finds it
 * (ledger_shared = 1 in its last report). Only a process that said 0 did not: one that never
 * reported, or reported without saying (none does: the trainer sets it as it opens the ledger,
 * before its first report, even one sent while it waits for its group), is taken to have: the
 * ledger is the first thing a trainer makes, shared unless /dev/shm is full. */
static void remember_trainer(gb_watchdog *wd, const gb_child *c)
{
    gb_error e = {0};
    gb_metrics_collector_poll(wd->mc, 0, &e);
    if (gb_metrics_incarnation(wd->mc, GB_ROLE_TRAINER, c->index) == c->incarnation &&
        gb_metrics_get(wd->mc, GB_ROLE_TRAINER, c->index, "ledger_shared") == 0)
        wd->ledger_lost = 1;
}

/* Restarts c (ended or killed) if the budget allows. Returns 0 when restarted, 1 when the run
 * must end (why filled). */
static int restart(gb_watchdog *wd, gb_child *c, const char *what, char *why, size_t n)
{
    double t = gb_now_s() - wd->t0;
    const gb_config_restart *rb = &wd->cfg->launch.restart;
    if (!restartable(wd, c)) {
        snprintf(why, n, "worker %s-%d %s (one of several trainers, with no run control to form "
                 "their group again)", c->role,
                 c->index, what);
        return 1;
    }
    if (!gb_restart_window_allows(&wd->window, t, rb->max_restarts, rb->window_s)) {
        snprintf(why, n, "worker %s-%d %s; no restart left (launch.restart allows %lld within "
                 "%g s)", c->role, c->index, what, (long long)rb->max_restarts, rb->window_s);
        return 1;
    }
    if (role_of(c) == GB_ROLE_ACTOR)
        remember_actor(wd, c->index, c->incarnation);
    if (role_of(c) == GB_ROLE_TRAINER)
        remember_trainer(wd, c);
    /* a report the dead process left on its way arriving now would change the counts the
     * collector carries, but not what was remembered above: the ledger would not balance */
    gb_metrics_collector_retire(wd->mc, role_of(c), c->index, c->incarnation);
    if (grow_restarts(wd) || gb_restart_window_note(&wd->window, t)) {
        snprintf(why, n, "worker %s-%d %s; out of memory to restart it", c->role, c->index,
                 what);
        return 1;
    }
    gb_run_restart *r = &wd->restarts[wd->nrestarts++];
    snprintf(r->worker, sizeof r->worker, "%s-%d", c->role, c->index);
    snprintf(r->reason, sizeof r->reason, "%s", what);
    r->at_s = t;
    gb_error err = {0};
    /* one of several trainers: the survivors and the restarted one meet as the group's next
     * generation (workers/roles/trainer_group.c) */
    if (role_of(c) == GB_ROLE_TRAINER && wd->cfg->trainer.count > 1)
        GB_INFO("trainers: the group re-forms as generation %lld with the restarted trainer-%d",
                (long long)gb_runctl_server_next_trainer_group(wd->runctl), c->index);
    /* the new process's reports are the only ones taken from now on (its predecessors' are
     * stale, any later incarnation forged) */
    if (gb_supervisor_restart(wd->sup, c, &err) ||
        gb_metrics_collector_issue(wd->mc, role_of(c), c->index, c->incarnation, &err)) {
        snprintf(why, n, "worker %s-%d %s; restarting it failed: %s", c->role, c->index, what,
                 err.msg);
        return 1;
    }
    GB_WARN("worker %s-%d %s; restarted it (pid %d, restart %d of the run; %lld allowed "
            "within %g s)", c->role, c->index, what, (int)c->pid, wd->nrestarts,
            (long long)rb->max_restarts, rb->window_s);
    return 0;
}

/* Seconds worker c has been silent: since its process's last report, or, before its first,
 * since it started less the time it may take to start (peers it waits for at start included). */
static double silent_s(const gb_watchdog *wd, const gb_child *c, double now)
{
    int role = role_of(c);
    double last = gb_metrics_last_report_s(wd->mc, role, c->index);
    if (gb_metrics_incarnation(wd->mc, role, c->index) == c->incarnation && !isnan(last))
        return now - last;
    double startup = (double)wd->cfg->streams.registry_timeout_ms / 1000.0;
    return now - c->started_s - startup;
}

/* The hung worker to deal with first, or NULL: see the top of this file. */
static gb_child *find_hung(const gb_watchdog *wd, double now, double *silent)
{
    double limit = wd->cfg->launch.heartbeat_timeout_s;
    gb_child *hung = NULL, *hung_actor = NULL;
    int trainer_silent = 0;
    for (int i = 0; i < wd->sup->n; i++) {
        gb_child *c = &wd->sup->children[i];
        if (!c->running || silent_s(wd, c, now) <= limit)
            continue;
        int role = role_of(c);
        trainer_silent |= role == GB_ROLE_TRAINER || role == GB_ROLE_PARAMS ||
                          role == GB_ROLE_RELAY;
        if (role == GB_ROLE_ACTOR) {
            if (!hung_actor)
                hung_actor = c;
        } else if (!hung || role_of(hung) == GB_ROLE_POLICY) {
            hung = c; /* trainers and the parameter service before policy workers */
        }
    }
    if (!hung && !trainer_silent)
        hung = hung_actor;
    if (hung)
        *silent = silent_s(wd, hung, now);
    return hung;
}

int gb_watchdog_check(gb_watchdog *wd, gb_child **culprit, char *why, size_t n,
                      const char **exit_reason)
{
    gb_child *c;
    while ((c = gb_supervisor_reap(wd->sup))) {
        char how[384];
        gb_child_describe(c, how, sizeof how);
        if (restart(wd, c, how, why, n)) {
            *culprit = c;
            *exit_reason = "worker_died";
            return 1;
        }
    }
    double silent = 0;
    if ((c = find_hung(wd, gb_now_s(), &silent))) {
        char what[128];
        snprintf(what, sizeof what, "hung: no report for %.1f s (launch.heartbeat_timeout_s "
                 "%g); killed", silent, wd->cfg->launch.heartbeat_timeout_s);
        gb_supervisor_kill(wd->sup, c);
        if (restart(wd, c, what, why, n)) {
            *culprit = c;
            *exit_reason = "worker_hung";
            return 1;
        }
    }
    return 0;
}

/* Trainer t's last ledger (gb_ledger_row rows, *n of them); NULL when it sent none. */
static const gb_ledger_row *trainer_ledger_rows(const gb_watchdog *wd, int t, int *n)
{
    const int64_t *rows;
    int ncols;
    if (!gb_metrics_table(wd->mc, GB_ROLE_TRAINER, t, &rows, n, &ncols) ||
        ncols != GB_LEDGER_COLS)
        return NULL;
    return (const gb_ledger_row *)rows;
}

/* Whether ledger row y is from a dead actor process the watchdog remembers. */
static int from_dead_actor(const gb_watchdog *wd, const gb_ledger_row *y)
{
    for (int i = 0; i < wd->ndead; i++)
        if (wd->dead[i].index == y->sender && wd->dead[i].incarnation == y->incarnation)
            return 1;
    return 0;
}

/* Several trainers, one of them restarted: an actor process numbers its chunks once for all
 * the trainers (its PUSH socket picks the trainer), so a restarted trainer cannot tell which of
 * the numbers it never saw were meant for it, and its rows' lost_in_crash count the others'
 * too. The books merge here instead: of a live actor process's chunks up to the highest number
 * any trainer received, those no trainer received went down with a killed one (actors never
 * drop a chunk while the trainers live; at the end every chunk in flight has arrived). */
static int64_t union_gaps(const gb_watchdog *wd, int trainers)
{
    int64_t lost = 0;
    for (int t = 0; t < trainers; t++) {
        int n = 0;
        const gb_ledger_row *y = trainer_ledger_rows(wd, t, &n);
        for (int r = 0; y && r < n; r++) {
            if (from_dead_actor(wd, &y[r]))
                continue;
            int seen = 0; /* the process was summed at an earlier trainer's row */
            int64_t max_number = 0, received = 0;
            for (int u = 0; u < trainers && !seen; u++) {
                int m = 0;
                const gb_ledger_row *z = trainer_ledger_rows(wd, u, &m);
                for (int q = 0; z && q < m && !seen; q++) {
                    if (z[q].sender != y[r].sender || z[q].incarnation != y[r].incarnation)
                        continue;
                    seen = u < t || (u == t && q < r);
                    max_number = z[q].max_number > max_number ? z[q].max_number : max_number;
                    received += z[q].received;
                }
            }
            if (!seen && max_number > received)
                lost += max_number - received;
        }
    }
    return lost;
}

void gb_watchdog_ledger(const gb_watchdog *wd, int64_t *lost_in_crash, int64_t *sent_extra)
{
    *lost_in_crash = *sent_extra = 0;
    int trainers = (int)wd->cfg->trainer.count;
    /* Live actor processes: what went down with a killed trainer, by the trainers' ledger. A
     * dead one's is in its sent - received below. */
    int merged = trainers > 1 && (gb_watchdog_restarts_of(wd, "trainer") > 0 ||
                                  (wd->runctl && gb_runctl_server_trainer_group(wd->runctl) > 0));
    if (merged)
        *lost_in_crash = union_gaps(wd, trainers);
    for (int t = 0; t < trainers && !merged; t++) {
        int n = 0;
        const gb_ledger_row *y = trainer_ledger_rows(wd, t, &n);
        for (int r = 0; y && r < n; r++)
            if (!from_dead_actor(wd, &y[r]))
                *lost_in_crash += y[r].lost_in_crash;
    }
    for (int i = 0; i < wd->ndead; i++) {
        const gb_dead_actor *d = &wd->dead[i];
        /* what the trainers got from that process: summed, and the highest chunk number */
        int64_t received = 0, max_number = 0;
        for (int t = 0; t < trainers; t++) {
            int n = 0;
            const gb_ledger_row *y = trainer_ledger_rows(wd, t, &n);
            for (int r = 0; y && r < n; r++) {
                if (y[r].sender != d->index || y[r].incarnation != d->incarnation)
                    continue;
                received += y[r].received;
                if (y[r].max_number > max_number)
                    max_number = y[r].max_number;
            }
        }
        /* chunk numbers count sent and dropped chunks alike */
        int64_t sent = d->sent;
        if (max_number - d->dropped > sent) {
            *sent_extra += max_number - d->dropped - sent;
            sent = max_number - d->dropped;
        }
        if (sent > received)
            *lost_in_crash += sent - received;
    }
}

int gb_watchdog_joiners_gone(gb_watchdog *wd, int64_t from, int64_t to)
{
    gb_error e = {0};
    gb_metrics_collector_poll(wd->mc, 0, &e);
    double now = gb_now_s();
    double quiet = 3 * wd->cfg->experiment.metrics_interval_s;
    quiet = quiet > 2.0 ? quiet : 2.0;
    int gone = 0;
    for (int64_t i = from; i < to; i++) {
        int inc = gb_metrics_incarnation(wd->mc, GB_ROLE_ACTOR, (int)i);
        double last = gb_metrics_last_report_s(wd->mc, GB_ROLE_ACTOR, (int)i);
        if (inc < 0 || gb_metrics_get(wd->mc, GB_ROLE_ACTOR, (int)i, "final") == 1 ||
            !(now - last > quiet))
            continue; /* never joined, left cleanly, or still there */
        remember_actor(wd, (int)i, inc);
        gb_metrics_collector_retire(wd->mc, GB_ROLE_ACTOR, (int)i, inc);
        GB_WARN("actor %lld (joined from another host) left without a final report %.1f s ago: "
                "its chunks are counted by what the trainers received", (long long)i, now - last);
        gone++;
    }
    return gone;
}

int gb_watchdog_restarts_of(const gb_watchdog *wd, const char *role)
{
    int n = 0;
    size_t len = strlen(role);
    for (int i = 0; i < wd->nrestarts; i++)
        n += strncmp(wd->restarts[i].worker, role, len) == 0 && wd->restarts[i].worker[len] == '-';
    return n;
}
