/* workers/roles/worker.c: what the worker roles share (see worker.h). */
#include "workers/roles/worker.h"

#include "envs/host.h"
#include "runtime/base/clock.h"
#include "runtime/run/contract.h"
#include "runtime/streams/endpoint.h"
#include "runtime/base/log.h"
#include "runtime/base/rng.h"
#include "runtime/streams/wire.h"
#include "workers/roles/learning.h"

#include <arpa/inet.h>
#include <stdatomic.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

gb_run_state gb_worker_run_state(const gb_worker *w)
{
    return w->runctl ? gb_runctl_client_state(w->runctl) : GB_RUN_RUNNING;
}

int gb_worker_run_ending(const gb_worker *w) { return gb_worker_run_state(w) >= GB_RUN_ENDING; }

void gb_worker_confirm_ending(gb_worker *w)
{
    if (w->runctl)
        gb_runctl_client_confirm(w->runctl, GB_RUN_ENDING);
}

int gb_worker_wait_release(const gb_worker *w, double max_s)
{
    if (!w->runctl)
        return 1;
    gb_runctl_client_confirm(w->runctl, GB_RUN_FLUSHING);
    return gb_runctl_client_wait(w->runctl, GB_RUN_RELEASED, max_s);
}

uint64_t gb_worker_seed(const gb_worker *w, const char *what)
{
    uint64_t s = gb_rng_seed_of((uint64_t)w->cfg->experiment.seed, gb_role_name(w->role),
                                (uint64_t)w->index, what);
    if (w->incarnation || w->segment)
        s = gb_rng_seed_of(s, "process", ((uint64_t)w->segment << 32) | (uint32_t)w->incarnation,
                           what);
    return s;
}

double gb_worker_report_interval(const gb_worker *w)
{
    /* denser in the process's first seconds, as the launcher's rows (a short run's curve) */
    static _Atomic uint64_t first_ns;
    uint64_t none = 0, now = gb_now_ns();
    atomic_compare_exchange_strong(&first_ns, &none, now);
    double age = (double)(now - atomic_load(&first_ns)) * 1e-9;
    double every = gb_contract_row_interval(w->cfg, age);
    double beat = w->cfg->launch.heartbeat_timeout_s / 5;
    return every < beat ? every : beat;
}

void gb_worker_beat(gb_worker *w)
{
    double now = gb_now_s();
    if (w->metrics && now >= w->next_beat) {
        gb_metrics_send(w->metrics, NULL);
        w->next_beat = now + gb_worker_report_interval(w);
    }
}

int gb_worker_wait_ms(gb_worker *w, const char *what, long long timeout_ms, const char *setting,
                      int (*attempt)(void *arg, int ms, gb_error *err), void *arg, gb_error *err)
{
    const double deadline = gb_now_s() + (double)timeout_ms / 1000.0;
    for (;;) {
        gb_worker_beat(w);
        double now = gb_now_s(), until = w->next_beat < deadline ? w->next_beat : deadline;
        int ms = until > now ? (int)((until - now) * 1000.0) + 1 : 1;
        int rc = attempt(arg, ms, err);
        if (rc != GB_ETIMEOUT)
            return rc;
        if (gb_worker_stopping(w)) /* a stop's interrupted wait, as zmq_poll's EINTR */
            return gb_error_set(err, GB_EINTR, "stopped while waiting for %s", what);
        if (gb_now_s() >= deadline)
            return gb_error_set(err, GB_ETIMEOUT, "%s: not there within %lld ms (%s)", what,
                                timeout_ms, setting);
    }
}

int gb_worker_wait(gb_worker *w, const char *what,
                   int (*attempt)(void *arg, int ms, gb_error *err), void *arg, gb_error *err)
{
    return gb_worker_wait_ms(w, what, (long long)w->cfg->streams.registry_timeout_ms,
                             "streams.registry_timeout_ms", attempt, arg, err);
}

typedef struct lookup_args {
    gb_worker *w;
    const char *name;
    char *ep;
    size_t cap;
} lookup_args;

static int try_lookup(void *arg, int ms, gb_error *err)
{
    lookup_args *a = arg;
    return gb_registry_lookup(a->w->registry, a->name, a->ep, a->cap, ms, err);
}

int gb_worker_lookup(gb_worker *w, const char *name, char *ep, size_t cap, gb_error *err)
{
    char what[GB_REGISTRY_NAME_MAX + 32];
    snprintf(what, sizeof what, "registry name '%s'", name);
    lookup_args a = {w, name, ep, cap};
    return gb_worker_wait(w, what, try_lookup, &a, err);
}

/* Whether host:port can be bound now (SO_REUSEADDR, as libzmq binds): a port another socket
 * took since is not offered back. host "*" is every address. */
static int port_free(const char *host, int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (strcmp(host, "*") == 0)
        a.sin_addr.s_addr = htonl(INADDR_ANY);
    else if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
        return 0;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0)
        return 0;
    int ok = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
             bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

