/* tests/envs/gymnasium/test_gymnasium.c: the gymnasium plugin (envs/gymnasium) found by name,
 * stepped through the environment ABI and compared with Gymnasium stepped directly in Python
 * (reference.py, same seed and actions: observations, rewards and flags must be equal, bit for
 * bit); kwargs conversion; spaces (float64 cast to float32, continuous actions); the time limit
 * applied once, by the host; copies stepped from two threads at once; the errors for a
 * missing or unknown id, an unsupported space and a bad kwarg; render (render_mode rgb_array);
 * finding shipped plugins by name.
 * argv[1]: the Python with gymnasium (GEARBOX_PYTHON); argv[2]: this folder (reference.py and
 * the gb_test_gym_envs module). Exits 77 (skip) when that Python lacks gymnasium. */
#include "envs/host.h"
#include "envs/ring.h"
#include "test.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *python, *here;
static gb_env_source src;

/* Makes one copy of `id` with extra args (key, value pairs, NULL-terminated). */
static void *make(const char *id, uint64_t seed, gb_env_spec *spec, gb_error *err,
                  const char *const *extra)
{
    gb_env_args_store st;
    gb_env_args_from_config(&st, NULL);
    gb_env_args_add(&st, "id", id, err);
    for (int i = 0; extra && extra[i]; i += 2)
        gb_env_args_add(&st, extra[i], extra[i + 1], err);
    void *env = NULL;
    return gb_env_create(src.iface, &st.args, seed, &env, spec, err) == 0 ? env : NULL;
}

/* Replays reference.py's record of `id` (seed, steps, kwargs as KEY=VALUE literals) through a
 * plugin copy made with args; returns the number of steps compared. */
static int replay(const char *id, uint64_t seed, int steps, const char *py_kwargs,
                  const char *const *args)
{
    gb_error err = {0};
    gb_env_spec spec;
    void *env = make(id, seed, &spec, &err, args);
    CHECK_MSG(env != NULL, "%s", err.msg);
    if (!env)
        return 0;
    CHECK_EQ_INT(spec.obs.dtype, GB_ENV_FLOAT32);
    size_t numel = gb_env_obs_numel(&spec);
    float obs[64] = {0}, rew = 0;
    int32_t action = 0;
    uint8_t term = 0, trunc = 0, acting = 1;
    gb_env_buffers b = {&action, obs, &rew, &term, &trunc, &acting};
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s/reference.py %s %llu %d %s", python, here, id,
             (unsigned long long)seed, steps, py_kwargs);
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    char line[4096];
    int compared = 0, mismatches = 0;
    while (p && fgets(line, sizeof line, p)) {
        char *s = line, *end;
        const char *want_obs;
        if (strncmp(s, "reset", 5) == 0) {
            CHECK(src.iface->reset(env, &b) == 0);
            want_obs = s + 5;
        } else {
            action = (int32_t)strtol(s + 4, &end, 10);
            double r = strtod(end, &end);
            long te = strtol(end, &end, 10), tr = strtol(end, &end, 10);
            CHECK(src.iface->step(env, &b) == 0);
            if ((float)r != rew || te != term || tr != trunc)
                mismatches++;
            want_obs = end;
            compared++;
        }
        for (size_t i = 0; i < numel; i++) {
            float want = (float)strtod(want_obs, &end);
            want_obs = end;
            if (want != obs[i] && mismatches++ < 5)
                fprintf(stderr, "  %s step %d obs[%zu]: %.9g, Gymnasium %.9g\n", id, compared,
                        i, (double)obs[i], (double)want);
        }
    }
    CHECK(p && pclose(p) == 0);
    CHECK_EQ_INT(mismatches, 0);
    src.iface->destroy(env);
    return compared;
}

static void test_matches_python(void)
{
    gb_error err = {0};
    gb_env_spec spec;
    void *env = make("CartPole-v1", 7, &spec, &err, NULL);
    CHECK_MSG(env != NULL, "%s", err.msg);
    if (!env)
        return;
    CHECK_EQ_INT(spec.agents, 1);
    CHECK_EQ_INT(spec.obs.ndim, 1);
    CHECK_EQ_INT(spec.obs.shape[0], 4);
    CHECK_EQ_INT(spec.action.kind, GB_ENV_SPACE_DISCRETE);
    CHECK_EQ_INT(spec.action.n, 2);
    CHECK_EQ_INT(spec.max_episode_steps, 500); /* the registered limit, for the host to apply */
    CHECK(spec.obs.low && spec.obs.low[0] == -4.8f);
    src.iface->destroy(env);
    int n = replay("CartPole-v1", 7, 300, "", NULL);
    CHECK_EQ_INT(n, 300);
    /* A kwarg through env.args: "true" becomes True (rewards then 0 until termination). */
    static const char *const sb[] = {"sutton_barto_reward", "true", NULL};
    n = replay("CartPole-v1", 11, 200, "sutton_barto_reward=True", sb);
    CHECK_EQ_INT(n, 200);
    n = replay("Acrobot-v1", 3, 100, "", NULL);
    CHECK_EQ_INT(n, 100);
}

