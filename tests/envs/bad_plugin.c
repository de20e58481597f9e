/* tests/envs/bad_plugin.c: environment plugins that misbehave in one way each, built once per
 * BAD_MODE, for the plugin-loader and `gearbox env check` tests. Mode 0 behaves. */
#include "envs/env.h"

#include <stdio.h>
#include <stdlib.h>

#define GOOD 0
#define NAN_OBS 1     /* a NaN in the observation at step 5 */
#define CRASH_STEP 2  /* a segmentation fault in step 3 */
#define WRONG_VERSION 3
#define NO_SYMBOL 4
#define INVALID_SPACE 5 /* Discrete(0) */
#define NONDETERMINISTIC 6
#define SHORT_WRITE 7 /* writes 3 of its 4 observation values */
#define OVERRUN 8     /* writes a 5th observation value */
#define HANG 9        /* loops forever in step 2 */
#define STEP_FAILS 10 /* step returns -1 at step 7 */
#define EXIT_IN_STEP 11
#define REWARD_RANGE 12 /* declares rewards in [0, 1], gives 2 at step 6 */
#define BAD_RANGE 13    /* declares a reward range [1, 0] */

#ifndef BAD_MODE
#define BAD_MODE GOOD
#endif

typedef struct bad {
    int64_t t;
    uint64_t rng;
} bad;

static uint64_t global_counter; /* shared between copies: what makes NONDETERMINISTIC so */

static void *bad_create(const gb_env_args *args, uint64_t seed, gb_env_spec *spec, char *err,
                        size_t err_len)
{
    (void)args;
    (void)err;
    (void)err_len;
    bad *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->rng = seed;
    spec->agents = 1;
    spec->obs.dtype = GB_ENV_FLOAT32;
    spec->obs.ndim = 1;
    spec->obs.shape[0] = 4;
    spec->action.kind = GB_ENV_SPACE_DISCRETE;
    spec->action.n = BAD_MODE == INVALID_SPACE ? 0 : 2;
    spec->max_episode_steps = 50;
    if (BAD_MODE == REWARD_RANGE || BAD_MODE == BAD_RANGE) {
        spec->flags = GB_ENV_REWARD_RANGE;
        spec->reward_low = BAD_MODE == BAD_RANGE ? 1.0f : 0.0f;
        spec->reward_high = BAD_MODE == BAD_RANGE ? 0.0f : 1.0f;
    }
    return b;
}

static void observe(bad *b, float *obs)
{
    int n = BAD_MODE == SHORT_WRITE ? 3 : BAD_MODE == OVERRUN ? 5 : 4;
    for (int i = 0; i < n; i++)
        obs[i] = (float)(b->t + i) * 0.01f;
    if (BAD_MODE == NONDETERMINISTIC)
        obs[0] += (float)(global_counter++);
}

static int bad_reset(void *env, const gb_env_buffers *buf)
{
    bad *b = env;
    b->t = 0;
    observe(b, buf->obs);
    return 0;
}

static int bad_step(void *env, const gb_env_buffers *buf)
{
    bad *b = env;
    b->t++;
    if (BAD_MODE == CRASH_STEP && b->t == 3) {
        volatile int *p = NULL;
        *p = 1;
    }
    if (BAD_MODE == HANG && b->t == 2)
        for (volatile int spin = 1; spin;)
            ;
    if (BAD_MODE == STEP_FAILS && b->t == 7)
        return -1;
    if (BAD_MODE == EXIT_IN_STEP && b->t == 4)
        exit(0);
    observe(b, buf->obs);
    if (BAD_MODE == NAN_OBS && b->t == 5)
        ((float *)buf->obs)[1] = 0.0f / 0.0f;
    buf->rewards[0] = BAD_MODE == REWARD_RANGE && b->t == 6 ? 2.0f : 1.0f;
    buf->terminated[0] = b->t >= 20;
    buf->truncated[0] = 0;
    return 0;
}

static void bad_destroy(void *env)
{
    free(env);
}

static const gb_env_interface iface = {
    BAD_MODE == WRONG_VERSION ? 999u : GB_ENV_ABI_VERSION,
    sizeof(gb_env_interface),
    "Bad-v0",
    "misbehaves on purpose",
    bad_create,
    bad_reset,
    bad_step,
    bad_destroy,
    NULL,
};

#if BAD_MODE == NO_SYMBOL
GB_ENV_EXPORT const gb_env_interface *gearbox_env_interface_v0(void)
#else
GB_ENV_EXPORT const gb_env_interface *gearbox_env_interface(void)
#endif
{
    return &iface;
}
