/* tests/envs/test_memory_envs.c: the built-in tasks that need memory.
 * CartPoleNoVel-v1: same spec as CartPole-v1 but float32[2]; under the same seed and actions its
 * observations are CartPole-v1's positions (x, theta) bit for bit and its rewards, terminations
 * and frames are CartPole-v1's (with either reward scheme).
 * Recall-v0: the observation layout (cue one-hot at the first observation only, the answer flag
 * at step N only, noise in [-1, 1)), episodes of N + 1 steps, reward +1 only for the cue's action
 * at the answer step and -1 for any other answer, 0 elsewhere, for several N and K; a policy
 * without memory gets 2/K - 1 on average; bad arguments are refused with a message. */
#include "envs/builtin.h"
#include "envs/host.h"
#include "runtime/base/rng.h"
#include "test.h"

#include <string.h>

typedef struct copy {
    const gb_env_interface *iface;
    void *env;
    gb_env_spec spec;
    float obs[64];
    int32_t action;
    float reward;
    uint8_t terminated, truncated, acting;
    gb_env_buffers b;
} copy;

/* Creates name with args (NULL or "key=value" strings, up to 4) and seed; 0 or -1. */
static int copy_open(copy *c, const char *name, const char *const *kv, int n, uint64_t seed)
{
    char keys[4][32], values[4][32];
    const char *kp[4], *vp[4];
    for (int i = 0; i < n; i++) {
        const char *eq = strchr(kv[i], '=');
        snprintf(keys[i], sizeof keys[i], "%.*s", (int)(eq - kv[i]), kv[i]);
        snprintf(values[i], sizeof values[i], "%s", eq + 1);
        kp[i] = keys[i];
        vp[i] = values[i];
    }
    gb_env_args args = {n, kp, vp};
    gb_error err = {0};
    memset(c, 0, sizeof *c);
    c->iface = gb_env_builtin_find(name);
    CHECK_MSG(c->iface != NULL, "%s is not a built-in", name);
    if (!c->iface)
        return -1;
    CHECK_OK(gb_env_create(c->iface, &args, seed, &c->env, &c->spec, &err));
    c->b = (gb_env_buffers){&c->action, c->obs, &c->reward, &c->terminated, &c->truncated,
                            &c->acting};
    return c->env ? 0 : -1;
}

static void copy_close(copy *c)
{
    if (c->iface && c->env)
        c->iface->destroy(c->env);
    c->env = NULL;
}

/* NoVel against CartPole-v1: same seed, same random actions, resets at termination. */
static void novel_against_cartpole(const char *const *kv, int n)
{
    copy full, novel;
    if (copy_open(&full, "CartPole-v1", kv, n, 42) || copy_open(&novel, "CartPoleNoVel-v1", kv,
                                                                 n, 42))
        goto out;
    CHECK_EQ_INT(novel.spec.obs.shape[0], 2);
    CHECK_EQ_INT(novel.spec.obs.ndim, 1);
    CHECK_EQ_INT(novel.spec.action.n, full.spec.action.n);
    CHECK_EQ_INT(novel.spec.max_episode_steps, full.spec.max_episode_steps);
    CHECK_EQ_INT(novel.spec.render_width, full.spec.render_width);
    CHECK_EQ_INT(novel.spec.render_height, full.spec.render_height);
    CHECK(novel.spec.obs.high[0] == full.spec.obs.high[0]);
    CHECK(novel.spec.obs.high[1] == full.spec.obs.high[2]);
    gb_rng rng;
    gb_rng_seed(&rng, 3);
    int bad = 0, episodes = 0, steps = 0;
    CHECK_EQ_INT(full.iface->reset(full.env, &full.b), 0);
    CHECK_EQ_INT(novel.iface->reset(novel.env, &novel.b), 0);
    for (; steps < 20000 && !bad; steps++) {
        bad |= memcmp(&novel.obs[0], &full.obs[0], 4) != 0 ||
               memcmp(&novel.obs[1], &full.obs[2], 4) != 0;
        full.action = novel.action = (int32_t)gb_rng_below(&rng, 2);
        CHECK_EQ_INT(full.iface->step(full.env, &full.b), 0);
        CHECK_EQ_INT(novel.iface->step(novel.env, &novel.b), 0);
        bad |= novel.reward != full.reward || novel.terminated != full.terminated ||
               novel.truncated != full.truncated;
        if (full.terminated) {
            episodes++;
            full.iface->reset(full.env, &full.b);
            novel.iface->reset(novel.env, &novel.b);
        }
    }
    CHECK_MSG(!bad, "NoVel departs from CartPole-v1 at step %d (episode %d)", steps, episodes);
    CHECK(episodes > 100);
    /* the same frame, and the same state hook */
    static uint8_t f1[300 * 400 * 3], f2[300 * 400 * 3];
    double s[4] = {0.5, -0.3, 0.1, 0.2};
    float o4[4], o2[2];
    CHECK_EQ_INT(gb_env_builtin_set_state(full.iface, full.env, s, 4, o4), 0);
    CHECK_EQ_INT(gb_env_builtin_set_state(novel.iface, novel.env, s, 4, o2), 0);
    CHECK(o2[0] == o4[0] && o2[1] == o4[2]);
    CHECK_EQ_INT(full.iface->render(full.env, f1), 0);
    CHECK_EQ_INT(novel.iface->render(novel.env, f2), 0);
    CHECK(memcmp(f1, f2, sizeof f1) == 0);
out:
    copy_close(&full);
    copy_close(&novel);
}

