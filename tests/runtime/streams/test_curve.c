/* tests/runtime/streams/test_curve.c: CURVE on tcp:// (runtime/streams/curve.h) with real sockets.
 * A run's key files are made 0600 in a 0700 folder and read back; a malformed or world-readable key
 * file is refused. With the server's context attached to the run's keys, a registry, a trainer's
 * sample receiver and a policy's inference server on tcp://127.0.0.1 serve a client whose context
 * has the run's keys, and give nothing to three clients without them: plain tcp, CURVE with another
 * run's keys (a wrong server key), CURVE with the right server key but an unknown client key
 * pair. Those get no reply, register nothing, have no chunk ingested and no request served, and
 * every one of them is counted by gb_curve_refused. ipc:// on the same attached context stays
 * plain. */
#include "runtime/streams/curve.h"
#include "runtime/base/clock.h"
#include "runtime/streams/inference.h"
#include "runtime/streams/params.h"
#include "runtime/streams/registry.h"
#include "runtime/streams/sample_stream.h"
#include "streams_test.h"
#include "test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>

#define WAIT_MS 10000 /* the longest a step may take on a loaded machine */
#define DENY_MS 1500  /* how long an unkeyed client is given to (fail to) get an answer */

static char dir[256], keys_dir[512], other_dir[256], other_keys[512];

/* ---- key files ------------------------------------------------------------------------------- */

static int mode_of(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (int)(st.st_mode & 0777) : -1;
}

static void test_key_files(void)
{
    gb_error err = {0};
    CHECK(gb_curve_available());
    CHECK_OK(gb_curve_run_keys_create(dir, &err));
    char p[600];
    CHECK_EQ_INT(mode_of(keys_dir), 0700);
    snprintf(p, sizeof p, "%s/server.key", keys_dir);
    CHECK_EQ_INT(mode_of(p), 0600);
    snprintf(p, sizeof p, "%s/client.key", keys_dir);
    CHECK_EQ_INT(mode_of(p), 0600);
    gb_curve_keys k;
    CHECK_OK(gb_curve_run_keys_load(keys_dir, &k, &err));
    CHECK_EQ_INT(strlen(k.server_public), 40);
    CHECK_EQ_INT(strlen(k.client_secret), 40);
    CHECK(strcmp(k.server_public, k.client_public) != 0);
    /* a second create in the same run refuses to overwrite the keys */
    CHECK(gb_curve_run_keys_create(dir, &err) != 0);

    /* a key file others can read is refused, naming the fix */
    char loose[600];
    snprintf(loose, sizeof loose, "%s/loose.key", dir);
    CHECK_OK(gb_curve_keypair_write(loose, NULL, &err));
    chmod(loose, 0644);
    char pub[GB_CURVE_KEY_Z85], sec[GB_CURVE_KEY_Z85];
    CHECK_EQ_INT(gb_curve_keypair_read(loose, pub, sec, &err), GB_EINVAL);
    CHECK(strstr(err.msg, "chmod 600") != NULL);
    /* its public key alone can still be read (an allow-list entry is public) */
    CHECK_OK(gb_curve_keypair_read(loose, pub, NULL, &err));
    unlink(loose);
    /* a malformed key is refused with its line */
    FILE *f = fopen(loose, "w");
    fprintf(f, "public not-a-key\n");
    fclose(f);
    CHECK_EQ_INT(gb_curve_keypair_read(loose, pub, NULL, &err), GB_EINVAL);
    CHECK(strstr(err.msg, ":1:") != NULL);
    unlink(loose);
    /* an allow-list takes bare keys and "public" lines, skips secrets and comments */
    f = fopen(loose, "w");
    fprintf(f, "# clients\n%s\npublic %s\nsecret %s\n", k.client_public, k.server_public,
            k.client_secret);
    fclose(f);
    char allowed[4][GB_CURVE_KEY_Z85];
    int n = 0;
    CHECK_OK(gb_curve_allow_list_read(loose, allowed, 4, &n, &err));
    CHECK_EQ_INT(n, 2);
    CHECK(strcmp(allowed[0], k.client_public) == 0 && strcmp(allowed[1], k.server_public) == 0);
    unlink(loose);

    /* another run's keys: the "wrong key" client below */
    CHECK_OK(gb_curve_run_keys_create(other_dir, &err));
}

