/* workers/roles/ppo_mlp.c: PPO's learner for a plain MLP without libtorch (ppo_mlp.h): the
 * bridge's ppo.cpp (ppo_train without V-trace or a core, ppo_steps, ppo_epochs) and
 * ppo_kernels.cpp's minibatch step, over flat buffers. */
#include "workers/roles/ppo_mlp.h"

#include "runtime/base/rng.h"
#include "workers/torch/flat_kernels.h"
#include "workers/torch/mlp_infer.h"
#include "workers/torch/mlp_train.h"
#include "workers/torch/targets.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A buffer grown to the largest size asked (no allocation a step once the sizes were seen). */
typedef struct buf {
    void *p;
    size_t cap;
} buf;

struct gb_ppo_mlp {
    gb_config_algorithm ac;
    int discrete, in, A;
    gb_param_entry *layout;
    int nlayout;
    uint64_t total;
    int64_t *flat_at; /* [nlayout]: each entry's first float in the flat buffers */
    int64_t n;        /* floats in the flat buffers */
    float *p, *g, *m, *v; /* parameters, gradients, Adam's moments: one block */
    float *log_std, *dlog_std; /* boxes: in p and g; else NULL */
    gb_mlp_train_layer *actor, *critic; /* torso then pi; critic torso then v */
    int na, nc;
    int64_t adam_steps, train_steps;
    uint64_t version;
    double progress;
    gb_rng rng;
    buf x, values, adv, ret, srow, sstep, perm;   /* a batch's */
    buf xb, aux, acts, act_f, logp, ent, g_logp, g_value, dpi, ws_a, ws_c; /* a minibatch's */
};

static void *grow(buf *b, size_t bytes)
{
    if (bytes > b->cap) {
        void *q = realloc(b->p, bytes);
        if (!q)
            return NULL;
        b->p = q;
        b->cap = bytes;
    }
    return b->p;
}

/* GB_EUNSUPPORTED naming what asks for libtorch, or 0 (ppo_mlp.h). */
static int supported(const gb_config *cfg, const gb_torch_space *sp, gb_error *err)
{
    const gb_config_model *mc = &cfg->policy.model;
    const gb_config_algorithm *ac = &cfg->trainer.algorithm;
    const char *why = NULL;
    if (ac->name != GB_ALGO_PPO)
        why = "trainer.algorithm is not ppo";
    else if (cfg->trainer.kernels != GB_KERNELS_GEARBOX)
        why = "trainer.kernels is libtorch";
    else if (cfg->trainer.device != GB_DEVICE_CPU)
        why = "trainer.device is cuda";
    else if (mc->type != GB_MODEL_MLP)
        why = "policy.model.type is not mlp";
    else if (mc->core != GB_CORE_NONE)
        why = "policy.model.core";
    else if (mc->shared)
        why = "policy.model.shared";
    else if (mc->layer_norm)
        why = "policy.model.layer_norm";
    else if (mc->activation != GB_ACT_TANH && mc->activation != GB_ACT_RELU)
        why = "policy.model.activation is neither tanh nor relu";
    else if (mc->normalize_obs)
        why = "policy.model.normalize_obs";
    else if (ac->reward_scale)
        why = "trainer.algorithm.reward_scale";
    else if (ac->ppo.vtrace)
        why = "trainer.algorithm.ppo.vtrace";
    else if (sp->obs_dtype != GB_DTYPE_FLOAT32 || sp->obs_ndim < 1)
        why = "observations that are not float32";
    else if (sp->discrete ? sp->n_actions < 1 || sp->n_actions > (1 << 24)
                          : sp->action_dim < 1 || sp->action_dim > GB_TORCH_MAX_ACTION_DIM)
        why = "its action space";
    int64_t in = 1;
    for (int i = 0; !why && i < sp->obs_ndim; i++)
        in *= sp->obs_shape[i];
    if (!why && (in < 1 || in > (1 << 24)))
        why = "its observations' size";
    for (int i = 0; !why && i < mc->hidden.n; i++)
        if (mc->hidden.v[i] < 1 || mc->hidden.v[i] > (1 << 16))
            why = "policy.model.hidden";
    return why ? gb_error_set(err, GB_EUNSUPPORTED, "%s", why) : 0;
}

