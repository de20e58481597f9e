/* tests/runtime/streams/test_inference_pipelined.c: the pipelined inference server (request thread
 * + inference thread) with many client threads over ipc: replies matched to requests and rows, the
 * next batch gathered and malformed requests answered while a slow callback runs, callback errors
 * answered to every request of their batch, a clean close with a batch in the model, and the
 * same workload served by the serial and the pipelined server (times printed, not asserted). */
#include "runtime/base/clock.h"
#include "runtime/streams/inference.h"
#include "streams_test.h"
#include "test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#define MAXROWS 4096
#define MAXBATCHES 4096

/* value[r] = sum(obs[r]), act[r] = (int)obs[r][0]; records every batch it sees. */
typedef struct slow_policy {
    int sleep_ms;           /* per batch */
    _Atomic int hold;       /* while set, the callback waits (up to 10 s) before computing */
    _Atomic int fail_call;  /* the callback with this index fails (0: the first; -1: none) */
    _Atomic int in_cb;      /* a callback is running */
    _Atomic int calls;      /* callbacks started */
    _Atomic int finished;   /* callbacks returned */
    _Atomic int overlap;    /* a callback or between hook found another one running */
    _Atomic int betweens;   /* between hook calls */
    pthread_t request_thread;
    _Atomic int on_request_thread; /* a callback ran on the request thread */
    int batch_requests[MAXBATCHES], batch_rows[MAXBATCHES];
    float value[MAXROWS];
    int32_t act[MAXROWS];
} slow_policy;

static int slow_fn(void *user, const gb_infer_batch *in, gb_infer_outputs *out, gb_error *err)
{
    slow_policy *p = user;
    if (atomic_fetch_add(&p->in_cb, 1) != 0)
        atomic_store(&p->overlap, 1);
    if (pthread_equal(pthread_self(), p->request_thread))
        atomic_store(&p->on_request_thread, 1);
    int k = atomic_fetch_add(&p->calls, 1);
    if (k < MAXBATCHES) {
        p->batch_requests[k] = in->n_requests;
        p->batch_rows[k] = in->rows;
    }
    for (int i = 0; i < 10000 && atomic_load(&p->hold); i++)
        gb_sleep_ms(1);
    if (p->sleep_ms)
        gb_sleep_ms(p->sleep_ms);
    int rc = 0;
    if (k == atomic_load(&p->fail_call)) {
        rc = gb_error_set(err, GB_ETORCH, "forward failed on purpose");
    } else if (in->rows > MAXROWS) {
        rc = gb_error_set(err, GB_EINVAL, "too many rows");
    } else {
        int64_t width = in->inputs[0].desc->shape[1];
        const float *x = in->inputs[0].data;
        for (int r = 0; r < in->rows; r++) {
            float s = 0;
            for (int64_t j = 0; j < width; j++)
                s += x[r * width + j];
            p->value[r] = s;
            p->act[r] = (int32_t)x[r * width];
        }
        int64_t shape[1] = {in->rows};
        gb_wire_set_tensor(&out->descs[0], "value", GB_DTYPE_FLOAT32, 1, shape, err);
        gb_wire_set_tensor(&out->descs[1], "act", GB_DTYPE_INT32, 1, shape, err);
        out->data[0] = p->value;
        out->data[1] = p->act;
        out->ntensors = 2;
        out->policy_version = 5;
    }
    atomic_fetch_add(&p->finished, 1);
    atomic_fetch_sub(&p->in_cb, 1);
    return rc;
}

static void slow_between(void *user)
{
    slow_policy *p = user;
    if (atomic_load(&p->in_cb) != 0)
        atomic_store(&p->overlap, 1);
    atomic_fetch_add(&p->betweens, 1);
}

/* ---- a server driven by its own (request) thread ---- */

typedef struct server_thread {
    gb_infer_server *s;
    slow_policy *pol;
    _Atomic int stop;
    _Atomic int started;
    int errors;     /* polls that returned a callback error */
    int bad;        /* polls that returned anything else negative */
    int close_here; /* close the server on this thread when stopping */
    gb_infer_server_stats st;
    pthread_mutex_t live_mu; /* guards live: the stats after the latest poll, for the test */
    gb_infer_server_stats live;
    char msg[GB_ERROR_MSG_MAX];
    pthread_t th;
} server_thread;

