// workers/torch/core_seq.cpp: the recurrent cores' sequence forward on the CPU as one autograd
// node per chunk (core.hpp: recurrent_sequence): the time loop in C++ with one GEMM per step and
// the gates' arithmetic in vectorised C (core_gates.c), and a hand-written backward through time.
// Built from libtorch's per-step operations the same loop costs ~15 operations and as many
// autograd nodes a step (about 250 us for 16 rows of 64 units, nearly all of it overhead); here a
// step is one GEMM forward and one backward, the weights' gradients one GEMM over all the steps.
// Every per-step buffer is laid out [B, T, ...] (a step's rows strided by T) so that the inputs'
// gradient is the backward's own buffer and the weights' GEMM reads the forward's without a copy;
// the buffers come from a per-thread pool (scratch), reused once their last holder is gone.
#include "workers/torch/core.hpp"
#include "workers/torch/core_gates.h"

#include <cstring>

namespace gbt {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// Caller memory as a [rows, cols] matrix whose rows are ld floats apart (no copy): a step's rows
// of a [B, T, cols] buffer are ld = T * cols apart.
inline torch::Tensor rows_view(float *p, int64_t rows, int64_t cols, int64_t ld)
{
    return torch::from_blob(p, {rows, cols}, {ld, 1}, torch::kFloat32);
}

// A float32 tensor of the given shape from this thread's pool: one whose storage nothing else
// holds any more (the autograd node that kept it for its backward is gone), of about the size,
// or a new one. Its contents are undefined. Saves the allocation and its page faults per call.
torch::Tensor scratch(at::IntArrayRef shape)
{
    thread_local std::vector<torch::Tensor> pool;
    int64_t n = 1;
    for (int64_t d : shape)
        n *= d;
    for (const torch::Tensor &t : pool)
        if (t.storage().use_count() == 1 && t.numel() >= n && t.numel() <= 2 * n + 4096)
            return t.narrow(0, 0, n).view(shape);
    if (pool.size() >= 64) // many sizes or many graphs alive: drop a free one, or stop pooling
        for (size_t i = 0; i < pool.size(); i++)
            if (pool[i].storage().use_count() == 1) {
                pool.erase(pool.begin() + (ptrdiff_t)i);
                break;
            }
    if (pool.size() >= 64)
        return torch::empty(shape);
    pool.push_back(torch::empty({n}));
    return pool.back().view(shape);
}

// What a forward leaves for the backward: the per-step tensors ([B, T, ...]).
struct Saved {
    torch::Tensor h_in, c_in, gates, tc; // LSTM: h, c entering (after resets), gates, tanh(c')
    torch::Tensor gh;                    // GRU: h W_hh^T + b_hh ([B, T, 3H]); gates: r, z, n
};

// The per-step buffers of a forward over B x T rows: from the pool.
Saved saved_buffers(int kind, int64_t B, int64_t T, int64_t H)
{
    Saved sv;
    sv.h_in = scratch({B, T, H});
    if (kind == GB_CORE_LSTM) {
        sv.c_in = scratch({B, T, H});
        sv.gates = scratch({B, T, 4 * H});
        sv.tc = scratch({B, T, H});
    } else {
        sv.gates = scratch({B, T, 3 * H});
        sv.gh = scratch({B, T, 3 * H});
    }
    return sv;
}

// The weights' gradients summed over every step in one GEMM: dg [B, T, G*H] the recurrent
// GEMM's output gradients, h_in [B, T, H] its inputs -> {dW [G*H, H], db [G*H]}.
tensor_list weight_grads(const torch::Tensor &dg, const torch::Tensor &h_in)
{
    const int64_t BT = dg.size(0) * dg.size(1), GH = dg.size(2), H = h_in.size(2);
    torch::Tensor flat = dg.view({BT, GH});
    return {flat.t().mm(h_in.view({BT, H})), flat.sum(0)};
}

// A forward's inputs and buffers as floats: B sequences of T steps of H units; X [B, T, G*H]
// the input projections, K [B*T] the keep flags (nullptr: all 1), b [G*H] the recurrent bias,
// wt the recurrent weights transposed ([H, G*H], w.t() or a contiguous copy); S [B, state] in:
// the state entering, out: the state after the last step; Y [B, T, H] receives h of every
// step; the per-step buffers as Saved's (those of the other core unused).
struct Fwd {
    int64_t B, T, H;
    const float *X, *K, *b;
    torch::Tensor wt;
    float *S, *Y, *h_in, *c_in, *gates, *tc, *gh;
};

// One step's recurrent GEMM: rows [B, G*H] of out (ld T*G*H) = h_in's rows (ld T*H) x wt.
void step_gemm(const Fwd &f, float *out, int64_t GH, int64_t t)
{
    const int64_t B = f.B, T = f.T, H = f.H;
    torch::Tensor o = rows_view(out + t * GH, B, GH, T * GH);
    torch::mm_out(o, rows_view(f.h_in + t * H, B, H, T * H), f.wt);
}

void lstm_forward(const Fwd &f)
{
    const int64_t B = f.B, T = f.T, H = f.H;
    for (int64_t t = 0; t < T; t++) {
        for (int64_t i = 0; i < B; i++) {
            const float k = f.K ? f.K[i * T + t] : 1.0f;
            float *hi = f.h_in + (i * T + t) * H, *ci = f.c_in + (i * T + t) * H;
            const float *s = f.S + i * 2 * H;
            for (int64_t j = 0; j < H; j++)
                hi[j] = s[j] * k, ci[j] = s[H + j] * k;
        }
        step_gemm(f, f.gates, 4 * H, t);
        for (int64_t i = 0; i < B; i++) {
            const int64_t r = i * T + t;
            float *h2 = f.Y + r * H, *s = f.S + i * 2 * H;
            gb_lstm_forward_row(H, f.X + r * 4 * H, f.b, f.gates + r * 4 * H, f.c_in + r * H,
                                s + H, f.tc + r * H, h2);
            std::memcpy(s, h2, sizeof(float) * (size_t)H);
        }
    }
}

void gru_forward(const Fwd &f)
{
    const int64_t B = f.B, T = f.T, H = f.H;
    for (int64_t t = 0; t < T; t++) {
        for (int64_t i = 0; i < B; i++) {
            const float k = f.K ? f.K[i * T + t] : 1.0f;
            float *hi = f.h_in + (i * T + t) * H;
            for (int64_t j = 0; j < H; j++)
                hi[j] = f.S[i * H + j] * k;
        }
        step_gemm(f, f.gh, 3 * H, t);
        for (int64_t i = 0; i < B; i++) {
            const int64_t r = i * T + t;
            gb_gru_forward_row(H, f.X + r * 3 * H, f.b, f.gh + r * 3 * H, f.h_in + r * H,
                               f.gates + r * 3 * H, f.Y + r * H);
            std::memcpy(f.S + i * H, f.Y + r * H, sizeof(float) * (size_t)H);
        }
    }
}

// The LSTM's backward through time: gy [B, T, H] -> gradients of xp, s0, w, b.
tensor_list lstm_backward(const Saved &sv, const float *K, const torch::Tensor &w,
                          const torch::Tensor &gy)
{
    const int64_t B = sv.gates.size(0), T = sv.gates.size(1), H = w.size(1);
    torch::Tensor dg = scratch({B, T, 4 * H}), ds = torch::zeros({B, 2 * H});
    torch::Tensor dhin = scratch({B, H});
    const float *GY = gy.data_ptr<float>(), *GA = sv.gates.data_ptr<float>();
    const float *TC = sv.tc.data_ptr<float>(), *CIN = sv.c_in.data_ptr<float>();
    float *D = dg.data_ptr<float>(), *DS = ds.data_ptr<float>(), *DH = dhin.data_ptr<float>();
    for (int64_t t = T - 1; t >= 0; t--) {
        for (int64_t i = 0; i < B; i++) {
            const int64_t r = i * T + t;
            gb_lstm_backward_row(H, GA + r * 4 * H, TC + r * H, CIN + r * H, GY + r * H,
                                 DS + i * 2 * H, DS + i * 2 * H + H, K[r], D + r * 4 * H);
        }
        torch::mm_out(dhin, rows_view(D + t * 4 * H, B, 4 * H, T * 4 * H), w);
        for (int64_t i = 0; i < B; i++)
            for (int64_t j = 0; j < H; j++)
                DS[i * 2 * H + j] = DH[i * H + j] * K[i * T + t];
    }
    tensor_list wg = weight_grads(dg, sv.h_in);
    return {dg, ds, wg[0], wg[1]};
}

tensor_list gru_backward(const Saved &sv, const float *K, const torch::Tensor &w,
                         const torch::Tensor &gy)
{
    const int64_t B = sv.gates.size(0), T = sv.gates.size(1), H = w.size(1);
    torch::Tensor dxp = scratch({B, T, 3 * H}), dh = torch::zeros({B, H});
    torch::Tensor dgh = scratch({B, T, 3 * H}), dhin = scratch({B, H});
    const float *GY = gy.data_ptr<float>(), *GA = sv.gates.data_ptr<float>();
    const float *GH = sv.gh.data_ptr<float>(), *HIN = sv.h_in.data_ptr<float>();
    float *DX = dxp.data_ptr<float>(), *DG = dgh.data_ptr<float>();
    float *dhp = dh.data_ptr<float>(), *DH = dhin.data_ptr<float>();
    for (int64_t t = T - 1; t >= 0; t--) {
        for (int64_t i = 0; i < B; i++) {
            const int64_t r = i * T + t;
            gb_gru_backward_row(H, GA + r * 3 * H, GH + r * 3 * H, HIN + r * H, GY + r * H,
                                dhp + i * H, DX + r * 3 * H, DG + r * 3 * H);
        }
        torch::mm_out(dhin, rows_view(DG + t * 3 * H, B, 3 * H, T * 3 * H), w);
        for (int64_t i = 0; i < B; i++)
            for (int64_t j = 0; j < H; j++)
                dhp[i * H + j] = (dhp[i * H + j] + DH[i * H + j]) * K[i * T + t];
    }
    tensor_list wg = weight_grads(dgh, sv.h_in);
    return {dxp, dh, wg[0], wg[1]};
}

// Either core's forward over xp [B, T, G*H] (contiguous) from s0 [B, S] (contiguous), into
// sv's buffers; keep [B, T] contiguous -> y [B, T, H].
torch::Tensor seq_forward(int kind, const torch::Tensor &xp, const torch::Tensor &s0,
                          const torch::Tensor &keep, const torch::Tensor &w,
                          const torch::Tensor &b, const Saved &sv)
{
    const int64_t B = xp.size(0), T = xp.size(1), H = w.size(1);
    torch::Tensor ys = torch::empty({B, T, H}), s = scratch({s0.numel()});
    s.copy_(s0.view({s0.numel()}));
    auto ptr = [](const torch::Tensor &t) { return t.defined() ? t.data_ptr<float>() : nullptr; };
    // [H, G*H] contiguous: the steps' GEMMs run about twice as fast as on w.t()
    Fwd f{B, T, H, xp.data_ptr<float>(), keep.data_ptr<float>(), b.data_ptr<float>(),
          w.t().contiguous(), s.data_ptr<float>(), ys.data_ptr<float>(), ptr(sv.h_in),
          ptr(sv.c_in), ptr(sv.gates), ptr(sv.tc), ptr(sv.gh)};
    if (kind == GB_CORE_LSTM)
        lstm_forward(f);
    else
        gru_forward(f);
    return ys;
}

struct RecurrentSeq : torch::autograd::Function<RecurrentSeq> {
    static torch::Tensor forward(AutogradContext *ctx, const torch::Tensor &xp,
                                 const torch::Tensor &s0, const torch::Tensor &keep,
                                 const torch::Tensor &w, const torch::Tensor &b, int64_t kind)
    {
        const int64_t B = xp.size(0), T = xp.size(1), H = w.size(1);
        Saved sv = saved_buffers((int)kind, B, T, H);
        torch::Tensor k = keep.contiguous();
        torch::Tensor ys = seq_forward((int)kind, xp.contiguous(), s0.contiguous(), k, w, b, sv);
        ctx->saved_data["kind"] = kind;
        ctx->save_for_backward({k, w});
        // the per-step tensors are made here, not graph inputs: kept as plain values
        ctx->saved_data["h_in"] = sv.h_in, ctx->saved_data["gates"] = sv.gates;
        if (kind == GB_CORE_LSTM)
            ctx->saved_data["c_in"] = sv.c_in, ctx->saved_data["tc"] = sv.tc;
        else
            ctx->saved_data["gh"] = sv.gh;
        return ys;
    }
    static tensor_list backward(AutogradContext *ctx, tensor_list grads)
    {
        const int64_t kind = ctx->saved_data["kind"].toInt();
        auto saved = ctx->get_saved_variables();
        auto get = [&](const char *name) { return ctx->saved_data[name].toTensor(); };
        Saved sv;
        sv.h_in = get("h_in"), sv.gates = get("gates");
        if (kind == GB_CORE_LSTM)
            sv.c_in = get("c_in"), sv.tc = get("tc");
        else
            sv.gh = get("gh");
        torch::Tensor gy = grads[0].contiguous();
        const float *K = saved[0].data_ptr<float>();
        tensor_list g = kind == GB_CORE_LSTM ? lstm_backward(sv, K, saved[1], gy)
                                             : gru_backward(sv, K, saved[1], gy);
        return {g[0], g[1], torch::Tensor(), g[2], g[3], torch::Tensor()};
    }
};

} // namespace

