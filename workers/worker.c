/* workers/worker.c: what the worker roles share (see worker.h). */
#include "workers/worker.h"

#include "envs/host.h"
#include "runtime/endpoint.h"
#include "runtime/rng.h"
#include "runtime/wire.h"
#include "workers/learning.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    double beat = w->cfg->launch.heartbeat_timeout_s / 5;
    return w->cfg->experiment.metrics_interval_s < beat ? w->cfg->experiment.metrics_interval_s
                                                         : beat;
}

int gb_worker_endpoint(const gb_worker *w, const char *name, char *out, size_t cap,
                       gb_error *err)
{
    char full[128];
    snprintf(full, sizeof full, "%s-%d-%s", gb_role_name(w->role), w->index, name);
    return gb_endpoint_make(out, cap, w->cfg->streams.transport, w->run_dir,
                            w->cfg->streams.interface, full, err);
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
        snprintf(pub, cap, "params/0/pub");
        snprintf(fetch, cap, "params/0/fetch");
        return 0;
    }
    char host[64];
    int rc = gb_worker_host(host, sizeof host, err);
    if (rc)
        return rc;
    snprintf(pub, cap, "relay/%s/pub", host);
    snprintf(fetch, cap, "relay/%s/fetch", host);
    return 0;
}

int gb_worker_env_space(const gb_config *cfg, gb_env_spec *spec, gb_torch_space *space,
                        gb_error *err)
{
    gb_env_source src;
    int rc = gb_env_source_open(&src, cfg->env.name, cfg->env.plugin, err);
    if (rc)
        return rc;
    gb_env_args_store args;
    gb_env_args_from_config(&args, &cfg->env.args);
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
