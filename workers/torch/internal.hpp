// workers/torch/internal.hpp: C++ side of the libtorch bridge shared by its .cpp files: the
// networks, the model and learner structs, distributions, and the exception boundary.
// Nothing outside workers/torch/ includes this file.
#pragma once

#include "workers/torch/bridge.h"

#include <torch/script.h>
#include <torch/torch.h>

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace gbt {

// What a policy network produces; fields that do not apply stay undefined.
struct Heads {
    torch::Tensor logits;  // [N, n]   PPO discrete
    torch::Tensor mean;    // [N, A]   PPO continuous, SAC
    torch::Tensor log_std; // [N, A]
    torch::Tensor value;   // [N]      PPO
    torch::Tensor q;       // [N, n]   DQN
};

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// A policy network, built-in or TorchScript.
struct Net {
    virtual ~Net() = default;
    virtual Heads forward(const torch::Tensor &obs) = 0; // obs: float [N, *obs_shape] on device
    virtual NamedTensors named_tensors() = 0;           // parameters, then buffers; fixed order
    virtual std::vector<torch::Tensor> parameters() = 0;
    virtual void set_training(bool on) = 0;
};

// Builds the acting network of cfg's algorithm (no device move). Throws on bad config.
std::shared_ptr<Net> make_net(const gb_config *cfg, const gb_torch_space *sp, torch::Device dev);

// SAC's Q(s, a): MLP over [flattened obs, action scaled to [-1, 1]].
struct CriticImpl : torch::nn::Module {
    CriticImpl(const gb_config_model &mc, int64_t in_dim);
    torch::Tensor forward(const torch::Tensor &obs_flat, const torch::Tensor &act); // -> [N]
    torch::nn::Sequential body{nullptr};
};
TORCH_MODULE(Critic);

} // namespace gbt

struct gb_torch_model {
    gb_torch_space space;
    int algo = 0; // gb_algorithm
    torch::Device device{torch::kCPU};
    std::shared_ptr<gbt::Net> net;
    at::Generator gen;                   // sampling (CPU)
    std::vector<gb_torch_param> layout;  // the flat buffer's table
    std::vector<torch::Tensor> tensors;  // live tensors, in layout order
    uint64_t total = 0;
    uint64_t version = 0;
    torch::Tensor act_scale, act_bias;   // SAC: [A] on device: env = tanh(u) * scale + bias
};

struct gb_torch_learner {
    gb_config cfg;
    gb_torch_model *model = nullptr; // owned
    torch::Device device{torch::kCPU};
    at::Generator gen;               // minibatch shuffles and training noise
    // DQN
    std::shared_ptr<gbt::Net> target;
    // SAC
    gbt::Critic q1{nullptr}, q2{nullptr}, q1t{nullptr}, q2t{nullptr};
    torch::Tensor log_alpha;
    double target_entropy = 0.0;
    std::unique_ptr<torch::optim::Adam> opt, opt_q, opt_alpha;
    double progress = 0.0;
    int64_t train_steps = 0;
};

namespace gbt {

// Model internals (model.cpp).
std::mutex &init_mutex(); // held while seeding libtorch's global generator and initialising
int model_init(gb_torch_model *m, const gb_config *cfg, const gb_torch_space *sp, uint64_t seed,
               torch::Device dev, gb_error *err);
void model_build_layout(gb_torch_model *m);
torch::Device device_for(int gb_device); // throws when CUDA is asked for and absent
// obs [N, *shape] from a caller pointer (no copy), on the model's device as float [N, *shape].
torch::Tensor obs_tensor(const gb_torch_model *m, const void *obs, int64_t n);
torch::Tensor flat(const torch::Tensor &obs); // [N, *shape] -> [N, prod]

// Distributions (model.cpp).
torch::Tensor categorical_logp(const torch::Tensor &logits, const torch::Tensor &a); // [N]
torch::Tensor categorical_entropy(const torch::Tensor &logits);                       // [N]
torch::Tensor gaussian_logp(const torch::Tensor &mean, const torch::Tensor &log_std,
                            const torch::Tensor &x);                                  // [N]
torch::Tensor gaussian_entropy(const torch::Tensor &log_std);                         // [N]
// log-prob of tanh(u) scaled by scale ([A] or undefined for 1) with the Jacobian correction.
torch::Tensor squashed_logp(const torch::Tensor &mean, const torch::Tensor &log_std,
                            const torch::Tensor &u, const torch::Tensor &scale);

// Losses (ppo.cpp, dqn.cpp, sac.cpp); each returns scalars as 0-dim tensors.
struct PpoLoss {
    torch::Tensor policy, value, total, approx_kl, clip_fraction;
};
PpoLoss ppo_loss(const torch::Tensor &new_logp, const torch::Tensor &old_logp,
                 const torch::Tensor &adv, const torch::Tensor &v, const torch::Tensor &old_v,
                 const torch::Tensor &ret, const torch::Tensor &entropy, double clip,
                 bool clip_value, double value_coef, double entropy_coef);
torch::Tensor huber(const torch::Tensor &x, double delta);

// Algorithms.
void ppo_train(gb_torch_learner *l, const gb_torch_batch *b, gb_torch_stats *st, float *prio);
void dqn_train(gb_torch_learner *l, const gb_torch_batch *b, gb_torch_stats *st, float *prio);
void sac_train(gb_torch_learner *l, const gb_torch_batch *b, gb_torch_stats *st, float *prio);
void learner_set_lr(torch::optim::Optimizer &opt, double lr);
double learner_lr(const gb_torch_learner *l, double base);
double clip_grads(const std::vector<torch::Tensor> &params, double max_norm);
// Target networks (learner.cpp): dst = src (hard), or dst = (1 - tau) dst + tau src for
// floating-point tensors and dst = src for the others (Polyak). Same architecture required.
void copy_tensors(const NamedTensors &dst, const NamedTensors &src);
void polyak_update(const NamedTensors &dst, const NamedTensors &src, double tau);
NamedTensors module_tensors(torch::nn::Module &m); // parameters, then buffers

// Batch helpers (learner.cpp).
// obs and next_obs as one float tensor [B*(T+1), *shape] on the learner's device (one copy).
torch::Tensor batch_obs(const gb_torch_learner *l, const gb_torch_batch *b);
torch::Tensor cpu_view(const void *p, std::vector<int64_t> shape, torch::ScalarType t);
// Index of step (b, t) in the [B*(T+1)] obs rows.
inline int64_t obs_row(int64_t b, int64_t t, int64_t T) { return b * (T + 1) + t; }
// Chunk priorities from |td| [B, T] and valid [B, T] (0.9 max + 0.1 mean, + 1e-6).
void chunk_priorities(const torch::Tensor &abs_td, const torch::Tensor &valid, float *prio);

} // namespace gbt

// Runs body, turning a C++ exception into GB_ETORCH (or GB_ENOMEM) in err.
template <class F> static inline int gb_torch_guard(gb_error *err, const char *what, F &&body)
{
    try {
        return body();
    } catch (const std::bad_alloc &) {
        return gb_error_set(err, GB_ENOMEM, "%s: out of memory", what);
    } catch (const c10::Error &e) {
        return gb_error_set(err, GB_ETORCH, "%s: libtorch: %s", what, e.what_without_backtrace());
    } catch (const std::exception &e) {
        return gb_error_set(err, GB_ETORCH, "%s: %s", what, e.what());
    }
}
