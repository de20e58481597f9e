// workers/torch/model.cpp: the models' C API: create (from the config or a TorchScript file),
// batched act from caller buffers, parameter layout, export and import as one flat buffer.
#include "workers/torch/model.hpp"
#include "workers/torch/testing.h"
#include "workers/torch/precision.hpp"
#include "workers/torch/sampling.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <mutex>
#include <stdexcept>

namespace gbt {

namespace {

gb_dtype dtype_of(torch::ScalarType t)
{
    switch (t) {
    case torch::kFloat32: return GB_DTYPE_FLOAT32;
    case torch::kFloat64: return GB_DTYPE_FLOAT64;
    case torch::kInt64: return GB_DTYPE_INT64;
    case torch::kInt32: return GB_DTYPE_INT32;
    case torch::kInt16: return GB_DTYPE_INT16;
    case torch::kInt8: return GB_DTYPE_INT8;
    case torch::kUInt8: return GB_DTYPE_UINT8;
    case torch::kBool: return GB_DTYPE_BOOL;
    case torch::kFloat16: return GB_DTYPE_FLOAT16;
    case torch::kBFloat16: return GB_DTYPE_BFLOAT16;
    default: throw std::runtime_error("parameter with an unsupported dtype");
    }
}

} // namespace

torch::Device device_for(int gb_device)
{
    if (gb_device == GB_DEVICE_CUDA) {
        if (!torch::cuda::is_available())
            throw std::runtime_error("device cuda requested but libtorch sees no CUDA device");
        return torch::Device(torch::kCUDA, 0);
    }
    return torch::Device(torch::kCPU);
}
static int check_space(const gb_config *cfg, const gb_torch_space *sp, gb_error *err)
{
    int algo = cfg->trainer.algorithm.name;
    if (sp->obs_ndim < 1 || sp->obs_ndim > GB_TORCH_MAX_DIMS)
        return gb_error_set(err, GB_EINVAL, "observation rank %d out of range", sp->obs_ndim);
    for (int i = 0; i < sp->obs_ndim; i++)
        if (sp->obs_shape[i] < 1)
            return gb_error_set(err, GB_EINVAL, "observation dimension %d is %lld", i,
                                (long long)sp->obs_shape[i]);
    if (sp->obs_dtype != GB_DTYPE_FLOAT32 && sp->obs_dtype != GB_DTYPE_UINT8)
        return gb_error_set(err, GB_EUNSUPPORTED, "observations must be float32 or uint8, not %s",
                            gb_dtype_name(sp->obs_dtype));
    if (sp->discrete && sp->n_actions < 1)
        return gb_error_set(err, GB_EINVAL, "discrete action space with %lld actions",
                            (long long)sp->n_actions);
    if (!sp->discrete && (sp->action_dim < 1 || sp->action_dim > GB_TORCH_MAX_ACTION_DIM))
        return gb_error_set(err, GB_EINVAL, "continuous action dimension %lld not in 1..%d",
                            (long long)sp->action_dim, GB_TORCH_MAX_ACTION_DIM);
    if (algo == GB_ALGO_DQN && !sp->discrete)
        return gb_error_set(err, GB_EINVAL, "dqn needs a discrete action space");
    if (algo == GB_ALGO_SAC) {
        if (sp->discrete)
            return gb_error_set(err, GB_EINVAL, "sac needs a continuous action space");
        for (int64_t i = 0; i < sp->action_dim; i++)
            if (!std::isfinite(sp->action_low[i]) || !std::isfinite(sp->action_high[i]) ||
                !(sp->action_high[i] > sp->action_low[i]))
                return gb_error_set(err, GB_EINVAL, "sac needs finite bounds, action %lld has "
                                    "[%g, %g]", (long long)i, sp->action_low[i],
                                    sp->action_high[i]);
        if (cfg->policy.model.type == GB_MODEL_CNN)
            return gb_error_set(err, GB_EUNSUPPORTED, "sac with a cnn model is not supported "
                                "(its critics are MLPs over flattened observations)");
    }
    if (cfg->policy.model.type == GB_MODEL_TORCHSCRIPT && !cfg->policy.model.torchscript[0])
        return gb_error_set(err, GB_EINVAL, "policy.model.type is torchscript but "
                            "policy.model.torchscript is empty");
    if (cfg->policy.model.type == GB_MODEL_CNN && sp->obs_ndim != 3)
        return gb_error_set(err, GB_EINVAL, "cnn model needs (C, H, W) observations, got rank %d",
                            sp->obs_ndim);
    return 0;
}

// The flat buffer's table: every named tensor of the net in order, each at an offset aligned to
// GB_TORCH_PARAM_ALIGN.
static void build_layout(gb_torch_model *m)
{
    m->layout.clear();
    m->tensors.clear();
    uint64_t off = 0;
    for (auto &kv : m->net->named_tensors()) {
        gb_param_entry p;
        std::memset(&p, 0, sizeof p);
        if (kv.first.size() >= sizeof p.name)
            throw std::runtime_error("parameter name too long: " + kv.first);
        std::memcpy(p.name, kv.first.c_str(), kv.first.size() + 1);
        p.dtype = dtype_of(kv.second.scalar_type());
        p.rank = (int)kv.second.dim();
        if (p.rank > GB_PARAM_MAX_RANK)
            throw std::runtime_error("parameter of too high a rank: " + kv.first);
        for (int i = 0; i < p.rank; i++)
            p.shape[i] = kv.second.size(i);
        off = (off + GB_TORCH_PARAM_ALIGN - 1) / GB_TORCH_PARAM_ALIGN * GB_TORCH_PARAM_ALIGN;
        p.offset = off;
        off += (uint64_t)kv.second.numel() * gb_dtype_size(p.dtype);
        m->layout.push_back(p);
        m->tensors.push_back(kv.second);
    }
    m->total = off;
}

int model_init(gb_torch_model *m, const gb_config *cfg, const gb_torch_space *sp, uint64_t seed,
               torch::Device dev, gb_error *err)
{
    int rc = check_space(cfg, sp, err);
    if (rc)
        return rc;
    m->kernels = cfg->policy.kernels;
    if (cfg->policy.model.type == GB_MODEL_TORCHSCRIPT) {
        FILE *f = std::fopen(cfg->policy.model.torchscript, "rb");
        if (!f)
            return gb_error_set(err, GB_ENOTFOUND, "policy.model.torchscript: %s: %s",
                                cfg->policy.model.torchscript, std::strerror(errno));
        std::fclose(f);
    }
    m->space = *sp;
    m->algo = cfg->trainer.algorithm.name;
    m->device = dev;
    m->gen = at::detail::createCPUGenerator(seed ^ 0x5851f42d4c957f2dULL);
    {
        std::lock_guard<std::mutex> lock(init_mutex());
        torch::manual_seed(seed);
        m->net = make_net(cfg, sp, dev);
    }
    if (m->algo == GB_ALGO_SAC) {
        std::vector<float> scale(sp->action_dim), bias(sp->action_dim);
        for (int64_t i = 0; i < sp->action_dim; i++) {
            scale[i] = 0.5f * (sp->action_high[i] - sp->action_low[i]);
            bias[i] = 0.5f * (sp->action_high[i] + sp->action_low[i]);
        }
        m->act_scale = torch::tensor(scale).to(dev);
        m->act_bias = torch::tensor(bias).to(dev);
        m->act_scale_host = scale;
        m->act_bias_host = bias;
    }
    build_layout(m);
    return 0;
}

torch::Tensor flat(const torch::Tensor &obs) { return obs.flatten(1); }

torch::Tensor obs_tensor(const gb_torch_model *m, const void *obs, int64_t n)
{
    std::vector<int64_t> shape{n};
    for (int i = 0; i < m->space.obs_ndim; i++)
        shape.push_back(m->space.obs_shape[i]);
    auto t = m->space.obs_dtype == GB_DTYPE_UINT8 ? torch::kUInt8 : torch::kFloat32;
    torch::Tensor x = torch::from_blob(const_cast<void *>(obs), shape, t);
    if (m->device.is_cuda())
        x = x.to(m->device, /*non_blocking=*/false);
    return t == torch::kFloat32 ? x : x.to(torch::kFloat32);
}
} // namespace gbt

