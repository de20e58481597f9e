/* tests/runtime/streams/test_params_relay.c: parameter relays on one host (ipc://, one thread
 * driving every part): a service, 2 relays with 4 subscribers each. Every subscriber applies every
 * version in order with the right bytes; the service sends each version once a relay (its
 * sent_bytes), not once a subscriber; a late joiner starts from the latest; a relay closed and
 * opened again on the same endpoints serves its subscribers the next version. */
#include "params_test.h"
#include "test.h"

#define NRELAY 2
#define PER 4
#define BYTES (128 * 1024)
#define CHUNK (16 * 1024)
#define VERSIONS 12

static void *ctx;
static gb_param_service *svc;
static gb_param_relay *relay[NRELAY];
static gb_param_subscriber *sub[NRELAY * PER + 1];
static int nsub;
static int64_t last[NRELAY * PER + 1];
static int order_errors, byte_errors;
static char dir[64];

static void relay_open(int i)
{
    gb_error err;
    char pub[256], fetch[256];
    snprintf(pub, sizeof pub, "ipc://%s/relay%d-pub", dir, i);
    snprintf(fetch, sizeof fetch, "ipc://%s/relay%d-fetch", dir, i);
    gb_param_relay_opts o = {.up_pub_endpoint = gb_param_service_endpoint(svc, "pub"),
                             .up_fetch_endpoint = gb_param_service_endpoint(svc, "fetch"),
                             .pub_endpoint = pub, .fetch_endpoint = fetch, .pub_hwm = 10000,
                             .rcv_hwm = 10000, .timeout_ms = 2000, .recheck_ms = 200,
                             .chunk_bytes = CHUNK, .role = GB_ROLE_RELAY, .index = i};
    CHECK_OK(gb_param_relay_open(&relay[i], ctx, &o, &err));
}

static void sub_open(int i, int r)
{
    gb_error err;
    gb_param_subscriber_opts o = {.pub_endpoint = gb_param_relay_endpoint(relay[r], "pub"),
                                  .fetch_endpoint = gb_param_relay_endpoint(relay[r], "fetch"),
                                  .timeout_ms = 2000, .recheck_ms = 200, .rcv_hwm = 10000,
                                  .role = GB_ROLE_POLICY, .index = i, .chunk_bytes = CHUNK};
    CHECK_OK(gb_param_subscriber_open(&sub[i], ctx, &o, &err));
    last[i] = -1;
}

/* One round over every part; records each subscriber's versions as they change. */
static void pump(void)
{
    gb_error err;
    gb_param_service_poll(svc, 0, &err);
    for (int r = 0; r < NRELAY; r++)
        if (relay[r])
            CHECK(gb_param_relay_poll(relay[r], 0, &err) >= 0);
    for (int i = 0; i < nsub; i++) {
        CHECK(gb_param_subscriber_poll(sub[i], 0, &err) >= 0);
        int64_t v = gb_param_subscriber_version(sub[i]);
        if (v == last[i])
            continue;
        order_errors += v < last[i];
        const gb_param_blob *b = gb_param_subscriber_acquire(sub[i]);
        byte_errors += b->bytes != BYTES || pt_check(b->data, 0, b->bytes, v) >= 0;
        gb_param_blob_release(b);
        last[i] = v;
    }
    gb_sleep_ms(0.2);
}

static int all_have(int64_t v, int n)
{
    for (int i = 0; i < n; i++)
        if (last[i] < v)
            return 0;
    return 1;
}

static void publish(gb_param_publisher *p, int64_t v, unsigned char *data)
{
    gb_error err;
    gb_param_entry layout[3];
    int n = pt_layout(layout, BYTES);
    pt_fill(data, 0, BYTES, v);
    CHECK_OK(gb_param_publish(p, v, layout, n, data, BYTES, &err));
}

