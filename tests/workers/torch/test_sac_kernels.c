/* tests/workers/torch/test_sac_kernels.c: SAC's step in gearbox's own C
 * (workers/torch/sac_kernels.cpp and squashed.c, trainer.kernels: gearbox) against libtorch's
 * autograd. Two learners from the same initial weights (and the same generator, so the same
 * noise for every draw of actions) train on the same batches: tanh and relu, odd widths, bounded
 * actions of different scales, the temperature learned or fixed, importance weights or none,
 * normalised and clipped observations, gradient clipping, invalid steps, priorities asked for.
 * The critics' and actor's losses, Q, |TD|, the entropy, the temperature, the gradient norm and
 * the priorities agree at every step, and the actor's parameters after one step and after
 * thirty. Where the kernels do not apply (layer norm), the learner says so.
 * SAC's flat state (learner_get_flat, learner_set_flat: actor, critics, temperature, the target
 * critics) copies one learner into another of another seed, which then trains on bit-identically;
 * the refusals change nothing; injected noise (learner_set_noise) is what both paths draw. */
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

/* Pendulum's shapes: 3 floats, one action in [-2, 2] (box_space's first). make_batch's actions
 * [B, T, 2] read as [B, T, 1] are B*T values inside those bounds. */
static gb_torch_space pendulum_space(void)
{
    gb_torch_space sp = box_space();
    sp.action_dim = 1;
    return sp;
}

/* A SAC learner of pendulum_space on gearbox's kernels (relu, [16, 16]), seeded; NULL: failed
 * (printed). */
static gb_torch_learner *sac_learner(int learn_alpha, gb_kernels kernels, uint64_t seed)
{
    gb_error err = {0};
    gb_config cfg;
    if (make_cfg(&cfg, "sac", ", activation: relu") != 0)
        return NULL;
    cfg.trainer.kernels = kernels;
    cfg.trainer.algorithm.sac.learn_alpha = learn_alpha;
    gb_torch_space sp = pendulum_space();
    gb_torch_learner *l = NULL;
    if (gb_torch_learner_create(&cfg, &sp, seed, &l, &err))
        fprintf(stderr, "sac_learner: %s\n", err.msg);
    return l;
}

/* calls training calls of l on batches from seed on (0, or -1 printed). */
static int train_calls(gb_torch_learner *l, unsigned seed, int calls)
{
    static batch x;
    gb_error err = {0};
    for (int i = 0; i < calls; i++) {
        make_batch(&x, seed + (unsigned)i, i % 2);
        if (gb_torch_learner_train(l, &x.b, NULL, NULL, &err)) {
            fprintf(stderr, "train_calls: %s\n", err.msg);
            return -1;
        }
    }
    return 0;
}

/* SAC's flat state: n floats each of params, moments (the actor's block, the critics', log
 * alpha), nq of the target critics. */
typedef struct sac_flat {
    int64_t n, nq, adam_steps, train_steps;
    float *p, *m, *v, *t;
} sac_flat;

static void sac_flat_init(sac_flat *f, gb_torch_learner *l)
{
    const gb_param_entry *layout;
    int count = 0;
    uint64_t bytes;
    gb_torch_model_layout(gb_torch_learner_model(l), &layout, &count, &bytes);
    int64_t actor = 0; /* (no buffers without normalize_obs) */
    for (int i = 0; i < count; i++) {
        int64_t k = 1;
        for (int d = 0; d < layout[i].rank; d++)
            k *= layout[i].shape[d];
        actor += k;
    }
    const int64_t in = 3 + 1, h = 16; /* a critic: [obs, action] -> 16 -> 16 -> 1 */
    f->nq = 2 * ((in * h + h) + (h * h + h) + (h + 1));
    f->n = actor + f->nq + 1;
    f->p = calloc((size_t)(3 * f->n + f->nq), sizeof(float));
    f->m = f->p + f->n;
    f->v = f->m + f->n;
    f->t = f->v + f->n;
}

