/* workers/roles/ppo_loss.c: what PPO's learner without libtorch does alike for a plain MLP
 * (ppo_mlp.c) and a recurrent core (ppo_core.c), ppo_mlp_internal.h: the loss of a minibatch's
 * heads and their gradients, GAE's targets and the statistics after a batch's values, the
 * shuffles, log_std. */
#include "workers/roles/ppo_mlp_internal.h"

#include <math.h>
#include <string.h>

void gb_ppo_mlp_log_std(gb_ppo_mlp *q, int entry, const gb_config_model *mc)
{
    if (entry < 0)
        return;
    q->log_std = q->f.p + q->f.flat_at[entry];
    q->dlog_std = q->f.g + q->f.flat_at[entry];
    for (int j = 0; j < q->A; j++)
        q->log_std[j] = (float)mc->log_std_init;
}

int gb_ppo_mlp_heads_loss(gb_ppo_mlp *q, const gb_torch_batch *b, const int64_t *rows, int n,
                          const float *pi, const float *v, const gb_torch_ppo_coefs *c,
                          gb_torch_ppo_terms *terms, float **dpi_out, float **g_value_out)
{
    const int A = q->A;
    const float *values = q->values.p, *adv = q->adv.p, *ret = q->ret.p;
    const int64_t *srow = q->srow.p, *sstep = q->sstep.p;
    const size_t len = (size_t)n;
    float *aux = gb_flat_grow(&q->aux, sizeof(float) * 4 * len);
    float *logp = gb_flat_grow(&q->logp, sizeof(float) * len);
    float *ent = gb_flat_grow(&q->ent, sizeof(float) * len);
    float *g_logp = gb_flat_grow(&q->g_logp, sizeof(float) * len);
    float *g_value = gb_flat_grow(&q->g_value, sizeof(float) * len);
    float *dpi = gb_flat_grow(&q->dpi, sizeof(float) * len * (size_t)A);
    int64_t *acts = q->discrete ? gb_flat_grow(&q->acts, sizeof(int64_t) * len) : NULL;
    float *act_f = q->discrete ? NULL : gb_flat_grow(&q->act_f, sizeof(float) * len * (size_t)A);
    if (!aux || !logp || !ent || !g_logp || !g_value || !dpi || (q->discrete ? !acts : !act_f))
        return -1;
    for (size_t i = 0; i < len; i++) {
        const int64_t s = rows[i], step = sstep[s], row = srow[s];
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
    memcpy(dpi, pi, sizeof(float) * len * (size_t)A);
    if (q->discrete)
        gb_torch_categorical_terms(dpi, n, A, acts, logp, ent);
    else
        gb_torch_gaussian_terms(dpi, n, A, q->log_std, act_f, logp, ent);
    memset(terms, 0, sizeof *terms);
    for (size_t i = 0; i < len; i++)
        terms->entropy += ent[i];
    terms->entropy /= (double)(n > 1 ? n : 1);
    gb_torch_ppo_fused(n, logp, v, aux, c, g_logp, g_value, terms);
    /* the entropy's gradient only where it counts (as the bridge's) */
    const float ge = c->entropy_coef != 0.0 ? (float)(-c->entropy_coef / (double)n) : 0.0f;
    if (q->discrete)
        gb_torch_categorical_grads(dpi, n, A, acts, ent, g_logp, ge);
    else
        gb_torch_gaussian_grads(dpi, n, A, q->log_std, g_logp, ge, q->dlog_std);
    *dpi_out = dpi;
    *g_value_out = g_value;
    return 0;
}

int64_t gb_ppo_mlp_after_values(gb_ppo_mlp *q, const gb_torch_batch *b, gb_torch_stats *st,
                                float *prio)
{
    const int64_t B = b->B, T = b->T;
    const float *values = q->values.p;
    float *adv = gb_flat_grow(&q->adv, sizeof(float) * (size_t)(B * T));
    float *ret = gb_flat_grow(&q->ret, sizeof(float) * (size_t)(B * T));
    int64_t *srow = gb_flat_grow(&q->srow, sizeof(int64_t) * (size_t)(B * T));
    int64_t *sstep = gb_flat_grow(&q->sstep, sizeof(int64_t) * (size_t)(B * T));
    if (!adv || !ret || !srow || !sstep)
        return -1;
    const gb_config_algorithm *ac = &q->ac;
    gb_torch_gae(B, T, b->reward, values, b->terminated, b->truncated, b->valid, ac->gamma,
                 ac->ppo.gae_lambda, adv, ret);
    const int64_t N = gb_torch_valid_rows(B, T, b->valid, NULL, sstep, srow, NULL);
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

void gb_ppo_mlp_shuffle(gb_ppo_mlp *q, int64_t *perm, int64_t n)
{
    for (int64_t i = 0; i < n; i++) /* Fisher-Yates */
        perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        const int64_t j = (int64_t)gb_rng_below(&q->rng, (uint64_t)i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}
