/* envs/spread.c: Spread-v0, a cooperative multi-agent task after the multi-agent particle
 * environments' "simple spread" (Lowe et al. 2017): N agents and N landmarks on a plane; all
 * agents share one reward, minus the sum over landmarks of the distance to the nearest agent,
 * minus 1 per colliding pair of agents. Never terminates; time limit 25 steps.
 * Each agent's observation (float32[4N + 2]): own velocity (2), own position (2), landmarks
 * relative to it (2N), the other agents relative to it (2(N - 1)).
 * Actions per agent: Discrete(5): 0 stay, 1 left, 2 right, 3 down, 4 up.
 * args: agents (2..16, default 3); turn_based (0/1, default 0): when 1 only one agent acts per
 *       step, in turn (agent t mod N), which exercises the ABI's acting mask.
 * render: 300 x 300 showing [-2, 2]^2: landmarks as grey dots, agents as coloured discs of their
 * collision radius (the acting agent ringed in black when turn-based). */
#include "envs/builtin.h"
#include "envs/canvas.h"
#include "runtime/base/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SP_MAX_AGENTS 16
#define SP_DT 0.1f
#define SP_DAMPING 0.25f
#define SP_ACCEL 5.0f
#define SP_RADIUS 0.15f
#define SP_RENDER_SIZE 300

typedef struct spread {
    int n;
    int turn_based;
    int64_t t;
    float pos[SP_MAX_AGENTS][2], vel[SP_MAX_AGENTS][2];
    float landmark[SP_MAX_AGENTS][2];
    gb_rng rng;
} spread;

static void *sp_create(const gb_env_args *args, uint64_t seed, gb_env_spec *spec, char *err,
                       size_t err_len)
{
    static const char *const allowed[] = {"agents", "turn_based", NULL};
    if (gb_env_check_args(args, allowed, "Spread-v0", err, err_len))
        return NULL;
    long long n = 3, turn = 0;
    if (gb_env_arg_int(args, "agents", &n) || n < 2 || n > SP_MAX_AGENTS)
        return gb_env_fail(err, err_len, "Spread-v0: agents must be an integer in [2, %d]",
                           SP_MAX_AGENTS);
    if (gb_env_arg_int(args, "turn_based", &turn) || (turn != 0 && turn != 1))
        return gb_env_fail(err, err_len, "Spread-v0: turn_based must be 0 or 1");
    spread *e = calloc(1, sizeof *e);
    if (!e)
        return gb_env_fail(err, err_len, "Spread-v0: out of memory");
    e->n = (int)n;
    e->turn_based = (int)turn;
    gb_rng_seed(&e->rng, seed);
    *spec = (gb_env_spec){.agents = (int32_t)n,
                          .flags = turn ? GB_ENV_TURN_BASED : 0,
                          .obs = {.dtype = GB_ENV_FLOAT32, .ndim = 1, .shape = {4 * n + 2}},
                          .action = {.kind = GB_ENV_SPACE_DISCRETE, .n = 5},
                          .max_episode_steps = 25,
                          .render_height = SP_RENDER_SIZE,
                          .render_width = SP_RENDER_SIZE};
    return e;
}

static void sp_observe(const spread *e, float *obs, uint8_t *acting)
{
    int n = e->n, dim = 4 * n + 2;
    for (int a = 0; a < n; a++) {
        float *o = obs + (size_t)a * dim;
        *o++ = e->vel[a][0];
        *o++ = e->vel[a][1];
        *o++ = e->pos[a][0];
        *o++ = e->pos[a][1];
        for (int l = 0; l < n; l++) {
            *o++ = e->landmark[l][0] - e->pos[a][0];
            *o++ = e->landmark[l][1] - e->pos[a][1];
        }
        for (int b = 0; b < n; b++) {
            if (b == a)
                continue;
            *o++ = e->pos[b][0] - e->pos[a][0];
            *o++ = e->pos[b][1] - e->pos[a][1];
        }
        if (e->turn_based)
            acting[a] = (uint8_t)(a == (int)(e->t % n));
    }
}

