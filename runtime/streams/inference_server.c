/* runtime/streams/inference_server.c: the inference stream's batching server (ROUTER): open and
 * close, and the serial mode's poll; the pipelined mode is in inference_pipelined.c, and what both
 * do with requests (checks, merging, replies) in inference_batch.c. */
#include "runtime/streams/inference.h"
#include "runtime/streams/curve.h"
#include "runtime/streams/inference_internal.h"

#include "runtime/base/clock.h"
#include "runtime/base/log.h"

#include <stdlib.h>
#include <string.h>

/* Allocates request slot i when empty. Returns 0 or GB_ENOMEM. */
static int ensure_slot(gb_infer_server *s, int i, gb_error *err)
{
    return gb_infer_msg_ensure(&s->slot[i], err);
}

/* Releases and frees slot[0..n) and the array; NULL is fine. */
static void free_msgs(gb_wire_msg **slot, int n)
{
    if (!slot)
        return;
    for (int i = 0; i < n; i++)
        if (slot[i]) {
            gb_wire_msg_release(slot[i]);
            free(slot[i]);
        }
    free(slot);
}

/* Creates and binds the ROUTER (and, pipelined, starts the inference thread); *out is the
 * caller's, for gb_infer_server_close. Returns 0, GB_EINVAL, GB_ENOMEM, GB_EZMQ or GB_ESYS. */
int gb_infer_server_open(gb_infer_server **out, void *zctx, const gb_infer_server_opts *o,
                         gb_error *err)
{
    *out = NULL;
    if (!o->endpoint || !o->fn || o->max_batch_rows <= 0 || !(o->max_wait_ms >= 0))
        return gb_error_set(err, GB_EINVAL, "inference server: need an endpoint, a callback, "
                            "max_batch_rows > 0 and max_wait_ms >= 0");
    gb_infer_server *s = calloc(1, sizeof *s);
    if (!s)
        return gb_error_set(err, GB_ENOMEM, "inference server: out of memory");
    int rc;
    s->o = *o;
    s->rcvtimeo = -1;
    s->efd = -1;
    s->busy = -1;
    s->job = -1;
    s->cap = o->max_batch_rows < SERVER_MAX_REQUESTS ? o->max_batch_rows : SERVER_MAX_REQUESTS;
    s->slot = calloc((size_t)s->cap + 1, sizeof *s->slot);
    if (!s->slot) {
        rc = gb_error_set(err, GB_ENOMEM, "inference server: out of memory");
        goto fail;
    }
    /* slots (about 14 KiB each) are allocated when a batch first needs them: the carry slot
     * and the first one now, the rest as batches grow; none per request */
    if ((rc = ensure_slot(s, s->cap, err)) || (!o->pipelined && (rc = ensure_slot(s, 0, err))))
        goto fail;
    s->sock = zmq_socket(zctx, ZMQ_ROUTER);
    if (!s->sock) {
        rc = gb_wire_zmq_error(err, "inference server: zmq_socket(ROUTER)");
        goto fail;
    }
    /* Requests and replies queued per client: a gearbox client keeps at most
     * INFER_MAX_OUTSTANDING requests in flight (gb_infer_client_send), so it never meets this;
     * a peer that floods is held back at that many requests of max_frame (ZeroMQ's default of
     * 1000 let one queue 1000), and replies it leaves unread past it are dropped and counted
     * (stats.unsent). ROUTER_MANDATORY: a reply to a client that is gone or full fails
     * (EHOSTUNREACH, EAGAIN) instead of vanishing inside ZeroMQ, so that it is counted. */
    if ((rc = gb_infer_set_int_opt(s->sock, ZMQ_RCVHWM, INFER_MAX_OUTSTANDING, err,
                                   "inference server: ZMQ_RCVHWM")) ||
        (rc = gb_infer_set_int_opt(s->sock, ZMQ_SNDHWM, INFER_MAX_OUTSTANDING, err,
                                   "inference server: ZMQ_SNDHWM")) ||
        (rc = gb_infer_set_int_opt(s->sock, ZMQ_LINGER, 0, err, "inference server: ZMQ_LINGER")) ||
        (rc = gb_infer_set_int_opt(s->sock, ZMQ_ROUTER_MANDATORY, 1, err,
                                   "inference server: ZMQ_ROUTER_MANDATORY")) ||
        (o->max_frame > 0 && (rc = gb_wire_set_max_frame(s->sock, o->max_frame, err))))
        goto fail;
    if (gb_curve_bind(zctx, s->sock, o->endpoint) != 0) {
        rc = gb_wire_zmq_error(err, "inference server: bind");
        gb_error_prefix(err, "%s", o->endpoint);
        goto fail;
    }
    size_t len = sizeof s->endpoint;
    if (zmq_getsockopt(s->sock, ZMQ_LAST_ENDPOINT, s->endpoint, &len) != 0) {
        rc = gb_wire_zmq_error(err, "inference server: ZMQ_LAST_ENDPOINT");
        goto fail;
    }
    if (o->pipelined && (rc = gb_infer_pipe_start(s, err)))
        goto fail;
    *out = s;
    return 0;
fail:
    gb_infer_server_close(s);
    return rc;
}

