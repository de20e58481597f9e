/* tests/launch/probe.c: a helper for the launch tests that look at a live or finished run from
 * outside, as another process on the machine could.
 *   probe forge ENDPOINT T OBS_DIM ACTORS
 *       sends to a trainer's sample ENDPOINT what no actor of the run sends: garbage bytes, a
 *       well-formed chunk (T steps of OBS_DIM float32 observations, discrete actions: the run's
 *       layout) from actor ACTORS (one past the run's last), a chunk from actor 0 with one more
 *       observation value than the layout has, and a frame larger than any chunk's; then waits
 *       for the trainer to drop the connection that carried the oversized frame. Exit 0 when
 *       all was sent and that connection was dropped.
 *   probe steps DIR
 *       prints the number of valid steps (rows with valid = 1) in every dataset file under DIR
 *       (what `gearbox run --record DIR` wrote: every chunk the trainers received).
 *   probe lookup REGISTRY NAME [KEYS_DIR]
 *       prints the endpoint registered as NAME (with the run's keys when KEYS_DIR is given).
 *   probe unkeyed ENDPOINT SERVER_KEY_FILE
 *       talks to a CURVE endpoint (a policy's inference ROUTER, a trainer's sample PULL, a
 *       registry) without the run's keys: a plain DEALER and a plain PUSH, then the same with
 *       CURVE, the server's right public key (read from SERVER_KEY_FILE's public line) and a
 *       client key pair of its own. Each sends a well-formed inference request and a sample
 *       chunk. Exit 0 when nothing came back within 3 s.
 *   probe infer ENDPOINT OBS_DIM STATE_SIZE
 *       asks a policy worker whose model has a recurrent core (STATE_SIZE floats of state a row)
 *       for 2 rows of actions as an actor would: without a state, with a state one float too
 *       wide, with a float64 state (each must be refused: GB_EPROTO), then with a well-formed
 *       state (answered with action, logp and the rows' next state, float32 [2, STATE_SIZE],
 *       finite, not all zeros). Exit 0 when all four went so.
 * forge and infer prove actor 0's identity (or GB_TEST_AS's) with GB_TEST_KEYS=RUN_DIR/keys
 * (test_as.h): the run's workers refuse a process without a worker's credential. */
#include "replay/formats/dataset.h"
#include "runtime/streams/chunk.h"
#include "runtime/base/clock.h"
#include "runtime/streams/curve.h"
#include "runtime/streams/inference.h"
#include "runtime/streams/registry.h"
#include "runtime/streams/sample_stream.h"
#include "runtime/streams/wire.h"
#include "test_as.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#define WAIT_S 10.0

static void *raw_push(void *ctx, const char *ep, void **monitor)
{
    void *s = zmq_socket(ctx, ZMQ_PUSH);
    int linger = 5000;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    if (monitor) {
        zmq_socket_monitor(s, "inproc://probe-monitor", ZMQ_EVENT_DISCONNECTED);
        *monitor = zmq_socket(ctx, ZMQ_PAIR);
        zmq_connect(*monitor, "inproc://probe-monitor");
    }
    if (gb_curve_connect(ctx, s, ep) != 0) { /* with the credential of test_as.h, if any */
        fprintf(stderr, "probe: connect %s: %s\n", ep, zmq_strerror(zmq_errno()));
        exit(1);
    }
    return s;
}

/* Sends one chunk of layout l (zeros) from actor index. Returns 0 or the error. */
static int send_chunk(void *ctx, const char *ep, const gb_chunk_layout *l, int index)
{
    gb_error err = {0};
    const char *eps[1] = {ep};
    gb_sample_sender_opts o = {.endpoints = eps, .n_endpoints = 1, .hwm = 16,
                               .send_timeout_ms = 5000, .role = GB_ROLE_ACTOR, .index = index};
    gb_sample_sender *s;
    int rc = gb_sample_sender_open(&s, ctx, &o, &err);
    if (rc)
        goto out;
    unsigned char *block = calloc(1, l->block_bytes);
    gb_wire_payload p[GB_CHUNK_NCOLS];
    for (int c = 0; c < l->ncols; c++)
        p[c] = (gb_wire_payload){block + l->offset[c], NULL, NULL, NULL};
    rc = block ? gb_sample_send(s, 0, l->desc, p, l->ncols, &err)
               : gb_error_set(&err, GB_ENOMEM, "out of memory");
    gb_sample_sender_close(s); /* lingers until it is delivered */
    free(block);
out:
    if (rc)
        fprintf(stderr, "probe: chunk from actor %d: %s\n", index, err.msg);
    return rc;
}

