/* envs/cartpole.c: CartPole-v1, Gymnasium's reference dynamics (Barto, Sutton & Anderson 1983):
 * float64 state, explicit Euler, float32 observations, reward 1 per step including the
 * terminating one, termination at |x| > 2.4 or |theta| > 12 degrees, time limit 500.
 * CartPoleNoVel-v1 is the same simulator with the two velocities left out of the observation
 * (float32[2]: x, theta), a partially observed task that needs memory (issue #31).
 * args: sutton_barto_reward (0/1: reward 0 per step and -1 at termination).
 * render: 400 x 300, the cart on its track and the pole, as Gymnasium draws it (scaled). */
#include "envs/builtin.h"
#include "envs/canvas.h"
#include "runtime/base/rng.h"

#include <math.h>
#include <stdlib.h>

typedef struct cartpole {
    double x, x_dot, theta, theta_dot;
    int steps_beyond_terminated; /* -1 while the episode runs (Gymnasium's None) */
    int sutton_barto;
    int no_velocities; /* CartPoleNoVel-v1: observe x and theta only */
    gb_rng rng;
} cartpole;

/* Constants exactly as Gymnasium derives them (the derived ones computed the same way). */
#define CP_GRAVITY 9.8
#define CP_MASSCART 1.0
#define CP_MASSPOLE 0.1
#define CP_TOTAL_MASS (CP_MASSPOLE + CP_MASSCART)
#define CP_LENGTH 0.5
#define CP_POLEMASS_LENGTH (CP_MASSPOLE * CP_LENGTH)
#define CP_FORCE_MAG 10.0
#define CP_TAU 0.02
#define CP_THETA_THRESHOLD (12 * 2 * M_PI / 360)
#define CP_X_THRESHOLD 2.4
#define CP_RENDER_W 400
#define CP_RENDER_H 300

static const double cp_obs_high[4] = {CP_X_THRESHOLD * 2, INFINITY, CP_THETA_THRESHOLD * 2,
                                      INFINITY};
static const double cp_obs_low[4] = {-CP_X_THRESHOLD * 2, -INFINITY, -CP_THETA_THRESHOLD * 2,
                                     -INFINITY};

/* The positions' bounds alone, for CartPoleNoVel-v1. */
static const double cp_novel_high[2] = {CP_X_THRESHOLD * 2, CP_THETA_THRESHOLD * 2};
static const double cp_novel_low[2] = {-CP_X_THRESHOLD * 2, -CP_THETA_THRESHOLD * 2};

/* Both interfaces' create(): no_velocities selects CartPoleNoVel-v1's observation. */
static void *cp_create_common(const gb_env_args *args, uint64_t seed, gb_env_spec *spec,
                              char *err, size_t err_len, int no_velocities)
{
    static const char *const allowed[] = {"sutton_barto_reward", NULL};
    const char *name = no_velocities ? "CartPoleNoVel-v1" : "CartPole-v1";
    if (gb_env_check_args(args, allowed, name, err, err_len))
        return NULL;
    long long sb = 0;
    if (gb_env_arg_int(args, "sutton_barto_reward", &sb) || (sb != 0 && sb != 1))
        return gb_env_fail(err, err_len, "%s: sutton_barto_reward must be 0 or 1", name);
    cartpole *e = calloc(1, sizeof *e);
    if (!e)
        return gb_env_fail(err, err_len, "%s: out of memory", name);
    e->sutton_barto = (int)sb;
    e->no_velocities = no_velocities;
    e->steps_beyond_terminated = -1;
    gb_rng_seed(&e->rng, seed);
    *spec = (gb_env_spec){.agents = 1,
                          .obs = {.dtype = GB_ENV_FLOAT32, .ndim = 1,
                                  .shape = {no_velocities ? 2 : 4},
                                  .low = no_velocities ? cp_novel_low : cp_obs_low,
                                  .high = no_velocities ? cp_novel_high : cp_obs_high},
                          .action = {.kind = GB_ENV_SPACE_DISCRETE, .n = 2},
                          .max_episode_steps = 500,
                          .render_height = CP_RENDER_H,
                          .render_width = CP_RENDER_W,
                          /* 1 a step (0 once terminated); Sutton & Barto's: 0, -1 at the end */
                          .flags = GB_ENV_REWARD_RANGE,
                          .reward_low = sb ? -1.0f : 0.0f,
                          .reward_high = sb ? 0.0f : 1.0f};
    return e;
}

static void *cp_create(const gb_env_args *args, uint64_t seed, gb_env_spec *spec, char *err,
                       size_t err_len)
{
    return cp_create_common(args, seed, spec, err, err_len, 0);
}

static void *cp_novel_create(const gb_env_args *args, uint64_t seed, gb_env_spec *spec,
                             char *err, size_t err_len)
{
    return cp_create_common(args, seed, spec, err, err_len, 1);
}

static inline void cp_obs(const cartpole *e, float *obs)
{
    if (e->no_velocities) {
        obs[0] = (float)e->x;
        obs[1] = (float)e->theta;
        return;
    }
    obs[0] = (float)e->x;
    obs[1] = (float)e->x_dot;
    obs[2] = (float)e->theta;
    obs[3] = (float)e->theta_dot;
}