static void *server_main(void *arg)
{
    server_thread *t = arg;
    t->pol->request_thread = pthread_self();
    atomic_store(&t->started, 1);
    gb_error err;
    while (!atomic_load(&t->stop)) {
        int rc = gb_infer_server_poll(t->s, 20, &err);
        if (rc == GB_ETORCH) {
            t->errors++;
        } else if (rc < 0) {
            t->bad++;
            snprintf(t->msg, sizeof t->msg, "%s", err.msg);
        }
        gb_infer_server_stats st = gb_infer_server_get_stats(t->s);
        pthread_mutex_lock(&t->live_mu);
        t->live = st;
        pthread_mutex_unlock(&t->live_mu);
    }
    t->st = gb_infer_server_get_stats(t->s);
    if (t->close_here) {
        gb_infer_server_close(t->s);
        t->s = NULL;
    }
    return NULL;
}

static void server_start(server_thread *t)
{
    pthread_mutex_init(&t->live_mu, NULL);
    pthread_create(&t->th, NULL, server_main, t);
    while (!atomic_load(&t->started))
        gb_sleep_ms(1);
}

/* Valid requests the server has taken in, as of its latest poll (polls end every 20 ms). */
static uint64_t live_received(server_thread *t)
{
    pthread_mutex_lock(&t->live_mu);
    uint64_t n = t->live.received;
    pthread_mutex_unlock(&t->live_mu);
    return n;
}

static gb_infer_server *open_server(void *ctx, const char *ep, int max_rows, double wait_ms,
                                    int pipelined, slow_policy *pol)
{
    gb_error err;
    gb_infer_server_opts o = {ep,   max_rows, wait_ms,   GB_ROLE_POLICY, 0, slow_fn,
                              pol, pipelined, slow_between, 0};
    gb_infer_server *s = NULL;
    CHECK_OK(gb_infer_server_open(&s, ctx, &o, &err));
    return s;
}

static gb_infer_client *open_client(void *ctx, const char *ep, int index)
{
    gb_error err;
    const char *eps[1] = {ep};
    gb_infer_client_opts co = {eps, 1, 10000, GB_ROLE_ACTOR, index, 0, 0};
    gb_infer_client *c = NULL;
    CHECK_OK(gb_infer_client_open(&c, ctx, &co, &err));
    return c;
}

static gb_tensor_desc obs_desc(int rows, int width)
{
    gb_tensor_desc d;
    int64_t shape[2] = {rows, width};
    gb_wire_set_tensor(&d, "obs", GB_DTYPE_FLOAT32, 2, shape, NULL);
    return d;
}

/* Fills rows x 3 observations unique to (client, k). */
static void fill_obs(float *obs, int client, int k, int rows)
{
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < 3; j++)
            obs[r * 3 + j] = (float)(client * 100000 + k * 10 + r) + (float)j;
}

/* 1 when reply holds the policy's answer to rows x 3 obs. */
static int reply_matches(gb_wire_msg *m, const float *obs, int rows)
{
    int iv = gb_wire_msg_find(m, "value"), ia = gb_wire_msg_find(m, "act");
    if (iv < 0 || ia < 0 || m->hdr.tensors[iv].shape[0] != rows ||
        m->hdr.tensors[ia].shape[0] != rows || m->hdr.policy_version != 5)
        return 0;
    const float *v = gb_wire_msg_tensor(m, iv).data;
    const int32_t *a = gb_wire_msg_tensor(m, ia).data;
    for (int r = 0; r < rows; r++)
        if (v[r] != obs[r * 3] + obs[r * 3 + 1] + obs[r * 3 + 2] || a[r] != (int32_t)obs[r * 3])
            return 0;
    return 1;
}

/* ---- many clients ---- */

#define NCLIENTS 8
#define NREQ 60
#define OUTSTANDING 2

typedef struct client_thread {
    void *ctx;
    const char *ep;
    int index;
    int bad;
    uint64_t replies;
    pthread_t th;
} client_thread;

