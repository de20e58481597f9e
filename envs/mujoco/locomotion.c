/* envs/mujoco/locomotion.c: Hopper-v5, HalfCheetah-v5, Walker2d-v5 and Ant-v5 as Gymnasium
 * 1.4.0 defines them (the *_v5.py files of gymnasium/envs/mujoco): defaults, accepted arguments
 * and the healthy conditions; the shared step, reward and reset are in mujoco_env.c.
 *
 *   reward = forward_reward_weight * dx/dt + healthy_reward * healthy
 *            - ctrl_cost_weight * sum(action^2) [- contact_cost_weight * sum(clip(cfrc_ext)^2)]
 *   terminated = terminate_when_unhealthy and not healthy; time limit 1000 (the host's).
 * Observations are float32: qpos (without the x coordinate, Ant also y), qvel (Hopper and
 * Walker2d clip it to [-10, 10]), Ant also the clipped external contact forces of its bodies. */
#include "envs/mujoco/mujoco_env.h"

#include <math.h>

/* Hopper: every state value after qpos[1] within healthy_state_range, height and torso angle
 * strictly inside their ranges. */
static int hopper_healthy(const gb_mj_env *e)
{
    const gb_mj_params *p = &e->p;
    const double *qpos = e->d->qpos, *qvel = e->d->qvel;
    const double lo = p->healthy_state_range[0], hi = p->healthy_state_range[1];
    for (int i = 2; i < e->nq + e->nv; i++) {
        double s = i < e->nq ? qpos[i] : qvel[i - e->nq];
        if (!(lo < s && s < hi))
            return 0;
    }
    return p->healthy_z_range[0] < qpos[1] && qpos[1] < p->healthy_z_range[1] &&
           p->healthy_angle_range[0] < qpos[2] && qpos[2] < p->healthy_angle_range[1];
}

/* Walker2d: height and torso angle strictly inside their ranges. */
static int walker_healthy(const gb_mj_env *e)
{
    const gb_mj_params *p = &e->p;
    const double *qpos = e->d->qpos;
    return p->healthy_z_range[0] < qpos[1] && qpos[1] < p->healthy_z_range[1] &&
           p->healthy_angle_range[0] < qpos[2] && qpos[2] < p->healthy_angle_range[1];
}

/* Ant: a finite state and the torso's height within healthy_z_range (bounds included). */
static int ant_healthy(const gb_mj_env *e)
{
    for (int i = 0; i < e->nq; i++)
        if (!isfinite(e->d->qpos[i]))
            return 0;
    for (int i = 0; i < e->nv; i++)
        if (!isfinite(e->d->qvel[i]))
            return 0;
    const double z = e->d->qpos[2];
    return e->p.healthy_z_range[0] <= z && z <= e->p.healthy_z_range[1];
}

#define hopper_name "Hopper-v5"
#define half_cheetah_name "HalfCheetah-v5"
#define walker2d_name "Walker2d-v5"
#define ant_name "Ant-v5"

#define COMMON_ARGS                                                                               \
    "xml_file", "frame_skip", "forward_reward_weight", "ctrl_cost_weight", "reset_noise_scale",   \
        "exclude_current_positions_from_observation"
#define HEALTH_ARGS "healthy_reward", "terminate_when_unhealthy", "healthy_z_range"

static const char *const hopper_args[] = {COMMON_ARGS, HEALTH_ARGS, "healthy_state_range",
                                          "healthy_angle_range", NULL};
static const char *const cheetah_args[] = {COMMON_ARGS, NULL};
static const char *const walker_args[] = {COMMON_ARGS, HEALTH_ARGS, "healthy_angle_range", NULL};
static const char *const ant_args[] = {COMMON_ARGS,          HEALTH_ARGS,
                                       "contact_cost_weight", "contact_force_range",
                                       "main_body",          "include_cfrc_ext_in_observation",
                                       NULL};

