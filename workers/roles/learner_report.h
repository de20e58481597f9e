/* workers/roles/learner_report.h: what a learner reports by the run contract
 * (runtime/run/contract.h): its statistics, the exploration epsilon and its timings as metrics.csv
 * columns, for inline mode's rows and the trainer's metrics alike.
 * defines: gb_learner_report, gb_learner_report_start, gb_learner_report_row */
#ifndef GB_WORKERS_LEARNER_REPORT_H
#define GB_WORKERS_LEARNER_REPORT_H

#include "runtime/config/config.h"
#include "runtime/run/contract.h"
#include "workers/roles/learning.h"

#include <stdint.h>

/* The timings at the last report (collection and training ms are per step since then). */
typedef struct gb_learner_report {
    int64_t steps;
    double collect_ms, train_ms;
} gb_learner_report;

/* Starts the timings at L's training steps so far (a restored learner's included). */
void gb_learner_report_start(gb_learner_report *r, const gb_learning *L);

/* Fills row[GB_NCOLS]'s learner columns (gb_contract_learner_column) for a report now and
 * moves the timings on; the other columns are not touched. A statistic is NaN where cfg's
 * algorithm does not report it or the learner has not trained in this process yet (the
 * contract's "trained"); epsilon is DQN's schedule at env_steps. Never blocks. */
void gb_learner_report_row(gb_learner_report *r, const gb_config *cfg, const gb_learning *L,
                           int64_t env_steps, double *row);

#endif
