/* runtime/streams/curve.h: authenticated, encrypted tcp:// with ZeroMQ CURVE (libzmq built with
 * libsodium): a run's key files, and the security of a ZeroMQ context.
 * defines: gb_curve_keys, gb_curve_opts, gb_curve, gb_curve_available, gb_curve_keypair_write,
 *          gb_curve_keypair_read, gb_curve_run_keys_create, gb_curve_run_keys_load,
 *          gb_curve_allow_list_read, gb_curve_attach, gb_curve_detach, gb_curve_of,
 *          gb_curve_refused, gb_curve_accepted, gb_curve_bind, gb_curve_connect,
 *          gb_curve_bind_monitored, gb_curve_note_failed_handshake,
 *          gb_curve_run_attach, gb_curve_server_attach, gb_curve_ident,
 *          gb_curve_key_valid, gb_curve_identities_create, gb_curve_identities_read,
 *          gb_curve_identity_attach, gb_curve_identity_file, gb_curve_keypair_save
 *
 * Security is a property of a ZeroMQ context: gb_curve_attach(zctx, keys) makes every tcp://
 * socket that a module binds or connects on zctx through gb_curve_bind / gb_curve_connect use
 * CURVE (servers: the run's server key pair; clients: the server's public key and the client key
 * pair), and starts the context's ZAP handler (inproc://zeromq.zap.01, RFC 27), which accepts
 * only the allowed client public keys. A peer without the keys gets nothing: a plain (NULL
 * mechanism) peer or one with a wrong server key fails the handshake, one with an unknown client
 * key is refused by ZAP; both are counted (gb_curve_refused) and logged. Server sockets also set
 * ZMQ_ZAP_ENFORCE_DOMAIN, so a server whose ZAP handler is gone refuses everyone rather than
 * accepting anyone. inproc:// sockets, ipc:// ones of a context without identities (below), and
 * every socket of a context not attached, are plain. Failed handshakes are
 * seen through a socket monitor on each secured server socket (zmq_socket_monitor). libzmq keeps
 * one monitor a socket: a module with its own monitor binds with gb_curve_bind_monitored and
 * reports the failed handshakes its monitor sees (gb_curve_note_failed_handshake).
 *
 * A run's keys: RUN_DIR/keys/ (0700) holds server.key and client.key (0600 each), each a text
 * file "public <Z85>\nsecret <Z85>\n" (40 characters each). A remote `gearbox join` needs copies
 * of those two (client.key is the launcher's identity: it may look names up and ask for slots,
 * and the run sends each slot its own pair); a data-server client needs the server's public key
 * and a key pair of its own whose public key the server allows.
 *
 * Identities (a run's workers, issue 35): the launcher mints one key pair a worker,
 * RUN_DIR/keys/<role>-<index>.key (0600), and lists every identity with its public key in
 * RUN_DIR/keys/identities ("launcher" is client.key). A worker attaches with its own pair
 * (gb_curve_identity_attach), and the ZAP handler of every process of the run answers the
 * identity whose key a client proved as the ZAP User-Id, so a receiver reads who sent a message
 * with zmq_msg_gets(frame, "User-Id") (gb_wire_msg.peer) and checks it against what the message
 * claims. On tcp:// the proof is the CURVE handshake. On ipc:// a context with identities uses
 * ZeroMQ's PLAIN mechanism: user name the identity, password the identity's secret key (Z85),
 * which the handler proves by deriving the public key it lists (zmq_curve_public); PLAIN costs
 * the handshake only, nothing per message, and the password crosses a unix socket the kernel
 * keeps between the two processes. The receiver does learn its clients' ipc passwords: on one
 * host every process of the user can read the keys folder anyway; what the scheme stops is a
 * worker, or a joined host, speaking as another. */
#ifndef GB_RUNTIME_CURVE_H
#define GB_RUNTIME_CURVE_H

#include "runtime/base/error.h"

#include <stdint.h>

#define GB_CURVE_KEY_Z85 41 /* a Z85 key: 40 characters and the NUL */
#define GB_CURVE_KEYS_DIR "keys"  /* under the run directory */
#define GB_CURVE_MAX_ALLOWED 256  /* client public keys a ZAP handler accepts */
#define GB_CURVE_ID_MAX 32        /* an identity: "<role>/<index>" or "launcher", and the NUL */
#define GB_CURVE_LAUNCHER "launcher"

