/* workers/torch/core_train.h: a recurrent core's forward and backward through time in C, for a
 * CPU learner without libtorch (workers/roles/ppo_mlp.h with policy.model.core lstm or gru): what
 * core_seq.cpp computes inside libtorch's autograd, over plain arrays. The cores are core.hpp's
 * (LSTM state [h, c], GRU state h; libtorch's gate order and equations, the gates' arithmetic
 * core_gates.h's); the input projection of every row is one product, the time loop runs the
 * recurrent product a step, and the weights' gradients are one product over all the steps
 * (mlp_train.h's tiles). B sequences of T rows each are laid out chunk by chunk: row i * T + t
 * is sequence i's step t. Before row t > 0 the state is the one row t-1 left times keep[row]
 * (0: zeroed, an episode starts there), before row 0 the sequence's s0 times keep[row].
 * Not thread-safe per workspace; the layer's arrays are read, its gradients added to.
 * defines: gb_core_train, GB_CORE_TRAIN_LSTM, GB_CORE_TRAIN_GRU, gb_core_train_state,
 *          gb_core_train_transpose,
 *          gb_core_train_floats, gb_core_train_forward, gb_core_train_last_state,
 *          gb_core_train_backward */
#ifndef GB_WORKERS_TORCH_CORE_TRAIN_H
#define GB_WORKERS_TORCH_CORE_TRAIN_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { GB_CORE_TRAIN_LSTM = 0, GB_CORE_TRAIN_GRU = 1 };

typedef struct gb_core_train {
    int kind;                /* GB_CORE_TRAIN_LSTM (G = 4 gates) or GB_CORE_TRAIN_GRU (G = 3) */
    int F, H;                /* input features, units */
    const float *w_ih, *b_ih; /* [G*H][F], [G*H]: core.ih's weight and bias */
    const float *w_hh, *b_hh; /* [G*H][H], [G*H]: core.hh's */
    float *dw_ih, *db_ih, *dw_hh, *db_hh; /* the backward adds the gradients here */
    /* optional: w_ih and w_hh transposed ([F][G*H], [H][G*H]: gb_core_train_transpose), which
     * a caller whose weights change less often than it steps keeps; NULL: every forward
     * transposes them into its workspace (a learner's, whose weights change every step) */
    const float *wt_ih, *wt_hh;
} gb_core_train;

/* Floats of state a row carries: 2H (LSTM) or H (GRU). */
int gb_core_train_state(const gb_core_train *c);

/* w_ih and w_hh transposed into wt_ih ([F][G*H]) and wt_hh ([H][G*H]). */
void gb_core_train_transpose(const gb_core_train *c, float *wt_ih, float *wt_hh);

/* Floats of workspace a forward and backward of B sequences of T rows need. */
size_t gb_core_train_floats(const gb_core_train *c, int B, int T);

/* The forward of x ([B*T][F]) from s0 (B rows of gb_core_train_state floats, ld floats apart),
 * keep [B*T] (NULL: every row 1), into ws (gb_core_train_floats of them): y [B*T][H] receives h
 * of every row. Everything the backward reads stays in ws. */
void gb_core_train_forward(const gb_core_train *c, int B, int T, const float *x, const float *s0,
                           int ld, const float *keep, float *ws, float *y);

/* The state each of the B sequences left after its last row, in the forward just run into ws:
 * into s (B rows of gb_core_train_state floats, ld floats apart; s may be the forward's s0). */
void gb_core_train_last_state(const gb_core_train *c, int B, int T, const float *ws, float *s,
                              int ld);

/* The backward through time of the forward just run into ws (the same c, B, T, x and keep): dy
 * [B*T][H] the loss's gradient for y. Adds the gradients of w_ih, b_ih, w_hh and b_hh into
 * dw_ih, db_ih, dw_hh and db_hh, and writes x's into dx ([B*T][F]) unless it is NULL. The
 * gradient for s0 is not taken (the state entering a chunk is data). */
void gb_core_train_backward(const gb_core_train *c, int B, int T, const float *x,
                            const float *keep, float *ws, const float *dy, float *dx);

#ifdef __cplusplus
}
#endif

#endif
