/* tests/workers/roles/test_env_space.c: the learner's space read from an environment as the config
 * names it (gb_worker_env_space): the action bounds come from the copy before it is destroyed
 * (they were read after destroy, a use-after-free that built-ins hid with static bounds), and
 * what the algorithms cannot take is refused. argv[1]: the heap_bounds_env plugin. */
#include "runtime/config/config.h"
#include "test.h"
#include "workers/roles/learning.h"
#include "workers/roles/worker.h"

#include <stdio.h>
#include <string.h>

static const char *plugin;

static void load(gb_config *cfg, const char *yaml)
{
    gb_error err = {0};
    gb_config_marks *marks = NULL;
    CHECK_OK(gb_config_load_string(cfg, &marks, "test", yaml, strlen(yaml), &err));
    CHECK_OK(gb_config_finish(cfg, marks, &err));
    gb_config_marks_free(marks);
}

static void test_bounds_read_before_destroy(void)
{
    char yaml[1024];
    snprintf(yaml, sizeof yaml, "experiment: {name: t}\nenv: {name: plugin, plugin: %s}\n"
                                "trainer: {algorithm: {name: sac}}\n", plugin);
    gb_config cfg;
    load(&cfg, yaml);
    gb_env_spec spec;
    gb_torch_space space;
    gb_error err = {0};
    CHECK_OK(gb_worker_env_space(&cfg, &spec, &space, &err));
    CHECK_EQ_INT(space.action_dim, 2);
    CHECK(space.action_low[0] == -2.0f && space.action_low[1] == -0.5f);
    CHECK(space.action_high[0] == 2.0f && space.action_high[1] == 0.5f);
    CHECK(spec.action.low == NULL && spec.action.high == NULL);
}

static void test_refusals(void)
{
    gb_env_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.agents = 1;
    spec.obs.dtype = GB_ENV_FLOAT32;
    spec.obs.ndim = 1;
    spec.obs.shape[0] = 4;
    spec.action.kind = GB_ENV_SPACE_DISCRETE;
    spec.action.n = 3;
    gb_torch_space space;
    gb_error err = {0};
    CHECK_OK(gb_learning_space(&spec, &space, &err));
    CHECK(space.discrete && space.n_actions == 3 && space.obs_shape[0] == 4);
    spec.flags = GB_ENV_TURN_BASED;
    CHECK_EQ_INT(gb_learning_space(&spec, &space, &err), GB_EUNSUPPORTED);
    CHECK(strstr(err.msg, "turn-based") != NULL);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_env_space PLUGIN.so\n");
        return 2;
    }
    plugin = argv[1];
    TEST_RUN(test_bounds_read_before_destroy);
    TEST_RUN(test_refusals);
    return test_main_result();
}
