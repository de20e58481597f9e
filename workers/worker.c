/* workers/worker.c: what the worker roles share (see worker.h). */
#include "workers/worker.h"

#include "envs/host.h"
#include "runtime/clock.h"
#include "runtime/wire.h"
#include "workers/learning.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

int gb_worker_run_ending(const gb_worker *w)
{
    char path[4096];
    if (!w->run_dir ||
        snprintf(path, sizeof path, "%s/%s", w->run_dir, GB_RUN_ENDING_FILE) >= (int)sizeof path)
        return 0;
    return access(path, F_OK) == 0;
}

int gb_worker_wait_release(const gb_worker *w, double max_s)
{
    for (double end = gb_now_s() + max_s; gb_now_s() < end; gb_sleep_ms(5))
        if (atomic_load(w->stop) >= 2)
            return 1;
    return atomic_load(w->stop) >= 2;
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
