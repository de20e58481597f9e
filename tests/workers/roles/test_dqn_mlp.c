/* tests/workers/roles/test_dqn_mlp.c: the trainer's DQN learner without libtorch
 * (workers/roles/dqn_mlp.h) against the bridge's (trainer.kernels gearbox). Its layout is the
 * bridge's Q network's, entry by entry; its initial weights are orthogonal with the bridge's
 * gains and its target network starts as a copy; the bridge's learner takes its state, target
 * network included (gb_torch_learner_set_flat), and the two then train on the same batches:
 * double Q and the target's maximum, Polyak and periodic hard target updates, 1- and 3-step
 * returns, Huber and squared losses, importance weights or none, tanh and relu, lr annealing,
 * invalid, terminated and truncated steps. DQN draws nothing at random in a step, so the two
 * agree call for call: the loss, mean Q, mean |TD|, gradient norm, lr and the chunks'
 * priorities, and the parameters after one call and after twenty (the target's differences
 * show in the later losses). A batch without a valid step changes nothing but the counters.
 * A trained bridge learner's state (a restored run's) continues in it alike (get_flat).
 * What it cannot train as the bridge would, it refuses, naming the key. */
#include "test.h"
#include "workers/roles/dqn_mlp.h"
#include "workers/roles/flat_test_util.h"
#include "workers/torch_test_util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int take_over(const gb_config *cfg, const gb_torch_space *sp, gb_dqn_mlp *d,
                     gb_torch_learner **out)
{
    return flat_take_over(cfg, sp, gb_dqn_mlp_net(d), gb_dqn_mlp_target(d), out);
}

static void dqn_cfg(gb_config *cfg, const char *extra)
{
    CHECK(make_cfg(cfg, "dqn", extra) == 0);
    cfg->trainer.kernels = GB_KERNELS_GEARBOX;
    cfg->trainer.algorithm.max_grad_norm = 0.5; /* the clip is exercised */
    cfg->trainer.algorithm.dqn.n_step = 3;
    cfg->trainer.algorithm.dqn.double_q = 1;
    cfg->trainer.algorithm.dqn.target_update = GB_TARGET_POLYAK;
    cfg->trainer.algorithm.dqn.tau = 0.05;
    cfg->trainer.algorithm.dqn.huber_delta = 1.0;
}

static void test_layout_and_init(void)
{
    gb_config cfg;
    dqn_cfg(&cfg, "");
    cfg.policy.model.hidden.n = 2;
    cfg.policy.model.hidden.v[0] = 37;
    cfg.policy.model.hidden.v[1] = 21;
    gb_torch_space sp = discrete_space();
    gb_dqn_mlp *d = NULL;
    gb_torch_learner *l = NULL;
    gb_error err = {0};
    CHECK_OK(gb_dqn_mlp_open(&cfg, &sp, 7, &d, &err));
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 7, &l, &err));
    if (!d || !l)
        return;
    const gb_flat_mlp *f = gb_dqn_mlp_net(d);
    CHECK_OK(flat_layout_fits(f, l, &err));
    CHECK(f->nlayout == 6 && strcmp(f->layout[4].name, "q.weight") == 0);
    /* orthogonal rows (or columns) of norm gain; zero biases; the target a copy */
    for (int i = 0; i < f->nlayout; i++) {
        const float *x = f->p + f->flat_at[i];
        const int64_t rows = f->layout[i].shape[0], cols = f->layout[i].shape[1];
        if (f->layout[i].rank == 1) {
            for (int64_t j = 0; j < rows; j++)
                CHECK_MSG(x[j] == 0.0f, "%s[%lld] = %g", f->layout[i].name, (long long)j, x[j]);
            continue;
        }
        const double gain = strncmp(f->layout[i].name, "q.", 2) == 0 ? 1.0 : sqrt(2.0);
        const int64_t k = rows < cols ? rows : cols;
        double worst = 0.0;
        for (int64_t a = 0; a < k; a++)
            for (int64_t b = 0; b < k; b++) {
                double dot = 0.0; /* the shorter side's vectors are orthonormal times gain */
                for (int64_t j = 0; j < (rows < cols ? cols : rows); j++)
                    dot += rows < cols ? (double)x[a * cols + j] * x[b * cols + j]
                                       : (double)x[j * cols + a] * x[j * cols + b];
                worst = fmax(worst, fabs(dot - (a == b ? gain * gain : 0.0)));
            }
        CHECK_MSG(worst < 1e-5, "%s: off orthogonal by %g", f->layout[i].name, worst);
    }
    CHECK(memcmp(f->p, gb_dqn_mlp_target(d), sizeof(float) * (size_t)f->n) == 0);
    gb_dqn_mlp_close(d);
    gb_torch_learner_destroy(l);
}

