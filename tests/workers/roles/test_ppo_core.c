/* tests/workers/roles/test_ppo_core.c: the trainer's PPO learner without libtorch with a recurrent
 * core (workers/roles/ppo_core.c, workers/torch/core_train.h) against the bridge's recurrent PPO
 * (ppo_seq.cpp, core_seq.cpp). Its layout is the bridge model's with the core's entries; its
 * initial core is core.cpp's (ih orthogonal, each gate's block of hh orthogonal, an LSTM's
 * forget bias 1). The bridge's learner takes its state, and the two train on the same batches:
 * LSTM and GRU, categorical and Gaussian heads, with and without a torso, states entering the
 * chunks (their rows wider than the state, as the replay's column is), invalid steps (the
 * state zeroed after them), the entropy bonus and the clipped value loss. The values of every
 * row (the learner's forward over whole chunks) agree with the bridge's sequence forward, which
 * is the acting model's; the loss terms, gradient norm, priorities and the parameters after one
 * call and after ten agree, on one thread or with the chunks split over several. Several
 * chunks' minibatches an epoch still train; two threads give the same parameters run after
 * run. What it cannot train, it refuses, naming the key. */
#include "test.h"
#include "workers/roles/flat_test_util.h"
#include "workers/roles/ppo_mlp_internal.h"
#include "workers/torch/core_train.h"
#include "workers/torch/testing.h"
#include "workers/torch_test_util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { STRIDE = 2 * 24 + 3 }; /* a state0 row's floats: more than the largest state (LSTM 24) */

/* A batch with every chunk's state0 drawn (rows STRIDE floats apart). */
static void with_state0(test_batch *x, float *s0, unsigned seed)
{
    fill(s0, TB_B * STRIDE, seed);
    for (int i = 0; i < TB_B * STRIDE; i++)
        s0[i] = 0.8f * s0[i] - 0.4f;
    x->b.state0 = s0;
    x->b.state_stride = STRIDE;
}

static void core_cfg(gb_config *cfg, const char *core, int hidden, const char *extra)
{
    char model[256];
    snprintf(model, sizeof model, ", core: %s, core_size: %d%s", core,
             strcmp(core, "lstm") == 0 ? 24 : 20, extra);
    CHECK(make_cfg(cfg, "ppo", model) == 0);
    cfg->policy.model.hidden.n = hidden;
    cfg->policy.model.hidden.v[0] = 13; /* odd widths: the tiles' tails */
    cfg->trainer.kernels = GB_KERNELS_GEARBOX;
}

static void check_layout_and_init(const char *core)
{
    gb_config cfg;
    core_cfg(&cfg, core, 1, "");
    gb_torch_space sp = discrete_space();
    gb_ppo_mlp *q = NULL;
    gb_torch_learner *l = NULL;
    gb_error err = {0};
    CHECK_OK(gb_ppo_mlp_open(&cfg, &sp, 7, &q, &err));
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 7, &l, &err));
    if (!q || !l)
        return;
    const gb_flat_mlp *f = gb_ppo_mlp_net(q);
    CHECK_OK(flat_layout_fits(f, l, &err));
    const gb_core_train *c = &q->core;
    const int H = c->H, G = c->kind == GB_CORE_TRAIN_LSTM ? 4 : 3;
    double worst = 0.0; /* each gate's block of hh: H x H orthogonal */
    for (int g = 0; g < G; g++)
        for (int i = 0; i < H; i++)
            for (int j = 0; j < H; j++) {
                double d = 0.0;
                for (int k = 0; k < H; k++)
                    d += (double)c->w_hh[(g * H + i) * H + k] * c->w_hh[(g * H + j) * H + k];
                worst = fmax(worst, fabs(d - (i == j)));
            }
    CHECK(worst < 1e-4);
    for (int k = 0; k < G * H; k++) {
        const int forget = c->kind == GB_CORE_TRAIN_LSTM && k >= H && k < 2 * H;
        CHECK(c->b_ih[k] == (forget ? 1.0f : 0.0f) && c->b_hh[k] == 0.0f);
    }
    gb_ppo_mlp_close(q);
    gb_torch_learner_destroy(l);
}

static void test_layout_and_init(void)
{
    check_layout_and_init("lstm");
    check_layout_and_init("gru");
}