/* ---- the servers ----------------------------------------------------------------------------- */

typedef struct servers {
    void *ctx;
    gb_curve *curve;
    gb_registry_server *reg;
    gb_sample_receiver *samples;
    gb_infer_server *infer;
    atomic_int stop;
    atomic_ullong chunks, served; /* taken in by the server thread */
    pthread_t reg_thread, thread;
} servers;

static void *reg_main(void *arg)
{
    servers *s = arg;
    gb_error err;
    gb_registry_server_run(s->reg, &s->stop, &err);
    return NULL;
}

/* Drives the sample receiver and the inference server; counts what they take in. */
static void *serve_main(void *arg)
{
    servers *s = arg;
    gb_error err;
    gb_wire_msg m;
    gb_wire_msg_init(&m);
    while (!atomic_load(&s->stop)) {
        if (gb_sample_recv(s->samples, &m, 5, &err) == 0) {
            atomic_fetch_add(&s->chunks, 1);
            gb_wire_msg_release(&m);
        }
        if (gb_infer_server_poll(s->infer, 5, &err) == 1)
            atomic_store(&s->served, gb_infer_server_get_stats(s->infer).received);
    }
    gb_wire_msg_release(&m);
    return NULL;
}

static int echo_fn(void *user, const gb_infer_batch *in, gb_infer_outputs *out, gb_error *err)
{
    (void)user;
    out->ntensors = 1;
    out->descs[0] = in->descs[0];
    out->data[0] = in->inputs[0].data;
    out->policy_version = 3;
    (void)err;
    return 0;
}

static void servers_open(servers *s)
{
    gb_error err = {0};
    memset(s, 0, sizeof *s);
    s->ctx = zmq_ctx_new();
    CHECK_OK(gb_curve_run_attach(&s->curve, s->ctx, keys_dir, &err));
    gb_registry_server_opts ro = {.endpoint = "tcp://127.0.0.1:*", .max_ttl_ms = 60000};
    CHECK_OK(gb_registry_server_open(&s->reg, s->ctx, &ro, &err));
    gb_sample_receiver_opts so = {.endpoint = "tcp://127.0.0.1:*", .hwm = 16};
    CHECK_OK(gb_sample_receiver_open(&s->samples, s->ctx, &so, &err));
    gb_infer_server_opts io = {.endpoint = "tcp://127.0.0.1:*", .max_batch_rows = 64,
                               .max_wait_ms = 0, .role = GB_ROLE_POLICY, .fn = echo_fn};
    CHECK_OK(gb_infer_server_open(&s->infer, s->ctx, &io, &err));
    pthread_create(&s->reg_thread, NULL, reg_main, s);
    pthread_create(&s->thread, NULL, serve_main, s);
}

static void servers_close(servers *s)
{
    atomic_store(&s->stop, 1);
    pthread_join(s->reg_thread, NULL);
    pthread_join(s->thread, NULL);
    gb_infer_server_close(s->infer);
    gb_sample_receiver_close(s->samples);
    gb_registry_server_close(s->reg);
    gb_curve_detach(s->curve);
    zmq_ctx_term(s->ctx);
}

/* ---- a client: plain, or with some keys ------------------------------------------------------ */

typedef enum { RIGHT_KEYS, PLAIN, OTHER_RUN, UNKNOWN_CLIENT } client_kind;

static void *client_ctx(client_kind kind, gb_curve **curve)
{
    gb_error err = {0};
    void *ctx = zmq_ctx_new();
    *curve = NULL;
    if (kind == RIGHT_KEYS) {
        CHECK_OK(gb_curve_run_attach(curve, ctx, keys_dir, &err));
    } else if (kind == OTHER_RUN) {
        CHECK_OK(gb_curve_run_attach(curve, ctx, other_keys, &err));
    } else if (kind == UNKNOWN_CLIENT) {
        /* the server's right public key, a client key pair the server never allowed */
        gb_curve_keys run, k = {0};
        CHECK_OK(gb_curve_run_keys_load(keys_dir, &run, &err));
        memcpy(k.server_public, run.server_public, sizeof k.server_public);
        CHECK(zmq_curve_keypair(k.client_public, k.client_secret) == 0);
        gb_curve_opts o = {.keys = &k};
        CHECK_OK(gb_curve_attach(curve, ctx, &o, &err));
    }
    return ctx;
}

