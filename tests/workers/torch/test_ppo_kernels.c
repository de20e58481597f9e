/* tests/workers/torch/test_ppo_kernels.c: PPO's minibatch step in gearbox's own C
 * (workers/torch/ppo_kernels.cpp, trainer.kernels: gearbox) against libtorch's autograd. Two
 * learners from the same initial weights (and the same minibatch shuffles) train on the same
 * batches: categorical and Gaussian heads, tanh and relu, odd widths, the entropy bonus on and
 * off, the clipped value loss and advantage normalisation on and off, V-trace (its importance
 * weights from the pre-update forward) or GAE, normalised and clipped observations, invalid
 * steps, priorities asked for. The loss terms, gradient norm, explained variance and priorities
 * agree, and so do the parameters after one call (16 Adam steps) and after ten. Where the
 * kernels do not apply (a shared torso, layer norm), the learner says so. */
#include "test.h"
#include "workers/torch_test_util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void learners_agree(int discrete, const char *extra, double entropy_coef, int clip_value,
                           int normalize, int vtrace)
{
    gb_config cfg;
    CHECK(make_cfg(&cfg, "ppo", extra) == 0);
    cfg.policy.model.hidden.n = 2;
    cfg.policy.model.hidden.v[0] = 37; /* odd widths: every tail of the tiles */
    cfg.policy.model.hidden.v[1] = 21;
    cfg.trainer.algorithm.ppo.entropy_coef = entropy_coef;
    cfg.trainer.algorithm.ppo.clip_value = clip_value;
    cfg.trainer.algorithm.ppo.normalize_advantages = normalize;
    cfg.trainer.algorithm.ppo.vtrace = vtrace;
    cfg.trainer.algorithm.ppo.epochs = 4;
    cfg.trainer.algorithm.ppo.minibatches = 4;
    cfg.trainer.algorithm.lr = 0.003;
    gb_torch_space sp = discrete ? discrete_space() : box_space();
    gb_torch_learner *own, *ref;
    CHECK(kernels_learner_pair(&cfg, &sp, &own, &ref) == 0);
    if (!own) /* (and no ref) */
        return;
    static test_batch x;
    double after_one = 0, worst = 0;
    for (int call = 0; call < 10; call++) {
        make_test_batch(&x, &sp, 300u + (unsigned)call);
        gb_torch_stats so, sr;
        CHECK(train_pair(own, ref, &x.b, &so, &sr, &worst) == 0);
        worst = ppo_stats_worst(worst, &so, &sr);
        CHECK(so.samples == sr.samples && so.samples > 0);
        CHECK(so.gradient_steps == sr.gradient_steps && so.gradient_steps == 16);
        if (call == 0) {
            after_one = learners_max_diff(own, ref);
            CHECK(sr.clip_fraction > 0.0); /* the clipped branch is exercised */
        }
    }
    const double after_ten = learners_max_diff(own, ref);
    fprintf(stderr, "  %s%s, entropy %g, clip_value %d, normalize %d, vtrace %d: parameters "
                    "after 1 call %.3g, after 10 %.3g; stats and priorities %.3g relative\n",
            discrete ? "categorical" : "gaussian", extra, entropy_coef, clip_value, normalize,
            vtrace, after_one, after_ten, worst);
    CHECK(after_one < 1e-5); /* 16 Adam steps of lr 0.003 */
    CHECK(after_ten < 1e-4);
    CHECK(worst < 1e-4);
    gb_torch_learner_destroy(own);
    gb_torch_learner_destroy(ref);
}

static void test_categorical(void)
{
    learners_agree(1, "", 0.01, 1, 1, 0);
    learners_agree(1, ", activation: relu", 0.0, 0, 0, 0);
    learners_agree(1, "", 0.01, 0, 1, 1); /* V-trace: the pre-update forward's log-probs too */
}

static void test_gaussian(void)
{
    learners_agree(0, "", 0.01, 1, 1, 0);
    learners_agree(0, ", activation: relu", 0.0, 0, 1, 1);
    learners_agree(0, ", normalize_obs: true, obs_clip: 0.5", 0.0, 1, 0, 0); /* clipped rows */
}

/* Where the kernels do not apply, the learner says so and libtorch's autograd trains. */
static void test_not_applied(void)
{
    const char *extras[] = {", shared: true", ", layer_norm: true"};
    for (size_t i = 0; i < sizeof extras / sizeof extras[0]; i++) {
        gb_error err = {0};
        gb_config cfg;
        CHECK(make_cfg(&cfg, "ppo", extras[i]) == 0);
        gb_torch_space sp = discrete_space();
        gb_torch_learner *l = NULL;
        CHECK_OK(gb_torch_learner_create(&cfg, &sp, 5, &l, &err));
        if (l) {
            CHECK_MSG(strcmp(gb_torch_learner_kernels(l), "libtorch autograd") == 0, "%s: %s",
                      extras[i], gb_torch_learner_kernels(l));
            gb_torch_learner_destroy(l);
        }
    }
}

int main(void)
{
    TEST_RUN(test_categorical);
    TEST_RUN(test_gaussian);
    TEST_RUN(test_not_applied);
    return test_main_result();
}
