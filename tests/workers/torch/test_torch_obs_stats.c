/* tests/workers/torch/test_torch_obs_stats.c: the learner's running statistics through the C API.
 * trainer.algorithm.reward_scale: a step trains on its rewards divided by the deviation of the
 * returns observed so far (as a learner without scaling trains on the divided rewards, clipped
 * at reward_clip), and a checkpoint carries the scale. policy.model.normalize_obs: the
 * running mean and variance the learner merges at each training step equal the statistics of
 * every observed row computed here in double (rows observed from two threads at once, a mask
 * honoured, nothing merged before a step); they travel in the exported parameters, so that a
 * policy worker's model acts exactly as the learner's; normalised observations are clipped;
 * checkpoints carry them; for PPO and DQN; a model without them has none and ignores what it
 * is given. argv[1]: a scratch folder. */
#include "test.h"
#include "workers/roles/learning.h"
#include "workers/torch_test_util.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { D = 4, ROWS = 3000, B = 2, T = 8 };

static const char *scratch = ".";

/* Row r of the observations: dimension i around 5i - 3 with deviation 1 + i. */
static void obs_row(int r, float *x)
{
    unsigned s = 2654435761u * (unsigned)(r + 1);
    for (int i = 0; i < D; i++) {
        s = s * 1103515245u + 12345u;
        double u = (double)((s >> 8) % 100000) / 100000.0 - 0.5;
        x[i] = (float)(5.0 * i - 3.0 + (1.0 + i) * 3.4641 * u);
    }
}

typedef struct feed {
    gb_torch_learner *l;
    int from, to;
} feed;

static void *observe_rows(void *arg)
{
    feed *f = arg;
    gb_error err = {0};
    float x[100 * D];
    uint8_t mask[100];
    for (int r = f->from; r < f->to; r += 100) {
        for (int k = 0; k < 100; k++) {
            obs_row(r + k, &x[k * D]);
            mask[k] = (r + k) % 7 != 0; /* every 7th row does not count */
        }
        if (gb_torch_learner_observe(f->l, x, NULL, 100, mask, &err))
            fprintf(stderr, "observe: %s\n", err.msg);
    }
    return NULL;
}

/* The statistics in m's exported parameters: mean, var [D] and count. Returns 0 when absent. */
static int exported_stats(gb_torch_model *m, double *mean, double *var, double *count)
{
    const gb_param_entry *table;
    int n, found = 0;
    uint64_t total;
    gb_torch_model_layout(m, &table, &n, &total);
    char *buf = malloc(total);
    gb_error err = {0};
    CHECK_OK(gb_torch_model_export(m, buf, total, NULL, &err));
    for (int i = 0; i < n; i++) {
        double *dst = strcmp(table[i].name, "obs_mean") == 0    ? mean
                      : strcmp(table[i].name, "obs_var") == 0   ? var
                      : strcmp(table[i].name, "obs_count") == 0 ? count
                                                                : NULL;
        if (!dst)
            continue;
        CHECK(table[i].dtype == GB_DTYPE_FLOAT64);
        memcpy(dst, buf + table[i].offset, sizeof(double) * (dst == count ? 1 : D));
        found++;
    }
    free(buf);
    return found == 3;
}

/* A batch of B chunks of T rows for one training step. */
static float bobs[B * T * D], bnext[B * D], brew[B * T], blogp[B * T];
static int64_t bact[B * T];
static uint8_t bterm[B * T], btrunc[B * T], bvalid[B * T];

static gb_torch_batch make_batch(void)
{
    for (int i = 0; i < B * T; i++)
        obs_row(i, &bobs[i * D]);
    fill(bnext, B * D, 4);
    memset(bvalid, 1, sizeof bvalid);
    for (int i = 0; i < B * T; i++) {
        bact[i] = i % 2;
        brew[i] = 1.0f;
        blogp[i] = -0.69f;
    }
    gb_torch_batch b = {B,      T,      bobs,  bnext, bact, brew, bterm, btrunc,
                        bvalid, blogp,  NULL,  0,     NULL, 0};
    return b;
}

