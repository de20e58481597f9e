/* tests/workers/torch/test_torch_losses.c: the loss functions the algorithms use (squashed-Gaussian
 * log-probability, PPO, DQN, SAC) against independent double-precision C implementations and
 * values worked out by hand. */
#include "test.h"
#include "workers/torch/targets.h"
#include "workers/torch/testing.h"
#include "workers/torch_test_util.h"

#include <math.h>
#include <string.h>

static double ref_squashed_logp(const float *mu, const float *ls, const float *u, int A,
                                const float *scale)
{
    double lp = 0;
    for (int i = 0; i < A; i++) {
        double sd = exp(ls[i]), z = (u[i] - mu[i]) / sd;
        lp += -0.5 * z * z - ls[i] - 0.5 * log(2 * M_PI);
        double t = tanh(u[i]);
        lp -= log(1.0 - t * t);
        if (scale)
            lp -= log(scale[i]);
    }
    return lp;
}

static void test_squashed_gaussian(void)
{
    gb_error err = {0};
    const float mu[6] = {0.1f, -0.3f, 1.2f, 0.0f, -2.0f, 0.5f};
    const float ls[6] = {-0.5f, 0.2f, -1.0f, 0.0f, 0.3f, -2.0f};
    const float u[6] = {0.4f, -1.1f, 2.0f, 0.0f, -3.0f, 0.45f};
    const float scale[2] = {2.0f, 0.5f};
    float out[3];
    CHECK_OK(gb_torch_squashed_gaussian_logp(mu, ls, u, 3, 2, NULL, out, &err));
    for (int i = 0; i < 3; i++)
        CHECK_NEAR(out[i], ref_squashed_logp(mu + 2 * i, ls + 2 * i, u + 2 * i, 2, NULL), 1e-4);
    CHECK_OK(gb_torch_squashed_gaussian_logp(mu, ls, u, 3, 2, scale, out, &err));
    for (int i = 0; i < 3; i++)
        CHECK_NEAR(out[i], ref_squashed_logp(mu + 2 * i, ls + 2 * i, u + 2 * i, 2, scale), 1e-4);
    /* by hand: mu = 0, log_std = 0, u = 0: -0.5 log(2 pi), no correction */
    float z = 0.0f, o1;
    CHECK_OK(gb_torch_squashed_gaussian_logp(&z, &z, &z, 1, 1, NULL, &o1, &err));
    CHECK_NEAR(o1, -0.5 * log(2 * M_PI), 1e-6);
    /* large |u|: naive float log(1 - tanh^2) is -inf; the stable form gives
     * log 4 - 2|u| - 2 log(1 + e^-2|u|) */
    float big = 20.0f, m0 = 20.0f;
    CHECK_OK(gb_torch_squashed_gaussian_logp(&m0, &z, &big, 1, 1, NULL, &o1, &err));
    double corr = log(4.0) - 40.0 - 2 * log1p(exp(-40.0));
    CHECK(isfinite(o1));
    CHECK_NEAR(o1, -0.5 * log(2 * M_PI) - corr, 1e-3);
}

static void test_ppo_loss(void)
{
    gb_error err = {0};
    enum { N = 5 };
    const float nl[N] = {-0.5f, -1.0f, -0.2f, -2.0f, -0.7f};
    const float ol[N] = {-0.6f, -0.8f, -0.9f, -1.0f, -0.7f};
    const float adv[N] = {1.0f, -2.0f, 0.5f, 3.0f, -1.0f};
    const float v[N] = {0.5f, 2.0f, -1.0f, 0.0f, 3.0f};
    const float ov[N] = {0.4f, 1.0f, -0.9f, 0.5f, 2.0f};
    const float ret[N] = {1.0f, 0.0f, 0.0f, 1.0f, 2.5f};
    const float ent[N] = {0.6f, 0.5f, 0.4f, 0.3f, 0.2f};
    const double c = 0.2, vc = 0.5, ec = 0.01;
    for (int clipv = 0; clipv <= 1; clipv++) {
        double pol = 0, val = 0, em = 0;
        for (int i = 0; i < N; i++) {
            double r = exp((double)nl[i] - ol[i]);
            double rc = r < 1 - c ? 1 - c : r > 1 + c ? 1 + c : r;
            double a = -adv[i] * r, b = -adv[i] * rc;
            pol += (a > b ? a : b) / N;
            double se = (v[i] - ret[i]) * (v[i] - ret[i]);
            if (clipv) {
                double d = v[i] - ov[i];
                d = d < -c ? -c : d > c ? c : d;
                double sc = (ov[i] + d - ret[i]) * (ov[i] + d - ret[i]);
                se = se > sc ? se : sc;
            }
            val += 0.5 * se / N;
            em += ent[i] / N;
        }
        double out[3];
        CHECK_OK(gb_torch_ppo_loss(nl, ol, adv, v, ov, ret, ent, N, c, clipv, vc, ec, out, &err));
        CHECK_NEAR(out[0], pol, 1e-5);
        CHECK_NEAR(out[1], val, 1e-5);
        CHECK_NEAR(out[2], pol + vc * val - ec * em, 1e-5);
    }
    /* by hand, one sample: ratio e^0.5 = 1.6487 > 1.2 with A = 2: clipped, -2.4 */
    float a1 = -0.5f, b1 = -1.0f, A1 = 2.0f, zero = 0.0f;
    double out[3];
    CHECK_OK(gb_torch_ppo_loss(&a1, &b1, &A1, &zero, &zero, &zero, &zero, 1, 0.2, 0, 0.5, 0.0,
                               out, &err));
    CHECK_NEAR(out[0], -2.4, 1e-6);
}

