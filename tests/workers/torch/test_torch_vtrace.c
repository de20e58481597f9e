/* tests/workers/torch/test_torch_vtrace.c: PPO with trainer.algorithm.ppo.vtrace through the C
 * API: on chunks the learner's own policy acted (every importance weight 1), with lambda 1,
 * V-trace's targets and advantages are GAE(1)'s, so the step is the same as without V-trace;
 * on chunks of another policy (the behaviour log-probabilities moved) the steps differ, and the
 * truncation rho_bar matters; vtrace_proximal clips against the learner's policy; one pass
 * (vtrace_one_pass) steps as two do with one minibatch. (The targets
 * themselves: test_torch_targets.) */
#include "test.h"
#include "workers/torch_test_util.h"

#include <math.h>
#include <string.h>

enum { B = 4, T = 16, OBS = 4 };

static float obs[B * T * OBS], next[B * OBS], rew[B * T], logp[B * T];
static int64_t act[B * T];
static uint8_t term[B * T], trunc_[B * T], valid[B * T];

/* The batch: the learner's own model acts on fixed observations (seed 3), an episode ends mid
 * chunk. */
static gb_torch_batch make_batch(const gb_config *cfg)
{
    gb_error err = {0};
    gb_torch_space sp = discrete_space();
    gb_torch_learner *l = NULL;
    CHECK_OK(gb_torch_learner_create(cfg, &sp, 3, &l, &err));
    fill(obs, B * T * OBS, 11);
    fill(next, B * OBS, 12);
    float v[B * T];
    gb_torch_act_out out = {act, logp, v, NULL};
    if (l)
        CHECK_OK(gb_torch_model_act(gb_torch_learner_model(l), obs, B * T, 0, 0.0, &out, &err));
    gb_torch_learner_destroy(l);
    memset(valid, 1, sizeof valid);
    for (int i = 0; i < B * T; i++)
        rew[i] = (float)(i % 3);
    term[5] = 1, valid[6] = 0, rew[6] = 0;
    gb_torch_batch b = {B, T, obs, next, act, rew, term, trunc_, valid, logp, NULL, 0, NULL, 0};
    return b;
}

static gb_torch_stats step(const gb_config *cfg, const gb_torch_batch *b)
{
    gb_error err = {0};
    gb_torch_space sp = discrete_space();
    gb_torch_learner *l = NULL;
    gb_torch_stats st;
    memset(&st, 0, sizeof st);
    CHECK_OK(gb_torch_learner_create(cfg, &sp, 3, &l, &err));
    if (l)
        CHECK_OK(gb_torch_learner_train(l, b, &st, NULL, &err));
    gb_torch_learner_destroy(l);
    return st;
}

static void test_vtrace_steps(void)
{
    gb_config cfg;
    CHECK(make_cfg(&cfg, "ppo", "") == 0);
    cfg.trainer.algorithm.ppo.gae_lambda = 1.0;
    cfg.trainer.algorithm.ppo.epochs = 1;
    cfg.trainer.algorithm.ppo.minibatches = 1;
    cfg.trainer.algorithm.ppo.normalize_advantages = 0;
    gb_torch_batch b = make_batch(&cfg);
    gb_torch_stats gae = step(&cfg, &b);
    cfg.trainer.algorithm.ppo.vtrace = 1;
    gb_torch_stats vt = step(&cfg, &b);
    fprintf(stderr, "  on-policy: loss %.7g (gae) %.7g (v-trace), value loss %.7g %.7g\n",
            gae.loss, vt.loss, gae.value_loss, vt.value_loss);
    CHECK(fabs(gae.loss - vt.loss) <= 1e-5 * fabs(gae.loss) + 1e-6);
    CHECK(fabs(gae.value_loss - vt.value_loss) <= 1e-5 * fabs(gae.value_loss) + 1e-6);
    /* chunks of another policy: the actors' log-probabilities lower on some steps (weights
     * above 1: truncated to 1 by rho_bar 1, not by 100) and higher on others (below 1) */
    for (int i = 0; i < B * T; i += 2)
        logp[i] += i % 4 == 0 ? -0.7f : 0.7f;
    gb_torch_stats off = step(&cfg, &b);
    cfg.trainer.algorithm.ppo.vtrace_rho_bar = 100.0;
    cfg.trainer.algorithm.ppo.vtrace_c_bar = 100.0;
    gb_torch_stats loose = step(&cfg, &b);
    cfg.trainer.algorithm.ppo.vtrace = 0;
    gb_torch_stats off_gae = step(&cfg, &b);
    fprintf(stderr, "  off-policy: value loss %.7g (v-trace, rho_bar 1) %.7g (rho_bar 100) %.7g "
            "(gae)\n", off.value_loss, loose.value_loss, off_gae.value_loss);
    CHECK(isfinite(off.loss) && fabs(off.value_loss - off_gae.value_loss) > 1e-4);
    CHECK(fabs(off.value_loss - loose.value_loss) > 1e-4);
}

