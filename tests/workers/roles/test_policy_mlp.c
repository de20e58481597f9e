/* tests/workers/roles/test_policy_mlp.c: the policy worker's model without libtorch
 * (workers/roles/policy_mlp.h) against the bridge's model of the same config, which the trainer
 * exports and libtorch-run policy workers import:
 *  - the parameter layout is the bridge's entry for entry (names, dtypes, shapes, offsets, size);
 *  - after importing the same parameters (and, for normalize_obs, statistics that clip), the
 *    deterministic actions, log-probabilities, values and Q-values are the bridge's: equal for
 *    PPO and DQN (one program, one normalisation), within 2e-6 for SAC (its log_std squash is
 *    tanhf here, libtorch's vectorised tanh there); with the same exploration noise, the same
 *    continuous actions and log-probabilities; a second import follows the new parameters;
 *  - its own draws: a seed fixes them, the sampled actions' frequencies are their reported
 *    probabilities, DQN's epsilon 1 acts uniformly;
 *  - a blob of another layout or size is refused (GB_EINVAL), and a config that needs libtorch
 *    is declined (GB_EUNSUPPORTED) with its reason.
 * Exits 77 (skipped) on a cpu without AVX2 and FMA, where the model declines every config. */
#include "test.h"
#include "workers/roles/policy_mlp.h"
#include "workers/torch/mlp_infer.h"
#include "workers/torch_test_util.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROWS 257

/* A config of algo with the model keys model ("hidden: [..], ...") and policy keys extra. */
static int config(gb_config *cfg, const char *algo, const char *model, const char *extra)
{
    char text[2048];
    snprintf(text, sizeof text,
             "experiment: {name: t, seed: 3}\nenv: {name: CartPole-v1}\n"
             "policy: {model: {type: mlp, %s}%s}\n"
             "trainer:\n  algorithm: {name: %s}\n",
             model, extra, algo);
    return load_cfg_text(cfg, text);
}

/* The bridge's model, exported parameters made less plain: log_std and the observation
 * statistics (when there) set to values that matter, the rest the bridge's initial weights
 * scaled by scale. Returns the blob (malloc'd, *len bytes). */
static char *params(gb_torch_model *m, float scale, size_t *len)
{
    gb_error err = {0};
    const gb_param_entry *t;
    int n;
    uint64_t total;
    gb_torch_model_layout(m, &t, &n, &total);
    char *buf = malloc(total);
    CHECK_OK(gb_torch_model_export(m, buf, total, NULL, &err));
    for (int i = 0; i < n; i++) {
        int64_t count = t[i].shape[0] * (t[i].rank > 1 ? t[i].shape[1] : 1);
        char *at = buf + t[i].offset;
        for (int64_t j = 0; j < count; j++) {
            if (strcmp(t[i].name, "log_std") == 0)
                ((float *)at)[j] = -0.3f - 0.2f * (float)j;
            else if (strcmp(t[i].name, "obs_mean") == 0)
                ((double *)at)[j] = 0.1 * (double)j - 0.1;
            else if (strcmp(t[i].name, "obs_var") == 0)
                ((double *)at)[j] = 0.01 + 0.5 * (double)j; /* entry 0: |x| / 0.1 clips */
            else if (strcmp(t[i].name, "obs_count") == 0)
                ((double *)at)[j] = 100.0;
            else if (t[i].dtype == GB_DTYPE_FLOAT32)
                ((float *)at)[j] *= scale;
        }
    }
    *len = total;
    return buf;
}

enum { STATE_MAX = 2 * 24 }; /* a core's state a row: LSTM 24 units at most here */

typedef struct acted {
    int64_t a[ROWS];
    float x[ROWS * 4], logp[ROWS], value[ROWS], q[ROWS * 4], state[ROWS * STATE_MAX];
} acted;

/* Both models act on obs; with a core from state (ROWS x S) into their own next states. */
static void act_both(gb_torch_model *tm, gb_policy_mlp *cm, const gb_torch_space *sp,
                     const float *obs, int deterministic, const float *noise, const float *state,
                     acted *t, acted *c)
{
    gb_error err = {0};
    int q = sp->discrete && sp->n_actions <= 4;
    gb_torch_act_out ot = {sp->discrete ? (void *)t->a : t->x, t->logp, t->value,
                           q ? t->q : NULL};
    gb_torch_act_out oc = {sp->discrete ? (void *)c->a : c->x, c->logp, c->value,
                           q ? c->q : NULL};
    CHECK_OK(gb_torch_model_act_state(tm, obs, ROWS, deterministic, 0.0, noise, state,
                                      state ? t->state : NULL, &ot, &err));
    CHECK_OK(gb_policy_mlp_act(cm, obs, ROWS, deterministic, 0.0, noise, state,
                               state ? c->state : NULL, &oc, &err));
}

