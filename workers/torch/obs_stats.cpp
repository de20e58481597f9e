// workers/torch/obs_stats.cpp: policy.model.normalize_obs's running statistics. Observations
// are added up as they reach a trainer (learner_observe, any thread: the ingest's), relative to
// a shift (the mean at the last reset: creation, load, set_group; the same on every rank); each
// training step then sums the ranks' counts and sums (one all-reduce) and merges them into the
// acting network's mean and variance (Chan et al.'s parallel update), which travel with its
// parameters to the policy workers, inline acting, checkpoints and `gearbox eval`.
#include "workers/torch/algorithm.hpp"

#include <cstring>
#include <mutex>
#include <vector>

namespace gbt {

struct ObsPending {
    std::mutex mu;
    int64_t D = 0;
    std::vector<double> shift; // [D]: the sums are of x - shift (fixed between resets)
    std::vector<double> sums;  // [1 + 2D]: count, sum (x - shift), sum (x - shift)^2
};

void reset_obs_pending(gb_torch_learner *l)
{
    ObsStats st = l->model->net->obs_stats();
    if (!st.defined())
        return;
    if (!l->obs_pending) // at the learner's creation, before any other thread has it
        l->obs_pending = std::make_shared<ObsPending>();
    ObsPending *p = l->obs_pending.get();
    torch::Tensor m = st.mean.to(torch::kCPU).contiguous();
    std::lock_guard<std::mutex> lock(p->mu);
    p->D = m.numel();
    p->shift.assign(m.data_ptr<double>(), m.data_ptr<double>() + p->D);
    p->sums.assign((size_t)(1 + 2 * p->D), 0.0);
}

void merge_obs_stats(gb_torch_learner *l)
{
    ObsStats st = l->model->net->obs_stats();
    ObsPending *p = l->obs_pending.get();
    if (!st.defined() || !p)
        return;
    const int64_t D = p->D;
    std::vector<double> sums((size_t)(1 + 2 * D), 0.0);
    {
        std::lock_guard<std::mutex> lock(p->mu);
        sums.swap(p->sums);
    }
    if (l->group) { // every rank's rows, relative to the same shift (reset by set_group)
        gb_error err = {};
        if (gbt_group_allreduce(l->group, GB_DTYPE_FLOAT64, sums.data(), (int64_t)sums.size(),
                                GB_GROUP_SUM, &err))
            throw Failure(err.code, err.msg);
    }
    const double n = sums[0];
    if (n <= 0)
        return;
    torch::NoGradGuard no_grad;
    torch::Tensor mean = st.mean.to(torch::kCPU).contiguous(),
                  var = st.var.to(torch::kCPU).contiguous();
    double *mu = mean.data_ptr<double>(), *va = var.data_ptr<double>();
    const double c = st.count.item<double>(), total = c + n;
    for (int64_t i = 0; i < D; i++) {
        double d = sums[(size_t)(1 + i)] / n; // the new rows' mean, relative to the shift
        double m2 = sums[(size_t)(1 + D + i)] - n * d * d;
        double delta = p->shift[(size_t)i] + d - mu[i];
        double all = va[i] * c + (m2 > 0 ? m2 : 0) + delta * delta * c * n / total;
        mu[i] += delta * n / total;
        va[i] = all / total;
    }
    st.mean.copy_(mean);
    st.var.copy_(var);
    st.count.fill_(total);
    if (l->target) { // the target network normalises as the online one does
        ObsStats t = l->target->obs_stats();
        t.mean.copy_(st.mean);
        t.var.copy_(st.var);
        t.count.copy_(st.count);
    }
}

} // namespace gbt

using namespace gbt;

extern "C" int gbt_learner_observe(gb_torch_learner *l, const float *obs, int64_t n,
                                   const uint8_t *mask, gb_error *err)
{
    if (n < 0 || (n > 0 && !obs))
        return gb_error_set(err, GB_EINVAL, "observe: %lld rows", (long long)n);
    return gb_torch_guard(err, "observe", [&] {
        ObsPending *p = l->obs_pending.get();
        if (!p)
            return 0;
        const int64_t D = p->D;
        std::lock_guard<std::mutex> lock(p->mu);
        double *s = p->sums.data();
        const double *c = p->shift.data();
        for (int64_t r = 0; r < n; r++) {
            if (mask && !mask[r])
                continue;
            const float *x = obs + r * D;
            s[0] += 1.0;
            for (int64_t i = 0; i < D; i++) {
                double d = (double)x[i] - c[i];
                s[1 + i] += d;
                s[1 + D + i] += d * d;
            }
        }
        return 0;
    });
}
