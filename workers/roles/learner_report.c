/* workers/roles/learner_report.c: a learner's metrics.csv columns (see learner_report.h). */
#include "workers/roles/learner_report.h"

#include <math.h>

void gb_learner_report_start(gb_learner_report *r, const gb_learning *L)
{
    r->steps = gb_learning_train_steps(L);
    gb_learning_timings(L, &r->collect_ms, &r->train_ms);
}

/* The learner statistics of the last training step, by column. */
static void statistics(const gb_torch_stats *s, double *row)
{
    row[GB_COL_LOSS] = s->loss;
    row[GB_COL_POLICY_LOSS] = s->policy_loss;
    row[GB_COL_VALUE_LOSS] = s->value_loss;
    row[GB_COL_ENTROPY] = s->entropy;
    row[GB_COL_KL] = s->approx_kl;
    row[GB_COL_CLIP_FRACTION] = s->clip_fraction;
    row[GB_COL_EXPLAINED_VAR] = s->explained_var;
    row[GB_COL_Q] = s->q_mean;
    row[GB_COL_TD_ABS] = s->td_abs_mean;
    row[GB_COL_ALPHA] = s->alpha;
    row[GB_COL_LR] = s->lr;
    row[GB_COL_GRAD_NORM] = s->grad_norm;
}

void gb_learner_report_row(gb_learner_report *r, const gb_config *cfg, const gb_learning *L,
                           int64_t env_steps, double *row)
{
    const int algo = cfg->trainer.algorithm.name;
    const gb_torch_stats *s = gb_learning_last(L);
    const int trained = s->gradient_steps > 0;
    double v[GB_NCOLS];
    statistics(s, v);
    v[GB_COL_EPSILON] = gb_config_dqn_epsilon(&cfg->trainer.algorithm.dqn, env_steps);
    /* collection against the training step, per step since the last report (CUDA events for
     * the device part of a cuda learner's collection) */
    double collect_ms, train_ms;
    gb_learning_timings(L, &collect_ms, &train_ms);
    int64_t steps = gb_learning_train_steps(L) - r->steps;
    double c = steps > 0 ? (collect_ms - r->collect_ms) / (double)steps : NAN;
    double tr = steps > 0 ? (train_ms - r->train_ms) / (double)steps : NAN;
    v[GB_COL_COLLECT_MS] = c;
    v[GB_COL_TRAIN_MS] = tr;
    v[GB_COL_COLLECT_SHARE] = steps > 0 && tr > 0.0 ? c / tr : NAN;
    r->steps += steps;
    r->collect_ms = collect_ms;
    r->train_ms = train_ms;
    for (int col = 0; col < GB_NCOLS; col++) {
        if (!gb_contract_learner_column(col))
            continue;
        int timing = col == GB_COL_COLLECT_MS || col == GB_COL_TRAIN_MS ||
                     col == GB_COL_COLLECT_SHARE;
        int epsilon = col == GB_COL_EPSILON;
        row[col] = gb_contract_reports(algo, col) && (trained || timing || epsilon) ? v[col]
                                                                                    : NAN;
    }
}
