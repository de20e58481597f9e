/* runtime/streams/inference.h: the inference stream: actors ask policy workers for actions.
 * defines: gb_infer_client (DEALER to every policy worker), gb_infer_server (ROUTER that merges
 *          requests into batches), gb_infer_batch, gb_infer_outputs, gb_infer_fn
 *
 * A request is one message of type GB_MSG_INFER_REQUEST whose tensors all have rows as their
 * first dimension; its sequence number is the request id. The server merges pending requests
 * that share a tensor table (names, dtypes, per-row shapes) into one batch of at most
 * max_batch_rows rows, waiting at most max_wait_ms after the first one arrives, runs the
 * callback once on the batch, and answers each client with its own rows of every output.
 *
 * The wait ends early once every client seen recently has a request in the batch: a lone actor
 * never waits for company that is not coming, and a full house is served at once.
 *
 * Threading. By default (opts.pipelined == 0) one thread drives the server: each
 * gb_infer_server_poll receives and merges a batch, runs the callback and replies, in sequence.
 * With opts.pipelined the server owns an inference thread, started by gb_infer_server_open, and
 * the thread calling gb_infer_server_poll becomes the request thread (SRL's split):
 *   - the request thread alone uses the ROUTER socket: it receives and validates requests,
 *     gathers batch k+1, merges its rows, hands it to the inference thread, and sends the replies
 *     of every batch (ZeroMQ sockets are not thread-safe);
 *   - the inference thread runs the callback (and opts.between) and nothing else; it is told of
 *     a batch through a mutex and condition variable and wakes the request thread through an
 *     eventfd that the request thread polls together with the ROUTER.
 * So while batch k is in the model, batch k+1 is received and merged (malformed requests are
 * answered at once). At most one batch is in the model and one is gathering: two batch buffers,
 * reused, nothing allocated per batch once they have grown. Batch k+1 is handed to the model
 * only after the replies of batch k are sent, so the callback's outputs (valid until its next
 * call) are never overwritten while still being sent. Batch k+1 closes by the same rules as in
 * the serial mode (row/request limits, max_wait_ms after its first request, every recent client
 * present), judged when the model becomes free: requests that came while batch k ran are served
 * as soon as k is done when their wait limit has passed. */
#ifndef GB_RUNTIME_INFERENCE_H
#define GB_RUNTIME_INFERENCE_H

#include "runtime/streams/wire.h"

#include <stdint.h>

/* ---- client ---------------------------------------------------------------------------------- */

typedef struct gb_infer_client_opts {
    const char *const *endpoints; /* every policy worker's endpoint */
    int n_endpoints;
    int timeout_ms; /* per request; > 0 */
    int role;       /* sender role and index written into each request */
    int index;
    uint64_t max_frame; /* the largest tensor a reply can hold (rows of one request x the
                           widest output row): a server sending a larger frame is
                           disconnected (gb_wire_set_max_frame); 0: no bound */
    int send_timeout_ms; /* how long a send waits for a connected server; 0: timeout_ms. A
                            caller that must stay responsive (an actor's heartbeat) sends
                            in shorter slices and tries again */
} gb_infer_client_opts;

typedef struct gb_infer_client_stats {
    uint64_t requests, replies, timeouts, errors; /* errors: replies with a non-zero status */
    uint64_t stale;    /* replies to requests that had already timed out, dropped */
    uint64_t rejected; /* malformed replies, dropped */
} gb_infer_client_stats;

typedef struct gb_infer_client gb_infer_client;

/* Creates a DEALER on zctx connected to every endpoint (ZMQ_IMMEDIATE: requests only go to
 * servers whose connection is up). Returns 0 or GB_EINVAL/GB_ENOMEM/GB_EZMQ. Not thread-safe:
 * one thread uses a client. */
int gb_infer_client_open(gb_infer_client **out, void *zctx, const gb_infer_client_opts *o,
                         gb_error *err);
void gb_infer_client_close(gb_infer_client *c);

/* Sends a request with n tensors (descs[i].shape[0] = rows for all i; data[i] copied) and
 * returns its id in *id. Does not wait for the reply; several may be outstanding (at most 64).
 * Returns 0, GB_EINVAL, GB_EFULL (64 outstanding), GB_ETIMEOUT (no server accepted it within
 * send_timeout_ms). */
int gb_infer_client_send(gb_infer_client *c, const gb_tensor_desc *descs,
                         const void *const *data, int n, uint64_t *id, gb_error *err);

/* Receives the next reply to any outstanding request (its id is reply->hdr.seq), waiting up to
 * timeout_ms (0: do not wait). Returns 0, GB_EAGAIN (none within timeout_ms; requests older than
 * the client timeout are then expired with GB_ETIMEOUT), or the server's error for that reply
 * (reply->hdr.seq still names the request). */
int gb_infer_client_recv(gb_infer_client *c, gb_wire_msg *reply, int timeout_ms, gb_error *err);

/* Sends a request and waits up to the client's timeout for its reply, received into reply
 * (views valid until gb_wire_msg_release(reply) or the next receive into it). Needs no other
 * request outstanding (GB_EINVAL). Returns 0; GB_ETIMEOUT naming the request and the endpoints;
 * the server's code and message when it answered with an error; GB_ECLOSED. */
