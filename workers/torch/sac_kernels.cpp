// workers/torch/sac_kernels.cpp: SAC's step on gearbox's own C (trainer.kernels: gearbox) for a
// plain MLP actor and critics on the cpu: every network's forward and backward (mlp_train.h),
// the squashed Gaussian's draws and their gradients (squashed.h), the losses in fused_losses.c
// as before. The gradients go into libtorch's flat gradients, so the optimisers, the clipping,
// the data-parallel all-reduce and the Polyak update run as before (sac.cpp). The noise comes
// from sac_noise in the autograd path's order and shapes.
#include "workers/torch/sac.hpp"
#include "workers/torch/mlp_program.hpp"
#include "workers/torch/squashed.h"
#include "workers/torch/targets.h"

#include <cstring>
#include <vector>

namespace gbt {

// The actor's torso and heads, the critics (q1, q2, q1t, q2t) and a step's buffers (kept: no
// allocation a step once the batch's size has been seen).
struct SacKernels {
    MlpPass torso, mean, raw, q[4];
    int D = 0, A = 0;      // observation features, action dimensions
    float log_scale = 0.0f; // sum of the log action scales (the squashed density's)
    // the last draw: heads' outputs (inside their passes), noise, log_std, u, a, log-probability
    const float *h = nullptr, *m = nullptr, *r = nullptr;
    torch::Tensor eps;
    std::vector<float> ls, u, a, logp;
    std::vector<float> xc, dxc, ga, g1, g2, gl, dm, dr, dh, dh2;
};

std::shared_ptr<SacKernels> sac_kernels_for(gb_torch_learner *l)
{
    gb_torch_model *m = l->model;
    auto k = std::make_shared<SacKernels>();
    if (l->cfg.trainer.kernels != GB_KERNELS_GEARBOX || !l->device.is_cpu() ||
        !m->net->mlp_torso_heads(&k->torso.chain, &k->mean.chain, &k->raw.chain) ||
        m->net->parameters()[0].scalar_type() != torch::kFloat32)
        return nullptr;
    k->A = (int)m->space.action_dim;
    k->D = (int)k->mean.chain.layers[0]->options.in_features();
    if (!k->torso.chain.layers.empty())
        k->D = (int)k->torso.chain.layers[0]->options.in_features();
    gbt::Critic *qs[4] = {&l->q1, &l->q2, &l->q1t, &l->q2t};
    for (int i = 0; i < 4; i++) {
        MlpProgram p(GB_PRECISION_FP32, k->D + k->A);
        int last = -1;
        if (!p.torso((*qs[i])->body, -1, &last) || !p.chain_to(last, &k->q[i].chain) ||
            k->q[i].chain.layers.size() != p.size() ||
            (*qs[i])->parameters()[0].scalar_type() != torch::kFloat32)
            return nullptr;
    }
    if (m->act_scale.defined())
        k->log_scale = torch::log(m->act_scale.to(torch::kCPU)).sum().item<float>();
    return k;
}

// A draw of actions for n rows x ([n, D]) with the learner's noise (sac_noise, as sac.cpp's
// sample): the heads' forward (grads: for the actor's backward) and the squashed draw into k.
static void draw(gb_torch_learner *l, SacKernels &k, const float *x, int n, bool grads)
{
    k.h = k.torso.forward(x, n, grads);
    k.m = k.mean.forward(k.h, n, grads);
    k.r = k.raw.forward(k.h, n, grads);
    k.eps = sac_noise(l, {n, k.A});
    const size_t e = (size_t)n * (size_t)k.A;
    k.ls.resize(e);
    k.u.resize(e);
    k.a.resize(e);
    k.logp.resize((size_t)n);
    gb_squashed_draw(n, k.A, k.m, k.r, k.eps.data_ptr<float>(), k.log_scale, k.ls.data(),
                     k.u.data(), k.a.data(), k.logp.data());
}

// The critics' input rows [n, D + A] into k.xc: each observation row, then its action.
static const float *critic_rows(SacKernels &k, const float *of, const float *a, int n)
{
    const size_t w = (size_t)(k.D + k.A);
    k.xc.resize((size_t)n * w);
    for (int i = 0; i < n; i++) {
        std::memcpy(&k.xc[i * w], of + (size_t)i * k.D, sizeof(float) * (size_t)k.D);
        std::memcpy(&k.xc[i * w + k.D], a + (size_t)i * k.A, sizeof(float) * (size_t)k.A);
    }
    return k.xc.data();
}

torch::Tensor sac_kernels_target(gb_torch_learner *l, const Transitions &tr,
                                 const torch::Tensor &of2, double alpha)
{
    SacKernels &k = *l->sac_kernels;
    const int n = (int)tr.N;
    const torch::Tensor x = of2.contiguous();
    draw(l, k, x.data_ptr<float>(), n, false);
    const float *xc = critic_rows(k, x.data_ptr<float>(), k.a.data(), n);
    const float *q1t = k.q[2].forward(xc, n, false), *q2t = k.q[3].forward(xc, n, false);
    const float *r = tr.ret.data_ptr<float>(), *disc = tr.disc.data_ptr<float>();
    const float al = (float)alpha;
    torch::Tensor y = torch::empty({n});
    float *yp = y.data_ptr<float>();
    for (int i = 0; i < n; i++) // (sac.cpp's sac_target)
        yp[i] = r[i] + disc[i] * ((q1t[i] < q2t[i] ? q1t[i] : q2t[i]) - al * k.logp[(size_t)i]);
    return y;
}

void sac_kernels_critic(gb_torch_learner *l, const Transitions &tr, const torch::Tensor &a,
                        const torch::Tensor &y, SacStep &s)
{
    SacKernels &k = *l->sac_kernels;
    const int n = (int)tr.N;
    const torch::Tensor of = s.of.contiguous(), ac = a.contiguous(), yc = y.contiguous();
    l->opt_q->zero_grad(); // every gradient a view of the flat gradient, zeroed
    const float *xc = critic_rows(k, of.data_ptr<float>(), ac.data_ptr<float>(), n);
    const float *q1 = k.q[0].forward(xc, n, true), *q2 = k.q[1].forward(xc, n, true);
    torch::Tensor w = tr.weight.defined() ? tr.weight.contiguous() : torch::Tensor();
    s.q1 = torch::empty({n});
    std::memcpy(s.q1.data_ptr<float>(), q1, sizeof(float) * (size_t)n);
    s.td = torch::empty({n});
    k.g1.resize((size_t)n);
    k.g2.resize((size_t)n);
    s.qloss = gb_torch_sac_critic_fused(q1, q2, yc.data_ptr<float>(),
                                        w.defined() ? w.data_ptr<float>() : nullptr, n,
                                        k.g1.data(), k.g2.data(), s.td.data_ptr<float>());
    k.q[0].backward(xc, n, k.g1.data(), nullptr);
    k.q[1].backward(xc, n, k.g2.data(), nullptr);
}

double sac_kernels_actor(gb_torch_learner *l, const SacStep &s, double alpha, double *logp_mean)
{
    SacKernels &k = *l->sac_kernels;
    const torch::Tensor of = s.of.contiguous();
    const int n = (int)of.size(0), A = k.A, w = k.D + A;
    const size_t e = (size_t)n * (size_t)A;
    l->opt->zero_grad(); // every gradient a view of the flat gradient, zeroed
    const float *x = of.data_ptr<float>();
    draw(l, k, x, n, true);
    // the critics on the fresh actions, their weights' gradients not taken (the actor's alone)
    const float *xc = critic_rows(k, x, k.a.data(), n);
    const float *q1 = k.q[0].forward(xc, n, false), *q2 = k.q[1].forward(xc, n, false);
    k.gl.resize((size_t)n);
    k.g1.resize((size_t)n);
    k.g2.resize((size_t)n);
    const double loss = gb_torch_sac_actor_fused(k.logp.data(), q1, q2, n, alpha, k.gl.data(),
                                                 k.g1.data(), k.g2.data(), logp_mean);
    // d loss / d a: through both critics' inputs (their action columns)
    k.dxc.resize((size_t)n * (size_t)w);
    k.ga.assign(e, 0.0f);
    for (int c = 0; c < 2; c++) {
        k.q[c].backward(xc, n, (c ? k.g2 : k.g1).data(), k.dxc.data());
        for (int i = 0; i < n; i++)
            for (int j = 0; j < A; j++)
                k.ga[(size_t)i * A + j] += k.dxc[(size_t)i * w + k.D + j];
    }
    k.dm.resize(e);
    k.dr.resize(e);
    gb_squashed_backward(n, A, k.m, k.r, k.eps.data_ptr<float>(), k.ls.data(), k.u.data(),
                         k.a.data(), k.ga.data(), k.gl.data(), k.dm.data(), k.dr.data());
    // both heads read the torso's output: its gradient is the sum of theirs
    const size_t hw = (size_t)n * (size_t)k.mean.chain.layers[0]->options.in_features();
    k.dh.resize(hw);
    k.dh2.resize(hw);
    k.mean.backward(k.h, n, k.dm.data(), k.dh.data());
    k.raw.backward(k.h, n, k.dr.data(), k.dh2.data());
    for (size_t i = 0; i < hw; i++)
        k.dh[i] += k.dh2[i];
    k.torso.backward(x, n, k.dh.data(), nullptr);
    return loss;
}

} // namespace gbt