/* Appends a float32 entry of shape [d0] or [d0, d1] (d1 0: rank 1); returns its index. */
static int add_entry(gb_ppo_mlp *q, const char *name, int64_t d0, int64_t d1)
{
    gb_param_entry_append(&q->layout[q->nlayout], &q->total, GB_TORCH_PARAM_ALIGN, name,
                          GB_DTYPE_FLOAT32, d0, d1);
    q->flat_at[q->nlayout] = q->n;
    q->n += d0 * (d1 > 0 ? d1 : 1);
    return q->nlayout++;
}

/* A Linear layer named prefix onto chain (of *nl layers), in features in, out out; the layer's
 * weight and bias entries are the next two (their pointers are set once the block exists). */
static void add_linear(gb_ppo_mlp *q, const char *prefix, gb_mlp_train_layer *chain, int *nl,
                       int in, int out, int act)
{
    char name[GB_PARAM_NAME_MAX];
    snprintf(name, sizeof name, "%s.weight", prefix);
    add_entry(q, name, out, in);
    snprintf(name, sizeof name, "%s.bias", prefix);
    add_entry(q, name, out, 0);
    chain[(*nl)++] = (gb_mlp_train_layer){.in = in, .out = out, .act = act};
}

/* A torso named name (name.0, name.2, ...: each Linear followed by its activation module in the
 * bridge's Sequential) onto chain; returns its width. */
static int add_torso(gb_ppo_mlp *q, const gb_config_model *mc, const char *name,
                     gb_mlp_train_layer *chain, int *nl)
{
    int w = q->in;
    const int act = mc->activation == GB_ACT_RELU ? GB_MLP_ACT_RELU : GB_MLP_ACT_TANH;
    for (int i = 0; i < mc->hidden.n; i++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "%s.%d", name, 2 * i);
        add_linear(q, prefix, chain, nl, w, (int)mc->hidden.v[i], act);
        w = (int)mc->hidden.v[i];
    }
    return w;
}

/* torch::nn::init::orthogonal_ of a [rows, cols] weight times gain: the Q of a Gaussian
 * matrix's QR with r's diagonal positive (Gram-Schmidt's, twice over for accuracy), transposed
 * when rows < cols. a: [rows * cols] doubles of scratch. */
static void orthogonal(gb_rng *r, float *w, int rows, int cols, double gain, double *a)
{
    const int big = rows > cols ? rows : cols, small = rows < cols ? rows : cols;
    for (int i = 0; i < big * small; i++)
        a[i] = gb_rng_normal(r);
    for (int j = 0; j < small; j++) {
        double *aj = a + (size_t)j * big;
        for (int pass = 0; pass < 2; pass++)
            for (int k = 0; k < j; k++) {
                const double *ak = a + (size_t)k * big;
                double d = 0.0;
                for (int i = 0; i < big; i++)
                    d += aj[i] * ak[i];
                for (int i = 0; i < big; i++)
                    aj[i] -= d * ak[i];
            }
        double nn = 0.0;
        for (int i = 0; i < big; i++)
            nn += aj[i] * aj[i];
        nn = nn > 0.0 ? 1.0 / sqrt(nn) : 0.0;
        for (int i = 0; i < big; i++)
            aj[i] *= nn;
    }
    for (int i = 0; i < rows; i++)
        for (int c = 0; c < cols; c++)
            w[(size_t)i * cols + c] =
                (float)(gain * (rows >= cols ? a[(size_t)c * big + i] : a[(size_t)i * big + c]));
}

/* Layer l's weight and bias at entries e and e + 1 in p and g, and their initial values: an
 * orthogonal weight times gain, a zero bias. a: scratch for orthogonal. */
static void place(gb_ppo_mlp *q, gb_mlp_train_layer *l, int e, double gain, double *a)
{
    const int64_t w = q->flat_at[e], bb = q->flat_at[e + 1];
    l->w = q->p + w;
    l->b = q->p + bb;
    l->dw = q->g + w;
    l->db = q->g + bb;
    orthogonal(&q->rng, q->p + w, l->out, l->in, gain, a);
    memset(q->p + bb, 0, sizeof(float) * (size_t)l->out);
}

/* The network as network.cpp's ActorCritic registers it (its own log_std first, then torso,
 * critic_torso, pi, v: libtorch lists a module's own parameters before its children's). */