using namespace gbt;

// ---- C API ----------------------------------------------------------------------------------

extern "C" int gbt_set_threads(int n, gb_error *err)
{
    if (n < 1)
        return gb_error_set(err, GB_EINVAL, "threads must be >= 1, got %d", n);
    return gb_torch_guard(err, "set_threads", [&] {
        static std::once_flag interop;
        std::call_once(interop, [] {
            try {
                at::set_num_interop_threads(1);
            } catch (const c10::Error &) {
                // the inter-op pool already started (a library used it first); keep it
            }
        });
        at::set_num_threads(n);
        return 0;
    });
}

extern "C" int gbt_cuda_available(void)
{
    try {
        return torch::cuda::is_available() ? 1 : 0;
    } catch (...) {
        return 0;
    }
}

extern "C" int gbt_model_create(const gb_config *cfg, const gb_torch_space *space,
                                uint64_t seed, gb_torch_model **out, gb_error *err)
{
    *out = nullptr;
    gb_torch_model *m = new (std::nothrow) gb_torch_model();
    if (!m)
        return gb_error_set(err, GB_ENOMEM, "model: out of memory");
    int rc = gb_torch_guard(err, "model_create", [&] {
        return model_init(m, cfg, space, seed, device_for(cfg->policy.device), err);
    });
    if (rc) {
        delete m;
        return rc;
    }
    m->net->set_training(false);
    *out = m;
    return 0;
}

