// workers/torch/precision.hpp: reduced-precision inference of a network's Linear layers
// (policy.precision): int8 (libtorch's dynamic quantization: weights quantized once per output
// channel, activations quantized per batch inside the op) or bf16 copies of the weights, built
// from the fp32 layers and rebuilt after every parameter change. Everything else in the network
// (activations, layer norms, convolutions, heads' distributions) stays fp32.
// defines: gbt::LowPrecision, gbt::int8_engine
#pragma once

#include "workers/torch/internal.hpp"

#include <ATen/native/quantized/PackedParams.h>

#include <unordered_map>

namespace gbt {

// Linear layers narrower than this (inputs or outputs) stay fp32 in int8 inference: quantizing
// their input costs more than their GEMM (LowPrecision and MlpProgram alike).
constexpr int64_t kMinInt8Width = 16;

class LowPrecision {
public:
    // GB_PRECISION_FP32: no copies; linear() and sequential() are the modules' own forwards.
    int precision() const { return precision_; }
    // Builds the reduced copies of every Linear inside mod (recursively) from its current fp32
    // weights, in precision p (fp32 drops them; int8 leaves layers with fewer than 16 inputs or
    // outputs in fp32). Throws (int8 off the cpu, no quantized engine).
    void build(torch::nn::Module &mod, int p);
    // l(x) in this precision: int8 takes and returns fp32; bf16 casts x to bf16 and returns
    // bf16. A Linear without a copy runs its own forward.
    torch::Tensor linear(torch::nn::Linear &l, const torch::Tensor &x) const;
    // s(x) with linear() for its Linears; activations, Flatten and Identity run in whatever
    // dtype they get, any other layer (LayerNorm, Conv2d) on fp32.
    torch::Tensor sequential(torch::nn::Sequential &s, torch::Tensor x) const;

private:
    struct Layer {
        c10::intrusive_ptr<LinearPackedParamsBase> packed; // int8
        torch::Tensor w, b;                                 // bf16
    };
    int precision_ = GB_PRECISION_FP32;
    // int8 on an x86 cpu without AVX-512 VNNI (engines x86, fbgemm, onednn): activations
    // quantized to 7 bits (reduce_range, as PyTorch's own dynamic Linear does on fbgemm). There
    // the u8 x s8 products are summed in pairs into int16 (vpmaddubsw), which saturates past
    // 32767: 255 * 127 * 2 does, 127 * 127 * 2 does not. On an AVX2 EPYC (onednn) the full 8
    // bits put outputs of about 1.5 off fp32's by up to 0.39; 7 bits, by at most 0.03.
    bool reduce_range_ = false;
    std::unordered_map<const torch::nn::Module *, Layer> layers_;
};

// The quantized engine int8 runs on (chosen once, the fastest this libtorch has: x86, fbgemm,
// onednn, then qnnpack; GEARBOX_QENGINE=name picks one of them for comparisons). Throws when
// libtorch has none.
const char *int8_engine();

} // namespace gbt
