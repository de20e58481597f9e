/* workers/roles/policy_mlp.c: a policy worker's model without libtorch (policy_mlp.h). The
 * program's layers and the parameter layout are built together, in the order the bridge's
 * networks register them (workers/torch/network.cpp: ActorCritic, QNet, SacActor; libtorch lists
 * a module's own parameters before its children's, and the buffers after every parameter). */
#include "workers/roles/policy_mlp.h"

#include "runtime/base/rng.h"
#include "workers/roles/flat_mlp.h"
#include "workers/torch/core_train.h"
#include "workers/torch/mlp_infer.h"
#include "workers/torch/mlp_train.h"
#include "workers/torch/sampling.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The narrowest layer int8 quantizes, both ways (the bridge's kMinInt8Width). */
#define MIN_INT8_WIDTH 16

struct gb_policy_mlp {
    int algo;
    gb_torch_space space;
    int in;         /* an observation's values */
    int outs;       /* the action head's width: actions (discrete) or action dimensions */
    int int8;       /* policy.precision int8 */
    gb_param_entry *layout;
    int nlayout;
    uint64_t total;
    gb_mlp_layer_spec *specs;
    int *weight_entry; /* each layer's weight's layout entry (its bias is the next one) */
    int nlayers;
    gb_mlp *mlp;
    float **layer_outs;    /* [nlayers]: where gb_mlp_forward writes each layer (heads only) */
    int head_a, head_b;    /* the layers whose outputs the heads are (head_b -1: none) */
    int log_std_entry;     /* PPO, boxes: the log_std parameter's entry; else -1 */
    int stats_entry;       /* policy.model.normalize_obs: obs_mean's entry (obs_var's next) */
    float *obs_mean, *obs_rstd; /* [in] the statistics as floats, as the bridge's forward */
    float clip;
    float *log_std;        /* [outs]: PPO's log_std parameter */
    float *act_scale, *act_bias; /* SAC: [outs] */
    /* policy.model.core lstm or gru: torso (the program; none without hidden layers) -> core
     * -> heads, the core and the heads in fp32 (core_train.h's forward, one step) */
    int core_entry;       /* core.ih.weight's entry (its bias, core.hh's follow); -1: no core */
    int head_entry[2];    /* the heads' weights' entries (pi or q, v; -1: none), biases next */
    gb_core_train core;   /* its weights in core_w */
    float *core_w;        /* the core's weights, the heads', the core's transposed */
    float *head_w[2], *head_bias[2];
    float *feat, *y, *ws_core; /* [cap, F], [cap, H], the core's workspace for cap rows */
    gb_rng rng;
    uint64_t version;
    /* scratch for a batch, grown to the largest one: parts of one block */
    int64_t cap;
    void *scratch;
    int64_t *actions; /* [cap] discrete actions nobody asked for */
    float *x;         /* [cap, in] normalised observations */
    float *ha, *hb;   /* [cap, outs] the heads' outputs (hb: PPO's value is [cap, 1]) */
    float *rows_ls;   /* [cap, outs] the rows' log standard deviations */
    float *actions_f; /* [cap, outs] continuous actions nobody asked for */
    float *draws;     /* [cap, max(2, outs)] uniform or normal draws */
};

/* Appends an entry of dtype and shape (rank 1 or 2; d1 0 for rank 1) at the next aligned offset
 * (room for it made by build); returns its index. */
static int add_entry(gb_policy_mlp *m, const char *name, gb_dtype dtype, int64_t d0, int64_t d1)
{
    gb_param_entry_append(&m->layout[m->nlayout], &m->total, GB_TORCH_PARAM_ALIGN, name, dtype,
                          d0, d1);
    return m->nlayout++;
}

/* A Linear layer named prefix (prefix.weight [out, in], prefix.bias [out]) reading src (-1: the
 * observations), with activation act; returns its index. */
