/* tests/launch/forger.c: a helper for the launch tests that speak to a live run as one of its
 * workers would, saying what that worker did not do (issue 35: a report is a claim).
 *   forger report ENDPOINT ROLE INDEX INCARNATION EPISODES RETURN LENGTH [NAME=VALUE ...]
 *       sends one metrics report to the launcher's metrics ENDPOINT as worker ROLE (actor,
 *       trainer, ...) INDEX of process incarnation INCARNATION, holding EPISODES finished
 *       episodes of return RETURN and length LENGTH each and the named values (nan, -1e18 as
 *       strtod reads them). Exit 0 when it was sent.
 *   forger chunks ENDPOINT T OBS_DIM INDEX COUNT REWARD
 *       sends COUNT well-formed chunks of the run's layout (T steps of OBS_DIM float32
 *       observations, discrete actions 0, every row valid) stamped as actor INDEX to a trainer's
 *       sample ENDPOINT, each row's reward REWARD. Exit 0 when all were sent.
 *   forger register REGISTRY ROLE INDEX NAME ENDPOINT
 *       registers NAME -> ENDPOINT at the run's REGISTRY as worker ROLE INDEX. Exit 0 when the
 *       registry took it, 3 when it refused it (the refusal printed).
 *   forger watch REGISTRY ROLE INDEX
 *       sends one run-control watch as worker ROLE INDEX confirming it has flushed (a watch only
 *       an actor at the end of a run sends). Exit 0 when it was answered as taken, 3 refused.
 *   forger infer ENDPOINT INDEX OBS_DIM
 *       asks a policy worker's inference ENDPOINT for one row of actions as actor INDEX
 *       (observation zeros). Exit 0 when answered, 3 when refused.
 *   forger params ENDPOINT VERSION
 *       publishes parameter version VERSION (one float32 tensor "w" of 64 zeros) to the
 *       parameter service's input ENDPOINT as trainer 0. Exit 0 when it was sent.
 * With GB_TEST_KEYS=RUN_DIR/keys it proves the identity it claims (ROLE/INDEX, actor/INDEX), or
 * GB_TEST_AS's (test_as.h): a worker's credential, used to speak as itself or as another. */
#include "runtime/base/clock.h"
#include "runtime/run/metrics.h"
#include "runtime/streams/chunk.h"
#include "runtime/streams/inference.h"
#include "runtime/streams/params.h"
#include "runtime/streams/registry.h"
#include "runtime/streams/runctl.h"
#include "runtime/streams/wire_messages.h"
#include "runtime/streams/wire_schema.h"
#include "runtime/streams/sample_stream.h"
#include "runtime/streams/wire.h"
#include "test_as.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

static int report(const char *ep, char **argv, int argc)
{
    int role = gb_role_from_name(argv[0]);
    if (role <= 0) {
        fprintf(stderr, "forger: no role '%s'\n", argv[0]);
        return 2;
    }
    void *ctx = zmq_ctx_new();
    char self[GB_CURVE_ID_MAX];
    snprintf(self, sizeof self, "%s/%d", argv[0], atoi(argv[1]));
    gb_curve *curve = test_as_attach(ctx, self);
    gb_error err = {0};
    gb_metrics_sender *s;
    int rc = gb_metrics_sender_open(&s, ctx, ep, role, atoi(argv[1]), &err);
    if (rc) {
        fprintf(stderr, "forger: %s\n", err.msg);
        return 1;
    }
    gb_metrics_sender_set_incarnation(s, atoi(argv[2]));
    for (int i = 0, n = atoi(argv[3]); i < n; i++)
        gb_metrics_episode(s, strtof(argv[4], NULL), atoll(argv[5]));
    for (int i = 6; i < argc; i++) {
        char name[GB_METRICS_NAME_MAX];
        const char *eq = strchr(argv[i], '=');
        if (!eq || eq == argv[i] || (size_t)(eq - argv[i]) >= sizeof name) {
            fprintf(stderr, "forger: '%s' is no NAME=VALUE\n", argv[i]);
            return 2;
        }
        memcpy(name, argv[i], (size_t)(eq - argv[i]));
        name[eq - argv[i]] = '\0';
        /* gb_metrics_set sends an infinity as NaN: an honest sender would; NaN itself goes */
        gb_metrics_set(s, name, strtod(eq + 1, NULL));
    }
    rc = gb_metrics_send(s, &err);
    if (rc)
        fprintf(stderr, "forger: send: %s\n", err.msg);
    gb_metrics_sender_close(s); /* lingers until it is delivered */
    test_as_detach(curve);
    zmq_ctx_term(ctx);
    if (rc == 0)
        printf("sent a report as %s %s (incarnation %s)\n", argv[0], argv[1], argv[2]);
    return rc ? 1 : 0;
}

