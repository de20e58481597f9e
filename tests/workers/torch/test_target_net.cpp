// tests/workers/torch/test_target_net.cpp: target networks tied to the online network's flat
// parameters (workers/torch/target_net.hpp): a Polyak update and a hard copy give the values of
// the per-tensor updates, on the flat path and on the per-tensor fallback (layouts that differ);
// and through whole learners, from their checkpoints: after one DQN (tau 0.1) or SAC (tau 0.2)
// step every target tensor is (1 - tau) x before + tau x its online tensor after, and a hard DQN
// target equals the online network after its step.
#include "workers/torch/algorithm.hpp"
#include "workers/torch/optimizer.hpp"
#include "workers/torch/target_net.hpp"
// libtorch's headers bring glog's CHECK macros: the harness's own are meant here
#undef CHECK
#undef CHECK_NEAR
#include "tests/test.h"
#include "tests/workers/torch_test_util.h"

#include <map>
#include <string>

static gbt::NamedTensors tensors(torch::nn::Module &m) { return gbt::module_tensors(m); }

static torch::nn::Sequential small_net()
{
    return torch::nn::Sequential(torch::nn::Linear(4, 8), torch::nn::Tanh(),
                                 torch::nn::Linear(8, 2));
}

static double max_diff(const gbt::NamedTensors &a, const std::vector<torch::Tensor> &b)
{
    double d = 0;
    for (size_t i = 0; i < a.size(); i++)
        d = std::max(d, (a[i].second - b[i]).abs().max().item<double>());
    return d;
}

static std::vector<torch::Tensor> snapshot(const gbt::NamedTensors &ts)
{
    std::vector<torch::Tensor> v;
    for (const auto &kv : ts)
        v.push_back(kv.second.detach().clone());
    return v;
}

static void check_link(bool flat)
{
    torch::NoGradGuard ng;
    torch::manual_seed(1);
    torch::nn::Sequential online = small_net(), target = small_net();
    gbt::FlatAdam opt(online->parameters(), 0.01);
    gbt::TargetLink link;
    // the fallback: no flat tensor to follow
    link.link(tensors(*target), tensors(*online), online->parameters().size(),
              flat ? opt.flat_params() : torch::Tensor());
    std::vector<torch::Tensor> t0 = snapshot(tensors(*target));
    opt.flat_params().add_(torch::randn_like(opt.flat_params()));
    link.polyak(0.1);
    std::vector<torch::Tensor> want;
    gbt::NamedTensors on = tensors(*online);
    for (size_t i = 0; i < t0.size(); i++)
        want.push_back(0.9 * t0[i] + 0.1 * on[i].second);
    const double off = max_diff(tensors(*target), want);
    CHECK_MSG(off <= 1e-6, "polyak (%s): %g", flat ? "flat" : "per tensor", off);
    // the target's tensors are still the module's (the module's forward sees the update)
    torch::Tensor x = torch::randn({3, 4});
    torch::nn::Sequential copy = small_net();
    gbt::copy_tensors(tensors(*copy), tensors(*target));
    CHECK((copy->forward(x) - target->forward(x)).abs().max().item<double>() == 0.0);
    link.copy();
    CHECK(max_diff(tensors(*target), snapshot(tensors(*online))) == 0.0);
}

static void test_link_flat(void) { check_link(true); }
static void test_link_per_tensor(void) { check_link(false); }

static void test_link_layout_differs(void)
{
    // the online parameters in another order than the target's: no flat path, still right
    torch::NoGradGuard ng;
    torch::nn::Sequential online = small_net(), target = small_net();
    std::vector<torch::Tensor> ps = online->parameters();
    std::vector<torch::Tensor> reversed(ps.rbegin(), ps.rend());
    gbt::FlatAdam opt(reversed, 0.01);
    gbt::TargetLink link;
    link.link(tensors(*target), tensors(*online), ps.size(), opt.flat_params());
    std::vector<torch::Tensor> t0 = snapshot(tensors(*target));
    link.polyak(0.5);
    std::vector<torch::Tensor> want;
    gbt::NamedTensors on = tensors(*online);
    for (size_t i = 0; i < t0.size(); i++)
        want.push_back(0.5 * t0[i] + 0.5 * on[i].second);
    CHECK(max_diff(tensors(*target), want) <= 1e-6);
}

// A learner's checkpoint as name -> tensor.
static std::map<std::string, torch::Tensor> read_checkpoint(const std::string &path)
{
    torch::serialize::InputArchive ar;
    ar.load_from(path);
    std::map<std::string, torch::Tensor> out;
    for (const std::string &k : ar.keys()) {
        torch::Tensor t;
        if (ar.try_read(k, t))
            out[k] = t;
    }
    return out;
}

