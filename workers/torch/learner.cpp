// workers/torch/learner.cpp: learners: creation of an algorithm's networks and optimisers,
// the training entry point, lr annealing, gradient clipping, checkpoints.
#include "workers/torch/internal.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

namespace gbt {

torch::Tensor cpu_view(const void *p, std::vector<int64_t> shape, torch::ScalarType t)
{
    return torch::from_blob(const_cast<void *>(p), shape, t);
}

torch::Tensor batch_obs(const gb_torch_learner *l, const gb_torch_batch *b)
{
    const int64_t B = b->B, T = b->T;
    torch::Tensor steps = obs_tensor(l->model, b->obs, B * T);
    torch::Tensor last = obs_tensor(l->model, b->next_obs, B);
    std::vector<int64_t> shape = steps.sizes().vec();
    std::vector<int64_t> chunk{B, T};
    chunk.insert(chunk.end(), shape.begin() + 1, shape.end());
    std::vector<int64_t> one{B, 1};
    one.insert(one.end(), shape.begin() + 1, shape.end());
    std::vector<int64_t> rows{B * (T + 1)};
    rows.insert(rows.end(), shape.begin() + 1, shape.end());
    return torch::cat({steps.view(chunk), last.view(one)}, 1).view(rows);
}

void chunk_priorities(const torch::Tensor &abs_td, const torch::Tensor &valid, float *prio)
{
    if (!prio)
        return;
    torch::Tensor td = abs_td.to(torch::kCPU).to(torch::kFloat32) * valid;
    torch::Tensor cnt = valid.sum(1).clamp_min(1.0);
    torch::Tensor pr = 0.9 * std::get<0>(td.max(1)) + 0.1 * td.sum(1) / cnt + 1e-6;
    torch::from_blob(prio, {abs_td.size(0)}, torch::kFloat32).copy_(pr);
}

void learner_set_lr(torch::optim::Optimizer &opt, double lr)
{
    for (auto &g : opt.param_groups())
        static_cast<torch::optim::AdamOptions &>(g.options()).lr(lr);
}

double learner_lr(const gb_torch_learner *l, double base)
{
    if (!l->cfg.trainer.algorithm.lr_anneal)
        return base;
    double f = 1.0 - l->progress;
    return base * (f < 0.0 ? 0.0 : f);
}

double clip_grads(const std::vector<torch::Tensor> &params, double max_norm)
{
    return torch::nn::utils::clip_grad_norm_(params, max_norm > 0 ? max_norm : 1e30);
}

void copy_tensors(const NamedTensors &dst, const NamedTensors &src)
{
    torch::NoGradGuard no_grad;
    TORCH_CHECK(dst.size() == src.size(), "target network differs from the online network");
    for (size_t i = 0; i < dst.size(); i++)
        dst[i].second.copy_(src[i].second);
}

void polyak_update(const NamedTensors &dst, const NamedTensors &src, double tau)
{
    torch::NoGradGuard no_grad;
    TORCH_CHECK(dst.size() == src.size(), "target network differs from the online network");
    for (size_t i = 0; i < dst.size(); i++)
        if (dst[i].second.is_floating_point())
            dst[i].second.mul_(1.0 - tau).add_(src[i].second, tau);
        else
            dst[i].second.copy_(src[i].second);
}

NamedTensors module_tensors(torch::nn::Module &m)
{
    NamedTensors v;
    for (const auto &kv : m.named_parameters(true))
        v.emplace_back(kv.key(), kv.value());
    for (const auto &kv : m.named_buffers(true))
        v.emplace_back(kv.key(), kv.value());
    return v;
}

// Archive attribute names must be identifiers: "q1.body.0.weight" -> "q1__body__0__weight".
static std::string archive_key(std::string k)
{
    std::string out;
    for (char c : k)
        out += (c == '.') ? std::string("__") : std::string(1, c);
    return out;
}

// Every tensor a checkpoint holds, under a stable key.
static NamedTensors checkpoint_tensors(gb_torch_learner *l)
{
    NamedTensors v;
    auto add = [&](const char *prefix, const NamedTensors &ts) {
        for (const auto &kv : ts)
            v.emplace_back(archive_key(std::string(prefix) + "." + kv.first), kv.second);
    };
    add("model", l->model->net->named_tensors());
    if (l->target)
        add("target", l->target->named_tensors());
    if (l->q1) {
        add("q1", module_tensors(*l->q1));
        add("q2", module_tensors(*l->q2));
        add("q1t", module_tensors(*l->q1t));
        add("q2t", module_tensors(*l->q2t));
        v.emplace_back("log_alpha", l->log_alpha);
    }
    return v;
}

static void learner_init(gb_torch_learner *l, const gb_config *cfg, const gb_torch_space *sp,
                         uint64_t seed)
{
    const gb_config_algorithm &ac = cfg->trainer.algorithm;
    l->cfg = *cfg;
    l->device = device_for(cfg->trainer.device);
    l->gen = at::detail::createCPUGenerator(seed ^ 0x9e3779b97f4a7c15ULL);
    gb_torch_model *m = l->model;
    auto params = m->net->parameters();
    if (ac.name == GB_ALGO_PPO) {
        l->opt = std::make_unique<torch::optim::Adam>(
            params, torch::optim::AdamOptions(ac.lr).eps(1e-5));
    } else if (ac.name == GB_ALGO_DQN) {
        {
            std::lock_guard<std::mutex> lock(init_mutex());
            l->target = make_net(cfg, sp, l->device);
        }
        copy_tensors(l->target->named_tensors(), m->net->named_tensors());
        for (auto &p : l->target->parameters())
            p.set_requires_grad(false);
        l->target->set_training(false);
        l->opt = std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(ac.lr));
    } else {
        int64_t obs_dim = 1;
        for (int i = 0; i < sp->obs_ndim; i++)
            obs_dim *= sp->obs_shape[i];
        // Critics always come from policy.model's MLP settings (also when the actor is
        // TorchScript).
        gb_config_model mc = cfg->policy.model;
        {
            std::lock_guard<std::mutex> lock(init_mutex());
            torch::manual_seed(seed + 1);
            l->q1 = Critic(mc, obs_dim + sp->action_dim);
            l->q2 = Critic(mc, obs_dim + sp->action_dim);
            l->q1t = Critic(mc, obs_dim + sp->action_dim);
            l->q2t = Critic(mc, obs_dim + sp->action_dim);
        }
        for (auto *q : {&l->q1, &l->q2, &l->q1t, &l->q2t})
            (*q)->to(l->device);
        copy_tensors(module_tensors(*l->q1t), module_tensors(*l->q1));
        copy_tensors(module_tensors(*l->q2t), module_tensors(*l->q2));
        for (auto *q : {&l->q1t, &l->q2t})
            for (auto &p : (*q)->parameters())
                p.set_requires_grad(false);
        std::vector<torch::Tensor> qp = l->q1->parameters();
        for (auto &p : l->q2->parameters())
            qp.push_back(p);
        l->opt = std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(ac.lr));
        l->opt_q = std::make_unique<torch::optim::Adam>(qp, torch::optim::AdamOptions(ac.lr));
        l->log_alpha = torch::full({1}, std::log(ac.sac.init_alpha),
                                   torch::TensorOptions().device(l->device))
                           .set_requires_grad(true);
        l->opt_alpha = std::make_unique<torch::optim::Adam>(
            std::vector<torch::Tensor>{l->log_alpha}, torch::optim::AdamOptions(ac.sac.alpha_lr));
        l->target_entropy = std::isnan(ac.sac.target_entropy) ? -(double)sp->action_dim
                                                              : ac.sac.target_entropy;
    }
}

} // namespace gbt