static const gb_mj_task hopper = {
    .name = hopper_name,
    .allowed = hopper_args,
    .defaults = {.xml_file = "hopper.xml", .frame_skip = 4, .forward_reward_weight = 1.0,
                 .ctrl_cost_weight = 1e-3, .healthy_reward = 1.0, .terminate_when_unhealthy = 1,
                 .healthy_state_range = {-100.0, 100.0}, .healthy_z_range = {0.7, INFINITY},
                 .healthy_angle_range = {-0.2, 0.2}, .reset_noise_scale = 5e-3,
                 .exclude_current_positions_from_observation = 1, .main_body = "1"},
    .skipped_qpos = 1,
    .qvel_clip = 10.0,
    .healthy = hopper_healthy,
};

static const gb_mj_task half_cheetah = {
    .name = half_cheetah_name,
    .allowed = cheetah_args,
    .defaults = {.xml_file = "half_cheetah.xml", .frame_skip = 5, .forward_reward_weight = 1.0,
                 .ctrl_cost_weight = 0.1, .reset_noise_scale = 0.1,
                 .exclude_current_positions_from_observation = 1, .main_body = "1"},
    .skipped_qpos = 1,
    .qvel_noise_normal = 1,
};

static const gb_mj_task walker2d = {
    .name = walker2d_name,
    .allowed = walker_args,
    .defaults = {.xml_file = "walker2d_v5.xml", .frame_skip = 4, .forward_reward_weight = 1.0,
                 .ctrl_cost_weight = 1e-3, .healthy_reward = 1.0, .terminate_when_unhealthy = 1,
                 .healthy_z_range = {0.8, 2.0}, .healthy_angle_range = {-1.0, 1.0},
                 .reset_noise_scale = 5e-3, .exclude_current_positions_from_observation = 1,
                 .main_body = "1"},
    .skipped_qpos = 1,
    .qvel_clip = 10.0,
    .healthy = walker_healthy,
};

static const gb_mj_task ant = {
    .name = ant_name,
    .allowed = ant_args,
    .defaults = {.xml_file = "ant.xml", .frame_skip = 5, .forward_reward_weight = 1.0,
                 .ctrl_cost_weight = 0.5, .contact_cost_weight = 5e-4, .healthy_reward = 1.0,
                 .terminate_when_unhealthy = 1, .healthy_z_range = {0.2, 1.0},
                 .contact_force_range = {-1.0, 1.0}, .reset_noise_scale = 0.1,
                 .exclude_current_positions_from_observation = 1,
                 .include_cfrc_ext_in_observation = 1, .main_body = "1"},
    .skipped_qpos = 2,
    .qvel_noise_normal = 1,
    .x_from_body = 1,
    .contact_cost = 1,
    .healthy = ant_healthy,
};

#define TASK_CREATE(fn, task)                                                                     \
    static void *fn(const gb_env_args *args, uint64_t seed, gb_env_spec *spec, char *err,       \
                    size_t err_len)                                                               \
    {                                                                                             \
        return gb_mj_create(&task, args, seed, spec, err, err_len);                               \
    }
TASK_CREATE(hopper_create, hopper)
TASK_CREATE(half_cheetah_create, half_cheetah)
TASK_CREATE(walker2d_create, walker2d)
TASK_CREATE(ant_create, ant)

#define TASK_INTERFACE(var, task, create_fn, what)                                                \
    const gb_env_interface var = {                                                                \
        .abi_version = GB_ENV_ABI_VERSION,                                                        \
        .struct_size = sizeof(gb_env_interface),                                                  \
        .name = task##_name,                                                                      \
        .description = what,                                                                      \
        .create = create_fn,                                                                      \
        .reset = gb_mj_reset,                                                                     \
        .step = gb_mj_step,                                                                       \
        .destroy = gb_mj_destroy,                                                                 \
        .render = gb_mj_render,                                                                   \
    }
TASK_INTERFACE(gb_env_hopper, hopper, hopper_create,
               "one-legged hopper moving forward (MuJoCo, Gymnasium Hopper-v5)");
TASK_INTERFACE(gb_env_half_cheetah, half_cheetah, half_cheetah_create,
               "2-D cheetah running forward (MuJoCo, Gymnasium HalfCheetah-v5)");
TASK_INTERFACE(gb_env_walker2d, walker2d, walker2d_create,
               "2-D biped walking forward (MuJoCo, Gymnasium Walker2d-v5)");
TASK_INTERFACE(gb_env_ant, ant, ant_create,
               "four-legged ant walking forward in 3-D (MuJoCo, Gymnasium Ant-v5)");