static int build(gb_ppo_mlp *q, const gb_config_model *mc, gb_error *err)
{
    const int hidden = mc->hidden.n, entries = 4 * hidden + 5;
    q->layout = calloc((size_t)entries, sizeof *q->layout);
    q->flat_at = calloc((size_t)entries, sizeof *q->flat_at);
    q->actor = calloc((size_t)hidden + 1, sizeof *q->actor);
    q->critic = calloc((size_t)hidden + 1, sizeof *q->critic);
    if (!q->layout || !q->flat_at || !q->actor || !q->critic)
        return gb_error_set(err, GB_ENOMEM, "ppo learner: out of memory");
    const int ls = q->discrete ? -1 : add_entry(q, "log_std", q->A, 0);
    const int wa = add_torso(q, mc, "torso", q->actor, &q->na);
    const int wc = add_torso(q, mc, "critic_torso", q->critic, &q->nc);
    const int first_pi = q->nlayout;
    add_linear(q, "pi", q->actor, &q->na, wa, q->A, GB_MLP_ACT_NONE);
    add_linear(q, "v", q->critic, &q->nc, wc, 1, GB_MLP_ACT_NONE);
    const int first_torso = ls < 0 ? 0 : 1, first_critic = first_torso + 2 * hidden;
    if (!(q->p = calloc((size_t)q->n * 4, sizeof(float))))
        return gb_error_set(err, GB_ENOMEM, "ppo learner: out of memory for %lld parameters",
                            (long long)q->n);
    q->g = q->p + q->n;
    q->m = q->g + q->n;
    q->v = q->m + q->n;
    size_t widest = 1;
    for (int i = 0; i <= hidden; i++) {
        const size_t wa_i = (size_t)q->actor[i].in * (size_t)q->actor[i].out;
        const size_t wc_i = (size_t)q->critic[i].in * (size_t)q->critic[i].out;
        widest = wa_i > widest ? wa_i : widest;
        widest = wc_i > widest ? wc_i : widest;
    }
    double *a = malloc(sizeof *a * widest);
    if (!a)
        return gb_error_set(err, GB_ENOMEM, "ppo learner: out of memory");
    /* each chain's entries: its torso's two a layer, then its head's (pi after both torsos,
     * v after pi) */
    for (int i = 0; i < hidden; i++) {
        place(q, &q->actor[i], first_torso + 2 * i, sqrt(2.0), a);
        place(q, &q->critic[i], first_critic + 2 * i, sqrt(2.0), a);
    }
    place(q, &q->actor[hidden], first_pi, 0.01, a);
    place(q, &q->critic[hidden], first_pi + 2, 1.0, a);
    free(a);
    if (ls >= 0) {
        q->log_std = q->p + q->flat_at[ls];
        q->dlog_std = q->g + q->flat_at[ls];
        for (int j = 0; j < q->A; j++)
            q->log_std[j] = (float)mc->log_std_init;
    }
    return 0;
}

int gb_ppo_mlp_open(const gb_config *cfg, const gb_torch_space *sp, uint64_t seed,
                    gb_ppo_mlp **out, gb_error *err)
{
    *out = NULL;
    int rc = supported(cfg, sp, err);
    if (rc)
        return rc;
    gb_ppo_mlp *q = calloc(1, sizeof *q);
    if (!q)
        return gb_error_set(err, GB_ENOMEM, "ppo learner: out of memory");
    q->ac = cfg->trainer.algorithm;
    q->discrete = sp->discrete;
    q->A = (int)(sp->discrete ? sp->n_actions : sp->action_dim);
    q->in = 1;
    for (int i = 0; i < sp->obs_ndim; i++)
        q->in *= (int)sp->obs_shape[i];
    gb_rng_seed_for(&q->rng, seed, "ppo_mlp", 0);
    if ((rc = build(q, &cfg->policy.model, err))) {
        gb_ppo_mlp_close(q);
        return rc;
    }
    *out = q;
    return 0;
}

void gb_ppo_mlp_close(gb_ppo_mlp *q)
{
    if (!q)
        return;
    buf *bufs[] = {&q->x,   &q->values, &q->adv,   &q->ret,    &q->srow,   &q->sstep,
                   &q->perm, &q->xb,    &q->aux,   &q->acts,   &q->act_f,  &q->logp,
                   &q->ent,  &q->g_logp, &q->g_value, &q->dpi, &q->ws_a,   &q->ws_c};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        free(bufs[i]->p);
    free(q->p);
    free(q->layout);
    free(q->flat_at);
    free(q->actor);
    free(q->critic);
    free(q);
}

void gb_ppo_mlp_set_progress(gb_ppo_mlp *q, double progress)
{
    q->progress = progress < 0 ? 0 : progress > 1 ? 1 : progress;
}

