// workers/torch/algorithm.hpp: what the learner (learner.cpp) and the algorithms (ppo.cpp,
// dqn.cpp, sac.cpp) share: the learner's state, one ops table per algorithm, and the training
// helpers (algorithm.cpp). learner.cpp picks an algorithm's ops; the algorithms include only this
// header, never the learner's code, so dependencies run one way.
// defines: struct gb_torch_learner, gbt::Algorithm, gbt::algorithm_for, the training helpers
//          (data-parallel: gbt::sync_grads)
#pragma once

#include "workers/torch/distributions.hpp"
#include "workers/torch/model.hpp"
#include "workers/torch/optimizer.hpp"
#include "workers/torch/target_net.hpp"

#include <memory>
#include <vector>

namespace gbt {
struct ObsPending; // obs_stats.cpp
struct DqnKernels; // dqn.cpp
struct PpoKernels; // ppo_kernels.cpp
struct SacKernels; // sac_kernels.cpp
}

struct gb_torch_learner {
    gb_config cfg;
    gb_torch_model *model = nullptr; // owned
    torch::Device device{torch::kCPU};
    at::Generator gen;               // minibatch shuffles and training noise
    // DQN; its forward and backward in C where the network allows (trainer.kernels: none when
    // libtorch's autograd runs them)
    std::shared_ptr<gbt::Net> target;
    std::shared_ptr<gbt::DqnKernels> dqn_kernels;
    // PPO's forward and backward in C where the network allows (trainer.kernels; none: autograd)
    std::shared_ptr<gbt::PpoKernels> ppo_kernels;
    // SAC; its steps in C where the networks allow (trainer.kernels; none: autograd)
    gbt::Critic q1{nullptr}, q2{nullptr}, q1t{nullptr}, q2t{nullptr};
    std::shared_ptr<gbt::SacKernels> sac_kernels;
    // SAC's standard-normal noise from the caller's fill instead of gen (learner_set_noise)
    void (*noise_fill)(void *ctx, float *out, int64_t n) = nullptr;
    void *noise_ctx = nullptr;
    torch::Tensor log_alpha;
    double target_entropy = 0.0;
    std::unique_ptr<gbt::FlatAdam> opt, opt_q, opt_alpha;
    // DQN's target or SAC's two critic targets, tied to opt's or opt_q's flat parameters
    gbt::TargetLink targets;
    double progress = 0.0;
    int64_t train_steps = 0;
    // data-parallel training (gbt_learner_set_group): the group (not owned), bucket size
    gb_group *group = nullptr;
    size_t bucket_bytes = 0;
    // policy.model.normalize_obs, trainer.algorithm.reward_scale: rows seen since the last
    // step (obs_stats.cpp); the returns' statistics: float64 [3] count, mean, variance
    std::shared_ptr<gbt::ObsPending> obs_pending;
    torch::Tensor return_stats;
    std::vector<float> scaled_rewards; // a step's rewards, scaled (kept: no allocation a step)
};

