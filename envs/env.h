/* envs/env.h: gearbox's environment ABI, the one header a simulator plugin needs (C99, no other
 * gearbox header). Versioned: GB_ENV_ABI_VERSION changes whenever a struct layout or a
 * function's meaning changes; the host refuses a plugin built against another version.
 * defines: gb_env_interface, gb_env_spec, gb_env_space, gb_env_buffers, gb_env_args,
 *          gb_env_arg, gb_env_arg_int, gb_env_arg_double, gb_env_dtype_size, GB_ENV_* constants
 *
 * The model (Gymnasium semantics, a C calling convention):
 *
 *   - An environment has `agents` agents (1 for a single-agent task). Every agent has the same
 *     observation space (a box: element type and shape) and the same action space (discrete n,
 *     or a float32 box of `dim` values with per-element bounds).
 *   - create(args, seed) makes one independent copy. All randomness comes from `seed`: the same
 *     seed and the same actions give the same observations, bit for bit.
 *   - reset() starts an episode; step() advances it by one step for all agents at once.
 *   - The caller owns every buffer (gb_env_buffers). A vector of copies points each copy at its
 *     slice of one contiguous array, so nothing is copied and nothing is allocated per step.
 *   - terminated (the task reached a terminal state: no bootstrapping) and truncated (cut short,
 *     e.g. a time limit: bootstrap from the final observation) are distinct, per agent.
 *     The time limit (spec.max_episode_steps) is applied by the host, like Gymnasium's TimeLimit
 *     wrapper; an environment sets truncated itself only for reasons of its own.
 *   - Turn-based games set GB_ENV_TURN_BASED and write, at every reset and step, which agents
 *     act next (buffers->acting[a] = 1). An agent that does not act has its action ignored and
 *     still receives an observation and a reward.
 *   - The episode of a copy ends when every agent is terminated or truncated; the host then
 *     resets it. An agent done before the others keeps receiving observations (the env's
 *     choice of what to show) and reward 0, and does not act.
 *
 * What gearbox's host does around these calls (envs/ring.c, workers/roles/acting.c,
 * workers/roles/worker.c), which a plugin may rely on and must allow for:
 *
 *   - Multi-agent done flags: the ring ends a copy's episode on the step where every agent's
 *     terminated or truncated is set *on that step*, and marks acting[a] = 0 for an agent whose
 *     flag is set. So once an agent is done, step() must keep writing its terminated (or
 *     truncated) = 1 on every later step of the episode: a flag that drops back to 0 makes the
 *     agent act again and, if it is the last one, the episode never ends (until the time limit).
 *   - Returns: the episode return the host reports (metrics, target_return) of a multi-agent copy
 *     is the sum over steps of the mean reward over its agents, not the sum over agents.
 *   - Continuous actions: gearbox's actors replace a NaN action value by 0 and then clip every
 *     value to the declared [low, high] before step() reads it (discrete actions outside [0, n)
 *     stop the actor with an error instead), so step() sees only in-bound values from them.
 *     Tools that drive the ring directly (gearbox env check, bench envs) pass actions as drawn,
 *     within the bounds.
 *   - Processes: create() is called in every actor worker (one copy per environment, each seed
 *     derived from experiment.seed, the actor and the copy's index), and also once in each
 *     trainer and policy worker (seeded with experiment.seed) only to read the spec, then
 *     destroyed without reset or step; `gearbox env check` and the benchmarks create copies
 *     too. create() must be cheap enough to call in every process and have no side effects
 *     outside the copy.
 *   - Plugin paths: env.plugin goes to dlopen as written, a name without a slash prefixed with
 *     "./" (never looked up on the library path): a relative path resolves against the working
 *     directory of each worker process, not the config file's folder. Workers keep the
 *     directory of the command that started them (`gearbox run`, `gearbox join`, srun), so use
 *     an absolute path when workers start elsewhere.
 *   - Shipped plugins: env.name NAME that is not a built-in loads gearbox_env_NAME.so from
 *     $GEARBOX_ENV_PLUGIN_PATH or gearbox's own plugin folder (envs/host.h,
 *     gb_env_shipped_find); `env.name: gymnasium` (envs/gymnasium) is one.
 *
 * A plugin is a shared library that exports one function named GB_ENV_ENTRY_SYMBOL:
 *
 *     #include <gearbox/envs/env.h>            // or "envs/env.h" inside the tree
 *     static const gb_env_interface iface = {GB_ENV_ABI_VERSION, sizeof(gb_env_interface),
 *                                            "MyEnv-v0", "what it is", my_create, my_reset,
 *                                            my_step, my_destroy, NULL};
 *     GB_ENV_EXPORT const gb_env_interface *gearbox_env_interface(void) { return &iface; }
 *
 * See envs/README.md and envs/examples/corridor.c for a complete, commented example. */