void gb_ppo_mlp_layout(const gb_ppo_mlp *q, const gb_param_entry **table, int *count,
                       uint64_t *total)
{
    *table = q->layout;
    *count = q->nlayout;
    *total = q->total;
}

int gb_ppo_mlp_export(const gb_ppo_mlp *q, void *out, size_t cap, uint64_t *version,
                      gb_error *err)
{
    if (cap < q->total)
        return gb_error_set(err, GB_EINVAL, "export: buffer of %zu bytes, the parameters take "
                            "%llu", cap, (unsigned long long)q->total);
    memset(out, 0, q->total);
    for (int i = 0; i < q->nlayout; i++) {
        const int64_t end = i + 1 < q->nlayout ? q->flat_at[i + 1] : q->n;
        memcpy((char *)out + q->layout[i].offset, q->p + q->flat_at[i],
               sizeof(float) * (size_t)(end - q->flat_at[i]));
    }
    if (version)
        *version = q->version;
    return 0;
}

uint64_t gb_ppo_mlp_version(const gb_ppo_mlp *q) { return q->version; }
void gb_ppo_mlp_set_version(gb_ppo_mlp *q, uint64_t version) { q->version = version; }
int64_t gb_ppo_mlp_train_steps(const gb_ppo_mlp *q) { return q->train_steps; }

void gb_ppo_mlp_flat(const gb_ppo_mlp *q, const float **params, const float **exp_avg,
                     const float **exp_avg_sq, int64_t *n, int64_t *adam_steps)
{
    *params = q->p;
    *exp_avg = q->m;
    *exp_avg_sq = q->v;
    *n = q->n;
    *adam_steps = q->adam_steps;
}

/* The minibatch of the len valid steps rows[0..len): their loss terms, with the gradients of
 * every parameter in g (zeroed first); ppo_kernels.cpp's ppo_kernels_minibatch. */
static int minibatch(gb_ppo_mlp *q, const gb_torch_batch *b, const int64_t *rows, int len,
                     const gb_torch_ppo_coefs *c, gb_torch_ppo_terms *terms)
{
    const int in = q->in, A = q->A;
    const float *X = q->x.p, *values = q->values.p, *adv = q->adv.p, *ret = q->ret.p;
    const int64_t *srow = q->srow.p, *sstep = q->sstep.p;
    const size_t n = (size_t)len;
    float *xb = grow(&q->xb, sizeof(float) * n * (size_t)in);
    float *aux = grow(&q->aux, sizeof(float) * 4 * n);
    float *logp = grow(&q->logp, sizeof(float) * n), *ent = grow(&q->ent, sizeof(float) * n);
    float *g_logp = grow(&q->g_logp, sizeof(float) * n);
    float *g_value = grow(&q->g_value, sizeof(float) * n);
    float *dpi = grow(&q->dpi, sizeof(float) * n * (size_t)A);
    float *ws_a = grow(&q->ws_a, sizeof(float) * gb_mlp_train_floats(q->actor, q->na, len));
    int64_t *acts = q->discrete ? grow(&q->acts, sizeof(int64_t) * n) : NULL;
    float *act_f = q->discrete ? NULL : grow(&q->act_f, sizeof(float) * n * (size_t)A);
    if (!xb || !aux || !logp || !ent || !g_logp || !g_value || !dpi || !ws_a ||
        (q->discrete ? !acts : !act_f))
        return -1;
    for (size_t i = 0; i < n; i++) {
        const int64_t s = rows[i], step = sstep[s], row = srow[s];
        memcpy(xb + i * (size_t)in, X + (size_t)row * (size_t)in, sizeof(float) * (size_t)in);
        aux[4 * i] = b->logp[step];
        aux[4 * i + 1] = adv[step];
        aux[4 * i + 2] = values[row];
        aux[4 * i + 3] = ret[step];
        if (q->discrete)
            acts[i] = ((const int64_t *)b->action)[step];
        else
            memcpy(act_f + i * (size_t)A, (const float *)b->action + (size_t)step * (size_t)A,
                   sizeof(float) * (size_t)A);
    }
    memset(q->g, 0, sizeof(float) * (size_t)q->n);
    const float *pi = gb_mlp_train_forward(q->actor, q->na, xb, len, ws_a);
    float *ws_c = q->ws_c.p; /* sized for the batch's rows, more than a minibatch's */
    const float *v = gb_mlp_train_forward(q->critic, q->nc, xb, len, ws_c);
    memcpy(dpi, pi, sizeof(float) * n * (size_t)A);
    if (q->discrete)
        gb_torch_categorical_terms(dpi, len, A, acts, logp, ent);
    else
        gb_torch_gaussian_terms(dpi, len, A, q->log_std, act_f, logp, ent);
    memset(terms, 0, sizeof *terms);
    for (size_t i = 0; i < n; i++)
        terms->entropy += ent[i];
    terms->entropy /= (double)(len > 1 ? len : 1);
    gb_torch_ppo_fused(len, logp, v, aux, c, g_logp, g_value, terms);
    /* the entropy's gradient only where it counts (as the bridge's) */
    const float ge = c->entropy_coef != 0.0 ? (float)(-c->entropy_coef / (double)len) : 0.0f;
    if (q->discrete)
        gb_torch_categorical_grads(dpi, len, A, acts, ent, g_logp, ge);
    else
        gb_torch_gaussian_grads(dpi, len, A, q->log_std, g_logp, ge, q->dlog_std);
    gb_mlp_train_backward(q->actor, q->na, xb, len, ws_a, dpi, NULL);
    gb_mlp_train_backward(q->critic, q->nc, xb, len, ws_c, g_value, NULL);
    return 0;
}

