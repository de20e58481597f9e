// workers/torch/network.cpp: the networks: MLP and Nature-CNN torsos with orthogonal init, the
// per-algorithm heads (actor-critic, with or without a recurrent core; Q, squashed-Gaussian
// actor), TorchScript models, SAC critics.
#include "workers/torch/network.hpp"
#include "workers/torch/activation.hpp"
#include "workers/torch/core.hpp"
#include "workers/torch/transformer.hpp"
#include "workers/torch/mlp_program.hpp"
#include "workers/torch/precision.hpp"

#include <cmath>
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
    default: s->push_back(FastTanh()); break;
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
    int64_t in_features = 0; // an observation's values
    LowPrecision low; // policy.precision's copies of the Linear layers (fp32: none)
    // policy.kernels gearbox: the inference forward as one C program (null: libtorch's)
    std::unique_ptr<MlpProgram> program;
    int program_a = -1, program_b = -1; // the program's layers that give heads a and b
    // Lays the network out in p: its layers, and in *a and *b those whose outputs heads()
    // takes (b: -1 when one). False when it is not a plain MLP.
    virtual bool plan(MlpProgram &p, int *a, int *b) = 0;
    // Heads a and b through the program; false when there is none, or autograd wants the
    // modules' own forward (the program is for inference only).
    bool run_program(const torch::Tensor &obs, torch::Tensor *a, torch::Tensor *b)
    {
        if (!program || is_training() || torch::GradMode::is_enabled())
            return false;
        program->run(obs.flatten(1), program_a, program_b, a, b);
        return true;
    }
    // The layers' forwards, through the reduced copies when there are; head outputs back to fp32
    torch::Tensor seq(torch::nn::Sequential &s, const torch::Tensor &x)
    {
        return low.precision() == GB_PRECISION_FP32 ? s->forward(x) : low.sequential(s, x);
    }
    torch::Tensor lin(torch::nn::Linear &l, const torch::Tensor &x)
    {
        if (low.precision() == GB_PRECISION_FP32)
            return l->forward(x);
        torch::Tensor y = low.linear(l, x);
        return y.scalar_type() == torch::kFloat32 ? y : y.to(torch::kFloat32);
    }
    torch::Tensor prep(const torch::Tensor &obs) const
    {
        if (cnn)
            return scale_u8 ? obs * (1.0 / 255.0) : obs;
        return obs.flatten(1);
    }
    virtual Heads heads(const torch::Tensor &obs) = 0;

    // policy.model.normalize_obs (Net's normalize and obs_stats)
    ObsStats stats;
    double clip = 0.0;
    void add_obs_stats(const gb_config_model &mc)
    {
        if (!mc.normalize_obs)
            return;
        auto o = torch::TensorOptions().dtype(torch::kFloat64);
        stats.mean = register_buffer("obs_mean", torch::zeros({in_features}, o));
        stats.var = register_buffer("obs_var", torch::ones({in_features}, o));
        stats.count = register_buffer("obs_count", torch::zeros({1}, o));
        clip = mc.obs_clip;
    }
    torch::Tensor normalize(const torch::Tensor &obs) const
    {
        if (!stats.defined())
            return obs;
        torch::Tensor x = obs.reshape({obs.size(0), in_features});
        // the float64 statistics as x's type: made again only when they changed (a merge, an
        // import or a load writes them in place, bumping their versions, or replaces them)
        const at::TensorImpl *key = stats.mean.unsafeGetTensorImpl();
        const uint32_t version = stats.mean._version() + stats.var._version();
        if (!cached.mean.defined() || cached.key != key || cached.version != version ||
            cached.mean.scalar_type() != x.scalar_type() || cached.mean.device() != x.device()) {
            torch::NoGradGuard no_grad;
            cached.mean = stats.mean.to(x.scalar_type());
            cached.rstd = (stats.var + 1e-8).rsqrt().to(x.scalar_type());
            cached.key = key, cached.version = version;
        }
        return ((x - cached.mean) * cached.rstd).clamp_(-clip, clip).view(obs.sizes());
    }
    struct {
        torch::Tensor mean, rstd;
        const at::TensorImpl *key = nullptr;
        uint32_t version = 0;
    } mutable cached;

    // policy.model.core between the torso and the heads (none: both null)
    Core core{nullptr};              // lstm, gru
    TransformerCore tcore{nullptr};  // transformer
    int64_t core_out = 0;            // the core's output width
    // Registers mc's core after a torso of width *w, which becomes the core's width.
    void add_core(const gb_config_model &mc, int64_t *w)
    {
        if (mc.core == GB_CORE_TRANSFORMER)
            tcore = register_module("core", TransformerCore(*w, mc.core_size, mc.core_layers,
                                                            mc.core_heads, mc.core_memory));
        else if (mc.core != GB_CORE_NONE)
            core = register_module("core", Core(mc.core, *w, mc.core_size));
        if (has_core())
            *w = core_out = mc.core_size;
    }
    bool has_core() const { return core || tcore; }
    // The refusal of a stateless forward on a model with a core.
    void no_core() const
    {
        if (has_core())
            throw Failure(GB_EINVAL, "the model has a recurrent core (policy.model.core): it "
                                     "acts with each row's state (model_act_state)");
    }
    // The core over torso features: one step (x [N, F], state [N, S] -> y, *state_out), or
    // B sequences of T1 rows (f [B*T1, F] -> y [B*T1, core_out]).
    torch::Tensor core_step(const torch::Tensor &x, const torch::Tensor &state,
                            torch::Tensor *state_out)
    {
        if (tcore)
            return tcore->step(x, state, state_out);
        auto ys = core->step(x, state);
        *state_out = ys.second;
        return ys.first;
    }
    torch::Tensor core_sequence(const torch::Tensor &f, int64_t B, int64_t T1,
                                const torch::Tensor &state0, const torch::Tensor &reset_before)
    {
        torch::Tensor x = f.view({B, T1, f.size(1)});
        return (tcore ? tcore->sequence(x, state0, reset_before)
                      : core->sequence(x, state0, reset_before))
            .reshape({B * T1, core_out});
    }
    // Net's state_size, step and sequence (without a core: heads)
    virtual int64_t state_size() const
    {
        return core ? core->state_size() : tcore ? tcore->state_size() : 0;
    }
    virtual Heads step(const torch::Tensor &obs, const torch::Tensor &, torch::Tensor *)
    {
        return heads(obs);
    }
    virtual Heads sequence(const torch::Tensor &obs, int64_t, int64_t, const torch::Tensor &,
                           const torch::Tensor &)
    {
        return heads(obs);
    }
};

