/* tests/workers/torch/test_torch_r2d2.c: DQN with a recurrent core (R2D2) through the C API:
 * the Q-values the learner trains on (each chunk replayed from its stored state, the burn-in
 * rows stepped, the rest as one sequence) against a reference computed step by step by an actor's
 * model_act_state over the same rows, with reset rows at the start, in the middle and at the end,
 * for lstm, gru and transformer cores and a TorchScript model with state of its own
 * (policy.model.torchscript_state), with and without burn-in; the burn-in rows take no part in
 * the loss or the priorities (rewards there change nothing, one after it does); a training step
 * changes the forward; the value rescaling and its inverse. argv[1]: a scratch folder. */
#include "test.h"
#include "workers/torch_test_util.h"
#include "workers/torch/testing.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static const char *scratch = ".";

enum { B = 3, T = 9, OBS = 4, NA = 3, WARM = 4, MAXS = 128 };

/* B chunks of T rows as actors make them, and the Q-values the actor saw at every row. */
typedef struct chunks {
    float obs[B * T * OBS], next[B * OBS], rew[B * T], logp[B * T];
    float q[B * (T + 1) * NA]; /* the actor's, row T: next_obs's */
    float state0[B * MAXS];
    int64_t act[B * T];
    uint8_t term[B * T], trunc[B * T], valid[B * T];
    gb_torch_batch b;
} chunks;

/* Steps the B streams as one batch of rows: WARM steps before the chunk (state0 not zero), then
 * T rows, each from the state the previous row left, zeroed after a reset row (valid 0); then
 * next_obs from the state after row T-1. */
static void act_chunks(gb_torch_model *m, chunks *x)
{
    gb_error err = {0};
    const int64_t S = gb_torch_model_state_size(m);
    float state[B * MAXS] = {0}, row[B * OBS], qrow[B * NA], v[B], lp[B];
    int64_t a[B];
    memset(x, 0, sizeof *x);
    memset(x->valid, 1, sizeof x->valid);
    x->valid[0 * T + 4] = 0;     /* a reset row after the burn-in */
    x->valid[1 * T + 1] = 0;     /* one inside the burn-in */
    x->valid[2 * T + T - 1] = 0; /* at the end: next_obs enters from zeros */
    x->term[0 * T + 3] = 1;      /* the episodes the reset rows end */
    x->trunc[1 * T + 0] = 1;
    x->term[2 * T + T - 2] = 1;
    for (int k = 0; k < WARM + T; k++) {
        int t = k - WARM;
        fill(row, B * OBS, 300u + (unsigned)k);
        if (t == 0)
            memcpy(x->state0, state, sizeof(float) * (size_t)(B * S));
        gb_torch_act_out out = {a, lp, v, qrow};
        CHECK_OK(gb_torch_model_act_state(m, row, B, 1, 0.0, NULL, state, state, &out, &err));
        for (int bi = 0; bi < B && t >= 0; bi++) {
            memcpy(&x->obs[(bi * T + t) * OBS], &row[bi * OBS], sizeof(float) * OBS);
            memcpy(&x->q[(bi * (T + 1) + t) * NA], &qrow[bi * NA], sizeof(float) * NA);
            x->act[bi * T + t] = (bi + t) % NA;
            x->rew[bi * T + t] = x->valid[bi * T + t] ? 0.25f * (float)(t % 3) : 0.0f;
            if (!x->valid[bi * T + t])
                memset(&state[bi * S], 0, sizeof(float) * (size_t)S);
        }
    }
    fill(x->next, B * OBS, 777u);
    gb_torch_act_out out = {a, lp, v, qrow};
    float scratch[B * MAXS];
    CHECK_OK(gb_torch_model_act_state(m, x->next, B, 1, 0.0, NULL, state, scratch, &out, &err));
    for (int bi = 0; bi < B; bi++)
        memcpy(&x->q[(bi * (T + 1) + T) * NA], &qrow[bi * NA], sizeof(float) * NA);
    gb_torch_batch b = {B, T, x->obs, x->next, x->act, x->rew, x->term, x->trunc, x->valid,
                        x->logp, NULL, 0, x->state0, 0};
    x->b = b;
}

