/* tests/runtime/streams/test_params_faults.c: the parameter stream against a hostile or broken
 * publisher (runtime/streams/params.h, "Order"): an unfinished version with a huge number neither
 * blocks the real ones nor lives past its bound; a forged complete version far ahead does not
 * freeze the real ones after it, at the service or at a subscriber; a restarted publisher's lower
 * numbers are taken; a flood of malformed messages writes a handful of log lines, not one per
 * message. One process: the test drives the service and the subscriber itself. */
#include "params_test.h"
#include "runtime/base/log.h"
#include "test.h"

#include <stdlib.h>
#include <string.h>

#define TOTAL (256u << 10)
#define CHUNK (32u << 10)

typedef struct fixture {
    char dir[64];
    void *ctx;
    gb_param_service *svc;
    gb_param_subscriber *sub;
    gb_param_publisher *real, *forger;
    uint8_t *data;
} fixture;

static void setup(fixture *f, int stall_ms)
{
    gb_error err;
    char in[256], pub[256], fetch[256];
    memset(f, 0, sizeof *f);
    st_tmpdir(f->dir, sizeof f->dir);
    snprintf(in, sizeof in, "ipc://%s/in", f->dir);
    snprintf(pub, sizeof pub, "ipc://%s/pub", f->dir);
    snprintf(fetch, sizeof fetch, "ipc://%s/fetch", f->dir);
    f->ctx = zmq_ctx_new();
    gb_param_service_opts so = {in, pub, fetch, 0, GB_ROLE_PARAMS, 0, stall_ms, 0};
    CHECK_OK(gb_param_service_open(&f->svc, f->ctx, &so, &err));
    gb_param_subscriber_opts o = {pub, fetch, 2000, 100, 4, 0, GB_ROLE_POLICY, 0, 0, 0, 0};
    CHECK_OK(gb_param_subscriber_open(&f->sub, f->ctx, &o, &err));
    gb_param_publisher_opts po = {in, CHUNK, 5000, GB_ROLE_TRAINER, 0};
    CHECK_OK(gb_param_publisher_open(&f->real, f->ctx, &po, &err));
    CHECK_OK(gb_param_publisher_open(&f->forger, f->ctx, &po, &err));
    f->data = malloc(TOTAL);
}

static void teardown(fixture *f)
{
    gb_param_publisher_close(f->real);
    gb_param_publisher_close(f->forger);
    gb_param_subscriber_close(f->sub);
    gb_param_service_close(f->svc);
    zmq_ctx_term(f->ctx);
    free(f->data);
    st_rmdir(f->dir);
}

/* One round of work for the service and the subscriber; returns 1 (for TEST_WAIT_UNTIL). */
static int pump(fixture *f)
{
    gb_error err;
    gb_param_service_poll(f->svc, 5, &err);
    gb_param_subscriber_poll(f->sub, 0, &err);
    return 1;
}

static void publish(gb_param_publisher *p, int64_t v, uint8_t *data)
{
    gb_error err;
    gb_param_entry layout[3];
    int n = pt_layout(layout, TOTAL);
    pt_fill(data, 0, TOTAL, v);
    CHECK_OK(gb_param_publish(p, v, layout, n, data, TOTAL, &err));
}

/* The subscriber holds version v, with its bytes. */
static int sub_has(fixture *f, int64_t v)
{
    const gb_param_blob *b = gb_param_subscriber_acquire(f->sub);
    int ok = b && b->version == v && b->bytes == TOTAL && pt_check(b->data, 0, TOTAL, v) < 0;
    gb_param_blob_release(b);
    return ok;
}

/* A BEGIN for version 2^50 that never ends: the real version 5 after it is taken at once (a
 * begin replaces what is unfinished); a second one that stops half way is abandoned on its own
 * once no chunk came for stall_ms, and the real version 6 after it is taken too. */
