/* tests/workers/torch/test_torch_model.c: models and learners through the C API: inference shapes
 * and ranges, epsilon-greedy, parameter export -> import round trip (identical outputs), layout
 * mismatch refusal, checkpoints, one DQN step checked against a hand-computed linear Q-network,
 * a training step of each algorithm, and one random stream per policy worker. argv[1]: a
 * scratch folder. */
#include "runtime/base/rng.h"
#include "test.h"
#include "workers/torch_test_util.h"
#include "workers/torch/testing.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Saves l over the checkpoint at path with the disk "full" (RLIMIT_FSIZE below its size: the
 * write fails as on ENOSPC) in a child process. Returns 0 when the save failed cleanly: GB_EIO
 * naming the file, no path.tmp left, the previous checkpoint unchanged. libtorch's own file
 * writer aborted the process here (it throws again from its destructor). */
static int save_on_full_disk(gb_torch_learner *l, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim = {(rlim_t)st.st_size / 2, (rlim_t)st.st_size / 2};
        setrlimit(RLIMIT_FSIZE, &lim);
        gb_error e = {0};
        int rc = gb_torch_learner_save(l, path, &e);
        char tmp[1100];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        struct stat now;
        fprintf(stderr, "save on a full disk: %d %s\n", rc, e.msg);
        _exit(rc == GB_EIO && strstr(e.msg, path) && strstr(e.msg, "File too large") &&
              access(tmp, F_OK) != 0 && stat(path, &now) == 0 && now.st_size == st.st_size
                  ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status))
        fprintf(stderr, "save on a full disk: killed by signal %d\n", WTERMSIG(status));
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

static const char *scratch = ".";

static void test_act_ppo_discrete(void)
{
    gb_error err = {0};
    gb_config cfg;
    CHECK(make_cfg(&cfg, "ppo", "") == 0);
    gb_torch_space sp = discrete_space();
    gb_torch_model *m = NULL;
    CHECK_OK(gb_torch_model_create(&cfg, &sp, 7, &m, &err));
    if (!m)
        return;
    float obs[64 * 4];
    fill(obs, 64 * 4, 1);
    int64_t a[64], a2[64];
    float logp[64], value[64], value2[64];
    gb_torch_act_out out = {a, logp, value, NULL};
    CHECK_OK(gb_torch_model_act(m, obs, 64, 0, 0.0, &out, &err));
    int in_range = 1, logp_ok = 1;
    for (int i = 0; i < 64; i++) {
        in_range &= a[i] >= 0 && a[i] < 3;
        /* policy head initialised with gain 0.01: close to uniform */
        logp_ok &= logp[i] <= 0 && fabs(logp[i] - log(1.0 / 3)) < 0.05;
    }
    CHECK(in_range);
    CHECK(logp_ok);
    gb_torch_act_out det = {a, NULL, value, NULL}, det2 = {a2, NULL, value2, NULL};
    CHECK_OK(gb_torch_model_act(m, obs, 64, 1, 0.0, &det, &err));
    CHECK_OK(gb_torch_model_act(m, obs, 64, 1, 0.0, &det2, &err));
    CHECK(memcmp(a, a2, sizeof a) == 0);
    CHECK(memcmp(value, value2, sizeof value) == 0);
    gb_torch_model_destroy(m);
}

/* An environment's NaN observation in one row of a batch: the batch still succeeds (libtorch's
 * multinomial threw on the NaN probabilities, failing every actor's rows with it), the row gets a
 * valid action and a non-finite log-probability (its chunk is refused at the trainer), and the
 * other rows are as without it. */
static void test_act_ppo_nan_row(void)
{
    gb_error err = {0};
    gb_config cfg;
    CHECK(make_cfg(&cfg, "ppo", "") == 0);
    gb_torch_space sp = discrete_space();
    gb_torch_model *m = NULL;
    CHECK_OK(gb_torch_model_create(&cfg, &sp, 7, &m, &err));
    if (!m)
        return;
    enum { ROWS = 16 };
    float obs[ROWS * 4];
    fill(obs, ROWS * 4, 3);
    obs[5 * 4 + 2] = NAN;
    int64_t a[ROWS];
    float logp[ROWS];
    gb_torch_act_out out = {a, logp, NULL, NULL};
    CHECK_OK(gb_torch_model_act(m, obs, ROWS, 0, 0.0, &out, &err));
    for (int i = 0; i < ROWS; i++) {
        CHECK(a[i] >= 0 && a[i] < 3);
        CHECK_MSG(i == 5 ? !isfinite(logp[i]) : isfinite(logp[i]) && logp[i] <= 0,
                  "row %d: logp %g", i, (double)logp[i]);
    }
    gb_torch_model_destroy(m);
}

