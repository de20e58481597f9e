/* workers/server/server.h: the offline-RL data server (`gearbox serve`): named tables (GEAR
 * replays, with the episode index of a D4RL or Minari dataset) served on a ZeroMQ ROUTER; its
 * protocol is workers/server/server_protocol.h (page: docs/protocol.md), its clients
 * workers/server/client/.
 * defines: gb_server, gb_server_opts, gb_server_stats, gb_server_open, gb_server_open_tables,
 *          gb_server_run, gb_server_checkpoint, gb_server_close, gb_server_endpoint,
 *          gb_server_get_stats, gb_server_opts_from_config, gb_server_tables,
 *          gb_server_load_dataset, gb_server_load_dataset_episodes, gb_server_load_tables,
 *          gb_server_tables_free, gb_episodes, gb_episodes_create, gb_episodes_add,
 *          gb_episodes_free, gb_episodes_count, gb_episodes_transitions, gb_episodes_length
 *
 * Threads: one broker thread (the caller of gb_server_run) owns the ROUTER clients connect to
 * and hands each request, whole and unparsed, to an idle request thread over inproc (the
 * load-balancing broker pattern). A sample request that must wait for the rate limiter is
 * parked (a bounded number at once; past it, refused with GB_EFULL) and holds no thread:
 * request threads retry the parked ones after every request they handle and every 100 ms, and
 * answer them when they can be served or when their time is up; an insert waiting for room
 * holds its thread. Offline sampling modes never wait. A client that sends garbage or vanishes
 * costs only the request it sent. A request whose frames together exceed max_request_bytes is
 * answered with GB_EINVAL naming the limit; a single frame over twice the limit makes ZeroMQ
 * drop the sender's connection before it is read (ZMQ_MAXMSGSIZE: it cannot be answered
 * without being read). A REQ socket's envelope (an empty delimiter frame) is accepted and
 * answered in kind. */
#ifndef GB_WORKERS_SERVER_H
#define GB_WORKERS_SERVER_H

#include "replay/replay.h"
#include "runtime/config/config.h"
#include "runtime/base/error.h"
#include "workers/server/server_protocol.h"

#include <stdatomic.h>
#include <stdint.h>

#define GB_SERVER_MAX_TABLES GB_SERVE_MAX_TABLES /* workers/server/server_protocol.h */
#define GB_SERVER_DEFAULT_TABLE "default"
/* server.max_pending_replies' default: a client keeping a few samples in flight (the Python
 * loader's prefetch is 4) never meets it; one that never reads holds at most this many replies
 * of server.max_batch_bytes each */
#define GB_SERVER_MAX_PENDING_REPLIES 8

typedef struct gb_server_opts {
    const char *endpoint;      /* bind address; "tcp://HOST:*" or port 0 picks a free port */
    int threads;               /* request threads, >= 1 */
    int64_t max_batch_rows;    /* > 0 */
    int64_t max_batch_bytes;   /* > 0 */
    int64_t max_request_bytes; /* > 0 */
    /* sample replies one client may have queued and not yet read; past it its samples are
     * refused with an error (counted: refused). 0: GB_SERVER_MAX_PENDING_REPLIES */
    int64_t max_pending_replies;
    double max_wait_s;         /* >= 0 */
    const char *checkpoint;    /* NULL or "": no checkpoints */
} gb_server_opts;

/* Fills o from the config's server section. */
void gb_server_opts_from_config(gb_server_opts *o, const gb_config_server *c);

typedef struct gb_server_stats {
    /* handled successfully, by op; counted before the answer is sent */
    uint64_t requests[GB_SERVE_OP_END];
    uint64_t errors;                    /* answered with an error status (limits, bad values) */
    uint64_t rejected;                  /* malformed messages */
    uint64_t refused;                   /* samples refused: max_pending_replies unread */
    int clients_waiting;                /* clients with replies queued for them now */
    uint64_t items_sent, bytes_sent;    /* sample replies */
    uint64_t parked;                    /* sample requests that waited parked (no thread held) */
    int64_t parked_now;                 /* waiting now */
} gb_server_stats;

typedef struct gb_server gb_server;

/* Binds the ROUTER on zctx and starts the request threads serving replay r (not owned; it must
 * outlive the server). Returns 0 or GB_EINVAL (bad options), GB_EZMQ (bind failed, naming the
 * endpoint), GB_ESYS, GB_ENOMEM. */
