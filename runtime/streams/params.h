/* runtime/streams/params.h: the parameter stream: versioned parameter blobs from trainer 0 through
 * the parameter service to every policy worker.
 * defines: gb_param_entry, gb_param_blob, gb_param_publisher, gb_param_service,
 *          gb_param_subscriber, gb_param_relay and their options and statistics,
 *          gb_param_layout_check, gb_param_layout_fits, gb_param_entry_append,
 *          gb_param_layout_encode, gb_param_layout_decode, GB_PARAM_RECORD_BYTES
 *
 * A blob is one flat buffer plus a layout table (name, dtype, shape, byte offset per tensor),
 * a version (never decreasing: the last one again is a resend) and a CRC-32C of the buffer.
 * There is no size limit: blobs travel in chunks (parameters.chunk_bytes), and a
 * 2^31-byte-plus blob is tested.
 *
 *   publisher (PUSH) --BEGIN, CHUNK..., END--> service (PULL)
 *   service (PUB)    --BEGIN, CHUNK..., END--> subscribers (SUB), forwarded as chunks arrive
 *   service (ROUTER) <--INFO_REQ / FETCH-----> subscribers (DEALER): late joiners and repair
 *
 * The service checks each blob (offsets in order, sizes, CRC) before it becomes the service's
 * latest; a torn or corrupt blob is dropped and counted. Subscribers assemble blobs from the PUB
 * chunks; when any chunk is missing (PUB drops at its high-water mark, a late join, a crash of
 * the publisher) they fetch the rest from the service with a bounded window of chunk requests.
 * A subscriber applies a version only when every byte is present and its CRC matches, so it
 * never exposes a torn blob, and it asks the service for its latest version at start and once
 * every recheck interval while idle, so it always ends on the newest version.
 *
 * Order. The service does not order versions by their number: its one publisher (trainer 0)
 * sends one version at a time, and that stream is the truth. A BEGIN replaces any unfinished
 * version; a version that verifies becomes the latest even when its number is lower than the
 * latest's (a trainer restarted from a checkpoint without the ledger that let it go on above its
 * predecessor's versions, workers/roles/trainer.c; or the latest came from somewhere else: the
 * input is not authenticated, so a forged version far ahead must not freeze every real one after
 * it). The service stamps each version it accepts with a serial, strictly increasing, taken from
 * the wall clock in ns (so a restarted service goes on above its predecessor's), and subscribers
 * order versions by that serial, never by number. An unfinished version is abandoned when no
 * chunk of it arrived for stall_ms, or when it is older than stall_ms plus its size at
 * GB_PARAM_MIN_RATE bytes per second (a sender trickling a huge version): nothing a peer sends
 * can hold the stream longer than that, and its memory is freed. The price of "a begin replaces":
 * two publishers at once abandon each other's versions, so a peer that keeps sending begins can
 * starve the trainer's; the service's input must be reachable only by the run's workers. */
#ifndef GB_RUNTIME_PARAMS_H
#define GB_RUNTIME_PARAMS_H

#include "runtime/base/dtype.h"
#include "runtime/base/error.h"

#include <stddef.h>
#include <stdint.h>

#define GB_PARAM_NAME_MAX 128 /* layout entry name bytes including the NUL */
#define GB_PARAM_MAX_RANK 8
#define GB_PARAM_MAX_ENTRIES 65536
#define GB_PARAM_STALL_MS 10000 /* default stall_ms: 5 x the trainer's 2 s chunk send timeout */
#define GB_PARAM_MIN_RATE (16ull << 20) /* bytes/s an unfinished version must average */
#define GB_PARAM_CHUNK_MAX (1ull << 31) /* largest chunk (parameters.chunk_bytes allows 2^31) */

typedef struct gb_param_entry {
    char name[GB_PARAM_NAME_MAX];
    gb_dtype dtype;
    int rank;
    int64_t shape[GB_PARAM_MAX_RANK];
    uint64_t offset; /* byte offset in the blob */
} gb_param_entry;

/* An immutable, reference-counted parameter blob. */
typedef struct gb_param_blob {
    int64_t version;
    uint64_t bytes;
    uint32_t crc; /* CRC-32C of data */
    int nlayout;
    const gb_param_entry *layout;
    const unsigned char *data;
} gb_param_blob;

/* Takes another reference / drops one (the last frees the blob). Thread-safe. */
const gb_param_blob *gb_param_blob_retain(const gb_param_blob *b);
void gb_param_blob_release(const gb_param_blob *b);

/* Index of the layout entry called name, or -1. */
int gb_param_blob_find(const gb_param_blob *b, const char *name);