int gb_infer_client_request(gb_infer_client *c, const gb_tensor_desc *descs,
                            const void *const *data, int n, gb_wire_msg *reply, gb_error *err);

gb_infer_client_stats gb_infer_client_get_stats(const gb_infer_client *c);

/* ---- server ---------------------------------------------------------------------------------- */

/* A merged batch. inputs[i].desc->shape[0] == rows. Views stay valid during the callback. */
typedef struct gb_infer_batch {
    int rows;
    int n_requests;
    int ntensors;
    gb_tensor_view inputs[GB_WIRE_MAX_TENSORS];
    gb_tensor_desc descs[GB_WIRE_MAX_TENSORS];
} gb_infer_batch;

/* What the callback produces: ntensors outputs, each with shape[0] == the batch's rows, data
 * owned by the callback and valid until its next call (or the server is closed). */
typedef struct gb_infer_outputs {
    int ntensors;
    gb_tensor_desc descs[GB_WIRE_MAX_TENSORS];
    const void *data[GB_WIRE_MAX_TENSORS];
    int64_t policy_version; /* written into each reply; -1 when unknown */
} gb_infer_outputs;

/* Runs the policy on a batch. Returns 0, or a GB_E* code with err filled: every request of the
 * batch is then answered with that error, and gb_infer_server_poll returns it. Called on the
 * thread driving the server, or on the inference thread when pipelined. */
typedef int (*gb_infer_fn)(void *user, const gb_infer_batch *in, gb_infer_outputs *out,
                           gb_error *err);

/* Optional: called between batches on the thread that runs the callback, never during one:
 * before every batch, and when pipelined also about every 50 ms while no batch comes (e.g. to
 * swap in new parameters). In the serial mode it is called at the start of every poll. */
typedef void (*gb_infer_between_fn)(void *user);

typedef struct gb_infer_server_opts {
    const char *endpoint; /* bind address, e.g. "ipc:///run/x/policy-0" or "tcp://10.0.0.2:*" */
    int max_batch_rows;   /* > 0 (policy.max_batch_rows) */
    double max_wait_ms;   /* >= 0 (policy.max_wait_ms) */
    int role, index;
    gb_infer_fn fn;
    void *user;
    int pipelined;               /* 1: an inference thread runs fn (see Threading above) */
    gb_infer_between_fn between; /* optional, NULL: none */
    uint64_t max_frame; /* the largest tensor a request can hold (an actor's rows x the bytes
                           of one observation): a client sending a larger frame is
                           disconnected before it is read (gb_wire_set_max_frame), and the
                           server goes on serving the others; 0: no bound */
} gb_infer_server_opts;

typedef struct gb_infer_server_stats {
    uint64_t received;                /* valid requests taken in (then served, failed, or
                                         held in a batch gathering or in the model) */
    uint64_t requests, rows, batches; /* served */
    uint64_t rejected;                /* malformed requests (counted, answered when possible) */
    uint64_t failed;                  /* requests answered with a callback error */
    uint64_t overlapped; /* pipelined: batches that had requests received while the previous
                            batch was in the model */
    uint64_t unsent;     /* replies (outputs or errors) the ROUTER would not take: the client
                            is gone (the ROUTER is ZMQ_ROUTER_MANDATORY, so this is seen) or
                            its queue is full; dropped, the client times the request out */
} gb_infer_server_stats;

typedef struct gb_infer_server gb_infer_server;

/* Creates the ROUTER and binds it; when pipelined, also starts the inference thread. Returns 0
 * or GB_EINVAL/GB_ENOMEM/GB_EZMQ (bind failed, naming the endpoint)/GB_ESYS. One thread drives a
 * server (polls it, reads its stats, closes it). */
int gb_infer_server_open(gb_infer_server **out, void *zctx, const gb_infer_server_opts *o,
                         gb_error *err);
/* Pipelined: waits for a batch in the model to finish (the callback is not interrupted), joins
 * the inference thread, and answers the requests it still holds (served ones with their outputs,
 * others with GB_ECLOSED) as far as the socket takes them without waiting. Frees everything. */
void gb_infer_server_close(gb_infer_server *s);

/* The endpoint clients connect to (the bound one, with the port filled in for "tcp://...:*"). */
const char *gb_infer_server_endpoint(const gb_infer_server *s);

/* Serial: waits up to timeout_ms (-1: forever) for a request, gathers a batch, runs the callback
 * and replies. Pipelined: receives, gathers and hands batches to the inference thread until one
 * batch's replies are sent or timeout_ms passes; a batch gathering or in the model when it
 * returns carries on at the next call. Malformed requests never make this fail: they are counted
 * and, when the sender and request id are known, answered with GB_EPROTO. Returns 1 when a batch
 * was served, 0 when none was within timeout_ms, the callback's error (its batch answered with
 * it), GB_ECLOSED (context terminated), GB_EZMQ, GB_ESYS. */
int gb_infer_server_poll(gb_infer_server *s, int timeout_ms, gb_error *err);

/* Counters as of the last poll; read them on the thread driving the server. */
gb_infer_server_stats gb_infer_server_get_stats(const gb_infer_server *s);

#endif