/* Keeps OUTSTANDING requests in flight, each with 1..8 rows, checking every reply's rows. */
static void *client_main(void *arg)
{
    client_thread *a = arg;
    gb_error err;
    const char *eps[1] = {a->ep};
    gb_infer_client_opts co = {eps, 1, 10000, GB_ROLE_ACTOR, a->index, 0, 0};
    gb_infer_client *c;
    if (gb_infer_client_open(&c, a->ctx, &co, &err)) {
        a->bad = 1;
        return NULL;
    }
    static _Thread_local float obs[NREQ][8 * 3];
    uint64_t ids[NREQ];
    int rows[NREQ], sent = 0, got = 0;
    gb_wire_msg m;
    gb_wire_msg_init(&m);
    while (got < NREQ && !a->bad) {
        while (sent < NREQ && sent - got < OUTSTANDING) {
            rows[sent] = 1 + (sent + a->index) % 8;
            fill_obs(obs[sent], a->index, sent, rows[sent]);
            gb_tensor_desc d = obs_desc(rows[sent], 3);
            const void *data[1] = {obs[sent]};
            if (gb_infer_client_send(c, &d, data, 1, &ids[sent], &err)) {
                fprintf(stderr, "client %d: send: %s\n", a->index, err.msg);
                a->bad = 1;
                break;
            }
            sent++;
        }
        if (a->bad || gb_infer_client_recv(c, &m, 10000, &err)) {
            fprintf(stderr, "client %d: recv: %s\n", a->index, err.msg);
            a->bad = 1;
            break;
        }
        int k = 0;
        while (k < sent && ids[k] != m.hdr.seq)
            k++;
        if (k == sent || !reply_matches(&m, obs[k], rows[k])) {
            fprintf(stderr, "client %d: reply %llu does not match its request\n", a->index,
                    (unsigned long long)m.hdr.seq);
            a->bad = 1;
        }
        ids[k] = UINT64_MAX; /* answered once */
        gb_wire_msg_release(&m);
        got++;
    }
    a->replies = gb_infer_client_get_stats(c).replies;
    gb_infer_client_close(c);
    return NULL;
}

/* Runs NCLIENTS client threads against a server; returns the seconds they took. */
static double run_clients(void *ctx, const char *ep, int *bad)
{
    client_thread ct[NCLIENTS];
    uint64_t t0 = gb_now_ns();
    for (int i = 0; i < NCLIENTS; i++) {
        ct[i] = (client_thread){.ctx = ctx, .ep = ep, .index = i};
        pthread_create(&ct[i].th, NULL, client_main, &ct[i]);
    }
    for (int i = 0; i < NCLIENTS; i++) {
        pthread_join(ct[i].th, NULL);
        *bad |= ct[i].bad || ct[i].replies != NREQ;
    }
    return (double)(gb_now_ns() - t0) / 1e9;
}

static uint64_t want_rows(void)
{
    uint64_t n = 0;
    for (int c = 0; c < NCLIENTS; c++)
        for (int k = 0; k < NREQ; k++)
            n += (uint64_t)(1 + (k + c) % 8);
    return n;
}

/* The same workload (8 clients, 2 requests outstanding each, a 2 ms callback) on the serial
 * and the pipelined server: every reply right, counts exact; the times are printed only. */
