/* envs/spec.h: what a spec says, checked and measured: the checks of a spec as create() filled it
 * and the sizes of its observations and actions (spec.c). Below the host (host.h) and the
 * wrappers (wrap.h), which both use it.
 * defines: gb_env_spec_validate, gb_env_obs_bytes, gb_env_action_bytes, gb_env_obs_numel,
 *          gb_env_reward_in_range */
#ifndef GB_ENVS_SPEC_H
#define GB_ENVS_SPEC_H

#include "envs/env.h"
#include "runtime/base/error.h"

#include <stddef.h>

/* Checks a spec as create() filled it (agents, dtype, shape, action kind and bounds, render
 * size against iface->render). Returns 0 or GB_EINVAL naming the field. */
int gb_env_spec_validate(const gb_env_spec *spec, const gb_env_interface *iface, gb_error *err);

/* 1 when reward r is within the spec's declared reward range (GB_ENV_REWARD_RANGE; to within a
 * float32 rounding), or the spec declares none. */
int gb_env_reward_in_range(const gb_env_spec *spec, double r);

/* Per-agent sizes in bytes of one observation and one action (spec must be valid). */
size_t gb_env_obs_bytes(const gb_env_spec *spec);
size_t gb_env_action_bytes(const gb_env_spec *spec);
/* Elements in one agent's observation. */
size_t gb_env_obs_numel(const gb_env_spec *spec);

#endif
