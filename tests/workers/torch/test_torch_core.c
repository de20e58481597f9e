/* tests/workers/torch/test_torch_core.c: models with state (policy.model.core lstm, gru,
 * transformer; a TorchScript model with policy.model.torchscript_state) through the C API: an
 * actor's model_act_state stepped row by row over chunks with reset rows agrees with the learner's
 * sequence forward from state0; the reset rule (a reset row in the middle = two sequences, the
 * second from zero state; state0 honoured); state sizes; stateless act refused; export/import and
 * checkpoints carry the core; sac with a core refused; one recurrent PPO step, also with a cnn
 * torso on uint8 frames; a TorchScript model declaring another state size refused, and one
 * whose outputs do not fit the action space. argv[1]: a scratch folder. */
#include "test.h"
#include "workers/torch_test_util.h"
#include "workers/torch/testing.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *scratch = ".";

enum { B = 3, T = 7, OBS = 4, WARM = 5, MAXS = 128 };

/* A batch of B chunks of T steps as actors make them, and what they saw. */
typedef struct chunks {
    float obs[B * T * 4], next[B * 4], rew[B * T], logp[B * T];
    float value[B * (T + 1)]; /* the actor's values, row T: next_obs's */
    float state0[B * MAXS];
    int64_t dact[B * T];
    float cact[B * T * 2];
    uint8_t term[B * T], trunc[B * T], valid[B * T];
    gb_torch_batch b;
} chunks;

/* Acts as an actor does, the B streams as one batch of rows: WARM steps before the chunk (so
 * that state0 is not zero), then T rows, each row's state the one the previous row left, zeroed
 * after a reset row (valid 0); then next_obs's value from the state after row T-1. */
static void act_chunks(gb_torch_model *m, const gb_torch_space *sp, chunks *x)
{
    gb_error err = {0};
    const int64_t S = gb_torch_model_state_size(m);
    const int od = (int)sp->obs_shape[0], A = sp->discrete ? 1 : (int)sp->action_dim;
    float state[B * MAXS] = {0}, row[B * 4], lp[B], v[B];
    int64_t da[B];
    float ca[B * 2];
    memset(x, 0, sizeof *x);
    memset(x->valid, 1, sizeof x->valid);
    x->valid[0 * T + 2] = 0;     /* a reset row in the middle */
    x->valid[1 * T + 0] = 0;     /* at the start: row 1 enters from zeros */
    x->valid[1 * T + T - 1] = 0; /* at the end: next_obs enters from zeros */
    for (int k = 0; k < WARM + T; k++) {
        int t = k - WARM;
        fill(row, B * od, 100u + (unsigned)k);
        if (t == 0)
            memcpy(x->state0, state, sizeof(float) * (size_t)(B * S));
        gb_torch_act_out out = {sp->discrete ? (void *)da : (void *)ca, lp, v, NULL};
        CHECK_OK(gb_torch_model_act_state(m, row, B, 0, 0.0, NULL, state, state, &out, &err));
        for (int bi = 0; bi < B && t >= 0; bi++) {
            memcpy(&x->obs[(bi * T + t) * od], &row[bi * od], sizeof(float) * (size_t)od);
            x->dact[bi * T + t] = da[bi];
            memcpy(&x->cact[(bi * T + t) * A], &ca[bi * A], sizeof(float) * (size_t)A);
            x->logp[bi * T + t] = lp[bi];
            x->value[bi * (T + 1) + t] = v[bi];
            x->rew[bi * T + t] = 0.1f * (float)t;
            if (!x->valid[bi * T + t])
                memset(&state[bi * S], 0, sizeof(float) * (size_t)S);
        }
    }
    fill(x->next, B * od, 999u);
    float scratch_state[B * MAXS];
    gb_torch_act_out out = {sp->discrete ? (void *)da : (void *)ca, lp, v, NULL};
    CHECK_OK(gb_torch_model_act_state(m, x->next, B, 0, 0.0, NULL, state, scratch_state, &out,
                                      &err));
    for (int bi = 0; bi < B; bi++)
        x->value[bi * (T + 1) + T] = v[bi];
    gb_torch_batch b = {B, T, x->obs, x->next, sp->discrete ? (void *)x->dact : (void *)x->cact,
                        x->rew, x->term, x->trunc, x->valid, x->logp, NULL, 0, x->state0, 0};
    x->b = b;
}

