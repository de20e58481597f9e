/* tests/workers/torch/test_dqn_kernels.c: DQN's forward and backward in gearbox's own C
 * (workers/torch/mlp_train.h, trainer.kernels: gearbox). The product against double loops over
 * shapes with every kind of tail and row strides (and the large ones, which go to libtorch's
 * BLAS once a learner exists); an MLP's forward and gradients (its input's
 * too) against a reference in double (relu, tanh, no activation, a layer without bias); and a
 * DQN learner on the kernels against one on libtorch's autograd from the same initial weights
 * and batches (odd widths, relu and tanh, double Q or not, importance weights or not, invalid
 * steps): the same loss, Q, |TD|, gradient norm and priorities, and the same parameters after
 * one step and after twenty (the target network's Polyak updates included). */
#include "test.h"
#include "workers/torch_test_util.h"
#include "workers/torch/mlp_infer.h"
#include "workers/torch/mlp_train.h"
#include "workers/torch/testing.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The three products (a b, a^T b, a b^T) against double loops, over the shapes (m, n, k) with
 * strides wider than the rows. */
static void check_gemm(const int (*shapes)[3], size_t count)
{
    for (size_t s = 0; s < count; s++)
        for (int form = 0; form < 3; form++) { /* a b, a^T b, a b^T */
            const int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
            const int arows = form == 1 ? k : m, acols = form == 1 ? m : k;
            const int brows = form == 2 ? n : k, bcols = form == 2 ? k : n;
            const int lda = acols + 3, ldb = bcols + 5, ldc = n + 2;
            float *a = malloc(sizeof(float) * (size_t)(arows * lda));
            float *b = malloc(sizeof(float) * (size_t)(brows * ldb));
            float *c = malloc(sizeof(float) * (size_t)(m * ldc));
            float *c_init = malloc(sizeof(float) * (size_t)(m * ldc));
            fill(a, arows * lda, 11u + (unsigned)s);
            fill(b, brows * ldb, 23u + (unsigned)s);
            fill(c_init, m * ldc, 37u);
            for (int add = 0; add <= 1; add++) {
                memcpy(c, c_init, sizeof(float) * (size_t)(m * ldc));
                void (*f)(int, int, int, const float *, int, const float *, int, float *, int,
                          int) = form == 0   ? gb_mlp_train_gemm
                                 : form == 1 ? gb_mlp_train_gemm_tn
                                             : gb_mlp_train_gemm_nt;
                f(m, n, k, a, lda, b, ldb, c, ldc, add);
                double worst = 0;
                for (int i = 0; i < m; i++)
                    for (int j = 0; j < ldc; j++) {
                        const float init = c_init[i * ldc + j];
                        if (j >= n) { /* beyond the product's columns: untouched */
                            CHECK(c[i * ldc + j] == init);
                            continue;
                        }
                        double ref = add ? init : 0.0;
                        for (int p = 0; p < k; p++)
                            ref += (double)(form == 1 ? a[p * lda + i] : a[i * lda + p]) *
                                   (form == 2 ? b[j * ldb + p] : b[p * ldb + j]);
                        worst = fmax(worst, fabs(c[i * ldc + j] - ref));
                    }
                CHECK_MSG(worst < 1e-5 * (k + 1), "gemm form %d %dx%dx%d add %d: max diff %.3g",
                          form, m, n, k, add, worst);
            }
            free(c_init);
            free(a);
            free(b);
            free(c);
        }
}

/* The tiles, over shapes with every kind of tail: rows past blocks of 12 (AVX-512's tiles) and
 * of 6 (AVX2's), columns past tiles of 32 (AVX-512), of 16, and single ones, over more than one
 * panel of the last columns (256 rows of b). Which tiles run is the cpu's: this machine's path
 * is the one checked. */
