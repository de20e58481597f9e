/* tests/runtime/streams/test_identity.c: a run's per-worker identities (runtime/streams/curve.h,
 * issue 35). The launcher's identity files: one key pair a worker, 0600, listed in
 * keys/identities, kept by a second create (a resume). The ZAP handler answers the identity a
 * client proved as the User-Id of its messages, on ipc:// (PLAIN: name and secret key) and on
 * tcp:// (CURVE: the client key pair): a receiver reads it (gb_wire_msg.peer) and tells a message
 * from actor 1 stamped as actor 0 (gb_wire_peer_is). A client naming actor 0 with actor 1's
 * secret, one without credentials, and one with a key pair of no identity are refused and
 * counted. The registry with identities: a worker registers under its own "<role>/<index>/"
 * only, no identity re-points a live name another holds (relays, whose names are their hosts'),
 * and one identity holds at most GB_REGISTRY_MAX_PER_IDENTITY names; each refusal is counted. */
#include "runtime/streams/curve.h"
#include "runtime/base/clock.h"
#include "runtime/streams/registry.h"
#include "runtime/streams/wire.h"
#include "streams_test.h"
#include "test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <zmq.h>

#define WAIT_MS 10000 /* the longest a step may take on a loaded machine */
#define DENY_MS 1500  /* how long a refused client is given to (fail to) get through */

static char dir[256], keys_dir[512];
static const char *const names[] = {"actor/0", "actor/1", "trainer/0", "relay/0", "relay/1"};

static int mode_of(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (int)(st.st_mode & 0777) : -1;
}

static void test_identity_files(void)
{
    gb_error err = {0};
    CHECK_OK(gb_curve_run_keys_create(dir, &err));
    CHECK_OK(gb_curve_identities_create(dir, names, 5, &err));
    char p[600], pub0[GB_CURVE_KEY_Z85], again[GB_CURVE_KEY_Z85];
    CHECK_OK(gb_curve_identity_file(keys_dir, "actor/0", p, sizeof p, &err));
    CHECK(strstr(p, "/actor-0.key") != NULL);
    CHECK_EQ_INT(mode_of(p), 0600);
    CHECK_OK(gb_curve_keypair_read(p, pub0, NULL, &err));
    CHECK(gb_curve_identity_file(keys_dir, "../x", p, sizeof p, &err) == GB_EINVAL);
    gb_curve_ident *ids = NULL;
    int n = 0;
    CHECK_OK(gb_curve_identities_read(keys_dir, &ids, &n, &err));
    CHECK_EQ_INT(n, 6); /* the launcher and the five workers */
    CHECK(n == 6 && strcmp(ids[0].name, GB_CURVE_LAUNCHER) == 0);
    CHECK(n == 6 && strcmp(ids[1].name, "actor/0") == 0 && strcmp(ids[1].public_key, pub0) == 0);
    free(ids);
    /* a resume mints nothing new for the slots it has */
    CHECK_OK(gb_curve_identities_create(dir, names, 5, &err));
    CHECK_OK(gb_curve_identity_file(keys_dir, "actor/0", p, sizeof p, &err));
    CHECK_OK(gb_curve_keypair_read(p, again, NULL, &err));
    CHECK(strcmp(pub0, again) == 0);
}

/* A PULL bound on ep by a context attached as trainer/0. */
typedef struct receiver {
    void *ctx, *sock;
    gb_curve *curve;
    char ep[600]; /* as bound (a tcp port chosen by the system) */
} receiver;