static void test_novel_is_cartpole_positions(void)
{
    novel_against_cartpole(NULL, 0);
    const char *sb[] = {"sutton_barto_reward=1"};
    novel_against_cartpole(sb, 1);
}

/* The cue shown by a first observation (its one-hot index), or -1 when it is not one-hot. */
static int cue_of(const float *obs, int k)
{
    int cue = -1, ones = 0;
    for (int i = 0; i < k; i++) {
        if (obs[i] == 1.0f) {
            cue = i;
            ones++;
        } else if (obs[i] != 0.0f) {
            return -1;
        }
    }
    return ones == 1 ? cue : -1;
}

/* One episode of Recall: acts randomly before the answer step, answers `answer` (or the cue
 * when answer < 0); checks the layout and the rewards; returns the episode's return. */
static float recall_episode(copy *c, int delay, int k, gb_rng *rng, int answer)
{
    CHECK_EQ_INT(c->iface->reset(c->env, &c->b), 0);
    int cue = cue_of(c->obs, k);
    CHECK_MSG(cue >= 0, "first observation shows no cue");
    float ret = 0;
    for (int t = 0; t <= delay; t++) {
        CHECK_MSG(c->obs[k] == (t == delay ? 1.0f : 0.0f), "answer flag %g at step %d",
                  (double)c->obs[k], t);
        CHECK(c->obs[k + 1] >= -1.0f && c->obs[k + 1] < 1.0f);
        if (t > 0)
            CHECK_MSG(cue_of(c->obs, k) < 0 && c->obs[cue] == 0.0f, "cue shown at step %d", t);
        c->action = t < delay ? (int32_t)gb_rng_below(rng, (uint64_t)k)
                              : (answer < 0 ? cue : answer);
        CHECK_EQ_INT(c->iface->step(c->env, &c->b), 0);
        float want = t < delay ? 0.0f : (c->action == cue ? 1.0f : -1.0f);
        CHECK_MSG(c->reward == want, "N %d K %d step %d: reward %g, expected %g", delay, k, t,
                  (double)c->reward, (double)want);
        CHECK_EQ_INT(c->terminated, t == delay);
        CHECK_EQ_INT(c->truncated, 0);
        ret += c->reward;
    }
    return ret;
}

