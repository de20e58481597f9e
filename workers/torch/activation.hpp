// workers/torch/activation.hpp: activation modules of the built-in networks beyond libtorch's
// own: Tanh on gb_tanh_forward/backward (fast_tanh.h) with its own autograd node, for float32
// tensors on the CPU (anything else goes through torch::tanh). The same module serves the policy
// worker's inference and the learner, so both act with one function.
// defines: gbt::FastTanh, gbt::FastTanhImpl, gbt::fast_tanh
#pragma once

#include <torch/torch.h>

namespace gbt {

// tanh(x) through the vectorised kernel when x is a float32 CPU tensor, with a gradient of
// g * (1 - y^2); otherwise torch::tanh(x).
torch::Tensor fast_tanh(const torch::Tensor &x);

struct FastTanhImpl : torch::nn::Module {
    torch::Tensor forward(const torch::Tensor &x) { return fast_tanh(x); }
};
TORCH_MODULE(FastTanh);

} // namespace gbt
