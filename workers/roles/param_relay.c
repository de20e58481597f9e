/* workers/roles/param_relay.c: the parameter relay worker (parameters.relay: per_host): subscribes
 * to the parameter service and re-serves this host's policy workers (runtime/streams/params.h,
 * "relay"), registered as "relay/<host>/pub" and "relay/<host>/fetch" (gb_worker_host). */
#include "workers/roles/worker.h"

#include "runtime/base/clock.h"
#include "runtime/base/log.h"
#include "runtime/streams/params.h"

#include <stdio.h>

int gb_relay_main(gb_worker *w, gb_error *err)
{
    char up_pub[GB_REGISTRY_ENDPOINT_MAX], up_fetch[GB_REGISTRY_ENDPOINT_MAX];
    char pub[GB_REGISTRY_ENDPOINT_MAX], fetch[GB_REGISTRY_ENDPOINT_MAX], host[64];
    gb_param_relay *r = NULL;
    char names[2][GB_REGISTRY_NAME_MAX];
    static const char *const which[] = {GB_SOCKET_PARAMS_PUB, GB_SOCKET_PARAMS_FETCH};
    int rc;
    if ((rc = gb_worker_host(host, sizeof host, err)))
        return rc;
    for (int i = 0; i < 2; i++)
        snprintf(names[i], sizeof names[i], "relay/%s/%s", host, which[i]);
    if ((rc = gb_worker_lookup(w, "params/0/" GB_SOCKET_PARAMS_PUB, up_pub, sizeof up_pub,
                               err)) ||
        (rc = gb_worker_lookup(w, "params/0/" GB_SOCKET_PARAMS_FETCH, up_fetch, sizeof up_fetch,
                               err)) ||
        (rc = gb_worker_endpoint(w, which[0], names[0], pub, sizeof pub, err)) ||
        (rc = gb_worker_endpoint(w, which[1], names[1], fetch, sizeof fetch, err)))
        return rc;
    gb_param_relay_opts o = {.up_pub_endpoint = up_pub,
                             .up_fetch_endpoint = up_fetch,
                             .pub_endpoint = pub,
                             .fetch_endpoint = fetch,
                             .timeout_ms = 2000,
                             .recheck_ms = 500, /* as a policy worker's subscriber */
                             .chunk_bytes = (uint64_t)w->cfg->parameters.chunk_bytes,
                             .role = w->role,
                             .index = w->index};
    if ((rc = gb_param_relay_open(&r, w->zctx, &o, err)))
        return rc;
    for (int i = 0; i < 2 && rc == 0; i++)
        rc = gb_registry_register(w->registry, names[i], gb_param_relay_endpoint(r, which[i]),
                                  err);
    if (rc == 0)
        GB_INFO("relay: serving host '%s' at %s from %s", host, gb_param_relay_endpoint(r, "pub"),
                up_pub);
    double next_report = gb_now_s();
    while (rc == 0 && !gb_worker_stopping(w)) {
        rc = gb_param_relay_poll(r, 50, err);
        if (rc == GB_ENOMEM) {
            GB_WARN("relay: %s", err->msg);
            rc = 0;
        }
        rc = rc == 1 || rc == GB_EINTR ? 0 : rc; /* a signal: the loop's test decides */
        if (rc == 0 && gb_now_s() >= next_report) {
            gb_param_relay_stats st = gb_param_relay_get_stats(r);
            gb_metrics_set(w->metrics, "param_version", (double)gb_param_relay_version(r));
            gb_metrics_set(w->metrics, "relay_versions", (double)st.up.applied);
            gb_metrics_set(w->metrics, "relay_forwarded", (double)st.forwarded);
            gb_metrics_set(w->metrics, "relay_peers", (double)st.down.pub_peers);
            gb_metrics_set(w->metrics, "relay_sent_bytes", (double)st.down.sent_bytes);
            gb_metrics_send(w->metrics, NULL);
            next_report = gb_now_s() + gb_worker_report_interval(w);
        }
    }
    gb_param_relay_stats st = gb_param_relay_get_stats(r);
    GB_INFO("relay: stopping at version %lld: %llu versions relayed (%llu fetched in part), %llu "
            "messages forwarded, %llu parameter bytes sent to this host",
            (long long)gb_param_relay_version(r), (unsigned long long)st.up.applied,
            (unsigned long long)st.up.repaired, (unsigned long long)st.forwarded,
            (unsigned long long)st.down.sent_bytes);
    gb_param_relay_close(r);
    return rc == GB_ECLOSED ? 0 : rc;
}