/* Float64 observations cast to float32, a float kwarg, a continuous action, and the time limit:
 * the registration's (7) by default, env.args.max_episode_steps, or the ring's override (10:
 * longer than 7, so Gymnasium's own TimeLimit must be off). */
static int64_t episode_length(const char *limit_arg, int64_t ring_limit)
{
    gb_error err = {0};
    gb_env_args_store st;
    gb_env_args_from_config(&st, NULL);
    gb_env_args_add(&st, "id", "gb_test_gym_envs:GbFloat64Count-v0", &err);
    gb_env_args_add(&st, "length", "100", &err);
    gb_env_args_add(&st, "scale", "0.5", &err);
    if (limit_arg)
        gb_env_args_add(&st, "max_episode_steps", limit_arg, &err);
    gb_env_ring *ring = NULL;
    gb_env_ring_buffers buf;
    CHECK_OK(gb_env_ring_create(src.iface, &st.args, 5, 2, 2, ring_limit, &ring, &err));
    if (!ring)
        return -1;
    const gb_env_spec *spec = gb_env_ring_spec(ring);
    CHECK_EQ_INT(spec->obs.dtype, GB_ENV_FLOAT32);
    CHECK_EQ_INT(spec->obs.ndim, 2);
    CHECK_EQ_INT(spec->action.kind, GB_ENV_SPACE_BOX);
    CHECK_EQ_INT(spec->action.n, 2);
    CHECK(spec->action.low[0] == -2.0f && spec->action.high[1] == 2.0f);
    CHECK_OK(gb_env_ring_buffers_alloc(ring, &buf, &err));
    CHECK_OK(gb_env_ring_attach(ring, &buf, &err));
    CHECK_OK(gb_env_ring_reset(ring, &err));
    float *act = buf.actions, *obs = buf.obs;
    for (int t = 1; t <= 3; t++) {
        for (int i = 0; i < 4; i++)
            act[i] = 0.25f * (float)(t + i);
        CHECK_OK(gb_env_ring_step(ring, 0, &err));
        CHECK_OK(gb_env_ring_step(ring, 1, &err));
        for (int c = 0; c < 2; c++) {
            CHECK(obs[c * 4 + 0] == 0.5f * (float)t);
            CHECK(obs[c * 4 + 1] == 0.25f);
            CHECK(obs[c * 4 + 2] == act[c * 2] && obs[c * 4 + 3] == act[c * 2 + 1]);
            CHECK(buf.rewards[c] == (float)t);
        }
    }
    for (int t = 3; t < 30; t++)
        for (int g = 0; g < 2; g++)
            CHECK_OK(gb_env_ring_step(ring, g, &err));
    const gb_env_copy_stats *stats = gb_env_ring_stats(ring);
    int64_t len = stats[0].last_length;
    CHECK_EQ_INT(stats[1].last_length, len);
    CHECK(stats[0].episodes >= 2);
    gb_env_ring_destroy(ring);
    gb_env_ring_buffers_free(&buf);
    return len;
}

static void test_spaces_and_time_limit(void)
{
    CHECK_EQ_INT(episode_length(NULL, 0), 7);
    CHECK_EQ_INT(episode_length("4", 0), 4);
    CHECK_EQ_INT(episode_length(NULL, 10), 10);
}

/* Two copies stepped at the same time from two threads give what they give one at a time. */
typedef struct walk {
    void *env;
    double sum;
    int episodes;
} walk;

static void *walk_run(void *arg)
{
    walk *w = arg;
    float obs[4];
    float rew;
    int32_t action = 0;
    uint8_t term = 0, trunc = 0, acting = 1;
    gb_env_buffers b = {&action, obs, &rew, &term, &trunc, &acting};
    uint32_t state = 99;
    if (src.iface->reset(w->env, &b))
        return NULL;
    for (int t = 0; t < 3000; t++) {
        state = state * 1664525u + 1013904223u;
        action = (int32_t)(state >> 31);
        if (src.iface->step(w->env, &b))
            return NULL;
        for (int i = 0; i < 4; i++)
            w->sum += obs[i];
        if (term || trunc) {
            w->episodes++;
            if (src.iface->reset(w->env, &b))
                return NULL;
        }
    }
    return w;
}

