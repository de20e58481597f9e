/* workers/worker.h: what every worker process shares: its config, identity, run directory,
 * ZeroMQ context, registry client, metrics sender and stop flag; and the role entry points that
 * `gearbox worker --role R --index I --run-dir DIR` dispatches to.
 * defines: gb_worker, gb_actor_main, gb_policy_main, gb_trainer_main, gb_params_main,
 *          gb_worker_endpoint, gb_worker_stopping, gb_worker_run_ending */
#ifndef GB_WORKERS_WORKER_H
#define GB_WORKERS_WORKER_H

#include "runtime/config.h"
#include "runtime/error.h"
#include "runtime/metrics.h"
#include "runtime/registry.h"

#include <stdatomic.h>

typedef struct gb_worker {
    const gb_config *cfg;
    int role;  /* gb_role */
    int index;
    const char *run_dir;
    void *zctx;
    gb_registry_client *registry;
    gb_metrics_sender *metrics;
    atomic_int *stop; /* set by SIGTERM/SIGINT: finish the current step and return */
    const char *record_dir; /* --record DIR: trainers also append every chunk to a dataset
                               (replay/dataset.h) in DIR; NULL = off */
} gb_worker;

/* The file the launcher creates in the run directory when the run is about to end, before it
 * stops the actors: a trainer then stops waiting for its rate limiter and reads (and discards,
 * counted) whatever the actors still send, so the chunks they flush at exit are not lost. */
#define GB_RUN_ENDING_FILE "ending"

/* 1 once GB_RUN_ENDING_FILE exists (one stat; call it when about to wait, not per step). */
int gb_worker_run_ending(const gb_worker *w);

/* 1 once the worker has been asked to stop. */
static inline int gb_worker_stopping(const gb_worker *w) { return atomic_load(w->stop) != 0; }

/* For a stopped actor that has sent its last chunk and its final report: keeps the process
 * (and with it the sample connections) open until the launcher's second SIGTERM, which it
 * sends once the trainers have received every chunk the actors counted as sent, or until
 * max_s passes. Closing earlier could lose queued chunks: over ipc://, libzmq discards what a
 * closed peer left in the kernel buffer while the reader's queue is full. Returns 1 when
 * released, 0 on timeout. */
int gb_worker_wait_release(const gb_worker *w, double max_s);

/* The address this worker binds for socket `name` (e.g. "inference"): an ipc:// path in the
 * run directory or tcp:// on streams.interface; registered as "<role>/<index>/<name>" by the
 * caller once bound. Returns 0 or the codes of gb_endpoint_make. */
int gb_worker_endpoint(const gb_worker *w, const char *name, char *out, size_t cap,
                       gb_error *err);

/* The environment's spec as the config names it (one copy is created and destroyed to read
 * it), and the matching space for the networks. Returns 0 or the environment's error. */
struct gb_env_spec;
struct gb_torch_space;
int gb_worker_env_space(const gb_config *cfg, struct gb_env_spec *spec,
                        struct gb_torch_space *space, gb_error *err);

/* Role entry points: run until stopped or failed. Return 0 on a clean stop, or a GB_E* code with
 * err filled (the worker process then exits 1 and the launcher reports its log). */
int gb_actor_main(gb_worker *w, gb_error *err);
int gb_policy_main(gb_worker *w, gb_error *err);
int gb_trainer_main(gb_worker *w, gb_error *err);
int gb_params_main(gb_worker *w, gb_error *err);

#endif