static void test_gemm(void)
{
    const int shapes[][3] = {{1, 1, 1},   {3, 17, 5},  {4, 16, 64}, {72, 64, 64},
                             {5, 33, 7},  {64, 4, 72}, {2, 64, 72}, {9, 2, 64},
                             {512, 2, 64}, {4, 64, 512}, {25, 80, 9}, {14, 63, 5},
                             {31, 112, 3}, {13, 32, 40}, {7, 19, 600}, {13, 40, 300}};
    check_gemm(shapes, sizeof shapes / sizeof shapes[0]);
}

/* Once a learner exists, the large products go to libtorch's BLAS (mlp_train.h): each form, with
 * and without adding, strided; the small ones still on the tiles. */
static void test_gemm_large(void)
{
    gb_error err = {0};
    gb_config cfg;
    CHECK(make_cfg(&cfg, "dqn", "") == 0);
    gb_torch_space sp = discrete_space();
    gb_torch_learner *l = NULL;
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 5, &l, &err));
    gb_torch_learner_destroy(l);
    const int shapes[][3] = {{64, 256, 256}, {256, 23, 256}, {130, 129, 140}, {512, 64, 64}};
    check_gemm(shapes, sizeof shapes / sizeof shapes[0]);
}

enum { ROWS = 7, IN = 5 };

/* The forward and gradients of layers l over x in double, with the loss sum(y * dy): the
 * weights' and biases', and x's into dx. */
static void reference(const gb_mlp_train_layer *l, int nl, const float *x, const float *dy,
                      double *out, double *dw[], double *db[], double *dx)
{
    double h[4][ROWS * 64], pre[4][ROWS * 64];
    for (int i = 0; i < nl; i++)
        for (int r = 0; r < ROWS; r++)
            for (int j = 0; j < l[i].out; j++) {
                double s = l[i].b ? l[i].b[j] : 0.0;
                for (int p = 0; p < l[i].in; p++)
                    s += (double)l[i].w[j * l[i].in + p] *
                         (i ? h[i - 1][r * l[i].in + p] : (double)x[r * IN + p]);
                pre[i][r * l[i].out + j] = s;
                h[i][r * l[i].out + j] = l[i].act == GB_MLP_ACT_RELU   ? fmax(s, 0.0)
                                         : l[i].act == GB_MLP_ACT_TANH ? tanh(s)
                                                                       : s;
            }
    memcpy(out, h[nl - 1], sizeof(double) * (size_t)(ROWS * l[nl - 1].out));
    double g[ROWS * 64], gp[ROWS * 64];
    for (int e = 0; e < ROWS * l[nl - 1].out; e++)
        g[e] = dy[e];
    for (int i = nl - 1; i >= 0; i--) {
        for (int e = 0; e < ROWS * l[i].out; e++)
            g[e] *= l[i].act == GB_MLP_ACT_RELU   ? (pre[i][e] > 0 ? 1.0 : 0.0)
                    : l[i].act == GB_MLP_ACT_TANH ? 1.0 - h[i][e] * h[i][e]
                                                  : 1.0;
        for (int j = 0; j < l[i].out; j++) {
            db[i][j] = 0;
            for (int p = 0; p < l[i].in; p++)
                dw[i][j * l[i].in + p] = 0;
            for (int r = 0; r < ROWS; r++) {
                db[i][j] += g[r * l[i].out + j];
                for (int p = 0; p < l[i].in; p++)
                    dw[i][j * l[i].in + p] += g[r * l[i].out + j] *
                                              (i ? h[i - 1][r * l[i].in + p] : x[r * IN + p]);
            }
        }
        for (int r = 0; r < ROWS; r++)
            for (int p = 0; p < l[i].in; p++) {
                double s = 0;
                for (int j = 0; j < l[i].out; j++)
                    s += g[r * l[i].out + j] * l[i].w[j * l[i].in + p];
                gp[r * l[i].in + p] = s;
            }
        memcpy(g, gp, sizeof g);
    }
    for (int e = 0; e < ROWS * IN; e++)
        dx[e] = g[e];
}

