/* tests/workers/torch_test_util.h: what the libtorch bridge's tests share: a small config for
 * an algorithm (MLP [16, 16], lr 0.01, gamma 0.9), a discrete (CartPole-like: 4 floats, 3
 * actions) and a box (3 floats, 2 bounded actions) space, deterministic filler values and
 * noise (SAC's injected draws: gb_torch_learner_set_noise, gb_sac_mlp_set_noise).
 * defines: load_cfg_text, make_cfg, discrete_space, box_space, fill, noise, noise_fill,
 *          learners_max_diff, kernels_learner_pair, train_pair, worst_rel, ppo_stats_worst,
 *          test_batch, make_test_batch */
#ifndef GB_TESTS_WORKERS_TORCH_TEST_UTIL_H
#define GB_TESTS_WORKERS_TORCH_TEST_UTIL_H

#include "runtime/config/config.h"
#include "workers/torch/bridge.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cfg from the YAML text (named <test> in its errors, which are printed): 0 or the error. */
static inline int load_cfg_text(gb_config *cfg, const char *text)
{
    gb_error err;
    memset(&err, 0, sizeof err); /* (not = {0}: C++ tests include this too) */
    gb_config_marks *marks = NULL;
    int rc = gb_config_load_string(cfg, &marks, "<test>", text, strlen(text), &err);
    if (rc == 0)
        rc = gb_config_finish(cfg, marks, &err);
    gb_config_marks_free(marks);
    if (rc)
        fprintf(stderr, "config: %s\n", err.msg);
    return rc;
}

static inline int make_cfg(gb_config *cfg, const char *algo, const char *model_extra)
{
    char text[2048];
    snprintf(text, sizeof text,
             "experiment: {name: t, seed: 3}\n"
             "env: {name: CartPole-v1}\n"
             "policy: {model: {type: mlp, hidden: [16, 16]%s}}\n"
             "trainer:\n  algorithm: {name: %s, lr: 0.01, gamma: 0.9}\n",
             model_extra, algo);
    return load_cfg_text(cfg, text);
}

static inline gb_torch_space discrete_space(void)
{
    gb_torch_space sp;
    memset(&sp, 0, sizeof sp);
    sp.obs_dtype = GB_DTYPE_FLOAT32;
    sp.obs_ndim = 1;
    sp.obs_shape[0] = 4;
    sp.discrete = 1;
    sp.n_actions = 3;
    return sp;
}

static inline gb_torch_space box_space(void)
{
    gb_torch_space sp;
    memset(&sp, 0, sizeof sp);
    sp.obs_dtype = GB_DTYPE_FLOAT32;
    sp.obs_ndim = 1;
    sp.obs_shape[0] = 3;
    sp.action_dim = 2;
    sp.action_low[0] = -2.0f;
    sp.action_high[0] = 2.0f;
    sp.action_low[1] = 0.0f;
    sp.action_high[1] = 1.0f;
    return sp;
}

/* x[i] in [-1, 1), a fixed sequence per seed */
static inline void fill(float *x, int n, unsigned seed)
{
    for (int i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        x[i] = (float)((seed >> 8) % 2000) / 1000.0f - 1.0f;
    }
}

/* The largest difference between two learners' float32 parameters (their models' exports):
 * INFINITY when the layouts differ or an export fails (printed). */
static inline double learners_max_diff(gb_torch_learner *a, gb_torch_learner *b)
{
    gb_torch_learner *l[2] = {a, b};
    float *p[2] = {NULL, NULL};
    uint64_t bytes[2] = {0, 0};
    int ok = 1;
    for (int i = 0; i < 2; i++) {
        gb_error err;
        memset(&err, 0, sizeof err);
        const gb_param_entry *layout;
        int count = 0;
        uint64_t version;
        gb_torch_model *m = gb_torch_learner_model(l[i]);
        gb_torch_model_layout(m, &layout, &count, &bytes[i]);
        p[i] = (float *)malloc(bytes[i] ? bytes[i] : 1);
        if (!p[i] || gb_torch_model_export(m, p[i], bytes[i], &version, &err)) {
            fprintf(stderr, "learners_max_diff: export: %s\n", err.msg);
            ok = 0;
        }
    }
    double d = ok && bytes[0] == bytes[1] ? 0.0 : INFINITY;
    for (size_t i = 0; d < INFINITY && i < bytes[0] / sizeof(float); i++)
        d = fmax(d, fabs((double)p[0][i] - (double)p[1][i]));
    free(p[0]);
    free(p[1]);
    return d;
}

/* Two learners of cfg for sp from the same seed: *own on gearbox's kernels (trainer.kernels
 * gearbox), *ref on libtorch's autograd (cfg's kernels left libtorch). 0 when both exist, say
 * so and start from the same weights; else -1, printed. Both exist or neither (NULL). */
static inline int kernels_learner_pair(gb_config *cfg, const gb_torch_space *sp,
                                       gb_torch_learner **own, gb_torch_learner **ref)
{
    gb_error err;
    memset(&err, 0, sizeof err);
    *own = *ref = NULL;
    cfg->trainer.kernels = GB_KERNELS_GEARBOX;
    if (gb_torch_learner_create(cfg, sp, 5, own, &err) == 0) {
        cfg->trainer.kernels = GB_KERNELS_LIBTORCH;
        gb_torch_learner_create(cfg, sp, 5, ref, &err);
    }
    if (!*own || !*ref) {
        fprintf(stderr, "kernels_learner_pair: %s\n", err.msg);
        gb_torch_learner_destroy(*own);
        *own = NULL;
        return -1;
    }
    const char *k_own = gb_torch_learner_kernels(*own), *k_ref = gb_torch_learner_kernels(*ref);
    if (strcmp(k_own, "gearbox C") != 0 || strcmp(k_ref, "libtorch autograd") != 0 ||
        learners_max_diff(*own, *ref) != 0.0) {
        fprintf(stderr, "kernels_learner_pair: kernels %s and %s, initial weights %s\n", k_own,
                k_ref, learners_max_diff(*own, *ref) == 0.0 ? "equal" : "differ");
        return -1;
    }
    return 0;
}

