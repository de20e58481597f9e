// workers/torch/transformer.hpp: the transformer core (policy.model.core transformer): a causal,
// gated transformer (GTrXL: layer norm before each block, GRU-type gates in place of the residual
// connections) over a sliding memory of the last M steps of one episode.
// defines: gbt::TransformerCore
//
// Its state is what the caller carries from one step to the next (bridge.h, "Cores"): for each
// of the L layers, that layer's inputs at the last M steps ([M, d], oldest first), then M flags
// saying which of those slots hold a step (1) or nothing yet (0): L*M*d + M floats. Zeros are an
// empty memory, so an episode starts from zeros like the recurrent cores. A step attends, at every
// layer, to its own input and the memory's valid slots, with a learned bias per head and distance
// (0..M steps back); then the memory shifts by one and takes the step's layer inputs.
// Over a chunk the same holds row by row: row t's layer l attends to rows t-M..t of this pass
// and to the state's slots for the steps before row 0, never across an episode's start, so the
// sequence forward equals stepping the rows one by one (the learner's forward is the actor's).
#pragma once

#include "workers/torch/internal.hpp"

namespace gbt {

struct TransformerCoreImpl : torch::nn::Module {
    // in_features: the torso's width; d: model width (core_size); heads divides d.
    TransformerCoreImpl(int64_t in_features, int64_t d, int64_t layers, int64_t heads,
                        int64_t memory);
    int64_t state_size() const { return n_layers * memory * d + memory; }
    int64_t out_features() const { return d; }
    // One step: x [N, in_features], state [N, state_size] -> y [N, d]; *state_out (may be
    // nullptr) receives the next state [N, state_size].
    torch::Tensor step(const torch::Tensor &x, const torch::Tensor &state,
                       torch::Tensor *state_out);
    // A chunk: x [B, T, in_features], state0 [B, state_size] (entering row 0), reset_before
    // [B, T] (1 where the episode starts afresh at that row; row 0's entry is ignored: state0
    // holds) -> y [B, T, d].
    torch::Tensor sequence(const torch::Tensor &x, const torch::Tensor &state0,
                           const torch::Tensor &reset_before);

    int64_t d, n_layers, heads, memory;
    torch::nn::Linear in{nullptr};
    torch::nn::ModuleList blocks{nullptr};
    torch::nn::LayerNorm out_norm{nullptr};
};
TORCH_MODULE(TransformerCore);

} // namespace gbt