static void test_unfinished_huge_version(void)
{
    fixture f;
    gb_error err;
    setup(&f, 300);
    publish(f.real, 1, f.data);
    TEST_WAIT_UNTIL(pump(&f) && sub_has(&f, 1), 20000);
    CHECK(sub_has(&f, 1));

    gb_param_entry layout[3];
    int n = pt_layout(layout, TOTAL);
    const int64_t huge = 1LL << 50;
    CHECK_OK(gb_param_publish_begin(f.forger, huge, layout, n, TOTAL, &err));
    CHECK_OK(gb_param_publish_write(f.forger, f.data, CHUNK, &err)); /* one chunk, then silence */
    publish(f.real, 5, f.data);
    TEST_WAIT_UNTIL(pump(&f) && gb_param_service_version(f.svc) == 5 && sub_has(&f, 5), 20000);
    CHECK_EQ_INT(gb_param_service_version(f.svc), 5);
    CHECK(sub_has(&f, 5));

    /* alone: abandoned by the stall bound, not by anything that follows */
    CHECK_OK(gb_param_publish_begin(f.forger, huge + 1, layout, n, TOTAL, &err));
    CHECK_OK(gb_param_publish_write(f.forger, f.data, 2 * CHUNK, &err));
    TEST_WAIT_UNTIL(pump(&f) && gb_param_service_get_stats(f.svc).timed_out == 1, 20000);
    gb_param_service_stats st = gb_param_service_get_stats(f.svc);
    CHECK_EQ_INT(st.timed_out, 1);
    CHECK_EQ_INT(gb_param_service_version(f.svc), 5);
    publish(f.real, 6, f.data);
    TEST_WAIT_UNTIL(pump(&f) && sub_has(&f, 6), 20000);
    CHECK(sub_has(&f, 6));
    CHECK_EQ_INT(gb_param_service_get_stats(f.svc).versions, 3);
    teardown(&f);
}

/* A complete, CRC-correct version 2^50 from a forger becomes the latest (the input is not
 * authenticated), but the trainer's real version 7 after it replaces it at the service and at
 * the subscriber, and 8 after that too: nothing freezes on the forged number. */
static void test_forged_version_far_ahead(void)
{
    fixture f;
    setup(&f, 0);
    publish(f.real, 3, f.data);
    TEST_WAIT_UNTIL(pump(&f) && sub_has(&f, 3), 20000);
    const int64_t huge = 1LL << 50;
    publish(f.forger, huge, f.data);
    TEST_WAIT_UNTIL(pump(&f) && sub_has(&f, huge), 20000);
    CHECK(sub_has(&f, huge));
    publish(f.real, 7, f.data);
    TEST_WAIT_UNTIL(pump(&f) && sub_has(&f, 7), 20000);
    CHECK_EQ_INT(gb_param_service_version(f.svc), 7);
    CHECK(sub_has(&f, 7));
    publish(f.real, 8, f.data);
    TEST_WAIT_UNTIL(pump(&f) && sub_has(&f, 8), 20000);
    CHECK(sub_has(&f, 8));
    teardown(&f);
}

/* A trainer killed while it published version 12, restarted from a checkpoint without the
 * ledger that let it go on above its versions (workers/roles/trainer.c), publishes 5 and 6: the
 * service drops the torn 12 and takes 5, and the subscriber, at 11, goes to 5 and then 6 (its
 * order is the service's, never the numbers'), so distribution does not freeze at 11. */
static void test_restarted_publisher_lower_version(void)
{
    fixture f;
    gb_error err;
    setup(&f, 0);
    publish(f.real, 10, f.data);
    publish(f.real, 11, f.data);
    TEST_WAIT_UNTIL(pump(&f) && sub_has(&f, 11), 20000);
    CHECK(sub_has(&f, 11));
    gb_param_entry layout[3];
    int n = pt_layout(layout, TOTAL);
    CHECK_OK(gb_param_publish_begin(f.real, 12, layout, n, TOTAL, &err));
    CHECK_OK(gb_param_publish_write(f.real, f.data, CHUNK, &err));
    gb_param_publisher_close(f.real); /* the trainer dies half way through 12 */
    gb_param_publisher_opts po = {gb_param_service_endpoint(f.svc, "in"), CHUNK, 5000,
                                  GB_ROLE_TRAINER, 0};
    CHECK_OK(gb_param_publisher_open(&f.real, f.ctx, &po, &err));
    publish(f.real, 5, f.data);
    TEST_WAIT_UNTIL(pump(&f) && sub_has(&f, 5), 20000);
    CHECK_EQ_INT(gb_param_service_version(f.svc), 5);
    CHECK(sub_has(&f, 5));
    publish(f.real, 6, f.data);
    TEST_WAIT_UNTIL(pump(&f) && sub_has(&f, 6), 20000);
    CHECK(sub_has(&f, 6));
    gb_param_subscriber_stats ss = gb_param_subscriber_get_stats(f.sub);
    CHECK_EQ_INT(ss.corrupt, 0);
    teardown(&f);
}

