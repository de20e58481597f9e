/* launch/datawatch.h: ends a run whose environments produce nothing a trainer can use. Trainers
 * refuse chunks holding NaN or infinity (workers/roles/trainer.c: counted in chunks_nonfinite,
 * warned about at the 1st, 2nd, 4th, ...), so a plugin that emits a few such values costs a few
 * chunks and the run goes on. One that emits them all the time would leave the trainers with
 * nothing to learn from while the run ran on to its budget and exited 0; the launcher ends it
 * instead, with the cause, once the trainers have received `limit` chunks in a row (summed over
 * trainers, as their reports tell it) without a usable one.
 * defines: gb_datawatch, gb_datawatch_init, gb_datawatch_check, GB_DATAWATCH_MIN_CHUNKS */
#ifndef GB_LAUNCH_DATAWATCH_H
#define GB_LAUNCH_DATAWATCH_H

#include "runtime/config/config.h"
#include "runtime/run/metrics.h"

#include <stddef.h>
#include <stdint.h>

/* limit = max(GB_DATAWATCH_MIN_CHUNKS, 4 x the run's environment copies): every copy sent about
 * four chunks in a row, all unusable; a passing burst (say, a NaN in every copy's first
 * observation) stays far below it. */
#define GB_DATAWATCH_MIN_CHUNKS 1024

typedef struct gb_datawatch {
    int64_t limit;
    int64_t usable;         /* usable chunks the trainers reported (received - nonfinite) */
    int64_t bad_at_usable;  /* chunks_nonfinite when usable last grew */
} gb_datawatch;

void gb_datawatch_init(gb_datawatch *d, const gb_config *cfg);

/* Looks at the trainers' latest reports in mc. Returns 1 when the run must end (why filled: how
 * many chunks in a row were unusable, and where to look), else 0. Never blocks. */
int gb_datawatch_check(gb_datawatch *d, const gb_metrics_collector *mc, char *why, size_t n);

#endif