/* Stops the pipeline (answering what it holds), closes the socket, frees s; NULL is fine. */
void gb_infer_server_close(gb_infer_server *s)
{
    if (!s)
        return;
    if (s->o.pipelined)
        gb_infer_pipe_stop(s); /* answers what it still holds, before the socket goes */
    if (s->sock)
        zmq_close(s->sock);
    free_msgs(s->slot, s->cap + 1);
    for (int t = 0; t < GB_WIRE_MAX_TENSORS; t++)
        free(s->merge[t]);
    for (int k = 0; k < 2; k++) {
        free_msgs(s->stages[k].slot, s->cap);
        for (int t = 0; t < GB_WIRE_MAX_TENSORS; t++)
            free(s->stages[k].merge[t]);
    }
    free(s);
}

/* The bound endpoint; lives as long as s. */
const char *gb_infer_server_endpoint(const gb_infer_server *s) { return s->endpoint; }

/* Counters as of the last poll (the driving thread reads them). */
gb_infer_server_stats gb_infer_server_get_stats(const gb_infer_server *s) { return s->st; }

/* Exchanges request slots i and j (moves a request to the carry slot and back). */
static void swap_slots(gb_infer_server *s, int i, int j)
{
    gb_wire_msg *t = s->slot[i];
    s->slot[i] = s->slot[j];
    s->slot[j] = t;
}

/* Receives requests into slots until the batch is complete. Returns the number of requests
 * (0: none came within timeout_ms) or a negative code; *rows_out gets the batch's rows. */
