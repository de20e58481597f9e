/* tests/workers/roles/test_ppo_mlp.c: the trainer's PPO learner without libtorch
 * (workers/roles/ppo_mlp.h) against the bridge's (trainer.kernels gearbox). Its layout is the
 * bridge model's, entry by entry; its initial weights are orthogonal with the bridge's gains;
 * the bridge's learner takes its state (gb_torch_learner_set_flat) and the two then train on
 * the same batches: categorical and Gaussian heads, tanh and relu, odd widths, the entropy
 * bonus, the clipped value loss and advantage normalisation on and off, invalid steps,
 * priorities. One minibatch an epoch, so that the two draw the same minibatches (their shuffles
 * are their own generators'): the loss terms, gradient norm, explained variance and priorities
 * agree, and so do the parameters after one call and after ten. A learner restored from a
 * checkpoint trains on as the one that wrote it would have. What it cannot train as the bridge
 * would, it refuses, naming the key. */
#include "test.h"
#include "workers/roles/flat_test_util.h"
#include "workers/roles/ppo_mlp.h"
#include "workers/torch/mlp_train.h"
#include "workers/torch_test_util.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static double max_diff(gb_ppo_mlp *q, gb_torch_learner *l)
{
    return flat_max_diff(gb_ppo_mlp_net(q), l);
}

static int take_over(const gb_config *cfg, const gb_torch_space *sp, gb_ppo_mlp *q,
                     gb_torch_learner **out)
{
    return flat_take_over(cfg, sp, gb_ppo_mlp_net(q), NULL, out);
}

static void check_layout_and_init(int discrete, const char *extra)
{
    gb_config cfg;
    CHECK(make_cfg(&cfg, "ppo", extra) == 0);
    cfg.policy.model.hidden.n = 2;
    cfg.policy.model.hidden.v[0] = 37;
    cfg.policy.model.hidden.v[1] = 21;
    cfg.policy.model.log_std_init = -0.5;
    cfg.trainer.kernels = GB_KERNELS_GEARBOX;
    gb_torch_space sp = discrete ? discrete_space() : box_space();
    gb_ppo_mlp *q = NULL;
    gb_torch_learner *l = NULL;
    gb_error err = {0};
    CHECK_OK(gb_ppo_mlp_open(&cfg, &sp, 7, &q, &err));
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 7, &l, &err));
    if (!q || !l)
        return;
    const gb_param_entry *ta = gb_ppo_mlp_net(q)->layout, *tb;
    const int na = gb_ppo_mlp_net(q)->nlayout;
    const uint64_t bytes_a = gb_ppo_mlp_net(q)->total;
    int nb;
    uint64_t bytes_b;
    gb_torch_model_layout(gb_torch_learner_model(l), &tb, &nb, &bytes_b);
    CHECK_OK(gb_param_layout_fits(ta, na, (size_t)bytes_a, tb, nb, bytes_b, &err));
    /* orthogonal rows (or columns) of norm gain; zero biases; log_std at its initial value */
    float *w = calloc(1, bytes_a);
    CHECK_OK(gb_flat_mlp_export(gb_ppo_mlp_net(q), w, bytes_a, NULL, &err));
    for (int i = 0; w && i < na; i++) {
        const float *x = (const float *)((const char *)w + ta[i].offset);
        const int64_t rows = ta[i].shape[0], cols = ta[i].shape[1];
        if (ta[i].rank == 1) {
            const double want = strcmp(ta[i].name, "log_std") == 0 ? -0.5 : 0.0;
            for (int64_t j = 0; j < rows; j++)
                CHECK_MSG(x[j] == (float)want, "%s[%lld] = %g", ta[i].name, (long long)j, x[j]);
            continue;
        }
        const double gain = strncmp(ta[i].name, "pi.", 3) == 0  ? 0.01
                            : strncmp(ta[i].name, "v.", 2) == 0 ? 1.0
                                                                : sqrt(2.0);
        const int64_t k = rows <= cols ? rows : cols; /* the orthogonal vectors */
        double worst = 0.0;
        for (int64_t a = 0; a < k; a++)
            for (int64_t b = 0; b < k; b++) {
                double d = 0.0;
                for (int64_t j = 0; j < (rows <= cols ? cols : rows); j++)
                    d += rows <= cols ? (double)x[a * cols + j] * x[b * cols + j]
                                      : (double)x[j * cols + a] * x[j * cols + b];
                worst = fmax(worst, fabs(d - (a == b ? gain * gain : 0.0)) / (gain * gain));
            }
        CHECK_MSG(worst < 1e-5, "%s: not orthogonal (%g)", ta[i].name, worst);
    }
    free(w);
    gb_ppo_mlp_close(q);
    gb_torch_learner_destroy(l);
}

