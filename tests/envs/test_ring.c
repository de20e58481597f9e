/* tests/envs/test_ring.c: the environment ring: slices and groups, auto-reset with the final
 * observation kept, the time limit (truncated, bootstrapping), statistics, determinism by seed
 * (a ring copy reproduces a stand-alone copy with the derived seed), multi-agent and turn-based
 * stepping, image observations, and argument errors. */
#include "envs/builtin.h"
#include "envs/host.h"
#include "envs/ring.h"
#include "runtime/config/config.h"
#include "runtime/base/rng.h"
#include "test.h"

#include <math.h>
#include <string.h>

typedef struct fixture {
    gb_env_ring *ring;
    gb_env_ring_buffers b;
    const gb_env_spec *spec;
} fixture;

static int open_ring(fixture *f, const char *name, const gb_env_args *args, uint64_t seed, int k,
                     int s, int64_t limit)
{
    gb_error err = {0};
    memset(f, 0, sizeof *f);
    CHECK_OK(gb_env_ring_create(gb_env_builtin_find(name), args, seed, k, s, limit, &f->ring,
                                &err));
    if (!f->ring)
        return -1;
    f->spec = gb_env_ring_spec(f->ring);
    CHECK_OK(gb_env_ring_buffers_alloc(f->ring, &f->b, &err));
    CHECK_OK(gb_env_ring_attach(f->ring, &f->b, &err));
    CHECK_OK(gb_env_ring_reset(f->ring, &err));
    return 0;
}

static void close_ring(fixture *f)
{
    gb_env_ring_buffers_free(&f->b);
    gb_env_ring_destroy(f->ring);
}

/* The seed copy i of a ring seeded with `seed` gets (documented in ring.h as derived). */
static uint64_t copy_seed(uint64_t seed, int i)
{
    gb_rng r;
    gb_rng_seed_for(&r, seed, "env", (uint64_t)i);
    return gb_rng_next(&r);
}

static void test_autoreset_keeps_final_obs(void)
{
    fixture f;
    if (open_ring(&f, "CartPole-v1", NULL, 21, 8, 2, 0))
        return;
    gb_error err = {0};
    int32_t *act = f.b.actions;
    float *obs = f.b.obs, *fin = f.b.final_obs;
    int64_t lengths[8] = {0}, ended = 0;
    for (int t = 0; t < 200; t++) {
        for (int g = 0; g < 2; g++) {
            for (int i = 0; i < 8; i++)
                act[i] = 1; /* always push right: terminates within ~10-60 steps */
            float before[16];
            int other = 1 - g;
            memcpy(before, obs + other * 16, sizeof before);
            CHECK_OK(gb_env_ring_step(f.ring, g, &err));
            CHECK(memcmp(before, obs + other * 16, sizeof before) == 0); /* other group intact */
            for (int i = g * 4; i < g * 4 + 4; i++) {
                lengths[i]++;
                CHECK_EQ_INT(f.b.truncated[i], 0);
                if (!f.b.terminated[i])
                    continue;
                ended++;
                const float *o = fin + 4 * i;
                CHECK_MSG(fabsf(o[0]) > 2.4f || fabsf(o[2]) > (float)(12 * 2 * M_PI / 360),
                          "final obs of copy %d is not terminal: x %g theta %g", i, o[0], o[2]);
                for (int k = 0; k < 4; k++) /* the new episode's first observation */
                    CHECK(fabsf(obs[4 * i + k]) <= 0.05f);
                const gb_env_copy_stats *s = &gb_env_ring_stats(f.ring)[i];
                CHECK_EQ_INT(s->last_length, lengths[i]);
                CHECK_NEAR(s->last_return, (double)lengths[i], 1e-9);
                CHECK_EQ_INT(s->episode_length, 0);
                lengths[i] = 0;
            }
        }
    }
    CHECK(ended > 8 * 3);
    int64_t count, len_sum;
    double ret_sum;
    gb_env_ring_take_episodes(f.ring, &count, &ret_sum, &len_sum);
    CHECK_EQ_INT(count, ended);
    CHECK_NEAR(ret_sum, (double)len_sum, 1e-6);
    gb_env_ring_take_episodes(f.ring, &count, &ret_sum, &len_sum);
    CHECK_EQ_INT(count, 0);
    close_ring(&f);
}

/* A ring copy behaves exactly like a stand-alone copy with its derived seed: every step's
 * observation and reward, the truncation at the limit, the final observation, and the next
 * episode's start (the copy's RNG stream continues). */
