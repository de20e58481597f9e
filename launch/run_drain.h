/* launch/run_drain.h: the end of a distributed run's sample stream: the workers stopped through
 * the run's states without losing a chunk in flight (runtime/streams/runctl.h), and the ledger of
 * what the actors sent and the trainers received, for summary.json.
 * defines: gb_run_drain, gb_run_last_reports, gb_run_ledger, gb_run_ledger_take,
 *          gb_run_ledger_summary */
#ifndef GB_LAUNCH_RUN_DRAIN_H
#define GB_LAUNCH_RUN_DRAIN_H

#include "launch/supervisor.h"
#include "launch/watchdog.h"
#include "runtime/config/config.h"
#include "runtime/run/metrics.h"
#include "runtime/run/rundir.h"
#include "runtime/streams/runctl.h"

#include <stdint.h>

/* Stops every worker of sup without losing a chunk on the sample stream, within the stop grace
 * (launch.stop_timeout_s), by moving the run's state (runtime/streams/runctl.h):
 *  1. ending: trainers stop waiting for their rate limiter and read everything; they confirm
 *     (up to 1/4 of the grace);
 *  2. flushing: the actors stop stepping, send what they hold and a final report, and keep
 *     their connections open (workers/roles/worker.h, gb_worker_wait_release);
 *  3. drained, once the trainers have received every chunk the actors counted as sent (up to
 *     0.35 of the grace), then released: the actors close and exit (0.15 of the grace);
 *  4. SIGTERM to the rest, SIGKILL to whatever is left when the grace runs out.
 * Without mc or rc (the run failed before they opened) only step 4. Whatever still goes missing
 * shows in the ledger (gb_run_ledger_take). Blocks for up to the stop grace. */
void gb_run_drain(gb_supervisor *sup, gb_runctl_server *rc, gb_metrics_collector *mc,
                  const gb_config *cfg, gb_watchdog *wd);

/* The sample stream's ledger at the end of a run, from every actor's and trainer's last report:
 * whatever left an actor and never reached a trainer is lost, and is said so, never silent. */
typedef struct gb_run_ledger {
    int complete;
    int64_t sent, dropped, received, discarded, lost_in_crash, nonfinite, rejected;
    int64_t trained; /* of received, drawn by a learner at least once */
} gb_run_ledger;

/* Takes the reports the workers sent as they stopped, after gb_run_drain: until every actor and
 * trainer has sent its last one (value "final": what the ledger reads), for up to 100 ms (a
 * killed worker's never comes), then whatever else is queued, without waiting. */
void gb_run_last_reports(gb_metrics_collector *m, const gb_config *cfg);

/* Takes the ledger from m's last reports and wd's crash counts; warns about what is missing or
 * lost (the log). Never blocks. */
void gb_run_ledger_take(const gb_metrics_collector *m, const gb_config *cfg,
                        const gb_watchdog *wd, gb_run_ledger *l);

/* Copies the ledger l into summary.json's samples (s: has_samples aside). */
void gb_run_ledger_summary(const gb_run_ledger *l, gb_run_summary *s);

#endif
