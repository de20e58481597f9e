/* envs/breakout.c: Breakout84-v0, a small Breakout with image observations: one 84x84 uint8
 * grayscale frame per step, shape (1, 84, 84), so that large observations travel end to end
 * (ring, streams, replay, CNN). A paddle at the bottom, 6 rows of 12 bricks, one ball, one life.
 * Actions: Discrete(3): 0 stay, 1 left, 2 right. Reward +1 per brick. Terminated when the ball
 * is lost or every brick is gone; time limit 10000 steps. render() gives the frame as RGB.
 * args: paddle_width (4..40 pixels, default 12). */
#include "envs/builtin.h"
#include "runtime/base/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define BO_SIZE 84
#define BO_ROWS 6
#define BO_COLS 12
#define BO_BRICK_W 7
#define BO_BRICK_H 3
#define BO_BRICK_TOP 12
#define BO_PADDLE_Y 78
#define BO_PADDLE_H 2
#define BO_PADDLE_SPEED 3
#define BO_BALL 2
#define BO_BALL_SPEED 1.5f

typedef struct breakout {
    uint8_t frame[BO_SIZE * BO_SIZE]; /* the current frame, kept up to date incrementally */
    uint8_t bricks[BO_ROWS][BO_COLS];
    int bricks_left;
    int paddle_x, paddle_w;
    float bx, by, vx, vy;
    gb_rng rng;
} breakout;

static void *bo_create(const gb_env_args *args, uint64_t seed, gb_env_spec *spec, char *err,
                       size_t err_len)
{
    static const char *const allowed[] = {"paddle_width", NULL};
    if (gb_env_check_args(args, allowed, "Breakout84-v0", err, err_len))
        return NULL;
    long long pw = 12;
    if (gb_env_arg_int(args, "paddle_width", &pw) || pw < 4 || pw > 40)
        return gb_env_fail(err, err_len, "Breakout84-v0: paddle_width must be in [4, 40]");
    breakout *e = calloc(1, sizeof *e);
    if (!e)
        return gb_env_fail(err, err_len, "Breakout84-v0: out of memory");
    e->paddle_w = (int)pw;
    gb_rng_seed(&e->rng, seed);
    *spec = (gb_env_spec){.agents = 1,
                          .obs = {.dtype = GB_ENV_UINT8, .ndim = 3, .shape = {1, BO_SIZE, BO_SIZE}},
                          .action = {.kind = GB_ENV_SPACE_DISCRETE, .n = 3},
                          .max_episode_steps = 10000,
                          .render_height = BO_SIZE,
                          .render_width = BO_SIZE,
                          .flags = GB_ENV_REWARD_RANGE, /* one brick a step at most */
                          .reward_low = 0.0f,
                          .reward_high = 1.0f};
    return e;
}

static void fill(uint8_t *frame, int x, int y, int w, int h, uint8_t v)
{
    for (int r = y; r < y + h; r++) {
        if (r < 0 || r >= BO_SIZE)
            continue;
        int x0 = x < 0 ? 0 : x, x1 = x + w > BO_SIZE ? BO_SIZE : x + w;
        if (x1 > x0)
            memset(frame + r * BO_SIZE + x0, v, (size_t)(x1 - x0));
    }
}

static uint8_t brick_shade(int row)
{
    return (uint8_t)(200 - 20 * row);
}

static void draw_movers(breakout *e, uint8_t v)
{
    fill(e->frame, e->paddle_x, BO_PADDLE_Y, e->paddle_w, BO_PADDLE_H, v ? 143 : 0);
    fill(e->frame, (int)floorf(e->bx), (int)floorf(e->by), BO_BALL, BO_BALL, v ? 255 : 0);
}

static int bo_reset(void *env, const gb_env_buffers *b)
{
    breakout *e = env;
    memset(e->frame, 0, sizeof e->frame);
    fill(e->frame, 0, 0, BO_SIZE, 2, 100); /* top wall */
    for (int r = 0; r < BO_ROWS; r++)
        for (int c = 0; c < BO_COLS; c++) {
            e->bricks[r][c] = 1;
            fill(e->frame, c * BO_BRICK_W, BO_BRICK_TOP + r * BO_BRICK_H, BO_BRICK_W - 1,
                 BO_BRICK_H - 1, brick_shade(r));
        }
    e->bricks_left = BO_ROWS * BO_COLS;
    e->paddle_x = (BO_SIZE - e->paddle_w) / 2;
    e->bx = 10.0f + (float)gb_rng_below(&e->rng, BO_SIZE - 20);
    e->by = 50.0f;
    float angle = (float)(M_PI / 4) + (float)(M_PI / 2) * gb_rng_uniform_f(&e->rng);
    e->vx = BO_BALL_SPEED * cosf(angle);
    e->vy = BO_BALL_SPEED * sinf(angle); /* downwards, towards the paddle */
    draw_movers(e, 1);
    memcpy(b->obs, e->frame, sizeof e->frame);
    return 0;
}

