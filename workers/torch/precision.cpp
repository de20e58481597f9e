// workers/torch/precision.cpp: reduced-precision Linear layers for the policy workers' inference
// (precision.hpp): int8 through libtorch's quantized::linear_prepack and the packed weights'
// dynamic apply, bf16 through at::linear on bf16 copies.
#include "workers/torch/precision.hpp"
#include "workers/torch/activation.hpp"

#include <ATen/core/dispatch/Dispatcher.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>

namespace gbt {

namespace {

const char *engine_name(at::QEngine e)
{
    switch (e) {
    case at::QEngine::X86: return "x86";
    case at::QEngine::FBGEMM: return "fbgemm";
    case at::QEngine::ONEDNN: return "onednn";
    case at::QEngine::QNNPACK: return "qnnpack";
    default: return "none";
    }
}

// Per output channel, symmetric (zero point 0, as onednn requires): scale = max |w_row| / 127.
torch::Tensor quantize_weight(const torch::Tensor &w)
{
    torch::Tensor wf = w.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    torch::Tensor scales = (wf.abs().amax(1).clamp_min(1e-12) / 127.0).to(torch::kFloat64);
    torch::Tensor zeros = torch::zeros({wf.size(0)}, torch::kInt64);
    return at::quantize_per_channel(wf, scales, zeros, 0, at::kQInt8);
}

c10::intrusive_ptr<LinearPackedParamsBase> prepack(const torch::Tensor &wq,
                                                   const torch::Tensor &bias)
{
    static const c10::OperatorHandle op =
        c10::Dispatcher::singleton().findSchemaOrThrow("quantized::linear_prepack", "");
    c10::optional<at::Tensor> b;
    if (bias.defined())
        b = bias.detach().to(torch::kCPU).contiguous();
    std::vector<c10::IValue> stack{wq, b};
    op.callBoxed(&stack);
    return stack.at(0).toCustomClass<LinearPackedParamsBase>();
}

bool elementwise(const torch::nn::Module *m)
{
    return dynamic_cast<const torch::nn::TanhImpl *>(m) || dynamic_cast<const FastTanhImpl *>(m) ||
           dynamic_cast<const torch::nn::ReLUImpl *>(m) ||
           dynamic_cast<const torch::nn::ELUImpl *>(m) ||
           dynamic_cast<const torch::nn::GELUImpl *>(m) ||
           dynamic_cast<const torch::nn::FlattenImpl *>(m) ||
           dynamic_cast<const torch::nn::IdentityImpl *>(m);
}

// Whether the int8 engine's u8 x s8 products saturate (see LowPrecision::reduce_range_).
bool saturating_int8(const char *engine)
{
    bool x86 = std::strcmp(engine, "x86") == 0 || std::strcmp(engine, "fbgemm") == 0 ||
               std::strcmp(engine, "onednn") == 0;
#if defined(__x86_64__) || defined(__i386__)
    return x86 && !__builtin_cpu_supports("avx512vnni");
#else
    return false; // onednn elsewhere (aarch64) and qnnpack widen before they add
#endif
}

} // namespace

const char *int8_engine()
{
    static std::once_flag once;
    static const char *name = nullptr;
    static std::string failure;
    std::call_once(once, [] {
        const auto &have = at::globalContext().supportedQEngines();
        auto has = [&](at::QEngine e) {
            for (auto h : have)
                if (h == e)
                    return true;
            return false;
        };
        const at::QEngine order[] = {at::QEngine::X86, at::QEngine::FBGEMM, at::QEngine::ONEDNN,
                                     at::QEngine::QNNPACK};
        const char *want = std::getenv("GEARBOX_QENGINE");
        for (at::QEngine e : order) {
            if (!has(e) || (want && want[0] && std::strcmp(want, engine_name(e)) != 0))
                continue;
            at::globalContext().setQEngine(e);
            name = engine_name(e);
            return;
        }
        std::string list;
        for (auto h : have)
            list += std::string(list.empty() ? "" : ", ") + engine_name(h);
        failure = std::string("int8 inference: no usable quantized engine") +
                  (want && want[0] ? std::string(" named ") + want : std::string()) +
                  " in this libtorch (it has: " + (list.empty() ? "none" : list) + ")";
    });
    if (!name)
        throw std::runtime_error(failure);
    return name;
}

void LowPrecision::build(torch::nn::Module &mod, int p)
{
    torch::NoGradGuard no_grad;
    std::unordered_map<const torch::nn::Module *, Layer> layers;
    bool reduce_range = p == GB_PRECISION_INT8 && saturating_int8(int8_engine());
    if (p != GB_PRECISION_FP32) {
        for (const auto &m : mod.modules(/*include_self=*/true)) {
            auto *lin = dynamic_cast<torch::nn::LinearImpl *>(m.get());
            if (!lin)
                continue;
            // int8: a layer with a narrow side (CartPole's 4 inputs, a 1- or 2-unit head) stays
            // fp32: its GEMM is a few hundred multiply-adds, less than what quantizing its input
            // costs, and the first and last layers are where int8 error costs most
            if (p == GB_PRECISION_INT8 &&
                (lin->weight.size(0) < kMinInt8Width || lin->weight.size(1) < kMinInt8Width))
                continue;
            Layer l;
            if (p == GB_PRECISION_INT8) {
                if (!lin->weight.device().is_cpu())
                    throw std::runtime_error("int8 inference runs on the cpu only");
                l.packed = prepack(quantize_weight(lin->weight), lin->bias);
            } else {
                l.w = lin->weight.detach().to(torch::kBFloat16);
                if (lin->bias.defined())
                    l.b = lin->bias.detach().to(torch::kBFloat16);
            }
            layers.emplace(m.get(), std::move(l));
        }
    }
    layers_ = std::move(layers); // only now: a failure above leaves the previous copies
    precision_ = p;
    reduce_range_ = reduce_range;
}

torch::Tensor LowPrecision::linear(torch::nn::Linear &l, const torch::Tensor &x) const
{
    auto it = precision_ == GB_PRECISION_FP32 ? layers_.end() : layers_.find(l.get());
    if (it == layers_.end())
        return l->forward(x.scalar_type() == torch::kFloat32 ? x : x.to(torch::kFloat32));
    const Layer &q = it->second;
    if (precision_ == GB_PRECISION_INT8) // x [N, in] fp32 -> [N, out] fp32
        return q.packed->apply_dynamic(
            x.scalar_type() == torch::kFloat32 ? x.contiguous() : x.to(torch::kFloat32),
            reduce_range_);
    return at::linear(x.scalar_type() == torch::kBFloat16 ? x : x.to(torch::kBFloat16), q.w,
                      q.b);
}

torch::Tensor LowPrecision::sequential(torch::nn::Sequential &s, torch::Tensor x) const
{
    for (auto &any : *s) {
        const torch::nn::Module *m = any.ptr().get();
        if (auto lin = std::dynamic_pointer_cast<torch::nn::LinearImpl>(any.ptr())) {
            torch::nn::Linear holder(lin);
            x = linear(holder, x);
        }
        else if (elementwise(m))
            x = any.forward(x);
        else
            x = any.forward(x.scalar_type() == torch::kFloat32 ? x : x.to(torch::kFloat32));
    }
    return x;
}

} // namespace gbt
