/* runtime/streams/params_relay.c: the parameter relay: a subscriber to the parameter service and a
 * service without input to its host's subscribers, joined by the subscriber's tap (see params.h,
 * "relay"). Nothing here handles the protocol itself: params_subscriber.c assembles, repairs and
 * orders, params_service.c forwards and answers. */
#include "runtime/streams/params_impl.h"

#include "runtime/base/clock.h"

#include <stdlib.h>

struct gb_param_relay {
    gb_param_subscriber *up;
    gb_param_service *down;
    uint64_t forwarded;
};

static void on_tap(void *ctx, gb_wire_msg *m)
{
    gb_param_relay *r = ctx;
    param_service_relay_forward(r->down, m);
    r->forwarded++;
}

int gb_param_relay_open(gb_param_relay **out, void *zctx, const gb_param_relay_opts *o,
                        gb_error *err)
{
    *out = NULL;
    if (!o->up_pub_endpoint || !o->up_fetch_endpoint || !o->pub_endpoint || !o->fetch_endpoint)
        return gb_error_set(err, GB_EINVAL, "parameter relay: need the service's pub and fetch "
                            "endpoints and its own two");
    gb_param_relay *r = calloc(1, sizeof *r);
    if (!r)
        return gb_error_set(err, GB_ENOMEM, "parameter relay: out of memory");
    /* bind first: the subscriber's tap forwards from its first poll on */
    gb_param_service_opts so = {.pub_endpoint = o->pub_endpoint,
                                .fetch_endpoint = o->fetch_endpoint,
                                .pub_hwm = o->pub_hwm,
                                .role = o->role,
                                .index = o->index,
                                .max_chunk_bytes = o->chunk_bytes};
    gb_param_subscriber_opts uo = {.pub_endpoint = o->up_pub_endpoint,
                                   .fetch_endpoint = o->up_fetch_endpoint,
                                   .timeout_ms = o->timeout_ms,
                                   .recheck_ms = o->recheck_ms,
                                   .rcv_hwm = o->rcv_hwm,
                                   .role = o->role,
                                   .index = o->index,
                                   .chunk_bytes = o->chunk_bytes};
    int rc = gb_param_service_open(&r->down, zctx, &so, err);
    if (rc == 0)
        rc = gb_param_subscriber_open(&r->up, zctx, &uo, err);
    if (rc) {
        gb_error_prefix(err, "parameter relay");
        gb_param_relay_close(r);
        return rc;
    }
    param_subscriber_set_tap(r->up, on_tap, r);
    *out = r;
    return 0;
}

void gb_param_relay_close(gb_param_relay *r)
{
    if (!r)
        return;
    gb_param_subscriber_close(r->up);
    gb_param_service_close(r->down);
    free(r);
}

const char *gb_param_relay_endpoint(const gb_param_relay *r, const char *which)
{
    return gb_param_service_endpoint(r->down, which);
}

int64_t gb_param_relay_version(const gb_param_relay *r)
{
    return gb_param_subscriber_version(r->up);
}

gb_param_relay_stats gb_param_relay_get_stats(const gb_param_relay *r)
{
    return (gb_param_relay_stats){.up = gb_param_subscriber_get_stats(r->up),
                                  .down = gb_param_service_get_stats(r->down),
                                  .forwarded = r->forwarded};
}

/* One round: the upstream side (forwarding through the tap as it reads), the state the
 * downstream side serves, then the downstream requests queued. */
static int round_once(gb_param_relay *r, int *changed, gb_error *err)
{
    int rc = gb_param_subscriber_poll(r->up, 0, err);
    if (rc < 0 && rc != GB_ENOMEM)
        return rc;
    *changed |= rc == 1;
    param_service_relay_state(r->down, param_subscriber_current(r->up),
                              param_subscriber_incoming(r->up));
    int rc2 = gb_param_service_poll(r->down, 0, err);
    return rc2 < 0 ? rc2 : (rc == GB_ENOMEM ? rc : 0);
}

int gb_param_relay_poll(gb_param_relay *r, int timeout_ms, gb_error *err)
{
    gb_error local;
    if (!err)
        err = &local;
    uint64_t end = gb_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ULL;
    int changed = 0;
    for (;;) {
        int rc = round_once(r, &changed, err);
        if (rc)
            return rc;
        uint64_t now = gb_now_ns();
        if (changed || now >= end)
            return changed;
        uint64_t wake = param_subscriber_wake_ns(r->up, end);
        long wait_ms = wake > now ? (long)((wake - now + 999999) / 1000000) : 0;
        zmq_pollitem_t it[3] = {{NULL, 0, ZMQ_POLLIN, 0}, {NULL, 0, ZMQ_POLLIN, 0},
                                {param_service_fetch_socket(r->down), 0, ZMQ_POLLIN, 0}};
        param_subscriber_sockets(r->up, &it[0].socket, &it[1].socket);
        if (zmq_poll(it, 3, wait_ms) < 0)
            return gb_wire_zmq_error(err, "parameter relay: zmq_poll");
    }
}
