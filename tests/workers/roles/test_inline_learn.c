/* tests/workers/roles/test_inline_learn.c: a learning test: runs CONFIG in inline mode (fixed seed,
 * the config's step budget) into a fresh run directory under SCRATCH and passes when the run is
 * solved (mean of the last 100 episode returns >= experiment.target_return) and the run
 * directory holds config.yaml, metrics.csv with rows, the checkpoint set checkpoints/trainer-0
 * (with a policy file for a plain MLP, which `gearbox eval` plays) and a summary.json that says
 * solved. Prints the wall-clock time. With experiment.target_return=null
 * (a run of its budget, as CI's ThreadSanitizer build runs it: the threads' interplay, not the
 * learning) the run must end at experiment.max_env_steps instead, with the same files.
 * usage: test_inline_learn CONFIG SCRATCH [key.path=value ...] */
#include "test.h"
#include "runtime/run/rundir.h"
#include "runtime/config/config.h"
#include "runtime/base/log.h"
#include "workers/roles/checkpoint_set.h"
#include "workers/roles/inline.h"
#include "workers/roles/policy_file.h"
#include "workers/torch/mlp_infer.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static int file_has(const char *path, const char *needle, int *lines)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char buf[4096];
    int found = 0, n = 0;
    while (fgets(buf, sizeof buf, f)) {
        n++;
        if (needle && strstr(buf, needle))
            found = 1;
    }
    fclose(f);
    if (lines)
        *lines = n;
    return needle ? found : 1;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s CONFIG SCRATCH [key.path=value ...]\n", argv[0]);
        return 2;
    }
    static gb_config cfg;
    gb_error err = {0};
    if (gb_config_read(&cfg, argv[1], (const char *const *)argv + 3, argc - 3, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 2;
    }
    gb_log_init("inline", 0, GB_LOG_INFO);
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s-%lld", argv[2], cfg.experiment.name, (long long)time(NULL));
    gb_rundir rd;
    CHECK_OK(gb_rundir_create(&rd, &cfg, dir, &err));
    gb_inline_result res;
    int rc = gb_inline_run(&cfg, &rd, NULL, &res, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    gb_run_summary sum; /* as `gearbox run` writes it */
    gb_inline_summary(&cfg, &res, rc ? err.msg : NULL, &sum);
    CHECK_OK(gb_rundir_write_summary(&rd, &sum, &err));
    gb_rundir_close(&rd);
    printf("%s: %s after %lld env steps, %lld train steps, %.1f s wall-clock; mean return of the "
           "last 100 episodes %.2f (target %.1f)\n",
           cfg.experiment.name, res.exit_reason, (long long)res.env_steps,
           (long long)res.train_steps, res.wall_seconds, res.return_mean,
           cfg.experiment.target_return);
    const int budget_only = isnan(cfg.experiment.target_return);
    char p[1100];
    int lines = 0;
    snprintf(p, sizeof p, "%s/summary.json", rd.path);
    if (budget_only) {
        CHECK_MSG(strcmp(res.exit_reason, "max_env_steps") == 0 &&
                      res.env_steps >= cfg.experiment.max_env_steps && res.train_steps > 0,
                  "the run did not train to its budget (%s)", res.exit_reason);
        CHECK(file_has(p, "\"exit_reason\": \"max_env_steps\"", NULL));
    } else {
        CHECK_MSG(res.solved, "not solved within the budget (%s)", res.exit_reason);
        CHECK(file_has(p, "\"solved\": true", NULL));
    }
    snprintf(p, sizeof p, "%s/metrics.csv", rd.path);
    CHECK(file_has(p, "return_mean_100", &lines) && lines >= 2);
    snprintf(p, sizeof p, "%s/config.yaml", rd.path);
    CHECK(file_has(p, NULL, NULL));
    struct stat st;
    gb_checkpoint_files cf;
    snprintf(p, sizeof p, "%s/checkpoints", rd.path);
    CHECK_OK(gb_checkpoint_find(p, "trainer-0", &cf, &err));
    CHECK(stat(cf.model, &st) == 0 && st.st_size > 0 && cf.step == res.train_steps);
    /* these configs' plain MLPs: a policy file that reads back (what gearbox eval plays) */
    const int plain = cfg.policy.model.type == GB_MODEL_MLP &&
                      cfg.policy.model.core == GB_CORE_NONE && gb_mlp_fast();
    CHECK_MSG(!plain || cf.policy[0], "a plain MLP's checkpoint without a policy file");
    gb_policy_file pf;
    if (cf.policy[0] && gb_policy_file_read(cf.policy, &pf, &err) == 0) {
        CHECK(pf.count > 0 && pf.bytes > 0);
        gb_policy_file_free(&pf);
    } else {
        CHECK_MSG(!cf.policy[0], "%s", err.msg);
    }
    return test_main_result();
}
