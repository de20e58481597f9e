// workers/torch/ppo.hpp: what PPO's two ways of training share: the batch's valid steps, and
// the epochs of minibatches whatever makes them: steps as independent rows (ppo.cpp) or, with a
// recurrent core, whole chunks run as sequences from their state0 (ppo_seq.cpp).
// defines: gbt::PpoSteps, gbt::PpoMinibatches, gbt::ppo_epochs, gbt::ppo_seq_forward,
//          gbt::ppo_seq_epochs, gbt::ppo_kernels_for, gbt::ppo_kernels_apply,
//          gbt::ppo_kernels_forward, gbt::ppo_kernels_minibatch
#pragma once

#include "workers/torch/algorithm.hpp"
#include "workers/torch/targets.h"

namespace gbt {

// The batch's valid steps, gathered once for the epochs, one row each, chunk after chunk and in
// step order within a chunk: observations (undefined with a core), actions, behaviour
// log-probabilities, advantages, returns and pre-update values (on the device).
struct PpoSteps {
    int64_t N = 0;
    torch::Tensor o, act, old_logp, A, R, V0;
};

// The minibatches of the epochs. shuffle() starts an epoch; get(k, &h, &idx) makes optimiser
// step k's minibatch: the network's heads over its steps (with autograd) and those steps' rows
// in PpoSteps ([len] int64 on the device), or returns false when this rank has none for step k
// (data-parallel: another rank has). Both throw on failure. Where rows_only(), get takes h NULL
// and makes only idx (the rows of PpoSteps' observations, which then hold every step's: for
// gearbox's own forward).
struct PpoMinibatches {
    virtual ~PpoMinibatches() = default;
    virtual void shuffle() = 0;
    virtual bool get(int64_t k, Heads *h, torch::Tensor *idx) = 0;
    virtual bool rows_only() const { return false; }
};

// The epochs: `steps` optimiser steps per epoch, each on mbs's minibatch k (a rank without one
// takes part without a gradient); epoch means of the loss terms into st (ppo.cpp).
void ppo_epochs(gb_torch_learner *l, const PpoSteps &S, int64_t steps, PpoMinibatches &mbs,
                gb_torch_stats *st);

// The log-probabilities [B*T] (on the learner's device) of b's actions under heads h of b's
// B*(T+1) obs rows (ppo.cpp): what V-trace weighs the actors' by, and the tests compare.
torch::Tensor batch_logp(const gb_torch_learner *l, const gb_torch_batch *b, const Heads &h);

// With a core (ppo_seq.cpp): the heads of b's B*(T+1) rows (obs: batch_obs's, the chunks' T
// steps and next_obs) as one sequence forward per chunk from b->state0 (zeros when NULL),
// with bridge.h's reset rule. Autograd as the caller's mode.
Heads ppo_seq_forward(gb_torch_learner *l, const gb_torch_batch *b, const torch::Tensor &obs);

// With a core: the epochs over minibatches of whole chunks (min(minibatches, B) of them,
// chunks shuffled every epoch), each a sequence forward from its chunks' state0 with gradients
// through the chunk, the loss over the valid steps (S).
void ppo_seq_epochs(gb_torch_learner *l, const gb_torch_batch *b, const torch::Tensor &obs,
                    const PpoSteps &S, gb_torch_stats *st);

// trainer.kernels gearbox (ppo_kernels.cpp): PPO's minibatch step in gearbox's own C where the
// network is a plain MLP with separate actor and critic torsos on the cpu in float32 (the
// learner's ppo_kernels; null elsewhere, made by ppo_kernels_for at init). ppo_kernels_apply:
// whether observations obs let them run (float32 on the cpu). ppo_kernels_forward: the heads
// of obs's rows, without gradients. ppo_kernels_minibatch: the loss terms of the steps idx of S
// (rows of S, [len] int64, cpu) with their gradients in every parameter's (zeroed first), as
// ppo.cpp's autograd path computes them.
struct PpoKernels;
std::shared_ptr<PpoKernels> ppo_kernels_for(gb_torch_learner *l);
bool ppo_kernels_apply(const gb_torch_learner *l, const torch::Tensor &obs);
Heads ppo_kernels_forward(gb_torch_learner *l, const torch::Tensor &obs);
gb_torch_ppo_terms ppo_kernels_minibatch(gb_torch_learner *l, const PpoSteps &S,
                                         const torch::Tensor &idx, const gb_torch_ppo_coefs &c);

} // namespace gbt
