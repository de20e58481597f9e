/* envs/builtin.c: the table of built-in environments and their state hooks (the helpers every
 * built-in's create() shares: builtin_args.c). */
#include "envs/builtin.h"

#include <stdio.h>
#include <string.h>

/* Defined next to each environment (tests only, through gb_env_builtin_set_state). */
void gb_env_cartpole_set_state(void *env, const double *s, void *obs);
void gb_env_acrobot_set_state(void *env, const double *s, void *obs);
void gb_env_mountain_car_set_state(void *env, const double *s, void *obs);
void gb_env_mountain_car_continuous_set_state(void *env, const double *s, void *obs);
void gb_env_pendulum_set_state(void *env, const double *s, void *obs);
#ifdef GB_HAVE_ATARI
int gb_env_atari_lives(void *env);
int gb_env_atari_blind_step(void *env, const gb_env_buffers *buf);
#endif
#ifdef GB_HAVE_MUJOCO
int gb_env_mujoco_set_state(void *env, const double *state, int n, void *obs);
#endif

static const gb_env_interface *const builtins[] = {
    &gb_env_cartpole, &gb_env_acrobot, &gb_env_mountain_car, &gb_env_mountain_car_continuous,
    &gb_env_pendulum, &gb_env_spread,  &gb_env_breakout, &gb_env_cartpole_novel,
    &gb_env_recall,
#ifdef GB_HAVE_MUJOCO
    &gb_env_hopper, &gb_env_half_cheetah, &gb_env_walker2d, &gb_env_ant,
#endif
#ifdef GB_HAVE_ATARI
    &gb_env_atari,
#endif
};

const gb_env_interface *const *gb_env_builtins(int *count)
{
    *count = (int)(sizeof builtins / sizeof builtins[0]);
    return builtins;
}

const gb_env_interface *gb_env_builtin_find(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
        if (strcmp(builtins[i]->name, name) == 0)
            return builtins[i];
    return NULL;
}

int gb_env_builtin_set_state(const gb_env_interface *iface, void *env, const double *state,
                             int n, void *obs)
{
    static const struct {
        const gb_env_interface *iface;
        int n;
        void (*set)(void *, const double *, void *);
    } hooks[] = {
        {&gb_env_cartpole, 4, gb_env_cartpole_set_state},
        {&gb_env_cartpole_novel, 4, gb_env_cartpole_set_state},
        {&gb_env_acrobot, 4, gb_env_acrobot_set_state},
        {&gb_env_mountain_car, 2, gb_env_mountain_car_set_state},
        {&gb_env_mountain_car_continuous, 2, gb_env_mountain_car_continuous_set_state},
        {&gb_env_pendulum, 2, gb_env_pendulum_set_state},
    };
    for (size_t i = 0; i < sizeof hooks / sizeof hooks[0]; i++) {
        if (hooks[i].iface != iface)
            continue;
        if (n != hooks[i].n)
            return -1;
        hooks[i].set(env, state, obs);
        return 0;
    }
#ifdef GB_HAVE_MUJOCO
    /* their state size depends on the model: the hook checks n */
    if (iface == &gb_env_hopper || iface == &gb_env_half_cheetah || iface == &gb_env_walker2d ||
        iface == &gb_env_ant)
        return gb_env_mujoco_set_state(env, state, n, obs);
#endif
    return -1;
}

int gb_env_builtin_lives(const gb_env_interface *iface, void *env)
{
#ifdef GB_HAVE_ATARI
    if (iface == &gb_env_atari)
        return gb_env_atari_lives(env);
#else
    (void)iface, (void)env;
#endif
    return -1;
}

gb_env_blind_step_fn gb_env_builtin_blind_step(const gb_env_interface *iface)
{
#ifdef GB_HAVE_ATARI
    if (iface == &gb_env_atari)
        return gb_env_atari_blind_step;
#else
    (void)iface;
#endif
    return NULL;
}
