/* tests/runtime/config/test_config.c: config loading, defaults, overrides, and the round trip:
 * every file in configs/ -> resolved YAML -> load again gives identical structs; the values the
 * config derives (DQN's epsilon schedule).
 * usage: test_config CONFIGS_DIR TEST_DATA_DIR */
#include "replay/kinds.h"
#include "runtime/config/config.h"
#include "test.h"

#include <dirent.h>
#include <math.h>
#include <string.h>

static const char *configs_dir, *data_dir;
static gb_config a, b; /* large: static */

/* Writes cfg as YAML and loads it back into out; 0 on success. */
static int round_trip(const gb_config *cfg, gb_config *out, gb_error *err)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem)
        return -1;
    int rc = gb_config_write(cfg, mem);
    fclose(mem);
    gb_config_marks *marks = NULL;
    if (rc == 0)
        rc = gb_config_load_string(out, &marks, "<round-trip>", text, len, err);
    if (rc == 0)
        rc = gb_config_finish(out, marks, err);
    gb_config_marks_free(marks);
    free(text);
    return rc;
}

static void test_minimal_defaults(void)
{
    gb_error err = {0};
    char path[1024];
    snprintf(path, sizeof path, "%s/configs/good/minimal.yaml", data_dir);
    CHECK_OK(gb_config_read(&a, path, NULL, 0, &err));
    CHECK(strcmp(a.experiment.name, "minimal") == 0);
    CHECK(strcmp(a.env.name, "CartPole-v1") == 0);
    CHECK_EQ_INT(a.trainer.algorithm.name, GB_ALGO_PPO);
    CHECK_EQ_INT(a.experiment.seed, 1);
    CHECK(isnan(a.experiment.target_return));
    CHECK(isnan(a.trainer.replay.default_priority));
    CHECK_EQ_INT(a.policy.model.hidden.n, 2);
    CHECK_EQ_INT(a.policy.model.hidden.v[1], 64);
    CHECK_NEAR(a.trainer.algorithm.gamma, 0.99, 0);
    CHECK_EQ_INT(a.launch.mode, GB_LAUNCH_LOCAL);
    CHECK(strcmp(a.streams.interface, "127.0.0.1") == 0);
    /* PPO without a replay section: an on-policy queue of one round, not the schema's uniform
     * 100k replay that reuses items without end. */
    CHECK_EQ_INT(a.trainer.replay.capacity, a.trainer.batch_size);
    CHECK_EQ_INT(a.trainer.replay.min_size, a.trainer.batch_size);
    CHECK_EQ_INT(a.trainer.replay.selector, GB_SELECTOR_FIFO);
    CHECK_EQ_INT(a.trainer.replay.max_times_sampled, 1);
    CHECK(strcmp(gb_config_enum_name("trainer.replay.remover", a.trainer.replay.remover),
                 "none") == 0);
    CHECK_EQ_INT(a.trainer.max_staleness, -1); /* the queue bounds the lag (see config_check.c) */
}

/* Each algorithm's replay defaults: DQN and SAC keep the schema's off-policy replay; PPO's
 * follow batch_size and trainer.count; keys a PPO config sets stay as set. */
static void test_replay_defaults_per_algorithm(void)
{
    gb_error err = {0};
    char path[1024];
    snprintf(path, sizeof path, "%s/configs/good/minimal.yaml", data_dir);
    const char *dqn[] = {"trainer.algorithm.name=dqn"};
    CHECK_OK(gb_config_read(&a, path, dqn, 1, &err));
    CHECK_EQ_INT(a.trainer.replay.capacity, 100000);
    CHECK_EQ_INT(a.trainer.replay.selector, GB_SELECTOR_UNIFORM);
    CHECK_EQ_INT(a.trainer.replay.remover, GB_REMOVER_FIFO);
    CHECK_EQ_INT(a.trainer.replay.max_times_sampled, 0);
    CHECK_EQ_INT(a.trainer.replay.min_size, 1);
    const char *ppo[] = {"trainer.batch_size=48", "trainer.count=2",
                         "trainer.replay.capacity=500", "trainer.replay.remover=fifo"};
    CHECK_OK(gb_config_read(&a, path, ppo, 4, &err));
    CHECK_EQ_INT(a.trainer.replay.capacity, 500);               /* set */
    CHECK_EQ_INT(a.trainer.replay.remover, GB_REMOVER_FIFO);     /* set */
    CHECK_EQ_INT(a.trainer.replay.selector, GB_SELECTOR_FIFO);   /* PPO's default */
    CHECK_EQ_INT(a.trainer.replay.max_times_sampled, 1);         /* PPO's default */
    CHECK_EQ_INT(a.trainer.replay.min_size, 24);                 /* one trainer's part */
    /* The resolved config loads back to the same values (all keys now explicit). */
    CHECK_OK(round_trip(&a, &b, &err));
    const char *diff = NULL;
    CHECK_MSG(gb_config_equal(&a, &b, &diff), "differs at %s", diff ? diff : "?");
}

