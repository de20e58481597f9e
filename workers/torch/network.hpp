// workers/torch/network.hpp: the bridge's networks (network.cpp): built-in MLP/CNN policies,
// TorchScript policies, SAC critics.
// defines: gbt::Heads, gbt::select_rows, gbt::Net, gbt::make_net, gbt::make_script_net,
//          gbt::Critic, gbt::init_mutex
#pragma once

#include "workers/torch/internal.hpp"
#include "workers/torch/mlp_program.hpp"

#include <memory>
#include <mutex>

namespace gbt {

// What a policy network produces; fields that do not apply stay undefined.
struct Heads {
    torch::Tensor logits;  // [N, n]   PPO discrete
    torch::Tensor mean;    // [N, A]   PPO continuous, SAC
    torch::Tensor log_std; // [N, A]
    torch::Tensor value;   // [N]      PPO
    torch::Tensor q;       // [N, n]   DQN
};

// The rows idx ([k] int64 on their device) of every defined head.
Heads select_rows(const Heads &h, const torch::Tensor &idx);

// policy.model.normalize_obs's running statistics of the observations, float64 buffers of the
// acting network (exported with its parameters, checkpointed): mean [D], var [D], count [1]
// over D = an observation's values. Undefined without them.
struct ObsStats {
    torch::Tensor mean, var, count;
    bool defined() const { return mean.defined(); }
};

// A policy network, built-in or TorchScript. A network with a recurrent core (state_size() S >
// 0, workers/torch/core.hpp) acts through step and trains through sequence; its forward throws
// (it never runs on a silent zero state). Without one, step and sequence are forward.
struct Net {
    virtual ~Net() = default;
    virtual Heads forward(const torch::Tensor &obs) = 0; // obs: float [N, *obs_shape] on device
    // Floats of state per row (bridge.h's Cores): 0 without a core.
    virtual int64_t state_size() const { return 0; }
    // One step: obs [N, *obs_shape], state [N, S] entering it -> heads, and *state_out [N, S]
    // leaving it (left alone without a core).
    virtual Heads step(const torch::Tensor &obs, const torch::Tensor &state,
                       torch::Tensor *state_out)
    {
        (void)state;
        (void)state_out;
        return forward(obs);
    }
    // B sequences of T1 rows: obs [B*T1, *obs_shape] (sequence-major), state0 [B, S] entering
    // row 0, reset_before [B, T1] float (1: state zeroed before the row) -> heads over the
    // B*T1 rows, in the same order.
    virtual Heads sequence(const torch::Tensor &obs, int64_t B, int64_t T1,
                           const torch::Tensor &state0, const torch::Tensor &reset_before)
    {
        (void)B;
        (void)T1;
        (void)state0;
        (void)reset_before;
        return forward(obs);
    }
    // obs [N, *shape] (float, on the network's device) as the network sees them: with
    // policy.model.normalize_obs, (obs - mean) / sqrt(var + 1e-8) clipped to +- obs_clip;
    // without, as they are. Every forward's caller applies it (act, the learners' batches).
    virtual torch::Tensor normalize(const torch::Tensor &obs) { return obs; }
    virtual ObsStats obs_stats() { return {}; }
    virtual NamedTensors named_tensors() = 0;           // parameters, then buffers; fixed order
    virtual std::vector<torch::Tensor> parameters() = 0;
    virtual void set_training(bool on) = 0;
    // Inference in precision (gb_precision) from now on, through kernels (gb_kernels): the
    // reduced copies of the Linear layers, or gearbox's program of a plain MLP, are built from
    // the current parameters (fp32 with libtorch's kernels: none). Only for a network whose
    // parameters change through refresh_precision's callers (a policy worker's import): the
    // copies do not follow an optimizer. Throws (torchscript: a Failure with GB_EUNSUPPORTED;
    // int8 off the cpu).
    virtual void set_precision(int precision, int kernels) = 0;
    // Rebuilds the reduced copies from the current parameters (after they changed).
    virtual void refresh_precision() = 0;
    // What runs the inference forward now ("gearbox fp32", "libtorch int8", ...); static.
    virtual const char *kernels() const = 0;
    // A plain MLP (Linear layers, each followed by tanh, relu or nothing; no convolution, core
    // or layer norm) whose heads each end a chain of their own (no layer shared): the chain to
    // head a (DQN's Q, PPO's pi) and to head b (PPO's v; empty where there is one head), for a
    // learner's own forward and backward (mlp_train.h). False for any other network (PPO's
    // shared torso too).
    virtual bool mlp_chains(MlpChain *a, MlpChain *b)
    {
        (void)a;
        (void)b;
        return false;
    }
    // A plain MLP (as mlp_chains) whose two heads are Linear layers reading one torso's last
    // layer (SAC's actor: mean and log_std): the torso's chain (empty: the heads read the input
    // rows) and each head as a chain of one layer. False for any other network.
    virtual bool mlp_torso_heads(MlpChain *torso, MlpChain *a, MlpChain *b)
    {
        (void)torso;
        (void)a;
        (void)b;
        return false;
    }
};

// Held while seeding libtorch's process-wide generator and initialising a network from it.
std::mutex &init_mutex();

// Builds the acting network of cfg's algorithm on dev. Throws on bad config. Draws its initial
// weights from libtorch's global generator: hold init_mutex() and seed it first.
std::shared_ptr<Net> make_net(const gb_config *cfg, const gb_torch_space *sp, torch::Device dev);

// A loaded TorchScript module (from the file path, named in errors) as the acting network of
// algo for the space sp (script_net.cpp); state_size > 0: its forward takes (obs, state) and
// returns its outputs and then the next state. Throws when the module's state_size attribute
// (0 when absent) is not state_size; each forward throws a Failure (GB_EINVAL) naming the
// expected and the actual shapes when an output does not fit sp's actions.
std::shared_ptr<Net> make_script_net(torch::jit::Module mod, int algo, const gb_torch_space &sp,
                                     int64_t state_size, const std::string &path);

// SAC's Q(s, a): MLP over [flattened obs, action scaled to [-1, 1]].
struct CriticImpl : torch::nn::Module {
    CriticImpl(const gb_config_model &mc, int64_t in_dim);
    torch::Tensor forward(const torch::Tensor &obs_flat, const torch::Tensor &act); // -> [N]
    torch::nn::Sequential body{nullptr};
};
TORCH_MODULE(Critic);

} // namespace gbt
