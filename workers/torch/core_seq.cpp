// workers/torch/core_seq.cpp: the recurrent cores' sequence forward on the CPU as one autograd
// node per chunk (core.hpp: recurrent_sequence): the time loop in C++ with one GEMM per step and
// the gates' arithmetic in plain loops, and a hand-written backward through time. Built from
// libtorch's per-step operations the same loop costs ~15 operations and as many autograd nodes
// a step (about 250 us for 16 rows of 64 units, nearly all of it overhead); here a step is one
// GEMM forward and two backward.
#include "workers/torch/core.hpp"
#include "workers/torch/fast_tanh.h"

#include <cmath>
#include <cstring>

namespace gbt {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// Views of caller memory as tensors for one GEMM (no copy).
inline torch::Tensor view(float *p, int64_t rows, int64_t cols)
{
    return torch::from_blob(p, {rows, cols}, torch::kFloat32);
}

// Gate activations in place over n rows of G gates of H units each: sigmoid for every gate but
// `tanh_gate` (tanh): sigmoid(x) = (1 + tanh(x / 2)) / 2, so one vectorised tanh does them all.
void activate(float *g, int64_t n, int G, int64_t H, int tanh_gate)
{
    for (int64_t i = 0; i < n; i++)
        for (int k = 0; k < G; k++)
            if (k != tanh_gate)
                for (int64_t j = 0; j < H; j++)
                    g[(i * G + k) * H + j] *= 0.5f;
    gb_tanh_forward(g, g, (size_t)(n * G * H));
    for (int64_t i = 0; i < n; i++)
        for (int k = 0; k < G; k++)
            if (k != tanh_gate)
                for (int64_t j = 0; j < H; j++) {
                    float *v = &g[(i * G + k) * H + j];
                    *v = 0.5f + 0.5f * *v;
                }
}

// What a backward through time returns: the input projections' gradients (dgs [T, B, G*H], the
// gates' gradients of every step, as [B, T, G*H]), the initial state's, and the recurrent
// weights' and bias's summed over the steps in one GEMM (h_in [T, B, H]: each step's input).
tensor_list weight_grads(const torch::Tensor &dgs, const torch::Tensor &h_in,
                         const torch::Tensor &ds)
{
    const int64_t T = dgs.size(0), B = dgs.size(1), GH = dgs.size(2), H = h_in.size(2);
    torch::Tensor flat = dgs.view({T * B, GH});
    return {dgs.permute({1, 0, 2}).contiguous(), ds, flat.t().mm(h_in.view({T * B, H})),
            flat.sum(0)};
}

// Per-step tensors the backward reads ([T, B, ...]).
struct Saved {
    torch::Tensor h_in, c_in, gates, tc; // LSTM: gates [T, B, 4H] activated, tanh(c')
    torch::Tensor gh;                    // GRU: gates [T, B, 3H] (r, z, n) and W_hn h + b_hn
};

// LSTM over T steps: xp [B, T, 4H] (input projection with its bias), s0 [B, 2H], keep [B, T]
// (0: the state is zeroed before that step), w [4H, H], b [4H] -> ys [B, T, H]; *last (may be
// nullptr) receives the state after the last step [B, 2H].
torch::Tensor lstm_forward(const torch::Tensor &xp, const torch::Tensor &s0,
                           const torch::Tensor &keep, const torch::Tensor &w,
                           const torch::Tensor &b, Saved *sv, torch::Tensor *last)
{
    const int64_t B = xp.size(0), T = xp.size(1), H = w.size(1), BH = B * H;
    sv->h_in = torch::empty({T, B, H});
    sv->c_in = torch::empty({T, B, H});
    sv->gates = torch::empty({T, B, 4 * H});
    sv->tc = torch::empty({T, B, H});
    torch::Tensor ys = torch::empty({B, T, H}), wt = w.t(), st = s0.contiguous().clone();
    float *S = st.data_ptr<float>(); // [B, 2H]: h then c of each row
    const float *X = xp.data_ptr<float>(), *K = keep.data_ptr<float>();
    float *Y = ys.data_ptr<float>(), *HIN = sv->h_in.data_ptr<float>();
    float *CIN = sv->c_in.data_ptr<float>(), *GA = sv->gates.data_ptr<float>();
    float *TC = sv->tc.data_ptr<float>();
    for (int64_t t = 0; t < T; t++) {
        float *hi = HIN + t * BH, *ci = CIN + t * BH, *g = GA + t * 4 * BH, *tc = TC + t * BH;
        for (int64_t i = 0; i < B; i++)
            for (int64_t j = 0; j < H; j++) {
                hi[i * H + j] = S[i * 2 * H + j] * K[i * T + t];
                ci[i * H + j] = S[i * 2 * H + H + j] * K[i * T + t];
            }
        torch::Tensor gv = view(g, B, 4 * H);
        torch::addmm_out(gv, b, view(hi, B, H), wt); // the recurrent part of every gate
        for (int64_t i = 0; i < B; i++) {
            const float *xi = X + (i * T + t) * 4 * H;
            for (int64_t k = 0; k < 4 * H; k++)
                g[i * 4 * H + k] += xi[k];
        }
        activate(g, B, 4, H, 2); // i, f, g, o
        for (int64_t i = 0; i < B; i++)
            for (int64_t j = 0; j < H; j++) {
                const float *gi = g + i * 4 * H;
                tc[i * H + j] = gi[H + j] * ci[i * H + j] + gi[j] * gi[2 * H + j];
            }
        for (int64_t i = 0; i < B; i++)
            std::memcpy(S + i * 2 * H + H, tc + i * H, sizeof(float) * (size_t)H); // c'
        gb_tanh_forward(tc, tc, (size_t)BH);
        for (int64_t i = 0; i < B; i++)
            for (int64_t j = 0; j < H; j++) {
                float h2 = g[i * 4 * H + 3 * H + j] * tc[i * H + j];
                S[i * 2 * H + j] = h2;
                Y[(i * T + t) * H + j] = h2;
            }
    }
    if (last)
        *last = st;
    return ys;
}

// The LSTM's backward through time: gy [B, T, H] -> gradients of xp, s0, w, b.
tensor_list lstm_backward(const Saved &sv, const torch::Tensor &keep, const torch::Tensor &w,
                          const torch::Tensor &gy)
{
    const int64_t T = sv.gates.size(0), B = sv.gates.size(1), H = w.size(1), BH = B * H;
    torch::Tensor dgs = torch::empty({T, B, 4 * H}), ds = torch::zeros({B, 2 * H});
    torch::Tensor dhin = torch::empty({B, H});
    const float *K = keep.data_ptr<float>(), *GY = gy.data_ptr<float>();
    const float *GA = sv.gates.data_ptr<float>(), *TC = sv.tc.data_ptr<float>();
    const float *CIN = sv.c_in.data_ptr<float>();
    float *DS = ds.data_ptr<float>(), *DH = dhin.data_ptr<float>();
    for (int64_t t = T - 1; t >= 0; t--) {
        const float *G = GA + t * 4 * BH, *tc = TC + t * BH, *ci = CIN + t * BH;
        float *D = dgs.data_ptr<float>() + t * 4 * BH; // this step's gate gradients [B, 4H]
        for (int64_t i = 0; i < B; i++) {
            const float *gi = G + i * 4 * H;
            float *di = D + i * 4 * H, *dh = DS + i * 2 * H, *dc = dh + H;
            for (int64_t j = 0; j < H; j++) {
                float ig = gi[j], fg = gi[H + j], gg = gi[2 * H + j], og = gi[3 * H + j];
                float t2 = tc[i * H + j], dht = dh[j] + GY[(i * T + t) * H + j];
                float dct = dc[j] + dht * og * (1.0f - t2 * t2);
                di[j] = dct * gg * ig * (1.0f - ig);
                di[H + j] = dct * ci[i * H + j] * fg * (1.0f - fg);
                di[2 * H + j] = dct * ig * (1.0f - gg * gg);
                di[3 * H + j] = dht * t2 * og * (1.0f - og);
                dc[j] = dct * fg * K[i * T + t]; // into c_in, then through the reset
            }
        }
        torch::mm_out(dhin, view(D, B, 4 * H), w);
        for (int64_t i = 0; i < B; i++)
            for (int64_t j = 0; j < H; j++)
                DS[i * 2 * H + j] = DH[i * H + j] * K[i * T + t];
    }
    return weight_grads(dgs, sv.h_in, ds);
}

// GRU over T steps: xp [B, T, 3H], s0 [B, H], keep [B, T], w [3H, H], b [3H] -> ys [B, T, H];
// *last (may be nullptr): the state after the last step.
torch::Tensor gru_forward(const torch::Tensor &xp, const torch::Tensor &s0,
                          const torch::Tensor &keep, const torch::Tensor &w,
                          const torch::Tensor &b, Saved *sv, torch::Tensor *last)
{
    const int64_t B = xp.size(0), T = xp.size(1), H = w.size(1), BH = B * H;
    sv->h_in = torch::empty({T, B, H});
    sv->gates = torch::empty({T, B, 3 * H});
    sv->gh = torch::empty({T, B, 3 * H});
    torch::Tensor ys = torch::empty({B, T, H}), wt = w.t(), st = s0.contiguous().clone();
    float *S = st.data_ptr<float>();
    const float *X = xp.data_ptr<float>(), *K = keep.data_ptr<float>();
    float *Y = ys.data_ptr<float>(), *HIN = sv->h_in.data_ptr<float>();
    float *GA = sv->gates.data_ptr<float>(), *GH = sv->gh.data_ptr<float>();
    for (int64_t t = 0; t < T; t++) {
        float *hi = HIN + t * BH, *g = GA + t * 3 * BH, *gh = GH + t * 3 * BH;
        for (int64_t k = 0; k < BH; k++)
            hi[k] = S[k] * K[(k / H) * T + t];
        torch::Tensor ghv = view(gh, B, 3 * H);
        torch::addmm_out(ghv, b, view(hi, B, H), wt);
        for (int64_t i = 0; i < B; i++) { // r, z: x + W h; n: x + r (W_hn h + b_hn), below
            const float *xi = X + (i * T + t) * 3 * H, *hh = gh + i * 3 * H;
            float *gi = g + i * 3 * H;
            for (int64_t k = 0; k < 2 * H; k++)
                gi[k] = xi[k] + hh[k];
        }
        activate(g, B, 3, H, -1); // sigmoid of all three; n's slot is rewritten below
        for (int64_t i = 0; i < B; i++) {
            const float *xi = X + (i * T + t) * 3 * H, *hh = gh + i * 3 * H;
            float *gi = g + i * 3 * H;
            for (int64_t j = 0; j < H; j++)
                gi[2 * H + j] = xi[2 * H + j] + gi[j] * hh[2 * H + j];
            gb_tanh_forward(gi + 2 * H, gi + 2 * H, (size_t)H);
            for (int64_t j = 0; j < H; j++) {
                float z = gi[H + j], n = gi[2 * H + j];
                float h2 = n + z * (hi[i * H + j] - n);
                S[i * H + j] = h2;
                Y[(i * T + t) * H + j] = h2;
            }
        }
    }
    if (last)
        *last = st;
    return ys;
}

tensor_list gru_backward(const Saved &sv, const torch::Tensor &keep, const torch::Tensor &w,
                         const torch::Tensor &gy)
{
    const int64_t T = sv.gates.size(0), B = sv.gates.size(1), H = w.size(1), BH = B * H;
    torch::Tensor dxp = torch::empty({B, T, 3 * H}), dh = torch::zeros({B, H});
    torch::Tensor dghs = torch::empty({T, B, 3 * H}), dhin = torch::empty({B, H});
    const float *K = keep.data_ptr<float>(), *GY = gy.data_ptr<float>();
    const float *GA = sv.gates.data_ptr<float>(), *GH = sv.gh.data_ptr<float>();
    const float *HIN = sv.h_in.data_ptr<float>();
    float *DX = dxp.data_ptr<float>(), *dhp = dh.data_ptr<float>(), *DH = dhin.data_ptr<float>();
    for (int64_t t = T - 1; t >= 0; t--) {
        float *DG = dghs.data_ptr<float>() + t * 3 * BH; // the recurrent GEMM's [B, 3H]
        const float *G = GA + t * 3 * BH, *GHt = GH + t * 3 * BH, *hi = HIN + t * BH;
        for (int64_t i = 0; i < B; i++) {
            const float *gi = G + i * 3 * H, *hh = GHt + i * 3 * H;
            float *dx = DX + (i * T + t) * 3 * H, *dg = DG + i * 3 * H;
            for (int64_t j = 0; j < H; j++) {
                const int64_t k = i * H + j;
                float r = gi[j], z = gi[H + j], n = gi[2 * H + j];
                float dht = dhp[k] + GY[(i * T + t) * H + j];
                float dnp = dht * (1.0f - z) * (1.0f - n * n);
                float dzp = dht * (hi[k] - n) * z * (1.0f - z);
                float drp = dnp * hh[2 * H + j] * r * (1.0f - r);
                dx[j] = drp, dx[H + j] = dzp, dx[2 * H + j] = dnp;
                dg[j] = drp, dg[H + j] = dzp, dg[2 * H + j] = dnp * r;
                dhp[k] = dht * z; // the direct path; W's part added below
            }
        }
        torch::mm_out(dhin, view(DG, B, 3 * H), w);
        for (int64_t k = 0; k < BH; k++)
            dhp[k] = (dhp[k] + DH[k]) * K[(k / H) * T + t];
    }
    tensor_list g = weight_grads(dghs, sv.h_in, dh);
    return {dxp, dh, g[2], g[3]};
}

struct RecurrentSeq : torch::autograd::Function<RecurrentSeq> {
    static torch::Tensor forward(AutogradContext *ctx, const torch::Tensor &xp,
                                 const torch::Tensor &s0, const torch::Tensor &keep,
                                 const torch::Tensor &w, const torch::Tensor &b, int64_t kind)
    {
        Saved sv;
        torch::Tensor x = xp.contiguous(), k = keep.contiguous();
        torch::Tensor ys = kind == GB_CORE_LSTM ? lstm_forward(x, s0, k, w, b, &sv, nullptr)
                                                : gru_forward(x, s0, k, w, b, &sv, nullptr);
        ctx->saved_data["kind"] = kind;
        ctx->save_for_backward({k, w});
        // the per-step tensors are made here, not graph inputs: kept as plain values
        if (kind == GB_CORE_LSTM) {
            ctx->saved_data["h_in"] = sv.h_in, ctx->saved_data["c_in"] = sv.c_in;
            ctx->saved_data["gates"] = sv.gates, ctx->saved_data["tc"] = sv.tc;
        } else {
            ctx->saved_data["h_in"] = sv.h_in, ctx->saved_data["gates"] = sv.gates;
            ctx->saved_data["gh"] = sv.gh;
        }
        return ys;
    }
    static tensor_list backward(AutogradContext *ctx, tensor_list grads)
    {
        const int64_t kind = ctx->saved_data["kind"].toInt();
        auto saved = ctx->get_saved_variables();
        auto get = [&](const char *name) { return ctx->saved_data[name].toTensor(); };
        Saved sv;
        sv.h_in = get("h_in");
        if (kind == GB_CORE_LSTM)
            sv.c_in = get("c_in"), sv.gates = get("gates"), sv.tc = get("tc");
        else
            sv.gates = get("gates"), sv.gh = get("gh");
        torch::Tensor gy = grads[0].contiguous();
        tensor_list g = kind == GB_CORE_LSTM ? lstm_backward(sv, saved[0], saved[1], gy)
                                             : gru_backward(sv, saved[0], saved[1], gy);
        return {g[0], g[1], torch::Tensor(), g[2], g[3], torch::Tensor()};
    }
};

} // namespace

torch::Tensor recurrent_sequence(int kind, const torch::Tensor &xp, const torch::Tensor &s0,
                                 const torch::Tensor &keep, const torch::Tensor &w,
                                 const torch::Tensor &b)
{
    return RecurrentSeq::apply(xp, s0, keep, w, b, (int64_t)kind);
}

torch::Tensor recurrent_step(int kind, const torch::Tensor &xp, const torch::Tensor &state,
                             const torch::Tensor &w, const torch::Tensor &b)
{
    const int64_t n = xp.size(0);
    Saved sv;
    torch::Tensor x = xp.contiguous().view({n, 1, xp.size(1)}), next;
    torch::Tensor keep = torch::ones({n, 1});
    torch::Tensor s = state.to(torch::kFloat32).contiguous();
    if (kind == GB_CORE_LSTM)
        lstm_forward(x, s, keep, w, b, &sv, &next);
    else
        gru_forward(x, s, keep, w, b, &sv, &next);
    return next;
}

} // namespace gbt
