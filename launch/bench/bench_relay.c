/* launch/bench/bench_relay.c: the parameter relay's case of `gearbox bench streams` (param_relay):
 * one publisher through the parameter service to 48 subscribers, directly and through 3 relays of
 * 16 subscribers each (parameters.relay: per_host), in the same run: the service's bytes sent per
 * version, the time until all 48 subscribers have a version, and versions per second (each
 * version published once the previous reached everyone). One process, one host: the relays'
 * "hosts" share its loopback, so the times show the relay's extra hop, not a network's relief. */
#include "launch/bench/bench.h"
#include "runtime/base/clock.h"
#include "runtime/streams/params.h"
#include "runtime/streams/wire.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NSUBS 48
#define NRELAYS 3

typedef struct relay_sub {
    gb_param_subscriber *s;
    atomic_llong version; /* the subscriber's current version */
    atomic_int on_pub;    /* a version reached it whole on PUB: its subscription is registered */
    atomic_int stop;
    uint64_t applied;
} relay_sub;

static void *sub_thread(void *arg)
{
    relay_sub *c = arg;
    gb_error err;
    while (!atomic_load(&c->stop)) {
        if (gb_param_subscriber_poll(c->s, 5, &err) < 0)
            gb_sleep_ms(1);
        atomic_store(&c->version, gb_param_subscriber_version(c->s));
        gb_param_subscriber_stats st = gb_param_subscriber_get_stats(c->s);
        if (st.applied > st.repaired)
            atomic_store(&c->on_pub, 1);
    }
    return NULL;
}

/* The service and each relay are driven by a thread of their own; what the main thread reads
 * of them while they run are these snapshots, stored after every poll. */
typedef struct snapshot {
    atomic_ullong peers, sent;
    atomic_llong version;
} snapshot;

typedef struct pump {
    atomic_int stop;
    gb_param_service *svc;
    gb_param_relay *relay[NRELAYS];
    snapshot svc_snap, relay_snap[NRELAYS];
} pump;

static void *service_thread(void *arg)
{
    pump *p = arg;
    gb_error err;
    while (!atomic_load(&p->stop)) {
        gb_param_service_poll(p->svc, 20, &err);
        gb_param_service_stats st = gb_param_service_get_stats(p->svc);
        atomic_store(&p->svc_snap.peers, st.pub_peers);
        atomic_store(&p->svc_snap.sent, st.sent_bytes);
        atomic_store(&p->svc_snap.version, gb_param_service_version(p->svc));
    }
    return NULL;
}

typedef struct relay_thread_arg {
    pump *p;
    int i;
} relay_thread_arg;

static void *relay_thread(void *arg)
{
    relay_thread_arg *a = arg;
    gb_param_relay *r = a->p->relay[a->i];
    snapshot *snap = &a->p->relay_snap[a->i];
    gb_error err;
    while (!atomic_load(&a->p->stop)) {
        gb_param_relay_poll(r, 20, &err);
        atomic_store(&snap->peers, gb_param_relay_get_stats(r).down.pub_peers);
        atomic_store(&snap->version, gb_param_relay_version(r));
    }
    return NULL;
}

typedef struct phase_result {
    double bytes_per_version; /* the service's sent_bytes per version */
    double median_s, max_s;   /* publish -> all 48 have it */
    double versions_per_s;
    uint64_t relay_sent;      /* the relays' sent_bytes, all versions */
    uint64_t sent0;           /* the service's sent_bytes before the first version */
    int failed;
} phase_result;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One phase's objects: the service, its relays and subscribers, the publisher, the threads
 * that drive them. */
typedef struct phase {
    gb_bench_net *b;
    int nrelays;             /* asked for (0: direct) */
    int nrel, nsubs, started; /* opened; threads started */
    pump p;
    relay_sub subs[NSUBS];
    relay_thread_arg ra[NRELAYS];
    pthread_t sth, rth[NRELAYS], subth[NSUBS];
    gb_param_publisher *pubr;
    gb_param_entry e; /* one uint8 tensor of the phase's bytes */
} phase;

/* Opens the service, ph->nrelays relays (chunks of chunk bytes), NSUBS subscribers (to the
 * relays in turn, or to the service) and the publisher, then starts their threads. Returns 0
 * or the error; what was opened is in ph for phase_close. */