/* Two models with different seeds differ; after export -> import they agree bit for bit. */
static void roundtrip(const char *algo, gb_torch_space sp)
{
    gb_error err = {0};
    gb_config cfg;
    CHECK(make_cfg(&cfg, algo, ", layer_norm: true") == 0);
    gb_torch_model *a = NULL, *b = NULL;
    CHECK_OK(gb_torch_model_create(&cfg, &sp, 1, &a, &err));
    CHECK_OK(gb_torch_model_create(&cfg, &sp, 2, &b, &err));
    if (!a || !b)
        goto done;
    enum { N = 16 };
    int64_t od = sp.obs_shape[0], ad = sp.discrete ? 1 : sp.action_dim;
    float obs[N * 8], logp_a[N], logp_b[N], v_a[N], v_b[N];
    float act_a[N * 8], act_b[N * 8];
    fill(obs, (int)(N * od), 9);
    gb_torch_act_out oa = {act_a, logp_a, v_a, NULL}, ob = {act_b, logp_b, v_b, NULL};
    CHECK_OK(gb_torch_model_act(a, obs, N, 1, 0.0, &oa, &err));
    CHECK_OK(gb_torch_model_act(b, obs, N, 1, 0.0, &ob, &err));
    CHECK(memcmp(logp_a, logp_b, sizeof logp_a) != 0 || memcmp(v_a, v_b, sizeof v_a) != 0 ||
          memcmp(act_a, act_b, (size_t)(N * ad) * 8) != 0);

    const gb_param_entry *table;
    int count;
    uint64_t total, version = 0;
    gb_torch_model_layout(a, &table, &count, &total);
    CHECK(count > 0);
    for (int i = 0; i < count; i++)
        CHECK(table[i].offset % GB_TORCH_PARAM_ALIGN == 0);
    void *buf = malloc(total);
    CHECK_OK(gb_torch_model_export(a, buf, total, &version, &err));
    CHECK(gb_torch_model_export(a, buf, total - 1, NULL, &err) == GB_EINVAL);
    CHECK_OK(gb_torch_model_import(b, buf, total, table, count, 42, &err));
    CHECK_EQ_INT(gb_torch_model_version(b), 42);
    CHECK_OK(gb_torch_model_act(b, obs, N, 1, 0.0, &ob, &err));
    CHECK(memcmp(logp_a, logp_b, sizeof logp_a) == 0);
    CHECK(memcmp(v_a, v_b, sizeof v_a) == 0);
    CHECK(memcmp(act_a, act_b, (size_t)(N * ad) * (sp.discrete ? 8 : 4)) == 0);

    /* a differently shaped model refuses the buffer and stays unchanged */
    gb_config cfg2;
    CHECK(make_cfg(&cfg2, algo, "") == 0);
    cfg2.policy.model.hidden.n = 1;
    cfg2.policy.model.hidden.v[0] = 8;
    gb_torch_model *c = NULL;
    CHECK_OK(gb_torch_model_create(&cfg2, &sp, 1, &c, &err));
    if (c) {
        CHECK(gb_torch_model_import(c, buf, total, table, count, 1, &err) == GB_EINVAL);
        CHECK_EQ_INT(gb_torch_model_version(c), 0);
        gb_torch_model_destroy(c);
    }
    free(buf);
done:
    gb_torch_model_destroy(a);
    gb_torch_model_destroy(b);
}

static void test_roundtrip_ppo(void) { roundtrip("ppo", discrete_space()); }
static void test_roundtrip_ppo_box(void) { roundtrip("ppo", box_space()); }
static void test_roundtrip_dqn(void) { roundtrip("dqn", discrete_space()); }
static void test_roundtrip_sac(void) { roundtrip("sac", box_space()); }

