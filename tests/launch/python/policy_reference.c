/* tests/launch/python/policy_reference.c: what gearbox's own C plays for given observations, for
 * test_policy.py to hold the Python package's policy (launch/python/gearbox/policy.py) against:
 * a run's config and policy file (workers/roles/policy_file.h) into the model without libtorch
 * (workers/roles/policy_mlp.h, fp32, as `gearbox eval` plays it), then its deterministic
 * actions, log-probabilities and values for OBS, and with a continuous action space its actions
 * and log-probabilities for the standard-normal draws NOISE too.
 * OBS: float32 [n, features]; NOISE: float32 [n, action dims] (continuous) or empty; OUT receives
 * float32 arrays in turn: actions [n, k] (discrete: k 1, the index as a float), logp [n],
 * value [n]; continuous, then: actions [n, k] and logp [n] for NOISE.
 * usage: policy_reference CONFIG POLICY_FILE OBS NOISE OUT */
#include "envs/env.h"
#include "runtime/config/config.h"
#include "workers/roles/policy_file.h"
#include "workers/roles/policy_mlp.h"
#include "workers/roles/worker.h"

#include <stdio.h>
#include <stdlib.h>

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

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: %s CONFIG POLICY_FILE OBS NOISE OUT\n", argv[0]);
        return 2;
    }
    static gb_config cfg;
    gb_error err = {0};
    gb_env_spec spec;
    gb_torch_space sp;
    gb_policy_file pf;
    gb_policy_mlp *m = NULL;
    if (gb_config_read(&cfg, argv[1], NULL, 0, &err) ||
        gb_worker_env_space(&cfg, &spec, &sp, &err))
        return fail(argv[1], &err);
    if (gb_policy_file_read(argv[2], &pf, &err) ||
        gb_policy_mlp_open_fp32(&cfg, &sp, 1, &m, &err) ||
        gb_policy_mlp_import(m, pf.data, pf.bytes, pf.layout, pf.count, pf.version, &err))
        return fail(argv[2], &err);
    int64_t in = 1;
    for (int d = 0; d < sp.obs_ndim; d++)
        in *= sp.obs_shape[d];
    const int64_t k = sp.discrete ? 1 : sp.action_dim;
    size_t obs_len = 0, noise_len = 0;
    float *obs = slurp(argv[3], &obs_len), *noise = slurp(argv[4], &noise_len);
    const int64_t n = (int64_t)(obs_len / sizeof(float)) / in;
    if (!obs || !noise || n < 1 || (!sp.discrete && noise_len != (size_t)(n * k) * sizeof(float)))
        return fail("OBS or NOISE of the wrong size", NULL);
    int64_t *index = malloc(sizeof(int64_t) * (size_t)n);
    float *out = malloc(sizeof(float) * (size_t)(n * (2 * k + 4)));
    if (!index || !out)
        return fail("out of memory", NULL);
    float *action = out, *logp = out + n * k, *value = logp + n;
    gb_torch_act_out o = {.action = sp.discrete ? (void *)index : (void *)action, .logp = logp,
                          .value = value};
    if (gb_policy_mlp_act(m, obs, n, 1, 0.0, NULL, &o, &err))
        return fail("act", &err);
    for (int64_t i = 0; sp.discrete && i < n; i++)
        action[i] = (float)index[i];
    size_t floats = (size_t)(n * (k + 2));
    if (!sp.discrete) {
        gb_torch_act_out z = {.action = value + n, .logp = value + n + n * k};
        if (gb_policy_mlp_act(m, obs, n, 0, 0.0, noise, &z, &err))
            return fail("act with noise", &err);
        floats += (size_t)(n * (k + 1));
    }
    FILE *f = fopen(argv[5], "wb");
    if (!f || fwrite(out, sizeof(float), floats, f) != floats || fclose(f) != 0)
        return fail(argv[5], NULL);
    gb_policy_mlp_close(m);
    gb_policy_file_free(&pf);
    free(obs);
    free(noise);
    free(index);
    free(out);
    return 0;
}