static int add_linear(gb_policy_mlp *m, const char *prefix, int src, int out, int act)
{
    int in = src < 0 ? m->in : m->specs[src].out;
    char name[GB_PARAM_NAME_MAX];
    snprintf(name, sizeof name, "%s.weight", prefix);
    m->weight_entry[m->nlayers] = add_entry(m, name, GB_DTYPE_FLOAT32, out, in);
    snprintf(name, sizeof name, "%s.bias", prefix);
    add_entry(m, name, GB_DTYPE_FLOAT32, out, 0);
    m->specs[m->nlayers] = (gb_mlp_layer_spec){
        .src = src,
        .in = in,
        .out = out,
        .act = act,
        .int8 = m->int8 && in >= MIN_INT8_WIDTH && out >= MIN_INT8_WIDTH};
    return m->nlayers++;
}

/* The torso named name: the hidden list's Linear layers (name.0, name.2, ...: each followed by
 * its activation module in the bridge's Sequential) from the observations. Its last layer's
 * index (-1 with no hidden layer: the heads read the observations). */
static int add_torso(gb_policy_mlp *m, const gb_config_model *mc, const char *name)
{
    int at = -1;
    int act = mc->activation == GB_ACT_RELU ? GB_MLP_ACT_RELU : GB_MLP_ACT_TANH;
    for (int i = 0; i < mc->hidden.n; i++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "%s.%d", name, 2 * i);
        at = add_linear(m, prefix, at, (int)mc->hidden.v[i], act);
    }
    return at;
}

/* A core (mc's lstm or gru) after the torso's layer t (-1: the observations) and the heads on
 * it (network.cpp's add_core: PPO's pi and v, DQN's q): their entries and their fp32 arrays.
 * 0, or -1 (memory). */
static int add_core(gb_policy_mlp *m, const gb_config_model *mc, int t)
{
    const int F = t < 0 ? m->in : m->specs[t].out, H = (int)mc->core_size;
    const int lstm = mc->core == GB_CORE_LSTM, GH = (lstm ? 4 : 3) * H;
    const int ppo = m->algo == GB_ALGO_PPO;
    m->core_entry = add_entry(m, "core.ih.weight", GB_DTYPE_FLOAT32, GH, F);
    add_entry(m, "core.ih.bias", GB_DTYPE_FLOAT32, GH, 0);
    add_entry(m, "core.hh.weight", GB_DTYPE_FLOAT32, GH, H);
    add_entry(m, "core.hh.bias", GB_DTYPE_FLOAT32, GH, 0);
    m->head_entry[0] = add_entry(m, ppo ? "pi.weight" : "q.weight", GB_DTYPE_FLOAT32, m->outs, H);
    add_entry(m, ppo ? "pi.bias" : "q.bias", GB_DTYPE_FLOAT32, m->outs, 0);
    if (ppo) {
        m->head_entry[1] = add_entry(m, "v.weight", GB_DTYPE_FLOAT32, 1, H);
        add_entry(m, "v.bias", GB_DTYPE_FLOAT32, 1, 0);
    }
    /* the core's weights and biases, the heads', then the core's weights transposed */
    const size_t n = (size_t)GH * (size_t)(F + H + 2) + (size_t)(m->outs + 1) * (size_t)(H + 1) +
                     (size_t)GH * (size_t)(F + H);
    float *w = m->core_w = calloc(n, sizeof(float));
    if (!w)
        return -1;
    m->core = (gb_core_train){.kind = lstm ? GB_CORE_TRAIN_LSTM : GB_CORE_TRAIN_GRU,
                              .F = F,
                              .H = H,
                              .w_ih = w,
                              .b_ih = w + (size_t)GH * F,
                              .w_hh = w + (size_t)GH * (F + 1),
                              .b_hh = w + (size_t)GH * (F + 1 + H)};
    m->head_w[0] = w + (size_t)GH * (size_t)(F + H + 2);
    m->head_bias[0] = m->head_w[0] + (size_t)m->outs * (size_t)H;
    m->head_w[1] = m->head_bias[0] + m->outs;
    m->head_bias[1] = m->head_w[1] + H;
    m->core.wt_ih = m->head_bias[1] + 1;
    m->core.wt_hh = m->core.wt_ih + (size_t)GH * (size_t)F;
    return 0;
}