static int forge(const char *ep, long long T, long long obs_dim, int actors)
{
    gb_error err = {0};
    void *ctx = zmq_ctx_new();
    gb_curve *as = test_as_attach(ctx, "actor/0");
    int failed = 0;

    /* garbage: one frame that is no wire header */
    void *g = raw_push(ctx, ep, NULL);
    char junk[64];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (char)(i * 37 + 11);
    failed |= zmq_send(g, junk, sizeof junk, 0) < 0;
    zmq_close(g);
    printf("sent garbage bytes\n");

    /* well-formed chunks the run's trainers must not take */
    gb_chunk_layout l, wrong;
    int64_t shape[1] = {obs_dim}, wider[1] = {obs_dim + 1};
    if (gb_chunk_layout_init(&l, T, GB_DTYPE_FLOAT32, 1, shape, 1, 1, 0, &err) ||
        gb_chunk_layout_init(&wrong, T, GB_DTYPE_FLOAT32, 1, wider, 1, 1, 0, &err)) {
        fprintf(stderr, "probe: %s\n", err.msg);
        return 1;
    }
    failed |= send_chunk(ctx, ep, &l, actors) != 0;
    printf("sent a chunk from actor %d (no such actor)\n", actors);
    failed |= send_chunk(ctx, ep, &wrong, 0) != 0;
    printf("sent a chunk of %lld-value observations from actor 0\n", obs_dim + 1);

    /* a frame larger than any chunk's: the trainer drops the connection before reading it */
    void *mon;
    void *big = raw_push(ctx, ep, &mon);
    gb_wire_header h;
    gb_wire_header_init(&h, GB_MSG_SAMPLE, GB_ROLE_ACTOR, 0);
    h.ntensors = 1;
    int64_t n = (int64_t)l.block_bytes + (4 << 20);
    gb_wire_set_tensor(&h.tensors[0], "obs", GB_DTYPE_UINT8, 1, &n, &err);
    void *bytes = calloc(1, (size_t)n);
    gb_wire_payload p = {bytes, NULL, NULL, NULL};
    if (!bytes || gb_wire_send(big, NULL, 0, &h, &p, 0, &err)) {
        fprintf(stderr, "probe: oversized frame: %s\n", bytes ? err.msg : "out of memory");
        failed = 1;
    }
    int dropped = 0;
    for (double end = gb_now_s() + WAIT_S; !dropped && gb_now_s() < end;) {
        zmq_pollitem_t it = {mon, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 100) > 0) {
            zmq_msg_t m;
            zmq_msg_init(&m);
            if (zmq_msg_recv(&m, mon, 0) >= 0) {
                uint16_t ev = 0;
                memcpy(&ev, zmq_msg_data(&m), sizeof ev);
                dropped = ev == ZMQ_EVENT_DISCONNECTED;
                while (zmq_msg_more(&m) && zmq_msg_recv(&m, mon, 0) >= 0)
                    ;
            }
            zmq_msg_close(&m);
        }
    }
    printf("sent a %lld-byte frame: %s\n", (long long)n,
           dropped ? "the trainer dropped the connection" : "the connection stayed up");
    free(bytes);
    zmq_socket_monitor(big, NULL, 0);
    zmq_close(mon);
    int zero = 0;
    zmq_setsockopt(big, ZMQ_LINGER, &zero, sizeof zero);
    zmq_close(big);
    test_as_detach(as);
    zmq_ctx_term(ctx);
    return failed || !dropped;
}

static int steps(const char *dir)
{
    gb_error err = {0};
    char **paths;
    int n;
    if (gb_dataset_list(dir, &paths, &n, &err)) {
        fprintf(stderr, "probe: %s\n", err.msg);
        return 1;
    }
    long long total = 0;
    for (int i = 0; i < n; i++) {
        gb_dataset_reader *r;
        if (gb_dataset_reader_open(&r, paths[i], &err)) {
            fprintf(stderr, "probe: %s\n", err.msg);
            return 1;
        }
        const gb_dataset_schema *s = gb_dataset_reader_schema(r);
        int v = -1;
        for (int c = 0; c < s->ncolumns; c++)
            if (strcmp(s->columns[c].name, "valid") == 0)
                v = c;
        if (v < 0 || s->columns[v].dtype != GB_DTYPE_UINT8) {
            fprintf(stderr, "probe: %s has no uint8 column 'valid'\n", paths[i]);
            return 1;
        }
        uint64_t bytes = gb_dataset_column_bytes(s, v);
        unsigned char *valid = malloc(bytes);
        void *dst[GB_REPLAY_MAX_COLUMNS] = {0};
        dst[v] = valid;
        for (int64_t k = 0; valid && k < gb_dataset_reader_count(r); k++) {
            if (gb_dataset_reader_read(r, k, dst, NULL, NULL, &err)) {
                fprintf(stderr, "probe: %s\n", err.msg);
                return 1;
            }
            for (uint64_t b = 0; b < bytes; b++)
                total += valid[b] != 0;
        }
        free(valid);
        gb_dataset_reader_close(r);
    }
    free(paths);
    printf("%lld\n", total);
    return 0;
}

