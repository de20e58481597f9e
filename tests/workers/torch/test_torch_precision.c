/* tests/workers/torch/test_torch_precision.c: reduced-precision inference (policy.precision): a
 * model in int8 or bf16 that imported an fp32 model's parameters gives that model's outputs within
 * a stated tolerance (PPO means and values, DQN Q-values, SAC actions and log-probabilities, with
 * tanh and relu + layer norm torsos, and a CNN's Q-values); a second import re-quantizes (the
 * outputs follow the new parameters, and export still gives the fp32 parameters bit for bit);
 * torchscript models and unknown precisions are refused. Each through both policy.kernels:
 * gearbox's (a plain MLP on a cpu with AVX-512 VNNI runs workers/torch/mlp_infer.c, fp32 as well,
 * within float rounding of libtorch's fp32: rel 1e-5, abs 1e-5; anything else falls back to
 * libtorch's modules, and gb_torch_model_kernels says which ran) and libtorch's.
 * argv[1]: a scratch folder.
 *
 * Tolerances, max |reduced - fp32| over 256 rows <= rel * max |fp32| + abs:
 *   int8 (weights per output channel, activations per batch, 8 bits each): rel 0.05, abs 1e-3
 *   bf16 (8-bit mantissa, rounding at each layer):                         rel 0.03, abs 1e-3 */
#include "test.h"
#include "workers/torch_test_util.h"
#include "workers/torch/testing.h"
#include "workers/torch/mlp_infer.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROWS 256
#define OUT_MAX (ROWS * 8)

static const char *scratch = ".";

typedef struct outputs {
    int n;            /* values compared */
    float v[OUT_MAX]; /* the algorithm's continuous outputs, concatenated */
} outputs;

/* The outputs of one deterministic act over obs: PPO box: mean action and value; PPO discrete:
 * the greedy action's log-probability and value; DQN: Q-values; SAC: action and
 * log-probability. */
static int act(gb_torch_model *m, const char *algo, const gb_torch_space *sp, const float *obs,
               outputs *o)
{
    gb_error err = {0};
    float action[ROWS * 2], logp[ROWS], value[ROWS], q[ROWS * 3];
    int64_t greedy[ROWS];
    int dqn = strcmp(algo, "dqn") == 0;
    gb_torch_act_out out = {dqn || sp->discrete ? (void *)greedy : (void *)action, logp, value,
                            dqn ? q : NULL};
    int rc = gb_torch_model_act(m, obs, ROWS, 1, 0.0, &out, &err);
    if (rc) {
        fprintf(stderr, "act: %s\n", err.msg);
        return rc;
    }
    o->n = 0;
    if (dqn) {
        memcpy(o->v, q, sizeof q);
        o->n = ROWS * 3;
    } else if (strcmp(algo, "ppo") == 0 && sp->discrete) {
        memcpy(o->v, logp, sizeof logp);
        memcpy(o->v + ROWS, value, sizeof value);
        o->n = 2 * ROWS;
    } else if (strcmp(algo, "ppo") == 0) {
        memcpy(o->v, action, sizeof(float) * ROWS * (size_t)sp->action_dim);
        memcpy(o->v + ROWS * sp->action_dim, value, sizeof value);
        o->n = ROWS * ((int)sp->action_dim + 1);
    } else {
        memcpy(o->v, action, sizeof(float) * ROWS * (size_t)sp->action_dim);
        memcpy(o->v + ROWS * sp->action_dim, logp, sizeof logp);
        o->n = ROWS * ((int)sp->action_dim + 1);
    }
    return 0;
}

static double max_abs(const outputs *a)
{
    double m = 0;
    for (int i = 0; i < a->n; i++)
        m = fmax(m, fabs(a->v[i]));
    return m;
}

static double max_diff(const outputs *a, const outputs *b)
{
    double m = 0;
    for (int i = 0; i < a->n; i++)
        m = fmax(m, fabs((double)a->v[i] - b->v[i]));
    return m;
}

static double tolerance(int precision, const outputs *ref)
{
    return (precision == GB_PRECISION_INT8 ? 0.05 : 0.03) * max_abs(ref) + 1e-3;
}

/* Copies src's parameters into dst through the flat buffer (as the parameter stream does). */
static int copy_params(gb_torch_model *src, gb_torch_model *dst, uint64_t version, void **keep)
{
    gb_error err = {0};
    const gb_param_entry *table;
    int count;
    uint64_t total;
    gb_torch_model_layout(src, &table, &count, &total);
    void *buf = malloc(total);
    int rc = buf ? gb_torch_model_export(src, buf, total, NULL, &err) : GB_ENOMEM;
    if (!rc)
        rc = gb_torch_model_import(dst, buf, total, table, count, version, &err);
    if (rc)
        fprintf(stderr, "copy_params: %s\n", err.msg);
    if (keep)
        *keep = buf;
    else
        free(buf);
    return rc;
}

/* Whether gearbox's kernels run a model of this config (a plain MLP: no layer norm, tanh or
 * relu; fp32 or int8 on a cpu with AVX2 or AVX-512, gb_mlp_fast) */