extern "C" void gbt_model_destroy(gb_torch_model *m) { delete m; }

extern "C" int gbt_model_act(gb_torch_model *m, const void *obs, int64_t n,
                             int deterministic, double epsilon, gb_torch_act_out *out,
                             gb_error *err)
{
    return gbt_model_act_noise(m, obs, n, deterministic, epsilon, nullptr, out, err);
}

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

// A cuda model's heads: the ones the algorithm samples from, in float32, packed on the device
// head after head into one flat [n * W] tensor, one asynchronous copy into the pinned out_pinned,
// one synchronise, then sample_rows over the host blocks ([n, width] each).
void act_device(gb_torch_model *m, const Heads &h, int64_t n, int deterministic, double epsilon,
                const float *noise, gb_torch_act_out *out)
{
    HostHeads hh;
    HeadSlot slots[3];
    int heads = used_heads(m, h, hh, slots);
    torch::Tensor parts[3]; // [n * width] each
    for (int i = 0; i < heads; i++) {
        const torch::Tensor &t = *slots[i].t;
        if (!t.defined() || t.numel() != n * slots[i].width)
            throw std::runtime_error("act: a network head of an unexpected shape");
        parts[i] = t.to(torch::kFloat32).reshape({-1});
    }
    torch::Tensor packed = heads == 1 ? parts[0] : torch::cat(at::TensorList(parts, heads));
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
    sample_rows(m, hh, n, deterministic, epsilon, noise, out);
}

} // namespace

extern "C" int gbt_model_act_noise(gb_torch_model *m, const void *obs, int64_t n,
                                   int deterministic, double epsilon, const float *noise,
                                   gb_torch_act_out *out, gb_error *err)
{
    if (n <= 0)
        return n == 0 ? 0 : gb_error_set(err, GB_EINVAL, "act: n = %lld", (long long)n);
    return gb_torch_guard(err, "act", [&] {
        torch::NoGradGuard no_grad;
        if (m->device.is_cpu()) {
            act_cpu(m, m->net->forward(obs_tensor(m, obs, n)), n, deterministic, epsilon, noise,
                    out);
            return 0;
        }
        Heads h = m->net->forward(obs_staged(m, obs, n));
        act_device(m, h, n, deterministic, epsilon, noise, out);
        return 0;
    });
}

extern "C" void gbt_model_layout(const gb_torch_model *m, const gb_param_entry **table,
                                 int *count, uint64_t *total)
{
    *table = m->layout.data();
    *count = (int)m->layout.size();
    *total = m->total;
}

extern "C" int gbt_model_export(const gb_torch_model *m, void *buf, size_t cap,
                                uint64_t *version, gb_error *err)
{
    if (cap < m->total)
        return gb_error_set(err, GB_EINVAL, "export: buffer of %zu bytes, need %llu", cap,
                            (unsigned long long)m->total);
    return gb_torch_guard(err, "export", [&] {
        torch::NoGradGuard no_grad;
        std::memset(buf, 0, m->total); // alignment padding is deterministic
        for (size_t i = 0; i < m->layout.size(); i++) {
            const gb_param_entry &p = m->layout[i];
            const torch::Tensor &t = m->tensors[i];
            torch::from_blob((char *)buf + p.offset, t.sizes(), t.scalar_type()).copy_(t);
        }
        if (version)
            *version = m->version;
        return 0;
    });
}