/* Checks a layout against a blob size: names non-empty and NUL-terminated, dtypes, ranks,
 * non-negative dimensions, each entry inside [0, bytes) without overflow. Returns 0 or
 * GB_EINVAL naming the entry. */
int gb_param_layout_check(const gb_param_entry *layout, int n, uint64_t bytes, gb_error *err);

/* Fills e with a tensor named name of dtype and shape [d0] (d1 0) or [d0, d1], at the first
 * offset at or after *total that is a multiple of align, and moves *total past it: how a
 * model's layout is built entry after entry (align: GB_TORCH_PARAM_ALIGN). */
void gb_param_entry_append(gb_param_entry *e, uint64_t *total, uint64_t align, const char *name,
                           gb_dtype dtype, int64_t d0, int64_t d1);

/* Whether a blob (layout sent, count entries, len bytes) fits a model laid out as own (own_count
 * entries, own_bytes): the same count and size, and every entry the same name, dtype, rank,
 * shape and offset. 0, or GB_EINVAL naming the first difference ("import: ..."). */
int gb_param_layout_fits(const gb_param_entry *sent, int count, size_t len,
                         const gb_param_entry *own, int own_count, uint64_t own_bytes,
                         gb_error *err);

/* A layout entry's wire (and file) form: name[128] (NUL-padded), dtype u32, rank u32, shape
 * i64[8], offset u64, all little-endian. */
#define GB_PARAM_RECORD_BYTES 208

/* Encodes n entries into a malloc'd wire form (*len = n * GB_PARAM_RECORD_BYTES). Returns 0 or
 * GB_ENOMEM. */
int gb_param_layout_encode(const gb_param_entry *layout, int n, unsigned char **raw, size_t *len,
                           gb_error *err);

/* Decodes n records of raw into out[n] and checks them against a blob of bytes
 * (gb_param_layout_check). Returns 0 or GB_EPROTO naming the entry. */
int gb_param_layout_decode(const void *raw, int n, uint64_t bytes, gb_param_entry *out,
                           gb_error *err);

/* ---- publisher (trainer) --------------------------------------------------------------------- */

typedef struct gb_param_publisher_opts {
    const char *service_endpoint; /* the service's input endpoint */
    uint64_t chunk_bytes;         /* > 0 (parameters.chunk_bytes) */
    int timeout_ms;               /* a chunk not accepted within this long fails the publish */
    int role, index;
} gb_param_publisher_opts;

typedef struct gb_param_publisher gb_param_publisher;

int gb_param_publisher_open(gb_param_publisher **out, void *zctx,
                            const gb_param_publisher_opts *o, gb_error *err);
void gb_param_publisher_close(gb_param_publisher *p);

/* 1 when the connection to the service was made again since the last call: a restarted
 * service, which holds nothing until a version comes (the caller sends its last one again);
 * the first connection does not count. Never blocks. */
int gb_param_publisher_reconnected(gb_param_publisher *p);

/* Streams one version: begin (layout copied), any number of writes totalling exactly
 * total_bytes (the data need not exist in one piece; the CRC is computed on the way), end.
 * Each call blocks while the service's queue is full, up to the timeout (GB_ETIMEOUT; the
 * partial version is then abandoned by the service when a newer one begins). Versions must
 * not decrease (GB_EINVAL); the last one again is a resend (the same parameters, for a service
 * that restarted without them: it and its subscribers take it as a new latest, by serial).
 * Return 0 or GB_EINVAL/GB_ETIMEOUT/GB_ENOMEM/GB_EZMQ/GB_ECLOSED. */
int gb_param_publish_begin(gb_param_publisher *p, int64_t version, const gb_param_entry *layout,
                           int nlayout, uint64_t total_bytes, gb_error *err);
int gb_param_publish_write(gb_param_publisher *p, const void *data, size_t len, gb_error *err);
int gb_param_publish_end(gb_param_publisher *p, gb_error *err);

/* begin + write(data, bytes) + end. */
int gb_param_publish(gb_param_publisher *p, int64_t version, const gb_param_entry *layout,
                     int nlayout, const void *data, uint64_t bytes, gb_error *err);

/* ---- service --------------------------------------------------------------------------------- */