// PPO: actor and critic, shared torso or separate ones; with a core (policy.model.core), torso
// -> core -> heads, actor and critic sharing torso and core (policy.model.shared aside).
struct ActorCritic : HeadsModule {
    torch::nn::Sequential torso{nullptr}, critic_torso{nullptr};
    torch::nn::Linear pi{nullptr}, v{nullptr};
    torch::Tensor log_std;
    bool discrete;

    ActorCritic(const gb_config_model &mc, const gb_torch_space &sp, bool is_cnn, bool u8)
    {
        cnn = is_cnn;
        scale_u8 = u8;
        in_features = prod(sp);
        discrete = sp.discrete;
        int64_t w = 0, wc = 0;
        torso = register_module("torso", make_torso(mc, sp, 0, cnn, &w));
        add_core(mc, &w);
        if (!mc.shared && !has_core())
            critic_torso = register_module("critic_torso", make_torso(mc, sp, 0, cnn, &wc));
        else
            wc = w;
        int64_t outs = discrete ? sp.n_actions : sp.action_dim;
        pi = register_module("pi", linear(w, outs, 0.01));
        v = register_module("v", linear(wc, 1, 1.0));
        if (!discrete)
            log_std = register_parameter("log_std",
                                         torch::full({sp.action_dim}, mc.log_std_init));
    }
    bool plan(MlpProgram &p, int *a, int *b) override
    {
        int t = -1, c = -1;
        if (has_core()) // the program is a plain MLP's: a core runs through libtorch's modules
            return false;
        if (!p.torso(torso, -1, &t) || (critic_torso && !p.torso(critic_torso, -1, &c)))
            return false;
        *a = p.head(pi, t);
        *b = p.head(v, critic_torso ? c : t);
        return true;
    }
    // pi's and v's outputs as heads
    Heads make_heads(const torch::Tensor &a, const torch::Tensor &b)
    {
        Heads out;
        if (discrete) {
            out.logits = a;
        } else {
            out.mean = a;
            out.log_std = log_std.expand_as(out.mean);
        }
        out.value = b.squeeze(-1);
        return out;
    }
    Heads heads(const torch::Tensor &obs) override
    {
        no_core();
        torch::Tensor a, b; // pi's and v's outputs
        if (!run_program(obs, &a, &b)) {
            torch::Tensor x = prep(obs);
            torch::Tensor h = seq(torso, x);
            torch::Tensor hc = critic_torso ? seq(critic_torso, x) : h;
            a = lin(pi, h);
            b = lin(v, hc);
        }
        return make_heads(a, b);
    }
    Heads step(const torch::Tensor &obs, const torch::Tensor &state,
               torch::Tensor *state_out) override
    {
        if (!has_core())
            return heads(obs);
        torch::Tensor y = core_step(seq(torso, prep(obs)), state, state_out);
        return make_heads(lin(pi, y), lin(v, y));
    }
    Heads sequence(const torch::Tensor &obs, int64_t B, int64_t T1, const torch::Tensor &state0,
                   const torch::Tensor &reset_before) override
    {
        if (!has_core())
            return heads(obs);
        torch::Tensor y = core_sequence(seq(torso, prep(obs)), B, T1, state0, reset_before);
        return make_heads(lin(pi, y), lin(v, y));
    }
};

