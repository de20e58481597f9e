// workers/torch/learner.cpp: the learners' C API: creation (the acting model, then the
// algorithm's own networks and optimisers through its ops table), training steps, checkpoints,
// and data-parallel training's start (rank 0's state to every rank) and checksum.
#include "workers/torch/algorithm.hpp"

#include "workers/torch/mlp_program.hpp"
#include "workers/torch/module.h"

#include "runtime/base/file.h"

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
    if (l->return_stats.defined()) // trainer.algorithm.reward_scale
        v.emplace_back("return_stats", l->return_stats);
    if (l->q1) {
        add("q1", module_tensors(*l->q1));
        add("q2", module_tensors(*l->q2));
        add("q1t", module_tensors(*l->q1t));
        add("q2t", module_tensors(*l->q2t));
        v.emplace_back("log_alpha", l->log_alpha);
    }
    return v;
}

// Everything a checkpoint (and data-parallel training's start) carries: the tensors, the
// counters and the optimiser states.
static void write_state(gb_torch_learner *l, torch::serialize::OutputArchive &ar)
{
    torch::NoGradGuard no_grad;
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
}

// Reads what write_state wrote (source names it in messages). Checks every tensor's presence,
// shape and dtype before changing anything: GB_ECORRUPT when one differs.
static int read_state(gb_torch_learner *l, torch::serialize::InputArchive &ar, const char *source,
                      gb_error *err)
{
    torch::NoGradGuard no_grad;
    NamedTensors live = checkpoint_tensors(l);
    std::vector<torch::Tensor> read(live.size());
    for (size_t i = 0; i < live.size(); i++) {
        if (!ar.try_read(live[i].first, read[i]))
            return gb_error_set(err, GB_ECORRUPT, "%s: no tensor %s", source,
                                live[i].first.c_str());
        if (!read[i].sizes().equals(live[i].second.sizes()) ||
            read[i].scalar_type() != live[i].second.scalar_type())
            return gb_error_set(err, GB_ECORRUPT, "%s: %s has another shape or dtype", source,
                                live[i].first.c_str());
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
}

// 64-bit hash of n bytes, continuing from h: 8-byte words through a multiply-xorshift mix (not
// cryptographic: it tells replicas apart).
static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    auto mix = [&](uint64_t w) {
        h ^= w * 0xbf58476d1ce4e5b9ULL;
        h = (h << 27 | h >> 37) * 0x94d049bb133111ebULL;
    };
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        std::memcpy(&w, b + i, 8);
        mix(w);
    }
    uint64_t tail = 0;
    if (n > i)
        std::memcpy(&tail, b + i, n - i);
    mix(tail ^ ((uint64_t)n << 56)); // the length too: zeros of different lengths differ
    return h;
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

extern "C" int gbt_learner_create(const gb_config *cfg, const gb_torch_space *space,
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
        use_blas_for_large_products();
        l->model = new gb_torch_model();
        int r = model_init(l->model, cfg, space, seed, device_for(cfg->trainer.device), err);
        if (r)
            return r;
        learner_init(l, cfg, space, seed);
        reset_obs_pending(l);
        return 0;
    });
    if (rc) {
        gbt_learner_destroy(l);
        return rc;
    }
    *out = l;
    return 0;
}

extern "C" void gbt_learner_destroy(gb_torch_learner *l)
{
    if (!l)
        return;
    delete l->model;
    delete l;
}

extern "C" gb_torch_model *gbt_learner_model(gb_torch_learner *l) { return l->model; }

extern "C" void gbt_learner_set_progress(gb_torch_learner *l, double progress)
{
    l->progress = progress < 0 ? 0 : progress > 1 ? 1 : progress;
}

extern "C" int64_t gbt_learner_train_steps(const gb_torch_learner *l)
{
    return l->train_steps;
}

extern "C" const char *gbt_learner_kernels(const gb_torch_learner *l)
{
    return l->dqn_kernels || l->ppo_kernels || l->sac_kernels ? "gearbox C"
                                                                : "libtorch autograd";
}

