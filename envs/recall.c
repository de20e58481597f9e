/* envs/recall.c: Recall-v0, a memory task ("repeat what you saw"): the first observation shows a
 * cue, one of K symbols; the agent must answer it N steps later, when nothing shows it any more.
 * Observation (float32[K + 2]): [0, K) the cue one-hot, at the episode's first observation only
 * (zeros afterwards); [K] the answer flag, 1 in the observation at step N (counting the reset's
 * as step 0), else 0; [K + 1] noise, U(-1, 1) drawn afresh at every observation.
 * Action: Discrete(K). Only the action taken on the observation with the answer flag counts:
 * reward +1 when it equals the cue, -1 otherwise, and the episode terminates; every other step
 * gives reward 0. An episode is N + 1 steps and its return is +1 or -1.
 * A policy without memory sees, at the answer step, nothing about the cue: whatever it does its
 * expected return is 2/K - 1 (-0.5 for K = 4, 0 for K = 2); one that remembers gets 1.
 * No time limit of its own (every episode ends after N + 1 steps).
 * args: delay (N, 1..100000, default 20), symbols (K, 2..64, default 4).
 * render: 240 x 120: K slots in a row, the cue's slot coloured (bright while it is observed,
 * pale after), a bar of the steps elapsed out of N, a black frame around the slots at the
 * answer step, and after the answer the chosen slot ringed green (right) or red (wrong). */
#include "envs/builtin.h"
#include "envs/canvas.h"
#include "runtime/base/rng.h"

#include <stdlib.h>

#define RC_MAX_DELAY 100000
#define RC_MAX_SYMBOLS 64
#define RC_RENDER_W 240
#define RC_RENDER_H 120

typedef struct recall {
    int delay, symbols;
    int t;      /* steps taken in this episode */
    int cue;    /* the symbol to recall */
    int answer; /* the action taken at the answer step, -1 before it */
    gb_rng rng;
} recall;

static void *rc_create(const gb_env_args *args, uint64_t seed, gb_env_spec *spec, char *err,
                       size_t err_len)
{
    static const char *const allowed[] = {"delay", "symbols", NULL};
    if (gb_env_check_args(args, allowed, "Recall-v0", err, err_len))
        return NULL;
    long long delay = 20, symbols = 4;
    if (gb_env_arg_int(args, "delay", &delay) || delay < 1 || delay > RC_MAX_DELAY)
        return gb_env_fail(err, err_len, "Recall-v0: delay must be an integer in [1, %d]",
                           RC_MAX_DELAY);
    if (gb_env_arg_int(args, "symbols", &symbols) || symbols < 2 || symbols > RC_MAX_SYMBOLS)
        return gb_env_fail(err, err_len, "Recall-v0: symbols must be an integer in [2, %d]",
                           RC_MAX_SYMBOLS);
    recall *e = calloc(1, sizeof *e);
    if (!e)
        return gb_env_fail(err, err_len, "Recall-v0: out of memory");
    e->delay = (int)delay;
    e->symbols = (int)symbols;
    e->answer = -1;
    gb_rng_seed(&e->rng, seed);
    *spec = (gb_env_spec){.agents = 1,
                          .obs = {.dtype = GB_ENV_FLOAT32, .ndim = 1, .shape = {symbols + 2}},
                          .action = {.kind = GB_ENV_SPACE_DISCRETE, .n = (int32_t)symbols},
                          .max_episode_steps = 0,
                          .render_height = RC_RENDER_H,
                          .render_width = RC_RENDER_W,
                          .flags = GB_ENV_REWARD_RANGE, /* +1 or -1 at the answer, else 0 */
                          .reward_low = -1.0f,
                          .reward_high = 1.0f};
    return e;
}

/* The observation at step e->t (every element written). */
static void rc_obs(recall *e, float *obs)
{
    for (int k = 0; k < e->symbols; k++)
        obs[k] = e->t == 0 && k == e->cue ? 1.0f : 0.0f;
    obs[e->symbols] = e->t == e->delay ? 1.0f : 0.0f;
    obs[e->symbols + 1] = 2.0f * gb_rng_uniform_f(&e->rng) - 1.0f;
}