/* The brick (row, col) under pixel (x, y), or 0 when none. */
static int brick_at(const breakout *e, float x, float y, int *row, int *col)
{
    int px = (int)floorf(x), py = (int)floorf(y) - BO_BRICK_TOP;
    if (px < 0 || px >= BO_SIZE || py < 0 || py >= BO_ROWS * BO_BRICK_H)
        return 0;
    *row = py / BO_BRICK_H;
    *col = px / BO_BRICK_W;
    if (*col >= BO_COLS)
        return 0;
    return e->bricks[*row][*col];
}

static int bo_step(void *env, const gb_env_buffers *b)
{
    breakout *e = env;
    int32_t action = *(const int32_t *)b->actions;
    if (action < 0 || action > 2)
        return -1;
    draw_movers(e, 0);
    if (action == 1)
        e->paddle_x -= BO_PADDLE_SPEED;
    else if (action == 2)
        e->paddle_x += BO_PADDLE_SPEED;
    if (e->paddle_x < 0)
        e->paddle_x = 0;
    if (e->paddle_x > BO_SIZE - e->paddle_w)
        e->paddle_x = BO_SIZE - e->paddle_w;

    float reward = 0.0f;
    float nx = e->bx + e->vx, ny = e->by + e->vy;
    if (nx < 0.0f || nx > (float)(BO_SIZE - BO_BALL)) { /* side walls */
        e->vx = -e->vx;
        nx = e->bx + e->vx;
    }
    if (ny < 2.0f) { /* top wall */
        e->vy = -e->vy;
        ny = e->by + e->vy;
    }
    int row, col;
    if (brick_at(e, nx + 1.0f, e->vy < 0 ? ny : ny + BO_BALL - 1, &row, &col)) {
        e->bricks[row][col] = 0;
        e->bricks_left--;
        fill(e->frame, col * BO_BRICK_W, BO_BRICK_TOP + row * BO_BRICK_H, BO_BRICK_W - 1,
             BO_BRICK_H - 1, 0);
        reward += 1.0f;
        e->vy = -e->vy;
        ny = e->by + e->vy;
    }
    /* paddle: the ball's bottom crosses the paddle's top while moving down */
    if (e->vy > 0 && e->by + BO_BALL <= BO_PADDLE_Y && ny + BO_BALL > BO_PADDLE_Y &&
        nx + BO_BALL > e->paddle_x && nx < e->paddle_x + e->paddle_w) {
        float offset = (nx + BO_BALL / 2.0f - (e->paddle_x + e->paddle_w / 2.0f)) /
                       (e->paddle_w / 2.0f); /* -1 (left edge) .. 1 (right edge) */
        offset = offset < -1 ? -1 : (offset > 1 ? 1 : offset);
        float angle = (float)(M_PI / 2) * offset * 0.8f; /* from vertical */
        e->vx = BO_BALL_SPEED * sinf(angle);
        e->vy = -BO_BALL_SPEED * cosf(angle);
        ny = (float)(BO_PADDLE_Y - BO_BALL);
    }
    e->bx = nx;
    e->by = ny;
    int lost = e->by >= (float)BO_SIZE;
    draw_movers(e, 1);
    memcpy(b->obs, e->frame, sizeof e->frame);
    b->rewards[0] = reward;
    b->terminated[0] = (uint8_t)(lost || e->bricks_left == 0);
    b->truncated[0] = 0;
    return 0;
}

static int bo_render(void *env, uint8_t *rgb)
{
    const breakout *e = env;
    for (int i = 0; i < BO_SIZE * BO_SIZE; i++)
        rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = e->frame[i];
    return 0;
}

static void bo_destroy(void *env)
{
    free(env);
}

const gb_env_interface gb_env_breakout = {
    .abi_version = GB_ENV_ABI_VERSION,
    .struct_size = sizeof(gb_env_interface),
    .name = "Breakout84-v0",
    .description = "Breakout on 84x84 grayscale frames (args: paddle_width)",
    .create = bo_create,
    .reset = bo_reset,
    .step = bo_step,
    .destroy = bo_destroy,
    .render = bo_render,
};
