/* launch/run_drain.c: the end of a distributed run's sample stream: the drain through the run's
 * states and the sample ledger (see run_drain.h). */
#include "launch/run_drain.h"

#include "launch/joins.h"
#include "runtime/base/clock.h"
#include "runtime/base/log.h"
#include "runtime/streams/wire.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static double or0(double v) { return isnan(v) ? 0 : v; }

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

/* The supervisor's wait: the workers' reports read meanwhile (their last ones among them). */
static void read_reports(void *arg, int ms)
{
    gb_error e = {0};
    if (gb_metrics_collector_poll(arg, ms, &e) < 0)
        gb_sleep_ms(ms);
}

/* What a trainer's last report says it is writing (workers/roles/trainer.c: "writing" 1, a
 * checkpoint; 2, --record's dataset), or NULL: the stop waits for it rather than lose the
 * run's last model or its recorded data (a loaded disk's fsync took 24 s). */
static const char *writing(void *arg, const gb_child *c)
{
    if (strcmp(c->role, "trainer") != 0)
        return NULL;
    double w = gb_metrics_get(arg, GB_ROLE_TRAINER, c->index, "writing");
    return w == 1 ? "its checkpoint" : w == 2 ? "its recorded dataset" : NULL;
}

void gb_run_drain(gb_supervisor *sup, gb_runctl_server *rc, gb_metrics_collector *mc,
                  const gb_config *cfg, gb_watchdog *wd)
{
    /* the hand-over phases take their share of at most 4.5 s; whatever launch.stop_timeout_s
     * gives beyond that is for the workers' own stop (a trainer's final checkpoint of a large
     * replay takes longer than 4.5 s, and was killed for it) */
    double whole = cfg->launch.stop_timeout_s;
    double grace = whole < 4.5 ? whole : 4.5;
    double t0 = gb_now_s();
    stop_view v = {mc, rc, cfg, wd, 0};
    if (mc) { /* reports read while the workers stop, not left to fill their queues */
        sup->while_waiting = read_reports;
        sup->waiting_arg = mc;
        sup->busy = writing;
        sup->busy_arg = mc;
        sup->busy_max_s = cfg->launch.stop_checkpoint_s;
    }
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
    sup->while_waiting = NULL;
    sup->busy = NULL;
    if (killed)
        GB_WARN("%d workers did not stop within %.1f s (launch.stop_timeout_s) and were killed",
                killed, whole);
    GB_DEBUG("workers stopped in %.2f s", gb_now_s() - t0);
}

/* 1 when every actor and trainer has sent its last report. */
static int finals_in(const gb_metrics_collector *m, const gb_config *cfg)
{
    for (int64_t i = 0; i < cfg->actors.count; i++)
        if (gb_metrics_get(m, GB_ROLE_ACTOR, (int)i, "final") != 1)
            return 0;
    for (int64_t i = 0; i < cfg->trainer.count; i++)
        if (gb_metrics_get(m, GB_ROLE_TRAINER, (int)i, "final") != 1)
            return 0;
    return 1;
}

void gb_run_last_reports(gb_metrics_collector *m, const gb_config *cfg)
{
    gb_error e = {0};
    for (double end = gb_now_s() + 0.1; !finals_in(m, cfg) && gb_now_s() < end;)
        gb_metrics_collector_poll(m, 10, &e);
    gb_metrics_collector_poll(m, 0, &e);
}

void gb_run_ledger_take(const gb_metrics_collector *m, const gb_config *cfg,
                        const gb_watchdog *wd, gb_run_ledger *l)
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
    l->trained = (int64_t)or0(gb_metrics_sum(m, GB_ROLE_TRAINER, "chunks_trained"));
    int64_t sent_extra = 0;
    gb_watchdog_ledger(wd, &l->lost_in_crash, &sent_extra);
    l->sent += sent_extra;
    if (l->lost_in_crash)
        GB_WARN("sample ledger: %lld chunks sent never reached a trainer or went down with one "
                "(lost_in_crash: restarted workers)", (long long)l->lost_in_crash);
    /* A restarted trainer goes on with its predecessor's ledger (workers/roles/trainer_ledger.h),
     * so trainer restarts keep the ledger exact, but for two cases that cannot be: a killed trainer
     * whose ledger was in its own memory (no room in /dev/shm), and chunks an actor dropped
     * (a restarted trainer counts every number it did not get as lost; actors never drop). */
    int trainer_restarts = gb_watchdog_restarts_of(wd, "trainer");
    if (l->complete && wd->ledger_lost) {
        l->complete = 0;
        GB_WARN("sample ledger incomplete: a killed trainer kept its ledger in process memory "
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

void gb_run_ledger_summary(const gb_run_ledger *l, gb_run_summary *s)
{
    s->ledger_complete = l->complete;
    s->chunks_sent = l->sent;
    s->chunks_dropped = l->dropped;
    s->chunks_received = l->received;
    s->chunks_discarded = l->discarded;
    s->chunks_lost_in_crash = l->lost_in_crash;
    s->chunks_nonfinite = l->nonfinite;
    s->chunks_rejected = l->rejected;
    s->chunks_trained = l->trained;
}
