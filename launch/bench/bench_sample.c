/* launch/bench/bench_sample.c: the sample stream's case of `gearbox bench streams`: chunk throughput
 * from one actor to one trainer against raw ZeroMQ PUSH/PULL moving the same bytes. */
#include "launch/bench/bench.h"
#include "runtime/base/clock.h"
#include "runtime/streams/sample_stream.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct recv_ctl {
    void *obj;
    long expect;
    atomic_long got;
    double t_end;
} recv_ctl;

static void *sample_recv_thread(void *arg)
{
    recv_ctl *r = arg;
    gb_error err;
    gb_wire_msg m;
    gb_wire_msg_init(&m);
    while (atomic_load(&r->got) < r->expect) {
        if (gb_sample_recv(r->obj, &m, 5000, &err) != 0)
            break;
        gb_wire_msg_release(&m);
        atomic_fetch_add(&r->got, 1);
    }
    r->t_end = gb_now_s();
    return NULL;
}

static void *raw_pull_thread(void *arg)
{
    recv_ctl *r = arg;
    zmq_msg_t m;
    zmq_msg_init(&m);
    int to = 5000;
    zmq_setsockopt(r->obj, ZMQ_RCVTIMEO, &to, sizeof to);
    while (atomic_load(&r->got) < r->expect) {
        if (zmq_msg_recv(&m, r->obj, 0) < 0)
            break;
        atomic_fetch_add(&r->got, 1);
    }
    r->t_end = gb_now_s();
    zmq_msg_close(&m);
    return NULL;
}

static int bench_sample(gb_bench_net *b, size_t chunk)
{
    gb_error err;
    double target_bytes = b->quick ? 256e6 : 1e9;
    /* gearbox and raw alternate in rounds, so both see the same load on a shared machine; the
     * figures are the medians over rounds */
    enum { rounds = 8 };
    double rate[rounds], raw_rate[rounds];
    long per_round = (long)(target_bytes / (double)chunk / rounds);
    long count = per_round * rounds;
    unsigned char *data = malloc(chunk);
    memset(data, 3, chunk);
    char ep[256];
    int hwm = 64; /* streams.sample_hwm default */
    gb_bench_net_endpoint(b, ep, sizeof ep, "bench-trainer");
    gb_sample_receiver_opts ro = {.endpoint = ep, .hwm = hwm};
    gb_sample_receiver *r;
    if (gb_sample_receiver_open(&r, b->ctx, &ro, &err)) {
        fprintf(stderr, "bench streams: %s\n", err.msg);
        return 1;
    }
    const char *eps[1] = {gb_sample_receiver_endpoint(r)};
    gb_sample_sender_opts so = {.endpoints = eps, .n_endpoints = 1, .hwm = hwm,
                                .send_timeout_ms = -1, .role = GB_ROLE_ACTOR, .index = 0};
    gb_sample_sender *s;
    if (gb_sample_sender_open(&s, b->ctx, &so, &err)) {
        fprintf(stderr, "bench streams: %s\n", err.msg);
        return 1;
    }
    void *push = zmq_socket(b->ctx, ZMQ_PUSH), *pull = zmq_socket(b->ctx, ZMQ_PULL);
    int linger = 0;
    zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(pull, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(push, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(pull, ZMQ_RCVHWM, &hwm, sizeof hwm);
    gb_bench_net_endpoint(b, ep, sizeof ep, "bench-pull");
    zmq_bind(pull, ep);
    gb_bench_net_bound(pull, ep, sizeof ep);
    zmq_connect(push, ep);
    gb_tensor_desc d;
    int64_t shape[1] = {(int64_t)chunk};
    gb_wire_set_tensor(&d, "chunk", GB_DTYPE_UINT8, 1, shape, NULL);
    gb_wire_payload p = {data, NULL, NULL, NULL};
    double secs = 0, raw_secs = 0;
    long got = 0, raw_got = 0;
    int failed = 0;
    for (int round = 0; round < rounds && !failed; round++) {
        pthread_t th;
        recv_ctl rc_ = {r, per_round, 0, 0};
        pthread_create(&th, NULL, sample_recv_thread, &rc_);
        double t0 = gb_now_s();
        for (long i = 0; i < per_round; i++)
            if (gb_sample_send(s, 1, &d, &p, 1, &err)) {
                fprintf(stderr, "bench streams: sample: %s\n", err.msg);
                failed = 1;
                break;
            }
        pthread_join(th, NULL);
        secs += rc_.t_end - t0;
        got += atomic_load(&rc_.got);
        rate[round] = (double)chunk * (double)atomic_load(&rc_.got) * 8 / (rc_.t_end - t0) / 1e9;
        recv_ctl rr = {pull, per_round, 0, 0};
        pthread_create(&th, NULL, raw_pull_thread, &rr);
        t0 = gb_now_s();
        for (long i = 0; i < per_round; i++)
            zmq_send(push, data, chunk, 0);
        pthread_join(th, NULL);
        raw_secs += rr.t_end - t0;
        raw_got += atomic_load(&rr.got);
        raw_rate[round] = (double)chunk * (double)atomic_load(&rr.got) * 8 / (rr.t_end - t0) /
                          1e9;
    }
    gb_sample_sender_stats st = gb_sample_sender_get_stats(s);
    gb_sample_sender_close(s);
    gb_sample_receiver_close(r);
    zmq_close(push);
    zmq_close(pull);
    free(data);
    (void)secs;
    (void)raw_secs;
    (void)raw_got;
    double gbps = failed ? 0 : gb_bench_quantile(rate, rounds, 0.5), raw_gbps = gb_bench_quantile(raw_rate, rounds, 0.5);
    long drops = (long)st.dropped + (count - got);
    if (b->json)
        printf("{\"bench\": \"streams\", \"case\": \"sample_throughput\", \"transport\": \"%s\", "
               "\"curve\": %s, \"chunk_bytes\": %zu, \"chunks\": %ld, \"gbps\": %.3f, "
               "\"raw_gbps\": %.3f, \"ratio\": %.3f, \"drops\": %ld}\n",
               b->tcp ? "tcp" : "ipc", b->curve ? "true" : "false", chunk, count, gbps, raw_gbps,
               gbps / raw_gbps, drops);
    else
        printf("sample_throughput%s  chunk %8zu B  %6ld chunks  %7.2f Gbit/s  raw PUSH/PULL %7.2f "
               "Gbit/s  ratio %.2f (target >= 0.8)  drops %ld\n",
               b->curve ? " (CURVE)" : "", chunk, count, gbps, raw_gbps, gbps / raw_gbps, drops);
    gb_bench_net_figure(b, gbps);
    fflush(stdout);
    return failed;
}

/* ---- parameter broadcast --------------------------------------------------------------------- */


int gb_bench_sample_throughput(gb_bench_net *b)
{
    int rc = bench_sample(b, 16 << 10);
    rc |= bench_sample(b, 1 << 20);
    return rc;
}
