/* workers/roles/learning_space.c: what the networks see and emit (gb_torch_space) for an
 * environment's spaces (learning.h: gb_learning_space), and what they cannot take. */
#include "workers/roles/learning.h"

#include "envs/host.h"

#include <string.h>

/* Fills *space from spec (no allocation). Returns 0, or GB_EUNSUPPORTED naming what the models
 * cannot take (observation type or rank, turn-based play, too many action dimensions). */
int gb_learning_space(const gb_env_spec *spec, gb_torch_space *space, gb_error *err)
{
    memset(space, 0, sizeof *space);
    space->obs_dtype = gb_env_dtype_to_gb(spec->obs.dtype);
    if (space->obs_dtype != GB_DTYPE_FLOAT32 && space->obs_dtype != GB_DTYPE_UINT8)
        return gb_error_set(err, GB_EUNSUPPORTED, "observations of type %s (the models take "
                            "float32 or uint8)", gb_dtype_name(space->obs_dtype));
    if (spec->flags & GB_ENV_TURN_BASED)
        return gb_error_set(err, GB_EUNSUPPORTED, "turn-based environments are not supported by "
                            "the built-in algorithms");
    if (spec->obs.ndim > GB_TORCH_MAX_DIMS)
        return gb_error_set(err, GB_EUNSUPPORTED, "observations of %d dimensions (at most %d)",
                            spec->obs.ndim, GB_TORCH_MAX_DIMS);
    space->obs_ndim = spec->obs.ndim;
    for (int i = 0; i < spec->obs.ndim; i++)
        space->obs_shape[i] = spec->obs.shape[i];
    space->discrete = spec->action.kind == GB_ENV_SPACE_DISCRETE;
    if (space->discrete) {
        space->n_actions = spec->action.n;
        return 0;
    }
    if (spec->action.n > GB_TORCH_MAX_ACTION_DIM)
        return gb_error_set(err, GB_EUNSUPPORTED, "%d action dimensions (at most %d)",
                            spec->action.n, GB_TORCH_MAX_ACTION_DIM);
    space->action_dim = spec->action.n;
    for (int i = 0; i < spec->action.n; i++) {
        space->action_low[i] = spec->action.low[i];
        space->action_high[i] = spec->action.high[i];
    }
    return 0;
}
