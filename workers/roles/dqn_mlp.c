/* workers/roles/dqn_mlp.c: DQN's learner for a plain MLP without libtorch (dqn_mlp.h): the
 * bridge's dqn.cpp (dqn_train with dqn_kernels_step, valid_transitions, td_priorities and the
 * target update) over flat buffers. */
#include "workers/roles/dqn_mlp.h"

#include "runtime/base/rng.h"
#include "workers/torch/flat_kernels.h"
#include "workers/torch/mlp_infer.h"
#include "workers/torch/mlp_train.h"
#include "workers/torch/targets.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct gb_dqn_mlp {
    gb_flat_mlp f; /* the online network, Adam's state and the counters */
    gb_config_algorithm ac;
    int in, A;
    gb_mlp_train_layer *online, *target; /* torso then q; the same over tp */
    int nl;
    float *tp; /* the target network's parameters: f.n floats in f.p's order */
    gb_rng rng;
    gb_flat_steps t; /* a batch's transitions */
    /* the valid steps' Q, targets, loss gradients, |TD| and weights; the bootstrap rows'
     * observations; the Q gradient; workspaces */
    gb_flat_buf q, y, grad, td, w, xt, dq, ws, ws_t;
};

static int supported(const gb_config *cfg, const gb_torch_space *sp, gb_error *err)
{
    const char *why = NULL;
    if (cfg->trainer.algorithm.name != GB_ALGO_DQN)
        why = "trainer.algorithm is not dqn";
    else if (cfg->trainer.algorithm.dqn.value_rescale)
        why = "trainer.algorithm.dqn.value_rescale";
    else if (!sp->discrete)
        why = "its action space (dqn needs discrete actions)";
    return why ? gb_error_set(err, GB_EUNSUPPORTED, "%s", why)
               : gb_flat_mlp_supported(cfg, sp, 0, err);
}

/* The network as network.cpp's QNet registers it (torso, then q), initialised, and the target
 * network a copy of it. */
static int build(gb_dqn_mlp *d, const gb_config_model *mc, gb_error *err)
{
    gb_flat_mlp *f = &d->f;
    const int hidden = mc->hidden.n;
    int rc = gb_flat_mlp_reserve(f, 2 * hidden + 2, err);
    d->online = calloc((size_t)hidden + 1, sizeof *d->online);
    d->target = calloc((size_t)hidden + 1, sizeof *d->target);
    if (rc || !d->online || !d->target)
        return rc ? rc : gb_error_set(err, GB_ENOMEM, "dqn learner: out of memory");
    const int w = gb_flat_mlp_torso(f, mc, d->in, "torso", d->online, &d->nl);
    gb_flat_mlp_linear(f, "q", d->online, &d->nl, w, d->A, GB_MLP_ACT_NONE);
    if ((rc = gb_flat_mlp_alloc(f, err)))
        return rc;
    for (int i = 0; i < d->nl && rc == 0; i++)
        rc = gb_flat_mlp_init_layer(f, &d->rng, &d->online[i], 2 * i,
                                    i < hidden ? sqrt(2.0) : 1.0, err);
    if (rc)
        return rc;
    if (!(d->tp = malloc(sizeof(float) * (size_t)f->n)))
        return gb_error_set(err, GB_ENOMEM, "dqn learner: out of memory");
    memcpy(d->tp, f->p, sizeof(float) * (size_t)f->n);
    for (int i = 0; i < d->nl; i++) {
        d->target[i] = d->online[i];
        d->target[i].w = d->tp + (d->online[i].w - f->p);
        d->target[i].b = d->tp + (d->online[i].b - f->p);
        d->target[i].dw = d->target[i].db = NULL;
    }
    return 0;
}

int gb_dqn_mlp_open(const gb_config *cfg, const gb_torch_space *sp, uint64_t seed,
                    gb_dqn_mlp **out, gb_error *err)
{
    *out = NULL;
    int rc = supported(cfg, sp, err);
    if (rc)
        return rc;
    gb_dqn_mlp *d = calloc(1, sizeof *d);
    if (!d)
        return gb_error_set(err, GB_ENOMEM, "dqn learner: out of memory");
    d->ac = cfg->trainer.algorithm;
    d->A = (int)sp->n_actions;
    d->in = (int)gb_flat_mlp_features(sp);
    gb_rng_seed_for(&d->rng, seed, "dqn_mlp", 0);
    if ((rc = build(d, &cfg->policy.model, err))) {
        gb_dqn_mlp_close(d);
        return rc;
    }
    *out = d;
    return 0;
}

void gb_dqn_mlp_close(gb_dqn_mlp *d)
{
    if (!d)
        return;
    gb_flat_buf *bufs[] = {&d->q,  &d->y,  &d->grad, &d->td,  &d->w,
                           &d->xt, &d->dq, &d->ws,   &d->ws_t};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        free(bufs[i]->p);
    gb_flat_steps_free(&d->t);
    gb_flat_mlp_free(&d->f);
    free(d->tp);
    free(d->online);
    free(d->target);
    free(d);
}

gb_flat_mlp *gb_dqn_mlp_net(gb_dqn_mlp *d) { return &d->f; }
float *gb_dqn_mlp_target(gb_dqn_mlp *d) { return d->tp; }

/* The loss over the N valid steps into *loss and its gradient into f.g (zeroed first): the
 * online network's Q of every obs row, the target network's of the bootstrap rows; |TD| into
 * td, the mean trained Q into *q_mean. dqn_kernels_step's arithmetic (double Q: the first of
 * equal maxima, as argmax). 0, or -1 (memory). */