static int lookup(const char *registry, const char *name, const char *keys_dir)
{
    gb_error err = {0};
    void *ctx = zmq_ctx_new();
    gb_curve *curve = NULL;
    gb_registry_client *c = NULL;
    gb_registry_client_opts o = {registry, 10000, 0, 60000, GB_ROLE_CLIENT, 0};
    char ep[GB_REGISTRY_ENDPOINT_MAX];
    int rc = keys_dir ? gb_curve_run_attach(&curve, ctx, keys_dir, &err) : 0;
    if (!keys_dir)
        curve = test_as_attach(ctx, "actor/0"); /* a worker's credential (ipc), if given */
    if (rc == 0)
        rc = gb_registry_client_open(&c, ctx, &o, &err);
    if (rc == 0)
        rc = gb_registry_lookup(c, name, ep, sizeof ep, 10000, &err);
    if (rc == 0)
        printf("%s\n", ep);
    else
        fprintf(stderr, "probe lookup %s: %s\n", name, err.msg);
    gb_registry_client_close(c);
    gb_curve_detach(curve);
    zmq_ctx_term(ctx);
    return rc ? 1 : 0;
}

/* A raw socket of type on ctx connected to ep: plain, or with CURVE and a fresh client pair. */
static void *unkeyed_socket(void *ctx, int type, const char *ep, const char *server_public)
{
    void *s = zmq_socket(ctx, type);
    int linger = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    if (server_public) {
        char pub[41], sec[41];
        zmq_curve_keypair(pub, sec);
        zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, server_public, 40);
        zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, pub, 40);
        zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, sec, 40);
    }
    if (zmq_connect(s, ep) != 0) {
        fprintf(stderr, "probe: connect %s: %s\n", ep, zmq_strerror(zmq_errno()));
        exit(1);
    }
    return s;
}

static int unkeyed(const char *ep, const char *server_key_file)
{
    gb_error err = {0};
    char server_public[GB_CURVE_KEY_Z85];
    if (gb_curve_keypair_read(server_key_file, server_public, NULL, &err)) {
        fprintf(stderr, "probe: %s\n", err.msg);
        return 1;
    }
    void *ctx = zmq_ctx_new();
    int answered = 0;
    for (int keyed = 0; keyed < 2; keyed++) {
        void *dealer = unkeyed_socket(ctx, ZMQ_DEALER, ep, keyed ? server_public : NULL);
        void *push = unkeyed_socket(ctx, ZMQ_PUSH, ep, keyed ? server_public : NULL);
        gb_wire_header h;
        gb_wire_header_init(&h, GB_MSG_INFER_REQUEST, GB_ROLE_ACTOR, 0);
        float obs[4] = {0};
        int64_t shape[2] = {1, 4};
        gb_wire_set_tensor(&h.tensors[0], "obs", GB_DTYPE_FLOAT32, 2, shape, &err);
        h.ntensors = 1;
        gb_wire_payload p = {obs, 0, 0, 0};
        /* never blocks: with no completed handshake there is nothing to send on */
        gb_wire_send(dealer, NULL, 0, &h, &p, ZMQ_DONTWAIT, &err);
        h.type = GB_MSG_SAMPLE;
        gb_wire_send(push, NULL, 0, &h, &p, ZMQ_DONTWAIT, &err);
        zmq_pollitem_t it = {.socket = dealer, .events = ZMQ_POLLIN};
        if (zmq_poll(&it, 1, 3000) > 0) {
            answered = 1;
            fprintf(stderr, "probe: %s answered a %s client\n", ep, keyed ? "wrongly keyed"
                                                                        : "plain");
        }
        zmq_close(dealer);
        zmq_close(push);
    }
    zmq_ctx_term(ctx);
    return answered;
}

/* One request of obs [2, obs_dim] zeros and, when width > 0, a state [2, width] of state_dtype
 * (values 0.1). Returns the client's answer (0 or the server's code). */
