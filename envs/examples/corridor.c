/* envs/examples/corridor.c: an example gearbox environment plugin, written to be copied.
 * A corridor of `length` cells; the agent starts at a random cell in the left half and must
 * reach the right end. Actions: Discrete(2): 0 left, 1 right. Observation float32[2]:
 * (position / (length - 1), 1 when at the left wall else 0). Reward -0.01 per step, +1 on
 * reaching the end (terminated). Time limit 4 × length steps (applied by gearbox).
 * args: length (integer, 2..1000000, default 10).
 *
 * Build: see envs/README.md (CMake find_package(gearbox) or pkg-config --cflags gearbox).
 * Check: gearbox env check ./corridor_env.so --args length=20 */
#include <gearbox/envs/env.h>

#include <stdio.h>
#include <stdlib.h>

typedef struct corridor {
    int64_t length;
    int64_t position;
    uint64_t rng; /* every copy owns its random state; seeded from create()'s seed */
} corridor;

/* SplitMix64: a small, good generator for a simulator's own randomness. */
static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static const float action_unused[1] = {0}; /* box bounds are not needed for Discrete */

static void *corridor_create(const gb_env_args *args, uint64_t seed, gb_env_spec *spec,
                             char *err, size_t err_len)
{
    long long length = 10;
    for (int32_t i = 0; i < args->count; i++) { /* refuse arguments we do not know */
        if (strcmp(args->keys[i], "length") != 0) {
            snprintf(err, err_len, "corridor: unknown argument '%s' (accepted: length)",
                     args->keys[i]);
            return NULL;
        }
    }
    if (gb_env_arg_int(args, "length", &length) != 0 || length < 2 || length > 1000000) {
        snprintf(err, err_len, "corridor: length must be an integer in [2, 1000000]");
        return NULL;
    }
    corridor *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, err_len, "corridor: out of memory");
        return NULL;
    }
    c->length = length;
    c->rng = seed;
    spec->agents = 1;
    spec->flags = 0;
    spec->obs.dtype = GB_ENV_FLOAT32;
    spec->obs.ndim = 1;
    spec->obs.shape[0] = 2;
    spec->obs.low = NULL; /* optional bounds, used by checks only */
    spec->obs.high = NULL;
    spec->action.kind = GB_ENV_SPACE_DISCRETE;
    spec->action.n = 2;
    spec->action.low = action_unused;
    spec->action.high = action_unused;
    spec->max_episode_steps = 4 * length;
    spec->render_height = 0; /* no render() */
    spec->render_width = 0;
    return c;
}

static void observe(const corridor *c, float *obs)
{
    obs[0] = (float)c->position / (float)(c->length - 1);
    obs[1] = c->position == 0 ? 1.0f : 0.0f;
}

static int corridor_reset(void *env, const gb_env_buffers *buf)
{
    corridor *c = env;
    c->position = (int64_t)(next_random(&c->rng) % (uint64_t)(c->length / 2));
    observe(c, buf->obs);
    return 0;
}

static int corridor_step(void *env, const gb_env_buffers *buf)
{
    corridor *c = env;
    int32_t action = ((const int32_t *)buf->actions)[0];
    if (action != 0 && action != 1)
        return -1; /* the host reports a failed step */
    c->position += action == 1 ? 1 : -1;
    if (c->position < 0)
        c->position = 0;
    int at_goal = c->position == c->length - 1;
    observe(c, buf->obs);
    buf->rewards[0] = at_goal ? 1.0f : -0.01f;
    buf->terminated[0] = (uint8_t)at_goal;
    buf->truncated[0] = 0; /* the time limit is gearbox's job */
    return 0;
}

static void corridor_destroy(void *env)
{
    free(env);
}

static const gb_env_interface corridor_interface = {
    GB_ENV_ABI_VERSION,
    sizeof(gb_env_interface),
    "Corridor-v0",
    "walk right to the end of a corridor; Discrete(2); obs float32[2]",
    corridor_create,
    corridor_reset,
    corridor_step,
    corridor_destroy,
    NULL, /* render */
};

GB_ENV_EXPORT const gb_env_interface *gearbox_env_interface(void)
{
    return &corridor_interface;
}
