// workers/torch/core.hpp: the recurrent cores (policy.model.core: lstm, gru) that carry memory
// between a policy's torso and its heads (core.cpp), stepped one row at a time (acting) or run
// over whole chunks (training), with the reset rule of bridge.h's "Cores".
// defines: gbt::CoreImpl, gbt::Core
#pragma once

#include "workers/torch/internal.hpp"

#include <utility>

namespace gbt {

// An LSTM (state [h, c]: S = 2H) or a GRU (state h: S = H) over F input features. Parameters:
// ih (input projection, all gates: [G*H, F] and its bias) and hh (recurrent: [G*H, H] and its
// bias), G = 4 (LSTM: gates i, f, g, o) or 3 (GRU: r, z, n), in libtorch's gate order.
struct CoreImpl : torch::nn::Module {
    CoreImpl(int kind, int64_t in_features, int64_t hidden); // kind: GB_CORE_LSTM or GB_CORE_GRU
    int64_t state_size() const { return kind == GB_CORE_LSTM ? 2 * H : H; }
    // One step of n rows: x [n, F], state [n, S] -> (y [n, H], state' [n, S]).
    std::pair<torch::Tensor, torch::Tensor> step(const torch::Tensor &x,
                                                 const torch::Tensor &state);
    // B sequences of T1 rows: x [B, T1, F], state0 [B, S] entering row 0, reset_before [B, T1]
    // float 0/1 (1: the state is zeroed before that row) -> y [B, T1, H]. The input projection
    // of every row is one matmul; the time loop runs the recurrent part only. Differentiable
    // through the whole sequence (truncated at state0).
    torch::Tensor sequence(const torch::Tensor &x, const torch::Tensor &state0,
                           const torch::Tensor &reset_before);

    int kind;
    int64_t H;
    bool fused = true; // sequence on the CPU through recurrent_sequence (false: libtorch's ops)
    torch::nn::Linear ih{nullptr}, hh{nullptr};

  private:
    // The recurrent part of one step from the row's projected input xp [n, G*H].
    torch::Tensor cell(const torch::Tensor &xp, const torch::Tensor &state);
};
TORCH_MODULE(Core);

// The cores' sequence on the CPU in float32 as one autograd node (core_seq.cpp): kind
// GB_CORE_LSTM or GB_CORE_GRU; xp [B, T, G*H] the rows' input projections, s0 [B, S], keep
// [B, T] float (0: the state is zeroed before that row), w [G*H, H] and b [G*H] the recurrent
// weights -> y [B, T, H]; gradients for xp, s0, w and b. CoreImpl::sequence's result, faster.
torch::Tensor recurrent_sequence(int kind, const torch::Tensor &xp, const torch::Tensor &s0,
                                 const torch::Tensor &keep, const torch::Tensor &w,
                                 const torch::Tensor &b);
// One step of n rows the same way, without gradients: xp [n, G*H], state [n, S] -> state'.
torch::Tensor recurrent_step(int kind, const torch::Tensor &xp, const torch::Tensor &state,
                             const torch::Tensor &w, const torch::Tensor &b);

} // namespace gbt
