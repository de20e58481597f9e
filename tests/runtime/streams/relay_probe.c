/* tests/runtime/streams/relay_probe.c: the processes of the parameter relay test over several
 * "hosts" (relay_hosts.sh runs each in a network namespace): a parameter service with its
 * publisher, a relay, or a set of subscribers, over tcp on fixed ports (7101-7103 the service's,
 * 7201-7202 a relay's). Each writes small result files in DIR and runs until its work is done or
 * SIGTERM.
 *
 *   relay_probe service DIR IP PEERS BYTES VERSIONS IFACE
 *       waits for PEERS on its PUB, writes DIR/service.ready, publishes warm-up versions every
 *       200 ms until DIR/go exists (a subscriber is ready once one reached it on PUB: its SUB is
 *       subscribed, which no connection count proves), writes the first measured version to
 *       DIR/first, publishes VERSIONS versions of BYTES (the pt_fill pattern) from there, and at
 *       SIGTERM writes DIR/service.stats:
 *       "versions sent_bytes tx_bytes pub_peers fetches" (tx_bytes: IFACE's kernel counter
 *       across the publishing, /sys/class/net/IFACE/statistics/tx_bytes)
 *   relay_probe relay DIR NAME UP_IP IP PEERS
 *       relays UP_IP's service on IP, writes DIR/relay-NAME.ready once PEERS subscribers joined;
 *       DIR/relay-NAME.stats at SIGTERM: "forwarded sent_bytes fetched_bytes applied"
 *   relay_probe subs DIR NAME IP PORT COUNT BYTES VERSIONS
 *       COUNT subscribers of tcp://IP:PORT (fetch at PORT+1); DIR/subs-NAME.ready once each got
 *       a warm-up version on PUB; exits 0 when each applied every measured version in order
 *       with the right bytes, writing DIR/subs-NAME (one line a subscriber); 1 otherwise. */
#include "params_test.h"

#include <pthread.h>
#include <stdatomic.h>

static uint64_t tx_bytes(const char *iface)
{
    char path[256], buf[64];
    snprintf(path, sizeof path, "/sys/class/net/%s/statistics/tx_bytes", iface);
    FILE *f = fopen(path, "r");
    if (!f || !fgets(buf, sizeof buf, f)) {
        if (f)
            fclose(f);
        return 0;
    }
    fclose(f);
    return strtoull(buf, NULL, 10);
}

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[512], tmp[520];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return;
    fputs(text, f);
    fclose(f);
    rename(tmp, path);
}

