// workers/torch/ppo_kernels.cpp: PPO's minibatch step on gearbox's own C (trainer.kernels:
// gearbox) for a plain MLP with separate actor and critic torsos on the cpu: both chains'
// forward and backward (mlp_train.h), the distribution's log-probabilities and entropy and their
// gradients in loops and the clipped objective (fused_losses.c, which the trainer's learner
// without libtorch shares: workers/roles/ppo_mlp.c). The gradients go into libtorch's flat
// gradient, so the optimiser, the clipping and the data-parallel all-reduce run as before
// (ppo.cpp's epochs). The same arithmetic as the autograd path (ppo.cpp's fused_minibatch, the
// distributions of distributions.cpp), in float as libtorch's.
#include "workers/torch/ppo.hpp"
#include "workers/torch/targets.h"

#include <cstring>
#include <vector>

namespace gbt {

// The chains, log_std (boxes), and a step's buffers (kept: no allocation a step once the
// minibatch's size has been seen).
struct PpoKernels {
    MlpPass actor, critic;
    torch::Tensor log_std; // boxes: the parameter; its gradient a view of the flat gradient
    std::vector<float> x, aux, logp, ent, g_logp, g_value, dpi, act_f;
    std::vector<int64_t> acts;
};

std::shared_ptr<PpoKernels> ppo_kernels_for(gb_torch_learner *l)
{
    Net &net = *l->model->net;
    auto k = std::make_shared<PpoKernels>();
    if (l->cfg.trainer.kernels != GB_KERNELS_GEARBOX || !l->device.is_cpu() ||
        !net.mlp_chains(&k->actor.chain, &k->critic.chain) || k->actor.chain.layers.empty() ||
        k->critic.chain.layers.empty() ||
        net.parameters()[0].scalar_type() != torch::kFloat32)
        return nullptr;
    if (!l->model->space.discrete) {
        for (auto &kv : net.named_tensors())
            if (kv.first == "log_std")
                k->log_std = kv.second;
        if (!k->log_std.defined())
            return nullptr;
    }
    return k;
}

bool ppo_kernels_apply(const gb_torch_learner *l, const torch::Tensor &obs)
{
    return l->ppo_kernels && obs.defined() && obs.device().is_cpu() &&
           obs.scalar_type() == torch::kFloat32;
}

Heads ppo_kernels_forward(gb_torch_learner *l, const torch::Tensor &obs)
{
    PpoKernels &k = *l->ppo_kernels;
    const torch::Tensor x = obs.contiguous();
    const int n = (int)x.size(0);
    const float *pa = k.actor.forward(x.data_ptr<float>(), n, false);
    const float *pv = k.critic.forward(x.data_ptr<float>(), n, false);
    const int A = k.actor.out();
    torch::Tensor a = torch::empty({n, A}), v = torch::empty({n});
    std::memcpy(a.data_ptr<float>(), pa, sizeof(float) * (size_t)n * (size_t)A);
    std::memcpy(v.data_ptr<float>(), pv, sizeof(float) * (size_t)n);
    Heads h;
    if (l->model->space.discrete) {
        h.logits = a;
    } else {
        h.mean = a;
        h.log_std = k.log_std.detach().expand_as(a);
    }
    h.value = v;
    return h;
}

gb_torch_ppo_terms ppo_kernels_minibatch(gb_torch_learner *l, const PpoSteps &S,
                                         const torch::Tensor &idx, const gb_torch_ppo_coefs &c)
{
    PpoKernels &k = *l->ppo_kernels;
    const bool discrete = l->model->space.discrete;
    const torch::Tensor o = S.o.contiguous(), rows = idx.contiguous();
    const int64_t n = rows.size(0), in = o.numel() / std::max<int64_t>(1, S.N);
    const int64_t *row = rows.data_ptr<int64_t>();
    // the minibatch's observations and its steps' other inputs (fused_losses.c's aux rows)
    const float *obs = o.data_ptr<float>();
    const float *cols[4] = {S.old_logp.data_ptr<float>(), S.A.data_ptr<float>(),
                            S.V0.data_ptr<float>(), S.R.data_ptr<float>()};
    k.x.resize((size_t)(n * in));
    k.aux.resize((size_t)(4 * n));
    for (int64_t i = 0; i < n; i++) {
        std::memcpy(&k.x[(size_t)(i * in)], obs + row[i] * in, sizeof(float) * (size_t)in);
        for (int j = 0; j < 4; j++)
            k.aux[(size_t)(4 * i + j)] = cols[j][row[i]];
    }
    l->opt->zero_grad(); // every gradient a view of the flat gradient, zeroed
    const int ni = (int)n;
    const float *pi = k.actor.forward(k.x.data(), ni, true);
    const float *v = k.critic.forward(k.x.data(), ni, true);
    const int A = k.actor.out();
    k.dpi.assign(pi, pi + n * A);
    k.logp.resize((size_t)n);
    k.ent.resize((size_t)n);
    k.g_logp.resize((size_t)n);
    k.g_value.resize((size_t)n);
    std::vector<int64_t> &acts = k.acts;
    const float *ls = nullptr;
    if (discrete) {
        const int64_t *a = S.act.data_ptr<int64_t>();
        acts.resize((size_t)n);
        for (int64_t i = 0; i < n; i++)
            acts[(size_t)i] = a[row[i]];
        gb_torch_categorical_terms(k.dpi.data(), n, A, acts.data(), k.logp.data(),
                                   k.ent.data());
    } else {
        const float *a = S.act.data_ptr<float>();
        k.act_f.resize((size_t)(n * A));
        for (int64_t i = 0; i < n; i++)
            std::memcpy(&k.act_f[(size_t)(i * A)], a + row[i] * A, sizeof(float) * (size_t)A);
        ls = k.log_std.data_ptr<float>();
        gb_torch_gaussian_terms(k.dpi.data(), n, A, ls, k.act_f.data(), k.logp.data(),
                                k.ent.data());
    }
    gb_torch_ppo_terms terms = {};
    for (int64_t i = 0; i < n; i++)
        terms.entropy += k.ent[(size_t)i];
    terms.entropy /= (double)std::max<int64_t>(1, n);
    gb_torch_ppo_fused(n, k.logp.data(), v, k.aux.data(), &c, k.g_logp.data(), k.g_value.data(),
                       &terms);
    // the entropy's gradient only where it counts (as the autograd path, which then skips it)
    const float ge = c.entropy_coef != 0.0 ? (float)(-c.entropy_coef / (double)n) : 0.0f;
    if (discrete)
        gb_torch_categorical_grads(k.dpi.data(), n, A, acts.data(), k.ent.data(),
                                   k.g_logp.data(), ge);
    else
        gb_torch_gaussian_grads(k.dpi.data(), n, A, ls, k.g_logp.data(), ge,
                       k.log_std.grad().data_ptr<float>());
    k.actor.backward(k.x.data(), ni, k.dpi.data(), nullptr);
    k.critic.backward(k.x.data(), ni, k.g_value.data(), nullptr);
    return terms;
}

} // namespace gbt
