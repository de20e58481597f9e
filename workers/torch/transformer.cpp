// workers/torch/transformer.cpp: the gated transformer core (transformer.hpp): GTrXL blocks over
// a sliding memory of layer inputs, stepped one row at a time (acting) or over a chunk (training).
#include "workers/torch/transformer.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace gbt {

namespace {

using torch::indexing::Slice;

// GTrXL's GRU-type gate in place of a residual connection: x is the stream going through, y the
// block's output. The update gate starts closed (bias -2): a new block passes x on nearly
// unchanged, which is what lets a deep transformer learn from reinforcement at all.
struct GtrxlGateImpl : torch::nn::Module {
    torch::nn::Linear wr{nullptr}, ur{nullptr}, wz{nullptr}, uz{nullptr}, wg{nullptr},
        ug{nullptr};
    static constexpr double closed = 2.0;
    explicit GtrxlGateImpl(int64_t d)
    {
        auto nobias = [d] { return torch::nn::LinearOptions(d, d).bias(false); };
        wr = register_module("wr", torch::nn::Linear(d, d));
        ur = register_module("ur", torch::nn::Linear(nobias()));
        wz = register_module("wz", torch::nn::Linear(d, d));
        uz = register_module("uz", torch::nn::Linear(nobias()));
        wg = register_module("wg", torch::nn::Linear(d, d));
        ug = register_module("ug", torch::nn::Linear(nobias()));
    }
    torch::Tensor forward(const torch::Tensor &x, const torch::Tensor &y)
    {
        torch::Tensor r = torch::sigmoid(wr(y) + ur(x));
        torch::Tensor z = torch::sigmoid(wz(y) + uz(x) - closed);
        torch::Tensor h = torch::tanh(wg(y) + ug(r * x));
        return (1.0 - z) * x + z * h;
    }
};
TORCH_MODULE(GtrxlGate);

// One block: attention over the keys' rows (layer norm first), gated; then a feed-forward
// network of 4d units, gated.
struct GtrxlBlockImpl : torch::nn::Module {
    int64_t d, heads;
    torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
    torch::nn::Linear q{nullptr}, k{nullptr}, v{nullptr}, o{nullptr}, ff1{nullptr}, ff2{nullptr};
    GtrxlGate g1{nullptr}, g2{nullptr};
    torch::Tensor rel_bias; // [heads, memory + 1]: by how many steps back the key is

    GtrxlBlockImpl(int64_t d_, int64_t heads_, int64_t memory) : d(d_), heads(heads_)
    {
        ln1 = register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
        ln2 = register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
        q = register_module("q", torch::nn::Linear(d, d));
        k = register_module("k", torch::nn::Linear(d, d));
        v = register_module("v", torch::nn::Linear(d, d));
        o = register_module("o", torch::nn::Linear(d, d));
        ff1 = register_module("ff1", torch::nn::Linear(d, 4 * d));
        ff2 = register_module("ff2", torch::nn::Linear(4 * d, d));
        g1 = register_module("g1", GtrxlGate(d));
        g2 = register_module("g2", GtrxlGate(d));
        rel_bias = register_parameter("rel_bias", torch::zeros({heads, memory + 1}));
    }

    // h [B, Tq, d]: the queries' inputs; keys [B, Tk, d]: every row attended to (the queries'
    // own among them); dist [Tq, Tk] int64 in 0..memory; allowed [B, 1, Tq, Tk] bool.
    torch::Tensor forward(const torch::Tensor &h, const torch::Tensor &keys,
                          const torch::Tensor &dist, const torch::Tensor &allowed)
    {
        const int64_t B = h.size(0), Tq = h.size(1), Tk = keys.size(1), dh = d / heads;
        torch::Tensor qn = ln1(h), kn = ln1(keys);
        torch::Tensor Q = q(qn).view({B, Tq, heads, dh}).transpose(1, 2);
        torch::Tensor K = k(kn).view({B, Tk, heads, dh}).transpose(1, 2);
        torch::Tensor V = v(kn).view({B, Tk, heads, dh}).transpose(1, 2);
        torch::Tensor logits = torch::matmul(Q, K.transpose(-2, -1)) / std::sqrt((double)dh);
        logits = logits + rel_bias.index({Slice(), dist}).unsqueeze(0);
        logits = logits.masked_fill(allowed.logical_not(), -INFINITY);
        torch::Tensor y = torch::matmul(torch::softmax(logits, -1), V);
        y = o(y.transpose(1, 2).reshape({B, Tq, d}));
        torch::Tensor x = g1(h, torch::relu(y));
        return g2(x, torch::relu(ff2(torch::relu(ff1(ln2(x))))));
    }
};
TORCH_MODULE(GtrxlBlock);

} // namespace

