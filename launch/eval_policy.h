/* launch/eval_policy.h: the policy `gearbox eval` plays: the checkpoint set (by default the
 * policy the run delivered), and what plays it. A checkpoint set with a policy file
 * (workers/roles/policy_file.h: a trainer writes one where the policy workers play its model
 * without libtorch) plays on gearbox's C (workers/roles/policy_mlp.h, in fp32 as the learner
 * holds it), and libtorch is never loaded: an evaluation starts in milliseconds instead of the
 * 0.4-1 s libtorch takes to load, which a held evaluation (experiment.eval_hold) holds the
 * trainers for. Any other (a core, a CNN, a TorchScript module, an explicit .model path, a set
 * written before policy files, `--kernels libtorch`) plays libtorch's model loaded from the
 * set's model file, as before. For equal inputs both choose equal actions
 * (tests/workers/roles/test_policy_mlp.c compares the two models' forwards); sampled actions
 * draw from the same distribution with another generator.
 * defines: gb_eval_policy, gb_eval_policy_find, gb_eval_policy_open,
 *          gb_eval_policy_act, gb_eval_policy_kernels, gb_eval_policy_close */
#ifndef GB_LAUNCH_EVAL_POLICY_H
#define GB_LAUNCH_EVAL_POLICY_H

#include "runtime/base/error.h"
#include "runtime/config/config.h"
#include "workers/roles/checkpoint_set.h"
#include "workers/torch/bridge.h"

#include <stdint.h>

typedef struct gb_eval_policy gb_eval_policy;

/* The checkpoint of the run in run_dir to play: checkpoint as a path (it names a .model file or
 * holds a '/': ck->step -1, no policy file), else the set RUN_DIR/checkpoints/NAME.checkpoint
 * names; NULL: the policy the run delivered (checkpoints/solved when an evaluation solved the
 * run, else trainer-0). Returns GB_EXIT_OK or GB_EXIT_USAGE with the reason printed. */
int gb_eval_policy_find(const char *run_dir, const char *checkpoint, const gb_config *cfg,
                        gb_checkpoint_files *ck);

/* The policy of checkpoint ck: on gearbox's C when use_c, ck has a policy file and
 * gb_policy_mlp_plays_fp32; else libtorch's (loaded now; cfg's devices must be the cpu). Returns 0,
 * GB_ENOTFOUND (a file of the set is gone: a live run replaced it), GB_ECORRUPT, or the
 * bridge's error. */
int gb_eval_policy_open(const gb_config *cfg, const gb_torch_space *sp, uint64_t seed, int use_c,
                        const gb_checkpoint_files *ck, gb_eval_policy **out, gb_error *err);

/* gb_torch_model_act_state's contract (bridge.h): rows observations -> out; state: a core's
 * rows, read and written in place (NULL without a core, always NULL on gearbox's C). */
int gb_eval_policy_act(gb_eval_policy *p, const void *obs, int64_t rows, int deterministic,
                       double epsilon, float *state, gb_torch_act_out *out, gb_error *err);

/* What plays it: "gearbox fp32 (no libtorch)" or "libtorch". */
const char *gb_eval_policy_kernels(const gb_eval_policy *p);
void gb_eval_policy_close(gb_eval_policy *p);

#endif