static void client_done(void *ctx, gb_curve *curve)
{
    gb_curve_detach(curve);
    zmq_ctx_term(ctx);
}

/* Registers "<name>" through the server's registry; 0 when the registry answered. */
static int try_register(servers *s, client_kind kind, const char *name)
{
    gb_error err = {0};
    gb_curve *curve;
    void *ctx = client_ctx(kind, &curve);
    gb_registry_client_opts o = {gb_registry_server_endpoint(s->reg),
                                 kind == RIGHT_KEYS ? WAIT_MS : DENY_MS, 100, 60000,
                                 GB_ROLE_ACTOR, 0};
    gb_registry_client *c = NULL;
    int rc = gb_registry_client_open(&c, ctx, &o, &err);
    if (rc == 0)
        rc = gb_registry_register(c, name, "tcp://10.9.9.9:1", &err);
    gb_registry_client_close(c);
    client_done(ctx, curve);
    return rc;
}

/* Sends one sample chunk; waits (with the right keys) until the trainer took it. */
static void send_chunk(servers *s, client_kind kind)
{
    gb_error err = {0};
    gb_curve *curve;
    void *ctx = client_ctx(kind, &curve);
    const char *eps[1] = {gb_sample_receiver_endpoint(s->samples)};
    /* keyed: block until queued; unkeyed: the handshake never completes, so there is never a
     * connection to queue the chunk on, and it is dropped after DENY_MS */
    gb_sample_sender_opts o = {.endpoints = eps, .n_endpoints = 1, .hwm = 4,
                               .send_timeout_ms = kind == RIGHT_KEYS ? -1 : DENY_MS,
                               .role = GB_ROLE_ACTOR};
    gb_sample_sender *snd = NULL;
    CHECK_OK(gb_sample_sender_open(&snd, ctx, &o, &err));
    float data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t shape[1] = {8};
    gb_tensor_desc d;
    gb_wire_set_tensor(&d, "obs", GB_DTYPE_FLOAT32, 1, shape, &err);
    gb_wire_payload p = {data, 0, 0, 0};
    gb_sample_send(snd, 0, &d, &p, 1, &err);
    gb_sample_sender_close_within(snd, kind == RIGHT_KEYS ? WAIT_MS : DENY_MS);
    client_done(ctx, curve);
}

/* One inference request; returns 0 when answered. */
static int try_infer(servers *s, client_kind kind)
{
    gb_error err = {0};
    gb_curve *curve;
    void *ctx = client_ctx(kind, &curve);
    const char *eps[1] = {gb_infer_server_endpoint(s->infer)};
    gb_infer_client_opts o = {eps, 1, kind == RIGHT_KEYS ? WAIT_MS : DENY_MS, GB_ROLE_ACTOR, 0,
                              0, 0};
    gb_infer_client *c = NULL;
    int rc = gb_infer_client_open(&c, ctx, &o, &err);
    float obs[3] = {1, 2, 3};
    int64_t shape[2] = {1, 3};
    gb_tensor_desc d;
    gb_wire_set_tensor(&d, "obs", GB_DTYPE_FLOAT32, 2, shape, &err);
    const void *data[1] = {obs};
    gb_wire_msg reply;
    gb_wire_msg_init(&reply);
    if (rc == 0)
        rc = gb_infer_client_request(c, &d, data, 1, &reply, &err);
    if (rc == 0) {
        gb_tensor_view v = gb_wire_msg_tensor(&reply, 0);
        CHECK(((const float *)v.data)[2] == 3.0f);
    }
    gb_wire_msg_release(&reply);
    gb_infer_client_close(c);
    client_done(ctx, curve);
    return rc;
}

/* ---- the tests ------------------------------------------------------------------------------- */