static int make_r2d2_cfg(gb_config *cfg, const char *core, int burn_in)
{
    if (strcmp(core, "torchscript") == 0) { /* a user's module with 16 floats of state */
        gb_error err = {0};
        if (make_cfg(cfg, "dqn", ""))
            return -1;
        snprintf(cfg->policy.model.torchscript, sizeof cfg->policy.model.torchscript,
                 "%s/r2d2_state.pt", scratch);
        CHECK_OK(gb_torch_write_test_script_state(cfg->policy.model.torchscript, OBS, NA, 16,
                                                  GB_ALGO_DQN, 7, &err));
        cfg->policy.model.type = GB_MODEL_TORCHSCRIPT;
        cfg->policy.model.torchscript_state = 16;
        cfg->trainer.algorithm.dqn.burn_in = burn_in;
        cfg->trainer.algorithm.dqn.n_step = 3;
        return 0;
    }
    char extra[192];
    snprintf(extra, sizeof extra, ", core: %s, core_size: 16%s", core,
             strcmp(core, "transformer") == 0
                 ? ", core_layers: 2, core_heads: 2, core_memory: 3" : "");
    if (make_cfg(cfg, "dqn", extra))
        return -1;
    cfg->trainer.algorithm.dqn.burn_in = burn_in;
    cfg->trainer.algorithm.dqn.n_step = 3;
    return 0;
}

/* The learner's Q over the chunks against the actor's, row by row. */
static void agreement(const char *core, int burn_in)
{
    gb_error err = {0};
    gb_config cfg;
    CHECK(make_r2d2_cfg(&cfg, core, burn_in) == 0);
    gb_torch_space sp = discrete_space();
    gb_torch_learner *l = NULL;
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 21, &l, &err));
    if (!l)
        return;
    static chunks x;
    act_chunks(gb_torch_learner_model(l), &x);
    float q[B * (T + 1) * NA];
    CHECK_OK(gb_torch_learner_q_rows(l, &x.b, q, &err));
    double d = 0, s0 = 0;
    for (int i = 0; i < B * (T + 1) * NA; i++)
        d = fmax(d, fabs(q[i] - x.q[i]));
    for (int i = 0; i < B * 16; i++)
        s0 = fmax(s0, fabs(x.state0[i]));
    fprintf(stderr, "  %s, burn-in %d: max |Q diff| %.3g (state0 max %.3g)\n", core, burn_in, d,
            s0);
    CHECK(d < 1e-5);
    CHECK(s0 > 1e-3);
    /* without the stored state the learner replays other Q-values: the check can fail */
    x.b.state0 = NULL;
    CHECK_OK(gb_torch_learner_q_rows(l, &x.b, q, &err));
    CHECK(fabs(q[0] - x.q[0]) > 1e-5);
    x.b.state0 = x.state0;
    /* one training step changes the forward */
    gb_torch_stats st;
    float prio[B];
    CHECK_OK(gb_torch_learner_train(l, &x.b, &st, prio, &err));
    CHECK(isfinite(st.loss) && st.loss > 0 && st.gradient_steps == 1);
    CHECK_OK(gb_torch_learner_q_rows(l, &x.b, q, &err));
    double moved = 0;
    for (int i = 0; i < B * (T + 1) * NA; i++)
        moved = fmax(moved, fabs(q[i] - x.q[i]));
    CHECK(moved > 1e-6);
    gb_torch_learner_destroy(l);
}

/* One step's loss, samples and priorities on x with a fresh learner of seed 5. */
static void train_once(const gb_config *cfg, chunks *x, gb_torch_stats *st, float prio[B])
{
    gb_error err = {0};
    gb_torch_space sp = discrete_space();
    gb_torch_learner *l = NULL;
    CHECK_OK(gb_torch_learner_create(cfg, &sp, 5, &l, &err));
    if (!l)
        return;
    act_chunks(gb_torch_learner_model(l), x);
    CHECK_OK(gb_torch_learner_train(l, &x->b, st, prio, &err));
    gb_torch_learner_destroy(l);
}

