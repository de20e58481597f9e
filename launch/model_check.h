/* launch/model_check.h: before any worker starts, a TorchScript model (policy.model.type
 * torchscript) is loaded as the policy workers will load it and run on a batch of the
 * environment's own observations (the first of a few freshly reset copies, with zero state
 * when it carries state): its outputs must fit the environment's action space and its next
 * state the declared size (workers/torch/bridge.h, TorchScript contract). Part of the one
 * validation (launch/validate.h) of `gearbox check`, `gearbox run` and policy joiners.
 * defines: gb_model_check */
#ifndef GB_LAUNCH_MODEL_CHECK_H
#define GB_LAUNCH_MODEL_CHECK_H

#include "runtime/config/config.h"

/* For a torchscript model: loads libtorch's module (the command's bridge, on the cpu, one
 * thread) and the model file, creates copies of the environment as the actors will (env.args,
 * env.wrappers, the config's seed), resets them and acts once on their observations. Does
 * nothing for a built-in model. Returns 0, GB_ECONFIG naming policy.model.torchscript's place
 * with what the module returned and what the space needs (or the file's or libtorch's error),
 * GB_ENOMEM, or GB_EIO when the bridge cannot be loaded. Blocks for the load and the forward
 * (about a second: libtorch's start). */
int gb_model_check(const gb_config *cfg, const gb_config_marks *marks, gb_error *err);

#endif