static int gearbox_runs(const gb_config *cfg, int precision)
{
    const gb_config_model *mc = &cfg->policy.model;
    return cfg->policy.kernels == GB_KERNELS_GEARBOX && mc->type == GB_MODEL_MLP &&
           !mc->layer_norm && (mc->activation == GB_ACT_TANH || mc->activation == GB_ACT_RELU) &&
           (precision == GB_PRECISION_FP32 || precision == GB_PRECISION_INT8) && gb_mlp_fast();
}

/* One algorithm and torso at one precision through kernels: the reduced model follows the
 * fp32 one's parameters (libtorch's modules, no precision set), before and after a swap to
 * another set. */
static void check_precision(const char *algo, const char *extra, gb_torch_space sp,
                            int precision, const char *name, int kernels)
{
    gb_error err = {0};
    gb_config cfg;
    CHECK(make_cfg(&cfg, algo, extra) == 0);
    cfg.policy.kernels = kernels;
    gb_torch_model *ref_a = NULL, *ref_b = NULL, *low = NULL;
    CHECK_OK(gb_torch_model_create(&cfg, &sp, 1, &ref_a, &err));
    CHECK_OK(gb_torch_model_create(&cfg, &sp, 2, &ref_b, &err));
    CHECK_OK(gb_torch_model_create(&cfg, &sp, 3, &low, &err));
    if (!ref_a || !ref_b || !low)
        goto out;
    CHECK_OK(gb_torch_model_set_precision(low, precision, &err));
    const char *ran = gb_torch_model_kernels(low);
    CHECK_MSG((strncmp(ran, "gearbox", 7) == 0) == gearbox_runs(&cfg, precision), "%s", ran);
    static float obs[ROWS * 4];
    fill(obs, ROWS * (int)sp.obs_shape[0], 5);
    for (int i = 0; i < ROWS * (int)sp.obs_shape[0]; i++)
        obs[i] *= 3.0f; /* inputs of a few units, like CartPole's and Pendulum's */
    static outputs ra, rb, la, lb;
    CHECK_OK(act(ref_a, algo, &sp, obs, &ra));
    CHECK_OK(act(ref_b, algo, &sp, obs, &rb));

    /* the first parameters */
    CHECK_OK(copy_params(ref_a, low, 1, NULL));
    CHECK_OK(act(low, algo, &sp, obs, &la));
    double da = max_diff(&la, &ra), ta = tolerance(precision, &ra);
    printf("%s %-28s %s (%s): max |diff| %.3g (max |fp32| %.3g, tolerance %.3g)\n", algo, extra,
           name, ran, da, max_abs(&ra), ta);
    CHECK(da <= ta);
    CHECK(da > 0); /* it did run in reduced precision */

    /* a swap: the reduced copies are rebuilt from the new parameters */
    void *sent = NULL;
    CHECK_OK(copy_params(ref_b, low, 2, &sent));
    CHECK_OK(act(low, algo, &sp, obs, &lb));
    double db = max_diff(&lb, &rb), tb = tolerance(precision, &rb);
    double moved = max_diff(&lb, &la);
    printf("%s %-28s %s after a swap: max |diff| %.3g (tolerance %.3g), moved %.3g from the "
           "first parameters' outputs\n", algo, extra, name, db, tb, moved);
    CHECK(db <= tb);
    CHECK(moved > 2 * tb); /* not the first parameters' outputs any more */
    CHECK(gb_torch_model_version(low) == 2);

    /* the parameters themselves stay fp32: export gives back what was imported */
    const gb_param_entry *table;
    int count;
    uint64_t total;
    gb_torch_model_layout(low, &table, &count, &total);
    void *back = malloc(total);
    CHECK(back != NULL);
    if (back && sent) {
        CHECK_OK(gb_torch_model_export(low, back, total, NULL, &err));
        CHECK(memcmp(back, sent, total) == 0);
    }
    free(back);
    free(sent);

    /* fp32 again: libtorch's drops the reduced copies, the outputs are fp32's exactly;
     * gearbox's runs its fp32 program, within float rounding of them */
    static outputs lf;
    CHECK_OK(gb_torch_model_set_precision(low, GB_PRECISION_FP32, &err));
    CHECK_OK(act(low, algo, &sp, obs, &lf));
    double df = max_diff(&lf, &rb);
    if (gearbox_runs(&cfg, GB_PRECISION_FP32)) {
        CHECK(strcmp(gb_torch_model_kernels(low), "gearbox fp32") == 0);
        printf("%s %-28s fp32 (gearbox fp32): max |diff| %.3g\n", algo, extra, df);
        CHECK(df <= 1e-5 * max_abs(&rb) + 1e-5);
    } else {
        CHECK(df == 0);
    }
out:
    gb_torch_model_destroy(ref_a);
    gb_torch_model_destroy(ref_b);
    gb_torch_model_destroy(low);
}

/* A CNN (Nature torso over uint8 frames, then a Linear of 64 -> 32 and the Q head): the
 * convolutions stay fp32, the Linear runs reduced; the Q-values within the tolerance. */
