/* workers/roles/ppo_mlp.c: PPO's learner without libtorch (ppo_mlp.h): the bridge's ppo.cpp
 * (ppo_train without V-trace, ppo_steps, ppo_epochs) and ppo_kernels.cpp's minibatch step, over
 * flat buffers; a model with a core trains through ppo_core.c. */
#include "workers/roles/ppo_mlp_internal.h"

#include "workers/torch/mlp_infer.h"
#include "workers/torch/mlp_train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* GB_EUNSUPPORTED naming what asks for libtorch, or 0 (ppo_mlp.h). */
static int supported(const gb_config *cfg, const gb_torch_space *sp, gb_error *err)
{
    const char *why = NULL;
    if (cfg->trainer.algorithm.name != GB_ALGO_PPO)
        why = "trainer.algorithm is not ppo";
    else if (cfg->policy.model.shared && cfg->policy.model.core == GB_CORE_NONE)
        why = "policy.model.shared"; /* (with a core the torso is shared anyway) */
    else if (cfg->trainer.algorithm.ppo.vtrace)
        why = "trainer.algorithm.ppo.vtrace";
    return why ? gb_error_set(err, GB_EUNSUPPORTED, "%s", why)
               : gb_flat_mlp_supported(cfg, sp, 1, err);
}

/* The network as network.cpp's ActorCritic registers it (its own log_std first, then torso,
 * critic_torso, pi, v: libtorch lists a module's own parameters before its children's). */
