/* runtime/streams/registry.h: the endpoint registry: how workers find each other, served by the
 * launcher.
 * defines: gb_registry_server, gb_registry_client, gb_registry_entry and their functions
 *
 * Workers register "name -> endpoint" (names like "policy/0/inference"), look names up with a
 * timeout (waiting for workers that have not started yet), and list every name under a prefix
 * ("trainer/" for all trainers' sample endpoints). A registration lives for its TTL; the client
 * re-registers everything every heartbeat from a background thread, so a worker that dies
 * disappears within one TTL, and a restarted registry is refilled within one heartbeat. The
 * endpoints themselves are made by runtime/streams/endpoint.h (a wildcard address is registered as
 * the host's name). The same socket carries run control (runtime/streams/runctl.h) and, for workers
 * joining a running run from another host (gearbox join), the request for a slot, answered with the
 * run's config, metrics endpoint and identity (gb_registry_join). */
#ifndef GB_RUNTIME_REGISTRY_H
#define GB_RUNTIME_REGISTRY_H

#include "runtime/base/error.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define GB_REGISTRY_NAME_MAX 128
#define GB_REGISTRY_ENDPOINT_MAX 256
#define GB_REGISTRY_MAX_ENTRIES 4096
#define GB_REGISTRY_MAX_PER_IDENTITY 64 /* live names one worker may hold (with identities) */

typedef struct gb_registry_entry {
    char name[GB_REGISTRY_NAME_MAX];
    char endpoint[GB_REGISTRY_ENDPOINT_MAX];
} gb_registry_entry;

/* ---- server (the launcher) ------------------------------------------------------------------- */

/* What a worker joining a running run (gearbox join) is told: its slot and the run. */
typedef struct gb_registry_join_reply {
    int index;       /* the worker's index in its role */
    int incarnation; /* its process's incarnation in that slot (0 for a slot's first holder) */
    char metrics[GB_REGISTRY_ENDPOINT_MAX]; /* the launcher's metrics endpoint */
    char run[GB_REGISTRY_ENDPOINT_MAX];     /* the run's identity (its run directory's path) */
    const char *config; /* the run's resolved config (YAML); server: the launcher's (kept
                           alive while the server runs); client: malloc'd, see _free */
    size_t config_len;
    /* a run that gives its workers identities (runtime/streams/curve.h): the slot's own key
       pair (the text of its key file) and the run's identities (keys/identities' text; server:
       the launcher's, kept alive; client: malloc'd, see _free); "" and NULL otherwise */
    char key[256];
    const char *identities;
    size_t identities_len;
} gb_registry_join_reply;

/* The launcher's answer to a join for role (called on the registry's thread): fills out (not
 * config when the launcher set it once in the opts) and returns 0, or a GB_E* code with why
 * (cap bytes) said to the joiner. again: -1 for a new slot, else the index of a slot of role
 * asked for again (its worker is restarted); proven: the joiner proved that slot's identity
 * (ZAP User-Id), or the run has no identities. */
typedef int (*gb_registry_join_fn)(void *arg, int role, int again, int proven,
                                   gb_registry_join_reply *out, char *why, size_t cap);

typedef struct gb_registry_server_opts {
    const char *endpoint; /* bind address */
    int max_ttl_ms;       /* registrations asking for longer get this (> 0) */
    /* optional: run control (runtime/streams/runctl.h) served on the same socket; the caller
       keeps it open longer */
    struct gb_runctl_server *runctl;
    gb_registry_join_fn join; /* optional: answers GB_MSG_REG_JOIN (without: GB_EUNSUPPORTED) */
    void *join_arg;
} gb_registry_server_opts;

typedef struct gb_registry_server gb_registry_server;

/* Binds a ROUTER. Returns 0 or GB_EINVAL/GB_ENOMEM/GB_EZMQ naming the endpoint. */
int gb_registry_server_open(gb_registry_server **out, void *zctx,
                            const gb_registry_server_opts *o, gb_error *err);
void gb_registry_server_close(gb_registry_server *s);
const char *gb_registry_server_endpoint(const gb_registry_server *s);

/* Serves requests arriving within timeout_ms and expires registrations past their TTL; with
 * run control, also its watches (and answers the held ones once the run's state moved).
 * Malformed requests are answered with GB_EPROTO and counted. Returns 0, GB_ECLOSED, GB_EZMQ. */
int gb_registry_server_poll(gb_registry_server *s, int timeout_ms, gb_error *err);

/* Serves until *stop becomes non-zero (checked every 50 ms, every GB_RUNCTL_POLL_MS with run
 * control); for a launcher thread. Returns 0 when stopped, or poll's error. */
