/* tests/workers/server/test_serve_bounds.c: the data server's memory against a client that asks
 * and never reads: another process sends sample requests on a socket it never reads; the
 * server must refuse it past server.max_pending_replies (counted), keep its own memory bounded
 * and go on serving a well-behaved client beside it; and one that sends multipart requests of
 * hundreds of MB, refused, counted and given back. Usage: test_serve_bounds TMPDIR */
#include "hostile_peer.h"
#include "serve_util.h"
#include "test.h"

#include "runtime/streams/wire.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#define GREEDY_REQUESTS 1000 /* sample(256 items of 8 steps) each, ~100 KB a reply */

/* The greedy client, in a child process forked before any thread or ZeroMQ context exists: it
 * reads the endpoint from fd, sends GREEDY_REQUESTS sample requests, reads nothing (its receive
 * queue is one message and the smallest kernel buffer) and waits to be killed. */
static void greedy_child(int fd)
{
    char ep[256] = {0};
    if (read(fd, ep, sizeof ep - 1) <= 0)
        _exit(1);
    void *zctx, *d = hostile_socket(&zctx, ZMQ_DEALER, ep, 0, -1);
    gb_error err = {0};
    gb_wire_header h;
    gb_wire_header_init(&h, GB_MSG_SERVE_REQUEST, GB_ROLE_CLIENT, 0);
    gb_wire_attr_set_int(&h, "op", GB_SERVE_SAMPLE, &err);
    gb_wire_attr_set_int(&h, "batch", 256, &err);
    unsigned char hb[GB_WIRE_HEADER_MAX];
    size_t hl;
    gb_wire_encode_header(&h, hb, sizeof hb, &hl, &err);
    for (int i = 0; i < GREEDY_REQUESTS; i++)
        if (zmq_send(d, hb, hl, 0) < 0)
            _exit(1);
    for (;;)
        pause();
}

/* The sender of oversized messages, forked as greedy_child is: MANY_MESSAGES messages of
 * MANY_FRAMES frames of 2 MB each (under the frame bound of twice max_request_bytes, 1 MB here,
 * so that ZeroMQ takes them whole), then it waits to be killed. */
#define MANY_MESSAGES 4
#define MANY_FRAMES 150
static void many_frames_child(int fd)
{
    char ep[256] = {0};
    if (read(fd, ep, sizeof ep - 1) <= 0)
        _exit(1);
    void *zctx = zmq_ctx_new(), *d = zmq_socket(zctx, ZMQ_DEALER);
    if (zmq_connect(d, ep) != 0)
        _exit(1);
    gb_error err = {0};
    gb_wire_header h;
    gb_wire_header_init(&h, GB_MSG_SERVE_REQUEST, GB_ROLE_CLIENT, 0);
    gb_wire_attr_set_int(&h, "op", GB_SERVE_INSERT, &err);
    unsigned char hb[GB_WIRE_HEADER_MAX];
    size_t hl;
    gb_wire_encode_header(&h, hb, sizeof hb, &hl, &err);
    size_t bytes = 2000000;
    char *frame = calloc(1, bytes);
    for (int m = 0; m < MANY_MESSAGES; m++) {
        zmq_send(d, hb, hl, ZMQ_SNDMORE);
        for (int i = 0; i < MANY_FRAMES; i++)
            zmq_send(d, frame, bytes, i + 1 < MANY_FRAMES ? ZMQ_SNDMORE : 0);
    }
    for (;;)
        pause();
}

static pid_t greedy_pid, many_pid;
static int greedy_fd, many_fd;

/* One sample from a fresh, well-behaved client. Returns 1 when served. */
static int good_sample(const char *ep)
{
    gb_error err = {0};
    gb_client *c = NULL;
    sbuf b = {0};
    int ok = client_open_info(&c, ep, 5000, &b.info, &err) == 0;
    if (ok) {
        sbuf_alloc(&b, 32);
        gb_client_sample_req req = {.batch = 32, .timeout_ms = -1};
        gb_client_batch out = {.data = b.data, .cap = b.cap, .length = b.length};
        ok = gb_client_sample(c, &req, &out, &err) == 0 && out.n == 32 &&
             verify(&b, out.n, 0, T_STEPS, NULL) == 0;
        sbuf_free(&b);
    }
    if (!ok)
        fprintf(stderr, "  good client: %s\n", err.msg);
    gb_client_close(c);
    return ok;
}

/* The bound: the replies a client may leave unread (server.max_pending_replies, 8 by default)
 * and the ones being built on the 3 request threads, each of bytes_sent / samples, plus 32 MB
 * for the allocator's and ZeroMQ's own slack. Before the limit the server kept a reply for
 * every request up to ZeroMQ's queue of 1024 messages: ~100 MB here, 1.6 GB with larger
 * samples. */
