/* runtime/streams/curve.c: the per-context ZAP handler (CURVE keys and PLAIN tokens mapped to
 * identities) and the secured bind/connect (see curve.h; the key files are curve_keys.c). */
#include "runtime/streams/curve.h"

#include "runtime/base/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#ifndef ZMQ_ZAP_ENFORCE_DOMAIN
#define ZMQ_ZAP_ENFORCE_DOMAIN 93 /* a draft option in libzmq 4.3's header, but built and honoured
                                     by it: without it a CURVE server whose context has no ZAP
                                     handler accepts every client */
#endif

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define ZAP_DOMAIN "gearbox"
#define MAX_CONTEXTS 16
#define MAX_MONITORS 256 /* secured server sockets of one context */
#define POLL_MS 100      /* how often the handler looks for new monitors (a stop wakes it) */
#define LOG_FIRST 10     /* refusals logged one by one; then one line per 1000 */

int gb_curve_available(void) { return zmq_has("curve") ? 1 : 0; }

int gb_curve_key_valid(const char *z)
{
    uint8_t bin[32];
    return strlen(z) == 40 && zmq_z85_decode(bin, z) != NULL;
}

/* ---- the context table and the ZAP handler ---- */

struct gb_curve {
    void *zctx;
    gb_curve_keys keys;
    uint8_t (*allowed)[32];
    int nallowed, allow_any;
    gb_curve_ident *idents; /* a run's identities: their keys' User-Ids; ipc:// is PLAIN too */
    uint8_t (*ident_keys)[32];
    int nidents;
    void *zap; /* REP at ZAP_ENDPOINT; the handler thread's */
    void *wake_rx, *wake_tx; /* an inproc PAIR: curve_free's message ends the handler's poll */
    pthread_t thread;
    int has_thread;
    atomic_int stop;
    atomic_uint_fast64_t refused, accepted;
    pthread_mutex_t mu; /* guards pending: monitor sockets handed to the thread */
    void *pending[MAX_MONITORS];
    int npending;
    void *monitors[MAX_MONITORS]; /* the thread's own */
    int nmonitors;
};

static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;
static gb_curve *table[MAX_CONTEXTS];
static atomic_uint monitor_seq;

static void count_refusal(gb_curve *c, const char *why, const char *peer)
{
    uint64_t k = atomic_fetch_add(&c->refused, 1) + 1;
    if (k <= LOG_FIRST || k % 1000 == 0)
        GB_WARN("refused a connection%s%s: %s (%llu refused so far)", peer ? " from " : "",
                peer ? peer : "", why, (unsigned long long)k);
}

/* Receives one frame into buf (cut to cap-1, NUL-terminated); its length or -1. *more: more
 * frames follow. */
static int recv_frame(void *sock, char *buf, size_t cap, int *more)
{
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, sock, 0) < 0) {
        zmq_msg_close(&m);
        return -1;
    }
    size_t n = zmq_msg_size(&m);
    size_t k = n < cap - 1 ? n : cap - 1;
    memcpy(buf, zmq_msg_data(&m), k);
    buf[k] = '\0';
    *more = zmq_msg_more(&m);
    zmq_msg_close(&m);
    return (int)n;
}

/* The identity whose public key is key (32 bytes), or NULL. */
static const char *identity_of_key(const gb_curve *c, const void *key)
{
    for (int i = 0; i < c->nidents; i++)
        if (memcmp(c->ident_keys[i], key, 32) == 0)
            return c->idents[i].name;
    return NULL;
}

/* A PLAIN handshake (ipc:// in a run): the user name is an identity, the password that
 * identity's secret key (Z85), proven by deriving its public key. Returns the identity or NULL
 * with *why set. */
static const char *plain_identity(const gb_curve *c, const char *user, const char *password,
                                  int password_len, const char **why)
{
    char pub[GB_CURVE_KEY_Z85];
    uint8_t bin[32];
    *why = "PLAIN: unknown identity or a wrong token";
    if (password_len != 40 || !gb_curve_key_valid(password) ||
        zmq_curve_public(pub, password) != 0 || !zmq_z85_decode(bin, pub))
        return NULL;
    const char *name = identity_of_key(c, bin);
    explicit_bzero(pub, sizeof pub);
    return name && strcmp(name, user) == 0 ? name : NULL;
}

