// workers/torch/learner.cpp: the learners' C API: creation (the acting model, then the
// algorithm's own networks and optimisers through its ops table), training steps, checkpoints.
#include "workers/torch/algorithm.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

namespace gbt {

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
    l->cfg = *cfg;
    l->device = device_for(cfg->trainer.device);
    l->gen = at::detail::createCPUGenerator(seed ^ 0x9e3779b97f4a7c15ULL);
    algorithm_for(cfg->trainer.algorithm.name).init(l, sp, seed);
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
        algorithm_for(algo).train(l, b, st, priorities);
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
