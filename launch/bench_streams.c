/* launch/bench_streams.c: `gearbox bench streams [--json] [--transport ipc|tcp] [--quick]`:
 * inference round trips, sample throughput and parameter broadcast, each against raw ZeroMQ
 * moving the same bytes over the same transport in the same run. */
#include "launch/bench.h"
#include "launch/commands.h"
#include "runtime/clock.h"
#include "runtime/inference.h"
#include "runtime/params.h"
#include "runtime/sample.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct bench_env {
    void *ctx;
    int tcp;
    int quick;
    int json;
    char dir[64];
    int seq;          /* endpoint names */
    const char *only; /* --case NAME: run only that case */
} bench_env;

static int want(const bench_env *b, const char *c) { return !b->only || strcmp(b->only, c) == 0; }

static void endpoint(bench_env *b, char *out, size_t cap, const char *what)
{
    if (b->tcp)
        snprintf(out, cap, "tcp://127.0.0.1:*");
    else
        snprintf(out, cap, "ipc://%s/%s-%d", b->dir, what, b->seq++);
}

static void bound(void *sock, char *out, size_t cap)
{
    size_t len = cap;
    zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, out, &len);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double q)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int i = (int)(q * (n - 1) + 0.5);
    return v[i];
}

/* ---- inference round trip ---------------------------------------------------------------------- */

typedef struct infer_policy {
    int32_t act[4096];
    float logp[4096], value[4096];
} infer_policy;

static int bench_policy(void *user, const gb_infer_batch *in, gb_infer_outputs *out,
                        gb_error *err)
{
    infer_policy *p = user;
    if (in->rows > 4096)
        return gb_error_set(err, GB_EINVAL, "bench policy: too many rows");
    const unsigned char *x = in->inputs[0].data;
    for (int r = 0; r < in->rows; r++) {
        p->act[r] = x[0] & 1; /* touch the input: a policy reads its observations */
        p->logp[r] = -0.69f;
        p->value[r] = 0.5f;
    }
    int64_t shape[1] = {in->rows};
    gb_wire_set_tensor(&out->descs[0], "action", GB_DTYPE_INT32, 1, shape, NULL);
    gb_wire_set_tensor(&out->descs[1], "logp", GB_DTYPE_FLOAT32, 1, shape, NULL);
    gb_wire_set_tensor(&out->descs[2], "value", GB_DTYPE_FLOAT32, 1, shape, NULL);
    out->data[0] = p->act;
    out->data[1] = p->logp;
    out->data[2] = p->value;
    out->ntensors = 3;
    out->policy_version = 1;
    return 0;
}

typedef struct thread_ctl {
    atomic_int stop;
    atomic_int ready;
    void *obj;
    char ep[256];
    size_t reply_bytes;
    bench_env *b;
} thread_ctl;

static void *infer_server_thread(void *arg)
{
    thread_ctl *t = arg;
    gb_error err;
    while (!atomic_load(&t->stop))
        gb_infer_server_poll(t->obj, 20, &err);
    return NULL;
}

static void *raw_rep_thread(void *arg)
{
    thread_ctl *t = arg;
    void *rep = t->obj;
    zmq_msg_t m;
    zmq_msg_init(&m);
    void *reply = calloc(1, t->reply_bytes ? t->reply_bytes : 1);
    int to = 20;
    zmq_setsockopt(rep, ZMQ_RCVTIMEO, &to, sizeof to);
    while (!atomic_load(&t->stop)) {
        if (zmq_msg_recv(&m, rep, 0) < 0)
            continue;
        zmq_send(rep, reply, t->reply_bytes, 0);
    }
    zmq_msg_close(&m);
    free(reply);
    return NULL;
}

