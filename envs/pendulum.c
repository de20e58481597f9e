/* envs/pendulum.c: Pendulum-v1, Gymnasium's reference dynamics: float64 state, the torque
 * clipped to [-2, 2] in float32 (the action's type), cost theta^2 + 0.1 thdot^2 + 0.001 u^2 with
 * theta normalised to [-pi, pi), semi-implicit Euler over dt = 0.05, speed clipped to 8,
 * float32 observation (cos, sin, thdot), never terminates, time limit 200.
 * args: g (gravity, default 10.0).
 * render: 300 x 300, the rod from its pivot (theta = 0 points up) and a bar for the last torque. */
#include "envs/builtin.h"
#include "envs/canvas.h"
#include "runtime/base/rng.h"

#include <math.h>
#include <stdlib.h>

#define PD_RENDER_SIZE 300

typedef struct pendulum {
    double th, thdot;
    float last_u; /* the last torque applied (clipped), for render */
    double g;
    gb_rng rng;
} pendulum;

static const double pd_high[3] = {1.0, 1.0, 8.0};
static const double pd_low[3] = {-1.0, -1.0, -8.0};
static const float pd_action_low[1] = {-2.0f};
static const float pd_action_high[1] = {2.0f};

static void *pd_create(const gb_env_args *args, uint64_t seed, gb_env_spec *spec, char *err,
                       size_t err_len)
{
    static const char *const allowed[] = {"g", NULL};
    if (gb_env_check_args(args, allowed, "Pendulum-v1", err, err_len))
        return NULL;
    double g = 10.0;
    if (gb_env_arg_double(args, "g", &g) || !isfinite(g))
        return gb_env_fail(err, err_len, "Pendulum-v1: g must be a finite number");
    pendulum *e = calloc(1, sizeof *e);
    if (!e)
        return gb_env_fail(err, err_len, "Pendulum-v1: out of memory");
    e->g = g;
    gb_rng_seed(&e->rng, seed);
    *spec = (gb_env_spec){.agents = 1,
                          .obs = {.dtype = GB_ENV_FLOAT32, .ndim = 1, .shape = {3},
                                  .low = pd_low, .high = pd_high},
                          .action = {.kind = GB_ENV_SPACE_BOX, .n = 1, .low = pd_action_low,
                                     .high = pd_action_high},
                          .max_episode_steps = 200,
                          .render_height = PD_RENDER_SIZE,
                          .render_width = PD_RENDER_SIZE,
                          /* -(angle^2 + 0.1 speed^2 + 0.001 torque^2): angle in [-pi, pi],
                           * speed in [-8, 8], torque in [-2, 2] */
                          .flags = GB_ENV_REWARD_RANGE,
                          .reward_low = (float)-(M_PI * M_PI + 6.4 + 0.004),
                          .reward_high = 0.0f};
    return e;
}

static void pd_obs(const pendulum *e, float *obs)
{
    obs[0] = (float)cos(e->th);
    obs[1] = (float)sin(e->th);
    obs[2] = (float)e->thdot;
}

static int pd_reset(void *env, const gb_env_buffers *b)
{
    pendulum *e = env;
    /* uniform(low=-[pi, 1], high=[pi, 1]) */
    e->th = -M_PI + (M_PI - -M_PI) * gb_rng_uniform(&e->rng);
    e->thdot = -1.0 + 2.0 * gb_rng_uniform(&e->rng);
    e->last_u = 0;
    pd_obs(e, b->obs);
    return 0;
}

/* NumPy's float64 remainder (sign of the divisor), as Python's % on np.float64. */
static double py_mod(double a, double b)
{
    double mod = fmod(a, b);
    if (mod != 0) {
        if ((b < 0) != (mod < 0))
            mod += b;
    } else {
        mod = copysign(0.0, b);
    }
    return mod;
}

static int pd_step(void *env, const gb_env_buffers *b)
{
    pendulum *e = env;
    const double dt = 0.05, m = 1.0, l = 1.0;
    float u = ((const float *)b->actions)[0];
    u = u < -2.0f ? -2.0f : (u > 2.0f ? 2.0f : u); /* np.clip on float32 */
    double an = py_mod(e->th + M_PI, 2 * M_PI) - M_PI;
    /* 0.001 * (u ** 2) is float32 arithmetic; the sum is float64 */
    double costs = an * an + 0.1 * (e->thdot * e->thdot) + (double)((float)0.001 * (u * u));
    double newthdot =
        e->thdot + (3 * e->g / (2 * l) * sin(e->th) + (double)((float)(3.0 / (m * (l * l))) * u)) *
                       dt;
    newthdot = newthdot < -8 ? -8 : (newthdot > 8 ? 8 : newthdot);
    double newth = e->th + newthdot * dt;
    e->last_u = u;
    e->th = newth;
    e->thdot = newthdot;
    pd_obs(e, b->obs);
    b->rewards[0] = (float)-costs;
    b->terminated[0] = 0;
    b->truncated[0] = 0;
    return 0;
}

/* The rod (length 1) spans 0.4 of the frame; theta = 0 is upright and theta grows
 * counter-clockwise, as in Gymnasium. The last torque shows as a bar under the pivot: to the
 * right for positive (counter-clockwise) torque, its length proportional to |u|. */
static int pd_render(void *env, uint8_t *rgb)
{
    const pendulum *e = env;
    gb_canvas c = {rgb, PD_RENDER_SIZE, PD_RENDER_SIZE};
    const double mid = PD_RENDER_SIZE / 2.0, len = PD_RENDER_SIZE * 0.4;
    gb_draw_fill(&c, GB_RGB(255, 255, 255));
    double bar = e->last_u / 2.0 * len;
    gb_draw_rect(&c, mid + fmin(0, bar), mid + len + 10, mid + fmax(0, bar), mid + len + 16,
                 GB_RGB(90, 90, 90));
    gb_draw_segment(&c, mid, mid, mid - len * sin(e->th), mid - len * cos(e->th), 16,
                    GB_RGB(204, 77, 77));
    gb_draw_disc(&c, mid, mid, 5, GB_RGB(0, 0, 0));
    return 0;
}

static void pd_destroy(void *env)
{
    free(env);
}

void gb_env_pendulum_set_state(void *env, const double *s, void *obs)
{
    pendulum *e = env;
    e->th = s[0];
    e->thdot = s[1];
    if (obs)
        pd_obs(e, obs);
}

const gb_env_interface gb_env_pendulum = {
    .abi_version = GB_ENV_ABI_VERSION,
    .struct_size = sizeof(gb_env_interface),
    .name = "Pendulum-v1",
    .description = "swing a pendulum up and hold it (Gymnasium Pendulum-v1)",
    .create = pd_create,
    .reset = pd_reset,
    .step = pd_step,
    .destroy = pd_destroy,
    .render = pd_render,
};