int gb_worker_sockets_fit(const gb_config *cfg, const char *run_dir, int relays, gb_error *err)
{
    if (cfg->streams.transport != GB_TRANSPORT_IPC)
        return 0;
    /* each role's longest socket name, at its highest index */
    const struct {
        int role;
        const char *name;
        int64_t count;
    } sockets[] = {{GB_ROLE_TRAINER, GB_SOCKET_SAMPLES, cfg->trainer.count},
                   {GB_ROLE_POLICY, GB_SOCKET_INFERENCE, cfg->policy.count},
                   {GB_ROLE_PARAMS, GB_SOCKET_PARAMS_FETCH, 1},
                   {GB_ROLE_RELAY, GB_SOCKET_PARAMS_FETCH, relays}};
    for (size_t i = 0; i < sizeof sockets / sizeof sockets[0]; i++) {
        char full[128], ep[GB_REGISTRY_ENDPOINT_MAX];
        if (sockets[i].count <= 0)
            continue;
        snprintf(full, sizeof full, "%s-%lld-%s", gb_role_name(sockets[i].role),
                 (long long)sockets[i].count - 1, sockets[i].name);
        int rc = gb_endpoint_make(ep, sizeof ep, GB_TRANSPORT_IPC, run_dir, NULL, full, err);
        if (rc)
            return rc;
    }
    return 0;
}

int gb_worker_endpoint(const gb_worker *w, const char *name, const char *regname, char *out,
                       size_t cap, gb_error *err)
{
    char full[128];
    snprintf(full, sizeof full, "%s-%d-%s", gb_role_name(w->role), w->index, name);
    int rc = gb_endpoint_make(out, cap, w->cfg->streams.transport, w->run_dir,
                              w->cfg->streams.interface, full, err);
    if (rc || w->cfg->streams.transport != GB_TRANSPORT_TCP || !regname || !w->registry)
        return rc;
    /* tcp ports are picked at bind, so a restarted worker would get a new one, which its
     * peers' sockets (connected to the old one, reconnecting there) would never find: take the
     * port this name last had when it was on this address and is free. */
    char last[GB_REGISTRY_ENDPOINT_MAX], mine[128], host[64]; /* host: an IPv4 address or * */
    gb_error e = {0};
    if (gb_registry_lookup_last(w->registry, regname, last, sizeof last, &e) != 0)
        return 0;
    const char *colon = strrchr(last, ':');
    char *end = NULL;
    long port = colon ? strtol(colon + 1, &end, 10) : 0;
    size_t hl = strlen(out) - strlen("tcp://:*");
    if (!colon || !end || *end || port <= 0 || port > 65535 || hl >= sizeof host)
        return 0;
    memcpy(host, out + strlen("tcp://"), hl);
    host[hl] = '\0';
    char reachable[GB_REGISTRY_ENDPOINT_MAX];
    snprintf(mine, sizeof mine, "tcp://%s:%ld", strcmp(host, "*") ? host : "0.0.0.0", port);
    /* as the registry has it (a wildcard address as the host's name) */
    if (gb_endpoint_connectable(mine, reachable, sizeof reachable, &e) != 0)
        return 0;
    snprintf(mine, sizeof mine, "tcp://%s:%ld", host, port);
    if (strcmp(reachable, last) != 0)
        return 0; /* it was on another host or address: nobody here waits for that port */
    if (!port_free(host, (int)port)) {
        GB_WARN("%s: its last port %ld is taken: binding a new one (peers connected to %s "
                "will not find it)", regname, port, last);
        return 0;
    }
    GB_INFO("%s: binding %s again (where the last process of this worker was)", regname, mine);
    snprintf(out, cap, "%s", mine);
    return 0;
}

int gb_worker_host(char *out, size_t cap, gb_error *err)
{
    const char *env = getenv("GEARBOX_HOST");
    char buf[256];
    if (!env || !*env) {
        if (gethostname(buf, sizeof buf) != 0)
            return gb_error_errno(err, "gethostname");
        buf[sizeof buf - 1] = '\0';
        env = buf;
    }
    if (strlen(env) >= cap || strchr(env, '/'))
        return gb_error_set(err, GB_EINVAL, "host name '%s' (GEARBOX_HOST or gethostname): "
                            "longer than %zu bytes or has a '/'", env, cap - 1);
    memcpy(out, env, strlen(env) + 1);
    return 0;
}

int gb_worker_params_names(const gb_worker *w, char *pub, char *fetch, size_t cap,
                           gb_error *err)
{
    if (w->cfg->parameters.relay == GB_RELAY_NONE) {
        snprintf(pub, cap, "params/0/%s", GB_SOCKET_PARAMS_PUB);
        snprintf(fetch, cap, "params/0/%s", GB_SOCKET_PARAMS_FETCH);
        return 0;
    }
    char host[64];
    int rc = gb_worker_host(host, sizeof host, err);
    if (rc)
        return rc;
    snprintf(pub, cap, "relay/%s/%s", host, GB_SOCKET_PARAMS_PUB);
    snprintf(fetch, cap, "relay/%s/%s", host, GB_SOCKET_PARAMS_FETCH);
    return 0;
}

int gb_worker_env_space(const gb_config *cfg, gb_env_spec *spec, gb_torch_space *space,
                        gb_error *err)
{
    gb_env_source src;
    gb_env_args_store args;
    int rc = gb_env_source_open_config(&src, &cfg->env, 0, &args, err);
    if (rc)
        return rc;
    void *env = NULL;
    rc = gb_env_create(src.iface, &args.args, (uint64_t)cfg->experiment.seed, &env, spec, err);
    if (rc == 0) {
        /* The spec's pointers (the bounds) belong to the copy: read them before destroying it. */
        rc = gb_learning_space(spec, space, err);
        if (rc)
            gb_error_prefix(err, "%s", cfg->env.name);
        src.iface->destroy(env);
        spec->obs.low = spec->obs.high = NULL;
        spec->action.low = spec->action.high = NULL;
    }
    gb_env_source_close(&src);
    return rc;
}
