// workers/torch/act.cpp: the models' acting forwards from caller buffers: model_act,
// model_act_noise and model_act_state (a core's state in and out), the heads' copies between
// device and host, and the draws of the actions in plain loops (sampling.h).
#include "workers/torch/model.hpp"
#include "workers/torch/sampling.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

using namespace gbt;

namespace {

float *values_or_scratch(gb_torch_model *m, float *given, int64_t count)
{
    if (given)
        return given;
    std::vector<float> &v = m->scratch_values;
    if ((int64_t)v.size() < count)
        v.resize((size_t)count);
    return v.data();
}

// Network outputs as host float rows, each head contiguous: q, logits [n][k]; mean, log_std
// [n][d]; value [n]. The heads the algorithm does not use are null.
struct HostHeads {
    const float *q = nullptr, *logits = nullptr, *mean = nullptr, *log_std = nullptr;
    const float *value = nullptr;
};

// Draws the actions from host rows in plain loops (sampling.h): one libtorch op at most (the
// draws from the model's generator, in the same order whatever the model's device) instead of
// a dozen a batch. Fills out's non-null fields.
void sample_rows(gb_torch_model *m, const HostHeads &h, int64_t n, int deterministic,
                 double epsilon, const float *noise, gb_torch_act_out *out)
{
    const gb_torch_space &sp = m->space;
    int64_t *action = (int64_t *)out->action;
    if (sp.discrete && !action) {
        if ((int64_t)m->scratch_actions.size() < n)
            m->scratch_actions.resize((size_t)n);
        action = m->scratch_actions.data();
    }
    if (m->algo == GB_ALGO_DQN) {
        torch::Tensor u;
        if (!deterministic && epsilon > 0.0)
            u = torch::rand({n, 2}, m->gen);
        gb_sample_epsilon_greedy(h.q, n, sp.n_actions, epsilon,
                                 u.defined() ? u.data_ptr<float>() : nullptr, action, out->value);
        if (out->logp)
            std::memset(out->logp, 0, sizeof(float) * (size_t)n);
        if (out->q)
            std::memcpy(out->q, h.q, sizeof(float) * (size_t)(n * sp.n_actions));
        return;
    }
    if (m->algo == GB_ALGO_PPO && sp.discrete) {
        torch::Tensor u;
        if (!deterministic)
            u = torch::rand({n}, m->gen);
        gb_sample_categorical(h.logits, n, sp.n_actions,
                              u.defined() ? u.data_ptr<float>() : nullptr, action, out->logp);
    } else {
        torch::Tensor drawn;
        const float *z = nullptr;
        if (!deterministic) {
            if (!noise)
                drawn = torch::randn({n, sp.action_dim}, m->gen);
            z = noise ? noise : drawn.data_ptr<float>();
        }
        float *x = values_or_scratch(m, (float *)out->action, n * sp.action_dim);
        if (m->algo == GB_ALGO_PPO) {
            gb_sample_gaussian(h.mean, h.log_std, n, sp.action_dim, z, x, out->logp);
        } else {
            gb_sample_squashed(h.mean, h.log_std, n, sp.action_dim, z, m->act_scale_host.data(),
                               m->act_bias_host.data(), x, out->logp);
            if (out->value)
                std::memset(out->value, 0, sizeof(float) * (size_t)n);
            return;
        }
    }
    if (out->value)
        std::memcpy(out->value, h.value, sizeof(float) * (size_t)n);
}

// The heads the algorithm samples from: each tensor, where its host rows go and its width.
struct HeadSlot {
    const torch::Tensor *t;
    const float **rows;
    int64_t width;
};

// Fills slots (3 at most) with the heads of h that m's algorithm samples from; returns how many.
int used_heads(const gb_torch_model *m, const Heads &h, HostHeads &hh, HeadSlot slots[3])
{
    const gb_torch_space &sp = m->space;
    int64_t k = sp.discrete ? sp.n_actions : sp.action_dim;
    if (m->algo == GB_ALGO_DQN) {
        slots[0] = {&h.q, &hh.q, k};
        return 1;
    }
    if (m->algo == GB_ALGO_PPO && sp.discrete) {
        slots[0] = {&h.logits, &hh.logits, k};
        slots[1] = {&h.value, &hh.value, 1};
        return 2;
    }
    slots[0] = {&h.mean, &hh.mean, k};
    slots[1] = {&h.log_std, &hh.log_std, k};
    slots[2] = {&h.value, &hh.value, 1};
    return m->algo == GB_ALGO_PPO ? 3 : 2; // SAC: no value head
}

// The heads of a cpu model: float rows in place (a copy only for another dtype or an expanded
// log_std), then sample_rows.
void act_cpu(gb_torch_model *m, const Heads &h, int64_t n, int deterministic, double epsilon,
             const float *noise, gb_torch_act_out *out)
{
    HostHeads hh;
    HeadSlot slots[3];
    torch::Tensor keep[3];
    int count = used_heads(m, h, hh, slots);
    for (int i = 0; i < count; i++) {
        keep[i] = slots[i].t->to(torch::kFloat32).contiguous();
        *slots[i].rows = keep[i].data_ptr<float>();
    }
    sample_rows(m, hh, n, deterministic, epsilon, noise, out);
}

// Waits for the work queued so far on the current stream of dev (a cuda model's: its copies).
void sync_stream(torch::Device dev)
{
    c10::impl::getDeviceGuardImpl(dev.type())->getStream(dev).synchronize();
}

// t, a 1-D buffer of dtype on dev (pinned on the host when dev is cuda and t is on the cpu),
// holds at least count elements: reallocated (doubling at least) only when it is too small.
void reserve(torch::Tensor &t, int64_t count, torch::ScalarType dtype, torch::Device dev,
             bool pinned)
{
    if (t.defined() && t.numel() >= count)
        return;
    int64_t cap = std::max<int64_t>(count, t.defined() ? 2 * t.numel() : 0);
    t = torch::empty({cap}, torch::TensorOptions().dtype(dtype).device(dev).pinned_memory(pinned));
}

// A cuda model's observations [n, *shape]: the caller's rows memcpy'd into the pinned staging
// buffer, then one asynchronous copy to the device buffer, viewed as float [n, *shape] (uint8
// frames converted on the device). The caller synchronises the stream before the next batch
// (act's copy back); m->pending until then.
torch::Tensor obs_staged(gb_torch_model *m, const void *obs, int64_t n)
{
    const gb_torch_space &sp = m->space;
    std::vector<int64_t> shape{n};
    int64_t bytes = n * (sp.obs_dtype == GB_DTYPE_UINT8 ? 1 : (int64_t)sizeof(float));
    for (int i = 0; i < sp.obs_ndim; i++) {
        shape.push_back(sp.obs_shape[i]);
        bytes *= sp.obs_shape[i];
    }
    if (m->pending) { // the previous batch threw before its synchronise: its copy may still run
        sync_stream(m->device);
        m->pending = false;
    }
    torch::Device host(torch::kCPU);
    reserve(m->obs_pinned, bytes, torch::kUInt8, host, m->device.is_cuda());
    reserve(m->obs_dev, bytes, torch::kUInt8, m->device, false);
    std::memcpy(m->obs_pinned.data_ptr(), obs, (size_t)bytes);
    torch::Tensor x = m->obs_dev.narrow(0, 0, bytes);
    x.copy_(m->obs_pinned.narrow(0, 0, bytes), /*non_blocking=*/true);
    m->pending = true;
    if (sp.obs_dtype == GB_DTYPE_UINT8)
        return x.view(shape).to(torch::kFloat32);
    return x.view(torch::kFloat32).view(shape);
}

// A cuda model's rows of floats in [n, width] (a core's state): memcpy'd into the pinned staging
// buffer, one asynchronous copy to the device buffer (synchronised as obs_staged's are).
torch::Tensor floats_staged(gb_torch_model *m, const float *rows, int64_t n, int64_t width)
{
    const int64_t count = n * width;
    torch::Device host(torch::kCPU);
    reserve(m->state_pinned, count, torch::kFloat32, host, m->device.is_cuda());
    reserve(m->state_dev, count, torch::kFloat32, m->device, false);
    std::memcpy(m->state_pinned.data_ptr(), rows, sizeof(float) * (size_t)count);
    torch::Tensor x = m->state_dev.narrow(0, 0, count);
    x.copy_(m->state_pinned.narrow(0, 0, count), /*non_blocking=*/true);
    m->pending = true;
    return x.view({n, width});
}

// A cuda model's heads: the ones the algorithm samples from, in float32, packed on the device
// head after head into one flat [n * W] tensor (then state [n, S] when given), one asynchronous
// copy into the pinned out_pinned, one synchronise, then sample_rows over the host blocks
// ([n, width] each) and state's rows into state_out.
void act_device(gb_torch_model *m, const Heads &h, int64_t n, int deterministic, double epsilon,
                const float *noise, const torch::Tensor *state, float *state_out,
                gb_torch_act_out *out)
{
    HostHeads hh;
    HeadSlot slots[3];
    int heads = used_heads(m, h, hh, slots);
    torch::Tensor parts[4]; // [n * width] each
    for (int i = 0; i < heads; i++) {
        const torch::Tensor &t = *slots[i].t;
        if (!t.defined() || t.numel() != n * slots[i].width)
            throw std::runtime_error("act: a network head of an unexpected shape");
        parts[i] = t.to(torch::kFloat32).reshape({-1});
    }
    int count_parts = heads;
    if (state)
        parts[count_parts++] = state->to(torch::kFloat32).reshape({-1});
    torch::Tensor packed = count_parts == 1 ? parts[0]
                                            : torch::cat(at::TensorList(parts, count_parts));
    int64_t count = packed.numel();
    reserve(m->out_pinned, count, torch::kFloat32, torch::Device(torch::kCPU),
            m->device.is_cuda());
    torch::Tensor rows = m->out_pinned.narrow(0, 0, count);
    rows.copy_(packed, /*non_blocking=*/true);
    if (m->device.is_cuda())
        sync_stream(m->device);
    m->pending = false;
    const float *p = rows.data_ptr<float>();
    for (int i = 0; i < heads; i++) {
        *slots[i].rows = p;
        p += n * slots[i].width;
    }
    if (state) // may overwrite the state the caller passed in: its copy is on the device
        std::memcpy(state_out, p, sizeof(float) * (size_t)state->numel());
    sample_rows(m, hh, n, deterministic, epsilon, noise, out);
}

// The acting forward of n rows, with a core's state (state_in [n, S] -> state_out) or without
// (S = 0: both ignored). Throws (call inside gb_torch_guard).
int act_rows(gb_torch_model *m, const void *obs, int64_t n, int deterministic, double epsilon,
             const float *noise, const float *state_in, float *state_out, gb_torch_act_out *out)
{
    torch::NoGradGuard no_grad;
    const int64_t S = m->net->state_size();
    torch::Tensor next; // [n, S] the state leaving the step
    if (m->device.is_cpu()) {
        if (S == 0) {
            act_cpu(m, m->net->forward(m->net->normalize(obs_tensor(m, obs, n))), n,
                    deterministic, epsilon, noise, out);
            return 0;
        }
        torch::Tensor in = torch::from_blob(const_cast<float *>(state_in), {n, S});
        Heads h = m->net->step(m->net->normalize(obs_tensor(m, obs, n)), in, &next);
        // before the heads' draws, and state_out may be state_in: next is a tensor of its own
        torch::from_blob(state_out, {n, S}).copy_(next);
        act_cpu(m, h, n, deterministic, epsilon, noise, out);
        return 0;
    }
    torch::Tensor x = m->net->normalize(obs_staged(m, obs, n));
    if (S == 0) {
        act_device(m, m->net->forward(x), n, deterministic, epsilon, noise, nullptr, nullptr,
                   out);
        return 0;
    }
    Heads h = m->net->step(x, floats_staged(m, state_in, n, S), &next);
    act_device(m, h, n, deterministic, epsilon, noise, &next, state_out, out);
    return 0;
}

// The refusal of a stateless act on a model with a core (GB_EINVAL), or 0.
int needs_no_state(const gb_torch_model *m, const char *what, gb_error *err)
{
    if (m->net->state_size() == 0)
        return 0;
    return gb_error_set(err, GB_EINVAL, "%s: the model has a recurrent core (policy.model.core): "
                        "act with model_act_state and each row's state (%lld floats a row)",
                        what, (long long)m->net->state_size());
}

} // namespace