static int bench_inference(bench_env *b, int rows, int row_bytes, gb_dtype dtype,
                           const int64_t *row_shape, int row_rank, const char *label)
{
    gb_error err;
    int iters = b->quick ? 300 : 2000;
    double budget_s = b->quick ? 1.5 : 5.0;
    size_t bytes = (size_t)rows * (size_t)row_bytes;
    size_t reply_bytes = (size_t)rows * 12; /* action int32, logp and value float32 */
    unsigned char *obs = malloc(bytes);
    double *rtt = malloc(sizeof(double) * (size_t)iters);
    double *raw = malloc(sizeof(double) * (size_t)iters);
    memset(obs, 1, bytes);
    /* gearbox: batching server (max_batch_rows 4096, max_wait 1 ms as configured by default) */
    static infer_policy pol;
    char ep[256];
    endpoint(b, ep, sizeof ep, "bench-policy");
    gb_infer_server_opts so = {ep, 4096, 1.0, GB_ROLE_POLICY, 0, bench_policy, &pol, 0, NULL};
    gb_infer_server *s;
    if (gb_infer_server_open(&s, b->ctx, &so, &err)) {
        fprintf(stderr, "bench streams: %s\n", err.msg);
        return 1;
    }
    const char *eps[1] = {gb_infer_server_endpoint(s)};
    gb_infer_client_opts co = {eps, 1, 10000, GB_ROLE_ACTOR, 0};
    gb_infer_client *c;
    if (gb_infer_client_open(&c, b->ctx, &co, &err)) {
        fprintf(stderr, "bench streams: %s\n", err.msg);
        return 1;
    }
    thread_ctl t = {0};
    t.obj = s;
    pthread_t th, rth;
    pthread_create(&th, NULL, infer_server_thread, &t);
    /* raw REQ/REP with the same bytes each way, alive at the same time: the two are measured
     * alternately, so both see the same load on this shared machine */
    void *rep = zmq_socket(b->ctx, ZMQ_REP), *req = zmq_socket(b->ctx, ZMQ_REQ);
    int linger = 0;
    zmq_setsockopt(rep, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(req, ZMQ_LINGER, &linger, sizeof linger);
    endpoint(b, ep, sizeof ep, "bench-rep");
    zmq_bind(rep, ep);
    bound(rep, ep, sizeof ep);
    zmq_connect(req, ep);
    thread_ctl tr = {0};
    tr.obj = rep;
    tr.reply_bytes = reply_bytes;
    pthread_create(&rth, NULL, raw_rep_thread, &tr);
    gb_tensor_desc d;
    int64_t shape[GB_WIRE_MAX_RANK];
    shape[0] = rows;
    for (int i = 0; i < row_rank; i++)
        shape[1 + i] = row_shape[i];
    gb_wire_set_tensor(&d, "obs", dtype, 1 + row_rank, shape, NULL);
    const void *data[1] = {obs};
    gb_wire_msg reply;
    gb_wire_msg_init(&reply);
    zmq_msg_t m;
    zmq_msg_init(&m);
    int n = 0, rc = 0;
    double start = gb_now_s();
    for (int i = -50; i < iters; i++) {
        uint64_t t0 = gb_now_ns();
        if ((rc = gb_infer_client_request(c, &d, data, 1, &reply, &err)))
            break;
        uint64_t t1 = gb_now_ns();
        gb_wire_msg_release(&reply);
        uint64_t t2 = gb_now_ns();
        if (zmq_send(req, obs, bytes, 0) < 0 || zmq_msg_recv(&m, req, 0) < 0) {
            rc = GB_EZMQ;
            snprintf(err.msg, sizeof err.msg, "raw REQ/REP: %s", zmq_strerror(zmq_errno()));
            break;
        }
        uint64_t t3 = gb_now_ns();
        if (i < 0)
            continue;
        rtt[n] = (double)(t1 - t0) * 1e-3;
        raw[n] = (double)(t3 - t2) * 1e-3;
        n++;
        if (gb_now_s() - start > budget_s && n >= 100)
            break;
    }
    zmq_msg_close(&m);
    atomic_store(&t.stop, 1);
    atomic_store(&tr.stop, 1);
    pthread_join(th, NULL);
    pthread_join(rth, NULL);
    gb_infer_client_close(c);
    gb_infer_server_close(s);
    zmq_close(req);
    zmq_close(rep);
    if (rc || n == 0) {
        fprintf(stderr, "bench streams: inference: %s\n", err.msg);
        free(obs);
        free(rtt);
        free(raw);
        return 1;
    }
    double p50 = pct(rtt, n, 0.5), p99 = pct(rtt, n, 0.99), rp50 = pct(raw, n, 0.5);
    if (b->json)
        printf("{\"bench\": \"streams\", \"case\": \"inference_rtt\", \"transport\": \"%s\", "
               "\"rows\": %d, \"row\": \"%s\", \"bytes\": %zu, \"reply_bytes\": %zu, "
               "\"iterations\": %d, \"p50_us\": %.1f, \"p99_us\": %.1f, \"raw_p50_us\": %.1f, "
               "\"ratio\": %.3f}\n",
               b->tcp ? "tcp" : "ipc", rows, label, bytes, reply_bytes, n, p50, p99, rp50,
               p50 / rp50);
    else
        printf("inference_rtt  rows %5d x %-12s %8zu B  p50 %8.1f us  p99 %8.1f us  raw REQ/REP "
               "p50 %8.1f us  ratio %.2f (target <= 1.3)\n",
               rows, label, bytes, p50, p99, rp50, p50 / rp50);
    fflush(stdout);
    free(obs);
    free(rtt);
    free(raw);
    return 0;
}

/* ---- sample throughput ----------------------------------------------------------------------- */

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

static int bench_sample(bench_env *b, size_t chunk)
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
    endpoint(b, ep, sizeof ep, "bench-trainer");
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
    endpoint(b, ep, sizeof ep, "bench-pull");
    zmq_bind(pull, ep);
    bound(pull, ep, sizeof ep);
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
    double gbps = failed ? 0 : pct(rate, rounds, 0.5), raw_gbps = pct(raw_rate, rounds, 0.5);
    long drops = (long)st.dropped + (count - got);
    if (b->json)
        printf("{\"bench\": \"streams\", \"case\": \"sample_throughput\", \"transport\": \"%s\", "
               "\"chunk_bytes\": %zu, \"chunks\": %ld, \"gbps\": %.3f, \"raw_gbps\": %.3f, "
               "\"ratio\": %.3f, \"drops\": %ld}\n",
               b->tcp ? "tcp" : "ipc", chunk, count, gbps, raw_gbps, gbps / raw_gbps, drops);
    else
        printf("sample_throughput  chunk %8zu B  %6ld chunks  %7.2f Gbit/s  raw PUSH/PULL %7.2f "
               "Gbit/s  ratio %.2f (target >= 0.8)  drops %ld\n",
               chunk, count, gbps, raw_gbps, gbps / raw_gbps, drops);
    fflush(stdout);
    return failed;
}

