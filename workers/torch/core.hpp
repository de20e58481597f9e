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
    torch::nn::Linear ih{nullptr}, hh{nullptr};

  private:
    // The recurrent part of one step from the row's projected input xp [n, G*H].
    torch::Tensor cell(const torch::Tensor &xp, const torch::Tensor &state);
};
TORCH_MODULE(Core);

} // namespace gbt
