// workers/torch/sac.cpp: SAC over trajectory chunks: twin Q critics with Polyak targets, a
// tanh-squashed Gaussian actor, learned temperature against a target entropy. On the CPU a plain
// MLP actor's and critics' forward and backward run in gearbox's own C (sac_kernels.cpp,
// trainer.kernels), the rest of the step as with libtorch's.
#include "workers/torch/sac.hpp"
#include "workers/torch/testing.h"
#include "workers/torch/targets.h"

#include <cmath>
#include <tuple>
#include <vector>

namespace gbt {

torch::Tensor sac_noise(gb_torch_learner *l, at::IntArrayRef shape)
{
    if (!l->noise_fill)
        return torch::randn(shape, l->gen);
    torch::Tensor eps = torch::empty(shape, torch::kFloat32); // contiguous: row-major
    l->noise_fill(l->noise_ctx, eps.data_ptr<float>(), eps.numel());
    return eps;
}

namespace {

torch::Tensor sac_target(const torch::Tensor &r, const torch::Tensor &disc,
                         const torch::Tensor &q1t, const torch::Tensor &q2t,
                         const torch::Tensor &logp_next, double alpha)
{
    return r + disc * (torch::min(q1t, q2t) - alpha * logp_next);
}

torch::Tensor wmean(const torch::Tensor &x, const torch::Tensor &w)
{
    return (w.defined() ? x * w : x).mean();
}

torch::Tensor sac_critic_loss(const torch::Tensor &q1, const torch::Tensor &q2,
                              const torch::Tensor &y, const torch::Tensor &w)
{
    return wmean((q1 - y).pow(2), w) + wmean((q2 - y).pow(2), w);
}

torch::Tensor sac_actor_loss(double alpha, const torch::Tensor &logp_pi, const torch::Tensor &q1,
                             const torch::Tensor &q2)
{
    return (alpha * logp_pi - torch::min(q1, q2)).mean();
}

torch::Tensor sac_alpha_loss(const torch::Tensor &log_alpha, const torch::Tensor &logp_pi,
                             double target_entropy)
{
    return -(log_alpha * (logp_pi + target_entropy)).mean();
}

// Reparameterised sample from the actor: returns (action in [-1, 1], its log-prob).
std::pair<torch::Tensor, torch::Tensor> sample(gb_torch_learner *l, const Heads &h)
{
    torch::Tensor eps = sac_noise(l, h.mean.sizes()).to(h.mean.device());
    torch::Tensor u = h.mean + torch::exp(h.log_std) * eps;
    return {torch::tanh(u), squashed_logp(h.mean, h.log_std, u, l->model->act_scale)};
}

} // namespace

// The critics' loss on the valid steps (o, a) against y, and its gradients; fills s.td and
// s.qloss. On the CPU the loss and its gradients are one pass of C (fused_losses.c), and
// backward runs from the critics' outputs.
static void critic_backward(gb_torch_learner *l, const Transitions &tr, const torch::Tensor &a,
                            const torch::Tensor &y, SacStep &s)
{
    const int64_t N = tr.N;
    s.q1 = l->q1->forward(s.of, a);
    torch::Tensor q2 = l->q2->forward(s.of, a);
    l->opt_q->zero_grad();
    if (l->device.is_cpu()) {
        torch::Tensor q1d = s.q1.detach().contiguous(), q2d = q2.detach().contiguous();
        torch::Tensor yc = y.contiguous();
        torch::Tensor w = tr.weight.defined() ? tr.weight.contiguous() : torch::Tensor();
        torch::Tensor g1 = torch::empty({N}), g2 = torch::empty({N});
        s.td = torch::empty({N});
        s.qloss = gb_torch_sac_critic_fused(q1d.data_ptr<float>(), q2d.data_ptr<float>(),
                                            yc.data_ptr<float>(),
                                            w.defined() ? w.data_ptr<float>() : nullptr, N,
                                            g1.data_ptr<float>(), g2.data_ptr<float>(),
                                            s.td.data_ptr<float>());
        torch::autograd::backward({s.q1, q2}, {g1, g2});
    } else {
        torch::Tensor lt = sac_critic_loss(s.q1, q2, y, tr.weight);
        lt.backward();
        s.qloss = lt.item<double>();
        s.td = (y - s.q1.detach()).abs().to(torch::kCPU).to(torch::kFloat32).contiguous();
    }
}

// The critics' step: targets from the next observations (the target critics and a fresh action
// sample), the loss, the optimiser step. false: no valid step here nor on any rank of the group
// (nothing changes, priorities written for an empty batch).
static bool critic_step(gb_torch_learner *l, const gb_torch_batch *b, const Transitions &tr,
                        double alpha, double lr, const std::vector<torch::Tensor> &qp,
                        float *prio, SacStep &s)
{
    const gb_config_algorithm &ac = l->cfg.trainer.algorithm;
    gb_torch_model *m = l->model;
    const int64_t B = b->B, T = b->T, A = m->space.action_dim;
    if (tr.N > 0) {
        torch::Tensor a_env = cpu_view(b->action, {B * T, A}, torch::kFloat32)
                                  .index_select(0, tr.step_idx)
                                  .to(l->device);
        torch::Tensor a = ((a_env - m->act_bias) / m->act_scale).clamp(-1.0, 1.0);
        torch::Tensor obs = batch_obs(l, b);
        torch::Tensor o2 = obs.index_select(0, tr.brow_idx);
        s.o = obs.index_select(0, tr.row_idx);
        s.of = flat(s.o);
        torch::Tensor of2 = flat(o2), y;
        if (l->sac_kernels) { // (only where they apply: sac_init)
            y = sac_kernels_target(l, tr, of2, alpha);
            sac_kernels_critic(l, tr, a, y, s);
        } else {
            {
                torch::NoGradGuard no_grad;
                auto [a2, logp2] = sample(l, m->net->forward(o2));
                y = sac_target(tr.ret, tr.disc, l->q1t->forward(of2, a2),
                               l->q2t->forward(of2, a2), logp2, alpha);
            }
            critic_backward(l, tr, a, y, s);
        }
    } else {
        td_priorities(tr, B, T, s.td, prio);
        drop_grads(qp);
    }
    if (!sync_grads(l, qp))
        return false;
    l->opt_q->set_lr(lr);
    l->opt_q->clip_grad_norm(ac.max_grad_norm);
    l->opt_q->step();
    return true;
}

// The actor's step: gradients for the actor's parameters pp alone (autograd::grad leaves the
// critics' weight gradients, which the actor's step does not use, uncomputed). *aloss and
// *logp_mean: the loss and the mean log-probability of the fresh actions (0 without valid steps).
static void actor_step(gb_torch_learner *l, const SacStep &s, int64_t N, double alpha,
                       const std::vector<torch::Tensor> &pp, gb_torch_stats *st, double *aloss,
                       double *logp_mean)
{
    const gb_config_algorithm &ac = l->cfg.trainer.algorithm;
    if (N > 0 && l->sac_kernels) {
        *aloss = sac_kernels_actor(l, s, alpha, logp_mean);
    } else if (N > 0) {
        auto [api, logp] = sample(l, l->model->net->forward(s.o));
        torch::Tensor q1p = l->q1->forward(s.of, api), q2p = l->q2->forward(s.of, api);
        std::vector<torch::Tensor> outs, grads;
        if (l->device.is_cpu()) {
            torch::Tensor lp = logp.detach().contiguous(), q1d = q1p.detach().contiguous(),
                          q2d = q2p.detach().contiguous();
            torch::Tensor gl = torch::empty({N}), gq1 = torch::empty({N}),
                          gq2 = torch::empty({N});
            *aloss = gb_torch_sac_actor_fused(lp.data_ptr<float>(), q1d.data_ptr<float>(),
                                              q2d.data_ptr<float>(), N, alpha,
                                              gl.data_ptr<float>(), gq1.data_ptr<float>(),
                                              gq2.data_ptr<float>(), logp_mean);
            outs = {logp, q1p, q2p};
            grads = {gl, gq1, gq2};
        } else {
            torch::Tensor lt = sac_actor_loss(alpha, logp, q1p, q2p);
            *aloss = lt.item<double>();
            *logp_mean = logp.detach().mean().item<double>();
            outs = {lt};
        }
        std::vector<torch::Tensor> g = torch::autograd::grad(outs, pp, grads, c10::nullopt,
                                                             false, /*allow_unused=*/true);
        l->opt->zero_grad(); // every gradient its zeroed flat view; an unused one stays 0
        for (size_t i = 0; i < pp.size(); i++)
            if (g[i].defined())
                pp[i].grad().copy_(g[i]);
    } else {
        drop_grads(pp);
    }
    sync_grads(l, pp);
    l->opt->set_lr(st->lr);
    st->grad_norm = l->opt->clip_grad_norm(ac.max_grad_norm);
    l->opt->step();
}

// The temperature's step: d/d log_alpha of -mean(log_alpha (logp + target_entropy)).
static void alpha_step(gb_torch_learner *l, int64_t N, double logp_mean)
{
    const std::vector<torch::Tensor> ap{l->log_alpha};
    if (N > 0) {
        l->opt_alpha->zero_grad();
        l->log_alpha.mutable_grad().fill_(-(logp_mean + l->target_entropy));
    } else {
        drop_grads(ap);
    }
    sync_grads(l, ap);
    l->opt_alpha->step();
}

// Each of the three steps (critics, actor, temperature): with valid steps, a loss and its
// gradients; without, no gradient, and only a group's other ranks (data-parallel) can make the
// step happen.
static void sac_train(gb_torch_learner *l, const gb_torch_batch *b, gb_torch_stats *st, float *prio)
{
    const gb_config_algorithm &ac = l->cfg.trainer.algorithm;
    const gb_config_sac &sc = ac.sac;
    gb_torch_model *m = l->model;

    Transitions tr = valid_transitions(b, 1, ac.gamma, l->device);
    const int64_t N = tr.N;
    st->samples = N;
    st->lr = learner_lr(l, ac.lr);
    std::vector<torch::Tensor> qp = l->q1->parameters(), pp = m->net->parameters();
    for (auto &p : l->q2->parameters())
        qp.push_back(p);
    double alpha = std::exp(l->log_alpha.item<double>());
    SacStep s;
    if (!critic_step(l, b, tr, alpha, st->lr, qp, prio, s))
        return; // no valid step here (nor on any rank of the group): nothing changes
    double aloss = 0.0, logp_mean = 0.0;
    actor_step(l, s, N, alpha, pp, st, &aloss, &logp_mean);
    if (sc.learn_alpha)
        alpha_step(l, N, logp_mean);

    torch::NoGradGuard no_grad;
    l->targets.polyak(sc.tau);
    st->alpha = std::exp(l->log_alpha.item<double>());
    st->gradient_steps = 1;
    if (N == 0)
        return;

    st->value_loss = s.qloss;
    st->policy_loss = aloss;
    st->loss = st->value_loss + st->policy_loss;
    st->entropy = -logp_mean;
    st->q_mean = s.q1.detach().mean().item<double>();
    st->td_abs_mean = td_priorities(tr, b->B, b->T, s.td, prio);
}

// SAC: twin critics and their Polyak targets, and the learned temperature.
static void sac_init(gb_torch_learner *l, const gb_torch_space *sp, uint64_t seed)
{
    const gb_config_algorithm &ac = l->cfg.trainer.algorithm;
    int64_t obs_dim = 1;
    for (int i = 0; i < sp->obs_ndim; i++)
        obs_dim *= sp->obs_shape[i];
    // Critics always come from policy.model's MLP settings (also when the actor is
    // TorchScript).
    gb_config_model mc = l->cfg.policy.model;
    {
        std::lock_guard<std::mutex> lock(init_mutex());
        torch::manual_seed(seed + 1);
        l->q1 = Critic(mc, obs_dim + sp->action_dim);
        l->q2 = Critic(mc, obs_dim + sp->action_dim);
        l->q1t = Critic(mc, obs_dim + sp->action_dim);
        l->q2t = Critic(mc, obs_dim + sp->action_dim);
    }
    for (auto *q : {&l->q1, &l->q2, &l->q1t, &l->q2t})
        (*q)->to(l->device);
    copy_tensors(module_tensors(*l->q1t), module_tensors(*l->q1));
    copy_tensors(module_tensors(*l->q2t), module_tensors(*l->q2));
    for (auto *q : {&l->q1t, &l->q2t})
        for (auto &p : (*q)->parameters())
            p.set_requires_grad(false);
    std::vector<torch::Tensor> qp = l->q1->parameters();
    for (auto &p : l->q2->parameters())
        qp.push_back(p);
    l->opt = std::make_unique<FlatAdam>(l->model->net->parameters(), ac.lr);
    l->opt_q = std::make_unique<FlatAdam>(qp, ac.lr);
    // both targets in one flat tensor laid out as opt_q's: q1's parameters, then q2's (then
    // their buffers, if any)
    NamedTensors dst, src;
    for (bool buffers : {false, true})
        for (auto *pair : {&l->q1t, &l->q1, &l->q2t, &l->q2}) {
            NamedTensors &to = (pair == &l->q1t || pair == &l->q2t) ? dst : src;
            for (const auto &kv : buffers ? (*pair)->named_buffers(true)
                                          : (*pair)->named_parameters(true))
                to.emplace_back(kv.key(), kv.value());
        }
    l->targets.link(dst, src, qp.size(), l->opt_q->flat_params());
    l->log_alpha = torch::full({1}, std::log(ac.sac.init_alpha),
                               torch::TensorOptions().device(l->device))
                       .set_requires_grad(true);
    l->opt_alpha =
        std::make_unique<FlatAdam>(std::vector<torch::Tensor>{l->log_alpha}, ac.sac.alpha_lr);
    l->target_entropy = std::isnan(ac.sac.target_entropy) ? -(double)sp->action_dim
                                                          : ac.sac.target_entropy;
    l->sac_kernels = sac_kernels_for(l);
}

const Algorithm sac_algorithm = {"sac", sac_init, sac_train};

} // namespace gbt