#ifndef GB_ENVS_ENV_H
#define GB_ENVS_ENV_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Version 1: the layout in this file. */
#define GB_ENV_ABI_VERSION 2u

/* The symbol a plugin exports: const gb_env_interface *gearbox_env_interface(void). */
#define GB_ENV_ENTRY_SYMBOL "gearbox_env_interface"

#if defined(_WIN32)
#define GB_ENV_EXPORT __declspec(dllexport)
#else
#define GB_ENV_EXPORT __attribute__((visibility("default")))
#endif

/* Element types of observation boxes. The values are stable (they equal gearbox's wire dtype
 * codes): never renumbered, only appended. */
enum {
    GB_ENV_FLOAT32 = 0,
    GB_ENV_FLOAT64 = 1,
    GB_ENV_INT8 = 2,
    GB_ENV_INT16 = 3,
    GB_ENV_INT32 = 4,
    GB_ENV_INT64 = 5,
    GB_ENV_UINT8 = 6,
    GB_ENV_UINT16 = 7,
};

/* Bytes per element of a GB_ENV_* type; 0 for an unknown value. */
static inline size_t gb_env_dtype_size(int32_t dtype)
{
    switch (dtype) {
    case GB_ENV_FLOAT32: return 4;
    case GB_ENV_FLOAT64: return 8;
    case GB_ENV_INT8: return 1;
    case GB_ENV_INT16: return 2;
    case GB_ENV_INT32: return 4;
    case GB_ENV_INT64: return 8;
    case GB_ENV_UINT8: return 1;
    case GB_ENV_UINT16: return 2;
    default: return 0;
    }
}

/* Space kinds. */
enum {
    GB_ENV_SPACE_BOX = 1,      /* observation: dtype + shape; action: float32[dim] + bounds */
    GB_ENV_SPACE_DISCRETE = 2, /* action only: one int32 in [0, n) per agent */
};

#define GB_ENV_MAX_DIMS 4 /* observation rank limit (e.g. frames: C, H, W) */

/* spec.flags */
enum {
    GB_ENV_TURN_BASED = 1u << 0,   /* writes buffers->acting at reset and step */
    GB_ENV_REWARD_RANGE = 1u << 1, /* every reward step writes lies in
                                      [spec.reward_low, spec.reward_high] */
};

/* The observation space: a box of `dtype` elements of `shape` (C order), per agent.
 * low/high: optional per-element bounds (numel doubles each, env-owned, valid until destroy),
 * NULL when unbounded or not worth stating; the host uses them for checks only. */
typedef struct gb_env_obs_space {
    int32_t dtype;                  /* GB_ENV_* element type */
    int32_t ndim;                   /* 1..GB_ENV_MAX_DIMS */
    int64_t shape[GB_ENV_MAX_DIMS]; /* each >= 1 */
    const double *low;
    const double *high;
} gb_env_obs_space;

/* The action space, per agent.
 *   discrete: kind = GB_ENV_SPACE_DISCRETE, n >= 1; an action is one int32 in [0, n).
 *   box:      kind = GB_ENV_SPACE_BOX, n = dim >= 1; an action is n float32 values; low/high
 *             point to n floats each (env-owned or static, valid until destroy), low <= high.
 *             The environment clips out-of-bound actions itself where its definition says so. */
typedef struct gb_env_action_space {
    int32_t kind;
    int32_t n;
    const float *low;
    const float *high;
} gb_env_action_space;

