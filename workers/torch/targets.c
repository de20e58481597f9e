/* workers/torch/targets.c: return targets computed on the CPU in plain C: GAE(lambda), n-step
 * returns inside trajectory chunks, DQN's epsilon schedule. The algorithms call these. */
#include "workers/torch/targets.h"

#include <math.h>
#include <stddef.h>

void gb_torch_gae(int64_t B, int64_t T, const float *reward, const float *value,
                  const uint8_t *terminated, const uint8_t *truncated, const uint8_t *valid,
                  double gamma, double lambda, float *adv, float *ret)
{
    for (int64_t b = 0; b < B; b++) {
        const float *r = reward + b * T;
        const float *v = value + b * (T + 1); /* v[t] = V(obs[t]), v[T] = V(obs after the chunk) */
        const uint8_t *term = terminated + b * T, *trunc = truncated + b * T;
        const uint8_t *ok = valid ? valid + b * T : NULL;
        float *a = adv + b * T, *g = ret + b * T;
        double next_adv = 0.0; /* advantage of step t+1, 0 beyond an episode end */
        for (int64_t t = T - 1; t >= 0; t--) {
            if (ok && !ok[t]) {
                /* reset step: no transition; the step before it ended its episode */
                a[t] = 0.0f;
                g[t] = v[t];
                next_adv = 0.0;
                continue;
            }
            double boot = term[t] ? 0.0 : gamma * v[t + 1]; /* truncated still bootstraps */
            double delta = r[t] + boot - v[t];
            double cont = (term[t] || trunc[t]) ? 0.0 : gamma * lambda;
            next_adv = delta + cont * next_adv;
            a[t] = (float)next_adv;
            g[t] = (float)(next_adv + v[t]);
        }
    }
}

void gb_torch_vtrace(int64_t B, int64_t T, const float *reward, const float *value,
                     const uint8_t *terminated, const uint8_t *truncated, const uint8_t *valid,
                     const float *log_rho, double gamma, double lambda, double rho_bar,
                     double c_bar, float *vs, float *adv)
{
    for (int64_t b = 0; b < B; b++) {
        const float *r = reward + b * T, *lr = log_rho + b * T;
        const float *v = value + b * (T + 1);
        const uint8_t *term = terminated + b * T, *trunc = truncated + b * T;
        const uint8_t *ok = valid ? valid + b * T : NULL;
        float *out_vs = vs + b * T, *a = adv + b * T;
        double next_diff = 0.0; /* vs_{t+1} - V(x_{t+1}); 0 past an episode or chunk end */
        for (int64_t t = T - 1; t >= 0; t--) {
            if (ok && !ok[t]) {
                out_vs[t] = v[t];
                a[t] = 0.0f;
                next_diff = 0.0;
                continue;
            }
            double ratio = exp((double)lr[t]);
            double rho = ratio < rho_bar ? ratio : rho_bar;
            double c = lambda * (ratio < c_bar ? ratio : c_bar);
            int ended = term[t] || trunc[t];
            double next_v = term[t] ? 0.0 : (double)v[t + 1];
            double next_vs = term[t] ? 0.0 : next_v + (ended ? 0.0 : next_diff);
            double delta = rho * (r[t] + gamma * next_v - v[t]);
            double diff = delta + (ended ? 0.0 : gamma * c * next_diff);
            out_vs[t] = (float)(v[t] + diff);
            a[t] = (float)(rho * (r[t] + gamma * next_vs - v[t]));
            next_diff = diff;
        }
    }
}

void gb_torch_nstep(int64_t B, int64_t T, int64_t n, double gamma, const float *reward,
                    const uint8_t *terminated, const uint8_t *truncated, const uint8_t *valid,
                    float *ret, float *disc, int64_t *boot)
{
    if (n < 1)
        n = 1;
    for (int64_t b = 0; b < B; b++) {
        const float *r = reward + b * T;
        const uint8_t *term = terminated + b * T, *trunc = truncated + b * T;
        const uint8_t *ok = valid ? valid + b * T : NULL;
        for (int64_t t = 0; t < T; t++) {
            int64_t i = b * T + t;
            if (ok && !ok[t]) {
                ret[i] = 0.0f;
                disc[i] = 0.0f;
                boot[i] = t;
                continue;
            }
            double g = 0.0, pw = 1.0;
            int64_t m = 0;
            int ended_terminal = 0;
            while (m < n && t + m < T) {
                int64_t k = t + m;
                if (m > 0 && ok && !ok[k])
                    break; /* cannot happen after a non-final step; defensive */
                g += pw * r[k];
                pw *= gamma;
                m++;
                if (term[k]) {
                    ended_terminal = 1;
                    break;
                }
                if (trunc[k])
                    break;
            }
            ret[i] = (float)g;
            disc[i] = ended_terminal ? 0.0f : (float)pw;
            boot[i] = t + m;
        }
    }
}

int64_t gb_torch_valid_rows(int64_t B, int64_t T, const uint8_t *valid, const int64_t *boot,
                            int64_t *step, int64_t *row, int64_t *brow)
{
    int64_t n = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++) {
            const int64_t i = b * T + t;
            if (valid && !valid[i])
                continue;
            step[n] = i;
            row[n] = b * (T + 1) + t;
            if (boot)
                brow[n] = b * (T + 1) + boot[i];
            n++;
        }
    return n;
}