typedef struct gb_curve_keys {
    char server_public[GB_CURVE_KEY_Z85];
    char server_secret[GB_CURVE_KEY_Z85]; /* "" in a process that serves nothing (a client) */
    char client_public[GB_CURVE_KEY_Z85]; /* "" in a process that connects to nothing */
    char client_secret[GB_CURVE_KEY_Z85];
    char identity[GB_CURVE_ID_MAX]; /* the client pair's identity in a run ("" outside one) */
} gb_curve_keys;

/* One identity of a run: its name ("actor/3") and its key pair's public key. */
typedef struct gb_curve_ident {
    char name[GB_CURVE_ID_MAX];
    char public_key[GB_CURVE_KEY_Z85];
} gb_curve_ident;

/* 1 when z is a 40-character Z85 key, else 0. */
int gb_curve_key_valid(const char *z);

/* 1 when this libzmq has CURVE (zmq_has("curve")), else 0. */
int gb_curve_available(void);

/* Writes a new key pair (zmq_curve_keypair) to path, created 0600 (refused if it exists:
 * O_EXCL). public_out (GB_CURVE_KEY_Z85 bytes) receives the public key when not NULL.
 * Returns 0, GB_EUNSUPPORTED (no CURVE in libzmq) or GB_ESYS. */
int gb_curve_keypair_write(const char *path, char *public_out, gb_error *err);

/* Writes the key pair (public_key, secret: Z85) to path, created 0600 (refused if it exists).
 * Returns 0, GB_EINVAL (a malformed key) or GB_ESYS. */
int gb_curve_keypair_save(const char *path, const char *public_key, const char *secret,
                          gb_error *err);

/* Reads a key file. secret may be NULL (only the public key is read; a file without a secret is
 * then fine). A file with a secret must not be readable by group or others (GB_EINVAL, saying to
 * chmod 600). Returns 0, GB_ENOTFOUND, GB_EINVAL (malformed: says the line), GB_ESYS. */
int gb_curve_keypair_read(const char *path, char *public_key, char *secret, gb_error *err);

/* Creates run_dir/keys/ (0700) with server.key and client.key (0600). Key material is never
 * logged. Returns 0 or the codes of gb_curve_keypair_write (GB_ESYS when the folder exists). */
int gb_curve_run_keys_create(const char *run_dir, gb_error *err);

/* Loads both key pairs from a keys folder (run_dir/keys, or a copy of it). Returns 0 or the codes
 * of gb_curve_keypair_read. */
int gb_curve_run_keys_load(const char *keys_dir, gb_curve_keys *keys, gb_error *err);

/* Reads an allow-list: one public key a line, either bare Z85 or as "public <Z85>" (so a key
 * file's public line can be pasted); "secret" lines, blank lines and '#' comments are skipped.
 * Fills keys[0..*n) (at most cap). Returns 0, GB_ENOTFOUND, GB_EINVAL (a bad key: its line),
 * GB_EFULL (more than cap), GB_ESYS. */
int gb_curve_allow_list_read(const char *path, char (*keys)[GB_CURVE_KEY_Z85], int cap, int *n,
                             gb_error *err);

typedef struct gb_curve_opts {
    const gb_curve_keys *keys;   /* copied */
    const char *const *allowed;  /* client public keys (Z85) the ZAP handler accepts */
    int nallowed;
    int allow_any; /* 1: any client that knows the server's public key (encryption and server
                      authentication only; `gearbox serve` without an allow-list) */
    const gb_curve_ident *idents; /* a run's identities (copied): a client proving one of these
                                     keys is answered that name as User-Id; with any, ipc://
                                     sockets use PLAIN */
    int nidents;
} gb_curve_opts;

typedef struct gb_curve gb_curve;

/* Attaches keys to zctx (at most one gb_curve per context; 16 contexts per process) and, when
 * keys->server_secret is set, starts the context's ZAP handler thread. Call before any socket of
 * zctx binds or connects, and gb_curve_detach before zmq_ctx_term. Returns 0, GB_EUNSUPPORTED
 * (no CURVE), GB_EINVAL (a malformed key, the context already attached, no allowed key and not
 * allow_any), GB_EFULL, GB_ENOMEM, GB_EZMQ (the ZAP endpoint is taken), GB_ESYS. */
