// workers/torch/mlp_program.hpp: a built-in MLP network's inference forward as one gb_mlp
// program (mlp_infer.h, policy.kernels: gearbox): the network names its torsos and heads, their
// Linear layers become the program's layers (int8 where policy.precision asks for it and the
// layer is at least 16 wide both ways, as LowPrecision), and the weights are copied, quantized
// for int8, when it is built and after every parameter change.
// defines: gbt::MlpChain, gbt::MlpPass, gbt::MlpProgram
#pragma once

#include "workers/torch/internal.hpp"
#include "workers/torch/mlp_infer.h"
#include "workers/torch/mlp_train.h"

#include <vector>

namespace gbt {

// Linear layers in a chain (each reads the one before it, the first the input rows) and each
// one's activation (GB_MLP_ACT_*): what a learner's own forward and backward run
// (mlp_train.h).
struct MlpChain {
    std::vector<torch::nn::Linear> layers;
    std::vector<int> acts;
    // The layers' current weights (and with grads their gradients: after zero_grad, views of
    // FlatAdam's flat gradient) as mlp_train.h takes them. Throws on a parameter that is not
    // contiguous float32 on the cpu.
    void train_layers(bool grads, std::vector<gb_mlp_train_layer> *out) const;
    // Layers [from, to) as a chain of their own.
    MlpChain part(size_t from, size_t to) const
    {
        return {{layers.begin() + (long)from, layers.begin() + (long)to},
                {acts.begin() + (long)from, acts.begin() + (long)to}};
    }
};

// A chain pointed at its current weights for each pass, and the workspace of its last forward
// (which its backward reads): what a learner's kernels keep for each network (kept between
// steps: no allocation once the batch's size has been seen).
struct MlpPass {
    MlpChain chain;
    std::vector<gb_mlp_train_layer> l;
    std::vector<float> ws;
    // The forward of n rows x ([n, in]; an empty chain returns x): the last layer's output
    // [n, out()] inside ws. grads: the layers point at their gradients too, which the backward
    // then adds into (else it skips them).
    const float *forward(const float *x, int n, bool grads);
    // The backward of the last forward (the same x and n): dy, the output's gradient, is
    // overwritten; the input's gradient into dx unless it is NULL.
    void backward(const float *x, int n, float *dy, float *dx);
    // The output's features (the last layer's)
    int out() const { return (int)chain.layers.back()->options.out_features(); }
};

// Sends mlp_train.h's products from a size up to libtorch's matrix product (its BLAS), which
// beats the tiles there; once per process, before a learner's first step (learner creation).
void use_blas_for_large_products();

class MlpProgram {
public:
    // in: the features of the input rows
    MlpProgram(int precision, int64_t in) : in_(in), int8_(precision == GB_PRECISION_INT8) {}
    ~MlpProgram() { gb_mlp_destroy(mlp_); }
    MlpProgram(const MlpProgram &) = delete;
    MlpProgram &operator=(const MlpProgram &) = delete;

    // Adds s's Linear layers, the first reading src (-1: the input rows; else a layer's index),
    // each followed by at most one tanh or relu. *last: the index of its last layer (src when
    // it has none). False when s holds anything else (layer norm, elu, gelu): no program.
    bool torso(torch::nn::Sequential &s, int src, int *last);
    // Adds a Linear (no activation) reading src; returns its index. Throws on a width mismatch.
    int head(torch::nn::Linear &l, int src);
    // The chain from the input rows to layer last, through each layer's source. False when
    // last is not a layer.
    bool chain_to(int last, MlpChain *out) const;
    // The layers added so far.
    size_t size() const { return specs_.size(); }
    // Creates the program and loads the weights. Throws.
    void finish();
    // The weights again from the modules (after a parameter change).
    void reload();
    // Layers a's and b's outputs (b < 0: none) for x [n, in] (fp32, cpu).
    void run(const torch::Tensor &x, int a, int b, torch::Tensor *ta, torch::Tensor *tb);
    // "gearbox fp32" or "gearbox int8 (avx512-vnni|avx2)": what the forward runs on, for logs
    // and benchmarks.
    const char *kernels() const { return gb_mlp_kernels_name(int8_); }

private:
    std::vector<gb_mlp_layer_spec> specs_;
    std::vector<torch::nn::Linear> linears_;
    std::vector<float *> outs_; // run()'s per-layer output pointers, kept between batches
    gb_mlp *mlp_ = nullptr;
    int64_t in_;
    bool int8_;
};

} // namespace gbt
