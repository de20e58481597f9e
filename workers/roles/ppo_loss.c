/* workers/roles/ppo_loss.c: what PPO's learner without libtorch does alike for a plain MLP
 * (ppo_mlp.c) and a recurrent core (ppo_core.c), ppo_mlp_internal.h: the loss of a minibatch's
 * heads and their gradients, GAE's targets and the statistics after a batch's values, the
 * shuffles, log_std. */
#include "workers/roles/ppo_mlp_internal.h"

#include <math.h>
#include <stdlib.h>
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

int gb_ppo_mlp_loss_norm(gb_ppo_mlp *q, const int64_t *rows, int n, const gb_torch_ppo_coefs *c,
                         gb_ppo_loss_norm *norm)
{
    const float *adv = q->adv.p;
    const int64_t *sstep = q->sstep.p;
    float *a = gb_flat_grow(&q->adv_mb, sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (!a)
        return -1;
    for (int i = 0; i < n; i++)
        a[i] = adv[sstep[rows[i]]];
    norm->n = n;
    gb_torch_ppo_adv_stats(n, a, 1, c->normalize, &norm->mean, &norm->inv_std);
    return 0;
}

int gb_ppo_mlp_rows_loss(const gb_ppo_mlp *q, gb_ppo_loss_ws *w, const gb_torch_batch *b,
                         const int64_t *rows, int n, const float *pi, const float *v,
                         const gb_torch_ppo_coefs *c, const gb_ppo_loss_norm *norm,
                         float *dlog_std, gb_torch_ppo_terms *sums, float **dpi_out,
                         float **g_value_out)
{
    const int A = q->A;
    const float *values = q->values.p, *adv = q->adv.p, *ret = q->ret.p;
    const int64_t *srow = q->srow.p, *sstep = q->sstep.p;
    const size_t len = (size_t)n, cap = len ? len : 1;
    float *aux = gb_flat_grow(&w->aux, sizeof(float) * 4 * cap);
    float *logp = gb_flat_grow(&w->logp, sizeof(float) * cap);
    float *ent = gb_flat_grow(&w->ent, sizeof(float) * cap);
    float *g_logp = gb_flat_grow(&w->g_logp, sizeof(float) * cap);
    float *g_value = gb_flat_grow(&w->g_value, sizeof(float) * cap);
    float *dpi = gb_flat_grow(&w->dpi, sizeof(float) * cap * (size_t)A);
    int64_t *acts = q->discrete ? gb_flat_grow(&w->acts, sizeof(int64_t) * cap) : NULL;
    float *act_f = q->discrete ? NULL : gb_flat_grow(&w->act_f, sizeof(float) * cap * (size_t)A);
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
    double entropy = 0.0;
    for (size_t i = 0; i < len; i++)
        entropy += ent[i];
    const int64_t all = norm->n;
    gb_torch_ppo_fused_rows(n, logp, v, aux, c, norm->mean, norm->inv_std,
                            all > 0 ? 1.0f / (float)all : 0.0f, g_logp, g_value, sums);
    sums->entropy = entropy;
    /* the entropy's gradient only where it counts (as the bridge's) */
    const float ge = c->entropy_coef != 0.0 ? (float)(-c->entropy_coef / (double)all) : 0.0f;
    if (q->discrete)
        gb_torch_categorical_grads(dpi, n, A, acts, ent, g_logp, ge);
    else
        gb_torch_gaussian_grads(dpi, n, A, q->log_std, g_logp, ge, dlog_std);
    *dpi_out = dpi;
    *g_value_out = g_value;
    return 0;
}

void gb_ppo_mlp_loss_terms(const gb_torch_ppo_terms *sums, const gb_ppo_loss_norm *norm,
                           const gb_torch_ppo_coefs *c, gb_torch_ppo_terms *terms)
{
    const double dn = norm->n > 0 ? (double)norm->n : 1.0;
    terms->entropy = sums->entropy / dn;
    terms->policy = sums->policy / dn;
    terms->value = 0.5 * sums->value / dn;
    terms->approx_kl = sums->approx_kl / dn;
    terms->clip_fraction = sums->clip_fraction / dn;
    terms->total = terms->policy + c->value_coef * terms->value - c->entropy_coef * terms->entropy;
}

void gb_ppo_mlp_loss_free(gb_ppo_loss_ws *w)
{
    gb_flat_buf *bufs[] = {&w->aux, &w->acts, &w->act_f, &w->logp,
                           &w->ent, &w->g_logp, &w->g_value, &w->dpi};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) {
        free(bufs[i]->p);
        bufs[i]->p = NULL;
    }
}

int gb_ppo_mlp_heads_loss(gb_ppo_mlp *q, const gb_torch_batch *b, const int64_t *rows, int n,
                          const float *pi, const float *v, const gb_torch_ppo_coefs *c,
                          gb_torch_ppo_terms *terms, float **dpi, float **g_value)
{
    gb_ppo_loss_norm norm;
    gb_torch_ppo_terms sums;
    if (gb_ppo_mlp_loss_norm(q, rows, n, c, &norm) ||
        gb_ppo_mlp_rows_loss(q, &q->loss, b, rows, n, pi, v, c, &norm, q->dlog_std, &sums, dpi,
                             g_value))
        return -1;
    gb_ppo_mlp_loss_terms(&sums, &norm, c, terms);
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
