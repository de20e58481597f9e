/* tests/workers/roles/test_sac_mlp.c: the trainer's SAC learner without libtorch
 * (workers/roles/sac_mlp.h) against the bridge's (trainer.kernels gearbox). Its layout is the
 * bridge's actor's, entry by entry; its initial weights are orthogonal with the bridge's gains,
 * its target critics start as copies and its temperature at init_alpha; the bridge's learner
 * takes its whole state (gb_torch_learner_set_flat: actor, critics, temperature, Adam's
 * moments, the target critics), and the two then train on the same batches and the same noise
 * (gb_sac_mlp_set_noise, gb_torch_learner_set_noise): the losses, mean Q, mean |TD|, gradient
 * norm, temperature, entropy and the chunks' priorities agree call for call, and so does every
 * float of the state after one call and after twenty (get_flat), with and without importance
 * weights, a learned or fixed temperature, tanh and relu, lr annealing, clipped action columns,
 * invalid, terminated and truncated steps. A batch without a valid step changes nothing but
 * the counters. A trained bridge learner's state (a restored run's) continues in it alike, and
 * a learner given another's state at step n draws the same noise from there (its own
 * generator, seeded by the step). What it cannot train as the bridge would, it refuses, naming
 * the key. */
#include "test.h"
#include "workers/roles/flat_test_util.h"
#include "workers/roles/sac_mlp.h"
#include "workers/torch_test_util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void sac_cfg(gb_config *cfg, const char *extra)
{
    CHECK(make_cfg(cfg, "sac", extra) == 0);
    cfg->trainer.kernels = GB_KERNELS_GEARBOX;
    gb_config_algorithm *ac = &cfg->trainer.algorithm;
    ac->max_grad_norm = 0.5; /* the clip is exercised */
    ac->sac.tau = 0.05;
    ac->sac.init_alpha = 0.5;
    ac->sac.learn_alpha = 1;
    ac->sac.alpha_lr = 0.01;
}

/* The critics' floats in f: past the actor's layout, less log_alpha's one. */
static int64_t critics_n(const gb_flat_mlp *f)
{
    int64_t actor = 0;
    for (int i = 0; i < f->nlayout; i++) {
        int64_t k = 1;
        for (int d = 0; d < f->layout[i].rank; d++)
            k *= f->layout[i].shape[d];
        actor += k;
    }
    return f->n - actor - 1;
}

/* The largest difference between s's whole state and l's (get_flat: every parameter, Adam's
 * moments, the target critics), INFINITY when l refuses or the counters differ. */
static double state_diff(gb_sac_mlp *s, gb_torch_learner *l)
{
    const gb_flat_mlp *f = gb_sac_mlp_net(s);
    const size_t n = (size_t)f->n, nq = (size_t)critics_n(f);
    float *p = calloc(3 * n + nq, sizeof(float));
    int64_t adam = -1, steps = -1;
    gb_error err = {0};
    double d = INFINITY;
    if (p && gb_torch_learner_get_flat(l, p, p + n, p + 2 * n, p + 3 * n, f->n, &adam, &steps,
                                       &err) == 0 &&
        adam == f->adam_steps && steps == f->train_steps) {
        d = 0.0;
        const float *mine[4] = {f->p, f->m, f->v, gb_sac_mlp_target(s)};
        for (int k = 0; k < 4; k++)
            for (size_t i = 0; i < (k < 3 ? n : nq); i++)
                d = fmax(d, fabs((double)mine[k][i] - p[(size_t)k * n + i]));
    } else {
        fprintf(stderr, "  state_diff: %s (steps %lld, %lld)\n", err.msg, (long long)adam,
                (long long)steps);
    }
    free(p);
    return d;
}

static int take_over(const gb_config *cfg, const gb_torch_space *sp, gb_sac_mlp *s,
                     gb_torch_learner **out)
{
    return flat_take_over(cfg, sp, gb_sac_mlp_net(s), gb_sac_mlp_target(s), out);
}