static void test_layout_and_init(void)
{
    check_layout_and_init(1, "");
    check_layout_and_init(0, ", activation: relu");
}

static void learners_agree(int discrete, const char *extra, double entropy_coef, int clip_value,
                           int normalize)
{
    gb_config cfg;
    CHECK(make_cfg(&cfg, "ppo", extra) == 0);
    cfg.policy.model.hidden.n = 2;
    cfg.policy.model.hidden.v[0] = 37; /* odd widths: every tail of the tiles */
    cfg.policy.model.hidden.v[1] = 21;
    cfg.trainer.kernels = GB_KERNELS_GEARBOX;
    cfg.trainer.algorithm.ppo.entropy_coef = entropy_coef;
    cfg.trainer.algorithm.ppo.clip_value = clip_value;
    cfg.trainer.algorithm.ppo.normalize_advantages = normalize;
    cfg.trainer.algorithm.ppo.epochs = 4;
    cfg.trainer.algorithm.ppo.minibatches = 1;
    cfg.trainer.algorithm.lr = 0.003;
    cfg.trainer.algorithm.lr_anneal = 1;
    gb_torch_space sp = discrete ? discrete_space() : box_space();
    gb_ppo_mlp *q = NULL;
    gb_torch_learner *l = NULL;
    gb_error err = {0};
    CHECK_OK(gb_ppo_mlp_open(&cfg, &sp, 11, &q, &err));
    if (!q || take_over(&cfg, &sp, q, &l)) {
        CHECK(0);
        gb_ppo_mlp_close(q);
        return;
    }
    CHECK(strcmp(gb_torch_learner_kernels(l), "gearbox C") == 0);
    CHECK(max_diff(q, l) == 0.0);
    static test_batch x;
    double after_one = 0, worst = 0;
    for (int call = 0; call < 10; call++) {
        make_test_batch(&x, &sp, 500u + (unsigned)call);
        gb_flat_mlp_set_progress(gb_ppo_mlp_net(q), 0.05 * call);
        gb_torch_learner_set_progress(l, 0.05 * call);
        gb_torch_stats so, sr;
        worst = ppo_train_both(q, l, &x.b, 4, worst, &so, &sr);
        if (call == 0) {
            after_one = max_diff(q, l);
            CHECK(sr.clip_fraction > 0.0); /* the clipped branch is exercised */
        }
    }
    const double after_ten = max_diff(q, l);
    CHECK(gb_ppo_mlp_net(q)->train_steps == gb_torch_learner_train_steps(l));
    fprintf(stderr, "  %s%s, entropy %g, clip_value %d, normalize %d: parameters after 1 call "
                    "%.3g, after 10 %.3g; stats and priorities %.3g relative\n",
            discrete ? "categorical" : "gaussian", extra, entropy_coef, clip_value, normalize,
            after_one, after_ten, worst);
    CHECK(after_one < 1e-5); /* 4 Adam steps of lr 0.003 */
    CHECK(after_ten < 1e-4);
    CHECK(worst < 1e-4);
    gb_ppo_mlp_close(q);
    gb_torch_learner_destroy(l);
}