static int phase_open(phase *ph, uint64_t chunk, gb_error *err)
{
    gb_bench_net *b = ph->b;
    char in[256], pub[256], fetch[256];
    gb_bench_net_endpoint(b, in, sizeof in, "relay-svc-in");
    gb_bench_net_endpoint(b, pub, sizeof pub, "relay-svc-pub");
    gb_bench_net_endpoint(b, fetch, sizeof fetch, "relay-svc-fetch");
    gb_param_service_opts so = {.in_endpoint = in, .pub_endpoint = pub, .fetch_endpoint = fetch,
                                .role = GB_ROLE_PARAMS, .max_chunk_bytes = chunk};
    int rc = gb_param_service_open(&ph->p.svc, b->ctx, &so, err);
    gb_param_service *svc = ph->p.svc;
    for (; !rc && ph->nrel < ph->nrelays; ph->nrel++) {
        char rp[256], rf[256];
        gb_bench_net_endpoint(b, rp, sizeof rp, "relay-pub");
        gb_bench_net_endpoint(b, rf, sizeof rf, "relay-fetch");
        gb_param_relay_opts ro = {.up_pub_endpoint = gb_param_service_endpoint(svc, "pub"),
                                  .up_fetch_endpoint = gb_param_service_endpoint(svc, "fetch"),
                                  .pub_endpoint = rp, .fetch_endpoint = rf, .timeout_ms = 5000,
                                  .chunk_bytes = chunk, .role = GB_ROLE_RELAY, .index = ph->nrel};
        if ((rc = gb_param_relay_open(&ph->p.relay[ph->nrel], b->ctx, &ro, err)))
            return rc;
    }
    for (; !rc && ph->nsubs < NSUBS; ph->nsubs++) {
        int i = ph->nsubs;
        gb_param_relay *r = ph->nrelays ? ph->p.relay[i % ph->nrelays] : NULL;
        gb_param_subscriber_opts o = {
            .pub_endpoint = r ? gb_param_relay_endpoint(r, "pub")
                              : gb_param_service_endpoint(svc, "pub"),
            .fetch_endpoint = r ? gb_param_relay_endpoint(r, "fetch")
                                : gb_param_service_endpoint(svc, "fetch"),
            .timeout_ms = 5000, .role = GB_ROLE_POLICY, .index = i, .chunk_bytes = chunk};
        atomic_store(&ph->subs[i].version, -1);
        if ((rc = gb_param_subscriber_open(&ph->subs[i].s, b->ctx, &o, err)))
            return rc;
    }
    gb_param_publisher_opts po = {gb_param_service_endpoint(svc, "in"), chunk, 30000,
                                  GB_ROLE_TRAINER, 0};
    if (rc || (rc = gb_param_publisher_open(&ph->pubr, b->ctx, &po, err)))
        return rc;
    pthread_create(&ph->sth, NULL, service_thread, &ph->p);
    for (int i = 0; i < ph->nrel; i++) {
        ph->ra[i] = (relay_thread_arg){&ph->p, i};
        pthread_create(&ph->rth[i], NULL, relay_thread, &ph->ra[i]);
    }
    for (int i = 0; i < ph->nsubs; i++)
        pthread_create(&ph->subth[i], NULL, sub_thread, &ph->subs[i]);
    ph->started = 1;
    return 0;
}

/* Waits until every subscriber (or relay) is connected to the service and every subscriber to
 * its relay; GB_ETIMEOUT after 60 s. */
static int phase_wait_connected(phase *ph, gb_error *err)
{
    int nrel = ph->nrel;
    for (int waited = 0;; waited += 10) {
        int ok = atomic_load(&ph->p.svc_snap.peers) >= (uint64_t)(nrel ? nrel : NSUBS);
        for (int i = 0; i < nrel; i++)
            ok &= atomic_load(&ph->p.relay_snap[i].peers) >= (uint64_t)(NSUBS / nrel);
        if (ok)
            return 0;
        if (waited > 60000)
            return gb_error_set(
                err, GB_ETIMEOUT, "subscribers not connected within 60 s (the service has %llu, "
                "relay 0 %llu)", (unsigned long long)atomic_load(&ph->p.svc_snap.peers),
                (unsigned long long)(nrel ? atomic_load(&ph->p.relay_snap[0].peers) : 0));
        gb_sleep_ms(10);
    }
}

