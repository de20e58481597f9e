/* launch/run_rows.c: a distributed run's metrics.csv rows and progress line (see run_rows.h). */
#include "launch/run_rows.h"

#include "runtime/base/log.h"
#include "runtime/streams/curve.h"
#include "runtime/streams/wire.h"

#include "launch/joins.h"
#include "workers/roles/checkpoint_set.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <unistd.h>

static double or0(double v) { return isnan(v) ? 0 : v; }

void gb_run_rows_base(const double *last, gb_run_base *b)
{
    b->time = or0(last[GB_COL_TIME]);
    b->env_steps = or0(last[GB_COL_ENV_STEPS]);
    b->episodes = or0(last[GB_COL_EPISODES]);
    b->samples = or0(last[GB_COL_SAMPLES]);
    b->train_steps = or0(last[GB_COL_TRAIN_STEPS]);
    b->segment = (int)or0(last[GB_COL_SEGMENT]) + 1;
}

int gb_run_resume_sets(const char *run_dir, const gb_config *cfg)
{
    const int trainers = (int)cfg->trainer.count;
    const int local = (int)gb_joins_local(cfg, GB_ROLE_TRAINER);
    int left = 0, have0 = 0;
    gb_checkpoint_files f;
    gb_error err = {0};
    char ckpt_dir[GB_CHECKPOINT_PATH_MAX];
    snprintf(ckpt_dir, sizeof ckpt_dir, "%s/checkpoints", run_dir);
    DIR *d = opendir(ckpt_dir);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        int k = -1, end = 0;
        char name[32];
        if (sscanf(e->d_name, "trainer-%d.checkpoint%n", &k, &end) != 1 ||
            e->d_name[end] != '\0' || k < 0)
            continue;
        snprintf(name, sizeof name, "trainer-%d", k);
        if (gb_checkpoint_find(ckpt_dir, name, &f, &err) != 0)
            continue; /* the trainer that owns it says why it cannot restore it */
        have0 |= k == 0;
        if (k < trainers)
            continue;
        left++;
        GB_WARN("resume: checkpoints/%s (training step %lld%s) is not restored: "
                "trainer.count is %d now; it stays on disk (a resume with trainer.count %d or "
                "more takes it up)", name, (long long)f.step,
                f.replay[0] ? ", with its replay" : "", trainers, k + 1);
    }
    if (d)
        closedir(d);
    for (int k = 1; have0 && k < trainers && k < local; k++) { /* joined ones: on their hosts */
        char name[32], manifest[GB_CHECKPOINT_PATH_MAX + 48];
        snprintf(name, sizeof name, "trainer-%d", k);
        snprintf(manifest, sizeof manifest, "%s/%s.checkpoint", ckpt_dir, name);
        if (access(manifest, F_OK) != 0)
            GB_INFO("resume: %s has no checkpoint: it starts from trainer-0's restored "
                    "parameters with an empty replay", name);
    }
    return left;
}

/* The counters: steps, episodes, rates, the replay's fill. */
static void counters(const gb_metrics_collector *m, double t, const gb_run_rates *r,
                     const gb_run_base *b, double *row)
{
    row[GB_COL_TIME] = b->time + t;
    /* steps in the chunks the actors sent (those still being filled when the run stops, or
     * dropped, never reach a trainer: summary.json's env_steps_unsent), as far as the trainers
     * have received them: a report cannot claim more than arrived (the budget, the progress the
     * learners' schedules follow and the verdict's env steps go by this) */
    row[GB_COL_ENV_STEPS] = b->env_steps + fmin(gb_run_rows_sent_steps(m),
                                                gb_run_rows_received_steps(m));
    /* data-parallel trainers take each step together: a step is one, not one per trainer. A
     * resumed trainer counts on from its checkpoint (before it reports: the last row's) */
    double train = gb_metrics_max(m, GB_ROLE_TRAINER, "train_steps");
    row[GB_COL_TRAIN_STEPS] = isnan(train) ? b->train_steps : train;
    gb_run_rates_fill(r, b->time, b->env_steps, b->train_steps, row);
    row[GB_COL_SAMPLES] =
        b->samples + or0(gb_metrics_sum(m, GB_ROLE_TRAINER, "samples_trained"));
    row[GB_COL_EPISODES] = b->episodes + (double)gb_metrics_episodes(m);
    row[GB_COL_RETURN] = gb_metrics_return_mean(m);
    row[GB_COL_LENGTH] = gb_metrics_length_mean(m);
    row[GB_COL_REPLAY_SIZE] = gb_metrics_sum(m, GB_ROLE_TRAINER, "replay_size");
    double cap = gb_metrics_sum(m, GB_ROLE_TRAINER, "replay_capacity");
    row[GB_COL_REPLAY_FILL] = cap > 0 ? row[GB_COL_REPLAY_SIZE] / cap : NAN;
    row[GB_COL_DROPS] = or0(gb_metrics_sum(m, GB_ROLE_ACTOR, "sample_drops"));
    row[GB_COL_REJECTED] = or0(gb_metrics_sum(m, GB_ROLE_TRAINER, "chunks_rejected"));
    double received = gb_metrics_sum(m, GB_ROLE_TRAINER, "chunks_received");
    row[GB_COL_TRAINED_SHARE] =
        received > 0 ? or0(gb_metrics_sum(m, GB_ROLE_TRAINER, "chunks_trained")) / received : NAN;
    row[GB_COL_SEGMENT] = b->segment;
}

