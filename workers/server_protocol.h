/* workers/server_protocol.h: the data server's protocol (`gearbox serve`), declared once: its
 * operations, sampling modes and selectors; the server (workers/server*.c) and the C client
 * (workers/client/) use it, the Python client (workers/client/python/gearbox_client.py)
 * mirrors it. docs/protocol.md is its page, for people and for clients in other languages.
 * defines: gb_serve_op, gb_serve_mode, gb_serve_mode_parse, gb_serve_mode_name,
 *          gb_serve_selector_name, gb_serve_selector_kind
 *
 * Wire format: runtime/wire.h. A request is GB_MSG_SERVE_REQUEST with seq = the client's
 * request id and the operation; its reply is GB_MSG_SERVE_REPLY with the same seq and
 * operation, or status = a GB_E* code and text = why (nothing else then). Every request may
 * name its table (attribute "table"; absent: the server's default table).
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

#include "runtime/error.h"
#include "runtime/wire.h"

#include <stdint.h>

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

#endif
