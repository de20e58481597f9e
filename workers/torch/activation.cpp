// workers/torch/activation.cpp: gbt::fast_tanh (activation.hpp).
#include "workers/torch/activation.hpp"
#include "workers/torch/fast_tanh.h"

#include <ATen/Parallel.h>

namespace gbt {

namespace {

// Splits n elements over libtorch's intra-op threads (trainer.threads / policy.threads) in
// ranges of at least 32k: below that one thread does it all.
template <typename F> void over(int64_t n, F f)
{
    at::parallel_for(0, n, 32768, [&](int64_t b, int64_t e) { f(b, e); });
}

// tanh of a float32 CPU tensor, without autograd
torch::Tensor tanh_values(const torch::Tensor &x)
{
    torch::Tensor xc = x.contiguous();
    torch::Tensor y = torch::empty_like(xc);
    const float *in = xc.data_ptr<float>();
    float *out = y.data_ptr<float>();
    over(xc.numel(),
         [&](int64_t b, int64_t e) { gb_tanh_forward(in + b, out + b, (size_t)(e - b)); });
    return y;
}

struct TanhFn : torch::autograd::Function<TanhFn> {
    static torch::Tensor forward(torch::autograd::AutogradContext *ctx, const torch::Tensor &x)
    {
        torch::Tensor y = tanh_values(x);
        ctx->save_for_backward({y});
        return y;
    }
    static torch::autograd::tensor_list backward(torch::autograd::AutogradContext *ctx,
                                                 torch::autograd::tensor_list grads)
    {
        torch::Tensor y = ctx->get_saved_variables()[0];
        torch::Tensor g = grads[0].contiguous();
        torch::Tensor gx = torch::empty_like(y);
        const float *yp = y.data_ptr<float>(), *gp = g.data_ptr<float>();
        float *out = gx.data_ptr<float>();
        over(y.numel(), [&](int64_t b, int64_t e) {
            gb_tanh_backward(yp + b, gp + b, out + b, (size_t)(e - b));
        });
        return {gx};
    }
};

} // namespace

torch::Tensor fast_tanh(const torch::Tensor &x)
{
    if (!x.device().is_cpu() || x.scalar_type() != torch::kFloat32)
        return torch::tanh(x);
    if (!x.requires_grad() || !torch::GradMode::is_enabled())
        return tanh_values(x);
    return TanhFn::apply(x);
}

} // namespace gbt