static void test_overrides(void)
{
    gb_error err = {0};
    char path[1024];
    snprintf(path, sizeof path, "%s/configs/good/minimal.yaml", data_dir);
    const char *sets[] = {
        "trainer.replay.capacity=1e6",      "policy.model.hidden=[256, 128, 32]",
        "trainer.algorithm.name=dqn",       "experiment.target_return=-250.5",
        "env.args.length=\"0.5\"",          "env.args.mode=hard",
        "env.args.mode=easy",               "policy.deterministic=true",
        "experiment.name=\"quoted: name\"", "trainer.replay.default_priority=null",
        "launch.mode=inline",
    };
    CHECK_OK(gb_config_read(&a, path, sets, (int)(sizeof sets / sizeof sets[0]), &err));
    CHECK_EQ_INT(a.trainer.replay.capacity, 1000000);
    CHECK_EQ_INT(a.policy.model.hidden.n, 3);
    CHECK_EQ_INT(a.policy.model.hidden.v[2], 32);
    CHECK_EQ_INT(a.trainer.algorithm.name, GB_ALGO_DQN);
    CHECK_NEAR(a.experiment.target_return, -250.5, 0);
    CHECK(strcmp(gb_config_arg(&a.env.args, "length"), "0.5") == 0);
    CHECK(strcmp(gb_config_arg(&a.env.args, "mode"), "easy") == 0);
    CHECK_EQ_INT(a.env.args.n, 2);
    CHECK_EQ_INT(a.policy.deterministic, 1);
    CHECK(strcmp(a.experiment.name, "quoted: name") == 0);
    CHECK_EQ_INT(a.launch.mode, GB_LAUNCH_INLINE);
    /* The same config survives printing and loading again. */
    CHECK_OK(round_trip(&a, &b, &err));
    const char *diff = NULL;
    CHECK_MSG(gb_config_equal(&a, &b, &diff), "differs at %s", diff ? diff : "?");
}

/* trainer.chunk_guard (issue 35): finite, generous defaults; set, it survives the round trip;
 * zero, negative or infinite bounds are refused naming the key; --explain documents it. */
static void test_chunk_guard(void)
{
    gb_error err = {0};
    char path[1024];
    snprintf(path, sizeof path, "%s/configs/good/minimal.yaml", data_dir);
    CHECK_OK(gb_config_read(&a, path, NULL, 0, &err));
    CHECK_NEAR(a.trainer.chunk_guard.max_abs_reward, 1e6, 0);
    CHECK_NEAR(a.trainer.chunk_guard.max_abs_obs, 1e6, 0);
    CHECK_NEAR(a.trainer.chunk_guard.max_abs_action, 1e6, 0);
    const char *set[] = {"trainer.chunk_guard.max_abs_reward=250.5",
                         "trainer.chunk_guard.max_abs_obs=1e9"};
    CHECK_OK(gb_config_read(&a, path, set, 2, &err));
    CHECK_NEAR(a.trainer.chunk_guard.max_abs_reward, 250.5, 0);
    CHECK_NEAR(a.trainer.chunk_guard.max_abs_obs, 1e9, 0);
    CHECK_OK(round_trip(&a, &b, &err));
    const char *diff = NULL;
    CHECK_MSG(gb_config_equal(&a, &b, &diff), "differs at %s", diff ? diff : "?");
    const char *bad[] = {"trainer.chunk_guard.max_abs_reward=0",
                         "trainer.chunk_guard.max_abs_obs=-1",
                         "trainer.chunk_guard.max_abs_action=inf"};
    for (int i = 0; i < 3; i++) {
        CHECK_MSG(gb_config_read(&a, path, &bad[i], 1, &err) != 0, "%s accepted", bad[i]);
        CHECK_MSG(strstr(err.msg, "trainer.chunk_guard.max_abs_") != NULL, "%s: %s", bad[i],
                  err.msg);
    }
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    CHECK_OK(gb_config_explain(mem, "trainer.chunk_guard.max_abs_reward"));
    fclose(mem);
    CHECK_MSG(text && strstr(text, "refused"), "--explain: %s", text ? text : "");
    free(text);
}

