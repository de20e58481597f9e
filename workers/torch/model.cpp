// workers/torch/model.cpp: networks (MLP, Nature-CNN, TorchScript), distributions, batched
// inference from caller buffers, parameter export/import as a flat buffer + layout table.
#include "workers/torch/internal.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <mutex>
#include <stdexcept>

namespace gbt {

std::mutex &init_mutex()
{
    static std::mutex mu; // initialisation draws from libtorch's process-wide generator
    return mu;
}

namespace {

void push_activation(torch::nn::Sequential &s, int act)
{
    switch (act) {
    case GB_ACT_RELU: s->push_back(torch::nn::ReLU()); break;
    case GB_ACT_ELU: s->push_back(torch::nn::ELU()); break;
    case GB_ACT_GELU: s->push_back(torch::nn::GELU()); break;
    default: s->push_back(torch::nn::Tanh()); break;
    }
}

torch::nn::Linear linear(int64_t in, int64_t out, double gain)
{
    torch::nn::Linear l(in, out);
    torch::nn::init::orthogonal_(l->weight, gain);
    torch::nn::init::zeros_(l->bias);
    return l;
}

torch::nn::Conv2d conv(int64_t in, int64_t out, int64_t k, int64_t s)
{
    torch::nn::Conv2d c(torch::nn::Conv2dOptions(in, out, k).stride(s));
    torch::nn::init::orthogonal_(c->weight, std::sqrt(2.0));
    torch::nn::init::zeros_(c->bias);
    return c;
}

int64_t prod(const gb_torch_space &sp)
{
    int64_t p = 1;
    for (int i = 0; i < sp.obs_ndim; i++)
        p *= sp.obs_shape[i];
    return p;
}

// The torso: Nature-DQN convolutions (cnn) or nothing, then the hidden list with the activation
// and optional layer norm. *out_dim receives the feature width. extra_in widens an MLP's input
// (SAC critics take the action too).
torch::nn::Sequential make_torso(const gb_config_model &mc, const gb_torch_space &sp,
                                 int64_t extra_in, bool cnn, int64_t *out_dim)
{
    torch::nn::Sequential s;
    int64_t width;
    if (cnn) {
        if (sp.obs_ndim != 3)
            throw std::invalid_argument("cnn model needs (C, H, W) observations");
        int64_t c = sp.obs_shape[0], h = sp.obs_shape[1], w = sp.obs_shape[2];
        const int64_t ks[3] = {8, 4, 3}, ss[3] = {4, 2, 1}, chans[3] = {32, 64, 64};
        int64_t in = c;
        for (int i = 0; i < 3; i++) {
            s->push_back(conv(in, chans[i], ks[i], ss[i]));
            s->push_back(torch::nn::ReLU());
            h = (h - ks[i]) / ss[i] + 1;
            w = (w - ks[i]) / ss[i] + 1;
            if (h < 1 || w < 1)
                throw std::invalid_argument("cnn model: frames too small for the Nature torso");
            in = chans[i];
        }
        s->push_back(torch::nn::Flatten());
        width = in * h * w;
    } else {
        width = prod(sp) + extra_in;
    }
    for (int i = 0; i < mc.hidden.n; i++) {
        int64_t h = mc.hidden.v[i];
        s->push_back(linear(width, h, std::sqrt(2.0)));
        if (mc.layer_norm)
            s->push_back(torch::nn::LayerNorm(torch::nn::LayerNormOptions({h})));
        push_activation(s, mc.activation);
        width = h;
    }
    if (s->size() == 0)
        s->push_back(torch::nn::Identity());
    *out_dim = width;
    return s;
}

struct HeadsModule : torch::nn::Module {
    bool cnn = false, scale_u8 = false;
    torch::Tensor prep(const torch::Tensor &obs) const
    {
        if (cnn)
            return scale_u8 ? obs * (1.0 / 255.0) : obs;
        return obs.flatten(1);
    }
    virtual Heads heads(const torch::Tensor &obs) = 0;
};

// PPO: actor and critic, shared torso or separate ones.
struct ActorCritic : HeadsModule {
    torch::nn::Sequential torso{nullptr}, critic_torso{nullptr};
    torch::nn::Linear pi{nullptr}, v{nullptr};
    torch::Tensor log_std;
    bool discrete;

