// workers/torch/ppo_seq.cpp: recurrent PPO: a core's forward over whole chunks from their state0
// (bridge.h's reset rule), the pre-update values, and the epochs over minibatches of chunks
// (gradients through each chunk: truncated backpropagation through time at its boundaries).
#include "workers/torch/ppo.hpp"
#include "workers/torch/testing.h"

#include <algorithm>
#include <vector>

namespace gbt {

namespace {

// Minibatches of whole chunks: cpm chunks each (the last may have fewer), shuffled every epoch;
// each one's heads from a sequence forward over its chunks' T steps, kept at the valid steps.
struct ChunkMinibatches : PpoMinibatches {
    gb_torch_learner *l;
    const gb_torch_batch *b;
    int64_t cpm;
    torch::Tensor obs;   // [B, T+1, *shape] on the device
    SeqInputs in;
    std::vector<int64_t> first; // [B+1]: chunk c's valid steps are PpoSteps rows first[c]..
    torch::Tensor perm;  // [B] int64, CPU

    ChunkMinibatches(gb_torch_learner *learner, const gb_torch_batch *batch,
                     const torch::Tensor &rows, int64_t chunks_per_mb)
        : l(learner), b(batch), cpm(chunks_per_mb)
    {
        obs = by_chunk(rows, b->B, b->T + 1);
        in = seq_inputs(l, b);
        first.assign((size_t)b->B + 1, 0);
        for (int64_t c = 0; c < b->B; c++) {
            int64_t n = 0;
            for (int64_t t = 0; t < b->T; t++)
                n += !b->valid || b->valid[c * b->T + t];
            first[(size_t)c + 1] = first[(size_t)c] + n;
        }
    }
    void shuffle() override
    {
        perm = torch::randperm(b->B, l->gen, torch::TensorOptions().dtype(torch::kInt64));
    }
    bool get(int64_t k, Heads *h, torch::Tensor *idx) override
    {
        const int64_t B = b->B, T = b->T, start = k * cpm, len = std::min(cpm, B - start);
        if (len <= 0)
            return false;
        const int64_t *chunks = perm.data_ptr<int64_t>() + start;
        std::vector<int64_t> sel, rows; // valid rows in the sequences' [len*T], in PpoSteps
        for (int64_t j = 0; j < len; j++) {
            const int64_t c = chunks[j];
            int64_t row = first[(size_t)c];
            for (int64_t t = 0; t < T; t++)
                if (!b->valid || b->valid[c * T + t]) {
                    sel.push_back(j * T + t);
                    rows.push_back(row++);
                }
        }
        if (sel.empty())
            return false;
        auto lopt = torch::TensorOptions().dtype(torch::kInt64);
        const int64_t n = (int64_t)sel.size();
        torch::Tensor c = perm.narrow(0, start, len).to(l->device);
        std::vector<int64_t> shape{len * T};
        for (int64_t d = 2; d < obs.dim(); d++)
            shape.push_back(obs.size(d));
        torch::Tensor o = obs.index_select(0, c).narrow(1, 0, T).reshape(shape);
        Heads all = l->model->net->sequence(o, len, T, in.state0.index_select(0, c),
                                            in.reset.index_select(0, c).narrow(1, 0, T));
        // every step valid: the heads' rows are the steps already (no gather, no scatter back)
        *h = n == len * T ? all
                          : select_rows(all, torch::from_blob(sel.data(), {n}, lopt)
                                                 .clone()
                                                 .to(l->device));
        *idx = torch::from_blob(rows.data(), {n}, lopt).clone().to(l->device);
        return true;
    }
};

} // namespace

Heads ppo_seq_forward(gb_torch_learner *l, const gb_torch_batch *b, const torch::Tensor &obs)
{
    SeqInputs in = seq_inputs(l, b);
    return l->model->net->sequence(obs, b->B, b->T + 1, in.state0, in.reset);
}

void ppo_seq_epochs(gb_torch_learner *l, const gb_torch_batch *b, const torch::Tensor &obs,
                    const PpoSteps &S, gb_torch_stats *st)
{
    const int64_t B = b->B;
    const gb_config_ppo &pc = l->cfg.trainer.algorithm.ppo;
    // as ppo_train's steps, with chunks for steps: the count agreed over a data-parallel group
    const int64_t nmb = std::max<int64_t>(1, std::min<int64_t>(pc.minibatches, B));
    const int64_t cpm = (B + nmb - 1) / nmb;
    const int64_t steps = group_max(l, S.N > 0 ? (B + cpm - 1) / cpm : 0);
    if (steps == 0)
        return;
    ChunkMinibatches mbs(l, b, obs, cpm);
    ppo_epochs(l, S, steps, mbs, st);
}

} // namespace gbt

using namespace gbt;

extern "C" int gb_torch_learner_sequence(gb_torch_learner *l, const gb_torch_batch *b,
                                         float *logp, float *value, gb_error *err)
{
    if (b->B < 1 || b->T < 1 || !b->obs || !b->next_obs || !b->action)
        return gb_error_set(err, GB_EINVAL, "sequence: a batch with obs, next_obs and action");
    if (l->cfg.trainer.algorithm.name != GB_ALGO_PPO)
        return gb_error_set(err, GB_EINVAL, "sequence: a ppo learner's");
    return gb_torch_guard(err, "sequence", [&] {
        torch::NoGradGuard no_grad;
        const int64_t B = b->B, T = b->T;
        Heads h = ppo_seq_forward(l, b, batch_obs(l, b)); // rows [B*(T+1)]
        if (value)
            torch::from_blob(value, {B * (T + 1)}).copy_(h.value.to(torch::kCPU));
        if (logp)
            torch::from_blob(logp, {B * T}).copy_(batch_logp(l, b, h).to(torch::kCPU));
        return 0;
    });
}
