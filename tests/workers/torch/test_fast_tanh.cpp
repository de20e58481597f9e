// tests/workers/torch/test_fast_tanh.cpp: the vectorised tanh (workers/torch/fast_tanh.h) against
// tanh in double precision over every float of [-10, 10] on a fine grid and at the edges (0, -0,
// infinities, NaN, the largest floats, in place), and the module the networks use
// (workers/torch/activation.hpp) against torch::tanh: values, gradients through autograd,
// non-contiguous inputs, and the fallback for other dtypes.
#include "workers/torch/activation.hpp"
#include "workers/torch/fast_tanh.h"
// libtorch's headers bring glog's CHECK macros: the harness's own are meant here
#undef CHECK
#undef CHECK_NEAR
#include "tests/test.h"

#include <cmath>
#include <limits>
#include <vector>

static void test_kernel_accuracy(void)
{
    const size_t n = 2000001; // [-10, 10] in steps of 1e-5, and the same scaled down to 1e-6
    std::vector<float> x(2 * n), y(2 * n);
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)(-10.0 + 20.0 * (double)i / (double)(n - 1));
        x[n + i] = x[i] * 1e-5f;
    }
    gb_tanh_forward(x.data(), y.data(), x.size());
    double worst = 0, worst_rel = 0;
    bool bounded = true, odd = true;
    for (size_t i = 0; i < x.size(); i++) {
        double t = std::tanh((double)x[i]);
        double e = std::fabs((double)y[i] - t);
        worst = std::max(worst, e);
        if (t != 0)
            worst_rel = std::max(worst_rel, e / std::fabs(t));
        bounded &= std::fabs(y[i]) <= 1.0f;
        if (i < n)
            odd &= y[i] == -y[n - 1 - i]; // the grid is symmetric about 0
    }
    fprintf(stderr, "  |fast - tanh| <= %.3g, relative %.3g\n", worst, worst_rel);
    CHECK(worst <= 5e-7);
    CHECK(worst_rel <= 5e-7);
    CHECK(bounded);
    CHECK(odd);
}

static void test_kernel_edges(void)
{
    const float inf = std::numeric_limits<float>::infinity();
    const float big = std::numeric_limits<float>::max();
    float x[] = {0.0f, -0.0f, inf, -inf, big, -big, 1e-30f, -1e-38f, 7.9f, 8.0f, 30.0f,
                 std::numeric_limits<float>::quiet_NaN()};
    const size_t n = sizeof x / sizeof x[0];
    float y[n];
    gb_tanh_forward(x, y, n);
    CHECK(y[0] == 0.0f && y[1] == 0.0f);
    for (int i = 2; i < 6; i++)
        CHECK_NEAR(y[i], i % 2 ? -1.0 : 1.0, 1e-6);
    CHECK_NEAR(y[6], 1e-30, 1e-36);
    CHECK_NEAR(y[7], -1e-38, 1e-42); // subnormal: a few units of its last place
    CHECK_NEAR(y[8], std::tanh(7.9), 1e-6);
    CHECK_NEAR(y[9], 1.0, 1e-6);
    CHECK_NEAR(y[10], 1.0, 1e-6);
    CHECK(std::isnan(y[11]));
    // in place, and lengths that leave a tail past any vector width
    for (size_t len = 1; len < 40; len++) {
        std::vector<float> a(len), b(len);
        for (size_t i = 0; i < len; i++)
            a[i] = b[i] = (float)i * 0.3f - 5.0f;
        gb_tanh_forward(b.data(), b.data(), len);
        bool same = true;
        for (size_t i = 0; i < len; i++)
            same &= std::fabs(b[i] - std::tanh(a[i])) <= 5e-7;
        CHECK_MSG(same, "in place, %zu elements", len);
    }
    float yy[3] = {0.5f, -0.25f, 1.0f}, g[3] = {2.0f, 4.0f, 3.0f}, gx[3];
    gb_tanh_backward(yy, g, gx, 3);
    CHECK_NEAR(gx[0], 2.0 * 0.75, 1e-7);
    CHECK_NEAR(gx[1], 4.0 * (1.0 - 0.0625), 1e-7);
    CHECK_NEAR(gx[2], 0.0, 0.0);
}

static void test_module_matches_torch(void)
{
    torch::manual_seed(5);
    torch::Tensor x = torch::randn({257, 64}) * 3.0;
    torch::Tensor a = x.clone().requires_grad_(true), b = x.clone().requires_grad_(true);
    gbt::FastTanh m;
    torch::Tensor ya = m->forward(a), yb = torch::tanh(b);
    CHECK(ya.sizes() == yb.sizes());
    CHECK((ya - yb).abs().max().item<double>() <= 5e-7);
    torch::Tensor w = torch::randn({257, 64});
    (ya * w).sum().backward();
    (yb * w).sum().backward();
    double gdiff = (a.grad() - b.grad()).abs().max().item<double>();
    fprintf(stderr, "  gradient differs from torch::tanh's by at most %.3g\n", gdiff);
    CHECK(gdiff <= 2e-6 * w.abs().max().item<double>());
    // a second-layer use: the gradient flows into what came before
    torch::Tensor lin = torch::randn({64, 8}).requires_grad_(true);
    gbt::fast_tanh(x.narrow(0, 0, 10).matmul(lin)).sum().backward();
    CHECK(lin.grad().defined() && lin.grad().abs().sum().item<double>() > 0);
    // non-contiguous input (a transposed view) gives the values of its elements
    torch::Tensor t = x.t();
    CHECK(!t.is_contiguous());
    CHECK((gbt::fast_tanh(t) - torch::tanh(t)).abs().max().item<double>() <= 5e-7);
    // without grad mode: values, no graph
    {
        torch::NoGradGuard ng;
        torch::Tensor y = gbt::fast_tanh(a);
        CHECK(!y.requires_grad());
        CHECK((y - yb.detach()).abs().max().item<double>() <= 5e-7);
    }
    // other dtypes go through torch::tanh exactly
    torch::Tensor d = x.to(torch::kFloat64);
    CHECK(gbt::fast_tanh(d).equal(torch::tanh(d)));
    // several intra-op threads split the work in ranges: the same values
    torch::Tensor big = torch::randn({1 << 18});
    at::set_num_threads(2);
    torch::Tensor y2 = gbt::fast_tanh(big);
    at::set_num_threads(1);
    CHECK(y2.equal(gbt::fast_tanh(big)));
}

int main(void)
{
    TEST_RUN(test_kernel_accuracy);
    TEST_RUN(test_kernel_edges);
    TEST_RUN(test_module_matches_torch);
    return test_main_result();
}
