// workers/torch/distributions.hpp: log-probabilities and entropies of the policies'
// distributions (distributions.cpp). All differentiable; shapes in the comments.
// defines: gbt::categorical_logp, gbt::categorical_entropy, gbt::gaussian_logp,
//          gbt::gaussian_entropy, gbt::squashed_logp
#pragma once

#include "workers/torch/internal.hpp"

namespace gbt {

torch::Tensor categorical_logp(const torch::Tensor &logits, const torch::Tensor &a); // [N]
torch::Tensor categorical_entropy(const torch::Tensor &logits);                       // [N]
torch::Tensor gaussian_logp(const torch::Tensor &mean, const torch::Tensor &log_std,
                            const torch::Tensor &x);                                  // [N]
torch::Tensor gaussian_entropy(const torch::Tensor &log_std);                         // [N]
// log-prob of tanh(u) scaled by scale ([A] or undefined for 1) with the Jacobian correction.
torch::Tensor squashed_logp(const torch::Tensor &mean, const torch::Tensor &log_std,
                            const torch::Tensor &u, const torch::Tensor &scale);

} // namespace gbt
