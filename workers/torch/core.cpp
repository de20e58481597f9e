// workers/torch/core.cpp: the recurrent cores: LSTM and GRU cells in libtorch's gate order and
// equations, one step (acting) and a sequence with resets (training), orthogonal init.
#include "workers/torch/core.hpp"

#include <stdexcept>

namespace gbt {

CoreImpl::CoreImpl(int k, int64_t in_features, int64_t hidden) : kind(k), H(hidden)
{
    if (kind != GB_CORE_LSTM && kind != GB_CORE_GRU)
        throw std::invalid_argument("core: neither lstm nor gru");
    if (in_features < 1 || hidden < 1)
        throw std::invalid_argument("core: empty input or state");
    const int64_t G = kind == GB_CORE_LSTM ? 4 : 3;
    ih = register_module("ih", torch::nn::Linear(in_features, G * H));
    hh = register_module("hh", torch::nn::Linear(H, G * H));
    torch::NoGradGuard no_grad;
    torch::nn::init::orthogonal_(ih->weight, 1.0);
    for (int64_t g = 0; g < G; g++) // each gate's recurrent block orthogonal on its own
        torch::nn::init::orthogonal_(hh->weight.narrow(0, g * H, H), 1.0);
    torch::nn::init::zeros_(ih->bias);
    torch::nn::init::zeros_(hh->bias);
    if (kind == GB_CORE_LSTM) // forget gate open at the start: memory is kept until learnt away
        ih->bias.narrow(0, H, H).fill_(1.0);
}

torch::Tensor CoreImpl::cell(const torch::Tensor &xp, const torch::Tensor &state)
{
    if (kind == GB_CORE_LSTM) {
        torch::Tensor h = state.narrow(1, 0, H), c = state.narrow(1, H, H);
        auto g = (xp + hh->forward(h)).chunk(4, 1); // i, f, g, o
        torch::Tensor c2 = torch::sigmoid(g[1]) * c + torch::sigmoid(g[0]) * torch::tanh(g[2]);
        torch::Tensor h2 = torch::sigmoid(g[3]) * torch::tanh(c2);
        return torch::cat({h2, c2}, 1);
    }
    auto gi = xp.chunk(3, 1), gh = hh->forward(state).chunk(3, 1); // r, z, n
    torch::Tensor r = torch::sigmoid(gi[0] + gh[0]);
    torch::Tensor z = torch::sigmoid(gi[1] + gh[1]);
    torch::Tensor n = torch::tanh(gi[2] + r * gh[2]);
    return n + z * (state - n); // (1 - z) n + z h
}

std::pair<torch::Tensor, torch::Tensor> CoreImpl::step(const torch::Tensor &x,
                                                       const torch::Tensor &state)
{
    torch::Tensor xp = ih->forward(x);
    torch::Tensor s = fused && xp.device().is_cpu() && xp.scalar_type() == torch::kFloat32 &&
                              !torch::GradMode::is_enabled()
                          ? recurrent_step(kind, xp, state, hh->weight, hh->bias)
                          : cell(xp, state);
    return {s.narrow(1, 0, H), s};
}

torch::Tensor CoreImpl::sequence(const torch::Tensor &x, const torch::Tensor &state0,
                                 const torch::Tensor &reset_before)
{
    const int64_t B = x.size(0), T1 = x.size(1);
    // [B, T1, G*H], one matmul: on the rows as a matrix, libtorch 1.13's Linear is one addmm
    // (bias in the GEMM); on [B, T1, F] it is a matmul and a separate pass adding the bias
    torch::Tensor xp = ih->forward(x.reshape({B * T1, x.size(2)})).view({B, T1, -1});
    if (fused && xp.device().is_cpu() && xp.scalar_type() == torch::kFloat32)
        return recurrent_sequence(kind, xp, state0.to(torch::kFloat32).contiguous(),
                                  (1.0 - reset_before).to(torch::kFloat32), hh->weight,
                                  hh->bias);
    torch::Tensor keep = (1.0 - reset_before).unsqueeze(-1); // [B, T1, 1]
    std::vector<torch::Tensor> ys;
    ys.reserve((size_t)T1);
    torch::Tensor s = state0;
    for (int64_t t = 0; t < T1; t++) {
        s = cell(xp.select(1, t), s * keep.select(1, t));
        ys.push_back(s.narrow(1, 0, H));
    }
    return torch::stack(ys, 1).view({B, T1, H});
}

} // namespace gbt
