/* workers/torch/fused_losses.c: the CPU learners' losses with their gradients in one pass of
 * plain C each (DQN's Huber TD loss and chunk priorities, PPO's clipped objective and its
 * distributions' terms, SAC's critic and actor losses), where libtorch spends a dozen small
 * operations and as many autograd nodes on vectors of a few hundred numbers. The algorithms
 * then run backward from the network's outputs with these gradients. Each computes what its
 * libtorch loss (dqn.cpp, ppo.cpp, sac.cpp) computes, including how libtorch's max, min and
 * clamp pass gradients at ties and bounds; tests/workers/torch/test_torch_losses.c compares
 * them. */
#include "workers/torch/targets.h"

#include <math.h>

double gb_torch_huber_td(const float *q, const float *y, const float *w, int64_t n, double delta,
                         float *grad, float *td_abs)
{
    if (n <= 0)
        return 0.0;
    const float d = (float)delta, half_d = 0.5f * (float)delta, scale = 1.0f / (float)n;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const float e = y[i] - q[i], a = fabsf(e), wi = w ? w[i] : 1.0f;
        float l, dl; /* the loss of e and its derivative in e */
        if (d <= 0.0f || a <= d) {
            l = 0.5f * e * e;
            dl = e;
        } else {
            l = d * (a - half_d);
            dl = e > 0.0f ? d : -d;
        }
        sum += (double)(wi * l);
        grad[i] = -wi * dl * scale; /* e = y - q: d e / d q = -1 */
        if (td_abs)
            td_abs[i] = a;
    }
    return sum / (double)n;
}

void gb_torch_chunk_priorities(int64_t B, int64_t T, const int64_t *steps,
                               const float *td_abs, int64_t n, float *prio)
{
    /* steps ascend, so each chunk's steps are one run */
    int64_t i = 0;
    for (int64_t b = 0; b < B; b++) {
        float mx = 0.0f;
        double sum = 0.0;
        int64_t cnt = 0;
        for (; i < n && steps[i] / T == b; i++) {
            mx = td_abs[i] > mx ? td_abs[i] : mx;
            sum += td_abs[i];
            cnt++;
        }
        prio[b] = (float)(0.9 * mx + 0.1 * sum / (double)(cnt > 0 ? cnt : 1) + 1e-6);
    }
}

/* d max(a, b) as libtorch's maximum: to the larger, half each at a tie */
static inline float max_share(float a, float b)
{
    return a > b ? 1.0f : a < b ? 0.0f : 0.5f;
}

void gb_torch_ppo_adv_stats(int64_t n, const float *a, int64_t stride, int normalize,
                            double *mean, double *inv_std)
{
    *mean = 0.0;
    *inv_std = 1.0;
    if (!normalize || n < 2) /* per minibatch: (a - mean) / (unbiased std + 1e-8) */
        return;
    double s = 0.0, ss = 0.0;
    for (int64_t i = 0; i < n; i++)
        s += a[i * stride];
    *mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) {
        const double d = a[i * stride] - *mean;
        ss += d * d;
    }
    *inv_std = 1.0 / (sqrt(ss / (double)(n - 1)) + 1e-8);
}

void gb_torch_ppo_fused_rows(int64_t n, const float *new_logp, const float *value,
                             const float *aux, const gb_torch_ppo_coefs *c, double mean,
                             double inv_std, float scale, float *g_logp, float *g_value,
                             gb_torch_ppo_terms *sums)
{
    const float clip = (float)c->clip;
    double pol = 0.0, val = 0.0, kl = 0.0, clipped = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const float old_logp = aux[4 * i], old_v = aux[4 * i + 2], ret = aux[4 * i + 3];
        const float adv = (float)((aux[4 * i + 1] - mean) * inv_std);
        const float logratio = new_logp[i] - old_logp, ratio = expf(logratio);
        const float inside = ratio >= 1.0f - clip && ratio <= 1.0f + clip;
        const float rc = ratio < 1.0f - clip ? 1.0f - clip : ratio > 1.0f + clip ? 1.0f + clip
                                                                                 : ratio;
        const float pg1 = -adv * ratio, pg2 = -adv * rc, s1 = max_share(pg1, pg2);
        pol += pg1 > pg2 ? pg1 : pg2;
        /* d/d new_logp through ratio = exp(logratio): pg1's share, and pg2's where the clamp
         * passes it */
        g_logp[i] = (s1 + (1.0f - s1) * inside) * (-adv * ratio) * scale;
        const float e = value[i] - ret, se1 = e * e;
        float gv = e; /* d (0.5 se) / d v */
        if (c->clip_value) {
            const float dv = value[i] - old_v;
            const float in_v = dv >= -clip && dv <= clip;
            const float vc = old_v + (dv < -clip ? -clip : dv > clip ? clip : dv);
            const float e2 = vc - ret, se2 = e2 * e2, s = max_share(se1, se2);
            val += se1 > se2 ? se1 : se2;
            gv = s * e + (1.0f - s) * e2 * in_v;
        } else {
            val += se1;
        }
        g_value[i] = (float)c->value_coef * gv * scale;
        kl += (ratio - 1.0f) - logratio;
        clipped += fabsf(ratio - 1.0f) > clip;
    }
    sums->policy = pol;
    sums->value = val;
    sums->approx_kl = kl;
    sums->clip_fraction = clipped;
}

