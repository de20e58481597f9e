/* envs/mountain_car.c: MountainCar-v0 and MountainCarContinuous-v0, Gymnasium's reference
 * dynamics. The discrete one runs in float64 throughout. The continuous one stores its state as
 * float32 after every step and mixes float32 and float64 arithmetic exactly as Gymnasium does
 * under NumPy 2's promotion rules (NEP 50: a Python float next to a float32 becomes float32);
 * the comments mark where. Time limits: 200 and 999 steps.
 * args: goal_velocity (both; default 0).
 * render: 400 x 300, the hill y = sin(3x), the car on it and the flag at the goal. */
#include "envs/builtin.h"
#include "envs/canvas.h"
#include "runtime/base/rng.h"

#include <math.h>
#include <stdlib.h>

#define MC_MIN_POSITION -1.2
#define MC_MAX_POSITION 0.6
#define MC_MAX_SPEED 0.07
#define MC_RENDER_W 400
#define MC_RENDER_H 300

typedef struct mountain_car {
    double position, velocity;
    int f32_state; /* continuous: 0 right after reset (float64 state), 1 after a step */
    double goal_velocity;
    gb_rng rng;
} mountain_car;

static const double mc_low[2] = {(float)MC_MIN_POSITION, (float)-MC_MAX_SPEED};
static const double mc_high[2] = {(float)MC_MAX_POSITION, (float)MC_MAX_SPEED};
static const float mcc_action_low[1] = {-1.0f};
static const float mcc_action_high[1] = {1.0f};

static void *mc_create_common(const char *name, const gb_env_args *args, uint64_t seed,
                              char *err, size_t err_len)
{
    static const char *const allowed[] = {"goal_velocity", NULL};
    if (gb_env_check_args(args, allowed, name, err, err_len))
        return NULL;
    double goal_velocity = 0;
    if (gb_env_arg_double(args, "goal_velocity", &goal_velocity) || !isfinite(goal_velocity))
        return gb_env_fail(err, err_len, "%s: goal_velocity must be a number", name);
    mountain_car *e = calloc(1, sizeof *e);
    if (!e)
        return gb_env_fail(err, err_len, "%s: out of memory", name);
    e->goal_velocity = goal_velocity;
    gb_rng_seed(&e->rng, seed);
    return e;
}

static void *mc_create(const gb_env_args *args, uint64_t seed, gb_env_spec *spec, char *err,
                       size_t err_len)
{
    mountain_car *e = mc_create_common("MountainCar-v0", args, seed, err, err_len);
    if (!e)
        return NULL;
    *spec = (gb_env_spec){.agents = 1,
                          .obs = {.dtype = GB_ENV_FLOAT32, .ndim = 1, .shape = {2},
                                  .low = mc_low, .high = mc_high},
                          .action = {.kind = GB_ENV_SPACE_DISCRETE, .n = 3},
                          .max_episode_steps = 200,
                          .render_height = MC_RENDER_H,
                          .render_width = MC_RENDER_W,
                          .flags = GB_ENV_REWARD_RANGE, /* -1 every step */
                          .reward_low = -1.0f,
                          .reward_high = -1.0f};
    return e;
}

static void *mcc_create(const gb_env_args *args, uint64_t seed, gb_env_spec *spec, char *err,
                        size_t err_len)
{
    mountain_car *e = mc_create_common("MountainCarContinuous-v0", args, seed, err, err_len);
    if (!e)
        return NULL;
    *spec = (gb_env_spec){.agents = 1,
                          .obs = {.dtype = GB_ENV_FLOAT32, .ndim = 1, .shape = {2},
                                  .low = mc_low, .high = mc_high},
                          .action = {.kind = GB_ENV_SPACE_BOX, .n = 1, .low = mcc_action_low,
                                     .high = mcc_action_high},
                          .max_episode_steps = 999,
                          .render_height = MC_RENDER_H,
                          .render_width = MC_RENDER_W};
    /* no reward range: Gymnasium's reward takes the action as given, before its clipping
     * (100 at the goal less 0.1 a^2), so an action of any size has a reward */
    return e;
}

static void mc_obs(const mountain_car *e, float *obs)
{
    obs[0] = (float)e->position;
    obs[1] = (float)e->velocity;
}

static int mc_reset(void *env, const gb_env_buffers *b)
{
    mountain_car *e = env;
    e->position = -0.6 + 0.2 * gb_rng_uniform(&e->rng); /* uniform(-0.6, -0.4) */
    e->velocity = 0.0;
    e->f32_state = 0;
    mc_obs(e, b->obs);
    return 0;
}

