// workers/torch/dqn_seq.cpp: R2D2, DQN with a recurrent core: each chunk's rows replayed from
// the state the actor stored at its row 0 (bridge.h's reset rule), the first dqn.burn_in rows
// only to warm the state up (stepped without gradients, by the online and the target network
// each), the rest and the bootstrap row as one sequence from the warmed-up states; the
// transitions, their loss and the chunks' priorities come from the rows after the burn-in.
#include "workers/torch/algorithm.hpp"
#include "workers/torch/testing.h"

#include <vector>

namespace gbt {

namespace {

// net's Q over every row [B, T+1] of the chunks (obs [B, T+1, *shape]) from in.state0: rows
// [0, K) stepped one at a time without gradients (their Q in *burn_q [B, K, n] when asked),
// rows [K, T] as one sequence from the state they leave, with gradients when grad mode is on.
// The reset rule holds throughout: a state is zeroed before a row that follows a reset row.
torch::Tensor replay_rows(Net &net, const torch::Tensor &obs, const SeqInputs &in, int64_t K,
                          torch::Tensor *burn_q)
{
    const int64_t B = obs.size(0), T1 = obs.size(1);
    torch::Tensor state = in.state0;
    std::vector<torch::Tensor> qs;
    {
        torch::NoGradGuard no_grad;
        for (int64_t t = 0; t < K; t++) {
            torch::Tensor next;
            torch::Tensor keep = (1.0 - in.reset.select(1, t)).unsqueeze(1);
            Heads h = net.step(obs.select(1, t), state * keep, &next);
            if (burn_q)
                qs.push_back(h.q);
            state = next;
        }
        // the sequence's row 0 takes its reset here: Net::sequence starts from state as given
        state = state * (1.0 - in.reset.select(1, K)).unsqueeze(1);
    }
    if (burn_q && K > 0)
        *burn_q = torch::stack(qs, 1);
    torch::Tensor reset = in.reset.narrow(1, K, T1 - K).clone();
    reset.select(1, 0).zero_();
    Heads h = net.sequence(flat_chunks(obs.narrow(1, K, T1 - K)), B, T1 - K, state, reset);
    return h.q.view({B, T1 - K, h.q.size(1)});
}

} // namespace

QRows r2d2_rows(gb_torch_learner *l, const gb_torch_batch *b, const torch::Tensor &obs)
{
    const int64_t B = b->B, T = b->T, K = l->cfg.trainer.algorithm.dqn.burn_in;
    if (K >= T)
        throw Failure(GB_EINVAL, "r2d2: a burn-in of " + std::to_string(K) +
                                     " rows in chunks of " + std::to_string(T));
    SeqInputs in = seq_inputs(l, b);
    torch::Tensor rows = by_chunk(obs, B, T + 1);
    torch::Tensor q = replay_rows(*l->model->net, rows, in, K, nullptr); // [B, T+1-K, n]
    torch::Tensor qt;
    {
        torch::NoGradGuard no_grad;
        qt = replay_rows(*l->target, rows, in, K, nullptr);
    }
    const int64_t n = q.size(2);
    if (K > 0) { // the burn-in rows' Q is never read: zeros keep the batch's row numbering
        torch::Tensor pad = torch::zeros({B, K, n}, q.options());
        q = torch::cat({pad, q}, 1);
        qt = torch::cat({pad, qt}, 1);
    }
    return {q.reshape({B * (T + 1), n}), qt.reshape({B * (T + 1), n})};
}

Transitions after_burn_in(const Transitions &tr, int64_t T, int64_t K)
{
    if (K == 0 || tr.N == 0)
        return tr;
    torch::Tensor keep = (tr.step_idx.remainder(T) >= K).nonzero().squeeze(1);
    Transitions out;
    out.N = keep.size(0);
    if (out.N == 0)
        return out;
    torch::Tensor kd = keep.to(tr.row_idx.device());
    out.step_idx = tr.step_idx.index_select(0, keep);
    out.row_idx = tr.row_idx.index_select(0, kd);
    out.brow_idx = tr.brow_idx.index_select(0, kd);
    out.ret = tr.ret.index_select(0, kd);
    out.disc = tr.disc.index_select(0, kd);
    if (tr.weight.defined())
        out.weight = tr.weight.index_select(0, kd);
    return out;
}

} // namespace gbt

using namespace gbt;

extern "C" int gb_torch_learner_q_rows(gb_torch_learner *l, const gb_torch_batch *b, float *q,
                                       gb_error *err)
{
    if (b->B < 1 || b->T < 1 || !b->obs || !b->next_obs || !q)
        return gb_error_set(err, GB_EINVAL, "q_rows: a batch with obs, next_obs and room");
    if (l->cfg.trainer.algorithm.name != GB_ALGO_DQN)
        return gb_error_set(err, GB_EINVAL, "q_rows: a dqn learner's");
    return gb_torch_guard(err, "q_rows", [&] {
        torch::NoGradGuard no_grad;
        const int64_t B = b->B, T = b->T, K = l->cfg.trainer.algorithm.dqn.burn_in;
        torch::Tensor obs = batch_obs(l, b);
        torch::Tensor all;
        if (l->model->net->state_size() == 0) {
            all = l->model->net->forward(obs).q;
        } else {
            torch::Tensor burn;
            torch::Tensor rows = by_chunk(obs, B, T + 1);
            all = replay_rows(*l->model->net, rows, seq_inputs(l, b), K, &burn);
            if (K > 0)
                all = torch::cat({burn, all}, 1);
        }
        const int64_t n = all.size(-1);
        torch::from_blob(q, {B * (T + 1), n}).copy_(all.reshape({B * (T + 1), n}).to(torch::kCPU));
        return 0;
    });
}