/* Answers whether the credentials of a ZAP request (frames 5..: mechanism, credentials) are
 * allowed: the identity to answer as User-Id ("" for an allowed key that is no identity), or
 * NULL with *why set. */
static const char *zap_decide(const gb_curve *c, char (*f)[256], const int *len, int nf,
                              const char **why)
{
    if (nf >= 7 && strcmp(f[5], "CURVE") == 0 && len[6] == 32) {
        const char *name = identity_of_key(c, f[6]);
        if (name)
            return name;
        *why = "client public key not allowed";
        int ok = c->allow_any;
        for (int i = 0; !ok && i < c->nallowed; i++)
            ok = memcmp(c->allowed[i], f[6], 32) == 0;
        return ok ? "" : NULL;
    }
    if (nf >= 8 && strcmp(f[5], "PLAIN") == 0 && c->nidents > 0)
        return plain_identity(c, f[6], f[7], len[7], why);
    *why = nf >= 6 ? "not a CURVE (tcp) or PLAIN (ipc) handshake" : "malformed ZAP request";
    return NULL;
}

/* One ZAP request (RFC 27): version, request id, domain, address, identity, mechanism,
 * credentials; answered 200 with the sender's identity as User-Id (zap_decide), else 400. */
static void zap_serve_one(gb_curve *c)
{
    char f[8][256];
    int len[8], more = 1, nf = 0;
    while (more) {
        char scratch[256];
        int l = recv_frame(c->zap, nf < 8 ? f[nf] : scratch, 256, &more);
        if (l < 0)
            return;
        if (nf < 8)
            len[nf] = l;
        nf++;
    }
    if (nf < 2)
        return; /* nothing to answer to */
    const char *why = "malformed ZAP request";
    const char *user = nf >= 7 && strcmp(f[0], "1.0") == 0 ? zap_decide(c, f, len, nf, &why)
                                                           : NULL;
    if (nf >= 8)
        explicit_bzero(f[7], sizeof f[7]); /* a PLAIN password */
    if (user)
        atomic_fetch_add(&c->accepted, 1);
    else
        count_refusal(c, why, nf >= 4 ? f[3] : NULL);
    const char *status = user ? "200" : "400", *text = user ? "OK" : "refused";
    zmq_send(c->zap, "1.0", 3, ZMQ_SNDMORE);
    zmq_send(c->zap, f[1], (size_t)(len[1] < 255 ? len[1] : 255), ZMQ_SNDMORE);
    zmq_send(c->zap, status, 3, ZMQ_SNDMORE);
    zmq_send(c->zap, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(c->zap, user ? user : "", user ? strlen(user) : 0, ZMQ_SNDMORE); /* User-Id */
    zmq_send(c->zap, "", 0, 0);                                                /* metadata */
}

/* One event from a server socket's monitor: handshakes that failed before ZAP are refusals: a
 * plain peer (a mechanism mismatch), a wrong server key (a HELLO that does not decrypt). Either
 * peer hangs up on the mismatch, and when the peer's reset overtakes its greeting the server
 * sees only a failure without detail, so those count too (a keyed peer that hangs up
 * mid-handshake, rare, is then counted as well). An AUTH failure was counted by ZAP already.
 * Returns 0, or 1 when the monitored socket is gone (the monitor is then closed by the caller). */
static int monitor_event(gb_curve *c, void *mon)
{
    char ev[64], addr[256];
    int more = 0;
    if (recv_frame(mon, ev, sizeof ev, &more) < 6)
        return 0;
    if (more)
        recv_frame(mon, addr, sizeof addr, &more);
    else
        addr[0] = '\0';
    uint16_t event;
    memcpy(&event, ev, sizeof event);
    if (event == ZMQ_EVENT_MONITOR_STOPPED)
        return 1;
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ||
        event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
        count_refusal(c, "handshake failed (no credentials, or a wrong server key)", NULL);
    return 0;
}

static void *zap_main(void *arg)
{
    gb_curve *c = arg;
    zmq_pollitem_t items[2 + MAX_MONITORS];
    while (!atomic_load(&c->stop)) {
        pthread_mutex_lock(&c->mu);
        for (int i = 0; i < c->npending && c->nmonitors < MAX_MONITORS; i++)
            c->monitors[c->nmonitors++] = c->pending[i];
        c->npending = 0;
        pthread_mutex_unlock(&c->mu);
        items[0] = (zmq_pollitem_t){.socket = c->zap, .events = ZMQ_POLLIN};
        items[1] = (zmq_pollitem_t){.socket = c->wake_rx, .events = ZMQ_POLLIN};
        for (int i = 0; i < c->nmonitors; i++)
            items[2 + i] = (zmq_pollitem_t){.socket = c->monitors[i], .events = ZMQ_POLLIN};
        int n = zmq_poll(items, 2 + c->nmonitors, POLL_MS);
        if (n < 0) {
            if (zmq_errno() == ETERM)
                break;
            continue; /* EINTR */
        }
        if (items[1].revents & ZMQ_POLLIN)
            break; /* curve_free: stop */
        if (items[0].revents & ZMQ_POLLIN)
            zap_serve_one(c);
        for (int i = c->nmonitors - 1; i >= 0; i--)
            if ((items[2 + i].revents & ZMQ_POLLIN) && monitor_event(c, c->monitors[i])) {
                zmq_close(c->monitors[i]);
                c->monitors[i] = c->monitors[--c->nmonitors];
            }
    }
    return NULL;
}

/* Stops c's ZAP handler (when it runs: woken at once, not at its next poll's timeout, which
 * held every worker's exit by up to 100 ms), closes its sockets, wipes its keys and frees it:
 * the end of gb_curve_detach, and of a gb_curve_attach that failed (no thread, no monitor yet). */
static void curve_free(gb_curve *c)
{
    atomic_store(&c->stop, 1);
    if (c->has_thread && zmq_send(c->wake_tx, "", 0, ZMQ_DONTWAIT) < 0)
        GB_WARN("CURVE: cannot wake the ZAP handler (%s): it stops at its next poll",
                zmq_strerror(zmq_errno()));
    if (c->has_thread)
        pthread_join(c->thread, NULL);
    if (c->wake_tx)
        zmq_close(c->wake_tx);
    if (c->wake_rx)
        zmq_close(c->wake_rx);
    for (int i = 0; i < c->nmonitors; i++)
        zmq_close(c->monitors[i]);
    for (int i = 0; i < c->npending; i++)
        zmq_close(c->pending[i]);
    if (c->zap)
        zmq_close(c->zap);
    explicit_bzero(&c->keys, sizeof c->keys);
    free(c->allowed);
    free(c->idents);
    free(c->ident_keys);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

int gb_curve_attach(gb_curve **out, void *zctx, const gb_curve_opts *o, gb_error *err)
{
    *out = NULL;
    if (!gb_curve_available())
        return gb_error_set(err, GB_EUNSUPPORTED, "this libzmq has no CURVE (built without "
                            "libsodium): authenticated tcp is not available");
    const gb_curve_keys *k = o->keys;
    int serves = k->server_secret[0] != '\0';
    if (!gb_curve_key_valid(k->server_public) ||
        (serves && !gb_curve_key_valid(k->server_secret)) ||
        (k->client_secret[0] && (!gb_curve_key_valid(k->client_public) ||
                                 !gb_curve_key_valid(k->client_secret))))
        return gb_error_set(err, GB_EINVAL, "CURVE: a malformed key");
    if (serves && !o->allow_any && o->nallowed <= 0 && o->nidents <= 0)
        return gb_error_set(err, GB_EINVAL, "CURVE: a server needs the client keys it allows");
    gb_curve *c = calloc(1, sizeof *c);
    if (!c || (o->nallowed > 0 && !(c->allowed = calloc((size_t)o->nallowed, 32))) ||
        (o->nidents > 0 && (!(c->idents = calloc((size_t)o->nidents, sizeof *c->idents)) ||
                            !(c->ident_keys = calloc((size_t)o->nidents, 32))))) {
        if (c) {
            free(c->allowed);
            free(c->idents);
        }
        free(c);
        return gb_error_set(err, GB_ENOMEM, "CURVE: out of memory");
    }
    c->zctx = zctx;
    c->keys = *k;
    c->allow_any = o->allow_any;
    pthread_mutex_init(&c->mu, NULL);
    int rc = 0;
    for (int i = 0; rc == 0 && i < o->nallowed; i++) {
        if (!gb_curve_key_valid(o->allowed[i]))
            rc = gb_error_set(err, GB_EINVAL, "CURVE: allowed client key %d is not a Z85 key", i);
        else
            zmq_z85_decode(c->allowed[c->nallowed++], o->allowed[i]);
    }
    for (int i = 0; rc == 0 && i < o->nidents; i++) {
        if (!gb_curve_key_valid(o->idents[i].public_key) || !o->idents[i].name[0])
            rc = gb_error_set(err, GB_EINVAL, "CURVE: identity %d has no name or a bad key", i);
        else {
            c->idents[c->nidents] = o->idents[i];
            zmq_z85_decode(c->ident_keys[c->nidents++], o->idents[i].public_key);
        }
    }
    pthread_mutex_lock(&table_mu);
    int slot = -1;
    for (int i = 0; rc == 0 && i < MAX_CONTEXTS; i++) {
        if (table[i] && table[i]->zctx == zctx)
            rc = gb_error_set(err, GB_EINVAL, "CURVE: this ZeroMQ context has its keys already");
        else if (!table[i] && slot < 0)
            slot = i;
    }
    if (rc == 0 && slot < 0)
        rc = gb_error_set(err, GB_EFULL, "CURVE: more than %d secured contexts", MAX_CONTEXTS);
    if (rc == 0 && serves) {
        int zero = 0;
        char wake[64];
        snprintf(wake, sizeof wake, "inproc://gearbox.curve.wake.%p", (void *)c);
        if (!(c->zap = zmq_socket(zctx, ZMQ_REP)) ||
            zmq_setsockopt(c->zap, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
            zmq_bind(c->zap, ZAP_ENDPOINT) != 0)
            rc = gb_error_set(err, GB_EZMQ, "CURVE: ZAP handler at %s: %s", ZAP_ENDPOINT,
                              zmq_strerror(zmq_errno()));
        else if (!(c->wake_rx = zmq_socket(zctx, ZMQ_PAIR)) ||
                 !(c->wake_tx = zmq_socket(zctx, ZMQ_PAIR)) ||
                 zmq_setsockopt(c->wake_rx, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
                 zmq_setsockopt(c->wake_tx, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
                 zmq_bind(c->wake_rx, wake) != 0 || zmq_connect(c->wake_tx, wake) != 0)
            rc = gb_error_set(err, GB_EZMQ, "CURVE: the ZAP handler's wake-up pair: %s",
                              zmq_strerror(zmq_errno()));
        else if (pthread_create(&c->thread, NULL, zap_main, c) != 0)
            rc = gb_error_set(err, GB_ESYS, "CURVE: cannot start the ZAP handler thread");
        else
            c->has_thread = 1;
    }
    if (rc == 0)
        table[slot] = c;
    pthread_mutex_unlock(&table_mu);
    if (rc) {
        curve_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

void gb_curve_detach(gb_curve *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&table_mu);
    for (int i = 0; i < MAX_CONTEXTS; i++)
        if (table[i] == c)
            table[i] = NULL;
    pthread_mutex_unlock(&table_mu);
    curve_free(c);
}

gb_curve *gb_curve_of(void *zctx)
{
    gb_curve *c = NULL;
    pthread_mutex_lock(&table_mu);
    for (int i = 0; i < MAX_CONTEXTS && !c; i++)
        if (table[i] && table[i]->zctx == zctx)
            c = table[i];
    pthread_mutex_unlock(&table_mu);
    return c;
}

uint64_t gb_curve_refused(const gb_curve *c)
{
    return c ? atomic_load(&((gb_curve *)c)->refused) : 0;
}

uint64_t gb_curve_accepted(const gb_curve *c)
{
    return c ? atomic_load(&((gb_curve *)c)->accepted) : 0;
}

/* ---- secured bind / connect ---- */

static int is_tcp(const char *endpoint) { return strncmp(endpoint, "tcp://", 6) == 0; }

/* Hands a monitor of sock's failed handshakes to c's handler thread: the PAIR that reads it is
 * connected here, before the bind, so that no event is lost. */
static int watch_handshakes(gb_curve *c, void *sock)
{
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://gb-curve-monitor-%u", atomic_fetch_add(&monitor_seq, 1));
    if (zmq_socket_monitor(sock, ep, ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                         ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                                         ZMQ_EVENT_MONITOR_STOPPED) != 0)
        return -1;
    void *pair = zmq_socket(c->zctx, ZMQ_PAIR);
    int zero = 0;
    if (!pair || zmq_setsockopt(pair, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
        zmq_connect(pair, ep) != 0) {
        int e = zmq_errno();
        if (pair)
            zmq_close(pair);
        zmq_socket_monitor(sock, NULL, 0);
        errno = e;
        return -1;
    }
    pthread_mutex_lock(&c->mu);
    int full = c->npending >= MAX_MONITORS;
    if (!full)
        c->pending[c->npending++] = pair; /* the mutex is the barrier the move needs */
    pthread_mutex_unlock(&c->mu);
    if (full) /* the socket is still secured; only its counting is lost */
        zmq_close(pair);
    return 0;
}

static int is_ipc(const char *endpoint) { return strncmp(endpoint, "ipc://", 6) == 0; }

/* The ZAP domain, enforced: a server whose handler is gone refuses everyone. */
static int zap_enforced(void *sock)
{
    int one = 1;
    return zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, ZAP_DOMAIN, strlen(ZAP_DOMAIN)) != 0 ||
                   zmq_setsockopt(sock, ZMQ_ZAP_ENFORCE_DOMAIN, &one, sizeof one) != 0
               ? -1
               : 0;
}

static int bind_secured(void *zctx, void *sock, const char *endpoint, int watch)
{
    gb_curve *c = gb_curve_of(zctx);
    if (c && is_tcp(endpoint)) {
        int one = 1;
        if (!c->keys.server_secret[0]) {
            errno = EINVAL; /* a client-only context cannot serve over CURVE */
            return -1;
        }
        if (zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof one) != 0 ||
            zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, c->keys.server_secret, 40) != 0 ||
            zap_enforced(sock) != 0 || (watch && watch_handshakes(c, sock) != 0))
            return -1;
    } else if (c && c->nidents > 0 && is_ipc(endpoint)) {
        /* PLAIN: the handshake names the identity and proves it; messages go as they are */
        int one = 1;
        if (zmq_setsockopt(sock, ZMQ_PLAIN_SERVER, &one, sizeof one) != 0 ||
            zap_enforced(sock) != 0 || (watch && watch_handshakes(c, sock) != 0))
            return -1;
    }
    return zmq_bind(sock, endpoint);
}

int gb_curve_bind(void *zctx, void *sock, const char *endpoint)
{
    return bind_secured(zctx, sock, endpoint, 1);
}

int gb_curve_bind_monitored(void *zctx, void *sock, const char *endpoint)
{
    return bind_secured(zctx, sock, endpoint, 0);
}

void gb_curve_note_failed_handshake(void *zctx)
{
    gb_curve *c = gb_curve_of(zctx);
    if (c)
        count_refusal(c, "handshake failed (no credentials, or a wrong server key)", NULL);
}

int gb_curve_connect(void *zctx, void *sock, const char *endpoint)
{
    gb_curve *c = gb_curve_of(zctx);
    if (c && is_tcp(endpoint)) {
        if (!c->keys.client_secret[0]) {
            errno = EINVAL; /* a server-only context has no client key pair */
            return -1;
        }
        if (zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, c->keys.server_public, 40) != 0 ||
            zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, c->keys.client_public, 40) != 0 ||
            zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, c->keys.client_secret, 40) != 0)
            return -1;
    } else if (c && c->nidents > 0 && is_ipc(endpoint)) {
        if (!c->keys.client_secret[0] || !c->keys.identity[0]) {
            errno = EINVAL; /* no identity to speak as */
            return -1;
        }
        if (zmq_setsockopt(sock, ZMQ_PLAIN_USERNAME, c->keys.identity,
                           strlen(c->keys.identity)) != 0 ||
            zmq_setsockopt(sock, ZMQ_PLAIN_PASSWORD, c->keys.client_secret, 40) != 0)
            return -1;
    }
    return zmq_connect(sock, endpoint);
}
