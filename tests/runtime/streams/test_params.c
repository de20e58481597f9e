/* tests/runtime/streams/test_params.c: the parameter stream across processes: a service process,
 * subscribers that are there from the start and ones that join late, torn and corrupt versions
 * that must never be applied, PUB drops repaired by fetching, and a publisher that sees its service
 * restart. */
#include "params_test.h"
#include "runtime/streams/wire.h"
#include "runtime/streams/wire_messages.h"
#include "test.h"

#include <pthread.h>
#include <stdatomic.h>

#define TOTAL (3 * 1024 * 1024 + 12345) /* not a multiple of the chunk */
#define CHUNK (256 * 1024)

typedef struct sub_arg {
    const char *dir;
    char pub[256], fetch[256];
    int index;
    int64_t final_version;
    uint64_t allowed; /* bit v: version v may be applied */
} sub_arg;

/* Verifies a blob completely: version allowed, layout, CRC, every byte. */
static int verify_blob(const gb_param_blob *b, uint64_t allowed)
{
    if (b->version < 0 || b->version > 63 || !(allowed & (1ULL << b->version))) {
        fprintf(stderr, "applied version %lld that must not be\n", (long long)b->version);
        return 1;
    }
    if (b->bytes != TOTAL || b->nlayout != 3 || strcmp(b->layout[1].name,
                                                        "encoder.layers.0.bias") != 0 ||
        b->layout[2].shape[0] != (int64_t)(TOTAL - b->layout[2].offset)) {
        fprintf(stderr, "version %lld: wrong size or layout\n", (long long)b->version);
        return 1;
    }
    int64_t bad = pt_check(b->data, 0, b->bytes, b->version);
    if (bad >= 0) {
        fprintf(stderr, "version %lld: byte %lld wrong: torn or mixed blob applied\n",
                (long long)b->version, (long long)bad);
        return 1;
    }
    return 0;
}

static int sub_main(void *arg)
{
    sub_arg *a = arg;
    gb_error err;
    void *ctx = zmq_ctx_new();
    gb_param_subscriber_opts o = {a->pub, a->fetch, 2000, 200, 4, 0, GB_ROLE_POLICY, a->index,
                                  0, 0, 0};
    gb_param_subscriber *s;
    if (gb_param_subscriber_open(&s, ctx, &o, &err)) {
        fprintf(stderr, "subscriber: %s\n", err.msg);
        return 3;
    }
    char path[512], buf[512];
    snprintf(path, sizeof path, "%s/sub-ready-%d", a->dir, a->index);
    st_write_file(path, "ready");
    int bad = 0, napplied = 0;
    char applied[256] = "";
    double end = gb_now_s() + 60;
    while (gb_param_subscriber_version(s) < a->final_version && gb_now_s() < end && !bad) {
        int rc = gb_param_subscriber_poll(s, 100, &err);
        if (rc < 0) {
            fprintf(stderr, "subscriber poll: %s\n", err.msg);
            bad = 1;
        }
        if (rc == 1) {
            const gb_param_blob *b = gb_param_subscriber_acquire(s);
            bad |= verify_blob(b, a->allowed);
            size_t n = strlen(applied);
            snprintf(applied + n, sizeof applied - n, "%s%lld", napplied++ ? "," : "",
                     (long long)b->version);
            gb_param_blob_release(b);
        }
    }
    gb_param_subscriber_stats st = gb_param_subscriber_get_stats(s);
    if (gb_param_subscriber_version(s) != a->final_version) {
        fprintf(stderr, "subscriber %d ended on version %lld, want %lld\n", a->index,
                (long long)gb_param_subscriber_version(s), (long long)a->final_version);
        bad = 1;
    }
    snprintf(path, sizeof path, "%s/sub-%d", a->dir, a->index);
    snprintf(buf, sizeof buf, "%llu %llu %llu %s", (unsigned long long)st.applied,
             (unsigned long long)st.repaired, (unsigned long long)st.corrupt, applied);
    st_write_file(path, buf);
    gb_param_subscriber_close(s);
    zmq_ctx_term(ctx);
    return bad;
}

static void publish(gb_param_publisher *p, int64_t v, uint8_t *data)
{
    gb_error err;
    gb_param_entry layout[3];
    int n = pt_layout(layout, TOTAL);
    pt_fill(data, 0, TOTAL, v);
    CHECK_OK(gb_param_publish(p, v, layout, n, data, TOTAL, &err));
}