/* What create() declares about the copy it made. */
typedef struct gb_env_spec {
    int32_t agents; /* >= 1 */
    uint32_t flags; /* GB_ENV_TURN_BASED, ... */
    gb_env_obs_space obs;
    gb_env_action_space action;
    int64_t max_episode_steps; /* the environment's own time limit; 0 = none */
    int32_t render_height;     /* render() output size; 0 when render is NULL, or when this */
    int32_t render_width;      /* copy was not asked to render (an argument of the environment
                                * may ask for it, as the gymnasium plugin's render_mode does) */
    /* With GB_ENV_REWARD_RANGE in flags: the bounds of every reward step writes (each agent's,
     * each step; finite, low <= high). gearbox then refuses chunks holding a reward outside
     * them and reported episodes whose return no episode of that length can have: declare
     * them where the task defines them (CartPole: [0, 1]), never where they are a guess. */
    float reward_low, reward_high;
} gb_env_spec;

/* One copy's buffers, owned by the caller, sized from the spec (A = agents):
 *   actions:    A × action bytes (int32 each for discrete; n float32 each for a box); read by step
 *   obs:        A × numel(obs.shape) × dtype size; written by reset and step
 *   rewards:    A floats; written by step
 *   terminated: A bytes (0/1); written by step
 *   truncated:  A bytes (0/1); written by step (0 unless the env truncates for its own reasons)
 *   acting:     A bytes; written by reset and step when GB_ENV_TURN_BASED, else unused
 * The host sets the pointers once; an environment must write exactly these sizes. */
typedef struct gb_env_buffers {
    const void *actions;
    void *obs;
    float *rewards;
    uint8_t *terminated;
    uint8_t *truncated;
    uint8_t *acting;
} gb_env_buffers;

/* The environment's arguments: the `env.args` mapping from the YAML config, as text.
 * Pointers are valid only during create(); copy what you keep. */
typedef struct gb_env_args {
    int32_t count;
    const char *const *keys;
    const char *const *values;
} gb_env_args;

/* The interface a plugin (or a built-in) returns. Functions may not be called concurrently on
 * the same copy; different copies may be used from different threads. */
typedef struct gb_env_interface {
    uint32_t abi_version; /* GB_ENV_ABI_VERSION as the plugin was built */
    uint32_t struct_size; /* sizeof(gb_env_interface) as the plugin was built */
    const char *name;     /* e.g. "CartPole-v1" */
    const char *description;

    /* Makes one copy seeded with `seed` and fills *spec. Returns the copy, or NULL with a
     * NUL-terminated message in err (err_len bytes) for bad arguments or no memory. */
    void *(*create)(const gb_env_args *args, uint64_t seed, gb_env_spec *spec, char *err,
                    size_t err_len);
    /* Starts an episode: writes obs (and acting). Returns 0, or nonzero on failure. */
    int (*reset)(void *env, const gb_env_buffers *buf);
    /* One step: reads actions, writes obs, rewards, terminated, truncated (and acting).
     * Returns 0, or nonzero on failure. Must not allocate. */
    int (*step)(void *env, const gb_env_buffers *buf);
    /* Frees the copy (NULL is a no-op). */
    void (*destroy)(void *env);
    /* Optional (NULL when not provided): draws the current state as height × width × 3 RGB
     * bytes (spec.render_height × spec.render_width). Returns 0 or nonzero. */
    int (*render)(void *env, uint8_t *rgb);
} gb_env_interface;

/* Signature of the exported entry point. */
typedef const gb_env_interface *(*gb_env_entry_fn)(void);

/* The value for key in args, or NULL. */
static inline const char *gb_env_arg(const gb_env_args *args, const char *key)
{
    if (!args)
        return NULL;
    for (int32_t i = 0; i < args->count; i++)
        if (strcmp(args->keys[i], key) == 0)
            return args->values[i];
    return NULL;
}

/* Parses args[key] as an integer into *out (left at its default when absent).
 * Returns 0, or -1 when present but not an integer. */
static inline int gb_env_arg_int(const gb_env_args *args, const char *key, long long *out)
{
    const char *v = gb_env_arg(args, key);
    if (!v)
        return 0;
    char *end = NULL;
    long long x = strtoll(v, &end, 0);
    if (end == v || *end != '\0')
        return -1;
    *out = x;
    return 0;
}

/* Parses args[key] as a number into *out (left at its default when absent).
 * Returns 0, or -1 when present but not a number. */
static inline int gb_env_arg_double(const gb_env_args *args, const char *key, double *out)
{
    const char *v = gb_env_arg(args, key);
    if (!v)
        return 0;
    char *end = NULL;
    double x = strtod(v, &end);
    if (end == v || *end != '\0')
        return -1;
    *out = x;
    return 0;
}

#ifdef __cplusplus
}
#endif

#endif