typedef struct gb_param_service_opts {
    const char *in_endpoint;    /* PULL bind: publishers connect here (NULL: none, a relay's) */
    const char *pub_endpoint;   /* PUB bind: subscribers connect here */
    const char *fetch_endpoint; /* ROUTER bind: subscribers' INFO_REQ and FETCH */
    int pub_hwm;                /* PUB queue per subscriber, in messages (0: 64) */
    int role, index;
    int stall_ms; /* an unfinished version with no chunk for this long is abandoned (0:
                     GB_PARAM_STALL_MS); see "Order" above for the whole bound */
    uint64_t max_chunk_bytes; /* the largest chunk taken (parameters.chunk_bytes; 0: 2^31): a
                                 version announcing larger ones is rejected, and a publisher
                                 sending a frame larger than a chunk or the largest layout is
                                 disconnected (gb_wire_set_max_frame) */
} gb_param_service_opts;

typedef struct gb_param_service_stats {
    uint64_t versions;  /* completed and verified */
    uint64_t abandoned; /* torn, out of order, failed the CRC, replaced or timed out */
    uint64_t timed_out; /* of abandoned: unfinished past the bound ("Order" above) */
    uint64_t rejected;  /* malformed messages */
    uint64_t fetches;   /* chunk fetches served */
    uint64_t infos;     /* INFO_REQ served */
    uint64_t pub_peers; /* subscribers (or relays) connected to PUB, as of the last poll */
    uint64_t sent_bytes; /* parameter bytes sent: each PUB chunk once per peer connected when
                            it was sent, plus every fetched chunk */
} gb_param_service_stats;

typedef struct gb_param_service gb_param_service;

/* Binds the three sockets. Returns 0 or GB_EINVAL/GB_ENOMEM/GB_EZMQ naming the endpoint. */
int gb_param_service_open(gb_param_service **out, void *zctx, const gb_param_service_opts *o,
                          gb_error *err);
void gb_param_service_close(gb_param_service *s);

/* Bound endpoints, with ports filled in ("in", "pub" or "fetch"); NULL for another name. */
const char *gb_param_service_endpoint(const gb_param_service *s, const char *which);

/* Handles every message that arrives within timeout_ms (-1: waits for the first one forever;
 * returns after the first batch of work). Malformed input is counted, never fatal. Returns 0,
 * GB_ENOMEM (a blob could not be allocated; that version is abandoned, the service goes on),
 * GB_ECLOSED or GB_EZMQ. */
int gb_param_service_poll(gb_param_service *s, int timeout_ms, gb_error *err);

/* Version of the latest verified blob, -1 when none. */
int64_t gb_param_service_version(const gb_param_service *s);

/* Its counters (read by the thread that polls it). */
gb_param_service_stats gb_param_service_get_stats(const gb_param_service *s);

/* ---- subscriber (policy worker) -------------------------------------------------------------- */

typedef struct gb_param_subscriber_opts {
    const char *pub_endpoint;
    const char *fetch_endpoint;
    int timeout_ms; /* a fetch without progress for this long is retried (> 0) */
    int recheck_ms; /* while idle, ask the service for its latest this often (0: 1000) */
    int window;     /* chunk fetches in flight (0: 4) */
    int rcv_hwm;    /* SUB queue in messages (0: 64) */
    int role, index;
    /* Bounds; 0: none. chunk_bytes: the largest chunk the service forwards (its
     * max_chunk_bytes, parameters.chunk_bytes): a frame larger than that and than the largest
     * layout drops the service's connection (gb_wire_set_max_frame) for good (libzmq does not
     * reconnect a peer that broke the protocol), so it must be the service's own bound, never
     * less: the service relays what its input takes. max_bytes, max_entries: the largest
     * version accepted (the model's size and layout entries): one announcing more is refused
     * before anything is allocated for it, and counted in rejected. */
    uint64_t chunk_bytes;
    uint64_t max_bytes;
    int max_entries;
} gb_param_subscriber_opts;

typedef struct gb_param_subscriber_stats {
    uint64_t applied;   /* versions completed and verified */
    uint64_t repaired;  /* versions that needed fetches (missing chunks or late join) */
    uint64_t abandoned; /* versions given up for a newer one */
    uint64_t corrupt;   /* assembled versions that failed the CRC */
    uint64_t rejected;  /* malformed messages, and versions over max_bytes/max_entries */
    uint64_t fetched_bytes;
} gb_param_subscriber_stats;

typedef struct gb_param_subscriber gb_param_subscriber;

/* Connects SUB and DEALER and asks the service for its latest version. Returns 0 or
 * GB_EINVAL/GB_ENOMEM/GB_EZMQ. One thread drives a subscriber. */
int gb_param_subscriber_open(gb_param_subscriber **out, void *zctx,
                             const gb_param_subscriber_opts *o, gb_error *err);
void gb_param_subscriber_close(gb_param_subscriber *s);

