/* workers/roles/worker.h: what every worker process shares: its config, identity, run directory,
 * ZeroMQ context, registry client, metrics sender, run-control client and stop flag; and the
 * role entry points that `gearbox worker --role R --index I --run-dir DIR` dispatches to.
 * defines: gb_worker, gb_actor_main, gb_policy_main, gb_trainer_main, gb_params_main,
 *          gb_worker_endpoint, gb_worker_sockets_fit, GB_SOCKET_*,
 *          gb_worker_stopping, gb_worker_run_state, gb_worker_run_ending,
 *          gb_worker_confirm_ending, gb_worker_wait_release, gb_worker_report_interval,
 *          gb_worker_beat, gb_worker_wait, gb_worker_wait_ms, gb_worker_lookup,
 *          gb_relay_main, gb_worker_host, gb_worker_params_names */
#ifndef GB_WORKERS_WORKER_H
#define GB_WORKERS_WORKER_H

#include "runtime/config/config.h"
#include "runtime/base/error.h"
#include "runtime/run/metrics.h"
#include "runtime/streams/registry.h"
#include "runtime/streams/runctl.h"

#include <stdatomic.h>

typedef struct gb_worker {
    const gb_config *cfg;
    int role;  /* gb_role */
    int index;
    int incarnation; /* 0 for the first process of (role, index), +1 per restart (--incarnation) */
    int segment;     /* 0 for a run's first launch, +1 per `gearbox run --resume` (--segment) */
    const char *run_dir;
    void *zctx;
    gb_registry_client *registry;
    gb_metrics_sender *metrics;
    gb_runctl_client *runctl; /* the run's state (runtime/streams/runctl.h); NULL outside a run */
    atomic_int *stop; /* set by SIGTERM/SIGINT, and for actors by run control once the run is
                         flushing: finish the current step and return. Only what comes from
                         outside sets it: a worker stopping itself (a failure, its own end)
                         calls gb_worker_stop_self, so that `gearbox worker` can tell a
                         requested stop (whose interrupted waits are no failure) from one */
    atomic_int stopped_self; /* set by gb_worker_stop_self */
    const char *record_dir; /* --record DIR: trainers also append every chunk to a dataset
                               (replay/formats/dataset.h) in DIR; NULL = off */
    int joined; /* 1: joined a running run from another host (gearbox join): it may leave
                   before the run ends */
    double next_beat; /* gb_worker_beat: when the next report is due (gb_now_s) */
} gb_worker;

/* The run's state as this worker last heard it (runtime/streams/runctl.h; GB_RUN_RUNNING without
 * run control). One atomic load. */
gb_run_state gb_worker_run_state(const gb_worker *w);

/* 1 once the launcher said the run is ending: a trainer then stops waiting for its rate limiter
 * and reads (and discards, counted) whatever the actors still send, so the chunks they flush as
 * they stop are not lost. One atomic load: cheap enough for every loop iteration. */
int gb_worker_run_ending(const gb_worker *w);

/* For a trainer that has seen the end (gb_worker_run_ending) and now reads everything without
 * waiting on its rate limiter: tells the launcher, which stops the actors once every trainer
 * has. Never blocks. */
void gb_worker_confirm_ending(gb_worker *w);

/* The seed of this worker's random stream `what` (gb_rng_seed_of over experiment.seed, role,
 * index and what). A restarted or resumed process (incarnation, segment) draws a stream of its
 * own, so it does not repeat its predecessor's episodes; the first process of a run keeps the
 * seeds a run always had. */
uint64_t gb_worker_seed(const gb_worker *w, const char *what);

/* Seconds between two reports to the launcher: the metrics interval (denser in the process's
 * first seconds, runtime/run/contract.h, gb_contract_row_interval), or a fifth of the launcher's
 * heartbeat timeout when that is shorter. Reports are the workers' heartbeats: a worker whose
 * main loop sends none for launch.heartbeat_timeout_s is taken as hung, killed and restarted. */
double gb_worker_report_interval(const gb_worker *w);

/* Sends a report (the values set so far) when one is due (gb_worker_report_interval): the
 * heartbeat of a worker that waits outside its main loop. No-op without a metrics sender. */
void gb_worker_beat(gb_worker *w);

/* A wait of `what` for a peer, at start: attempt(arg, ms, err) waits up to ms and returns 0,
 * GB_ETIMEOUT (not yet: asked again) or an error (returned). Tried in slices of the report
 * interval with gb_worker_beat between them, for up to streams.registry_timeout_ms in all, so
 * that a worker waiting for a peer that restarts is not taken as hung (the launcher's grace at
 * start is one registry timeout, and a worker may wait for several things in turn), and one
 * waiting too long fails with its own message. Returns 0, attempt's error, GB_ETIMEOUT naming
 * what and the setting, or GB_EINTR when the worker is asked to stop meanwhile. */