/* One variant: twenty calls of each learner on the same batches, from the same state. */
static void learners_agree(const char *extra, int n_step, int double_q, int hard_every,
                           double huber, int weighted)
{
    gb_config cfg;
    dqn_cfg(&cfg, extra);
    gb_config_dqn *dc = &cfg.trainer.algorithm.dqn;
    dc->n_step = n_step;
    dc->double_q = double_q;
    dc->huber_delta = huber;
    if (hard_every) {
        dc->target_update = GB_TARGET_HARD;
        dc->target_update_every = hard_every;
    }
    cfg.trainer.algorithm.lr_anneal = 1;
    gb_torch_space sp = discrete_space();
    gb_dqn_mlp *d = NULL;
    gb_torch_learner *l = NULL;
    gb_error err = {0};
    CHECK_OK(gb_dqn_mlp_open(&cfg, &sp, 11, &d, &err));
    if (!d || take_over(&cfg, &sp, d, &l)) {
        CHECK(0);
        gb_dqn_mlp_close(d);
        return;
    }
    CHECK(strcmp(gb_torch_learner_kernels(l), "gearbox C") == 0);
    gb_flat_mlp *f = gb_dqn_mlp_net(d);
    CHECK(flat_max_diff(f, l) == 0.0);
    float *start = malloc(sizeof(float) * (size_t)f->n);
    if (start)
        memcpy(start, f->p, sizeof(float) * (size_t)f->n);
    static test_batch x;
    float weights[TB_B];
    double after_one = 0, worst = 0;
    for (int call = 0; call < 20; call++) {
        make_test_batch(&x, &sp, 900u + (unsigned)call);
        fill(weights, TB_B, 40u + (unsigned)call);
        for (int i = 0; i < TB_B; i++)
            weights[i] = 0.6f + 0.4f * weights[i];
        x.b.weights = weighted ? weights : NULL;
        gb_flat_mlp_set_progress(f, 0.02 * call);
        gb_torch_learner_set_progress(l, 0.02 * call);
        gb_torch_stats so, sr;
        float po[TB_B], pr[TB_B];
        CHECK_OK(gb_dqn_mlp_train(d, &x.b, &so, po, &err));
        CHECK_OK(gb_torch_learner_train(l, &x.b, &sr, pr, &err));
        const double s[][2] = {{so.loss, sr.loss},           {so.value_loss, sr.value_loss},
                               {so.q_mean, sr.q_mean},       {so.td_abs_mean, sr.td_abs_mean},
                               {so.grad_norm, sr.grad_norm}, {so.lr, sr.lr}};
        worst = worst_rel(worst, s, sizeof s / sizeof s[0]);
        for (int i = 0; i < TB_B; i++) {
            const double p[1][2] = {{po[i], pr[i]}};
            worst = worst_rel(worst, p, 1);
        }
        CHECK(so.samples == sr.samples && so.samples > 0);
        CHECK(so.gradient_steps == 1 && sr.gradient_steps == 1);
        if (call == 0)
            after_one = flat_max_diff(f, l);
    }
    const double after = flat_max_diff(f, l);
    CHECK(f->train_steps == gb_torch_learner_train_steps(l) && f->train_steps == 20);
    fprintf(stderr, "  n_step %d, double_q %d, hard every %d, huber %g, weights %d%s: "
                    "parameters after 1 call %.3g, after 20 %.3g; stats and priorities %.3g "
                    "relative\n", n_step, double_q, hard_every, huber, weighted, extra, after_one,
            after, worst);
    double moved = 0.0; /* the two agree because both learn, not because neither does */
    for (int64_t i = 0; start && i < f->n; i++)
        moved = fmax(moved, fabs((double)f->p[i] - start[i]));
    free(start);
    CHECK_MSG(moved > 1e-3, "the parameters moved by %g at most", moved);
    CHECK(after_one < 1e-6);
    CHECK(after < 1e-5);
    CHECK(worst < 1e-4);
    gb_dqn_mlp_close(d);
    gb_torch_learner_destroy(l);
}

