/* runtime/streams/sample_stream.h: the sample stream: actors push trajectory chunks to trainers.
 * defines: gb_sample_sender (PUSH connected to every trainer), gb_sample_receiver (PULL bound by
 *          each trainer), their options and statistics, gb_sample_sender_wait
 *
 * PUSH spreads chunks round-robin over the trainers whose connection is up. High-water marks on
 * both sides bound the memory in flight; when they are reached the sender blocks (backpressure).
 * With send_timeout_ms >= 0 a chunk that cannot be queued within that time is dropped: the drop
 * is counted in the sender's statistics and logged, never silent. */
#ifndef GB_RUNTIME_SAMPLE_H
#define GB_RUNTIME_SAMPLE_H

#include "runtime/streams/wire.h"

#include <stdint.h>

typedef struct gb_sample_sender_opts {
    const char *const *endpoints; /* every trainer's sample endpoint */
    int n_endpoints;
    int hwm;             /* messages queued per trainer before backpressure (> 0) */
    int send_timeout_ms; /* -1: block until queued (no drops); >= 0: drop after this long */
    int role, index;
    int incarnation;   /* the sending process's (workers/roles/worker.h): every seq's high bits */
    int kernel_buffer; /* tcp:// send buffer bytes (ZMQ_SNDBUF); 0 = the OS's autotuned one,
                          which holds megabytes: thousands of small chunks in flight that the
                          high-water marks do not see, and so stale experience (see below) */
} gb_sample_sender_opts;

typedef struct gb_sample_sender_stats {
    uint64_t sent, dropped;
    uint64_t bytes; /* tensor bytes sent */
} gb_sample_sender_stats;

typedef struct gb_sample_sender gb_sample_sender;

/* Creates the PUSH socket and connects it. Returns 0 or GB_EINVAL/GB_ENOMEM/GB_EZMQ.
 * gb_sample_sender_close lingers up to send_timeout_ms (forever with -1) so that chunks counted
 * as sent are delivered; a chunk still queued after that (trainer gone) is lost at shutdown,
 * which is the one loss ZeroMQ cannot count. Over ipc://, libzmq 4.3 also discards what is
 * still in the kernel socket buffer when the sender closes while the trainer's receive queue is
 * at its high-water mark (the reader sees EPOLLHUP while its input is throttled and drops the
 * connection unread). tcp:// is not affected. So a sender must close only after its receivers
 * have taken everything: `gearbox run` does that (launch/run_local.c, stop_workers: trainers
 * read without waiting, actors flush and wait, the launcher compares the counts and then
 * releases them) and reports any difference in summary.json, so no loss is silent. */
int gb_sample_sender_open(gb_sample_sender **out, void *zctx, const gb_sample_sender_opts *o,
                          gb_error *err);
void gb_sample_sender_close(gb_sample_sender *s);

/* Like gb_sample_sender_close, but waits at most linger_ms (>= 0) for queued chunks to leave,
 * whatever send_timeout_ms says: for shutdown when the trainers may already be gone (with
 * send_timeout_ms -1 a plain close would wait for them forever). Chunks still queued after
 * that are lost and logged as such, with their number unknown (ZeroMQ does not report it). */
void gb_sample_sender_close_within(gb_sample_sender *s, int linger_ms);

/* Sends one chunk of n tensors (payloads as in gb_wire_send: copied, or zero-copy with
 * free_fn), stamped with policy_version and the sender's next sequence number. Blocks while
 * every trainer's queue is full, up to send_timeout_ms. Returns 0; GB_ETIMEOUT when the chunk
 * was dropped (counted, logged); GB_EINVAL; GB_ECLOSED. */
int gb_sample_send(gb_sample_sender *s, int64_t policy_version, const gb_tensor_desc *descs,
                   const gb_wire_payload *payloads, int n, gb_error *err);

/* Waits up to timeout_ms (>= 0) until a chunk can be queued without blocking: a trainer is
 * connected and below its high-water mark. For a sender that must keep doing something else
 * (an actor's heartbeat) while backpressure holds it. Returns 0 (room now), GB_ETIMEOUT or
 * GB_EZMQ. */
int gb_sample_sender_wait(gb_sample_sender *s, int timeout_ms, gb_error *err);

/* The sender's counters so far. Safe to call from any thread while another sends (the counters
 * are relaxed atomics); each value is current, the three are not one consistent snapshot. */