static void test_unkeyed_clients_get_nothing(void)
{
    servers s;
    servers_open(&s);
    gb_error err = {0};
    CHECK(strncmp(gb_registry_server_endpoint(s.reg), "tcp://127.0.0.1:", 16) == 0);

    /* with the run's keys everything works; this client stays (a closed one unregisters) */
    gb_curve *good_curve;
    void *good_ctx = client_ctx(RIGHT_KEYS, &good_curve);
    gb_registry_client_opts o = {gb_registry_server_endpoint(s.reg), WAIT_MS, 100, 60000,
                                 GB_ROLE_ACTOR, 9};
    gb_registry_client *good = NULL;
    CHECK_OK(gb_registry_client_open(&good, good_ctx, &o, &err));
    CHECK_OK(gb_registry_register(good, "actor/0/good", "tcp://10.9.9.9:2", &err));
    CHECK_EQ_INT(try_register(&s, RIGHT_KEYS, "actor/1/closes"), 0);
    send_chunk(&s, RIGHT_KEYS);
    TEST_WAIT_UNTIL(atomic_load(&s.chunks) == 1, WAIT_MS);
    CHECK_EQ_INT(atomic_load(&s.chunks), 1);
    CHECK_EQ_INT(try_infer(&s, RIGHT_KEYS), 0);
    /* the server thread counts the request after its poll, which sent the reply: the client
     * can have its answer first (a CI run under load read 0 here) */
    TEST_WAIT_UNTIL(atomic_load(&s.served) == 1, WAIT_MS);
    CHECK_EQ_INT(atomic_load(&s.served), 1);
    /* The keyed client was accepted: its name registered, its chunk ingested, its request
     * served. The refusal count is not asked to be 0 here: the servers listen on ports the
     * system chose on 127.0.0.1, and a client of another test (ctest runs two at once) still
     * reconnecting to a port its own server has closed can reach one of them and be refused.
     * The bad clients below are counted from here on, each by the count's own increase. */
    uint64_t accepted = gb_curve_accepted(s.curve);
    CHECK(accepted >= 3);

    /* without them: no answer, nothing registered, ingested or served; each refusal counted */
    const client_kind bad[3] = {PLAIN, OTHER_RUN, UNKNOWN_CLIENT};
    const char *names[3] = {"actor/2/plain", "actor/3/other-run", "actor/4/unknown-client"};
    uint64_t refused = gb_curve_refused(s.curve);
    for (int i = 0; i < 3; i++) {
        CHECK_MSG(try_register(&s, bad[i], names[i]) == GB_ETIMEOUT, "registry, client %d", i);
        TEST_WAIT_UNTIL(gb_curve_refused(s.curve) > refused, WAIT_MS);
        CHECK_MSG(gb_curve_refused(s.curve) > refused, "registry refusal %d counted", i);
        refused = gb_curve_refused(s.curve);
        send_chunk(&s, bad[i]);
        TEST_WAIT_UNTIL(gb_curve_refused(s.curve) > refused, WAIT_MS);
        CHECK_MSG(gb_curve_refused(s.curve) > refused, "sample refusal %d counted", i);
        refused = gb_curve_refused(s.curve);
        CHECK_MSG(try_infer(&s, bad[i]) == GB_ETIMEOUT, "inference, client %d", i);
        TEST_WAIT_UNTIL(gb_curve_refused(s.curve) > refused, WAIT_MS);
        CHECK_MSG(gb_curve_refused(s.curve) > refused, "inference refusal %d counted", i);
        refused = gb_curve_refused(s.curve);
    }
    CHECK_EQ_INT(atomic_load(&s.chunks), 1);
    CHECK_EQ_INT(atomic_load(&s.served), 1);
    CHECK_EQ_INT(gb_curve_accepted(s.curve), accepted);

    /* the registry holds only the keyed client's name, and still serves keyed clients */
    gb_registry_entry *e = NULL;
    int n = 0;
    CHECK_OK(gb_registry_list(good, "actor/", 0, WAIT_MS, &e, &n, &err));
    CHECK_EQ_INT(n, 1);
    if (n == 1)
        CHECK(strcmp(e[0].name, "actor/0/good") == 0);
    free(e);
    gb_registry_client_close(good);
    client_done(good_ctx, good_curve);
    fprintf(stderr, "refused %llu connections, accepted %llu\n",
            (unsigned long long)gb_curve_refused(s.curve),
            (unsigned long long)gb_curve_accepted(s.curve));
    servers_close(&s);
}

/* The parameter service keeps its own monitor on PUB (peers, for bytes sent) and still has its
 * failed handshakes counted: a keyed subscriber is a peer, a plain one is refused and counted.
 * (CURVE's own monitor used to replace the service's: peers and bytes sent stayed 0.) */
