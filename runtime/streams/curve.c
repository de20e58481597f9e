/* runtime/streams/curve.c: CURVE key files, the per-context ZAP handler and the secured
 * bind/connect (see curve.h). */
#include "runtime/streams/curve.h"

#include "runtime/base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
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
#define POLL_MS 100      /* how often the handler looks for new monitors and the stop flag */
#define LOG_FIRST 10     /* refusals logged one by one; then one line per 1000 */

int gb_curve_available(void) { return zmq_has("curve") ? 1 : 0; }

/* ---- key files ---- */

static int valid_z85_key(const char *z)
{
    uint8_t bin[32];
    return strlen(z) == 40 && zmq_z85_decode(bin, z) != NULL;
}

int gb_curve_keypair_write(const char *path, char *public_out, gb_error *err)
{
    char pub[GB_CURVE_KEY_Z85], sec[GB_CURVE_KEY_Z85];
    if (!gb_curve_available())
        return gb_error_set(err, GB_EUNSUPPORTED, "this libzmq has no CURVE (built without "
                            "libsodium): authenticated tcp is not available");
    if (zmq_curve_keypair(pub, sec) != 0)
        return gb_error_set(err, GB_EUNSUPPORTED, "zmq_curve_keypair: %s",
                            zmq_strerror(zmq_errno()));
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return gb_error_errno(err, "create key file %s", path);
    char text[256];
    int n = snprintf(text, sizeof text,
                     "# gearbox CURVE key pair (ZeroMQ Z85); the secret key stays in this file\n"
                     "public %s\nsecret %s\n", pub, sec);
    ssize_t w = n > 0 && (size_t)n < sizeof text ? write(fd, text, (size_t)n) : -1;
    int rc = (w != n || fsync(fd) != 0) ? gb_error_errno(err, "write key file %s", path) : 0;
    explicit_bzero(sec, sizeof sec);
    explicit_bzero(text, sizeof text);
    if (close(fd) != 0 && rc == 0)
        rc = gb_error_errno(err, "close key file %s", path);
    if (rc)
        unlink(path);
    else if (public_out)
        memcpy(public_out, pub, sizeof pub);
    return rc;
}

/* Copies the key of a "<word> <Z85>" line into out when the word matches; 1 when it did. */
static int key_line(const char *line, const char *word, char *out)
{
    size_t k = strlen(word);
    if (strncmp(line, word, k) != 0 || (line[k] != ' ' && line[k] != '\t'))
        return 0;
    line += k;
    while (*line == ' ' || *line == '\t')
        line++;
    size_t n = strcspn(line, " \t\r\n");
    if (n >= GB_CURVE_KEY_Z85)
        n = GB_CURVE_KEY_Z85 - 1;
    memcpy(out, line, n);
    out[n] = '\0';
    return 1;
}

int gb_curve_keypair_read(const char *path, char *public_key, char *secret, gb_error *err)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return errno == ENOENT ? gb_error_set(err, GB_ENOTFOUND, "key file %s: not found", path)
                               : gb_error_errno(err, "open key file %s", path);
    char line[256], pub[GB_CURVE_KEY_Z85] = "", sec[GB_CURVE_KEY_Z85] = "";
    int rc = 0, lineno = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        if (line[0] == '#' || line[0] == '\n' || line[0] == '\0')
            continue;
        char *dst = key_line(line, "public", pub) ? pub : key_line(line, "secret", sec) ? sec : 0;
        if (!dst || !valid_z85_key(dst))
            rc = gb_error_set(err, GB_EINVAL, "key file %s:%d: expected \"public <Z85 key>\" or "
                              "\"secret <Z85 key>\" (40 characters)", path, lineno);
    }
    struct stat st;
    if (rc == 0 && fstat(fileno(f), &st) != 0)
        rc = gb_error_errno(err, "stat %s", path);
    fclose(f);
    explicit_bzero(line, sizeof line);
    if (rc == 0 && !pub[0])
        rc = gb_error_set(err, GB_EINVAL, "key file %s: no public key", path);
    if (rc == 0 && secret && !sec[0])
        rc = gb_error_set(err, GB_EINVAL, "key file %s: no secret key", path);
    if (rc == 0 && secret && sec[0] && (st.st_mode & 077))
        rc = gb_error_set(err, GB_EINVAL, "key file %s holds a secret key but is readable by "
                          "others (mode %03o): chmod 600 it", path, (unsigned)(st.st_mode & 0777));
    if (rc == 0) {
        memcpy(public_key, pub, sizeof pub);
        if (secret)
            memcpy(secret, sec, sizeof sec);
    }
    explicit_bzero(sec, sizeof sec);
    return rc;
}

