// workers/torch/sac.hpp: what SAC's two ways of computing a step share (sac.cpp, libtorch's
// autograd; sac_kernels.cpp, gearbox's own C): what the critics' step leaves for the actor's, and
// the kernels' entry points.
// defines: gbt::SacStep, gbt::sac_noise, gbt::sac_kernels_for, gbt::sac_kernels_target,
//          gbt::sac_kernels_critic, gbt::sac_kernels_actor
#pragma once

#include "workers/torch/algorithm.hpp"

namespace gbt {

// What the critics' step leaves for the actor's and the statistics: the valid steps'
// observations (o, and of flattened), the critic's Q1, |y - q1| (td: CPU float [N]) and its loss.
struct SacStep {
    torch::Tensor o, of, q1, td;
    double qloss = 0.0;
};

// Standard-normal noise of shape (float32, on the cpu) for a draw of actions: from the learner's
// generator, or from the fill learner_set_noise gave (sac.cpp). Every draw of either path takes
// it, in the same order and shapes.
torch::Tensor sac_noise(gb_torch_learner *l, at::IntArrayRef shape);

// trainer.kernels gearbox (sac_kernels.cpp): SAC's step in gearbox's own C where the actor is a
// plain MLP (a torso and its mean and log_std heads) and so are the critics, on the cpu in
// float32 (the learner's sac_kernels; null elsewhere, made by sac_kernels_for at init). The same
// arithmetic and the same draws from the learner's generator as the autograd path, so either
// trains the same networks (test_sac_kernels). For the N valid steps of a batch:
// sac_kernels_target: the critics' target y [N] from the next observations' rows of2 (flat,
// float) with a fresh draw of actions. sac_kernels_critic: both critics' loss on the rows
// s.of with actions a ([N, A] in [-1, 1]) against y, its gradients added into the critics'
// (zeroed first); fills s.q1, s.td and s.qloss. sac_kernels_actor: the actor's loss on s.of
// with a fresh draw, its gradients added into the actor's parameters (zeroed first); returns the
// loss, the draws' mean log-probability into *logp_mean.
std::shared_ptr<SacKernels> sac_kernels_for(gb_torch_learner *l);
torch::Tensor sac_kernels_target(gb_torch_learner *l, const Transitions &tr,
                                 const torch::Tensor &of2, double alpha);
void sac_kernels_critic(gb_torch_learner *l, const Transitions &tr, const torch::Tensor &a,
                        const torch::Tensor &y, SacStep &s);
double sac_kernels_actor(gb_torch_learner *l, const SacStep &s, double alpha, double *logp_mean);

} // namespace gbt
