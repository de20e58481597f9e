/* workers/roles/sac_mlp.c: SAC's learner for a plain MLP without libtorch (sac_mlp.h): the
 * bridge's sac.cpp (sac_train, valid_transitions, td_priorities, the Polyak update) with
 * sac_kernels.cpp's steps, over flat buffers. */
#include "workers/roles/sac_mlp.h"

#include "runtime/base/rng.h"
#include "workers/torch/flat_kernels.h"
#include "workers/torch/mlp_infer.h"
#include "workers/torch/mlp_train.h"
#include "workers/torch/squashed.h"
#include "workers/torch/targets.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A chain of layers and the workspace of its last forward. */
typedef struct chain {
    gb_mlp_train_layer *l;
    int n;
    gb_flat_buf ws;
} chain;

struct gb_sac_mlp {
    gb_flat_mlp f; /* actor (the layout), critics, log_alpha; Adam's state; the counters */
    gb_config_algorithm ac;
    int D, A;                 /* observation features, action dimensions */
    int64_t q_at, q_n, la_at; /* the critics' block in f, and log_alpha's float */
    float *tq;                /* the target critics: q_n floats laid out as the critics' block */
    float act_scale[GB_TORCH_MAX_ACTION_DIM], act_bias[GB_TORCH_MAX_ACTION_DIM], log_scale;
    double target_entropy;
    /* the actor's torso and heads; the critics q1, q2, their targets, and both again without
     * weight gradients (the actor's step takes their input gradients alone) */
    chain torso, mean, raw, q[2], qt[2], qf[2];
    uint64_t seed;
    gb_rng rng; /* the initial weights', then each call's noise (seeded by its step) */
    void (*fill)(void *ctx, float *out, int64_t n);
    void *fill_ctx;
    gb_flat_steps t; /* a batch's one-step transitions */
    /* the valid steps' observations and next observations, actions, targets, |TD|, weights */
    gb_flat_buf xo, xo2, act, y, td, w;
    /* a draw's noise, log_std, u, action, log-probability; the critics' input rows and their
     * gradient; loss gradients; the heads' and the torso's gradients */
    gb_flat_buf eps, ls, u, a, logp, xc, dxc, ga, g1, g2, gl, dm, dr, dh, dh2;
};

static int supported(const gb_config *cfg, const gb_torch_space *sp, gb_error *err)
{
    const char *why = NULL;
    if (cfg->trainer.algorithm.name != GB_ALGO_SAC)
        why = "trainer.algorithm is not sac";
    else if (sp->discrete)
        why = "its action space (sac needs a box)";
    for (int64_t i = 0; !why && i < sp->action_dim && i < GB_TORCH_MAX_ACTION_DIM; i++)
        if (!isfinite(sp->action_low[i]) || !isfinite(sp->action_high[i]))
            why = "its action space (sac needs finite bounds)";
    return why ? gb_error_set(err, GB_EUNSUPPORTED, "%s", why)
               : gb_flat_mlp_supported(cfg, sp, 0, err);
}

static gb_mlp_train_layer *layers(chain *c, int n)
{
    c->n = 0;
    return c->l = calloc((size_t)(n > 0 ? n : 1), sizeof *c->l);
}

/* A critic (network.cpp's Critic: the torso's hidden layers over in inputs, then one output)
 * onto c, its floats reserved in f past the layout (each layer's weight, then its bias). */
static void critic(gb_flat_mlp *f, const gb_config_model *mc, int in, chain *c)
{
    const int act = mc->activation == GB_ACT_RELU ? GB_MLP_ACT_RELU : GB_MLP_ACT_TANH;
    for (int i = 0; i <= mc->hidden.n; i++) {
        const int out = i < mc->hidden.n ? (int)mc->hidden.v[i] : 1;
        c->l[c->n++] = (gb_mlp_train_layer){.in = in, .out = out,
                                            .act = i < mc->hidden.n ? act : GB_MLP_ACT_NONE};
        gb_flat_mlp_extra(f, (int64_t)out * in + out);
        in = out;
    }
}

/* c's copy over the floats base (the target critics' or the critics' own) without gradients. */
static int frozen(chain *to, const chain *c, const float *from, const float *base)
{
    if (!layers(to, c->n))
        return -1;
    for (int i = 0; i < c->n; i++) {
        to->l[i] = c->l[i];
        to->l[i].w = base + (c->l[i].w - from);
        to->l[i].b = base + (c->l[i].b - from);
        to->l[i].dw = to->l[i].db = NULL;
    }
    to->n = c->n;
    return 0;
}

