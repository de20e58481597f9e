/* workers/server/server_internal.h: the data server's inside (private to its files). Calls run one
 * way: server.c (sockets, broker, request threads) -> server_dispatch.c (a request to its
 * handler; parked samples) -> the handlers: server_info.c (info, checkpoint), server_insert.c
 * (insert, update), server_sample.c (items), server_offline.c (the offline modes) ->
 * server_reply.c (reply buffers, answers, the columns a sample carries).
 * defines: gb_server (the struct), worker (one request thread), rbuf (a reply buffer),
 *          srv_table (one named table), parked, sample_reply, the functions of the files above */
#ifndef GB_WORKERS_SERVER_INTERNAL_H
#define GB_WORKERS_SERVER_INTERNAL_H

#include "workers/server/server.h"
#include "workers/server/server_episodes_internal.h"
#include "workers/server/server_protocol.h"

#include "runtime/base/rng.h"
#include "runtime/streams/wire.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#define ID_BYTES 4      /* request thread routing ids: "w" + 3 digits */
#define FRONT_HWM 1024  /* frames queued per client, each way */
#define MAX_PARKED 256  /* sample requests waiting on the rate limiter at once */
#define GB_SERVE_PARK 1 /* a handler's answer: the request waits (parked), nothing was sent */

/* One named table: a replay and, when loaded from episodes, their index. */
typedef struct srv_table {
    char name[32];
    gb_replay *r;
    gb_episodes *ep; /* NULL: items only */
} srv_table;

/* A request admitted: its message, its attributes (read by its operation's table; strings
 * point into m) and the table it names. */
typedef struct srv_request {
    const gb_wire_msg *m;
    gb_serve_request q;
    const srv_table *tb;
} srv_request;

/* A sample request waiting on the rate limiter: it holds no thread; request threads retry it
 * after every request they handle (an insert may admit it) and every 100 ms. */
typedef struct parked parked;
struct parked {
    parked *next;
    gb_wire_msg *m;         /* owned */
    srv_request r;          /* r.m is m */
    double since, deadline; /* gb_now_s() */
};

typedef struct srv_client srv_client; /* server_clients.c */

typedef struct rbuf rbuf;
struct rbuf {
    rbuf *next;
    struct gb_server *s;
    srv_client *client; /* whose reply it holds (NULL: not counted), released with the buffer */
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
    pthread_mutex_t client_mu;
    srv_client *clients;    /* those with replies out (server_clients.c) */
    atomic_ullong refused;  /* requests refused: their client held max_pending_replies */
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
    gb_rng rng;     /* the offline modes' draws */
    int64_t *rows;  /* [2 * max_batch_rows]: their episodes and starts */
};

/* ---- server_dispatch.c: a request to its handler ------------------------------------------- */

/* Handles w->m, received with recv_rc (gb_wire_recv's result), on request thread w: sends its
 * reply, or parks it (a sample that must wait: w->m then belongs to the parked list and w gets
 * a fresh message). */
void gb_server_handle(worker *w, int recv_rc, const gb_error *recv_err);

/* Retries the parked requests once: replies to those that can be served now and to those whose
 * time is up; the others stay parked, in order. */
void gb_server_retry_parked(worker *w);

/* Frees every parked request (at close). */
void gb_server_drop_parked(gb_server *s);

/* ---- the handlers: each sends the reply (or an error reply); returns 0 or the send's error */

int gb_server_op_info(worker *w, const srv_request *r, gb_error *err);
int gb_server_op_checkpoint(worker *w, const srv_request *r, gb_error *err);
int gb_server_op_insert(worker *w, const srv_request *r, gb_error *err);
int gb_server_op_update(worker *w, const srv_request *r, gb_error *err);

/* A sample request in mode item; parked: NULL the first time (a request that must wait
 * returns GB_SERVE_PARK with nothing sent), else its parking record (retried without waiting;
 * answered with the limiter's error once its deadline has passed). */
int gb_server_op_sample(worker *w, const srv_request *r, const parked *pk, gb_error *err);
/* The wait a sample request asked for (its timeout, capped by server.max_wait_s). */
double gb_server_sample_wait_s(const gb_server *s, const gb_serve_request *q);