/* The gradient-norm clip and Adam's step at lr (optimizer.cpp's FlatAdam); the norm before. */
static double optimise(gb_ppo_mlp *q, double lr)
{
    const size_t n = (size_t)q->n;
    const double norm = sqrt(gb_flat_sumsq(q->g, n)), max_norm = q->ac.max_grad_norm;
    const double coef = max_norm / (norm + 1e-6);
    if (max_norm > 0 && coef < 1.0)
        gb_flat_scale(q->g, n, (float)coef);
    q->adam_steps++;
    const double bc1 = 1.0 - pow(0.9, (double)q->adam_steps);
    const double bc2 = 1.0 - pow(0.999, (double)q->adam_steps);
    gb_flat_adam(q->p, q->g, q->m, q->v, n, 0.9f, 0.999f, (float)(lr / bc1), (float)sqrt(bc2),
                 1e-5f);
    return norm;
}

/* The batch's observation rows [B*(T+1), in] (each chunk's T steps, then its next_obs), the
 * critic's values of them and GAE's targets; then the valid steps (their step and obs rows), the
 * explained variance and the chunk priorities. Returns the valid steps' count, or -1 (memory). */
static int64_t targets(gb_ppo_mlp *q, const gb_torch_batch *b, gb_torch_stats *st, float *prio)
{
    const int64_t B = b->B, T = b->T, R = B * (T + 1);
    const size_t in = (size_t)q->in;
    float *X = grow(&q->x, sizeof(float) * (size_t)R * in);
    float *values = grow(&q->values, sizeof(float) * (size_t)R);
    float *adv = grow(&q->adv, sizeof(float) * (size_t)(B * T));
    float *ret = grow(&q->ret, sizeof(float) * (size_t)(B * T));
    int64_t *srow = grow(&q->srow, sizeof(int64_t) * (size_t)(B * T));
    int64_t *sstep = grow(&q->sstep, sizeof(int64_t) * (size_t)(B * T));
    float *ws_c = grow(&q->ws_c, sizeof(float) * gb_mlp_train_floats(q->critic, q->nc, (int)R));
    if (!X || !values || !adv || !ret || !srow || !sstep || !ws_c)
        return -1;
    for (int64_t bi = 0; bi < B; bi++) {
        memcpy(X + (size_t)(bi * (T + 1)) * in, (const float *)b->obs + (size_t)(bi * T) * in,
               sizeof(float) * (size_t)T * in);
        memcpy(X + (size_t)(bi * (T + 1) + T) * in, (const float *)b->next_obs + (size_t)bi * in,
               sizeof(float) * in);
    }
    memcpy(values, gb_mlp_train_forward(q->critic, q->nc, X, (int)R, ws_c),
           sizeof(float) * (size_t)R);
    const gb_config_algorithm *ac = &q->ac;
    gb_torch_gae(B, T, b->reward, values, b->terminated, b->truncated, b->valid, ac->gamma,
                 ac->ppo.gae_lambda, adv, ret);
    int64_t N = 0;
    for (int64_t bi = 0; bi < B; bi++)
        for (int64_t t = 0; t < T; t++)
            if (!b->valid || b->valid[bi * T + t]) {
                sstep[N] = bi * T + t;
                srow[N++] = bi * (T + 1) + t;
            }
    /* the returns' variance explained by the values before the update (population variances) */
    double mr = 0, me = 0, vr = 0, ve = 0;
    for (int64_t i = 0; i < N; i++) {
        mr += ret[sstep[i]];
        me += ret[sstep[i]] - values[srow[i]];
    }
    mr /= (double)(N > 0 ? N : 1);
    me /= (double)(N > 0 ? N : 1);
    for (int64_t i = 0; i < N; i++) {
        const double r = ret[sstep[i]], e = r - values[srow[i]];
        vr += (r - mr) * (r - mr);
        ve += (e - me) * (e - me);
    }
    st->explained_var = N > 0 && vr > 0 ? 1.0 - ve / vr : 0.0;
    for (int64_t bi = 0; prio && bi < B; bi++) { /* mean |advantage| over the valid steps */
        double sum = 0.0, count = 0.0;
        for (int64_t t = 0; t < T; t++)
            if (!b->valid || b->valid[bi * T + t]) {
                sum += fabsf(adv[bi * T + t]);
                count += 1.0;
            }
        prio[bi] = (float)(sum / (count > 1.0 ? count : 1.0) + 1e-6);
    }
    return N;
}

