/* workers/server/client/client.h: the C client of the offline-RL data server (`gearbox serve`;
 * protocol in workers/server/server_protocol.h). Library gearbox_client; needs only the runtime
 * (wire format, ZeroMQ).
 * defines: gb_client, gb_client_info, gb_client_column, gb_client_batch, gb_client_open,
 *          gb_client_open_curve,
 *          gb_client_close, gb_client_get_info, gb_client_sample, gb_client_insert,
 *          gb_client_update_priorities, gb_client_checkpoint, gb_client_selector_name,
 *          gb_client_has_selector, gb_client_use_table
 *
 *   gb_client *c;  gb_client_open(&c, "tcp://127.0.0.1:5555", 10000, &err);
 *   gb_client_info info;  gb_client_get_info(c, &info, &err);
 *   ... allocate one buffer per column: batch x column_bytes(info, c, t1 - t0) ...
 *   gb_client_sample(c, &req, &batch, &err);   // fills the caller's buffers
 *   req.selector = "weighted";                 // per request: any of info.selectors
 *
 * A client is one DEALER socket with one request in flight; use one client per thread. Every
 * call blocks up to the timeout given at open; a reply that arrives after its request timed out
 * is recognised by its sequence number and dropped. */
#ifndef GB_WORKERS_CLIENT_H
#define GB_WORKERS_CLIENT_H

#include "runtime/base/dtype.h"
#include "runtime/base/error.h"
#include "workers/server/server_protocol.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GB_CLIENT_MAX_COLUMNS 32
#define GB_CLIENT_MAX_DIMS 4
#define GB_CLIENT_MAX_TABLES GB_SERVE_MAX_TABLES

typedef struct gb_client gb_client;

typedef struct gb_client_column {
    char name[32];
    gb_dtype dtype;
    int ndim;
    int64_t shape[GB_CLIENT_MAX_DIMS]; /* per step (or per item) */
    int per_item;
    size_t step_bytes; /* bytes of one step (per-item: of the item's value) */
} gb_client_column;

typedef struct gb_client_info {
    int64_t size, capacity, steps; /* committed items, capacity, T */
    uint64_t inserts, samples;
    int64_t max_batch_rows, max_batch_bytes;
    char selector[16], remover[24]; /* selector: the default (server.replay.selector) */
    char selectors[64];             /* every selector a request may name, comma-separated
                                       ("uniform,weighted,fifo,lifo"); "" from an older server */
    int has_weight_total;           /* 1 when the server offers weighted (and said these): */
    double weight_total, beta;      /* its sum of priority^alpha, its importance exponent */
    int ncolumns;
    gb_client_column columns[GB_CLIENT_MAX_COLUMNS];
    /* the server's tables (the first is the default) and this table's episode index (0 when it
       has none: the offline modes are refused) */
    int ntables;
    char tables[GB_CLIENT_MAX_TABLES][32];
    int64_t episodes, transitions, max_episode_len;
} gb_client_info;

/* Connects a DEALER to endpoint (own ZeroMQ context). Returns 0 or GB_EINVAL / GB_EZMQ. */
int gb_client_open(gb_client **out, const char *endpoint, int timeout_ms, gb_error *err);

/* Like gb_client_open, to a server with server.curve on (tcp:// only): server_public is the
 * server's public key (Z85, 40 characters; `gearbox serve` prints it), key_file the client's
 * key pair file ("public <Z85>\nsecret <Z85>", mode 0600; runtime/streams/curve.h) whose public key
 * the server's allow-list names, or NULL for a fresh pair (a server without an allow-list).
 * server_public NULL: the same as gb_client_open. A server that refuses the keys answers
 * nothing: calls then time out (GB_ETIMEOUT). Returns 0, GB_EINVAL, GB_EUNSUPPORTED (no CURVE),
 * the key file's errors (runtime/streams/curve.h), GB_EZMQ. */
int gb_client_open_curve(gb_client **out, const char *endpoint, int timeout_ms,
                         const char *server_public, const char *key_file, gb_error *err);
void gb_client_close(gb_client *c);

/* Names the table every later request of c goes to (info, insert, update, and samples whose
 * req.table is NULL); NULL or "" (the start): the server's default table. Returns 0 or
 * GB_EINVAL (a name over 31 bytes). */
int gb_client_use_table(gb_client *c, const char *table, gb_error *err);

/* Fetches the schema, counters and limits (of the table in use). Returns 0, GB_ETIMEOUT,
 * GB_EPROTO, or the server's error code with its message. */
int gb_client_get_info(gb_client *c, gb_client_info *info, gb_error *err);

/* Index of a column by name in info, or -1. */
int gb_client_column_index(const gb_client_info *info, const char *name);

