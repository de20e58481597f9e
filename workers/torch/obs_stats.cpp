// workers/torch/obs_stats.cpp: the running statistics a trainer keeps of what it ingests:
// policy.model.normalize_obs's of the observations and trainer.algorithm.reward_scale's of the
// discounted returns. Rows are added up as they reach a trainer (learner_observe, any thread:
// the ingest's), the observations relative to a shift (the mean at the last reset: creation,
// load, set_group; the same on every rank); each training step then sums the ranks' counts and
// sums (one all-reduce) and merges them in (Chan et al.'s parallel update): the observations'
// into the acting network's buffers, which travel with its parameters to the policy workers,
// inline acting, checkpoints and `gearbox eval`; the returns' into the learner's checkpointed
// scale, by which the step divides its rewards.
#include "workers/torch/algorithm.hpp"

#include <cmath>
#include <mutex>
#include <vector>

namespace gbt {

struct ObsPending {
    std::mutex mu;
    int64_t D = 0;             // observation values (0: no observation statistics)
    std::vector<double> shift; // [D]: the sums are of x - shift (fixed between resets)
    // [1 + 2D + 3]: count, sum (x - shift), sum (x - shift)^2; then the returns' count, sum,
    // sum of squares
    std::vector<double> sums;
};

namespace {

// Chan et al.: (count c, mean, var) and n new values of mean nm and squared deviations m2.
void merge_moments(double c, double *mean, double *var, double n, double nm, double m2)
{
    const double total = c + n, delta = nm - *mean;
    double all = *var * c + (m2 > 0 ? m2 : 0) + delta * delta * c * n / total;
    *mean += delta * n / total;
    *var = all / total;
}

// The observations' part of a merge: sums [1 + 2D] relative to p->shift.
void merge_obs(gb_torch_learner *l, const ObsStats &st, const ObsPending *p, const double *sums)
{
    const int64_t D = p->D;
    const double n = sums[0];
    torch::Tensor mean = st.mean.to(torch::kCPU).contiguous(),
                  var = st.var.to(torch::kCPU).contiguous();
    double *mu = mean.data_ptr<double>(), *va = var.data_ptr<double>();
    const double c = st.count.item<double>();
    for (int64_t i = 0; i < D; i++) {
        double d = sums[1 + i] / n; // the new rows' mean, relative to the shift
        merge_moments(c, &mu[i], &va[i], n, p->shift[(size_t)i] + d,
                      sums[1 + D + i] - n * d * d);
    }
    st.mean.copy_(mean);
    st.var.copy_(var);
    st.count.fill_(c + n);
    if (l->target) { // the target network normalises as the online one does
        ObsStats t = l->target->obs_stats();
        t.mean.copy_(st.mean);
        t.var.copy_(st.var);
        t.count.copy_(st.count);
    }
}

} // namespace

void reset_obs_pending(gb_torch_learner *l)
{
    ObsStats st = l->model->net->obs_stats();
    const bool returns = l->cfg.trainer.algorithm.reward_scale != 0;
    if (!st.defined() && !returns)
        return;
    if (returns && !l->return_stats.defined()) // at creation: the identity scale
        l->return_stats = torch::tensor({0.0, 0.0, 1.0}, torch::kFloat64);
    if (!l->obs_pending) // at the learner's creation, before any other thread has it
        l->obs_pending = std::make_shared<ObsPending>();
    ObsPending *p = l->obs_pending.get();
    std::lock_guard<std::mutex> lock(p->mu);
    p->D = 0;
    p->shift.clear();
    if (st.defined()) {
        torch::Tensor m = st.mean.to(torch::kCPU).contiguous();
        p->D = m.numel();
        p->shift.assign(m.data_ptr<double>(), m.data_ptr<double>() + p->D);
    }
    p->sums.assign((size_t)(1 + 2 * p->D + 3), 0.0);
}

void merge_obs_stats(gb_torch_learner *l)
{
    ObsPending *p = l->obs_pending.get();
    if (!p)
        return;
    std::vector<double> sums(p->sums.size(), 0.0);
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
    torch::NoGradGuard no_grad;
    ObsStats st = l->model->net->obs_stats();
    if (st.defined() && sums[0] > 0)
        merge_obs(l, st, p, sums.data());
    const double *r = sums.data() + 1 + 2 * p->D, n = r[0];
    if (l->return_stats.defined() && n > 0) {
        double *s = l->return_stats.data_ptr<double>(), nm = r[1] / n;
        merge_moments(s[0], &s[1], &s[2], n, nm, r[2] - n * nm * nm);
        s[0] += n;
    }
}

void scale_rewards(const gb_torch_learner *l, gb_torch_batch *b, std::vector<float> &scaled)
{
    if (!l->return_stats.defined())
        return;
    const double *s = l->return_stats.data_ptr<double>();
    const double inv = 1.0 / std::sqrt(s[2] + 1e-8), clip = l->cfg.trainer.algorithm.reward_clip;
    const int64_t n = b->B * b->T;
    scaled.resize((size_t)n);
    for (int64_t i = 0; i < n; i++) {
        double x = (double)b->reward[i] * inv;
        scaled[(size_t)i] = (float)(x > clip ? clip : x < -clip ? -clip : x);
    }
    b->reward = scaled.data();
}

} // namespace gbt

using namespace gbt;

extern "C" int gbt_learner_observe(gb_torch_learner *l, const float *obs, const float *returns,
                                   int64_t n, const uint8_t *mask, gb_error *err)
{
    if (n < 0)
        return gb_error_set(err, GB_EINVAL, "observe: %lld rows", (long long)n);
    ObsPending *p = l->obs_pending.get();
    if (!p || n == 0)
        return 0;
    std::lock_guard<std::mutex> lock(p->mu);
    const int64_t D = p->D;
    double *s = p->sums.data(), *rs = s + 1 + 2 * D;
    const double *c = p->shift.data();
    for (int64_t r = 0; r < n; r++) {
        if (mask && !mask[r])
            continue;
        if (obs && D > 0) {
            const float *x = obs + r * D;
            s[0] += 1.0;
            for (int64_t i = 0; i < D; i++) {
                double d = (double)x[i] - c[i];
                s[1 + i] += d;
                s[1 + D + i] += d * d;
            }
        }
        if (returns && l->return_stats.defined()) {
            rs[0] += 1.0;
            rs[1] += returns[r];
            rs[2] += (double)returns[r] * returns[r];
        }
    }
    return 0;
}
