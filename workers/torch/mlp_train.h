/* workers/torch/mlp_train.h: a plain MLP's forward and backward in C (Linear layers in a chain,
 * each followed by tanh, relu or nothing), for a CPU learner's step on a small network: DQN's,
 * PPO's and SAC's (dqn.cpp, ppo_kernels.cpp, sac_kernels.cpp). At the sizes these learners
 * train (tens to hundreds of rows, 64-unit layers) libtorch's per-operation dispatch and autograd
 * bookkeeping, not the arithmetic, take much of the step's time: on the AMD EPYC machine one
 * Linear's forward and backward at 72 x 64 x 64 costs 81-95 us against about 20 us of
 * multiply-adds. Here a layer is a product in register tiles (12 x 32 with AVX-512, 6 x 16
 * with AVX2 and FMA, the same code on SSE2 otherwise), its bias and activation: on one core of
 * that machine (AVX2) 72-76 GFLOP/s at 512 x 64 x 64 (OpenBLAS's sgemm 55-60 in the same
 * program), 57-59 at 64 x 256 x 256 (65-67); on the Intel Xeon with AVX-512 146-155 at both
 * (OpenBLAS's SkylakeX kernels 110-125; 85 in 6 x 16 tiles); a head's few outputs are dot
 * products of rows, a weight's gradient is taken in whichever orientation has the wider
 * columns, and the columns past the last whole tile go through one padded with zeros. A layer's
 * bias and relu are one vectorised pass over its rows. Large products between layers 128 or more
 * wide go to libtorch's BLAS once a learner exists (gb_mlp_train_set_large): there it is the
 * faster.
 * The weights stay where libtorch keeps them (torch Linear's [out][in] row-major weight and its
 * bias), and the gradients are added into libtorch's gradient tensors (FlatAdam's flat view):
 * the optimiser, the gradient clipping and the data-parallel all-reduce run as before.
 * tanh is gearbox's (fast_tanh.h), as the built-in networks' FastTanh.
 * defines: gb_mlp_train_layer, gb_mlp_train_floats, gb_mlp_train_forward, gb_mlp_train_backward,
 *          gb_mlp_train_gemm, gb_mlp_train_gemm_tn, gb_mlp_train_gemm_nt,
 *          gb_mlp_train_set_large, gb_mlp_train_tiles_only */
#ifndef GB_WORKERS_TORCH_MLP_TRAIN_H
#define GB_WORKERS_TORCH_MLP_TRAIN_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gb_mlp_train_layer {
    int in, out;     /* features in (the previous layer's out, or the input's) and out */
    int act;         /* GB_MLP_ACT_NONE, _TANH or _RELU (mlp_infer.h), after the bias */
    const float *w;  /* [out][in], row-major */
    const float *b;  /* [out], or NULL for none */
    float *dw, *db;  /* the backward adds the gradients here ([out][in], [out]); NULL: skipped */
} gb_mlp_train_layer;

/* Floats of workspace a forward and backward of n rows through the nl layers needs. */
size_t gb_mlp_train_floats(const gb_mlp_train_layer *l, int nl, int n);

/* The forward of n rows x ([n][l[0].in], row-major) into ws (gb_mlp_train_floats of them).
 * Returns the last layer's output, [n][l[nl-1].out] inside ws; every layer's output stays in ws
 * for gb_mlp_train_backward. */
float *gb_mlp_train_forward(const gb_mlp_train_layer *l, int nl, const float *x, int n, float *ws);

/* The backward of the forward just run into ws (the same l, x and n): dy ([n][l[nl-1].out]) is
 * the loss's gradient with respect to the last layer's output, overwritten. Adds each layer's
 * weight and bias gradients into its dw and db, and writes the gradient with respect to x into
 * dx ([n][l[0].in]) unless it is NULL. */
void gb_mlp_train_backward(const gb_mlp_train_layer *l, int nl, const float *x, int n, float *ws,
                           float *dy, float *dx);

/* c ([m][n], row ldc) = a ([m][k], row lda) times b ([k][n], row ldb), or added to c when add.
 * _tn: a transposed (a is [k][m], row lda); _nt: b transposed (b is [n][k], row ldb: dot
 * products of rows, for few columns). The products the layers use, exposed for the tests. */
void gb_mlp_train_gemm(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                       float *c, int ldc, int add);
void gb_mlp_train_gemm_tn(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                          float *c, int ldc, int add);
void gb_mlp_train_gemm_nt(int m, int n, int k, const float *a, int lda, const float *b, int ldb,
                          float *c, int ldc, int add);

/* Large products (millions of multiply-adds between layers 128 or more wide) go to fn from now
 * on (NULL: none; the tiles compute every product), which computes c = op(a) op(b) (added to c
 * when add), op transposing a when ta and b when tb: the learner sets libtorch's BLAS, faster
 * than the tiles there. Process-wide; set it before any product runs. */
typedef void (*gb_mlp_train_large_fn)(int ta, int tb, int m, int n, int k, const float *a,
                                      int lda, const float *b, int ldb, float *c, int ldc,
                                      int add);
void gb_mlp_train_set_large(gb_mlp_train_large_fn fn);

/* on: the calling thread's products all in the tiles, whatever gb_mlp_train_set_large set, until
 * it is called again with 0. For the parts of a learner's job that run beside another thread's
 * products, where libtorch's BLAS may not be safe to call from two threads at once (Debian's
 * serial OpenBLAS). Returns the setting it replaced. */
int gb_mlp_train_tiles_only(int on);

#ifdef __cplusplus
}
#endif

#endif
