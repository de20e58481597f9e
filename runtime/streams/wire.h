/* runtime/streams/wire.h: the gearbox wire format: frame 0 a msgpack header, then one raw frame per
 * tensor.
 * defines: gb_msg_type, gb_role, gb_tensor_desc, gb_wire_header, gb_wire_payload, gb_wire_msg,
 *          gb_wire_encode_header, gb_wire_decode_header, gb_wire_check_frames, gb_wire_send,
 *          gb_wire_reply,
 *          gb_wire_recv, gb_wire_msg_init, gb_wire_msg_release, gb_wire_msg_refuse,
 *          gb_wire_msg_tensor,
 *          gb_wire_msg_find, gb_wire_msg_text, gb_wire_peer_is, gb_wire_msg_set_peer,
 *          gb_tensor_desc_bytes, gb_wire_set_tensor, gb_role_name, gb_role_from_name,
 *          gb_msg_type_name,
 *          gb_wire_attr, gb_wire_attr_set_int, gb_wire_attr_set_str, gb_wire_attr_set_strs,
 *          gb_wire_attr_find, gb_wire_attr_int, gb_wire_attr_str, gb_wire_attr_strs
 *
 * A message is a ZeroMQ multipart message:
 *   [routing frames (ROUTER only)] [header] [tensor 0 bytes] ... [tensor n-1 bytes]
 * The header is a msgpack map with short string keys (unknown keys are rejected):
 *   "v" protocol (uint), "t" type (uint), "r" role (uint), "i" index (uint), "s" sequence (uint64),
 *   "p" policy version (int64), "st" status (int, optional, 0 = ok or a GB_E* code),
 *   "x" text (str, optional; a human-readable message only: errors, a path, never data to
 *   parse), "m" meta (array of int64, optional; positional, left only for the data server's
 *   messages until they move to "a"; no runtime message carries it),
 *   "a" attributes (map, optional): named typed values, each an int64, a str, or an array of
 *   str. Each message kind declares its attributes (key, kind, required, bounds) and tensors
 *   in one table (runtime/streams/wire_schema.h; the runtime's in runtime/streams/wire_messages.c),
 * checked by
 *   gb_wire_schema_read. Limits of every header, checked on receive: at most
 *   GB_WIRE_ATTRS_MAX entries, keys of 1..GB_WIRE_ATTR_KEY_MAX-1 bytes, each key once, at most
 *   GB_WIRE_WORDS_MAX strings over all entries, each of at most GB_WIRE_WORD_MAX-1 bytes and
 *   without NUL bytes;
 *   "T" tensors (array of [name str, dtype uint, shape array of uint]).
 * Tensor frames are raw little-endian C-order bytes whose length must equal the product of the
 * declared shape times the dtype size. Receivers check all of it before anything is used, and
 * read tensors in place from the ZeroMQ frames (no copy).
 *
 * Headers are written with msgpack-c's packer. They are read with the bounds-checked msgpack
 * reader in wire.c rather than msgpack-c's unpacker, because the unpacker allocates from a
 * container's declared element count before checking it against the input (5 hostile bytes can
 * ask for 96 GB) and allocates a zone per message; the reader allocates nothing and checks
 * every count against the bytes left. tests/runtime/streams/test_wire.c checks both against each
 * other. */
#ifndef GB_RUNTIME_WIRE_H
#define GB_RUNTIME_WIRE_H

#include "runtime/base/dtype.h"
#include "runtime/base/error.h"