static void make_core_cfg(gb_config *cfg, const char *core, int size)
{
    if (strcmp(core, "torchscript") == 0) { /* a user's module with size floats of state */
        gb_error err = {0};
        CHECK(make_cfg(cfg, "ppo", "") == 0);
        snprintf(cfg->policy.model.torchscript, sizeof cfg->policy.model.torchscript,
                 "%s/recurrent.pt", scratch);
        CHECK_OK(gb_torch_write_test_script_state(cfg->policy.model.torchscript, OBS, 3, size,
                                                  GB_ALGO_PPO, 5, &err));
        cfg->policy.model.type = GB_MODEL_TORCHSCRIPT;
        cfg->policy.model.torchscript_state = size;
        cfg->trainer.algorithm.ppo.epochs = 2;
        cfg->trainer.algorithm.ppo.minibatches = 2;
        return;
    }
    char extra[192];
    /* a transformer of 2 blocks of 2 heads looking 3 steps back: 2 x 3 x 16 + 3 = 99 floats */
    snprintf(extra, sizeof extra, ", core: %s, core_size: %d%s", core, size,
             strcmp(core, "transformer") == 0
                 ? ", core_layers: 2, core_heads: 2, core_memory: 3" : "");
    CHECK(make_cfg(cfg, "ppo", extra) == 0);
    cfg->trainer.algorithm.ppo.epochs = 2;
    cfg->trainer.algorithm.ppo.minibatches = 2;
}

/* The actor's logp and values against the learner's sequence forward over the same chunks;
 * then one recurrent PPO step on them. */
static void agreement(const char *core, gb_torch_space sp)
{
    gb_error err = {0};
    gb_config cfg;
    make_core_cfg(&cfg, core, 16);
    gb_torch_learner *l = NULL;
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 11, &l, &err));
    if (!l)
        return;
    gb_torch_model *m = gb_torch_learner_model(l);
    static chunks x;
    act_chunks(m, &sp, &x);
    float lp[B * T], v[B * (T + 1)];
    CHECK_OK(gb_torch_learner_sequence(l, &x.b, lp, v, &err));
    double dl = 0, dv = 0, ds = 0;
    for (int i = 0; i < B * T; i++)
        dl = fmax(dl, fabs(lp[i] - x.logp[i]));
    for (int i = 0; i < B * (T + 1); i++)
        dv = fmax(dv, fabs(v[i] - x.value[i]));
    for (int i = 0; i < B * 16; i++)
        ds = fmax(ds, fabs(x.state0[i]));
    fprintf(stderr, "  %s %s: max |logp diff| %.3g, max |value diff| %.3g (state0 max %.3g)\n",
            core, sp.discrete ? "discrete" : "box", dl, dv, ds);
    CHECK(dl < 1e-5 && dv < 1e-5);
    CHECK(ds > 1e-3); /* the warm-up left a state: state0 is exercised */
    /* without state0 the learner computes another forward: the comparison can fail */
    x.b.state0 = NULL;
    CHECK_OK(gb_torch_learner_sequence(l, &x.b, lp, v, &err));
    CHECK(fabs(v[0] - x.value[0]) > 1e-5);
    x.b.state0 = x.state0;
    gb_torch_stats st;
    uint64_t v0 = gb_torch_model_version(m);
    CHECK_OK(gb_torch_learner_train(l, &x.b, &st, NULL, &err));
    CHECK(isfinite(st.loss) && isfinite(st.policy_loss) && isfinite(st.value_loss));
    CHECK_EQ_INT(st.samples, B * T - 3);
    CHECK_EQ_INT(st.gradient_steps, 2 * 2); /* epochs x min(minibatches, B) */
    CHECK_EQ_INT(gb_torch_model_version(m), v0 + 1);
    /* the update changed the forward */
    float lp2[B * T];
    CHECK_OK(gb_torch_learner_sequence(l, &x.b, lp2, NULL, &err));
    double moved = 0;
    for (int i = 0; i < B * T; i++)
        moved = fmax(moved, fabs(lp2[i] - lp[i]));
    CHECK(moved > 1e-6);
    gb_torch_learner_destroy(l);
}

static void test_agreement_lstm(void) { agreement("lstm", discrete_space()); }
static void test_agreement_gru(void) { agreement("gru", discrete_space()); }
static void test_agreement_lstm_box(void) { agreement("lstm", box_space()); }
static void test_agreement_transformer(void) { agreement("transformer", discrete_space()); }
static void test_agreement_torchscript(void) { agreement("torchscript", discrete_space()); }