static void test_dqn_loss(void)
{
    gb_error err = {0};
    const float q[4] = {1.0f, 2.0f, -1.0f, 0.0f};
    const float y[4] = {1.5f, 0.0f, 2.0f, 0.1f};
    const float w[4] = {1.0f, 0.5f, 0.25f, 2.0f};
    float td[4];
    double loss;
    /* huber 1: |d| = 0.5, 2, 3, 0.1 -> 0.125, 1.5, 2.5, 0.005; weighted mean */
    CHECK_OK(gb_torch_dqn_loss(q, y, w, 4, 1.0, &loss, td, &err));
    CHECK_NEAR(loss, (0.125 * 1 + 1.5 * 0.5 + 2.5 * 0.25 + 0.005 * 2) / 4, 1e-6);
    CHECK_NEAR(td[1], -2.0, 1e-6);
    CHECK_NEAR(td[2], 3.0, 1e-6);
    /* delta 0: squared error / 2, no weights */
    CHECK_OK(gb_torch_dqn_loss(q, y, NULL, 4, 0.0, &loss, NULL, &err));
    CHECK_NEAR(loss, (0.125 + 2.0 + 4.5 + 0.005) / 4, 1e-6);
}

/* The CPU learner's one-pass loss (gb_torch_huber_td) against the libtorch one: the same loss,
 * |TD|, and a gradient that matches central differences of the libtorch loss; and the chunk
 * priorities made from |TD| (R2D2's 0.9 max + 0.1 mean over a chunk's valid steps). */
static void test_huber_td(void)
{
    gb_error err = {0};
    enum { N = 64 };
    float q[N], y[N], w[N], grad[N], td[N];
    fill(q, N, 11);
    fill(y, N, 12);
    fill(w, N, 13);
    for (int i = 0; i < N; i++) {
        y[i] *= 3.0f; /* both sides of delta = 1 */
        w[i] = 0.5f + 0.5f * w[i];
    }
    for (int pass = 0; pass < 3; pass++) {
        const double delta = pass == 2 ? 0.0 : 1.0;
        const float *wp = pass == 1 ? NULL : w;
        double ref = 0, up, down;
        CHECK_OK(gb_torch_dqn_loss(q, y, wp, N, delta, &ref, NULL, &err));
        double loss = gb_torch_huber_td(q, y, wp, N, delta, grad, td);
        CHECK_NEAR(loss, ref, 1e-6);
        int grads_ok = 1, tds_ok = 1;
        for (int i = 0; i < N; i++) {
            tds_ok &= fabsf(td[i] - fabsf(y[i] - q[i])) == 0.0f;
            const float keep = q[i], h = 1e-3f;
            q[i] = keep + h;
            gb_torch_dqn_loss(q, y, wp, N, delta, &up, NULL, &err);
            q[i] = keep - h;
            gb_torch_dqn_loss(q, y, wp, N, delta, &down, NULL, &err);
            q[i] = keep;
            double fd = (up - down) / (2.0 * h);
            if (fabs(fd - grad[i]) > 2e-4) {
                grads_ok = 0;
                fprintf(stderr, "  pass %d, q[%d]: gradient %g, central difference %g\n", pass, i,
                        grad[i], fd);
            }
        }
        CHECK(grads_ok);
        CHECK(tds_ok);
    }
    /* chunk priorities: 3 chunks of 4 steps; chunk 1 has no valid step, chunk 2 two */
    const int64_t steps[] = {0, 1, 2, 3, 9, 10};
    const float tda[] = {1.0f, 3.0f, 0.0f, 2.0f, 0.5f, 0.25f};
    float prio[3];
    gb_torch_chunk_priorities(3, 4, steps, tda, 6, prio);
    CHECK_NEAR(prio[0], 0.9 * 3.0 + 0.1 * 1.5 + 1e-6, 1e-6);
    CHECK_NEAR(prio[1], 1e-6, 1e-9);
    CHECK_NEAR(prio[2], 0.9 * 0.5 + 0.1 * 0.375 + 1e-6, 1e-6);
}