static int gather(gb_infer_server *s, int timeout_ms, int64_t *rows_out, gb_error *err)
{
    int n = 0;
    int64_t rows = 0;
    uint64_t start = gb_now_ns(), deadline = 0;
    uint64_t wait_ns = (uint64_t)(s->o.max_wait_ms * 1e6);
    if (s->carry) {
        swap_slots(s, 0, s->cap);
        s->carry = 0;
        rows = s->slot[0]->hdr.tensors[0].shape[0];
        gb_infer_note_client(s, s->slot[0], start);
        deadline = start + wait_ns;
        n = 1;
    }
    for (;;) {
        uint64_t now = gb_now_ns();
        if (n > 0 && (rows >= s->o.max_batch_rows || n == s->cap))
            break;
        /* whatever is already queued joins the batch; waiting for more happens only while
         * some recently seen client has no request in it yet, and until the wait limit */
        int rc;
        if (n == 0) { /* wait for the first request inside ZeroMQ: one wake-up */
            long first_ms = -1;
            if (timeout_ms >= 0) {
                uint64_t end = start + (uint64_t)timeout_ms * 1000000ULL;
                first_ms = end > now ? (long)((end - now + 999999) / 1000000) : 0;
            }
            if ((rc = gb_infer_set_rcvtimeo(s->sock, &s->rcvtimeo, first_ms, err)))
                return rc;
            rc = gb_wire_recv(s->sock, s->slot[0], 1, first_ms == 0 ? ZMQ_DONTWAIT : 0, err);
            if (rc == GB_EAGAIN || rc == GB_ETIMEOUT)
                break;
        } else {
            if ((rc = ensure_slot(s, n, err)))
                return rc;
            rc = gb_wire_recv(s->sock, s->slot[n], 1, ZMQ_DONTWAIT, err);
        }
        if (rc == GB_EAGAIN) {
            long wait_ms;
            if (n > 0) {
                if (now >= deadline || gb_infer_all_present(s, now))
                    break;
                wait_ms = (long)((deadline - now + 999999) / 1000000);
            } else if (timeout_ms < 0) {
                wait_ms = -1;
            } else {
                uint64_t end = start + (uint64_t)timeout_ms * 1000000ULL;
                if (now >= end)
                    break;
                wait_ms = (long)((end - now + 999999) / 1000000);
            }
            zmq_pollitem_t it = {s->sock, 0, ZMQ_POLLIN, 0};
            if (zmq_poll(&it, 1, wait_ms) < 0)
                return gb_wire_zmq_error(err, "inference server: zmq_poll");
            if (!(it.revents & ZMQ_POLLIN) && n > 0)
                break;
            continue;
        }
        if (rc == GB_EPROTO) {
            s->st.rejected++;
            if (gb_log_due(s->st.rejected))
                GB_WARN("inference server: rejected a malformed request (%llu so far): %s",
                        (unsigned long long)s->st.rejected, err->msg);
            if (s->slot[n]->hdr.type != 0 && s->slot[n]->route_len > 0)
                gb_infer_reply_error(s, s->slot[n], GB_EPROTO, err->msg);
            continue;
        }
        if (rc)
            return rc;
        int64_t r = gb_infer_request_rows(s, s->slot[n]);
        if (r == 0)
            continue;
        if (n > 0 && (!gb_infer_compatible(&s->slot[0]->hdr, &s->slot[n]->hdr) ||
                      rows + r > s->o.max_batch_rows)) {
            swap_slots(s, n, s->cap);
            s->carry = 1;
            break;
        }
        gb_infer_note_client(s, s->slot[n], now);
        if (n == 0)
            deadline = now + wait_ns;
        rows += r;
        n++;
    }
    *rows_out = rows;
    return n;
}

/* Serves at most one batch, waiting up to timeout_ms (see inference.h). Returns 1 (served), 0
 * (none came), the callback's error, GB_ECLOSED, GB_EZMQ or GB_ESYS. */
int gb_infer_server_poll(gb_infer_server *s, int timeout_ms, gb_error *err)
{
    gb_error local;
    if (!err)
        err = &local;
    if (s->o.pipelined)
        return gb_infer_pipe_poll(s, timeout_ms, err);
    if (s->o.between)
        s->o.between(s->o.user);
    int64_t rows = 0;
    s->gen++;
    int n = gather(s, timeout_ms, &rows, err);
    if (n <= 0)
        return n;
    int rc = gb_infer_build_batch(s->slot, n, rows, s->merge, s->merge_cap, &s->batch, err);
    if (rc == 0)
        rc = gb_infer_run_fn(s, &s->batch, &s->out, err);
    if (rc) {
        gb_infer_reply_all_error(s, s->slot, n, rc, err->msg);
        s->st.failed += (uint64_t)n;
        return rc;
    }
    gb_infer_send_replies(s, s->slot, n, rows, &s->out);
    return 1;
}