#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#define GB_WIRE_PROTOCOL 2        /* bumped on any incompatible change of a header or message
                                     (2: the runtime's messages moved from "m" to "a") */
#define GB_WIRE_MAX_TENSORS 32    /* tensors per message */
#define GB_WIRE_MAX_RANK 8        /* dimensions per tensor */
#define GB_WIRE_NAME_MAX 32       /* tensor name bytes including the NUL */
#define GB_WIRE_TEXT_MAX 256      /* text bytes including the NUL */
#define GB_WIRE_HEADER_MAX 8192   /* encoded header bytes */
#define GB_WIRE_ROUTE_MAX 256     /* routing identity bytes (ZeroMQ allows up to 255) */
#define GB_WIRE_ATTRS_MAX 16      /* attributes ("a") per message */
#define GB_WIRE_ATTR_KEY_MAX 16   /* attribute key bytes including the NUL */
#define GB_WIRE_WORDS_MAX 32      /* strings in all attributes of a message */
#define GB_WIRE_WORD_MAX 32       /* bytes of one attribute string including the NUL */

typedef enum gb_msg_type {
    /* What each type carries is declared in its table (wire_schema.h): the runtime's in
     * runtime/streams/wire_messages.c, printed in docs/protocol.md; the data server's beside it. */
    GB_MSG_INFER_REQUEST = 1, /* tensors: inputs, first dim = rows */
    GB_MSG_INFER_REPLY = 2,   /* tensors: outputs for the request's rows; status != 0: error */
    GB_MSG_SAMPLE = 3,        /* tensors: one trajectory chunk (runtime/streams/chunk.h) */
    GB_MSG_PARAM_BEGIN = 4,   /* the parameter stream (runtime/streams/params.h) */
    GB_MSG_PARAM_CHUNK = 5,
    GB_MSG_PARAM_END = 6,
    GB_MSG_PARAM_INFO_REQ = 7,
    GB_MSG_PARAM_INFO = 8,
    GB_MSG_PARAM_FETCH = 9,
    GB_MSG_PARAM_DATA = 10,
    GB_MSG_REG_REGISTER = 11, /* the registry (runtime/streams/registry.h) */
    GB_MSG_REG_UNREGISTER = 12,
    GB_MSG_REG_LOOKUP = 13,
    GB_MSG_REG_REPLY = 14,
    GB_MSG_METRICS = 15,      /* tensors "names" (NUL-separated uint8), "values" float64,
                                 optional "returns" float32 and "lengths" int64 (episodes) */
    GB_MSG_SERVE_REQUEST = 16, /* offline-RL data server request (workers/server/server.h) */
    GB_MSG_SERVE_REPLY = 17,  /* its reply; status != 0: error, text says why */
    GB_MSG_RUN_WATCH = 18,    /* run control (runtime/streams/runctl.h), to the registry */
    GB_MSG_RUN_STATE = 19,    /* its answer */
    GB_MSG_REG_JOIN = 20,     /* gearbox join, to the registry; answered by GB_MSG_REG_REPLY */
    GB_MSG_TYPE_END = 21,     /* not a type: one past the last */
} gb_msg_type;

/* Sender roles; part of the wire format (numbers never change). */
typedef enum gb_role {
    GB_ROLE_NONE = 0,
    GB_ROLE_LAUNCHER = 1,
    GB_ROLE_ACTOR = 2,
    GB_ROLE_POLICY = 3,
    GB_ROLE_TRAINER = 4,
    GB_ROLE_PARAMS = 5, /* parameter service */
    GB_ROLE_CLIENT = 6, /* offline-RL data client, tools, tests */
    GB_ROLE_SERVER = 7, /* offline-RL data server */
    GB_ROLE_RELAY = 8,  /* parameter relay (one a host, parameters.relay: per_host) */
    GB_ROLE_END = 9,
} gb_role;

typedef struct gb_tensor_desc {
    char name[GB_WIRE_NAME_MAX];
    gb_dtype dtype;
    int rank;
    int64_t shape[GB_WIRE_MAX_RANK]; /* each >= 0 */
} gb_tensor_desc;

/* A typed attribute of a header ("a"). Its strings live in the header's words table. */
typedef enum gb_wire_attr_kind {
    GB_WIRE_ATTR_INT = 1,  /* i */
    GB_WIRE_ATTR_STR = 2,  /* words[first] */
    GB_WIRE_ATTR_STRS = 3, /* words[first .. first + n), n >= 0 */
} gb_wire_attr_kind;

typedef struct gb_wire_attr {
    char key[GB_WIRE_ATTR_KEY_MAX];
    int kind; /* gb_wire_attr_kind */
    int64_t i;
    int first, n;
} gb_wire_attr;

typedef struct gb_wire_header {
    int type;               /* gb_msg_type */
    int protocol;           /* GB_WIRE_PROTOCOL on send; checked on receive */
    int role;               /* gb_role of the sender */
    int index;              /* sender's index within its role, >= 0 */
    uint64_t seq;           /* sender's sequence number / request id */
    int64_t policy_version; /* policy version that produced the data, -1 when none */
    int status;             /* 0, or a GB_E* code the sender reports (replies) */
    char text[GB_WIRE_TEXT_MAX]; /* "" or a message (errors, registry) */
    int nattrs; /* attributes (gb_wire_attr_set_*, gb_wire_attr_find) */
    gb_wire_attr attrs[GB_WIRE_ATTRS_MAX];
    int nwords;
    char words[GB_WIRE_WORDS_MAX][GB_WIRE_WORD_MAX];
    int ntensors;
    gb_tensor_desc tensors[GB_WIRE_MAX_TENSORS];
} gb_wire_header;

/* A tensor frame to send. With free_fn NULL the bytes are copied into the message before
 * gb_wire_send returns. With free_fn set, the bytes are sent without a copy and must stay valid
 * and unchanged until ZeroMQ calls free_fn(data, hint) (from its I/O thread). With msg set, that
 * ZeroMQ message is sent as the frame (moved: it is empty afterwards) and data is ignored. */
typedef struct gb_wire_payload {
    const void *data;
    zmq_free_fn *free_fn;
    void *hint;
    zmq_msg_t *msg;
} gb_wire_payload;

#define GB_WIRE_ARENA 8192 /* bytes of a gb_wire_msg for realigning small frames */

/* A received message: the decoded header and the frames holding the tensors. Tensor views
 * (gb_wire_msg_tensor) point into the frames and stay valid until gb_wire_msg_release.
 *
 * ZeroMQ does not align frames: small ones live inside the zmq_msg_t, and with its zero-copy
 * receive a frame can be a slice of the connection's read buffer at any offset. A view is
 * always aligned to its dtype's size (so reading it as that type is defined C): a frame that
 * is not is copied once, into this message's arena when it fits (no allocation), else into a
 * malloc'd block. Large frames, the ones that matter for speed, arrive in their own
 * allocation and are read in place. */
#define GB_WIRE_PEER_MAX 32

typedef struct gb_wire_msg {
    gb_wire_header hdr;
    unsigned char route[GB_WIRE_ROUTE_MAX]; /* routing identity (ROUTER receive), else empty */
    size_t route_len;
    int delimited; /* a REQ peer's empty delimiter frame followed the identity (gb_wire_reply) */
    char peer[GB_WIRE_PEER_MAX]; /* the sender's proven identity (ZAP User-Id: "actor/3"), ""
                                    on a socket without identities (curve.h) */
    int peer_role, peer_index; /* peer read once as "<role>/<index>" (gb_wire_msg_set_peer);
                                  peer_role -1 when peer is "" or no worker's ("relay/host") */
    int nframes; /* tensor frames held (== hdr.ntensors after a successful receive) */
    zmq_msg_t frames[GB_WIRE_MAX_TENSORS];
    const void *data[GB_WIRE_MAX_TENSORS]; /* each view's bytes (frame or realigned copy) */
    uint64_t realigned;                    /* frames copied for alignment, in this message */
    _Alignas(64) unsigned char arena[GB_WIRE_ARENA];
} gb_wire_msg;

typedef struct gb_tensor_view {
    const gb_tensor_desc *desc;
    const void *data; /* in the ZeroMQ frame (or its realigned copy); aligned to the dtype */
    size_t bytes;
} gb_tensor_view;

/* 1 when m came from worker (role, index) as its sender proved (m->peer, the ZAP User-Id
 * "actor/3"), or from a socket without identities (m->peer ""); 0 when another identity sent
 * it. A receiver rejects and counts what fails this, like any malformed message. Compares the
 * role and index gb_wire_recv read from the identity: no formatting per message. */
int gb_wire_peer_is(const gb_wire_msg *m, int role, int index);

/* Sets m's sender identity to user (NULL or "": none; truncated to GB_WIRE_PEER_MAX - 1 bytes)
 * and reads it as "<role>/<index>", the name gb_role_name and %d print, into m->peer_role and
 * m->peer_index. gb_wire_recv calls it with each message's User-Id. */
void gb_wire_msg_set_peer(gb_wire_msg *m, const char *user);

const char *gb_role_name(int role);     /* "actor", ...; "invalid" when out of range */
int gb_role_from_name(const char *name); /* gb_role_name's inverse; GB_ROLE_NONE when unknown */
const char *gb_msg_type_name(int type); /* "infer_request", ...; "invalid" when out of range */

/* Fills d (name truncated at GB_WIRE_NAME_MAX-1 is an error: returns GB_EINVAL). */
int gb_wire_set_tensor(gb_tensor_desc *d, const char *name, gb_dtype dtype, int rank,
                       const int64_t *shape, gb_error *err);

/* Byte size of a described tensor in *bytes, checking dtype, rank, negative dimensions and
 * overflow. Returns 0 or GB_EPROTO naming the tensor and field. */
int gb_tensor_desc_bytes(const gb_tensor_desc *d, uint64_t *bytes, gb_error *err);

/* Adds attribute key to h (an int, a string, or n strings). Returns 0, or GB_EINVAL when the
 * key is empty, too long or already set, a string is too long, or the limits on attributes or
 * strings would be exceeded (h unchanged then). */
int gb_wire_attr_set_int(gb_wire_header *h, const char *key, int64_t v, gb_error *err);
int gb_wire_attr_set_str(gb_wire_header *h, const char *key, const char *v, gb_error *err);
int gb_wire_attr_set_strs(gb_wire_header *h, const char *key, const char *const *v, int n,
                          gb_error *err);

/* The attribute called key, or NULL. */
const gb_wire_attr *gb_wire_attr_find(const gb_wire_header *h, const char *key);
/* Typed reads: 0 with *v set; GB_ENOTFOUND (absent) or GB_EPROTO (another kind), err naming
 * the key. */
int gb_wire_attr_int(const gb_wire_header *h, const char *key, int64_t *v, gb_error *err);
/* The string attribute key, or NULL (absent or another kind). */
const char *gb_wire_attr_str(const gb_wire_header *h, const char *key);
/* The strings of attribute key (a string list, or one string): up to cap pointers into h in
 * out; returns how many it has (may exceed cap), or -1 when absent or an int. */
int gb_wire_attr_strs(const gb_wire_header *h, const char *key, const char **out, int cap);

/* Initialises h for sending: protocol GB_WIRE_PROTOCOL, the given type, role, index, policy
 * version -1, everything else zero. */
void gb_wire_header_init(gb_wire_header *h, int type, int role, int index);

/* Encodes h into buf (cap bytes) and sets *len. Returns 0, or GB_EINVAL if h is not valid or the
 * encoding does not fit. Does not allocate. */
int gb_wire_encode_header(const gb_wire_header *h, void *buf, size_t cap, size_t *len,
                          gb_error *err);

/* Decodes and checks a header from len bytes at buf: every field's type and range, the protocol
 * version, names, dtypes, ranks, counts. Never reads outside [buf, buf+len); never allocates.
 * Returns 0, or GB_EPROTO with a message naming the field. */
int gb_wire_decode_header(const void *buf, size_t len, gb_wire_header *h, gb_error *err);

/* Checks that n frames of the given byte lengths match h's tensor table (count and each
 * frame's length == shape product × dtype size). Returns 0 or GB_EPROTO naming the tensor. */
int gb_wire_check_frames(const gb_wire_header *h, const size_t *lens, int n, gb_error *err);

/* Sends one message on sock: route (route_len bytes, NULL for none) as the first frame when
 * sending on a ROUTER, the encoded header, then one frame per tensor of h. flags: 0 (block, up
 * to the socket's ZMQ_SNDTIMEO) or ZMQ_DONTWAIT. ZeroMQ queues multipart messages atomically:
 * GB_EAGAIN (would block, nothing was queued) or GB_ETIMEOUT leave nothing half-sent. A
 * payload's free_fn is called exactly once: by ZeroMQ when it is done with the bytes, or before
 * this returns an error. A payload msg is moved on success; on an error the caller still owns
 * (and must close) the ones not sent. Returns 0, GB_EAGAIN, GB_ETIMEOUT, GB_ECLOSED (context
 * terminated), GB_EZMQ or GB_EINVAL. */
int gb_wire_send(void *sock, const void *route, size_t route_len, const gb_wire_header *h,
                 const gb_wire_payload *payloads, int flags, gb_error *err);

/* Sends h (and payloads) on the ROUTER sock back to the peer that sent req: its identity, the
 * empty delimiter frame when req had one (a REQ socket's envelope), then as gb_wire_send. */
int gb_wire_reply(void *sock, const gb_wire_msg *req, const gb_wire_header *h,
                  const gb_wire_payload *payloads, int flags, gb_error *err);

void gb_wire_msg_init(gb_wire_msg *m);

/* Receives one whole multipart message from sock into m (released first) and checks it. routed:
 * 1 on a ROUTER socket (the first frame is the peer's identity, copied to m->route; an empty
 * frame after it is a REQ peer's delimiter, skipped and noted in m->delimited). flags: 0
 * (block, up to ZMQ_RCVTIMEO) or ZMQ_DONTWAIT. A malformed message is received completely (all
 * its parts drained, nothing left on the socket), released, and reported as GB_EPROTO with a
 * message naming the field; m->route is still set when the identity frame was read, and m->hdr
 * holds what was decoded (hdr.type 0 when the header itself was bad), so a server can answer
 * the peer. Returns 0, GB_EPROTO, GB_EAGAIN (nothing waiting), GB_ETIMEOUT, GB_ECLOSED, GB_EZMQ. */
int gb_wire_recv(void *sock, gb_wire_msg *m, int routed, int flags, gb_error *err);

/* Tensor i of a received message as a view into its frame (i < m->hdr.ntensors). */
gb_tensor_view gb_wire_msg_tensor(const gb_wire_msg *m, int i);

/* Index of the tensor called name in m, or -1. */
int gb_wire_msg_find(const gb_wire_msg *m, const char *name);

/* Copies the uint8 rank-1 tensor called name into out as a NUL-terminated string of at most
 * cap-1 bytes (at least 1 unless allow_empty) without control characters (bytes above 0x7e
 * pass, so UTF-8 paths do). Returns 0 or GB_EPROTO naming the tensor. */
int gb_wire_msg_text(const gb_wire_msg *m, const char *name, char *out, size_t cap,
                     int allow_empty, gb_error *err);

/* Closes m's frames (views become invalid). m can be reused. */
void gb_wire_msg_release(gb_wire_msg *m);

/* Releases m after its receiver refused it, its memory given back to the system when it held
 * GB_WIRE_TRIM_BYTES or more (a refused message must not stay in the process's RSS). */
void gb_wire_msg_refuse(gb_wire_msg *m);

/* Maps a failed ZeroMQ call to a GB_E* code with "what: zmq_strerror" in err. */
int gb_wire_zmq_error(gb_error *err, const char *what);

/* Room for a message's header frame beside its largest tensor frame (names, shapes and meta of
 * GB_WIRE_MAX_TENSORS tensors fit in a few KiB; 64 KiB leaves slack). */
#define GB_WIRE_HEADER_SLACK (64u << 10)

/* A message refused after this many bytes were read has its memory given back to the system
 * at once (malloc_trim; see give_back in wire_io.c). */
#define GB_WIRE_TRIM_BYTES (1u << 20)

/* Bounds what a peer may send this socket: ZMQ_MAXMSGSIZE = largest_frame + GB_WIRE_HEADER_SLACK
 * (every frame of a gearbox message is a header or one tensor). libzmq then drops the
 * connection of a peer whose frame is larger, before reading it into memory; the socket goes on
 * serving its other peers. largest_frame: the largest legitimate tensor (a sample chunk's
 * block, a parameter chunk, a batch of observations); small fixed bounds for control sockets.
 * Set it before bind/connect. Returns 0 or GB_EZMQ. */
int gb_wire_set_max_frame(void *sock, uint64_t largest_frame, gb_error *err);

#endif