using namespace gbt;

extern "C" int gb_torch_learner_create(const gb_config *cfg, const gb_torch_space *space,
                                       uint64_t seed, gb_torch_learner **out, gb_error *err)
{
    *out = nullptr;
    const gb_config_algorithm &ac = cfg->trainer.algorithm;
    if (ac.name == GB_ALGO_SAC && !(ac.sac.init_alpha > 0.0))
        return gb_error_set(err, GB_EINVAL, "trainer.algorithm.sac.init_alpha must be > 0");
    gb_torch_learner *l = new (std::nothrow) gb_torch_learner();
    if (!l)
        return gb_error_set(err, GB_ENOMEM, "learner: out of memory");
    int rc = gb_torch_guard(err, "learner_create", [&] {
        l->model = new gb_torch_model();
        int r = model_init(l->model, cfg, space, seed, device_for(cfg->trainer.device), err);
        if (r)
            return r;
        learner_init(l, cfg, space, seed);
        return 0;
    });
    if (rc) {
        gb_torch_learner_destroy(l);
        return rc;
    }
    *out = l;
    return 0;
}

extern "C" void gb_torch_learner_destroy(gb_torch_learner *l)
{
    if (!l)
        return;
    delete l->model;
    delete l;
}

extern "C" gb_torch_model *gb_torch_learner_model(gb_torch_learner *l) { return l->model; }

extern "C" void gb_torch_learner_set_progress(gb_torch_learner *l, double progress)
{
    l->progress = progress < 0 ? 0 : progress > 1 ? 1 : progress;
}

extern "C" int64_t gb_torch_learner_train_steps(const gb_torch_learner *l)
{
    return l->train_steps;
}