static void test_merge_and_ship(const char *algo)
{
    gb_error err = {0};
    gb_config cfg;
    CHECK(make_cfg(&cfg, algo, ", normalize_obs: true, obs_clip: 5") == 0);
    gb_torch_space sp = discrete_space();
    gb_torch_learner *l = NULL;
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 3, &l, &err));
    if (!l)
        return;
    gb_torch_model *lm = gb_torch_learner_model(l);
    double mean[D], var[D], count;
    CHECK(exported_stats(lm, mean, var, &count));
    CHECK(count == 0 && mean[0] == 0 && var[0] == 1); /* the identity to begin with */
    /* two threads at once, then nothing merged until a training step */
    pthread_t th[2];
    feed f[2] = {{l, 0, ROWS / 2}, {l, ROWS / 2, ROWS}};
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, observe_rows, &f[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    CHECK(exported_stats(lm, mean, var, &count) && count == 0);
    gb_torch_batch b = make_batch();
    gb_torch_stats st;
    CHECK_OK(gb_torch_learner_train(l, &b, &st, NULL, &err));
    CHECK(exported_stats(lm, mean, var, &count));
    /* the reference, in double over the counted rows */
    double n = 0, s[D] = {0}, s2[D] = {0};
    for (int r = 0; r < ROWS; r++) {
        if (r % 7 == 0)
            continue;
        float x[D];
        obs_row(r, x);
        n++;
        for (int i = 0; i < D; i++)
            s[i] += x[i];
    }
    for (int r = 0; r < ROWS; r++) {
        if (r % 7 == 0)
            continue;
        float x[D];
        obs_row(r, x);
        for (int i = 0; i < D; i++)
            s2[i] += (x[i] - s[i] / n) * (x[i] - s[i] / n);
    }
    CHECK(count == n);
    double dm = 0, dv = 0;
    for (int i = 0; i < D; i++) {
        dm = fmax(dm, fabs(mean[i] - s[i] / n));
        dv = fmax(dv, fabs(var[i] - s2[i] / n) / (s2[i] / n));
    }
    fprintf(stderr,
            "  %s: %g rows, max |mean diff| %.3g, max relative var diff %.3g (var[3] %.2f)\n", algo,
            n, dm, dv, var[3]);
    CHECK(dm < 1e-9 && dv < 1e-9 && fabs(var[3] - 16.0) < 0.5);
    /* a second batch of rows merges with the first (Chan's update) */
    feed more = {l, ROWS, ROWS + 700};
    observe_rows(&more);
    CHECK_OK(gb_torch_learner_train(l, &b, &st, NULL, &err));
    double count2;
    CHECK(exported_stats(lm, mean, var, &count2) && count2 == n + 600);

    /* a policy worker's model with the exported parameters acts as the learner's */
    gb_torch_model *pm = NULL;
    CHECK_OK(gb_torch_model_create(&cfg, &sp, 99, &pm, &err));
    const gb_param_entry *table;
    int nt;
    uint64_t total;
    gb_torch_model_layout(lm, &table, &nt, &total);
    void *buf = malloc(total);
    CHECK_OK(gb_torch_model_export(lm, buf, total, NULL, &err));
    CHECK_OK(gb_torch_model_import(pm, buf, total, table, nt, 1, &err));
    free(buf);
    float x[6 * D];
    for (int k = 0; k < 6; k++)
        obs_row(5000 + k, &x[k * D]);
    x[4 * D + 1] = 1e6f; /* far out: clipped to +5 deviations ... */
    x[5 * D + 1] = 1e7f; /* ... as this one is */
    memcpy(&x[5 * D], &x[4 * D], sizeof(float));
    memcpy(&x[5 * D + 2], &x[4 * D + 2], 2 * sizeof(float));
    float q1[6 * 3], q2[6 * 3], v1[6], v2[6], lp[6];
    int64_t a1[6], a2[6];
    gb_torch_act_out o1 = {a1, lp, v1, q1}, o2 = {a2, lp, v2, q2};
    CHECK_OK(gb_torch_model_act(lm, x, 6, 1, 0.0, &o1, &err));
    CHECK_OK(gb_torch_model_act(pm, x, 6, 1, 0.0, &o2, &err));
    int dqn = strcmp(algo, "dqn") == 0;
    CHECK(memcmp(dqn ? (void *)q1 : (void *)v1, dqn ? (void *)q2 : (void *)v2,
                 dqn ? sizeof q1 : sizeof v1) == 0);
    CHECK(dqn ? memcmp(&q1[4 * 3], &q1[5 * 3], 3 * sizeof(float)) == 0 : v1[4] == v1[5]);

    /* a checkpoint carries them */
    char path[512];
    snprintf(path, sizeof path, "%s/obs_stats_%s.ckpt", scratch, algo);
    CHECK_OK(gb_torch_learner_save(l, path, &err));
    gb_torch_learner *l2 = NULL;
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 4, &l2, &err));
    if (l2) {
        CHECK_OK(gb_torch_learner_load(l2, path, &err));
        double m2[D], va2[D], c2;
        CHECK(exported_stats(gb_torch_learner_model(l2), m2, va2, &c2));
        CHECK(c2 == count2 && memcmp(m2, mean, sizeof m2) == 0 &&
              memcmp(va2, var, sizeof va2) == 0);
        gb_torch_learner_destroy(l2);
    }
    gb_torch_model_destroy(pm);
    gb_torch_learner_destroy(l);
}