/* max |a - b| over n, relative to 1 + |a| */
static double gap(const float *a, const float *b, int n)
{
    double g = 0;
    for (int i = 0; i < n; i++)
        g = fmax(g, fabs((double)a[i] - b[i]) / (1.0 + fabs((double)a[i])));
    return g;
}

static void compare(const char *what, const acted *t, const acted *c, const gb_torch_space *sp,
                    const char *algo, int64_t S, double tol)
{
    if (S > 0) {
        double gs = gap(t->state, c->state, ROWS * (int)S);
        CHECK_MSG(gs <= tol, "%s: next states %.3g apart", what, gs);
    }
    int dqn = strcmp(algo, "dqn") == 0;
    if (sp->discrete) {
        int same = 1;
        for (int i = 0; i < ROWS; i++)
            same = same && t->a[i] == c->a[i];
        CHECK_MSG(same, "%s: the actions differ", what);
    } else {
        double g = gap(t->x, c->x, ROWS * (int)sp->action_dim);
        CHECK_MSG(g <= tol, "%s: actions %.3g apart", what, g);
    }
    double gl = gap(t->logp, c->logp, ROWS), gv = gap(t->value, c->value, ROWS);
    CHECK_MSG(gl <= tol, "%s: log-probabilities %.3g apart", what, gl);
    CHECK_MSG(gv <= tol, "%s: values %.3g apart", what, gv);
    if (dqn) {
        double gq = gap(t->q, c->q, ROWS * (int)sp->n_actions);
        CHECK_MSG(gq <= tol, "%s: Q-values %.3g apart", what, gq);
    }
}

/* One config: layouts, deterministic and noisy acting against the bridge, a second import. */
static void same_as_bridge(const char *algo, const char *model, const char *extra,
                           gb_torch_space sp, double tol)
{
    gb_config cfg;
    gb_error err = {0};
    if (config(&cfg, algo, model, extra)) {
        CHECK(0);
        return;
    }
    gb_torch_model *tm = NULL;
    gb_policy_mlp *cm = NULL;
    CHECK_OK(gb_torch_model_create(&cfg, &sp, 7, &tm, &err));
    CHECK_OK(gb_torch_model_set_precision(tm, cfg.policy.precision, &err));
    CHECK_OK(gb_policy_mlp_open(&cfg, &sp, 7, &cm, &err));
    if (!tm || !cm)
        goto done;
    if (gb_torch_model_state_size(tm) == 0) /* (a core runs on libtorch's there) */
        CHECK_MSG(strcmp(gb_torch_model_kernels(tm), gb_policy_mlp_kernels(cm)) == 0,
                  "%s vs %s", gb_torch_model_kernels(tm), gb_policy_mlp_kernels(cm));
    const gb_param_entry *lt, *lc;
    int nt, nc;
    uint64_t tt, tc;
    gb_torch_model_layout(tm, &lt, &nt, &tt);
    gb_policy_mlp_layout(cm, &lc, &nc, &tc);
    CHECK_EQ_INT(nc, nt);
    CHECK_EQ_INT(tc, tt);
    for (int i = 0; i < nt && i < nc; i++)
        CHECK_MSG(memcmp(&lt[i], &lc[i], sizeof lt[i]) == 0, "entry %d: %s vs %s", i,
                  lt[i].name, lc[i].name);
    if (nt != nc || tt != tc)
        goto done;
    float obs[ROWS * 8], noise[ROWS * 4];
    int in = (int)sp.obs_shape[0];
    fill(obs, ROWS * in, 11);
    for (int i = 0; i < ROWS * in; i++)
        obs[i] *= 3.0f;
    fill(noise, ROWS * 4, 12);
    acted *t = malloc(sizeof *t), *c = malloc(sizeof *c);
    /* with a core: random states entering, every fifth row's zeros (an episode's start) */
    const int64_t S = gb_torch_model_state_size(tm);
    CHECK_EQ_INT(gb_policy_mlp_state_size(cm), S);
    static float state[ROWS * STATE_MAX];
    fill(state, ROWS * (int)S, 13);
    for (int r = 0; r < ROWS; r += 5)
        memset(state + (size_t)r * (size_t)S, 0, sizeof(float) * (size_t)S);
    const float *st = S > 0 ? state : NULL;
    for (int round = 0; round < 2; round++) { /* two imports: the second re-quantizes */
        size_t len;
        char *blob = params(tm, round ? 1.7f : 1.0f, &len);
        CHECK_OK(gb_torch_model_import(tm, blob, len, lt, nt, 3 + (uint64_t)round, &err));
        CHECK_OK(gb_policy_mlp_import(cm, blob, len, lt, nt, 3 + (uint64_t)round, &err));
        free(blob);
        act_both(tm, cm, &sp, obs, 1, NULL, st, t, c);
        compare("deterministic", t, c, &sp, algo, S, tol);
        if (!sp.discrete) {
            act_both(tm, cm, &sp, obs, 0, noise, st, t, c);
            compare("with noise", t, c, &sp, algo, S, tol);
        }
    }
    free(t);
    free(c);
done:
    gb_torch_model_destroy(tm);
    gb_policy_mlp_close(cm);
}