/* A TorchScript model whose state_size attribute is not the config's is refused. */
static void test_torchscript_state_mismatch(void)
{
    gb_error err = {0};
    gb_config cfg;
    make_core_cfg(&cfg, "torchscript", 16);
    cfg.policy.model.torchscript_state = 8;
    gb_torch_space sp = discrete_space();
    gb_torch_model *m = NULL;
    CHECK(gb_torch_model_create(&cfg, &sp, 3, &m, &err) == GB_EINVAL);
    CHECK(strstr(err.msg, "state_size") != NULL);
    gb_torch_model_destroy(m);
}

/* A TorchScript model whose outputs do not fit the space is refused at its first forward, the
 * message naming the file, the expected and the actual shapes: logits for 3 actions where the
 * space has 5; PPO over a box of 2 (mean [N, 3]); the stateless module's 2 outputs where a
 * stateful one's 3 are due. */
static void test_torchscript_shape_mismatch(void)
{
    gb_error err = {0};
    gb_config cfg;
    make_core_cfg(&cfg, "torchscript", 16);
    gb_torch_space sp = discrete_space();
    sp.n_actions = 5; /* the module returns 3 logits a row */
    gb_torch_model *m = NULL;
    CHECK_OK(gb_torch_model_create(&cfg, &sp, 3, &m, &err));
    float obs[B * OBS], state[B * 16] = {0};
    int64_t a[B];
    fill(obs, B * OBS, 7);
    gb_torch_act_out out = {a, NULL, NULL, NULL};
    if (m) {
        CHECK(gb_torch_model_act_state(m, obs, B, 0, 0.0, NULL, state, state, &out, &err) ==
              GB_EINVAL);
        fprintf(stderr, "  %s\n", err.msg);
        CHECK(strstr(err.msg, "recurrent.pt") && strstr(err.msg, "logits of shape [3, 3]") &&
              strstr(err.msg, "not [3, 5]") && strstr(err.msg, "5 discrete actions"));
    }
    gb_torch_model_destroy(m);
    m = NULL;
    sp = box_space();
    sp.obs_shape[0] = OBS;
    sp.action_dim = 3;
    sp.action_low[2] = -1.0f;
    sp.action_high[2] = 1.0f;
    CHECK_OK(gb_torch_model_create(&cfg, &sp, 3, &m, &err));
    if (m) {
        float ca[B * 3];
        gb_torch_act_out cout = {ca, NULL, NULL, NULL};
        CHECK(gb_torch_model_act_state(m, obs, B, 0, 0.0, NULL, state, state, &cout, &err) ==
              GB_EINVAL);
        CHECK(strstr(err.msg, "3 outputs, not 4") && strstr(err.msg, "mean [N, 3]"));
    }
    gb_torch_model_destroy(m);
}

/* One chunk's values through the learner's sequence forward. */
static void seq_values(gb_torch_learner *l, const float *obs, const float *next, int n,
                       const uint8_t *valid, const float *state0, float *v)
{
    gb_error err = {0};
    int64_t a[16] = {0};
    float r[16] = {0}, lp[16] = {0};
    uint8_t z[16] = {0};
    gb_torch_batch b = {1, n, obs, next, a, r, z, z, valid, lp, NULL, 0, state0, 0};
    CHECK_OK(gb_torch_learner_sequence(l, &b, NULL, v, &err));
}

/* A reset row in the middle of a chunk splits it into two sequences, the second from zero
 * state; a non-zero state0 changes row 0 and not the rows after the reset. */
