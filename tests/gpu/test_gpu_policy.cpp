// tests/gpu/test_gpu_policy.cpp: a policy worker's model on CUDA (policy.device cuda: pinned
// staging in, the heads packed and copied back once, the cpu's sampling) against the same model
// on the cpu. For PPO (discrete and continuous), SAC, DQN and a PPO CNN over uint8 frames: the
// cpu model's parameters exported and imported into the cuda model (whose export must then give
// the same bytes), then act on the same rows, deterministic and sampled (caller noise, and the
// models' generators, seeded alike): equal discrete actions, continuous actions, log-
// probabilities, values and Q-values within 1e-4; several batch sizes (the buffers grow, then
// are reused). TF32 is off for the comparison (cuDNN's convolutions default to it). Exits 77
// without a CUDA device.
#include <ATen/Context.h>
// libtorch's headers bring glog's CHECK macros: the harness's own are meant here
#undef CHECK
#undef CHECK_NEAR
#include "tests/test.h"
#include "tests/workers/torch_test_util.h"
#include "workers/torch/bridge.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

const double TOL = 1e-4;

// One act's outputs, sized for n rows.
struct Acted {
    std::vector<int64_t> a;
    std::vector<float> x, logp, value, q;
};

struct Case {
    const char *name;
    gb_config cfg;
    gb_torch_space sp;
};

int64_t obs_bytes(const gb_torch_space &sp)
{
    int64_t b = sp.obs_dtype == GB_DTYPE_UINT8 ? 1 : 4;
    for (int i = 0; i < sp.obs_ndim; i++)
        b *= sp.obs_shape[i];
    return b;
}

// Observation rows: floats in [-1, 1), or uint8 frames of a fixed pattern per seed.
std::vector<unsigned char> make_obs(const gb_torch_space &sp, int64_t n, unsigned seed)
{
    std::vector<unsigned char> buf((size_t)(n * obs_bytes(sp)));
    if (sp.obs_dtype == GB_DTYPE_UINT8) {
        for (size_t i = 0; i < buf.size(); i++)
            buf[i] = (unsigned char)(((unsigned)i * 2654435761u + seed) >> 13);
    } else {
        fill((float *)buf.data(), (int)(buf.size() / 4), seed);
    }
    return buf;
}

int act(gb_torch_model *m, const gb_torch_space &sp, const void *obs, int64_t n, int det,
        double eps, const float *noise, Acted *r, gb_error *err)
{
    r->a.assign((size_t)n, -1);
    r->x.assign((size_t)(n * (sp.discrete ? 1 : sp.action_dim)), NAN);
    r->logp.assign((size_t)n, NAN);
    r->value.assign((size_t)n, NAN);
    r->q.assign((size_t)(n * (sp.discrete ? sp.n_actions : 1)), NAN);
    gb_torch_act_out out = {sp.discrete ? (void *)r->a.data() : (void *)r->x.data(),
                            r->logp.data(), r->value.data(), sp.discrete ? r->q.data() : NULL};
    return gb_torch_model_act_noise(m, obs, n, det, eps, noise, &out, err);
}

double max_diff(const std::vector<float> &a, const std::vector<float> &b)
{
    double d = 0;
    for (size_t i = 0; i < a.size(); i++) {
        if (std::isnan(a[i]) && std::isnan(b[i]))
            continue;
        d = std::max(d, std::fabs((double)a[i] - (double)b[i]));
        if (std::isnan(a[i]) || std::isnan(b[i]))
            d = INFINITY;
    }
    return d;
}

// cpu vs cuda on one batch: prints the largest differences and checks them.
void compare(const Case &c, const char *what, int64_t n, const Acted &cpu, const Acted &gpu)
{
    int64_t differ = 0;
    if (c.sp.discrete)
        for (int64_t i = 0; i < n; i++)
            differ += cpu.a[(size_t)i] != gpu.a[(size_t)i];
    double dx = max_diff(cpu.x, gpu.x), dl = max_diff(cpu.logp, gpu.logp);
    double dv = max_diff(cpu.value, gpu.value), dq = max_diff(cpu.q, gpu.q);
    printf("%-16s %-22s n %4lld: actions differ %lld, max |diff| action %.3g logp %.3g value "
           "%.3g q %.3g\n", c.name, what, (long long)n, (long long)differ, dx, dl, dv, dq);
    CHECK_MSG(differ == 0, "%s %s: %lld actions differ", c.name, what, (long long)differ);
    CHECK_MSG(dx <= TOL, "%s %s: action diff %g", c.name, what, dx);
    CHECK_MSG(dl <= TOL, "%s %s: logp diff %g", c.name, what, dl);
    CHECK_MSG(dv <= TOL, "%s %s: value diff %g", c.name, what, dv);
    CHECK_MSG(dq <= TOL, "%s %s: q diff %g", c.name, what, dq);
}

