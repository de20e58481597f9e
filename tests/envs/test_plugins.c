/* tests/envs/test_plugins.c: loading plugins (dlopen, symbol, ABI version, spaces) and the
 * checker behind `gearbox env check` on plugins that misbehave in each way it must catch.
 * argv[1]: the folder holding the bad_env_*.so plugins; argv[2]: the example corridor_env.so;
 * argv[3]: a file that is not a shared library. */
#include "envs/check.h"
#include "envs/host.h"
#include "envs/ring.h"
#include "test.h"

#include <stdio.h>
#include <string.h>

static const char *dir, *corridor, *not_a_library;

static int run_check(const char *path, double timeout, gb_error *err)
{
    FILE *devnull = fopen("/dev/null", "w");
    gb_env_check_options o = {.seed = 3, .steps = 300, .speed_seconds = 0.02,
                              .timeout_s = timeout, .out = devnull};
    int rc = gb_env_check(path, &o, err);
    fclose(devnull);
    return rc;
}

static void expect_check_failure(const char *plugin, int code, const char *needle)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/bad_env_%s.so", dir, plugin);
    gb_error err = {0};
    int rc = run_check(path, plugin[0] == 'h' ? 2.0 : 30.0, &err);
    CHECK_MSG(rc == code, "%s: rc %d, expected %d (%s)", plugin, rc, code, err.msg);
    CHECK_MSG(strstr(err.msg, needle) != NULL, "%s: message '%s' lacks '%s'", plugin, err.msg,
              needle);
    fprintf(stderr, "  %-16s -> %s\n", plugin, err.msg);
}

static void test_good_plugins_pass(void)
{
    gb_error err = {0};
    char path[1024];
    snprintf(path, sizeof path, "%s/bad_env_good.so", dir);
    CHECK_OK(run_check(path, 30, &err));
    CHECK_OK(run_check(corridor, 30, &err));
    CHECK_OK(run_check("CartPole-v1", 30, &err));
}

static void test_checker_catches_misbehaviour(void)
{
    expect_check_failure("nan", GB_EINVAL, "observation [agent 0][1] is NaN after step 5");
    expect_check_failure("crash", GB_EINVAL, "crashed with signal 11 (SIGSEGV");
    expect_check_failure("crash", GB_EINVAL, "in step (copy A, step 3)");
    expect_check_failure("version", GB_EINVAL, "ABI version 999");
    expect_check_failure("nosymbol", GB_ENOTFOUND, "no symbol gearbox_env_interface");
    expect_check_failure("space", GB_EINVAL, "discrete action space with n = 0");
    expect_check_failure("nondeterministic", GB_EINVAL, "not deterministic");
    expect_check_failure("short", GB_EINVAL, "did not write byte 12 of the observation buffer");
    expect_check_failure("overrun", GB_EINVAL, "wrote past the end of the observation buffer");
    expect_check_failure("hang", GB_EINVAL, "hung in step (copy A, step 2)");
    expect_check_failure("stepfails", GB_EINVAL, "step returned -1");
    expect_check_failure("exit", GB_EINVAL, "ended the process");
    expect_check_failure("rewardrange", GB_EINVAL,
                         "reward [agent 0] is 2 at step 6, outside the declared range [0, 1]");
    expect_check_failure("badrange", GB_EINVAL, "a reward range must be finite with low <= high");
}

static void test_loader_errors(void)
{
    gb_env_source src;
    gb_error err = {0};
    CHECK_EQ_INT(gb_env_plugin_open(&src, "/nonexistent/env.so", &err), GB_ENOTFOUND);
    CHECK(strstr(err.msg, "No such file") != NULL);
    CHECK_EQ_INT(gb_env_plugin_open(&src, not_a_library, &err), GB_EINVAL);
    CHECK(strstr(err.msg, "cannot load") != NULL);
    CHECK_EQ_INT(gb_env_source_open(&src, "plugin", "", &err), GB_EINVAL);
    CHECK_EQ_INT(gb_env_source_open(&src, "NoSuchEnv-v9", NULL, &err), GB_ENOTFOUND);
    CHECK(strstr(err.msg, "CartPole-v1") != NULL); /* lists the built-ins */
    CHECK_OK(gb_env_source_open(&src, "Pendulum-v1", NULL, &err));
    CHECK(src.dl == NULL && src.iface && strcmp(src.iface->name, "Pendulum-v1") == 0);
    gb_env_source_close(&src);
}

static void test_plugin_in_a_ring(void)
{
    gb_env_source src;
    gb_error err = {0};
    CHECK_OK(gb_env_source_open(&src, "plugin", corridor, &err));
    if (!src.iface)
        return;
    CHECK(src.dl != NULL);
    const char *keys[] = {"length"}, *values[] = {"6"};
    gb_env_args args = {1, keys, values};
    gb_env_ring *ring = NULL;
    CHECK_OK(gb_env_ring_create(src.iface, &args, 9, 8, 2, 0, &ring, &err));
    gb_env_ring_buffers b;
    CHECK_OK(gb_env_ring_buffers_alloc(ring, &b, &err));
    CHECK_OK(gb_env_ring_attach(ring, &b, &err));
    CHECK_OK(gb_env_ring_reset(ring, &err));
    CHECK_EQ_INT(gb_env_ring_time_limit(ring), 24);
    for (int t = 0; t < 20; t++)
        for (int g = 0; g < 2; g++) {
            for (int i = 0; i < 8; i++)
                ((int32_t *)b.actions)[i] = 1; /* always right: reaches the end in <= 5 steps */
            CHECK_OK(gb_env_ring_step(ring, g, &err));
        }
    const gb_env_copy_stats *s = gb_env_ring_stats(ring);
    for (int i = 0; i < 8; i++) {
        CHECK(s[i].episodes >= 4);
        CHECK(s[i].last_length >= 3 && s[i].last_length <= 5);
        CHECK_NEAR(s[i].last_return, 1.0 - 0.01 * (double)(s[i].last_length - 1), 1e-5);
    }
    /* a bad argument is the plugin's message, not a crash */
    values[0] = "1";
    gb_env_ring *bad = NULL;
    CHECK_EQ_INT(gb_env_ring_create(src.iface, &args, 9, 2, 1, 0, &bad, &err), GB_EINVAL);
    CHECK(strstr(err.msg, "length must be an integer") != NULL);
    gb_env_ring_buffers_free(&b);
    gb_env_ring_destroy(ring);
    gb_env_source_close(&src);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: test_env_plugins PLUGIN_DIR CORRIDOR.so NOT_A_LIBRARY\n");
        return 2;
    }
    dir = argv[1];
    corridor = argv[2];
    not_a_library = argv[3];
    TEST_RUN(test_good_plugins_pass);
    TEST_RUN(test_checker_catches_misbehaviour);
    TEST_RUN(test_loader_errors);
    TEST_RUN(test_plugin_in_a_ring);
    return test_main_result();
}