/* Warm-up versions until each subscriber got one whole on PUB: a connection counted by PUB is
 * not yet a subscription it honours, and a subscriber that joins late fetches. Returns 0 with
 * *v0 the last warm-up version, or the error. */
static int phase_warm_up(phase *ph, unsigned char *data, size_t bytes, int *v0, gb_error *err)
{
    *v0 = 0;
    for (int all = 0; !all; gb_sleep_ms(50)) {
        memset(data, ++*v0, bytes);
        int rc = gb_param_publish(ph->pubr, *v0, &ph->e, 1, data, bytes, err);
        if (rc)
            return rc;
        all = 1;
        for (int i = 0; i < ph->nsubs; i++) { /* each has v0 (or 10 s passed), then: on PUB? */
            for (double t = gb_now_s(); atomic_load(&ph->subs[i].version) < *v0;)
                if (gb_now_s() - t > 10)
                    break;
                else
                    gb_sleep_ms(1);
            all &= atomic_load(&ph->subs[i].on_pub);
        }
        if (*v0 > 400)
            return gb_error_set(err, GB_ETIMEOUT, "subscribers not subscribed after 400 "
                                "versions");
    }
    return 0;
}

/* Versions v0 + 1 .. v0 + versions, each published once the previous reached everyone and
 * timed from its publish until all have it (into lat); the whole into res. */
static int phase_measure(phase *ph, unsigned char *data, size_t bytes, int v0, int versions,
                         double *lat, phase_result *res, gb_error *err)
{
    int nrel = ph->nrel;
    res->sent0 = atomic_load(&ph->p.svc_snap.sent);
    double t_all0 = gb_now_s();
    for (int v = v0 + 1; v <= v0 + versions; v++) {
        memset(data, v, bytes);
        double t0 = gb_now_s();
        int rc = gb_param_publish(ph->pubr, v, &ph->e, 1, data, bytes, err);
        if (rc)
            return rc;
        for (int i = 0; i < ph->nsubs; i++)
            while (atomic_load(&ph->subs[i].version) < v) {
                if (gb_now_s() - t0 > 60)
                    return gb_error_set(
                        err, GB_ETIMEOUT, "subscriber %d: version %d not within 60 s (it has "
                        "%lld; its relay %lld; the service %lld)", i, v,
                        (long long)atomic_load(&ph->subs[i].version),
                        nrel ? (long long)atomic_load(&ph->p.relay_snap[i % nrel].version) : -1,
                        (long long)atomic_load(&ph->p.svc_snap.version));
                gb_sleep_ms(0.05);
            }
        lat[v - v0 - 1] = gb_now_s() - t0;
    }
    double total = gb_now_s() - t_all0;
    res->versions_per_s = versions / total;
    qsort(lat, (size_t)versions, sizeof *lat, cmp_double);
    res->median_s = lat[versions / 2];
    res->max_s = lat[versions - 1];
    return 0;
}

/* Stops the threads, reads the bytes sent (when the phase did not fail) and closes it all. */
static void phase_close(phase *ph, int versions, phase_result *res)
{
    atomic_store(&ph->p.stop, 1);
    for (int i = 0; i < ph->nsubs; i++) {
        atomic_store(&ph->subs[i].stop, 1);
        if (ph->started)
            pthread_join(ph->subth[i], NULL);
        gb_param_subscriber_close(ph->subs[i].s);
    }
    if (ph->started) {
        pthread_join(ph->sth, NULL);
        for (int i = 0; i < ph->nrel; i++)
            pthread_join(ph->rth[i], NULL);
    }
    if (!res->failed) { /* the threads are gone: their objects can be read */
        res->bytes_per_version =
            (double)(gb_param_service_get_stats(ph->p.svc).sent_bytes - res->sent0) / versions;
        for (int i = 0; i < ph->nrel; i++)
            res->relay_sent += gb_param_relay_get_stats(ph->p.relay[i]).down.sent_bytes;
    }
    for (int i = 0; i < ph->nrel; i++)
        gb_param_relay_close(ph->p.relay[i]);
    gb_param_publisher_close(ph->pubr);
    gb_param_service_close(ph->p.svc);
}

