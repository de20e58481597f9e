/* runtime/streams/runctl.h: run control: the one protocol by which the launcher ends a run and its
 * workers learn it, carried over the registry's socket (the launcher serves both).
 * defines: gb_run_state, gb_runctl_server, gb_runctl_client and their functions
 *
 * The run's state only moves forward:
 *
 *   running --> ending --> flushing --> drained --> released
 *                               \___________________/^
 *
 *   state     moved by   when                              what the workers do
 *   running   -          the run starts                    work
 *   ending    launcher   it decided to stop (solved,       trainers stop waiting for their rate
 *                        budget, SIGINT/SIGTERM to it,     limiter and read everything that
 *                        a worker died)                    arrives; each confirms
 *                                                          (gb_runctl_client_confirm(ENDING))
 *   flushing  launcher   every trainer confirmed, or       actors stop stepping (their stop flag
 *                        1/4 of the stop grace passed      is set), send what they hold and a
 *                                                          final report, confirm FLUSHING, and
 *                                                          keep their sockets open
 *   drained   launcher   the trainers received every       nothing new, but every later answer
 *                        chunk the actors counted as       says the run went through it
 *                        sent (the metrics' sample ledger) (gb_runctl_client_drained): a
 *                                                          trainer that stops then waits for no
 *                                                          stragglers; the sample ledger balances
 *   released  launcher   right after drained, or when      actors close and exit; then the
 *                        0.35 of the grace passed without  launcher stops the other workers
 *                        it (skipping drained: the ledger  (SIGTERM, SIGKILL after the grace)
 *                        then shows what went missing)
 *
 * Every answer also carries the run's env steps as the launcher last counted them (all actors,
 * all incarnations, earlier segments of a resumed run): a clock that survives a worker's restart
 * and a run's resume (the policy worker's exploration schedule runs on it), fresh to within
 * GB_RUNCTL_HOLD_MS. And the number of checkpoints the launcher has asked trainer 0 for
 * (gb_runctl_server_request_checkpoint): a new request is answered to every held watch at once,
 * so trainer 0 hears it within a poll and writes its checkpoint set (for an evaluation of the
 * policy as it is now, launch/evals.h); and, when the launcher asked for a held one
 * (gb_runctl_server_request_hold), that request's number: trainer 0 writes the checkpoint, then
 * takes no training step (nor, through their agreement, do the other trainers) until the
 * launcher releases the hold, so that the policy an evaluation plays is the trainers' policy
 * still, and the run's final one when the evaluation ends the run. And the generation of the
 * trainers' group, which goes up when the launcher restarts one of several trainers: the others
 * form the group again with it.
 *
 * Transport: each worker's client thread keeps one watch request (GB_MSG_RUN_WATCH: the state,
 * checkpoint requests, hold and group generation it knows; the state it confirms) outstanding at
 * the registry's ROUTER. The server answers it (GB_MSG_RUN_STATE: all of them now) at once when
 * any of the worker's knowledge is stale, else holds it until the state moves or
 * GB_RUNCTL_HOLD_MS pass. So a worker learns a move at once (the move wakes the registry's
 * thread: gb_runctl_server_wake_fd), with no traffic while nothing changes; a confirmation is
 * sent as a new watch, at once. A client that hears nothing for GB_RUNCTL_RESEND_MS (a launcher
 * restarting, a lost message) asks again. Reading the state is one atomic load: cheap enough
 * for every loop iteration.
 *
 * SIGTERM/SIGINT stay the outside "please stop" (to the launcher, and from it to the workers
 * that are not actors once the actors are released); SIGKILL is for workers past the grace. */
#ifndef GB_RUNTIME_RUNCTL_H
#define GB_RUNTIME_RUNCTL_H

#include "runtime/base/error.h"

#include <stdatomic.h>
#include <stdint.h>

typedef enum gb_run_state {
    GB_RUN_RUNNING = 0,
    GB_RUN_ENDING = 1,
    GB_RUN_FLUSHING = 2,
    GB_RUN_DRAINED = 3,
    GB_RUN_RELEASED = 4,
    GB_RUN_STATE_END = 5 /* not a state: one past the last */
} gb_run_state;

#define GB_RUNCTL_HOLD_MS 1000  /* the longest the server holds a watch unanswered */
#define GB_RUNCTL_RESEND_MS 2500 /* a client with no answer for this long asks again */
#define GB_RUNCTL_POLL_MS 10    /* the poll period of the registry's thread and the clients */
#define GB_RUNCTL_MAX_WORKERS 1024

/* "running", "ending", ...; "invalid" outside the enum. */
const char *gb_run_state_name(int state);

/* ---- server (the launcher; served from the registry's thread) ------------------------------- */

typedef struct gb_runctl_server gb_runctl_server;

/* Returns 0 or GB_ENOMEM. The state starts at running. */
int gb_runctl_server_open(gb_runctl_server **out, gb_error *err);
void gb_runctl_server_close(gb_runctl_server *s);

/* Moves the run to state (from any thread). A state at or before the current one is ignored:
 * the state never goes back. Returns the state now. */
gb_run_state gb_runctl_server_set(gb_runctl_server *s, gb_run_state state);
gb_run_state gb_runctl_server_state(const gb_runctl_server *s);

/* Sets the env-step count the next answers carry (from any thread). */
void gb_runctl_server_set_env_steps(gb_runctl_server *s, int64_t env_steps);

/* Asks trainer 0 for a checkpoint now (from any thread; never blocks): the count of requests
 * goes up by one. Returns the new count. */