static void test_agrees(void)
{
    learners_agree(1, "", 0.01, 1, 1);
    learners_agree(1, ", activation: relu", 0.0, 0, 0);
    learners_agree(0, "", 0.01, 1, 1);
    learners_agree(0, ", activation: relu", 0.0, 0, 1);
}

/* Several minibatches an epoch (the shuffles differ from the bridge's): it still trains, and a
 * learner of the bridge takes over where it stopped and trains on. */
static void test_minibatches(void)
{
    gb_config cfg;
    CHECK(make_cfg(&cfg, "ppo", "") == 0);
    cfg.trainer.kernels = GB_KERNELS_GEARBOX;
    cfg.trainer.algorithm.ppo.epochs = 3;
    cfg.trainer.algorithm.ppo.minibatches = 5; /* of about 233 valid steps: a short last one */
    gb_torch_space sp = discrete_space();
    gb_ppo_mlp *q = NULL;
    gb_torch_learner *l = NULL;
    gb_error err = {0};
    CHECK_OK(gb_ppo_mlp_open(&cfg, &sp, 3, &q, &err));
    if (!q)
        return;
    static test_batch x;
    gb_torch_stats st;
    for (int call = 0; call < 3; call++) {
        make_test_batch(&x, &sp, 700u + (unsigned)call);
        CHECK_OK(gb_ppo_mlp_train(q, &x.b, &st, NULL, &err));
        CHECK(st.gradient_steps == 15 && isfinite(st.loss) && st.grad_norm > 0.0);
    }
    CHECK(gb_ppo_mlp_net(q)->version == 3 && gb_ppo_mlp_net(q)->train_steps == 3);
    CHECK(take_over(&cfg, &sp, q, &l) == 0);
    if (l) {
        CHECK(max_diff(q, l) == 0.0 && gb_torch_learner_train_steps(l) == 3);
        CHECK_OK(gb_torch_learner_train(l, &x.b, &st, NULL, &err));
        CHECK(isfinite(st.loss) && gb_torch_model_version(gb_torch_learner_model(l)) == 4);
        /* another count of parameters, or a target network PPO has not, is refused */
        const gb_flat_mlp *f = gb_ppo_mlp_net(q);
        CHECK(gb_torch_learner_set_flat(l, f->p, f->m, f->v, NULL, f->n - 1, f->adam_steps, 3,
                                        &err) == GB_EINVAL);
        CHECK(gb_torch_learner_set_flat(l, f->p, f->m, f->v, f->p, f->n, f->adam_steps, 3,
                                        &err) == GB_EINVAL);
        CHECK(strstr(err.msg, "target") != NULL);
        gb_torch_learner_destroy(l);
    }
    /* a malformed batch */
    x.b.logp = NULL;
    CHECK(gb_ppo_mlp_train(q, &x.b, &st, NULL, &err) == GB_EINVAL);
    gb_ppo_mlp_close(q);
}

/* A learner restored from a checkpoint (the trainer's resume: its state into the bridge's
 * learner, saved, loaded into another, and out into a new C learner) draws the shuffles the one
 * that wrote it would have: the two train on, several minibatches an epoch, to the same
 * parameters bit for bit. One restored at another step shuffles otherwise. */