/* Handles whatever arrives within timeout_ms (0: only what is queued). Returns 1 when a newer
 * version became current, 0 when not, GB_ENOMEM (a blob could not be allocated; retried later),
 * GB_ECLOSED or GB_EZMQ. */
int gb_param_subscriber_poll(gb_param_subscriber *s, int timeout_ms, gb_error *err);

/* Polls until the current version is >= min_version. Returns 0, GB_ETIMEOUT, or poll's error. */
int gb_param_subscriber_wait(gb_param_subscriber *s, int64_t min_version, int timeout_ms,
                             gb_error *err);

/* The current version (-1 when none). */
int64_t gb_param_subscriber_version(const gb_param_subscriber *s);

/* A new reference to the current blob (NULL when none); release it when applied. */
const gb_param_blob *gb_param_subscriber_acquire(gb_param_subscriber *s);

gb_param_subscriber_stats gb_param_subscriber_get_stats(const gb_param_subscriber *s);

/* ---- relay (one a host, parameters.relay: per_host) ------------------------------------------ *
 *
 *   service (PUB, ROUTER) --> relay: a subscriber (SUB, DEALER)
 *                             relay: a service without input (PUB, ROUTER) --> this host's
 *                                                                            subscribers
 *
 * The relay is a subscriber to the service and a service to its host's subscribers, speaking the
 * same protocol on both sides, so a policy worker cannot tell a relay from the service. Every PUB
 * message the relay's subscriber takes in is forwarded on the relay's PUB as it arrives, with the
 * service's serial (a reference to the received data frame: the bytes are neither copied nor
 * re-encoded, and PUB shares one message among all its peers). INFO_REQ and FETCH are answered
 * from the relay subscriber's current version, the complete and CRC-checked one; INFO names the
 * version it assembles as the one it is receiving, so a subscriber that assembles it from the
 * forwarded chunks keeps it. Each version thus leaves the service once a relay, not once a
 * subscriber. What a subscriber gets through a relay is what it gets from the service: every
 * version it applies is complete and verified, versions are applied in the service's order
 * (never an older one after a newer one), it always ends on the relay's latest, which ends on
 * the service's, and a late joiner starts from the latest. A version replaced before a
 * subscriber finished it may be skipped, as without a relay (PUB drops at its high-water mark,
 * so "every version" holds only while nobody falls a queue behind). */

typedef struct gb_param_relay_opts {
    const char *up_pub_endpoint;   /* the service's PUB */
    const char *up_fetch_endpoint; /* the service's ROUTER */
    const char *pub_endpoint;      /* PUB bind: this host's subscribers connect here */
    const char *fetch_endpoint;    /* ROUTER bind: their INFO_REQ and FETCH */
    int pub_hwm;                   /* as the service's (0: 64) */
    int rcv_hwm;                   /* as a subscriber's (0: 64) */
    int timeout_ms;                /* as a subscriber's (> 0) */
    int recheck_ms;                /* as a subscriber's (0: 1000) */
    uint64_t chunk_bytes;          /* the service's max_chunk_bytes (parameters.chunk_bytes) */
    int role, index;
} gb_param_relay_opts;

typedef struct gb_param_relay_stats {
    gb_param_subscriber_stats up; /* the relay's own subscriber */
    gb_param_service_stats down;  /* what it served: sent_bytes, pub_peers, fetches, infos */
    uint64_t forwarded;           /* PUB messages forwarded */
} gb_param_relay_stats;

typedef struct gb_param_relay gb_param_relay;

/* Connects to the service and binds the two sockets. Returns 0 or GB_EINVAL/GB_ENOMEM/GB_EZMQ.
 * One thread drives a relay. */
int gb_param_relay_open(gb_param_relay **out, void *zctx, const gb_param_relay_opts *o,
                        gb_error *err);
void gb_param_relay_close(gb_param_relay *r);

/* Bound endpoints with ports filled in ("pub" or "fetch"); NULL for another name. */
const char *gb_param_relay_endpoint(const gb_param_relay *r, const char *which);

/* Handles what arrives on either side within timeout_ms (0: only what is queued). Returns 1 when
 * the relay's current version changed, 0 when not, or GB_ENOMEM/GB_ECLOSED/GB_EZMQ. */
int gb_param_relay_poll(gb_param_relay *r, int timeout_ms, gb_error *err);

/* The relay's current (complete, verified) version, -1 when none. */
int64_t gb_param_relay_version(const gb_param_relay *r);

gb_param_relay_stats gb_param_relay_get_stats(const gb_param_relay *r);

#endif
