/* runtime/run/metrics.h: the metrics stream: every worker reports named values and finished
 * episodes to the launcher, which aggregates them (progress line, metrics.csv, summary.json).
 * Transport: PUSH (worker) -> PULL (launcher), GB_MSG_METRICS messages (wire.h). A report is
 * never allowed to stall a worker: when the launcher is slow it is dropped and counted, and the
 * episodes it carried go with the next one.
 * The sender (the workers' side) is metrics_sender.c, the collector (the launcher's) metrics.c.
 * defines: gb_metrics_sender, gb_metrics_collector and their functions */
#ifndef GB_RUNTIME_METRICS_H
#define GB_RUNTIME_METRICS_H

#include "runtime/base/error.h"

#include <stdint.h>

#define GB_METRICS_MAX_VALUES 64
#define GB_METRICS_NAME_MAX 32
#define GB_METRICS_MAX_EPISODES 4096 /* episodes buffered between two reports */
#define GB_METRICS_CLOSE_LINGER_MS 1000
#define GB_METRICS_INCARNATION_SHIFT 40 /* a report's seq: incarnation << 40 | report number */
#define GB_METRICS_TABLE_MAX_ROWS 65536
#define GB_METRICS_TABLE_MAX_COLS 16
#define GB_METRICS_SEQ_MASK ((1ULL << GB_METRICS_INCARNATION_SHIFT) - 1)

typedef struct gb_metrics_sender gb_metrics_sender;

/* Connects a PUSH socket on zctx to the launcher's endpoint. Returns 0, GB_ENOMEM or GB_EZMQ. */
int gb_metrics_sender_open(gb_metrics_sender **out, void *zctx, const char *endpoint, int role,
                           int index, gb_error *err);
/* Closes the socket; reports still queued get up to GB_METRICS_CLOSE_LINGER_MS to leave (in
 * zmq_ctx_term), so a worker's last report reaches a live launcher. NULL is a no-op.
 * Convention: a worker sets the value "final" to 1 in its last report; the launcher's sample
 * ledger (summary.json) is exact only when every actor and trainer sent one. */
void gb_metrics_sender_close(gb_metrics_sender *s);

/* Sets a value sent with every report from now on: a cumulative counter (env_steps) or a gauge
 * (replay_size); an infinity is sent as NaN (no value). Names longer than
 * GB_METRICS_NAME_MAX-1 are cut; beyond GB_METRICS_MAX_VALUES names, new names are ignored
 * (returns GB_EFULL). Never blocks. */
int gb_metrics_set(gb_metrics_sender *s, const char *name, double value);

/* Records a finished episode (its return and length); one with a non-finite return (or a length
 * below 1) is left out, as the collector would refuse the report. Never blocks; beyond
 * GB_METRICS_MAX_EPISODES unsent episodes the oldest are dropped from the report (the
 * cumulative "episodes" count the sender keeps is still exact). */
void gb_metrics_episode(gb_metrics_sender *s, float episode_return, int64_t length);

/* Finished episodes recorded and not yet sent. */
int gb_metrics_episodes_unsent(const gb_metrics_sender *s);

/* Sends one report now (without blocking). When the sender's context has CURVE keys
 * (runtime/streams/curve.h), the value "auth_refused" (connections refused so far) goes with it.
 * Returns 0, or GB_EAGAIN when the launcher's queue is full (the report is dropped and counted;
 * the episodes stay for the next), GB_EZMQ. */
int gb_metrics_send(gb_metrics_sender *s, gb_error *err);

/* Reports dropped so far. */
uint64_t gb_metrics_sender_dropped(const gb_metrics_sender *s);

/* Sets the table of int64 rows sent with every report from now on (one per sender; a copy is
 * kept): what does not fit named values, e.g. a trainer's chunks received per actor process
 * (runtime/streams/sample_stream.h, gb_ledger_row). Returns 0, GB_EINVAL (beyond 65536 x 16) or
 * GB_ENOMEM. */