static void test_continues_restored(void)
{
    gb_config cfg;
    CHECK(make_cfg(&cfg, "ppo", "") == 0);
    cfg.trainer.kernels = GB_KERNELS_GEARBOX;
    cfg.trainer.algorithm.ppo.epochs = 2;
    cfg.trainer.algorithm.ppo.minibatches = 4;
    gb_torch_space sp = discrete_space();
    gb_ppo_mlp *a = NULL, *r = NULL, *late = NULL;
    gb_torch_learner *l = NULL, *l2 = NULL, *mid = NULL;
    gb_error err = {0};
    CHECK_OK(gb_ppo_mlp_open(&cfg, &sp, 5, &a, &err));
    CHECK_OK(gb_ppo_mlp_open(&cfg, &sp, 5, &r, &err));
    CHECK_OK(gb_ppo_mlp_open(&cfg, &sp, 5, &late, &err));
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 99, &l2, &err));
    char dir[] = "/tmp/test_ppo_mlp.XXXXXX", path[64];
    if (!a || !r || !late || !l2 || !mkdtemp(dir)) {
        CHECK(0);
        goto out;
    }
    snprintf(path, sizeof path, "%s/learner.ckpt", dir);
    gb_flat_mlp *fa = gb_ppo_mlp_net(a), *fr = gb_ppo_mlp_net(r), *fl = gb_ppo_mlp_net(late);
    static test_batch x;
    gb_torch_stats st;
    for (int call = 0; call < 3; call++) {
        make_test_batch(&x, &sp, 900u + (unsigned)call);
        CHECK_OK(gb_ppo_mlp_train(a, &x.b, &st, NULL, &err));
        if (call == 1 && take_over(&cfg, &sp, a, &mid) == 0) /* late: restored at step 2 */
            CHECK_OK(gb_torch_learner_get_flat(mid, fl->p, fl->m, fl->v, NULL, fl->n,
                                               &fl->adam_steps, &fl->train_steps, &err));
    }
    CHECK(take_over(&cfg, &sp, a, &l) == 0);
    if (l) {
        CHECK_OK(gb_torch_learner_save(l, path, &err));
        CHECK_OK(gb_torch_learner_load(l2, path, &err));
        unlink(path);
    }
    rmdir(dir);
    CHECK_OK(gb_torch_learner_get_flat(l2, fr->p, fr->m, fr->v, NULL, fr->n, &fr->adam_steps,
                                       &fr->train_steps, &err));
    CHECK(fr->train_steps == 3 && fr->adam_steps == fa->adam_steps);
    memcpy(fl->p, fa->p, sizeof *fa->p * (size_t)fa->n); /* all of a's state but its step */
    memcpy(fl->m, fa->m, sizeof *fa->m * (size_t)fa->n);
    memcpy(fl->v, fa->v, sizeof *fa->v * (size_t)fa->n);
    fl->adam_steps = fa->adam_steps;
    CHECK(fl->train_steps == 2);
    for (int call = 0; call < 3; call++) {
        make_test_batch(&x, &sp, 950u + (unsigned)call);
        CHECK_OK(gb_ppo_mlp_train(a, &x.b, &st, NULL, &err));
        CHECK_OK(gb_ppo_mlp_train(r, &x.b, &st, NULL, &err));
        CHECK_OK(gb_ppo_mlp_train(late, &x.b, &st, NULL, &err));
    }
    CHECK(memcmp(fa->p, fr->p, sizeof *fa->p * (size_t)fa->n) == 0);
    CHECK(memcmp(fa->v, fr->v, sizeof *fa->v * (size_t)fa->n) == 0);
    CHECK(memcmp(fa->p, fl->p, sizeof *fa->p * (size_t)fa->n) != 0);
out:
    gb_ppo_mlp_close(a);
    gb_ppo_mlp_close(r);
    gb_ppo_mlp_close(late);
    gb_torch_learner_destroy(l);
    gb_torch_learner_destroy(l2);
    gb_torch_learner_destroy(mid);
}

/* Layers 160 wide: the large products go to libtorch's BLAS once it is given (as a trainer's
 * learner takes it once libtorch has loaded: bridge.h's large_product; counted here on the way),
 * and train as the tiles do, to float rounding. */
static int large_calls;
static void counted_large(int ta, int tb, int m, int n, int k, const float *a, int lda,
                          const float *b, int ldb, float *c, int ldc, int add)
{
    large_calls++;
    gb_torch()->large_product(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, add);
}