static void test_layout_and_init(void)
{
    gb_config cfg;
    sac_cfg(&cfg, "");
    cfg.policy.model.hidden.v[0] = 37;
    cfg.policy.model.hidden.v[1] = 21;
    gb_torch_space sp = box_space();
    gb_sac_mlp *s = NULL;
    gb_torch_learner *l = NULL;
    gb_error err = {0};
    CHECK_OK(gb_sac_mlp_open(&cfg, &sp, 7, &s, &err));
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 7, &l, &err));
    if (!s || !l)
        return;
    const gb_flat_mlp *f = gb_sac_mlp_net(s);
    CHECK_OK(flat_layout_fits(f, l, &err));
    CHECK(f->nlayout == 8 && strcmp(f->layout[4].name, "mean.weight") == 0 &&
          strcmp(f->layout[6].name, "log_std.weight") == 0);
    /* the critics: (3 + 2) x 37 + 37, 37 x 21 + 21, 21 + 1 each */
    const int64_t nq = critics_n(f);
    CHECK_MSG(nq == 2 * (5 * 37 + 37 + 37 * 21 + 21 + 21 + 1), "critics %lld", (long long)nq);
    CHECK(memcmp(f->p + f->n - 1 - nq, gb_sac_mlp_target(s), sizeof(float) * (size_t)nq) == 0);
    CHECK(fabs(f->p[f->n - 1] - log(0.5)) < 1e-7);
    /* orthogonal rows (or columns) of norm gain, zero biases: the actor's entries, then the
     * critics' layers (weight, bias) past the layout */
    const float *q = f->p + f->n - 1 - nq;
    for (int i = 0; i < f->nlayout + 12; i++) {
        const int critic = i >= f->nlayout, c = critic ? (i - f->nlayout) % 6 : 0;
        static const int64_t shapes[6][2] = {{37, 5}, {37, 0}, {21, 37}, {21, 0}, {1, 21},
                                             {1, 0}};
        const int64_t rows = critic ? shapes[c][0] : f->layout[i].shape[0];
        const int64_t cols = critic ? shapes[c][1] : f->layout[i].rank == 2 ? f->layout[i].shape[1]
                                                                           : 0;
        const float *x = critic ? q : f->p + f->flat_at[i];
        if (critic)
            q += rows * (cols ? cols : 1);
        const char *name = critic ? "critic" : f->layout[i].name;
        if (cols == 0) {
            for (int64_t j = 0; j < rows; j++)
                CHECK_MSG(x[j] == 0.0f, "%s %d[%lld] = %g", name, i, (long long)j, x[j]);
            continue;
        }
        const double gain = critic ? (c == 4 ? 1.0 : sqrt(2.0))
                            : strncmp(name, "torso", 5) == 0 ? sqrt(2.0)
                                                             : 0.01;
        const int64_t k = rows < cols ? rows : cols;
        double worst = 0.0;
        for (int64_t a = 0; a < k; a++)
            for (int64_t b = 0; b < k; b++) {
                double dot = 0.0;
                for (int64_t j = 0; j < (rows < cols ? cols : rows); j++)
                    dot += rows < cols ? (double)x[a * cols + j] * x[b * cols + j]
                                       : (double)x[j * cols + a] * x[j * cols + b];
                worst = fmax(worst, fabs(dot - (a == b ? gain * gain : 0.0)));
            }
        CHECK_MSG(worst < 1e-5, "%s %d: off orthogonal by %g", name, i, worst);
    }
    gb_sac_mlp_close(s);
    gb_torch_learner_destroy(l);
}

