/* launch/model_check.c: a TorchScript model run once on the environment's observations before
 * anything of a run starts (see model_check.h). */
#include "launch/model_check.h"

#include "envs/host.h"
#include "workers/roles/learning.h" /* gb_learning_space, gb_torch_space */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define KEY "policy.model.torchscript"
#define MAX_COPIES 8

/* A few copies, so that the N rows differ from the actions' and the state's sizes: a module
 * that mixes up its dimensions does not pass by chance. */
static int copies_for(const gb_torch_space *space, int agents, int64_t state_size)
{
    int64_t k = space->discrete ? space->n_actions : space->action_dim;
    int copies = 3;
    while (copies < MAX_COPIES && (copies * agents == k || copies * agents == state_size))
        copies++;
    return copies;
}

/* The observations of a few copies of the environment, just reset (agents rows each), into
 * *obs (malloc'd, owned by the caller; *rows of them) and the learner's space into *space.
 * Returns 0 or the environment's error (GB_EINVAL, GB_ENOTFOUND, GB_EUNSUPPORTED, GB_ENOMEM). */
static int reset_observations(const gb_config *cfg, gb_torch_space *space, void **obs,
                              int64_t *rows, gb_error *err)
{
    gb_env_source src;
    void *envs[MAX_COPIES] = {0};
    uint8_t *buf = NULL, *acting = NULL;
    gb_env_args_store args;
    int rc = gb_env_source_open_config(&src, &cfg->env, 0, &args, err);
    if (rc)
        return rc;
    gb_env_spec spec;
    size_t per = 0;
    int copies = 1;
    for (int i = 0; i < copies; i++) {
        gb_env_spec s;
        uint64_t seed = (uint64_t)cfg->experiment.seed + (uint64_t)i;
        if ((rc = gb_env_create(src.iface, &args.args, seed, &envs[i], &s, err)) != 0)
            goto err;
        if (i == 0) {
            spec = s;
            if ((rc = gb_learning_space(&spec, space, err)) != 0)
                goto err;
            copies = copies_for(space, spec.agents, gb_config_state_size(cfg));
            per = (size_t)spec.agents * gb_env_obs_bytes(&spec);
            buf = malloc(per * (size_t)copies);
            acting = calloc((size_t)spec.agents, 1); /* reset writes it (turn-based) */
            if (!buf || !acting) {
                rc = gb_error_set(err, GB_ENOMEM, "model check: out of memory");
                goto err;
            }
        }
        gb_env_buffers b = {.obs = buf + per * (size_t)i, .acting = acting};
        if (src.iface->reset(envs[i], &b) != 0) {
            rc = gb_error_set(err, GB_EINVAL, "%s: reset failed", cfg->env.name);
            goto err;
        }
    }
    *rows = (int64_t)copies * spec.agents;
    *obs = buf;
    buf = NULL;
err:
    for (int i = 0; i < MAX_COPIES; i++)
        if (envs[i])
            src.iface->destroy(envs[i]);
    gb_env_source_close(&src);
    free(buf);
    free(acting);
    return rc;
}

/* Loads the model on the cpu and acts once on rows observations (zero state when it carries
 * state). Returns 0 or the bridge's code with its message in err. */
static int act_once(const gb_config *cfg, const gb_torch_space *space, const void *obs,
                    int64_t rows, gb_error *err)
{
    static gb_config probe; /* large: off the stack (the launcher checks one config at a time) */
    probe = *cfg;
    probe.policy.device = GB_DEVICE_CPU; /* shapes do not depend on where it runs */
    probe.policy.precision = GB_PRECISION_FP32;
    int64_t S = gb_config_state_size(cfg);
    int64_t width = space->discrete ? 1 : space->action_dim;
    float *state = calloc((size_t)(rows * (S > 0 ? 2 * S : 1)), sizeof(float));
    float *logp = calloc((size_t)rows, sizeof(float)), *value = calloc((size_t)rows, 4);
    int64_t *action = calloc((size_t)(rows * width), sizeof(int64_t));
    gb_torch_model *m = NULL;
    int rc = 0;
    if (!state || !logp || !value || !action) {
        rc = gb_error_set(err, GB_ENOMEM, "model check: out of memory");
        goto err;
    }
    if ((rc = gb_torch_set_threads(1, err)) != 0 ||
        (rc = gb_torch_model_create(&probe, space, (uint64_t)cfg->experiment.seed, &m, err)))
        goto err;
    gb_torch_act_out out = {.action = action, .logp = logp, .value = value};
    rc = gb_torch_model_act_state(m, obs, rows, 0, 0.0, NULL, S > 0 ? state : NULL,
                                  S > 0 ? state + rows * S : NULL, &out, err);
err:
    gb_torch_model_destroy(m);
    free(state);
    free(logp);
    free(value);
    free(action);
    return rc;
}

int gb_model_check(const gb_config *cfg, const gb_config_marks *marks, gb_error *err)
{
    if (cfg->policy.model.type != GB_MODEL_TORCHSCRIPT)
        return 0;
    gb_error e = {0};
    if (gb_torch_load(&e) != 0)
        return gb_error_set(err, GB_EIO, "checking %s needs libtorch: %s", KEY, e.msg);
    gb_torch_space space;
    void *obs = NULL;
    int64_t rows = 0;
    int rc = reset_observations(cfg, &space, &obs, &rows, &e);
    if (rc == 0)
        rc = act_once(cfg, &space, obs, rows, &e);
    free(obs);
    if (rc == GB_ENOMEM)
        return gb_error_set(err, rc, "%s", e.msg);
    if (rc)
        return gb_config_fail_key(marks, KEY, err, "%s", e.msg);
    return 0;
}