// One training step of a learner (config text), with its checkpoints before and after; then
// every tensor named target_prefix + rest is checked against online_prefix + rest.
static void check_learner(const char *text, const gb_torch_space &sp, bool continuous,
                          const std::vector<std::pair<std::string, std::string>> &pairs, double tau)
{
    gb_config cfg;
    gb_error err = {};
    gb_config_marks *marks = nullptr;
    int rc = gb_config_load_string(&cfg, &marks, "<test>", text, strlen(text), &err);
    if (!rc)
        rc = gb_config_finish(&cfg, marks, &err);
    gb_config_marks_free(marks);
    CHECK_OK(rc);
    gb_torch_learner *l = nullptr;
    CHECK_OK(gb_torch_learner_create(&cfg, &sp, 3, &l, &err));
    if (!l)
        return;
    const int64_t B = 4, T = 6, obs_dim = sp.obs_shape[0];
    std::vector<float> obs(B * T * obs_dim), next(B * obs_dim), reward(B * T), logp(B * T, -1.0f);
    std::vector<float> cont(B * T * 2);
    std::vector<int64_t> disc(B * T);
    std::vector<uint8_t> term(B * T, 0), trunc(B * T, 0);
    fill(obs.data(), (int)obs.size(), 1);
    fill(next.data(), (int)next.size(), 2);
    fill(reward.data(), (int)reward.size(), 3);
    fill(cont.data(), (int)cont.size(), 4);
    for (int64_t i = 0; i < B * T; i++)
        disc[i] = sp.discrete ? i % sp.n_actions : 0;
    gb_torch_batch b = {};
    b.B = B;
    b.T = T;
    b.obs = obs.data();
    b.next_obs = next.data();
    b.action = continuous ? (const void *)cont.data() : (const void *)disc.data();
    b.reward = reward.data();
    b.terminated = term.data();
    b.truncated = trunc.data();
    b.logp = logp.data();
    const std::string before = "target_net_before.ckpt", after = "target_net_after.ckpt";
    CHECK_OK(gb_torch_learner_save(l, before.c_str(), &err));
    gb_torch_stats st;
    CHECK_OK(gb_torch_learner_train(l, &b, &st, nullptr, &err));
    CHECK_OK(gb_torch_learner_save(l, after.c_str(), &err));
    gb_torch_learner_destroy(l);
    std::map<std::string, torch::Tensor> t0 = read_checkpoint(before), t1 = read_checkpoint(after);
    int compared = 0;
    for (const auto &pr : pairs)
        for (const auto &kv : t1) {
            if (kv.first.rfind(pr.first, 0) != 0)
                continue;
            std::string rest = kv.first.substr(pr.first.size());
            auto on = t1.find(pr.second + rest);
            CHECK_MSG(on != t1.end(), "no online tensor for %s", kv.first.c_str());
            if (on == t1.end())
                continue;
            torch::Tensor want = (1.0 - tau) * t0[kv.first] + tau * on->second;
            double d = (kv.second - want).abs().max().item<double>();
            CHECK_MSG(d <= 1e-6, "%s: off by %g", kv.first.c_str(), d);
            // and the step moved the online network, so the check means something
            CHECK(!on->second.equal(t0[pr.second + rest]));
            compared++;
        }
    CHECK_MSG(compared >= 4, "only %d target tensors compared", compared);
    remove(before.c_str());
    remove(after.c_str());
}

static void test_dqn_polyak(void)
{
    check_learner("experiment: {name: t, seed: 3}\nenv: {name: CartPole-v1}\n"
                  "policy: {model: {type: mlp, hidden: [16, 16], activation: relu}}\n"
                  "trainer:\n  algorithm: {name: dqn, lr: 0.01, gamma: 0.9,\n"
                  "    dqn: {n_step: 2, target_update: polyak, tau: 0.1}}\n",
                  discrete_space(), false, {{"target__", "model__"}}, 0.1);
}

static void test_dqn_hard(void)
{
    // a hard update every step: the target is the online network after the step (tau 1)
    check_learner("experiment: {name: t, seed: 3}\nenv: {name: CartPole-v1}\n"
                  "policy: {model: {type: mlp, hidden: [16, 16]}}\n"
                  "trainer:\n  algorithm: {name: dqn, lr: 0.01, gamma: 0.9,\n"
                  "    dqn: {target_update: hard, target_update_every: 1}}\n",
                  discrete_space(), false, {{"target__", "model__"}}, 1.0);
}

static void test_sac_polyak(void)
{
    check_learner("experiment: {name: t, seed: 3}\nenv: {name: Pendulum-v1}\n"
                  "policy: {model: {type: mlp, hidden: [16, 16], activation: relu}}\n"
                  "trainer:\n  algorithm: {name: sac, lr: 0.01, gamma: 0.9, sac: {tau: 0.2}}\n",
                  box_space(), true, {{"q1t__", "q1__"}, {"q2t__", "q2__"}}, 0.2);
}

int main(void)
{
    TEST_RUN(test_link_flat);
    TEST_RUN(test_link_per_tensor);
    TEST_RUN(test_link_layout_differs);
    TEST_RUN(test_dqn_polyak);
    TEST_RUN(test_dqn_hard);
    TEST_RUN(test_sac_polyak);
    return test_main_result();
}
