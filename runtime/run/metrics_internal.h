/* runtime/run/metrics_internal.h: the metrics collector's state, shared by its two files:
 * metrics.c (the socket, taking reports, the queries) and metrics_check.c (what a report must be
 * to be taken, metrics.h). Calls go one way: metrics.c -> metrics_check.c.
 * defines: worker_values, gb_metrics_collector, metrics_report, gb_metrics_check_report,
 *          gb_metrics_counter_kind, gb_metrics_issued_incarnation */
#ifndef GB_RUNTIME_METRICS_INTERNAL_H
#define GB_RUNTIME_METRICS_INTERNAL_H

#include "runtime/run/contract.h"
#include "runtime/run/metrics.h"
#include "runtime/streams/wire.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* The largest tensor of a well-formed report: its table (the names, values and episodes are
 * smaller). */
#define METRICS_MAX_FRAME \
    ((uint64_t)GB_METRICS_TABLE_MAX_ROWS * GB_METRICS_TABLE_MAX_COLS * sizeof(int64_t))

typedef struct worker_values {
    int role, index;
    int n;
    char names[GB_METRICS_MAX_VALUES][GB_METRICS_NAME_MAX];
    double values[GB_METRICS_MAX_VALUES];
    double carried[GB_METRICS_MAX_VALUES]; /* what earlier incarnations counted (carry names) */
    uint64_t incarnation;
    uint64_t retired_below; /* reports of older incarnations are stale (collector_retire) */
    double last_s; /* gb_now_s() of the last report taken */
    int64_t episode_steps; /* this incarnation's episodes' lengths, summed */
    int64_t *table; /* the last table this incarnation sent, [table_rows, table_cols] */
    int table_rows, table_cols;
    size_t table_cap; /* bytes allocated at table */
} worker_values;

#define GB_METRICS_MAX_CARRY 48
#define GB_METRICS_ROLES GB_ROLE_END /* gb_role values (runtime/streams/wire.h) below this */

/* The incarnation the launcher issued to a restarted worker (gb_metrics_collector_issue). */
typedef struct issued_incarnation {
    int role, index;
    uint64_t incarnation;
} issued_incarnation;

struct gb_metrics_collector {
    void *sock;
    worker_values *workers;
    int nworkers, cap;
    int64_t episodes;
    int64_t episode_steps; /* every taken episode's length, summed */
    float window_returns[GB_RUN_WINDOW];
    int64_t window_lengths[GB_RUN_WINDOW];
    int window_next, window_n;
    uint64_t rejected, stale, unexpected, refused;
    int64_t expected[GB_METRICS_ROLES]; /* workers per role; -1 = role not declared */
    int has_expected;
    double max_abs_reward; /* > 0: an episode's return is at most its length times this */
    int reward_range;               /* the environment declares its rewards' range: */
    double reward_low, reward_high; /* gb_metrics_collector_bound_return_range */
    issued_incarnation *issued; /* [nissued]: only workers restarted at least once */
    int nissued, issued_cap;
    pthread_mutex_t issued_lock; /* issue may come from the registry's thread (launch/joins.h) */
    gb_wire_msg msg;
    /* counters, per role: carry = 1 for those that continue across a worker's restarts */
    struct { int role, carry; char name[GB_METRICS_NAME_MAX]; } carry[GB_METRICS_MAX_CARRY];
    int ncarry;
};

/* The report a worker sent, its tensors read: nvalues names (names[i]) and values (read with
 * memcpy from values), neps episodes (returns float32, lengths int64, read likewise). */
typedef struct metrics_report {
    int role;
    uint64_t incarnation;
    size_t nvalues;
    const char *const *names;
    const void *values;
    size_t neps;
    const void *returns, *lengths;
} metrics_report;

/* 1 when report r from w's worker may be taken (metrics.h: what a report must be), else 0.
 * Reads w and c only. */
int gb_metrics_check_report(const gb_metrics_collector *c, const worker_values *w,
                            const metrics_report *r);

/* Whether name is a counter of role: 0 no, 1 a counter, 2 one that carries over restarts. */
int gb_metrics_counter_kind(const gb_metrics_collector *c, int role, const char *name);

/* The incarnation the launcher issued for (role, index): 0 unless it restarted it. */
uint64_t gb_metrics_issued_incarnation(const gb_metrics_collector *c, int role, int index);

#endif