static double clip(double x, double lo, double hi)
{
    return x < lo ? lo : (x > hi ? hi : x);
}

static int mc_step(void *env, const gb_env_buffers *b)
{
    mountain_car *e = env;
    int32_t action = *(const int32_t *)b->actions;
    if (action < 0 || action > 2)
        return -1; /* outside Discrete(3) */
    double velocity = e->velocity, position = e->position;
    velocity += (action - 1) * 0.001 + cos(3 * position) * (-0.0025);
    velocity = clip(velocity, -MC_MAX_SPEED, MC_MAX_SPEED);
    position += velocity;
    position = clip(position, MC_MIN_POSITION, MC_MAX_POSITION);
    if (position == MC_MIN_POSITION && velocity < 0)
        velocity = 0;
    int terminated = position >= 0.5 && velocity >= e->goal_velocity;
    e->position = position;
    e->velocity = velocity;
    mc_obs(e, b->obs);
    b->rewards[0] = -1.0f;
    b->terminated[0] = (uint8_t)terminated;
    b->truncated[0] = 0;
    return 0;
}

/* Continuous: follows Gymnasium's Python line by line. After a step the state is a float32
 * array; right after reset it is float64, which changes the types below on the first step. */
static int mcc_step(void *env, const gb_env_buffers *b)
{
    mountain_car *e = env;
    float a = ((const float *)b->actions)[0];
    int f32 = e->f32_state;
    /* force = min(max(action[0], -1.0), 1.0): stays float32 unless a bound (a Python float) wins */
    int force_is_f32 = !(a < -1.0f) && !(a > 1.0f);
    double c = f32 ? cos((double)(float)(3.0f * (float)e->position)) : cos(3 * e->position);
    double velocity, position;
    if (force_is_f32) {
        /* force * power (float32) - 0.0025 * cos(...) (Python float, made float32) */
        float term = a * (float)0.0015 - (float)(0.0025 * c);
        if (f32)
            velocity = (float)((float)e->velocity + term);
        else
            velocity = e->velocity + (double)term;
    } else {
        double force = a < -1.0f ? -1.0 : 1.0;
        double term = force * 0.0015 - 0.0025 * c;
        if (f32)
            velocity = (float)((float)e->velocity + (float)term);
        else
            velocity = e->velocity + term;
    }
    /* velocity is float32 when the state was (f32), else float64; the clip assigns a Python
     * float, which is what position += velocity then sees */
    if (f32 ? ((float)velocity > (float)MC_MAX_SPEED) : (velocity > MC_MAX_SPEED)) {
        velocity = MC_MAX_SPEED;
    }
    if (f32 ? ((float)velocity < (float)-MC_MAX_SPEED) : (velocity < -MC_MAX_SPEED)) {
        velocity = -MC_MAX_SPEED;
    }
    if (f32) /* float32 position + (float32 or Python float velocity) -> float32 */
        position = (float)((float)e->position + (float)velocity);
    else /* float64 position + anything -> float64 */
        position = e->position + velocity;
    if (f32 ? ((float)position > (float)MC_MAX_POSITION) : (position > MC_MAX_POSITION))
        position = MC_MAX_POSITION;
    if (f32 ? ((float)position < (float)MC_MIN_POSITION) : (position < MC_MIN_POSITION))
        position = MC_MIN_POSITION;
    if (position == MC_MIN_POSITION && velocity < 0)
        velocity = 0;
    int terminated = position >= 0.45 && velocity >= e->goal_velocity;
    double reward = terminated ? 100.0 : 0.0;
    reward -= pow((double)a, 2) * 0.1;
    e->position = (float)position; /* np.array([position, velocity], dtype=float32) */
    e->velocity = (float)velocity;
    e->f32_state = 1;
    mc_obs(e, b->obs);
    b->rewards[0] = (float)reward;
    b->terminated[0] = (uint8_t)terminated;
    b->truncated[0] = 0;
    return 0;
}

/* Frame coordinates of the hill point at position x: x in [-1.2, 0.6] spans the width, the
 * height sin(3x) * 0.45 + 0.55 (Gymnasium's _height) is scaled like x, measured from the
 * bottom with a margin. */
