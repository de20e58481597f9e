// workers/torch/script_net.cpp: a user's TorchScript module as the acting network
// (policy.model.type torchscript; bridge.h's TorchScript contract), stateless or carrying
// policy.model.torchscript_state floats of state a row.
#include "workers/torch/network.hpp"

#include <stdexcept>
#include <string>

namespace gbt {

namespace {

// "[3, 5]": a tensor's shape as errors print it.
std::string shape_text(at::IntArrayRef sizes)
{
    std::string s = "[";
    for (size_t i = 0; i < sizes.size(); i++)
        s += (i ? ", " : "") + std::to_string(sizes[i]);
    return s + "]";
}

// What one output may be: [N, k]; [N] or [N, 1] (a value); [N, k] or [k] (a log_std).
enum Fit { ROWS_K, VALUE, ROWS_K_OR_K };

struct ScriptNet : Net {
    torch::jit::Module mod;
    int algo;
    bool discrete;
    int64_t k;        // the space's actions: n (discrete) or the action dimension
    int64_t S;        // policy.model.torchscript_state: floats of state a row (0: stateless)
    std::string path; // the file, for errors
    ScriptNet(torch::jit::Module m, int a, const gb_torch_space &sp, int64_t s, std::string file)
        : mod(std::move(m)), algo(a), discrete(sp.discrete != 0),
          k(sp.discrete ? sp.n_actions : sp.action_dim), S(s), path(std::move(file))
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

    // What the forward must return for this algorithm and space, as errors say it.
    std::string contract() const
    {
        std::string K = std::to_string(k), tail = S ? ", then the next state [N, " +
                                                          std::to_string(S) + "]" : "";
        const char *what = discrete ? " discrete actions" : "-dimensional continuous actions";
        std::string head = "the environment's " + K + what + " need ";
        if (algo == GB_ALGO_DQN)
            return head + "DQN's forward to return q [N, " + K + "]" + tail;
        if (algo == GB_ALGO_PPO && discrete)
            return head + "PPO's forward to return (logits [N, " + K + "], value [N] or [N, 1]" +
                   tail + ")";
        if (algo == GB_ALGO_PPO)
            return head + "PPO's forward to return (mean [N, " + K + "], log_std [N, " + K +
                   "] or [" + K + "], value [N] or [N, 1]" + tail + ")";
        return head + "SAC's actor forward to return (mean [N, " + K + "], log_std [N, " + K +
               "] or [" + K + "]" + tail + ")";
    }
    [[noreturn]] void mismatch(const std::string &what) const
    {
        throw Failure(GB_EINVAL, path + ": " + what + "; " + contract());
    }
    // Output i named what as a tensor of the shape fit asks for, N rows; throws mismatch.
    torch::Tensor output(const torch::IValue &v, const char *what, int64_t N, Fit fit) const
    {
        if (!v.isTensor())
            mismatch(std::string("its forward returned a ") + v.tagKind() + " where " + what +
                     " (a tensor) belongs");
        torch::Tensor t = v.toTensor();
        bool ok = false;
        std::string want = "[" + std::to_string(N) + ", " + std::to_string(k) + "]";
        if (fit == VALUE) {
            ok = (t.dim() == 1 && t.size(0) == N) ||
                 (t.dim() == 2 && t.size(0) == N && t.size(1) == 1);
            want = "[" + std::to_string(N) + "] or [" + std::to_string(N) + ", 1]";
        } else {
            ok = t.dim() == 2 && t.size(0) == N && t.size(1) == k;
            if (fit == ROWS_K_OR_K) {
                ok = ok || (t.dim() == 1 && t.size(0) == k);
                want += " or [" + std::to_string(k) + "]";
            }
        }
        if (!ok)
            mismatch("for a batch of " + std::to_string(N) + " observations its forward " +
                     "returned " + what + " of shape " + shape_text(t.sizes()) + ", not " + want);
        if (!t.is_floating_point())
            mismatch(std::string("its ") + what + " are not floating point");
        return t;
    }

    static torch::Tensor vec(const torch::Tensor &t) { return t.reshape({t.size(0)}); }
    // The algorithm's heads from the forward's outputs (without the state a stateful one adds)
    // for N observations, each checked against the space.
    Heads unpack(const std::vector<torch::IValue> &el, int64_t N) const
    {
        size_t want = algo == GB_ALGO_DQN ? 1 : (algo == GB_ALGO_PPO && !discrete) ? 3 : 2;
        if (el.size() != want)
            mismatch("its forward returned " + std::to_string(el.size() + (S ? 1 : 0)) +
                     " outputs, not " + std::to_string(want + (S ? 1 : 0)));
        Heads h;
        if (algo == GB_ALGO_DQN) {
            h.q = output(el[0], "q", N, ROWS_K);
        } else if (algo == GB_ALGO_PPO && discrete) {
            h.logits = output(el[0], "logits", N, ROWS_K);
            h.value = vec(output(el[1], "value", N, VALUE));
        } else {
            h.mean = output(el[0], "mean", N, ROWS_K);
            h.log_std = output(el[1], "log_std", N, ROWS_K_OR_K).expand_as(h.mean);
            if (algo == GB_ALGO_PPO)
                h.value = vec(output(el[2], "value", N, VALUE));
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
            return unpack({out}, obs.size(0));
        return unpack(out.toTuple()->elements(), obs.size(0));
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
            mismatch("its forward returned one output, not a tuple ending with the next state");
        std::vector<torch::IValue> el = out.toTuple()->elements();
        int64_t N = obs.size(0);
        if (el.empty() || !el.back().isTensor())
            mismatch("its forward's last output is not the next state (a tensor)");
        torch::Tensor next = el.back().toTensor();
        if (next.dim() != 2 || next.size(0) != N || next.size(1) != S)
            mismatch("for a batch of " + std::to_string(N) + " observations its forward " +
                     "returned the next state of shape " + shape_text(next.sizes()) +
                     ", not [" + std::to_string(N) + ", " + std::to_string(S) + "]");
        el.pop_back();
        *state_out = next;
        return unpack(el, N);
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

std::shared_ptr<Net> make_script_net(torch::jit::Module mod, int algo, const gb_torch_space &sp,
                                     int64_t state_size, const std::string &path)
{
    return std::make_shared<ScriptNet>(std::move(mod), algo, sp, state_size, path);
}

} // namespace gbt