static void test_param_service_peers_and_refusals(void)
{
    gb_error err = {0};
    void *ctx = zmq_ctx_new();
    gb_curve *curve = NULL;
    CHECK_OK(gb_curve_run_attach(&curve, ctx, keys_dir, &err));
    gb_param_service_opts o = {.pub_endpoint = "tcp://127.0.0.1:*",
                               .fetch_endpoint = "tcp://127.0.0.1:*"};
    gb_param_service *ps = NULL;
    CHECK_OK(gb_param_service_open(&ps, ctx, &o, &err));
    if (!ps) {
        client_done(ctx, curve);
        return;
    }
    const char *pub = gb_param_service_endpoint(ps, "pub");
    gb_curve *kc;
    void *kctx = client_ctx(RIGHT_KEYS, &kc);
    void *keyed = zmq_socket(kctx, ZMQ_SUB);
    int zero = 0;
    zmq_setsockopt(keyed, ZMQ_LINGER, &zero, sizeof zero);
    CHECK(gb_curve_connect(kctx, keyed, pub) == 0);
    double end = gb_now_s() + WAIT_MS / 1000.0;
    while (gb_param_service_get_stats(ps).pub_peers < 1 && gb_now_s() < end)
        gb_param_service_poll(ps, 20, &err);
    CHECK_EQ_INT(gb_param_service_get_stats(ps).pub_peers, 1);
    uint64_t refused = gb_curve_refused(curve);
    void *pctx = zmq_ctx_new();
    void *plain = zmq_socket(pctx, ZMQ_SUB);
    zmq_setsockopt(plain, ZMQ_LINGER, &zero, sizeof zero);
    CHECK(zmq_connect(plain, pub) == 0);
    end = gb_now_s() + WAIT_MS / 1000.0;
    while (gb_curve_refused(curve) == refused && gb_now_s() < end)
        gb_param_service_poll(ps, 20, &err);
    CHECK(gb_curve_refused(curve) > refused);
    zmq_close(plain);
    zmq_ctx_term(pctx);
    zmq_close(keyed);
    client_done(kctx, kc);
    gb_param_service_close(ps);
    client_done(ctx, curve);
}

/* ipc:// on an attached context is plain: a client without keys is served. */
static void test_ipc_stays_plain(void)
{
    gb_error err = {0};
    void *ctx = zmq_ctx_new();
    gb_curve *curve = NULL;
    CHECK_OK(gb_curve_run_attach(&curve, ctx, keys_dir, &err));
    char ep[600];
    snprintf(ep, sizeof ep, "ipc://%s/reg", dir);
    gb_registry_server_opts ro = {.endpoint = ep, .max_ttl_ms = 60000};
    servers s = {0};
    s.ctx = ctx;
    CHECK_OK(gb_registry_server_open(&s.reg, ctx, &ro, &err));
    pthread_create(&s.reg_thread, NULL, reg_main, &s);
    void *pctx = zmq_ctx_new();
    gb_registry_client_opts o = {ep, WAIT_MS, 100, 60000, GB_ROLE_ACTOR, 0};
    gb_registry_client *c = NULL;
    CHECK_OK(gb_registry_client_open(&c, pctx, &o, &err));
    CHECK_OK(gb_registry_register(c, "actor/0/ipc", "ipc:///x", &err));
    gb_registry_client_close(c);
    zmq_ctx_term(pctx);
    atomic_store(&s.stop, 1);
    pthread_join(s.reg_thread, NULL);
    gb_registry_server_close(s.reg);
    CHECK_EQ_INT(gb_curve_refused(curve), 0);
    gb_curve_detach(curve);
    zmq_ctx_term(ctx);
}

int main(void)
{
    st_tmpdir(dir, sizeof dir);
    st_tmpdir(other_dir, sizeof other_dir);
    snprintf(keys_dir, sizeof keys_dir, "%s/%s", dir, GB_CURVE_KEYS_DIR);
    snprintf(other_keys, sizeof other_keys, "%s/%s", other_dir, GB_CURVE_KEYS_DIR);
    TEST_RUN(test_key_files);
    TEST_RUN(test_unkeyed_clients_get_nothing);
    TEST_RUN(test_param_service_peers_and_refusals);
    TEST_RUN(test_ipc_stays_plain);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s %s", dir, other_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return test_main_result();
}
