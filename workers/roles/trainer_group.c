/* workers/roles/trainer_group.c: several trainers meet in the data-parallel group
 * (workers/torch/group.h), rank = index, through the store trainer.rendezvous names:
 *  - file: a FileStore in the run directory (one host, or a filesystem every node shares);
 *  - tcp: trainer 0's TCPStore at rendezvous.host:port;
 *  - registry: trainer 0's TCPStore on its own streams address (port rendezvous.port, 0 = any
 *    free one), registered as "trainer/0/rendezvous"; the others look it up in the run's
 *    registry, so trainers that join from other hosts (gearbox join --role trainer) need to
 *    know nothing but the registry.
 * Each trainer's collectives (Gloo) use its own address: over tcp the one streams.interface
 * gives this host (the one its other sockets publish), on one host rendezvous.host.
 * defines: gb_trainer_join_group */
#include "workers/roles/trainer_internal.h"

#include "runtime/base/log.h"
#include "runtime/streams/endpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RENDEZVOUS_NAME "trainer/0/rendezvous"

/* The address this trainer's peers reach it at: over tcp, streams.interface's address on this
 * host (gb_endpoint_make's "tcp://ADDR:*"; "*" is this host's name); else rendezvous.host.
 * Returns 0 or gb_endpoint_make's codes. */
static int own_address(const gb_worker *w, char *out, size_t cap, gb_error *err)
{
    const gb_config *cfg = w->cfg;
    if (cfg->streams.transport != GB_TRANSPORT_TCP) {
        snprintf(out, cap, "%s", cfg->trainer.rendezvous.host);
        return 0;
    }
    char ep[GB_REGISTRY_ENDPOINT_MAX];
    int rc = gb_endpoint_make(ep, sizeof ep, GB_TRANSPORT_TCP, w->run_dir,
                              cfg->streams.interface, "rendezvous", err);
    if (rc)
        return rc;
    const char *host = ep + strlen("tcp://"), *colon = strrchr(host, ':');
    size_t n = colon ? (size_t)(colon - host) : 0;
    if (n == 1 && host[0] == '*')
        return gethostname(out, cap) == 0 ? 0 : gb_error_errno(err, "gethostname");
    if (n == 0 || n >= cap)
        return gb_error_set(err, GB_EINVAL, "trainer: no address in '%s'", ep);
    memcpy(out, host, n);
    out[n] = '\0';
    return 0;
}

typedef struct store_place {
    gb_worker *w;
    const char *host;
} store_place;

/* gb_group_opts.store_ready for trainer 0 of a registry store: publishes where it listens. */
static int publish_store(void *arg, int port, gb_error *err)
{
    const store_place *p = arg;
    char ep[GB_REGISTRY_ENDPOINT_MAX];
    snprintf(ep, sizeof ep, "tcp://%s:%d", p->host, port);
    int rc = gb_registry_register(p->w->registry, RENDEZVOUS_NAME, ep, err);
    if (rc == 0)
        GB_INFO("trainer: the trainers' store listens on %s (registry: %s)", ep, RENDEZVOUS_NAME);
    return rc ? gb_error_prefix(err, "trainer: registering the trainers' store") : 0;
}

/* Trainers 1..: trainer 0's registry store, host and port from RENDEZVOUS_NAME (waiting up to
 * the rendezvous timeout for it to appear). Returns 0, GB_ETIMEOUT, GB_EPROTO. */
static int find_store(gb_worker *w, char *host, size_t cap, int *port, gb_error *err)
{
    char ep[GB_REGISTRY_ENDPOINT_MAX];
    int ms = (int)(w->cfg->trainer.rendezvous.timeout_s * 1000.0);
    int rc = gb_registry_lookup(w->registry, RENDEZVOUS_NAME, ep, sizeof ep, ms, err);
    if (rc)
        return gb_error_prefix(err, "trainer: trainer 0's store (is trainer 0 running?)");
    const char *h = strncmp(ep, "tcp://", 6) == 0 ? ep + 6 : NULL;
    const char *colon = h ? strrchr(h, ':') : NULL;
    char *end = NULL;
    long p = colon ? strtol(colon + 1, &end, 10) : 0;
    if (!colon || colon == h || (size_t)(colon - h) >= cap || *end || p < 1 || p > 65535)
        return gb_error_set(err, GB_EPROTO, "trainer: '%s' under %s is no tcp://HOST:PORT", ep,
                            RENDEZVOUS_NAME);
    memcpy(host, h, (size_t)(colon - h));
    host[colon - h] = '\0';
    *port = (int)p;
    return 0;
}

int gb_trainer_join_group(trainer *t, gb_error *err)
{
    gb_worker *w = t->w;
    const gb_config_trainer *tc = &w->cfg->trainer;
    if (tc->count == 1)
        return 0;
    char self[256], store_host[256], dir[2048], store[2200];
    int rc = own_address(w, self, sizeof self, err);
    if (rc)
        return gb_error_prefix(err, "trainer: the address of this trainer's collectives");
    gb_group_opts go = {
        .rank = w->index,
        .size = (int)tc->count,
        .tcp_host = tc->rendezvous.host,
        .tcp_port = (int)tc->rendezvous.port,
        .device_host = self,
        .prefix = "trainers",
        .timeout_s = tc->rendezvous.timeout_s,
    };
    store_place place = {.w = w, .host = self};
    if (tc->rendezvous.store == GB_STORE_FILE) {
        snprintf(dir, sizeof dir, "%s/rendezvous", w->run_dir);
        mkdir(dir, 0755);
        snprintf(store, sizeof store, "%s/trainers", dir);
        go.store_path = store;
    } else if (tc->rendezvous.store == GB_STORE_REGISTRY && w->index == 0) {
        go.tcp_host = self;
        go.store_ready = publish_store;
        go.store_ready_arg = &place;
    } else if (tc->rendezvous.store == GB_STORE_REGISTRY) {
        if ((rc = find_store(w, store_host, sizeof store_host, &go.tcp_port, err)))
            return rc;
        go.tcp_host = store_host;
    }
    rc = gb_group_open(&go, &t->group, err);
    if (rc == 0)
        GB_INFO("trainer: rank %d of %lld trainers (%s rendezvous at %s, collectives on %s, "
                "%s selection)", w->index, (long long)tc->count,
                gb_config_enum_name("trainer.rendezvous.store", tc->rendezvous.store),
                go.store_path ? go.store_path : go.tcp_host, self,
                gb_config_enum_name("trainer.replay.selection", tc->replay.selection));
    return rc;
}
