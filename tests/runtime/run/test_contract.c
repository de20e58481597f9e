/* tests/runtime/run/test_contract.c: the run contract's table (runtime/run/contract.h): every
 * column named once, the learner statistics each algorithm reports, and the stop rules' order. */
#include "runtime/run/contract.h"
#include "test.h"

#include <math.h>
#include <string.h>

static void test_columns_named_once(void)
{
    const char *const *names = gb_contract_columns();
    for (int c = 0; c < GB_NCOLS; c++) {
        CHECK_MSG(names[c] && names[c][0], "column %d has no name", c);
        for (int d = 0; names[c] && d < c; d++)
            CHECK_MSG(strcmp(names[c], names[d]) != 0, "%s twice", names[c]);
    }
    /* the launcher's columns first, in their order (a resumed metrics.csv widens at the end) */
    CHECK(strcmp(names[GB_COL_TIME], "time_s") == 0);
    CHECK(strcmp(names[GB_COL_COLLECT_SHARE], "collect_share") == 0);
    CHECK_EQ_INT(GB_COL_COLLECT_SHARE, 26);
}

static void test_algorithms(void)
{
    /* a statistic is reported by the algorithms that compute it (the trainer's and inline
     * mode's former rules, now one) */
    CHECK(gb_contract_reports(GB_ALGO_PPO, GB_COL_KL) &&
          !gb_contract_reports(GB_ALGO_DQN, GB_COL_KL));
    CHECK(!gb_contract_reports(GB_ALGO_PPO, GB_COL_Q) &&
          gb_contract_reports(GB_ALGO_SAC, GB_COL_Q));
    CHECK(!gb_contract_reports(GB_ALGO_DQN, GB_COL_ENTROPY));
    CHECK(gb_contract_reports(GB_ALGO_DQN, GB_COL_EPSILON) &&
          !gb_contract_reports(GB_ALGO_PPO, GB_COL_EPSILON));
    CHECK(gb_contract_reports(GB_ALGO_SAC, GB_COL_ALPHA) &&
          !gb_contract_reports(GB_ALGO_DQN, GB_COL_ALPHA));
    for (int algo = GB_ALGO_PPO; algo <= GB_ALGO_SAC; algo++)
        CHECK(gb_contract_reports(algo, GB_COL_LOSS) &&
              gb_contract_reports(algo, GB_COL_ENV_STEPS));
    CHECK(gb_contract_learner_column(GB_COL_LOSS) && !gb_contract_learner_column(GB_COL_EPISODES));
    CHECK(!gb_contract_reports(GB_ALGO_PPO, GB_NCOLS) && !gb_contract_learner_column(-1));
}

static void test_stop_rules(void)
{
    gb_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.experiment.target_return = 100;
    cfg.experiment.max_env_steps = 1000;
    cfg.experiment.max_seconds = 60;
    CHECK(gb_contract_stop_reason(&cfg, 10, 50, 200, 1) == NULL); /* under the window */
    CHECK(strcmp(gb_contract_stop_reason(&cfg, 10, GB_RUN_WINDOW, 100, 1), "solved") == 0);
    /* solved first, then the budgets in order */
    CHECK(strcmp(gb_contract_stop_reason(&cfg, 1000, GB_RUN_WINDOW, 150, 60), "solved") == 0);
    CHECK(strcmp(gb_contract_stop_reason(&cfg, 1000, 0, NAN, 60), "max_env_steps") == 0);
    CHECK(strcmp(gb_contract_stop_reason(&cfg, 999, 0, NAN, 60), "max_seconds") == 0);
    CHECK(strcmp(gb_contract_solved_by(&cfg), "training_episodes") == 0);
    /* the verdict by evaluation: the training episodes reach the target, never solve */
    cfg.experiment.eval_every = 1000;
    CHECK(strcmp(gb_contract_solved_by(&cfg), "evaluation") == 0);
    CHECK(gb_contract_target_reached(&cfg, GB_RUN_WINDOW, 150));
    CHECK(!gb_contract_target_reached(&cfg, GB_RUN_WINDOW - 1, 150));
    CHECK(gb_contract_stop_reason(&cfg, 10, GB_RUN_WINDOW, 150, 1) == NULL);
    CHECK(strcmp(gb_contract_stop_reason(&cfg, 1000, GB_RUN_WINDOW, 150, 1), "max_env_steps") ==
          0);
    cfg.experiment.eval_every = 0;
    cfg.experiment.target_return = NAN; /* none: never solved */
    cfg.experiment.max_env_steps = cfg.experiment.max_seconds = 0; /* 0: no budget */
    CHECK(gb_contract_stop_reason(&cfg, 1 << 30, 1 << 20, 1e9, 1e6) == NULL);
}

int main(void)
{
    TEST_RUN(test_columns_named_once);
    TEST_RUN(test_algorithms);
    TEST_RUN(test_stop_rules);
    return test_main_result();
}