static void test_time_limit_and_determinism(void)
{
    fixture f;
    const int K = 4, limit = 10;
    if (open_ring(&f, "Pendulum-v1", NULL, 99, K, 1, limit))
        return;
    CHECK_EQ_INT(gb_env_ring_time_limit(f.ring), limit);
    const gb_env_interface *iface = gb_env_builtin_find("Pendulum-v1");
    gb_error err = {0};
    void *solo[4];
    gb_env_spec spec;
    float sobs[4][3], srew[4];
    uint8_t sterm[4], strunc[4], sact[4];
    float saction[4];
    gb_env_buffers sb[4];
    for (int i = 0; i < K; i++) {
        CHECK_OK(gb_env_create(iface, NULL, copy_seed(99, i), &solo[i], &spec, &err));
        sb[i] = (gb_env_buffers){&saction[i], sobs[i], &srew[i], &sterm[i], &strunc[i], &sact[i]};
        iface->reset(solo[i], &sb[i]);
        CHECK(memcmp(sobs[i], (float *)f.b.obs + 3 * i, sizeof sobs[i]) == 0);
    }
    float *act = f.b.actions;
    for (int t = 1; t <= 35; t++) {
        for (int i = 0; i < K; i++)
            act[i] = saction[i] = (float)sin(0.7 * t + i) * 2.5f;
        CHECK_OK(gb_env_ring_step(f.ring, 0, &err));
        for (int i = 0; i < K; i++) {
            iface->step(solo[i], &sb[i]);
            int at_limit = t % limit == 0;
            CHECK_EQ_INT(f.b.truncated[i], at_limit);
            CHECK_EQ_INT(f.b.terminated[i], 0);
            CHECK(f.b.rewards[i] == srew[i]);
            if (at_limit) {
                CHECK(memcmp((float *)f.b.final_obs + 3 * i, sobs[i], sizeof sobs[i]) == 0);
                iface->reset(solo[i], &sb[i]);
            }
            CHECK(memcmp((float *)f.b.obs + 3 * i, sobs[i], sizeof sobs[i]) == 0);
        }
    }
    for (int i = 0; i < K; i++) {
        CHECK_EQ_INT(gb_env_ring_stats(f.ring)[i].episodes, 3);
        CHECK_EQ_INT(gb_env_ring_stats(f.ring)[i].episode_length, 5);
        iface->destroy(solo[i]);
    }
    close_ring(&f);

    /* same seed, same trajectory; another seed, another */
    fixture a, b, c;
    open_ring(&a, "Acrobot-v1", NULL, 7, 16, 4, 0);
    open_ring(&b, "Acrobot-v1", NULL, 7, 16, 4, 0);
    open_ring(&c, "Acrobot-v1", NULL, 8, 16, 4, 0);
    int same = 1, differ = 0;
    for (int t = 0; t < 300; t++)
        for (int g = 0; g < 4; g++) {
            for (int i = 0; i < 16; i++)
                ((int32_t *)a.b.actions)[i] = ((int32_t *)b.b.actions)[i] =
                    ((int32_t *)c.b.actions)[i] = (t * 7 + i) % 3;
            gb_env_ring_step(a.ring, g, &err);
            gb_env_ring_step(b.ring, g, &err);
            gb_env_ring_step(c.ring, g, &err);
            same &= memcmp(a.b.obs, b.b.obs, 16 * 6 * sizeof(float)) == 0;
            differ |= memcmp(a.b.obs, c.b.obs, 16 * 6 * sizeof(float)) != 0;
        }
    CHECK(same);
    CHECK(differ);
    close_ring(&a);
    close_ring(&b);
    close_ring(&c);
}

static void test_multi_agent(void)
{
    fixture f;
    const char *keys[] = {"agents", "turn_based"}, *values[] = {"4", "1"};
    gb_env_args args = {2, keys, values};
    if (open_ring(&f, "Spread-v0", &args, 3, 6, 3, 0))
        return;
    gb_error err = {0};
    CHECK_EQ_INT(f.spec->agents, 4);
    CHECK(f.spec->flags & GB_ENV_TURN_BASED);
    CHECK_EQ_INT(f.spec->obs.shape[0], 18);
    for (int t = 0; t < 60; t++) {
        for (int g = 0; g < 3; g++) {
            int first, count;
            gb_env_ring_group(f.ring, g, &first, &count);
            CHECK_EQ_INT(count, 2);
            for (int i = first; i < first + count; i++) {
                int acting = 0, who = -1;
                for (int a = 0; a < 4; a++) {
                    acting += f.b.acting[i * 4 + a];
                    if (f.b.acting[i * 4 + a])
                        who = a;
                    ((int32_t *)f.b.actions)[i * 4 + a] = 2;
                }
                CHECK_EQ_INT(acting, 1);
                CHECK_EQ_INT(who, t % 25 % 4); /* turns restart with each episode */
            }
            CHECK_OK(gb_env_ring_step(f.ring, g, &err));
            for (int i = first; i < first + count; i++)
                for (int a = 1; a < 4; a++) /* a shared reward */
                    CHECK(f.b.rewards[i * 4 + a] == f.b.rewards[i * 4]);
        }
    }
    const gb_env_copy_stats *s = gb_env_ring_stats(f.ring);
    for (int i = 0; i < 6; i++) {
        CHECK_EQ_INT(s[i].episodes, 2);
        CHECK_EQ_INT(s[i].last_length, 25);
        CHECK(s[i].last_return < 0);
    }
    close_ring(&f);
}

