/* workers/server/server_protocol.h: the data server's protocol (`gearbox serve`), declared once:
 * its operations, sampling modes, selectors and each message kind's attributes and tensors, as
 * tables (runtime/streams/wire_schema.h; defined in server_protocol.c). The server
 * (workers/server/) and the C client (workers/server/client/) use it; the Python client
 * (workers/server/client/python/gearbox_client.py) mirrors it; docs/protocol.md prints the tables
 * for people and for clients in other languages (tests/workers/server/test_serve_doc.c checks both
 * copies).
 * defines: gb_serve_op, gb_serve_mode, gb_serve_mode_parse, gb_serve_mode_name,
 *          gb_serve_selector_name, gb_serve_selector_kind, GB_SERVE_MAX_TABLES,
 *          gb_serve_request, gb_serve_info, gb_serve_sampled, gb_serve_inserted,
 *          gb_serve_updated, gb_serve_request_schemas, gb_serve_reply_schemas,
 *          gb_serve_schemas, gb_serve_nschemas
 *
 * Wire format: runtime/streams/wire.h. A request is GB_MSG_SERVE_REQUEST with seq = the client's
 * request id and its operation in attribute "op"; the server reads it with that operation's
 * table (a refusal: GB_EINVAL naming the attribute; no readable op: GB_EPROTO). Its reply is
 * GB_MSG_SERVE_REPLY with the same seq and the attributes of the operation's reply table, or
 * status = a GB_E* code and text = why (nothing else then). Every request may name its table
 * (attribute "table"; absent: the server's default table).
 *   INFO        the table's schema, counters and limits; one 0-row tensor per column.
 *   SAMPLE      a batch: by the table's selectors (mode "item", rate-limited: a request that
 *               must wait is parked) or, over the table's episode index, windows, transitions,
 *               whole episodes or epochs with a cursor (the other modes; never wait). The reply
 *               carries "index", "key", "prob", "weight", "length", each asked column and, in
 *               the offline modes, "episode" and "timestep".
 *   INSERT      whole items: every column, optional "priority" and "length".
 *   UPDATE      priorities of sampled items: "index", "priority", optional "key".
 *   CHECKPOINT  writes the default table's checkpoint; text: its path.
 * Per request: at most max_batch_rows items, a sample reply of at most max_batch_bytes data
 * bytes, a request of at most max_request_bytes (GB_EINVAL naming the limit). */
#ifndef GB_WORKERS_SERVER_PROTOCOL_H
#define GB_WORKERS_SERVER_PROTOCOL_H

#include "runtime/base/error.h"
#include "runtime/streams/wire.h"
#include "runtime/streams/wire_schema.h"

#include <stdint.h>

#define GB_SERVE_MAX_TABLES 8 /* tables per server (server.tables and the default one) */

/* Operations; part of the wire format (numbers never change). */
typedef enum gb_serve_op {
    GB_SERVE_INFO = 1,
    GB_SERVE_SAMPLE = 2,
    GB_SERVE_INSERT = 3,
    GB_SERVE_UPDATE = 4,
    GB_SERVE_CHECKPOINT = 5,
    GB_SERVE_OP_END = 6, /* not an operation: one past the last */
} gb_serve_op;

/* Sampling modes of a sample request (attribute "mode", by name; docs/protocol.md). */
typedef enum gb_serve_mode {
    GB_SERVE_MODE_ITEM = 0,   /* items, by the table's selectors (the default) */
    GB_SERVE_MODE_WINDOW,     /* windows of len steps inside one episode, every start alike */
    GB_SERVE_MODE_TRANSITION, /* every transition alike; len steps from it, padded at the end */
    GB_SERVE_MODE_EPISODE,    /* whole episodes, every episode alike, padded to the longest */
    GB_SERVE_MODE_EPOCH,      /* transition rows in a shuffled order without replacement */
    GB_SERVE_MODES,
} gb_serve_mode;

