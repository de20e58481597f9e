/* envs/spec.h: what a spec says, checked and measured: the checks of a spec as create() filled it
 * and the sizes of its observations and actions (spec.c). Below the host (host.h) and the
 * wrappers (wrap.h), which both use it.
 * defines: gb_env_spec_validate, gb_env_obs_bytes, gb_env_action_bytes, gb_env_obs_numel */
#ifndef GB_ENVS_SPEC_H
#define GB_ENVS_SPEC_H

#include "envs/env.h"
#include "runtime/base/error.h"

#include <stddef.h>

/* Checks a spec as create() filled it (agents, dtype, shape, action kind and bounds, render
 * size against iface->render). Returns 0 or GB_EINVAL naming the field. */
int gb_env_spec_validate(const gb_env_spec *spec, const gb_env_interface *iface, gb_error *err);

/* Per-agent sizes in bytes of one observation and one action (spec must be valid). */
size_t gb_env_obs_bytes(const gb_env_spec *spec);
size_t gb_env_action_bytes(const gb_env_spec *spec);
/* Elements in one agent's observation. */
size_t gb_env_obs_numel(const gb_env_spec *spec);

#endif