    ActorCritic(const gb_config_model &mc, const gb_torch_space &sp, bool is_cnn, bool u8)
    {
        cnn = is_cnn;
        scale_u8 = u8;
        discrete = sp.discrete;
        int64_t w = 0, wc = 0;
        torso = register_module("torso", make_torso(mc, sp, 0, cnn, &w));
        if (!mc.shared)
            critic_torso = register_module("critic_torso", make_torso(mc, sp, 0, cnn, &wc));
        else
            wc = w;
        int64_t outs = discrete ? sp.n_actions : sp.action_dim;
        pi = register_module("pi", linear(w, outs, 0.01));
        v = register_module("v", linear(wc, 1, 1.0));
        if (!discrete)
            log_std = register_parameter("log_std", torch::zeros({sp.action_dim}));
    }
    Heads heads(const torch::Tensor &obs) override
    {
        torch::Tensor x = prep(obs);
        torch::Tensor h = torso->forward(x);
        torch::Tensor hc = critic_torso ? critic_torso->forward(x) : h;
        Heads out;
        if (discrete) {
            out.logits = pi->forward(h);
        } else {
            out.mean = pi->forward(h);
            out.log_std = log_std.expand_as(out.mean);
        }
        out.value = v->forward(hc).squeeze(-1);
        return out;
    }
};

// DQN: Q-values.
struct QNet : HeadsModule {
    torch::nn::Sequential torso{nullptr};
    torch::nn::Linear head{nullptr};
    QNet(const gb_config_model &mc, const gb_torch_space &sp, bool is_cnn, bool u8)
    {
        cnn = is_cnn;
        scale_u8 = u8;
        int64_t w = 0;
        torso = register_module("torso", make_torso(mc, sp, 0, cnn, &w));
        head = register_module("q", linear(w, sp.n_actions, 1.0));
    }
    Heads heads(const torch::Tensor &obs) override
    {
        Heads out;
        out.q = head->forward(torso->forward(prep(obs)));
        return out;
    }
};

// SAC: squashed Gaussian actor; log_std squashed into [-5, 2] (as CleanRL/SpinningUp).
struct SacActor : HeadsModule {
    torch::nn::Sequential torso{nullptr};
    torch::nn::Linear mu{nullptr}, ls{nullptr};
    SacActor(const gb_config_model &mc, const gb_torch_space &sp, bool is_cnn, bool u8)
    {
        cnn = is_cnn;
        scale_u8 = u8;
        int64_t w = 0;
        torso = register_module("torso", make_torso(mc, sp, 0, cnn, &w));
        mu = register_module("mean", linear(w, sp.action_dim, 0.01));
        ls = register_module("log_std", linear(w, sp.action_dim, 0.01));
    }
    Heads heads(const torch::Tensor &obs) override
    {
        torch::Tensor h = torso->forward(prep(obs));
        Heads out;
        out.mean = mu->forward(h);
        const double lo = -5.0, hi = 2.0;
        out.log_std = lo + 0.5 * (hi - lo) * (torch::tanh(ls->forward(h)) + 1.0);
        return out;
    }
};

struct BuiltinNet : Net {
    std::shared_ptr<HeadsModule> mod;
    explicit BuiltinNet(std::shared_ptr<HeadsModule> m) : mod(std::move(m)) {}
    Heads forward(const torch::Tensor &obs) override { return mod->heads(obs); }
    NamedTensors named_tensors() override
    {
        NamedTensors v;
        for (const auto &kv : mod->named_parameters(true))
            v.emplace_back(kv.key(), kv.value());
        for (const auto &kv : mod->named_buffers(true))
            v.emplace_back(kv.key(), kv.value());
        return v;
    }
    std::vector<torch::Tensor> parameters() override { return mod->parameters(true); }
    void set_training(bool on) override { mod->train(on); }
};

struct ScriptNet : Net {
    torch::jit::Module mod;
    int algo;
    bool discrete;
    ScriptNet(torch::jit::Module m, int a, bool d) : mod(std::move(m)), algo(a), discrete(d)
    {
        // parameters train, whatever requires_grad flag the export left on them
        for (const auto &p : mod.parameters(true)) {
            torch::Tensor t = p; // the same tensor, not a copy
            if (t.is_floating_point())
                t.requires_grad_(true);
        }
    }