static void test_cnn(int precision, const char *name)
{
    gb_error err = {0};
    gb_config cfg;
    CHECK(make_cfg(&cfg, "dqn", "") == 0);
    cfg.policy.model.type = GB_MODEL_CNN;
    cfg.policy.model.hidden.n = 1;
    cfg.policy.model.hidden.v[0] = 32;
    gb_torch_space sp;
    memset(&sp, 0, sizeof sp);
    sp.obs_dtype = GB_DTYPE_UINT8;
    sp.obs_ndim = 3;
    sp.obs_shape[0] = 2;
    sp.obs_shape[1] = 36;
    sp.obs_shape[2] = 36;
    sp.discrete = 1;
    sp.n_actions = 4;
    enum { N = 64, O = 2 * 36 * 36 };
    static uint8_t obs[N * O];
    for (int i = 0; i < N * O; i++)
        obs[i] = (uint8_t)(((unsigned)i * 2654435761u) >> 13);
    gb_torch_model *ref = NULL, *low = NULL;
    CHECK_OK(gb_torch_model_create(&cfg, &sp, 1, &ref, &err));
    CHECK_OK(gb_torch_model_create(&cfg, &sp, 3, &low, &err));
    if (ref && low) {
        CHECK_OK(gb_torch_model_set_precision(low, precision, &err));
        CHECK_OK(copy_params(ref, low, 1, NULL));
        static outputs r, l;
        int64_t a[N];
        gb_torch_act_out o1 = {a, NULL, NULL, r.v}, o2 = {a, NULL, NULL, l.v};
        CHECK_OK(gb_torch_model_act(ref, obs, N, 1, 0.0, &o1, &err));
        CHECK_OK(gb_torch_model_act(low, obs, N, 1, 0.0, &o2, &err));
        r.n = l.n = N * 4;
        double d = max_diff(&l, &r), t = tolerance(precision, &r);
        printf("dqn cnn %s: max |diff| %.3g (max |fp32| %.3g, tolerance %.3g)\n", name, d,
               max_abs(&r), t);
        CHECK(d <= t);
        CHECK(d > 0);
    }
    gb_torch_model_destroy(ref);
    gb_torch_model_destroy(low);
}

static void test_refusals(void)
{
    gb_error err = {0};
    gb_config cfg;
    CHECK(make_cfg(&cfg, "ppo", "") == 0);
    gb_torch_space sp = discrete_space();
    gb_torch_model *m = NULL;
    CHECK_OK(gb_torch_model_create(&cfg, &sp, 1, &m, &err));
    if (m) {
        CHECK(gb_torch_model_set_precision(m, 7, &err) == GB_EINVAL);
        gb_torch_model_destroy(m);
    }
    const char *engine = NULL;
    CHECK_OK(gb_torch_model_int8_engine(&engine, &err));
    printf("int8 engine: %s\n", engine ? engine : "?");

    char path[1024];
    snprintf(path, sizeof path, "%s/precision_script.pt", scratch);
    CHECK_OK(gb_torch_write_test_script(path, 4, 3, 1, &err));
    gb_config ts;
    CHECK(make_cfg(&ts, "ppo", "") == 0);
    ts.policy.model.type = GB_MODEL_TORCHSCRIPT;
    snprintf(ts.policy.model.torchscript, sizeof ts.policy.model.torchscript, "%s", path);
    gb_torch_model *s = NULL;
    CHECK_OK(gb_torch_model_create(&ts, &sp, 1, &s, &err));
    if (s) {
        CHECK(gb_torch_model_set_precision(s, GB_PRECISION_INT8, &err) == GB_EUNSUPPORTED);
        CHECK(strstr(err.msg, "torchscript") != NULL);
        CHECK_OK(gb_torch_model_set_precision(s, GB_PRECISION_FP32, &err));
        gb_torch_model_destroy(s);
    }
}

int main(int argc, char **argv)
{
    if (argc > 1)
        scratch = argv[1];
    gb_error err = {0};
    CHECK_OK(gb_torch_set_threads(1, &err));
    static const int precisions[2] = {GB_PRECISION_INT8, GB_PRECISION_BF16};
    static const char *const names[2] = {"int8", "bf16"};
    static const int kernels[2] = {GB_KERNELS_GEARBOX, GB_KERNELS_LIBTORCH};
    for (int p = 0; p < 2; p++)
        for (int k = 0; k < 2; k++) {
            int K = kernels[k];
            check_precision("ppo", "", box_space(), precisions[p], names[p], K);
            check_precision("ppo", "", discrete_space(), precisions[p], names[p], K);
            check_precision("ppo", ", shared: true", box_space(), precisions[p], names[p], K);
            check_precision("ppo", ", activation: relu, layer_norm: true", box_space(),
                            precisions[p], names[p], K);
            check_precision("dqn", "", discrete_space(), precisions[p], names[p], K);
            check_precision("sac", ", activation: relu", box_space(), precisions[p], names[p], K);
        }
    for (int p = 0; p < 2; p++)
        test_cnn(precisions[p], names[p]);
    test_refusals();
    return test_main_result();
}