static int build(gb_ppo_mlp *q, const gb_config_model *mc, gb_error *err)
{
    gb_flat_mlp *f = &q->f;
    const int hidden = mc->hidden.n;
    int rc = gb_flat_mlp_reserve(f, 4 * hidden + 5, err);
    q->actor = calloc((size_t)hidden + 1, sizeof *q->actor);
    q->critic = calloc((size_t)hidden + 1, sizeof *q->critic);
    if (rc || !q->actor || !q->critic)
        return rc ? rc : gb_error_set(err, GB_ENOMEM, "ppo learner: out of memory");
    const int ls = q->discrete ? -1 : gb_flat_mlp_entry(f, "log_std", q->A, 0);
    const int wa = gb_flat_mlp_torso(f, mc, q->in, "torso", q->actor, &q->na);
    const int wc = gb_flat_mlp_torso(f, mc, q->in, "critic_torso", q->critic, &q->nc);
    const int first_pi = f->nlayout;
    gb_flat_mlp_linear(f, "pi", q->actor, &q->na, wa, q->A, GB_MLP_ACT_NONE);
    gb_flat_mlp_linear(f, "v", q->critic, &q->nc, wc, 1, GB_MLP_ACT_NONE);
    const int first_torso = ls < 0 ? 0 : 1, first_critic = first_torso + 2 * hidden;
    if ((rc = gb_flat_mlp_alloc(f, err)))
        return rc;
    /* each chain's entries: its torso's two a layer, then its head's (pi after both torsos,
     * v after pi) */
    for (int i = 0; i < hidden && rc == 0; i++) {
        rc = gb_flat_mlp_init_layer(f, &q->rng, &q->actor[i], first_torso + 2 * i, sqrt(2.0),
                                    err);
        if (rc == 0)
            rc = gb_flat_mlp_init_layer(f, &q->rng, &q->critic[i], first_critic + 2 * i,
                                        sqrt(2.0), err);
    }
    if (rc == 0)
        rc = gb_flat_mlp_init_layer(f, &q->rng, &q->actor[hidden], first_pi, 0.01, err);
    if (rc == 0)
        rc = gb_flat_mlp_init_layer(f, &q->rng, &q->critic[hidden], first_pi + 2, 1.0, err);
    if (rc)
        return rc;
    gb_ppo_mlp_log_std(q, ls, mc);
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
    q->in = (int)gb_flat_mlp_features(sp);
    q->seed = seed;
    gb_rng_seed_for(&q->rng, seed, "ppo_mlp", 0);
    q->has_core = cfg->policy.model.core != GB_CORE_NONE;
    const int threads = (int)cfg->trainer.threads;
    if ((rc = q->has_core ? gb_ppo_core_build(q, &cfg->policy.model, threads, err)
                          : build(q, &cfg->policy.model, err))) {
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
    gb_flat_buf *bufs[] = {&q->x,     &q->values, &q->adv,  &q->ret,  &q->srow, &q->sstep,
                           &q->perm,  &q->xb,     &q->adv_mb, &q->ws_a, &q->ws_c};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        free(bufs[i]->p);
    gb_ppo_mlp_loss_free(&q->loss);
    gb_ppo_core_free(q);
    gb_flat_mlp_free(&q->f);
    free(q->actor);
    free(q->critic);
    free(q);
}

gb_flat_mlp *gb_ppo_mlp_net(gb_ppo_mlp *q) { return &q->f; }

/* The minibatch of the len valid steps rows[0..len): their loss terms, with the gradients of
 * every parameter in g (zeroed first); ppo_kernels.cpp's ppo_kernels_minibatch. */
static int minibatch(gb_ppo_mlp *q, const gb_torch_batch *b, const int64_t *rows, int len,
                     const gb_torch_ppo_coefs *c, gb_torch_ppo_terms *terms)
{
    const size_t n = (size_t)len, in = (size_t)q->in;
    const int64_t *srow = q->srow.p;
    float *xb = gb_flat_grow(&q->xb, sizeof(float) * n * in);
    float *ws_a = gb_flat_grow(&q->ws_a, sizeof(float) * gb_mlp_train_floats(q->actor, q->na, len));
    if (!xb || !ws_a)
        return -1;
    for (size_t i = 0; i < n; i++)
        memcpy(xb + i * in, (const float *)q->x.p + (size_t)srow[rows[i]] * in,
               sizeof(float) * in);
    memset(q->f.g, 0, sizeof(float) * (size_t)q->f.n);
    const float *pi = gb_mlp_train_forward(q->actor, q->na, xb, len, ws_a);
    float *ws_c = q->ws_c.p; /* sized for the batch's rows, more than a minibatch's */
    const float *v = gb_mlp_train_forward(q->critic, q->nc, xb, len, ws_c);
    float *dpi, *g_value;
    if (gb_ppo_mlp_heads_loss(q, b, rows, len, pi, v, c, terms, &dpi, &g_value))
        return -1;
    gb_mlp_train_backward(q->actor, q->na, xb, len, ws_a, dpi, NULL);
    gb_mlp_train_backward(q->critic, q->nc, xb, len, ws_c, g_value, NULL);
    return 0;
}

/* The batch's observation rows [B*(T+1), in] (each chunk's T steps, then its next_obs) and the
 * critic's values of them. -1: memory. */
static int values(gb_ppo_mlp *q, const gb_torch_batch *b)
{
    const int64_t R = b->B * (b->T + 1);
    const size_t in = (size_t)q->in;
    float *X = gb_flat_grow(&q->x, sizeof(float) * (size_t)R * in);
    float *values = gb_flat_grow(&q->values, sizeof(float) * (size_t)R);
    float *ws_c = gb_flat_grow(&q->ws_c,
                               sizeof(float) * gb_mlp_train_floats(q->critic, q->nc, (int)R));
    if (!X || !values || !ws_c)
        return -1;
    gb_flat_mlp_obs_rows(b, in, X);
    memcpy(values, gb_mlp_train_forward(q->critic, q->nc, X, (int)R, ws_c),
           sizeof(float) * (size_t)R);
    return 0;
}

/* The epochs over minibatches of valid steps: ppo.cpp's ppo_epochs with ppo_steps'. -1: memory */
static int epochs(gb_ppo_mlp *q, const gb_torch_batch *b, int64_t N, const gb_torch_ppo_coefs *c,
                  gb_torch_stats *st, gb_torch_ppo_terms *sum, int64_t *count)
{
    const gb_config_ppo *pc = &q->ac.ppo;
    /* minibatches of mb steps each, min(minibatches, N) of them (at least one) */
    int64_t nmb = pc->minibatches < N ? pc->minibatches : N;
    nmb = nmb > 1 ? nmb : 1;
    const int64_t mb = (N + nmb - 1) / nmb, steps = N > 0 ? (N + mb - 1) / mb : 0;
    int64_t *perm = N > 0 ? gb_flat_grow(&q->perm, sizeof(int64_t) * (size_t)N) : NULL;
    if (N > 0 && !perm)
        return -1;
    for (int64_t e = 0; steps > 0 && e < pc->epochs; e++) {
        gb_ppo_mlp_shuffle(q, perm, N);
        for (int64_t k = 0; k < steps; k++) {
            const int64_t start = k * mb, len = mb < N - start ? mb : N - start;
            gb_torch_ppo_terms terms;
            if (minibatch(q, b, perm + start, (int)len, c, &terms))
                return -1;
            gb_torch_ppo_terms_add(sum, &terms);
            st->loss = terms.total;
            (*count)++;
            st->grad_norm = gb_flat_mlp_step(&q->f, st->lr, q->ac.max_grad_norm, 1e-5);
        }
    }
    return 0;
}

int gb_ppo_mlp_train(gb_ppo_mlp *q, const gb_torch_batch *b, gb_torch_stats *stats, float *prio,
                     gb_error *err)
{
    int rc = gb_flat_mlp_check_batch(b, 1, err);
    if (rc)
        return rc;
    gb_torch_stats local;
    gb_torch_stats *st = stats ? stats : &local;
    memset(st, 0, sizeof *st);
    const gb_config_algorithm *ac = &q->ac;
    const gb_config_ppo *pc = &ac->ppo;
    const int64_t N = (q->has_core ? gb_ppo_core_values(q, b) : values(q, b)) < 0
                          ? -1
                          : gb_ppo_mlp_after_values(q, b, st, prio);
    if (N < 0)
        return gb_error_set(err, GB_ENOMEM, "ppo learner: out of memory for a batch of %lld x "
                            "%lld steps", (long long)b->B, (long long)b->T);
    st->samples = N;
    st->lr = ac->lr_anneal ? ac->lr * (1.0 - q->f.progress) : ac->lr;
    const gb_torch_ppo_coefs coefs = {pc->clip, pc->value_coef, pc->entropy_coef,
                                      pc->clip_value != 0, pc->normalize_advantages != 0};
    gb_torch_ppo_terms sum = {0};
    int64_t count = 0;
    /* the shuffles' stream is a function of the seed and the step, not a state the checkpoint
     * would have to hold: a learner restored at step n shuffles as the one that wrote it */
    gb_rng_seed_for(&q->rng, q->seed, "ppo_mlp shuffles", (uint64_t)q->f.train_steps);
    if ((q->has_core ? gb_ppo_core_epochs(q, b, N, &coefs, st, &sum, &count)
                     : epochs(q, b, N, &coefs, st, &sum, &count)) < 0)
        return gb_error_set(err, GB_ENOMEM, "ppo learner: out of memory");
    st->gradient_steps = count;
    gb_torch_ppo_terms_means(&sum, count, st);
    q->f.train_steps++;
    q->f.version++;
    return 0;
}