// DQN: Q-values; with a core (R2D2), torso -> core -> Q.
struct QNet : HeadsModule {
    torch::nn::Sequential torso{nullptr};
    torch::nn::Linear head{nullptr};
    QNet(const gb_config_model &mc, const gb_torch_space &sp, bool is_cnn, bool u8)
    {
        cnn = is_cnn;
        scale_u8 = u8;
        in_features = prod(sp);
        int64_t w = 0;
        torso = register_module("torso", make_torso(mc, sp, 0, cnn, &w));
        add_core(mc, &w);
        head = register_module("q", linear(w, sp.n_actions, 1.0));
    }
    bool plan(MlpProgram &p, int *a, int *b) override
    {
        int t = -1;
        if (has_core() || !p.torso(torso, -1, &t))
            return false;
        *a = p.head(head, t);
        *b = -1;
        return true;
    }
    Heads heads(const torch::Tensor &obs) override
    {
        no_core();
        Heads out;
        torch::Tensor unused;
        if (!run_program(obs, &out.q, &unused))
            out.q = lin(head, seq(torso, prep(obs)));
        return out;
    }
    Heads step(const torch::Tensor &obs, const torch::Tensor &state,
               torch::Tensor *state_out) override
    {
        if (!has_core())
            return heads(obs);
        Heads out;
        out.q = lin(head, core_step(seq(torso, prep(obs)), state, state_out));
        return out;
    }
    Heads sequence(const torch::Tensor &obs, int64_t B, int64_t T1, const torch::Tensor &state0,
                   const torch::Tensor &reset_before) override
    {
        if (!has_core())
            return heads(obs);
        Heads out;
        out.q = lin(head, core_sequence(seq(torso, prep(obs)), B, T1, state0, reset_before));
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
        in_features = prod(sp);
        int64_t w = 0;
        torso = register_module("torso", make_torso(mc, sp, 0, cnn, &w));
        mu = register_module("mean", linear(w, sp.action_dim, 0.01));
        ls = register_module("log_std", linear(w, sp.action_dim, 0.01));
    }
    bool plan(MlpProgram &p, int *a, int *b) override
    {
        int t = -1;
        if (!p.torso(torso, -1, &t))
            return false;
        *a = p.head(mu, t);
        *b = p.head(ls, t);
        return true;
    }
    Heads heads(const torch::Tensor &obs) override
    {
        Heads out;
        torch::Tensor raw; // log_std's Linear, before the squash
        if (!run_program(obs, &out.mean, &raw)) {
            torch::Tensor h = seq(torso, prep(obs));
            out.mean = lin(mu, h);
            raw = lin(ls, h);
        }
        const double lo = -5.0, hi = 2.0;
        out.log_std = lo + 0.5 * (hi - lo) * (torch::tanh(raw) + 1.0);
        return out;
    }
};

