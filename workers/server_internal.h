/* workers/server_internal.h: what the data server's transport (server.c) and request handlers
 * (server_ops.c) share (private to workers/).
 * defines: gb_server (the struct), worker (one request thread), rbuf (a reply buffer),
 *          gb_server_rbuf_get, gb_server_rbuf_free, gb_server_handle */
#ifndef GB_WORKERS_SERVER_INTERNAL_H
#define GB_WORKERS_SERVER_INTERNAL_H

#include "workers/server.h"

#include "runtime/wire.h"

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
    gb_replay *r;
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
