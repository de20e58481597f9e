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
    TEST_RUN(test_timing);
    return test_main_result();
}
