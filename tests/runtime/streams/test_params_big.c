/* tests/runtime/streams/test_params_big.c: a parameter blob larger than 2^31 bytes round-trips
 * through the service to a subscriber that listens from the start (PUB path) and to one that joins
 * late (FETCH path, offsets past 2^31). The publisher streams the blob in pieces, so at most two
 * copies exist at once (service + one subscriber). Label: slow. */
#include "params_test.h"
#include "test.h"

#define BIG ((1ull << 31) + 12345)

typedef struct big_sub {
    const char *dir;
    char pub[256], fetch[256];
    int index;
} big_sub;

static int big_sub_main(void *arg)
{
    big_sub *a = arg;
    gb_error err;
    void *ctx = zmq_ctx_new();
    gb_param_subscriber_opts o = {a->pub, a->fetch, 10000, 500, 4, 0, GB_ROLE_POLICY, a->index,
                                  0, 0, 0};
    gb_param_subscriber *s;
    if (gb_param_subscriber_open(&s, ctx, &o, &err)) {
        fprintf(stderr, "subscriber: %s\n", err.msg);
        return 3;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/ready-%d", a->dir, a->index);
    gb_param_subscriber_poll(s, 200, &err);
    st_write_file(path, "ready");
    if (gb_param_subscriber_wait(s, 1, 300000, &err)) {
        fprintf(stderr, "subscriber %d: %s\n", a->index, err.msg);
        return 4;
    }
    const gb_param_blob *b = gb_param_subscriber_acquire(s);
    int bad = b->bytes != BIG || b->nlayout != 3;
    int64_t wrong = pt_check(b->data, 0, b->bytes, 1);
    if (wrong >= 0) {
        fprintf(stderr, "subscriber %d: byte %lld wrong\n", a->index, (long long)wrong);
        bad = 1;
    }
    gb_param_subscriber_stats st = gb_param_subscriber_get_stats(s);
    fprintf(stderr, "  subscriber %d: %llu bytes, crc %08x, %s\n", a->index,
            (unsigned long long)b->bytes, b->crc,
            st.repaired ? "fetched from the service" : "assembled from PUB chunks");
    if (a->index == 1 && !st.repaired)
        bad = 1; /* the late joiner must have fetched */
    gb_param_blob_release(b);
    gb_param_subscriber_close(s);
    zmq_ctx_term(ctx);
    return bad;
}

static void test_big_blob(void)
{
    char dir[64], path[512], buf[1024], in[256];
    st_tmpdir(dir, sizeof dir);
    pt_service_arg sa = {dir, 0};
    pid_t service = st_fork(pt_service_main, &sa);
    static big_sub subs[2];
    snprintf(path, sizeof path, "%s/service", dir);
    CHECK(st_wait_file(path, buf, sizeof buf, 20) == 0);
    CHECK(sscanf(buf, "%255s %255s %255s", in, subs[0].pub, subs[0].fetch) == 3);
    subs[1] = subs[0];
    subs[0].dir = subs[1].dir = dir;
    subs[0].index = 0;
    subs[1].index = 1;
    pid_t s0 = st_fork(big_sub_main, &subs[0]);
    snprintf(path, sizeof path, "%s/ready-0", dir);
    CHECK(st_wait_file(path, buf, sizeof buf, 20) == 0);

    gb_error err;
    void *ctx = zmq_ctx_new();
    gb_param_publisher_opts po = {in, 4 << 20, 60000, GB_ROLE_TRAINER, 0};
    gb_param_publisher *p;
    CHECK_OK(gb_param_publisher_open(&p, ctx, &po, &err));
    gb_param_entry layout[3];
    int n = pt_layout(layout, BIG);
    double t0 = gb_now_s();
    CHECK_OK(gb_param_publish_begin(p, 1, layout, n, BIG, &err));
    const size_t piece = 64 << 20;
    uint8_t *buf_piece = malloc(piece);
    for (uint64_t off = 0; off < BIG; off += piece) {
        size_t len = (size_t)(BIG - off < piece ? BIG - off : piece);
        pt_fill(buf_piece, off, len, 1);
        CHECK_OK(gb_param_publish_write(p, buf_piece, len, &err));
    }
    CHECK_OK(gb_param_publish_end(p, &err));
    free(buf_piece);
    fprintf(stderr, "  published %llu bytes in %.1f s\n", (unsigned long long)BIG,
            gb_now_s() - t0);
    CHECK_EQ_INT(st_wait(s0), 0);
    pid_t s1 = st_fork(big_sub_main, &subs[1]); /* joins after the fact */
    CHECK_EQ_INT(st_wait(s1), 0);
    fprintf(stderr, "  both subscribers verified after %.1f s\n", gb_now_s() - t0);
    gb_param_publisher_close(p);
    zmq_ctx_term(ctx);
    kill(service, SIGTERM);
    CHECK_EQ_INT(st_wait(service), 0);
    snprintf(path, sizeof path, "%s/service-stats", dir);
    unsigned long long versions = 0, abandoned = 1, rejected = 1, fetches = 0;
    CHECK(st_read_file(path, buf, sizeof buf) == 0 &&
          sscanf(buf, "%llu %llu %llu %llu", &versions, &abandoned, &rejected, &fetches) == 4);
    CHECK_EQ_INT(versions, 1);
    CHECK_EQ_INT(abandoned, 0);
    CHECK(fetches >= BIG / (4 << 20));
    st_rmdir(dir);
}

int main(void)
{
    TEST_RUN(test_big_blob);
    return test_main_result();
}