static void test_threads(void)
{
    gb_error err = {0};
    gb_env_spec spec;
    walk seq[2] = {{0}}, par[2] = {{0}};
    for (int i = 0; i < 2; i++) {
        seq[i].env = make("CartPole-v1", 100 + (uint64_t)i, &spec, &err, NULL);
        par[i].env = make("CartPole-v1", 100 + (uint64_t)i, &spec, &err, NULL);
        CHECK_MSG(seq[i].env && par[i].env, "%s", err.msg);
        if (!seq[i].env || !par[i].env)
            return;
        CHECK(walk_run(&seq[i]) == &seq[i]);
    }
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&th[i], NULL, walk_run, &par[i]) == 0);
    for (int i = 0; i < 2; i++) {
        void *r = NULL;
        pthread_join(th[i], &r);
        CHECK(r == &par[i]);
        CHECK(seq[i].episodes > 50);
        CHECK_EQ_INT(par[i].episodes, seq[i].episodes);
        CHECK(par[i].sum == seq[i].sum);
        src.iface->destroy(seq[i].env);
        src.iface->destroy(par[i].env);
    }
    CHECK(seq[0].sum != seq[1].sum); /* different seeds, different episodes */
}

static void expect_error(const char *id, const char *const *extra, const char *n1,
                         const char *n2)
{
    gb_error err = {0};
    gb_env_spec spec;
    void *env = make(id, 1, &spec, &err, extra);
    CHECK_MSG(env == NULL, "%s was accepted", id ? id : "(no id)");
    CHECK_MSG(strstr(err.msg, n1) && strstr(err.msg, n2), "message '%s' lacks '%s' or '%s'",
              err.msg, n1, n2);
    fprintf(stderr, "  %s\n", err.msg);
    if (env)
        src.iface->destroy(env);
}

static void test_errors(void)
{
    expect_error("", NULL, "env.args.id is required", "CartPole-v1");
    expect_error("NoSuchEnv-v0", NULL, "NoSuchEnv", "NameNotFound");
    expect_error("gb_no_such_module:X-v0", NULL, "ModuleNotFoundError", "gb_no_such_module");
    expect_error("gb_test_gym_envs:GbDictObs-v0", NULL, "GbDictObs-v0",
                 "observation space Dict(");
    expect_error("gb_test_gym_envs:GbDictObs-v0", NULL, "(Dict) is not supported",
                 "gearbox takes Box and Discrete");
    expect_error("gb_test_gym_envs:GbTupleAction-v0", NULL, "GbTupleAction-v0",
                 "action space Tuple(");
    static const char *const bad_kwarg[] = {"no_such_kwarg", "3", NULL};
    expect_error("CartPole-v1", bad_kwarg, "TypeError", "no_such_kwarg");
    static const char *const bad_limit[] = {"max_episode_steps", "-2", NULL};
    expect_error("CartPole-v1", bad_limit, "max_episode_steps", "-2");
}

/* Shipped plugins are found by name: in gearbox's folder, then in $GEARBOX_ENV_PLUGIN_PATH
 * (searched first); names that are not plain words are never looked up. */
static void test_shipped_lookup(void)
{
    char path[1024], dir[] = "/tmp/gb_test_gym_XXXXXX", link[1200];
    CHECK_EQ_INT(gb_env_shipped_find("gymnasium", path, sizeof path), 0);
    CHECK(strstr(path, "/gearbox_env_gymnasium.so") != NULL);
    CHECK_EQ_INT(gb_env_shipped_find("../gymnasium", path, sizeof path), GB_ENOTFOUND);
    CHECK_EQ_INT(gb_env_shipped_find("gb_no_such_env", path, sizeof path), GB_ENOTFOUND);
    CHECK(mkdtemp(dir) != NULL);
    snprintf(link, sizeof link, "%s/gearbox_env_gbtestalias.so", dir);
    CHECK(symlink(src.path, link) == 0);
    setenv("GEARBOX_ENV_PLUGIN_PATH", "/nonexistent:", 1);
    CHECK_EQ_INT(gb_env_shipped_find("gbtestalias", path, sizeof path), GB_ENOTFOUND);
    char list[1200];
    snprintf(list, sizeof list, "/nonexistent:%s", dir);
    setenv("GEARBOX_ENV_PLUGIN_PATH", list, 1);
    CHECK_EQ_INT(gb_env_shipped_find("gbtestalias", path, sizeof path), 0);
    CHECK(strcmp(path, link) == 0);
    gb_env_source other;
    gb_error err = {0};
    CHECK_OK(gb_env_source_open(&other, "gbtestalias", NULL, &err));
    CHECK(other.iface && strcmp(other.iface->name, "gymnasium") == 0);
    gb_env_source_close(&other);
    unsetenv("GEARBOX_ENV_PLUGIN_PATH");
    unlink(link);
    rmdir(dir);
    CHECK(gb_env_source_open(&other, "gb_no_such_env", NULL, &err) == GB_ENOTFOUND);
    CHECK_MSG(strstr(err.msg, "shipped plugins such as gymnasium"), "%s", err.msg);
}