static int loss_and_grad(gb_dqn_mlp *d, const gb_torch_batch *b, int64_t N, double *loss,
                         double *q_mean)
{
    const int64_t R = b->B * (b->T + 1);
    const int A = d->A, in = d->in;
    const size_t n = (size_t)N;
    float *xt = gb_flat_grow(&d->xt, sizeof(float) * n * (size_t)in);
    float *q = gb_flat_grow(&d->q, sizeof(float) * n), *y = gb_flat_grow(&d->y, sizeof(float) * n);
    float *grad = gb_flat_grow(&d->grad, sizeof(float) * n);
    float *td = gb_flat_grow(&d->td, sizeof(float) * n);
    float *w = b->weights ? gb_flat_grow(&d->w, sizeof(float) * n) : NULL;
    float *dq = gb_flat_grow(&d->dq, sizeof(float) * (size_t)R * (size_t)A);
    float *ws = gb_flat_grow(&d->ws, sizeof(float) * gb_mlp_train_floats(d->online, d->nl,
                                                                          (int)R));
    float *ws_t = gb_flat_grow(&d->ws_t, sizeof(float) * gb_mlp_train_floats(d->target, d->nl,
                                                                              (int)N));
    if (!xt || !q || !y || !grad || !td || (b->weights && !w) || !dq || !ws || !ws_t)
        return -1;
    const float *X = d->t.x.p, *ret = d->t.G.p, *disc = d->t.disc.p;
    const int64_t *step = d->t.step.p, *row = d->t.row.p, *brow = d->t.brow.p;
    const int64_t *a = b->action;
    memset(d->f.g, 0, sizeof(float) * (size_t)d->f.n);
    const float *Q = gb_mlp_train_forward(d->online, d->nl, X, (int)R, ws);
    for (size_t i = 0; i < n; i++)
        memcpy(xt + i * (size_t)in, X + (size_t)brow[i] * (size_t)in, sizeof(float) * (size_t)in);
    const float *Qt = gb_mlp_train_forward(d->target, d->nl, xt, (int)N, ws_t);
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        const float *qb = Q + brow[i] * A, *qt = Qt + i * (size_t)A;
        int best = 0;
        for (int j = 1; j < A; j++)
            if (d->ac.dqn.double_q ? qb[j] > qb[best] : qt[j] > qt[best])
                best = j;
        q[i] = Q[row[i] * A + a[step[i]]];
        y[i] = ret[step[i]] + disc[step[i]] * qt[best];
        sum += q[i];
        if (w)
            w[i] = b->weights[step[i] / b->T];
    }
    *q_mean = sum / (double)N;
    *loss = gb_torch_huber_td(q, y, w, N, d->ac.dqn.huber_delta, grad, td);
    memset(dq, 0, sizeof(float) * (size_t)R * (size_t)A);
    for (size_t i = 0; i < n; i++)
        dq[row[i] * A + a[step[i]]] += grad[i];
    gb_mlp_train_backward(d->online, d->nl, X, (int)R, ws, dq, NULL);
    return 0;
}

int gb_dqn_mlp_train(gb_dqn_mlp *d, const gb_torch_batch *b, gb_torch_stats *stats, float *prio,
                     gb_error *err)
{
    int rc = gb_flat_mlp_check_batch(b, 0, err);
    if (rc)
        return rc;
    for (int64_t i = 0; i < b->B * b->T; i++) {
        const int64_t a = ((const int64_t *)b->action)[i];
        if ((!b->valid || b->valid[i]) && (a < 0 || a >= d->A))
            return gb_error_set(err, GB_EINVAL, "train: action %lld at step %lld, the space "
                                "has %d", (long long)a, (long long)i, d->A);
    }
    gb_torch_stats local;
    gb_torch_stats *st = stats ? stats : &local;
    memset(st, 0, sizeof *st);
    const gb_config_algorithm *ac = &d->ac;
    const int64_t N = gb_flat_steps_make(&d->t, b, (size_t)d->in, ac->dqn.n_step, ac->gamma);
    double q_mean = 0.0, loss = 0.0;
    if (N < 0 || (N > 0 && loss_and_grad(d, b, N, &loss, &q_mean)))
        return gb_error_set(err, GB_ENOMEM, "dqn learner: out of memory for a batch of %lld x "
                            "%lld steps", (long long)b->B, (long long)b->T);
    st->samples = N;
    st->lr = ac->lr_anneal ? ac->lr * (1.0 - d->f.progress) : ac->lr;
    if (N > 0) {
        st->grad_norm = gb_flat_mlp_step(&d->f, st->lr, ac->max_grad_norm, 1e-8);
        st->gradient_steps = 1;
        st->loss = st->value_loss = loss;
        st->q_mean = q_mean;
        const float *td = d->td.p;
        double sum = 0.0;
        for (int64_t i = 0; i < N; i++)
            sum += td[i];
        st->td_abs_mean = sum / (double)N;
        if (ac->dqn.target_update == GB_TARGET_POLYAK)
            gb_flat_lerp(d->tp, d->f.p, (size_t)d->f.n, (float)ac->dqn.tau);
        else if (ac->dqn.target_update_every <= 1 ||
                 (d->f.train_steps + 1) % ac->dqn.target_update_every == 0)
            memcpy(d->tp, d->f.p, sizeof(float) * (size_t)d->f.n);
    }
    if (prio)
        gb_torch_chunk_priorities(b->B, b->T, d->t.step.p, d->td.p, N, prio);
    d->f.train_steps++;
    d->f.version++;
    return 0;
}
