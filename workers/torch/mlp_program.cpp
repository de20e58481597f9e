// workers/torch/mlp_program.cpp: gbt::MlpProgram (mlp_program.hpp).
#include "workers/torch/mlp_program.hpp"
#include "workers/torch/activation.hpp"
#include "workers/torch/module.h"
#include "workers/torch/precision.hpp"

#include <mutex>
#include <stdexcept>
#include <string>

namespace gbt {

bool MlpProgram::torso(torch::nn::Sequential &s, int src, int *last)
{
    int at = src;
    bool activated = true; // nothing to activate before the first Linear
    for (const auto &any : *s) {
        const torch::nn::Module *m = any.ptr().get();
        if (auto lin = std::dynamic_pointer_cast<torch::nn::LinearImpl>(any.ptr())) {
            torch::nn::Linear l(lin);
            at = head(l, at);
            activated = false;
        } else if (dynamic_cast<const FastTanhImpl *>(m) ||
                   dynamic_cast<const torch::nn::TanhImpl *>(m) ||
                   dynamic_cast<const torch::nn::ReLUImpl *>(m)) {
            if (activated)
                return false;
            specs_.back().act = dynamic_cast<const torch::nn::ReLUImpl *>(m) ? GB_MLP_ACT_RELU
                                                                             : GB_MLP_ACT_TANH;
            activated = true;
        } else if (!dynamic_cast<const torch::nn::IdentityImpl *>(m) &&
                   !dynamic_cast<const torch::nn::FlattenImpl *>(m)) {
            return false;
        }
    }
    *last = at;
    return true;
}

int MlpProgram::head(torch::nn::Linear &l, int src)
{
    const int64_t in = src < 0 ? in_ : specs_[(size_t)src].out, out = l->options.out_features();
    if (l->options.in_features() != in)
        throw std::logic_error("mlp program: a Linear's width differs from its source's");
    gb_mlp_layer_spec s{};
    s.src = src;
    s.in = (int)in;
    s.out = (int)out;
    s.act = GB_MLP_ACT_NONE;
    s.int8 = int8_ && in >= kMinInt8Width && out >= kMinInt8Width;
    specs_.push_back(s);
    linears_.push_back(l);
    return (int)specs_.size() - 1;
}

bool MlpProgram::chain_to(int last, MlpChain *out) const
{
    out->layers.clear();
    out->acts.clear();
    if (last < 0 || last >= (int)specs_.size())
        return false;
    for (int i = last; i >= 0; i = specs_[(size_t)i].src) { // sources come before their readers
        out->layers.insert(out->layers.begin(), linears_[(size_t)i]);
        out->acts.insert(out->acts.begin(), specs_[(size_t)i].act);
    }
    return true;
}

// c = op(a) op(b) (+ c) through libtorch's mm on views of the caller's rows (no copies).
extern "C" void gbt_large_product(int ta, int tb, int m, int n, int k, const float *a, int lda,
                                  const float *b, int ldb, float *c, int ldc, int add)
{
    auto view = [](const float *p, int64_t rows, int64_t cols, int64_t ld, bool t) {
        torch::Tensor v = torch::from_blob(const_cast<float *>(p), {rows, cols}, {ld, 1},
                                           torch::kFloat32);
        return t ? v.t() : v;
    };
    torch::Tensor A = ta ? view(a, k, m, lda, true) : view(a, m, k, lda, false);
    torch::Tensor B = tb ? view(b, n, k, ldb, true) : view(b, k, n, ldb, false);
    torch::Tensor C = view(c, m, n, ldc, false);
    if (add)
        C.addmm_(A, B);
    else
        torch::mm_out(C, A, B);
}

void use_blas_for_large_products()
{
    static std::once_flag once;
    std::call_once(once, [] { gb_mlp_train_set_large(gbt_large_product); });
}

void MlpChain::train_layers(bool grads, std::vector<gb_mlp_train_layer> *out) const
{
    out->resize(layers.size());
    auto ptr = [](const torch::Tensor &t) {
        if (!t.defined())
            return (float *)nullptr;
        if (!t.is_contiguous() || t.scalar_type() != torch::kFloat32 || !t.device().is_cpu())
            throw std::logic_error("mlp chain: a parameter is not contiguous cpu float");
        return t.data_ptr<float>();
    };
    for (size_t i = 0; i < layers.size(); i++) {
        const torch::nn::Linear &m = layers[i];
        gb_mlp_train_layer &d = (*out)[i];
        d.in = (int)m->options.in_features();
        d.out = (int)m->options.out_features();
        d.act = acts[i];
        d.w = ptr(m->weight);
        d.b = m->bias.defined() ? ptr(m->bias) : nullptr;
        d.dw = grads ? ptr(m->weight.grad()) : nullptr;
        d.db = grads && m->bias.defined() ? ptr(m->bias.grad()) : nullptr;
    }
}

const float *MlpPass::forward(const float *x, int n, bool grads)
{
    if (chain.layers.empty())
        return x;
    chain.train_layers(grads, &l);
    ws.resize(gb_mlp_train_floats(l.data(), (int)l.size(), n));
    return gb_mlp_train_forward(l.data(), (int)l.size(), x, n, ws.data());
}

void MlpPass::backward(const float *x, int n, float *dy, float *dx)
{
    if (!chain.layers.empty())
        gb_mlp_train_backward(l.data(), (int)l.size(), x, n, ws.data(), dy, dx);
}

void MlpProgram::finish()
{
    char err[256];
    mlp_ = gb_mlp_create(specs_.data(), (int)specs_.size(), err, sizeof err);
    if (!mlp_)
        throw std::runtime_error(err);
    reload();
}

void MlpProgram::reload()
{
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < linears_.size(); i++) {
        torch::nn::Linear &l = linears_[i];
        torch::Tensor w = l->weight.detach().to(torch::kCPU, torch::kFloat32).contiguous();
        torch::Tensor b;
        if (l->bias.defined())
            b = l->bias.detach().to(torch::kCPU, torch::kFloat32).contiguous();
        gb_mlp_load(mlp_, (int)i, w.data_ptr<float>(), b.defined() ? b.data_ptr<float>() : nullptr);
    }
}

void MlpProgram::run(const torch::Tensor &x, int a, int b, torch::Tensor *ta, torch::Tensor *tb)
{
    torch::Tensor in = x.to(torch::kFloat32).contiguous();
    const int64_t n = in.size(0);
    std::vector<float *> &outs = outs_;
    outs.assign(specs_.size(), nullptr);
    *ta = torch::empty({n, specs_[a].out});
    outs[a] = ta->data_ptr<float>();
    if (b >= 0) {
        *tb = torch::empty({n, specs_[b].out});
        outs[b] = tb->data_ptr<float>();
    }
    gb_mlp_forward(mlp_, in.data_ptr<float>(), n, outs.data());
}

} // namespace gbt
