/* launch/watchdog.h: keeps a local run's workers alive: a worker that died, or that sent no
 * report (its heartbeat) for launch.heartbeat_timeout_s, is killed and started again with the
 * same role and index, as long as launch.restart allows (max_restarts within any window_s).
 * It keeps the restart log for summary.json and what the sample ledger needs to count the
 * chunks a dead actor sent that no trainer received (lost_in_crash); the chunks that went down
 * with a killed trainer come from the trainers' own ledger (workers/roles/trainer_ledger.h).
 * defines: gb_watchdog, gb_watchdog_init, gb_watchdog_check, gb_watchdog_ledger,
 *          gb_watchdog_joiners_gone, gb_watchdog_free */
#ifndef GB_LAUNCH_WATCHDOG_H
#define GB_LAUNCH_WATCHDOG_H

#include "launch/restart_window.h"
#include "launch/supervisor.h"
#include "runtime/config/config.h"
#include "runtime/run/metrics.h"
#include "runtime/run/rundir.h"
#include "runtime/streams/runctl.h"

#include <stddef.h>
#include <stdint.h>

/* What an actor process had reported when it died. */
typedef struct gb_dead_actor {
    int index, incarnation;
    int64_t sent, dropped; /* that process's own counts, as last reported */
} gb_dead_actor;

typedef struct gb_watchdog {
    const gb_config *cfg;
    gb_supervisor *sup;
    gb_metrics_collector *mc;
    double t0;
    gb_run_restart *restarts; /* [nrestarts] */
    int nrestarts, restarts_cap;
    gb_restart_window window; /* their times: launch.restart's sliding window */
    gb_dead_actor *dead; /* [ndead] */
    int ndead, dead_cap;
    int ledger_lost; /* a killed trainer kept its ledger in process memory: the ledger is unknown */
    gb_runctl_server *runctl; /* optional: restarting one of several trainers moves the
                                 trainers' group to its next generation here */
} gb_watchdog;

/* Watches sup's children; mc gives their reports (and carries their counters over restarts:
 * this registers which). t0: the run's start (gb_now_s). Returns 0 or GB_EFULL. */
int gb_watchdog_init(gb_watchdog *wd, const gb_config *cfg, gb_supervisor *sup,
                     gb_metrics_collector *mc, double t0, gb_error *err);

/* Reaps dead workers and looks for hung ones; restarts each within the budget. Returns 0 while
 * the run can go on, or 1 when it must end: a worker died or hung past the budget, or one of a
 * role that is not restarted (see watchdog.c); then *culprit is that worker, why says what
 * happened ("worker actor-0 killed by signal 9 ...") and *exit_reason is "worker_died" or
 * "worker_hung". Never blocks for long (a kill waits for the process to go). */
int gb_watchdog_check(gb_watchdog *wd, gb_child **culprit, char *why, size_t n,
                      const char **exit_reason);

/* The ledger's view of crashes: *lost_in_crash, the chunks dead actor processes sent (as last
 * reported, or as far as the highest chunk number a trainer got from them) that no trainer
 * received, plus the chunks of live ones that went down with a killed trainer (the trainers'
 * ledger rows, gb_ledger_row.lost_in_crash); *sent_extra, the chunks dead actor processes sent
 * beyond their last report (add to chunks_sent). */
void gb_watchdog_ledger(const gb_watchdog *wd, int64_t *lost_in_crash, int64_t *sent_extra);

/* For the end of a run: the actors in slots [from, to) that joined from other hosts (gearbox
 * join) and went silent without a final report (killed, their host gone) are counted as dead
 * processes in the ledger above: what they sent is what the trainers got from them. Returns how
 * many. Polls the metrics (no wait). */
int gb_watchdog_joiners_gone(gb_watchdog *wd, int64_t from, int64_t to);

/* Restarts of workers of role ("trainer") so far. */
int gb_watchdog_restarts_of(const gb_watchdog *wd, const char *role);

void gb_watchdog_free(gb_watchdog *wd);

#endif
