/* tests/runtime/streams/frame_limits_test.h: shared by the frame-bound tests (test_frame_limits.c,
 * test_frame_limits_params.c): a socket monitor that sees a peer disconnected, a peer socket
 * that does not linger, and a well-formed message of one tensor of any size.
 * defines: BIG, WAIT_MS, monitor_open, monitor_saw, monitor_close, socket_on, send_sized,
 *          endpoint_in */
#ifndef GB_TESTS_STREAMS_FRAME_LIMITS_TEST_H
#define GB_TESTS_STREAMS_FRAME_LIMITS_TEST_H

#include "runtime/streams/wire.h"
#include "runtime/streams/wire_schema.h"
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BIG (1u << 20) /* an oversized frame: far above every bound set here */
#define WAIT_MS 10000  /* the longest any step below may take on a loaded machine */

/* A PAIR socket receiving sock's events of mask (zmq_socket_monitor). */
static inline void *monitor_open(void *ctx, void *sock, int mask)
{
    static int n;
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://frame-limits-monitor-%d", n++);
    CHECK(zmq_socket_monitor(sock, ep, mask) == 0);
    void *pair = zmq_socket(ctx, ZMQ_PAIR);
    int linger = 0;
    zmq_setsockopt(pair, ZMQ_LINGER, &linger, sizeof linger);
    CHECK(zmq_connect(pair, ep) == 0);
    return pair;
}

/* 1 when an event of mask is waiting on the monitor (each event: a 6-byte frame, the endpoint). */
static inline int monitor_saw(void *pair, int mask)
{
    int seen = 0;
    for (;;) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, pair, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            return seen;
        }
        uint16_t ev = 0;
        if (zmq_msg_size(&m) >= sizeof ev)
            memcpy(&ev, zmq_msg_data(&m), sizeof ev);
        int more = zmq_msg_more(&m);
        while (more && zmq_msg_recv(&m, pair, 0) >= 0)
            more = zmq_msg_more(&m);
        zmq_msg_close(&m);
        seen |= (ev & mask) != 0;
    }
}

static inline void monitor_close(void *sock, void *pair)
{
    zmq_socket_monitor(sock, NULL, 0);
    zmq_close(pair);
}

static inline void *socket_on(void *ctx, int type)
{
    void *s = zmq_socket(ctx, type);
    int linger = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    return s;
}

/* Sends a well-formed message of type whose one uint8 tensor `name` has bytes bytes (zeros),
 * with the attributes attrs of kind sc when sc is set. */
static inline int send_sized(void *sock, const void *route, size_t route_len, int type, int role,
                      const char *name, uint64_t bytes, uint64_t seq, const gb_wire_schema *sc,
                      const void *attrs)
{
    unsigned char *zeros = calloc(1, bytes ? bytes : 1);
    gb_error err;
    gb_wire_header h;
    gb_wire_header_init(&h, type, role, 0);
    h.seq = seq;
    if (sc)
        CHECK_OK(gb_wire_schema_write(sc, attrs, &h, &err));
    int64_t n = (int64_t)bytes;
    h.ntensors = 1;
    CHECK_OK(gb_wire_set_tensor(&h.tensors[0], name, GB_DTYPE_UINT8, 1, &n, &err));
    gb_wire_payload p = {zeros, NULL, NULL, NULL};
    int rc = gb_wire_send(sock, route, route_len, &h, &p, 0, &err);
    CHECK_MSG(rc == 0, "send: %s", err.msg);
    free(zeros);
    return rc;
}

static inline void endpoint_in(const char *dir, const char *name, char *out, size_t cap)
{
    snprintf(out, cap, "ipc://%s/%s", dir, name);
}

#endif
