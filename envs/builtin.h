/* envs/builtin.h: the environments built into gearbox, and hooks the dynamics tests use to put a
 * copy in a recorded state (the Gymnasium reference data sets start states explicitly, since
 * the two PRNGs differ).
 * defines: gb_env_builtins, gb_env_builtin_find, gb_env_builtin_set_state, gb_env_check_args,
 *          gb_env_builtin_lives, gb_env_builtin_blind_step, gb_env_fail, the gb_env_* built-in
 *          interfaces */
#ifndef GB_ENVS_BUILTIN_H
#define GB_ENVS_BUILTIN_H

#include "envs/env.h"

#include <stddef.h>

extern const gb_env_interface gb_env_cartpole;                /* CartPole-v1 */
extern const gb_env_interface gb_env_cartpole_novel;          /* CartPoleNoVel-v1 */
extern const gb_env_interface gb_env_acrobot;                 /* Acrobot-v1 */
extern const gb_env_interface gb_env_mountain_car;            /* MountainCar-v0 */
extern const gb_env_interface gb_env_mountain_car_continuous; /* MountainCarContinuous-v0 */
extern const gb_env_interface gb_env_pendulum;                /* Pendulum-v1 */
extern const gb_env_interface gb_env_spread;                  /* Spread-v0 (multi-agent) */
extern const gb_env_interface gb_env_breakout;                /* Breakout84-v0 (84x84 frames) */
extern const gb_env_interface gb_env_recall;                  /* Recall-v0 (memory task) */
/* MuJoCo locomotion (envs/mujoco), built in when gearbox was built with MuJoCo's headers
 * (GB_HAVE_MUJOCO; gb_env_builtin_find tells at run time); the library is opened at create. */
extern const gb_env_interface gb_env_hopper;       /* Hopper-v5 */
extern const gb_env_interface gb_env_half_cheetah; /* HalfCheetah-v5 */
extern const gb_env_interface gb_env_walker2d;     /* Walker2d-v5 */
extern const gb_env_interface gb_env_ant;          /* Ant-v5 */
/* Atari through the ALE (envs/atari; env.args.game), built in unless configured off
 * (GB_HAVE_ATARI); ale-py's library is opened at create. */
extern const gb_env_interface gb_env_atari;

/* The built-in interfaces, in listing order; *count receives their number. Static storage. */
const gb_env_interface *const *gb_env_builtins(int *count);

/* The built-in named name (exact, case-sensitive), or NULL. */
const gb_env_interface *gb_env_builtin_find(const char *name);

/* Sets the physical state of a copy created by built-in iface, as Gymnasium's env.unwrapped.state
 * holds it (CartPole, CartPoleNoVel: x, x_dot, theta, theta_dot; Acrobot: theta1, theta2,
 * dtheta1, dtheta2; MountainCar*: position, velocity; Pendulum: theta, theta_dot; the MuJoCo
 * environments: qpos then qvel (nq + nv values, as Gymnasium's set_state right after reset), or
 * the state a step leaves: qpos, qvel, qacc_warmstart, main body's xpos (nq + 2 nv + 3; see
 * envs/mujoco/mujoco_env.c)), and writes the matching
 * observation to obs (may be NULL). Returns 0, or -1 when iface has no settable state
 * or n is not its state size. For tests and tools, not the hot path. */
int gb_env_builtin_set_state(const gb_env_interface *iface, void *env, const double *state,
                             int n, void *obs);

/* The lives left in the game of a copy created by iface (Atari), or -1 when iface has no lives.
 * For the episodic-life wrapper (envs/wrap.h). */
int gb_env_builtin_lives(const gb_env_interface *iface, void *env);

/* A step whose observation nobody reads (a frame the frame-skip wrapper skips), for a built-in
 * that can leave it out (Atari: no screen fetched); NULL for the others, whose step() then
 * serves. Writes rewards and flags, and obs only on the step that ends the episode. */
typedef int (*gb_env_blind_step_fn)(void *env, const gb_env_buffers *buf);
gb_env_blind_step_fn gb_env_builtin_blind_step(const gb_env_interface *iface);

/* Rejects keys not in allowed (NULL-terminated): returns 0, or -1 with a message in err. */
int gb_env_check_args(const gb_env_args *args, const char *const *allowed, const char *env_name,
                      char *err, size_t err_len);

/* Writes a printf-style message to err (err_len bytes) and returns NULL, for create(). */
void *gb_env_fail(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