static void test_same_as_bridge(void)
{
    gb_torch_space d = discrete_space(), b = box_space(); /* 4 floats, 3 actions; 3 floats, 2 */
    /* PPO: separate torsos (the default), shared ones, relu, boxes, int8 */
    same_as_bridge("ppo", "hidden: [64, 64]", "", d, 0);
    same_as_bridge("ppo", "hidden: [32], shared: true, activation: relu", "", d, 0);
    same_as_bridge("ppo", "hidden: [16, 16], normalize_obs: true", "", b, 0);
    same_as_bridge("ppo", "hidden: [8], shared: true, activation: relu", "", b, 0);
    same_as_bridge("ppo", "hidden: [64, 64]", ", precision: int8", d, 0);
    same_as_bridge("dqn", "hidden: [64, 64], activation: relu", "", d, 0);
    same_as_bridge("dqn", "hidden: [32, 32], normalize_obs: true", ", precision: int8", d, 0);
    same_as_bridge("sac", "hidden: [32, 32]", "", b, 2e-6);
    /* a core: the step in fp32 C against libtorch's, states in and out */
    same_as_bridge("ppo", "hidden: [16], core: lstm, core_size: 24", "", d, 2e-6);
    same_as_bridge("ppo", "hidden: [5], core: gru, core_size: 20", "", b, 2e-6);
    same_as_bridge("ppo", "hidden: [16], core: gru, core_size: 20, normalize_obs: true", "", b,
                   2e-6);
    same_as_bridge("dqn", "hidden: [16], activation: relu, core: lstm, core_size: 24", "", d,
                   2e-6);
}

/* The draws: a seed fixes them; sampled actions' frequencies are their reported probabilities;
 * DQN's epsilon 1 is uniform. */
static void test_own_draws(void)
{
    gb_config cfg;
    gb_error err = {0};
    gb_torch_space sp = discrete_space();
    CHECK_OK(config(&cfg, "ppo", "hidden: [8]", ""));
    gb_policy_mlp *a = NULL, *b = NULL;
    CHECK_OK(gb_policy_mlp_open(&cfg, &sp, 5, &a, &err));
    CHECK_OK(gb_policy_mlp_open(&cfg, &sp, 5, &b, &err));
    if (!a || !b)
        goto done;
    const gb_param_entry *t;
    int n;
    uint64_t total;
    gb_policy_mlp_layout(a, &t, &n, &total);
    char *blob = calloc(1, total);
    for (int i = 0; i < n; i++) /* pi's bias alone: logits (0, 1, -1) for every row */
        if (strcmp(t[i].name, "pi.bias") == 0)
            ((float *)(blob + t[i].offset))[1] = 1.0f, ((float *)(blob + t[i].offset))[2] = -1.0f;
    CHECK_OK(gb_policy_mlp_import(a, blob, total, t, n, 1, &err));
    CHECK_OK(gb_policy_mlp_import(b, blob, total, t, n, 1, &err));
    free(blob);
    enum { N = 30000 };
    float *obs = calloc((size_t)N * 4, sizeof(float)), *logp = malloc(N * sizeof(float));
    int64_t *x = malloc(N * sizeof(int64_t)), *y = malloc(N * sizeof(int64_t));
    gb_torch_act_out ox = {x, logp, NULL, NULL}, oy = {y, NULL, NULL, NULL};
    CHECK_OK(gb_policy_mlp_act(a, obs, N, 0, 0.0, NULL, NULL, NULL, &ox, &err));
    CHECK_OK(gb_policy_mlp_act(b, obs, N, 0, 0.0, NULL, NULL, NULL, &oy, &err));
    CHECK(memcmp(x, y, N * sizeof(int64_t)) == 0);
    double z = 1.0 + exp(1.0) + exp(-1.0), want[3] = {1.0 / z, exp(1.0) / z, exp(-1.0) / z};
    int count[3] = {0};
    for (int i = 0; i < N; i++) {
        CHECK(x[i] >= 0 && x[i] < 3);
        if (x[i] >= 0 && x[i] < 3) {
            count[x[i]]++;
            CHECK_NEAR(logp[i], log(want[x[i]]), 1e-5);
        }
    }
    for (int k = 0; k < 3; k++) /* 5 standard deviations of a binomial share at most */
        CHECK_NEAR(count[k] / (double)N, want[k], 5 * sqrt(0.25 / N));
    gb_policy_mlp_close(b);
    b = NULL;
    CHECK_OK(config(&cfg, "dqn", "hidden: [8]", ""));
    CHECK_OK(gb_policy_mlp_open(&cfg, &sp, 5, &b, &err));
    gb_policy_mlp_layout(b, &t, &n, &total);
    blob = calloc(1, total);
    CHECK_OK(gb_policy_mlp_import(b, blob, total, t, n, 1, &err));
    free(blob);
    ox.logp = NULL;
    CHECK_OK(gb_policy_mlp_act(b, obs, N, 0, 1.0, NULL, NULL, NULL, &ox, &err));
    memset(count, 0, sizeof count);
    for (int i = 0; i < N; i++)
        count[x[i] >= 0 && x[i] < 3 ? x[i] : 0]++;
    for (int k = 0; k < 3; k++)
        CHECK_NEAR(count[k] / (double)N, 1.0 / 3.0, 5 * sqrt(0.25 / N));
    free(obs);
    free(logp);
    free(x);
    free(y);
done:
    gb_policy_mlp_close(a);
    gb_policy_mlp_close(b);
}

