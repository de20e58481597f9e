/* tests/workers/torch/test_sac_kernels.c: SAC's step in gearbox's own C
 * (workers/torch/sac_kernels.cpp and squashed.c, trainer.kernels: gearbox) against libtorch's
 * autograd. Two learners from the same initial weights (and the same generator, so the same
 * noise for every draw of actions) train on the same batches: tanh and relu, odd widths, bounded
 * actions of different scales, the temperature learned or fixed, importance weights or none,
 * normalised and clipped observations, gradient clipping, invalid steps, priorities asked for.
 * The critics' and actor's losses, Q, |TD|, the entropy, the temperature, the gradient norm and
 * the priorities agree at every step, and the actor's parameters after one step and after
 * thirty. Where the kernels do not apply (layer norm), the learner says so. */
#include "test.h"
#include "workers/torch_test_util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { B = 16, T = 8, OBS = 3, ACT = 2 };

typedef struct batch {
    float obs[B * T * OBS], next[B * OBS], rew[B * T], act[B * T * ACT], w[B];
    uint8_t term[B * T], trunc[B * T], valid[B * T];
    gb_torch_batch b;
} batch;

/* A batch for box_space (actions inside its bounds: [-2, 2] and [0, 1]) */
static void make_batch(batch *x, unsigned seed, int weights)
{
    memset(x, 0, sizeof *x);
    fill(x->obs, B * T * OBS, seed);
    fill(x->next, B * OBS, seed + 1);
    fill(x->rew, B * T, seed + 2);
    fill(x->act, B * T * ACT, seed + 3);
    fill(x->w, B, seed + 4);
    for (int i = 0; i < B * T; i++) {
        x->act[i * ACT] *= 2.0f;
        x->act[i * ACT + 1] = 0.5f + 0.5f * x->act[i * ACT + 1];
        x->valid[i] = (i + (int)seed) % 11 != 0;
        x->term[i] = (i + (int)seed) % 13 == 0;
        x->trunc[i] = (i + (int)seed) % 17 == 0;
    }
    for (int i = 0; i < B; i++)
        x->w[i] = 0.6f + 0.4f * x->w[i];
    gb_torch_batch b = {.B = B,
                        .T = T,
                        .obs = x->obs,
                        .next_obs = x->next,
                        .action = x->act,
                        .reward = x->rew,
                        .terminated = x->term,
                        .truncated = x->trunc,
                        .valid = x->valid,
                        .weights = weights ? x->w : NULL};
    x->b = b;
}

static void learners_agree_wide(const char *extra, int learn_alpha, int weights, double clip,
                               int w0, int w1)
{
    gb_config cfg;
    CHECK(make_cfg(&cfg, "sac", extra) == 0);
    cfg.policy.model.hidden.n = 2;
    cfg.policy.model.hidden.v[0] = w0;
    cfg.policy.model.hidden.v[1] = w1;
    cfg.trainer.algorithm.lr = 0.003;
    cfg.trainer.algorithm.max_grad_norm = clip;
    cfg.trainer.algorithm.sac.learn_alpha = learn_alpha;
    cfg.trainer.algorithm.sac.init_alpha = 0.5;
    gb_torch_space sp = box_space();
    gb_torch_learner *own, *ref;
    CHECK(kernels_learner_pair(&cfg, &sp, &own, &ref) == 0);
    if (!own) /* (and no ref) */
        return;
    static batch x;
    double after_one = 0, worst = 0;
    for (int step = 0; step < 30; step++) {
        make_batch(&x, 500u + (unsigned)step, weights);
        gb_torch_stats so, sr;
        CHECK(train_pair(own, ref, &x.b, &so, &sr, &worst) == 0);
        const double s[][2] = {{so.loss, sr.loss},
                               {so.policy_loss, sr.policy_loss},
                               {so.value_loss, sr.value_loss},
                               {so.entropy, sr.entropy},
                               {so.q_mean, sr.q_mean},
                               {so.td_abs_mean, sr.td_abs_mean},
                               {so.alpha, sr.alpha},
                               {so.grad_norm, sr.grad_norm}};
        worst = worst_rel(worst, s, sizeof s / sizeof s[0]);
        CHECK(so.samples == sr.samples && so.samples > 0);
        CHECK(so.gradient_steps == 1 && sr.gradient_steps == 1);
        if (step == 0)
            after_one = learners_max_diff(own, ref);
    }
    const double after_all = learners_max_diff(own, ref);
    fprintf(stderr, "  sac [%d, %d]%s, learn_alpha %d, weights %d, clip %g: actor parameters "
                    "after 1 step %.3g, after 30 %.3g; stats and priorities %.3g relative\n",
            w0, w1, extra, learn_alpha, weights, clip, after_one, after_all, worst);
    CHECK(after_one < 1e-5); /* one Adam step of lr 0.003 */
    CHECK(after_all < 1e-4);
    CHECK(worst < 1e-4);
    gb_torch_learner_destroy(own);
    gb_torch_learner_destroy(ref);
}

/* odd widths: every tail of the tiles */
static void learners_agree(const char *extra, int learn_alpha, int weights, double clip)
{
    learners_agree_wide(extra, learn_alpha, weights, clip, 37, 21);
}

static void test_tanh(void) { learners_agree("", 1, 0, 0.0); }
/* layers wide enough that the larger products go to libtorch's BLAS (mlp_train.h) */
static void test_wide(void) { learners_agree_wide(", activation: relu", 1, 1, 0.0, 160, 136); }
static void test_relu_weights(void) { learners_agree(", activation: relu", 1, 1, 0.0); }
static void test_fixed_alpha_clipped(void) { learners_agree("", 0, 1, 0.5); }
static void test_normalized_obs(void)
{
    learners_agree(", activation: relu, normalize_obs: true, obs_clip: 0.5", 1, 0, 0.0);
}

/* Where the kernels do not apply, the learner says so and libtorch's autograd trains. */
static void test_not_applied(void)
{
    gb_error err = {0};
    gb_config cfg;
    CHECK(make_cfg(&cfg, "sac", ", layer_norm: true") == 0);
    gb_torch_space sp = box_space();
    gb_torch_learner *l = NULL;
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 5, &l, &err));
    if (l) {
        CHECK_MSG(strcmp(gb_torch_learner_kernels(l), "libtorch autograd") == 0, "%s",
                  gb_torch_learner_kernels(l));
        gb_torch_learner_destroy(l);
    }
}

int main(void)
{
    TEST_RUN(test_tanh);
    TEST_RUN(test_relu_weights);
    TEST_RUN(test_fixed_alpha_clipped);
    TEST_RUN(test_normalized_obs);
    TEST_RUN(test_wide);
    TEST_RUN(test_not_applied);
    return test_main_result();
}