static int get_flat(gb_torch_learner *l, sac_flat *f, gb_error *err)
{
    return gb_torch_learner_get_flat(l, f->p, f->m, f->v, f->t, f->n, &f->adam_steps,
                                     &f->train_steps, err);
}

/* A learner's state after three calls into another's of another seed: the same checksum, the
 * same flat state back, and bit-identical training from there on the same noise. */
static void flat_round_trip(int learn_alpha)
{
    gb_error err = {0};
    gb_torch_learner *a = sac_learner(learn_alpha, GB_KERNELS_GEARBOX, 5);
    gb_torch_learner *b = sac_learner(learn_alpha, GB_KERNELS_GEARBOX, 9);
    CHECK(a && b);
    if (!a || !b)
        goto out;
    noise za = {1}, zb = {1};
    CHECK_OK(gb_torch_learner_set_noise(a, noise_fill, &za, &err));
    CHECK(train_calls(a, 700, 3) == 0);
    sac_flat fa, fb;
    sac_flat_init(&fa, a);
    sac_flat_init(&fb, b);
    CHECK_OK(get_flat(a, &fa, &err));
    CHECK(fa.adam_steps == 3 && fa.train_steps == 3);
    CHECK(gb_torch_learner_checksum(a) != gb_torch_learner_checksum(b));
    CHECK_OK(gb_torch_learner_set_flat(b, fa.p, fa.m, fa.v, fa.t, fa.n, fa.adam_steps,
                                       fa.train_steps, &err));
    CHECK(gb_torch_learner_checksum(a) == gb_torch_learner_checksum(b));
    CHECK(gb_torch_learner_train_steps(b) == 3);
    CHECK_OK(get_flat(b, &fb, &err));
    CHECK(memcmp(fa.p, fb.p, sizeof(float) * (size_t)(3 * fa.n + fa.nq)) == 0);
    CHECK(fb.adam_steps == 3 && fb.train_steps == 3);
    /* the moments and step counts came too: Adam's next steps agree to the bit, on the noise
     * a draws next */
    zb = za;
    CHECK_OK(gb_torch_learner_set_noise(b, noise_fill, &zb, &err));
    CHECK(train_calls(a, 710, 3) == 0 && train_calls(b, 710, 3) == 0);
    CHECK(gb_torch_learner_checksum(a) == gb_torch_learner_checksum(b));
    free(fa.p);
    free(fb.p);
out:
    gb_torch_learner_destroy(a);
    gb_torch_learner_destroy(b);
}

static void test_flat_round_trip(void) { flat_round_trip(1); }
static void test_flat_round_trip_fixed_alpha(void) { flat_round_trip(0); }

/* n that is not the learner's, or no target critics: GB_EINVAL, nothing changed. */
static void test_flat_refusals(void)
{
    gb_error err = {0};
    gb_torch_learner *a = sac_learner(1, GB_KERNELS_GEARBOX, 5);
    gb_torch_learner *b = sac_learner(1, GB_KERNELS_GEARBOX, 9);
    CHECK(a && b);
    if (!a || !b)
        goto out;
    CHECK(train_calls(a, 700, 2) == 0);
    sac_flat f, g;
    sac_flat_init(&f, a);
    sac_flat_init(&g, b);
    CHECK_OK(get_flat(a, &f, &err));
    const uint64_t before = gb_torch_learner_checksum(b);
    for (int64_t dn = -1; dn <= 1; dn += 2) {
        CHECK(gb_torch_learner_set_flat(b, f.p, f.m, f.v, f.t, f.n + dn, 2, 2, &err) ==
              GB_EINVAL);
        CHECK(gb_torch_learner_get_flat(b, g.p, g.m, g.v, g.t, g.n + dn, &g.adam_steps,
                                        &g.train_steps, &err) == GB_EINVAL);
    }
    CHECK(gb_torch_learner_set_flat(b, f.p, f.m, f.v, NULL, f.n, 2, 2, &err) == GB_EINVAL);
    CHECK_MSG(strstr(err.msg, "target") != NULL, "%s", err.msg);
    CHECK(gb_torch_learner_get_flat(b, g.p, g.m, g.v, NULL, g.n, &g.adam_steps,
                                    &g.train_steps, &err) == GB_EINVAL);
    CHECK(gb_torch_learner_checksum(b) == before && gb_torch_learner_train_steps(b) == 0);
    for (int64_t i = 0; i < 3 * g.n + g.nq; i++)
        CHECK(g.p[i] == 0.0f); /* nothing written either */
    free(f.p);
    free(g.p);
out:
    gb_torch_learner_destroy(a);
    gb_torch_learner_destroy(b);
}

