/* workers/roles/policy_request.h: what a policy worker takes from an inference request, checked
 * before the model sees it: the observations, with continuous actions the actors' exploration
 * noise (actors.noise_correlation), and with a recurrent core (policy.model.core) each row's
 * state, which lives with the actor and travels with every request (workers/roles/acting.h).
 * defines: gb_policy_inputs, gb_policy_request_check, gb_policy_request_row_bytes */
#ifndef GB_WORKERS_POLICY_REQUEST_H
#define GB_WORKERS_POLICY_REQUEST_H

#include "runtime/base/error.h"
#include "runtime/streams/inference.h"
#include "workers/torch/bridge.h"

#include <stdint.h>

/* A checked request's inputs: views into the batch, valid while it is. */
typedef struct gb_policy_inputs {
    const void *obs;     /* [rows, *obs_shape] in the space's dtype */
    const float *noise;  /* [rows, action dim], or NULL: the model draws its own */
    const float *state;  /* [rows, S] each row's state entering this step; NULL when S = 0 */
} gb_policy_inputs;

/* Checks a (merged) request against the model: tensor 0 is "obs" of the space's dtype and
 * shape; then, in any order, at most one "noise" (float32 [rows, action dim], continuous actions
 * only) and one "state" (float32 [rows, state_size]), which a model with a core
 * (state_size > 0) requires and one without refuses; nothing else. Fills *in. Returns 0 or
 * GB_EPROTO naming the tensor and what was expected. Allocates nothing. */
int gb_policy_request_check(const gb_torch_space *space, int64_t state_size,
                            const gb_infer_batch *b, gb_policy_inputs *in, gb_error *err);

/* The widest row a request to this model can carry: one observation, one row of noise, or one
 * row of state (the inference server's frame bound is an actor's rows times this). */
uint64_t gb_policy_request_row_bytes(const gb_torch_space *space, int64_t state_size);

#endif