int gb_registry_server_run(gb_registry_server *s, const atomic_int *stop, gb_error *err);

/* Live registrations now. It reads state the serving thread writes: call it from that thread or
 * after gb_registry_server_run returned. */
int gb_registry_server_count(const gb_registry_server *s);

/* Requests rejected (any thread): malformed, or (with identities, curve.h) beyond what the sender's
 * identity may: a name outside its own "<role>/<index>/", a live name another identity holds, more
 * than GB_REGISTRY_MAX_PER_IDENTITY names, a run-control watch as another worker. */
uint64_t gb_registry_server_rejected(const gb_registry_server *s);

/* ---- client (a worker) ----------------------------------------------------------------------- */

typedef struct gb_registry_client_opts {
    const char *endpoint; /* the registry's */
    int timeout_ms;       /* per request (streams.registry_timeout_ms), > 0 */
    int heartbeat_ms;     /* re-register period (streams.heartbeat_ms); 0: no heartbeat thread */
    int ttl_ms;           /* lifetime of a registration (streams.ttl_ms), > heartbeat_ms */
    int role, index;
} gb_registry_client_opts;

typedef struct gb_registry_client gb_registry_client;

/* Connects to the registry and, with heartbeat_ms > 0, starts the heartbeat thread (its own
 * socket on zctx). Returns 0 or GB_EINVAL/GB_ENOMEM/GB_EZMQ/GB_ESYS. The calls below are for
 * one thread; the heartbeat thread is internal. */
int gb_registry_client_open(gb_registry_client **out, void *zctx,
                            const gb_registry_client_opts *o, gb_error *err);

/* Unregisters this client's names (best effort, bounded by the timeout), stops the thread. */
void gb_registry_client_close(gb_registry_client *c);

/* Registers name -> endpoint (replacing any holder of the name) and keeps it alive. Blocks until
 * the registry answers. Returns 0, GB_EINVAL (name or endpoint too long or empty), GB_ETIMEOUT,
 * GB_EFULL (registry full), GB_ECLOSED. */
int gb_registry_register(gb_registry_client *c, const char *name, const char *endpoint,
                         gb_error *err);

/* Removes a name this client registered. Returns 0, GB_ENOTFOUND, GB_ETIMEOUT. */
int gb_registry_unregister(gb_registry_client *c, const char *name, gb_error *err);

/* Waits up to timeout_ms for name to be registered and copies its endpoint into endpoint (cap
 * bytes). Returns 0, GB_ETIMEOUT ("no worker registered NAME within N ms"), GB_EINVAL. */
int gb_registry_lookup(gb_registry_client *c, const char *name, char *endpoint, size_t cap,
                       int timeout_ms, gb_error *err);

/* The endpoint registered under name now or, when none is, the last one registered under it
 * (the registry keeps a name's endpoint after it expires or is unregistered): where a restarted
 * worker's peers still connect. One request, no waiting. Returns 0, GB_ENOTFOUND (never
 * registered), GB_ETIMEOUT, GB_EINVAL (cap too small). */
int gb_registry_lookup_last(gb_registry_client *c, const char *name, char *endpoint, size_t cap,
                            gb_error *err);

/* Waits up to timeout_ms until at least min_count names start with prefix, then returns all of
 * them sorted by name in a malloc'd array (*out, *n; free(*out)). Returns 0, GB_ETIMEOUT
 * (naming how many were found), GB_ENOMEM. */
int gb_registry_list(gb_registry_client *c, const char *prefix, int min_count, int timeout_ms,
                     gb_registry_entry **out, int *n, gb_error *err);

/* Asks the run's launcher for a slot of role (gearbox join) and the run's config: fills *out
 * (out->config malloc'd, NUL-terminated: gb_registry_join_reply_free). One request, bounded by
 * the client's timeout. Returns 0, GB_ETIMEOUT (no registry answered), GB_EFULL (no slot left),
 * GB_EUNSUPPORTED (the launcher takes no joins), GB_EPROTO, GB_ENOMEM. */
int gb_registry_join(gb_registry_client *c, int role, gb_registry_join_reply *out,
                     gb_error *err);
void gb_registry_join_reply_free(gb_registry_join_reply *r);

/* gb_registry_join for slot `again` of role, which this joiner held: its worker died and is
 * started again. Ask it as that slot's identity (a client attached with its key pair); the
 * answer is the same index with the next incarnation. Same returns as gb_registry_join. */
int gb_registry_join_again(gb_registry_client *c, int role, int again,
                           gb_registry_join_reply *out, gb_error *err);

#endif
