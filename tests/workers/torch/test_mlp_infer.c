/* tests/workers/torch/test_mlp_infer.c: gearbox's MLP inference kernels (workers/torch/mlp_infer.h)
 * against a forward in double: fp32 programs within float rounding, int8 programs within the
 * quantization error, the AVX-512 and AVX2 paths against the portable ones (where the cpu has
 * them),
 * batches that are not multiples of the kernels' 4-row tiles or 32-row blocks, widths that are
 * not multiples of 4 or 16, layers reading earlier layers (two torsos, two heads), missing
 * biases, rows with a NaN or an inf that spoil only their own outputs, and bad programs refused.
 *
 * Tolerances, max |got - double| over a program's outputs <= rel * max |double| + abs:
 *   fp32: rel 1e-5, abs 1e-5 (the tanh approximation is within 4e-7)
 *   int8: rel 0.05, abs 1e-3 (as test_torch_precision)
 *   fast against portable, int8: rel 0.01 (a last-bit difference before a layer can move one
 *   input by one quantization step); but an int8 layer whose inputs come from int8 layers or
 *   the input rows only: the AVX2 path's outputs equal the portable path's exactly (the same
 *   quantization, the same int32 sums, the same float epilogue) */
#include "test.h"
#include "workers/torch/mlp_infer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LAYERS 8
#define MAX_W 128
#define MAX_ROWS 300

typedef struct program {
    int n;
    gb_mlp_layer_spec s[MAX_LAYERS];
    float *w[MAX_LAYERS], *b[MAX_LAYERS];
} program;

static unsigned long long rng_state = 12345;

static float uniform(void) /* [-1, 1) */
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng_state >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
}

static void make(program *p, int n, const gb_mlp_layer_spec *s, int with_bias)
{
    p->n = n;
    for (int i = 0; i < n; i++) {
        p->s[i] = s[i];
        p->w[i] = malloc(sizeof(float) * (size_t)(s[i].in * s[i].out));
        p->b[i] = with_bias ? malloc(sizeof(float) * (size_t)s[i].out) : NULL;
        float gain = 1.5f / sqrtf((float)s[i].in);
        for (int k = 0; k < s[i].in * s[i].out; k++)
            p->w[i][k] = uniform() * gain;
        for (int k = 0; with_bias && k < s[i].out; k++)
            p->b[i][k] = uniform() * 0.2f;
    }
}

static void release(program *p)
{
    for (int i = 0; i < p->n; i++) {
        free(p->w[i]);
        free(p->b[i]);
    }
}

/* The program in double: outs[i][rows][out_i] for every layer. */
static void reference(const program *p, const float *x, int rows, double **outs)
{
    for (int i = 0; i < p->n; i++) {
        const gb_mlp_layer_spec *s = &p->s[i];
        for (int r = 0; r < rows; r++)
            for (int j = 0; j < s->out; j++) {
                double acc = p->b[i] ? p->b[i][j] : 0.0;
                for (int k = 0; k < s->in; k++) {
                    double v = s->src < 0 ? x[r * s->in + k] : outs[s->src][r * s->in + k];
                    acc += (double)p->w[i][j * s->in + k] * v;
                }
                if (s->act == GB_MLP_ACT_TANH)
                    acc = tanh(acc);
                else if (s->act == GB_MLP_ACT_RELU)
                    acc = acc > 0 ? acc : 0;
                outs[i][r * s->out + j] = acc;
            }
    }
}

static gb_mlp *build(const program *p, int path)
{
    char err[256] = "";
    gb_mlp *m = gb_mlp_create(p->s, p->n, err, sizeof err);
    CHECK_MSG(m != NULL, "%s", err);
    if (!m)
        return NULL;
    gb_mlp_path(m, path);
    for (int i = 0; i < p->n; i++)
        CHECK(gb_mlp_load(m, i, p->w[i], p->b[i]) == 0);
    return m;
}

/* Runs p over rows inputs on the best path, the AVX2 one and the portable one; checks every
 * layer's output against the double forward and the vector paths' against the portable's. */