int gb_curve_attach(gb_curve **out, void *zctx, const gb_curve_opts *o, gb_error *err);

/* A run's process: loads keys_dir (gb_curve_run_keys_load) and attaches them to zctx, allowing
 * the run's client key only. Returns 0 or the codes of gb_curve_run_keys_load and
 * gb_curve_attach. */
int gb_curve_run_attach(gb_curve **out, void *zctx, const char *keys_dir, gb_error *err);

/* A data server (`gearbox serve` with server.curve): reads its key pair from key_file, creating it
 * (0600) when absent, and the allowed client keys from allow_file ("" or NULL: any client that
 * has the server's public key), and attaches them to zctx. public_out (GB_CURVE_KEY_Z85 bytes)
 * receives the server's public key, for the clients. Returns 0 or the codes of the readers,
 * gb_curve_keypair_write and gb_curve_attach. */
int gb_curve_server_attach(gb_curve **out, void *zctx, const char *key_file,
                           const char *allow_file, char *public_out, gb_error *err);

/* The file of identity's key pair in keys_dir ("actor/3": keys_dir/actor-3.key; "launcher":
 * keys_dir/client.key) into out. Returns 0 or GB_EINVAL (too long, or a name with other than
 * letters, digits, '/' and '_'). */
int gb_curve_identity_file(const char *keys_dir, const char *identity, char *out, size_t cap,
                           gb_error *err);

/* Mints a key pair for each of names[0..n) that has none yet in run_dir/keys (a resume keeps
 * them) and writes run_dir/keys/identities (all of them and "launcher": client.key), replacing
 * it whole. Call after gb_curve_run_keys_create. Returns 0 or the codes of
 * gb_curve_keypair_write/read and GB_ESYS. */
int gb_curve_identities_create(const char *run_dir, const char *const *names, int n,
                               gb_error *err);

/* Reads keys_dir/identities into a new array (*out, the caller frees it) of *n. Returns 0,
 * GB_ENOTFOUND, GB_EINVAL (a bad line: its number), GB_ENOMEM, GB_ESYS. */
int gb_curve_identities_read(const char *keys_dir, gb_curve_ident **out, int *n, gb_error *err);

/* A run's process speaking as identity (NULL: the launcher): the server pair (server.key; its
 * secret only where the folder holds it), identity's own pair and the run's identities, attached
 * to zctx (on ipc:// too: PLAIN). Returns 0 or the codes of the readers and gb_curve_attach. */
int gb_curve_identity_attach(gb_curve **out, void *zctx, const char *keys_dir,
                             const char *identity, gb_error *err);

/* Stops the ZAP handler, closes its sockets and forgets the context. NULL is a no-op. */
void gb_curve_detach(gb_curve *c);

/* The gb_curve attached to zctx, or NULL. */
gb_curve *gb_curve_of(void *zctx);

/* Connections refused so far (handshakes failed: no or wrong keys; clients ZAP refused), and
 * client handshakes ZAP accepted. Safe from any thread. */
uint64_t gb_curve_refused(const gb_curve *c);
uint64_t gb_curve_accepted(const gb_curve *c);

/* zmq_bind / zmq_connect, with the CURVE server / client options first when zctx is attached and
 * endpoint is tcp://. Same return convention as zmq_bind (0, or -1 with zmq_errno() set: EINVAL
 * also for a server socket on a context without a server key), so callers keep their own error
 * messages (gb_wire_zmq_error). Call from the thread that owns sock. */
int gb_curve_bind(void *zctx, void *sock, const char *endpoint);
int gb_curve_connect(void *zctx, void *sock, const char *endpoint);

/* gb_curve_bind for a socket whose owner keeps its own monitor on it (libzmq allows one): no
 * handshake monitor is set; the owner's monitor asks for ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL and
 * _NO_DETAIL and calls gb_curve_note_failed_handshake for each, so refusals are still counted. */
int gb_curve_bind_monitored(void *zctx, void *sock, const char *endpoint);

/* Counts (and logs, rate-limited) one refused connection on zctx's gb_curve; a no-op on a
 * context without one. Safe from any thread. */
void gb_curve_note_failed_handshake(void *zctx);

#endif