static void learners_agree(const char *core, int discrete, int hidden, double entropy_coef,
                           int clip_value, int threads)
{
    gb_config cfg;
    core_cfg(&cfg, core, hidden, "");
    cfg.trainer.threads = threads;
    cfg.trainer.algorithm.ppo.entropy_coef = entropy_coef;
    cfg.trainer.algorithm.ppo.clip_value = clip_value;
    cfg.trainer.algorithm.ppo.epochs = 3;
    cfg.trainer.algorithm.ppo.minibatches = 1;
    cfg.trainer.algorithm.lr = 0.003;
    gb_torch_space sp = discrete ? discrete_space() : box_space();
    gb_ppo_mlp *q = NULL;
    gb_torch_learner *l = NULL;
    gb_error err = {0};
    CHECK_OK(gb_ppo_mlp_open(&cfg, &sp, 11, &q, &err));
    if (!q || flat_take_over(&cfg, &sp, gb_ppo_mlp_net(q), NULL, &l)) {
        CHECK(0);
        gb_ppo_mlp_close(q);
        return;
    }
    CHECK(flat_max_diff(gb_ppo_mlp_net(q), l) == 0.0);
    static test_batch x;
    static float s0[TB_B * STRIDE], value[TB_B * (TB_T + 1)];
    double after_one = 0, worst = 0, values = 0;
    for (int call = 0; call < 10; call++) {
        make_test_batch(&x, &sp, 700u + (unsigned)call);
        with_state0(&x, s0, 800u + (unsigned)call);
        /* the values of every row, the forward the policy worker acts on, from the same state */
        CHECK_OK(gb_torch_learner_sequence(l, &x.b, NULL, value, &err));
        CHECK(gb_ppo_core_values(q, &x.b) == 0);
        for (int i = 0; i < TB_B * (TB_T + 1); i++)
            values = fmax(values, fabs((double)value[i] - ((const float *)q->values.p)[i]));
        gb_torch_stats so, sr;
        worst = ppo_train_both(q, l, &x.b, 3, worst, &so, &sr);
        if (call == 0)
            after_one = flat_max_diff(gb_ppo_mlp_net(q), l);
    }
    const double after_ten = flat_max_diff(gb_ppo_mlp_net(q), l);
    fprintf(stderr, "  %s, %s, %d hidden, entropy %g, clip_value %d, %d threads: values %.3g, "
                    "parameters after 1 call %.3g, after 10 %.3g; stats and priorities %.3g "
                    "relative\n",
            core, discrete ? "categorical" : "gaussian", hidden, entropy_coef, clip_value,
            threads, values, after_one, after_ten, worst);
    CHECK(values < 1e-5);
    CHECK(after_one < 1e-5); /* 3 Adam steps of lr 0.003 */
    CHECK(after_ten < 1e-4);
    CHECK(worst < 1e-4);
    gb_ppo_mlp_close(q);
    gb_torch_learner_destroy(l);
}

static void test_agrees(void)
{
    learners_agree("lstm", 1, 1, 0.01, 1, 1);
    learners_agree("lstm", 0, 0, 0.0, 0, 1);
    learners_agree("gru", 1, 0, 0.0, 1, 1);
    learners_agree("gru", 0, 1, 0.01, 0, 1);
    /* the chunks split over threads (16: 5, 5 and 6 sequences; 8 and 8) */
    learners_agree("lstm", 1, 1, 0.01, 1, 3);
    learners_agree("gru", 0, 1, 0.01, 0, 2);
}

/* Call `call` of a test: a batch drawn from seed + call with states from seed + 10 + call, each
 * of the nq learners trained on it (st: the last's statistics). Returns the batch (until the
 * next call). */
static const gb_torch_batch *train_call(gb_ppo_mlp *const *q, int nq, const gb_torch_space *sp,
                                         unsigned seed, int call, gb_torch_stats *st)
{
    static test_batch x;
    static float s0[TB_B * STRIDE];
    gb_error err = {0};
    make_test_batch(&x, sp, seed + (unsigned)call);
    with_state0(&x, s0, seed + 10u + (unsigned)call);
    for (int i = 0; i < nq; i++)
        CHECK_OK(gb_ppo_mlp_train(q[i], &x.b, st, NULL, &err));
    return &x.b;
}

/* Minibatches of a few chunks each (the shuffles differ from the bridge's): the steps are the
 * bridge's count, every gradient finite, and the bridge's learner takes over and trains on. */
