/* runtime/streams/inference_internal.h: what the inference stream's files share (private to
 * runtime/).
 * defines: the server struct and its pipelined stages, the socket option helpers, the request
 *          checks, batch merging and replies of inference_batch.c, and the pipelined mode's
 *          entry points. Calls run one way: inference_server.c -> inference_pipelined.c ->
 *          inference_batch.c (the server calls the batch file too). */
#ifndef GB_RUNTIME_INFERENCE_INTERNAL_H
#define GB_RUNTIME_INFERENCE_INTERNAL_H

#include "runtime/streams/inference.h"

#include <pthread.h>
#include <stdint.h>
#include <zmq.h>

/* Requests a client keeps in flight at most, and so what the server queues for each (its
 * ROUTER's ZMQ_RCVHWM and ZMQ_SNDHWM): one number, so that a client never meets the bound */
#define INFER_MAX_OUTSTANDING 64
#define SERVER_MAX_CLIENTS 512
#define SERVER_ACTIVE_WINDOW_NS 1000000000ULL /* a client seen this recently is expected */
#define SERVER_MAX_REQUESTS 1024              /* requests per batch (each may hold many rows) */
#define SERVER_IDLE_BETWEEN_MS 50             /* pipelined: opts.between while no batch comes */

static inline int gb_infer_set_int_opt(void *sock, int opt, int v, gb_error *err,
                                       const char *name)
{
    if (zmq_setsockopt(sock, opt, &v, sizeof v) != 0)
        return gb_wire_zmq_error(err, name);
    return 0;
}

/* Sets ZMQ_RCVTIMEO when it changes (blocking receives wait in ZeroMQ itself: one wake-up, no
 * separate zmq_poll). */
static inline int gb_infer_set_rcvtimeo(void *sock, int *cur, long ms, gb_error *err)
{
    int v = ms < 0 ? -1 : ms > INT32_MAX ? INT32_MAX : (int)ms;
    if (v == *cur)
        return 0;
    if (zmq_setsockopt(sock, ZMQ_RCVTIMEO, &v, sizeof v) != 0)
        return gb_wire_zmq_error(err, "ZMQ_RCVTIMEO");
    *cur = v;
    return 0;
}

typedef struct client_ent {
    uint64_t hash;
    uint64_t last_ns;
    uint64_t gen; /* batch generation in which it last had a request */
} client_ent;

/* Pipelined mode: one of the two batch buffers (gathering, or in the model). */
typedef struct stage {
    gb_wire_msg **slot; /* cap requests */
    int n;
    int64_t rows;
    uint64_t gen;      /* batch generation (client bookkeeping) */
    uint64_t deadline; /* ns: first request + max_wait */
    int full;          /* no more requests fit (row/request limit, or one was carried) */
    int overlapped;    /* requests came while the other stage was in the model */
    void *merge[GB_WIRE_MAX_TENSORS];
    size_t merge_cap[GB_WIRE_MAX_TENSORS];
    gb_infer_batch batch;
    gb_infer_outputs out;
    int rc; /* the callback's result (inference thread writes, request thread reads after done) */
    gb_error err;
} stage;

struct gb_infer_server {
    gb_infer_server_opts o;
    void *sock;
    char endpoint[256];
    int cap;            /* request slots per batch */
    gb_wire_msg **slot; /* cap + 1: the last one holds a request carried to the next batch */
    int carry;
    int64_t row_bytes[GB_WIRE_MAX_TENSORS]; /* per request, scratch */
    void *merge[GB_WIRE_MAX_TENSORS];
    size_t merge_cap[GB_WIRE_MAX_TENSORS];
    gb_infer_batch batch;
    gb_infer_outputs out;
    gb_wire_header reply;
    client_ent clients[SERVER_MAX_CLIENTS];
    int nclients;
    int rcvtimeo;
    uint64_t gen;
    gb_infer_server_stats st;
    /* pipelined mode (slot[cap] stays the carry slot; slot[0..cap) are unused) */
    stage stages[2];
    int gi;   /* the stage gathering */
    int busy; /* the stage handed to the inference thread, -1 when none */
    int efd;  /* eventfd: the inference thread's "done" wake-up, polled beside the ROUTER */
    pthread_t thread;
    int thread_started;
    pthread_mutex_t mu; /* guards job, done, quit */
    pthread_cond_t cv;
    int mu_init, cv_init;
    int job; /* stage index for the inference thread, -1: none */
    int done, quit;
};

/* ---- shared by the serial and pipelined modes (inference_batch.c) ------------------------- */

/* Allocates *m when NULL. Returns 0 or GB_ENOMEM. */
int gb_infer_msg_ensure(gb_wire_msg **m, gb_error *err);
/* Records that the client of m has a request in the current batch generation. */
void gb_infer_note_client(gb_infer_server *s, const gb_wire_msg *m, uint64_t now);
/* 1 when every client seen within the active window has a request in this batch. */
int gb_infer_all_present(const gb_infer_server *s, uint64_t now);
/* Answers m with an error status (without waiting; a reply that cannot go is counted). */
void gb_infer_reply_error(gb_infer_server *s, const gb_wire_msg *m, int code, const char *text);
/* Checks a request on its own; returns its rows, or 0 after answering and releasing it. */
int64_t gb_infer_request_rows(gb_infer_server *s, gb_wire_msg *m);
/* 1 when b can join a batch that starts with a (same names, dtypes and per-row shapes). */
int gb_infer_compatible(const gb_wire_header *a, const gb_wire_header *b);
/* Builds the batch of slot[0..n) (rows in all). Returns 0 or GB_ENOMEM. */
int gb_infer_build_batch(gb_wire_msg **slot, int n, int64_t rows, void **merge,
                         size_t *merge_cap, gb_infer_batch *b, gb_error *err);
/* Runs the callback on b and checks what it produced. */
int gb_infer_run_fn(gb_infer_server *s, const gb_infer_batch *b, gb_infer_outputs *out,
                    gb_error *err);
/* Answers each request of slot[0..n) with its rows of out, releases them, counts the batch. */
void gb_infer_send_replies(gb_infer_server *s, gb_wire_msg **slot, int n, int64_t rows,
                           const gb_infer_outputs *out);
/* Answers every request of slot[0..n) with code and text, releases them. */
void gb_infer_reply_all_error(gb_infer_server *s, gb_wire_msg **slot, int n, int code,
                              const char *text);

/* ---- the pipelined mode (inference_pipelined.c) -------------------------------------------- */

int gb_infer_pipe_start(gb_infer_server *s, gb_error *err); /* stages, eventfd, the thread */
void gb_infer_pipe_stop(gb_infer_server *s); /* joins the thread, answers what is held */
int gb_infer_pipe_poll(gb_infer_server *s, int timeout_ms, gb_error *err);

#endif
