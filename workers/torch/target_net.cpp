// workers/torch/target_net.cpp: gbt::TargetLink (target_net.hpp).
#include "workers/torch/target_net.hpp"

#include "workers/torch/algorithm.hpp"
#include "workers/torch/flat_kernels.h"

namespace gbt {

void TargetLink::link(const NamedTensors &dst, const NamedTensors &src, size_t nparams,
                      const torch::Tensor &src_flat)
{
    torch::NoGradGuard no_grad;
    TORCH_CHECK(dst.size() == src.size() && nparams <= dst.size(),
                "target network differs from the online network");
    // the online parameters must be src_flat's views, in order, shaped as the target's
    bool flat = nparams > 0 && src_flat.defined() && src_flat.is_contiguous();
    int64_t at = 0;
    for (size_t i = 0; flat && i < nparams; i++) {
        const torch::Tensor &p = src[i].second, &q = dst[i].second;
        flat = p.is_contiguous() && p.sizes() == q.sizes() && q.is_floating_point() &&
               p.scalar_type() == src_flat.scalar_type() && q.scalar_type() == p.scalar_type() &&
               q.device() == p.device() && at + p.numel() <= src_flat.numel() &&
               p.data_ptr() == static_cast<char *>(src_flat.data_ptr()) +
                                    at * (int64_t)src_flat.element_size();
        at += p.numel();
    }
    flat = flat && at == src_flat.numel();
    dst_.clear();
    src_.clear();
    dst_flat_ = src_flat_ = torch::Tensor();
    if (flat) {
        std::vector<torch::Tensor> params;
        for (size_t i = 0; i < nparams; i++)
            params.push_back(dst[i].second);
        dst_flat_ = flatten_parameters(params);
        src_flat_ = src_flat;
    }
    for (size_t i = flat ? nparams : 0; i < dst.size(); i++) {
        dst_.push_back(dst[i]);
        src_.push_back(src[i]);
    }
}

void TargetLink::polyak(double tau)
{
    torch::NoGradGuard no_grad;
    if (dst_flat_.defined() && dst_flat_.device().is_cpu() &&
        dst_flat_.scalar_type() == torch::kFloat32) // one loop, not a dispatched lerp_
        gb_flat_lerp(dst_flat_.data_ptr<float>(), src_flat_.data_ptr<float>(),
                     (size_t)dst_flat_.numel(), (float)tau);
    else if (dst_flat_.defined())
        dst_flat_.lerp_(src_flat_, tau);
    if (!dst_.empty())
        polyak_update(dst_, src_, tau);
}

void TargetLink::copy()
{
    torch::NoGradGuard no_grad;
    if (dst_flat_.defined())
        dst_flat_.copy_(src_flat_);
    if (!dst_.empty())
        copy_tensors(dst_, src_);
}

} // namespace gbt