int gb_curve_run_keys_create(const char *run_dir, gb_error *err)
{
    char dir[1024], path[1100];
    int n = snprintf(dir, sizeof dir, "%s/%s", run_dir, GB_CURVE_KEYS_DIR);
    if (n < 0 || (size_t)n >= sizeof dir)
        return gb_error_set(err, GB_EINVAL, "run directory path too long");
    if (mkdir(dir, 0700) != 0)
        return gb_error_errno(err, "mkdir %s", dir);
    snprintf(path, sizeof path, "%s/server.key", dir);
    int rc = gb_curve_keypair_write(path, NULL, err);
    if (rc == 0) {
        snprintf(path, sizeof path, "%s/client.key", dir);
        rc = gb_curve_keypair_write(path, NULL, err);
    }
    return rc;
}

int gb_curve_run_keys_load(const char *keys_dir, gb_curve_keys *keys, gb_error *err)
{
    char path[1100];
    memset(keys, 0, sizeof *keys);
    snprintf(path, sizeof path, "%s/server.key", keys_dir);
    int rc = gb_curve_keypair_read(path, keys->server_public, keys->server_secret, err);
    if (rc == 0) {
        snprintf(path, sizeof path, "%s/client.key", keys_dir);
        rc = gb_curve_keypair_read(path, keys->client_public, keys->client_secret, err);
    }
    if (rc)
        explicit_bzero(keys, sizeof *keys);
    return rc;
}

int gb_curve_allow_list_read(const char *path, char (*keys)[GB_CURVE_KEY_Z85], int cap, int *n,
                             gb_error *err)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return errno == ENOENT ? gb_error_set(err, GB_ENOTFOUND, "allow-list %s: not found", path)
                               : gb_error_errno(err, "open allow-list %s", path);
    char line[256], key[GB_CURVE_KEY_Z85];
    int rc = 0, lineno = 0;
    *n = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '#' || *p == '\n' || *p == '\r' || *p == '\0' || key_line(p, "secret", key))
            continue;
        if (!key_line(p, "public", key)) {
            size_t k = strcspn(p, " \t\r\n");
            if (k >= GB_CURVE_KEY_Z85)
                k = GB_CURVE_KEY_Z85 - 1;
            memcpy(key, p, k);
            key[k] = '\0';
        }
        if (!valid_z85_key(key))
            rc = gb_error_set(err, GB_EINVAL, "allow-list %s:%d: not a Z85 public key "
                              "(40 characters)", path, lineno);
        else if (*n >= cap)
            rc = gb_error_set(err, GB_EFULL, "allow-list %s: more than %d keys", path, cap);
        else
            memcpy(keys[(*n)++], key, sizeof key);
    }
    explicit_bzero(line, sizeof line);
    fclose(f);
    return rc;
}

/* ---- the context table and the ZAP handler ---- */

struct gb_curve {
    void *zctx;
    gb_curve_keys keys;
    uint8_t (*allowed)[32];
    int nallowed, allow_any;
    void *zap; /* REP at ZAP_ENDPOINT; the handler thread's */
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

/* One ZAP request (RFC 27): version, request id, domain, address, identity, mechanism,
 * credentials; answered 200 for an allowed CURVE client key, else 400. */
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
    int ok = 0;
    const char *why = "malformed ZAP request";
    if (nf >= 7 && strcmp(f[0], "1.0") == 0 && strcmp(f[5], "CURVE") == 0 && len[6] == 32) {
        why = "client public key not allowed";
        ok = c->allow_any;
        for (int i = 0; !ok && i < c->nallowed; i++)
            ok = memcmp(c->allowed[i], f[6], 32) == 0;
    } else if (nf >= 6 && strcmp(f[5], "CURVE") != 0) {
        why = "not a CURVE handshake";
    }
    if (ok)
        atomic_fetch_add(&c->accepted, 1);
    else
        count_refusal(c, why, nf >= 4 ? f[3] : NULL);
    const char *status = ok ? "200" : "400", *text = ok ? "OK" : "refused";
    zmq_send(c->zap, "1.0", 3, ZMQ_SNDMORE);
    zmq_send(c->zap, f[1], (size_t)(len[1] < 255 ? len[1] : 255), ZMQ_SNDMORE);
    zmq_send(c->zap, status, 3, ZMQ_SNDMORE);
    zmq_send(c->zap, text, strlen(text), ZMQ_SNDMORE);
    zmq_send(c->zap, "", 0, ZMQ_SNDMORE); /* user id */
    zmq_send(c->zap, "", 0, 0);           /* metadata */
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
        count_refusal(c, "CURVE handshake failed (no keys or a wrong server key)", NULL);
    return 0;
}