torch::Tensor recurrent_sequence(int kind, const torch::Tensor &xp, const torch::Tensor &s0,
                                 const torch::Tensor &keep, const torch::Tensor &w,
                                 const torch::Tensor &b)
{
    const bool grad = torch::GradMode::is_enabled() &&
                      (xp.requires_grad() || s0.requires_grad() || w.requires_grad() ||
                       b.requires_grad());
    if (grad)
        return RecurrentSeq::apply(xp, s0, keep, w, b, (int64_t)kind);
    // no backward to come (the pre-update values): nothing kept, every buffer back to the pool
    Saved sv = saved_buffers(kind, xp.size(0), xp.size(1), w.size(1));
    return seq_forward(kind, xp.contiguous(), s0.contiguous(), keep.contiguous(), w, b, sv);
}

torch::Tensor recurrent_step(int kind, const torch::Tensor &xp, const torch::Tensor &state,
                             const torch::Tensor &w, const torch::Tensor &b)
{
    torch::NoGradGuard no_grad;
    const int64_t n = xp.size(0), H = w.size(1), G = kind == GB_CORE_LSTM ? 4 : 3;
    torch::Tensor next = state.to(torch::kFloat32).contiguous().clone(); // [n, S], the result
    torch::Tensor x = xp.contiguous();
    // this thread's buffers, reused: y, h_in, c_in, tc (n x H each), gates, gh (n x G*H each)
    thread_local std::vector<float> buf;
    buf.resize((size_t)(n * H * (4 + 2 * G)));
    float *p = buf.data();
    // one step: w.t() as it is (a transposed copy would cost what its faster GEMM saves)
    Fwd f{n, 1, H, x.data_ptr<float>(), nullptr, b.data_ptr<float>(), w.t(),
          next.data_ptr<float>(), p, p + n * H, p + 2 * n * H, p + 4 * n * H,
          p + 3 * n * H, p + (4 + G) * n * H};
    if (kind == GB_CORE_LSTM)
        lstm_forward(f);
    else
        gru_forward(f);
    return next;
}

} // namespace gbt