/* Raw messages to the service's input: a version whose END carries a wrong CRC, and one that
 * stops half way (a publisher that died). */
static void publish_bad(void *ctx, const char *in, uint8_t *data)
{
    gb_error err;
    void *push = zmq_socket(ctx, ZMQ_PUSH);
    int linger = 5000;
    zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof linger);
    zmq_connect(push, in);
    gb_param_entry layout[3];
    pt_layout(layout, TOTAL);
    gb_param_publisher_opts po = {in, CHUNK, 5000, GB_ROLE_TRAINER, 1};
    (void)po;
    for (int64_t v = 6; v <= 7; v++) {
        pt_fill(data, 0, TOTAL, v);
        gb_wire_header h;
        gb_wire_header_init(&h, GB_MSG_PARAM_BEGIN, GB_ROLE_TRAINER, 1);
        gb_msg_param q = {.version = v, .total = TOTAL, .chunk = CHUNK};
        CHECK_OK(gb_wire_schema_write(&gb_schema_param_begin, &q, &h, &err));
        /* the layout in its wire form: 3 records of 208 bytes */
        static unsigned char raw[3 * 208];
        memset(raw, 0, sizeof raw);
        for (int i = 0; i < 3; i++) {
            unsigned char *r = raw + i * 208;
            memcpy(r, layout[i].name, strlen(layout[i].name));
            uint32_t dt = (uint32_t)layout[i].dtype, rk = (uint32_t)layout[i].rank;
            memcpy(r + 128, &dt, 4);
            memcpy(r + 132, &rk, 4);
            for (int d = 0; d < layout[i].rank; d++)
                memcpy(r + 136 + 8 * d, &layout[i].shape[d], 8);
            memcpy(r + 200, &layout[i].offset, 8);
        }
        int64_t ls = sizeof raw;
        h.ntensors = 1;
        gb_wire_set_tensor(&h.tensors[0], "layout", GB_DTYPE_UINT8, 1, &ls, &err);
        gb_wire_payload pl = {raw, 0, 0, 0};
        CHECK_OK(gb_wire_send(push, NULL, 0, &h, &pl, 0, &err));
        uint64_t stop_at = v == 6 ? TOTAL : TOTAL / 2;
        for (uint64_t off = 0; off < stop_at; off += CHUNK) {
            int64_t n = (int64_t)(TOTAL - off < CHUNK ? TOTAL - off : CHUNK);
            gb_wire_header_init(&h, GB_MSG_PARAM_CHUNK, GB_ROLE_TRAINER, 1);
            q = (gb_msg_param){.version = v, .offset = (int64_t)off};
            CHECK_OK(gb_wire_schema_write(&gb_schema_param_chunk, &q, &h, &err));
            h.ntensors = 1;
            gb_wire_set_tensor(&h.tensors[0], "data", GB_DTYPE_UINT8, 1, &n, &err);
            pl.data = data + off;
            CHECK_OK(gb_wire_send(push, NULL, 0, &h, &pl, 0, &err));
        }
        if (v == 6) {
            gb_wire_header_init(&h, GB_MSG_PARAM_END, GB_ROLE_TRAINER, 1);
            q = (gb_msg_param){.version = v, .total = TOTAL, .crc = 12345}; /* wrong CRC */
            CHECK_OK(gb_wire_schema_write(&gb_schema_param_end, &q, &h, &err));
            CHECK_OK(gb_wire_send(push, NULL, 0, &h, NULL, 0, &err));
        }
    }
    zmq_close(push);
}

static void read_endpoints(const char *dir, char *in, char *pub, char *fetch)
{
    char path[512], buf[1024];
    snprintf(path, sizeof path, "%s/service", dir);
    CHECK(st_wait_file(path, buf, sizeof buf, 20) == 0);
    CHECK(sscanf(buf, "%255s %255s %255s", in, pub, fetch) == 3);
}

static pid_t start_sub(sub_arg *a, const char *dir, const char *pub, const char *fetch, int index,
                       int64_t final, uint64_t allowed)
{
    a->dir = dir;
    snprintf(a->pub, sizeof a->pub, "%s", pub);
    snprintf(a->fetch, sizeof a->fetch, "%s", fetch);
    a->index = index;
    a->final_version = final;
    a->allowed = allowed;
    pid_t pid = st_fork(sub_main, a);
    char path[512], buf[16];
    snprintf(path, sizeof path, "%s/sub-ready-%d", dir, index);
    CHECK(st_wait_file(path, buf, sizeof buf, 20) == 0);
    return pid;
}