/* Without normalize_obs: no statistics in the parameters; observe accepts and ignores rows. */
static void test_without(void)
{
    gb_error err = {0};
    gb_config cfg;
    CHECK(make_cfg(&cfg, "ppo", "") == 0);
    gb_torch_space sp = discrete_space();
    gb_torch_learner *l = NULL;
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 3, &l, &err));
    if (!l)
        return;
    double mean[D], var[D], count;
    CHECK(!exported_stats(gb_torch_learner_model(l), mean, var, &count));
    float x[D] = {1, 2, 3, 4};
    CHECK_OK(gb_torch_learner_observe(l, x, x, 1, NULL, &err));
    gb_torch_learner_destroy(l);
}

/* One DQN step's loss on batch b, with rewards times k, from a fresh learner of seed 3; with
 * scaling, after the returns R (n of them) were observed. */
static double dqn_loss(int scale, const float *R, int n, float k, const char *save,
                       const char *load)
{
    gb_error err = {0};
    gb_config cfg;
    CHECK(make_cfg(&cfg, "dqn", "") == 0);
    cfg.trainer.algorithm.reward_scale = scale;
    cfg.trainer.algorithm.reward_clip = 3.0;
    gb_torch_space sp = discrete_space();
    gb_torch_learner *l = NULL;
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 3, &l, &err));
    if (!l)
        return NAN;
    if (load)
        CHECK_OK(gb_torch_learner_load(l, load, &err));
    if (R)
        CHECK_OK(gb_torch_learner_observe(l, NULL, R, n, NULL, &err));
    gb_torch_batch b = make_batch();
    float r[B * T];
    for (int i = 0; i < B * T; i++)
        r[i] = (float)(i % 5 - 2) * 2.0f * k; /* -4k..4k */
    b.reward = r;
    gb_torch_stats st;
    CHECK_OK(gb_torch_learner_train(l, &b, &st, NULL, &err));
    if (save)
        CHECK_OK(gb_torch_learner_save(l, save, &err));
    gb_torch_learner_destroy(l);
    return st.loss;
}

static void test_reward_scale(void)
{
    enum { N = 1000 };
    static float R[N];
    double s = 0, s2 = 0;
    for (int i = 0; i < N; i++) {
        R[i] = (float)(8.0 * sin(0.37 * i) + 1.0);
        s += R[i];
    }
    for (int i = 0; i < N; i++)
        s2 += (R[i] - s / N) * (R[i] - s / N);
    const double dev = sqrt(s2 / N); /* about 5.7: rewards of up to 8 / dev stay under the clip */
    char path[512];
    snprintf(path, sizeof path, "%s/reward_scale.ckpt", scratch);
    double scaled = dqn_loss(1, R, N, 1.0f, path, NULL);
    double by_hand = dqn_loss(0, NULL, 0, (float)(1.0 / dev), NULL, NULL);
    double raw = dqn_loss(0, NULL, 0, 1.0f, NULL, NULL);
    fprintf(stderr, "  deviation %.3f: loss scaled %.6g, by hand %.6g, unscaled %.6g\n", dev,
            scaled, by_hand, raw);
    CHECK(fabs(scaled - by_hand) <= 1e-5 * fabs(by_hand) && fabs(scaled - raw) > 1e-3);
    /* the checkpoint carries the scale: from it, with no new returns, a step trains as one
     * without scaling on the divided rewards from the same checkpoint */
    double resumed = dqn_loss(1, NULL, 0, 1.0f, NULL, path);
    double resumed_by_hand = dqn_loss(0, NULL, 0, (float)(1.0 / dev), NULL, path);
    CHECK(fabs(resumed - resumed_by_hand) <= 1e-5 * fabs(resumed_by_hand));
    /* clipping: rewards 100 times larger hit reward_clip (3): as rewards of +-3 unscaled */
    double clipped = dqn_loss(1, R, N, 100.0f, NULL, NULL);
    CHECK(isfinite(clipped) && clipped < raw * 10);
}