TransformerCoreImpl::TransformerCoreImpl(int64_t in_features, int64_t d_, int64_t layers,
                                         int64_t heads_, int64_t memory_)
    : d(d_), n_layers(layers), heads(heads_), memory(memory_)
{
    if (d < 1 || layers < 1 || heads < 1 || d % heads != 0 || memory < 1)
        throw std::invalid_argument("transformer core: needs d >= 1 divisible by heads, "
                                    "layers >= 1 and memory >= 1 (d " + std::to_string(d) +
                                    ", heads " + std::to_string(heads) + ")");
    in = register_module("in", torch::nn::Linear(in_features, d));
    blocks = register_module("blocks", torch::nn::ModuleList());
    for (int64_t l = 0; l < layers; l++)
        blocks->push_back(GtrxlBlock(d, heads, memory));
    out_norm = register_module("out_norm",
                               torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
}

torch::Tensor TransformerCoreImpl::step(const torch::Tensor &x, const torch::Tensor &state,
                                        torch::Tensor *state_out)
{
    const int64_t N = x.size(0), M = memory, span = M * d;
    auto iopt = torch::TensorOptions().dtype(torch::kInt64).device(x.device());
    torch::Tensor dist = torch::arange(M, -1, -1, iopt).view({1, M + 1});
    torch::Tensor valid = state.narrow(1, n_layers * span, M);
    torch::Tensor allowed =
        torch::cat({valid > 0.5, torch::ones({N, 1}, iopt.dtype(torch::kBool))}, 1)
            .view({N, 1, 1, M + 1});
    torch::Tensor h = in(x).unsqueeze(1); // [N, 1, d]
    std::vector<torch::Tensor> next;
    for (int64_t l = 0; l < n_layers; l++) {
        torch::Tensor mem = state.narrow(1, l * span, span).view({N, M, d});
        torch::Tensor keys = torch::cat({mem, h}, 1); // [N, M + 1, d]
        next.push_back(keys.narrow(1, 1, M).reshape({N, span}));
        h = blocks[l]->as<GtrxlBlock>()->forward(h, keys, dist, allowed);
    }
    if (state_out) {
        next.push_back(valid.narrow(1, 1, M - 1));
        next.push_back(torch::ones({N, 1}, x.options()));
        *state_out = torch::cat(next, 1);
    }
    return out_norm(h.squeeze(1));
}

torch::Tensor TransformerCoreImpl::sequence(const torch::Tensor &x, const torch::Tensor &state0,
                                            const torch::Tensor &reset_before)
{
    const int64_t B = x.size(0), T = x.size(1), M = memory, span = M * d;
    auto iopt = torch::TensorOptions().dtype(torch::kInt64).device(x.device());
    // rows' distances: query t sits at M + t among the keys [memory slots, rows]
    torch::Tensor dist = torch::arange(T, iopt).view({T, 1}) + M -
                         torch::arange(M + T, iopt).view({1, M + T});
    torch::Tensor window = (dist >= 0).logical_and(dist <= M); // [T, M + T]
    dist = dist.clamp(0, M);
    // episodes within the chunk: the memory belongs to row 0's
    torch::Tensor starts = (reset_before.to(iopt.dtype()) != 0).to(torch::kInt64);
    starts.select(1, 0).zero_();
    torch::Tensor ep = starts.cumsum(1); // [B, T]
    torch::Tensor key_ep = torch::cat({torch::zeros({B, M}, iopt), ep}, 1);
    torch::Tensor key_ok = torch::cat({state0.narrow(1, n_layers * span, M) > 0.5,
                                       torch::ones({B, T}, iopt.dtype(torch::kBool))},
                                      1);
    torch::Tensor allowed = window.unsqueeze(0)
                                .logical_and(key_ok.unsqueeze(1))
                                .logical_and(key_ep.unsqueeze(1) == ep.unsqueeze(2))
                                .unsqueeze(1); // [B, 1, T, M + T]
    torch::Tensor h = in(x); // [B, T, d]
    for (int64_t l = 0; l < n_layers; l++) {
        torch::Tensor mem = state0.narrow(1, l * span, span).view({B, M, d});
        torch::Tensor keys = torch::cat({mem, h}, 1);
        h = blocks[l]->as<GtrxlBlock>()->forward(h, keys, dist, allowed);
    }
    return out_norm(h);
}

} // namespace gbt