/* One variant: twenty calls of each learner on the same batches and noise, from one state. */
static void learners_agree(const char *extra, int weighted, int learn_alpha)
{
    gb_config cfg;
    sac_cfg(&cfg, extra);
    cfg.trainer.algorithm.sac.learn_alpha = learn_alpha;
    cfg.trainer.algorithm.lr_anneal = 1;
    gb_torch_space sp = box_space();
    gb_sac_mlp *s = NULL;
    gb_torch_learner *l = NULL;
    gb_error err = {0};
    CHECK_OK(gb_sac_mlp_open(&cfg, &sp, 11, &s, &err));
    if (!s || take_over(&cfg, &sp, s, &l)) {
        CHECK(0);
        gb_sac_mlp_close(s);
        return;
    }
    CHECK(strcmp(gb_torch_learner_kernels(l), "gearbox C") == 0);
    noise zs = {17}, zl = {17};
    gb_sac_mlp_set_noise(s, noise_fill, &zs);
    CHECK_OK(gb_torch_learner_set_noise(l, noise_fill, &zl, &err));
    gb_flat_mlp *f = gb_sac_mlp_net(s);
    CHECK(flat_max_diff(f, l) == 0.0 && state_diff(s, l) == 0.0);
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
        CHECK_OK(gb_sac_mlp_train(s, &x.b, &so, po, &err));
        CHECK_OK(gb_torch_learner_train(l, &x.b, &sr, pr, &err));
        const double st[][2] = {{so.loss, sr.loss},           {so.value_loss, sr.value_loss},
                                {so.policy_loss, sr.policy_loss}, {so.q_mean, sr.q_mean},
                                {so.td_abs_mean, sr.td_abs_mean}, {so.grad_norm, sr.grad_norm},
                                {so.alpha, sr.alpha},         {so.entropy, sr.entropy},
                                {so.lr, sr.lr}};
        worst = worst_rel(worst, st, sizeof st / sizeof st[0]);
        for (int i = 0; i < TB_B; i++) {
            const double p[1][2] = {{po[i], pr[i]}};
            worst = worst_rel(worst, p, 1);
        }
        CHECK(so.samples == sr.samples && so.samples > 0);
        CHECK(so.gradient_steps == 1 && sr.gradient_steps == 1);
        if (call == 0)
            after_one = state_diff(s, l);
    }
    const double after = state_diff(s, l);
    CHECK(f->train_steps == gb_torch_learner_train_steps(l) && f->train_steps == 20);
    fprintf(stderr, "  weights %d, learn_alpha %d%s: the state after 1 call %.3g, after 20 "
                    "%.3g; stats and priorities %.3g relative\n", weighted, learn_alpha, extra,
            after_one, after, worst);
    double moved = 0.0; /* the two agree because both learn, not because neither does */
    for (int64_t i = 0; start && i < f->n; i++)
        moved = fmax(moved, fabs((double)f->p[i] - start[i]));
    free(start);
    CHECK_MSG(moved > 1e-3, "the parameters moved by %g at most", moved);
    CHECK(learn_alpha ? fabs(f->p[f->n - 1] - log(0.5)) > 1e-3
                      : f->p[f->n - 1] == (float)log(0.5));
    CHECK(after_one < 1e-6);
    CHECK(after < 1e-5);
    CHECK(worst < 1e-4);
    gb_sac_mlp_close(s);
    gb_torch_learner_destroy(l);
}

static void test_agrees(void)
{
    learners_agree("", 1, 1);
    learners_agree(", activation: relu", 0, 1);
    learners_agree(", activation: relu", 1, 0);
}

/* A batch of nothing but reset steps changes nothing but the counters; a malformed batch is
 * refused; SAC's state needs the target critics and its own count. */