/* The largest relative difference of n pairs {value, reference} (1e-3 in the denominator keeps
 * values near 0 absolute), or worst if larger. */
static inline double worst_rel(double worst, const double (*pairs)[2], size_t n)
{
    for (size_t i = 0; i < n; i++)
        worst = fmax(worst, fabs(pairs[i][0] - pairs[i][1]) / (1e-3 + fabs(pairs[i][1])));
    return worst;
}

/* worst_rel over two PPO calls' statistics (so against the reference sr): the loss and its
 * terms, the explained variance, the gradient norm and the lr. */
static inline double ppo_stats_worst(double worst, const gb_torch_stats *so,
                                     const gb_torch_stats *sr)
{
    const double s[][2] = {{so->loss, sr->loss},
                           {so->policy_loss, sr->policy_loss},
                           {so->value_loss, sr->value_loss},
                           {so->entropy, sr->entropy},
                           {so->approx_kl, sr->approx_kl},
                           {so->clip_fraction, sr->clip_fraction},
                           {so->explained_var, sr->explained_var},
                           {so->grad_norm, sr->grad_norm},
                           {so->lr, sr->lr}};
    return worst_rel(worst, s, sizeof s / sizeof s[0]);
}

/* One training call of each learner of a pair on b (at most 64 chunks): their statistics into
 * *so and *sr, and *worst raised to the largest relative difference of their new priorities.
 * 0, or -1 when a call failed (printed). */
static inline int train_pair(gb_torch_learner *own, gb_torch_learner *ref,
                             const gb_torch_batch *b, gb_torch_stats *so, gb_torch_stats *sr,
                             double *worst)
{
    gb_error err;
    memset(&err, 0, sizeof err);
    float po[64], pr[64];
    if (b->B > 64 || gb_torch_learner_train(own, b, so, po, &err) ||
        gb_torch_learner_train(ref, b, sr, pr, &err)) {
        fprintf(stderr, "train_pair: %s\n", b->B > 64 ? "more than 64 chunks" : err.msg);
        return -1;
    }
    for (int64_t i = 0; i < b->B; i++) {
        const double p[1][2] = {{po[i], pr[i]}};
        *worst = worst_rel(*worst, p, 1);
    }
    return 0;
}

/* A PPO batch of TB_B chunks of TB_T steps for discrete_space or box_space. */
enum { TB_B = 16, TB_T = 16, TB_OBS_MAX = 4, TB_ACT_MAX = 2 };

typedef struct test_batch {
    float obs[TB_B * TB_T * TB_OBS_MAX], next[TB_B * TB_OBS_MAX], rew[TB_B * TB_T];
    float logp[TB_B * TB_T], act_f[TB_B * TB_T * TB_ACT_MAX];
    int64_t act[TB_B * TB_T];
    uint8_t term[TB_B * TB_T], trunc[TB_B * TB_T], valid[TB_B * TB_T];
    gb_torch_batch b;
} test_batch;

/* A fixed noise sequence from its seed: roughly normal (a sum of three uniforms). */
typedef struct noise {
    unsigned s;
} noise;

static inline void noise_fill(void *ctx, float *out, int64_t n)
{
    noise *z = (noise *)ctx;
    for (int64_t i = 0; i < n; i++) {
        float u = 0.0f;
        for (int k = 0; k < 3; k++) {
            z->s = z->s * 1103515245u + 12345u;
            u += (float)((z->s >> 8) % 2000) / 1000.0f - 1.0f;
        }
        out[i] = u;
    }
}

/* A batch for space sp whose behaviour log-probabilities are near the learner's (old, the
 * ratios around 1, some clipped), with invalid, terminated and truncated steps. */
static inline void make_test_batch(test_batch *x, const gb_torch_space *sp, unsigned seed)
{
    enum { N = TB_B * TB_T };
    memset(x, 0, sizeof *x);
    const int obs = (int)sp->obs_shape[0];
    fill(x->obs, N * obs, seed);
    fill(x->next, TB_B * obs, seed + 1);
    fill(x->rew, N, seed + 2);
    fill(x->logp, N, seed + 3);
    fill(x->act_f, N * (int)sp->action_dim, seed + 4);
    for (int i = 0; i < N; i++) {
        x->logp[i] = (sp->discrete ? -1.1f : -2.5f) + 0.3f * x->logp[i];
        x->act[i] = (i * 7 + (int)seed) % (sp->discrete ? (int)sp->n_actions : 1);
        x->valid[i] = (i + (int)seed) % 11 != 0;
        x->term[i] = (i + (int)seed) % 13 == 0;
        x->trunc[i] = (i + (int)seed) % 17 == 0;
    }
    memset(&x->b, 0, sizeof x->b);
    x->b.B = TB_B;
    x->b.T = TB_T;
    x->b.obs = x->obs;
    x->b.next_obs = x->next;
    x->b.action = sp->discrete ? (const void *)x->act : (const void *)x->act_f;
    x->b.reward = x->rew;
    x->b.terminated = x->term;
    x->b.truncated = x->trunc;
    x->b.valid = x->valid;
    x->b.logp = x->logp;
}

#endif