extern "C" int gbt_learner_train(gb_torch_learner *l, const gb_torch_batch *b,
                                 gb_torch_stats *stats, float *priorities, gb_error *err)
{
    if (b->B < 1 || b->T < 1)
        return gb_error_set(err, GB_EINVAL, "train: batch of %lld x %lld steps", (long long)b->B,
                            (long long)b->T);
    if (!b->obs || !b->next_obs || !b->action || !b->reward || !b->terminated || !b->truncated)
        return gb_error_set(err, GB_EINVAL, "train: obs, next_obs, action, reward, terminated "
                            "and truncated are required");
    int algo = l->cfg.trainer.algorithm.name;
    if (b->obs_on_device && !l->device.is_cuda())
        return gb_error_set(err, GB_EINVAL, "train: the batch's observations are in device "
                            "memory, the learner is on %s", l->device.str().c_str());
    if (algo == GB_ALGO_PPO && !b->logp)
        return gb_error_set(err, GB_EINVAL, "train: ppo needs the behaviour logp column");
    gb_torch_stats local;
    gb_torch_stats *st = stats ? stats : &local;
    std::memset(st, 0, sizeof *st);
    return gb_torch_guard(err, "train", [&] {
        merge_obs_stats(l); // the statistics first: the step trains on what the actors will see
        gb_torch_batch scaled_batch = *b;
        scale_rewards(l, &scaled_batch, l->scaled_rewards);
        l->model->net->set_training(true);
        algorithm_for(algo).train(l, &scaled_batch, st, priorities);
        l->model->net->set_training(false);
        l->train_steps++;
        l->model->version++;
        return 0;
    });
}

// Writes bytes to path whole or not at all (runtime/base/file.h): a failure (ENOSPC, EIO) leaves
// what was at path untouched. Returns 0 or GB_EIO naming the file and the system's reason.
static int write_file_atomic(const char *path, const std::string &bytes, gb_error *err)
{
    gb_file_part part = {bytes.data(), bytes.size()};
    int e = gb_file_write_atomic(path, &part, 1);
    if (e)
        return gb_error_set(err, GB_EIO, "checkpoint: write %s (%zu bytes): %s", path,
                            bytes.size(), std::strerror(e));
    return 0;
}

extern "C" int gbt_learner_save(const gb_torch_learner *cl, const char *path, gb_error *err)
{
    gb_torch_learner *l = const_cast<gb_torch_learner *>(cl);
    // Serialised in memory, then written by write_file_atomic: libtorch's file writer throws
    // on a failed write (ENOSPC) and throws again from its destructor while that exception
    // unwinds, which aborts the process; and it reports no errno.
    std::string bytes;
    int rc = gb_torch_guard(err, "checkpoint save", [&] {
        torch::serialize::OutputArchive ar;
        write_state(l, ar);
        {
            // the learner's random stream (minibatch order, SAC's noise) goes into checkpoints
            // only (each rank of a group keeps its own): a restored learner draws on where it
            // stopped instead of repeating the start of the run
            std::lock_guard<std::mutex> lock(l->gen.mutex());
            ar.write("rng", l->gen.get_state());
        }
        ar.save_to([&](const void *p, size_t n) {
            bytes.append(static_cast<const char *>(p), n);
            return n;
        });
        return 0;
    });
    if (rc)
        return gb_error_prefix(err, "%s", path);
    return write_file_atomic(path, bytes, err);
}

extern "C" int gbt_learner_load(gb_torch_learner *l, const char *path, gb_error *err)
{
    FILE *f = std::fopen(path, "rb");
    if (!f)
        return gb_error_set(err, GB_ENOTFOUND, "checkpoint %s: %s", path, std::strerror(errno));
    std::fclose(f);
    return gb_torch_guard(err, "checkpoint load", [&] {
        torch::serialize::InputArchive ar;
        ar.load_from(path, l->device);
        int rc = read_state(l, ar, (std::string("checkpoint ") + path).c_str(), err);
        reset_obs_pending(l);
        torch::Tensor rng;
        if (rc == 0 && ar.try_read("rng", rng)) {
            // the archive put every tensor on the learner's device; the generator is the cpu's
            // and takes its state only as a cpu ByteTensor (a cuda learner's resume failed here)
            std::lock_guard<std::mutex> lock(l->gen.mutex());
            l->gen.set_state(rng.cpu());
        }
        return rc;
    });
}

