/* launch/bench/bench_sample.c: the sample stream's case of `gearbox bench streams`: chunk
 * throughput from one actor to one trainer against raw ZeroMQ PUSH/PULL moving the same bytes. */
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

/* gearbox's sample stream (one sender, one receiver) and a raw PUSH/PULL pair beside it, with
 * the same high-water mark (streams.sample_hwm's default). */
typedef struct sample_pair {
    gb_sample_receiver *r;
    gb_sample_sender *s;
    void *push, *pull;
} sample_pair;

static void sample_pair_close(sample_pair *sp)
{
    gb_sample_sender_close(sp->s);
    gb_sample_receiver_close(sp->r);
    if (sp->push)
        zmq_close(sp->push);
    if (sp->pull)
        zmq_close(sp->pull);
}

static int sample_pair_open(sample_pair *sp, gb_bench_net *b, gb_error *err)
{
    char ep[256];
    int hwm = 64; /* streams.sample_hwm default */
    *sp = (sample_pair){0};
    gb_bench_net_endpoint(b, ep, sizeof ep, "bench-trainer");
    gb_sample_receiver_opts ro = {.endpoint = ep, .hwm = hwm};
    int rc = gb_sample_receiver_open(&sp->r, b->ctx, &ro, err);
    if (rc)
        return rc;
    const char *eps[1] = {gb_sample_receiver_endpoint(sp->r)};
    gb_sample_sender_opts so = {.endpoints = eps, .n_endpoints = 1, .hwm = hwm,
                                .send_timeout_ms = -1, .role = GB_ROLE_ACTOR, .index = 0};
    if ((rc = gb_sample_sender_open(&sp->s, b->ctx, &so, err)))
        return rc;
    return gb_bench_net_raw_pair(b, ZMQ_PULL, ZMQ_PUSH, "bench-pull", hwm, &sp->pull,
                                 &sp->push, err);
}

/* One round of n chunks through gearbox, then n through raw PUSH/PULL, each timed from the
 * first send to the receiver's last chunk: Gbit/s into rate and raw_rate, chunks received
 * into *got. Returns 0, or 1 when a send failed (said on stderr). */
static int sample_round(sample_pair *sp, const void *data, size_t chunk, long n, double *rate,
                        double *raw_rate, long *got)
{
    gb_error err;
    gb_tensor_desc d;
    int64_t shape[1] = {(int64_t)chunk};
    gb_wire_set_tensor(&d, "chunk", GB_DTYPE_UINT8, 1, shape, NULL);
    gb_wire_payload p = {data, NULL, NULL, NULL};
    int failed = 0;
    pthread_t th;
    recv_ctl rg = {sp->r, n, 0, 0};
    pthread_create(&th, NULL, sample_recv_thread, &rg);
    double t0 = gb_now_s();
    for (long i = 0; i < n; i++)
        if (gb_sample_send(sp->s, 1, &d, &p, 1, &err)) {
            fprintf(stderr, "bench streams: sample: %s\n", err.msg);
            failed = 1;
            break;
        }
    pthread_join(th, NULL);
    *got = atomic_load(&rg.got);
    *rate = (double)chunk * (double)*got * 8 / (rg.t_end - t0) / 1e9;
    recv_ctl rr = {sp->pull, n, 0, 0};
    pthread_create(&th, NULL, raw_pull_thread, &rr);
    t0 = gb_now_s();
    for (long i = 0; i < n; i++)
        zmq_send(sp->push, data, chunk, 0);
    pthread_join(th, NULL);
    *raw_rate = (double)chunk * (double)atomic_load(&rr.got) * 8 / (rr.t_end - t0) / 1e9;
    return failed;
}

/* Chunks of chunk bytes through gearbox and raw PUSH/PULL; prints the row. Returns 0, or 1
 * when a measurement failed. */
static int bench_sample(gb_bench_net *b, size_t chunk)
{
    gb_error err;
    double target_bytes = b->quick ? 256e6 : 1e9;
    /* gearbox and raw alternate in rounds, so both see the same load on a shared machine; the
     * figures are the medians over rounds */
    enum { rounds = 8 };
    double rate[rounds], raw_rate[rounds];
    long per_round = (long)(target_bytes / (double)chunk / rounds);
    long count = per_round * rounds, got = 0;
    unsigned char *data = malloc(chunk);
    sample_pair sp;
    if (!data || sample_pair_open(&sp, b, &err)) {
        fprintf(stderr, "bench streams: %s\n", data ? err.msg : "out of memory");
        if (data)
            sample_pair_close(&sp);
        free(data);
        return 1;
    }
    memset(data, 3, chunk);
    int failed = 0, done = 0;
    for (int round = 0; round < rounds && !failed; round++, done++) {
        long n = 0;
        failed = sample_round(&sp, data, chunk, per_round, &rate[round], &raw_rate[round], &n);
        got += n;
    }
    gb_sample_sender_stats st = gb_sample_sender_get_stats(sp.s);
    sample_pair_close(&sp);
    free(data);
    double gbps = failed ? 0 : gb_bench_quantile(rate, rounds, 0.5);
    double raw_gbps = gb_bench_quantile(raw_rate, done, 0.5);
    long drops = (long)st.dropped + (count - got);
    if (b->json)
        printf("{\"bench\": \"streams\", \"case\": \"sample_throughput\", \"transport\": \"%s\", "
               "\"curve\": %s, \"chunk_bytes\": %zu, \"chunks\": %ld, \"gbps\": %.3f, "
               "\"raw_gbps\": %.3f, \"ratio\": %.3f, \"drops\": %ld}\n",
               b->tcp ? "tcp" : "ipc", b->curve ? "true" : "false", chunk, count, gbps, raw_gbps,
               gbps / raw_gbps, drops);
    else
        printf("sample_throughput%s  chunk %8zu B  %6ld chunks  %7.2f Gbit/s  raw PUSH/PULL "
               "%7.2f Gbit/s  ratio %.2f (target >= 0.8)  drops %ld\n",
               b->curve ? (b->tcp ? " (CURVE)" : " (PLAIN)") : "",
               chunk, count, gbps, raw_gbps, gbps / raw_gbps, drops);
    gb_bench_net_figure(b, gbps);
    fflush(stdout);
    return failed;
}

int gb_bench_sample_throughput(gb_bench_net *b)
{
    int rc = bench_sample(b, 16 << 10);
    rc |= bench_sample(b, 1 << 20);
    return rc;
}
