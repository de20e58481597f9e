/* workers/torch/core_gates.h: the recurrent cores' gate arithmetic for one row of one step, in C
 * so that it is compiled vectorised (-O3, AVX-512 / AVX2 / SSE2 clones chosen once at load) while
 * the C++ around it (core_seq.cpp) runs the time loop and the GEMMs. Gates in libtorch's order
 * and equations (LSTM: i, f, g, o; GRU: r, z, n); sigmoid(x) = (1 + tanh(x / 2)) / 2 through
 * fast_tanh.h. Arrays are one row's, each of H units (gates: G*H), never overlapping.
 * defines: gb_lstm_forward_row, gb_lstm_backward_row, gb_gru_forward_row, gb_gru_backward_row */
#ifndef GB_WORKERS_TORCH_CORE_GATES_H
#define GB_WORKERS_TORCH_CORE_GATES_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* LSTM: x [4H] the input projection (x W_ih^T + b_ih), b [4H] b_hh, g [4H] in: h W_hh^T, out:
 * the activated gates; c [H] the cell entering the step (after a reset); c2 [H] receives
 * c' = f c + i g, tc [H] tanh(c'), h2 [H] h' = o tanh(c'). */
void gb_lstm_forward_row(int64_t H, const float *x, const float *b, float *g, const float *c,
                         float *c2, float *tc, float *h2);

/* The LSTM's backward through one row of one step: g, tc and c as the forward left them, gy [H]
 * the loss's gradient for h' from the output, dh [H] the gradient for h' from the next step, dc
 * [H] in: the gradient for c' from the next step, out: for the cell entering this step times
 * keep (0 where the state was zeroed before it). dg [4H] receives the pre-activations' gradient. */
void gb_lstm_backward_row(int64_t H, const float *g, const float *tc, const float *c,
                          const float *gy, const float *dh, float *dc, float keep, float *dg);

/* GRU: x [3H] the input projection (x W_ih^T + b_ih), b [3H] b_hh, gh [3H] in: h W_hh^T, out:
 * h W_hh^T + b_hh; h [H] the state entering (after a reset); g [3H] receives r, z and n, h2 [H]
 * h' = (1 - z) n + z h. */
void gb_gru_forward_row(int64_t H, const float *x, const float *b, float *gh, const float *h,
                        float *g, float *h2);

/* The GRU's backward through one row of one step: g, gh and h as the forward had them, gy [H]
 * the output's gradient for h'; dh [H] in: the gradient for h' from the next step, out: the
 * direct path's part of the gradient for h (z dh'; the recurrent GEMM's part is the caller's).
 * dx [3H] receives the gradient of x, dgh [3H] that of h W_hh^T + b_hh. */
void gb_gru_backward_row(int64_t H, const float *g, const float *gh, const float *h,
                         const float *gy, float *dh, float *dx, float *dgh);

#ifdef __cplusplus
}
#endif

#endif