void run_case(Case &c)
{
    gb_error err;
    memset(&err, 0, sizeof err);
    gb_config gcfg = c.cfg;
    c.cfg.policy.device = GB_DEVICE_CPU;
    gcfg.policy.device = GB_DEVICE_CUDA;
    gb_torch_model *cpu = NULL, *gpu = NULL;
    CHECK_OK(gb_torch_model_create(&c.cfg, &c.sp, 11, &cpu, &err));
    CHECK_OK(gb_torch_model_create(&gcfg, &c.sp, 11, &gpu, &err));
    if (!cpu || !gpu) {
        gb_torch_model_destroy(cpu);
        gb_torch_model_destroy(gpu);
        return;
    }
    const gb_param_entry *table;
    int count;
    uint64_t total;
    gb_torch_model_layout(cpu, &table, &count, &total);
    std::vector<unsigned char> blob(total), back(total, 0xAB);
    CHECK_OK(gb_torch_model_export(cpu, blob.data(), total, NULL, &err));
    CHECK_OK(gb_torch_model_import(gpu, blob.data(), total, table, count, 7, &err));
    CHECK_EQ_INT(gb_torch_model_version(gpu), 7);
    CHECK_OK(gb_torch_model_export(gpu, back.data(), total, NULL, &err));
    CHECK_MSG(memcmp(blob.data(), back.data(), total) == 0, "%s: the cuda model's export differs "
              "from the blob it imported", c.name);

    int64_t ad = c.sp.discrete ? 1 : c.sp.action_dim;
    const int64_t sizes[] = {256, 17, 300, 256};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int64_t n = sizes[s];
        std::vector<unsigned char> obs = make_obs(c.sp, n, 5 + (unsigned)s);
        std::vector<float> noise((size_t)(n * ad));
        fill(noise.data(), (int)noise.size(), 9 + (unsigned)s);
        Acted a, b;
        // deterministic
        CHECK_OK(act(cpu, c.sp, obs.data(), n, 1, 0.0, NULL, &a, &err));
        CHECK_OK(act(gpu, c.sp, obs.data(), n, 1, 0.0, NULL, &b, &err));
        compare(c, "deterministic", n, a, b);
        // sampled: the caller's noise (continuous), epsilon 0 (dqn)
        CHECK_OK(act(cpu, c.sp, obs.data(), n, 0, 0.0, noise.data(), &a, &err));
        CHECK_OK(act(gpu, c.sp, obs.data(), n, 0, 0.0, noise.data(), &b, &err));
        compare(c, "caller noise / eps 0", n, a, b);
        // sampled from the models' generators: seeded alike, drawn in the same order
        CHECK_OK(act(cpu, c.sp, obs.data(), n, 0, 0.25, NULL, &a, &err));
        CHECK_OK(act(gpu, c.sp, obs.data(), n, 0, 0.25, NULL, &b, &err));
        compare(c, "generator draws", n, a, b);
    }
    gb_torch_model_destroy(cpu);
    gb_torch_model_destroy(gpu);
}

int make_case(Case *c, const char *name, const char *algo, gb_torch_space sp)
{
    c->name = name;
    c->sp = sp;
    return make_cfg(&c->cfg, algo, "");
}

void test_ppo_discrete()
{
    Case c;
    gb_torch_space sp = discrete_space();
    sp.n_actions = 2;
    CHECK(make_case(&c, "ppo discrete", "ppo", sp) == 0);
    run_case(c);
}

void test_ppo_box()
{
    Case c;
    CHECK(make_case(&c, "ppo continuous", "ppo", box_space()) == 0);
    run_case(c);
}

void test_sac()
{
    Case c;
    CHECK(make_case(&c, "sac", "sac", box_space()) == 0);
    run_case(c);
}

void test_dqn()
{
    Case c;
    gb_torch_space sp = discrete_space();
    sp.n_actions = 2;
    CHECK(make_case(&c, "dqn", "dqn", sp) == 0);
    run_case(c);
}

// Breakout-like: 4 uint8 frames of 84 x 84, 4 actions, the Nature torso then Linear(32).
void test_ppo_cnn_frames()
{
    Case c;
    gb_torch_space sp;
    memset(&sp, 0, sizeof sp);
    sp.obs_dtype = GB_DTYPE_UINT8;
    sp.obs_ndim = 3;
    sp.obs_shape[0] = 4;
    sp.obs_shape[1] = 84;
    sp.obs_shape[2] = 84;
    sp.discrete = 1;
    sp.n_actions = 4;
    CHECK(make_case(&c, "ppo cnn uint8", "ppo", sp) == 0);
    c.cfg.policy.model.type = GB_MODEL_CNN;
    c.cfg.policy.model.hidden.n = 1;
    c.cfg.policy.model.hidden.v[0] = 32;
    run_case(c);
}

} // namespace

int main()
{
    if (!gb_torch_cuda_available()) {
        fprintf(stderr, "skipped: no CUDA device\n");
        return 77;
    }
    setvbuf(stdout, NULL, _IOLBF, 0); // the differences between the harness's lines (stderr)
    at::globalContext().setAllowTF32CuDNN(false);
    at::globalContext().setAllowTF32CuBLAS(false);
    TEST_RUN(test_ppo_discrete);
    TEST_RUN(test_ppo_box);
    TEST_RUN(test_sac);
    TEST_RUN(test_dqn);
    TEST_RUN(test_ppo_cnn_frames);
    return test_main_result();
}