/* A chunk longer than gb_learning_observe's segment (4096 rows of returns at a time): every new
 * row's return is observed, R carried across segments and reset at episode ends, the overlap's
 * rows skipped. DQN's scaled loss after it equals the loss after the same returns by hand (the
 * old code observed no return of a chunk over 4096 rows). */
static void test_long_chunk(void)
{
    enum { LT = 9000, K = 5 };
    static float obs[LT * D], reward[LT], state[1], R[LT];
    static int64_t act[LT];
    static uint8_t term[LT], trunc[LT], valid[LT];
    gb_error err = {0};
    gb_chunk_layout l;
    const int64_t shape[1] = {D};
    CHECK_OK(gb_chunk_layout_init(&l, LT, GB_DTYPE_FLOAT32, 1, shape, 1, 1, 1, &err));
    CHECK_OK(gb_chunk_layout_set_overlap(&l, K, &err));
    CHECK_OK(gb_chunk_layout_set_return_carry(&l, 0.9, &err));
    state[0] = 2.5f; /* the return entering row 0 */
    double r = state[0];
    const int n = LT - K; /* the new rows: R[t - K], 0 on a reset row (masked out) */
    for (int t = 0; t < LT; t++) {
        reward[t] = (float)(3.0 * sin(0.01 * t) + 0.5);
        valid[t] = t % 3001 != 1000; /* a reset row in each of the first segments */
        term[t] = t % 2500 == 7;
        if (!valid[t]) {
            r = 0;
            continue;
        }
        r = 0.9 * r + reward[t];
        if (t >= K)
            R[t - K] = (float)r;
        if (term[t])
            r = 0;
    }
    const void *cols[GB_CHUNK_NCOLS] = {0};
    cols[GB_CHUNK_OBS] = obs, cols[GB_CHUNK_ACTION] = act, cols[GB_CHUNK_REWARD] = reward;
    cols[GB_CHUNK_TERMINATED] = term, cols[GB_CHUNK_TRUNCATED] = trunc;
    cols[GB_CHUNK_VALID] = valid, cols[GB_CHUNK_STATE] = state;
    gb_config cfg;
    CHECK(make_cfg(&cfg, "dqn", "") == 0);
    cfg.trainer.algorithm.reward_scale = 1;
    cfg.trainer.algorithm.reward_clip = 3.0;
    gb_torch_space sp = discrete_space();
    double loss[2];
    for (int k = 0; k < 2; k++) {
        gb_torch_learner *lr = NULL;
        CHECK_OK(gb_torch_learner_create(&cfg, &sp, 3, &lr, &err));
        if (!lr)
            return;
        if (k == 0)
            gb_learning_observe(&cfg, &l, lr, cols);
        else
            CHECK_OK(gb_torch_learner_observe(lr, NULL, R, n, valid + K, &err));
        gb_torch_batch b = make_batch();
        gb_torch_stats st;
        CHECK_OK(gb_torch_learner_train(lr, &b, &st, NULL, &err));
        loss[k] = st.loss;
        gb_torch_learner_destroy(lr);
    }
    fprintf(stderr, "  %d rows: loss %.9g through the chunk, %.9g by hand\n", LT, loss[0],
            loss[1]);
    CHECK(fabs(loss[0] - loss[1]) <= 1e-6 * fabs(loss[1]));
}

static void test_ppo(void) { test_merge_and_ship("ppo"); }
static void test_dqn(void) { test_merge_and_ship("dqn"); }

int main(int argc, char **argv)
{
    if (argc > 1)
        scratch = argv[1];
    TEST_RUN(test_ppo);
    TEST_RUN(test_dqn);
    TEST_RUN(test_without);
    TEST_RUN(test_reward_scale);
    TEST_RUN(test_long_chunk);
    return test_main_result();
}