/* PPO with V-trace, one epoch of one minibatch, and the batch (make_batch). */
static gb_torch_batch one_step_vtrace(gb_config *cfg)
{
    CHECK(make_cfg(cfg, "ppo", "") == 0);
    cfg->trainer.algorithm.ppo.epochs = 1;
    cfg->trainer.algorithm.ppo.minibatches = 1;
    cfg->trainer.algorithm.ppo.vtrace = 1;
    return make_batch(cfg);
}

/* trainer.algorithm.ppo.vtrace_proximal: PPO's ratio against the learner's own policy before
 * the update. On chunks the learner acted, the same step as against the actors'; on stale ones
 * (the actors' log-probabilities 0.7 away: ratios of 2 and 1/2) the first minibatch's ratios
 * are all 1 (nothing clipped, no divergence) where against the actors' half are clipped. */
static void test_vtrace_proximal(void)
{
    gb_config cfg;
    gb_torch_batch b = one_step_vtrace(&cfg);
    gb_torch_stats mu = step(&cfg, &b);
    cfg.trainer.algorithm.ppo.vtrace_proximal = 1;
    gb_torch_stats prox = step(&cfg, &b);
    CHECK(fabs(mu.loss - prox.loss) <= 1e-5 * fabs(mu.loss) + 1e-6);
    for (int i = 0; i < B * T; i += 2)
        logp[i] += i % 4 == 0 ? -0.7f : 0.7f;
    cfg.trainer.algorithm.ppo.vtrace_proximal = 0;
    mu = step(&cfg, &b);
    cfg.trainer.algorithm.ppo.vtrace_proximal = 1;
    prox = step(&cfg, &b);
    fprintf(stderr, "  stale chunks: clip fraction %.3f against the actors', %.3f against the "
            "learner's; approx kl %.4f, %.4f\n", mu.clip_fraction, prox.clip_fraction,
            mu.approx_kl, prox.approx_kl);
    CHECK(mu.clip_fraction > 0.3 && prox.clip_fraction == 0.0);
    CHECK(fabs(prox.approx_kl) < 1e-6 && isfinite(prox.loss));
}

static int near(double a, double b) { return fabs(a - b) <= 1e-5 * fabs(b) + 1e-6; }

/* trainer.algorithm.ppo.vtrace_one_pass (one epoch): each minibatch's targets from its own
 * forward. With one minibatch that forward is at the parameters the two-pass way's forward
 * before the update sees, so the step is the same: loss terms, gradient norm, explained
 * variance, on stale chunks, against the actors' policy and the learner's (proximal). With two
 * minibatches, two optimiser steps of whole chunks. */
static void test_vtrace_one_pass(void)
{
    gb_config cfg;
    gb_torch_batch b = one_step_vtrace(&cfg);
    for (int i = 0; i < B * T; i += 2)
        logp[i] += i % 4 == 0 ? -0.7f : 0.7f;
    for (int prox = 0; prox < 2; prox++) {
        cfg.trainer.algorithm.ppo.vtrace_proximal = prox;
        cfg.trainer.algorithm.ppo.vtrace_one_pass = 1;
        gb_torch_stats one = step(&cfg, &b);
        cfg.trainer.algorithm.ppo.vtrace_one_pass = 0;
        gb_torch_stats two = step(&cfg, &b);
        fprintf(stderr, "  proximal %d: loss %.7g (one pass) %.7g (two), grad norm %.7g %.7g, "
                "explained variance %.5f %.5f\n", prox, one.loss, two.loss, one.grad_norm,
                two.grad_norm, one.explained_var, two.explained_var);
        CHECK(near(one.loss, two.loss) && near(one.policy_loss, two.policy_loss));
        CHECK(near(one.value_loss, two.value_loss) && near(one.entropy, two.entropy));
        CHECK(near(one.grad_norm, two.grad_norm) && near(one.clip_fraction, two.clip_fraction));
        CHECK(near(one.explained_var, two.explained_var) && one.samples == two.samples);
        CHECK(one.gradient_steps == 1 && one.samples == B * T - 1);
    }
    cfg.trainer.algorithm.ppo.vtrace_proximal = 0;
    cfg.trainer.algorithm.ppo.vtrace_one_pass = 1;
    cfg.trainer.algorithm.ppo.minibatches = 2;
    gb_torch_stats two_mb = step(&cfg, &b);
    CHECK(two_mb.gradient_steps == 2 && isfinite(two_mb.loss) && two_mb.grad_norm > 0);
}

int main(void)
{
    TEST_RUN(test_vtrace_steps);
    TEST_RUN(test_vtrace_proximal);
    TEST_RUN(test_vtrace_one_pass);
    return test_main_result();
}
