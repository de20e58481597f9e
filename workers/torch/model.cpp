// workers/torch/model.cpp: the models' C API: create (from the config or a TorchScript file),
// parameter layout, export and import as one flat buffer, precision (the acting forwards:
// act.cpp).
#include "workers/torch/model.hpp"
#include "workers/torch/testing.h"
#include "workers/torch/precision.hpp"

#include <ATen/CPUGeneratorImpl.h>

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
    if (cfg->policy.model.core != GB_CORE_NONE &&
        (algo == GB_ALGO_SAC || cfg->policy.model.type == GB_MODEL_TORCHSCRIPT))
        return gb_error_set(err, GB_EUNSUPPORTED, "policy.model.core: a recurrent core is part "
                            "of a built-in model (mlp or cnn) trained with ppo or dqn (sac "
                            "with memory is not built)");
    if (cfg->policy.model.normalize_obs &&
        (cfg->policy.model.type != GB_MODEL_MLP || sp->obs_dtype != GB_DTYPE_FLOAT32))
        return gb_error_set(err, GB_EUNSUPPORTED, "policy.model.normalize_obs: for an mlp model "
                            "of float32 observations");
    if (cfg->policy.model.torchscript_state > 0 && algo == GB_ALGO_SAC)
        return gb_error_set(err, GB_EUNSUPPORTED, "policy.model.torchscript_state: a model "
                            "with state trains with ppo or dqn (sac with memory is not built)");
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
    if (m->net->state_size() != gb_config_state_size(cfg))
        return gb_error_set(err, GB_EINVAL, "the network carries %lld floats of state a row, "
                            "the config asks for %lld", (long long)m->net->state_size(),
                            (long long)gb_config_state_size(cfg));
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
    int rc = gb_param_layout_fits(table, count, len, m->layout.data(), (int)m->layout.size(),
                                  m->total, err);
    if (rc)
        return rc;
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

extern "C" int gb_torch_write_test_script_state(const char *path, int64_t obs_dim,
                                                int64_t n_actions, int64_t state_size, int algo,
                                                uint64_t seed, gb_error *err)
{
    if (algo != GB_ALGO_PPO && algo != GB_ALGO_DQN)
        return gb_error_set(err, GB_EINVAL, "write_test_script_state: ppo or dqn");
    return gb_torch_guard(err, "write_test_script_state", [&] {
        torch::jit::Module m("GearboxTestRecurrentActorCritic");
        at::Generator gen = at::detail::createCPUGenerator(seed);
        m.register_parameter("w_s", torch::randn({state_size, obs_dim + state_size}, gen) * 0.3,
                             false);
        m.register_parameter("w_pi", torch::randn({n_actions, state_size}, gen) * 0.1, false);
        m.register_parameter("w_v", torch::randn({1, state_size}, gen) * 0.1, false);
        m.register_attribute("state_size", c10::IntType::get(), state_size);
        if (algo == GB_ALGO_PPO)
            m.define(R"JIT(
def forward(self, obs, state):
    h = torch.tanh(torch.matmul(torch.cat([obs, state], 1), self.w_s.t()))
    return torch.matmul(h, self.w_pi.t()), torch.matmul(h, self.w_v.t()), h
)JIT");
        else // DQN's contract: (q, next state); w_v trains nothing
            m.define(R"JIT(
def forward(self, obs, state):
    h = torch.tanh(torch.matmul(torch.cat([obs, state], 1), self.w_s.t()))
    return torch.matmul(h, self.w_pi.t()), h
)JIT");
        m.save(path);
        return 0;
    });
}