/* The networks' layers and layout (network.cpp's ActorCritic, QNet, SacActor); 0 or GB_ENOMEM. */
static int build(gb_policy_mlp *m, const gb_config_model *mc, gb_error *err)
{
    /* two torsos and two heads at most; two entries a layer, log_std and three statistics */
    const size_t layers = 2 * (size_t)mc->hidden.n + 2, entries = 2 * layers + 8;
    m->specs = calloc(layers, sizeof *m->specs);
    m->weight_entry = calloc(layers, sizeof *m->weight_entry);
    m->layer_outs = calloc(layers, sizeof *m->layer_outs);
    m->layout = calloc(entries, sizeof *m->layout);
    if (!m->specs || !m->weight_entry || !m->layer_outs || !m->layout)
        return gb_error_set(err, GB_ENOMEM, "policy model: out of memory");
    m->log_std_entry = m->stats_entry = m->head_b = -1;
    if (m->algo == GB_ALGO_PPO && !m->space.discrete)
        m->log_std_entry = add_entry(m, "log_std", GB_DTYPE_FLOAT32, m->outs, 0);
    int t = add_torso(m, mc, "torso");
    m->core_entry = m->head_entry[0] = m->head_entry[1] = -1;
    if (mc->core != GB_CORE_NONE) {
        if (add_core(m, mc, t))
            return gb_error_set(err, GB_ENOMEM, "policy model: out of memory");
    } else if (m->algo == GB_ALGO_PPO) {
        int c = mc->shared ? t : add_torso(m, mc, "critic_torso");
        m->head_a = add_linear(m, "pi", t, m->outs, GB_MLP_ACT_NONE);
        m->head_b = add_linear(m, "v", c, 1, GB_MLP_ACT_NONE);
    } else if (m->algo == GB_ALGO_DQN) {
        m->head_a = add_linear(m, "q", t, m->outs, GB_MLP_ACT_NONE);
    } else {
        m->head_a = add_linear(m, "mean", t, m->outs, GB_MLP_ACT_NONE);
        m->head_b = add_linear(m, "log_std", t, m->outs, GB_MLP_ACT_NONE);
    }
    if (mc->normalize_obs) {
        m->stats_entry = add_entry(m, "obs_mean", GB_DTYPE_FLOAT64, m->in, 0);
        add_entry(m, "obs_var", GB_DTYPE_FLOAT64, m->in, 0);
        add_entry(m, "obs_count", GB_DTYPE_FLOAT64, 1, 0);
    }
    char msg[256];
    if (m->nlayers > 0 && !(m->mlp = gb_mlp_create(m->specs, m->nlayers, msg, sizeof msg)))
        return gb_error_set(err, GB_EINVAL, "policy model: %s", msg);
    return 0;
}