int gb_ppo_mlp_train(gb_ppo_mlp *q, const gb_torch_batch *b, gb_torch_stats *stats, float *prio,
                     gb_error *err)
{
    if (b->B < 1 || b->T < 1)
        return gb_error_set(err, GB_EINVAL, "train: batch of %lld x %lld steps", (long long)b->B,
                            (long long)b->T);
    if (!b->obs || !b->next_obs || !b->action || !b->reward || !b->terminated ||
        !b->truncated || !b->logp)
        return gb_error_set(err, GB_EINVAL, "train: obs, next_obs, action, reward, terminated, "
                            "truncated and logp are required");
    if (b->obs_on_device)
        return gb_error_set(err, GB_EINVAL, "train: the batch's observations are in device "
                            "memory, the learner is on the cpu");
    gb_torch_stats local;
    gb_torch_stats *st = stats ? stats : &local;
    memset(st, 0, sizeof *st);
    const gb_config_algorithm *ac = &q->ac;
    const gb_config_ppo *pc = &ac->ppo;
    const int64_t N = targets(q, b, st, prio);
    if (N < 0)
        return gb_error_set(err, GB_ENOMEM, "ppo learner: out of memory for a batch of %lld x "
                            "%lld steps", (long long)b->B, (long long)b->T);
    st->samples = N;
    st->lr = ac->lr_anneal ? ac->lr * (1.0 - q->progress) : ac->lr;
    /* minibatches of mb steps each, min(minibatches, N) of them (at least one) */
    int64_t nmb = pc->minibatches < N ? pc->minibatches : N;
    nmb = nmb > 1 ? nmb : 1;
    const int64_t mb = (N + nmb - 1) / nmb, steps = N > 0 ? (N + mb - 1) / mb : 0;
    int64_t *perm = N > 0 ? grow(&q->perm, sizeof(int64_t) * (size_t)N) : NULL;
    if (N > 0 && !perm)
        return gb_error_set(err, GB_ENOMEM, "ppo learner: out of memory");
    const gb_torch_ppo_coefs coefs = {pc->clip, pc->value_coef, pc->entropy_coef,
                                      pc->clip_value != 0, pc->normalize_advantages != 0};
    gb_torch_ppo_terms sum = {0};
    int64_t count = 0;
    for (int64_t e = 0; steps > 0 && e < pc->epochs; e++) {
        for (int64_t i = 0; i < N; i++) /* Fisher-Yates */
            perm[i] = i;
        for (int64_t i = N - 1; i > 0; i--) {
            const int64_t j = (int64_t)gb_rng_below(&q->rng, (uint64_t)i + 1), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        for (int64_t k = 0; k < steps; k++) {
            const int64_t start = k * mb, len = mb < N - start ? mb : N - start;
            gb_torch_ppo_terms terms;
            if (minibatch(q, b, perm + start, (int)len, &coefs, &terms))
                return gb_error_set(err, GB_ENOMEM, "ppo learner: out of memory");
            gb_torch_ppo_terms_add(&sum, &terms);
            st->loss = terms.total;
            count++;
            st->grad_norm = optimise(q, st->lr);
        }
    }
    st->gradient_steps = count;
    gb_torch_ppo_terms_means(&sum, count, st);
    q->train_steps++;
    q->version++;
    return 0;
}
