/* tests/hostile_peer.h: a peer that sends a server more than it should and never reads the
 * answers, for the tests that bound what such a peer costs (test_message_bounds.c,
 * test_serve_bounds.c). For a child process forked before any thread or ZeroMQ context exists.
 * defines: hostile_socket */
#ifndef GB_TESTS_HOSTILE_PEER_H
#define GB_TESTS_HOSTILE_PEER_H

#include <unistd.h>
#include <zmq.h>

/* A socket of type (ZMQ_DEALER, ZMQ_PUSH) on a fresh context (*zctx, for the caller to end),
 * connected to ep, that reads nothing: its receive queue is one message and its kernel buffer
 * the smallest, so what the server answers backs up there. linger: ZMQ_LINGER (-1: every
 * message out before the socket closes). sndhwm: ZMQ_SNDHWM (0: no bound), or -1 for ZeroMQ's
 * default. Exits the process with 1 when it cannot connect. */
static inline void *hostile_socket(void **zctx, int type, const char *ep, int linger, int sndhwm)
{
    *zctx = zmq_ctx_new();
    void *s = zmq_socket(*zctx, type);
    int one = 1, small = 4096;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    if (sndhwm >= 0)
        zmq_setsockopt(s, ZMQ_SNDHWM, &sndhwm, sizeof sndhwm);
    zmq_setsockopt(s, ZMQ_RCVHWM, &one, sizeof one);
    zmq_setsockopt(s, ZMQ_RCVBUF, &small, sizeof small);
    if (zmq_connect(s, ep) != 0)
        _exit(1);
    return s;
}

#endif