/* A mode's number by name ("" or NULL: item), or -1; a mode's name ("?" out of range). */
int gb_serve_mode_parse(const char *name);
const char *gb_serve_mode_name(int mode);

/* Selectors a sample request names by kind (gb_selector_kind, replay/: 0 uniform, 1 weighted,
 * 2 fifo, 3 lifo, 4 topk; -1 the server's default). */
#define GB_SERVE_SELECTOR_KINDS 5
/* A kind's name, or NULL (-1 or another value). */
const char *gb_serve_selector_name(int kind);
/* A name -> kind: NULL, "" or "default" give -1; returns 0 or GB_EINVAL (unknown name). */
int gb_serve_selector_kind(const char *name, int64_t *kind, gb_error *err);

/* ---- the messages, declared as tables (runtime/streams/wire_schema.h) ---------------------------
 * A request carries its operation in attribute "op" and is read with that operation's table;
 * a reply is read with the table of the operation it answers (matched by seq). An error reply
 * carries only status and text. */

/* Every request's attributes: each operation's table declares the members it reads (the others
 * are left alone). Strings point into the request's header. */
typedef struct gb_serve_request {
    int64_t op;          /* gb_serve_op */
    const char *table;   /* NULL: the default table */
    int64_t batch;       /* sample: rows, 1..max_batch_rows */
    int64_t t0, t1;      /* sample, mode item: steps [t0, t1) (t1 0: T) */
    int64_t timeout_ms;  /* sample, mode item: wait for the rate limiter (< 0: the server's) */
    int64_t selector;    /* sample, mode item: a selector kind, -1 the table's default */
    const char *mode;    /* sample: gb_serve_mode by name; NULL: item */
    int64_t len;         /* sample, offline modes: steps per row; 0: the mode's default */
    const char *cursor;  /* sample, mode epoch: the reader's cursor */
    int64_t reset;       /* sample, mode epoch: 1 restarts the cursor */
} gb_serve_request;

/* INFO's reply: the table's schema (its 0-row tensors), counters and limits. */
typedef struct gb_serve_info {
    int64_t size, capacity, steps, inserts, samples, max_batch_rows, max_batch_bytes;
    const char *selector, *remover; /* the default selector; the remover */
    int64_t per_item;               /* bit c: column c has one value per item */
    gb_wire_strs selectors;         /* every selector a sample may name, in kind order */
    gb_wire_strs tables;            /* every table of the server, the default first */
    int64_t episodes, transitions, max_len; /* the table's episode index (0: none) */
    gb_wire_strs weighted;          /* n 2 when the table offers weighted: its sum of
                                       priority^alpha and beta, exact decimals; else n 0 */
} gb_serve_info;

/* SAMPLE's reply. */
typedef struct gb_serve_sampled {
    int64_t n, size, selector; /* rows; units drawn from; the selector that drew (-1: none) */
    const char *mode, *table;  /* offline modes: the mode and table; NULL for items */
    int64_t epoch, pos, end;   /* mode epoch: the rows' epoch (-1: none), first position, 1 at
                                  its end */
} gb_serve_sampled;

/* INSERT's and UPDATE's replies. */
typedef struct gb_serve_inserted {
    int64_t n, size; /* items inserted; the table's size after */
} gb_serve_inserted;
typedef struct gb_serve_updated {
    int64_t n, skipped; /* entries; those skipped (their item changed since it was sampled) */
} gb_serve_updated;

/* By operation (index gb_serve_op; [0] is NULL): each request's table and its reply's
 * (CHECKPOINT's reply has no attributes: text is the path). */
extern const gb_wire_schema *const gb_serve_request_schemas[GB_SERVE_OP_END];
extern const gb_wire_schema *const gb_serve_reply_schemas[GB_SERVE_OP_END];
/* Every table, in docs/protocol.md's order. */
extern const gb_wire_schema *const gb_serve_schemas[];
extern const int gb_serve_nschemas;

#endif