/* GB_EUNSUPPORTED naming what needs libtorch, or 0 when this model can run cfg's. */
static int supported(const gb_config *cfg, const gb_torch_space *sp, gb_error *err)
{
    const gb_config_policy *p = &cfg->policy;
    const gb_config_model *mc = &p->model;
    const char *why = NULL, *model = gb_flat_mlp_model_refusal(mc);
    int algo = cfg->trainer.algorithm.name;
    const int64_t in = gb_flat_mlp_features(sp);
    if (p->kernels != GB_KERNELS_GEARBOX)
        why = "policy.kernels is libtorch";
    else if (p->device != GB_DEVICE_CPU)
        why = "policy.device is cuda";
    else if (p->precision != GB_PRECISION_FP32 && p->precision != GB_PRECISION_INT8)
        why = "policy.precision bf16 runs on libtorch's kernels";
    else if (model)
        why = model;
    else if (mc->core != GB_CORE_NONE && algo == GB_ALGO_SAC)
        why = "policy.model.core with sac (the bridge's model says what is wrong with it)";
    else if (mc->core != GB_CORE_NONE && p->precision != GB_PRECISION_FP32)
        why = "policy.precision int8 with policy.model.core";
    else if (!gb_mlp_fast())
        why = "this cpu has neither AVX2 with FMA nor AVX-512 (gearbox's kernels would be "
              "slower than libtorch's)";
    else if (sp->obs_dtype != GB_DTYPE_FLOAT32 || sp->obs_ndim < 1 || in < 1 || in > (1 << 24))
        why = "observations that are not float32";
    else if (algo != GB_ALGO_PPO && algo != GB_ALGO_DQN && algo != GB_ALGO_SAC)
        why = "an algorithm of its own";
    else if (sp->discrete ? sp->n_actions < 1 || sp->n_actions > (1 << 24) || algo == GB_ALGO_SAC
                          : sp->action_dim < 1 || sp->action_dim > GB_TORCH_MAX_ACTION_DIM ||
                                algo == GB_ALGO_DQN)
        why = "its action space (the bridge's model says what is wrong with it)";
    for (int i = 0; !why && i < mc->hidden.n; i++)
        if (mc->hidden.v[i] < 1 || mc->hidden.v[i] > (1 << 24))
            why = "policy.model.hidden";
    for (int64_t i = 0; !why && algo == GB_ALGO_SAC && i < sp->action_dim; i++)
        if (!isfinite(sp->action_low[i]) || !isfinite(sp->action_high[i]) ||
            !(sp->action_high[i] > sp->action_low[i]))
            why = "its action bounds (the bridge's model says what is wrong with them)";
    return why ? gb_error_set(err, GB_EUNSUPPORTED, "%s", why) : 0;
}

int gb_policy_mlp_open_fp32(const gb_config *cfg, const gb_torch_space *sp, uint64_t seed,
                            gb_policy_mlp **out, gb_error *err)
{
    *out = NULL;
    gb_config *fp32 = malloc(sizeof *fp32); /* large: off the stack */
    if (!fp32)
        return gb_error_set(err, GB_ENOMEM, "policy model: out of memory");
    *fp32 = *cfg;
    fp32->policy.precision = GB_PRECISION_FP32;
    int rc = gb_policy_mlp_open(fp32, sp, seed, out, err);
    free(fp32);
    return rc;
}

int gb_policy_mlp_plays_fp32(const gb_config *cfg, const gb_torch_space *sp)
{
    gb_policy_mlp *m = NULL;
    gb_error why = {0};
    int yes = gb_policy_mlp_open_fp32(cfg, sp, 0, &m, &why) == 0;
    gb_policy_mlp_close(m);
    return yes;
}

void gb_policy_mlp_close(gb_policy_mlp *m)
{
    if (!m)
        return;
    if (m->mlp)
        gb_mlp_destroy(m->mlp);
    free(m->core_w);
    free(m->feat);
    free(m->y);
    free(m->ws_core);
    free(m->layout);
    free(m->specs);
    free(m->weight_entry);
    free(m->layer_outs);
    free(m->obs_mean);
    free(m->obs_rstd);
    free(m->log_std);
    free(m->act_scale);
    free(m->act_bias);
    free(m->scratch);
    free(m);
}