/* The actor as network.cpp's SacActor registers it (torso, mean, log_std), then the critics
 * q1 and q2 and log_alpha past the layout; initialised; the targets copies of the critics. */
static int build(gb_sac_mlp *s, const gb_config_model *mc, gb_error *err)
{
    gb_flat_mlp *f = &s->f;
    const int hidden = mc->hidden.n;
    int rc = gb_flat_mlp_reserve(f, 2 * hidden + 4, err);
    if (rc || !layers(&s->torso, hidden) || !layers(&s->mean, 1) || !layers(&s->raw, 1) ||
        !layers(&s->q[0], hidden + 1) || !layers(&s->q[1], hidden + 1))
        return rc ? rc : gb_error_set(err, GB_ENOMEM, "sac learner: out of memory");
    const int w = gb_flat_mlp_torso(f, mc, s->D, "torso", s->torso.l, &s->torso.n);
    gb_flat_mlp_linear(f, "mean", s->mean.l, &s->mean.n, w, s->A, GB_MLP_ACT_NONE);
    gb_flat_mlp_linear(f, "log_std", s->raw.l, &s->raw.n, w, s->A, GB_MLP_ACT_NONE);
    s->q_at = f->n;
    critic(f, mc, s->D + s->A, &s->q[0]);
    critic(f, mc, s->D + s->A, &s->q[1]);
    s->q_n = f->n - s->q_at;
    s->la_at = gb_flat_mlp_extra(f, 1);
    if ((rc = gb_flat_mlp_alloc(f, err)))
        return rc;
    for (int i = 0; i < hidden && rc == 0; i++)
        rc = gb_flat_mlp_init_layer(f, &s->rng, &s->torso.l[i], 2 * i, sqrt(2.0), err);
    if (rc == 0)
        rc = gb_flat_mlp_init_layer(f, &s->rng, s->mean.l, 2 * hidden, 0.01, err);
    if (rc == 0)
        rc = gb_flat_mlp_init_layer(f, &s->rng, s->raw.l, 2 * hidden + 2, 0.01, err);
    int64_t at = s->q_at;
    for (int c = 0; c < 2; c++)
        for (int i = 0; i <= hidden && rc == 0; i++) {
            gb_mlp_train_layer *l = &s->q[c].l[i];
            const int64_t wn = (int64_t)l->out * l->in;
            rc = gb_flat_mlp_init_at(f, &s->rng, l, at, at + wn, i < hidden ? sqrt(2.0) : 1.0,
                                     err);
            at += wn + l->out;
        }
    if (rc)
        return rc;
    if (!(s->tq = malloc(sizeof(float) * (size_t)s->q_n)))
        return gb_error_set(err, GB_ENOMEM, "sac learner: out of memory");
    memcpy(s->tq, f->p + s->q_at, sizeof(float) * (size_t)s->q_n);
    for (int c = 0; c < 2; c++)
        if (frozen(&s->qt[c], &s->q[c], f->p + s->q_at, s->tq) ||
            frozen(&s->qf[c], &s->q[c], f->p, f->p))
            return gb_error_set(err, GB_ENOMEM, "sac learner: out of memory");
    f->p[s->la_at] = logf((float)s->ac.sac.init_alpha);
    return 0;
}