void gb_torch_ppo_fused(int64_t n, const float *new_logp, const float *value,
                        const float *aux, const gb_torch_ppo_coefs *c, float *g_logp,
                        float *g_value, gb_torch_ppo_terms *out)
{
    double mean, inv_std;
    gb_torch_ppo_adv_stats(n, aux + 1, 4, c->normalize, &mean, &inv_std);
    gb_torch_ppo_terms sums;
    gb_torch_ppo_fused_rows(n, new_logp, value, aux, c, mean, inv_std,
                            n > 0 ? 1.0f / (float)n : 0.0f, g_logp, g_value, &sums);
    const double dn = n > 0 ? (double)n : 1.0;
    out->policy = sums.policy / dn;
    out->value = 0.5 * sums.value / dn;
    out->approx_kl = sums.approx_kl / dn;
    out->clip_fraction = sums.clip_fraction / dn;
    out->total = out->policy + c->value_coef * out->value - c->entropy_coef * out->entropy;
}

double gb_torch_sac_critic_fused(const float *q1, const float *q2, const float *y, const float *w,
                                 int64_t n, float *g1, float *g2, float *td_abs)
{
    if (n <= 0)
        return 0.0;
    const float scale = 2.0f / (float)n;
    double s1 = 0.0, s2 = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const float wi = w ? w[i] : 1.0f, e1 = q1[i] - y[i], e2 = q2[i] - y[i];
        s1 += (double)(wi * e1 * e1);
        s2 += (double)(wi * e2 * e2);
        g1[i] = wi * e1 * scale;
        g2[i] = wi * e2 * scale;
        if (td_abs)
            td_abs[i] = fabsf(e1);
    }
    return (s1 + s2) / (double)n;
}

double gb_torch_sac_actor_fused(const float *logp, const float *q1, const float *q2, int64_t n,
                                double alpha, float *g_logp, float *g_q1, float *g_q2,
                                double *logp_mean)
{
    if (n <= 0) {
        *logp_mean = 0.0;
        return 0.0;
    }
    const float scale = 1.0f / (float)n, a = (float)alpha;
    double s = 0.0, sl = 0.0;
    for (int64_t i = 0; i < n; i++) {
        /* d min(q1, q2) as libtorch's minimum: to the smaller, half each at a tie */
        const float to1 = q1[i] < q2[i] ? 1.0f : q1[i] > q2[i] ? 0.0f : 0.5f;
        const float m = q1[i] < q2[i] ? q1[i] : q2[i];
        s += (double)(a * logp[i] - m);
        sl += logp[i];
        g_logp[i] = a * scale;
        g_q1[i] = -to1 * scale;
        g_q2[i] = -(1.0f - to1) * scale;
    }
    *logp_mean = sl / (double)n;
    return s / (double)n;
}

static const float half_log_2pi = 0.91893853320467274178f; /* 0.5 log(2 pi) */

void gb_torch_categorical_terms(float *x, int64_t n, int A, const int64_t *a, float *logp,
                                float *ent)
{
    for (int64_t i = 0; i < n; i++, x += A) {
        float mx = x[0], sum = 0.0f, h = 0.0f;
        for (int j = 1; j < A; j++)
            mx = x[j] > mx ? x[j] : mx;
        for (int j = 0; j < A; j++)
            sum += expf(x[j] - mx);
        const float lse = mx + logf(sum);
        for (int j = 0; j < A; j++) {
            x[j] -= lse;
            h -= expf(x[j]) * x[j];
        }
        logp[i] = x[a[i]];
        ent[i] = h;
    }
}

void gb_torch_categorical_grads(float *x, int64_t n, int A, const int64_t *a, const float *ent,
                                const float *g_logp, float ge)
{
    for (int64_t i = 0; i < n; i++, x += A)
        for (int j = 0; j < A; j++) {
            const float p = expf(x[j]);
            x[j] = g_logp[i] * ((float)(j == a[i]) - p) - ge * p * (x[j] + ent[i]);
        }
}

void gb_torch_gaussian_terms(float *m, int64_t n, int A, const float *ls, const float *act,
                             float *logp, float *ent)
{
    float h = 0.0f;
    for (int j = 0; j < A; j++)
        h += 0.5f + half_log_2pi + ls[j];
    for (int64_t i = 0; i < n; i++, m += A, act += A) {
        float s = 0.0f;
        for (int j = 0; j < A; j++) {
            const float z = (act[j] - m[j]) * expf(-ls[j]);
            s += -0.5f * z * z - ls[j] - half_log_2pi;
            m[j] = z;
        }
        logp[i] = s;
        ent[i] = h;
    }
}

void gb_torch_gaussian_grads(float *z, int64_t n, int A, const float *ls, const float *g_logp,
                             float ge, float *dls)
{
    for (int64_t i = 0; i < n; i++, z += A)
        for (int j = 0; j < A; j++) {
            dls[j] += g_logp[i] * (z[j] * z[j] - 1.0f) + ge;
            z[j] = g_logp[i] * z[j] * expf(-ls[j]);
        }
}

void gb_torch_ppo_terms_add(gb_torch_ppo_terms *sum, const gb_torch_ppo_terms *t)
{
    sum->policy += t->policy;
    sum->value += t->value;
    sum->entropy += t->entropy;
    sum->approx_kl += t->approx_kl;
    sum->clip_fraction += t->clip_fraction;
}

void gb_torch_ppo_terms_means(const gb_torch_ppo_terms *sum, int64_t count, gb_torch_stats *st)
{
    if (count <= 0)
        return;
    st->policy_loss = sum->policy / (double)count;
    st->value_loss = sum->value / (double)count;
    st->entropy = sum->entropy / (double)count;
    st->approx_kl = sum->approx_kl / (double)count;
    st->clip_fraction = sum->clip_fraction / (double)count;
}