static void sub_result(const char *dir, int index, unsigned long long *applied,
                       unsigned long long *repaired, char *versions)
{
    char path[512], buf[512];
    unsigned long long corrupt = 1;
    snprintf(path, sizeof path, "%s/sub-%d", dir, index);
    CHECK(st_read_file(path, buf, sizeof buf) == 0);
    versions[0] = '\0';
    CHECK(sscanf(buf, "%llu %llu %llu %255s", applied, repaired, &corrupt, versions) >= 3);
    CHECK_EQ_INT(corrupt, 0);
}

static void test_broadcast_late_join_torn(void)
{
    char dir[64], in[256], pub[256], fetch[256];
    st_tmpdir(dir, sizeof dir);
    pt_service_arg sa = {dir, 0};
    pid_t service = st_fork(pt_service_main, &sa);
    read_endpoints(dir, in, pub, fetch);
    static sub_arg subs[8];
    pid_t pids[8];
    /* phase A: three subscribers from the start, versions 1..5 */
    for (int i = 0; i < 3; i++)
        pids[i] = start_sub(&subs[i], dir, pub, fetch, i, 5, 0x3e);
    gb_error err;
    void *ctx = zmq_ctx_new();
    gb_param_publisher_opts po = {in, CHUNK, 10000, GB_ROLE_TRAINER, 0};
    gb_param_publisher *p;
    CHECK_OK(gb_param_publisher_open(&p, ctx, &po, &err));
    uint8_t *data = malloc(TOTAL);
    for (int64_t v = 1; v <= 5; v++)
        publish(p, v, data);
    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(st_wait(pids[i]), 0);
    for (int i = 0; i < 3; i++) {
        unsigned long long applied, repaired;
        char versions[256];
        sub_result(dir, i, &applied, &repaired, versions);
        CHECK(applied >= 1);
        fprintf(stderr, "  subscriber %d: applied %s (%llu repaired by fetch)\n", i, versions,
                repaired);
    }
    /* phase B: a late joiner gets version 5 from the service */
    pids[3] = start_sub(&subs[3], dir, pub, fetch, 3, 5, 1ULL << 5);
    CHECK_EQ_INT(st_wait(pids[3]), 0);
    {
        unsigned long long applied, repaired;
        char versions[256];
        sub_result(dir, 3, &applied, &repaired, versions);
        CHECK_EQ_INT(applied, 1);
        CHECK_EQ_INT(repaired, 1);
        CHECK(strcmp(versions, "5") == 0);
        fprintf(stderr, "  late joiner: applied %s by fetch\n", versions);
    }
    /* phase C: subscribers see a corrupt version 6 and a torn version 7, then a good 8; they
     * may hold 5 (joined before) and must end on 8, never applying 6 or 7 */
    for (int i = 4; i < 6; i++)
        pids[i] = start_sub(&subs[i], dir, pub, fetch, i, 8, (1ULL << 5) | (1ULL << 8));
    publish_bad(ctx, in, data);
    /* 6 and 7 came on their own connection: give them time to reach the service before 8
     * begins. Across two connections arrival order is not defined, and a BEGIN of 7 landing
     * after 8's would (by the rule in runtime/streams/params.h, "Order") abandon 8, which the
     * subscribers then wait for in vain: the hang seen once in 60 s under load. */
    usleep(300 * 1000);
    publish(p, 8, data);
    for (int i = 4; i < 6; i++) {
        CHECK_EQ_INT(st_wait(pids[i]), 0);
        unsigned long long applied, repaired;
        char versions[256];
        sub_result(dir, i, &applied, &repaired, versions);
        fprintf(stderr, "  subscriber %d through torn versions: applied %s\n", i, versions);
    }
    gb_param_publisher_close(p);
    zmq_ctx_term(ctx);
    free(data);
    kill(service, SIGTERM);
    CHECK_EQ_INT(st_wait(service), 0);
    char path[512], buf[256];
    snprintf(path, sizeof path, "%s/service-stats", dir);
    unsigned long long versions = 0, abandoned = 0, rejected = 0, fetches = 0;
    CHECK(st_read_file(path, buf, sizeof buf) == 0 &&
          sscanf(buf, "%llu %llu %llu %llu", &versions, &abandoned, &rejected, &fetches) == 4);
    CHECK_EQ_INT(versions, 6); /* 1..5 and 8 */
    /* 6 (CRC) is abandoned; 7 (torn) is abandoned when 8 begins after it, or, when its
     * messages come after 8's (two connections, fair-queued), still unfinished at the end
     * (abandoned only after the stall bound, runtime/streams/params.h "Order"); 8 completes either
     * way */
    CHECK(abandoned + rejected >= 1 && abandoned + rejected <= 2);
    CHECK(fetches >= 1);
    fprintf(stderr, "  service: %llu versions, %llu abandoned, %llu ignored, %llu fetches served\n",
            versions, abandoned, rejected, fetches);
    st_rmdir(dir);
}

