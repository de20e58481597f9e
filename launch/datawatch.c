/* launch/datawatch.c: ends a run whose environments produce only unusable data (see
 * datawatch.h). */
#include "launch/datawatch.h"

#include "runtime/streams/wire.h"

#include <math.h>
#include <stdio.h>

static int64_t sum_of(const gb_metrics_collector *mc, const char *name)
{
    double v = gb_metrics_sum(mc, GB_ROLE_TRAINER, name);
    return isnan(v) ? 0 : (int64_t)v;
}

void gb_datawatch_init(gb_datawatch *d, const gb_config *cfg)
{
    int64_t copies = cfg->actors.count * cfg->actors.envs_per_actor;
    d->limit = 4 * copies > GB_DATAWATCH_MIN_CHUNKS ? 4 * copies : GB_DATAWATCH_MIN_CHUNKS;
    d->usable = 0;
    d->bad_at_usable = 0;
}

int gb_datawatch_check(gb_datawatch *d, const gb_metrics_collector *mc, char *why, size_t n)
{
    int64_t received = sum_of(mc, "chunks_received"), bad = sum_of(mc, "chunks_nonfinite");
    if (received - bad > d->usable) {
        d->usable = received - bad;
        d->bad_at_usable = bad;
        return 0;
    }
    if (bad - d->bad_at_usable < d->limit)
        return 0;
    snprintf(why, n, "the environment produces unusable data: the last %lld chunks the trainers "
             "received all held NaN or infinity and none could be stored (%lld usable of %lld "
             "received in the run; logs/trainer-*.log names the first column affected)",
             (long long)(bad - d->bad_at_usable), (long long)d->usable, (long long)received);
    return 1;
}