static void receiver_open(receiver *r, const char *ep)
{
    gb_error err = {0};
    r->ctx = zmq_ctx_new();
    CHECK_OK(gb_curve_identity_attach(&r->curve, r->ctx, keys_dir, "trainer/0", &err));
    r->sock = zmq_socket(r->ctx, ZMQ_PULL);
    int zero = 0, tmo = DENY_MS;
    zmq_setsockopt(r->sock, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(r->sock, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
    CHECK(gb_curve_bind(r->ctx, r->sock, ep) == 0);
    size_t len = sizeof r->ep;
    CHECK(zmq_getsockopt(r->sock, ZMQ_LAST_ENDPOINT, r->ep, &len) == 0);
}

static void receiver_close(receiver *r)
{
    zmq_close(r->sock);
    gb_curve_detach(r->curve);
    zmq_ctx_term(r->ctx);
}

/* Sends a header stamped as actor index from a context attached as identity (NULL: a context
 * with no keys) and returns what arrived in m (0) or GB_E*. */
static int send_as(receiver *r, const char *ep, const char *identity, int index, gb_wire_msg *m)
{
    gb_error err = {0};
    void *ctx = zmq_ctx_new();
    gb_curve *c = NULL;
    if (identity)
        CHECK_OK(gb_curve_identity_attach(&c, ctx, keys_dir, identity, &err));
    void *s = zmq_socket(ctx, ZMQ_PUSH);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    CHECK(gb_curve_connect(ctx, s, ep) == 0);
    gb_wire_header h;
    gb_wire_header_init(&h, GB_MSG_RUN_WATCH, GB_ROLE_ACTOR, index);
    CHECK_OK(gb_wire_send(s, NULL, 0, &h, NULL, ZMQ_DONTWAIT, &err));
    int rc = gb_wire_recv(r->sock, m, 0, 0, &err);
    zmq_close(s);
    gb_curve_detach(c);
    zmq_ctx_term(ctx);
    return rc;
}

/* A PUSH that names actor/0 with actor/1's secret key (PLAIN), or with actor/1's key pair on
 * tcp claiming nothing: only the first reaches ZAP with a lie. */
static int send_lying(receiver *r, const char *ep, gb_wire_msg *m)
{
    gb_error err = {0};
    char p[600], pub[GB_CURVE_KEY_Z85], sec[GB_CURVE_KEY_Z85];
    CHECK_OK(gb_curve_identity_file(keys_dir, "actor/1", p, sizeof p, &err));
    CHECK_OK(gb_curve_keypair_read(p, pub, sec, &err));
    void *ctx = zmq_ctx_new(), *s = zmq_socket(ctx, ZMQ_PUSH);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_PLAIN_USERNAME, "actor/0", 7);
    zmq_setsockopt(s, ZMQ_PLAIN_PASSWORD, sec, 40);
    CHECK(zmq_connect(s, ep) == 0);
    gb_wire_header h;
    gb_wire_header_init(&h, GB_MSG_RUN_WATCH, GB_ROLE_ACTOR, 0);
    CHECK_OK(gb_wire_send(s, NULL, 0, &h, NULL, ZMQ_DONTWAIT, &err));
    int rc = gb_wire_recv(r->sock, m, 0, 0, &err);
    zmq_close(s);
    zmq_ctx_term(ctx);
    return rc;
}

static void user_id_on(const char *ep, int ipc)
{
    receiver r;
    receiver_open(&r, ep);
    gb_wire_msg m;
    gb_wire_msg_init(&m);
    CHECK(send_as(&r, r.ep, "actor/0", 0, &m) == 0);
    CHECK_MSG(strcmp(m.peer, "actor/0") == 0, "User-Id '%s', expected actor/0", m.peer);
    CHECK(gb_wire_peer_is(&m, GB_ROLE_ACTOR, 0));
    /* actor 1 stamps its message as actor 0: it arrives, and the receiver sees who sent it */
    CHECK(send_as(&r, r.ep, "actor/1", 0, &m) == 0);
    CHECK_MSG(strcmp(m.peer, "actor/1") == 0, "User-Id '%s', expected actor/1", m.peer);
    CHECK(!gb_wire_peer_is(&m, GB_ROLE_ACTOR, 0));
    CHECK(gb_wire_peer_is(&m, GB_ROLE_ACTOR, 1));
    uint64_t refused = gb_curve_refused(r.curve);
    CHECK(send_as(&r, r.ep, NULL, 0, &m) != 0); /* no credentials: nothing arrives */
    if (ipc)
        CHECK(send_lying(&r, r.ep, &m) != 0); /* actor 0's name, actor 1's secret */
    gb_sleep_ms(200);
    CHECK_MSG(gb_curve_refused(r.curve) >= refused + 1 + (uint64_t)ipc,
              "%llu refused, expected %llu more", (unsigned long long)gb_curve_refused(r.curve),
              (unsigned long long)(1 + ipc));
    gb_wire_msg_release(&m);
    receiver_close(&r);
}

static void test_user_id_ipc(void)
{
    char ep[600];
    snprintf(ep, sizeof ep, "ipc://%s/pull", dir);
    user_id_on(ep, 1);
}

static void test_user_id_tcp(void) { user_id_on("tcp://127.0.0.1:*", 0); }

/* ---- the registry's ownership ---- */

typedef struct registry {
    void *ctx;
    gb_curve *curve;
    gb_registry_server *server;
    pthread_t thread;
    atomic_int stop;
} registry;

static void *reg_main(void *arg)
{
    registry *g = arg;
    gb_error err;
    gb_registry_server_run(g->server, &g->stop, &err);
    return NULL;
}

/* A client of the registry at ep speaking as identity, stamped as (role, index). */
static gb_registry_client *client_as(const char *ep, const char *identity, int role, int index,
                                     void **ctx, gb_curve **curve)
{
    gb_error err = {0};
    *ctx = zmq_ctx_new();
    CHECK_OK(gb_curve_identity_attach(curve, *ctx, keys_dir, identity, &err));
    gb_registry_client_opts o = {ep, WAIT_MS, 100, 60000, role, index};
    gb_registry_client *c = NULL;
    CHECK_OK(gb_registry_client_open(&c, *ctx, &o, &err));
    return c;
}

static void client_done(gb_registry_client *c, void *ctx, gb_curve *curve)
{
    gb_registry_client_close(c);
    gb_curve_detach(curve);
    zmq_ctx_term(ctx);
}

static void test_registry_ownership(void)
{
    gb_error err = {0};
    char ep[600], got[256];
    snprintf(ep, sizeof ep, "ipc://%s/reg", dir);
    registry g = {0};
    g.ctx = zmq_ctx_new();
    CHECK_OK(gb_curve_identity_attach(&g.curve, g.ctx, keys_dir, NULL, &err));
    gb_registry_server_opts ro = {.endpoint = ep, .max_ttl_ms = 60000};
    CHECK_OK(gb_registry_server_open(&g.server, g.ctx, &ro, &err));
    pthread_create(&g.thread, NULL, reg_main, &g);

    void *c0x, *c1x, *r0x, *r1x;
    gb_curve *c0c, *c1c, *r0c, *r1c;
    gb_registry_client *a0 = client_as(ep, "actor/0", GB_ROLE_ACTOR, 0, &c0x, &c0c);
    gb_registry_client *a1 = client_as(ep, "actor/1", GB_ROLE_ACTOR, 0, &c1x, &c1c);
    CHECK_OK(gb_registry_register(a0, "actor/0/x", "ipc:///real", &err));
    /* actor 1, stamped as actor 0, can neither re-point actor 0's name nor make one of its own
     * under actor 0 */
    CHECK(gb_registry_register(a1, "actor/0/x", "ipc:///forged", &err) == GB_EINVAL);
    CHECK(gb_registry_register(a1, "actor/0/y", "ipc:///forged", &err) == GB_EINVAL);
    CHECK(gb_registry_unregister(a1, "actor/0/x", &err) != 0);
    CHECK_OK(gb_registry_lookup(a1, "actor/0/x", got, sizeof got, WAIT_MS, &err));
    CHECK_MSG(strcmp(got, "ipc:///real") == 0, "actor/0/x points to %s", got);
    /* relays name their hosts: the first to hold a live name keeps it */
    gb_registry_client *r0 = client_as(ep, "relay/0", GB_ROLE_RELAY, 0, &r0x, &r0c);
    gb_registry_client *r1 = client_as(ep, "relay/1", GB_ROLE_RELAY, 1, &r1x, &r1c);
    CHECK_OK(gb_registry_register(r0, "relay/hostA/pub", "ipc:///relay0", &err));
    CHECK(gb_registry_register(r1, "relay/hostA/pub", "ipc:///relay1", &err) == GB_EINVAL);
    CHECK(gb_registry_register(r1, "actor/1/z", "ipc:///relay1", &err) == GB_EINVAL);
    CHECK_OK(gb_registry_lookup(a0, "relay/hostA/pub", got, sizeof got, WAIT_MS, &err));
    CHECK_MSG(strcmp(got, "ipc:///relay0") == 0, "relay/hostA/pub points to %s", got);
    /* one identity cannot fill the registry */
    int refused_at = -1;
    for (int i = 0; i < GB_REGISTRY_MAX_PER_IDENTITY + 5 && refused_at < 0; i++) {
        char name[64];
        snprintf(name, sizeof name, "actor/1/n%d", i);
        if (gb_registry_register(a1, name, "ipc:///n", &err) == GB_EFULL)
            refused_at = i;
    }
    CHECK_EQ_INT(refused_at, GB_REGISTRY_MAX_PER_IDENTITY);
    CHECK_OK(gb_registry_register(a0, "actor/0/still", "ipc:///room", &err));
    client_done(r1, r1x, r1c);
    client_done(r0, r0x, r0c);
    client_done(a1, c1x, c1c);
    client_done(a0, c0x, c0c);
    atomic_store(&g.stop, 1);
    pthread_join(g.thread, NULL);
    CHECK_MSG(gb_registry_server_rejected(g.server) >= 6, "%llu rejected, expected >= 6",
              (unsigned long long)gb_registry_server_rejected(g.server));
    gb_registry_server_close(g.server);
    gb_curve_detach(g.curve);
    zmq_ctx_term(g.ctx);
}

int main(void)
{
    if (!gb_curve_available()) {
        fprintf(stderr, "this libzmq has no CURVE: skipped\n");
        return 77;
    }
    st_tmpdir(dir, sizeof dir);
    snprintf(keys_dir, sizeof keys_dir, "%s/%s", dir, GB_CURVE_KEYS_DIR);
    TEST_RUN(test_identity_files);
    TEST_RUN(test_user_id_ipc);
    TEST_RUN(test_user_id_tcp);
    TEST_RUN(test_registry_ownership);
    return test_main_result();
}