int gb_policy_mlp_open(const gb_config *cfg, const gb_torch_space *sp, uint64_t seed,
                       gb_policy_mlp **out, gb_error *err)
{
    *out = NULL;
    int rc = supported(cfg, sp, err);
    if (rc)
        return rc;
    gb_policy_mlp *m = calloc(1, sizeof *m);
    if (!m)
        return gb_error_set(err, GB_ENOMEM, "policy model: out of memory");
    m->algo = cfg->trainer.algorithm.name;
    m->space = *sp;
    m->in = 1;
    for (int i = 0; i < sp->obs_ndim; i++)
        m->in *= (int)sp->obs_shape[i];
    m->outs = (int)(sp->discrete ? sp->n_actions : sp->action_dim);
    m->int8 = cfg->policy.precision == GB_PRECISION_INT8;
    m->clip = (float)cfg->policy.model.obs_clip;
    /* from the seed the bridge's model takes for its generator, mixed the same way (the draws
     * still differ: that generator is libtorch's Mersenne twister) */
    gb_rng_seed(&m->rng, seed ^ 0x5851f42d4c957f2dULL);
    if ((rc = build(m, &cfg->policy.model, err)))
        goto fail;
    m->obs_mean = calloc((size_t)m->in, sizeof(float));
    m->obs_rstd = malloc((size_t)m->in * sizeof(float));
    m->log_std = calloc((size_t)m->outs, sizeof(float));
    m->act_scale = malloc((size_t)m->outs * sizeof(float));
    m->act_bias = malloc((size_t)m->outs * sizeof(float));
    if (!m->obs_mean || !m->obs_rstd || !m->log_std || !m->act_scale || !m->act_bias) {
        rc = gb_error_set(err, GB_ENOMEM, "policy model: out of memory");
        goto fail;
    }
    for (int i = 0; i < m->in; i++)
        m->obs_rstd[i] = 1.0f;
    for (int i = 0; m->algo == GB_ALGO_SAC && i < m->outs; i++) {
        m->act_scale[i] = 0.5f * (sp->action_high[i] - sp->action_low[i]);
        m->act_bias[i] = 0.5f * (sp->action_high[i] + sp->action_low[i]);
    }
    *out = m;
    return 0;
fail:
    gb_policy_mlp_close(m);
    return rc;
}

void gb_policy_mlp_layout(const gb_policy_mlp *m, const gb_param_entry **table, int *count,
                          uint64_t *total)
{
    *table = m->layout;
    *count = m->nlayout;
    *total = m->total;
}

/* An entry's elements. */
static int64_t param_floats(const gb_param_entry *e)
{
    int64_t n = 1;
    for (int d = 0; d < e->rank; d++)
        n *= e->shape[d];
    return n;
}

int gb_policy_mlp_import(gb_policy_mlp *m, const void *buf, size_t len,
                         const gb_param_entry *table, int count, uint64_t version,
                         gb_error *err)
{
    int rc = gb_param_layout_fits(table, count, len, m->layout, m->nlayout, m->total, err);
    if (rc)
        return rc;
    const char *base = buf;
    for (int i = 0; i < m->nlayers; i++) {
        const gb_param_entry *w = &m->layout[m->weight_entry[i]], *b = w + 1;
        gb_mlp_load(m->mlp, i, (const float *)(base + w->offset),
                    (const float *)(base + b->offset));
    }
    if (m->log_std_entry >= 0)
        memcpy(m->log_std, base + m->layout[m->log_std_entry].offset,
               (size_t)m->outs * sizeof(float));
    float *const core_dst[] = {(float *)m->core.w_ih, (float *)m->core.b_ih,
                               (float *)m->core.w_hh, (float *)m->core.b_hh};
    for (int i = 0; m->core_entry >= 0 && i < 4; i++) {
        const gb_param_entry *e = &m->layout[m->core_entry + i];
        memcpy(core_dst[i], base + e->offset, (size_t)param_floats(e) * sizeof(float));
    }
    if (m->core_entry >= 0) /* once a version, not at every step */
        gb_core_train_transpose(&m->core, (float *)m->core.wt_ih, (float *)m->core.wt_hh);
    for (int h = 0; h < 2; h++)
        if (m->head_entry[h] >= 0) {
            const gb_param_entry *w = &m->layout[m->head_entry[h]], *b = w + 1;
            memcpy(m->head_w[h], base + w->offset, (size_t)param_floats(w) * sizeof(float));
            memcpy(m->head_bias[h], base + b->offset, (size_t)param_floats(b) * sizeof(float));
        }
    if (m->stats_entry >= 0) { /* the bridge's: mean and (var + 1e-8)^-1/2 in double, as floats */
        const double *mean = (const double *)(base + m->layout[m->stats_entry].offset);
        const double *var = (const double *)(base + m->layout[m->stats_entry + 1].offset);
        for (int i = 0; i < m->in; i++) {
            m->obs_mean[i] = (float)mean[i];
            m->obs_rstd[i] = (float)(1.0 / sqrt(var[i] + 1e-8));
        }
    }
    m->version = version;
    return 0;
}

