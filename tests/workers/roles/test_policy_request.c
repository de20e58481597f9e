/* tests/workers/roles/test_policy_request.c: what a policy worker takes from an inference request
 * (workers/roles/policy_request.h). A model with a core (S > 0) needs each request's state,
 * float32 [rows, S]: a request without it, or with another dtype, rank or width, is refused with
 * GB_EPROTO, as is a state sent to a model without a core; noise and state come in either order
 * and are found by name; obs stays first and is checked as before. The frame bound covers the
 * widest row of the three. */
#include "test.h"

#include "workers/roles/policy_request.h"

#include <string.h>

enum { ROWS = 3, OBS = 4, ACT = 2, S = 6 };

static float obs[ROWS * OBS], noise[ROWS * ACT], state[ROWS * S];
static double state64[ROWS * S];

static gb_torch_space space_of(int discrete)
{
    gb_torch_space sp = {.obs_dtype = GB_DTYPE_FLOAT32, .obs_ndim = 1, .obs_shape = {OBS},
                         .discrete = discrete, .n_actions = 2, .action_dim = discrete ? 0 : ACT};
    return sp;
}

/* Appends tensor name [ROWS, width] of dtype dt (rank 1 when width is 0) to the batch. */
static void add(gb_infer_batch *b, const char *name, gb_dtype dt, int64_t width, const void *data)
{
    gb_error err = {0};
    int t = b->ntensors++;
    int64_t shape[2] = {ROWS, width};
    CHECK_OK(gb_wire_set_tensor(&b->descs[t], name, dt, width ? 2 : 1, shape, &err));
    b->inputs[t].desc = &b->descs[t];
    b->inputs[t].data = data;
    b->inputs[t].bytes = (size_t)ROWS * (size_t)(width ? width : 1) * gb_dtype_size(dt);
}

static gb_infer_batch batch(void)
{
    gb_infer_batch b;
    memset(&b, 0, sizeof b);
    b.rows = ROWS;
    b.n_requests = 1;
    add(&b, "obs", GB_DTYPE_FLOAT32, OBS, obs);
    return b;
}

static int check(const gb_torch_space *sp, int64_t s, const gb_infer_batch *b,
                 gb_policy_inputs *in)
{
    gb_error err = {0};
    int rc = gb_policy_request_check(sp, s, b, in, &err);
    if (rc)
        CHECK(strstr(err.msg, "inference request") != NULL);
    return rc;
}

static void test_with_core(void)
{
    gb_torch_space sp = space_of(1);
    gb_policy_inputs in;
    gb_infer_batch b = batch();
    add(&b, "state", GB_DTYPE_FLOAT32, S, state);
    CHECK_EQ_INT(check(&sp, S, &b, &in), 0);
    CHECK(in.obs == obs && in.state == state && in.noise == NULL);

    b = batch(); /* no state */
    CHECK_EQ_INT(check(&sp, S, &b, &in), GB_EPROTO);
    b = batch(); /* float64 */
    add(&b, "state", GB_DTYPE_FLOAT64, S, state64);
    CHECK_EQ_INT(check(&sp, S, &b, &in), GB_EPROTO);
    b = batch(); /* narrower, wider */
    add(&b, "state", GB_DTYPE_FLOAT32, S - 1, state);
    CHECK_EQ_INT(check(&sp, S, &b, &in), GB_EPROTO);
    b = batch();
    add(&b, "state", GB_DTYPE_FLOAT32, S + 1, state);
    CHECK_EQ_INT(check(&sp, S, &b, &in), GB_EPROTO);
    b = batch(); /* rank 1 */
    add(&b, "state", GB_DTYPE_FLOAT32, 0, state);
    CHECK_EQ_INT(check(&sp, S, &b, &in), GB_EPROTO);
    b = batch(); /* twice */
    add(&b, "state", GB_DTYPE_FLOAT32, S, state);
    add(&b, "state", GB_DTYPE_FLOAT32, S, state);
    CHECK_EQ_INT(check(&sp, S, &b, &in), GB_EPROTO);
    b = batch(); /* another name */
    add(&b, "hidden", GB_DTYPE_FLOAT32, S, state);
    CHECK_EQ_INT(check(&sp, S, &b, &in), GB_EPROTO);
    /* noise is for continuous actions only */
    b = batch();
    add(&b, "noise", GB_DTYPE_FLOAT32, ACT, noise);
    add(&b, "state", GB_DTYPE_FLOAT32, S, state);
    CHECK_EQ_INT(check(&sp, S, &b, &in), GB_EPROTO);
}

