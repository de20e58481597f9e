/* tests/workers/test_policy_seeds.c: every policy worker draws its own random stream. Policy
 * workers seed their models with gb_rng_seed_of(seed, "policy", index, "model") (before, all
 * of them used the experiment seed alone, so with policy.count > 1 their epsilon-greedy masks
 * and sampled actions repeated across workers). Two models seeded as policy 0 and policy 1 act
 * epsilon-greedily (epsilon 1) on the same observations: their actions differ, while a model
 * seeded as the same worker repeats them. */
#include "runtime/rng.h"
#include "test.h"
#include "workers/torch/bridge.h"

#include <string.h>

#define ROWS 256

static void act(const gb_config *cfg, const gb_torch_space *sp, uint64_t seed, int64_t *out)
{
    gb_error err = {0};
    gb_torch_model *m = NULL;
    CHECK_OK(gb_torch_model_create(cfg, sp, seed, &m, &err));
    if (!m)
        return;
    static float obs[ROWS * 4];
    gb_torch_act_out o = {out, NULL, NULL, NULL};
    CHECK_OK(gb_torch_model_act(m, obs, ROWS, 0, 1.0, &o, &err));
    gb_torch_model_destroy(m);
}

int main(void)
{
    static gb_config cfg;
    gb_error err = {0};
    const char *yaml = "experiment: {name: t}\nenv: {name: CartPole-v1}\n"
                       "trainer: {algorithm: {name: dqn}}\n";
    gb_config_marks *marks = NULL;
    CHECK_OK(gb_config_load_string(&cfg, &marks, "test", yaml, strlen(yaml), &err));
    CHECK_OK(gb_config_finish(&cfg, marks, &err));
    gb_config_marks_free(marks);
    gb_torch_space sp;
    memset(&sp, 0, sizeof sp);
    sp.obs_dtype = GB_DTYPE_FLOAT32;
    sp.obs_ndim = 1;
    sp.obs_shape[0] = 4;
    sp.discrete = 1;
    sp.n_actions = 2;
    int64_t a0[ROWS], a1[ROWS], again[ROWS];
    act(&cfg, &sp, gb_rng_seed_of(1, "policy", 0, "model"), a0);
    act(&cfg, &sp, gb_rng_seed_of(1, "policy", 1, "model"), a1);
    act(&cfg, &sp, gb_rng_seed_of(1, "policy", 0, "model"), again);
    int same = 0;
    for (int i = 0; i < ROWS; i++)
        same += a0[i] == a1[i];
    CHECK_MSG(same < ROWS * 3 / 4, "%d of %d random actions equal across workers", same, ROWS);
    CHECK(memcmp(a0, again, sizeof a0) == 0);
    return test_main_result();
}