/* One phase: a fresh service, nrelays relays (0: direct), NSUBS subscribers, versions versions
 * of bytes. Returns 0, or 1 when it failed (the message on stderr, res->failed set). */
static int run_phase(gb_bench_net *b, int nrelays, size_t bytes, int versions, phase_result *res)
{
    static phase ph; /* large: off the stack */
    memset(&ph, 0, sizeof ph);
    memset(res, 0, sizeof *res);
    ph.b = b;
    ph.nrelays = nrelays;
    snprintf(ph.e.name, sizeof ph.e.name, "weights");
    ph.e.dtype = GB_DTYPE_UINT8;
    ph.e.rank = 1;
    ph.e.shape[0] = (int64_t)bytes;
    gb_error err = {0};
    unsigned char *data = malloc(bytes);
    double *lat = calloc((size_t)versions, sizeof *lat);
    int v0 = 0;
    int rc = !data || !lat ? gb_error_set(&err, GB_ENOMEM, "out of memory")
                           : phase_open(&ph, 1 << 20, &err);
    if (!rc && !(rc = phase_wait_connected(&ph, &err)) &&
        !(rc = phase_warm_up(&ph, data, bytes, &v0, &err)))
        rc = phase_measure(&ph, data, bytes, v0, versions, lat, res, &err);
    if (rc) {
        fprintf(stderr, "bench streams: param_relay (%s): %s\n", nrelays ? "relays" : "direct",
                err.msg);
        res->failed = 1;
    }
    phase_close(&ph, versions, res);
    free(data);
    free(lat);
    return res->failed;
}

int gb_bench_param_relay(gb_bench_net *b)
{
    size_t bytes = b->quick ? (1u << 20) : (8u << 20);
    int versions = b->quick ? 3 : 20;
    phase_result direct, relay;
    int rc = run_phase(b, 0, bytes, versions, &direct);
    rc |= run_phase(b, NRELAYS, bytes, versions, &relay);
    if (b->json)
        printf("{\"bench\": \"streams\", \"case\": \"param_relay\", \"transport\": \"%s\", "
               "\"bytes\": %zu, \"subscribers\": %d, \"relays\": %d, \"versions\": %d, "
               "\"direct\": {\"service_bytes_per_version\": %.0f, \"seconds_to_all_median\": "
               "%.4f, \"seconds_to_all_max\": %.4f, \"versions_per_s\": %.2f}, "
               "\"relay\": {\"service_bytes_per_version\": %.0f, \"seconds_to_all_median\": "
               "%.4f, \"seconds_to_all_max\": %.4f, \"versions_per_s\": %.2f, "
               "\"relay_bytes_per_version\": %.0f}, \"ok\": %s}\n",
               b->tcp ? "tcp" : "ipc", bytes, NSUBS, NRELAYS, versions,
               direct.bytes_per_version, direct.median_s, direct.max_s, direct.versions_per_s,
               relay.bytes_per_version, relay.median_s, relay.max_s, relay.versions_per_s,
               (double)relay.relay_sent / versions, rc ? "false" : "true");
    else
        printf("param_relay  %.0f MB x %d versions to %d subscribers\n"
               "  direct      service sent %7.1f MB/version (%5.1f x the blob)  all have it in "
               "%.3f s (median, max %.3f)  %.2f versions/s\n"
               "  %d relays    service sent %7.1f MB/version (%5.1f x the blob)  all have it in "
               "%.3f s (median, max %.3f)  %.2f versions/s\n",
               (double)bytes / 1e6, versions, NSUBS, direct.bytes_per_version / 1e6,
               direct.bytes_per_version / (double)bytes, direct.median_s, direct.max_s,
               direct.versions_per_s, NRELAYS, relay.bytes_per_version / 1e6,
               relay.bytes_per_version / (double)bytes, relay.median_s, relay.max_s,
               relay.versions_per_s);
    fflush(stdout);
    return rc;
}
