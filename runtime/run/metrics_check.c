/* runtime/run/metrics_check.c: what a report must be for the collector to take it (metrics.h):
 * the incarnation the launcher issued, finite values, counters that only grow, episodes no
 * longer than the steps their worker took. A report is a claim anyone who can reach the socket
 * can make; these are the checks against what the run itself knows. */
#include "runtime/run/metrics_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int add_counters(gb_metrics_collector *c, int role, const char *const *names, int n,
                        int carry, gb_error *err)
{
    for (int i = 0; i < n; i++) {
        if (c->ncarry == GB_METRICS_MAX_CARRY)
            return gb_error_set(err, GB_EFULL, "metrics: more than %d counters",
                                GB_METRICS_MAX_CARRY);
        c->carry[c->ncarry].role = role;
        c->carry[c->ncarry].carry = carry;
        snprintf(c->carry[c->ncarry].name, GB_METRICS_NAME_MAX, "%s", names[i]);
        c->ncarry++;
    }
    return 0;
}

int gb_metrics_collector_carry(gb_metrics_collector *c, int role, const char *const *names,
                               int n, gb_error *err)
{
    return add_counters(c, role, names, n, 1, err);
}

int gb_metrics_collector_counters(gb_metrics_collector *c, int role, const char *const *names,
                                  int n, gb_error *err)
{
    return add_counters(c, role, names, n, 0, err);
}

int gb_metrics_counter_kind(const gb_metrics_collector *c, int role, const char *name)
{
    for (int i = 0; i < c->ncarry; i++)
        if (c->carry[i].role == role && strcmp(c->carry[i].name, name) == 0)
            return c->carry[i].carry ? 2 : 1;
    return 0;
}

void gb_metrics_collector_bound_return_range(gb_metrics_collector *c, double low, double high)
{
    c->reward_range = 1;
    c->reward_low = low;
    c->reward_high = high;
}

/* A return of len steps each rewarded in [reward_low, reward_high], summed in float32: within
 * len times the bounds, less a float32 sum's rounding. */
static int return_in_range(const gb_metrics_collector *c, double ret, double len)
{
    double tol = 1e-4 * len * fmax(1.0, fmax(fabs(c->reward_low), fabs(c->reward_high)));
    return ret >= len * c->reward_low - tol && ret <= len * c->reward_high + tol;
}

void gb_metrics_collector_bound_returns(gb_metrics_collector *c, double max_abs_reward)
{
    c->max_abs_reward = max_abs_reward > 0 ? max_abs_reward : 0;
}

uint64_t gb_metrics_issued_incarnation(const gb_metrics_collector *c, int role, int index)
{
    pthread_mutex_t *lock = &((gb_metrics_collector *)c)->issued_lock;
    uint64_t inc = 0;
    pthread_mutex_lock(lock);
    for (int i = 0; i < c->nissued; i++)
        if (c->issued[i].role == role && c->issued[i].index == index)
            inc = c->issued[i].incarnation;
    pthread_mutex_unlock(lock);
    return inc;
}

/* gb_metrics_collector_issue under issued_lock. */
static int issue_locked(gb_metrics_collector *c, int role, int index, int incarnation,
                        gb_error *err)
{
    for (int i = 0; i < c->nissued; i++)
        if (c->issued[i].role == role && c->issued[i].index == index) {
            c->issued[i].incarnation = (uint64_t)incarnation;
            return 0;
        }
    if (c->nissued == c->issued_cap) {
        int cap = c->issued_cap ? 2 * c->issued_cap : 16;
        issued_incarnation *v = realloc(c->issued, (size_t)cap * sizeof *v);
        if (!v)
            return gb_error_set(err, GB_ENOMEM, "metrics: out of memory");
        c->issued = v;
        c->issued_cap = cap;
    }
    c->issued[c->nissued++] = (issued_incarnation){role, index, (uint64_t)incarnation};
    return 0;
}

int gb_metrics_collector_issue(gb_metrics_collector *c, int role, int index, int incarnation,
                               gb_error *err)
{
    pthread_mutex_lock(&c->issued_lock);
    int rc = issue_locked(c, role, index, incarnation, err);
    pthread_mutex_unlock(&c->issued_lock);
    return rc;
}

uint64_t gb_metrics_collector_refused(const gb_metrics_collector *c) { return c->refused; }

int64_t gb_metrics_episode_steps(const gb_metrics_collector *c) { return c->episode_steps; }

/* w's value of name as this incarnation last reported it; NAN when it did not. */
static double own_value(const worker_values *w, const char *name)
{
    for (int j = 0; j < w->n; j++)
        if (strcmp(w->names[j], name) == 0)
            return w->values[j];
    return NAN;
}

/* The values: none infinite; counters finite, >= 0, not below what the same incarnation
 * reported. *steps: the report's env_steps (or the incarnation's last). Returns 1 when good. */
static int values_ok(const gb_metrics_collector *c, const worker_values *w,
                     const metrics_report *r, int same, double *steps)
{
    *steps = same ? own_value(w, "env_steps") : NAN;
    for (size_t i = 0; i < r->nvalues; i++) {
        double v;
        memcpy(&v, (const char *)r->values + i * sizeof v, sizeof v);
        if (isinf(v))
            return 0;
        if (!gb_metrics_counter_kind(c, r->role, r->names[i]) &&
            strcmp(r->names[i], "env_steps") != 0)
            continue;
        if (isnan(v) || v < 0)
            return 0;
        double before = same ? own_value(w, r->names[i]) : NAN;
        if (!isnan(before) && v < before)
            return 0;
        if (strcmp(r->names[i], "env_steps") == 0)
            *steps = v;
    }
    return 1;
}

int gb_metrics_check_report(const gb_metrics_collector *c, const worker_values *w,
                            const metrics_report *r)
{
    /* w holds this incarnation's values (else the report starts a newer one: nothing yet) */
    int same = r->incarnation == w->incarnation && w->last_s != 0;
    double steps;
    if (!values_ok(c, w, r, same, &steps))
        return 0;
    if (r->neps == 0)
        return 1;
    if (isnan(steps))
        return 0; /* episodes from a worker that says it took no step */
    double total = same ? (double)w->episode_steps : 0;
    for (size_t i = 0; i < r->neps; i++) {
        float ret;
        int64_t len;
        memcpy(&ret, (const char *)r->returns + i * sizeof ret, sizeof ret);
        memcpy(&len, (const char *)r->lengths + i * sizeof len, sizeof len);
        if (!isfinite(ret) || len < 1 || (double)len > steps)
            return 0;
        if (c->max_abs_reward > 0 && fabs((double)ret) > (double)len * c->max_abs_reward)
            return 0;
        if (c->reward_range && !return_in_range(c, (double)ret, (double)len))
            return 0;
        total += (double)len;
        if (total > steps)
            return 0;
    }
    return 1;
}