/* The scratch for n rows, one block (its contents need not survive a growth); 0 or GB_ENOMEM. */
static int reserve(gb_policy_mlp *m, int64_t n, gb_error *err)
{
    if (n <= m->cap)
        return 0;
    int64_t cap = n > 2 * m->cap ? n : 2 * m->cap;
    size_t rows = (size_t)cap, k = (size_t)m->outs, wide = k > 2 ? k : 2;
    size_t floats = rows * ((size_t)m->in + 4 * k + wide);
    void *block = malloc(rows * sizeof(int64_t) + floats * sizeof(float));
    if (block && m->core_entry >= 0) { /* the core's: features, outputs, its workspace */
        free(m->feat);
        free(m->y);
        free(m->ws_core);
        m->feat = malloc(rows * (size_t)m->core.F * sizeof(float));
        m->y = malloc(rows * (size_t)m->core.H * sizeof(float));
        m->ws_core = malloc(gb_core_train_floats(&m->core, (int)cap, 1) * sizeof(float));
    }
    if (!block || (m->core_entry >= 0 && (!m->feat || !m->y || !m->ws_core))) {
        free(block);
        m->cap = 0; /* (the core's buffers are grown again next time) */
        return gb_error_set(err, GB_ENOMEM, "policy model: out of memory for %lld rows",
                            (long long)n);
    }
    free(m->scratch);
    m->scratch = block;
    m->actions = block; /* the int64s first: every part stays aligned */
    m->x = (float *)(m->actions + rows);
    m->ha = m->x + rows * (size_t)m->in;
    m->hb = m->ha + rows * k;
    m->rows_ls = m->hb + rows * k;
    m->actions_f = m->rows_ls + rows * k;
    m->draws = m->actions_f + rows * k;
    m->cap = cap;
    return 0;
}

/* count uniform draws in [0, 1) into m->draws */
static const float *uniforms(gb_policy_mlp *m, int64_t count)
{
    for (int64_t i = 0; i < count; i++)
        m->draws[i] = gb_rng_uniform_f(&m->rng);
    return m->draws;
}

/* The draws of act.cpp's sample_rows, from the heads' rows ha (and hb). */
static void sample(gb_policy_mlp *m, int64_t n, int deterministic, double epsilon,
                   const float *noise, gb_torch_act_out *out)
{
    const int64_t k = m->outs;
    if (m->space.discrete) {
        int64_t *action = out->action ? out->action : m->actions;
        if (m->algo == GB_ALGO_DQN) {
            const float *u = !deterministic && epsilon > 0.0 ? uniforms(m, 2 * n) : NULL;
            gb_sample_epsilon_greedy(m->ha, n, k, epsilon, u, action, out->value);
            if (out->logp)
                memset(out->logp, 0, sizeof(float) * (size_t)n);
            if (out->q)
                memcpy(out->q, m->ha, sizeof(float) * (size_t)(n * k));
            return;
        }
        gb_sample_categorical(m->ha, n, k, deterministic ? NULL : uniforms(m, n), action,
                              out->logp);
    } else {
        const float *z = NULL;
        if (!deterministic && noise) {
            z = noise;
        } else if (!deterministic) {
            for (int64_t i = 0; i < n * k; i++)
                m->draws[i] = (float)gb_rng_normal(&m->rng);
            z = m->draws;
        }
        float *x = out->action ? out->action : m->actions_f;
        if (m->algo == GB_ALGO_SAC) { /* log_std's Linear squashed into [-5, 2] */
            for (int64_t i = 0; i < n * k; i++)
                m->rows_ls[i] = -5.0f + 3.5f * (tanhf(m->hb[i]) + 1.0f);
            gb_sample_squashed(m->ha, m->rows_ls, n, k, z, m->act_scale, m->act_bias, x,
                               out->logp);
            if (out->value)
                memset(out->value, 0, sizeof(float) * (size_t)n);
            return;
        }
        for (int64_t i = 0; i < n; i++)
            memcpy(m->rows_ls + i * k, m->log_std, sizeof(float) * (size_t)k);
        gb_sample_gaussian(m->ha, m->rows_ls, n, k, z, x, out->logp);
    }
    if (out->value) /* PPO: v's [n, 1] */
        memcpy(out->value, m->hb, sizeof(float) * (size_t)n);
}