/* The CPU learner's one-pass PPO loss (gb_torch_ppo_fused) against the libtorch one: policy,
 * value and total losses, and gradients in new_logp and value matching central differences of
 * the libtorch total, with and without value clipping; ratios inside and outside the clip range
 * and values inside and outside theirs; normalisation as (a - mean) / (unbiased std + 1e-8). */
static void test_ppo_fused(void)
{
    gb_error err = {0};
    enum { N = 48 };
    float nl[N], ol[N], adv[N], v[N], ov[N], ret[N], ent[N], aux[4 * N], gl[N], gv[N];
    fill(nl, N, 21);
    fill(ol, N, 22);
    fill(adv, N, 23);
    fill(v, N, 24);
    fill(ov, N, 25);
    fill(ret, N, 26);
    fill(ent, N, 27);
    for (int i = 0; i < N; i++) {
        nl[i] = ol[i] + 0.6f * nl[i]; /* ratios from 0.55 to 1.8: both sides of the clip */
        ov[i] = v[i] + 0.5f * ov[i];  /* value moves of up to 0.5: both sides of its clip */
        ent[i] = 0.6f + 0.1f * ent[i];
        aux[4 * i] = ol[i];
        aux[4 * i + 1] = adv[i];
        aux[4 * i + 2] = ov[i];
        aux[4 * i + 3] = ret[i];
    }
    double ent_mean = 0;
    for (int i = 0; i < N; i++)
        ent_mean += ent[i] / N;
    for (int clip_value = 0; clip_value < 2; clip_value++) {
        gb_torch_ppo_coefs c = {0.2, 0.5, 0.01, clip_value, 0};
        gb_torch_ppo_terms t = {.entropy = ent_mean};
        gb_torch_ppo_fused(N, nl, v, aux, &c, gl, gv, &t);
        double ref[3];
        CHECK_OK(gb_torch_ppo_loss(nl, ol, adv, v, ov, ret, ent, N, 0.2, clip_value, 0.5, 0.01,
                                   ref, &err));
        CHECK_NEAR(t.policy, ref[0], 1e-6);
        CHECK_NEAR(t.value, ref[1], 1e-6);
        CHECK_NEAR(t.total, ref[2], 1e-6);
        int ok = 1;
        for (int i = 0; i < N; i++)
            for (int which = 0; which < 2; which++) {
                float *x = which ? v : nl, keep = x[i], h = 1e-3f;
                double up[3], down[3];
                x[i] = keep + h;
                gb_torch_ppo_loss(nl, ol, adv, v, ov, ret, ent, N, 0.2, clip_value, 0.5, 0.01, up,
                                  &err);
                x[i] = keep - h;
                gb_torch_ppo_loss(nl, ol, adv, v, ov, ret, ent, N, 0.2, clip_value, 0.5, 0.01,
                                  down, &err);
                x[i] = keep;
                double fd = (up[2] - down[2]) / (2.0 * h), g = which ? gv[i] : gl[i];
                /* a difference across a clip boundary is no derivative: skip those */
                double r = exp((double)nl[i] - ol[i]), dv = (double)v[i] - ov[i];
                if (which == 0 && (fabs(r - 0.8) < 0.01 || fabs(r - 1.2) < 0.01))
                    continue;
                if (which == 1 && clip_value && fabs(fabs(dv) - 0.2) < 0.01)
                    continue;
                if (fabs(fd - g) > 2e-4) {
                    ok = 0;
                    fprintf(stderr, "  clip_value %d, %s[%d]: gradient %g, difference %g\n",
                            clip_value, which ? "value" : "logp", i, g, fd);
                }
            }
        CHECK(ok);
        CHECK(t.clip_fraction > 0.1 && t.clip_fraction < 0.9); /* both sides were tried */
    }
    /* normalize: the same as the loss of pre-normalised advantages */
    double mean = 0, ss = 0;
    for (int i = 0; i < N; i++)
        mean += adv[i] / N;
    for (int i = 0; i < N; i++)
        ss += (adv[i] - mean) * (adv[i] - mean);
    float auxn[4 * N], gl2[N], gv2[N];
    for (int i = 0; i < 4 * N; i++)
        auxn[i] = aux[i];
    for (int i = 0; i < N; i++)
        auxn[4 * i + 1] = (float)((adv[i] - mean) / (sqrt(ss / (N - 1)) + 1e-8));
    gb_torch_ppo_coefs cn = {0.2, 0.5, 0.0, 0, 1}, c0 = {0.2, 0.5, 0.0, 0, 0};
    gb_torch_ppo_terms tn = {0}, t0 = {0};
    gb_torch_ppo_fused(N, nl, v, aux, &cn, gl, gv, &tn);
    gb_torch_ppo_fused(N, nl, v, auxn, &c0, gl2, gv2, &t0);
    CHECK_NEAR(tn.policy, t0.policy, 1e-6);
    int same = 1;
    for (int i = 0; i < N; i++)
        same &= fabsf(gl[i] - gl2[i]) <= 1e-6f && gv[i] == gv2[i];
    CHECK(same);
}