static void test_epsilon_greedy_and_sac_bounds(void)
{
    gb_error err = {0};
    gb_config cfg;
    CHECK(make_cfg(&cfg, "dqn", "") == 0);
    gb_torch_space sp = discrete_space();
    gb_torch_model *m = NULL;
    CHECK_OK(gb_torch_model_create(&cfg, &sp, 5, &m, &err));
    if (!m)
        return;
    enum { N = 3000 };
    static float obs[N * 4], q[N * 3];
    static int64_t a[N];
    for (int i = 0; i < N; i++)
        memcpy(obs + 4 * i, (float[]){0.1f, 0.2f, -0.3f, 0.4f}, 16);
    gb_torch_act_out out = {a, NULL, NULL, q};
    CHECK_OK(gb_torch_model_act(m, obs, N, 0, 0.0, &out, &err));
    int greedy = 0;
    for (int j = 1; j < 3; j++)
        if (q[j] > q[greedy])
            greedy = j;
    int all_greedy = 1;
    for (int i = 0; i < N; i++)
        all_greedy &= a[i] == greedy;
    CHECK(all_greedy);
    CHECK_OK(gb_torch_model_act(m, obs, N, 0, 1.0, &out, &err));
    int counts[3] = {0};
    for (int i = 0; i < N; i++)
        counts[a[i]]++;
    for (int j = 0; j < 3; j++)
        CHECK_MSG(counts[j] > 850 && counts[j] < 1150, "action %d drawn %d times of %d", j,
                  counts[j], N);
    gb_torch_model_destroy(m);

    CHECK(make_cfg(&cfg, "sac", "") == 0);
    sp = box_space();
    CHECK_OK(gb_torch_model_create(&cfg, &sp, 5, &m, &err));
    if (!m)
        return;
    static float act[N * 2], logp[N];
    fill(obs, N * 3, 4);
    gb_torch_act_out so = {act, logp, NULL, NULL};
    CHECK_OK(gb_torch_model_act(m, obs, N, 0, 0.0, &so, &err));
    int inside = 1;
    for (int i = 0; i < N; i++)
        inside &= act[2 * i] >= -2 && act[2 * i] <= 2 && act[2 * i + 1] >= 0 &&
                  act[2 * i + 1] <= 1 && isfinite(logp[i]);
    CHECK(inside);
    gb_torch_model_destroy(m);
}

/* DQN with no hidden layer is Q(s) = W s + b. Set W, b by import, run one step on a chunk, and
 * compare the loss with the hand-computed one; Adam's first step moves every weight by
 * -lr * sign(gradient), which checks the gradient's sign too. */