int gb_metrics_set_table(gb_metrics_sender *s, const int64_t *data, int rows, int cols,
                         gb_error *err);

/* Marks this process's reports as its worker's incarnation-th (0 first, +1 per restart by the
 * launcher): the collector then ignores reports an earlier process left queued, and starts this
 * one's values afresh (see gb_metrics_collector_carry). */
void gb_metrics_sender_set_incarnation(gb_metrics_sender *s, int incarnation);

typedef struct gb_metrics_collector gb_metrics_collector;

/* Binds a PULL socket on zctx at endpoint. Returns 0, GB_ENOMEM or GB_EZMQ (naming it). */
int gb_metrics_collector_open(gb_metrics_collector **out, void *zctx, const char *endpoint,
                              gb_error *err);
void gb_metrics_collector_close(gb_metrics_collector *c);
/* The address the collector's socket is bound to (ZMQ_LAST_ENDPOINT: a tcp "...:*" with its
 * port) into out (cap bytes). Returns 0 or GB_EZMQ. */
int gb_metrics_collector_endpoint(const gb_metrics_collector *c, char *out, size_t cap,
                                  gb_error *err);

/* Receives every report waiting, then waits up to timeout_ms for more (0: do not wait).
 * Malformed reports are counted and dropped. Returns the number of reports taken, or
 * GB_ECLOSED/GB_EZMQ. */
int gb_metrics_collector_poll(gb_metrics_collector *c, int timeout_ms, gb_error *err);

/* The latest value of name from worker (role, index); NAN when never reported. */
double gb_metrics_get(const gb_metrics_collector *c, int role, int index, const char *name);
/* The sum over every worker of role of its latest value of name; NAN when none reported it. */
double gb_metrics_sum(const gb_metrics_collector *c, int role, const char *name);
/* The largest / smallest latest value of name among the workers of role; NAN when none. */
double gb_metrics_max(const gb_metrics_collector *c, int role, const char *name);
double gb_metrics_min(const gb_metrics_collector *c, int role, const char *name);
/* Workers of role that have reported at least once. */
int gb_metrics_workers(const gb_metrics_collector *c, int role);

/* Episodes reported so far, and the mean return and length of the last min(n, GB_RUN_WINDOW)
 * ones (runtime/run/contract.h; NAN when none). */
int64_t gb_metrics_episodes(const gb_metrics_collector *c);
double gb_metrics_return_mean(const gb_metrics_collector *c);
double gb_metrics_length_mean(const gb_metrics_collector *c);

/* Malformed reports dropped so far (reports from unexpected workers not included). */
uint64_t gb_metrics_collector_rejected(const gb_metrics_collector *c);

/* Names the counters of role that continue across a worker's restarts: when a newer process of
 * a worker reports, its values of these names are added to what the previous processes last
 * reported (env_steps, chunks_sent, ...); every other value (gauges, "final") starts afresh.
 * Returns 0 or GB_EFULL. */
int gb_metrics_collector_carry(gb_metrics_collector *c, int role, const char *const *names,
                               int n, gb_error *err);

/* Retires worker (role, index)'s processes up to incarnation: reports they left queued that
 * arrive from now on are ignored (counted stale), so what the collector holds now is what a
 * carried counter adds when the next process reports. For the launcher when a process died: the
 * values it read of that process stay those the collector sums (the sample ledger relies on it).
 * A worker that never reported: nothing to do. */
void gb_metrics_collector_retire(gb_metrics_collector *c, int role, int index, int incarnation);

/* Reports ignored because a newer process of the same worker had reported already. */
uint64_t gb_metrics_collector_stale(const gb_metrics_collector *c);

/* gb_now_s() when worker (role, index) last reported; NAN when never. Reports are the workers'
 * heartbeats (launch.heartbeat_timeout_s). */
double gb_metrics_last_report_s(const gb_metrics_collector *c, int role, int index);