/* Another layout or size is refused; configs that need libtorch are declined, saying why. */
static void test_refusals(void)
{
    gb_config cfg, other;
    gb_error err = {0};
    gb_torch_space sp = discrete_space();
    gb_policy_mlp *m = NULL, *o = NULL;
    CHECK_OK(config(&cfg, "ppo", "hidden: [16]", ""));
    CHECK_OK(config(&other, "ppo", "hidden: [17]", ""));
    CHECK_OK(gb_policy_mlp_open(&cfg, &sp, 1, &m, &err));
    CHECK_OK(gb_policy_mlp_open(&other, &sp, 1, &o, &err));
    if (!m || !o)
        goto done;
    const gb_param_entry *t;
    int n;
    uint64_t total;
    gb_policy_mlp_layout(o, &t, &n, &total);
    char *blob = calloc(1, total);
    CHECK_EQ_INT(gb_policy_mlp_import(m, blob, total, t, n, 1, &err), GB_EINVAL);
    CHECK(strstr(err.msg, "bytes sent") || strstr(err.msg, "does not match"));
    free(blob);
    gb_policy_mlp_layout(m, &t, &n, &total);
    blob = calloc(1, total + 64);
    CHECK_EQ_INT(gb_policy_mlp_import(m, blob, total + 64, t, n, 1, &err), GB_EINVAL);
    gb_param_entry bad[64];
    memcpy(bad, t, (size_t)n * sizeof *t);
    bad[n - 1].shape[0]++;
    CHECK_EQ_INT(gb_policy_mlp_import(m, blob, total, bad, n, 1, &err), GB_EINVAL);
    CHECK(strstr(err.msg, "does not match") != NULL);
    free(blob);
    static const struct {
        const char *model, *extra, *why;
    } declined[] = {
        {"hidden: [16], layer_norm: true", "", "layer_norm"},
        {"hidden: [16], activation: elu", "", "activation"},
        {"hidden: [16], core: transformer, core_size: 8", "", "core"},
        {"hidden: [16]", ", kernels: libtorch", "kernels"},
        {"hidden: [16]", ", precision: bf16", "precision"},
        {"hidden: [16]", ", device: cuda", "device"},
    };
    for (size_t i = 0; i < sizeof declined / sizeof declined[0]; i++) {
        gb_policy_mlp *d = NULL;
        CHECK_OK(config(&other, "ppo", declined[i].model, declined[i].extra));
        err.msg[0] = '\0';
        CHECK_EQ_INT(gb_policy_mlp_open(&other, &sp, 1, &d, &err), GB_EUNSUPPORTED);
        CHECK_MSG(d == NULL && strstr(err.msg, declined[i].why), "%s: %s", declined[i].model,
                  err.msg);
    }
    gb_torch_space frames = sp;
    frames.obs_dtype = GB_DTYPE_UINT8;
    gb_policy_mlp *u8 = NULL;
    CHECK_EQ_INT(gb_policy_mlp_open(&cfg, &frames, 1, &u8, &err), GB_EUNSUPPORTED);
    CHECK(u8 == NULL);
done:
    gb_policy_mlp_close(m);
    gb_policy_mlp_close(o);
}

int main(void)
{
    if (!gb_mlp_fast()) {
        fprintf(stderr, "skipped: this cpu has neither AVX2 with FMA nor AVX-512\n");
        return 77;
    }
    TEST_RUN(test_same_as_bridge);
    TEST_RUN(test_own_draws);
    TEST_RUN(test_refusals);
    return test_main_result();
}