static void test_dqn_step_by_hand(void)
{
    gb_error err = {0};
    gb_config cfg;
    CHECK(make_cfg(&cfg, "dqn", "") == 0);
    cfg.policy.model.hidden.n = 0;
    cfg.trainer.algorithm.dqn.n_step = 2;
    cfg.trainer.algorithm.dqn.double_q = 0;
    cfg.trainer.algorithm.dqn.huber_delta = 0; /* squared error / 2 */
    cfg.trainer.algorithm.max_grad_norm = 0;
    gb_torch_space sp = discrete_space();
    sp.obs_shape[0] = 2;
    sp.n_actions = 2;
    gb_torch_learner *l = NULL;
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 1, &l, &err));
    if (!l)
        return;
    gb_torch_model *m = gb_torch_learner_model(l);
    const gb_param_entry *table;
    int count;
    uint64_t total;
    gb_torch_model_layout(m, &table, &count, &total);
    CHECK_EQ_INT(count, 2); /* q.weight [2, 2], q.bias [2] */
    const float W[4] = {1.0f, 0.5f, -1.0f, 2.0f}, bias[2] = {0.1f, -0.2f};
    char *buf = calloc(1, total);
    for (int i = 0; i < count; i++)
        if (table[i].rank == 2)
            memcpy(buf + table[i].offset, W, sizeof W);
        else
            memcpy(buf + table[i].offset, bias, sizeof bias);
    /* the target network keeps its creation-time weights: both steps below end their n-step
     * window at the terminal step, so it is not used */
    CHECK_OK(gb_torch_model_import(m, buf, total, table, count, 0, &err));

    /* chunk T = 3: obs rows s0, s1, s2 and next s3; step 1 terminates, step 2 is a reset step */
    const float obs[6] = {1, 0, 0, 1, 1, 1}, next[2] = {2, -1};
    const int64_t act[3] = {0, 1, 0};
    const float rew[3] = {1.0f, 2.0f, 0.0f};
    const uint8_t term[3] = {0, 1, 0}, trunc[3] = {0, 0, 0}, valid[3] = {1, 1, 0};
    gb_torch_batch b = {1, 3, obs, next, act, rew, term, trunc, valid, NULL, NULL, 0, NULL, 0};
    /* n = 2, gamma 0.9: step 0: G = 1 + 0.9*2, terminal within the window: y0 = 2.8;
     * step 1: y1 = 2. q0 = Q(s0)[0] = 1*1 + 0.5*0 + 0.1 = 1.1; q1 = Q(s1)[1] = 2 - 0.2 = 1.8.
     * loss = mean(0.5 (y - q)^2) = (0.5*1.7^2 + 0.5*0.2^2) / 2 = 0.7325 */
    gb_torch_stats st;
    float prio[1];
    CHECK_OK(gb_torch_learner_train(l, &b, &st, prio, &err));
    CHECK_NEAR(st.loss, 0.7325, 1e-5);
    CHECK_EQ_INT(st.samples, 2);
    CHECK_NEAR(prio[0], 0.9 * 1.7 + 0.1 * (1.7 + 0.2) / 2 + 1e-6, 1e-5);
    CHECK_EQ_INT(gb_torch_model_version(m), 1);
    /* dL/dW[0] = (q0 - y0) s0 / 2 = (-0.85, 0); dL/dW[1] = (q1 - y1) s1 / 2 = (0, -0.1):
     * Adam's first step: W[0][0] += lr, W[1][1] += lr, zero-gradient entries stay */
    float *after = (float *)calloc(1, total);
    CHECK_OK(gb_torch_model_export(m, after, total, NULL, &err));
    const float *w2 = NULL, *b2 = NULL;
    for (int i = 0; i < count; i++) {
        if (table[i].rank == 2)
            w2 = (const float *)((const char *)after + table[i].offset);
        else
            b2 = (const float *)((const char *)after + table[i].offset);
    }
    CHECK_NEAR(w2[0], 1.0 + 0.01, 1e-5);
    CHECK_NEAR(w2[1], 0.5, 1e-7);
    CHECK_NEAR(w2[2], -1.0, 1e-7);
    CHECK_NEAR(w2[3], 2.0 + 0.01, 1e-5);
    CHECK_NEAR(b2[0], 0.1 + 0.01, 1e-5);
    CHECK_NEAR(b2[1], -0.2 + 0.01, 1e-5);

    free(after);
    free(buf);
    gb_torch_learner_destroy(l);
}

/* Every algorithm trains on a random batch, changes its parameters, bumps the version, returns
 * finite statistics and positive priorities; a checkpoint restores parameters and counters. */