static int chunks(const char *ep, long long T, long long obs_dim, int index, long long count,
                  float reward)
{
    gb_error err = {0};
    gb_chunk_layout l;
    int64_t shape[1] = {obs_dim};
    if (gb_chunk_layout_init(&l, T, GB_DTYPE_FLOAT32, 1, shape, 1, 1, 0, &err)) {
        fprintf(stderr, "forger: %s\n", err.msg);
        return 2;
    }
    void *ctx = zmq_ctx_new();
    char self[GB_CURVE_ID_MAX];
    snprintf(self, sizeof self, "actor/%d", index);
    gb_curve *curve = test_as_attach(ctx, self);
    const char *eps[1] = {ep};
    gb_sample_sender_opts o = {.endpoints = eps, .n_endpoints = 1, .hwm = 16,
                               .send_timeout_ms = 10000, .role = GB_ROLE_ACTOR, .index = index};
    gb_sample_sender *s = NULL;
    unsigned char *block = calloc(1, l.block_bytes);
    int rc = block ? gb_sample_sender_open(&s, ctx, &o, &err)
                   : gb_error_set(&err, GB_ENOMEM, "out of memory");
    if (rc == 0) {
        float *r = (float *)(block + l.offset[GB_CHUNK_REWARD]);
        uint8_t *valid = block + l.offset[GB_CHUNK_VALID];
        for (long long t = 0; t < T; t++) {
            r[t] = reward;
            valid[t] = 1;
        }
    }
    gb_wire_payload p[GB_CHUNK_NCOLS];
    for (int c = 0; block && c < l.ncols; c++)
        p[c] = (gb_wire_payload){block + l.offset[c], NULL, NULL, NULL};
    long long sent = 0;
    for (; rc == 0 && sent < count; sent++)
        rc = gb_sample_send(s, 0, l.desc, p, l.ncols, &err);
    gb_sleep_ms(2000); /* a close right after the sends loses some of them on ipc (seen: 22 of
                          200), linger or not */
    gb_sample_sender_close(s);
    free(block);
    test_as_detach(curve);
    zmq_ctx_term(ctx);
    if (rc)
        fprintf(stderr, "forger: chunk %lld as actor %d: %s\n", sent, index, err.msg);
    else
        printf("sent %lld chunks as actor %d, reward %g\n", sent, index, (double)reward);
    return rc ? 1 : 0;
}

/* A context speaking as ROLE/INDEX (or GB_TEST_AS); *role -1 for an unknown role name. */
static void *context_as(const char *role_name, int index, int *role, gb_curve **curve)
{
    char self[GB_CURVE_ID_MAX];
    void *ctx = zmq_ctx_new();
    *role = gb_role_from_name(role_name);
    snprintf(self, sizeof self, "%s/%d", role_name, index);
    *curve = test_as_attach(ctx, self);
    return ctx;
}

static void context_done(void *ctx, gb_curve *curve)
{
    test_as_detach(curve);
    zmq_ctx_term(ctx);
}

static int reg(const char *ep, const char *role_name, int index, const char *name,
               const char *endpoint)
{
    int role;
    gb_curve *curve;
    void *ctx = context_as(role_name, index, &role, &curve);
    gb_registry_client_opts o = {ep, 5000, 0, 60000, role, index};
    gb_registry_client *c = NULL;
    gb_error err = {0};
    int rc = gb_registry_client_open(&c, ctx, &o, &err);
    if (rc == 0)
        rc = gb_registry_register(c, name, endpoint, &err);
    printf("register %s -> %s as %s %d: %s\n", name, endpoint, role_name, index,
           rc ? err.msg : "taken");
    gb_registry_client_close(c);
    context_done(ctx, curve);
    return rc == 0 ? 0 : rc == GB_ETIMEOUT ? 1 : 3;
}

