// workers/torch/script_net.cpp: a user's TorchScript module as the acting network
// (policy.model.type torchscript; bridge.h's TorchScript contract), stateless or carrying
// policy.model.torchscript_state floats of state a row.
#include "workers/torch/network.hpp"

#include <stdexcept>
#include <string>

namespace gbt {

namespace {

struct ScriptNet : Net {
    torch::jit::Module mod;
    int algo;
    bool discrete;
    int64_t S; // policy.model.torchscript_state: floats of state a row (0: stateless)
    ScriptNet(torch::jit::Module m, int a, bool d, int64_t s)
        : mod(std::move(m)), algo(a), discrete(d), S(s)
    {
        // parameters train, whatever requires_grad flag the export left on them
        for (const auto &p : mod.parameters(true)) {
            torch::Tensor t = p; // the same tensor, not a copy
            if (t.is_floating_point())
                t.requires_grad_(true);
        }
        // a stateful module says how much state it carries; it must be what the config says
        int64_t declared = mod.hasattr("state_size") ? mod.attr("state_size").toInt() : 0;
        if (declared != S)
            throw Failure(GB_EINVAL, "the TorchScript model's state_size attribute is " +
                                         std::to_string(declared) +
                                         ", policy.model.torchscript_state is " +
                                         std::to_string(S));
    }

    static torch::Tensor vec(const torch::Tensor &t) { return t.reshape({t.size(0)}); }
    // The algorithm's heads from the forward's outputs (without the state a stateful one adds).
    Heads unpack(const std::vector<torch::IValue> &el) const
    {
        Heads h;
        if (algo == GB_ALGO_DQN) {
            if (el.size() != 1)
                throw std::runtime_error("torchscript DQN must return q");
            h.q = el[0].toTensor();
        } else if (algo == GB_ALGO_PPO && discrete) {
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
    Heads forward(const torch::Tensor &obs) override
    {
        if (S > 0)
            throw Failure(GB_EINVAL, "the TorchScript model carries state "
                                     "(policy.model.torchscript_state): it acts with each row's "
                                     "state (model_act_state)");
        torch::IValue out = mod.forward({obs});
        if (!out.isTuple())
            return unpack({out});
        return unpack(out.toTuple()->elements());
    }
    int64_t state_size() const override { return S; }
    // forward(obs, state) returns the heads' outputs and then the next state [N, S]
    Heads step(const torch::Tensor &obs, const torch::Tensor &state,
               torch::Tensor *state_out) override
    {
        if (S == 0)
            return forward(obs);
        torch::IValue out = mod.forward({obs, state});
        if (!out.isTuple())
            throw std::runtime_error("a stateful torchscript model must return a tuple ending "
                                     "with the next state");
        std::vector<torch::IValue> el = out.toTuple()->elements();
        torch::Tensor next = el.empty() ? torch::Tensor() : el.back().toTensor();
        if (!next.defined() || next.dim() != 2 || next.size(0) != obs.size(0) || next.size(1) != S)
            throw std::runtime_error("a stateful torchscript model's last output must be the "
                                     "next state [N, " + std::to_string(S) + "]");
        el.pop_back();
        *state_out = next;
        return unpack(el);
    }
    // Row by row through step, the state zeroed where an episode starts: the module sees what
    // an actor's calls give it.
    Heads sequence(const torch::Tensor &obs, int64_t B, int64_t T1, const torch::Tensor &state0,
                   const torch::Tensor &reset_before) override
    {
        if (S == 0)
            return forward(obs);
        std::vector<int64_t> shape = obs.sizes().vec();
        shape[0] = T1;
        shape.insert(shape.begin(), B);
        torch::Tensor rows = obs.view(shape), s = state0;
        torch::Tensor keep = 1.0 - reset_before.to(torch::kFloat32);
        std::vector<Heads> hs;
        for (int64_t t = 0; t < T1; t++) {
            torch::Tensor next;
            hs.push_back(step(rows.select(1, t), s * keep.select(1, t).unsqueeze(1), &next));
            s = next;
        }
        auto cat = [&](torch::Tensor Heads::*f) {
            if (!(hs[0].*f).defined())
                return torch::Tensor();
            std::vector<torch::Tensor> v;
            for (const Heads &h : hs)
                v.push_back(h.*f);
            return torch::stack(v, 1).flatten(0, 1); // [B, T1, ...] -> [B*T1, ...]
        };
        Heads out;
        out.logits = cat(&Heads::logits);
        out.mean = cat(&Heads::mean);
        out.log_std = cat(&Heads::log_std);
        out.value = cat(&Heads::value);
        out.q = cat(&Heads::q);
        return out;
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
    void set_precision(int precision, int) override
    {
        if (precision != GB_PRECISION_FP32)
            throw Failure(GB_EUNSUPPORTED, "reduced inference precision needs a built-in model "
                                           "(mlp or cnn), not torchscript");
    }
    void refresh_precision() override {}
    const char *kernels() const override { return "libtorch (torchscript)"; }
};


} // namespace

std::shared_ptr<Net> make_script_net(torch::jit::Module mod, int algo, bool discrete,
                                     int64_t state_size)
{
    return std::make_shared<ScriptNet>(std::move(mod), algo, discrete, state_size);
}

} // namespace gbt