static void test_many_clients(void)
{
    char dir[64], ep[128];
    st_tmpdir(dir, sizeof dir);
    void *ctx = zmq_ctx_new();
    double secs[2];
    for (int pipelined = 0; pipelined <= 1; pipelined++) {
        snprintf(ep, sizeof ep, "ipc://%s/policy-%d", dir, pipelined);
        static slow_policy pol;
        memset(&pol, 0, sizeof pol);
        atomic_store(&pol.fail_call, -1);
        pol.sleep_ms = 2;
        server_thread t = {.pol = &pol};
        t.s = open_server(ctx, ep, 64, 1.0, pipelined, &pol);
        if (!t.s)
            return;
        server_start(&t);
        int bad = 0;
        secs[pipelined] = run_clients(ctx, ep, &bad);
        atomic_store(&t.stop, 1);
        pthread_join(t.th, NULL);
        CHECK_EQ_INT(bad, 0);
        CHECK_EQ_INT(t.bad, 0);
        CHECK_EQ_INT(t.st.requests, NCLIENTS * NREQ);
        CHECK_EQ_INT(t.st.rows, want_rows());
        CHECK_EQ_INT(t.st.rejected, 0);
        CHECK_EQ_INT(t.st.failed, 0);
        CHECK_EQ_INT(t.st.batches, atomic_load(&pol.calls));
        CHECK_EQ_INT(atomic_load(&pol.overlap), 0); /* never two callbacks, or between, at once */
        CHECK(atomic_load(&pol.betweens) >= atomic_load(&pol.calls));
        CHECK_EQ_INT(atomic_load(&pol.on_request_thread), !pipelined);
        if (pipelined)
            CHECK(t.st.overlapped >= 1);
        else
            CHECK_EQ_INT(t.st.overlapped, 0);
        fprintf(stderr, "  %s: %d requests in %llu batches (%llu gathered during the previous "
                "one), %.3f s\n", pipelined ? "pipelined" : "serial", NCLIENTS * NREQ,
                (unsigned long long)t.st.batches, (unsigned long long)t.st.overlapped,
                secs[pipelined]);
        gb_infer_server_close(t.s);
    }
    zmq_ctx_term(ctx);
    st_rmdir(dir);
}

/* Sends a request with a decodable header but no tensors (answered with GB_EPROTO, request id
 * known) and a frame of garbage (counted, not answerable) from a raw DEALER. */
static void send_malformed(void *dealer, uint64_t seq)
{
    gb_wire_header h;
    gb_wire_header_init(&h, GB_MSG_INFER_REQUEST, GB_ROLE_ACTOR, 99);
    h.seq = seq;
    h.ntensors = 0;
    gb_error err;
    CHECK_OK(gb_wire_send(dealer, NULL, 0, &h, NULL, 0, &err));
    CHECK(zmq_send(dealer, "\x01garbage", 8, 0) == 8);
}

/* While batch 1 is held in the model: a malformed request is answered, and 7 clients' requests
 * are received and merged into batch 2, which runs as soon as batch 1 is done. */