extern "C" int gbt_learner_set_group(gb_torch_learner *l, gb_group *g, size_t bucket_bytes,
                                     gb_error *err)
{
    l->group = nullptr;
    l->bucket_bytes = bucket_bytes;
    if (!g)
        return 0;
    int rc = gb_torch_guard(err, "set_group", [&] {
        // The root: the rank that trained furthest, the lowest such (rank 0 at a start, where
        // every rank has trained as far; after a re-formed group, a survivor rather than a
        // restarted trainer's older checkpoint). Its state, serialised as a checkpoint is, to
        // every rank: its size, then its bytes.
        const int64_t span = 4096; // > any group size (trainer.count <= 1024)
        int64_t key = l->train_steps * span + (span - 1 - gbt_group_rank(g));
        int r = gbt_group_allreduce(g, GB_DTYPE_INT64, &key, 1, GB_GROUP_MAX, err);
        if (r)
            return r;
        const int root = (int)(span - 1 - key % span);
        std::string blob;
        if (gbt_group_rank(g) == root) {
            torch::serialize::OutputArchive ar;
            write_state(l, ar);
            ar.save_to([&](const void *p, size_t n) {
                blob.append((const char *)p, n);
                return n;
            });
        }
        int64_t n = (int64_t)blob.size();
        if ((r = gbt_group_broadcast(g, &n, sizeof n, root, err)))
            return r;
        blob.resize((size_t)n);
        if ((r = gbt_group_broadcast(g, &blob[0], blob.size(), root, err)))
            return r;
        int64_t bad = 0;
        if (gbt_group_rank(g) != root) {
            torch::serialize::InputArchive ar;
            ar.load_from(blob.data(), blob.size(), l->device);
            bad = read_state(l, ar, "the root rank's state", err) != 0;
        }
        // every rank succeeds, or every rank fails
        gb_error gerr = {};
        int64_t any_bad = bad;
        if ((r = gbt_group_allreduce(g, GB_DTYPE_INT64, &any_bad, 1, GB_GROUP_MAX, &gerr)))
            return bad ? err->code : gb_error_set(err, gerr.code, "%s", gerr.msg);
        if (bad)
            return err->code;
        if (any_bad)
            return gb_error_set(err, GB_ECORRUPT, "another rank could not take the root rank's "
                                "state (another configuration?)");
        // the same (no) gradients everywhere, so that the first step's all-reduce agrees
        for (auto *opt : {l->opt.get(), l->opt_q.get(), l->opt_alpha.get()})
            if (opt)
                drop_grads(opt->params());
        reset_obs_pending(l); // every rank's sums relative to rank 0's mean
        return 0;
    });
    if (rc == 0)
        l->group = g;
    return rc;
}

extern "C" uint64_t gbt_learner_checksum(const gb_torch_learner *cl)
{
    gb_torch_learner *l = const_cast<gb_torch_learner *>(cl);
    uint64_t h = 0x9e3779b97f4a7c15ULL;
    try {
        torch::NoGradGuard no_grad;
        for (const auto &kv : checkpoint_tensors(l)) {
            torch::Tensor t = kv.second.detach().to(torch::kCPU).contiguous();
            h = hash_bytes(h, t.data_ptr(), t.nbytes());
        }
    } catch (const std::exception &) {
        return 0; // a copy to the CPU failed: no checksum
    }
    return h;
}

// The optimisers a flat state concatenates, in its order: the network's (PPO's, DQN's; SAC's
// actor), then SAC's critics' (q1's parameters, then q2's) and its temperature's.
static std::vector<FlatAdam *> flat_opts(const gb_torch_learner *l)
{
    std::vector<FlatAdam *> v{l->opt.get()};
    if (l->opt_q) // (with opt_alpha: sac_init)
        v.insert(v.end(), {l->opt_q.get(), l->opt_alpha.get()});
    return v;
}