static void train_and_checkpoint(const char *algo, gb_torch_space sp)
{
    gb_error err = {0};
    gb_config cfg;
    CHECK(make_cfg(&cfg, algo, "") == 0);
    gb_torch_learner *l = NULL, *l2 = NULL;
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 11, &l, &err));
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 12, &l2, &err));
    if (!l || !l2)
        goto done;
    enum { B = 4, T = 8 };
    int64_t od = sp.obs_shape[0];
    float *obs = malloc(sizeof(float) * B * T * od), *next = malloc(sizeof(float) * B * od);
    fill(obs, (int)(B * T * od), 3);
    fill(next, (int)(B * od), 4);
    float rew[B * T], logp[B * T], w[B], prio[B];
    int64_t dact[B * T];
    float cact[B * T * 2];
    uint8_t term[B * T] = {0}, trunc[B * T] = {0}, valid[B * T];
    fill(rew, B * T, 5);
    for (int i = 0; i < B * T; i++) {
        dact[i] = sp.discrete ? i % sp.n_actions : 0;
        valid[i] = 1;
        logp[i] = -1.0f;
    }
    fill(cact, B * T * 2, 6);
    for (int i = 0; i < B * T; i++)
        cact[2 * i + 1] = 0.5f + 0.4f * cact[2 * i + 1];
    term[5] = 1;
    valid[6] = 0;
    trunc[T + 3] = 1;
    valid[T + 4] = 0;
    for (int i = 0; i < B; i++)
        w[i] = 0.5f + 0.25f * i;
    gb_torch_batch b = {B, T, obs, next, sp.discrete ? (void *)dact : (void *)cact, rew,
                        term, trunc, valid, logp, w, 0, NULL, 0};
    gb_torch_model *m = gb_torch_learner_model(l);
    const gb_param_entry *table;
    int count;
    uint64_t total;
    gb_torch_model_layout(m, &table, &count, &total);
    char *before = malloc(total), *after = malloc(total), *restored = malloc(total);
    CHECK_OK(gb_torch_model_export(m, before, total, NULL, &err));
    gb_torch_stats st;
    for (int k = 0; k < 3; k++)
        CHECK_OK(gb_torch_learner_train(l, &b, &st, prio, &err));
    CHECK_OK(gb_torch_model_export(m, after, total, NULL, &err));
    CHECK(memcmp(before, after, total) != 0);
    CHECK_EQ_INT(gb_torch_model_version(m), 3);
    CHECK_EQ_INT(gb_torch_learner_train_steps(l), 3);
    CHECK(isfinite(st.loss));
    CHECK_EQ_INT(st.samples, B * T - 2);
    for (int i = 0; i < B; i++)
        CHECK(prio[i] > 0 && isfinite(prio[i]));

    char path[1024];
    snprintf(path, sizeof path, "%s/learner_%s.ckpt", scratch, algo);
    CHECK_OK(gb_torch_learner_save(l, path, &err));
    CHECK_OK(gb_torch_learner_load(l2, path, &err));
    if (strcmp(algo, "ppo") == 0)
        CHECK(save_on_full_disk(l, path) == 0);
    gb_torch_model *m2 = gb_torch_learner_model(l2);
    CHECK_OK(gb_torch_model_export(m2, restored, total, NULL, &err));
    CHECK(memcmp(after, restored, total) == 0);
    CHECK_EQ_INT(gb_torch_model_version(m2), 3);
    CHECK_EQ_INT(gb_torch_learner_train_steps(l2), 3);
    /* both continue identically where no sampling is involved (DQN): same next step */
    if (strcmp(algo, "dqn") == 0) {
        CHECK_OK(gb_torch_learner_train(l, &b, &st, prio, &err));
        CHECK_OK(gb_torch_learner_train(l2, &b, &st, prio, &err));
        CHECK_OK(gb_torch_model_export(m, after, total, NULL, &err));
        CHECK_OK(gb_torch_model_export(m2, restored, total, NULL, &err));
        CHECK(memcmp(after, restored, total) == 0);
    }
    CHECK(gb_torch_learner_load(l2, "/nonexistent/x.ckpt", &err) == GB_ENOTFOUND);
    free(before);
    free(after);
    free(restored);
    free(obs);
    free(next);
done:
    gb_torch_learner_destroy(l);
    gb_torch_learner_destroy(l2);
}

static void test_train_ppo(void) { train_and_checkpoint("ppo", discrete_space()); }
static void test_train_ppo_box(void) { train_and_checkpoint("ppo", box_space()); }
static void test_train_dqn(void) { train_and_checkpoint("dqn", discrete_space()); }
static void test_train_sac(void) { train_and_checkpoint("sac", box_space()); }