/* ---- PUB drops: a subscriber that does not poll while a version streams ---------------------- */

typedef struct svc_thread {
    gb_param_service *s;
    atomic_int stop;
} svc_thread;

static void *svc_run(void *arg)
{
    svc_thread *t = arg;
    gb_error err;
    while (!atomic_load(&t->stop))
        gb_param_service_poll(t->s, 20, &err);
    return NULL;
}

/* A scratch folder (dir: 64 bytes) and a service's three ipc endpoints in it (256 bytes each). */
static void service_endpoints(char *dir, char *in, char *pub, char *fetch)
{
    st_tmpdir(dir, 64);
    snprintf(in, 256, "ipc://%s/in", dir);
    snprintf(pub, 256, "ipc://%s/pub", dir);
    snprintf(fetch, 256, "ipc://%s/fetch", dir);
}

static void test_pub_drops_repaired(void)
{
    gb_error err;
    char dir[64], in[256], pub[256], fetch[256];
    service_endpoints(dir, in, pub, fetch);
    void *ctx = zmq_ctx_new();
    gb_param_service_opts so = {in, pub, fetch, 2, GB_ROLE_PARAMS, 0, 0, 0};
    svc_thread t = {0};
    atomic_init(&t.stop, 0);
    CHECK_OK(gb_param_service_open(&t.s, ctx, &so, &err));
    pthread_t th;
    pthread_create(&th, NULL, svc_run, &t);
    gb_param_subscriber_opts o = {pub, fetch, 2000, 200, 4, 2, GB_ROLE_POLICY, 0, 0, 0, 0};
    gb_param_subscriber *s;
    CHECK_OK(gb_param_subscriber_open(&s, ctx, &o, &err));
    CHECK_EQ_INT(gb_param_subscriber_poll(s, 200, &err), 0); /* connected; nothing yet */
    const uint64_t total = 32ull << 20;
    uint8_t *data = malloc(total);
    pt_fill(data, 0, total, 1);
    gb_param_entry e;
    memset(&e, 0, sizeof e);
    snprintf(e.name, sizeof e.name, "all");
    e.dtype = GB_DTYPE_UINT8;
    e.rank = 1;
    e.shape[0] = (int64_t)total;
    gb_param_publisher_opts po = {in, 1 << 20, 10000, GB_ROLE_TRAINER, 0};
    gb_param_publisher *p;
    CHECK_OK(gb_param_publisher_open(&p, ctx, &po, &err));
    CHECK_OK(gb_param_publish(p, 1, &e, 1, data, total, &err));
    /* 32 chunks of 1 MB cannot wait in PUB hwm 2 + SUB hwm 2 + socket buffers: some dropped */
    while (gb_param_service_version(t.s) < 1)
        gb_sleep_ms(5);
    CHECK_OK(gb_param_subscriber_wait(s, 1, 30000, &err));
    const gb_param_blob *b = gb_param_subscriber_acquire(s);
    CHECK(b && b->version == 1 && b->bytes == total && pt_check(b->data, 0, total, 1) < 0);
    gb_param_blob_release(b);
    gb_param_subscriber_stats st = gb_param_subscriber_get_stats(s);
    CHECK_EQ_INT(st.repaired, 1);
    CHECK(st.fetched_bytes > 0);
    fprintf(stderr, "  32 MB through PUB hwm 2: %llu MB fetched to repair\n",
            (unsigned long long)(st.fetched_bytes >> 20));
    /* an empty layout and a zero-byte blob are fine too */
    CHECK_OK(gb_param_publish(p, 2, NULL, 0, data, 0, &err));
    CHECK_OK(gb_param_subscriber_wait(s, 2, 30000, &err));
    /* the last version again is a resend (for a restarted service); an older one is refused */
    uint64_t served = gb_param_service_get_stats(t.s).versions;
    CHECK_OK(gb_param_publish(p, 2, NULL, 0, data, 0, &err));
    while (gb_param_service_get_stats(t.s).versions == served)
        gb_sleep_ms(5);
    CHECK(gb_param_service_version(t.s) == 2);
    CHECK(gb_param_publish(p, 1, NULL, 0, data, 0, &err) == GB_EINVAL);
    gb_param_publisher_close(p);
    gb_param_subscriber_close(s);
    atomic_store(&t.stop, 1);
    pthread_join(th, NULL);
    gb_param_service_close(t.s);
    zmq_ctx_term(ctx);
    free(data);
    st_rmdir(dir);
}

