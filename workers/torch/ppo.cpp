// workers/torch/ppo.cpp: PPO: GAE (or V-trace, for stale chunks) over trajectory chunks,
// clipped objective, optional clipped value loss, entropy bonus, advantage normalisation,
// minibatch epochs, gradient clipping (a recurrent core's sequences: ppo_seq.cpp; a plain MLP's
// forward and backward in gearbox's C: ppo_kernels.cpp).
#include "workers/torch/ppo.hpp"
#include "workers/torch/testing.h"
#include "workers/torch/targets.h"

#include <algorithm>
#include <vector>

namespace gbt {

PpoLoss ppo_loss(const torch::Tensor &new_logp, const torch::Tensor &old_logp,
                 const torch::Tensor &adv, const torch::Tensor &v, const torch::Tensor &old_v,
                 const torch::Tensor &ret, const torch::Tensor &entropy, double clip,
                 bool clip_value, double value_coef, double entropy_coef)
{
    PpoLoss L;
    torch::Tensor logratio = new_logp - old_logp;
    torch::Tensor ratio = torch::exp(logratio);
    torch::Tensor pg1 = -adv * ratio;
    torch::Tensor pg2 = -adv * torch::clamp(ratio, 1.0 - clip, 1.0 + clip);
    L.policy = torch::max(pg1, pg2).mean();
    torch::Tensor se = (v - ret).pow(2);
    if (clip_value) {
        torch::Tensor vc = old_v + torch::clamp(v - old_v, -clip, clip);
        se = torch::max(se, (vc - ret).pow(2));
    }
    L.value = 0.5 * se.mean();
    L.total = L.policy + value_coef * L.value - entropy_coef * entropy.mean();
    {
        torch::NoGradGuard no_grad;
        L.approx_kl = ((ratio - 1.0) - logratio).mean();
        L.clip_fraction = ((ratio - 1.0).abs() > clip).to(torch::kFloat32).mean();
    }
    return L;
}

// One minibatch's loss and gradients on the CPU: the clipped objective and its gradients in
// one pass of C (gb_torch_ppo_fused), then backward from the log-probabilities and values (and
// the entropy, only when its coefficient is not 0). aux: [len, 4] (old logp, advantage, old
// value, return).
static gb_torch_ppo_terms fused_minibatch(const Heads &h, const torch::Tensor &a_mb,
                                          const torch::Tensor &aux, const gb_torch_space &sp,
                                          const gb_torch_ppo_coefs &coefs, FlatAdam *opt)
{
    const int64_t len = a_mb.size(0);
    torch::Tensor new_logp = sp.discrete ? categorical_logp(h.logits, a_mb)
                                         : gaussian_logp(h.mean, h.log_std, a_mb);
    torch::Tensor ent;
    {
        torch::AutoGradMode grad_mode(coefs.entropy_coef != 0.0);
        ent = sp.discrete ? categorical_entropy(h.logits) : gaussian_entropy(h.log_std);
    }
    torch::Tensor nl = new_logp.detach().contiguous(), v = h.value.detach().contiguous();
    torch::Tensor ent_values = ent.detach().contiguous();
    torch::Tensor g_logp = torch::empty({len}), g_value = torch::empty({len});
    gb_torch_ppo_terms terms = {};
    const float *ep = ent_values.data_ptr<float>();
    for (int64_t i = 0; i < ent_values.numel(); i++)
        terms.entropy += ep[i];
    terms.entropy /= (double)std::max<int64_t>(1, ent_values.numel());
    gb_torch_ppo_fused(len, nl.data_ptr<float>(), v.data_ptr<float>(), aux.data_ptr<float>(),
                       &coefs, g_logp.data_ptr<float>(), g_value.data_ptr<float>(), &terms);
    std::vector<torch::Tensor> outs{new_logp, h.value}, grads{g_logp, g_value};
    if (coefs.entropy_coef != 0.0) {
        outs.push_back(ent);
        grads.push_back(torch::full_like(ent, -coefs.entropy_coef / (double)ent.numel()));
    }
    opt->zero_grad();
    torch::autograd::backward(outs, grads);
    return terms;
}

// Prioritized replay's chunk priorities: mean |advantage| over each chunk's valid steps.
static void ppo_priorities(const gb_torch_batch *b, const torch::Tensor &adv, float *prio)
{
    const int64_t B = b->B, T = b->T;
    torch::Tensor valid_mask = b->valid ? cpu_view(b->valid, {B, T}, torch::kUInt8)
                                              .to(torch::kFloat32)
                                        : torch::ones({B, T});
    torch::Tensor a = adv.abs() * valid_mask;
    torch::Tensor pr = a.sum(1) / valid_mask.sum(1).clamp_min(1.0) + 1e-6;
    torch::from_blob(prio, {B}, torch::kFloat32).copy_(pr);
}

// The explained variance of S's returns by its pre-update values.
static double explained_variance(const PpoSteps &S)
{
    torch::Tensor Rc = S.R.to(torch::kCPU), Vc = S.V0.to(torch::kCPU);
    double var = Rc.var(false).item<double>();
    return var > 0 ? 1.0 - (Rc - Vc).var(false).item<double>() / var : 0.0;
}

// Gathers the valid steps of b (obs: [B*(T+1), *obs] on the device; values [B, T+1], adv and ret
// [B, T] on the CPU) and the explained variance of the returns by the pre-update values. Their
// observations only when with_obs (a core's minibatches take whole chunks from obs instead).
// The ratio's old log-probabilities: prox_logp [B*T] (CPU) when defined (V-trace's proximal
// policy, the learner's before the update), else the actors' (b->logp).
static PpoSteps ppo_steps(const gb_torch_learner *l, const gb_torch_batch *b,
                          const torch::Tensor &obs, const torch::Tensor &values,
                          const torch::Tensor &adv, const torch::Tensor &ret,
                          const torch::Tensor &prox_logp, bool with_obs, gb_torch_stats *st)
{
    const int64_t B = b->B, T = b->T;
    const gb_torch_space &sp = l->model->space;
    torch::Device dev = l->device;
    // the valid steps: rows into [B*T] step arrays and into [B*(T+1)] obs rows
    std::vector<int64_t> valid_steps((size_t)(B * T)), rows((size_t)(B * T));
    PpoSteps S;
    S.N = gb_torch_valid_rows(B, T, b->valid, nullptr, valid_steps.data(), rows.data(), nullptr);
    if (S.N == 0)
        return S;
    auto lopt = torch::TensorOptions().dtype(torch::kInt64);
    torch::Tensor step_idx = torch::from_blob(valid_steps.data(), {S.N}, lopt).clone();
    torch::Tensor row_idx = torch::from_blob(rows.data(), {S.N}, lopt).clone().to(dev);
    if (with_obs)
        S.o = obs.index_select(0, row_idx);
    if (sp.discrete)
        S.act = cpu_view(b->action, {B * T}, torch::kInt64).index_select(0, step_idx).to(dev);
    else
        S.act = cpu_view(b->action, {B * T, sp.action_dim}, torch::kFloat32)
                    .index_select(0, step_idx)
                    .to(dev);
    torch::Tensor old = prox_logp.defined() ? prox_logp
                                            : cpu_view(b->logp, {B * T}, torch::kFloat32);
    S.old_logp = old.index_select(0, step_idx).to(dev);
    S.A = adv.view({B * T}).index_select(0, step_idx).to(dev);
    S.R = ret.view({B * T}).index_select(0, step_idx).to(dev);
    S.V0 = values.view({B, T + 1}).narrow(1, 0, T).reshape({B * T})
               .index_select(0, step_idx).to(dev);
    st->explained_var = explained_variance(S);
    return S;
}

// One minibatch's loss through libtorch's autograd (off the CPU, or frames), then backward;
// the terms as fused_minibatch reports them.
static gb_torch_ppo_terms libtorch_minibatch(const Heads &h, const torch::Tensor &a_mb,
                                             const PpoSteps &S, const torch::Tensor &idx,
                                             const gb_torch_space &sp, const gb_config_ppo &pc,
                                             FlatAdam *opt)
{
    torch::Tensor new_logp, ent;
    if (sp.discrete) {
        new_logp = categorical_logp(h.logits, a_mb);
        ent = categorical_entropy(h.logits);
    } else {
        new_logp = gaussian_logp(h.mean, h.log_std, a_mb);
        ent = gaussian_entropy(h.log_std);
    }
    torch::Tensor adv_mb = S.A.index_select(0, idx);
    if (pc.normalize_advantages && idx.size(0) > 1)
        adv_mb = (adv_mb - adv_mb.mean()) / (adv_mb.std() + 1e-8);
    PpoLoss L = ppo_loss(new_logp, S.old_logp.index_select(0, idx), adv_mb, h.value,
                         S.V0.index_select(0, idx), S.R.index_select(0, idx), ent, pc.clip,
                         pc.clip_value != 0, pc.value_coef, pc.entropy_coef);
    opt->zero_grad();
    L.total.backward();
    gb_torch_ppo_terms terms = {};
    terms.policy = L.policy.item<double>();
    terms.value = L.value.item<double>();
    terms.entropy = ent.mean().item<double>();
    terms.approx_kl = L.approx_kl.item<double>();
    terms.clip_fraction = L.clip_fraction.item<double>();
    terms.total = L.total.item<double>();
    return terms;
}

// Minibatches of independent steps: up to mb of the valid steps each, shuffled every epoch.
struct StepMinibatches : PpoMinibatches {
    gb_torch_learner *l;
    const PpoSteps &S;
    int64_t mb;
    torch::Tensor perm;
    StepMinibatches(gb_torch_learner *learner, const PpoSteps &steps, int64_t size)
        : l(learner), S(steps), mb(size)
    {
    }
    bool rows_only() const override { return true; }
    void shuffle() override
    {
        auto lopt = torch::TensorOptions().dtype(torch::kInt64);
        perm = S.N > 0 ? torch::randperm(S.N, l->gen, lopt).to(l->device) : torch::Tensor();
    }
    bool get(int64_t k, Heads *h, torch::Tensor *idx) override
    {
        const int64_t start = k * mb, len = std::min(mb, S.N - start);
        if (len <= 0)
            return false;
        *idx = perm.narrow(0, start, len);
        if (h)
            *h = l->model->net->forward(S.o.index_select(0, *idx));
        return true;
    }
};

void ppo_epochs(gb_torch_learner *l, const PpoSteps &S, int64_t steps, PpoMinibatches &mbs,
                gb_torch_stats *st)
{
    const gb_config_algorithm &ac = l->cfg.trainer.algorithm;
    const gb_config_ppo &pc = ac.ppo;
    gb_torch_model *m = l->model;
    const gb_torch_space &sp = m->space;
    const int64_t N = S.N;
    // On the CPU the loss and its gradients are one pass of C (fused_losses.c), backward runs
    // from the log-probabilities and values; aux holds each step's other inputs as one row,
    // gathered per minibatch (one pass of V-trace fills S's rows as it makes the minibatch).
    const bool fused = l->device.is_cpu() && N > 0 &&
                       (!S.o.defined() || S.o.scalar_type() == torch::kFloat32);
    const gb_torch_ppo_coefs coefs = {pc.clip, pc.value_coef, pc.entropy_coef,
                                      pc.clip_value != 0, pc.normalize_advantages != 0};
    // gearbox's own forward and backward (trainer.kernels) where they apply
    const bool kernels = mbs.rows_only() && ppo_kernels_apply(l, S.o);
    l->opt->set_lr(st->lr);
    std::vector<torch::Tensor> params = m->net->parameters();
    gb_torch_ppo_terms sum = {};
    int64_t count = 0, done = 0;
    for (int64_t e = 0; e < pc.epochs; e++) {
        mbs.shuffle();
        for (int64_t k = 0; k < steps; k++) {
            Heads h;
            torch::Tensor idx;
            if (mbs.get(k, kernels ? nullptr : &h, &idx)) {
                torch::Tensor a_mb = kernels ? torch::Tensor() : S.act.index_select(0, idx);
                gb_torch_ppo_terms terms =
                    kernels ? ppo_kernels_minibatch(l, S, idx, coefs)
                    : fused ? fused_minibatch(h, a_mb,
                                            torch::stack({S.old_logp.index_select(0, idx),
                                                          S.A.index_select(0, idx),
                                                          S.V0.index_select(0, idx),
                                                          S.R.index_select(0, idx)},
                                                         1),
                                            sp, coefs, l->opt.get())
                          : libtorch_minibatch(h, a_mb, S, idx, sp, pc, l->opt.get());
                gb_torch_ppo_terms_add(&sum, &terms);
                st->loss = terms.total;
                count++;
            } else { // data-parallel: no minibatch here for this step; other ranks have one
                drop_grads(params);
            }
            if (!sync_grads(l, params))
                continue;
            st->grad_norm = l->opt->clip_grad_norm(ac.max_grad_norm);
            l->opt->step();
            done++;
        }
    }
    st->gradient_steps = done;
    gb_torch_ppo_terms_means(&sum, count, st);
}

torch::Tensor batch_logp(const gb_torch_learner *l, const gb_torch_batch *b, const Heads &h)
{
    const int64_t B = b->B, T = b->T;
    const gb_torch_space &sp = l->model->space;
    std::vector<int64_t> rows((size_t)(B * T));
    for (int64_t bi = 0; bi < B; bi++)
        for (int64_t t = 0; t < T; t++)
            rows[(size_t)(bi * T + t)] = obs_row(bi, t, T);
    torch::Tensor idx =
        torch::from_blob(rows.data(), {B * T}, torch::kInt64).clone().to(l->device);
    Heads s = select_rows(h, idx);
    if (sp.discrete)
        return categorical_logp(s.logits,
                                cpu_view(b->action, {B * T}, torch::kInt64).to(l->device));
    return gaussian_logp(s.mean, s.log_std,
                         cpu_view(b->action, {B * T, sp.action_dim}, torch::kFloat32)
                             .to(l->device));
}

// V-trace's log importance weights [B, T] (CPU): the learner's policy before the update (the
// pre-update forward's heads h) against the actors' (b->logp), for each step's action; *lp
// receives the learner's log-probabilities [B*T] (CPU).
static torch::Tensor vtrace_log_rho(const gb_torch_learner *l, const gb_torch_batch *b,
                                    const Heads &h, torch::Tensor *lp)
{
    *lp = batch_logp(l, b, h).to(torch::kCPU).to(torch::kFloat32).contiguous();
    torch::Tensor mu = cpu_view(b->logp, {b->B * b->T}, torch::kFloat32);
    return (*lp - mu).view({b->B, b->T}).contiguous();
}

// V-trace in one pass (trainer.algorithm.ppo.vtrace_one_pass, one epoch, no core), as IMPALA
// learns: minibatch k is whole chunks, forwarded once with gradients; its V-trace targets and
// advantages come from that forward's values and log-probabilities (detached) and go into S's
// rows of its steps (A, R, V0, and old_logp when proximal) before its loss. No forward over
// the batch before the update: when every step is trained once, that forward is a quarter of
// the update's cost. The first minibatch's targets are the two-pass way's; a later one's come
// from the parameters the steps before it made.
struct OnePassMinibatches;
static bool one_pass_minibatch(OnePassMinibatches &m, int64_t k, Heads *h, torch::Tensor *idx);

struct OnePassMinibatches : PpoMinibatches {
    gb_torch_learner *l;
    const gb_torch_batch *b;
    const torch::Tensor &obs;
    PpoSteps &S;
    int64_t per;               // chunks a minibatch
    std::vector<int64_t> srow; // [B*T]: the step's row in S (-1: not valid)
    std::vector<int64_t> order;
    torch::Tensor adv; // [B*T] CPU: every step's advantage once made (priorities)
    OnePassMinibatches(gb_torch_learner *learner, const gb_torch_batch *batch,
                       const torch::Tensor &o, PpoSteps &steps, int64_t chunks)
        : l(learner), b(batch), obs(o), S(steps), per(chunks), srow((size_t)(b->B * b->T), -1),
          adv(torch::zeros({b->B * b->T}))
    {
        int64_t n = 0;
        for (int64_t i = 0; i < b->B * b->T; i++)
            if (!b->valid || b->valid[i])
                srow[(size_t)i] = n++;
    }
    void shuffle() override
    {
        auto lopt = torch::TensorOptions().dtype(torch::kInt64);
        torch::Tensor p = torch::randperm(b->B, l->gen, lopt);
        order.assign(p.data_ptr<int64_t>(), p.data_ptr<int64_t>() + b->B);
    }
    bool get(int64_t k, Heads *h, torch::Tensor *idx) override
    {
        return one_pass_minibatch(*this, k, h, idx);
    }
};

// OnePassMinibatches::get: makes S.A, S.R, S.V0 (and S.old_logp) of minibatch k's chunks from
// its forward (above).
static bool one_pass_minibatch(OnePassMinibatches &m, int64_t k, Heads *h, torch::Tensor *idx)
{
    gb_torch_learner *l = m.l;
    const gb_torch_batch *b = m.b;
    PpoSteps &S = m.S;
    const int64_t per = m.per;
    const int64_t B = b->B, T = b->T, c0 = k * per, bm = std::min(per, B - c0);
    if (bm <= 0)
        return false;
    const gb_config_algorithm &ac = l->cfg.trainer.algorithm;
    const gb_config_ppo &pc = ac.ppo;
    const int64_t n = bm * T;
    std::vector<int64_t> orows, hrows, steps, keep, into;
    std::vector<float> r((size_t)n), mu((size_t)n);
    std::vector<uint8_t> term((size_t)n, 0), trunc((size_t)n, 0), valid((size_t)n, 1);
    for (int64_t j = 0; j < bm; j++) {
        const int64_t bi = m.order[(size_t)(c0 + j)];
        for (int64_t t = 0; t <= T; t++)
            orows.push_back(obs_row(bi, t, T));
        for (int64_t t = 0; t < T; t++) {
            const int64_t i = bi * T + t, q = j * T + t;
            hrows.push_back(j * (T + 1) + t);
            steps.push_back(i);
            r[(size_t)q] = b->reward[i];
            mu[(size_t)q] = b->logp[i];
            term[(size_t)q] = b->terminated ? b->terminated[i] : 0;
            trunc[(size_t)q] = b->truncated ? b->truncated[i] : 0;
            valid[(size_t)q] = b->valid ? b->valid[i] : 1;
            if (valid[(size_t)q]) {
                keep.push_back(q);
                into.push_back(m.srow[(size_t)i]);
            }
        }
    }
    if (keep.empty())
        return false;
    auto rows = [&](std::vector<int64_t> &v) {
        return torch::from_blob(v.data(), {(int64_t)v.size()}, torch::kInt64).clone();
    };
    torch::Device dev = l->device;
    Heads all = l->model->net->forward(m.obs.index_select(0, rows(orows).to(dev)));
    Heads hs = select_rows(all, rows(hrows).to(dev));
    torch::Tensor step_idx = rows(steps);
    const gb_torch_space &sp = l->model->space;
    torch::Tensor lp;
    {
        torch::NoGradGuard no_grad;
        lp = sp.discrete
                 ? categorical_logp(hs.logits,
                                    cpu_view(b->action, {B * T}, torch::kInt64)
                                        .index_select(0, step_idx)
                                        .to(dev))
                 : gaussian_logp(hs.mean, hs.log_std,
                                 cpu_view(b->action, {B * T, sp.action_dim}, torch::kFloat32)
                                     .index_select(0, step_idx)
                                     .to(dev));
        lp = lp.to(torch::kCPU).to(torch::kFloat32).contiguous();
    }
    torch::Tensor v = all.value.detach().to(torch::kCPU).to(torch::kFloat32).contiguous();
    torch::Tensor log_rho = (lp - torch::from_blob(mu.data(), {n}, torch::kFloat32)).contiguous();
    torch::Tensor a = torch::empty({n}), ret = torch::empty({n});
    gb_torch_vtrace(bm, T, r.data(), v.data_ptr<float>(), term.data(), trunc.data(), valid.data(),
                    log_rho.data_ptr<float>(), ac.gamma, pc.gae_lambda, pc.vtrace_rho_bar,
                    pc.vtrace_c_bar, ret.data_ptr<float>(), a.data_ptr<float>());
    torch::Tensor kq = rows(keep), ki = rows(into).to(dev);
    m.adv.index_copy_(0, step_idx.index_select(0, kq), a.index_select(0, kq));
    S.A.index_copy_(0, ki, a.index_select(0, kq).to(dev));
    S.R.index_copy_(0, ki, ret.index_select(0, kq).to(dev));
    S.V0.index_copy_(0, ki, v.view({bm, T + 1}).narrow(1, 0, T).reshape({n}).index_select(0, kq)
                                .to(dev));
    if (pc.vtrace_proximal)
        S.old_logp.index_copy_(0, ki, lp.index_select(0, kq).to(dev));
    *h = select_rows(hs, kq.to(dev));
    *idx = ki;
    return true;
}

static void ppo_one_pass(gb_torch_learner *l, const gb_torch_batch *b, const torch::Tensor &obs,
                         gb_torch_stats *st, float *prio)
{
    const gb_config_algorithm &ac = l->cfg.trainer.algorithm;
    const int64_t B = b->B, T = b->T;
    torch::Tensor zero_v = torch::zeros({B, T + 1}), zero = torch::zeros({B, T});
    PpoSteps S = ppo_steps(l, b, obs, zero_v, zero, zero, torch::Tensor(), false, st);
    st->samples = S.N;
    st->lr = learner_lr(l, ac.lr);
    const int64_t nmb = std::max<int64_t>(1, std::min<int64_t>(ac.ppo.minibatches, B));
    const int64_t per = (B + nmb - 1) / nmb;
    const int64_t steps = group_max(l, S.N > 0 ? (B + per - 1) / per : 0);
    if (steps == 0)
        return;
    OnePassMinibatches mbs(l, b, obs, S, per);
    ppo_epochs(l, S, steps, mbs, st);
    st->explained_var = explained_variance(S);
    if (prio)
        ppo_priorities(b, mbs.adv.view({B, T}), prio);
}

static void ppo_train(gb_torch_learner *l, const gb_torch_batch *b, gb_torch_stats *st, float *prio)
{
    const gb_config_algorithm &ac = l->cfg.trainer.algorithm;
    const gb_config_ppo &pc = ac.ppo;
    const int64_t B = b->B, T = b->T;
    const bool core = l->model->net->state_size() > 0;

    torch::Tensor obs = batch_obs(l, b); // [B*(T+1), *obs]
    if (pc.vtrace && pc.vtrace_one_pass && pc.epochs == 1 && !core)
        return ppo_one_pass(l, b, obs, st, prio);
    torch::Tensor values;                // [B, T+1] pre-update V, CPU
    torch::Tensor log_rho;               // V-trace: [B, T] log pi - log mu, CPU
    torch::Tensor lp;                    // V-trace: [B*T] log pi before the update, CPU
    {
        torch::NoGradGuard no_grad;
        Heads h = core                          ? ppo_seq_forward(l, b, obs)
                  : ppo_kernels_apply(l, obs) ? ppo_kernels_forward(l, obs)
                                              : l->model->net->forward(obs);
        values = h.value.to(torch::kCPU).to(torch::kFloat32).contiguous();
        if (pc.vtrace)
            log_rho = vtrace_log_rho(l, b, h, &lp);
    }
    torch::Tensor adv = torch::empty({B, T}), ret = torch::empty({B, T});
    if (pc.vtrace)
        gb_torch_vtrace(B, T, b->reward, values.data_ptr<float>(), b->terminated, b->truncated,
                        b->valid, log_rho.data_ptr<float>(), ac.gamma, pc.gae_lambda,
                        pc.vtrace_rho_bar, pc.vtrace_c_bar, ret.data_ptr<float>(),
                        adv.data_ptr<float>());
    else
        gb_torch_gae(B, T, b->reward, values.data_ptr<float>(), b->terminated, b->truncated,
                     b->valid, ac.gamma, pc.gae_lambda, adv.data_ptr<float>(),
                     ret.data_ptr<float>());

    // the decoupled objective: the ratio against the learner's policy before the update, the
    // actors' only in the advantages' truncated importance weights
    torch::Tensor prox = pc.vtrace && pc.vtrace_proximal ? lp : torch::Tensor();
    PpoSteps S = ppo_steps(l, b, obs, values, adv, ret, prox, !core, st);
    const int64_t N = S.N;
    if (prio)
        ppo_priorities(b, adv, prio);
    st->samples = N;
    st->lr = learner_lr(l, ac.lr);
    if (core)
        return ppo_seq_epochs(l, b, obs, S, st);
    // Minibatches per epoch: up to pc.minibatches of mb steps each. Data-parallel ranks hold
    // different numbers of valid steps, so the number of optimiser steps is agreed (the largest);
    // a rank with fewer minibatches (or none) takes part in the extra steps without a gradient.
    const int64_t nmb = std::max<int64_t>(1, std::min<int64_t>(pc.minibatches, N));
    const int64_t mb = N > 0 ? (N + nmb - 1) / nmb : 0;
    const int64_t steps = group_max(l, N > 0 ? (N + mb - 1) / mb : 0);
    if (steps == 0)
        return;
    StepMinibatches mbs(l, S, mb);
    ppo_epochs(l, S, steps, mbs, st);
}

// PPO trains the acting model alone (actor and critic heads).
static void ppo_init(gb_torch_learner *l, const gb_torch_space *, uint64_t)
{
    double lr = l->cfg.trainer.algorithm.lr;
    l->opt = std::make_unique<FlatAdam>(l->model->net->parameters(), lr, 1e-5);
    // after the optimiser has made the gradients views of its flat one
    l->ppo_kernels = ppo_kernels_for(l);
}

const Algorithm ppo_algorithm = {"ppo", ppo_init, ppo_train};

} // namespace gbt

extern "C" int gb_torch_ppo_loss(const float *new_logp, const float *old_logp, const float *adv,
                                 const float *v, const float *old_v, const float *ret,
                                 const float *entropy, int64_t n, double clip, int clip_value,
                                 double value_coef, double entropy_coef, double out[3],
                                 gb_error *err)
{
    return gb_torch_guard(err, "ppo_loss", [&] {
        auto t = [&](const float *p) { return gbt::cpu_view(p, {n}, torch::kFloat32); };
        gbt::PpoLoss L = gbt::ppo_loss(t(new_logp), t(old_logp), t(adv), t(v), t(old_v), t(ret),
                                       t(entropy), clip, clip_value != 0, value_coef,
                                       entropy_coef);
        out[0] = L.policy.item<double>();
        out[1] = L.value.item<double>();
        out[2] = L.total.item<double>();
        return 0;
    });
}
