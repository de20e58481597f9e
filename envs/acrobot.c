/* envs/acrobot.c: Acrobot-v1, Gymnasium's reference dynamics ("book" variant, no torque noise):
 * RK4 over dt = 0.2 in float64, angles wrapped to [-pi, pi], velocities bounded to 4pi and 9pi,
 * observation float32 (cos t1, sin t1, cos t2, sin t2, dt1, dt2), reward -1 per step and 0 on
 * the terminating one, termination when -cos(t1) - cos(t1 + t2) > 1, time limit 500.
 * Gymnasium draws the start state in float64 and stores it as float32; so does this.
 * render: 300 x 300, both links hanging from the pivot and the goal line one link above it. */
#include "envs/builtin.h"
#include "envs/canvas.h"
#include "runtime/base/rng.h"

#include <math.h>
#include <stdlib.h>

typedef struct acrobot {
    double s[4]; /* theta1, theta2, dtheta1, dtheta2 */
    gb_rng rng;
} acrobot;

#define AC_DT 0.2
#define AC_RENDER_SIZE 300
#define AC_MAX_VEL_1 (4 * M_PI)
#define AC_MAX_VEL_2 (9 * M_PI)

static const double ac_high[6] = {1.0, 1.0, 1.0, 1.0, (float)AC_MAX_VEL_1, (float)AC_MAX_VEL_2};
static const double ac_low[6] = {-1.0, -1.0, -1.0, -1.0, -(float)AC_MAX_VEL_1,
                                 -(float)AC_MAX_VEL_2};

static void *ac_create(const gb_env_args *args, uint64_t seed, gb_env_spec *spec, char *err,
                       size_t err_len)
{
    static const char *const allowed[] = {NULL};
    if (gb_env_check_args(args, allowed, "Acrobot-v1", err, err_len))
        return NULL;
    acrobot *e = calloc(1, sizeof *e);
    if (!e)
        return gb_env_fail(err, err_len, "Acrobot-v1: out of memory");
    gb_rng_seed(&e->rng, seed);
    *spec = (gb_env_spec){.agents = 1,
                          .obs = {.dtype = GB_ENV_FLOAT32, .ndim = 1, .shape = {6},
                                  .low = ac_low, .high = ac_high},
                          .action = {.kind = GB_ENV_SPACE_DISCRETE, .n = 3},
                          .max_episode_steps = 500,
                          .render_height = AC_RENDER_SIZE,
                          .render_width = AC_RENDER_SIZE,
                          .flags = GB_ENV_REWARD_RANGE, /* -1 a step, 0 at the goal */
                          .reward_low = -1.0f,
                          .reward_high = 0.0f};
    return e;
}

static void ac_obs(const acrobot *e, float *obs)
{
    obs[0] = (float)cos(e->s[0]);
    obs[1] = (float)sin(e->s[0]);
    obs[2] = (float)cos(e->s[1]);
    obs[3] = (float)sin(e->s[1]);
    obs[4] = (float)e->s[2];
    obs[5] = (float)e->s[3];
}

/* Gymnasium's _dsdt with the constants folded the way Python evaluates them
 * (m1 = m2 = l1 = 1, lc1 = lc2 = 0.5, I1 = I2 = 1, g = 9.8). */
static void ac_dsdt(const double *s, double a, double *d)
{
    const double m1 = 1.0, m2 = 1.0, l1 = 1.0, lc1 = 0.5, lc2 = 0.5, I1 = 1.0, I2 = 1.0,
                 g = 9.8;
    double theta1 = s[0], theta2 = s[1], dtheta1 = s[2], dtheta2 = s[3];
    double d1 = m1 * (lc1 * lc1) + m2 * ((l1 * l1) + (lc2 * lc2) + 2 * l1 * lc2 * cos(theta2)) +
                I1 + I2;
    double d2 = m2 * ((lc2 * lc2) + l1 * lc2 * cos(theta2)) + I2;
    double phi2 = m2 * lc2 * g * cos(theta1 + theta2 - M_PI / 2.0);
    double phi1 = -m2 * l1 * lc2 * (dtheta2 * dtheta2) * sin(theta2) -
                  2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * sin(theta2) +
                  (m1 * lc1 + m2 * l1) * g * cos(theta1 - M_PI / 2) + phi2;
    double ddtheta2 =
        (a + d2 / d1 * phi1 - m2 * l1 * lc2 * (dtheta1 * dtheta1) * sin(theta2) - phi2) /
        (m2 * (lc2 * lc2) + I2 - (d2 * d2) / d1);
    double ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
    d[0] = dtheta1;
    d[1] = dtheta2;
    d[2] = ddtheta1;
    d[3] = ddtheta2;
}

static double ac_wrap(double x, double m, double M)
{
    double diff = M - m;
    while (x > M)
        x = x - diff;
    while (x < m)
        x = x + diff;
    return x;
}