int main(void)
{
    gb_error err;
    st_tmpdir(dir, sizeof dir);
    ctx = zmq_ctx_new();
    char in[256], pub[256], fetch[256];
    snprintf(in, sizeof in, "ipc://%s/in", dir);
    snprintf(pub, sizeof pub, "ipc://%s/pub", dir);
    snprintf(fetch, sizeof fetch, "ipc://%s/fetch", dir);
    gb_param_service_opts so = {.in_endpoint = in, .pub_endpoint = pub, .fetch_endpoint = fetch,
                                .pub_hwm = 10000, .role = GB_ROLE_PARAMS,
                                .max_chunk_bytes = CHUNK};
    CHECK_OK(gb_param_service_open(&svc, ctx, &so, &err));
    for (int r = 0; r < NRELAY; r++)
        relay_open(r);
    for (int i = 0; i < NRELAY * PER; i++)
        sub_open(nsub++, i % NRELAY);
    gb_param_publisher_opts po = {in, CHUNK, 10000, GB_ROLE_TRAINER, 0};
    gb_param_publisher *p;
    CHECK_OK(gb_param_publisher_open(&p, ctx, &po, &err));
    unsigned char *data = malloc(BYTES);

    /* everyone connected before the first version: then every version reaches everyone on PUB */
    TEST_WAIT_UNTIL((pump(), gb_param_service_get_stats(svc).pub_peers == NRELAY &&
                     gb_param_relay_get_stats(relay[0]).down.pub_peers == PER &&
                     gb_param_relay_get_stats(relay[1]).down.pub_peers == PER), 10000);
    CHECK(gb_param_service_get_stats(svc).pub_peers == NRELAY);
    for (int k = 0; k < 50; k++)
        pump(); /* the subscriptions reach PUB */
    uint64_t sent0 = gb_param_service_get_stats(svc).sent_bytes;
    for (int v = 1; v <= VERSIONS; v++) {
        publish(p, v, data);
        TEST_WAIT_UNTIL((pump(), all_have(v, nsub)), 10000);
        CHECK_MSG(all_have(v, nsub), "version %d did not reach every subscriber", v);
    }
    uint64_t sent = gb_param_service_get_stats(svc).sent_bytes - sent0;
    printf("service sent %llu bytes for %d versions of %d bytes: %.2f x the blob a version\n",
           (unsigned long long)sent, VERSIONS, BYTES, (double)sent / VERSIONS / BYTES);
    CHECK(sent == (uint64_t)NRELAY * BYTES * VERSIONS);
    for (int i = 0; i < nsub; i++) {
        gb_param_subscriber_stats st = gb_param_subscriber_get_stats(sub[i]);
        CHECK_MSG(st.applied == VERSIONS, "subscriber %d applied %llu of %d versions", i,
                  (unsigned long long)st.applied, VERSIONS);
        CHECK(last[i] == VERSIONS);
    }
    uint64_t relayed = 0;
    for (int r = 0; r < NRELAY; r++)
        relayed += gb_param_relay_get_stats(relay[r]).down.sent_bytes;
    CHECK(relayed == (uint64_t)nsub * BYTES * VERSIONS);
    CHECK(order_errors == 0 && byte_errors == 0);

    /* a late joiner gets the latest from its relay (by fetch: nothing is on PUB now) */
    sub_open(nsub++, 1);
    TEST_WAIT_UNTIL((pump(), last[nsub - 1] == VERSIONS), 10000);
    CHECK(last[nsub - 1] == VERSIONS);
    CHECK(gb_param_subscriber_get_stats(sub[nsub - 1]).repaired == 1);

    /* a relay restarted on the same endpoints: its subscribers reconnect, get the next version */
    gb_param_relay_close(relay[0]);
    relay[0] = NULL;
    publish(p, VERSIONS + 1, data); /* while relay 0 is down */
    relay_open(0);
    TEST_WAIT_UNTIL((pump(), gb_param_relay_version(relay[0]) == VERSIONS + 1), 10000);
    TEST_WAIT_UNTIL((pump(), all_have(VERSIONS + 1, nsub)), 10000);
    CHECK(all_have(VERSIONS + 1, nsub));
    publish(p, VERSIONS + 2, data);
    TEST_WAIT_UNTIL((pump(), all_have(VERSIONS + 2, nsub)), 10000);
    CHECK(all_have(VERSIONS + 2, nsub));
    CHECK(order_errors == 0 && byte_errors == 0);

    free(data);
    gb_param_publisher_close(p);
    for (int i = 0; i < nsub; i++)
        gb_param_subscriber_close(sub[i]);
    for (int r = 0; r < NRELAY; r++)
        gb_param_relay_close(relay[r]);
    gb_param_service_close(svc);
    zmq_ctx_term(ctx);
    st_rmdir(dir);
    return test_main_result();
}