static void test_unread_replies_bounded(void)
{
    gb_error err = {0};
    test_server ts;
    CHECK_OK(test_server_start(&ts, server_config_bytes("", 100000000), &err));
    if (!ts.server)
        return;
    const char *ep = gb_server_endpoint(ts.server);
    CHECK(good_sample(ep));
    long long before = test_vm_bytes("VmRSS:");
    CHECK(write(greedy_fd, ep, strlen(ep)) == (ssize_t)strlen(ep));
    /* every request answered or refused */
    TEST_WAIT_UNTIL(gb_server_get_stats(ts.server).requests[GB_SERVE_SAMPLE] +
                            gb_server_get_stats(ts.server).refused >=
                        GREEDY_REQUESTS + 1,
                    60000);
    struct timespec settle = {0, 300000000};
    nanosleep(&settle, NULL);
    gb_server_stats st = gb_server_get_stats(ts.server);
    long long after = test_vm_bytes("VmRSS:");
    uint64_t served = st.requests[GB_SERVE_SAMPLE];
    double reply = served ? (double)st.bytes_sent / (double)served : 0;
    double bound = (8 + 3) * reply + 32e6;
    fprintf(stderr, "  greedy client: %llu served, %llu refused; reply %.0f KB; server RSS "
            "%.1f -> %.1f MB (bound +%.1f MB)\n", (unsigned long long)served,
            (unsigned long long)st.refused, reply / 1e3, (double)before / 1e6,
            (double)after / 1e6, bound / 1e6);
    CHECK(before > 0 && after > 0 && (double)(after - before) < bound);
    /* most are refused: the ones served are those held and those the kernel's socket buffers
     * took (a reply written there is no longer the server's memory). Whether any is still held
     * now depends on how far the kernel grew the server's send buffer meanwhile (once in CI it
     * took all 17 served: clients_waiting 0), so only the refusals are checked: a refusal is
     * made only while the client holds max_pending_replies */
    CHECK(st.refused >= GREEDY_REQUESTS - 100);
    /* a well-behaved client beside it is served */
    CHECK(good_sample(ep));
    /* the greedy client gone, its replies are let go and its entry with them */
    kill(greedy_pid, SIGKILL);
    waitpid(greedy_pid, NULL, 0);
    greedy_pid = 0;
    TEST_WAIT_UNTIL(gb_server_get_stats(ts.server).clients_waiting == 0, 10000);
    CHECK(good_sample(ep));
    test_server_stop(&ts);
}

/* Oversized multipart requests are refused, counted, and their memory given back: ZeroMQ
 * holds each message whole before the server can read it (ZMQ_MAXMSGSIZE bounds a frame, not
 * their count), so the peak is what the peer sent, but once refused the server's RSS comes
 * back within 32 MB of where it was (before, most of it stayed). */
static void test_many_frames_refused(void)
{
    gb_error err = {0};
    test_server ts;
    CHECK_OK(test_server_start(&ts, server_config(""), &err)); /* max_request_bytes 1000000 */
    if (!ts.server)
        return;
    const char *ep = gb_server_endpoint(ts.server);
    CHECK(good_sample(ep));
    long long before = test_vm_bytes("VmRSS:");
    uint64_t rejected0 = gb_server_get_stats(ts.server).rejected;
    CHECK(write(many_fd, ep, strlen(ep)) == (ssize_t)strlen(ep));
    TEST_WAIT_UNTIL(gb_server_get_stats(ts.server).rejected >= rejected0 + MANY_MESSAGES, 60000);
    struct timespec settle = {0, 300000000};
    nanosleep(&settle, NULL);
    long long after = test_vm_bytes("VmRSS:");
    fprintf(stderr, "  %d messages of %d frames of 2 MB: %llu refused; server RSS %.1f -> "
            "%.1f MB\n", MANY_MESSAGES, MANY_FRAMES,
            (unsigned long long)(gb_server_get_stats(ts.server).rejected - rejected0),
            (double)before / 1e6, (double)after / 1e6);
    CHECK_EQ_INT(gb_server_get_stats(ts.server).rejected - rejected0, MANY_MESSAGES);
    if (TEST_ASAN) /* what the server freed sits in the sanitizer's quarantine */
        fprintf(stderr, "  (RSS not checked under AddressSanitizer)\n");
    else
        CHECK(before > 0 && after > 0 && after - before < 32000000);
    CHECK(good_sample(ep));
    test_server_stop(&ts);
}

int main(int argc, char **argv)
{
    int fds[2];
    if (pipe(fds) != 0)
        return 1;
    if ((greedy_pid = fork()) == 0) {
        close(fds[1]);
        greedy_child(fds[0]);
    }
    close(fds[0]);
    greedy_fd = fds[1];
    if (pipe(fds) != 0)
        return 1;
    if ((many_pid = fork()) == 0) {
        close(fds[1]);
        many_frames_child(fds[0]);
    }
    close(fds[0]);
    many_fd = fds[1];
    if (serve_test_setup(argc, argv, "d4rl_bounds.h5") != 0)
        return 1;
    TEST_RUN(test_many_frames_refused);
    TEST_RUN(test_unread_replies_bounded);
    pid_t kids[2] = {greedy_pid, many_pid};
    for (int i = 0; i < 2; i++)
        if (kids[i] > 0) {
            kill(kids[i], SIGKILL);
            waitpid(kids[i], NULL, 0);
        }
    return test_main_result();
}
