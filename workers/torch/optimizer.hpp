// workers/torch/optimizer.hpp: Adam over one flat buffer. A small network's optimiser step is a
// handful of arithmetic on a few thousand numbers, and libtorch's torch::optim::Adam spends it
// mostly in per-tensor dispatch: about 8 operations for every parameter tensor (measured on the
// development machine: 150 us per step for a 3-layer 64-unit MLP, against 28 us over one flat
// buffer). FlatAdam keeps the parameters as views of one contiguous tensor and their gradients as
// views of another, so a step, a gradient norm and zeroing are a few operations in all.
// defines: gbt::FlatAdam, gbt::flatten_parameters
#pragma once

#include <torch/torch.h>

#include <vector>

namespace gbt {

// Moves the data of params (one dtype and device) into one new flat tensor, in order, and makes
// each parameter a view of it (the same parameter objects, so modules keep them). Returns the
// flat tensor. Throws std::invalid_argument for no parameters or mixed dtypes or devices.
torch::Tensor flatten_parameters(const std::vector<torch::Tensor> &params);

// Adam (Kingma & Ba; betas 0.9, 0.999; no weight decay), the same update per element as
// torch::optim::Adam. Construction moves the parameters' data into one flat tensor (each parameter
// becomes a view of it: the module keeps the same parameter objects) and makes their gradients
// views of one flat gradient tensor. Anything may still replace or drop a gradient (data-parallel
// synchronisation does): a parameter whose gradient is undefined is left alone by step, as
// torch::optim::Adam does, and one whose gradient is another tensor is copied into the flat view
// first; zero_grad makes every gradient the flat view again. One step counter for all parameters
// (the bias corrections), where torch::optim::Adam counts per parameter: the two differ only for a
// parameter that went without a gradient in some step.
class FlatAdam {
public:
    FlatAdam(const std::vector<torch::Tensor> &params, double lr, double eps = 1e-8);
    const std::vector<torch::Tensor> &params() const { return params_; }
    // The flat tensor every parameter is a view of, in the order given (flatten_parameters).
    const torch::Tensor &flat_params() const { return param_; }
    void set_lr(double lr) { lr_ = lr; }
    void zero_grad();
    void step();
    // Scales the gradients so their global 2-norm is at most max_norm (max_norm <= 0: never) and
    // returns the norm before, as torch::nn::utils::clip_grad_norm_ does.
    double clip_grad_norm(double max_norm);
    void save(torch::serialize::OutputArchive &ar) const;
    void load(torch::serialize::InputArchive &ar); // throws when the shapes differ
    // The parameters, both moments (n floats each, in the flat order) and the step count, from
    // host arrays (a learner that trained without libtorch). False when n is not the count.
    bool set_state(const float *params, const float *m, const float *v, int64_t n, int64_t steps);
    // The same into host arrays (a learner without libtorch continuing a restored run).
    bool get_state(float *params, float *m, float *v, int64_t n, int64_t *steps) const;

private:
    bool gather_grads();
    std::vector<torch::Tensor> params_, grad_views_;
    torch::Tensor param_, grad_, exp_avg_, exp_avg_sq_;
    int64_t steps_ = 0;
    double lr_, eps_;
};

} // namespace gbt