struct BuiltinNet : Net {
    std::shared_ptr<HeadsModule> mod;
    explicit BuiltinNet(std::shared_ptr<HeadsModule> m) : mod(std::move(m)) {}
    Heads forward(const torch::Tensor &obs) override { return mod->heads(obs); }
    torch::Tensor normalize(const torch::Tensor &obs) override { return mod->normalize(obs); }
    ObsStats obs_stats() override { return mod->stats; }
    int64_t state_size() const override { return mod->state_size(); }
    Heads step(const torch::Tensor &obs, const torch::Tensor &state,
               torch::Tensor *state_out) override
    {
        return mod->step(obs, state, state_out);
    }
    Heads sequence(const torch::Tensor &obs, int64_t B, int64_t T1, const torch::Tensor &state0,
                   const torch::Tensor &reset_before) override
    {
        return mod->sequence(obs, B, T1, state0, reset_before);
    }
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
    void set_precision(int precision, int kernels) override
    {
        if (precision != GB_PRECISION_FP32 && mod->state_size() > 0)
            throw Failure(GB_EUNSUPPORTED, "a model with a core (policy.model.core) runs its "
                                           "inference in fp32");
        mod->program.reset();
        bool cpu = true;
        for (const auto &p : mod->parameters(true))
            cpu = cpu && p.device().is_cpu();
        // gearbox's kernels where they are fast (the portable path is a reference, slower
        // than libtorch): fp32 and int8 on AVX2 or AVX-512 (bf16 is libtorch's)
        bool fast = (precision == GB_PRECISION_FP32 || precision == GB_PRECISION_INT8) &&
                    gb_mlp_fast();
        if (kernels == GB_KERNELS_GEARBOX && fast && !mod->cnn && cpu) {
            auto p = std::make_unique<MlpProgram>(precision, mod->in_features);
            if (mod->plan(*p, &mod->program_a, &mod->program_b)) {
                p->finish();
                mod->low.build(*mod, GB_PRECISION_FP32);
                mod->program = std::move(p);
                return;
            }
        }
        mod->low.build(*mod, precision);
    }
    void refresh_precision() override
    {
        if (mod->program)
            mod->program->reload();
        else if (mod->low.precision() != GB_PRECISION_FP32)
            mod->low.build(*mod, mod->low.precision());
    }
    // A plain MLP's chains from the input rows to each head (b empty where there is one) and the
    // number of its layers. False for any other network.
    bool head_chains(MlpChain *a, MlpChain *b, size_t *layers)
    {
        MlpProgram p(GB_PRECISION_FP32, mod->in_features);
        int ha = -1, hb = -1;
        *b = MlpChain{};
        if (mod->cnn || mod->state_size() > 0 || !mod->plan(p, &ha, &hb) || !p.chain_to(ha, a) ||
            (hb >= 0 && !p.chain_to(hb, b)))
            return false;
        *layers = p.size();
        return true;
    }
    bool mlp_chains(MlpChain *a, MlpChain *b) override
    {
        size_t layers = 0;
        return head_chains(a, b, &layers) &&
               a->layers.size() + b->layers.size() == layers; // each layer on one chain
    }
    bool mlp_torso_heads(MlpChain *torso, MlpChain *a, MlpChain *b) override
    {
        MlpChain ca, cb;
        size_t layers = 0;
        if (!head_chains(&ca, &cb, &layers) || cb.layers.empty() ||
            ca.layers.size() != cb.layers.size())
            return false;
        const size_t n = ca.layers.size() - 1; // the torso's layers, then one head each
        for (size_t i = 0; i < n; i++)
            if (ca.layers[i].ptr() != cb.layers[i].ptr())
                return false;
        if (n + 2 != layers)
            return false;
        *torso = ca.part(0, n);
        *a = ca.part(n, n + 1);
        *b = cb.part(n, n + 1);
        return true;
    }
    const char *kernels() const override
    {
        if (mod->program)
            return mod->program->kernels();
        switch (mod->low.precision()) {
        case GB_PRECISION_INT8: return "libtorch int8";
        case GB_PRECISION_BF16: return "libtorch bf16";
        default: return "libtorch fp32";
        }
    }
};

} // namespace

Heads select_rows(const Heads &h, const torch::Tensor &idx)
{
    auto pick = [&](const torch::Tensor &t) {
        return t.defined() ? t.index_select(0, idx) : torch::Tensor();
    };
    Heads out;
    out.logits = pick(h.logits);
    out.mean = pick(h.mean);
    out.log_std = pick(h.log_std);
    out.value = pick(h.value);
    out.q = pick(h.q);
    return out;
}

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

std::shared_ptr<Net> make_net(const gb_config *cfg, const gb_torch_space *sp, torch::Device dev)
{
    const gb_config_model &mc = cfg->policy.model;
    int algo = cfg->trainer.algorithm.name;
    if (mc.type == GB_MODEL_TORCHSCRIPT) {
        torch::jit::Module mod = torch::jit::load(mc.torchscript, dev);
        return make_script_net(std::move(mod), algo, *sp, mc.torchscript_state, mc.torchscript);
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
    mod->add_obs_stats(mc);
    mod->to(dev);
    return std::make_shared<BuiltinNet>(mod);
}
} // namespace gbt