static void test_gather_during_batch(void)
{
    char dir[64], ep[128];
    st_tmpdir(dir, sizeof dir);
    snprintf(ep, sizeof ep, "ipc://%s/policy", dir);
    void *ctx = zmq_ctx_new();
    static slow_policy pol;
    memset(&pol, 0, sizeof pol);
    atomic_store(&pol.fail_call, -1);
    server_thread t = {.pol = &pol};
    t.s = open_server(ctx, ep, 1024, 1.0, 1, &pol);
    gb_infer_client *c[8];
    for (int i = 0; i < 8; i++)
        c[i] = open_client(ctx, ep, i);
    void *raw = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0, tmo = 5000;
    zmq_setsockopt(raw, ZMQ_LINGER, &zero, sizeof zero);
    zmq_setsockopt(raw, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
    CHECK(zmq_connect(raw, ep) == 0);
    server_start(&t);
    gb_sleep_ms(100); /* connections up */

    gb_error err;
    static float obs[8][8 * 3];
    uint64_t ids[8];
    atomic_store(&pol.hold, 1);
    fill_obs(obs[0], 0, 0, 3);
    gb_tensor_desc d = obs_desc(3, 3);
    const void *data[1] = {obs[0]};
    CHECK_OK(gb_infer_client_send(c[0], &d, data, 1, &ids[0], &err));
    for (int i = 0; i < 5000 && atomic_load(&pol.calls) < 1; i++)
        gb_sleep_ms(1);
    CHECK_EQ_INT(atomic_load(&pol.calls), 1); /* batch 1 is in the model, held */

    /* the request thread is live: a malformed request is answered during the callback */
    send_malformed(raw, 4242);
    gb_wire_msg m;
    gb_wire_msg_init(&m);
    CHECK_OK(gb_wire_recv(raw, &m, 0, 0, &err));
    CHECK(m.hdr.seq == 4242 && m.hdr.status == GB_EPROTO);
    gb_wire_msg_release(&m);
    CHECK(atomic_load(&pol.in_cb) == 1 && atomic_load(&pol.finished) == 0);

    int total_rows = 0;
    for (int i = 1; i < 8; i++) {
        fill_obs(obs[i], i, 0, i);
        d = obs_desc(i, 3);
        data[0] = obs[i];
        CHECK_OK(gb_infer_client_send(c[i], &d, data, 1, &ids[i], &err));
        total_rows += i;
    }
    TEST_WAIT_UNTIL(live_received(&t) >= 8, 10000); /* received and gathered meanwhile */
    CHECK_EQ_INT(atomic_load(&pol.calls), 1);
    atomic_store(&pol.hold, 0);

    for (int i = 0; i < 8; i++) {
        CHECK_OK(gb_infer_client_recv(c[i], &m, 5000, &err));
        CHECK(m.hdr.seq == ids[i]);
        CHECK(reply_matches(&m, obs[i], i == 0 ? 3 : i));
        gb_wire_msg_release(&m);
    }
    atomic_store(&t.stop, 1);
    pthread_join(t.th, NULL);
    CHECK_EQ_INT(atomic_load(&pol.calls), 2);
    CHECK_EQ_INT(pol.batch_requests[0], 1);
    CHECK_EQ_INT(pol.batch_rows[0], 3);
    CHECK_EQ_INT(pol.batch_requests[1], 7); /* all that arrived during batch 1, in one batch */
    CHECK_EQ_INT(pol.batch_rows[1], total_rows);
    CHECK_EQ_INT(t.st.batches, 2);
    CHECK_EQ_INT(t.st.requests, 8);
    CHECK_EQ_INT(t.st.overlapped, 1);
    CHECK_EQ_INT(t.st.rejected, 2); /* the header without tensors and the garbage frame */
    CHECK_EQ_INT(t.bad, 0);
    for (int i = 0; i < 8; i++)
        gb_infer_client_close(c[i]);
    zmq_close(raw);
    gb_infer_server_close(t.s);
    zmq_ctx_term(ctx);
    st_rmdir(dir);
}

/* A failing batch gathered while another runs: each of its requests gets the error with its
 * message; the batch before it and the requests after it are served. */
static void test_callback_error(void)
{
    char dir[64], ep[128];
    st_tmpdir(dir, sizeof dir);
    snprintf(ep, sizeof ep, "ipc://%s/policy", dir);
    void *ctx = zmq_ctx_new();
    static slow_policy pol;
    memset(&pol, 0, sizeof pol);
    atomic_store(&pol.fail_call, 1); /* batch 2 */
    server_thread t = {.pol = &pol};
    t.s = open_server(ctx, ep, 1024, 1.0, 1, &pol);
    gb_infer_client *c[4];
    for (int i = 0; i < 4; i++)
        c[i] = open_client(ctx, ep, i);
    server_start(&t);
    gb_sleep_ms(100);
    gb_error err;
    static float obs[4][8 * 3];
    uint64_t ids[4];
    atomic_store(&pol.hold, 1);
    for (int i = 0; i < 4; i++)
        fill_obs(obs[i], i, 0, 2);
    gb_tensor_desc d = obs_desc(2, 3);
    const void *data[1] = {obs[0]};
    CHECK_OK(gb_infer_client_send(c[0], &d, data, 1, &ids[0], &err));
    for (int i = 0; i < 5000 && atomic_load(&pol.calls) < 1; i++)
        gb_sleep_ms(1);
    for (int i = 1; i < 4; i++) {
        data[0] = obs[i];
        CHECK_OK(gb_infer_client_send(c[i], &d, data, 1, &ids[i], &err));
    }
    TEST_WAIT_UNTIL(live_received(&t) >= 4, 10000); /* received and gathered meanwhile */
    atomic_store(&pol.hold, 0);
    gb_wire_msg m;
    gb_wire_msg_init(&m);
    CHECK_OK(gb_infer_client_recv(c[0], &m, 5000, &err));
    CHECK(m.hdr.seq == ids[0] && reply_matches(&m, obs[0], 2));
    gb_wire_msg_release(&m);
    for (int i = 1; i < 4; i++) {
        CHECK_EQ_INT(gb_infer_client_recv(c[i], &m, 5000, &err), GB_ETORCH);
        CHECK(m.hdr.seq == ids[i]);
        CHECK(strstr(err.msg, "on purpose") != NULL);
        gb_wire_msg_release(&m);
    }
    /* the server keeps serving */
    data[0] = obs[1];
    CHECK_OK(gb_infer_client_request(c[1], &d, data, 1, &m, &err));
    CHECK(reply_matches(&m, obs[1], 2));
    gb_wire_msg_release(&m);
    atomic_store(&t.stop, 1);
    pthread_join(t.th, NULL);
    CHECK_EQ_INT(atomic_load(&pol.calls), 3);
    CHECK_EQ_INT(pol.batch_requests[1], 3);
    CHECK_EQ_INT(t.errors, 1); /* the poll that finished batch 2 returned its error */
    CHECK_EQ_INT(t.bad, 0);
    CHECK_EQ_INT(t.st.failed, 3);
    CHECK_EQ_INT(t.st.requests, 2);
    CHECK_EQ_INT(t.st.batches, 2);
    for (int i = 0; i < 4; i++)
        gb_infer_client_close(c[i]);
    gb_infer_server_close(t.s);
    zmq_ctx_term(ctx);
    st_rmdir(dir);
}

/* Closing with a batch in the model and another gathering: close waits for the callback, runs
 * no other, answers what it holds (served outputs, or GB_ECLOSED), frees everything (ASan). */
static void test_close_in_flight(void)
{
    void *ctx = zmq_ctx_new();
    const char *ep = "inproc://pipelined-close";
    static slow_policy pol;
    memset(&pol, 0, sizeof pol);
    atomic_store(&pol.fail_call, -1);
    pol.sleep_ms = 200;
    server_thread t = {.pol = &pol, .close_here = 1};
    t.s = open_server(ctx, ep, 1024, 1.0, 1, &pol);
    gb_infer_client *c[2] = {open_client(ctx, ep, 0), open_client(ctx, ep, 1)};
    server_start(&t);
    gb_error err;
    float obs[2][3];
    fill_obs(obs[0], 0, 0, 1);
    fill_obs(obs[1], 1, 0, 1);
    gb_tensor_desc d = obs_desc(1, 3);
    uint64_t ids[2];
    const void *data[1] = {obs[0]};
    CHECK_OK(gb_infer_client_send(c[0], &d, data, 1, &ids[0], &err));
    for (int i = 0; i < 5000 && atomic_load(&pol.calls) < 1; i++)
        gb_sleep_ms(1);
    data[0] = obs[1];
    CHECK_OK(gb_infer_client_send(c[1], &d, data, 1, &ids[1], &err));
    TEST_WAIT_UNTIL(live_received(&t) >= 2, 10000); /* gathered, waiting for the model */
    atomic_store(&t.stop, 1);
    pthread_join(t.th, NULL); /* polls stop and the request thread closes the server */
    CHECK_EQ_INT(atomic_load(&pol.calls), 1);
    CHECK_EQ_INT(atomic_load(&pol.finished), 1);
    CHECK_EQ_INT(atomic_load(&pol.in_cb), 0);
    gb_wire_msg m;
    gb_wire_msg_init(&m);
    /* replies sent before the socket closed: inproc delivers them */
    int rc0 = gb_infer_client_recv(c[0], &m, 1000, &err);
    fprintf(stderr, "  in the model at close: %s\n", rc0 == 0 ? "served" : err.msg);
    if (rc0 == 0)
        CHECK(m.hdr.seq == ids[0] && reply_matches(&m, obs[0], 1));
    gb_wire_msg_release(&m);
    int rc1 = gb_infer_client_recv(c[1], &m, 1000, &err);
    fprintf(stderr, "  gathering at close: %s\n", rc1 == 0 ? "served" : err.msg);
    CHECK(rc1 == GB_ECLOSED || rc1 == GB_ETIMEOUT || rc1 == GB_EAGAIN);
    gb_wire_msg_release(&m);
    gb_infer_client_close(c[0]);
    gb_infer_client_close(c[1]);
    zmq_ctx_term(ctx);
}

int main(void)
{
    TEST_RUN(test_many_clients);
    TEST_RUN(test_gather_during_batch);
    TEST_RUN(test_callback_error);
    TEST_RUN(test_close_in_flight);
    return test_main_result();
}