/* A subscriber that joins after the forged version and the real one sees the real one. */
static void test_late_join_after_forgery(void)
{
    fixture f;
    gb_error err;
    setup(&f, 0);
    publish(f.forger, 1LL << 40, f.data);
    /* one after the other: two publishers at once interleave on the service's input, and each
     * begin replaces the other's unfinished version (params.h, "Order") */
    TEST_WAIT_UNTIL(pump(&f) && gb_param_service_version(f.svc) == 1LL << 40, 20000);
    publish(f.real, 2, f.data);
    TEST_WAIT_UNTIL(pump(&f) && gb_param_service_version(f.svc) == 2, 20000);
    CHECK_EQ_INT(gb_param_service_version(f.svc), 2);
    char pub[256], fetch[256];
    snprintf(pub, sizeof pub, "%s", gb_param_service_endpoint(f.svc, "pub"));
    snprintf(fetch, sizeof fetch, "%s", gb_param_service_endpoint(f.svc, "fetch"));
    gb_param_subscriber_close(f.sub);
    gb_param_subscriber_opts o = {pub, fetch, 2000, 100, 4, 0, GB_ROLE_POLICY, 1, 0, 0, 0};
    CHECK_OK(gb_param_subscriber_open(&f.sub, f.ctx, &o, &err));
    TEST_WAIT_UNTIL(pump(&f) && sub_has(&f, 2), 20000);
    CHECK(sub_has(&f, 2));
    teardown(&f);
}

/* 1000 malformed begins: all rejected and counted, at most 11 log lines (1st, 2nd, 4th, ...). */
static void test_malformed_flood_rate_limited(void)
{
    fixture f;
    gb_error err;
    setup(&f, 0);
    char log_path[256];
    snprintf(log_path, sizeof log_path, "%s/log", f.dir);
    CHECK_OK(gb_log_open_file(log_path));
    gb_log_set_stderr(0);
    void *push = zmq_socket(f.ctx, ZMQ_PUSH);
    int linger = 5000;
    zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof linger);
    CHECK(zmq_connect(push, gb_param_service_endpoint(f.svc, "in")) == 0);
    enum { N = 1000 };
    for (int i = 0; i < N; i++) {
        gb_wire_header h;
        gb_wire_header_init(&h, GB_MSG_PARAM_BEGIN, GB_ROLE_TRAINER, 0);
        CHECK_OK(gb_wire_attr_set_int(&h, "version", i, &err)); /* no size, chunk size, layout */
        CHECK_OK(gb_wire_send(push, NULL, 0, &h, NULL, 0, &err));
        if (i % 64 == 0)
            pump(&f);
    }
    TEST_WAIT_UNTIL(pump(&f) && gb_param_service_get_stats(f.svc).rejected == N, 20000);
    CHECK_EQ_INT(gb_param_service_get_stats(f.svc).rejected, N);
    zmq_close(push);
    gb_log_close();
    gb_log_set_stderr(1);
    FILE *fp = fopen(log_path, "r");
    CHECK(fp != NULL);
    int lines = 0;
    char line[1024];
    while (fp && fgets(line, sizeof line, fp))
        lines += strstr(line, "parameter service") != NULL;
    if (fp)
        fclose(fp);
    fprintf(stderr, "  %d malformed messages: %d log lines\n", N, lines);
    CHECK(lines >= 1 && lines <= 11);
    /* and the service still takes a real version */
    publish(f.real, 1, f.data);
    TEST_WAIT_UNTIL(pump(&f) && sub_has(&f, 1), 20000);
    CHECK(sub_has(&f, 1));
    teardown(&f);
}

int main(void)
{
    TEST_RUN(test_unfinished_huge_version);
    TEST_RUN(test_forged_version_far_ahead);
    TEST_RUN(test_late_join_after_forgery);
    TEST_RUN(test_restarted_publisher_lower_version);
    TEST_RUN(test_malformed_flood_rate_limited);
    return test_main_result();
}