static void test_mlp(int act)
{
    const int widths[] = {IN, 19, 33, 3}; /* odd widths: every tail of the tiles */
    enum { NL = 3 };
    gb_mlp_train_layer l[NL];
    float w[NL][64 * 64], b[NL][64], dw[NL][64 * 64], db[NL][64];
    for (int i = 0; i < NL; i++) {
        fill(w[i], widths[i] * widths[i + 1], 100u + (unsigned)i);
        fill(b[i], widths[i + 1], 200u + (unsigned)i);
        for (int e = 0; e < 64 * 64; e++)
            dw[i][e] = 0.5f; /* the backward adds to what is there */
        for (int e = 0; e < 64; e++)
            db[i][e] = 0.5f;
        l[i] = (gb_mlp_train_layer){widths[i], widths[i + 1], i < NL - 1 ? act : GB_MLP_ACT_NONE,
                                    w[i], i == 1 ? NULL : b[i], dw[i], i == 1 ? NULL : db[i]};
    }
    float x[ROWS * IN], dy[ROWS * 3];
    fill(x, ROWS * IN, 7u);
    fill(dy, ROWS * 3, 8u);
    float *ws = malloc(sizeof(float) * gb_mlp_train_floats(l, NL, ROWS));
    const float *y = gb_mlp_train_forward(l, NL, x, ROWS, ws);
    double ref_y[ROWS * 3], rdw[NL][64 * 64], rdb[NL][64], rdx[ROWS * IN];
    double *pdw[NL] = {rdw[0], rdw[1], rdw[2]}, *pdb[NL] = {rdb[0], rdb[1], rdb[2]};
    reference(l, NL, x, dy, ref_y, pdw, pdb, rdx);
    double worst = 0;
    for (int e = 0; e < ROWS * 3; e++)
        worst = fmax(worst, fabs(y[e] - ref_y[e]));
    CHECK_MSG(worst < 1e-5, "act %d: forward max diff %.3g", act, worst);
    float dx[ROWS * IN];
    gb_mlp_train_backward(l, NL, x, ROWS, ws, dy, dx);
    worst = 0;
    for (int e = 0; e < ROWS * IN; e++)
        worst = fmax(worst, fabs(dx[e] - rdx[e]));
    for (int i = 0; i < NL; i++) {
        for (int e = 0; e < widths[i] * widths[i + 1]; e++)
            worst = fmax(worst, fabs(dw[i][e] - 0.5 - rdw[i][e]));
        for (int e = 0; e < widths[i + 1]; e++)
            if (i == 1)
                CHECK(db[i][e] == 0.5f); /* no bias: left alone */
            else
                worst = fmax(worst, fabs(db[i][e] - 0.5 - rdb[i][e]));
    }
    CHECK_MSG(worst < 2e-5, "act %d: gradient max diff %.3g", act, worst);
    free(ws);
}

static void test_mlp_relu(void) { test_mlp(GB_MLP_ACT_RELU); }
static void test_mlp_tanh(void) { test_mlp(GB_MLP_ACT_TANH); }

enum { B = 8, T = 8, OBS = 4 };

typedef struct batch {
    float obs[B * T * OBS], next[B * OBS], rew[B * T], w[B];
    int64_t act[B * T];
    uint8_t term[B * T], trunc[B * T], valid[B * T];
    gb_torch_batch b;
} batch;

static void make_batch(batch *x, unsigned seed, int weights)
{
    memset(x, 0, sizeof *x);
    fill(x->obs, B * T * OBS, seed);
    fill(x->next, B * OBS, seed + 1);
    fill(x->rew, B * T, seed + 2);
    fill(x->w, B, seed + 3);
    for (int i = 0; i < B; i++)
        x->w[i] = 0.5f + 0.5f * fabsf(x->w[i]);
    for (int i = 0; i < B * T; i++) {
        x->act[i] = (i * 7 + (int)seed) % 3;
        x->valid[i] = (i + (int)seed) % 11 != 0;
        x->term[i] = (i + (int)seed) % 13 == 0;
        x->trunc[i] = (i + (int)seed) % 17 == 0;
    }
    gb_torch_batch b = {B, T, x->obs, x->next, x->act, x->rew, x->term, x->trunc, x->valid,
                        NULL, weights ? x->w : NULL, 0, NULL, 0};
    x->b = b;
}