/* A sample request in an offline mode (not rate-limited, never parked: it reads the dataset). */
int gb_server_op_sample_offline(worker *w, const srv_request *r, int mode, gb_error *err);

/* ---- server_clients.c: replies out per client (server.max_pending_replies) ------------------ */

int gb_server_client_may_send(gb_server *s, const gb_wire_msg *m);
srv_client *gb_server_client_hold(gb_server *s, const gb_wire_msg *m);
void gb_server_client_release(gb_server *s, srv_client *c);
int gb_server_clients_waiting(gb_server *s);

/* ---- server_reply.c: reply buffers and answers ----------------------------------------------- */

/* A reply buffer of at least need bytes (64-byte aligned), from the pool or new; NULL when out
 * of memory. Its refs are set by the caller; ZeroMQ gives it back through gb_server_rbuf_free. */
rbuf *gb_server_rbuf_get(gb_server *s, size_t need);
/* zmq_free_fn for frames sent from an rbuf (hint): the last one returns it to the pool. */
void gb_server_rbuf_free(void *data, void *hint);
/* Frees the idle buffers of the pool (at close, once none is out). */
void gb_server_pool_free(gb_server *s);

/* Answers m with status code and text (counted as an error). Returns 0 or the send's error. */
int gb_server_send_error(worker *w, const gb_wire_msg *m, int code, const char *text);
/* A success reply's header. */
void gb_server_reply_init(gb_wire_header *h, const worker *w, const gb_wire_msg *m);
/* Sends a success reply to op with attributes attrs (op's reply struct, written by its table;
 * NULL: none), counted before it is sent, so that a client that has its answer sees it in the
 * server's statistics. Returns 0 or the table's / the send's error. */
int gb_server_reply_done(worker *w, const gb_wire_msg *m, int op, const void *attrs,
                         gb_wire_header *h, const gb_wire_payload *pl, gb_error *err);

/* Checks a request's rows n against 1..server.max_batch_rows. Returns 0, or -1 with text saying
 * "<what> <n><unit> outside 1..<limit>". */
int gb_server_check_rows(const gb_server *s, int64_t n, const char *what, const char *unit,
                         char *text, size_t cap);

/* The index of the column called name, or -1. */
int gb_server_column_index(const gb_replay_options *o, const char *name);
/* Parses a sample's "columns" tensor into column indices (absent: every column). Returns the
 * count or -1 (text set). */
int gb_server_parse_columns(const gb_replay_options *o, const gb_wire_msg *m, int *cols,
                            char *text, size_t cap);

/* A sample reply: one reply buffer carved into the rows' metadata arrays ("index", "key",
 * "prob", "weight", "length"; and "episode", "timestep" in the offline modes) and the asked
 * columns, each 64-byte aligned, for up to rows rows of S steps. */
typedef struct sample_reply {
    rbuf *b;
    int64_t rows, S;
    int offline;
    int ncols;
    int cols[GB_REPLAY_MAX_COLUMNS];
    size_t col_row[GB_REPLAY_MAX_COLUMNS]; /* bytes of one row of each asked column */
    gb_replay_dst dst[GB_REPLAY_MAX_COLUMNS];
    int64_t *index, *episode;
    uint64_t *key;
    double *prob;
    float *weight;
    int32_t *length, *timestep;
} sample_reply;

/* Carves a buffer for sr (rows, S, offline, ncols, cols set) from s's pool. Returns 0 or
 * GB_ENOMEM. */
int gb_server_sample_reply_alloc(gb_server *s, const gb_replay_table *tables, sample_reply *sr);
/* Gives an unsent reply's buffer back. */
void gb_server_sample_reply_drop(gb_server *s, sample_reply *sr);
/* Sends sr's rows (out->n) with attributes out, zero-copy from the buffer, counting the rows
 * and data_bytes bytes sent. Returns 0 or the send's error (the buffer is then given back). */
int gb_server_sample_reply_send(worker *w, const srv_request *r, sample_reply *sr,
                                const gb_serve_sampled *out, uint64_t data_bytes,
                                gb_error *err);

#endif