extern "C" int gbt_model_act(gb_torch_model *m, const void *obs, int64_t n,
                             int deterministic, double epsilon, gb_torch_act_out *out,
                             gb_error *err)
{
    return gbt_model_act_noise(m, obs, n, deterministic, epsilon, nullptr, out, err);
}

extern "C" int gbt_model_act_noise(gb_torch_model *m, const void *obs, int64_t n,
                                   int deterministic, double epsilon, const float *noise,
                                   gb_torch_act_out *out, gb_error *err)
{
    int rc = needs_no_state(m, "act", err);
    if (rc)
        return rc;
    if (n <= 0)
        return n == 0 ? 0 : gb_error_set(err, GB_EINVAL, "act: n = %lld", (long long)n);
    return gb_torch_guard(err, "act", [&] {
        return act_rows(m, obs, n, deterministic, epsilon, noise, nullptr, nullptr, out);
    });
}

extern "C" int64_t gbt_model_state_size(const gb_torch_model *m)
{
    return m->net->state_size();
}

extern "C" int gbt_model_act_state(gb_torch_model *m, const void *obs, int64_t n,
                                   int deterministic, double epsilon, const float *noise,
                                   const float *state_in, float *state_out,
                                   gb_torch_act_out *out, gb_error *err)
{
    const int64_t S = m->net->state_size();
    if (S > 0 && (!state_in || !state_out))
        return gb_error_set(err, GB_EINVAL, "act_state: the model's core needs state_in and "
                            "state_out (%lld floats a row)", (long long)S);
    if (n <= 0)
        return n == 0 ? 0 : gb_error_set(err, GB_EINVAL, "act_state: n = %lld", (long long)n);
    return gb_torch_guard(err, "act_state", [&] {
        return act_rows(m, obs, n, deterministic, epsilon, noise, state_in, state_out, out);
    });
}

extern "C" int gbt_model_forward(gb_torch_model *m, const void *obs, int64_t n,
                                 gb_error *err)
{
    if (n <= 0)
        return n == 0 ? 0 : gb_error_set(err, GB_EINVAL, "forward: n = %lld", (long long)n);
    return gb_torch_guard(err, "forward", [&] {
        torch::NoGradGuard no_grad;
        torch::Tensor x = m->net->normalize(obs_tensor(m, obs, n));
        const int64_t S = m->net->state_size();
        torch::Tensor next; // a core's: from zero state (a cost measurement, outputs discarded)
        Heads h = S == 0 ? m->net->forward(x)
                         : m->net->step(x, torch::zeros({n, S}, x.options()), &next);
        (void)h;
        return 0;
    });
}