/* Two agents whose episodes end at different steps (agent 0 after 3, agent 1 after 5). */
typedef struct staggered {
    int t;
} staggered;

static void *stag_create(const gb_env_args *args, uint64_t seed, gb_env_spec *spec, char *err,
                         size_t err_len)
{
    *spec = (gb_env_spec){.agents = 2,
                          .obs = {.dtype = GB_ENV_FLOAT32, .ndim = 1, .shape = {1}},
                          .action = {.kind = GB_ENV_SPACE_DISCRETE, .n = 2}};
    return calloc(1, sizeof(staggered));
}

static int stag_reset(void *env, const gb_env_buffers *b)
{
    ((staggered *)env)->t = 0;
    ((float *)b->obs)[0] = ((float *)b->obs)[1] = 0;
    return 0;
}

static int stag_step(void *env, const gb_env_buffers *b)
{
    int t = ++((staggered *)env)->t;
    for (int a = 0; a < 2; a++) {
        int end = a == 0 ? 3 : 5;
        ((float *)b->obs)[a] = (float)t;
        b->rewards[a] = t <= end ? 1.0f : 0.0f; /* an agent that is done gets 0 */
        b->terminated[a] = t >= end;
        b->truncated[a] = 0;
    }
    return 0;
}

static const gb_env_interface staggered_iface = {
    GB_ENV_ABI_VERSION, sizeof(gb_env_interface), "Staggered-v0", "test", stag_create,
    stag_reset, stag_step, free, NULL};

static void test_agents_finishing_apart(void)
{
    gb_error err = {0};
    gb_env_ring *r = NULL;
    CHECK_OK(gb_env_ring_create(&staggered_iface, NULL, 1, 2, 1, 0, &r, &err));
    if (!r)
        return;
    gb_env_ring_buffers b;
    CHECK_OK(gb_env_ring_buffers_alloc(r, &b, &err));
    CHECK_OK(gb_env_ring_attach(r, &b, &err));
    CHECK_OK(gb_env_ring_reset(r, &err));
    for (int t = 1; t <= 5; t++) {
        CHECK_OK(gb_env_ring_step(r, 0, &err));
        CHECK_EQ_INT(b.acting[0], t < 3 || t == 5); /* waits from step 3; all act after reset */
        CHECK_EQ_INT(b.acting[1], 1);
        CHECK_EQ_INT(gb_env_ring_stats(r)[0].episodes, t == 5);
    }
    CHECK_EQ_INT(gb_env_ring_stats(r)[0].last_length, 5);
    CHECK_NEAR(gb_env_ring_stats(r)[0].last_return, (3 + 5) / 2.0, 1e-9); /* mean over agents */
    CHECK(((float *)b.final_obs)[1] == 5.0f && ((float *)b.obs)[1] == 0.0f);
    gb_env_ring_buffers_free(&b);
    gb_env_ring_destroy(r);
}

static void test_image_env(void)
{
    fixture f;
    if (open_ring(&f, "Breakout84-v0", NULL, 5, 4, 2, 0))
        return;
    gb_error err = {0};
    CHECK_EQ_INT(gb_env_obs_bytes(f.spec), 84 * 84);
    CHECK_EQ_INT(f.spec->obs.dtype, GB_ENV_UINT8);
    uint8_t *frames = f.b.obs;
    int paddle = 0;
    for (int x = 0; x < 84; x++)
        paddle += frames[78 * 84 + x] == 143;
    CHECK_EQ_INT(paddle, 12); /* the paddle is drawn in copy 0's first frame */
    int64_t rewards = 0, episodes = 0;
    for (int t = 0; t < 3000; t++)
        for (int g = 0; g < 2; g++) {
            for (int i = 0; i < 4; i++)
                ((int32_t *)f.b.actions)[i] = (t / 8 + i) % 3;
            CHECK_OK(gb_env_ring_step(f.ring, g, &err));
            for (int i = 2 * g; i < 2 * g + 2; i++) {
                rewards += f.b.rewards[i] > 0;
                episodes += f.b.terminated[i];
            }
        }
    CHECK(rewards > 0);
    CHECK(episodes > 0);
    uint8_t rgb[84 * 84 * 3];
    const gb_env_interface *iface = gb_env_builtin_find("Breakout84-v0");
    CHECK_EQ_INT(iface->render(gb_env_ring_copy(f.ring, 0), rgb), 0);
    close_ring(&f);
}