/* The last table (gb_metrics_set_table) worker (role, index) sent: *data (valid until the next
 * poll), *rows, *cols. Returns 1, or 0 when it sent none. */
int gb_metrics_table(const gb_metrics_collector *c, int role, int index, const int64_t **data,
                     int *rows, int *cols);

/* The incarnation of the worker's latest process that reported; -1 when none did. */
int gb_metrics_incarnation(const gb_metrics_collector *c, int role, int index);
/* Tells the collector which workers the run has: count workers of role (indexes 0..count-1).
 * Call once per role before polling; once any role was declared, a report from a worker outside
 * the declared set (a forged or stale sender) is dropped and counted
 * (gb_metrics_collector_unexpected), so it can neither add episodes nor values, and the table of
 * reporters never holds more than the declared workers. Without any declaration every well-formed
 * report is taken, up to GB_METRICS_MAX_REPORTERS reporters. Returns 0 or GB_EINVAL (role out of
 * range, negative count, or the total above GB_METRICS_MAX_REPORTERS). */
#define GB_METRICS_MAX_REPORTERS 4096
int gb_metrics_collector_expect(gb_metrics_collector *c, int role, int64_t count, gb_error *err);

/* Reports dropped because their sender is not one of the expected workers (or, without
 * expectations, because the table already holds GB_METRICS_MAX_REPORTERS reporters). */
uint64_t gb_metrics_collector_unexpected(const gb_metrics_collector *c);

/* What a well-formed report from one of the run's workers must also be to be taken; one that is
 * not is dropped whole and counted (gb_metrics_collector_refused), and its sender's values, table
 * and heartbeat stay as they were:
 * - its incarnation is the one the launcher issued for that worker (0 unless
 *   gb_metrics_collector_issue said otherwise): an older one is stale (a report its dead process
 *   left queued, gb_metrics_collector_stale), a newer one was never issued;
 * - no value is infinite (NaN is a gauge's "no value": a trainer's learner columns before its
 *   first step); a counter (a carried name, gb_metrics_collector_carry, or one named by
 *   gb_metrics_collector_counters) is finite, >= 0 and does not go back within an incarnation;
 * - each episode's return is finite and its length >= 1; the lengths of every episode of the
 *   incarnation add up to no more than its own "env_steps" (an episode is counted when it ends,
 *   before the chunk holding its last steps is sent, so the steps taken, not those sent, bound
 *   it); with gb_metrics_collector_bound_returns, |return| <= length * max_abs_reward. */

/* Names more counters of role (see above) that do not carry over restarts. Returns 0 or
 * GB_EFULL. */
int gb_metrics_collector_counters(gb_metrics_collector *c, int role, const char *const *names,
                                  int n, gb_error *err);

/* Bounds an episode's return by its length times max_abs_reward (> 0; the environment's reward
 * bound, or the run's guard trainer.chunk_guard.max_abs_reward where it declares none). */
void gb_metrics_collector_bound_returns(gb_metrics_collector *c, double max_abs_reward);

/* Where the environment declares its rewards' range (GB_ENV_REWARD_RANGE, envs/env.h): an
 * episode's return must also lie within its length times [low, high] (less a float32 sum's
 * rounding); a report with one that does not is refused whole. */
void gb_metrics_collector_bound_return_range(gb_metrics_collector *c, double low, double high);

/* Records the incarnation the launcher gave worker (role, index)'s process it just started (a
 * restart: 1, 2, ...); reports of earlier ones are stale from now on, later ones refused. Returns
 * 0 or GB_ENOMEM. */
int gb_metrics_collector_issue(gb_metrics_collector *c, int role, int index, int incarnation,
                               gb_error *err);

/* Reports refused for what they say (see above) so far. */
uint64_t gb_metrics_collector_refused(const gb_metrics_collector *c);

/* The steps of every episode taken so far (their lengths summed): what the run's episodes claim
 * the actors played, for the launcher to check against the steps the trainers received. */
int64_t gb_metrics_episode_steps(const gb_metrics_collector *c);

#endif