/* The CPU learner's one-pass SAC losses (gb_torch_sac_critic_fused, gb_torch_sac_actor_fused)
 * against the libtorch ones (gb_torch_sac_loss): the values, and gradients that match central
 * differences of the libtorch losses in q1, q2 (critic) and logp, q1_pi, q2_pi (actor), with a
 * tie of q1_pi and q2_pi, where libtorch's min passes half the gradient to each. */
static void test_sac_fused(void)
{
    gb_error err = {0};
    enum { N = 40 };
    float q1[N], q2[N], q1t[N], q2t[N], r[N], disc[N], ln[N], q1p[N], q2p[N], lp[N], w[N];
    fill(q1, N, 31);
    fill(q2, N, 32);
    fill(q1t, N, 33);
    fill(q2t, N, 34);
    fill(r, N, 35);
    fill(disc, N, 36);
    fill(ln, N, 37);
    fill(q1p, N, 38);
    fill(q2p, N, 39);
    fill(lp, N, 40);
    fill(w, N, 41);
    for (int i = 0; i < N; i++) {
        w[i] = 0.5f + 0.5f * w[i];
        disc[i] = 0.5f + 0.4f * disc[i];
    }
    q2p[3] = q1p[3]; /* a tie */
    const double log_alpha = -1.2, alpha = exp(log_alpha), te = -1.0;
    double ref[4];
    CHECK_OK(gb_torch_sac_loss(q1, q2, q1t, q2t, r, disc, ln, q1p, q2p, lp, w, N, log_alpha, te,
                               ref, &err));
    /* y as the libtorch loss makes it */
    float y[N];
    for (int i = 0; i < N; i++)
        y[i] = r[i] + disc[i] * ((q1t[i] < q2t[i] ? q1t[i] : q2t[i]) - (float)alpha * ln[i]);
    float g1[N], g2[N], td[N], gl[N], ga[N], gb[N];
    double critic = gb_torch_sac_critic_fused(q1, q2, y, w, N, g1, g2, td);
    double lp_mean;
    double actor = gb_torch_sac_actor_fused(lp, q1p, q2p, N, alpha, gl, ga, gb, &lp_mean);
    CHECK_NEAR(critic, ref[0], 1e-5);
    CHECK_NEAR(actor, ref[1], 1e-6);
    double m = 0;
    for (int i = 0; i < N; i++)
        m += lp[i] / N;
    CHECK_NEAR(lp_mean, m, 1e-6);
    CHECK_NEAR(ga[3], -0.5 / N, 1e-9);
    CHECK_NEAR(gb[3], -0.5 / N, 1e-9);
    /* central differences of the libtorch losses */
    float *vars[5] = {q1, q2, lp, q1p, q2p};
    const float *grads[5] = {g1, g2, gl, ga, gb};
    const int which[5] = {0, 0, 1, 1, 1}; /* critic or actor */
    int ok = 1;
    for (int v = 0; v < 5; v++)
        for (int i = 0; i < N; i++) {
            if (v >= 3 && i == 3)
                continue; /* no derivative at the tie */
            float keep = vars[v][i], h = 1e-3f;
            double up[4], down[4];
            vars[v][i] = keep + h;
            gb_torch_sac_loss(q1, q2, q1t, q2t, r, disc, ln, q1p, q2p, lp, w, N, log_alpha, te,
                              up, &err);
            vars[v][i] = keep - h;
            gb_torch_sac_loss(q1, q2, q1t, q2t, r, disc, ln, q1p, q2p, lp, w, N, log_alpha, te,
                              down, &err);
            vars[v][i] = keep;
            double fd = (up[which[v]] - down[which[v]]) / (2.0 * h);
            if (fabs(fd - grads[v][i]) > 2e-4) {
                ok = 0;
                fprintf(stderr, "  variable %d, [%d]: gradient %g, difference %g\n", v, i,
                        grads[v][i], fd);
            }
        }
    CHECK(ok);
}