static void test_awkward_values_round_trip(void)
{
    gb_error err = {0};
    /* experiment.name is one folder (no control characters or separators): the escapes go
     * through env.plugin, a path, instead */
    const char *text = "experiment:\n  name: \"\\\"q\\\" caf\xc3\xa9\"\n"
                       "  target_return: 1e-300\n  max_seconds: .inf\n"
                       "env:\n  name: plugin\n  plugin: \"/tmp/tab\\there \\\\ x.so\"\n"
                       "  args: {a: 'it''s', \"b c\": \"x: y\", n: -0.0}\n"
                       "trainer:\n  algorithm:\n    name: sac\n    lr: 0.1\n"
                       "    sac:\n      target_entropy: -3.5\n";
    gb_config_marks *marks = NULL;
    CHECK_OK(gb_config_load_string(&a, &marks, "<t>", text, strlen(text), &err));
    CHECK_OK(gb_config_finish(&a, marks, &err));
    gb_config_marks_free(marks);
    CHECK(strcmp(a.experiment.name, "\"q\" caf\xc3\xa9") == 0);
    CHECK(strcmp(a.env.plugin, "/tmp/tab\there \\ x.so") == 0);
    CHECK(isinf(a.experiment.max_seconds));
    CHECK(strcmp(gb_config_arg(&a.env.args, "a"), "it's") == 0);
    CHECK(strcmp(gb_config_arg(&a.env.args, "b c"), "x: y") == 0);
    CHECK_OK(round_trip(&a, &b, &err));
    const char *diff = NULL;
    CHECK_MSG(gb_config_equal(&a, &b, &diff), "differs at %s", diff ? diff : "?");
    CHECK_NEAR(b.trainer.algorithm.lr, 0.1, 0);
    CHECK(b.experiment.target_return == 1e-300);
}

static void test_every_shipped_config_round_trips(void)
{
    DIR *d = opendir(configs_dir);
    CHECK(d != NULL);
    if (!d)
        return;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".yaml") != 0)
            continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", configs_dir, e->d_name);
        gb_error err = {0};
        int rc = gb_config_read(&a, path, NULL, 0, &err);
        CHECK_MSG(rc == 0, "%s: %s", path, err.msg);
        if (rc)
            continue;
        rc = round_trip(&a, &b, &err);
        CHECK_MSG(rc == 0, "%s: %s", path, err.msg);
        const char *diff = NULL;
        CHECK_MSG(rc == 0 && gb_config_equal(&a, &b, &diff), "%s differs at %s", path,
                  diff ? diff : "?");
        n++;
    }
    closedir(d);
    CHECK_MSG(n >= 1, "no configs found in %s", configs_dir);
    fprintf(stderr, "round-tripped %d configs\n", n);
}

static void test_equal_detects_differences(void)
{
    gb_error err = {0};
    char path[1024];
    snprintf(path, sizeof path, "%s/configs/good/minimal.yaml", data_dir);
    CHECK_OK(gb_config_read(&a, path, NULL, 0, &err));
    b = a;
    CHECK(gb_config_equal(&a, &b, NULL));
    b.trainer.replay.beta = 0.5;
    const char *diff = NULL;
    CHECK(!gb_config_equal(&a, &b, &diff) && strcmp(diff, "trainer.replay.beta") == 0);
    b = a;
    snprintf(b.env.args.kv[0].key, sizeof b.env.args.kv[0].key, "x");
    b.env.args.n = 1;
    CHECK(!gb_config_equal(&a, &b, &diff) && strcmp(diff, "env.args") == 0);
}

/* DQN's epsilon schedule: linear from start to end over the decay steps, then the end. */
static void test_dqn_epsilon_schedule(void)
{
    gb_config_dqn dqn = {0};
    dqn.epsilon_start = 1.0;
    dqn.epsilon_end = 0.1;
    dqn.epsilon_decay_steps = 1000;
    CHECK_NEAR(gb_config_dqn_epsilon(&dqn, 0), 1.0, 1e-12);
    CHECK_NEAR(gb_config_dqn_epsilon(&dqn, 500), 0.55, 1e-12);
    CHECK_NEAR(gb_config_dqn_epsilon(&dqn, 999), 0.1009, 1e-12);
    CHECK_NEAR(gb_config_dqn_epsilon(&dqn, 5000), 0.1, 1e-12);
    dqn.epsilon_decay_steps = 0;
    CHECK_NEAR(gb_config_dqn_epsilon(&dqn, 0), 0.1, 1e-12);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_config CONFIGS_DIR TEST_DATA_DIR\n");
        return 2;
    }
    configs_dir = argv[1];
    data_dir = argv[2];
    TEST_RUN(test_minimal_defaults);
    TEST_RUN(test_overrides);
    TEST_RUN(test_chunk_guard);
    TEST_RUN(test_replay_defaults_per_algorithm);
    TEST_RUN(test_awkward_values_round_trip);
    TEST_RUN(test_every_shipped_config_round_trips);
    TEST_RUN(test_equal_detects_differences);
    TEST_RUN(test_dqn_epsilon_schedule);
    return test_main_result();
}
