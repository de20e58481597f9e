/* workers/server/server_internal.h: what the data server's transport (server.c) and request handlers
 * (server_ops.c) share (private to workers/).
 * defines: gb_server (the struct), worker (one request thread), rbuf (a reply buffer),
 *          srv_table (one named table), gb_episodes (the struct), ep_cursor, ep_plan,
 *          GB_SERVE_MODE_*, gb_episodes_plan, gb_episodes_mode_parse, gb_episodes_mode_name,
 *          gb_server_rbuf_get, gb_server_rbuf_free, gb_server_handle */
#ifndef GB_WORKERS_SERVER_INTERNAL_H
#define GB_WORKERS_SERVER_INTERNAL_H

#include "workers/server/server.h"

#include "runtime/base/rng.h"
#include "runtime/streams/wire.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#define ID_BYTES 4    /* request thread routing ids: "w" + 3 digits */
#define FRONT_HWM 1024 /* frames queued per client, each way */
#define MAX_PARKED 256 /* sample requests waiting on the rate limiter at once */
#define GB_SERVE_PARK 1 /* a handler's answer: the request waits (parked), nothing was sent */

/* A sample request waiting on the rate limiter: it holds no thread; request threads retry it
 * after every request they handle (an insert may admit it) and every 100 ms. */
typedef struct parked parked;
struct parked {
    parked *next;
    gb_wire_msg *m;
    double since, deadline; /* gb_now_s() */
};

/* ---- the episode index (server_episodes.c) ------------------------------------------------- */

/* Sampling modes of a sample request (request attribute "mode"; docs/protocol.md). */
enum {
    GB_SERVE_MODE_ITEM = 0,   /* items, by the table's selectors (the default) */
    GB_SERVE_MODE_WINDOW,     /* windows of len steps inside one episode, every start alike */
    GB_SERVE_MODE_TRANSITION, /* every transition alike; len steps from it, padded at the end */
    GB_SERVE_MODE_EPISODE,    /* whole episodes, every episode alike, padded to the longest */
    GB_SERVE_MODE_EPOCH,      /* transition rows in a shuffled order without replacement */
    GB_SERVE_MODES,
};
#define GB_SERVE_MAX_CURSORS 64 /* epoch cursors per table */

typedef struct ep_cursor {
    char name[32];
    int64_t epoch, pos; /* the epoch in progress and its next position */
} ep_cursor;

/* Items are added in dataset order; an episode's items are consecutive, all of T steps but its
 * last. Memory: 8 bytes per item, 16 per episode. */
struct gb_episodes {
    int64_t T;
    uint64_t seed;
    int64_t nitems, neps, max_len;
    int64_t cap[4];
    int32_t *item_slot;   /* the replay slot of each item */
    uint32_t *item_key;   /* the low 32 bits of its key (item seq) when loaded: other bits =
                             replaced (a key only grows: equal again after 2^32 inserts) */
    int64_t *ep_item0;    /* the first item of each episode */
    int64_t *ep_cum;      /* [neps + 1]: steps before each episode */
    int open;             /* the last episode takes more items */
    pthread_mutex_t mu;   /* cursors and the window cache */
    int64_t win_len;      /* the window length win_cum counts starts for (-1: none) */
    int64_t *win_cum;     /* [neps + 1]: window starts before each episode */
    int ncursors;
    ep_cursor cursors[GB_SERVE_MAX_CURSORS];
};

/* What a plan draws: n rows of S steps; size the units drawn from (window starts, transitions,
 * episodes); for epochs the epoch of the rows, its first position and end (1: the rows finish
 * it). */
typedef struct ep_plan {
    int64_t n, size, S, epoch, pos;
    int end;
} ep_plan;

/* A mode's number by name ("" or NULL: item), or -1; its name. */
int gb_episodes_mode_parse(const char *name);
const char *gb_episodes_mode_name(int mode);

/* Plans a sample of mode (not item) of up to batch rows: row i starts at step start[i] of
 * episode[i]; len is the window's steps (window, transition, epoch). Returns 0 or -1 with the
 * reason in text. */
int gb_episodes_plan(gb_episodes *e, int mode, int64_t batch, int64_t len, const char *cursor,
                     int reset, gb_rng *rng, int64_t *episode, int64_t *start, ep_plan *p,
                     char *text, size_t cap);

/* One named table: a replay and, when loaded from episodes, their index. */
typedef struct srv_table {
    char name[32];
    gb_replay *r;
    gb_episodes *ep; /* NULL: items only */
} srv_table;

typedef struct rbuf rbuf;
struct rbuf {
    rbuf *next;
    struct gb_server *s;
    size_t cap;
    atomic_int refs;
    unsigned char *data; /* 64-byte aligned, cap bytes */
};

struct gb_server {
    void *zctx;
    gb_replay *r; /* the default table's (tables[0].r) */
    srv_table tables[GB_SERVER_MAX_TABLES];
    int ntables;
    gb_server_opts o;
    char checkpoint[1024];
    char endpoint[256];
    char back_ep[64];
    void *front, *back;
    pthread_t *threads;
    int nthreads, started;
    atomic_int stop_threads;
    pthread_mutex_t ckpt_mu;
    pthread_mutex_t pool_mu;
    rbuf *pool;
    int pool_n;
    atomic_ullong requests[GB_SERVE_OP_END], errors, rejected, items_sent, bytes_sent;
    atomic_int buffers_out; /* reply buffers handed to ZeroMQ and not yet back */
    pthread_mutex_t park_mu;
    parked *park_head, *park_tail;
    int nparked;
    atomic_ullong parked_total;
    int close_waits, leak;
    struct worker *workers;
};

typedef struct worker worker;
struct worker {
    gb_server *s;
    int id;
    void *sock;
    gb_wire_msg *m; /* the request being received and handled (a parked one is handed over) */
    gb_replay_selection sel;
    gb_rng rng;                /* the offline modes' draws */
    int64_t *rows;             /* [2 * max_batch_rows]: their episodes and starts */
};

/* ---- server.c: transport --------------------------------------------------------------------- */

/* A reply buffer of at least need bytes (64-byte aligned), from the pool or new; NULL when out
 * of memory. Its refs are set by the caller; ZeroMQ gives it back through gb_server_rbuf_free. */
rbuf *gb_server_rbuf_get(gb_server *s, size_t need);
/* zmq_free_fn for frames sent from an rbuf (hint): the last one returns it to the pool. */
void gb_server_rbuf_free(void *data, void *hint);

/* ---- server_ops.c: request handlers ---------------------------------------------------------- */

/* Handles w->m, received with recv_rc (gb_wire_recv's result), on request thread w: sends its
 * reply, or parks it (a sample that must wait: w->m then belongs to the parked list and w gets
 * a fresh message). */
void gb_server_handle(worker *w, int recv_rc, const gb_error *recv_err);

/* Retries the parked requests once: replies to those that can be served now and to those whose
 * time is up; the others stay parked, in order. */
void gb_server_retry_parked(worker *w);

/* Frees every parked request (at close). */
void gb_server_drop_parked(gb_server *s);

#endif