extern "C" int gb_torch_learner_train(gb_torch_learner *l, const gb_torch_batch *b,
                                      gb_torch_stats *stats, float *priorities, gb_error *err)
{
    if (b->B < 1 || b->T < 1)
        return gb_error_set(err, GB_EINVAL, "train: batch of %lld x %lld steps", (long long)b->B,
                            (long long)b->T);
    if (!b->obs || !b->next_obs || !b->action || !b->reward || !b->terminated || !b->truncated)
        return gb_error_set(err, GB_EINVAL, "train: obs, next_obs, action, reward, terminated "
                            "and truncated are required");
    int algo = l->cfg.trainer.algorithm.name;
    if (algo == GB_ALGO_PPO && !b->logp)
        return gb_error_set(err, GB_EINVAL, "train: ppo needs the behaviour logp column");
    gb_torch_stats local;
    gb_torch_stats *st = stats ? stats : &local;
    std::memset(st, 0, sizeof *st);
    return gb_torch_guard(err, "train", [&] {
        l->model->net->set_training(true);
        if (algo == GB_ALGO_PPO)
            ppo_train(l, b, st, priorities);
        else if (algo == GB_ALGO_DQN)
            dqn_train(l, b, st, priorities);
        else
            sac_train(l, b, st, priorities);
        l->model->net->set_training(false);
        l->train_steps++;
        l->model->version++;
        return 0;
    });
}

extern "C" int gb_torch_learner_save(const gb_torch_learner *cl, const char *path, gb_error *err)
{
    gb_torch_learner *l = const_cast<gb_torch_learner *>(cl);
    std::string tmp = std::string(path) + ".tmp";
    int rc = gb_torch_guard(err, "checkpoint save", [&] {
        torch::NoGradGuard no_grad;
        torch::serialize::OutputArchive ar;
        for (const auto &kv : checkpoint_tensors(l))
            ar.write(kv.first, kv.second.detach().clone());
        ar.write("train_steps", torch::tensor({l->train_steps}, torch::kInt64));
        ar.write("version", torch::tensor({(int64_t)l->model->version}, torch::kInt64));
        torch::serialize::OutputArchive opt;
        l->opt->save(opt);
        ar.write("opt", opt);
        if (l->opt_q) {
            torch::serialize::OutputArchive oq, oa;
            l->opt_q->save(oq);
            l->opt_alpha->save(oa);
            ar.write("opt_q", oq);
            ar.write("opt_alpha", oa);
        }
        ar.save_to(tmp);
        return 0;
    });
    if (rc)
        return gb_error_prefix(err, "%s", tmp.c_str());
    if (std::rename(tmp.c_str(), path) != 0)
        return gb_error_set(err, GB_EIO, "rename %s -> %s: %s", tmp.c_str(), path,
                            std::strerror(errno));
    return 0;
}

extern "C" int gb_torch_learner_load(gb_torch_learner *l, const char *path, gb_error *err)
{
    FILE *f = std::fopen(path, "rb");
    if (!f)
        return gb_error_set(err, GB_ENOTFOUND, "checkpoint %s: %s", path, std::strerror(errno));
    std::fclose(f);
    return gb_torch_guard(err, "checkpoint load", [&] {
        torch::serialize::InputArchive ar;
        ar.load_from(path, l->device);
        torch::NoGradGuard no_grad;
        NamedTensors live = checkpoint_tensors(l);
        std::vector<torch::Tensor> read(live.size());
        for (size_t i = 0; i < live.size(); i++) {
            if (!ar.try_read(live[i].first, read[i]))
                return gb_error_set(err, GB_ECORRUPT, "checkpoint %s: no tensor %s", path,
                                    live[i].first.c_str());
            if (!read[i].sizes().equals(live[i].second.sizes()) ||
                read[i].scalar_type() != live[i].second.scalar_type())
                return gb_error_set(err, GB_ECORRUPT, "checkpoint %s: %s has another shape or "
                                    "dtype", path, live[i].first.c_str());
        }
        for (size_t i = 0; i < live.size(); i++)
            live[i].second.copy_(read[i]);
        torch::Tensor steps, version;
        ar.read("train_steps", steps);
        ar.read("version", version);
        l->train_steps = steps.item<int64_t>();
        l->model->version = (uint64_t)version.item<int64_t>();
        torch::serialize::InputArchive opt;
        ar.read("opt", opt);
        l->opt->load(opt);
        if (l->opt_q) {
            torch::serialize::InputArchive oq, oa;
            ar.read("opt_q", oq);
            ar.read("opt_alpha", oa);
            l->opt_q->load(oq);
            l->opt_alpha->load(oa);
        }
        return 0;
    });
}