static void test_large_products(void)
{
    gb_config cfg;
    CHECK(make_cfg(&cfg, "ppo", "") == 0);
    cfg.trainer.kernels = GB_KERNELS_GEARBOX;
    cfg.policy.model.hidden.n = 2;
    cfg.policy.model.hidden.v[0] = cfg.policy.model.hidden.v[1] = 160;
    gb_torch_space sp = box_space();
    gb_ppo_mlp *tiles = NULL, *blas = NULL;
    gb_error err = {0};
    CHECK_OK(gb_ppo_mlp_open(&cfg, &sp, 8, &tiles, &err));
    CHECK_OK(gb_ppo_mlp_open(&cfg, &sp, 8, &blas, &err));
    if (!tiles || !blas)
        return;
    static test_batch x;
    gb_torch_stats st;
    make_test_batch(&x, &sp, 31u);
    gb_mlp_train_set_large(NULL);
    CHECK_OK(gb_ppo_mlp_train(tiles, &x.b, &st, NULL, &err));
    gb_mlp_train_set_large(counted_large);
    CHECK_OK(gb_ppo_mlp_train(blas, &x.b, &st, NULL, &err));
    gb_mlp_train_set_large(gb_torch()->large_product);
    CHECK_MSG(large_calls > 0, "no product went to the large products' function");
    const gb_flat_mlp *a = gb_ppo_mlp_net(tiles), *b = gb_ppo_mlp_net(blas);
    double worst = 0.0;
    for (int64_t i = 0; i < a->n; i++)
        worst = fmax(worst, fabs((double)a->p[i] - (double)b->p[i]));
    CHECK_MSG(worst < 1e-5, "parameters %.3g apart", worst);
    gb_ppo_mlp_close(tiles);
    gb_ppo_mlp_close(blas);
}

static int open_ppo(const gb_config *cfg, const gb_torch_space *sp, gb_error *err)
{
    gb_ppo_mlp *q = NULL;
    int rc = gb_ppo_mlp_open(cfg, sp, 1, &q, err);
    CHECK(rc == 0 || !q);
    gb_ppo_mlp_close(q);
    return rc;
}

/* What it cannot train as the bridge would, it refuses, naming the key. */
static void test_refuses(void)
{
    static const flat_refusal cases[] = {
        {"ppo", ", shared: true", "policy.model.shared", GB_KERNELS_GEARBOX, 0},
        {"ppo", ", layer_norm: true", "policy.model.layer_norm", GB_KERNELS_GEARBOX, 0},
        {"ppo", ", normalize_obs: true", "policy.model.normalize_obs", GB_KERNELS_GEARBOX, 0},
        {"ppo", ", activation: elu", "policy.model.activation", GB_KERNELS_GEARBOX, 0},
        {"ppo", "", "trainer.kernels", GB_KERNELS_LIBTORCH, 0},
        {"dqn", "", "trainer.algorithm", GB_KERNELS_GEARBOX, 0},
    };
    flat_refusals(cases, sizeof cases / sizeof cases[0], open_ppo);
    gb_config cfg;
    CHECK(make_cfg(&cfg, "ppo", "") == 0);
    cfg.trainer.kernels = GB_KERNELS_GEARBOX;
    cfg.trainer.algorithm.ppo.vtrace = 1;
    gb_torch_space sp = discrete_space();
    gb_error err = {0};
    CHECK(open_ppo(&cfg, &sp, &err) == GB_EUNSUPPORTED);
    CHECK(strstr(err.msg, "vtrace") != NULL);
}

int main(void)
{
    TEST_RUN(test_layout_and_init);
    TEST_RUN(test_agrees);
    TEST_RUN(test_minibatches);
    TEST_RUN(test_continues_restored);
    TEST_RUN(test_large_products);
    TEST_RUN(test_refuses);
    return test_main_result();
}
