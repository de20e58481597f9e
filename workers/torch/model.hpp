// workers/torch/model.hpp: the model behind gb_torch_model (model.cpp; its acting forwards:
// act.cpp): its acting network, its parameter layout and what the learners need from it.
// defines: struct gb_torch_model, gbt::model_init, gbt::device_for, gbt::obs_tensor, gbt::flat
#pragma once

#include "workers/torch/network.hpp"

#include <memory>
#include <vector>

struct gb_torch_model {
    gb_torch_space space;
    int algo = 0; // gb_algorithm
    torch::Device device{torch::kCPU};
    std::shared_ptr<gbt::Net> net;
    at::Generator gen;                   // sampling (CPU)
    std::vector<gb_param_entry> layout;  // the flat buffer's table
    std::vector<torch::Tensor> tensors;  // live tensors, in layout order
    uint64_t total = 0;
    uint64_t version = 0;
    int kernels = GB_KERNELS_GEARBOX;    // cfg's policy.kernels, for set_precision
    torch::Tensor act_scale, act_bias;   // SAC: [A] on device: env = tanh(u) * scale + bias
    // act's outputs the caller did not ask for (grown to the largest batch, then reused)
    std::vector<float> scratch_values;
    std::vector<int64_t> scratch_actions;
    std::vector<float> act_scale_host, act_bias_host; // SAC: act_scale, act_bias on the host
    // A cuda model's act: the observations in through obs_pinned (pinned host) -> obs_dev, the
    // heads out through out_pinned (pinned host, float); each grown to the largest batch, then
    // reused (a core's state goes in through state_pinned -> state_dev and out with the heads).
    // pending: a copy from obs_pinned may still run (act threw before its synchronise).
    torch::Tensor obs_pinned, obs_dev; // uint8 [capacity bytes]
    torch::Tensor out_pinned;          // float [capacity]
    torch::Tensor state_pinned, state_dev; // a core's state in: float [capacity] each
    bool pending = false;
    torch::Tensor param_dev; // a cuda model's import: uint8 [total] on device, the flat blob
};

namespace gbt {

// Checks the space against cfg, builds the network on dev from seed and its layout table.
// Returns 0 or a GB_E* code in err; may throw (call inside gb_torch_guard).
int model_init(gb_torch_model *m, const gb_config *cfg, const gb_torch_space *sp, uint64_t seed,
               torch::Device dev, gb_error *err);
torch::Device device_for(int gb_device); // throws when CUDA is asked for and absent
// obs [N, *shape] from a caller pointer (no copy), on the model's device as float [N, *shape].
torch::Tensor obs_tensor(const gb_torch_model *m, const void *obs, int64_t n);
torch::Tensor flat(const torch::Tensor &obs); // [N, *shape] -> [N, prod]

} // namespace gbt