static void test_agrees(void)
{
    learners_agree("", 3, 1, 0, 1.0, 1);
    learners_agree(", activation: relu", 1, 0, 3, 0.0, 0);
    learners_agree("", 1, 1, 1, 1.0, 0);
    learners_agree(", activation: relu", 3, 0, 0, 1.0, 1);
}

/* A batch of nothing but reset steps changes no parameter; the bridge takes over after it and
 * both go on alike. A malformed batch and an action out of the space are refused. */
static void test_edges(void)
{
    gb_config cfg;
    dqn_cfg(&cfg, "");
    gb_torch_space sp = discrete_space();
    gb_dqn_mlp *d = NULL;
    gb_torch_learner *l = NULL;
    gb_error err = {0};
    CHECK_OK(gb_dqn_mlp_open(&cfg, &sp, 5, &d, &err));
    if (!d)
        return;
    gb_flat_mlp *f = gb_dqn_mlp_net(d);
    static test_batch x;
    gb_torch_stats st;
    float prio[TB_B];
    make_test_batch(&x, &sp, 77);
    CHECK_OK(gb_dqn_mlp_train(d, &x.b, &st, NULL, &err));
    float *before = malloc(sizeof(float) * (size_t)f->n * 2);
    if (!before)
        return;
    memcpy(before, f->p, sizeof(float) * (size_t)f->n);
    memcpy(before + f->n, gb_dqn_mlp_target(d), sizeof(float) * (size_t)f->n);
    memset(x.valid, 0, sizeof x.valid);
    CHECK_OK(gb_dqn_mlp_train(d, &x.b, &st, prio, &err));
    CHECK(st.samples == 0 && st.gradient_steps == 0 && st.loss == 0.0);
    CHECK(memcmp(before, f->p, sizeof(float) * (size_t)f->n) == 0);
    CHECK(memcmp(before + f->n, gb_dqn_mlp_target(d), sizeof(float) * (size_t)f->n) == 0);
    for (int i = 0; i < TB_B; i++)
        CHECK(fabsf(prio[i] - 1e-6f) < 1e-12f);
    CHECK(f->train_steps == 2 && f->version == 2 && f->adam_steps == 1);
    free(before);
    CHECK(take_over(&cfg, &sp, d, &l) == 0);
    if (l) {
        CHECK(flat_max_diff(f, l) == 0.0 && gb_torch_learner_train_steps(l) == 2);
        gb_torch_stats so, sr;
        make_test_batch(&x, &sp, 78);
        CHECK_OK(gb_dqn_mlp_train(d, &x.b, &so, NULL, &err));
        CHECK_OK(gb_torch_learner_train(l, &x.b, &sr, NULL, &err));
        CHECK(fabs(so.loss - sr.loss) < 1e-5 * (1.0 + fabs(sr.loss)));
        CHECK(flat_max_diff(f, l) < 1e-6);
        /* DQN's learner needs the target network's parameters, and the same count */
        CHECK(gb_torch_learner_set_flat(l, f->p, f->m, f->v, NULL, f->n, f->adam_steps, 3,
                                        &err) == GB_EINVAL);
        CHECK(strstr(err.msg, "target") != NULL);
        CHECK(gb_torch_learner_set_flat(l, f->p, f->m, f->v, f->p, f->n - 1, f->adam_steps, 3,
                                        &err) == GB_EINVAL);
        gb_torch_learner_destroy(l);
    }
    make_test_batch(&x, &sp, 79);
    x.act[5] = 3; /* the space has 3 actions */
    CHECK(gb_dqn_mlp_train(d, &x.b, &st, NULL, &err) == GB_EINVAL);
    CHECK(strstr(err.msg, "action 3") != NULL);
    x.b.next_obs = NULL;
    CHECK(gb_dqn_mlp_train(d, &x.b, &st, NULL, &err) == GB_EINVAL);
    gb_dqn_mlp_close(d);
}

/* A restored run: the bridge's learner trained (as from a checkpoint) gives its state to a
 * learner without libtorch (gb_torch_learner_get_flat), which then trains as the bridge's
 * goes on training. */