static void test_sac_loss(void)
{
    gb_error err = {0};
    enum { N = 3 };
    const float q1[N] = {1.0f, 2.0f, 0.5f}, q2[N] = {1.2f, 1.5f, 0.0f};
    const float q1t[N] = {3.0f, 1.0f, 2.0f}, q2t[N] = {2.5f, 1.5f, 2.2f};
    const float r[N] = {0.1f, -1.0f, 0.0f}, disc[N] = {0.99f, 0.0f, 0.99f};
    const float lpn[N] = {-1.0f, 0.5f, 2.0f};
    const float q1p[N] = {1.0f, 0.0f, 3.0f}, q2p[N] = {0.5f, 0.2f, 4.0f};
    const float lpp[N] = {-0.5f, 1.0f, 0.0f};
    const float w[N] = {1.0f, 2.0f, 0.5f};
    const double log_alpha = log(0.2), te = -1.0, alpha = 0.2;
    double crit = 0, act = 0, tmp = 0, ym = 0;
    for (int i = 0; i < N; i++) {
        double mt = q1t[i] < q2t[i] ? q1t[i] : q2t[i];
        double y = r[i] + disc[i] * (mt - alpha * lpn[i]);
        ym += y / N;
        crit += w[i] * ((q1[i] - y) * (q1[i] - y) + (q2[i] - y) * (q2[i] - y)) / N;
        double mp = q1p[i] < q2p[i] ? q1p[i] : q2p[i];
        act += (alpha * lpp[i] - mp) / N;
        tmp += -log_alpha * (lpp[i] + te) / N;
    }
    double out[4];
    CHECK_OK(gb_torch_sac_loss(q1, q2, q1t, q2t, r, disc, lpn, q1p, q2p, lpp, w, N, log_alpha, te,
                               out, &err));
    CHECK_NEAR(out[0], crit, 1e-5);
    CHECK_NEAR(out[1], act, 1e-5);
    CHECK_NEAR(out[2], tmp, 1e-5);
    CHECK_NEAR(out[3], ym, 1e-5);
    /* by hand, one sample, alpha 1: y = 1 + 0.5 (min(3, 4) - 0) = 2.5;
     * critic (1 - 2.5)^2 + (2 - 2.5)^2 = 2.5; actor 1 * 1 - min(0, 1) = 1 */
    const float one = 1, two = 2, three = 3, four = 4, half = 0.5f, zero = 0;
    CHECK_OK(gb_torch_sac_loss(&one, &two, &three, &four, &one, &half, &zero, &zero, &one, &one,
                               NULL, 1, 0.0, -1.0, out, &err));
    CHECK_NEAR(out[0], 2.5, 1e-6);
    CHECK_NEAR(out[1], 1.0, 1e-6);
    CHECK_NEAR(out[3], 2.5, 1e-6);
}

int main(void)
{
    TEST_RUN(test_squashed_gaussian);
    TEST_RUN(test_ppo_loss);
    TEST_RUN(test_dqn_loss);
    TEST_RUN(test_huber_td);
    TEST_RUN(test_ppo_fused);
    TEST_RUN(test_sac_fused);
    TEST_RUN(test_sac_loss);
    return test_main_result();
}
