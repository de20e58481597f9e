// tests/workers/torch/test_flat_adam.cpp: FlatAdam (workers/torch/optimizer.hpp), whose CPU step,
// gradient norm and clipping run as single loops over its flat buffers (flat_kernels.h), against
// libtorch's own torch::optim::Adam and torch::nn::utils::clip_grad_norm_ on twin networks, over
// 30 steps of random gradients (lr 0.01, clipping on every other step), layers of odd sizes;
// and gb_flat_lerp against torch's lerp on both sides of its formula's switch.
#include "workers/torch/flat_kernels.h"
#include "workers/torch/optimizer.hpp"
// libtorch's headers bring glog's CHECK macros: the harness's own are meant here
#undef CHECK
#undef CHECK_NEAR
#include "tests/test.h"

#include <cmath>
#include <cstdio>

static torch::nn::Sequential net()
{
    return torch::nn::Sequential(torch::nn::Linear(5, 37), torch::nn::ReLU(),
                                 torch::nn::Linear(37, 3));
}

static void test_adam_as_torch(void)
{
    torch::manual_seed(7);
    torch::nn::Sequential a = net(), b = net();
    {
        torch::NoGradGuard no_grad;
        for (size_t i = 0; i < a->parameters().size(); i++)
            b->parameters()[i].copy_(a->parameters()[i]);
    }
    gbt::FlatAdam flat(a->parameters(), 0.01);
    torch::optim::Adam ref(b->parameters(), torch::optim::AdamOptions(0.01));
    double worst = 0, worst_norm = 0, first_norm = 0;
    for (int step = 0; step < 30; step++) {
        torch::Tensor x = torch::randn({16, 5});
        flat.zero_grad();
        ref.zero_grad();
        a->forward(x).pow(2).mean().backward();
        b->forward(x).pow(2).mean().backward();
        const double max_norm = step % 2 ? 0.05 : 0.0; // 0: never clipped
        double n1 = flat.clip_grad_norm(max_norm);
        double n2 = torch::nn::utils::clip_grad_norm_(b->parameters(),
                                                      max_norm > 0 ? max_norm : 1e30);
        worst_norm = std::max(worst_norm, std::fabs(n1 - n2) / n2);
        if (step == 0)
            first_norm = std::fabs(n1 - n2) / n2; // the same gradients: only the sum's order
        flat.set_lr(0.01);
        flat.step();
        ref.step();
        for (size_t i = 0; i < a->parameters().size(); i++)
            worst = std::max(worst, (a->parameters()[i] - b->parameters()[i])
                                        .abs().max().item<double>());
    }
    std::fprintf(stderr, "  30 steps: parameters within %.3g, gradient norms %.3g relative (the "
                 "first %.3g)\n", worst, worst_norm, first_norm);
    CHECK(worst < 1e-5); // each step moves a weight by about lr (0.01)
    CHECK(first_norm < 1e-6);
    CHECK(worst_norm < 1e-4); // later ones of parameters 1e-6 apart
}

static void test_lerp(void)
{
    for (float w : {0.005f, 0.3f, 0.5f, 0.9f}) {
        torch::Tensor d = torch::randn({1001}), s = torch::randn({1001});
        torch::Tensor want = d.lerp(s, w);
        gb_flat_lerp(d.data_ptr<float>(), s.data_ptr<float>(), 1001, w);
        CHECK((d - want).abs().max().item<double>() < 1e-6);
    }
}

int main()
{
    TEST_RUN(test_adam_as_torch);
    TEST_RUN(test_lerp);
    return test_main_result();
}
