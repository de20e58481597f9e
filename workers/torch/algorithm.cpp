// workers/torch/algorithm.cpp: helpers the algorithms share: batch views, chunk priorities, lr
// annealing, gradient clipping and all-reduce (data-parallel training), target-network updates,
// and the table of algorithms.
#include "workers/torch/algorithm.hpp"
#include "workers/torch/group.hpp"
#include "workers/torch/targets.h"

#include "workers/torch/module.h"

#include <vector>

namespace gbt {

const Algorithm &algorithm_for(int gb_algorithm)
{
    switch (gb_algorithm) {
    case GB_ALGO_PPO: return ppo_algorithm;
    case GB_ALGO_DQN: return dqn_algorithm;
    default: return sac_algorithm;
    }
}

torch::Tensor cpu_view(const void *p, std::vector<int64_t> shape, torch::ScalarType t)
{
    return torch::from_blob(const_cast<void *>(p), shape, t);
}

// Observations already in the learner's device memory: wrapped, not copied (uint8 frames are
// converted to float there).
static torch::Tensor device_obs(const gb_torch_learner *l, const void *p, int64_t n)
{
    const gb_torch_space &sp = l->model->space;
    std::vector<int64_t> shape{n};
    for (int i = 0; i < sp.obs_ndim; i++)
        shape.push_back(sp.obs_shape[i]);
    auto t = sp.obs_dtype == GB_DTYPE_UINT8 ? torch::kUInt8 : torch::kFloat32;
    torch::Tensor x = torch::from_blob(const_cast<void *>(p), shape,
                                       torch::TensorOptions().dtype(t).device(l->device));
    return t == torch::kFloat32 ? x : x.to(torch::kFloat32);
}

torch::Tensor batch_obs(const gb_torch_learner *l, const gb_torch_batch *b)
{
    const int64_t B = b->B, T = b->T;
    torch::Tensor steps = b->obs_on_device ? device_obs(l, b->obs, B * T)
                                           : obs_tensor(l->model, b->obs, B * T);
    torch::Tensor last = b->obs_on_device ? device_obs(l, b->next_obs, B)
                                          : obs_tensor(l->model, b->next_obs, B);
    std::vector<int64_t> shape = steps.sizes().vec();
    std::vector<int64_t> chunk{B, T};
    chunk.insert(chunk.end(), shape.begin() + 1, shape.end());
    std::vector<int64_t> one{B, 1};
    one.insert(one.end(), shape.begin() + 1, shape.end());
    std::vector<int64_t> rows{B * (T + 1)};
    rows.insert(rows.end(), shape.begin() + 1, shape.end());
    return l->model->net->normalize(torch::cat({steps.view(chunk), last.view(one)}, 1).view(rows));
}

double td_priorities(const Transitions &tr, int64_t B, int64_t T, const torch::Tensor &td,
                     float *prio)
{
    const float *tp = tr.N > 0 ? td.data_ptr<float>() : nullptr;
    double sum = 0.0;
    for (int64_t i = 0; i < tr.N; i++)
        sum += tp[i];
    if (prio)
        gb_torch_chunk_priorities(B, T, tr.N > 0 ? tr.step_idx.data_ptr<int64_t>() : nullptr, tp,
                                  tr.N, prio);
    return tr.N > 0 ? sum / (double)tr.N : 0.0;
}

Transitions valid_transitions(const gb_torch_batch *b, int64_t n_step, double gamma,
                              torch::Device dev)
{
    const int64_t B = b->B, T = b->T;
    // the n-step returns of every step, then the valid ones' columns filled in one pass: a
    // handful of tensors made, not a dozen dispatched operations (kept: no allocation a step)
    thread_local std::vector<float> G, disc;
    thread_local std::vector<int64_t> boot;
    G.resize((size_t)(B * T));
    disc.resize((size_t)(B * T));
    boot.resize((size_t)(B * T));
    gb_torch_nstep(B, T, n_step, gamma, b->reward, b->terminated, b->truncated, b->valid,
                   G.data(), disc.data(), boot.data());
    Transitions tr;
    tr.N = 0;
    for (int64_t i = 0; i < B * T; i++)
        tr.N += !b->valid || b->valid[i];
    if (tr.N == 0)
        return tr;
    auto lopt = torch::TensorOptions().dtype(torch::kInt64);
    tr.step_idx = torch::empty({tr.N}, lopt);
    tr.row_idx = torch::empty({tr.N}, lopt);
    tr.brow_idx = torch::empty({tr.N}, lopt);
    tr.ret = torch::empty({tr.N});
    tr.disc = torch::empty({tr.N});
    if (b->weights)
        tr.weight = torch::empty({tr.N});
    int64_t *sp = tr.step_idx.data_ptr<int64_t>(), *rp = tr.row_idx.data_ptr<int64_t>();
    int64_t *bp = tr.brow_idx.data_ptr<int64_t>();
    float *gp = tr.ret.data_ptr<float>(), *dp = tr.disc.data_ptr<float>();
    float *wp = b->weights ? tr.weight.data_ptr<float>() : nullptr;
    gb_torch_valid_rows(B, T, b->valid, boot.data(), sp, rp, bp);
    for (int64_t k = 0; k < tr.N; k++) {
        gp[k] = G[(size_t)sp[k]];
        dp[k] = disc[(size_t)sp[k]];
        if (wp)
            wp[k] = b->weights[sp[k] / T];
    }
    if (!dev.is_cpu()) {
        tr.row_idx = tr.row_idx.to(dev);
        tr.brow_idx = tr.brow_idx.to(dev);
        tr.ret = tr.ret.to(dev);
        tr.disc = tr.disc.to(dev);
        if (wp)
            tr.weight = tr.weight.to(dev);
    }
    return tr;
}

torch::Tensor by_chunk(const torch::Tensor &obs, int64_t B, int64_t T1)
{
    std::vector<int64_t> shape{B, T1};
    for (int64_t d = 1; d < obs.dim(); d++)
        shape.push_back(obs.size(d));
    return obs.view(shape);
}

torch::Tensor flat_chunks(const torch::Tensor &x)
{
    std::vector<int64_t> shape{x.size(0) * x.size(1)};
    for (int64_t d = 2; d < x.dim(); d++)
        shape.push_back(x.size(d));
    return x.reshape(shape);
}

SeqInputs seq_inputs(const gb_torch_learner *l, const gb_torch_batch *b)
{
    const int64_t B = b->B, T = b->T, S = l->model->net->state_size();
    SeqInputs in;
    const int64_t stride = b->state_stride > 0 ? b->state_stride : S;
    in.state0 = b->state0 ? cpu_view(b->state0, {B, stride}, torch::kFloat32)
                                .narrow(1, 0, S)
                                .clone()
                                .to(l->device)
                          : torch::zeros({B, S}, torch::TensorOptions().device(l->device));
    in.reset = torch::zeros({B, T + 1});
    float *r = in.reset.data_ptr<float>();
    if (b->valid)
        for (int64_t bi = 0; bi < B; bi++)
            for (int64_t t = 1; t <= T; t++)
                r[bi * (T + 1) + t] = b->valid[bi * T + t - 1] ? 0.0f : 1.0f;
    in.reset = in.reset.to(l->device);
    return in;
}

double learner_lr(const gb_torch_learner *l, double base)
{
    if (!l->cfg.trainer.algorithm.lr_anneal)
        return base;
    double f = 1.0 - l->progress;
    return base * (f < 0.0 ? 0.0 : f);
}

static const size_t default_bucket_bytes = (size_t)25 << 20; // DDP's default

void drop_grads(const std::vector<torch::Tensor> &params)
{
    for (const auto &p : params)
        if (p.grad().defined())
            const_cast<torch::Tensor &>(p).mutable_grad() = torch::Tensor();
}

int64_t group_max(gb_torch_learner *l, int64_t v)
{
    if (!l->group)
        return v;
    gb_error err = {};
    if (gbt_group_allreduce(l->group, GB_DTYPE_INT64, &v, 1, GB_GROUP_MAX, &err))
        throw Failure(err.code, err.msg);
    return v;
}

// One bucket: params[first, last) share a dtype. Laid out as [flags (one per parameter: 1 where
// this rank has a gradient) | gradients, flattened], all-reduced (sum) in one call: in device
// memory over NCCL where the group has it and the parameters are on the GPU, else in host
// memory over Gloo (workers/torch/group.hpp).
static bool sync_bucket(gb_torch_learner *l, const std::vector<torch::Tensor> &params,
                        size_t first, size_t last)
{
    const torch::ScalarType t = params[first].scalar_type();
    const int64_t nflags = (int64_t)(last - first);
    int64_t numel = 0;
    for (size_t i = first; i < last; i++)
        numel += params[i].numel();
    const bool on_device = params[first].is_cuda() && gbt_group_nccl(l->group);
    torch::Tensor flat = torch::zeros(
        {nflags + numel},
        torch::TensorOptions().dtype(t).device(on_device ? params[first].device() : torch::kCPU));
    std::vector<double> flags((size_t)nflags, 0.0);
    int64_t at = nflags;
    for (size_t i = first; i < last; i++) {
        const torch::Tensor &g = params[i].grad();
        if (g.defined()) {
            flags[i - first] = 1.0;
            flat.narrow(0, at, g.numel()).copy_(g.reshape({-1}));
        }
        at += params[i].numel();
    }
    flat.narrow(0, 0, nflags).copy_(torch::from_blob(flags.data(), {nflags}, torch::kFloat64));
    gb_error err = {};
    if (gbt_group_allreduce_tensor(l->group, flat, GB_GROUP_SUM, &err))
        throw Failure(err.code, err.msg);
    // how many ranks had each gradient (small integers: exact in either dtype)
    torch::from_blob(flags.data(), {nflags}, torch::kFloat64).copy_(flat.narrow(0, 0, nflags));
    bool any = false;
    at = nflags;
    for (size_t i = first; i < last; i++) {
        torch::Tensor &p = const_cast<torch::Tensor &>(params[i]);
        const int64_t n = p.numel();
        const double have = flags[i - first];
        if (have == 0) {
            p.mutable_grad() = torch::Tensor();
        } else {
            torch::Tensor mean = flat.narrow(0, at, n).view(p.sizes()) / have;
            if (p.grad().defined())
                p.mutable_grad().copy_(mean);
            else
                p.mutable_grad() = mean.to(p.device());
            any = true;
        }
        at += n;
    }
    return any;
}

bool sync_grads(gb_torch_learner *l, const std::vector<torch::Tensor> &params)
{
    if (!l->group) {
        for (const auto &p : params)
            if (p.grad().defined())
                return true;
        return false;
    }
    torch::NoGradGuard no_grad;
    const size_t cap = l->bucket_bytes ? l->bucket_bytes : default_bucket_bytes;
    bool any = false;
    for (size_t first = 0; first < params.size();) {
        const torch::ScalarType t = params[first].scalar_type();
        if (t != torch::kFloat32 && t != torch::kFloat64)
            throw Failure(GB_EUNSUPPORTED, std::string("data-parallel training: parameter of "
                                                       "dtype ") + c10::toString(t));
        size_t last = first + 1, bytes = params[first].nbytes();
        while (last < params.size() && params[last].scalar_type() == t &&
               bytes + params[last].nbytes() <= cap)
            bytes += params[last++].nbytes();
        any |= sync_bucket(l, params, first, last);
        first = last;
    }
    return any;
}

void copy_tensors(const NamedTensors &dst, const NamedTensors &src)
{
    torch::NoGradGuard no_grad;
    TORCH_CHECK(dst.size() == src.size(), "target network differs from the online network");
    for (size_t i = 0; i < dst.size(); i++)
        dst[i].second.copy_(src[i].second);
}

void polyak_update(const NamedTensors &dst, const NamedTensors &src, double tau)
{
    torch::NoGradGuard no_grad;
    TORCH_CHECK(dst.size() == src.size(), "target network differs from the online network");
    for (size_t i = 0; i < dst.size(); i++)
        if (dst[i].second.is_floating_point())
            dst[i].second.mul_(1.0 - tau).add_(src[i].second, tau);
        else
            dst[i].second.copy_(src[i].second);
}

NamedTensors module_tensors(torch::nn::Module &m)
{
    NamedTensors v;
    for (const auto &kv : m.named_parameters(true))
        v.emplace_back(kv.key(), kv.value());
    for (const auto &kv : m.named_buffers(true))
        v.emplace_back(kv.key(), kv.value());
    return v;
}
} // namespace gbt
