/* workers/roles/policy_request.c: the policy worker's check of an inference request (see
 * policy_request.h). */
#include "workers/roles/policy_request.h"

#include <string.h>

/* Checks an optional float32 [rows, width] input of name `name`. */
static int check_rows(const gb_tensor_desc *d, const char *name, int64_t width, gb_error *err)
{
    if (d->dtype != GB_DTYPE_FLOAT32 || d->rank != 2 || d->shape[1] != width)
        return gb_error_set(err, GB_EPROTO, "inference request: tensor %s must be float32 "
                            "[rows, %lld], got %s of rank %d%s%lld", name, (long long)width,
                            gb_dtype_name(d->dtype), d->rank, d->rank == 2 ? ", width " : "",
                            d->rank == 2 ? (long long)d->shape[1] : 0LL);
    return 0;
}

/* Checks tensor 0, the observations. */
static int check_obs(const gb_torch_space *space, const gb_tensor_desc *d, gb_error *err)
{
    if (strcmp(d->name, "obs") != 0 || d->dtype != space->obs_dtype ||
        d->rank != 1 + space->obs_ndim)
        return gb_error_set(err, GB_EPROTO, "inference request: expected tensor obs of rank %d "
                            "and dtype %s first (then noise, state)", 1 + space->obs_ndim,
                            gb_dtype_name(space->obs_dtype));
    for (int i = 0; i < space->obs_ndim; i++)
        if (d->shape[1 + i] != space->obs_shape[i])
            return gb_error_set(err, GB_EPROTO, "inference request: observation dimension %d is "
                                "%lld, expected %lld", i, (long long)d->shape[1 + i],
                                (long long)space->obs_shape[i]);
    return 0;
}

int gb_policy_request_check(const gb_torch_space *space, int64_t state_size,
                            const gb_infer_batch *b, gb_policy_inputs *in, gb_error *err)
{
    memset(in, 0, sizeof *in);
    if (b->ntensors < 1 || b->ntensors > 3)
        return gb_error_set(err, GB_EPROTO, "inference request: %d tensors (obs, then optional "
                            "noise and state)", b->ntensors);
    int rc = check_obs(space, &b->descs[0], err);
    if (rc)
        return rc;
    in->obs = b->inputs[0].data;
    for (int t = 1; t < b->ntensors; t++) {
        const gb_tensor_desc *d = &b->descs[t];
        if (strcmp(d->name, "noise") == 0 && !in->noise) {
            if (space->discrete)
                return gb_error_set(err, GB_EPROTO, "inference request: noise for a model with "
                                    "discrete actions");
            if ((rc = check_rows(d, "noise", space->action_dim, err)))
                return rc;
            in->noise = b->inputs[t].data;
        } else if (strcmp(d->name, "state") == 0 && !in->state) {
            if (state_size == 0)
                return gb_error_set(err, GB_EPROTO, "inference request: a state for a model "
                                    "without a core (policy.model.core none)");
            if ((rc = check_rows(d, "state", state_size, err)))
                return rc;
            in->state = b->inputs[t].data;
        } else {
            return gb_error_set(err, GB_EPROTO, "inference request: unexpected tensor '%s' "
                                "(obs, then optional noise and state, each once)", d->name);
        }
    }
    if (state_size > 0 && !in->state)
        return gb_error_set(err, GB_EPROTO, "inference request without a state: this model "
                            "has a core (policy.model.core), whose state [rows, %lld] float32 "
                            "each request must carry", (long long)state_size);
    return 0;
}

uint64_t gb_policy_request_row_bytes(const gb_torch_space *space, int64_t state_size)
{
    uint64_t obs = gb_dtype_size(space->obs_dtype);
    for (int d = 0; d < space->obs_ndim; d++)
        obs *= (uint64_t)space->obs_shape[d];
    const uint64_t noise = space->discrete ? 0 : (uint64_t)space->action_dim * sizeof(float);
    const uint64_t state = (uint64_t)state_size * sizeof(float);
    uint64_t row = obs > noise ? obs : noise;
    return row > state ? row : state;
}