static void test_continuous(void)
{
    gb_torch_space sp = space_of(0);
    gb_policy_inputs in;
    /* obs, noise, state in the actor's order, and the other way round */
    gb_infer_batch b = batch();
    add(&b, "noise", GB_DTYPE_FLOAT32, ACT, noise);
    add(&b, "state", GB_DTYPE_FLOAT32, S, state);
    CHECK_EQ_INT(check(&sp, S, &b, &in), 0);
    CHECK(in.noise == noise && in.state == state);
    b = batch();
    add(&b, "state", GB_DTYPE_FLOAT32, S, state);
    add(&b, "noise", GB_DTYPE_FLOAT32, ACT, noise);
    CHECK_EQ_INT(check(&sp, S, &b, &in), 0);
    CHECK(in.noise == noise && in.state == state);
    b = batch(); /* noise alone is no state */
    add(&b, "noise", GB_DTYPE_FLOAT32, ACT, noise);
    CHECK_EQ_INT(check(&sp, S, &b, &in), GB_EPROTO);
    /* without a core: noise or nothing, as before; a state is refused */
    CHECK_EQ_INT(check(&sp, 0, &b, &in), 0);
    CHECK(in.noise == noise && in.state == NULL);
    b = batch();
    CHECK_EQ_INT(check(&sp, 0, &b, &in), 0);
    CHECK(in.noise == NULL && in.state == NULL);
    add(&b, "state", GB_DTYPE_FLOAT32, S, state);
    CHECK_EQ_INT(check(&sp, 0, &b, &in), GB_EPROTO);
    b = batch(); /* noise of the wrong width */
    add(&b, "noise", GB_DTYPE_FLOAT32, ACT + 1, noise);
    CHECK_EQ_INT(check(&sp, 0, &b, &in), GB_EPROTO);
}

static void test_obs(void)
{
    gb_torch_space sp = space_of(1);
    gb_policy_inputs in;
    gb_infer_batch b;
    memset(&b, 0, sizeof b);
    b.rows = ROWS;
    CHECK_EQ_INT(check(&sp, 0, &b, &in), GB_EPROTO); /* no tensor */
    add(&b, "obs", GB_DTYPE_FLOAT32, OBS + 1, obs);
    CHECK_EQ_INT(check(&sp, 0, &b, &in), GB_EPROTO); /* wrong width */
    memset(&b, 0, sizeof b);
    add(&b, "state", GB_DTYPE_FLOAT32, S, state);
    add(&b, "obs", GB_DTYPE_FLOAT32, OBS, obs);
    CHECK_EQ_INT(check(&sp, S, &b, &in), GB_EPROTO); /* obs not first */
}

static void test_row_bytes(void)
{
    gb_torch_space sp = space_of(0);
    CHECK_EQ_INT(gb_policy_request_row_bytes(&sp, 0), OBS * 4);
    CHECK_EQ_INT(gb_policy_request_row_bytes(&sp, S), S * 4);
    sp.obs_dtype = GB_DTYPE_UINT8; /* 4 bytes of obs, 8 of noise */
    CHECK_EQ_INT(gb_policy_request_row_bytes(&sp, 0), ACT * 4);
}

int main(void)
{
    TEST_RUN(test_with_core);
    TEST_RUN(test_continuous);
    TEST_RUN(test_obs);
    TEST_RUN(test_row_bytes);
    return test_main_result();
}