static void check_program(const char *name, const program *p, int rows)
{
    const int in = p->s[0].in;
    float *x = malloc(sizeof(float) * (size_t)(rows * in));
    for (int k = 0; k < rows * in; k++)
        x[k] = uniform() * 3.0f;
    double *ref[MAX_LAYERS];
    float *fast[MAX_LAYERS], *port[MAX_LAYERS], *avx2[MAX_LAYERS];
    for (int i = 0; i < p->n; i++) {
        size_t n = (size_t)(rows * p->s[i].out);
        ref[i] = malloc(sizeof(double) * n);
        fast[i] = malloc(sizeof(float) * n);
        port[i] = malloc(sizeof(float) * n);
        avx2[i] = malloc(sizeof(float) * n);
    }
    reference(p, x, rows, ref);
    gb_mlp *mf = build(p, GB_MLP_PATH_BEST), *mp = build(p, GB_MLP_PATH_PORTABLE);
    gb_mlp *ma = build(p, GB_MLP_PATH_AVX2);
    if (mf && mp && ma) {
        gb_mlp_forward(mf, x, rows, fast);
        gb_mlp_forward(mp, x, rows, port);
        gb_mlp_forward(ma, x, rows, avx2);
    }
    int int8 = 0, exact[MAX_LAYERS] = {0};
    for (int i = 0; i < p->n; i++) {
        int8 |= p->s[i].int8;
        exact[i] = p->s[i].int8 && (p->s[i].src < 0 || exact[p->s[i].src]);
    }
    for (int i = 0; mf && mp && ma && i < p->n; i++) {
        double max_ref = 0, d_fast = 0, d_port = 0, d_paths = 0;
        int differ = 0;
        for (int k = 0; k < rows * p->s[i].out; k++) {
            differ += exact[i] && memcmp(&avx2[i][k], &port[i][k], sizeof(float)) != 0;
            max_ref = fmax(max_ref, fabs(ref[i][k]));
            d_fast = fmax(d_fast, fabs(fast[i][k] - ref[i][k]));
            d_port = fmax(d_port, fabs(port[i][k] - ref[i][k]));
            d_paths = fmax(d_paths, fabs((double)fast[i][k] - port[i][k]));
            d_paths = fmax(d_paths, fabs((double)avx2[i][k] - port[i][k]));
        }
        double tol = int8 ? 0.05 * max_ref + 1e-3 : 1e-5 * max_ref + 1e-5;
        double tol_paths = int8 ? 0.01 * max_ref + 1e-5 : 1e-5 * max_ref + 1e-6;
        printf("%-28s rows %3d layer %d: max |ref| %.3g, |fast - ref| %.3g, |portable - ref| "
               "%.3g, |fast - portable| %.3g (tolerance %.3g)\n",
               name, rows, i, max_ref, d_fast, d_port, d_paths, tol);
        CHECK(d_fast <= tol);
        CHECK(d_port <= tol);
        CHECK(d_paths <= tol_paths);
        CHECK_MSG(differ == 0, "%s layer %d: %d outputs of the AVX2 int8 path differ from the "
                  "portable path's", name, i, differ);
        if (int8 && p->s[i].int8)
            CHECK(d_port > 0); /* it did quantize */
    }
    gb_mlp_destroy(mf);
    gb_mlp_destroy(mp);
    gb_mlp_destroy(ma);
    for (int i = 0; i < p->n; i++) {
        free(ref[i]);
        free(fast[i]);
        free(port[i]);
        free(avx2[i]);
    }
    free(x);
}

/* The default PPO policy: actor and critic torsos [64, 64] tanh over 4 inputs, 2 logits and a
 * value; int8 where both widths are >= 16 (the 64 x 64 layers). */
static void test_actor_critic(int int8)
{
    const gb_mlp_layer_spec s[6] = {
        {-1, 4, 64, GB_MLP_ACT_TANH, 0}, {0, 64, 64, GB_MLP_ACT_TANH, int8},
        {1, 64, 2, GB_MLP_ACT_NONE, 0},  {-1, 4, 64, GB_MLP_ACT_TANH, 0},
        {3, 64, 64, GB_MLP_ACT_TANH, int8}, {4, 64, 1, GB_MLP_ACT_NONE, 0}};
    program p;
    make(&p, 6, s, 1);
    static const int rows[] = {256, 1, 7, 33, 300};
    for (int i = 0; i < 5; i++)
        check_program(int8 ? "actor-critic int8" : "actor-critic fp32", &p, rows[i]);
    release(&p);
}