static int watch(const char *ep, const char *role_name, int index)
{
    int role, rc = 1;
    gb_curve *curve;
    void *ctx = context_as(role_name, index, &role, &curve);
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0, tmo = 5000;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
    gb_wire_header h;
    gb_wire_header_init(&h, GB_MSG_RUN_WATCH, role, index);
    gb_msg_run_watch w = {GB_RUN_RUNNING, GB_RUN_FLUSHING, -1, -1, -1};
    gb_error err = {0};
    gb_wire_msg reply;
    gb_wire_msg_init(&reply);
    if (gb_curve_connect(ctx, s, ep) == 0 && gb_wire_schema_write(&gb_schema_run_watch, &w, &h,
                                                                  &err) == 0 &&
        gb_wire_send(s, NULL, 0, &h, NULL, 0, &err) == 0 &&
        gb_wire_recv(s, &reply, 0, 0, &err) == 0) {
        rc = reply.hdr.status == 0 ? 0 : 3;
        printf("watch as %s %d: %s %s\n", role_name, index, rc ? "refused:" : "taken",
               reply.hdr.text);
    } else {
        printf("watch as %s %d: no answer (%s)\n", role_name, index, err.msg);
    }
    gb_wire_msg_release(&reply);
    zmq_close(s);
    context_done(ctx, curve);
    return rc;
}

static int infer1(const char *ep, int index, long long obs_dim)
{
    int role;
    gb_curve *curve;
    void *ctx = context_as("actor", index, &role, &curve);
    const char *eps[1] = {ep};
    gb_infer_client_opts o = {.endpoints = eps, .n_endpoints = 1, .timeout_ms = 5000,
                              .role = GB_ROLE_ACTOR, .index = index};
    gb_infer_client *c = NULL;
    gb_error err = {0};
    gb_wire_msg reply;
    gb_wire_msg_init(&reply);
    static float obs[64];
    int64_t shape[2] = {1, obs_dim < 64 ? obs_dim : 64};
    gb_tensor_desc d;
    const void *data[1] = {obs};
    int rc = gb_infer_client_open(&c, ctx, &o, &err);
    if (rc == 0)
        rc = gb_wire_set_tensor(&d, "obs", GB_DTYPE_FLOAT32, 2, shape, &err);
    if (rc == 0)
        rc = gb_infer_client_request(c, &d, data, 1, &reply, &err);
    printf("an inference request as actor %d: %s\n", index, rc ? err.msg : "answered");
    gb_wire_msg_release(&reply);
    gb_infer_client_close(c);
    context_done(ctx, curve);
    return rc == 0 ? 0 : rc == GB_ETIMEOUT ? 1 : 3;
}

static int params(const char *ep, long long version)
{
    int role;
    gb_curve *curve;
    void *ctx = context_as("trainer", 0, &role, &curve);
    gb_param_publisher_opts o = {.service_endpoint = ep, .chunk_bytes = 1 << 20,
                                 .timeout_ms = 5000, .role = GB_ROLE_TRAINER, .index = 0};
    gb_param_publisher *p = NULL;
    gb_param_entry e = {.name = "w", .dtype = GB_DTYPE_FLOAT32, .rank = 1, .shape = {64}};
    static float zeros[64];
    gb_error err = {0};
    int rc = gb_param_publisher_open(&p, ctx, &o, &err);
    if (rc == 0)
        rc = gb_param_publish(p, version, &e, 1, zeros, sizeof zeros, &err);
    gb_sleep_ms(1000); /* delivered before the close */
    gb_param_publisher_close(p);
    context_done(ctx, curve);
    printf("parameters version %lld as trainer 0: %s\n", version, rc ? err.msg : "sent");
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc >= 9 && strcmp(argv[1], "report") == 0)
        return report(argv[2], argv + 3, argc - 3);
    if (argc == 8 && strcmp(argv[1], "chunks") == 0)
        return chunks(argv[2], atoll(argv[3]), atoll(argv[4]), atoi(argv[5]), atoll(argv[6]),
                      strtof(argv[7], NULL));
    if (argc == 7 && strcmp(argv[1], "register") == 0)
        return reg(argv[2], argv[3], atoi(argv[4]), argv[5], argv[6]);
    if (argc == 5 && strcmp(argv[1], "watch") == 0)
        return watch(argv[2], argv[3], atoi(argv[4]));
    if (argc == 4 && strcmp(argv[1], "params") == 0)
        return params(argv[2], atoll(argv[3]));
    if (argc == 5 && strcmp(argv[1], "infer") == 0)
        return infer1(argv[2], atoi(argv[3]), atoll(argv[4]));
    fprintf(stderr, "usage: forger report ENDPOINT ROLE INDEX INCARNATION EPISODES RETURN "
            "LENGTH [NAME=VALUE ...]\n"
            "       forger chunks ENDPOINT T OBS_DIM INDEX COUNT REWARD\n"
            "       forger register REGISTRY ROLE INDEX NAME ENDPOINT\n"
            "       forger watch REGISTRY ROLE INDEX\n"
            "       forger infer ENDPOINT INDEX OBS_DIM\n"
            "       forger params ENDPOINT VERSION\n");
    return 2;
}