/* The Nature-DQN torso on uint8 frames: PPO inference, a training step, and the round trip. */
static void test_cnn(void)
{
    gb_error err = {0};
    gb_config cfg;
    CHECK(make_cfg(&cfg, "ppo", "") == 0);
    cfg.policy.model.type = GB_MODEL_CNN;
    cfg.policy.model.hidden.n = 1;
    cfg.policy.model.hidden.v[0] = 32;
    gb_torch_space sp;
    memset(&sp, 0, sizeof sp);
    sp.obs_dtype = GB_DTYPE_UINT8;
    sp.obs_ndim = 3;
    sp.obs_shape[0] = 2;
    sp.obs_shape[1] = 84;
    sp.obs_shape[2] = 84;
    sp.discrete = 1;
    sp.n_actions = 4;
    gb_torch_learner *l = NULL;
    gb_torch_model *m2 = NULL;
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 1, &l, &err));
    CHECK_OK(gb_torch_model_create(&cfg, &sp, 2, &m2, &err));
    if (!l || !m2)
        goto done;
    enum { B = 2, T = 3, O = 2 * 84 * 84 };
    static uint8_t obs[B * T * O], next[B * O];
    for (int i = 0; i < B * T * O; i++)
        obs[i] = (uint8_t)(i * 7);
    for (int i = 0; i < B * O; i++)
        next[i] = (uint8_t)(i * 3);
    gb_torch_model *m = gb_torch_learner_model(l);
    int64_t a[B * T], a2[B * T];
    float lp[B * T], v[B * T], lp2[B * T], v2[B * T];
    gb_torch_act_out out = {a, lp, v, NULL}, out2 = {a2, lp2, v2, NULL};
    CHECK_OK(gb_torch_model_act(m, obs, B * T, 0, 0.0, &out, &err));
    float rew[B * T] = {1, 0, 1, 0, 1, 0};
    uint8_t z[B * T] = {0};
    gb_torch_batch b = {B, T, obs, next, a, rew, z, z, NULL, lp, NULL, 0, NULL, 0};
    gb_torch_stats st;
    CHECK_OK(gb_torch_learner_train(l, &b, &st, NULL, &err));
    CHECK(isfinite(st.loss));
    const gb_param_entry *table;
    int count;
    uint64_t total;
    gb_torch_model_layout(m, &table, &count, &total);
    void *buf = malloc(total);
    CHECK_OK(gb_torch_model_export(m, buf, total, NULL, &err));
    CHECK_OK(gb_torch_model_import(m2, buf, total, table, count, 1, &err));
    CHECK_OK(gb_torch_model_act(m, obs, B * T, 1, 0.0, &out, &err));
    CHECK_OK(gb_torch_model_act(m2, obs, B * T, 1, 0.0, &out2, &err));
    CHECK(memcmp(v, v2, sizeof v) == 0 && memcmp(lp, lp2, sizeof lp) == 0);
    free(buf);
done:
    gb_torch_learner_destroy(l);
    gb_torch_model_destroy(m2);
}

/* A TorchScript model (the user-export path): acts, trains, travels through export/import and
 * checkpoints like a built-in one. */
static void test_torchscript(void)
{
    gb_error err = {0};
    char path[1024];
    snprintf(path, sizeof path, "%s/actor_critic.pt", scratch);
    CHECK_OK(gb_torch_write_test_script(path, 4, 3, 1, &err));
    gb_config cfg;
    CHECK(make_cfg(&cfg, "ppo", "") == 0);
    cfg.policy.model.type = GB_MODEL_TORCHSCRIPT;
    snprintf(cfg.policy.model.torchscript, sizeof cfg.policy.model.torchscript, "%s", path);
    gb_torch_space sp = discrete_space();
    gb_torch_learner *l = NULL;
    gb_torch_model *m2 = NULL;
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 1, &l, &err));
    CHECK_OK(gb_torch_model_create(&cfg, &sp, 1, &m2, &err));
    if (!l || !m2)
        goto done;
    gb_torch_model *m = gb_torch_learner_model(l);
    const gb_param_entry *table;
    int count;
    uint64_t total;
    gb_torch_model_layout(m, &table, &count, &total);
    CHECK_EQ_INT(count, 3); /* w_pi, w_v, obs_scale (a buffer) */
    enum { B = 2, T = 4 };
    float obs[B * T * 4], next[B * 4], rew[B * T], lp[B * T], v[B * T], lp2[B * T], v2[B * T];
    int64_t a[B * T], a2[B * T];
    fill(obs, B * T * 4, 21);
    fill(next, B * 4, 22);
    fill(rew, B * T, 23);
    gb_torch_act_out out = {a, lp, v, NULL}, out2 = {a2, lp2, v2, NULL};
    CHECK_OK(gb_torch_model_act(m, obs, B * T, 0, 0.0, &out, &err));
    uint8_t z[B * T] = {0};
    gb_torch_batch b = {B, T, obs, next, a, rew, z, z, NULL, lp, NULL, 0, NULL, 0};
    char *before = malloc(total), *after = malloc(total);
    CHECK_OK(gb_torch_model_export(m, before, total, NULL, &err));
    gb_torch_stats st;
    CHECK_OK(gb_torch_learner_train(l, &b, &st, NULL, &err));
    CHECK_OK(gb_torch_model_export(m, after, total, NULL, &err));
    CHECK(memcmp(before, after, total) != 0);
    CHECK_OK(gb_torch_model_import(m2, after, total, table, count, 5, &err));
    CHECK_OK(gb_torch_model_act(m, obs, B * T, 1, 0.0, &out, &err));
    CHECK_OK(gb_torch_model_act(m2, obs, B * T, 1, 0.0, &out2, &err));
    CHECK(memcmp(v, v2, sizeof v) == 0 && memcmp(lp, lp2, sizeof lp) == 0);
    snprintf(path, sizeof path, "%s/torchscript.ckpt", scratch);
    CHECK_OK(gb_torch_learner_save(l, path, &err));
    CHECK_OK(gb_torch_learner_load(l, path, &err));
    free(before);
    free(after);