/* ---- parameter broadcast --------------------------------------------------------------------- */

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
    thread_ctl *t = arg;
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

static int bench_params(bench_env *b, size_t bytes)
{
    gb_error err;
    size_t chunk = 4 << 20;
    char in[256], pub[256], fetch[256];
    endpoint(b, in, sizeof in, "bench-params-in");
    endpoint(b, pub, sizeof pub, "bench-params-pub");
    endpoint(b, fetch, sizeof fetch, "bench-params-fetch");
    gb_param_service_opts so = {in, pub, fetch, 0, GB_ROLE_PARAMS, 0};
    gb_param_service *svc;
    if (gb_param_service_open(&svc, b->ctx, &so, &err)) {
        fprintf(stderr, "bench streams: %s\n", err.msg);
        return 1;
    }
    thread_ctl st = {0};
    st.obj = svc;
    pthread_t sth, subth[NSUBS];
    pthread_create(&sth, NULL, param_service_thread, &st);
    static sub_ctl subs[NSUBS];
    for (int i = 0; i < NSUBS; i++) {
        gb_param_subscriber_opts o = {gb_param_service_endpoint(svc, "pub"),
                                      gb_param_service_endpoint(svc, "fetch"),
                                      5000, 1000, 4, 0, GB_ROLE_POLICY, i};
        memset(&subs[i], 0, sizeof subs[i]);
        if (gb_param_subscriber_open(&subs[i].s, b->ctx, &o, &err)) {
            fprintf(stderr, "bench streams: %s\n", err.msg);
            return 1;
        }
        pthread_create(&subth[i], NULL, param_sub_thread, &subs[i]);
    }
    gb_param_publisher_opts po = {gb_param_service_endpoint(svc, "in"), chunk, 30000,
                                  GB_ROLE_TRAINER, 0};
    gb_param_publisher *p;
    if (gb_param_publisher_open(&p, b->ctx, &po, &err)) {
        fprintf(stderr, "bench streams: %s\n", err.msg);
        return 1;
    }
    unsigned char *data = malloc(bytes);
    memset(data, 7, bytes);
    gb_param_entry e;
    memset(&e, 0, sizeof e);
    snprintf(e.name, sizeof e.name, "weights");
    e.dtype = GB_DTYPE_UINT8;
    e.rank = 1;
    e.shape[0] = (int64_t)bytes;
    gb_sleep_ms(300); /* subscribers connected */
    int rounds = b->quick ? 1 : 3;
    double best = 1e9;
    int failed = 0;
    for (int v = 1; v <= rounds; v++) {
        for (int i = 0; i < NSUBS; i++) {
            subs[i].want = v;
            atomic_store(&subs[i].go, 1);
        }
        double t0 = gb_now_s();
        if (gb_param_publish(p, v, &e, 1, data, bytes, &err)) {
            fprintf(stderr, "bench streams: publish: %s\n", err.msg);
            failed = 1;
            break;
        }
        double last = t0;
        for (int i = 0; i < NSUBS; i++) {
            while (atomic_load(&subs[i].go))
                gb_sleep_ms(1);
            failed |= subs[i].failed;
            if (subs[i].t_done > last)
                last = subs[i].t_done;
        }
        if (last - t0 < best)
            best = last - t0;
    }
    unsigned long long repaired = 0;
    for (int i = 0; i < NSUBS; i++) {
        atomic_store(&subs[i].stop, 1);
        pthread_join(subth[i], NULL);
        repaired += gb_param_subscriber_get_stats(subs[i].s).repaired;
        gb_param_subscriber_close(subs[i].s);
    }
    atomic_store(&st.stop, 1);
    pthread_join(sth, NULL);
    gb_param_publisher_close(p);
    gb_param_service_close(svc);
    /* raw: PUSH to a forwarder is skipped; PUB of the same chunks to 4 SUBs */
    void *ps = zmq_socket(b->ctx, ZMQ_PUB);
    int linger = 0, hwm = 0;
    zmq_setsockopt(ps, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(ps, ZMQ_SNDHWM, &hwm, sizeof hwm);
    char ep[256];
    endpoint(b, ep, sizeof ep, "bench-rawpub");
    zmq_bind(ps, ep);
    bound(ps, ep, sizeof ep);
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
    free(data);
    if (b->json)
        printf("{\"bench\": \"streams\", \"case\": \"param_broadcast\", \"transport\": \"%s\", "
               "\"bytes\": %zu, \"subscribers\": %d, \"chunk_bytes\": %zu, \"seconds\": %.4f, "
               "\"raw_seconds\": %.4f, \"ratio\": %.3f, \"repaired\": %llu, \"ok\": %s}\n",
               b->tcp ? "tcp" : "ipc", bytes, NSUBS, chunk, best, raw_last - t0,
               best / (raw_last - t0), repaired, failed ? "false" : "true");
    else
        printf("param_broadcast  %6.0f MB to %d subscribers  %.3f s (trainer -> service -> all "
               "verified)  raw PUB %.3f s  ratio %.2f  repaired %llu%s\n",
               (double)bytes / 1e6, NSUBS, best, raw_last - t0, best / (raw_last - t0),
               repaired, failed ? "  FAILED" : "");
    fflush(stdout);
    return failed;
}

/* ---- inference: pipelined against serial server ------------------------------------------------ */

#define PIPE_CLIENTS 8

/* A policy whose forward takes about 1 ms of CPU (a spin, so it behaves like a model, not like
 * a sleep the scheduler can hide). */
static int bench_policy_1ms(void *user, const gb_infer_batch *in, gb_infer_outputs *out,
                            gb_error *err)
{
    uint64_t end = gb_now_ns() + 1000000ULL;
    while (gb_now_ns() < end)
        ;
    return bench_policy(user, in, out, err);
}

typedef struct pipe_client {
    bench_env *b;
    const char *ep;
    int index;
    double budget_s;
    uint64_t replies;
    int rc;
    atomic_int *go;
} pipe_client;

static void *pipe_client_thread(void *arg)
{
    pipe_client *a = arg;
    gb_error err;
    const char *eps[1] = {a->ep};
    gb_infer_client_opts co = {eps, 1, 10000, GB_ROLE_ACTOR, a->index};
    gb_infer_client *c;
    if ((a->rc = gb_infer_client_open(&c, a->b->ctx, &co, &err)))
        return NULL;
    float obs[32 * 4];
    memset(obs, 0, sizeof obs);
    gb_tensor_desc d;
    int64_t shape[2] = {32, 4};
    gb_wire_set_tensor(&d, "obs", GB_DTYPE_FLOAT32, 2, shape, NULL);
    const void *data[1] = {obs};
    gb_wire_msg reply;
    gb_wire_msg_init(&reply);
    while (!atomic_load(a->go))
        gb_sleep_ms(1);
    double end = gb_now_s() + a->budget_s;
    int outstanding = 0;
    uint64_t id;
    while (gb_now_s() < end || outstanding > 0) {
        /* two requests in flight, like an actor whose env groups step while others wait */
        while (outstanding < 2 && gb_now_s() < end) {
            if ((a->rc = gb_infer_client_send(c, &d, data, 1, &id, &err)))
                break;
            outstanding++;
        }
        if (a->rc || (a->rc = gb_infer_client_recv(c, &reply, 10000, &err)))
            break;
        gb_wire_msg_release(&reply);
        outstanding--;
        a->replies++;
    }
    gb_infer_client_close(c);
    return NULL;
}

/* Requests per second that nclients clients (32 rows each, two outstanding) get from a server
 * whose forward takes 1 ms; also its batches. Returns 0 or 1. */
static int pipe_throughput(bench_env *b, int nclients, int pipelined, double *req_per_s,
                           uint64_t *batches)
{
    gb_error err;
    static infer_policy pol;
    char ep[256];
    endpoint(b, ep, sizeof ep, pipelined ? "bench-pipe-1" : "bench-pipe-0");
    gb_infer_server_opts so = {ep, 4096, 1.0, GB_ROLE_POLICY, 0, bench_policy_1ms, &pol,
                               pipelined, NULL};
    gb_infer_server *s;
    if (gb_infer_server_open(&s, b->ctx, &so, &err)) {
        fprintf(stderr, "bench streams: %s\n", err.msg);
        return 1;
    }
    thread_ctl t = {0};
    t.obj = s;
    pthread_t th, ct[PIPE_CLIENTS];
    pthread_create(&th, NULL, infer_server_thread, &t);
    atomic_int go = 0;
    pipe_client pc[PIPE_CLIENTS];
    double budget = b->quick ? 1.0 : 3.0;
    for (int i = 0; i < nclients; i++) {
        pc[i] = (pipe_client){b, gb_infer_server_endpoint(s), i, budget, 0, 0, &go};
        pthread_create(&ct[i], NULL, pipe_client_thread, &pc[i]);
    }
    gb_sleep_ms(100);
    double t0 = gb_now_s();
    atomic_store(&go, 1);
    uint64_t total = 0;
    int rc = 0;
    for (int i = 0; i < nclients; i++) {
        pthread_join(ct[i], NULL);
        total += pc[i].replies;
        rc |= pc[i].rc != 0;
    }
    double secs = gb_now_s() - t0;
    atomic_store(&t.stop, 1);
    pthread_join(th, NULL); /* stats are read on the thread that drove it, after it stopped */
    *batches = gb_infer_server_get_stats(s).batches;
    gb_infer_server_close(s);
    *req_per_s = (double)total / secs;
    return rc;
}

/* The same clients against the serial and the pipelined server, one after the other: 8 clients
 * and 1, each keeping two requests in flight (while a batch runs, the next requests arrive). */
static int bench_inference_pipelined(bench_env *b)
{
    static const int counts[2] = {PIPE_CLIENTS, 1};
    for (int k = 0; k < 2; k++) {
        double serial, piped;
        uint64_t bs, bp;
        if (pipe_throughput(b, counts[k], 0, &serial, &bs) ||
            pipe_throughput(b, counts[k], 1, &piped, &bp)) {
            fprintf(stderr, "bench streams: inference_pipelined: a client failed\n");
            return 1;
        }
        if (b->json)
            printf("{\"bench\": \"streams\", \"case\": \"inference_pipelined\", \"transport\": "
                   "\"%s\", \"clients\": %d, \"rows\": 32, \"forward_ms\": 1.0, "
                   "\"pipelined_req_per_s\": %.1f, \"serial_req_per_s\": %.1f, "
                   "\"pipelined_batches\": %llu, \"serial_batches\": %llu, \"ratio\": %.3f}\n",
                   b->tcp ? "tcp" : "ipc", counts[k], piped, serial, (unsigned long long)bp,
                   (unsigned long long)bs, piped / serial);
        else
            printf("inference_pipelined  %d client%s x 2 x 32 rows, 1 ms forward  pipelined %7.0f req/s "
                   "(%llu batches)  serial %7.0f req/s (%llu batches)  ratio %.2f\n",
                   counts[k], counts[k] > 1 ? "s" : " ", piped, (unsigned long long)bp, serial,
                   (unsigned long long)bs, piped / serial);
        fflush(stdout);
    }
    return 0;
}

static void bench_usage(FILE *out)
{
    fprintf(out, "usage: gearbox bench streams [--json] [--transport ipc|tcp] [--quick]\n"
                 "                             [--case inference_rtt|inference_pipelined|sample_throughput|\n"
                 "                                     param_broadcast]\n");
}

int gb_bench_streams(int argc, char **argv, int json)
{
    if (gb_wants_help(argc, argv)) {
        bench_usage(stdout);
        return GB_EXIT_OK;
    }
    bench_env b = {0};
    b.json = json;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            continue;
        if (strcmp(argv[i], "--quick") == 0)
            b.quick = 1;
        else if (strcmp(argv[i], "--transport") == 0 && i + 1 < argc)
            b.tcp = strcmp(argv[++i], "tcp") == 0;
        else if (strcmp(argv[i], "--case") == 0 && i + 1 < argc)
            b.only = argv[++i];
        else {
            bench_usage(stderr);
            return GB_EXIT_USAGE;
        }
    }
    snprintf(b.dir, sizeof b.dir, "/tmp/gbbench-XXXXXX");
    if (!mkdtemp(b.dir)) {
        perror("gearbox bench streams: mkdtemp");
        return GB_EXIT_FAILURE;
    }
    b.ctx = zmq_ctx_new();
    int io = 2;
    zmq_ctx_set(b.ctx, ZMQ_IO_THREADS, io);
    int rc = 0;
    int64_t four[1] = {4}, pix[2] = {84, 84};
    if (!json)
        printf("gearbox bench streams (%s, raw ZeroMQ reference measured in the same run)\n",
               b.tcp ? "tcp://127.0.0.1" : "ipc://");
    if (want(&b, "inference_rtt")) {
        rc |= bench_inference(&b, 1, 16, GB_DTYPE_FLOAT32, four, 1, "4 float32");
        rc |= bench_inference(&b, 64, 16, GB_DTYPE_FLOAT32, four, 1, "4 float32");
        rc |= bench_inference(&b, 1024, 16, GB_DTYPE_FLOAT32, four, 1, "4 float32");
        rc |= bench_inference(&b, 64, 84 * 84, GB_DTYPE_UINT8, pix, 2, "84x84 uint8");
    }
    if (want(&b, "inference_pipelined"))
        rc |= bench_inference_pipelined(&b);
    if (want(&b, "sample_throughput")) {
        rc |= bench_sample(&b, 16 << 10);
        rc |= bench_sample(&b, 1 << 20);
    }
    if (want(&b, "param_broadcast")) {
        rc |= bench_params(&b, 10000000);
        rc |= bench_params(&b, 100000000);
    }
    zmq_ctx_term(b.ctx);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "%s", b.dir);
    rmdir(cmd); /* ipc socket files are removed by ZeroMQ on close */
    return rc ? GB_EXIT_FAILURE : GB_EXIT_OK;
}