void gb_run_rows_sample(const gb_metrics_collector *m, double t, const gb_run_rates *rates,
                        const gb_run_base *b, double *row)
{
    counters(m, t, rates, b, row);
    row[GB_COL_VERSION] = gb_metrics_max(m, GB_ROLE_TRAINER, "policy_version");
    row[GB_COL_SERVED] = gb_metrics_min(m, GB_ROLE_POLICY, "policy_version");
    /* the trainer reports every metrics interval, the policy workers too: the served version
     * can be newer than the last reported trained one; that is no lag */
    row[GB_COL_LAG] = fmax(0.0, row[GB_COL_VERSION] - row[GB_COL_SERVED]);
    /* trainer 0's learner statistics, epsilon, and collection against its training step
     * (CUDA events on a GPU), under the columns' own names */
    const char *const *names = gb_contract_columns();
    for (int c = 0; c < GB_NCOLS; c++)
        if (gb_contract_learner_column(c))
            row[c] = gb_metrics_get(m, GB_ROLE_TRAINER, 0, names[c]);
}

double gb_run_rows_received_steps(const gb_metrics_collector *m)
{
    return or0(gb_metrics_sum(m, GB_ROLE_TRAINER, "env_steps_received"));
}

double gb_run_rows_sent_steps(const gb_metrics_collector *m)
{
    return or0(gb_metrics_sum(m, GB_ROLE_ACTOR, "env_steps_sent"));
}

int gb_run_rows_vouched(const gb_metrics_collector *m, int reached, gb_run_vouch *v)
{
    if (!reached) {
        v->need = 0;
        return 0;
    }
    if (v->need == 0) {
        int64_t claimed = gb_metrics_episode_steps(m);
        v->need = claimed > 1 ? claimed : 1;
    }
    double got = gb_run_rows_received_steps(m);
    if (got >= (double)v->need)
        return 1;
    if (!v->said++)
        GB_INFO("the training episodes reached the target; the verdict waits until the trainers "
                "have received the %lld steps they span (%.0f so far)", (long long)v->need, got);
    return 0;
}

int64_t gb_run_rows_env_steps(const gb_metrics_collector *m, const gb_run_base *b)
{
    double claimed = gb_run_rows_sent_steps(m), received = gb_run_rows_received_steps(m);
    if (claimed <= received)
        return (int64_t)(b->env_steps + claimed);
    GB_WARN("the actors report %.0f env steps sent, the trainers received %.0f: counted %.0f",
            claimed, received, b->env_steps + received);
    return (int64_t)(b->env_steps + received);
}

int64_t gb_run_rows_reports_rejected(const gb_metrics_collector *m)
{
    return (int64_t)(gb_metrics_collector_rejected(m) + gb_metrics_collector_unexpected(m) +
                     gb_metrics_collector_refused(m));
}

int64_t gb_run_rows_auth_refused(const gb_metrics_collector *m, const gb_curve *curve)
{
    if (!curve)
        return -1;
    int64_t refused = (int64_t)gb_curve_refused(curve);
    for (int role = 1; m && role < GB_ROLE_END; role++) {
        double v = gb_metrics_sum(m, role, "auth_refused");
        refused += isnan(v) ? 0 : (int64_t)v;
    }
    return refused;
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

void gb_run_rows_progress(const double *row, int live)
{
    char steps[32], rate[32], train[32], trate[32];
    human(row[GB_COL_ENV_STEPS], steps, sizeof steps);
    human(row[GB_COL_ENV_RATE], rate, sizeof rate);
    human(row[GB_COL_TRAIN_STEPS], train, sizeof train);
    human(row[GB_COL_TRAIN_RATE], trate, sizeof trate);
    char line[256];
    char fill[16] = "-", ret[16] = "-", lag[16] = "-";
    if (!isnan(row[GB_COL_REPLAY_FILL]))
        snprintf(fill, sizeof fill, "%.0f%%", 100 * row[GB_COL_REPLAY_FILL]);
    if (!isnan(row[GB_COL_RETURN]))
        snprintf(ret, sizeof ret, "%.1f", row[GB_COL_RETURN]);
    if (!isnan(row[GB_COL_LAG]))
        snprintf(lag, sizeof lag, "%.0f", row[GB_COL_LAG]);
    snprintf(line, sizeof line,
             "%6.1fs  env %s (%s/s)  train %s (%s/s)  replay %s  return %s  lag %s",
             row[GB_COL_TIME], steps, rate, train, trate, fill, ret, lag);
    if (live)
        fprintf(stderr, "\r\033[K%s", line);
    else
        fprintf(stderr, "%s\n", line);
    fflush(stderr);
}
