// tests/workers/torch/test_core_seq.cpp: the recurrent cores' fused sequence on the CPU
// (workers/torch/core_seq.cpp) against the same cores built from libtorch's operations: equal
// outputs and equal gradients for the inputs, the initial state and every parameter, with
// episode starts in the chunk (LSTM and GRU); and the time each takes for a PPO-sized minibatch.
#include "workers/torch/core.hpp"
// libtorch's headers bring glog's CHECK macros: the harness's own are meant here
#undef CHECK
#undef CHECK_NEAR
#include "tests/test.h"

#include <chrono>

struct Grads {
    torch::Tensor y, dx, ds0;
    std::vector<torch::Tensor> dparams;
};

static Grads run(gbt::Core &core, bool fused, const torch::Tensor &x, const torch::Tensor &s0,
                 const torch::Tensor &reset, const torch::Tensor &probe)
{
    core->fused = fused;
    core->zero_grad();
    torch::Tensor xg = x.clone().requires_grad_(true), sg = s0.clone().requires_grad_(true);
    Grads g;
    g.y = core->sequence(xg, sg, reset);
    (g.y * probe).sum().backward();
    g.dx = xg.grad().clone();
    g.ds0 = sg.grad().clone();
    for (const auto &p : core->parameters())
        g.dparams.push_back(p.grad().clone());
    return g;
}

static double diff(const torch::Tensor &a, const torch::Tensor &b)
{
    return (a - b).abs().max().item<double>();
}

static void compare(int kind, const char *name)
{
    torch::manual_seed(7);
    const int64_t B = 5, T = 11, F = 6, H = 8;
    gbt::Core core(kind, F, H);
    torch::Tensor x = torch::randn({B, T, F}), s0 = 0.5 * torch::randn({B, core->state_size()});
    torch::Tensor reset = torch::zeros({B, T});
    reset[0][4] = 1, reset[1][1] = 1, reset[1][8] = 1, reset[3][T - 1] = 1;
    torch::Tensor probe = torch::randn({B, T, H});
    Grads a = run(core, true, x, s0, reset, probe), b = run(core, false, x, s0, reset, probe);
    double d = std::max({diff(a.y, b.y), diff(a.dx, b.dx), diff(a.ds0, b.ds0)});
    for (size_t i = 0; i < a.dparams.size(); i++)
        d = std::max(d, diff(a.dparams[i], b.dparams[i]));
    fprintf(stderr, "  %s: fused vs libtorch's operations, max |diff| of outputs and gradients "
                    "%.3g\n", name, d);
    CHECK(d < 1e-5);
    CHECK(a.dparams.size() == 4);
    // the gradient did go somewhere: the initial state of chunk 1 matters only before row 1
    CHECK(a.ds0[0].abs().sum().item<double>() > 1e-6);
}

static void test_lstm(void) { compare(GB_CORE_LSTM, "lstm"); }
static void test_gru(void) { compare(GB_CORE_GRU, "gru"); }

// The acting step (recurrent_step, its buffers reused from call to call), row by row with the
// resets applied by hand, against libtorch's operations over the whole sequence; the sequence
// without autograd (the pre-update values' path) against the same.
static void step_agrees(int kind, const char *name)
{
    torch::manual_seed(11);
    const int64_t B = 6, T = 9, F = 5, H = 16;
    gbt::Core core(kind, F, H);
    torch::NoGradGuard no_grad;
    torch::Tensor x = torch::randn({B, T, F}), s0 = 0.5 * torch::randn({B, core->state_size()});
    torch::Tensor reset = torch::zeros({B, T});
    reset[2][3] = 1, reset[5][0] = 1, reset[0][T - 1] = 1;
    core->fused = false;
    torch::Tensor ref = core->sequence(x, s0, reset);
    core->fused = true;
    torch::Tensor seq = core->sequence(x, s0, reset);
    std::vector<torch::Tensor> ys;
    torch::Tensor s = s0;
    for (int64_t t = 0; t < T; t++) {
        auto r = core->step(x.select(1, t), s * (1.0 - reset.select(1, t)).unsqueeze(1));
        ys.push_back(r.first.clone());
        s = r.second;
    }
    double d_step = diff(torch::stack(ys, 1), ref), d_seq = diff(seq, ref);
    fprintf(stderr, "  %s: step by step vs libtorch's sequence %.3g, sequence without autograd "
                    "%.3g\n", name, d_step, d_seq);
    CHECK(d_step < 1e-5);
    CHECK(d_seq < 1e-5);
}

static void test_lstm_step(void) { step_agrees(GB_CORE_LSTM, "lstm"); }
static void test_gru_step(void) { step_agrees(GB_CORE_GRU, "gru"); }

// A PPO minibatch of 16 chunks of 33 rows, 64 units: forward and backward, both ways.
static void test_timing(void)
{
    const int64_t B = 16, T = 33, F = 64, H = 64;
    for (int kind : {GB_CORE_LSTM, GB_CORE_GRU}) {
        gbt::Core core(kind, F, H);
        torch::Tensor x = torch::randn({B, T, F}), s0 = torch::zeros({B, core->state_size()});
        torch::Tensor reset = torch::zeros({B, T}), probe = torch::randn({B, T, H});
        double us[2];
        for (int fused = 0; fused < 2; fused++) {
            run(core, fused, x, s0, reset, probe);
            auto t0 = std::chrono::steady_clock::now();
            for (int i = 0; i < 5; i++)
                run(core, fused, x, s0, reset, probe);
            us[fused] = std::chrono::duration<double, std::micro>(
                            std::chrono::steady_clock::now() - t0).count() / 5;
        }
        fprintf(stderr, "  %s, 16 x 33 rows of 64 units, forward + backward: %.0f us fused, "
                        "%.0f us through libtorch's operations (x%.1f)\n",
                kind == GB_CORE_LSTM ? "lstm" : "gru", us[1], us[0], us[0] / us[1]);
    }
}

int main(void)
{
    torch::set_num_threads(1);
    TEST_RUN(test_lstm);
    TEST_RUN(test_gru);
    TEST_RUN(test_lstm_step);
    TEST_RUN(test_gru_step);
    TEST_RUN(test_timing);
    return test_main_result();
}