static int ask(gb_infer_client *c, int64_t obs_dim, gb_dtype state_dtype, int64_t width,
               gb_wire_msg *reply, gb_error *err)
{
    static float obs[2 * 64];
    static double state[2 * 4096];
    for (size_t i = 0; i < sizeof state / sizeof state[0]; i++)
        state[i] = 0.1;
    static float state32[2 * 4096];
    for (size_t i = 0; i < sizeof state32 / sizeof state32[0]; i++)
        state32[i] = 0.1f;
    gb_tensor_desc d[2];
    const void *data[2] = {obs, state_dtype == GB_DTYPE_FLOAT64 ? (void *)state : state32};
    int64_t os[2] = {2, obs_dim}, ss[2] = {2, width};
    gb_wire_set_tensor(&d[0], "obs", GB_DTYPE_FLOAT32, 2, os, err);
    int n = 1;
    if (width > 0 && gb_wire_set_tensor(&d[n++], "state", state_dtype, 2, ss, err) != 0)
        return GB_EINVAL;
    return gb_infer_client_request(c, d, data, n, reply, err);
}

static int infer(const char *ep, long long obs_dim, long long S)
{
    if (obs_dim < 1 || obs_dim > 64 || S < 1 || S > 4095) {
        fprintf(stderr, "probe infer: OBS_DIM 1..64, STATE_SIZE 1..4095\n");
        return 2;
    }
    gb_error err = {0};
    void *ctx = zmq_ctx_new();
    gb_curve *as = test_as_attach(ctx, "actor/0");
    const char *eps[1] = {ep};
    gb_infer_client_opts o = {.endpoints = eps, .n_endpoints = 1, .timeout_ms = 10000,
                              .role = GB_ROLE_ACTOR, .index = 0};
    gb_infer_client *c = NULL;
    gb_wire_msg reply;
    gb_wire_msg_init(&reply);
    int failed = 0;
    if (gb_infer_client_open(&c, ctx, &o, &err)) {
        fprintf(stderr, "probe: %s\n", err.msg);
        return 1;
    }
    const struct { const char *what; gb_dtype dt; int64_t width; } bad[3] = {
        {"without a state", GB_DTYPE_FLOAT32, 0},
        {"with a state one float too wide", GB_DTYPE_FLOAT32, S + 1},
        {"with a float64 state", GB_DTYPE_FLOAT64, S}};
    for (int i = 0; i < 3; i++) {
        int rc = ask(c, obs_dim, bad[i].dt, bad[i].width, &reply, &err);
        printf("a request %s: %s (%d)%s%s\n", bad[i].what, rc ? "refused" : "answered", rc,
               rc ? ": " : "", rc ? err.msg : "");
        failed |= rc != GB_EPROTO;
        gb_wire_msg_release(&reply);
    }
    int rc = ask(c, obs_dim, GB_DTYPE_FLOAT32, S, &reply, &err);
    int is = rc ? -1 : gb_wire_msg_find(&reply, "state");
    int ok = is >= 0 && gb_wire_msg_find(&reply, "action") >= 0 &&
             gb_wire_msg_find(&reply, "logp") >= 0;
    if (ok) {
        const gb_tensor_desc *d = &reply.hdr.tensors[is];
        gb_tensor_view v = gb_wire_msg_tensor(&reply, is);
        ok = d->dtype == GB_DTYPE_FLOAT32 && d->rank == 2 && d->shape[0] == 2 &&
             d->shape[1] == S && v.bytes == (size_t)(2 * S) * sizeof(float);
        int nonzero = 0;
        for (int64_t k = 0; ok && k < 2 * S; k++) {
            float x;
            memcpy(&x, (const char *)v.data + k * 4, 4);
            ok &= x == x && x - x == 0; /* finite */
            nonzero |= x != 0;
        }
        ok &= nonzero;
    }
    printf("a request with a state: %s\n", rc ? err.msg : ok ? "answered with the next state"
                                                             : "answered, without a good state");
    failed |= !ok;
    gb_wire_msg_release(&reply);
    gb_infer_client_close(c);
    test_as_detach(as);
    zmq_ctx_term(ctx);
    return failed;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "infer") == 0)
        return infer(argv[2], atoll(argv[3]), atoll(argv[4]));
    if ((argc == 4 || argc == 5) && strcmp(argv[1], "lookup") == 0)
        return lookup(argv[2], argv[3], argc == 5 ? argv[4] : NULL);
    if (argc == 4 && strcmp(argv[1], "unkeyed") == 0)
        return unkeyed(argv[2], argv[3]);
    if (argc == 6 && strcmp(argv[1], "forge") == 0)
        return forge(argv[2], atoll(argv[3]), atoll(argv[4]), atoi(argv[5]));
    if (argc == 3 && strcmp(argv[1], "steps") == 0)
        return steps(argv[2]);
    fprintf(stderr, "usage: probe forge ENDPOINT T OBS_DIM ACTORS | probe steps DIR |\n"
                    "       probe lookup REGISTRY NAME [KEYS_DIR] |\n"
                    "       probe unkeyed ENDPOINT SERVER_KEY_FILE |\n"
                    "       probe infer ENDPOINT OBS_DIM STATE_SIZE\n");
    return 2;
}