static int rc_reset(void *env, const gb_env_buffers *b)
{
    recall *e = env;
    e->t = 0;
    e->answer = -1;
    e->cue = (int)gb_rng_below(&e->rng, (uint64_t)e->symbols);
    rc_obs(e, b->obs);
    return 0;
}

static int rc_step(void *env, const gb_env_buffers *b)
{
    recall *e = env;
    int32_t action = *(const int32_t *)b->actions;
    if (action < 0 || action >= e->symbols)
        return -1;
    float reward = 0.0f;
    if (e->t == e->delay) {
        e->answer = action;
        reward = action == e->cue ? 1.0f : -1.0f;
    }
    if (e->t <= e->delay) /* stepping past the end: the episode stays over, reward 0 */
        e->t++;
    rc_obs(e, b->obs);
    b->rewards[0] = reward;
    b->terminated[0] = (uint8_t)(e->t > e->delay);
    b->truncated[0] = 0;
    return 0;
}

/* A distinct colour per symbol (hue steps around the wheel), full or pale. */
static uint32_t rc_colour(int k, int symbols, int pale)
{
    static const uint8_t base[6][3] = {{230, 60, 60}, {60, 160, 60}, {60, 90, 230},
                                       {220, 170, 30}, {170, 60, 200}, {40, 180, 190}};
    const uint8_t *c = base[k % 6];
    int shade = k / 6 * 60 / (symbols / 6 + 1); /* darker for symbols past the sixth */
    int rgb[3];
    for (int i = 0; i < 3; i++) {
        int v = c[i] - shade < 0 ? 0 : c[i] - shade;
        rgb[i] = pale ? 255 - (255 - v) / 4 : v;
    }
    return GB_RGB(rgb[0], rgb[1], rgb[2]);
}

static int rc_render(void *env, uint8_t *rgb)
{
    const recall *e = env;
    gb_canvas c = {rgb, RC_RENDER_W, RC_RENDER_H};
    const double margin = 10, top = 20, slot = (RC_RENDER_W - 2 * margin) / e->symbols;
    const double size = slot * 0.8 < 50 ? slot * 0.8 : 50, bottom = top + size;
    gb_draw_fill(&c, GB_RGB(255, 255, 255));
    if (e->t == e->delay) /* the answer step: frame the slots */
        gb_draw_rect(&c, margin - 4, top - 4, RC_RENDER_W - margin + 4, bottom + 4,
                     GB_RGB(0, 0, 0));
    for (int k = 0; k < e->symbols; k++) {
        double x0 = margin + k * slot + (slot - size) / 2;
        if (k == e->answer) { /* the choice, ringed in green or red */
            uint32_t ring = k == e->cue ? GB_RGB(0, 170, 0) : GB_RGB(220, 0, 0);
            gb_draw_rect(&c, x0 - 3, top - 3, x0 + size + 3, bottom + 3, ring);
        }
        uint32_t fill = k == e->cue ? rc_colour(k, e->symbols, e->t != 0) : GB_RGB(200, 200, 200);
        gb_draw_rect(&c, x0, top, x0 + size, bottom, fill);
    }
    double bar_y = RC_RENDER_H - 30, steps = e->t < e->delay ? e->t : e->delay;
    gb_draw_rect(&c, margin, bar_y, RC_RENDER_W - margin, bar_y + 10, GB_RGB(220, 220, 220));
    gb_draw_rect(&c, margin, bar_y, margin + (RC_RENDER_W - 2 * margin) * steps / e->delay,
                 bar_y + 10, GB_RGB(90, 90, 90));
    return 0;
}

static void rc_destroy(void *env)
{
    free(env);
}

const gb_env_interface gb_env_recall = {
    .abi_version = GB_ENV_ABI_VERSION,
    .struct_size = sizeof(gb_env_interface),
    .name = "Recall-v0",
    .description = "answer the cue seen N (delay) steps earlier (needs memory)",
    .create = rc_create,
    .reset = rc_reset,
    .step = rc_step,
    .destroy = rc_destroy,
    .render = rc_render,
};