/* Only SAC draws injected noise: another learner refuses it. */
static void test_noise_refused(void)
{
    gb_error err = {0};
    const char *algos[] = {"ppo", "dqn"};
    for (int i = 0; i < 2; i++) {
        gb_config cfg;
        CHECK(make_cfg(&cfg, algos[i], "") == 0);
        gb_torch_space sp = discrete_space();
        gb_torch_learner *l = NULL;
        CHECK_OK(gb_torch_learner_create(&cfg, &sp, 5, &l, &err));
        noise z = {1};
        if (l)
            CHECK(gb_torch_learner_set_noise(l, noise_fill, &z, &err) == GB_EINVAL);
        CHECK(z.s == 1);
        gb_torch_learner_destroy(l);
    }
}

/* Injected noise is every draw's: learners of one seed agree on the same fill and differ on
 * another; NULL gives the generator back; libtorch's autograd draws it in the kernels' order. */
static void test_noise_used(void)
{
    gb_error err = {0};
    gb_torch_learner *l[5];
    const gb_kernels k[5] = {GB_KERNELS_GEARBOX, GB_KERNELS_GEARBOX, GB_KERNELS_GEARBOX,
                             GB_KERNELS_GEARBOX, GB_KERNELS_LIBTORCH};
    noise z[5] = {{1}, {1}, {2}, {1}, {1}};
    for (int i = 0; i < 5; i++) {
        l[i] = sac_learner(1, k[i], 5);
        CHECK(l[i] != NULL);
        if (l[i]) /* l[3]: the fill, then the generator again */
            CHECK_OK(gb_torch_learner_set_noise(l[i], noise_fill, &z[i], &err));
    }
    if (l[3])
        CHECK_OK(gb_torch_learner_set_noise(l[3], NULL, NULL, &err));
    gb_torch_learner *plain = sac_learner(1, GB_KERNELS_GEARBOX, 5);
    for (int i = 0; i < 5; i++)
        CHECK(l[i] && train_calls(l[i], 720, 4) == 0);
    CHECK(plain && train_calls(plain, 720, 4) == 0);
    if (l[0] && l[1] && l[2] && l[3] && l[4] && plain) {
        CHECK(gb_torch_learner_checksum(l[0]) == gb_torch_learner_checksum(l[1]));
        CHECK(gb_torch_learner_checksum(l[0]) != gb_torch_learner_checksum(l[2]));
        CHECK(z[3].s == 1); /* never drawn from */
        CHECK(gb_torch_learner_checksum(l[3]) == gb_torch_learner_checksum(plain));
        CHECK(gb_torch_learner_checksum(l[0]) != gb_torch_learner_checksum(plain));
        const double d = learners_max_diff(l[0], l[4]);
        fprintf(stderr, "  injected noise: gearbox's kernels against libtorch's autograd after "
                        "4 calls %.3g\n", d);
        CHECK(d < 1e-5);
    }
    for (int i = 0; i < 5; i++)
        gb_torch_learner_destroy(l[i]);
    gb_torch_learner_destroy(plain);
}

int main(void)
{
    TEST_RUN(test_tanh);
    TEST_RUN(test_relu_weights);
    TEST_RUN(test_fixed_alpha_clipped);
    TEST_RUN(test_normalized_obs);
    TEST_RUN(test_wide);
    TEST_RUN(test_not_applied);
    TEST_RUN(test_flat_round_trip);
    TEST_RUN(test_flat_round_trip_fixed_alpha);
    TEST_RUN(test_flat_refusals);
    TEST_RUN(test_noise_refused);
    TEST_RUN(test_noise_used);
    return test_main_result();
}