extern "C" int gbt_model_import(gb_torch_model *m, const void *buf, size_t len,
                                const gb_param_entry *table, int count, uint64_t version,
                                gb_error *err)
{
    if (count != (int)m->layout.size())
        return gb_error_set(err, GB_EINVAL, "import: %d tensors sent, model has %zu", count,
                            m->layout.size());
    if (len != m->total)
        return gb_error_set(err, GB_EINVAL, "import: %zu bytes sent, model needs %llu", len,
                            (unsigned long long)m->total);
    for (int i = 0; i < count; i++) {
        const gb_param_entry &a = table[i], &b = m->layout[i];
        bool same = std::strncmp(a.name, b.name, sizeof a.name) == 0 && a.dtype == b.dtype &&
                    a.rank == b.rank && a.offset == b.offset;
        for (int d = 0; same && d < b.rank; d++)
            same = a.shape[d] == b.shape[d];
        if (!same)
            return gb_error_set(err, GB_EINVAL, "import: entry %d (%.*s) does not match the "
                                "model's %s", i, (int)sizeof a.name, a.name, b.name);
    }
    return gb_torch_guard(err, "import", [&] {
        torch::NoGradGuard no_grad;
        if (m->device.is_cpu()) {
            for (size_t i = 0; i < m->layout.size(); i++) {
                const gb_param_entry &p = m->layout[i];
                torch::Tensor &t = m->tensors[i];
                t.copy_(torch::from_blob((char *)buf + p.offset, t.sizes(), t.scalar_type()));
            }
        } else {
            // one host -> device copy of the whole blob, then device-side copies from its views
            if (!m->param_dev.defined())
                m->param_dev = torch::empty({(int64_t)m->total},
                                            torch::TensorOptions().dtype(torch::kUInt8)
                                                .device(m->device));
            m->param_dev.copy_(torch::from_blob(const_cast<void *>(buf), {(int64_t)len},
                                                torch::kUInt8));
            for (size_t i = 0; i < m->layout.size(); i++) {
                const gb_param_entry &p = m->layout[i];
                torch::Tensor &t = m->tensors[i];
                int64_t bytes = t.numel() * (int64_t)t.element_size();
                t.copy_(m->param_dev.narrow(0, (int64_t)p.offset, bytes)
                            .view(t.scalar_type())
                            .view(t.sizes()));
            }
        }
        m->net->refresh_precision(); // once a swap, not per batch
        m->version = version;
        return 0;
    });
}

extern "C" int gbt_model_set_precision(gb_torch_model *m, int precision, gb_error *err)
{
    if (precision != GB_PRECISION_FP32 && precision != GB_PRECISION_BF16 &&
        precision != GB_PRECISION_INT8)
        return gb_error_set(err, GB_EINVAL, "precision %d is none of fp32, bf16, int8", precision);
    if (precision == GB_PRECISION_INT8 && !m->device.is_cpu())
        return gb_error_set(err, GB_EUNSUPPORTED, "int8 inference runs on the cpu only (the "
                            "model is on %s)", m->device.str().c_str());
    return gb_torch_guard(err, "set_precision", [&] {
        m->net->set_precision(precision, m->kernels);
        return 0;
    });
}

extern "C" const char *gbt_model_kernels(const gb_torch_model *m)
{
    return m->net->kernels();
}

extern "C" int gbt_model_int8_engine(const char **name, gb_error *err)
{
    return gb_torch_guard(err, "int8_engine", [&] {
        *name = int8_engine();
        return 0;
    });
}

extern "C" int gbt_model_forward(gb_torch_model *m, const void *obs, int64_t n,
                                 gb_error *err)
{
    if (n <= 0)
        return n == 0 ? 0 : gb_error_set(err, GB_EINVAL, "forward: n = %lld", (long long)n);
    return gb_torch_guard(err, "forward", [&] {
        torch::NoGradGuard no_grad;
        Heads h = m->net->forward(obs_tensor(m, obs, n));
        (void)h;
        return 0;
    });
}

extern "C" uint64_t gbt_model_version(const gb_torch_model *m) { return m->version; }
extern "C" void gbt_model_set_version(gb_torch_model *m, uint64_t version)
{
    m->version = version;
}
extern "C" int gb_torch_write_test_script(const char *path, int64_t obs_dim, int64_t n_actions,
                                          uint64_t seed, gb_error *err)
{
    return gb_torch_guard(err, "write_test_script", [&] {
        torch::jit::Module m("GearboxTestActorCritic");
        at::Generator gen = at::detail::createCPUGenerator(seed);
        m.register_parameter("w_pi", torch::randn({n_actions, obs_dim}, gen) * 0.1, false);
        m.register_parameter("w_v", torch::randn({1, obs_dim}, gen) * 0.1, false);
        m.register_buffer("obs_scale", torch::ones({obs_dim}));
        m.define(R"JIT(
def forward(self, obs):
    x = obs * self.obs_scale
    return torch.matmul(x, self.w_pi.t()), torch.matmul(x, self.w_v.t())
)JIT");
        m.save(path);
        return 0;
    });
}