/* A publisher tells when it connected to a restarted service (which holds nothing: the trainer
 * sends its last version again), not for its first connection. The service's own context, as a
 * service process would have. */
static void test_publisher_sees_restarted_service(void)
{
    gb_error err;
    char dir[64], in[256], pub[256], fetch[256];
    service_endpoints(dir, in, pub, fetch);
    void *ctx = zmq_ctx_new();
    gb_param_service_opts so = {in, pub, fetch, 2, GB_ROLE_PARAMS, 0, 0, 0};
    gb_param_publisher_opts po = {in, 1 << 16, 5000, GB_ROLE_TRAINER, 0};
    gb_param_publisher *p = NULL;
    uint8_t data[4096];
    pt_fill(data, 0, sizeof data, 1);
    for (int round = 0; round < 2; round++) {
        void *sctx = zmq_ctx_new();
        svc_thread t = {0};
        atomic_init(&t.stop, 0);
        CHECK_OK(gb_param_service_open(&t.s, sctx, &so, &err));
        pthread_t th;
        pthread_create(&th, NULL, svc_run, &t);
        if (round == 0) {
            CHECK_OK(gb_param_publisher_open(&p, ctx, &po, &err));
            CHECK_OK(gb_param_publish(p, 1, NULL, 0, data, sizeof data, &err));
            TEST_WAIT_UNTIL(gb_param_service_version(t.s) == 1, 5000);
            CHECK_EQ_INT(gb_param_publisher_reconnected(p), 0); /* the first connection */
        } else {
            TEST_WAIT_UNTIL(gb_param_publisher_reconnected(p), 5000);
            CHECK(gb_param_service_version(t.s) < 1); /* the new one has nothing */
            CHECK_OK(gb_param_publish(p, 1, NULL, 0, data, sizeof data, &err));
            TEST_WAIT_UNTIL(gb_param_service_version(t.s) == 1, 5000);
            CHECK_EQ_INT(gb_param_service_version(t.s), 1);
            CHECK_EQ_INT(gb_param_publisher_reconnected(p), 0); /* said once */
        }
        atomic_store(&t.stop, 1);
        pthread_join(th, NULL);
        gb_param_service_close(t.s);
        zmq_ctx_term(sctx);
    }
    gb_param_publisher_close(p);
    zmq_ctx_term(ctx);
    st_rmdir(dir);
}

static void test_layout_checks(void)
{
    gb_error err;
    gb_param_entry e[3];
    pt_layout(e, 100000);
    CHECK_OK(gb_param_layout_check(e, 3, 100000, &err));
    e[1].offset = 100000 - 4;
    CHECK(gb_param_layout_check(e, 2, 100000, &err) == GB_EINVAL && strstr(err.msg, "bias"));
    e[1].offset = 0;
    e[1].shape[0] = -1;
    CHECK(gb_param_layout_check(e, 2, 100000, &err) == GB_EINVAL);
    e[1].shape[0] = 1LL << 62;
    CHECK(gb_param_layout_check(e, 2, 100000, &err) == GB_EINVAL);
    e[1].shape[0] = 4;
    e[1].name[0] = '\0';
    CHECK(gb_param_layout_check(e, 2, 100000, &err) == GB_EINVAL);
}

int main(void)
{
    TEST_RUN(test_layout_checks);
    TEST_RUN(test_broadcast_late_join_torn);
    TEST_RUN(test_pub_drops_repaired);
    TEST_RUN(test_publisher_sees_restarted_service);
    return test_main_result();
}