static void *zap_main(void *arg)
{
    gb_curve *c = arg;
    zmq_pollitem_t items[1 + MAX_MONITORS];
    while (!atomic_load(&c->stop)) {
        pthread_mutex_lock(&c->mu);
        for (int i = 0; i < c->npending && c->nmonitors < MAX_MONITORS; i++)
            c->monitors[c->nmonitors++] = c->pending[i];
        c->npending = 0;
        pthread_mutex_unlock(&c->mu);
        items[0] = (zmq_pollitem_t){.socket = c->zap, .events = ZMQ_POLLIN};
        for (int i = 0; i < c->nmonitors; i++)
            items[1 + i] = (zmq_pollitem_t){.socket = c->monitors[i], .events = ZMQ_POLLIN};
        int n = zmq_poll(items, 1 + c->nmonitors, POLL_MS);
        if (n < 0) {
            if (zmq_errno() == ETERM)
                break;
            continue; /* EINTR */
        }
        if (items[0].revents & ZMQ_POLLIN)
            zap_serve_one(c);
        for (int i = c->nmonitors - 1; i >= 0; i--)
            if ((items[1 + i].revents & ZMQ_POLLIN) && monitor_event(c, c->monitors[i])) {
                zmq_close(c->monitors[i]);
                c->monitors[i] = c->monitors[--c->nmonitors];
            }
    }
    return NULL;
}

/* Stops c's ZAP handler (when it runs), closes its sockets, wipes its keys and frees it: the
 * end of gb_curve_detach, and of a gb_curve_attach that failed (no thread, no monitor yet). */