    static torch::Tensor vec(const torch::Tensor &t) { return t.reshape({t.size(0)}); }
    Heads forward(const torch::Tensor &obs) override
    {
        torch::IValue out = mod.forward({obs});
        Heads h;
        if (algo == GB_ALGO_DQN) {
            h.q = out.toTensor();
            return h;
        }
        auto el = out.toTuple()->elements();
        if (algo == GB_ALGO_PPO && discrete) {
            if (el.size() != 2)
                throw std::runtime_error("torchscript PPO (discrete) must return (logits, value)");
            h.logits = el[0].toTensor();
            h.value = vec(el[1].toTensor());
        } else if (algo == GB_ALGO_PPO) {
            if (el.size() != 3)
                throw std::runtime_error(
                    "torchscript PPO (continuous) must return (mean, log_std, value)");
            h.mean = el[0].toTensor();
            h.log_std = el[1].toTensor().expand_as(h.mean);
            h.value = vec(el[2].toTensor());
        } else {
            if (el.size() != 2)
                throw std::runtime_error("torchscript SAC actor must return (mean, log_std)");
            h.mean = el[0].toTensor();
            h.log_std = el[1].toTensor().expand_as(h.mean);
        }
        return h;
    }
    NamedTensors named_tensors() override
    {
        NamedTensors v;
        for (const auto &p : mod.named_parameters(true))
            v.emplace_back(p.name, p.value);
        for (const auto &b : mod.named_buffers(true))
            v.emplace_back(b.name, b.value);
        return v;
    }
    std::vector<torch::Tensor> parameters() override
    {
        std::vector<torch::Tensor> v;
        for (const auto &p : mod.parameters(true))
            v.push_back(p);
        return v;
    }
    void set_training(bool on) override { mod.train(on); }
};

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

CriticImpl::CriticImpl(const gb_config_model &mc, int64_t in_dim)
{
    gb_torch_space sp{};
    sp.obs_ndim = 1;
    sp.obs_shape[0] = in_dim;
    int64_t w = 0;
    body = register_module("body", make_torso(mc, sp, 0, false, &w));
    body->push_back(linear(w, 1, 1.0));
}

torch::Tensor CriticImpl::forward(const torch::Tensor &obs_flat, const torch::Tensor &act)
{
    return body->forward(torch::cat({obs_flat, act}, 1)).squeeze(-1);
}

torch::Device device_for(int gb_device)
{
    if (gb_device == GB_DEVICE_CUDA) {
        if (!torch::cuda::is_available())
            throw std::runtime_error("device cuda requested but libtorch sees no CUDA device");
        return torch::Device(torch::kCUDA, 0);
    }
    return torch::Device(torch::kCPU);
}

std::shared_ptr<Net> make_net(const gb_config *cfg, const gb_torch_space *sp, torch::Device dev)
{
    const gb_config_model &mc = cfg->policy.model;
    int algo = cfg->trainer.algorithm.name;
    if (mc.type == GB_MODEL_TORCHSCRIPT) {
        torch::jit::Module mod = torch::jit::load(mc.torchscript, dev);
        return std::make_shared<ScriptNet>(std::move(mod), algo, sp->discrete != 0);
    }
    bool cnn = mc.type == GB_MODEL_CNN;
    bool u8 = sp->obs_dtype == GB_DTYPE_UINT8;
    std::shared_ptr<HeadsModule> mod;
    if (algo == GB_ALGO_PPO)
        mod = std::make_shared<ActorCritic>(mc, *sp, cnn, u8);
    else if (algo == GB_ALGO_DQN)
        mod = std::make_shared<QNet>(mc, *sp, cnn, u8);
    else
        mod = std::make_shared<SacActor>(mc, *sp, cnn, u8);
    mod->to(dev);
    return std::make_shared<BuiltinNet>(mod);
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

void model_build_layout(gb_torch_model *m)
{
    m->layout.clear();
    m->tensors.clear();
    uint64_t off = 0;
    for (auto &kv : m->net->named_tensors()) {
        gb_torch_param p;
        std::memset(&p, 0, sizeof p);
        if (kv.first.size() >= sizeof p.name)
            throw std::runtime_error("parameter name too long: " + kv.first);
        std::memcpy(p.name, kv.first.c_str(), kv.first.size() + 1);
        p.dtype = dtype_of(kv.second.scalar_type());
        p.ndim = (int)kv.second.dim();
        if (p.ndim > GB_TORCH_MAX_DIMS)
            throw std::runtime_error("parameter of too high a rank: " + kv.first);
        for (int i = 0; i < p.ndim; i++)
            p.shape[i] = kv.second.size(i);
        p.nbytes = (uint64_t)kv.second.numel() * gb_dtype_size(p.dtype);
        off = (off + GB_TORCH_PARAM_ALIGN - 1) / GB_TORCH_PARAM_ALIGN * GB_TORCH_PARAM_ALIGN;
        p.offset = off;
        off += p.nbytes;
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
    }
    model_build_layout(m);
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

// ---- distributions --------------------------------------------------------------------------

torch::Tensor categorical_logp(const torch::Tensor &logits, const torch::Tensor &a)
{
    return torch::log_softmax(logits, -1).gather(1, a.view({-1, 1})).squeeze(1);
}

torch::Tensor categorical_entropy(const torch::Tensor &logits)
{
    torch::Tensor lp = torch::log_softmax(logits, -1);
    return -(lp.exp() * lp).sum(-1);
}

static const double LOG_SQRT_2PI = 0.5 * std::log(2.0 * M_PI);

torch::Tensor gaussian_logp(const torch::Tensor &mean, const torch::Tensor &log_std,
                            const torch::Tensor &x)
{
    torch::Tensor z = (x - mean) * torch::exp(-log_std);
    return (-0.5 * z * z - log_std - LOG_SQRT_2PI).sum(-1);
}

torch::Tensor gaussian_entropy(const torch::Tensor &log_std)
{
    return (0.5 + LOG_SQRT_2PI + log_std).sum(-1);
}

torch::Tensor squashed_logp(const torch::Tensor &mean, const torch::Tensor &log_std,
                            const torch::Tensor &u, const torch::Tensor &scale)
{
    // log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)): exact and stable for large |u|
    torch::Tensor corr = (2.0 * (std::log(2.0) - u - torch::nn::functional::softplus(-2.0 * u)))
                             .sum(-1);
    torch::Tensor lp = gaussian_logp(mean, log_std, u) - corr;
    if (scale.defined())
        lp = lp - torch::log(scale).sum();
    return lp;
}

} // namespace gbt

using namespace gbt;

// ---- C API ----------------------------------------------------------------------------------

extern "C" int gb_torch_set_threads(int n, gb_error *err)
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

extern "C" int gb_torch_cuda_available(void)
{
    try {
        return torch::cuda::is_available() ? 1 : 0;
    } catch (...) {
        return 0;
    }
}

extern "C" int gb_torch_model_create(const gb_config *cfg, const gb_torch_space *space,
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

extern "C" void gb_torch_model_destroy(gb_torch_model *m) { delete m; }

extern "C" int gb_torch_model_act(gb_torch_model *m, const void *obs, int64_t n,
                                  int deterministic, double epsilon, gb_torch_act_out *out,
                                  gb_error *err)
{
    if (n <= 0)
        return n == 0 ? 0 : gb_error_set(err, GB_EINVAL, "act: n = %lld", (long long)n);
    return gb_torch_guard(err, "act", [&] {
        torch::NoGradGuard no_grad;
        Heads h = m->net->forward(obs_tensor(m, obs, n));
        const gb_torch_space &sp = m->space;
        torch::Tensor a, logp, value;
        if (m->algo == GB_ALGO_DQN) {
            torch::Tensor q = h.q.to(torch::kCPU).to(torch::kFloat32);
            a = q.argmax(1);
            if (!deterministic && epsilon > 0.0) {
                torch::Tensor explore = torch::rand({n}, m->gen) < epsilon;
                torch::Tensor rnd = torch::randint(0, sp.n_actions, {n}, m->gen,
                                                   torch::TensorOptions().dtype(torch::kInt64));
                a = torch::where(explore, rnd, a);
            }
            logp = torch::zeros({n});
            value = std::get<0>(q.max(1));
            if (out->q)
                torch::from_blob(out->q, {n, sp.n_actions}, torch::kFloat32).copy_(q);
        } else if (m->algo == GB_ALGO_PPO && sp.discrete) {
            torch::Tensor logits = h.logits.to(torch::kCPU).to(torch::kFloat32);
            if (deterministic)
                a = logits.argmax(1);
            else
                a = torch::multinomial(torch::softmax(logits, -1), 1, true, m->gen).squeeze(1);
            logp = categorical_logp(logits, a);
            value = h.value.to(torch::kCPU).to(torch::kFloat32);
        } else if (m->algo == GB_ALGO_PPO) {
            torch::Tensor mean = h.mean.to(torch::kCPU).to(torch::kFloat32);
            torch::Tensor ls = h.log_std.to(torch::kCPU).to(torch::kFloat32);
            a = deterministic ? mean : mean + torch::exp(ls) * torch::randn(mean.sizes(), m->gen);
            logp = gaussian_logp(mean, ls, a);
            value = h.value.to(torch::kCPU).to(torch::kFloat32);
        } else {
            torch::Tensor mean = h.mean.to(torch::kCPU).to(torch::kFloat32);
            torch::Tensor ls = h.log_std.to(torch::kCPU).to(torch::kFloat32);
            torch::Tensor u =
                deterministic ? mean : mean + torch::exp(ls) * torch::randn(mean.sizes(), m->gen);
            torch::Tensor scale = m->act_scale.to(torch::kCPU);
            a = torch::tanh(u) * scale + m->act_bias.to(torch::kCPU);
            logp = squashed_logp(mean, ls, u, scale);
            value = torch::zeros({n});
        }
        if (out->action) {
            if (sp.discrete)
                torch::from_blob(out->action, {n}, torch::kInt64).copy_(a);
            else
                torch::from_blob(out->action, {n, sp.action_dim}, torch::kFloat32).copy_(a);
        }
        if (out->logp)
            torch::from_blob(out->logp, {n}, torch::kFloat32).copy_(logp);
        if (out->value)
            torch::from_blob(out->value, {n}, torch::kFloat32).copy_(value);
        return 0;
    });
}

extern "C" void gb_torch_model_layout(const gb_torch_model *m, const gb_torch_param **table,
                                      int *count, uint64_t *total)
{
    *table = m->layout.data();
    *count = (int)m->layout.size();
    *total = m->total;
}

extern "C" int gb_torch_model_export(const gb_torch_model *m, void *buf, size_t cap,
                                     uint64_t *version, gb_error *err)
{
    if (cap < m->total)
        return gb_error_set(err, GB_EINVAL, "export: buffer of %zu bytes, need %llu", cap,
                            (unsigned long long)m->total);
    return gb_torch_guard(err, "export", [&] {
        torch::NoGradGuard no_grad;
        std::memset(buf, 0, m->total); // alignment padding is deterministic
        for (size_t i = 0; i < m->layout.size(); i++) {
            const gb_torch_param &p = m->layout[i];
            const torch::Tensor &t = m->tensors[i];
            torch::from_blob((char *)buf + p.offset, t.sizes(), t.scalar_type()).copy_(t);
        }
        if (version)
            *version = m->version;
        return 0;
    });
}

extern "C" int gb_torch_model_import(gb_torch_model *m, const void *buf, size_t len,
                                     const gb_torch_param *table, int count, uint64_t version,
                                     gb_error *err)
{
    if (count != (int)m->layout.size())
        return gb_error_set(err, GB_EINVAL, "import: %d tensors sent, model has %zu", count,
                            m->layout.size());
    if (len != m->total)
        return gb_error_set(err, GB_EINVAL, "import: %zu bytes sent, model needs %llu", len,
                            (unsigned long long)m->total);
    for (int i = 0; i < count; i++) {
        const gb_torch_param &a = table[i], &b = m->layout[i];
        bool same = std::strncmp(a.name, b.name, sizeof a.name) == 0 && a.dtype == b.dtype &&
                    a.ndim == b.ndim && a.offset == b.offset && a.nbytes == b.nbytes;
        for (int d = 0; same && d < b.ndim; d++)
            same = a.shape[d] == b.shape[d];
        if (!same)
            return gb_error_set(err, GB_EINVAL, "import: entry %d (%.*s) does not match the "
                                "model's %s", i, (int)sizeof a.name, a.name, b.name);
    }
    return gb_torch_guard(err, "import", [&] {
        torch::NoGradGuard no_grad;
        for (size_t i = 0; i < m->layout.size(); i++) {
            const gb_torch_param &p = m->layout[i];
            torch::Tensor &t = m->tensors[i];
            t.copy_(torch::from_blob((char *)buf + p.offset, t.sizes(), t.scalar_type()));
        }
        m->version = version;
        return 0;
    });
}

extern "C" uint64_t gb_torch_model_version(const gb_torch_model *m) { return m->version; }

extern "C" int gb_torch_squashed_gaussian_logp(const float *mean, const float *log_std,
                                               const float *u, int64_t n, int64_t A,
                                               const float *scale, float *out, gb_error *err)
{
    return gb_torch_guard(err, "squashed_gaussian_logp", [&] {
        auto v = [&](const float *p) {
            return torch::from_blob(const_cast<float *>(p), {n, A}, torch::kFloat32);
        };
        torch::Tensor s;
        if (scale)
            s = torch::from_blob(const_cast<float *>(scale), {A}, torch::kFloat32);
        torch::Tensor lp = squashed_logp(v(mean), v(log_std), v(u), s);
        torch::from_blob(out, {n}, torch::kFloat32).copy_(lp);
        return 0;
    });
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