static void test_errors(void)
{
    gb_error err = {0};
    gb_env_ring *r = NULL;
    const gb_env_interface *cp = gb_env_builtin_find("CartPole-v1");
    CHECK_EQ_INT(gb_env_ring_create(cp, NULL, 1, 10, 3, 0, &r, &err), GB_EINVAL);
    CHECK(strstr(err.msg, "groups must divide") != NULL);
    CHECK_EQ_INT(gb_env_ring_create(cp, NULL, 1, 0, 1, 0, &r, &err), GB_EINVAL);
    const char *k[] = {"bogus"}, *v[] = {"1"};
    gb_env_args bad = {1, k, v};
    CHECK_EQ_INT(gb_env_ring_create(cp, &bad, 1, 2, 1, 0, &r, &err), GB_EINVAL);
    CHECK(strstr(err.msg, "unknown argument 'bogus'") != NULL);
    CHECK_OK(gb_env_ring_create(cp, NULL, 1, 4, 2, 0, &r, &err));
    CHECK_EQ_INT(gb_env_ring_step(r, 0, &err), GB_EINVAL); /* not attached */
    gb_env_ring_buffers b;
    CHECK_OK(gb_env_ring_buffers_alloc(r, &b, &err));
    CHECK_OK(gb_env_ring_attach(r, &b, &err));
    CHECK_OK(gb_env_ring_reset(r, &err));
    CHECK_EQ_INT(gb_env_ring_step(r, 2, &err), GB_EINVAL);
    gb_env_ring_buffers nofinal = b;
    nofinal.final_obs = NULL; /* optional */
    CHECK_OK(gb_env_ring_attach(r, &nofinal, &err));
    for (int t = 0; t < 100; t++)
        CHECK_OK(gb_env_ring_step(r, t % 2, &err));
    ((int32_t *)b.actions)[0] = 2; /* outside Discrete(2): the step fails, named */
    CHECK_EQ_INT(gb_env_ring_step(r, 0, &err), GB_EINVAL);
    CHECK(strstr(err.msg, "CartPole-v1: copy 0: step failed") != NULL);
    nofinal.acting = NULL;
    CHECK_EQ_INT(gb_env_ring_attach(r, &nofinal, &err), GB_EINVAL);
    gb_env_ring_buffers_free(&b);
    gb_env_ring_destroy(r);
}

static void test_from_config(void)
{
    gb_config_env cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.name, sizeof cfg.name, "CartPole-v1");
    cfg.max_episode_steps = 7;
    cfg.args.n = 1;
    snprintf(cfg.args.kv[0].key, sizeof cfg.args.kv[0].key, "sutton_barto_reward");
    snprintf(cfg.args.kv[0].value, sizeof cfg.args.kv[0].value, "1");
    gb_env_source src;
    gb_env_ring *ring = NULL;
    gb_error err = {0};
    CHECK_OK(gb_env_ring_from_config(&cfg, 1, 4, 2, &src, &ring, &err));
    if (!ring)
        return;
    CHECK_EQ_INT(gb_env_ring_time_limit(ring), 7);
    gb_env_ring_buffers b;
    CHECK_OK(gb_env_ring_buffers_alloc(ring, &b, &err));
    CHECK_OK(gb_env_ring_attach(ring, &b, &err));
    CHECK_OK(gb_env_ring_reset(ring, &err));
    CHECK_OK(gb_env_ring_step(ring, 0, &err));
    CHECK(b.rewards[0] == 0.0f); /* Sutton and Barto's reward: 0 per surviving step */
    gb_env_ring_buffers_free(&b);
    gb_env_ring_destroy(ring);
    gb_env_source_close(&src);
    snprintf(cfg.name, sizeof cfg.name, "plugin");
    snprintf(cfg.plugin, sizeof cfg.plugin, "/nonexistent/plugin.so");
    CHECK_EQ_INT(gb_env_ring_from_config(&cfg, 1, 4, 2, &src, &ring, &err), GB_ENOTFOUND);
    CHECK(ring == NULL);
}

int main(void)
{
    TEST_RUN(test_from_config);
    TEST_RUN(test_autoreset_keeps_final_obs);
    TEST_RUN(test_time_limit_and_determinism);
    TEST_RUN(test_multi_agent);
    TEST_RUN(test_agents_finishing_apart);
    TEST_RUN(test_image_env);
    TEST_RUN(test_errors);
    return test_main_result();
}