static void test_edges(void)
{
    gb_config cfg;
    sac_cfg(&cfg, "");
    gb_torch_space sp = box_space();
    gb_sac_mlp *s = NULL;
    gb_torch_learner *l = NULL;
    gb_error err = {0};
    CHECK_OK(gb_sac_mlp_open(&cfg, &sp, 5, &s, &err));
    if (!s)
        return;
    gb_flat_mlp *f = gb_sac_mlp_net(s);
    const int64_t nq = critics_n(f);
    static test_batch x;
    gb_torch_stats st;
    float prio[TB_B];
    make_test_batch(&x, &sp, 77);
    CHECK_OK(gb_sac_mlp_train(s, &x.b, &st, NULL, &err));
    float *before = malloc(sizeof(float) * (size_t)(3 * f->n + nq));
    if (!before)
        return;
    memcpy(before, f->p, sizeof(float) * (size_t)f->n);
    memcpy(before + f->n, f->m, sizeof(float) * (size_t)f->n);
    memcpy(before + 2 * f->n, f->v, sizeof(float) * (size_t)f->n);
    memcpy(before + 3 * f->n, gb_sac_mlp_target(s), sizeof(float) * (size_t)nq);
    memset(x.valid, 0, sizeof x.valid);
    CHECK_OK(gb_sac_mlp_train(s, &x.b, &st, prio, &err));
    CHECK(st.samples == 0 && st.gradient_steps == 0 && st.loss == 0.0);
    CHECK(memcmp(before, f->p, sizeof(float) * (size_t)f->n) == 0);
    CHECK(memcmp(before + f->n, f->m, sizeof(float) * (size_t)f->n) == 0);
    CHECK(memcmp(before + 2 * f->n, f->v, sizeof(float) * (size_t)f->n) == 0);
    CHECK(memcmp(before + 3 * f->n, gb_sac_mlp_target(s), sizeof(float) * (size_t)nq) == 0);
    for (int i = 0; i < TB_B; i++)
        CHECK(fabsf(prio[i] - 1e-6f) < 1e-12f);
    CHECK(f->train_steps == 2 && f->version == 2 && f->adam_steps == 1);
    free(before);
    CHECK(take_over(&cfg, &sp, s, &l) == 0);
    if (l) {
        CHECK(flat_max_diff(f, l) == 0.0 && state_diff(s, l) == 0.0);
        CHECK(gb_torch_learner_set_flat(l, f->p, f->m, f->v, NULL, f->n, f->adam_steps, 3,
                                        &err) == GB_EINVAL);
        CHECK(strstr(err.msg, "target") != NULL);
        CHECK(gb_torch_learner_set_flat(l, f->p, f->m, f->v, gb_sac_mlp_target(s), f->n - 1,
                                        f->adam_steps, 3, &err) == GB_EINVAL);
        CHECK(state_diff(s, l) == 0.0); /* (refused: nothing changed) */
        gb_torch_learner_destroy(l);
    }
    make_test_batch(&x, &sp, 79);
    x.b.truncated = NULL;
    CHECK(gb_sac_mlp_train(s, &x.b, &st, NULL, &err) == GB_EINVAL);
    gb_sac_mlp_close(s);
}

/* A restored run: the bridge's learner trained (as from a checkpoint) gives its whole state to
 * a learner without libtorch (get_flat), which then trains as the bridge's goes on training on
 * the same noise. And a learner given another's state at step n (the same seed: a restart's)
 * draws its own noise from there as that one does: the two stay bit-identical. */
