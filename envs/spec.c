/* envs/spec.c: a spec's checks and sizes (see spec.h). */
#include "envs/spec.h"

#include <math.h>
#include <stdint.h>

size_t gb_env_obs_numel(const gb_env_spec *spec)
{
    size_t n = 1;
    for (int i = 0; i < spec->obs.ndim; i++)
        n *= (size_t)spec->obs.shape[i];
    return n;
}

size_t gb_env_obs_bytes(const gb_env_spec *spec)
{
    return gb_env_obs_numel(spec) * gb_env_dtype_size(spec->obs.dtype);
}

size_t gb_env_action_bytes(const gb_env_spec *spec)
{
    return spec->action.kind == GB_ENV_SPACE_DISCRETE ? sizeof(int32_t)
                                                      : (size_t)spec->action.n * sizeof(float);
}

int gb_env_spec_validate(const gb_env_spec *s, const gb_env_interface *iface, gb_error *err)
{
    const char *name = iface->name;
    if (s->agents < 1 || s->agents > (1 << 20))
        return gb_error_set(err, GB_EINVAL, "%s: spec.agents is %d, expected 1..%d", name,
                            s->agents, 1 << 20);
    const uint32_t known = GB_ENV_TURN_BASED | GB_ENV_REWARD_RANGE;
    if (s->flags & ~known)
        return gb_error_set(err, GB_EINVAL, "%s: spec.flags has unknown bits 0x%x", name,
                            s->flags & ~known);
    if ((s->flags & GB_ENV_REWARD_RANGE) &&
        !(isfinite(s->reward_low) && isfinite(s->reward_high) && s->reward_low <= s->reward_high))
        return gb_error_set(err, GB_EINVAL, "%s: spec.reward_low/high are [%g, %g]: a reward "
                            "range must be finite with low <= high", name,
                            (double)s->reward_low, (double)s->reward_high);
    if (gb_env_dtype_size(s->obs.dtype) == 0)
        return gb_error_set(err, GB_EINVAL, "%s: spec.obs.dtype %d is not a GB_ENV_* type",
                            name, s->obs.dtype);
    if (s->obs.ndim < 1 || s->obs.ndim > GB_ENV_MAX_DIMS)
        return gb_error_set(err, GB_EINVAL, "%s: spec.obs.ndim is %d, expected 1..%d", name,
                            s->obs.ndim, GB_ENV_MAX_DIMS);
    double numel = 1;
    for (int i = 0; i < s->obs.ndim; i++) {
        if (s->obs.shape[i] < 1)
            return gb_error_set(err, GB_EINVAL, "%s: spec.obs.shape[%d] is %lld, expected >= 1",
                                name, i, (long long)s->obs.shape[i]);
        numel *= (double)s->obs.shape[i];
    }
    if (numel * (double)gb_env_dtype_size(s->obs.dtype) > (double)(1LL << 32))
        return gb_error_set(err, GB_EINVAL, "%s: one observation is over 4 GiB", name);
    if (s->obs.low && s->obs.high)
        for (size_t i = 0; i < (size_t)numel; i++)
            if (isnan(s->obs.low[i]) || isnan(s->obs.high[i]) || s->obs.low[i] > s->obs.high[i])
                return gb_error_set(err, GB_EINVAL, "%s: spec.obs bounds [%zu] are [%g, %g]",
                                    name, i, s->obs.low[i], s->obs.high[i]);
    if (s->action.kind == GB_ENV_SPACE_DISCRETE) {
        if (s->action.n < 1)
            return gb_error_set(err, GB_EINVAL, "%s: discrete action space with n = %d", name,
                                s->action.n);
    } else if (s->action.kind == GB_ENV_SPACE_BOX) {
        if (s->action.n < 1 || s->action.n > (1 << 16))
            return gb_error_set(err, GB_EINVAL, "%s: box action space with dim %d", name,
                                s->action.n);
        if (!s->action.low || !s->action.high)
            return gb_error_set(err, GB_EINVAL, "%s: box action space without low/high bounds",
                                name);
        for (int i = 0; i < s->action.n; i++)
            if (isnan(s->action.low[i]) || isnan(s->action.high[i]) ||
                s->action.low[i] > s->action.high[i])
                return gb_error_set(err, GB_EINVAL, "%s: action bounds [%d] are [%g, %g]", name,
                                    i, (double)s->action.low[i], (double)s->action.high[i]);
    } else {
        return gb_error_set(err, GB_EINVAL, "%s: spec.action.kind %d is neither box nor discrete",
                            name, s->action.kind);
    }
    if (s->max_episode_steps < 0)
        return gb_error_set(err, GB_EINVAL, "%s: spec.max_episode_steps is negative", name);
    /* 0 x 0 with render given: this copy was not made to render (envs/env.h) */
    if (iface->render && (s->render_height != 0 || s->render_width != 0)) {
        if (s->render_height < 1 || s->render_width < 1 || s->render_height > 8192 ||
            s->render_width > 8192)
            return gb_error_set(err, GB_EINVAL, "%s: render() given but render size is %dx%d",
                                name, s->render_height, s->render_width);
    }
    return 0;
}

int gb_env_reward_in_range(const gb_env_spec *spec, double r)
{
    if (!(spec->flags & GB_ENV_REWARD_RANGE))
        return 1;
    /* a float32 computed in float64 (Pendulum's cost) may round a ulp past a bound */
    double lo = spec->reward_low, hi = spec->reward_high;
    return r >= lo - 1e-6 * fmax(1.0, fabs(lo)) && r <= hi + 1e-6 * fmax(1.0, fabs(hi));
}