int gb_worker_wait(gb_worker *w, const char *what,
                   int (*attempt)(void *arg, int ms, gb_error *err), void *arg, gb_error *err);

/* gb_worker_wait for up to timeout_ms, which the setting(s) named in `setting` decide. */
int gb_worker_wait_ms(gb_worker *w, const char *what, long long timeout_ms, const char *setting,
                      int (*attempt)(void *arg, int ms, gb_error *err), void *arg, gb_error *err);

/* gb_registry_lookup of name as a gb_worker_wait: the endpoint into ep (cap bytes). */
int gb_worker_lookup(gb_worker *w, const char *name, char *ep, size_t cap, gb_error *err);

/* 1 once the worker has been asked to stop, or stopped itself (gb_worker_stop_self). */
static inline int gb_worker_stopping(const gb_worker *w)
{
    return atomic_load(w->stop) != 0 || atomic_load(&((gb_worker *)w)->stopped_self) != 0;
}

/* Makes every loop of this worker stop (gb_worker_stopping) without it counting as a stop
 * requested from outside: what fails afterwards is still reported as a failure. */
static inline void gb_worker_stop_self(gb_worker *w) { atomic_store(&w->stopped_self, 1); }

/* 1 when the stop came from outside (SIGTERM/SIGINT, run control), not from the worker. */
static inline int gb_worker_stop_requested(const gb_worker *w) { return atomic_load(w->stop) != 0; }

/* For a stopped actor that has sent its last chunk and its final report: confirms that it has
 * flushed, then keeps the process (and with it the sample connections) open until the run is
 * released (runtime/streams/runctl.h), which the launcher does once the trainers have received
 * every chunk the actors counted as sent, or until max_s passes. Closing earlier could lose queued
 * chunks: over ipc://, libzmq discards what a closed peer left in the kernel buffer while the
 * reader's queue is full. Returns 1 when released (at once without run control), 0 on timeout. */
int gb_worker_wait_release(const gb_worker *w, double max_s);

/* The sockets workers bind: gb_worker_endpoint's `name`, which ends the socket's ipc path
 * ("<role>-<index>-<name>") and the name its worker registers it under ("policy/0/inference"),
 * so that gb_worker_sockets_fit checks the paths the role entry points bind. */
#define GB_SOCKET_SAMPLES "samples"     /* a trainer's: the actors' chunks */
#define GB_SOCKET_INFERENCE "inference" /* a policy worker's: the actors' requests */
#define GB_SOCKET_PARAMS_IN "in"        /* the parameter service's: the trainers' versions */
#define GB_SOCKET_PARAMS_PUB "pub"      /* the parameter service's and a relay's broadcast */
#define GB_SOCKET_PARAMS_FETCH "fetch"  /* the parameter service's and a relay's requests */

/* The address this worker binds for socket `name` (GB_SOCKET_*): an ipc:// path in the
 * run directory (the same for every process of the worker) or tcp:// on streams.interface,
 * registered under regname by the caller once bound. Over tcp the port is the one regname last
 * had on this address when the registry knows it and it is free (a restarted worker binds where
 * its peers reconnect), else any. Returns 0 or the codes of gb_endpoint_make. */
int gb_worker_endpoint(const gb_worker *w, const char *name, const char *regname, char *out,
                       size_t cap, gb_error *err);

/* Before any worker starts: whether the ipc socket of every worker cfg runs on this host (the
 * trainers, policy workers, parameter service and `relays` parameter relays, each at its
 * longest GB_SOCKET_* name) fits the 107 bytes of a Unix socket path in run_dir. Returns 0
 * (also on tcp) or gb_endpoint_make's GB_EINVAL naming the longest path; a run that went on
 * would see those workers fail. */
int gb_worker_sockets_fit(const gb_config *cfg, const char *run_dir, int relays, gb_error *err);

/* The environment's spec as the config names it (one copy is created and destroyed to read
 * it), and the matching space for the networks (gb_learning_space, read before the copy is
 * destroyed; the spec's bound pointers are then cleared). Returns 0, the environment's error or
 * GB_EUNSUPPORTED for what the algorithms cannot take. */
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
int gb_relay_main(gb_worker *w, gb_error *err);

/* This machine's name for parameters.relay: GEARBOX_HOST when set and not empty (tests that
 * stand several hosts in one machine), else gethostname. Returns 0, GB_EINVAL (too long for
 * cap, or not a registry name: '/' in it) or GB_ESYS. */
int gb_worker_host(char *out, size_t cap, gb_error *err);

/* The registry names of the parameter stream a policy worker subscribes to: the service's
 * ("params/0/pub", "params/0/fetch"), or with parameters.relay per_host its host's relay's
 * ("relay/<host>/pub", "relay/<host>/fetch"). Returns 0 or gb_worker_host's codes. */
int gb_worker_params_names(const gb_worker *w, char *pub, char *fetch, size_t cap,
                           gb_error *err);

#endif