gb_sample_sender_stats gb_sample_sender_get_stats(const gb_sample_sender *s);

/* A chunk's seq: the sender's incarnation << GB_SAMPLE_SEQ_BITS | its chunk number (1, 2, ...;
 * a dropped chunk uses a number too). */
#define GB_SAMPLE_SEQ_BITS 40
#define GB_LEDGER_ROWS_MAX 4096

/* Chunks received from one sending process: what the launcher's sample ledger needs to count
 * what a crashed actor sent and no trainer got, and what went down with a crashed trainer
 * (launch/run_local.c; a trainer's rows: workers/roles/trainer_ledger.h). */
typedef struct gb_ledger_row {
    int64_t sender, incarnation; /* the sender's index and process incarnation */
    int64_t received;            /* well-formed chunks received from it */
    int64_t max_number;          /* the highest chunk number among them */
    int64_t lost_in_crash;       /* its chunks lost with a killed trainer */
} gb_ledger_row;
#define GB_LEDGER_COLS 5
_Static_assert(sizeof(gb_ledger_row) == GB_LEDGER_COLS * sizeof(int64_t),
               "a ledger is one int64 row of GB_LEDGER_COLS");

typedef struct gb_sample_receiver_opts {
    const char *endpoint; /* bind address */
    int hwm;              /* messages queued before the senders are pushed back (> 0) */
    int kernel_buffer;    /* tcp:// receive buffer bytes (ZMQ_RCVBUF); 0 = the OS default */
    uint64_t max_frame;   /* the largest tensor a chunk holds (the chunk's block_bytes bounds it):
                             a peer sending a larger frame is disconnected
                             (gb_wire_set_max_frame); 0: no bound */
} gb_sample_receiver_opts;

/* The kernel buffer a sample socket should have: room for about hwm chunks of chunk_bytes (the
 * kernel raises a tiny value to its minimum, a few KiB, and doubles it for its bookkeeping).
 * Over tcp:// this keeps the chunks in flight near what the high-water marks allow, so
 * backpressure (the trainer's rate limiter, a full on-policy queue) reaches the actors
 * promptly. No floor of its own: the 64 KiB one this had held ~100 CartPole DQN chunks of 640
 * bytes per socket, four such buffers per actor-trainer pair, and the learner trained on data
 * ~2000 training steps old (its Q-values diverged in 5 runs of 11). Over ipc://
 * ZeroMQ leaves the kernel buffer as it is (the Unix socket default, ~200 KiB): there only
 * streams.sample_hwm bounds what ZeroMQ itself queues. */
int gb_sample_kernel_buffer(int hwm, uint64_t chunk_bytes);

typedef struct gb_sample_receiver_stats {
    uint64_t received, rejected; /* rejected: malformed or not a sample, dropped and counted */
    uint64_t bytes;
} gb_sample_receiver_stats;

typedef struct gb_sample_receiver gb_sample_receiver;

/* Creates the PULL socket and binds it. Returns 0 or GB_EINVAL/GB_ENOMEM/GB_EZMQ. */
int gb_sample_receiver_open(gb_sample_receiver **out, void *zctx,
                            const gb_sample_receiver_opts *o, gb_error *err);
void gb_sample_receiver_close(gb_sample_receiver *r);

/* The bound endpoint (port filled in for "tcp://host:*"). */
const char *gb_sample_receiver_endpoint(const gb_sample_receiver *r);

/* Receives the next well-formed sample into m (tensor views into the frames, valid until
 * gb_wire_msg_release(m)), waiting up to timeout_ms (-1: forever, 0: not at all). Malformed
 * messages are skipped and counted. Returns 0, GB_EAGAIN (none in time), GB_ECLOSED, GB_EZMQ. */
int gb_sample_recv(gb_sample_receiver *r, gb_wire_msg *m, int timeout_ms, gb_error *err);

/* The receiver's counters so far. Safe to call from any thread while another receives (a
 * trainer's report reads them while its ingest thread receives): the counters are relaxed
 * atomics, so the hot path takes no lock; each value is current, the three are not one
 * consistent snapshot. Everything else on a receiver is for one thread at a time. */
gb_sample_receiver_stats gb_sample_receiver_get_stats(const gb_sample_receiver *r);

#endif
