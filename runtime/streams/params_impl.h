/* runtime/streams/params_impl.h: parameter stream internals shared by params.c, params_service.c
 * and params_subscriber.c (not a public header).
 * defines: param_blob, param_blob_new, param_blob_free_zmq, PARAM_*,
 *          the relay's hooks into subscribers and services (param_tap_fn, param_*_relay_*) */
#ifndef GB_RUNTIME_PARAMS_IMPL_H
#define GB_RUNTIME_PARAMS_IMPL_H

#include "runtime/streams/params.h"
#include "runtime/streams/wire.h"
#include "runtime/streams/wire_messages.h"

#include <stdatomic.h>

/* The layout tensor holds nlayout entries of GB_PARAM_RECORD_BYTES (params.h). */
#define PARAM_RECORD_BYTES GB_PARAM_RECORD_BYTES
#define PARAM_LAYOUT_MAX ((uint64_t)GB_PARAM_MAX_ENTRIES * PARAM_RECORD_BYTES) /* its wire form */

typedef struct param_blob {
    gb_param_blob pub; /* first: a gb_param_blob * is a param_blob * */
    atomic_int refs;
    uint64_t chunk_bytes;
    uint64_t serial; /* the service's order ("serial" on the wire); 0 on the publisher's side */
    unsigned char *data;
    gb_param_entry *layout;
    unsigned char *layout_raw; /* the wire form, kept to answer INFO_REQ */
    size_t layout_raw_len;
} param_blob;

/* A blob with one reference, bytes of uninitialised data and the layout decoded (and checked
 * against bytes) from its wire form. Returns NULL with err set (GB_ENOMEM or GB_EPROTO). */
param_blob *param_blob_new(int64_t version, uint64_t bytes, uint64_t chunk_bytes,
                           const void *layout_raw, size_t layout_raw_len, gb_error *err);

/* zmq_free_fn for zero-copy frames that point into a blob: hint is the blob; drops a ref. */
void param_blob_free_zmq(void *data, void *hint);

/* ---- what a relay (params_relay.c) reaches inside a subscriber and a service ----------------- */

/* Called with every well-formed PUB message a subscriber took in, after it handled it (the
 * message is the subscriber's: a tap takes references to frames, never moves them). */
typedef void param_tap_fn(void *ctx, gb_wire_msg *m);
void param_subscriber_set_tap(gb_param_subscriber *s, param_tap_fn *fn, void *ctx);
/* Its SUB and DEALER, to poll beside other sockets. */
void param_subscriber_sockets(const gb_param_subscriber *s, void **sub, void **dealer);
/* When its timers next need a poll (gb_now_ns; end when nothing is due before). */
uint64_t param_subscriber_wake_ns(const gb_param_subscriber *s, uint64_t end);
/* Its current blob (borrowed; NULL when none) and the serial it assembles (0: none). */
param_blob *param_subscriber_current(const gb_param_subscriber *s);
uint64_t param_subscriber_incoming(const gb_param_subscriber *s);

/* A service opened without in_endpoint: forwards m on PUB keeping m's serial (a reference to the
 * data frame, no copy of its bytes); serves latest (a reference taken) to INFO_REQ/FETCH and
 * names incoming as the serial it is receiving; its ROUTER, to poll beside other sockets. */
void param_service_relay_forward(gb_param_service *s, gb_wire_msg *m);
void param_service_relay_state(gb_param_service *s, param_blob *latest, uint64_t incoming);
void *param_service_fetch_socket(gb_param_service *s);

/* The table of a message of the version stream (begin, chunk, end; the service's input and its
 * PUB), or NULL for another type. */
static inline const gb_wire_schema *param_stream_kind(int type)
{
    switch (type) {
    case GB_MSG_PARAM_BEGIN: return &gb_schema_param_begin;
    case GB_MSG_PARAM_CHUNK: return &gb_schema_param_chunk;
    case GB_MSG_PARAM_END: return &gb_schema_param_end;
    default: return NULL;
    }
}

/* Drops a reference to b, which may be NULL. */
static inline void blob_put(param_blob *b)
{
    if (b)
        gb_param_blob_release(&b->pub);
}

#endif
