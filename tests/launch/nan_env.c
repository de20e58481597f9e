/* tests/launch/nan_env.c: an environment plugin whose observations turn NaN now and then, for
 * the launch test of what a run does with an environment that emits non-finite data
 * (run_nan_env.sh). A walk on a line: obs float32[4] = (position / 10, step / episode, 1, 0);
 * Discrete(2): 0 left, 1 right; reward +1 for a step right, -0.1 for a step left; gearbox
 * truncates each episode after `episode` steps. At every `nan_every`-th step of an episode
 * (nan_every 1: every step after the reset) the observation's first value is NaN.
 * args: nan_every (integer >= 1, default 50), episode (integer >= 2, default 200). */
#include <envs/env.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct nan_env {
    long long nan_every, episode;
    long long t;
    long long position;
} nan_env;

static const float action_unused[1] = {0};

static void *nan_create(const gb_env_args *args, uint64_t seed, gb_env_spec *spec, char *err,
                        size_t err_len)
{
    (void)seed;
    long long nan_every = 50, episode = 200;
    for (int32_t i = 0; i < args->count; i++)
        if (strcmp(args->keys[i], "nan_every") != 0 && strcmp(args->keys[i], "episode") != 0) {
            snprintf(err, err_len, "nan_env: unknown argument '%s' (accepted: nan_every, "
                     "episode)", args->keys[i]);
            return NULL;
        }
    if (gb_env_arg_int(args, "nan_every", &nan_every) != 0 || nan_every < 1 ||
        gb_env_arg_int(args, "episode", &episode) != 0 || episode < 2) {
        snprintf(err, err_len, "nan_env: nan_every must be an integer >= 1, episode >= 2");
        return NULL;
    }
    nan_env *e = calloc(1, sizeof *e);
    if (!e) {
        snprintf(err, err_len, "nan_env: out of memory");
        return NULL;
    }
    e->nan_every = nan_every;
    e->episode = episode;
    spec->agents = 1;
    spec->flags = 0;
    spec->obs.dtype = GB_ENV_FLOAT32;
    spec->obs.ndim = 1;
    spec->obs.shape[0] = 4;
    spec->obs.low = NULL;
    spec->obs.high = NULL;
    spec->action.kind = GB_ENV_SPACE_DISCRETE;
    spec->action.n = 2;
    spec->action.low = action_unused;
    spec->action.high = action_unused;
    spec->max_episode_steps = episode;
    spec->render_height = 0;
    spec->render_width = 0;
    return e;
}

static void observe(const nan_env *e, float *obs)
{
    obs[0] = e->t > 0 && e->t % e->nan_every == 0 ? NAN : (float)e->position / 10.0f;
    obs[1] = (float)e->t / (float)e->episode;
    obs[2] = 1.0f;
    obs[3] = 0.0f;
}

static int nan_reset(void *env, const gb_env_buffers *buf)
{
    nan_env *e = env;
    e->t = 0;
    e->position = 0;
    observe(e, buf->obs);
    return 0;
}

static int nan_step(void *env, const gb_env_buffers *buf)
{
    nan_env *e = env;
    int32_t action = ((const int32_t *)buf->actions)[0];
    if (action != 0 && action != 1)
        return -1;
    e->t++;
    e->position += action ? 1 : -1;
    observe(e, buf->obs);
    buf->rewards[0] = action ? 1.0f : -0.1f;
    buf->terminated[0] = 0;
    buf->truncated[0] = 0; /* the time limit is gearbox's */
    return 0;
}

static void nan_destroy(void *env) { free(env); }

static const gb_env_interface nan_interface = {
    GB_ENV_ABI_VERSION,
    sizeof(gb_env_interface),
    "NanWalk-v0",
    "a walk on a line whose observation is NaN every nan_every steps; Discrete(2)",
    nan_create,
    nan_reset,
    nan_step,
    nan_destroy,
    NULL,
};

GB_ENV_EXPORT const gb_env_interface *gearbox_env_interface(void) { return &nan_interface; }
