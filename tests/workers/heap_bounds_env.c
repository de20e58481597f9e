/* tests/workers/heap_bounds_env.c: a plugin whose action bounds live in each copy's own memory
 * (allocated by create, scribbled over and freed by destroy), as a real simulator's may: a
 * caller that reads the spec's bounds after destroying the copy reads garbage. */
#include <envs/env.h>

#include <stdlib.h>
#include <string.h>

typedef struct heap_env {
    float bounds[4]; /* low[2], high[2] */
} heap_env;

static void *heap_create(const gb_env_args *args, uint64_t seed, gb_env_spec *spec, char *err,
                         size_t err_len)
{
    (void)args;
    (void)seed;
    (void)err;
    (void)err_len;
    heap_env *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->bounds[0] = -2.0f;
    e->bounds[1] = -0.5f;
    e->bounds[2] = 2.0f;
    e->bounds[3] = 0.5f;
    memset(spec, 0, sizeof *spec);
    spec->agents = 1;
    spec->obs.dtype = GB_ENV_FLOAT32;
    spec->obs.ndim = 1;
    spec->obs.shape[0] = 3;
    spec->action.kind = GB_ENV_SPACE_BOX;
    spec->action.n = 2;
    spec->action.low = e->bounds;
    spec->action.high = e->bounds + 2;
    spec->max_episode_steps = 10;
    return e;
}

static int heap_reset(void *env, const gb_env_buffers *buf)
{
    (void)env;
    memset(buf->obs, 0, 3 * sizeof(float));
    return 0;
}

static int heap_step(void *env, const gb_env_buffers *buf)
{
    (void)env;
    memset(buf->obs, 0, 3 * sizeof(float));
    buf->rewards[0] = 0;
    buf->terminated[0] = 0;
    buf->truncated[0] = 0;
    return 0;
}

static void heap_destroy(void *env)
{
    heap_env *e = env;
    for (int i = 0; i < 4; i++)
        e->bounds[i] = 1234.0f; /* what a stale read would see, even without ASan */
    free(e);
}

static const gb_env_interface heap_interface = {
    GB_ENV_ABI_VERSION, sizeof(gb_env_interface), "HeapBounds-v0",
    "continuous test env whose bounds die with the copy", heap_create, heap_reset, heap_step,
    heap_destroy, NULL,
};

GB_ENV_EXPORT const gb_env_interface *gearbox_env_interface(void) { return &heap_interface; }