done:
    gb_torch_learner_destroy(l);
    gb_torch_model_destroy(m2);
}

static void test_bad_inputs(void)
{
    gb_error err = {0};
    gb_config cfg;
    CHECK(make_cfg(&cfg, "dqn", "") == 0);
    gb_torch_space sp = box_space();
    gb_torch_model *m = NULL;
    CHECK(gb_torch_model_create(&cfg, &sp, 1, &m, &err) == GB_EINVAL);
    CHECK(m == NULL);
    CHECK(make_cfg(&cfg, "ppo", ", torchscript: /nonexistent.pt") == 0);
    cfg.policy.model.type = GB_MODEL_TORCHSCRIPT;
    sp = discrete_space();
    CHECK(gb_torch_model_create(&cfg, &sp, 1, &m, &err) == GB_ENOTFOUND);
    CHECK(gb_torch_set_threads(0, &err) == GB_EINVAL);
    CHECK_OK(gb_torch_set_threads(1, &err));
}

/* Policy workers seed their models with gb_rng_seed_of(seed, "policy", index, "model"); before,
 * every one used the experiment seed alone, so with policy.count > 1 their epsilon-greedy masks
 * and sampled actions repeated across workers. Models seeded as policy 0 and 1 act
 * epsilon-greedily (epsilon 1) on the same observations: the actions differ, while a model
 * seeded as the same worker repeats them. */
static void policy_actions(uint64_t seed, int64_t *out, int rows)
{
    static gb_config cfg;
    gb_error err = {0};
    CHECK_OK(make_cfg(&cfg, "dqn", ""));
    gb_torch_space sp = discrete_space();
    gb_torch_model *m = NULL;
    CHECK_OK(gb_torch_model_create(&cfg, &sp, seed, &m, &err));
    if (!m)
        return;
    static float obs[256 * 4];
    gb_torch_act_out o = {out, NULL, NULL, NULL};
    CHECK_OK(gb_torch_model_act(m, obs, rows, 0, 1.0, &o, &err));
    gb_torch_model_destroy(m);
}

static void test_policy_streams_differ(void)
{
    enum { ROWS = 256 };
    int64_t a0[ROWS], a1[ROWS], again[ROWS];
    policy_actions(gb_rng_seed_of(1, "policy", 0, "model"), a0, ROWS);
    policy_actions(gb_rng_seed_of(1, "policy", 1, "model"), a1, ROWS);
    policy_actions(gb_rng_seed_of(1, "policy", 0, "model"), again, ROWS);
    int same = 0;
    for (int i = 0; i < ROWS; i++)
        same += a0[i] == a1[i];
    CHECK_MSG(same < ROWS * 3 / 4, "%d of %d random actions equal across workers", same, ROWS);
    CHECK(memcmp(a0, again, sizeof a0) == 0);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        scratch = argv[1];
    gb_error err = {0};
    if (gb_torch_set_threads(1, &err) != 0)
        fprintf(stderr, "set_threads: %s\n", err.msg);
    TEST_RUN(test_act_ppo_discrete);
    TEST_RUN(test_act_ppo_nan_row);
    TEST_RUN(test_roundtrip_ppo);
    TEST_RUN(test_roundtrip_ppo_box);
    TEST_RUN(test_roundtrip_dqn);
    TEST_RUN(test_roundtrip_sac);
    TEST_RUN(test_epsilon_greedy_and_sac_bounds);
    TEST_RUN(test_dqn_step_by_hand);
    TEST_RUN(test_train_ppo);
    TEST_RUN(test_train_ppo_box);
    TEST_RUN(test_train_dqn);
    TEST_RUN(test_train_sac);
    TEST_RUN(test_cnn);
    TEST_RUN(test_torchscript);
    TEST_RUN(test_bad_inputs);
    TEST_RUN(test_policy_streams_differ);
    return test_main_result();
}