static void mc_frame_xy(double x, double *fx, double *fy)
{
    const double scale = MC_RENDER_W / (MC_MAX_POSITION - MC_MIN_POSITION);
    *fx = (x - MC_MIN_POSITION) * scale;
    *fy = MC_RENDER_H - 20 - (sin(3 * x) * 0.45 + 0.55) * scale;
}

/* The goal position drawn with a flag: 0.5 for the discrete task, 0.45 for the continuous. */
static int mc_render_at(const mountain_car *e, uint8_t *rgb, double goal)
{
    gb_canvas c = {rgb, MC_RENDER_W, MC_RENDER_H};
    gb_draw_fill(&c, GB_RGB(255, 255, 255));
    const double scale = MC_RENDER_W / (MC_MAX_POSITION - MC_MIN_POSITION);
    for (int px = 0; px < MC_RENDER_W; px++) { /* the ground under the curve */
        double fx, fy;
        mc_frame_xy(MC_MIN_POSITION + (px + 0.5) / scale, &fx, &fy);
        gb_draw_rect(&c, px, fy, px + 1, MC_RENDER_H, GB_RGB(170, 200, 150));
        gb_draw_rect(&c, px, fy - 1, px + 1, fy + 1, GB_RGB(0, 0, 0));
    }
    double gx, gy;
    mc_frame_xy(goal, &gx, &gy);
    gb_draw_rect(&c, gx - 1, gy - 40, gx + 1, gy, GB_RGB(0, 0, 0));
    gb_draw_rect(&c, gx + 1, gy - 40, gx + 21, gy - 28, GB_RGB(204, 204, 0));
    /* the car: a body along the slope, lifted by its wheels, with two wheels */
    double cx, cy, slope_angle = atan(cos(3 * e->position) * 3 * 0.45);
    mc_frame_xy(e->position, &cx, &cy);
    double ux = cos(slope_angle), uy = -sin(slope_angle); /* along the slope, frame axes */
    double nx = uy, ny = -ux;                             /* normal, pointing up the frame */
    const double half = 18, lift = 14;
    gb_draw_segment(&c, cx - half * ux + lift * nx, cy - half * uy + lift * ny,
                    cx + half * ux + lift * nx, cy + half * uy + lift * ny, 14, GB_RGB(0, 0, 0));
    gb_draw_disc(&c, cx - 11 * ux + 5 * nx, cy - 11 * uy + 5 * ny, 5, GB_RGB(128, 128, 128));
    gb_draw_disc(&c, cx + 11 * ux + 5 * nx, cy + 11 * uy + 5 * ny, 5, GB_RGB(128, 128, 128));
    return 0;
}

static int mc_render(void *env, uint8_t *rgb)
{
    return mc_render_at(env, rgb, 0.5);
}

static int mcc_render(void *env, uint8_t *rgb)
{
    return mc_render_at(env, rgb, 0.45);
}

static void mc_destroy(void *env)
{
    free(env);
}

void gb_env_mountain_car_set_state(void *env, const double *s, void *obs)
{
    mountain_car *e = env;
    e->position = s[0];
    e->velocity = s[1];
    e->f32_state = 0;
    if (obs)
        mc_obs(e, obs);
}

/* The continuous variant's state after a step is float32: a recorded mid-episode state is. */
void gb_env_mountain_car_continuous_set_state(void *env, const double *s, void *obs)
{
    mountain_car *e = env;
    e->position = s[0];
    e->velocity = s[1];
    e->f32_state = (double)(float)s[0] == s[0] && (double)(float)s[1] == s[1];
    if (obs)
        mc_obs(e, obs);
}

const gb_env_interface gb_env_mountain_car = {
    .abi_version = GB_ENV_ABI_VERSION,
    .struct_size = sizeof(gb_env_interface),
    .name = "MountainCar-v0",
    .description = "drive an underpowered car up a hill (Gymnasium MountainCar-v0)",
    .create = mc_create,
    .reset = mc_reset,
    .step = mc_step,
    .destroy = mc_destroy,
    .render = mc_render,
};

const gb_env_interface gb_env_mountain_car_continuous = {
    .abi_version = GB_ENV_ABI_VERSION,
    .struct_size = sizeof(gb_env_interface),
    .name = "MountainCarContinuous-v0",
    .description = "MountainCar with a continuous force (Gymnasium MountainCarContinuous-v0)",
    .create = mcc_create,
    .reset = mc_reset,
    .step = mcc_step,
    .destroy = mc_destroy,
    .render = mcc_render,
};