static double ac_bound(double x, double m, double M)
{
    /* Python's min(max(x, m), M) */
    double t = m > x ? m : x;
    return M < t ? M : t;
}

static int ac_reset(void *env, const gb_env_buffers *b)
{
    acrobot *e = env;
    for (int i = 0; i < 4; i++) /* uniform(-0.1, 0.1, size=4).astype(float32) */
        e->s[i] = (float)(-0.1 + 0.2 * gb_rng_uniform(&e->rng));
    ac_obs(e, b->obs);
    return 0;
}

static int ac_step(void *env, const gb_env_buffers *b)
{
    acrobot *e = env;
    static const double torques[3] = {-1.0, 0.0, 1.0};
    int32_t action = *(const int32_t *)b->actions;
    if (action < 0 || action > 2)
        return -1; /* outside Discrete(3) */
    double torque = torques[action];
    /* rk4(derivs, y0, [0, dt]): one step; the torque component's derivative is 0, so it stays. */
    const double dt = AC_DT - 0.0, dt2 = dt / 2.0;
    double y0[4], k1[4], k2[4], k3[4], k4[4], y[4];
    for (int i = 0; i < 4; i++)
        y0[i] = e->s[i];
    ac_dsdt(y0, torque, k1);
    for (int i = 0; i < 4; i++)
        y[i] = y0[i] + dt2 * k1[i];
    ac_dsdt(y, torque, k2);
    for (int i = 0; i < 4; i++)
        y[i] = y0[i] + dt2 * k2[i];
    ac_dsdt(y, torque, k3);
    for (int i = 0; i < 4; i++)
        y[i] = y0[i] + dt * k3[i];
    ac_dsdt(y, torque, k4);
    double ns[4];
    for (int i = 0; i < 4; i++)
        ns[i] = y0[i] + dt / 6.0 * (k1[i] + 2 * k2[i] + 2 * k3[i] + k4[i]);
    ns[0] = ac_wrap(ns[0], -M_PI, M_PI);
    ns[1] = ac_wrap(ns[1], -M_PI, M_PI);
    ns[2] = ac_bound(ns[2], -AC_MAX_VEL_1, AC_MAX_VEL_1);
    ns[3] = ac_bound(ns[3], -AC_MAX_VEL_2, AC_MAX_VEL_2);
    for (int i = 0; i < 4; i++)
        e->s[i] = ns[i];
    int terminated = -cos(ns[0]) - cos(ns[1] + ns[0]) > 1.0;
    ac_obs(e, b->obs);
    b->rewards[0] = terminated ? 0.0f : -1.0f;
    b->terminated[0] = (uint8_t)terminated;
    b->truncated[0] = 0;
    return 0;
}

/* Both links (length 1 each) hang from the centre at theta1 = theta2 = 0; the goal line lies one
 * link length above the pivot (the termination test -cos t1 - cos(t1 + t2) > 1). */
static int ac_render(void *env, uint8_t *rgb)
{
    const acrobot *e = env;
    gb_canvas c = {rgb, AC_RENDER_SIZE, AC_RENDER_SIZE};
    const double mid = AC_RENDER_SIZE / 2.0, scale = AC_RENDER_SIZE / 4.4;
    double x1 = mid + scale * sin(e->s[0]), y1 = mid + scale * cos(e->s[0]);
    double x2 = x1 + scale * sin(e->s[0] + e->s[1]), y2 = y1 + scale * cos(e->s[0] + e->s[1]);
    gb_draw_fill(&c, GB_RGB(255, 255, 255));
    gb_draw_rect(&c, 0, mid - scale, AC_RENDER_SIZE, mid - scale + 2, GB_RGB(0, 0, 0));
    gb_draw_segment(&c, mid, mid, x1, y1, 10, GB_RGB(0, 204, 204));
    gb_draw_segment(&c, x1, y1, x2, y2, 10, GB_RGB(0, 204, 204));
    gb_draw_disc(&c, mid, mid, 5, GB_RGB(204, 204, 0));
    gb_draw_disc(&c, x1, y1, 5, GB_RGB(204, 204, 0));
    return 0;
}

static void ac_destroy(void *env)
{
    free(env);
}

void gb_env_acrobot_set_state(void *env, const double *s, void *obs)
{
    acrobot *e = env;
    for (int i = 0; i < 4; i++)
        e->s[i] = s[i];
    if (obs)
        ac_obs(e, obs);
}

const gb_env_interface gb_env_acrobot = {
    .abi_version = GB_ENV_ABI_VERSION,
    .struct_size = sizeof(gb_env_interface),
    .name = "Acrobot-v1",
    .description = "swing a two-link arm above a line (Gymnasium Acrobot-v1)",
    .create = ac_create,
    .reset = ac_reset,
    .step = ac_step,
    .destroy = ac_destroy,
    .render = ac_render,
};
