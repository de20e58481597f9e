/* workers/roles/param_service.c: the parameter service worker: holds the latest parameters from
 * trainer 0 and broadcasts them to the policy workers (runtime/streams/params.h). */
#include "workers/roles/worker.h"

#include "runtime/base/clock.h"
#include "runtime/base/log.h"
#include "runtime/streams/params.h"

#include <stdio.h>

int gb_params_main(gb_worker *w, gb_error *err)
{
    char in[GB_REGISTRY_ENDPOINT_MAX], pub[GB_REGISTRY_ENDPOINT_MAX],
        fetch[GB_REGISTRY_ENDPOINT_MAX];
    gb_param_service *s = NULL;
    char names[3][64];
    static const char *const which[] = {GB_SOCKET_PARAMS_IN, GB_SOCKET_PARAMS_PUB,
                                        GB_SOCKET_PARAMS_FETCH};
    for (int i = 0; i < 3; i++)
        snprintf(names[i], sizeof names[i], "params/%d/%s", w->index, which[i]);
    int rc;
    if ((rc = gb_worker_endpoint(w, which[0], names[0], in, sizeof in, err)) ||
        (rc = gb_worker_endpoint(w, which[1], names[1], pub, sizeof pub, err)) ||
        (rc = gb_worker_endpoint(w, which[2], names[2], fetch, sizeof fetch, err)))
        return rc;
    gb_param_service_opts o = {.in_endpoint = in, .pub_endpoint = pub, .fetch_endpoint = fetch,
                               .role = w->role, .index = w->index,
                               .max_chunk_bytes = (uint64_t)w->cfg->parameters.chunk_bytes};
    if ((rc = gb_param_service_open(&s, w->zctx, &o, err)))
        return rc;
    for (int i = 0; i < 3 && rc == 0; i++)
        rc = gb_registry_register(w->registry, names[i], gb_param_service_endpoint(s, which[i]),
                                  err);
    double next_report = gb_now_s();
    uint64_t peers_max = 0; /* subscribers (or relays) at once, at most: for the last line */
    while (rc == 0 && !gb_worker_stopping(w)) {
        rc = gb_param_service_poll(s, 50, err);
        if (rc == GB_ENOMEM) {
            GB_WARN("params: %s", err->msg);
            rc = 0;
        }
        if (gb_now_s() >= next_report) {
            gb_param_service_stats st = gb_param_service_get_stats(s);
            gb_metrics_set(w->metrics, "param_version", (double)gb_param_service_version(s));
            gb_metrics_set(w->metrics, "param_versions", (double)st.versions);
            gb_metrics_set(w->metrics, "param_abandoned", (double)st.abandoned);
            gb_metrics_set(w->metrics, "param_rejected", (double)st.rejected);
            gb_metrics_set(w->metrics, "param_peers", (double)st.pub_peers);
            peers_max = st.pub_peers > peers_max ? st.pub_peers : peers_max;
            gb_metrics_set(w->metrics, "param_sent_bytes", (double)st.sent_bytes);
            gb_metrics_send(w->metrics, NULL);
            next_report = gb_now_s() + gb_worker_report_interval(w);
        }
    }
    gb_param_service_stats st = gb_param_service_get_stats(s);
    GB_INFO("params: stopping at version %lld: %llu versions, %llu parameter bytes sent to at "
            "most %llu subscribers (or relays) at once", (long long)gb_param_service_version(s),
            (unsigned long long)st.versions, (unsigned long long)st.sent_bytes,
            (unsigned long long)peers_max);
    gb_param_service_close(s);
    return rc == GB_ECLOSED ? 0 : rc;
}