static int sp_reset(void *env, const gb_env_buffers *b)
{
    spread *e = env;
    for (int i = 0; i < e->n; i++) {
        for (int k = 0; k < 2; k++) {
            e->pos[i][k] = -1.0f + 2.0f * gb_rng_uniform_f(&e->rng);
            e->vel[i][k] = 0.0f;
            e->landmark[i][k] = -1.0f + 2.0f * gb_rng_uniform_f(&e->rng);
        }
    }
    e->t = 0;
    sp_observe(e, b->obs, b->acting);
    return 0;
}

static int sp_step(void *env, const gb_env_buffers *b)
{
    spread *e = env;
    static const float dir[5][2] = {{0, 0}, {-1, 0}, {1, 0}, {0, -1}, {0, 1}};
    const int32_t *actions = b->actions;
    int n = e->n;
    for (int a = 0; a < n; a++) {
        int act = actions[a];
        if (e->turn_based && a != (int)(e->t % n))
            act = 0; /* not this agent's turn: its action is ignored */
        if (act < 0 || act > 4)
            return -1;
        for (int k = 0; k < 2; k++) {
            e->vel[a][k] = e->vel[a][k] * (1.0f - SP_DAMPING) + dir[act][k] * SP_ACCEL * SP_DT;
            e->pos[a][k] += e->vel[a][k] * SP_DT;
        }
    }
    float reward = 0.0f;
    for (int l = 0; l < n; l++) {
        float best = INFINITY;
        for (int a = 0; a < n; a++) {
            float dx = e->pos[a][0] - e->landmark[l][0], dy = e->pos[a][1] - e->landmark[l][1];
            float d = sqrtf(dx * dx + dy * dy);
            best = d < best ? d : best;
        }
        reward -= best;
    }
    for (int a = 0; a < n; a++)
        for (int c = a + 1; c < n; c++) {
            float dx = e->pos[a][0] - e->pos[c][0], dy = e->pos[a][1] - e->pos[c][1];
            if (dx * dx + dy * dy < (2 * SP_RADIUS) * (2 * SP_RADIUS))
                reward -= 1.0f;
        }
    e->t++;
    sp_observe(e, b->obs, b->acting);
    for (int a = 0; a < n; a++) {
        b->rewards[a] = reward;
        b->terminated[a] = 0;
        b->truncated[a] = 0;
    }
    return 0;
}

static int sp_render(void *env, uint8_t *rgb)
{
    const spread *e = env;
    static const uint32_t palette[4] = {GB_RGB(89, 89, 217), GB_RGB(217, 89, 89),
                                        GB_RGB(89, 178, 89), GB_RGB(217, 153, 51)};
    gb_canvas c = {rgb, SP_RENDER_SIZE, SP_RENDER_SIZE};
    const double scale = SP_RENDER_SIZE / 4.0, mid = SP_RENDER_SIZE / 2.0;
    gb_draw_fill(&c, GB_RGB(255, 255, 255));
    gb_draw_rect(&c, mid - scale, mid - scale, mid + scale, mid + scale, GB_RGB(240, 240, 240));
    for (int l = 0; l < e->n; l++)
        gb_draw_disc(&c, mid + scale * e->landmark[l][0], mid - scale * e->landmark[l][1], 4,
                     GB_RGB(64, 64, 64));
    for (int a = 0; a < e->n; a++) {
        double x = mid + scale * e->pos[a][0], y = mid - scale * e->pos[a][1];
        if (e->turn_based && a == (int)(e->t % e->n))
            gb_draw_disc(&c, x, y, scale * SP_RADIUS + 3, GB_RGB(0, 0, 0));
        gb_draw_disc(&c, x, y, scale * SP_RADIUS, palette[a % 4]);
    }
    return 0;
}

static void sp_destroy(void *env)
{
    free(env);
}

const gb_env_interface gb_env_spread = {
    .abi_version = GB_ENV_ABI_VERSION,
    .struct_size = sizeof(gb_env_interface),
    .name = "Spread-v0",
    .description = "cooperative: N agents cover N landmarks (args: agents, turn_based)",
    .create = sp_create,
    .reset = sp_reset,
    .step = sp_step,
    .destroy = sp_destroy,
    .render = sp_render,
};