static int cp_reset(void *env, const gb_env_buffers *b)
{
    cartpole *e = env;
    /* np_random.uniform(-0.05, 0.05, size=4) */
    e->x = -0.05 + 0.1 * gb_rng_uniform(&e->rng);
    e->x_dot = -0.05 + 0.1 * gb_rng_uniform(&e->rng);
    e->theta = -0.05 + 0.1 * gb_rng_uniform(&e->rng);
    e->theta_dot = -0.05 + 0.1 * gb_rng_uniform(&e->rng);
    e->steps_beyond_terminated = -1;
    cp_obs(e, b->obs);
    return 0;
}

static int cp_step(void *env, const gb_env_buffers *b)
{
    cartpole *e = env;
    int32_t action = *(const int32_t *)b->actions;
    if (action != 0 && action != 1)
        return -1; /* outside Discrete(2) (Gymnasium asserts) */
    double force = action == 1 ? CP_FORCE_MAG : -CP_FORCE_MAG;
    double costheta = cos(e->theta);
    double sintheta = sin(e->theta);
    /* Same operation order as Gymnasium, so that the float64 results agree to the last bit. */
    double temp =
        (force + CP_POLEMASS_LENGTH * (e->theta_dot * e->theta_dot) * sintheta) / CP_TOTAL_MASS;
    double thetaacc =
        (CP_GRAVITY * sintheta - costheta * temp) /
        (CP_LENGTH * (4.0 / 3.0 - CP_MASSPOLE * (costheta * costheta) / CP_TOTAL_MASS));
    double xacc = temp - CP_POLEMASS_LENGTH * thetaacc * costheta / CP_TOTAL_MASS;
    e->x = e->x + CP_TAU * e->x_dot;
    e->x_dot = e->x_dot + CP_TAU * xacc;
    e->theta = e->theta + CP_TAU * e->theta_dot;
    e->theta_dot = e->theta_dot + CP_TAU * thetaacc;

    int terminated = e->x < -CP_X_THRESHOLD || e->x > CP_X_THRESHOLD ||
                     e->theta < -CP_THETA_THRESHOLD || e->theta > CP_THETA_THRESHOLD;
    float reward;
    if (!terminated) {
        reward = e->sutton_barto ? 0.0f : 1.0f;
    } else if (e->steps_beyond_terminated < 0) {
        e->steps_beyond_terminated = 0;
        reward = e->sutton_barto ? -1.0f : 1.0f;
    } else { /* stepping past termination: undefined in Gymnasium, which gives 0 (or -1) */
        e->steps_beyond_terminated++;
        reward = e->sutton_barto ? -1.0f : 0.0f;
    }
    cp_obs(e, b->obs);
    b->rewards[0] = reward;
    b->terminated[0] = (uint8_t)terminated;
    b->truncated[0] = 0;
    return 0;
}

/* The world spans x in [-2.4, 2.4] across the frame; the pole (2 * CP_LENGTH long) is hinged at
 * the top of the cart; theta > 0 leans it to the right. */
static int cp_render(void *env, uint8_t *rgb)
{
    const cartpole *e = env;
    gb_canvas c = {rgb, CP_RENDER_W, CP_RENDER_H};
    const double scale = CP_RENDER_W / (2 * CP_X_THRESHOLD), track_y = 200;
    const double cart_w = 34, cart_h = 20, pole_len = scale * 2 * CP_LENGTH;
    double cx = CP_RENDER_W / 2.0 + e->x * scale;
    gb_draw_fill(&c, GB_RGB(255, 255, 255));
    gb_draw_rect(&c, 0, track_y, CP_RENDER_W, track_y + 1, GB_RGB(0, 0, 0));
    gb_draw_rect(&c, cx - cart_w / 2, track_y - cart_h / 2, cx + cart_w / 2, track_y + cart_h / 2,
                 GB_RGB(0, 0, 0));
    double hinge_y = track_y - cart_h / 2 + 2;
    gb_draw_segment(&c, cx, hinge_y, cx + pole_len * sin(e->theta),
                    hinge_y - pole_len * cos(e->theta), 7, GB_RGB(202, 152, 101));
    gb_draw_disc(&c, cx, hinge_y, 3.5, GB_RGB(129, 132, 203));
    return 0;
}

static void cp_destroy(void *env)
{
    free(env);
}

void gb_env_cartpole_set_state(void *env, const double *s, void *obs)
{
    cartpole *e = env;
    e->x = s[0];
    e->x_dot = s[1];
    e->theta = s[2];
    e->theta_dot = s[3];
    e->steps_beyond_terminated = -1;
    if (obs)
        cp_obs(e, obs);
}

const gb_env_interface gb_env_cartpole = {
    .abi_version = GB_ENV_ABI_VERSION,
    .struct_size = sizeof(gb_env_interface),
    .name = "CartPole-v1",
    .description = "balance a pole on a cart (Gymnasium CartPole-v1)",
    .create = cp_create,
    .reset = cp_reset,
    .step = cp_step,
    .destroy = cp_destroy,
    .render = cp_render,
};

const gb_env_interface gb_env_cartpole_novel = {
    .abi_version = GB_ENV_ABI_VERSION,
    .struct_size = sizeof(gb_env_interface),
    .name = "CartPoleNoVel-v1",
    .description = "CartPole-v1 observing positions only (needs memory)",
    .create = cp_novel_create,
    .reset = cp_reset,
    .step = cp_step,
    .destroy = cp_destroy,
    .render = cp_render,
};