static int file_exists(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

static int die(const char *what, const gb_error *e)
{
    fprintf(stderr, "relay_probe: %s: %s\n", what, e->msg);
    return 2;
}

static int run_service(char **a)
{
    const char *dir = a[0], *ip = a[1], *iface = a[5];
    uint64_t peers = strtoull(a[2], NULL, 10), bytes = strtoull(a[3], NULL, 10);
    int versions = atoi(a[4]);
    gb_error err;
    void *ctx = zmq_ctx_new();
    char pub[64], fetch[64];
    snprintf(pub, sizeof pub, "tcp://%s:7102", ip);
    snprintf(fetch, sizeof fetch, "tcp://%s:7103", ip);
    /* queues that hold the whole run: no drop, so every subscriber can see every version */
    gb_param_service_opts so = {.in_endpoint = "inproc://params-in", .pub_endpoint = pub,
                                .fetch_endpoint = fetch, .pub_hwm = 100000,
                                .role = GB_ROLE_PARAMS};
    gb_param_service *s;
    if (gb_param_service_open(&s, ctx, &so, &err))
        return die("service", &err);
    gb_param_publisher_opts po = {"inproc://params-in", 65536, 30000, GB_ROLE_TRAINER, 0};
    gb_param_publisher *p;
    if (gb_param_publisher_open(&p, ctx, &po, &err))
        return die("publisher", &err);
    for (uint64_t t = gb_now_ns(); !pt_stop && gb_param_service_get_stats(s).pub_peers < peers;) {
        gb_param_service_poll(s, 10, &err);
        if (gb_now_ns() - t > 5000000000ULL) { /* what a test that times out shows */
            fprintf(stderr, "service: %llu of %llu subscribers connected\n",
                    (unsigned long long)gb_param_service_get_stats(s).pub_peers,
                    (unsigned long long)peers);
            t = gb_now_ns();
        }
    }
    write_file(dir, "service.ready", "ready\n");
    gb_param_entry layout[3];
    int n = pt_layout(layout, bytes);
    unsigned char *data = malloc(bytes);
    int first = 1;
    for (; !pt_stop && !file_exists(dir, "go"); first++) { /* warm-up versions */
        pt_fill(data, 0, bytes, first);
        if (gb_param_publish(p, first, layout, n, data, bytes, &err))
            return die("publish", &err);
        for (uint64_t t = gb_now_ns(); gb_now_ns() - t < 200000000ULL;)
            gb_param_service_poll(s, 10, &err);
    }
    /* the first measured version, announced before it is sent and apart from the last warm-up
     * (pacing, not a measurement: a subscriber reads the file between two versions) */
    char text[32];
    snprintf(text, sizeof text, "%d\n", first);
    for (uint64_t t = gb_now_ns(); gb_now_ns() - t < 300000000ULL;)
        gb_param_service_poll(s, 10, &err);
    write_file(dir, "first", text);
    for (uint64_t t = gb_now_ns(); gb_now_ns() - t < 300000000ULL;)
        gb_param_service_poll(s, 10, &err);
    uint64_t tx0 = tx_bytes(iface), sent0 = gb_param_service_get_stats(s).sent_bytes;
    versions += first - 1;
    for (int v = first; v <= versions && !pt_stop; v++) {
        pt_fill(data, 0, bytes, v);
        if (gb_param_publish_begin(p, v, layout, n, bytes, &err))
            return die("publish", &err);
        for (uint64_t off = 0; off < bytes; off += 65536) { /* the service takes it as it comes */
            size_t len = bytes - off < 65536 ? bytes - off : 65536;
            if (gb_param_publish_write(p, data + off, len, &err))
                return die("publish", &err);
            gb_param_service_poll(s, 0, &err);
        }
        if (gb_param_publish_end(p, &err))
            return die("publish", &err);
        while (gb_param_service_version(s) < v)
            gb_param_service_poll(s, 10, &err);
    }
    free(data);
    while (!pt_stop)
        gb_param_service_poll(s, 20, &err);
    gb_param_service_stats st = gb_param_service_get_stats(s);
    char line[256];
    snprintf(line, sizeof line, "%llu %llu %llu %llu %llu\n", (unsigned long long)st.versions,
             (unsigned long long)(st.sent_bytes - sent0),
             (unsigned long long)(tx_bytes(iface) - tx0), (unsigned long long)st.pub_peers,
             (unsigned long long)st.fetches);
    write_file(dir, "service.stats", line);
    gb_param_publisher_close(p);
    gb_param_service_close(s);
    zmq_ctx_term(ctx);
    return 0;
}

static int run_relay(char **a)
{
    const char *dir = a[0], *name = a[1], *up = a[2], *ip = a[3];
    uint64_t peers = strtoull(a[4], NULL, 10);
    gb_error err;
    void *ctx = zmq_ctx_new();
    char up_pub[64], up_fetch[64], pub[64], fetch[64], file[128];
    snprintf(up_pub, sizeof up_pub, "tcp://%s:7102", up);
    snprintf(up_fetch, sizeof up_fetch, "tcp://%s:7103", up);
    snprintf(pub, sizeof pub, "tcp://%s:7201", ip);
    snprintf(fetch, sizeof fetch, "tcp://%s:7202", ip);
    gb_param_relay_opts o = {.up_pub_endpoint = up_pub, .up_fetch_endpoint = up_fetch,
                             .pub_endpoint = pub, .fetch_endpoint = fetch, .pub_hwm = 100000,
                             .rcv_hwm = 100000, .timeout_ms = 5000, .role = GB_ROLE_RELAY};
    gb_param_relay *r;
    if (gb_param_relay_open(&r, ctx, &o, &err))
        return die("relay", &err);
    int ready = 0;
    while (!pt_stop) {
        int rc = gb_param_relay_poll(r, 20, &err);
        if (rc < 0 && rc != GB_EINTR)
            return die("relay poll", &err);
        if (!ready && gb_param_relay_get_stats(r).down.pub_peers >= peers) {
            snprintf(file, sizeof file, "relay-%s.ready", name);
            write_file(dir, file, "ready\n");
            ready = 1;
        }
    }
    gb_param_relay_stats st = gb_param_relay_get_stats(r);
    char line[256];
    snprintf(line, sizeof line, "%llu %llu %llu %llu\n", (unsigned long long)st.forwarded,
             (unsigned long long)st.down.sent_bytes, (unsigned long long)st.up.fetched_bytes,
             (unsigned long long)st.up.applied);
    snprintf(file, sizeof file, "relay-%s.stats", name);
    write_file(dir, file, line);
    gb_param_relay_close(r);
    zmq_ctx_term(ctx);
    return 0;
}

static atomic_int subs_ready;

typedef struct sub_arg {
    void *ctx;
    const char *dir;
    char pub[64], fetch[64];
    uint64_t bytes;
    int versions, index;
    char result[1400];
    int ok;
} sub_arg;

/* One subscriber: every version it applies must be newer than the last and byte-exact; it must
 * apply each of the measured versions first..first+versions-1 (applied grows by versions from
 * when DIR/first appeared, ending on the last). */
static void *sub_thread(void *arg)
{
    sub_arg *a = arg;
    gb_error err;
    gb_param_subscriber_opts o = {.pub_endpoint = a->pub, .fetch_endpoint = a->fetch,
                                  .timeout_ms = 5000, .rcv_hwm = 100000,
                                  .role = GB_ROLE_POLICY, .index = a->index};
    gb_param_subscriber *s;
    if (gb_param_subscriber_open(&s, a->ctx, &o, &err)) {
        snprintf(a->result, sizeof a->result, "FAIL open: %s", err.msg);
        return NULL;
    }
    int64_t last = -1, first = -1, final = INT64_MAX;
    uint64_t applied0 = 0;
    int ready = 0;
    char seen[128] = "";
    size_t k = 0;
    uint64_t t_end = gb_now_ns() + 120 * 1000000000ULL; /* a bound, not a measurement */
    while (last < final && !pt_stop && gb_now_ns() < t_end) {
        if (first < 0 && file_exists(a->dir, "first")) {
            char path[512], buf[32] = "";
            snprintf(path, sizeof path, "%s/first", a->dir);
            FILE *f = fopen(path, "r");
            if (f && fgets(buf, sizeof buf, f))
                first = atoll(buf);
            if (f)
                fclose(f);
            final = first + a->versions - 1;
            applied0 = gb_param_subscriber_get_stats(s).applied;
        }
        gb_param_subscriber_stats st0 = gb_param_subscriber_get_stats(s);
        if (!ready && st0.applied > st0.repaired) { /* a version came whole on PUB */
            ready = 1;
            atomic_fetch_add(&subs_ready, 1);
        }
        int rc = gb_param_subscriber_poll(s, 50, &err);
        if (rc < 0) {
            snprintf(a->result, sizeof a->result, "FAIL poll: %s", err.msg);
            goto out;
        }
        int64_t v = gb_param_subscriber_version(s);
        if (v == last)
            continue;
        if (v < last) {
            snprintf(a->result, sizeof a->result, "FAIL version %lld after %lld", (long long)v,
                     (long long)last);
            goto out;
        }
        const gb_param_blob *b = gb_param_subscriber_acquire(s);
        int64_t bad = b->bytes == a->bytes ? pt_check(b->data, 0, b->bytes, v) : 0;
        gb_param_blob_release(b);
        if (bad >= 0) {
            snprintf(a->result, sizeof a->result, "FAIL version %lld: byte %lld wrong",
                     (long long)v, (long long)bad);
            goto out;
        }
        if (first >= 0 && k + 8 < sizeof seen)
            k += (size_t)snprintf(seen + k, sizeof seen - k, "%s%lld", k ? "," : "",
                                  (long long)v);
        last = v;
    }
    gb_param_subscriber_stats st = gb_param_subscriber_get_stats(s);
    a->ok = first >= 0 && last == final && st.applied - applied0 == (uint64_t)a->versions;
    snprintf(a->result, sizeof a->result, "%s applied=%llu fetched=%llu seen=%s",
             a->ok ? "ok" : "FAIL", (unsigned long long)(st.applied - applied0),
             (unsigned long long)st.fetched_bytes, seen);
out:
    gb_param_subscriber_close(s);
    return NULL;
}

static int run_subs(char **a)
{
    const char *dir = a[0], *name = a[1], *ip = a[2];
    int port = atoi(a[3]), count = atoi(a[4]), versions = atoi(a[6]);
    uint64_t bytes = strtoull(a[5], NULL, 10);
    void *ctx = zmq_ctx_new();
    sub_arg *args = calloc((size_t)count, sizeof *args);
    pthread_t *th = calloc((size_t)count, sizeof *th);
    for (int i = 0; i < count; i++) {
        args[i] = (sub_arg){.ctx = ctx, .dir = dir, .bytes = bytes, .versions = versions,
                            .index = i};
        snprintf(args[i].pub, sizeof args[i].pub, "tcp://%s:%d", ip, port);
        snprintf(args[i].fetch, sizeof args[i].fetch, "tcp://%s:%d", ip, port + 1);
        pthread_create(&th[i], NULL, sub_thread, &args[i]);
    }
    char file[128];
    snprintf(file, sizeof file, "subs-%s.ready", name);
    while (atomic_load(&subs_ready) < count && !pt_stop)
        gb_sleep_ms(10);
    write_file(dir, file, "ready\n");
    int ok = 1;
    size_t cap = (size_t)count * 1500 + 1, len = 0;
    char *out = calloc(cap, 1);
    for (int i = 0; i < count; i++) {
        pthread_join(th[i], NULL);
        ok &= args[i].ok;
        len += (size_t)snprintf(out + len, cap - len, "%s %d %s\n", name, i, args[i].result);
    }
    snprintf(file, sizeof file, "subs-%s", name);
    write_file(dir, file, out);
    free(out);
    free(args);
    free(th);
    zmq_ctx_term(ctx);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    signal(SIGTERM, pt_on_term);
    signal(SIGINT, pt_on_term);
    if (argc == 8 && strcmp(argv[1], "service") == 0)
        return run_service(argv + 2);
    if (argc == 7 && strcmp(argv[1], "relay") == 0)
        return run_relay(argv + 2);
    if (argc == 9 && strcmp(argv[1], "subs") == 0)
        return run_subs(argv + 2);
    fprintf(stderr, "usage: see tests/runtime/streams/relay_probe.c\n");
    return 2;
}
