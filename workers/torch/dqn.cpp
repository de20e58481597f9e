// workers/torch/dqn.cpp: DQN over trajectory chunks: n-step targets inside chunks, double Q,
// target network (hard or Polyak), Huber loss, prioritized-replay weights and new priorities;
// with a core, R2D2 (the chunks replayed from their stored state after a burn-in: dqn_seq.cpp)
// and its value rescaling. On the CPU a plain MLP's forward and backward run in gearbox's own C
// (mlp_train.h, trainer.kernels), the rest of the step as with libtorch's.
#include "workers/torch/algorithm.hpp"
#include "workers/torch/mlp_program.hpp"
#include "workers/torch/testing.h"
#include "workers/torch/targets.h"

#include <cstring>
#include <vector>

namespace gbt {

torch::Tensor huber(const torch::Tensor &x, double delta)
{
    if (delta <= 0.0)
        return 0.5 * x * x;
    torch::Tensor ax = x.abs();
    return torch::where(ax <= delta, 0.5 * x * x, delta * (ax - 0.5 * delta));
}

static torch::Tensor dqn_loss(const torch::Tensor &q, const torch::Tensor &y,
                              const torch::Tensor &w, double delta)
{
    torch::Tensor l = huber(y - q, delta);
    return (w.defined() ? l * w : l).mean();
}

// R2D2's h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x and its inverse (Pohlen et al., 2018).
static const double rescale_eps = 1e-3;
torch::Tensor value_h(const torch::Tensor &x)
{
    return x.sign() * ((x.abs() + 1.0).sqrt() - 1.0) + rescale_eps * x;
}
torch::Tensor value_h_inverse(const torch::Tensor &x)
{
    const double e = rescale_eps;
    torch::Tensor r = ((1.0 + 4.0 * e * (x.abs() + 1.0 + e)).sqrt() - 1.0) / (2.0 * e);
    return x.sign() * (r * r - 1.0);
}

// The online and target networks' layers for mlp_train.h, and the step's buffers (kept: no
// allocation a step once the batch's shape has been seen).
struct DqnKernels {
    MlpPass online, target;
    std::vector<float> xt, dq, q, y, grad;
};

// DQN's loss over tr on the online network's Q (every obs row) and the target network's (the
// bootstrap rows), its gradient added into the online parameters' (zeroed first); returns the
// loss, |TD| into td ([N], made here) and the mean of the trained Q into *q_mean. The same
// arithmetic as the libtorch path below (double Q: the first of equal maxima, as argmax).
static double dqn_kernels_step(gb_torch_learner *l, DqnKernels &k, const torch::Tensor &obs,
                               const Transitions &tr, const torch::Tensor &act,
                               torch::Tensor *td, double *q_mean)
{
    const gb_config_dqn &dc = l->cfg.trainer.algorithm.dqn;
    const torch::Tensor x = obs.contiguous();
    const int R = (int)x.size(0), in = (int)(x.numel() / (R ? R : 1)), N = (int)tr.N;
    l->opt->zero_grad();
    const int A = k.online.out();
    const float *xp = x.data_ptr<float>();
    const float *Q = k.online.forward(xp, R, true);
    const int64_t *row = tr.row_idx.data_ptr<int64_t>(), *brow = tr.brow_idx.data_ptr<int64_t>();
    const int64_t *a = act.data_ptr<int64_t>();
    k.xt.resize((size_t)N * (size_t)in);
    for (int i = 0; i < N; i++)
        std::memcpy(&k.xt[(size_t)i * in], xp + brow[i] * in, sizeof(float) * (size_t)in);
    const float *Qt = k.target.forward(k.xt.data(), N, false);
    const float *ret = tr.ret.data_ptr<float>(), *disc = tr.disc.data_ptr<float>();
    k.q.resize((size_t)N);
    k.y.resize((size_t)N);
    k.grad.resize((size_t)N);
    double sum = 0.0;
    for (int i = 0; i < N; i++) {
        const float *qb = Q + brow[i] * A, *qt = Qt + (size_t)i * A;
        int best = 0;
        for (int j = 1; j < A; j++)
            if (dc.double_q ? qb[j] > qb[best] : qt[j] > qt[best])
                best = j;
        k.q[(size_t)i] = Q[row[i] * A + a[i]];
        k.y[(size_t)i] = ret[i] + disc[i] * qt[best];
        sum += k.q[(size_t)i];
    }
    *q_mean = sum / N;
    torch::Tensor w = tr.weight.defined() ? tr.weight.contiguous() : torch::Tensor();
    *td = torch::empty({N});
    const double loss = gb_torch_huber_td(k.q.data(), k.y.data(),
                                          w.defined() ? w.data_ptr<float>() : nullptr, N,
                                          dc.huber_delta, k.grad.data(), td->data_ptr<float>());
    k.dq.assign((size_t)R * (size_t)A, 0.0f);
    for (int i = 0; i < N; i++)
        k.dq[(size_t)(row[i] * A + a[i])] += k.grad[(size_t)i];
    k.online.backward(xp, R, k.dq.data(), nullptr);
    return loss;
}

static void dqn_train(gb_torch_learner *l, const gb_torch_batch *b, gb_torch_stats *st, float *prio)
{
    const gb_config_algorithm &ac = l->cfg.trainer.algorithm;
    const gb_config_dqn &dc = ac.dqn;
    gb_torch_model *m = l->model;
    const int64_t B = b->B, T = b->T;
    torch::Device dev = l->device;
    const bool recurrent = m->net->state_size() > 0;

    Transitions tr = valid_transitions(b, dc.n_step, ac.gamma, dev);
    if (recurrent)
        tr = after_burn_in(tr, T, dc.burn_in);
    const int64_t N = tr.N;
    st->samples = N;
    st->lr = learner_lr(l, ac.lr);
    std::vector<torch::Tensor> params = m->net->parameters();
    torch::Tensor q, y, td; // td: |y - q| of the valid steps, CPU float [N]
    double loss = 0.0, q_mean = 0.0;
    torch::Tensor act, obs;
    if (N > 0) {
        act = cpu_view(b->action, {B * T}, torch::kInt64).index_select(0, tr.step_idx).to(dev);
        obs = batch_obs(l, b);
    }
    if (N > 0 && l->dqn_kernels) { // (only where they apply: dqn_init)
        loss = dqn_kernels_step(l, *l->dqn_kernels, obs, tr, act, &td, &q_mean);
    } else if (N > 0) {
        QRows rows; // [B*(T+1), n]; q with grad
        if (recurrent)
            rows = r2d2_rows(l, b, obs);
        else
            rows.q = m->net->forward(obs).q;
        torch::Tensor q_all = rows.q;
        q = q_all.index_select(0, tr.row_idx).gather(1, act.view({-1, 1})).squeeze(1);
        {
            torch::NoGradGuard no_grad;
            torch::Tensor qt = recurrent
                                   ? rows.qt.index_select(0, tr.brow_idx)
                                   : l->target->forward(obs.index_select(0, tr.brow_idx)).q;
            torch::Tensor next;
            if (dc.double_q) {
                torch::Tensor a_star =
                    q_all.detach().index_select(0, tr.brow_idx).argmax(1, true);
                next = qt.gather(1, a_star).squeeze(1);
            } else {
                next = std::get<0>(qt.max(1));
            }
            y = dc.value_rescale ? value_h(tr.ret + tr.disc * value_h_inverse(next))
                                 : tr.ret + tr.disc * next;
        }
        l->opt->zero_grad();
        if (dev.is_cpu() && q.scalar_type() == torch::kFloat32) {
            // the loss, its gradient and |TD| in one pass (fused_losses.c), then backward from q
            torch::Tensor qd = q.detach().contiguous(), yc = y.contiguous();
            torch::Tensor w = tr.weight.defined() ? tr.weight.contiguous() : torch::Tensor();
            torch::Tensor grad = torch::empty({N});
            td = torch::empty({N});
            loss = gb_torch_huber_td(qd.data_ptr<float>(), yc.data_ptr<float>(),
                                     w.defined() ? w.data_ptr<float>() : nullptr, N,
                                     dc.huber_delta, grad.data_ptr<float>(), td.data_ptr<float>());
            q.backward(grad);
        } else {
            torch::Tensor lt = dqn_loss(q, y, tr.weight, dc.huber_delta);
            lt.backward();
            loss = lt.item<double>();
            td = (y - q.detach()).abs().to(torch::kCPU).to(torch::kFloat32).contiguous();
        }
        q_mean = q.detach().mean().item<double>();
    } else {
        td_priorities(tr, B, T, td, prio);
        drop_grads(params); // data-parallel: in the group's step without a gradient of our own
    }
    if (!sync_grads(l, params))
        return; // no valid step here (nor on any rank of the group): nothing changes
    l->opt->set_lr(st->lr);
    st->grad_norm = l->opt->clip_grad_norm(ac.max_grad_norm);
    l->opt->step();
    st->gradient_steps = 1;

    torch::NoGradGuard no_grad;
    if (N > 0) {
        st->loss = st->value_loss = loss;
        st->q_mean = q_mean;
        st->td_abs_mean = td_priorities(tr, B, T, td, prio);
    }

    // target network
    if (dc.target_update == GB_TARGET_POLYAK)
        l->targets.polyak(dc.tau);
    else if (dc.target_update_every <= 1 || (l->train_steps + 1) % dc.target_update_every == 0)
        l->targets.copy();
}

// DQN: a frozen target copy of the acting network.
static void dqn_init(gb_torch_learner *l, const gb_torch_space *sp, uint64_t)
{
    gb_torch_model *m = l->model;
    {
        std::lock_guard<std::mutex> lock(init_mutex());
        l->target = make_net(&l->cfg, sp, l->device);
    }
    copy_tensors(l->target->named_tensors(), m->net->named_tensors());
    for (auto &p : l->target->parameters())
        p.set_requires_grad(false);
    l->target->set_training(false);
    l->opt = std::make_unique<FlatAdam>(m->net->parameters(), l->cfg.trainer.algorithm.lr);
    // after the optimiser has made the online parameters views of its flat tensor
    l->targets.link(l->target->named_tensors(), m->net->named_tensors(),
                    m->net->parameters().size(), l->opt->flat_params());
    // the forward and backward in C: a plain MLP (no core) with one head, on the cpu in
    // float32, without value rescaling (trainer.kernels)
    auto k = std::make_shared<DqnKernels>();
    MlpChain none, target_none;
    if (l->cfg.trainer.kernels == GB_KERNELS_GEARBOX && l->device.is_cpu() &&
        !l->cfg.trainer.algorithm.dqn.value_rescale &&
        m->net->mlp_chains(&k->online.chain, &none) && none.layers.empty() &&
        !k->online.chain.layers.empty() &&
        l->target->mlp_chains(&k->target.chain, &target_none) &&
        k->target.chain.acts == k->online.chain.acts &&
        m->net->parameters()[0].scalar_type() == torch::kFloat32)
        l->dqn_kernels = k;
}

const Algorithm dqn_algorithm = {"dqn", dqn_init, dqn_train};

} // namespace gbt

extern "C" int gb_torch_dqn_loss(const float *q, const float *y, const float *w, int64_t n,
                                 double delta, double *out, float *td, gb_error *err)
{
    return gb_torch_guard(err, "dqn_loss", [&] {
        auto t = [&](const float *p) { return gbt::cpu_view(p, {n}, torch::kFloat32); };
        torch::Tensor wt = w ? t(w) : torch::Tensor();
        *out = gbt::dqn_loss(t(q), t(y), wt, delta).item<double>();
        if (td)
            torch::from_blob(td, {n}, torch::kFloat32).copy_(t(y) - t(q));
        return 0;
    });
}

extern "C" int gb_torch_value_rescale(const float *x, int64_t n, int inverse, float *out,
                                      gb_error *err)
{
    return gb_torch_guard(err, "value_rescale", [&] {
        torch::Tensor t = gbt::cpu_view(x, {n}, torch::kFloat32);
        torch::from_blob(out, {n}).copy_(inverse ? gbt::value_h_inverse(t) : gbt::value_h(t));
        return 0;
    });
}