static void learners_agree(const char *activation, int double_q, int weights)
{
    gb_config cfg;
    char extra[64];
    snprintf(extra, sizeof extra, ", activation: %s", activation);
    CHECK(make_cfg(&cfg, "dqn", extra) == 0);
    cfg.policy.model.hidden.n = 2;
    cfg.policy.model.hidden.v[0] = 37; /* odd widths */
    cfg.policy.model.hidden.v[1] = 21;
    cfg.trainer.algorithm.dqn.n_step = 3;
    cfg.trainer.algorithm.dqn.double_q = double_q;
    cfg.trainer.algorithm.dqn.target_update = GB_TARGET_POLYAK;
    cfg.trainer.algorithm.dqn.tau = 0.05;
    gb_torch_space sp = discrete_space();
    gb_torch_learner *own, *ref;
    CHECK(kernels_learner_pair(&cfg, &sp, &own, &ref) == 0);
    if (!own) /* (and no ref) */
        return;
    static batch x;
    double after_one = 0, worst_stat = 0;
    for (int step = 0; step < 20; step++) {
        make_batch(&x, 1000u + (unsigned)step, weights);
        gb_torch_stats so, sr;
        CHECK(train_pair(own, ref, &x.b, &so, &sr, &worst_stat) == 0);
        const double stats[][2] = {{so.loss, sr.loss},
                                   {so.q_mean, sr.q_mean},
                                   {so.td_abs_mean, sr.td_abs_mean},
                                   {so.grad_norm, sr.grad_norm}};
        worst_stat = worst_rel(worst_stat, stats, sizeof stats / sizeof stats[0]);
        CHECK(so.samples == sr.samples && so.samples > 0 && so.gradient_steps == 1);
        if (step == 0)
            after_one = learners_max_diff(own, ref);
    }
    const double after_twenty = learners_max_diff(own, ref);
    fprintf(stderr, "  %s, double_q %d, weights %d: parameters after 1 step %.3g, after 20 %.3g;"
                    " stats and priorities %.3g relative\n",
            activation, double_q, weights, after_one, after_twenty, worst_stat);
    CHECK(after_one < 1e-5);  /* Adam's first step is about lr (0.01) for every weight */
    CHECK(after_twenty < 1e-4);
    CHECK(worst_stat < 1e-4);
    gb_torch_learner_destroy(own);
    gb_torch_learner_destroy(ref);
}

static void test_learners(void)
{
    learners_agree("relu", 1, 1);
    learners_agree("relu", 0, 0);
    learners_agree("tanh", 1, 0);
}

/* Where the kernels do not apply, the learner says so and libtorch's autograd trains. */
static void test_not_applied(void)
{
    gb_error err = {0};
    gb_config cfg;
    CHECK(make_cfg(&cfg, "dqn", ", layer_norm: true") == 0);
    gb_torch_space sp = discrete_space();
    gb_torch_learner *l = NULL;
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 5, &l, &err));
    if (l) {
        CHECK(strcmp(gb_torch_learner_kernels(l), "libtorch autograd") == 0);
        gb_torch_learner_destroy(l);
    }
}

int main(void)
{
    TEST_RUN(test_gemm);
    TEST_RUN(test_gemm_large);
    TEST_RUN(test_mlp_relu);
    TEST_RUN(test_mlp_tanh);
    TEST_RUN(test_learners);
    TEST_RUN(test_not_applied);
    return test_main_result();
}