static void test_minibatches(void)
{
    gb_config cfg;
    core_cfg(&cfg, "lstm", 1, "");
    cfg.trainer.algorithm.ppo.epochs = 2;
    cfg.trainer.algorithm.ppo.minibatches = 3; /* of 16 chunks: 6, 6 and 4 */
    gb_torch_space sp = discrete_space();
    gb_ppo_mlp *q = NULL;
    gb_torch_learner *l = NULL;
    gb_error err = {0};
    CHECK_OK(gb_ppo_mlp_open(&cfg, &sp, 3, &q, &err));
    if (!q)
        return;
    gb_torch_stats st;
    const gb_torch_batch *last = NULL;
    for (int call = 0; call < 3; call++) {
        last = train_call(&q, 1, &sp, 40u, call, &st);
        CHECK(st.gradient_steps == 6 && isfinite(st.loss) && isfinite(st.grad_norm));
    }
    const gb_flat_mlp *f = gb_ppo_mlp_net(q);
    for (int64_t i = 0; i < f->n; i++)
        if (!isfinite(f->p[i])) {
            CHECK(0);
            break;
        }
    CHECK(flat_take_over(&cfg, &sp, f, NULL, &l) == 0);
    if (l) {
        CHECK(flat_max_diff(f, l) == 0.0);
        CHECK_OK(gb_torch_learner_train(l, last, &st, NULL, &err));
        CHECK(st.gradient_steps == 6);
    }
    gb_ppo_mlp_close(q);
    gb_torch_learner_destroy(l);
}

/* Threads split each minibatch's chunks (6, 6 and 4 over 2 threads): two such learners end
 * with the same parameters to the bit (the parts' gradients summed in a fixed order, whatever
 * thread finishes first), and a learner on one thread within float rounding of them. */
static void test_threads_repeat(void)
{
    gb_ppo_mlp *q[3] = {NULL, NULL, NULL};
    gb_config cfg;
    core_cfg(&cfg, "gru", 1, "");
    cfg.trainer.algorithm.ppo.epochs = 2;
    cfg.trainer.algorithm.ppo.minibatches = 3;
    gb_torch_space sp = box_space();
    gb_error err = {0};
    for (int i = 0; i < 3; i++) {
        cfg.trainer.threads = i < 2 ? 2 : 1;
        CHECK_OK(gb_ppo_mlp_open(&cfg, &sp, 5, &q[i], &err));
        if (!q[i])
            goto out;
    }
    gb_torch_stats st;
    for (int call = 0; call < 4; call++)
        train_call(q, 3, &sp, 60u, call, &st);
    const gb_flat_mlp *a = gb_ppo_mlp_net(q[0]), *b = gb_ppo_mlp_net(q[1]);
    const gb_flat_mlp *one = gb_ppo_mlp_net(q[2]);
    CHECK(memcmp(a->p, b->p, sizeof(float) * (size_t)a->n) == 0);
    double gap = 0;
    for (int64_t i = 0; i < a->n; i++)
        gap = fmax(gap, fabs((double)a->p[i] - one->p[i]));
    fprintf(stderr, "  2 threads against 1 after 4 calls: %.3g\n", gap);
    CHECK(gap < 1e-5);
out:
    for (int i = 0; i < 3; i++)
        gb_ppo_mlp_close(q[i]);
}

static int open_ppo(const gb_config *cfg, const gb_torch_space *sp, gb_error *err)
{
    gb_ppo_mlp *q = NULL;
    int rc = gb_ppo_mlp_open(cfg, sp, 1, &q, err);
    gb_ppo_mlp_close(q);
    return rc;
}

static void test_refuses(void)
{
    const flat_refusal cases[] = {
        {"ppo", ", core: transformer, core_size: 16", "policy.model.core", GB_KERNELS_GEARBOX,
         0},
        {"ppo", ", core: lstm, core_size: 16", "trainer.kernels", GB_KERNELS_LIBTORCH, 0},
        {"ppo", ", core: lstm, core_size: 16, layer_norm: true", "policy.model.layer_norm",
         GB_KERNELS_GEARBOX, 0},
    };
    flat_refusals(cases, sizeof cases / sizeof *cases, open_ppo);
}

int main(void)
{
    TEST_RUN(test_layout_and_init);
    TEST_RUN(test_agrees);
    TEST_RUN(test_minibatches);
    TEST_RUN(test_threads_repeat);
    TEST_RUN(test_refuses);
    return test_main_result();
}
