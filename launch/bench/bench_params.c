/* launch/bench/bench_params.c: the parameter stream's case of `gearbox bench streams`: one
 * publisher through the parameter service to several subscribers, against a raw ZeroMQ PUB/SUB
 * broadcast of the same bytes. */
#include "launch/bench/bench.h"
#include "runtime/base/clock.h"
#include "runtime/streams/params.h"
#include "runtime/streams/wire.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NSUBS 4

typedef struct sub_ctl {
    gb_param_subscriber *s;
    int64_t want;
    atomic_int go, stop;
    double t_done;
    int failed;
} sub_ctl;

static void *param_sub_thread(void *arg)
{
    sub_ctl *c = arg;
    gb_error err;
    while (!atomic_load(&c->stop)) {
        if (!atomic_load(&c->go)) {
            gb_param_subscriber_poll(c->s, 5, &err);
            continue;
        }
        if (gb_param_subscriber_wait(c->s, c->want, 60000, &err)) {
            c->failed = 1;
            fprintf(stderr, "bench streams: subscriber: %s\n", err.msg);
        }
        c->t_done = gb_now_s();
        atomic_store(&c->go, 0);
    }
    return NULL;
}

static void *param_service_thread(void *arg)
{
    gb_bench_thread *t = arg;
    gb_error err;
    while (!atomic_load(&t->stop))
        gb_param_service_poll(t->obj, 20, &err);
    return NULL;
}

typedef struct raw_sub {
    void *sock;
    size_t expect;
    double t_done;
} raw_sub;

static void *raw_sub_thread(void *arg)
{
    raw_sub *r = arg;
    zmq_msg_t m;
    zmq_msg_init(&m);
    size_t got = 0;
    int to = 10000;
    zmq_setsockopt(r->sock, ZMQ_RCVTIMEO, &to, sizeof to);
    while (got < r->expect) {
        if (zmq_msg_recv(&m, r->sock, 0) < 0)
            break;
        got += zmq_msg_size(&m);
    }
    r->t_done = gb_now_s();
    zmq_msg_close(&m);
    return NULL;
}

/* What one broadcast measured. */
typedef struct params_result {
    double best;                 /* gearbox: the fastest round, publish to the last verified */
    double raw;                  /* raw PUB/SUB: first send to the last byte received */
    unsigned long long repaired; /* chunks the subscribers fetched again */
    int failed;
} params_result;

/* rounds versions of data (bytes, one tensor) from a publisher to the subscribers, each round
 * timed from the publish to the last subscriber holding the whole version. */
static void publish_rounds(gb_param_publisher *p, sub_ctl *subs, int rounds,
                           const unsigned char *data, size_t bytes, params_result *r)
{
    gb_error err;
    gb_param_entry e;
    memset(&e, 0, sizeof e);
    snprintf(e.name, sizeof e.name, "weights");
    e.dtype = GB_DTYPE_UINT8;
    e.rank = 1;
    e.shape[0] = (int64_t)bytes;
    r->best = 1e9;
    for (int v = 1; v <= rounds; v++) {
        for (int i = 0; i < NSUBS; i++) {
            subs[i].want = v;
            atomic_store(&subs[i].go, 1);
        }
        double t0 = gb_now_s();
        if (gb_param_publish(p, v, &e, 1, data, bytes, &err)) {
            fprintf(stderr, "bench streams: publish: %s\n", err.msg);
            r->failed = 1;
            break;
        }
        double last = t0;
        for (int i = 0; i < NSUBS; i++) {
            while (atomic_load(&subs[i].go))
                gb_sleep_ms(1);
            r->failed |= subs[i].failed;
            if (subs[i].t_done > last)
                last = subs[i].t_done;
        }
        if (last - t0 < r->best)
            r->best = last - t0;
    }
}

/* Opens NSUBS subscribers of svc, each with its thread. Returns how many were opened (all of
 * them, or fewer after printing why). */
static int open_subscribers(gb_bench_net *b, gb_param_service *svc, sub_ctl *subs,
                            pthread_t *th)
{
    gb_error err;
    for (int i = 0; i < NSUBS; i++) {
        gb_param_subscriber_opts o = {gb_param_service_endpoint(svc, "pub"),
                                      gb_param_service_endpoint(svc, "fetch"),
                                      5000, 1000, 4, 0, GB_ROLE_POLICY, i, 0, 0, 0};
        memset(&subs[i], 0, sizeof subs[i]);
        if (gb_param_subscriber_open(&subs[i].s, b->ctx, &o, &err)) {
            fprintf(stderr, "bench streams: %s\n", err.msg);
            return i;
        }
        pthread_create(&th[i], NULL, param_sub_thread, &subs[i]);
    }
    return NSUBS;
}

/* gearbox: a publisher (chunks of chunk bytes) through the parameter service to NSUBS
 * subscribers; b->quick: 1 round, else the best of 3. Returns 0, or 1 when it could not start
 * (the message on stderr). */