/* With a core: the torso's features of x, one step of the core from state_in (its state after
 * it into state_out) and the heads into ha (pi or q) and hb (v). */
static void core_forward(gb_policy_mlp *m, const float *x, int64_t n, const float *state_in,
                         float *state_out)
{
    const float *feat = x;
    if (m->nlayers > 0) {
        m->layer_outs[m->nlayers - 1] = m->feat;
        gb_mlp_forward(m->mlp, x, n, m->layer_outs);
        feat = m->feat;
    }
    const int S = gb_core_train_state(&m->core), H = m->core.H, rows = (int)n;
    gb_core_train_forward(&m->core, rows, 1, feat, state_in, S, NULL, m->ws_core, m->y);
    gb_core_train_last_state(&m->core, rows, 1, m->ws_core, state_out, S);
    float *outs[2] = {m->ha, m->hb};
    const int widths[2] = {m->outs, 1};
    for (int h = 0; h < 2 && m->head_entry[h] >= 0; h++) { /* a head's few outputs: dot products */
        gb_mlp_train_gemm_nt(rows, widths[h], H, m->y, H, m->head_w[h], H, outs[h], widths[h],
                             0);
        for (int64_t r = 0; r < n; r++)
            for (int j = 0; j < widths[h]; j++)
                outs[h][r * widths[h] + j] += m->head_bias[h][j];
    }
}

int64_t gb_policy_mlp_state_size(const gb_policy_mlp *m)
{
    return m->core_entry >= 0 ? gb_core_train_state(&m->core) : 0;
}

int gb_policy_mlp_act(gb_policy_mlp *m, const float *obs, int64_t n, int deterministic,
                      double epsilon, const float *noise, const float *state_in,
                      float *state_out, gb_torch_act_out *out, gb_error *err)
{
    if (n <= 0)
        return n == 0 ? 0 : gb_error_set(err, GB_EINVAL, "act: n = %lld", (long long)n);
    if (m->core_entry >= 0 && (!state_in || !state_out))
        return gb_error_set(err, GB_EINVAL, "act: the model has a core: a state is required");
    int rc = reserve(m, n, err);
    if (rc)
        return rc;
    const float *x = obs;
    if (m->stats_entry >= 0) { /* ((obs - mean) * rstd) clamped, in float as the bridge's */
        const int64_t in = m->in;
        for (int64_t r = 0; r < n; r++)
            for (int64_t i = 0; i < in; i++) {
                float v = (obs[r * in + i] - m->obs_mean[i]) * m->obs_rstd[i];
                m->x[r * in + i] = v < -m->clip ? -m->clip : v > m->clip ? m->clip : v;
            }
        x = m->x;
    }
    if (m->core_entry >= 0) {
        core_forward(m, x, n, state_in, state_out);
    } else {
        m->layer_outs[m->head_a] = m->ha; /* (reallocated with the scratch) */
        if (m->head_b >= 0)
            m->layer_outs[m->head_b] = m->hb;
        gb_mlp_forward(m->mlp, x, n, m->layer_outs);
    }
    sample(m, n, deterministic, epsilon, noise, out);
    return 0;
}

const char *gb_policy_mlp_kernels(const gb_policy_mlp *m)
{
    return gb_mlp_kernels_name(m->int8);
}