int gb_server_open(gb_server **out, void *zctx, gb_replay *r, const gb_server_opts *o,
                   gb_error *err);

/* ---- episodes: a dataset's episode structure, for the offline sampling modes ------------- */

typedef struct gb_episodes gb_episodes;

/* An empty index for items of `steps` steps; seed: the epochs' shuffles. Returns 0 or
 * GB_EINVAL / GB_ENOMEM. */
int gb_episodes_create(gb_episodes **out, int64_t steps, uint64_t seed, gb_error *err);
/* Adds the next item of the dataset (in order): its replay slot and key (the item's seq), its
 * valid steps, and ends = 1 when the episode ends with it (a shorter item always ends one).
 * Returns 0 or GB_EINVAL / GB_ENOMEM. */
int gb_episodes_add(gb_episodes *e, int64_t slot, uint64_t key, int32_t length, int ends,
                    gb_error *err);
void gb_episodes_free(gb_episodes *e);
int64_t gb_episodes_count(const gb_episodes *e);       /* episodes (0 for NULL) */
int64_t gb_episodes_transitions(const gb_episodes *e); /* steps of all episodes */
int64_t gb_episodes_length(const gb_episodes *e, int64_t episode);

/* ---- several tables ------------------------------------------------------------------------- */

/* Named tables for one server: t[0] is the default table (requests that name none). */
typedef struct gb_server_tables {
    int n;
    struct {
        char name[32];
        gb_replay *r;
        gb_episodes *ep; /* NULL: no episode structure (the offline modes are refused) */
        int64_t loaded;  /* items loaded or restored */
    } t[GB_SERVER_MAX_TABLES];
} gb_server_tables;

/* Like gb_server_open, serving every table of t (not owned; they must outlive the server).
 * Names must be distinct, 1..31 bytes. */
int gb_server_open_tables(gb_server **out, void *zctx, const gb_server_tables *t,
                          const gb_server_opts *o, gb_error *err);

/* The endpoint clients connect to (the port filled in). */
const char *gb_server_endpoint(const gb_server *s);

/* The broker loop: serves until *stop becomes non-zero (checked every 100 ms). Returns 0 when
 * stopped, GB_ECLOSED (context terminated) or GB_EZMQ. */
int gb_server_run(gb_server *s, const atomic_int *stop, gb_error *err);

/* Writes a checkpoint now (serialised with checkpoint requests). Returns 0,
 * GB_EUNSUPPORTED (no checkpoint path) or gb_replay_checkpoint's error. */
int gb_server_checkpoint(gb_server *s, gb_error *err);

/* Stops the request threads (a request in progress finishes first) and frees s. NULL is fine. */
void gb_server_close(gb_server *s);

gb_server_stats gb_server_get_stats(const gb_server *s);

/* ---- loading datasets ------------------------------------------------------------------------ */

/* Creates the replay the config's server section describes, with the schema of its dataset:
 * gearbox datasets (server.dataset_format gearbox: a file or a directory of *.gbds files, all
 * with one schema), a D4RL HDF5 file (d4rl, cut into server.steps-step items) or a Minari
 * dataset (minari: its folder; the same columns as d4rl, replay/formats/d4rl.h). With
 * server.restore and an existing checkpoint, the items come from the checkpoint instead (the
 * dataset supplies only the schema). Otherwise every item (or the newest
 * server.dataset_last_items of a gearbox dataset) is inserted. Capacity 0 = the items loaded.
 * Returns 0 with *out set (gb_replay_free), or the reader's / replay's error. *loaded: items
 * inserted or restored. */
int gb_server_load_dataset(const gb_config *cfg, gb_replay **out, int64_t *loaded,
                           gb_error *err);

/* Like gb_server_load_dataset; *ep (ep may be NULL) receives the episode index of a D4RL
 * dataset loaded from the file (NULL for gearbox datasets and restored checkpoints, whose
 * items carry no episode boundaries). */
int gb_server_load_dataset_episodes(const gb_config *cfg, gb_replay **out, gb_episodes **ep,
                                    int64_t *loaded, gb_error *err);

/* Loads the default table (the server section) and every table of server.tables (each the
 * server section with the table's overrides: gb_config_server_table) into t. Only the default
 * table has a checkpoint. Returns 0 or the first error (prefixed with the table's name; t is
 * then freed). */
int gb_server_load_tables(const gb_config *cfg, gb_server_tables *t, gb_error *err);
void gb_server_tables_free(gb_server_tables *t);

#endif
