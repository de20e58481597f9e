/* launch/bench/bench_inference.c: the inference stream's cases of `gearbox bench streams`: round
 * trips at several batch sizes against a raw ZeroMQ REQ/REP moving the same bytes, and the
 * pipelined server's throughput against the serial one with a 1 ms forward. */
#include "launch/bench/bench.h"
#include "runtime/base/clock.h"
#include "runtime/streams/inference.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static void *infer_server_thread(void *arg)
{
    gb_bench_thread *t = arg;
    gb_error err;
    while (!atomic_load(&t->stop))
        gb_infer_server_poll(t->obj, 20, &err);
    return NULL;
}

static void *raw_rep_thread(void *arg)
{
    gb_bench_thread *t = arg;
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

/* Both sides of one round-trip case, alive at the same time: gearbox's batching server and
 * client, and a raw ZeroMQ REQ/REP that moves the same bytes each way. */
typedef struct rtt_pair {
    gb_infer_server *s;
    gb_infer_client *c;
    void *rep, *req;
    gb_bench_thread t, tr; /* the threads that serve s and rep */
    pthread_t th, rth;
    int threads; /* started */
} rtt_pair;

static void rtt_pair_close(rtt_pair *p)
{
    if (p->threads) {
        atomic_store(&p->t.stop, 1);
        atomic_store(&p->tr.stop, 1);
        pthread_join(p->th, NULL);
        pthread_join(p->rth, NULL);
    }
    gb_infer_client_close(p->c);
    gb_infer_server_close(p->s);
    if (p->req)
        zmq_close(p->req);
    if (p->rep)
        zmq_close(p->rep);
}

/* gearbox: a batching server (max_batch_rows 4096, max_wait 1 ms as configured by default)
 * answering bench_policy; raw: a REP thread replying reply_bytes. Returns 0 or the error. */
static int rtt_pair_open(rtt_pair *p, gb_bench_net *b, size_t reply_bytes, gb_error *err)
{
    static infer_policy pol;
    char ep[256];
    *p = (rtt_pair){0};
    gb_bench_net_endpoint(b, ep, sizeof ep, "bench-policy");
    gb_infer_server_opts so = {ep, 4096, 1.0, GB_ROLE_POLICY, 0, bench_policy, &pol, 0, NULL, 0};
    int rc = gb_infer_server_open(&p->s, b->ctx, &so, err);
    if (rc)
        return rc;
    const char *eps[1] = {gb_infer_server_endpoint(p->s)};
    gb_infer_client_opts co = {eps, 1, 10000, GB_ROLE_ACTOR, 0, 0, 0};
    if ((rc = gb_infer_client_open(&p->c, b->ctx, &co, err)))
        return rc;
    if ((rc = gb_bench_net_raw_pair(b, ZMQ_REP, ZMQ_REQ, "bench-rep", 0, &p->rep, &p->req,
                                    err)))
        return rc;
    p->t.obj = p->s;
    p->tr.obj = p->rep;
    p->tr.reply_bytes = reply_bytes;
    pthread_create(&p->th, NULL, infer_server_thread, &p->t);
    pthread_create(&p->rth, NULL, raw_rep_thread, &p->tr);
    p->threads = 1;
    return 0;
}

/* Requests d (data) through gearbox and bytes of obs through raw REQ/REP alternately, so both
 * see the same load on this shared machine: 50 warm-ups, then up to iters round trips each
 * (at least 100, then until budget_s), timed one by one in us into rtt and raw. Returns 0 with
 * *n, or the error. */
static int rtt_measure(rtt_pair *p, const gb_tensor_desc *d, const void *const *data,
                       const void *obs, size_t bytes, int iters, double budget_s, double *rtt,
                       double *raw, int *n, gb_error *err)
{
    gb_wire_msg reply;
    gb_wire_msg_init(&reply);
    zmq_msg_t m;
    zmq_msg_init(&m);
    int rc = 0;
    *n = 0;
    double start = gb_now_s();
    for (int i = -50; i < iters; i++) {
        uint64_t t0 = gb_now_ns();
        if ((rc = gb_infer_client_request(p->c, d, data, 1, &reply, err)))
            break;
        uint64_t t1 = gb_now_ns();
        gb_wire_msg_release(&reply);
        uint64_t t2 = gb_now_ns();
        if (zmq_send(p->req, obs, bytes, 0) < 0 || zmq_msg_recv(&m, p->req, 0) < 0) {
            rc = gb_error_set(err, GB_EZMQ, "raw REQ/REP: %s", zmq_strerror(zmq_errno()));
            break;
        }
        uint64_t t3 = gb_now_ns();
        if (i < 0)
            continue;
        rtt[*n] = (double)(t1 - t0) * 1e-3;
        raw[*n] = (double)(t3 - t2) * 1e-3;
        (*n)++;
        if (gb_now_s() - start > budget_s && *n >= 100)
            break;
    }
    zmq_msg_close(&m);
    return rc;
}

static void rtt_print(gb_bench_net *b, int rows, const char *label, size_t bytes,
                      size_t reply_bytes, double *rtt, double *raw, int n)
{
    double p50 = gb_bench_quantile(rtt, n, 0.5), p99 = gb_bench_quantile(rtt, n, 0.99);
    double rp50 = gb_bench_quantile(raw, n, 0.5);
    if (b->json)
        printf("{\"bench\": \"streams\", \"case\": \"inference_rtt\", \"transport\": \"%s\", "
               "\"curve\": %s, \"rows\": %d, \"row\": \"%s\", \"bytes\": %zu, "
               "\"reply_bytes\": %zu, \"iterations\": %d, \"p50_us\": %.1f, \"p99_us\": %.1f, "
               "\"raw_p50_us\": %.1f, \"ratio\": %.3f}\n",
               b->tcp ? "tcp" : "ipc", b->curve ? "true" : "false", rows, label, bytes,
               reply_bytes, n, p50, p99, rp50, p50 / rp50);
    else
        printf("inference_rtt%s  rows %5d x %-12s %8zu B  p50 %8.1f us  p99 %8.1f us  "
               "raw REQ/REP p50 %8.1f us  ratio %.2f (target <= 1.3)\n",
               b->curve ? (b->tcp ? " (CURVE)" : " (PLAIN)") : "",
               rows, label, bytes, p50, p99, rp50, p50 / rp50);
    gb_bench_net_figure(b, p50);
    fflush(stdout);
}

/* Round trips of rows observations (row_shape, row_bytes each) against raw REQ/REP. Returns 0,
 * or 1 when a measurement failed (the message on stderr). */
static int bench_inference(gb_bench_net *b, int rows, int row_bytes, gb_dtype dtype,
                           const int64_t *row_shape, int row_rank, const char *label)
{
    gb_error err = {0};
    int iters = b->quick ? 300 : 2000, n = 0;
    size_t bytes = (size_t)rows * (size_t)row_bytes;
    size_t reply_bytes = (size_t)rows * 12; /* action int32, logp and value float32 */
    unsigned char *obs = malloc(bytes);
    double *rtt = malloc(sizeof(double) * (size_t)iters);
    double *raw = malloc(sizeof(double) * (size_t)iters);
    rtt_pair p = {0};
    int rc = !obs || !rtt || !raw ? gb_error_set(&err, GB_ENOMEM, "out of memory")
                                  : rtt_pair_open(&p, b, reply_bytes, &err);
    if (!rc) {
        memset(obs, 1, bytes);
        gb_tensor_desc d;
        int64_t shape[GB_WIRE_MAX_RANK];
        shape[0] = rows;
        for (int i = 0; i < row_rank; i++)
            shape[1 + i] = row_shape[i];
        gb_wire_set_tensor(&d, "obs", dtype, 1 + row_rank, shape, NULL);
        const void *data[1] = {obs};
        rc = rtt_measure(&p, &d, data, obs, bytes, iters, b->quick ? 1.5 : 5.0, rtt, raw, &n,
                         &err);
    }
    rtt_pair_close(&p);
    if (!rc && n > 0)
        rtt_print(b, rows, label, bytes, reply_bytes, rtt, raw, n);
    else
        fprintf(stderr, "bench streams: inference: %s\n", err.msg);
    free(obs);
    free(rtt);
    free(raw);
    return rc || n == 0;
}

int gb_bench_inference_rtt(gb_bench_net *b)
{
    int64_t four[1] = {4}, pix[2] = {84, 84};
    int rc = 0;
    rc |= bench_inference(b, 1, 16, GB_DTYPE_FLOAT32, four, 1, "4 float32");
    rc |= bench_inference(b, 64, 16, GB_DTYPE_FLOAT32, four, 1, "4 float32");
    rc |= bench_inference(b, 1024, 16, GB_DTYPE_FLOAT32, four, 1, "4 float32");
    rc |= bench_inference(b, 64, 84 * 84, GB_DTYPE_UINT8, pix, 2, "84x84 uint8");
    return rc;
}

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
    gb_bench_net *b;
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
    gb_infer_client_opts co = {eps, 1, 10000, GB_ROLE_ACTOR, a->index, 0, 0};
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
static int pipe_throughput(gb_bench_net *b, int nclients, int pipelined, double *req_per_s,
                           uint64_t *batches)
{
    gb_error err;
    static infer_policy pol;
    char ep[256];
    gb_bench_net_endpoint(b, ep, sizeof ep, pipelined ? "bench-pipe-1" : "bench-pipe-0");
    gb_infer_server_opts so = {ep, 4096, 1.0, GB_ROLE_POLICY, 0, bench_policy_1ms, &pol,
                               pipelined, NULL, 0};
    gb_infer_server *s;
    if (gb_infer_server_open(&s, b->ctx, &so, &err)) {
        fprintf(stderr, "bench streams: %s\n", err.msg);
        return 1;
    }
    gb_bench_thread t = {0};
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
int gb_bench_inference_pipelined(gb_bench_net *b)
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
            printf("inference_pipelined  %d client%s x 2 x 32 rows, 1 ms forward  pipelined "
                   "%7.0f req/s (%llu batches)  serial %7.0f req/s (%llu batches)  ratio %.2f\n",
                   counts[k], counts[k] > 1 ? "s" : " ", piped, (unsigned long long)bp, serial,
                   (unsigned long long)bs, piped / serial);
        fflush(stdout);
    }
    return 0;
}
