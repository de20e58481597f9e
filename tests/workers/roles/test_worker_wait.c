/* tests/workers/roles/test_worker_wait.c: a worker's waits for its peers at start
 * (gb_worker_wait, gb_worker_wait_ms, gb_worker_lookup in workers/roles/worker.h), against a
 * real registry and a real metrics collector over ipc://. While it waits the worker keeps
 * reporting (the launcher's heartbeat: a restarted policy worker waiting for a restarting
 * parameter service is not "hung"), it finds a name registered late, it fails with its own
 * message naming what it waited for and the setting once streams.registry_timeout_ms (or the
 * length a caller gives) has passed, and it gives up at once when asked to stop (GB_EINTR: an
 * interrupted wait, which a requested stop does not count as a failure). */
#include "test.h"

#include "runtime/base/clock.h"
#include "runtime/run/metrics.h"
#include "runtime/streams/wire.h"
#include "tests/runtime/streams/registry_thread.h"
#include "tests/workers/config_text.h"
#include "workers/roles/worker.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

static gb_config cfg;
static char reg_ep[256];
static void *zctx;

/* Registers params/0/pub a while after the worker starts looking for it, as a restarting
 * parameter service does. */
static void *late_peer(void *arg)
{
    (void)arg;
    gb_error err = {0};
    gb_registry_client_opts co = {reg_ep, 2000, 100, 2000, GB_ROLE_PARAMS, 0};
    gb_registry_client *c = NULL;
    gb_sleep_ms(1200);
    if (gb_registry_client_open(&c, zctx, &co, &err) == 0) {
        gb_registry_register(c, "params/0/pub", "ipc:///run/x/params-0-pub", &err);
        gb_sleep_ms(3000); /* keeps the name until the lookup found it */
        gb_registry_client_close(c);
    }
    return NULL;
}

/* Reports the collector has taken from policy-0 so far (it polls everything queued). */
static int reports_in(gb_metrics_collector *mc)
{
    static int seen;
    gb_error e = {0};
    int n;
    while ((n = gb_metrics_collector_poll(mc, 0, &e)) > 0)
        seen += n;
    return seen;
}

static int refuses(void *arg, int ms, gb_error *err)
{
    (void)arg;
    (void)ms;
    return gb_error_set(err, GB_EPROTO, "refused");
}

static int try_lookup_fetch(void *arg, int ms, gb_error *err)
{
    gb_worker *w = arg;
    char ep[GB_REGISTRY_ENDPOINT_MAX];
    return gb_registry_lookup(w->registry, "params/0/fetch", ep, sizeof ep, ms, err);
}

static void test_waits(void)
{
    CHECK(config_text(&cfg, "experiment: {name: t}\nenv: {name: CartPole-v1}\n"
                            "launch: {heartbeat_timeout_s: 1}\n"
                            "streams: {registry_timeout_ms: 2500}\n"
                            "trainer: {algorithm: {name: ppo}}\n") == 0);
    char dir[] = "/tmp/gb_worker_wait_XXXXXX", mep[256];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(reg_ep, sizeof reg_ep, "ipc://%s/registry", dir);
    snprintf(mep, sizeof mep, "ipc://%s/metrics", dir);
    zctx = zmq_ctx_new();
    gb_error err = {0};
    gb_registry_server_opts so = {.endpoint = reg_ep, .max_ttl_ms = 10000};
    reg_thread rt = {0};
    atomic_init(&rt.stop, 0);
    CHECK_OK(gb_registry_server_open(&rt.s, zctx, &so, &err));
    pthread_t reg_th, peer_th;
    pthread_create(&reg_th, NULL, reg_run, &rt);
    gb_metrics_collector *mc = NULL;
    CHECK_OK(gb_metrics_collector_open(&mc, zctx, mep, &err));
    atomic_int stop = 0;
    gb_worker w = {.cfg = &cfg, .role = GB_ROLE_POLICY, .index = 0, .zctx = zctx, .stop = &stop};
    gb_registry_client_opts co = {reg_ep, 2000, 100, 2000, GB_ROLE_POLICY, 0};
    CHECK_OK(gb_registry_client_open(&w.registry, zctx, &co, &err));
    CHECK_OK(gb_metrics_sender_open(&w.metrics, zctx, mep, GB_ROLE_POLICY, 0, &err));

    /* a name registered 1.2 s later: found, with reports all along (at most 0.2 s apart) */
    pthread_create(&peer_th, NULL, late_peer, NULL);
    char ep[GB_REGISTRY_ENDPOINT_MAX] = "";
    double t0 = gb_now_s();
    CHECK_OK(gb_worker_lookup(&w, "params/0/pub", ep, sizeof ep, &err));
    double took = gb_now_s() - t0;
    CHECK(strcmp(ep, "ipc:///run/x/params-0-pub") == 0);
    CHECK(took > 1.0 && took < 2.5);
    TEST_WAIT_UNTIL(reports_in(mc) >= 5, 2000);
    CHECK_MSG(reports_in(mc) >= 5, "%d reports while waiting %.2f s", reports_in(mc), took);

    /* never registered: its own error after the registry timeout, naming name and setting */
    int before = reports_in(mc);
    t0 = gb_now_s();
    int rc = gb_worker_lookup(&w, "params/0/fetch", ep, sizeof ep, &err);
    took = gb_now_s() - t0;
    CHECK_EQ_INT(rc, GB_ETIMEOUT);
    CHECK(took >= 2.4 && took < 4.0);
    CHECK_MSG(strstr(err.msg, "params/0/fetch") && strstr(err.msg, "registry_timeout_ms"),
              "%s", err.msg);
    TEST_WAIT_UNTIL(reports_in(mc) - before >= 10, 2000);
    CHECK_MSG(reports_in(mc) - before >= 10, "%d reports in %.2f s", reports_in(mc) - before,
              took);

    /* a wait whose length another setting decides (the actor's for trainers that join from
     * other hosts) ends then, naming that setting */
    t0 = gb_now_s();
    rc = gb_worker_wait_ms(&w, "trainer endpoints", 1200, "trainer.rendezvous.timeout_s",
                           try_lookup_fetch, &w, &err);
    took = gb_now_s() - t0;
    CHECK_EQ_INT(rc, GB_ETIMEOUT);
    CHECK(took >= 1.15 && took < 2.4);
    CHECK_MSG(strstr(err.msg, "trainer endpoints") && strstr(err.msg, "1200 ms") &&
              strstr(err.msg, "trainer.rendezvous.timeout_s"), "%s", err.msg);

    /* an error other than a timeout is the caller's at once; a stop ends the wait */
    CHECK_EQ_INT(gb_worker_wait(&w, "x", refuses, NULL, &err), GB_EPROTO);
    atomic_store(&stop, 1);
    t0 = gb_now_s();
    CHECK_EQ_INT(gb_worker_lookup(&w, "params/0/fetch", ep, sizeof ep, &err), GB_EINTR);
    CHECK(gb_now_s() - t0 < 1.0);

    pthread_join(peer_th, NULL);
    gb_metrics_sender_close(w.metrics);
    gb_registry_client_close(w.registry);
    gb_metrics_collector_close(mc);
    atomic_store(&rt.stop, 1);
    pthread_join(reg_th, NULL);
    gb_registry_server_close(rt.s);
    zmq_ctx_term(zctx);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

int main(void)
{
    TEST_RUN(test_waits);
    return test_main_result();
}
