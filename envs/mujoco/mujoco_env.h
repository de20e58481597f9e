/* envs/mujoco/mujoco_env.h: what the MuJoCo locomotion environments share (Gymnasium's
 * MujocoEnv and its v5 tasks): a task descriptor, the copy's state, and create / reset / step /
 * render / set_state over any task. envs/mujoco/locomotion.c defines the four tasks.
 * defines: gb_mj_task, gb_mj_params, gb_mj_env, gb_mj_create, gb_mj_reset, gb_mj_step,
 *          gb_mj_destroy, gb_mj_render, gb_mj_parse_args, gb_mj_pairwise_sum_f,
 *          gb_mj_pairwise_sum_d */
#ifndef GB_ENVS_MUJOCO_ENV_H
#define GB_ENVS_MUJOCO_ENV_H

#include "envs/env.h"
#include "envs/mujoco/mujoco_lib.h"
#include "runtime/base/rng.h"

#include <stddef.h>
#include <stdint.h>

#define GB_MJ_RENDER_WIDTH 480
#define GB_MJ_RENDER_HEIGHT 320

/* The v5 constructor arguments (Gymnasium's names and defaults, per task). */
typedef struct gb_mj_params {
    char xml_file[512];
    long long frame_skip;
    double forward_reward_weight, ctrl_cost_weight, contact_cost_weight, healthy_reward;
    int terminate_when_unhealthy;
    double healthy_state_range[2], healthy_z_range[2], healthy_angle_range[2];
    double contact_force_range[2];
    double reset_noise_scale;
    int exclude_current_positions_from_observation;
    int include_cfrc_ext_in_observation;
    char main_body[64]; /* a body's index or name (Ant: the body whose x speed is rewarded) */
} gb_mj_params;

typedef struct gb_mj_env gb_mj_env;

/* One task (Hopper-v5, ...): its defaults and what differs between tasks. */
typedef struct gb_mj_task {
    const char *name;
    const char *const *allowed; /* the env.args it accepts (NULL-terminated) */
    gb_mj_params defaults;
    int skipped_qpos;      /* qpos elements exclude_current_positions_from_observation drops */
    int qvel_noise_normal; /* reset: qvel += scale * N(0, 1) (else U(-scale, scale)) */
    double qvel_clip;      /* observation: qvel clipped to [-clip, clip]; 0 = not clipped */
    int x_from_body;       /* forward speed from main_body's xpos (else qpos[0]) */
    int contact_cost;      /* reward has the contact cost term (needs cfrc_ext) */
    /* 1 when healthy (NULL: always healthy, no healthy reward, never terminates) */
    int (*healthy)(const gb_mj_env *e);
} gb_mj_task;

/* One copy. */
struct gb_mj_env {
    const gb_mj_task *task;
    const gb_mj_api *mj;
    const mjModel *m; /* shared by the process's copies of the same file (gb_mj_model_acquire) */
    mjData *d;
    gb_mj_params p;
    int nq, nv, nu, nbody;
    int skip;       /* qpos elements left out of the observation */
    int main_body;  /* resolved index */
    int need_rne;   /* call mj_rnePostConstraint after stepping (cfrc_ext is read) */
    int obs_dim;
    double dt;      /* model timestep * frame_skip */
    double *scratch;           /* the allocation act_low and act_high point into */
    float *act_low, *act_high; /* nu each, from actuator_ctrlrange */
    gb_rng rng;
};

/* Makes a copy of task: parses args, loads the model, fills *spec (float32 observations).
 * Returns NULL with a message naming the task in err (bad argument, no library, model that
 * does not load). Not on the hot path: it parses the model file. */
void *gb_mj_create(const gb_mj_task *task, const gb_env_args *args, uint64_t seed,
                   gb_env_spec *spec, char *err, size_t err_len);

/* gb_env_interface's reset, step, destroy, render for any task. */
int gb_mj_reset(void *env, const gb_env_buffers *b);
int gb_mj_step(void *env, const gb_env_buffers *b);
void gb_mj_destroy(void *env);
int gb_mj_render(void *env, uint8_t *rgb);

/* Writes the current observation (obs_dim floats). */
void gb_mj_observe(const gb_mj_env *e, float *obs);

/* Fills *p from args over task's defaults (keys already checked against task->allowed).
 * Returns 0, or -1 with a message naming the key in err. */
int gb_mj_parse_args(const gb_mj_task *task, const gb_env_args *args, gb_mj_params *p,
                     char *err, size_t err_len);

/* NumPy's sum of n values (its pairwise summation, 8 accumulators), so that costs round as
 * Gymnasium's np.sum does: float32 for actions, float64 for contact forces. */
float gb_mj_pairwise_sum_f(const float *a, size_t n);
double gb_mj_pairwise_sum_d(const double *a, size_t n);

#endif
