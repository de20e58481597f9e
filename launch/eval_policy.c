/* launch/eval_policy.c: the policy `gearbox eval` plays (see eval_policy.h). */
#include "launch/eval_policy.h"

#include "launch/commands.h"
#include "launch/json.h"
#include "workers/roles/learner_file.h"
#include "workers/roles/policy_file.h"
#include "workers/roles/policy_mlp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct gb_eval_policy {
    gb_policy_mlp *mlp;         /* on gearbox's C; else */
    gb_torch_learner *learner; /* libtorch's model */
};

/* The set a plain `gearbox eval RUN_DIR` plays: the policy the run delivered. A run that ended
 * solved by an evaluation (summary.json) delivered the policy that evaluation played, pinned
 * as checkpoints/solved: its last set too when the evaluation held the trainers
 * (experiment.eval_hold); without the hold they trained on until the workers stopped, and that
 * last set can play worse (SAC on Hopper: 560-2294 where the evaluated policy made 2687-3215,
 * docs/benchmarks.md). Any other run (or a solved one whose pin is gone): its last set. */
static const char *delivered_checkpoint(const char *run_dir)
{
    char path[GB_CHECKPOINT_PATH_MAX];
    snprintf(path, sizeof path, "%s/summary.json", run_dir);
    json_t *doc = NULL;
    gb_error err = {0};
    if (gb_json_load(path, &doc, &err) != 0)
        return "trainer-0";
    char reason[32], by[32];
    int solved = gb_json_string(doc, "exit_reason", reason, sizeof reason, &err) == 0 &&
                 gb_json_string(doc, "solved_by", by, sizeof by, &err) == 0 &&
                 strcmp(reason, "solved") == 0 && strcmp(by, "evaluation") == 0;
    json_decref(doc);
    snprintf(path, sizeof path, "%s/checkpoints/solved.checkpoint", run_dir);
    if (!solved || access(path, R_OK) != 0)
        return "trainer-0";
    fprintf(stderr,
            "gearbox eval: %s ended solved by an evaluation: playing the policy it played "
            "(checkpoints/solved; --checkpoint trainer-0 plays the last)\n",
            run_dir);
    return "solved";
}

int gb_eval_policy_find(const char *run_dir, const char *checkpoint, const gb_config *cfg,
                        gb_checkpoint_files *ck)
{
    const char *name = checkpoint ? checkpoint : delivered_checkpoint(run_dir);
    size_t n = strlen(name);
    if (strchr(name, '/') || (n > 6 && strcmp(name + n - 6, ".model") == 0)) {
        FILE *f = fopen(name, "rb");
        if (!f) {
            fprintf(stderr, "gearbox eval: --checkpoint %s: cannot open the model file\n", name);
            return GB_EXIT_USAGE;
        }
        fclose(f);
        ck->step = -1;
        snprintf(ck->model, sizeof ck->model, "%s", name);
        return GB_EXIT_OK;
    }
    char dir[GB_CHECKPOINT_PATH_MAX];
    snprintf(dir, sizeof dir, "%s/checkpoints", run_dir);
    gb_error err = {0};
    int rc = gb_checkpoint_find(dir, name, ck, &err);
    if (rc == GB_ENOTFOUND && ck->model[0] == '\0')
        fprintf(stderr,
                "gearbox eval: %s has no checkpoint %s (%s/%s.checkpoint): a run's trainer "
                "writes one every trainer.checkpoint_every_s (%g s in this run) and when the "
                "run ends\n",
                run_dir, name, dir, name, cfg->trainer.checkpoint_every_s);
    else if (rc)
        fprintf(stderr, "gearbox eval: %s: checkpoint %s: %s\n", run_dir, name, err.msg);
    return rc ? GB_EXIT_USAGE : GB_EXIT_OK;
}

/* The C policy from ck's policy file. */
static int open_c(gb_eval_policy *p, const gb_config *cfg, const gb_torch_space *sp,
                  uint64_t seed, const gb_checkpoint_files *ck, gb_error *err)
{
    gb_policy_file pf;
    int rc = gb_policy_mlp_open_fp32(cfg, sp, seed, &p->mlp, err);
    if (rc == 0 && (rc = gb_policy_file_read(ck->policy, &pf, err)) == 0) {
        rc = gb_policy_mlp_import(p->mlp, pf.data, (size_t)pf.bytes, pf.layout, pf.count,
                                  pf.version, err);
        gb_policy_file_free(&pf);
        if (rc)
            gb_error_prefix(err, "%s", ck->policy);
    }
    return rc;
}

int gb_eval_policy_open(const gb_config *cfg, const gb_torch_space *sp, uint64_t seed, int use_c,
                        const gb_checkpoint_files *ck, gb_eval_policy **out, gb_error *err)
{
    *out = NULL;
    gb_eval_policy *p = calloc(1, sizeof *p);
    if (!p)
        return gb_error_set(err, GB_ENOMEM, "eval: out of memory");
    int rc;
    if (use_c && ck->policy[0] && gb_policy_mlp_plays_fp32(cfg, sp))
        rc = open_c(p, cfg, sp, seed, ck, err);
    else if ((rc = gb_torch_set_threads(1, err)) == 0 &&
             (rc = gb_torch_learner_create(cfg, sp, seed, &p->learner, err)) == 0 &&
             (rc = gb_learner_checkpoint_load(p->learner, cfg, ck->model, err)) != 0)
        gb_error_prefix(err, "loading %s", ck->model);
    if (rc) {
        gb_eval_policy_close(p);
        return rc;
    }
    *out = p;
    return 0;
}

int gb_eval_policy_act(gb_eval_policy *p, const void *obs, int64_t rows, int deterministic,
                       double epsilon, float *state, gb_torch_act_out *out, gb_error *err)
{
    if (p->mlp)
        return gb_policy_mlp_act(p->mlp, obs, rows, deterministic, epsilon, NULL, state, state,
                                 out, err);
    return gb_torch_model_act_state(gb_torch_learner_model(p->learner), obs, rows, deterministic,
                                    epsilon, NULL, state, state, out, err);
}

const char *gb_eval_policy_kernels(const gb_eval_policy *p)
{
    return p->mlp ? "gearbox fp32 (no libtorch)" : "libtorch";
}

void gb_eval_policy_close(gb_eval_policy *p)
{
    if (!p)
        return;
    gb_policy_mlp_close(p->mlp);
    if (p->learner)
        gb_torch_learner_destroy(p->learner);
    free(p);
}
