// workers/torch/distributions.cpp: categorical, Gaussian and tanh-squashed Gaussian
// log-probabilities and entropies (sampling is in model.cpp's act, from the model's generator).
#include "workers/torch/distributions.hpp"
#include "workers/torch/testing.h"

#include <cmath>

namespace gbt {

torch::Tensor categorical_logp(const torch::Tensor &logits, const torch::Tensor &a)
{
    return torch::log_softmax(logits, -1).gather(1, a.view({-1, 1})).squeeze(1);
}

torch::Tensor categorical_entropy(const torch::Tensor &logits)
{
    torch::Tensor lp = torch::log_softmax(logits, -1);
    return -(lp.exp() * lp).sum(-1);
}

static const double LOG_SQRT_2PI = 0.5 * std::log(2.0 * M_PI);

torch::Tensor gaussian_logp(const torch::Tensor &mean, const torch::Tensor &log_std,
                            const torch::Tensor &x)
{
    torch::Tensor z = (x - mean) * torch::exp(-log_std);
    return (-0.5 * z * z - log_std - LOG_SQRT_2PI).sum(-1);
}

torch::Tensor gaussian_entropy(const torch::Tensor &log_std)
{
    return (0.5 + LOG_SQRT_2PI + log_std).sum(-1);
}

torch::Tensor squashed_logp(const torch::Tensor &mean, const torch::Tensor &log_std,
                            const torch::Tensor &u, const torch::Tensor &scale)
{
    // log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)): exact and stable for large |u|
    torch::Tensor corr = (2.0 * (std::log(2.0) - u - torch::nn::functional::softplus(-2.0 * u)))
                             .sum(-1);
    torch::Tensor lp = gaussian_logp(mean, log_std, u) - corr;
    if (scale.defined())
        lp = lp - torch::log(scale).sum();
    return lp;
}

} // namespace gbt

extern "C" int gb_torch_squashed_gaussian_logp(const float *mean, const float *log_std,
                                               const float *u, int64_t n, int64_t A,
                                               const float *scale, float *out, gb_error *err)
{
    return gb_torch_guard(err, "squashed_gaussian_logp", [&] {
        auto v = [&](const float *p) {
            return torch::from_blob(const_cast<float *>(p), {n, A}, torch::kFloat32);
        };
        torch::Tensor s;
        if (scale)
            s = torch::from_blob(const_cast<float *>(scale), {A}, torch::kFloat32);
        torch::Tensor lp = gbt::squashed_logp(v(mean), v(log_std), v(u), s);
        torch::from_blob(out, {n}, torch::kFloat32).copy_(lp);
        return 0;
    });
}
