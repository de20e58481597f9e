// workers/torch/target_net.hpp: target networks tied to their online networks' flat
// parameters (target_net.cpp), so that DQN's and SAC's per-step target updates are one operation.
// defines: gbt::TargetLink
#pragma once

#include "workers/torch/internal.hpp"

namespace gbt {

// A target network tied to its online network for cheap updates. The online parameters are
// views of their optimiser's flat tensor (FlatAdam::flat_params); link makes the target's
// parameters views of one flat tensor laid out alike, so a Polyak update is one lerp and a hard
// update one copy, where polyak_update takes two operations per tensor (and builds both name
// lists on every call). Buffers (none in the built-in networks) go tensor by tensor. Where the
// layouts differ (another order or shape), it keeps the tensor lists and updates per tensor.
class TargetLink {
public:
    // dst, src: the target's and the online network's tensors, parameters first (nparams of
    // them), then buffers; src_flat: the flat tensor the online parameters are views of.
    void link(const NamedTensors &dst, const NamedTensors &src, size_t nparams,
              const torch::Tensor &src_flat);
    void polyak(double tau);
    void copy();

private:
    torch::Tensor dst_flat_, src_flat_;
    NamedTensors dst_, src_; // what is not in the flat tensors (all of it, unflattened)
};

} // namespace gbt