/* Render: a copy made with render_mode rgb_array declares Gymnasium's frame size and draws
 * (CartPole: a white 600 x 400 frame with the black cart), and its first reset gives the
 * observation a copy without render_mode gives (the size is measured at create with a seeded
 * reset); a copy made without it declares 0 x 0 and refuses to draw. */
static void test_render(void)
{
    gb_error err = {0};
    gb_env_spec plain_spec, spec;
    static const char *const rgb[] = {"render_mode", "rgb_array", NULL};
    void *plain = make("CartPole-v1", 5, &plain_spec, &err, NULL);
    void *env = make("CartPole-v1", 5, &spec, &err, rgb);
    CHECK_MSG(plain && env, "%s", err.msg);
    if (!plain || !env)
        goto done;
    CHECK(src.iface->render != NULL);
    CHECK_EQ_INT(plain_spec.render_height, 0);
    CHECK_EQ_INT(plain_spec.render_width, 0);
    CHECK_EQ_INT(spec.render_height, 400);
    CHECK_EQ_INT(spec.render_width, 600);
    float obs[4], plain_obs[4], rew;
    int32_t action = 1;
    uint8_t term, trunc, acting;
    gb_env_buffers b = {&action, obs, &rew, &term, &trunc, &acting};
    gb_env_buffers pb = {&action, plain_obs, &rew, &term, &trunc, &acting};
    CHECK_EQ_INT(src.iface->reset(env, &b), 0);
    CHECK_EQ_INT(src.iface->reset(plain, &pb), 0);
    CHECK(memcmp(obs, plain_obs, sizeof obs) == 0);
    CHECK_EQ_INT(src.iface->step(env, &b), 0);
    size_t n = (size_t)spec.render_height * (size_t)spec.render_width * 3;
    uint8_t *frame = malloc(n);
    CHECK(frame != NULL);
    if (frame) {
        CHECK_EQ_INT(src.iface->render(env, frame), 0);
        size_t white = 0, black = 0;
        for (size_t i = 0; i < n; i += 3) {
            white += frame[i] == 255 && frame[i + 1] == 255 && frame[i + 2] == 255;
            black += frame[i] == 0 && frame[i + 1] == 0 && frame[i + 2] == 0;
        }
        CHECK_MSG(white > n / 3 / 2 && black > 500, "%zu white, %zu black pixels", white, black);
        CHECK(src.iface->render(plain, frame) != 0); /* no render_mode: no frames */
        free(frame);
    }
done:
    src.iface->destroy(plain);
    src.iface->destroy(env);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s PYTHON TEST_DIR\n", argv[0]);
        return 2;
    }
    python = argv[1];
    here = argv[2];
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s -c 'import gymnasium' 2>/dev/null", python);
    if (system(cmd) != 0) {
        fprintf(stderr, "skip: %s has no gymnasium (bash launch/install-deps.sh)\n", python);
        return 77;
    }
    /* The plugin's interpreter: the same Python; our test environments on its path. */
    setenv("GEARBOX_GYMNASIUM_PYTHON", python, 1);
    setenv("PYTHONPATH", here, 1);
    gb_error err = {0};
    CHECK_OK(gb_env_source_open(&src, "gymnasium", NULL, &err));
    if (!src.iface)
        return test_main_result();
    CHECK(strstr(src.path, "gearbox_env_gymnasium.so") != NULL);
    CHECK(strcmp(src.iface->name, "gymnasium") == 0);
    TEST_RUN(test_matches_python);
    TEST_RUN(test_spaces_and_time_limit);
    TEST_RUN(test_threads);
    TEST_RUN(test_errors);
    TEST_RUN(test_render);
    TEST_RUN(test_shipped_lookup);
    gb_env_source_close(&src);
    return test_main_result();
}