static void test_reset_rule(void)
{
    gb_error err = {0};
    gb_config cfg;
    make_core_cfg(&cfg, "lstm", 8);
    gb_torch_space sp = discrete_space();
    gb_torch_learner *l = NULL;
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 5, &l, &err));
    if (!l)
        return;
    float obs[6 * OBS], next[OBS];
    fill(obs, 6 * OBS, 21);
    fill(next, OBS, 22);
    uint8_t valid[6] = {1, 1, 0, 1, 1, 1}, all[3] = {1, 1, 0};
    float whole[7], first[4], second[4], s0[16], with_s0[7];
    seq_values(l, obs, next, 6, valid, NULL, whole);
    /* rows 0..2, and row 3 as their next_obs (it follows the reset row 2) */
    seq_values(l, obs, obs + 3 * OBS, 3, all, NULL, first);
    /* rows 3..5 and next_obs from zero state */
    seq_values(l, obs + 3 * OBS, next, 3, NULL, NULL, second);
    double d = 0;
    for (int t = 0; t < 4; t++)
        d = fmax(d, fmax(fabs(whole[t] - first[t]), fabs(whole[3 + t] - second[t])));
    fprintf(stderr, "  reset row: max |diff| vs two sequences %.3g\n", d);
    CHECK(d < 1e-6);
    /* and the rows after the reset do depend on the state they start from */
    CHECK(fabs(whole[3] - whole[0]) > 1e-6 || fabs(whole[4] - whole[1]) > 1e-6);
    for (int i = 0; i < 16; i++)
        s0[i] = 0.5f;
    seq_values(l, obs, next, 6, valid, s0, with_s0);
    fprintf(stderr, "  state0: row 0 value %.6g (zeros: %.6g)\n", with_s0[0], whole[0]);
    CHECK(fabs(with_s0[0] - whole[0]) > 1e-4);
    for (int t = 3; t < 7; t++)
        CHECK_NEAR(with_s0[t], whole[t], 1e-6);
    gb_torch_learner_destroy(l);
}

/* State sizes, refusals of a stateless act, in-place state, export/import into another model. */
static void test_model_contract(void)
{
    gb_error err = {0};
    const char *cores[3] = {"lstm", "gru", "none"};
    gb_torch_space sp = discrete_space();
    for (int k = 0; k < 3; k++) {
        gb_config cfg;
        make_core_cfg(&cfg, cores[k], 12);
        gb_torch_model *m = NULL;
        CHECK_OK(gb_torch_model_create(&cfg, &sp, 3, &m, &err));
        if (!m)
            continue;
        CHECK_EQ_INT(gb_torch_model_state_size(m), gb_config_state_size(&cfg));
        CHECK_EQ_INT(gb_torch_model_state_size(m), k == 0 ? 24 : k == 1 ? 12 : 0);
        if (k == 2) { /* without a core, act_state is act_noise and takes no state */
            float o[2 * OBS], lp[2], v[2], lp2[2], v2[2];
            int64_t a[2], a2[2];
            fill(o, 2 * OBS, 5);
            gb_torch_act_out out = {a, lp, v, NULL}, out2 = {a2, lp2, v2, NULL};
            CHECK_OK(gb_torch_model_act_state(m, o, 2, 1, 0.0, NULL, NULL, NULL, &out, &err));
            CHECK_OK(gb_torch_model_act_noise(m, o, 2, 1, 0.0, NULL, &out2, &err));
            CHECK(memcmp(v, v2, sizeof v) == 0 && memcmp(a, a2, sizeof a) == 0);
        }
        gb_torch_model_destroy(m);
    }
    gb_config cfg;
    make_core_cfg(&cfg, "lstm", 12);
    gb_torch_model *m = NULL, *m2 = NULL;
    CHECK_OK(gb_torch_model_create(&cfg, &sp, 3, &m, &err));
    CHECK_OK(gb_torch_model_create(&cfg, &sp, 4, &m2, &err));
    if (!m || !m2)
        return;
    float obs[5 * OBS], s_in[5 * 24], s_out[5 * 24], s_io[5 * 24], lp[5], v[5], lp2[5], v2[5];
    int64_t a[5], a2[5];
    fill(obs, 5 * OBS, 8);
    fill(s_in, 5 * 24, 9);
    memcpy(s_io, s_in, sizeof s_in);
    gb_torch_act_out out = {a, lp, v, NULL}, out2 = {a2, lp2, v2, NULL};
    CHECK(gb_torch_model_act(m, obs, 5, 0, 0.0, &out, &err) == GB_EINVAL);
    CHECK(strstr(err.msg, "model_act_state") != NULL);
    CHECK(gb_torch_model_act_noise(m, obs, 5, 1, 0.0, NULL, &out, &err) == GB_EINVAL);
    CHECK(gb_torch_model_act_state(m, obs, 5, 1, 0.0, NULL, NULL, s_out, &out, &err) ==
          GB_EINVAL);
    CHECK(gb_torch_model_forward(m, obs, 5, &err) == 0); /* a cost measurement: zero state */
    CHECK_OK(gb_torch_model_act_state(m, obs, 5, 1, 0.0, NULL, s_in, s_out, &out, &err));
    CHECK_OK(gb_torch_model_act_state(m, obs, 5, 1, 0.0, NULL, s_io, s_io, &out2, &err));
    CHECK(memcmp(s_out, s_io, sizeof s_out) == 0 && memcmp(v, v2, sizeof v) == 0);
    CHECK(memcmp(s_out, s_in, sizeof s_out) != 0);
    CHECK(strcmp(gb_torch_model_kernels(m), "libtorch fp32") == 0);
    CHECK_OK(gb_torch_model_set_precision(m, GB_PRECISION_FP32, &err));
    CHECK(strcmp(gb_torch_model_kernels(m), "libtorch fp32") == 0);
    CHECK(gb_torch_model_set_precision(m, GB_PRECISION_INT8, &err) == GB_EUNSUPPORTED);
    /* export -> import: the core's tensors travel */
    const gb_param_entry *table;
    int count, has_core = 0;
    uint64_t total;
    gb_torch_model_layout(m, &table, &count, &total);
    for (int i = 0; i < count; i++)
        has_core += strncmp(table[i].name, "core.", 5) == 0;
    CHECK_EQ_INT(has_core, 4); /* core.ih.weight/bias, core.hh.weight/bias */
    void *buf = malloc(total);
    CHECK_OK(gb_torch_model_export(m, buf, total, NULL, &err));
    memcpy(s_io, s_in, sizeof s_in);
    CHECK_OK(gb_torch_model_act_state(m2, obs, 5, 1, 0.0, NULL, s_io, s_io, &out2, &err));
    CHECK(memcmp(v, v2, sizeof v) != 0); /* another seed: another network */
    CHECK_OK(gb_torch_model_import(m2, buf, total, table, count, 9, &err));
    memcpy(s_io, s_in, sizeof s_in);
    CHECK_OK(gb_torch_model_act_state(m2, obs, 5, 1, 0.0, NULL, s_io, s_io, &out2, &err));
    CHECK(memcmp(v, v2, sizeof v) == 0 && memcmp(s_out, s_io, sizeof s_out) == 0);
    free(buf);
    gb_torch_model_destroy(m);
    gb_torch_model_destroy(m2);
    /* sac with a core (config_check refuses it; the bridge too) */
    gb_config c2 = cfg;
    c2.trainer.algorithm.name = GB_ALGO_SAC;
    gb_torch_space box = box_space();
    gb_torch_learner *l = NULL;
    CHECK(gb_torch_learner_create(&c2, &box, 1, &l, &err) == GB_EUNSUPPORTED);
    CHECK(strstr(err.msg, "policy.model.core") != NULL);
    CHECK(l == NULL);
}

