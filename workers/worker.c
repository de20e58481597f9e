/* workers/worker.c: what the worker roles share (see worker.h). */
#include "workers/worker.h"

#include "envs/host.h"
#include "runtime/endpoint.h"
#include "runtime/wire.h"
#include "workers/torch/bridge.h"

#include <stdio.h>
#include <string.h>

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

int gb_worker_endpoint(const gb_worker *w, const char *name, char *out, size_t cap,
                       gb_error *err)
{
    char full[128];
    snprintf(full, sizeof full, "%s-%d-%s", gb_role_name(w->role), w->index, name);
    return gb_endpoint_make(out, cap, w->cfg->streams.transport, w->run_dir,
                            w->cfg->streams.interface, full, err);
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
        src.iface->destroy(env);
        memset(space, 0, sizeof *space);
        space->obs_dtype = gb_env_dtype_to_gb(spec->obs.dtype);
        space->obs_ndim = spec->obs.ndim;
        for (int i = 0; i < spec->obs.ndim; i++)
            space->obs_shape[i] = spec->obs.shape[i];
        space->discrete = spec->action.kind == GB_ENV_SPACE_DISCRETE;
        if (space->discrete) {
            space->n_actions = spec->action.n;
        } else if (spec->action.n > GB_TORCH_MAX_ACTION_DIM) {
            rc = gb_error_set(err, GB_EINVAL, "%s: %d action dimensions (at most %d)",
                              cfg->env.name, spec->action.n, GB_TORCH_MAX_ACTION_DIM);
        } else {
            space->action_dim = spec->action.n;
            for (int i = 0; i < spec->action.n; i++) {
                space->action_low[i] = spec->action.low[i];
                space->action_high[i] = spec->action.high[i];
            }
        }
        /* The spec's pointers (bounds) belonged to the destroyed copy: drop them. */
        spec->obs.low = spec->obs.high = NULL;
        spec->action.low = spec->action.high = NULL;
    }
    gb_env_source_close(&src);
    return rc;
}