int64_t gb_runctl_server_request_checkpoint(gb_runctl_server *s);

/* Asks trainer 0 for a checkpoint as gb_runctl_server_request_checkpoint does, and for a hold of
 * the trainers' learning once it is written, until gb_runctl_server_release (or the run's end:
 * a hold stays). Returns the request's number (the new count). */
int64_t gb_runctl_server_request_hold(gb_runctl_server *s);
void gb_runctl_server_release(gb_runctl_server *s);

/* Several trainers: a trainer is being restarted, so the survivors and it form their group
 * again as the next generation (workers/roles/trainer_group.c); the count goes up by one, and
 * every held watch hears it at once. From any thread; never blocks. Returns the new count. */
int64_t gb_runctl_server_next_trainer_group(gb_runctl_server *s);
int64_t gb_runctl_server_trainer_group(const gb_runctl_server *s); /* the generation now */

/* How many workers of role have confirmed state (or a later one). Any thread. */
int gb_runctl_server_confirmed(const gb_runctl_server *s, int role, gb_run_state state);

/* For the thread that owns the ROUTER socket `sock` (the registry's): handles one
 * GB_MSG_RUN_WATCH message (a gb_wire_msg with its route) and, in gb_runctl_server_tick
 * (call it after every poll), answers the held watches once the state moved or they are
 * GB_RUNCTL_HOLD_MS old. A malformed watch is answered with GB_EPROTO, one from a worker
 * speaking as another (its proven identity, gb_wire_peer_is) with GB_EINVAL; returns 0 or that
 * code (for the caller's rejected count). */
struct gb_wire_msg;
int gb_runctl_server_handle(gb_runctl_server *s, void *sock, const struct gb_wire_msg *m);
void gb_runctl_server_tick(gb_runctl_server *s, void *sock);

/* A descriptor that turns readable when the run moves (its state, a checkpoint request, a hold
 * or its release, the trainers' group): the registry's thread polls it beside its socket, so a
 * move is answered to the held watches at once instead of at the next poll period (each of a
 * run's stages took up to GB_RUNCTL_POLL_MS more). Take the wake with gb_runctl_server_woken
 * before the tick. -1 for NULL. */
int gb_runctl_server_wake_fd(const gb_runctl_server *s);
void gb_runctl_server_woken(gb_runctl_server *s);

/* ---- client (a worker) ----------------------------------------------------------------------- */

typedef struct gb_runctl_client_opts {
    const char *endpoint; /* the registry's */
    int role, index;
    atomic_int *stop;     /* optional: set to 1 (if 0) once the state reaches stop_at */
    gb_run_state stop_at; /* e.g. GB_RUN_FLUSHING for actors; GB_RUN_RUNNING = never */
    int lost_after_ms;    /* > 0: no answer for this long means the launcher is gone: *stop is
                             set (a worker joined from another host has no parent to outlive;
                             gearbox join). 0: never */
} gb_runctl_client_opts;

typedef struct gb_runctl_client gb_runctl_client;

/* Connects a DEALER to the registry on zctx and starts the thread that watches the state.
 * Returns 0 or GB_EINVAL/GB_ENOMEM/GB_EZMQ/GB_ESYS. */
int gb_runctl_client_open(gb_runctl_client **out, void *zctx, const gb_runctl_client_opts *o,
                          gb_error *err);
/* Stops the thread and closes the socket. NULL is a no-op. */
void gb_runctl_client_close(gb_runctl_client *c);

/* The state as last heard (one atomic load; never blocks). */
gb_run_state gb_runctl_client_state(const gb_runctl_client *c);

/* The run's env steps as last heard from the launcher (0 before the first answer; c may be
 * NULL: 0). One atomic load. */
int64_t gb_runctl_client_env_steps(const gb_runctl_client *c);

/* Checkpoints the launcher has asked for so far, as last heard (0 before the first answer;
 * c may be NULL: 0). A worker that saw n writes one when this exceeds n. One atomic load. */
int64_t gb_runctl_client_checkpoints(const gb_runctl_client *c);

/* 1 once the launcher said the run was drained (the trainers had received every chunk the
 * actors counted as sent: nothing is left in flight), else 0 (c NULL: 0); set before the state
 * it came with, so a worker that reads released and then this knows whether the release
 * followed a drain. One atomic load. */
int gb_runctl_client_drained(const gb_runctl_client *c);

/* The checkpoint request trainer 0 is to hold its learning at once it wrote that checkpoint, as
 * last heard (0: none; c NULL: 0). Read after gb_runctl_client_checkpoints: a count that
 * includes a held request is never seen without its hold. One atomic load. */
int64_t gb_runctl_client_hold(const gb_runctl_client *c);

/* The trainers' group generation as last heard (0 at a run's start, +1 per trainer restart;
 * gb_runctl_server_next_trainer_group): -1 before the first answer; c NULL: 0. One atomic load. */
int64_t gb_runctl_client_trainer_group(const gb_runctl_client *c);

/* Tells the launcher this worker has done what state asks of it (never blocks; sent by the
 * thread at once). Confirming an earlier state than already confirmed is a no-op. */
void gb_runctl_client_confirm(gb_runctl_client *c, gb_run_state state);

/* Waits until the state reaches at least state or max_s passes (checks every 5 ms). Returns 1
 * when it did, 0 on timeout. */
int gb_runctl_client_wait(const gb_runctl_client *c, gb_run_state state, double max_s);

#endif