/* A checkpoint of a learner with a core restores the core (and its optimiser state). */
static void test_checkpoint(void)
{
    gb_error err = {0};
    gb_config cfg;
    make_core_cfg(&cfg, "gru", 8);
    gb_torch_space sp = discrete_space();
    gb_torch_learner *l = NULL, *l2 = NULL;
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 1, &l, &err));
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 2, &l2, &err));
    if (!l || !l2)
        return;
    static chunks x;
    act_chunks(gb_torch_learner_model(l), &sp, &x);
    CHECK_OK(gb_torch_learner_train(l, &x.b, NULL, NULL, &err));
    char path[1024];
    snprintf(path, sizeof path, "%s/core_ckpt.pt", scratch);
    CHECK_OK(gb_torch_learner_save(l, path, &err));
    CHECK(gb_torch_learner_checksum(l) != gb_torch_learner_checksum(l2));
    CHECK_OK(gb_torch_learner_load(l2, path, &err));
    CHECK(gb_torch_learner_checksum(l) == gb_torch_learner_checksum(l2));
    float v1[B * (T + 1)], v2[B * (T + 1)];
    CHECK_OK(gb_torch_learner_sequence(l, &x.b, NULL, v1, &err));
    CHECK_OK(gb_torch_learner_sequence(l2, &x.b, NULL, v2, &err));
    CHECK(memcmp(v1, v2, sizeof v1) == 0);
    /* the next step is the same on both: the optimiser state came along */
    CHECK_OK(gb_torch_learner_train(l, &x.b, NULL, NULL, &err));
    CHECK_OK(gb_torch_learner_train(l2, &x.b, NULL, NULL, &err));
    CHECK(gb_torch_learner_checksum(l) == gb_torch_learner_checksum(l2));
    /* a checkpoint without a core does not load into one with */
    gb_config plain;
    make_core_cfg(&plain, "none", 8);
    gb_torch_learner *l3 = NULL;
    CHECK_OK(gb_torch_learner_create(&plain, &sp, 1, &l3, &err));
    if (l3) {
        char p3[1100];
        snprintf(p3, sizeof p3, "%s/plain_ckpt.pt", scratch);
        CHECK_OK(gb_torch_learner_save(l3, p3, &err));
        CHECK(gb_torch_learner_load(l2, p3, &err) == GB_ECORRUPT);
        gb_torch_learner_destroy(l3);
    }
    remove(path);
    gb_torch_learner_destroy(l);
    gb_torch_learner_destroy(l2);
}

