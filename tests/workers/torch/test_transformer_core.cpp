// tests/workers/torch/test_transformer_core.cpp: the gated transformer core
// (workers/torch/transformer.hpp): its chunk forward equals stepping the rows one by one with the
// state carried between them and zeroed where an episode starts (from a non-empty state0, with
// episode starts in the chunk, including right after row 0); a zero state is an empty memory;
// the memory reaches back exactly L x M steps; gradients reach every parameter; and the core scales
// to tens of millions of parameters.
#include "workers/torch/transformer.hpp"
// libtorch's headers bring glog's CHECK macros: the harness's own are meant here
#undef CHECK
#undef CHECK_NEAR
#include "tests/test.h"

static const int64_t F = 6, D = 16, L = 2, H = 4, M = 5;

// Steps x [B, T, F] row by row from state0, zeroing a row's state before each row where
// reset_before is 1 (after row 0): what an actor does. Returns [B, T, D].
static torch::Tensor stepped(gbt::TransformerCore &core, const torch::Tensor &x,
                             const torch::Tensor &state0, const torch::Tensor &reset_before)
{
    torch::Tensor s = state0.clone();
    std::vector<torch::Tensor> ys;
    for (int64_t t = 0; t < x.size(1); t++) {
        if (t > 0)
            s = s * (1.0 - reset_before.select(1, t).to(torch::kFloat32).unsqueeze(1));
        torch::Tensor next;
        ys.push_back(core->step(x.select(1, t), s, &next));
        s = next;
    }
    return torch::stack(ys, 1);
}

static void test_sequence_equals_steps(void)
{
    torch::manual_seed(3);
    gbt::TransformerCore core(F, D, L, H, M);
    CHECK_EQ_INT(core->state_size(), L * M * D + M);
    torch::NoGradGuard no_grad;
    const int64_t B = 3, T = 13;
    // a state0 that holds a few steps already: stepped from zeros over a prefix
    torch::Tensor prefix = torch::randn({B, 3, F});
    torch::Tensor state0 = torch::zeros({B, core->state_size()});
    for (int64_t t = 0; t < 3; t++) {
        torch::Tensor next;
        core->step(prefix.select(1, t), state0, &next);
        state0 = next;
    }
    state0[2].zero_(); // chunk 2 starts an episode
    torch::Tensor x = torch::randn({B, T, F});
    torch::Tensor reset = torch::zeros({B, T}, torch::kUInt8);
    reset[0][7] = 1;  // an episode starts mid-chunk
    reset[1][1] = 1;  // right after row 0
    reset[1][9] = 1;  // and again
    reset[2][0] = 1;  // ignored at row 0: state0 holds
    torch::Tensor a = core->sequence(x, state0, reset);
    torch::Tensor b = stepped(core, x, state0, reset);
    double diff = (a - b).abs().max().item<double>();
    CHECK(diff < 1e-5);
    // state0 matters: the same rows from an empty memory differ at row 0 of chunk 0
    torch::Tensor c = core->sequence(x, torch::zeros_like(state0), reset);
    CHECK((c[0][0] - a[0][0]).abs().max().item<double>() > 1e-4);
    CHECK((c[2] - a[2]).abs().max().item<double>() < 1e-6); // chunk 2 had zeros already
}

// Each layer looks M rows back, so row t sees the L x M rows before it (the memory holds each
// layer's inputs, which saw their own M rows): changing row t - L M - 1 leaves row t as it was;
// changing row t - L M changes it. And nothing before an episode start reaches past it.
static void test_memory_reach(void)
{
    torch::manual_seed(4);
    gbt::TransformerCore core(F, D, L, H, M);
    torch::NoGradGuard no_grad;
    const int64_t T = L * M + 3;
    torch::Tensor x = torch::randn({1, T, F});
    torch::Tensor s0 = torch::zeros({1, core->state_size()});
    torch::Tensor none = torch::zeros({1, T}, torch::kUInt8);
    torch::Tensor base = core->sequence(x, s0, none);
    const int64_t t = T - 1;
    torch::Tensor far = x.clone();
    far[0][t - L * M - 1] += 1.0;
    CHECK((core->sequence(far, s0, none)[0][t] - base[0][t]).abs().max().item<double>() < 1e-6);
    torch::Tensor near = x.clone();
    near[0][t - L * M] += 1.0;
    CHECK((core->sequence(near, s0, none)[0][t] - base[0][t]).abs().max().item<double>() > 1e-5);
    torch::Tensor cut = torch::zeros({1, T}, torch::kUInt8);
    cut[0][t - 1] = 1; // row t - 1 starts an episode: row t - 2 no longer reaches row t
    torch::Tensor with_cut = core->sequence(x, s0, cut);
    torch::Tensor x2 = x.clone();
    x2[0][t - 2] += 1.0;
    CHECK((core->sequence(x2, s0, cut)[0][t] - with_cut[0][t]).abs().max().item<double>() < 1e-6);
}

static void test_gradients_reach_every_parameter(void)
{
    torch::manual_seed(5);
    gbt::TransformerCore core(F, D, L, H, M);
    torch::Tensor x = torch::randn({2, 9, F});
    torch::Tensor reset = torch::zeros({2, 9}, torch::kUInt8);
    core->sequence(x, torch::zeros({2, core->state_size()}), reset).pow(2).sum().backward();
    int64_t with_grad = 0, total = 0;
    for (const auto &p : core->named_parameters(true)) {
        total++;
        if (p.value().grad().defined() && p.value().grad().abs().sum().item<double>() > 0)
            with_grad++;
        else
            fprintf(stderr, "no gradient: %s\n", p.key().c_str());
    }
    CHECK_EQ_INT(with_grad, total);
}

static void test_scales_to_tens_of_millions(void)
{
    gbt::TransformerCore big(512, 512, 8, 8, 64);
    int64_t n = 0;
    for (const auto &p : big->parameters())
        n += p.numel();
    fprintf(stderr, "transformer core d 512, 8 layers: %.1fM parameters, state %lld floats\n",
            (double)n / 1e6, (long long)big->state_size());
    CHECK(n > 20 * 1000 * 1000);
}

int main(void)
{
    torch::set_num_threads(1);
    TEST_RUN(test_sequence_equals_steps);
    TEST_RUN(test_memory_reach);
    TEST_RUN(test_gradients_reach_every_parameter);
    TEST_RUN(test_scales_to_tens_of_millions);
    return test_main_result();
}
