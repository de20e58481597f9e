// workers/torch/optimizer.cpp: gbt::FlatAdam (see optimizer.hpp).
#include "workers/torch/optimizer.hpp"
#include "workers/torch/flat_kernels.h"

#include <array>
#include <cmath>
#include <stdexcept>

namespace gbt {

static const double beta1 = 0.9, beta2 = 0.999;

// A flat buffer the loops of flat_kernels.h take: float32 in host memory, contiguous.
static bool cpu_float(const torch::Tensor &t)
{
    return t.device().is_cpu() && t.scalar_type() == torch::kFloat32 && t.is_contiguous();
}

torch::Tensor flatten_parameters(const std::vector<torch::Tensor> &params)
{
    torch::NoGradGuard no_grad;
    if (params.empty())
        throw std::invalid_argument("flat parameters: no parameters");
    int64_t total = 0;
    for (const auto &p : params) {
        if (p.scalar_type() != params[0].scalar_type() || p.device() != params[0].device())
            throw std::invalid_argument("flat parameters: more than one dtype or device");
        total += p.numel();
    }
    torch::Tensor flat = torch::empty({total}, params[0].options().requires_grad(false));
    int64_t at = 0;
    for (const auto &p : params) {
        const int64_t n = p.numel();
        torch::Tensor view = flat.narrow(0, at, n).view(p.sizes());
        view.copy_(p.detach());
        const_cast<torch::Tensor &>(p).set_data(view);
        at += n;
    }
    return flat;
}

FlatAdam::FlatAdam(const std::vector<torch::Tensor> &params, double lr, double eps)
    : params_(params), lr_(lr), eps_(eps)
{
    torch::NoGradGuard no_grad;
    param_ = flatten_parameters(params_);
    const int64_t total = param_.numel();
    auto opts = param_.options();
    grad_ = torch::zeros({total}, opts);
    exp_avg_ = torch::zeros({total}, opts);
    exp_avg_sq_ = torch::zeros({total}, opts);
    int64_t at = 0;
    for (auto &p : params_) {
        const int64_t n = p.numel();
        grad_views_.push_back(grad_.narrow(0, at, n).view(p.sizes()));
        p.mutable_grad() = grad_views_.back();
        at += n;
    }
}

// Makes every defined gradient its flat view (copying one that is another tensor into the view)
// and zeroes the views of undefined ones, which stay undefined. Returns whether all are defined.
// Every rank of a data-parallel group then runs the same flat arithmetic, whichever gradients it
// had of its own: per-tensor arithmetic could round differently from one rank to the next.
bool FlatAdam::gather_grads()
{
    bool all = true;
    for (size_t i = 0; i < params_.size(); i++) {
        torch::Tensor &p = const_cast<torch::Tensor &>(params_[i]);
        const torch::Tensor &g = p.grad();
        if (!g.defined()) {
            grad_views_[i].zero_();
            all = false;
        } else if (!g.is_same(grad_views_[i])) {
            grad_views_[i].copy_(g);
            p.mutable_grad() = grad_views_[i];
        }
    }
    return all;
}

void FlatAdam::zero_grad()
{
    for (size_t i = 0; i < params_.size(); i++)
        if (!params_[i].grad().is_same(grad_views_[i]))
            const_cast<torch::Tensor &>(params_[i]).mutable_grad() = grad_views_[i];
    grad_.zero_();
}

void FlatAdam::step()
{
    torch::NoGradGuard no_grad;
    steps_++;
    const double bc1 = 1.0 - std::pow(beta1, (double)steps_);
    const double bc2 = 1.0 - std::pow(beta2, (double)steps_);
    const bool all = gather_grads();
    // a parameter without a gradient is left as it was (torch::optim::Adam skips it)
    std::vector<std::pair<int64_t, std::array<torch::Tensor, 3>>> kept;
    if (!all) {
        int64_t at = 0;
        for (const auto &p : params_) {
            const int64_t n = p.numel();
            if (!p.grad().defined())
                kept.push_back({at, {param_.narrow(0, at, n).clone(),
                                     exp_avg_.narrow(0, at, n).clone(),
                                     exp_avg_sq_.narrow(0, at, n).clone()}});
            at += n;
        }
    }
    if (cpu_float(param_)) { // one loop (flat_kernels.h), not eight dispatched operations
        gb_flat_adam(param_.data_ptr<float>(), grad_.data_ptr<float>(),
                     exp_avg_.data_ptr<float>(), exp_avg_sq_.data_ptr<float>(),
                     (size_t)param_.numel(), (float)beta1, (float)beta2, (float)(lr_ / bc1),
                     (float)std::sqrt(bc2), (float)eps_);
    } else {
        exp_avg_.mul_(beta1).add_(grad_, 1.0 - beta1);
        exp_avg_sq_.mul_(beta2).addcmul_(grad_, grad_, 1.0 - beta2);
        torch::Tensor denom = (exp_avg_sq_.sqrt() / std::sqrt(bc2)).add_(eps_);
        param_.addcdiv_(exp_avg_, denom, -lr_ / bc1);
    }
    for (const auto &k : kept) {
        const int64_t n = k.second[0].numel();
        param_.narrow(0, k.first, n).copy_(k.second[0]);
        exp_avg_.narrow(0, k.first, n).copy_(k.second[1]);
        exp_avg_sq_.narrow(0, k.first, n).copy_(k.second[2]);
    }
}

double FlatAdam::clip_grad_norm(double max_norm)
{
    torch::NoGradGuard no_grad;
    gather_grads();
    const bool flat = cpu_float(grad_);
    const double norm = flat ? std::sqrt(gb_flat_sumsq(grad_.data_ptr<float>(),
                                                       (size_t)grad_.numel()))
                             : grad_.norm().item<double>();
    const double coef = max_norm / (norm + 1e-6);
    if (max_norm > 0 && coef < 1.0) {
        if (flat)
            gb_flat_scale(grad_.data_ptr<float>(), (size_t)grad_.numel(), (float)coef);
        else
            grad_.mul_(coef);
    }
    return norm;
}

void FlatAdam::save(torch::serialize::OutputArchive &ar) const
{
    ar.write("exp_avg", exp_avg_.clone());
    ar.write("exp_avg_sq", exp_avg_sq_.clone());
    ar.write("steps", torch::tensor({steps_}, torch::kInt64));
}

bool FlatAdam::set_state(const float *params, const float *m, const float *v, int64_t n,
                         int64_t steps)
{
    torch::NoGradGuard no_grad;
    if (n != param_.numel())
        return false;
    auto host = [&](const float *p) { return torch::from_blob((void *)p, {n}, torch::kFloat32); };
    param_.copy_(host(params));
    exp_avg_.copy_(host(m));
    exp_avg_sq_.copy_(host(v));
    steps_ = steps;
    return true;
}

bool FlatAdam::get_state(float *params, float *m, float *v, int64_t n, int64_t *steps) const
{
    torch::NoGradGuard no_grad;
    if (n != param_.numel())
        return false;
    auto host = [&](float *p) { return torch::from_blob(p, {n}, torch::kFloat32); };
    host(params).copy_(param_);
    host(m).copy_(exp_avg_);
    host(v).copy_(exp_avg_sq_);
    *steps = steps_;
    return true;
}

void FlatAdam::load(torch::serialize::InputArchive &ar)
{
    torch::NoGradGuard no_grad;
    torch::Tensor m, v, s;
    ar.read("exp_avg", m);
    ar.read("exp_avg_sq", v);
    ar.read("steps", s);
    if (!m.sizes().equals(exp_avg_.sizes()) || !v.sizes().equals(exp_avg_sq_.sizes()))
        throw std::invalid_argument("optimiser state of another size (another network?)");
    exp_avg_.copy_(m);
    exp_avg_sq_.copy_(v);
    steps_ = s.item<int64_t>();
}

} // namespace gbt