int gb_sac_mlp_open(const gb_config *cfg, const gb_torch_space *sp, uint64_t seed,
                    gb_sac_mlp **out, gb_error *err)
{
    *out = NULL;
    int rc = supported(cfg, sp, err);
    if (rc)
        return rc;
    gb_sac_mlp *s = calloc(1, sizeof *s);
    if (!s)
        return gb_error_set(err, GB_ENOMEM, "sac learner: out of memory");
    s->ac = cfg->trainer.algorithm;
    s->A = (int)sp->action_dim;
    s->D = (int)gb_flat_mlp_features(sp);
    s->seed = seed;
    s->target_entropy = isnan(s->ac.sac.target_entropy) ? -(double)s->A
                                                         : s->ac.sac.target_entropy;
    float log_scale = 0.0f; /* (model.cpp's act_scale and act_bias, sac_kernels.cpp's sum) */
    for (int i = 0; i < s->A; i++) {
        s->act_scale[i] = 0.5f * (sp->action_high[i] - sp->action_low[i]);
        s->act_bias[i] = 0.5f * (sp->action_high[i] + sp->action_low[i]);
        log_scale += logf(s->act_scale[i]);
    }
    s->log_scale = log_scale;
    gb_rng_seed_for(&s->rng, seed, "sac_mlp", 0);
    if ((rc = build(s, &cfg->policy.model, err))) {
        gb_sac_mlp_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

void gb_sac_mlp_close(gb_sac_mlp *s)
{
    if (!s)
        return;
    chain *chains[] = {&s->torso, &s->mean, &s->raw,  &s->q[0],  &s->q[1],
                       &s->qt[0], &s->qt[1], &s->qf[0], &s->qf[1]};
    for (size_t i = 0; i < sizeof chains / sizeof *chains; i++) {
        free(chains[i]->l);
        free(chains[i]->ws.p);
    }
    gb_flat_buf *bufs[] = {&s->xo, &s->xo2, &s->act, &s->y,  &s->td, &s->w,  &s->eps,
                           &s->ls, &s->u,   &s->a,   &s->logp, &s->xc, &s->dxc, &s->ga,
                           &s->g1, &s->g2,  &s->gl,  &s->dm, &s->dr, &s->dh, &s->dh2};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        free(bufs[i]->p);
    gb_flat_steps_free(&s->t);
    gb_flat_mlp_free(&s->f);
    free(s->tq);
    free(s);
}

gb_flat_mlp *gb_sac_mlp_net(gb_sac_mlp *s) { return &s->f; }
float *gb_sac_mlp_target(gb_sac_mlp *s) { return s->tq; }
int64_t gb_sac_mlp_target_floats(const gb_sac_mlp *s) { return s->q_n; }

void gb_sac_mlp_set_noise(gb_sac_mlp *s, void (*fill)(void *ctx, float *out, int64_t n),
                          void *ctx)
{
    s->fill = fill;
    s->fill_ctx = ctx;
}

/* c's forward of n rows x; NULL when out of memory. */
static const float *forward(chain *c, const float *x, int n)
{
    if (c->n == 0)
        return x; /* (an actor without hidden layers: its heads read the observation) */
    float *ws = gb_flat_grow(&c->ws, sizeof(float) * gb_mlp_train_floats(c->l, c->n, n));
    return ws ? gb_mlp_train_forward(c->l, c->n, x, n, ws) : NULL;
}

static void backward(chain *c, const float *x, int n, float *dy, float *dx)
{
    if (c->n > 0)
        gb_mlp_train_backward(c->l, c->n, x, n, c->ws.p, dy, dx);
}

/* Sizes every per-step buffer for n valid steps: -1 when out of memory. */
static int grow_steps(gb_sac_mlp *s, size_t n)
{
    const size_t e = n * (size_t)s->A, w = n * (size_t)(s->D + s->A);
    const size_t hw = n * (size_t)s->mean.l[0].in;
    struct { gb_flat_buf *b; size_t floats; } want[] = {
        {&s->xo, n * (size_t)s->D}, {&s->xo2, n * (size_t)s->D}, {&s->act, e}, {&s->y, n},
        {&s->td, n}, {&s->w, n}, {&s->eps, e}, {&s->ls, e}, {&s->u, e}, {&s->a, e},
        {&s->logp, n}, {&s->xc, w}, {&s->dxc, w}, {&s->ga, e}, {&s->g1, n}, {&s->g2, n},
        {&s->gl, n}, {&s->dm, e}, {&s->dr, e}, {&s->dh, hw}, {&s->dh2, hw}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        if (!gb_flat_grow(want[i].b, sizeof(float) * (want[i].floats ? want[i].floats : 1)))
            return -1;
    return 0;
}

/* A draw of actions for n rows x (sac_kernels.cpp's draw): the actor's heads, the noise, the
 * squashed draw into s's a, u, ls and logp. The heads' outputs stay in their workspaces. */
static int draw(gb_sac_mlp *s, const float *x, int n, const float **h, const float **m,
                const float **r)
{
    if (!(*h = forward(&s->torso, x, n)) || !(*m = forward(&s->mean, *h, n)) ||
        !(*r = forward(&s->raw, *h, n)))
        return -1;
    float *eps = s->eps.p;
    const int64_t e = (int64_t)n * s->A;
    if (s->fill)
        s->fill(s->fill_ctx, eps, e);
    else
        for (int64_t i = 0; i < e; i++)
            eps[i] = (float)gb_rng_normal(&s->rng);
    gb_squashed_draw(n, s->A, *m, *r, eps, s->log_scale, s->ls.p, s->u.p, s->a.p, s->logp.p);
    return 0;
}

/* The critics' input rows [n, D + A] into xc: each observation row, then its action. */
static const float *critic_rows(gb_sac_mlp *s, const float *o, const float *a, int n)
{
    const size_t D = (size_t)s->D, A = (size_t)s->A, w = D + A;
    float *xc = s->xc.p;
    for (size_t i = 0; i < (size_t)n; i++) {
        memcpy(xc + i * w, o + i * D, sizeof(float) * D);
        memcpy(xc + i * w + D, a + i * A, sizeof(float) * A);
    }
    return xc;
}

/* The critics' targets y (sac_kernels_target), then their loss and gradients into f.g
 * (sac_kernels_critic): *qloss, *q_mean, |TD| into s->td. 0, or -1 (memory). */
static int critic_grads(gb_sac_mlp *s, const gb_torch_batch *b, int n, float alpha,
                        double *qloss, double *q_mean)
{
    const float *h, *m, *r;
    if (draw(s, s->xo2.p, n, &h, &m, &r))
        return -1;
    const float *xc = critic_rows(s, s->xo2.p, s->a.p, n);
    const float *q1t = forward(&s->qt[0], xc, n), *q2t = forward(&s->qt[1], xc, n);
    if (!q1t || !q2t)
        return -1;
    const float *ret = s->t.G.p, *disc = s->t.disc.p, *logp = s->logp.p;
    const int64_t *step = s->t.step.p;
    float *y = s->y.p, *w = b->weights ? s->w.p : NULL;
    for (int i = 0; i < n; i++) {
        const int64_t k = step[i];
        y[i] = ret[k] + disc[k] * ((q1t[i] < q2t[i] ? q1t[i] : q2t[i]) - alpha * logp[i]);
        if (w)
            w[i] = b->weights[k / b->T];
    }
    /* the stored actions in the actor's [-1, 1] (sac.cpp's critic_step) */
    float *a = s->act.p;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < s->A; j++) {
            const float v = (((const float *)b->action)[step[i] * s->A + j] - s->act_bias[j]) /
                            s->act_scale[j];
            a[(size_t)i * s->A + j] = v < -1.0f ? -1.0f : v > 1.0f ? 1.0f : v;
        }
    memset(s->f.g + s->q_at, 0, sizeof(float) * (size_t)s->q_n);
    xc = critic_rows(s, s->xo.p, a, n);
    const float *q1 = forward(&s->q[0], xc, n), *q2 = forward(&s->q[1], xc, n);
    if (!q1 || !q2)
        return -1;
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += q1[i];
    *q_mean = sum / n;
    *qloss = gb_torch_sac_critic_fused(q1, q2, y, w, n, s->g1.p, s->g2.p, s->td.p);
    backward(&s->q[0], xc, n, s->g1.p, NULL);
    backward(&s->q[1], xc, n, s->g2.p, NULL);
    return 0;
}

/* The actor's loss on fresh actions and its gradients into f.g (sac_kernels_actor): the
 * critics' (just stepped) input gradients, through the squashed draw to both heads and the
 * torso. 0, or -1 (memory). */
static int actor_grads(gb_sac_mlp *s, int n, double alpha, double *aloss, double *logp_mean)
{
    const int A = s->A, w = s->D + A;
    const size_t e = (size_t)n * (size_t)A;
    memset(s->f.g, 0, sizeof(float) * (size_t)s->q_at); /* the actor's block */
    const float *x = s->xo.p, *h, *m, *r;
    if (draw(s, x, n, &h, &m, &r))
        return -1;
    const float *xc = critic_rows(s, x, s->a.p, n);
    const float *q1 = forward(&s->qf[0], xc, n), *q2 = forward(&s->qf[1], xc, n);
    if (!q1 || !q2)
        return -1;
    *aloss = gb_torch_sac_actor_fused(s->logp.p, q1, q2, n, alpha, s->gl.p, s->g1.p, s->g2.p,
                                      logp_mean);
    float *ga = s->ga.p, *dxc = s->dxc.p;
    memset(ga, 0, sizeof(float) * e);
    for (int c = 0; c < 2; c++) { /* d loss / d a through both critics' action columns */
        backward(&s->qf[c], xc, n, c ? s->g2.p : s->g1.p, dxc);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < A; j++)
                ga[(size_t)i * A + j] += dxc[(size_t)i * w + s->D + j];
    }
    gb_squashed_backward(n, A, m, r, s->eps.p, s->ls.p, s->u.p, s->a.p, ga, s->gl.p, s->dm.p,
                         s->dr.p);
    /* both heads read the torso's output: its gradient is the sum of theirs */
    const size_t hw = (size_t)n * (size_t)s->mean.l[0].in;
    float *dh = s->dh.p, *dh2 = s->dh2.p;
    backward(&s->mean, h, n, s->dm.p, dh);
    backward(&s->raw, h, n, s->dr.p, dh2);
    for (size_t i = 0; i < hw; i++)
        dh[i] += dh2[i];
    backward(&s->torso, x, n, dh, NULL);
    return 0;
}

/* The batch's one-step transitions (valid_transitions(b, 1, ...)) and the valid steps'
 * observations and next observations. Returns the valid steps' count, or -1 (memory). */
static int64_t transitions(gb_sac_mlp *s, const gb_torch_batch *b)
{
    const size_t D = (size_t)s->D;
    const int64_t N = gb_flat_steps_make(&s->t, b, D, 1, s->ac.gamma);
    if (N < 0 || grow_steps(s, (size_t)N))
        return -1;
    const float *X = s->t.x.p;
    const int64_t *row = s->t.row.p, *brow = s->t.brow.p;
    float *xo = s->xo.p, *xo2 = s->xo2.p;
    for (int64_t i = 0; i < N; i++) {
        memcpy(xo + (size_t)i * D, X + (size_t)row[i] * D, sizeof(float) * D);
        memcpy(xo2 + (size_t)i * D, X + (size_t)brow[i] * D, sizeof(float) * D);
    }
    return N;
}

int gb_sac_mlp_train(gb_sac_mlp *s, const gb_torch_batch *b, gb_torch_stats *stats, float *prio,
                     gb_error *err)
{
    int rc = gb_flat_mlp_check_batch(b, 0, err);
    if (rc)
        return rc;
    gb_torch_stats local;
    gb_torch_stats *st = stats ? stats : &local;
    memset(st, 0, sizeof *st);
    const gb_config_algorithm *ac = &s->ac;
    gb_flat_mlp *f = &s->f;
    /* the noise's stream is a function of the seed and the step, not a state the checkpoint
     * would have to hold: a learner restored at step n draws as the one that wrote it */
    gb_rng_seed_for(&s->rng, s->seed, "sac_mlp noise", (uint64_t)f->train_steps);
    const int64_t N = transitions(s, b);
    st->samples = N > 0 ? N : 0;
    st->lr = ac->lr_anneal ? ac->lr * (1.0 - f->progress) : ac->lr;
    const double alpha = exp((double)f->p[s->la_at]);
    double qloss = 0.0, q_mean = 0.0, aloss = 0.0, logp_mean = 0.0;
    if (N < 0 || (N > 0 && critic_grads(s, b, (int)N, (float)alpha, &qloss, &q_mean)))
        return gb_error_set(err, GB_ENOMEM, "sac learner: out of memory for a batch of %lld x "
                            "%lld steps", (long long)b->B, (long long)b->T);
    if (N > 0) { /* (no valid step: nothing changes, as the bridge's lone learner) */
        const int64_t k = f->adam_steps + 1; /* each optimiser's step (their counts agree) */
        gb_flat_mlp_step_part(f, s->q_at, s->q_n, k, st->lr, ac->max_grad_norm, 1e-8);
        if (actor_grads(s, (int)N, alpha, &aloss, &logp_mean))
            return gb_error_set(err, GB_ENOMEM, "sac learner: out of memory");
        st->grad_norm = gb_flat_mlp_step_part(f, 0, s->q_at, k, st->lr, ac->max_grad_norm,
                                              1e-8);
        if (ac->sac.learn_alpha) { /* d/d log_alpha of -mean(log_alpha (logp + target)) */
            f->g[s->la_at] = (float)-(logp_mean + s->target_entropy);
            gb_flat_mlp_step_part(f, s->la_at, 1, k, ac->sac.alpha_lr, 0.0, 1e-8);
        }
        f->adam_steps = k;
        gb_flat_lerp(s->tq, f->p + s->q_at, (size_t)s->q_n, (float)ac->sac.tau);
        st->alpha = exp((double)f->p[s->la_at]);
        st->gradient_steps = 1;
        st->value_loss = qloss;
        st->policy_loss = aloss;
        st->loss = qloss + aloss;
        st->entropy = -logp_mean;
        st->q_mean = q_mean;
        double sum = 0.0;
        for (int64_t i = 0; i < N; i++)
            sum += ((const float *)s->td.p)[i];
        st->td_abs_mean = sum / (double)N;
    }
    if (prio)
        gb_torch_chunk_priorities(b->B, b->T, s->t.step.p, s->td.p, N, prio);
    f->train_steps++;
    f->version++;
    return 0;
}