typedef struct gb_client_sample_req {
    int64_t batch;
    int32_t t0, t1;     /* step range; t1 = 0 means T */
    int timeout_ms;     /* how long the server may wait for the rate limiter; < 0: its own */
    int ncolumns;       /* 0 = every column, in schema order */
    const char *const *columns;
    const char *selector; /* NULL, "" or "default": the server's default selector; else one of
                             info.selectors: "uniform", "weighted", "fifo", "lifo", "topk" (a
                             name the server does not offer is refused with the list). By kind:
                             gb_client_selector_name(kind). */
    /* Offline modes (docs/protocol.md, "Sampling modes"); NULL or "item": items as above.
     * "window": rows of len steps inside one episode (every start alike; len 0: T);
     * "transition": every transition alike, len steps from it (len 0: 1), zero past the
     * episode's end; "episode": whole episodes padded to the longest in the batch; "epoch":
     * transition rows in a shuffled order without replacement, at the place of `cursor`.
     * These rows have out->steps steps; t0, t1 and selector are ignored. */
    const char *mode;
    int64_t len;
    const char *cursor; /* epoch: the reader's cursor name (1..31 bytes) */
    int reset;          /* epoch: 1 restarts the cursor at epoch 0 */
    const char *table;  /* NULL: the table of gb_client_use_table */
} gb_client_sample_req;

/* The name of a selector kind (gb_selector_kind: 0 uniform, 1 weighted, 2 fifo, 3 lifo, 4 topk),
 * for gb_client_sample_req.selector; NULL (the server's default) for -1 or another value. */
const char *gb_client_selector_name(int kind);

/* 1 when the server offers the named selector (info.selectors), else 0. */
int gb_client_has_selector(const gb_client_info *info, const char *name);

/* Caller-owned destinations. data[k] receives asked column k (or schema column k when
 * ncolumns is 0): n x (t1 - t0) x step bytes, or n x item bytes for a per-item column; cap[k]
 * its room. The metadata arrays (batch entries each) are optional (NULL). */
typedef struct gb_client_batch {
    void **data;
    const size_t *cap;
    int64_t *index;
    uint64_t *key;
    double *prob;   /* the drawing selector's probabilities (1/size uniform, priority^alpha/sum
                       weighted, 1 for FIFO/LIFO/top-k) */
    float *weight;  /* importance weights (1 but for weighted) */
    int32_t *length;
    int64_t n;    /* out: items returned (<= batch) */
    int64_t size; /* out: selectable items when sampled */
    int selector; /* out: kind of the selector that drew (-1 from an older server, or an
                     offline mode) */
    /* offline modes: per row its episode (n) and each step's index in it (n x steps; 0 past
       the row's length); optional. */
    int64_t *episode;
    int32_t *timestep;
    int64_t steps;     /* out: steps per row (offline modes; items: t1 - t0, 0 when t1 is 0) */
    int64_t epoch;     /* out: epoch mode: the epoch of these rows (from 0); else -1 */
    int64_t epoch_pos; /* out: epoch mode: the position of the first row in it */
    int epoch_end;     /* out: epoch mode: 1 when these rows finish the epoch */
} gb_client_batch;

/* Samples (with req->selector) and copies the reply into the caller's buffers. Returns 0,
 * GB_EINVAL (a buffer too small, an unknown selector name; the server's limit errors and its
 * refusal of a selector it does not offer), GB_ETIMEOUT, GB_EPROTO, or the server's error. */
int gb_client_sample(gb_client *c, const gb_client_sample_req *req, gb_client_batch *out,
                     gb_error *err);

/* Like gb_client_sample without the copy of the column data: views[k] (and bytes[k]) point at
 * column k in the received frames (aligned for its dtype), valid until the next call on c.
 * out->data is ignored; the metadata arrays are still filled when given. */
int gb_client_sample_views(gb_client *c, const gb_client_sample_req *req, gb_client_batch *out,
                           const void **views, size_t *bytes, gb_error *err);

/* Inserts n items: cols[c] is schema column c for all n items ([n, T, *shape] / [n, *shape]
 * contiguous). priority and length optional (NULL). Returns 0, *size (optional) = the server's
 * size after the insert, or an error. */
int gb_client_insert(gb_client *c, const gb_client_info *info, int64_t n,
                     const void *const *cols, const double *priority, const int32_t *length,
                     int64_t policy_version, int64_t *size, gb_error *err);

/* Sets the priorities of n sampled items (key optional: entries whose item changed since are
 * skipped and counted in *skipped). */
int gb_client_update_priorities(gb_client *c, int64_t n, const int64_t *index,
                                const uint64_t *key, const double *priority, int64_t *skipped,
                                gb_error *err);

/* Asks the server to write its checkpoint; path (cap bytes, optional) receives where. */
int gb_client_checkpoint(gb_client *c, char *path, size_t cap, gb_error *err);

#ifdef __cplusplus
}
#endif

#endif