static void test_continues_restored(void)
{
    gb_config cfg;
    dqn_cfg(&cfg, "");
    gb_torch_space sp = discrete_space();
    gb_torch_learner *l = NULL;
    gb_dqn_mlp *d = NULL;
    gb_error err = {0};
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 4, &l, &err));
    CHECK_OK(gb_dqn_mlp_open(&cfg, &sp, 9, &d, &err));
    if (!l || !d)
        return;
    static test_batch x;
    gb_torch_stats so, sr;
    for (int call = 0; call < 5; call++) {
        make_test_batch(&x, &sp, 300u + (unsigned)call);
        CHECK_OK(gb_torch_learner_train(l, &x.b, &sr, NULL, &err));
    }
    gb_flat_mlp *f = gb_dqn_mlp_net(d);
    CHECK(flat_max_diff(f, l) > 0.0); /* other initial weights, other counters */
    CHECK_OK(gb_torch_learner_get_flat(l, f->p, f->m, f->v, gb_dqn_mlp_target(d), f->n,
                                       &f->adam_steps, &f->train_steps, &err));
    f->version = gb_torch_model_version(gb_torch_learner_model(l));
    CHECK(f->train_steps == 5 && f->adam_steps == 5);
    CHECK(flat_max_diff(f, l) == 0.0);
    double worst = 0.0;
    for (int call = 0; call < 5; call++) { /* the target network came too: the losses agree */
        make_test_batch(&x, &sp, 400u + (unsigned)call);
        CHECK_OK(gb_dqn_mlp_train(d, &x.b, &so, NULL, &err));
        CHECK_OK(gb_torch_learner_train(l, &x.b, &sr, NULL, &err));
        const double s[][2] = {{so.loss, sr.loss}, {so.grad_norm, sr.grad_norm}};
        worst = worst_rel(worst, s, 2);
    }
    CHECK_MSG(worst < 1e-6, "stats %.3g relative", worst);
    CHECK(flat_max_diff(f, l) < 1e-6);
    /* the same refusals as set_flat's */
    CHECK(gb_torch_learner_get_flat(l, f->p, f->m, f->v, NULL, f->n, &f->adam_steps,
                                    &f->train_steps, &err) == GB_EINVAL);
    CHECK(gb_torch_learner_get_flat(l, f->p, f->m, f->v, gb_dqn_mlp_target(d), f->n + 1,
                                    &f->adam_steps, &f->train_steps, &err) == GB_EINVAL);
    gb_dqn_mlp_close(d);
    gb_torch_learner_destroy(l);
}

static int open_dqn(const gb_config *cfg, const gb_torch_space *sp, gb_error *err)
{
    gb_dqn_mlp *d = NULL;
    int rc = gb_dqn_mlp_open(cfg, sp, 1, &d, err);
    CHECK(rc == 0 || !d);
    gb_dqn_mlp_close(d);
    return rc;
}

/* What it cannot train as the bridge would, it refuses, naming the key. */
static void test_refuses(void)
{
    static const flat_refusal cases[] = {
        {"dqn", ", layer_norm: true", "policy.model.layer_norm", GB_KERNELS_GEARBOX, 0},
        {"dqn", ", normalize_obs: true", "policy.model.normalize_obs", GB_KERNELS_GEARBOX, 0},
        {"dqn", ", activation: elu", "policy.model.activation", GB_KERNELS_GEARBOX, 0},
        {"dqn", ", core: lstm", "policy.model.core", GB_KERNELS_GEARBOX, 0},
        {"dqn", "", "trainer.kernels", GB_KERNELS_LIBTORCH, 0},
        {"ppo", "", "trainer.algorithm", GB_KERNELS_GEARBOX, 0},
        {"dqn", "", "action space", GB_KERNELS_GEARBOX, 1},
    };
    flat_refusals(cases, sizeof cases / sizeof cases[0], open_dqn);
    gb_config cfg;
    dqn_cfg(&cfg, "");
    cfg.trainer.algorithm.dqn.value_rescale = 1;
    gb_torch_space sp = discrete_space();
    gb_error err = {0};
    CHECK(open_dqn(&cfg, &sp, &err) == GB_EUNSUPPORTED);
    CHECK(strstr(err.msg, "value_rescale") != NULL);
}

int main(void)
{
    TEST_RUN(test_layout_and_init);
    TEST_RUN(test_agrees);
    TEST_RUN(test_edges);
    TEST_RUN(test_continues_restored);
    TEST_RUN(test_refuses);
    return test_main_result();
}