namespace gbt {

// The running statistics of the observations (obs_stats.cpp): what learner_observe adds up on
// any thread, and what each training step merges into the acting network's ObsStats first.
// Merges what was observed since the last call (summed over l->group's ranks first, so the
// replicas stay identical) into the model's statistics and the target network's copy, and the
// returns into l->return_stats. Called at the start of every training step; nothing without
// policy.model.normalize_obs or trainer.algorithm.reward_scale.
void merge_obs_stats(gb_torch_learner *l);
// b's rewards divided by the returns' deviation and clipped (trainer.algorithm.reward_scale),
// into scaled ([B*T], resized), and b pointing at them; b unchanged without reward_scale.
void scale_rewards(const gb_torch_learner *l, gb_torch_batch *b, std::vector<float> &scaled);
// Makes (at the learner's creation) or empties the sums, their shift the statistics' mean now:
// after the statistics were replaced (load, set_group). Nothing without them.
void reset_obs_pending(gb_torch_learner *l);

// One algorithm. init builds its networks beyond the acting model (targets, critics) and its
// optimisers into l (l->cfg, l->device, l->gen and l->model are set); train runs one training
// step on a batch, fills st and, when prio is not NULL, one new priority per chunk [B]. Both
// throw on failure (the learner calls them inside gb_torch_guard).
struct Algorithm {
    const char *name;
    void (*init)(gb_torch_learner *l, const gb_torch_space *sp, uint64_t seed);
    void (*train)(gb_torch_learner *l, const gb_torch_batch *b, gb_torch_stats *st, float *prio);
};
extern const Algorithm ppo_algorithm, dqn_algorithm, sac_algorithm;
const Algorithm &algorithm_for(int gb_algorithm); // GB_ALGO_*

// Losses; each returns scalars as 0-dim tensors.
struct PpoLoss {
    torch::Tensor policy, value, total, approx_kl, clip_fraction;
};
PpoLoss ppo_loss(const torch::Tensor &new_logp, const torch::Tensor &old_logp,
                 const torch::Tensor &adv, const torch::Tensor &v, const torch::Tensor &old_v,
                 const torch::Tensor &ret, const torch::Tensor &entropy, double clip,
                 bool clip_value, double value_coef, double entropy_coef);
torch::Tensor huber(const torch::Tensor &x, double delta);

// Optimisation (algorithm.cpp).
double learner_lr(const gb_torch_learner *l, double base); // base, annealed by l->progress
// Data-parallel training (algorithm.cpp), for every optimiser step: sync_grads before the
// optimiser's clip_grad_norm. Without l->group, sync_grads only says whether any of params has a
// gradient; with it, it replaces the gradients of params by their mean over the ranks that have one
// (the sum, all-reduced in buckets of at most l->bucket_bytes, divided by the number of such ranks;
// a rank without one sends zeros, so every rank makes the same collectives), leaves undefined those
// no rank has, and returns whether any rank had any. A rank with no data for a step calls
// drop_grads(params) first, so it counts as having none. group_max: the largest v over the group (v
// without one). Group failures throw gbt::Failure.
bool sync_grads(gb_torch_learner *l, const std::vector<torch::Tensor> &params);
void drop_grads(const std::vector<torch::Tensor> &params);
int64_t group_max(gb_torch_learner *l, int64_t v);
// Target networks: dst = src (hard), or dst = (1 - tau) dst + tau src for floating-point tensors
// and dst = src for the others (Polyak). Same architecture required.
void copy_tensors(const NamedTensors &dst, const NamedTensors &src);
void polyak_update(const NamedTensors &dst, const NamedTensors &src, double tau);
NamedTensors module_tensors(torch::nn::Module &m); // parameters, then buffers


// Batches (algorithm.cpp).
// obs and next_obs as one float tensor [B*(T+1), *shape] on the learner's device (one copy),
// as the network sees them (Net::normalize).
torch::Tensor batch_obs(const gb_torch_learner *l, const gb_torch_batch *b);
torch::Tensor cpu_view(const void *p, std::vector<int64_t> shape, torch::ScalarType t);
// obs rows [B*T1, *shape] viewed as [B, T1, *shape] (chunk-major), and back: [B, T1, *shape]
// as [B*T1, *shape].
torch::Tensor by_chunk(const torch::Tensor &obs, int64_t B, int64_t T1);
torch::Tensor flat_chunks(const torch::Tensor &x);
// Index of step (b, t) in the [B*(T+1)] obs rows.
inline int64_t obs_row(int64_t b, int64_t t, int64_t T) { return b * (T + 1) + t; }

// A batch's sequence inputs for a core (Net::sequence) on the learner's device: state0 [B, S]
// (zeros when b has none) and reset_before [B, T+1] (row t > 0: 1 where row t-1 is a reset
// row; row 0: 0, state0 enters). What recurrent PPO and R2D2 run their chunks from.
struct SeqInputs {
    torch::Tensor state0, reset;
};
SeqInputs seq_inputs(const gb_torch_learner *l, const gb_torch_batch *b);

// The valid steps of a batch of chunks as N transitions with n-step returns (gb_torch_nstep):
// what DQN (n = dqn.n_step) and SAC (n = 1) train on.
struct Transitions {
    int64_t N;
    torch::Tensor step_idx;            // [N] int64 (CPU): flat step index b*T + t
    torch::Tensor row_idx, brow_idx;   // [N] int64 on dev: obs rows of the step and its bootstrap
    torch::Tensor ret, disc;           // [N] float32 on dev: n-step return, gamma^m or 0
    torch::Tensor weight;              // [N] on dev: importance weights; undefined without
};
Transitions valid_transitions(const gb_torch_batch *b, int64_t n_step, double gamma,
                              torch::Device dev);
// The mean of the valid steps' |TD| (td: CPU float [tr.N]; 0 without valid steps) and, when
// prio is not NULL, each chunk's priority from them (gb_torch_chunk_priorities; 1e-6 for a chunk
// without valid steps).
double td_priorities(const Transitions &tr, int64_t B, int64_t T, const torch::Tensor &td,
                     float *prio);

// R2D2 (dqn_seq.cpp): the online network's Q with gradients and the target network's without,
// over every obs row [B*(T+1), n] of a batch (obs: batch_obs), each chunk replayed from its
// state0 with dqn.burn_in rows of burn-in (their rows' Q: zeros, never trained on); and the
// transitions of tr whose step lies after the burn-in.
struct QRows {
    torch::Tensor q, qt;
};
// R2D2's value rescaling (dqn.cpp): h(x) = sign(x) (sqrt(|x| + 1) - 1) + 0.001 x, its inverse.
torch::Tensor value_h(const torch::Tensor &x);
torch::Tensor value_h_inverse(const torch::Tensor &x);
QRows r2d2_rows(gb_torch_learner *l, const gb_torch_batch *b, const torch::Tensor &obs);
Transitions after_burn_in(const Transitions &tr, int64_t T, int64_t burn_in);

} // namespace gbt
