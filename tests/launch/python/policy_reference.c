/* tests/launch/python/policy_reference.c: what gearbox plays for given observations, for
 * test_policy.py to hold the Python package's policy (launch/python/gearbox/policy.py) against.
 * A policy file (workers/roles/policy_file.h) goes into the model without libtorch
 * (workers/roles/policy_mlp.h, fp32, as `gearbox eval` plays it); any other checkpoint's model
 * file into the bridge's learner (workers/roles/learner_file.h's gb_learner_checkpoint_load) and
 * acts through its model, with each row's state. Then its deterministic actions,
 * log-probabilities and values for OBS (and the next states), and with a continuous action
 * space its actions and log-probabilities for the standard-normal draws NOISE too.
 * OBS: [n, *shape] of the space's dtype; NOISE: float32 [n, action dims] (continuous) or empty;
 * STATE: float32 [n, S] (a core) or empty. OUT receives float32 arrays in turn: actions [n, k]
 * (discrete: k 1, the index as a float), logp [n], value [n], the next states [n, S]; for a
 * continuous space then actions [n, k] and logp [n] for NOISE.
 * usage: policy_reference CONFIG POLICY_OR_MODEL OBS NOISE STATE OUT */
#include "envs/env.h"
#include "runtime/base/dtype.h"
#include "runtime/config/config.h"
#include "workers/roles/learner_file.h"
#include "workers/roles/policy_file.h"
#include "workers/roles/policy_mlp.h"
#include "workers/roles/worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The file's bytes (*len of them), or NULL. */
static void *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc(n > 0 ? (size_t)n : 1);
    *len = buf && fread(buf, 1, (size_t)n, f) == (size_t)n ? (size_t)n : 0;
    fclose(f);
    return buf;
}

static int fail(const char *what, const gb_error *err)
{
    fprintf(stderr, "policy_reference: %s: %s\n", what, err ? err->msg : "");
    return 1;
}

/* One act: the C model's when m, else the bridge's. */
static int act(gb_policy_mlp *m, gb_torch_model *tm, const void *obs, int64_t n, int det,
               const float *noise, const float *state_in, float *state_out, gb_torch_act_out *o,
               gb_error *err)
{
    if (m)
        return gb_policy_mlp_act(m, obs, n, det, 0.0, noise, state_in, state_out, o, err);
    return gb_torch_model_act_state(tm, obs, n, det, 0.0, noise, state_in, state_out, o, err);
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: %s CONFIG POLICY_OR_MODEL OBS NOISE STATE OUT\n", argv[0]);
        return 2;
    }
    static gb_config cfg;
    gb_error err = {0};
    gb_env_spec spec;
    gb_torch_space sp;
    gb_policy_mlp *m = NULL;
    gb_torch_learner *l = NULL;
    gb_torch_model *tm = NULL;
    if (gb_config_read(&cfg, argv[1], NULL, 0, &err) ||
        gb_worker_env_space(&cfg, &spec, &sp, &err))
        return fail(argv[1], &err);
    const size_t plen = strlen(argv[2]);
    if (plen > 7 && strcmp(argv[2] + plen - 7, ".policy") == 0) {
        gb_policy_file pf;
        if (gb_policy_file_read(argv[2], &pf, &err) ||
            gb_policy_mlp_open_fp32(&cfg, &sp, 1, &m, &err) ||
            gb_policy_mlp_import(m, pf.data, pf.bytes, pf.layout, pf.count, pf.version, &err))
            return fail(argv[2], &err);
        gb_policy_file_free(&pf);
    } else {
        if (gb_torch_set_threads(1, &err) || gb_torch_learner_create(&cfg, &sp, 1, &l, &err) ||
            gb_learner_checkpoint_load(l, &cfg, argv[2], &err))
            return fail(argv[2], &err);
        tm = gb_torch_learner_model(l);
    }
    const int64_t S = tm ? gb_torch_model_state_size(tm) : gb_policy_mlp_state_size(m);
    int64_t in = 1;
    for (int d = 0; d < sp.obs_ndim; d++)
        in *= sp.obs_shape[d];
    const size_t esize = gb_dtype_size(sp.obs_dtype);
    const int64_t k = sp.discrete ? 1 : sp.action_dim;
    size_t obs_len = 0, noise_len = 0, state_len = 0;
    void *obs = slurp(argv[3], &obs_len);
    float *noise = slurp(argv[4], &noise_len), *state = slurp(argv[5], &state_len);
    const int64_t n = (int64_t)(obs_len / esize) / in;
    if (!obs || !noise || !state || n < 1 ||
        (!sp.discrete && noise_len != (size_t)(n * k) * sizeof(float)) ||
        state_len != (size_t)(n * S) * sizeof(float))
        return fail("OBS, NOISE or STATE of the wrong size", NULL);
    int64_t *index = malloc(sizeof(int64_t) * (size_t)n);
    float *out = malloc(sizeof(float) * (size_t)(n * (2 * k + 4 + S)));
    if (!index || !out)
        return fail("out of memory", NULL);
    float *action = out, *logp = out + n * k, *value = logp + n, *next = value + n;
    gb_torch_act_out o = {.action = sp.discrete ? (void *)index : (void *)action, .logp = logp,
                          .value = value};
    if (act(m, tm, obs, n, 1, NULL, S ? state : NULL, S ? next : NULL, &o, &err))
        return fail("act", &err);
    for (int64_t i = 0; sp.discrete && i < n; i++)
        action[i] = (float)index[i];
    size_t floats = (size_t)(n * (k + 2 + S));
    if (!sp.discrete) {
        float *z_act = next + n * S, *z_logp = z_act + n * k;
        float *scratch = S ? malloc(sizeof(float) * (size_t)(n * S)) : NULL;
        gb_torch_act_out z = {.action = z_act, .logp = z_logp};
        if ((S && !scratch) || act(m, tm, obs, n, 0, noise, S ? state : NULL, scratch, &z, &err))
            return fail("act with noise", &err);
        free(scratch);
        floats += (size_t)(n * (k + 1));
    }
    FILE *f = fopen(argv[6], "wb");
    if (!f || fwrite(out, sizeof(float), floats, f) != floats || fclose(f) != 0)
        return fail(argv[6], NULL);
    gb_policy_mlp_close(m);
    gb_torch_learner_destroy(l);
    free(obs);
    free(noise);
    free(state);
    free(index);
    free(out);
    return 0;
}
