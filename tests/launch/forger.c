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
 *       sample ENDPOINT, each row's reward REWARD. Exit 0 when all were sent. */
#include "runtime/base/clock.h"
#include "runtime/run/metrics.h"
#include "runtime/streams/chunk.h"
#include "runtime/streams/sample_stream.h"
#include "runtime/streams/wire.h"

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
    zmq_ctx_term(ctx);
    if (rc)
        fprintf(stderr, "forger: chunk %lld as actor %d: %s\n", sent, index, err.msg);
    else
        printf("sent %lld chunks as actor %d, reward %g\n", sent, index, (double)reward);
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc >= 9 && strcmp(argv[1], "report") == 0)
        return report(argv[2], argv + 3, argc - 3);
    if (argc == 8 && strcmp(argv[1], "chunks") == 0)
        return chunks(argv[2], atoll(argv[3]), atoll(argv[4]), atoi(argv[5]), atoll(argv[6]),
                      strtof(argv[7], NULL));
    fprintf(stderr, "usage: forger report ENDPOINT ROLE INDEX INCARNATION EPISODES RETURN "
            "LENGTH [NAME=VALUE ...]\n"
            "       forger chunks ENDPOINT T OBS_DIM INDEX COUNT REWARD\n");
    return 2;
}