// set_flat's and get_flat's refusals (bridge.h), naming call: GB_EINVAL, or 0 with the target
// networks' parameters (DQN's, in the online network's order; SAC's two target critics, laid
// out as opt_q; none: empty) in *tp.
static int flat_checked(const gb_torch_learner *l, const void *target, int64_t n,
                        const char *call, std::vector<torch::Tensor> *tp, gb_error *err)
{
    const bool has_target = l->target || l->q1t;
    if (has_target != !!target)
        return gb_error_set(err, GB_EINVAL, "learner: %s %s a target network's parameters, "
                            "this learner has %s", call, target ? "with" : "without",
                            l->target ? "one" : l->q1t ? "two (sac's target critics)" : "none");
    if (l->target)
        *tp = l->target->parameters();
    if (l->q1t) { // as opt_q: q1's, then q2's
        *tp = l->q1t->parameters();
        for (auto &p : l->q2t->parameters())
            tp->push_back(p);
    }
    int64_t count = 0;
    for (auto &p : *tp)
        count += p.numel();
    if (l->target && count != n)
        return gb_error_set(err, GB_EINVAL, "learner: %s of %lld parameters, the target "
                            "network has %lld", call, (long long)n, (long long)count);
    int64_t total = 0;
    for (const FlatAdam *o : flat_opts(l))
        total += o->flat_params().numel();
    if (n != total)
        return gb_error_set(err, GB_EINVAL, "learner: %s of %lld parameters, the learner has "
                            "%lld", call, (long long)n, (long long)total);
    return 0;
}

extern "C" int gbt_learner_get_flat(const gb_torch_learner *cl, float *params, float *exp_avg,
                                    float *exp_avg_sq, float *target, int64_t n,
                                    int64_t *adam_steps, int64_t *train_steps, gb_error *err)
{
    gb_torch_learner *l = const_cast<gb_torch_learner *>(cl);
    return gb_torch_guard(err, "learner_get_flat", [&] {
        torch::NoGradGuard no_grad;
        std::vector<torch::Tensor> tp;
        if (int rc = flat_checked(l, target, n, "get_flat", &tp, err))
            return rc;
        int64_t at = 0, steps;
        for (const FlatAdam *o : flat_opts(l)) { // each count checked above
            const int64_t k = o->flat_params().numel();
            (void)o->get_state(params + at, exp_avg + at, exp_avg_sq + at, k, &steps);
            if (o == l->opt.get())
                *adam_steps = steps;
            at += k;
        }
        at = 0;
        for (auto &p : tp) {
            torch::from_blob(target + at, p.sizes(), torch::kFloat32).copy_(p);
            at += p.numel();
        }
        *train_steps = l->train_steps;
        return 0;
    });
}

extern "C" int gbt_learner_set_flat(gb_torch_learner *l, const float *params,
                                    const float *exp_avg, const float *exp_avg_sq,
                                    const float *target, int64_t n, int64_t adam_steps,
                                    int64_t train_steps, gb_error *err)
{
    return gb_torch_guard(err, "learner_set_flat", [&] {
        torch::NoGradGuard no_grad; // (log_alpha too: a leaf without history)
        std::vector<torch::Tensor> tp;
        if (int rc = flat_checked(l, target, n, "set_flat", &tp, err))
            return rc;
        int64_t at = 0;
        for (FlatAdam *o : flat_opts(l)) { // each count checked above
            const int64_t k = o->flat_params().numel();
            // SAC's temperature's optimiser steps only when it learns (sac_train)
            const bool idle = o == l->opt_alpha.get() && !l->cfg.trainer.algorithm.sac.learn_alpha;
            (void)o->set_state(params + at, exp_avg + at, exp_avg_sq + at, k,
                               idle ? 0 : adam_steps);
            at += k;
        }
        at = 0;
        for (auto &p : tp) {
            p.copy_(torch::from_blob(const_cast<float *>(target) + at, p.sizes(),
                                     torch::kFloat32));
            at += p.numel();
        }
        l->train_steps = train_steps;
        return 0;
    });
}