static void test_recall_rewards(void)
{
    static const int delays[] = {1, 2, 5, 20, 100};
    static const int symbols[] = {2, 4, 7};
    gb_rng rng;
    gb_rng_seed(&rng, 9);
    for (size_t d = 0; d < sizeof delays / sizeof *delays; d++)
        for (size_t s = 0; s < sizeof symbols / sizeof *symbols; s++) {
            char a1[32], a2[32];
            snprintf(a1, sizeof a1, "delay=%d", delays[d]);
            snprintf(a2, sizeof a2, "symbols=%d", symbols[s]);
            const char *kv[] = {a1, a2};
            copy c;
            if (copy_open(&c, "Recall-v0", kv, 2, 100 + d * 10 + s) == 0) {
                CHECK_EQ_INT(c.spec.obs.shape[0], symbols[s] + 2);
                CHECK_EQ_INT(c.spec.action.n, symbols[s]);
                for (int e = 0; e < 20; e++)
                    CHECK(recall_episode(&c, delays[d], symbols[s], &rng, -1) == 1.0f);
                /* every fixed answer: +1 exactly when it is the cue (checked per episode) */
                for (int e = 0; e < 20; e++)
                    recall_episode(&c, delays[d], symbols[s], &rng, e % symbols[s]);
            }
            copy_close(&c);
        }
}

/* A policy without memory: its answer cannot depend on the cue; mean return 2/K - 1. */
static void test_recall_chance(void)
{
    const char *kv[] = {"delay=3"};
    copy c;
    gb_rng rng;
    gb_rng_seed(&rng, 11);
    if (copy_open(&c, "Recall-v0", kv, 1, 5) == 0) {
        CHECK_EQ_INT(c.spec.action.n, 4); /* the default K */
        double sum = 0;
        const int n = 8000;
        for (int e = 0; e < n; e++)
            sum += recall_episode(&c, 3, 4, &rng, 2);
        CHECK_NEAR(sum / n, -0.5, 0.05);
    }
    copy_close(&c);
    const char *none[] = {"symbols=4"};
    if (copy_open(&c, "Recall-v0", none, 1, 5) == 0)
        for (int e = 0; e < 3; e++) /* the default N */
            recall_episode(&c, 20, 4, &rng, -1);
    copy_close(&c);
}

static void test_recall_bad_args(void)
{
    static const struct {
        const char *kv, *message;
    } bad[] = {
        {"delay=0", "Recall-v0: delay must be an integer in [1, 100000]"},
        {"delay=100001", "Recall-v0: delay must be an integer in [1, 100000]"},
        {"delay=ten", "Recall-v0: delay must be an integer in [1, 100000]"},
        {"symbols=1", "Recall-v0: symbols must be an integer in [2, 64]"},
        {"symbols=65", "Recall-v0: symbols must be an integer in [2, 64]"},
        {"cue=3", "Recall-v0: unknown argument 'cue' (accepted: delay, symbols)"},
    };
    const gb_env_interface *iface = gb_env_builtin_find("Recall-v0");
    CHECK(iface != NULL);
    for (size_t i = 0; iface && i < sizeof bad / sizeof *bad; i++) {
        char key[16], value[16];
        const char *eq = strchr(bad[i].kv, '=');
        snprintf(key, sizeof key, "%.*s", (int)(eq - bad[i].kv), bad[i].kv);
        snprintf(value, sizeof value, "%s", eq + 1);
        const char *kp[] = {key}, *vp[] = {value};
        gb_env_args args = {1, kp, vp};
        gb_error err = {0};
        void *env = NULL;
        gb_env_spec spec;
        int rc = gb_env_create(iface, &args, 1, &env, &spec, &err);
        CHECK_MSG(rc != 0 && env == NULL, "%s accepted", bad[i].kv);
        CHECK_MSG(strstr(err.msg, bad[i].message) != NULL, "%s: '%s'", bad[i].kv, err.msg);
        if (env)
            iface->destroy(env);
    }
    gb_env_spec spec;
    const gb_env_interface *nv = gb_env_builtin_find("CartPoleNoVel-v1");
    const char *kp[] = {"sutton_barto_reward"}, *vp[] = {"2"};
    gb_env_args args = {1, kp, vp};
    gb_error err = {0};
    void *env = NULL;
    CHECK(nv && gb_env_create(nv, &args, 1, &env, &spec, &err) != 0 && env == NULL);
    CHECK_MSG(strstr(err.msg, "CartPoleNoVel-v1: sutton_barto_reward must be 0 or 1"), "%s",
              err.msg);
}

int main(void)
{
    TEST_RUN(test_novel_is_cartpole_positions);
    TEST_RUN(test_recall_rewards);
    TEST_RUN(test_recall_chance);
    TEST_RUN(test_recall_bad_args);
    return test_main_result();
}
