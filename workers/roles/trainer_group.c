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
 *
 * A group that fails (a trainer died or hung: a collective errs or times out) forms again, as
 * torchrun's elastic agent re-forms its workers: the launcher restarts the trainer that failed
 * and moves the group's generation on (run control, runtime/streams/runctl.h); the survivors
 * close the failed group, wait for that generation, and meet the restarted trainer in a new
 * rendezvous of that generation (a store file or key prefix of its own). The restarted trainer
 * re-attaches its replay shard and ledger from shared memory (trainer.c); everyone then takes
 * the state of the trainer that trained furthest (gb_learning_join_group). Trainer 0 serves a
 * registry store again on the port it had, where the others' lookups still point. A trainer
 * that dies as the group forms (in its first collective, gb_learning_join_group) is met the
 * same way. The group's calls and rendezvous give up as soon as the generation moves past
 * theirs (generation_gone): the launcher knows a trainer died before Gloo always does.
 * defines: gb_trainer_join_group, gb_trainer_regroup, gb_trainer_recover_group */
#include "workers/roles/trainer_internal.h"

#include "runtime/base/clock.h"
#include "runtime/base/log.h"
#include "runtime/base/rng.h"
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
    trainer *t;
    const char *host;
} store_place;

/* gb_group_opts.store_ready for trainer 0 of a registry store: publishes where it listens. */
static int publish_store(void *arg, int port, gb_error *err)
{
    const store_place *p = arg;
    char ep[GB_REGISTRY_ENDPOINT_MAX];
    snprintf(ep, sizeof ep, "tcp://%s:%d", p->host, port);
    p->t->store_port = port;
    int rc = gb_registry_register(p->t->w->registry, RENDEZVOUS_NAME, ep, err);
    if (rc == 0)
        GB_INFO("trainer: the trainers' store listens on %s (registry: %s)", ep, RENDEZVOUS_NAME);
    return rc ? gb_error_prefix(err, "trainer: registering the trainers' store") : 0;
}

/* "tcp://HOST:PORT" into host (cap bytes) and *port. Returns 0 or GB_EPROTO. */
static int parse_store(const char *ep, char *host, size_t cap, int *port, gb_error *err)
{
    if (gb_endpoint_tcp_split(ep, host, cap, port) != 0 || *port < 1)
        return gb_error_set(err, GB_EPROTO, "trainer: '%s' under %s is no tcp://HOST:PORT", ep,
                            RENDEZVOUS_NAME);
    return 0;
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
    return parse_store(ep, host, cap, port, err);
}

/* Trainer 0's registry store port: trainer.rendezvous.port when set, else the one this process
 * served before (a re-formed group), else a restarted trainer 0's predecessor's (where the
 * others' lookups point), else 0: any free one. */
static int store_port(trainer *t)
{
    gb_worker *w = t->w;
    char ep[GB_REGISTRY_ENDPOINT_MAX], host[256];
    int port = 0;
    gb_error e = {0};
    if (w->cfg->trainer.rendezvous.port > 0)
        return (int)w->cfg->trainer.rendezvous.port;
    if (t->store_port > 0)
        return t->store_port;
    if (w->incarnation > 0 &&
        gb_registry_lookup_last(w->registry, RENDEZVOUS_NAME, ep, sizeof ep, &e) == 0 &&
        parse_store(ep, host, sizeof host, &port, &e) == 0)
        return port;
    return 0;
}

/* The group's generation to meet in, as run control says it (waiting for its first answer, 10 s
 * at most): 0 at a run's start; a restarted trainer's, the one the launcher moved to as it
 * restarted it; and a first trainer's that starts late (stopped, or slow to load) may find it
 * moved on already, another trainer having failed and been restarted meanwhile. */
static int64_t generation_now(const gb_worker *w)
{
    int64_t g = gb_runctl_client_trainer_group(w->runctl);
    for (double end = gb_now_s() + 10.0; g < 0 && gb_now_s() < end; gb_sleep_ms(5))
        g = gb_runctl_client_trainer_group(w->runctl);
    return g < 0 ? 0 : g;
}

/* The launcher moved the group's generation past this trainer's: a trainer failed and is
 * started again, so a collective or rendezvous of this generation waits for nobody. */
static int generation_gone(const trainer *t)
{
    return gb_runctl_client_trainer_group(t->w->runctl) > t->generation;
}

/* gb_group_opts.abandon, asked while a collective or the rendezvous waits (bridge.h): beats
 * (while this trainer waits for the others it keeps reporting its last values: the watchdog is
 * to take the trainer that hangs, not the ones that wait for it), and gives the wait up at once
 * when the generation is gone (Gloo may not notice a dead peer: workers/torch/group.cpp). */
static int while_waiting(void *arg)
{
    trainer *t = arg;
    gb_worker_beat(t->w);
    return generation_gone(t);
}