static int gearbox_broadcast(gb_bench_net *b, const unsigned char *data, size_t bytes,
                             size_t chunk, params_result *r)
{
    gb_error err;
    char in[256], pub[256], fetch[256];
    gb_bench_net_endpoint(b, in, sizeof in, "bench-params-in");
    gb_bench_net_endpoint(b, pub, sizeof pub, "bench-params-pub");
    gb_bench_net_endpoint(b, fetch, sizeof fetch, "bench-params-fetch");
    gb_param_service_opts so = {in, pub, fetch, 0, GB_ROLE_PARAMS, 0, 0, 0};
    gb_param_service *svc;
    if (gb_param_service_open(&svc, b->ctx, &so, &err)) {
        fprintf(stderr, "bench streams: %s\n", err.msg);
        return 1;
    }
    gb_bench_thread st = {0};
    st.obj = svc;
    pthread_t sth, subth[NSUBS];
    pthread_create(&sth, NULL, param_service_thread, &st);
    static sub_ctl subs[NSUBS];
    int nsubs = open_subscribers(b, svc, subs, subth);
    gb_param_publisher_opts po = {gb_param_service_endpoint(svc, "in"), chunk, 30000,
                                  GB_ROLE_TRAINER, 0};
    gb_param_publisher *p = NULL;
    int rc = nsubs < NSUBS;
    if (!rc && gb_param_publisher_open(&p, b->ctx, &po, &err)) {
        fprintf(stderr, "bench streams: %s\n", err.msg);
        rc = 1;
    }
    if (!rc) {
        gb_sleep_ms(300); /* subscribers connected */
        publish_rounds(p, subs, b->quick ? 1 : 3, data, bytes, r);
    }
    for (int i = 0; i < nsubs; i++) {
        atomic_store(&subs[i].stop, 1);
        pthread_join(subth[i], NULL);
        r->repaired += gb_param_subscriber_get_stats(subs[i].s).repaired;
        gb_param_subscriber_close(subs[i].s);
    }
    atomic_store(&st.stop, 1);
    pthread_join(sth, NULL);
    gb_param_publisher_close(p);
    gb_param_service_close(svc);
    return rc;
}

/* raw: PUSH to a forwarder is skipped; PUB of the same chunks to NSUBS SUBs, timed from the
 * first send to the last subscriber's last byte into r->raw. */
static void raw_broadcast(gb_bench_net *b, const unsigned char *data, size_t bytes,
                          size_t chunk, params_result *r)
{
    void *ps = zmq_socket(b->ctx, ZMQ_PUB);
    int linger = 0, hwm = 0;
    zmq_setsockopt(ps, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(ps, ZMQ_SNDHWM, &hwm, sizeof hwm);
    char ep[256];
    gb_bench_net_endpoint(b, ep, sizeof ep, "bench-rawpub");
    zmq_bind(ps, ep);
    gb_bench_net_bound(ps, ep, sizeof ep);
    raw_sub rs[NSUBS];
    pthread_t rth[NSUBS];
    for (int i = 0; i < NSUBS; i++) {
        rs[i].sock = zmq_socket(b->ctx, ZMQ_SUB);
        zmq_setsockopt(rs[i].sock, ZMQ_LINGER, &linger, sizeof linger);
        zmq_setsockopt(rs[i].sock, ZMQ_RCVHWM, &hwm, sizeof hwm);
        zmq_setsockopt(rs[i].sock, ZMQ_SUBSCRIBE, "", 0);
        zmq_connect(rs[i].sock, ep);
        rs[i].expect = bytes;
    }
    gb_sleep_ms(300);
    for (int i = 0; i < NSUBS; i++)
        pthread_create(&rth[i], NULL, raw_sub_thread, &rs[i]);
    double t0 = gb_now_s(), raw_last = t0;
    for (size_t off = 0; off < bytes; off += chunk)
        zmq_send(ps, data + off, bytes - off < chunk ? bytes - off : chunk, 0);
    for (int i = 0; i < NSUBS; i++) {
        pthread_join(rth[i], NULL);
        if (rs[i].t_done > raw_last)
            raw_last = rs[i].t_done;
        zmq_close(rs[i].sock);
    }
    zmq_close(ps);
    r->raw = raw_last - t0;
}

/* bytes of parameters through gearbox, then through raw PUB/SUB; prints the row. Returns 0, or
 * 1 when a measurement failed. */
static int bench_params(gb_bench_net *b, size_t bytes)
{
    size_t chunk = 4 << 20;
    unsigned char *data = malloc(bytes);
    if (!data) {
        fprintf(stderr, "bench streams: out of memory\n");
        return 1;
    }
    memset(data, 7, bytes);
    params_result r = {0};
    if (gearbox_broadcast(b, data, bytes, chunk, &r)) {
        free(data);
        return 1;
    }
    raw_broadcast(b, data, bytes, chunk, &r);
    free(data);
    if (b->json)
        printf("{\"bench\": \"streams\", \"case\": \"param_broadcast\", \"transport\": \"%s\", "
               "\"bytes\": %zu, \"subscribers\": %d, \"chunk_bytes\": %zu, \"seconds\": %.4f, "
               "\"raw_seconds\": %.4f, \"ratio\": %.3f, \"repaired\": %llu, \"ok\": %s}\n",
               b->tcp ? "tcp" : "ipc", bytes, NSUBS, chunk, r.best, r.raw, r.best / r.raw,
               r.repaired, r.failed ? "false" : "true");
    else
        printf("param_broadcast  %6.0f MB to %d subscribers  %.3f s (trainer -> service -> all "
               "verified)  raw PUB %.3f s  ratio %.2f  repaired %llu%s\n",
               (double)bytes / 1e6, NSUBS, r.best, r.raw, r.best / r.raw, r.repaired,
               r.failed ? "  FAILED" : "");
    fflush(stdout);
    return r.failed;
}

int gb_bench_param_broadcast(gb_bench_net *b)
{
    int rc = bench_params(b, 10000000);
    rc |= bench_params(b, 100000000);
    return rc;
}