/* A cnn torso on uint8 frames before a GRU: acting row by row = the learner's sequences, and a
 * training step. */
static void test_cnn_core(void)
{
    gb_error err = {0};
    gb_config cfg;
    make_core_cfg(&cfg, "gru", 8);
    cfg.policy.model.type = GB_MODEL_CNN;
    gb_torch_space sp;
    memset(&sp, 0, sizeof sp);
    sp.obs_dtype = GB_DTYPE_UINT8;
    sp.obs_ndim = 3;
    sp.obs_shape[0] = 1;
    sp.obs_shape[1] = 36;
    sp.obs_shape[2] = 36;
    sp.discrete = 1;
    sp.n_actions = 3;
    gb_torch_learner *l = NULL;
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 4, &l, &err));
    if (!l)
        return;
    gb_torch_model *m = gb_torch_learner_model(l);
    enum { CB = 2, CT = 4, O = 36 * 36 };
    static uint8_t obs[CB * CT * O], next[CB * O], row[CB * O];
    float state[CB * 8] = {0}, lp[CB * CT], v[CB * (CT + 1)], slp[CB * CT], sv[CB * (CT + 1)];
    float rl[CB], rv[CB], rew[CB * CT] = {0};
    int64_t a[CB * CT], ra[CB];
    uint8_t valid[CB * CT] = {1, 0, 1, 1, 1, 1, 1, 1}, z[CB * CT] = {0};
    gb_torch_act_out out = {ra, rl, rv, NULL};
    for (int t = 0; t <= CT; t++) {
        for (int i = 0; i < CB * O; i++)
            row[i] = (uint8_t)(i * 7 + t * 31);
        CHECK_OK(gb_torch_model_act_state(m, row, CB, 0, 0.0, NULL, state, state, &out, &err));
        for (int bi = 0; bi < CB; bi++) {
            v[bi * (CT + 1) + t] = rv[bi];
            if (t == CT) {
                memcpy(&next[bi * O], &row[bi * O], O);
                continue;
            }
            memcpy(&obs[(bi * CT + t) * O], &row[bi * O], O);
            a[bi * CT + t] = ra[bi];
            lp[bi * CT + t] = rl[bi];
            if (!valid[bi * CT + t])
                memset(&state[bi * 8], 0, sizeof(float) * 8);
        }
    }
    gb_torch_batch b = {CB, CT, obs, next, a, rew, z, z, valid, lp, NULL, 0, NULL, 0};
    CHECK_OK(gb_torch_learner_sequence(l, &b, slp, sv, &err));
    double d = 0;
    for (int i = 0; i < CB * CT; i++)
        d = fmax(d, fabs(slp[i] - lp[i]));
    for (int i = 0; i < CB * (CT + 1); i++)
        d = fmax(d, fabs(sv[i] - v[i]));
    fprintf(stderr, "  cnn gru: max |diff| actor vs learner %.3g\n", d);
    CHECK(d < 1e-5);
    gb_torch_stats st;
    CHECK_OK(gb_torch_learner_train(l, &b, &st, NULL, &err));
    CHECK(isfinite(st.loss) && st.samples == CB * CT - 1);
    gb_torch_learner_destroy(l);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        scratch = argv[1];
    gb_error err = {0};
    if (gb_torch_set_threads(1, &err) != 0)
        fprintf(stderr, "set_threads: %s\n", err.msg);
    TEST_RUN(test_agreement_lstm);
    TEST_RUN(test_agreement_gru);
    TEST_RUN(test_agreement_lstm_box);
    TEST_RUN(test_agreement_transformer);
    TEST_RUN(test_agreement_torchscript);
    TEST_RUN(test_torchscript_state_mismatch);
    TEST_RUN(test_torchscript_shape_mismatch);
    TEST_RUN(test_cnn_core);
    TEST_RUN(test_reset_rule);
    TEST_RUN(test_model_contract);
    TEST_RUN(test_checkpoint);
    return test_main_result();
}