/* Joins the group of the generation run control says now. */
static int join_once(trainer *t, gb_error *err)
{
    gb_worker *w = t->w;
    const gb_config_trainer *tc = &w->cfg->trainer;
    char self[256], store_host[256], dir[2048], store[2200], prefix[64];
    int rc = own_address(w, self, sizeof self, err);
    if (rc)
        return gb_error_prefix(err, "trainer: the address of this trainer's collectives");
    t->generation = generation_now(w);
    snprintf(prefix, sizeof prefix, "trainers/s%d/g%lld/", w->segment, (long long)t->generation);
    gb_group_opts go = {
        .rank = w->index,
        .size = (int)tc->count,
        .tcp_host = tc->rendezvous.host,
        .tcp_port = (int)tc->rendezvous.port,
        .device_host = self,
        .prefix = prefix,
        .timeout_s = tc->rendezvous.timeout_s,
        /* trainer.backend: nccl, or auto on cuda where this libtorch has it */
        .nccl = tc->backend == GB_BACKEND_NCCL ||
                (tc->backend == GB_BACKEND_AUTO && tc->device == GB_DEVICE_CUDA &&
                 gb_group_has_nccl()),
        .abandon = while_waiting,
        .abandon_arg = t,
    };
    store_place place = {.t = t, .host = self};
    if (tc->rendezvous.store == GB_STORE_FILE) {
        /* a file per run segment and generation: a failed group's stays behind, unused */
        snprintf(dir, sizeof dir, "%s/rendezvous", w->run_dir);
        mkdir(dir, 0755);
        snprintf(store, sizeof store, "%s/trainers-s%d-g%lld", dir, w->segment,
                 (long long)t->generation);
        go.store_path = store;
    } else if (tc->rendezvous.store == GB_STORE_REGISTRY && w->index == 0) {
        go.tcp_host = self;
        go.tcp_port = store_port(t);
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
                "%s selection, generation %lld, gradients over %s)", w->index,
                (long long)tc->count,
                gb_config_enum_name("trainer.rendezvous.store", tc->rendezvous.store),
                go.store_path ? go.store_path : go.tcp_host, self,
                gb_config_enum_name("trainer.replay.selection", tc->replay.selection),
                (long long)t->generation, go.nccl ? "nccl" : "gloo");
    return rc;
}

int gb_trainer_join_group(trainer *t, gb_error *err)
{
    if (t->w->cfg->trainer.count == 1)
        return 0;
    for (;;) {
        int rc = join_once(t, err);
        /* another trainer failed while this one waited for the others: the generation moved
         * on; meet in the new one */
        if (rc == 0 || !generation_gone(t) || gb_worker_stopping(t->w))
            return rc;
        GB_INFO("trainer: generation %lld of the trainers' group was given up before it formed "
                "(%s); joining the next", (long long)t->generation, err->msg);
        *err = (gb_error){0};
    }
}

uint64_t gb_trainer_shared_seed(const trainer *t)
{
    return gb_rng_seed_of((uint64_t)t->w->cfg->experiment.seed, "trainers",
                          (uint64_t)t->generation, "global-selection");
}

int gb_trainer_regroup(trainer *t, gb_error *err)
{
    gb_worker *w = t->w;
    const double t0 = gb_now_s();
    const double wait_s = w->cfg->launch.heartbeat_timeout_s + w->cfg->trainer.rendezvous.timeout_s;
    for (;;) {
        GB_WARN("trainer: the trainers' group (generation %lld) failed: %s; waiting for the "
                "launcher to restart the trainer that failed", (long long)t->generation,
                err->msg);
        gb_group_close(t->group);
        t->group = NULL;
        /* the launcher moves the generation on as it restarts the trainer that failed */
        for (const double since = gb_now_s(); !generation_gone(t); gb_sleep_ms(5)) {
            gb_worker_beat(w);
            if (gb_worker_stopping(w) || gb_worker_run_ending(w) || gb_now_s() - since > wait_s)
                return gb_error_set(err, GB_ECLOSED, "trainer: the trainers' group failed and "
                                    "did not form again (%s within %.0f s)",
                                    gb_worker_run_ending(w) ? "the run ended"
                                                            : "no trainer was restarted",
                                    wait_s);
        }
        *err = (gb_error){0};
        int rc = gb_trainer_join_group(t, err);
        if (rc)
            return gb_error_prefix(err, "trainer: forming the trainers' group again");
        rc = gb_learning_join_group(t->learning, t->group, gb_trainer_shared_seed(t), err);
        if (rc == 0)
            break;
        /* a trainer failed again as the group formed: wait for its restart in turn */
        if (!gb_group_failed(t->group) || gb_worker_stopping(w))
            return gb_error_prefix(err, "trainer: taking the state after the group formed "
                                   "again");
    }
    GB_INFO("trainer: the trainers' group formed again as generation %lld %.2f s after it "
            "failed; training goes on from step %lld", (long long)t->generation,
            gb_now_s() - t0, (long long)gb_learning_train_steps(t->learning));
    return 0;
}

int gb_trainer_recover_group(trainer *t, int rc, gb_error *err)
{
    if (rc >= 0 || !gb_group_failed(t->group) || gb_worker_stopping(t->w) ||
        gb_worker_run_ending(t->w))
        return rc;
    return gb_trainer_regroup(t, err);
}