/* The burn-in rows warm the state up and nothing else: rewards there change neither the loss nor
 * the priorities; a reward after them changes both. Samples count the valid rows after it. */
static void test_burn_in_no_loss(void)
{
    const int K = 3;
    gb_config cfg;
    CHECK(make_r2d2_cfg(&cfg, "lstm", K) == 0);
    static chunks x, y;
    gb_torch_stats a, b, c;
    float pa[B], pb[B], pc[B];
    train_once(&cfg, &x, &a, pa);
    CHECK_EQ_INT(a.samples, B * (T - K) - 2); /* two reset rows after the burn-in */
    /* the same step with rewards of 1000 in the burn-in rows */
    gb_error err = {0};
    gb_torch_space sp = discrete_space();
    gb_torch_learner *l = NULL;
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 5, &l, &err));
    if (!l)
        return;
    act_chunks(gb_torch_learner_model(l), &y);
    for (int bi = 0; bi < B; bi++)
        for (int t = 0; t < K; t++)
            y.rew[bi * T + t] = 1000.0f;
    CHECK_OK(gb_torch_learner_train(l, &y.b, &b, pb, &err));
    gb_torch_learner_destroy(l);
    CHECK(a.loss == b.loss);
    CHECK(memcmp(pa, pb, sizeof pa) == 0);
    /* one reward after the burn-in, in chunk 1 */
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 5, &l, &err));
    if (!l)
        return;
    act_chunks(gb_torch_learner_model(l), &y);
    y.rew[1 * T + K + 1] = 1000.0f;
    CHECK_OK(gb_torch_learner_train(l, &y.b, &c, pc, &err));
    gb_torch_learner_destroy(l);
    CHECK(c.loss > a.loss);
    CHECK(pc[1] > 10 * pa[1] && pc[0] == pa[0] && pc[2] == pa[2]);
    /* without a burn-in the same rewards reach the loss */
    cfg.trainer.algorithm.dqn.burn_in = 0;
    train_once(&cfg, &x, &a, pa);
    CHECK_EQ_INT(a.samples, B * T - 3);
}

/* h and its inverse: h(0) = 0, odd, compresses (h(100) ~ 9.1), h(h^-1(x)) = x; with
 * dqn.value_rescale a training step runs and its priorities differ from the plain targets'. */
static void test_value_rescale(void)
{
    gb_error err = {0};
    float x[6] = {0.0f, 1.0f, -1.0f, 100.0f, -250.0f, 1e4f}, h[6], back[6];
    CHECK_OK(gb_torch_value_rescale(x, 6, 0, h, &err));
    CHECK_OK(gb_torch_value_rescale(h, 6, 1, back, &err));
    CHECK(h[0] == 0.0f && h[1] == -h[2]);
    CHECK(fabs(h[3] - (sqrt(101.0) - 1.0 + 0.1)) < 1e-4);
    for (int i = 0; i < 6; i++)
        CHECK_MSG(fabs(back[i] - x[i]) <= 1e-4 * fmax(1.0, fabs(x[i])), "h^-1(h(%g)) = %g", x[i],
                  back[i]);
    gb_config cfg;
    CHECK(make_r2d2_cfg(&cfg, "gru", 2) == 0);
    static chunks c;
    gb_torch_stats a, b;
    float pa[B], pb[B];
    train_once(&cfg, &c, &a, pa);
    cfg.trainer.algorithm.dqn.value_rescale = 1;
    train_once(&cfg, &c, &b, pb);
    CHECK(isfinite(b.loss) && memcmp(pa, pb, sizeof pa) != 0);
}

static void test_agreement(void)
{
    agreement("lstm", 0);
    agreement("lstm", 3);
    agreement("gru", 3);
    agreement("transformer", 3);
    agreement("transformer", 5);
    agreement("torchscript", 0);
    agreement("torchscript", 3);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        scratch = argv[1];
    TEST_RUN(test_agreement);
    TEST_RUN(test_burn_in_no_loss);
    TEST_RUN(test_value_rescale);
    return test_main_result();
}