static void test_continues_restored(void)
{
    gb_config cfg;
    sac_cfg(&cfg, "");
    gb_torch_space sp = box_space();
    gb_torch_learner *l = NULL;
    gb_sac_mlp *s = NULL, *a = NULL, *b = NULL;
    gb_error err = {0};
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 4, &l, &err));
    CHECK_OK(gb_sac_mlp_open(&cfg, &sp, 9, &s, &err));
    CHECK_OK(gb_sac_mlp_open(&cfg, &sp, 9, &a, &err));
    CHECK_OK(gb_sac_mlp_open(&cfg, &sp, 9, &b, &err));
    if (!l || !s || !a || !b)
        return;
    static test_batch x;
    gb_torch_stats so, sr;
    for (int call = 0; call < 5; call++) {
        make_test_batch(&x, &sp, 300u + (unsigned)call);
        CHECK_OK(gb_torch_learner_train(l, &x.b, &sr, NULL, &err));
    }
    gb_flat_mlp *f = gb_sac_mlp_net(s);
    CHECK(flat_max_diff(f, l) > 0.0); /* other initial weights, other counters */
    CHECK_OK(gb_torch_learner_get_flat(l, f->p, f->m, f->v, gb_sac_mlp_target(s), f->n,
                                       &f->adam_steps, &f->train_steps, &err));
    f->version = gb_torch_model_version(gb_torch_learner_model(l));
    CHECK(f->train_steps == 5 && f->adam_steps == 5);
    CHECK(flat_max_diff(f, l) == 0.0 && state_diff(s, l) == 0.0);
    noise zs = {23}, zl = {23};
    gb_sac_mlp_set_noise(s, noise_fill, &zs);
    CHECK_OK(gb_torch_learner_set_noise(l, noise_fill, &zl, &err));
    double worst = 0.0;
    for (int call = 0; call < 5; call++) { /* the targets and the temperature came too */
        make_test_batch(&x, &sp, 400u + (unsigned)call);
        CHECK_OK(gb_sac_mlp_train(s, &x.b, &so, NULL, &err));
        CHECK_OK(gb_torch_learner_train(l, &x.b, &sr, NULL, &err));
        const double st[][2] = {{so.loss, sr.loss}, {so.alpha, sr.alpha}};
        worst = worst_rel(worst, st, 2);
    }
    CHECK_MSG(worst < 1e-5, "stats %.3g relative", worst);
    CHECK(state_diff(s, l) < 1e-5);
    /* a restart: b takes a's state at step 3; both draw the step's noise from the seed */
    gb_flat_mlp *fa = gb_sac_mlp_net(a), *fb = gb_sac_mlp_net(b);
    const int64_t nq = critics_n(fa);
    for (int call = 0; call < 6; call++) {
        if (call == 3) {
            memcpy(fb->p, fa->p, sizeof(float) * 4 * (size_t)fa->n); /* p, g, m, v */
            memcpy(gb_sac_mlp_target(b), gb_sac_mlp_target(a), sizeof(float) * (size_t)nq);
            fb->adam_steps = fa->adam_steps;
            fb->train_steps = fa->train_steps;
        }
        make_test_batch(&x, &sp, 500u + (unsigned)call);
        CHECK_OK(gb_sac_mlp_train(a, &x.b, &so, NULL, &err));
        if (call >= 3)
            CHECK_OK(gb_sac_mlp_train(b, &x.b, &sr, NULL, &err));
    }
    CHECK(memcmp(fa->p, fb->p, sizeof(float) * (size_t)fa->n) == 0);
    CHECK(memcmp(gb_sac_mlp_target(a), gb_sac_mlp_target(b), sizeof(float) * (size_t)nq) == 0);
    gb_sac_mlp_close(s);
    gb_sac_mlp_close(a);
    gb_sac_mlp_close(b);
    gb_torch_learner_destroy(l);
}

static int open_sac(const gb_config *cfg, const gb_torch_space *sp, gb_error *err)
{
    gb_sac_mlp *s = NULL;
    int rc = gb_sac_mlp_open(cfg, sp, 1, &s, err);
    CHECK(rc == 0 || !s);
    gb_sac_mlp_close(s);
    return rc;
}

/* What it cannot train as the bridge would, it refuses, naming the key. */
static void test_refuses(void)
{
    static const flat_refusal cases[] = {
        {"sac", ", layer_norm: true", "policy.model.layer_norm", GB_KERNELS_GEARBOX, 1},
        {"sac", ", normalize_obs: true", "policy.model.normalize_obs", GB_KERNELS_GEARBOX, 1},
        {"sac", ", activation: elu", "policy.model.activation", GB_KERNELS_GEARBOX, 1},
        {"sac", "", "trainer.kernels", GB_KERNELS_LIBTORCH, 1},
        {"ppo", "", "trainer.algorithm", GB_KERNELS_GEARBOX, 1},
        {"sac", "", "action space", GB_KERNELS_GEARBOX, 0},
    };
    flat_refusals(cases, sizeof cases / sizeof cases[0], open_sac);
    gb_config cfg;
    sac_cfg(&cfg, "");
    gb_torch_space sp = box_space();
    sp.action_high[1] = INFINITY;
    gb_error err = {0};
    CHECK(open_sac(&cfg, &sp, &err) == GB_EUNSUPPORTED);
    CHECK(strstr(err.msg, "finite") != NULL);
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