static void curve_free(gb_curve *c)
{
    atomic_store(&c->stop, 1);
    if (c->has_thread)
        pthread_join(c->thread, NULL);
    for (int i = 0; i < c->nmonitors; i++)
        zmq_close(c->monitors[i]);
    for (int i = 0; i < c->npending; i++)
        zmq_close(c->pending[i]);
    if (c->zap)
        zmq_close(c->zap);
    explicit_bzero(&c->keys, sizeof c->keys);
    free(c->allowed);
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
    if (!valid_z85_key(k->server_public) || (serves && !valid_z85_key(k->server_secret)) ||
        (k->client_secret[0] && (!valid_z85_key(k->client_public) ||
                                 !valid_z85_key(k->client_secret))))
        return gb_error_set(err, GB_EINVAL, "CURVE: a malformed key");
    if (serves && !o->allow_any && o->nallowed <= 0)
        return gb_error_set(err, GB_EINVAL, "CURVE: a server needs the client keys it allows");
    gb_curve *c = calloc(1, sizeof *c);
    if (!c || (o->nallowed > 0 && !(c->allowed = calloc((size_t)o->nallowed, 32)))) {
        free(c);
        return gb_error_set(err, GB_ENOMEM, "CURVE: out of memory");
    }
    c->zctx = zctx;
    c->keys = *k;
    c->allow_any = o->allow_any;
    pthread_mutex_init(&c->mu, NULL);
    int rc = 0;
    for (int i = 0; rc == 0 && i < o->nallowed; i++) {
        if (!valid_z85_key(o->allowed[i]))
            rc = gb_error_set(err, GB_EINVAL, "CURVE: allowed client key %d is not a Z85 key", i);
        else
            zmq_z85_decode(c->allowed[c->nallowed++], o->allowed[i]);
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
        if (!(c->zap = zmq_socket(zctx, ZMQ_REP)) ||
            zmq_setsockopt(c->zap, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
            zmq_bind(c->zap, ZAP_ENDPOINT) != 0)
            rc = gb_error_set(err, GB_EZMQ, "CURVE: ZAP handler at %s: %s", ZAP_ENDPOINT,
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

int gb_curve_run_attach(gb_curve **out, void *zctx, const char *keys_dir, gb_error *err)
{
    gb_curve_keys keys;
    *out = NULL;
    int rc = gb_curve_run_keys_load(keys_dir, &keys, err);
    if (rc == 0) {
        const char *allowed[1] = {keys.client_public};
        gb_curve_opts o = {.keys = &keys, .allowed = allowed, .nallowed = 1};
        rc = gb_curve_attach(out, zctx, &o, err);
    }
    explicit_bzero(&keys, sizeof keys);
    return rc;
}

int gb_curve_server_attach(gb_curve **out, void *zctx, const char *key_file,
                           const char *allow_file, char *public_out, gb_error *err)
{
    gb_curve_keys keys = {0};
    char (*allowed)[GB_CURVE_KEY_Z85] = NULL;
    const char **ptrs = NULL;
    int n = 0;
    *out = NULL;
    int rc = gb_curve_keypair_read(key_file, keys.server_public, keys.server_secret, err);
    if (rc == GB_ENOTFOUND) {
        rc = gb_curve_keypair_write(key_file, NULL, err);
        if (rc == 0) {
            GB_INFO("created the server key pair %s (mode 0600)", key_file);
            rc = gb_curve_keypair_read(key_file, keys.server_public, keys.server_secret, err);
        }
    }
    if (rc == 0 && allow_file && allow_file[0]) {
        allowed = calloc(GB_CURVE_MAX_ALLOWED, sizeof *allowed);
        ptrs = calloc(GB_CURVE_MAX_ALLOWED, sizeof *ptrs);
        rc = allowed && ptrs ? gb_curve_allow_list_read(allow_file, allowed,
                                                        GB_CURVE_MAX_ALLOWED, &n, err)
                             : gb_error_set(err, GB_ENOMEM, "CURVE: out of memory");
        if (rc == 0 && n == 0)
            rc = gb_error_set(err, GB_EINVAL, "allow-list %s: no key", allow_file);
        for (int i = 0; rc == 0 && i < n; i++)
            ptrs[i] = allowed[i];
    }
    if (rc == 0) {
        gb_curve_opts o = {.keys = &keys, .allowed = ptrs, .nallowed = n, .allow_any = n == 0};
        rc = gb_curve_attach(out, zctx, &o, err);
    }
    if (rc == 0 && public_out)
        memcpy(public_out, keys.server_public, GB_CURVE_KEY_Z85);
    explicit_bzero(&keys, sizeof keys);
    free(allowed);
    free(ptrs);
    return rc;
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

static int bind_secured(void *zctx, void *sock, const char *endpoint, int watch)
{
    gb_curve *c = is_tcp(endpoint) ? gb_curve_of(zctx) : NULL;
    if (c) {
        int one = 1;
        if (!c->keys.server_secret[0]) {
            errno = EINVAL; /* a client-only context cannot serve over CURVE */
            return -1;
        }
        if (zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof one) != 0 ||
            zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, c->keys.server_secret, 40) != 0 ||
            zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, ZAP_DOMAIN, strlen(ZAP_DOMAIN)) != 0 ||
            zmq_setsockopt(sock, ZMQ_ZAP_ENFORCE_DOMAIN, &one, sizeof one) != 0 ||
            (watch && watch_handshakes(c, sock) != 0))
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
        count_refusal(c, "CURVE handshake failed (no keys or a wrong server key)", NULL);
}

int gb_curve_connect(void *zctx, void *sock, const char *endpoint)
{
    gb_curve *c = is_tcp(endpoint) ? gb_curve_of(zctx) : NULL;
    if (c) {
        if (!c->keys.client_secret[0]) {
            errno = EINVAL; /* a server-only context has no client key pair */
            return -1;
        }
        if (zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, c->keys.server_public, 40) != 0 ||
            zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, c->keys.client_public, 40) != 0 ||
            zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, c->keys.client_secret, 40) != 0)
            return -1;
    }
    return zmq_connect(sock, endpoint);
}