// So that a test can train SAC's learner without libtorch (workers/roles/sac_mlp.h) beside this
// one from the same state on the same noise and compare their parameters: the generator's draws
// are libtorch's own and no C learner could repeat them.
extern "C" int gbt_learner_set_noise(gb_torch_learner *l, void (*fill)(void *, float *, int64_t),
                                     void *ctx, gb_error *err)
{
    if (!l->opt_alpha)
        return gb_error_set(err, GB_EINVAL, "learner: set_noise is sac's noise, this learner "
                            "is %s's", gbt::algorithm_for(l->cfg.trainer.algorithm.name).name);
    l->noise_fill = fill;
    l->noise_ctx = fill ? ctx : nullptr;
    return 0;
}

extern "C" int gb_torch_sac_loss(const float *q1, const float *q2, const float *q1t,
                                 const float *q2t, const float *r, const float *disc,
                                 const float *logp_next, const float *q1_pi, const float *q2_pi,
                                 const float *logp_pi, const float *w, int64_t n,
                                 double log_alpha, double target_entropy, double out[4],
                                 gb_error *err)
{
    return gb_torch_guard(err, "sac_loss", [&] {
        auto t = [&](const float *p) { return gbt::cpu_view(p, {n}, torch::kFloat32); };
        double alpha = std::exp(log_alpha);
        torch::Tensor y = gbt::sac_target(t(r), t(disc), t(q1t), t(q2t), t(logp_next), alpha);
        torch::Tensor wt = w ? t(w) : torch::Tensor();
        out[0] = gbt::sac_critic_loss(t(q1), t(q2), y, wt).item<double>();
        out[1] = gbt::sac_actor_loss(alpha, t(logp_pi), t(q1_pi), t(q2_pi)).item<double>();
        out[2] = gbt::sac_alpha_loss(torch::full({1}, log_alpha), t(logp_pi), target_entropy)
                     .item<double>();
        out[3] = y.mean().item<double>();
        return 0;
    });
}