/* Widths off the kernels' grid, relu, two heads on one torso, no biases. */
static void test_odd_widths(int int8)
{
    const gb_mlp_layer_spec s[5] = {{-1, 37, 50, GB_MLP_ACT_RELU, int8},
                                    {0, 50, 19, GB_MLP_ACT_TANH, int8},
                                    {1, 19, 3, GB_MLP_ACT_NONE, 0},
                                    {1, 19, 17, GB_MLP_ACT_RELU, int8},
                                    {3, 17, 5, GB_MLP_ACT_NONE, 0}};
    program p;
    make(&p, 5, s, 0);
    check_program(int8 ? "odd widths int8" : "odd widths fp32", &p, 45);
    check_program(int8 ? "odd widths int8" : "odd widths fp32", &p, 2);
    release(&p);
}

/* A row with a NaN and a row with an inf: their outputs are NaN (int8: the row cannot be
 * quantized; fp32: NaN propagates, and inf meets weights of both signs), every other row's are
 * those of the same batch without them. */
static void test_nonfinite(int int8, int path)
{
    const gb_mlp_layer_spec s[3] = {{-1, 20, 32, GB_MLP_ACT_TANH, int8},
                                    {0, 32, 32, GB_MLP_ACT_RELU, int8},
                                    {1, 32, 2, GB_MLP_ACT_NONE, 0}};
    program p;
    make(&p, 3, s, 1);
    enum { ROWS = 9 };
    float x[ROWS * 20], y_clean[ROWS * 2], y_bad[ROWS * 2];
    for (int k = 0; k < ROWS * 20; k++)
        x[k] = uniform();
    gb_mlp *m = build(&p, path);
    if (m) {
        float *outs[3] = {NULL, NULL, y_clean};
        gb_mlp_forward(m, x, ROWS, outs);
        x[3 * 20 + 7] = NAN;
        x[5 * 20 + 0] = INFINITY;
        outs[2] = y_bad;
        gb_mlp_forward(m, x, ROWS, outs);
        for (int r = 0; r < ROWS; r++)
            for (int j = 0; j < 2; j++) {
                if (r == 3 || (r == 5 && int8))
                    CHECK_MSG(isnan(y_bad[r * 2 + j]), "row %d out %d: %g", r, j,
                              y_bad[r * 2 + j]);
                else if (r != 5)
                    CHECK(y_bad[r * 2 + j] == y_clean[r * 2 + j]);
            }
        gb_mlp_destroy(m);
    }
    release(&p);
}

static void test_refusals(void)
{
    char err[256];
    const gb_mlp_layer_spec later[2] = {{1, 4, 8, 0, 0}, {0, 8, 2, 0, 0}};
    CHECK(gb_mlp_create(later, 2, err, sizeof err) == NULL);
    CHECK(strstr(err, "layer 0") != NULL);
    const gb_mlp_layer_spec width[2] = {{-1, 4, 8, 0, 0}, {0, 9, 2, 0, 0}};
    CHECK(gb_mlp_create(width, 2, err, sizeof err) == NULL);
    CHECK(strstr(err, "layer 1") != NULL);
    const gb_mlp_layer_spec inputs[2] = {{-1, 4, 8, 0, 0}, {-1, 5, 2, 0, 0}};
    CHECK(gb_mlp_create(inputs, 2, err, sizeof err) == NULL);
    const gb_mlp_layer_spec act[1] = {{-1, 4, 8, 7, 0}};
    CHECK(gb_mlp_create(act, 1, err, sizeof err) == NULL);
    CHECK(gb_mlp_create(act, 0, err, sizeof err) == NULL);
    const gb_mlp_layer_spec ok[1] = {{-1, 4, 8, 0, 0}};
    gb_mlp *m = gb_mlp_create(ok, 1, err, sizeof err);
    CHECK(m != NULL);
    if (m) {
        float w[32] = {0};
        CHECK(gb_mlp_load(m, 1, w, NULL) == -1);
        CHECK(gb_mlp_load(m, -1, w, NULL) == -1);
    }
    gb_mlp_destroy(m);
}

int main(void)
{
    printf("AVX-512 VNNI paths: %s; fp32 and int8 on vectors (AVX2 or AVX-512): %s\n",
           gb_mlp_int8_vnni() ? "yes" : "no", gb_mlp_fast() ? "yes" : "no");
    for (int int8 = 0; int8 < 2; int8++) {
        test_actor_critic(int8);
        test_odd_widths(int8);
        test_nonfinite(int8, GB_MLP_PATH_BEST);
        test_nonfinite(int8, GB_MLP_PATH_AVX2);
        test_nonfinite(int8, GB_MLP_PATH_PORTABLE);
    }
    test_refusals();
    return test_main_result();
}
