/* tests/envs/test_render.c: every built-in environment's render(): it writes every byte of its
 * declared frame and nothing past it (rendered over two different fillings, the frames agree;
 * a canary after the frame stays), and the drawing follows the state: the centroid of a
 * shape's colour moves where the physics says (CartPole's cart and pole, Pendulum's rod,
 * Acrobot's links, MountainCar's wheels; Spread shows each agent). */
#include "envs/builtin.h"
#include "envs/host.h"
#include "test.h"

#include <string.h>

#define CANARY 64

typedef struct frame {
    const gb_env_interface *iface;
    void *env;
    gb_env_spec spec;
    uint8_t *rgb; /* h × w × 3 + CANARY */
    size_t bytes;
    float obs[16384]; /* the largest built-in observation: Breakout84, 84 x 84 bytes */
} frame;

static int frame_open(frame *f, const char *name)
{
    gb_error err = {0};
    memset(f, 0, sizeof *f);
    f->iface = gb_env_builtin_find(name);
    CHECK_MSG(f->iface != NULL, "%s", name);
    if (!f->iface)
        return -1;
    CHECK_OK(gb_env_create(f->iface, NULL, 7, &f->env, &f->spec, &err));
    CHECK_MSG(f->iface->render != NULL, "%s has no render", name);
    CHECK_MSG(f->spec.render_width >= 84 && f->spec.render_height >= 84, "%s: %d x %d", name,
              f->spec.render_width, f->spec.render_height);
    if (!f->env || !f->iface->render)
        return -1;
    f->bytes = (size_t)f->spec.render_height * (size_t)f->spec.render_width * 3;
    f->rgb = malloc(f->bytes + CANARY);
    uint8_t acting[16] = {0};
    gb_env_buffers b = {.obs = f->obs, .acting = acting};
    CHECK_EQ_INT(f->iface->reset(f->env, &b), 0);
    return f->rgb ? 0 : -1;
}

static void frame_close(frame *f)
{
    if (f->env)
        f->iface->destroy(f->env);
    free(f->rgb);
}

/* Renders twice over different fillings: the frames must agree (every byte written) and the
 * canary must stay. Leaves the frame in f->rgb. */
static void render_checked(frame *f)
{
    uint8_t *first = malloc(f->bytes);
    memset(f->rgb, 0x00, f->bytes + CANARY);
    memset(f->rgb + f->bytes, 0x5A, CANARY);
    CHECK_EQ_INT(f->iface->render(f->env, f->rgb), 0);
    memcpy(first, f->rgb, f->bytes);
    memset(f->rgb, 0xFF, f->bytes);
    CHECK_EQ_INT(f->iface->render(f->env, f->rgb), 0);
    CHECK_MSG(memcmp(first, f->rgb, f->bytes) == 0, "%s: render left bytes unwritten",
              f->iface->name);
    int canary_ok = 1;
    for (int i = 0; i < CANARY; i++)
        canary_ok &= f->rgb[f->bytes + i] == 0x5A;
    CHECK_MSG(canary_ok, "%s: render wrote past its %d x %d x 3 frame", f->iface->name,
              f->spec.render_height, f->spec.render_width);
    free(first);
}

/* Centroid of the pixels of colour rgb (0xRRGGBB), skipping row skip_row (-1: none); returns
 * the pixel count. */
static long centroid(const frame *f, uint32_t rgb, int skip_row, double *cx, double *cy)
{
    long n = 0;
    double sx = 0, sy = 0;
    for (int y = 0; y < f->spec.render_height; y++) {
        if (y == skip_row)
            continue;
        for (int x = 0; x < f->spec.render_width; x++) {
            const uint8_t *p = f->rgb + 3 * ((size_t)y * (size_t)f->spec.render_width + (size_t)x);
            if (p[0] == (uint8_t)(rgb >> 16) && p[1] == (uint8_t)(rgb >> 8) &&
                p[2] == (uint8_t)rgb) {
                n++;
                sx += x;
                sy += y;
            }
        }
    }
    *cx = n ? sx / n : -1;
    *cy = n ? sy / n : -1;
    return n;
}

static void set_and_render(frame *f, const double *state, int n)
{
    CHECK_EQ_INT(gb_env_builtin_set_state(f->iface, f->env, state, n, NULL), 0);
    render_checked(f);
}

static void test_every_builtin_renders(void)
{
    int n;
    const gb_env_interface *const *all = gb_env_builtins(&n);
    for (int i = 0; i < n; i++) {
        frame f;
        if (frame_open(&f, all[i]->name) == 0) {
            render_checked(&f);
            /* not a blank frame: at least two colours */
            int varied = 0;
            for (size_t b = 3; b < f.bytes && !varied; b++)
                varied = f.rgb[b] != f.rgb[b % 3];
            CHECK_MSG(varied, "%s: a frame of one colour", all[i]->name);
        }
        frame_close(&f);
    }
}

static void test_cartpole_follows_state(void)
{
    frame f;
    if (frame_open(&f, "CartPole-v1") == 0) {
        double cx0, cy0, cx1, cy1, px, py;
        set_and_render(&f, (double[]){-1.0, 0, 0, 0}, 4);
        CHECK(centroid(&f, 0x000000, 200, &cx0, &cy0) > 100); /* the cart, not the track */
        set_and_render(&f, (double[]){1.0, 0, 0, 0}, 4);
        CHECK(centroid(&f, 0x000000, 200, &cx1, &cy1) > 100);
        CHECK_MSG(cx1 - cx0 > 150, "cart at x=-1 drawn at %.1f, at x=+1 at %.1f", cx0, cx1);
        set_and_render(&f, (double[]){0, 0, 0.2, 0}, 4); /* leaning right */
        CHECK(centroid(&f, 0xCA9865, -1, &px, &py) > 100);
        CHECK_MSG(px > 200 + 5 && py < 200, "pole leaning right drawn at (%.1f, %.1f)", px, py);
        set_and_render(&f, (double[]){0, 0, -0.2, 0}, 4);
        CHECK(centroid(&f, 0xCA9865, -1, &px, &py) > 100);
        CHECK_MSG(px < 200 - 5, "pole leaning left drawn at x %.1f", px);
    }
    frame_close(&f);
}

static void test_pendulum_follows_state(void)
{
    frame f;
    if (frame_open(&f, "Pendulum-v1") == 0) {
        double x, y;
        set_and_render(&f, (double[]){0, 0}, 2); /* upright */
        CHECK(centroid(&f, 0xCC4D4D, -1, &x, &y) > 100);
        CHECK_MSG(y < 150 - 20 && fabs(x - 150) < 3, "upright rod at (%.1f, %.1f)", x, y);
        set_and_render(&f, (double[]){M_PI, 0}, 2); /* hanging */
        CHECK(centroid(&f, 0xCC4D4D, -1, &x, &y) > 100);
        CHECK_MSG(y > 150 + 20, "hanging rod at y %.1f", y);
        set_and_render(&f, (double[]){M_PI / 2, 0}, 2); /* counter-clockwise from up: left */
        CHECK(centroid(&f, 0xCC4D4D, -1, &x, &y) > 100);
        CHECK_MSG(x < 150 - 20, "rod at theta pi/2 at x %.1f", x);
    }
    frame_close(&f);
}

static void test_acrobot_follows_state(void)
{
    frame f;
    if (frame_open(&f, "Acrobot-v1") == 0) {
        double x, y;
        set_and_render(&f, (double[]){0, 0, 0, 0}, 4); /* hanging down */
        CHECK(centroid(&f, 0x00CCCC, -1, &x, &y) > 100);
        CHECK_MSG(y > 150 + 30, "hanging links at y %.1f", y);
        set_and_render(&f, (double[]){M_PI, 0, 0, 0}, 4); /* straight up: above the goal line */
        CHECK(centroid(&f, 0x00CCCC, -1, &x, &y) > 100);
        CHECK_MSG(y < 150 - 30, "raised links at y %.1f", y);
    }
    frame_close(&f);
}

static void test_mountain_car_follows_state(void)
{
    const char *names[2] = {"MountainCar-v0", "MountainCarContinuous-v0"};
    for (int k = 0; k < 2; k++) {
        frame f;
        if (frame_open(&f, names[k]) == 0) {
            double x0, y0, x1, y1;
            set_and_render(&f, (double[]){-1.0, 0}, 2);
            CHECK(centroid(&f, 0x808080, -1, &x0, &y0) > 20); /* the wheels */
            set_and_render(&f, (double[]){0.4, 0}, 2);
            CHECK(centroid(&f, 0x808080, -1, &x1, &y1) > 20);
            /* x in [-1.2, 0.6] spans 400 px: 1.4 apart is about 311 px; 0.4 is higher up */
            CHECK_MSG(fabs((x1 - x0) - 1.4 / 1.8 * 400) < 10 && y1 < y0,
                      "%s: car at -1.0 drawn at (%.1f, %.1f), at 0.4 at (%.1f, %.1f)", names[k],
                      x0, y0, x1, y1);
        }
        frame_close(&f);
    }
}

static void test_spread_shows_agents(void)
{
    frame f;
    if (frame_open(&f, "Spread-v0") == 0) {
        render_checked(&f);
        static const uint32_t agents[3] = {0x5959D9, 0xD95959, 0x59B259};
        for (int a = 0; a < 3; a++) {
            double x, y;
            CHECK_MSG(centroid(&f, agents[a], -1, &x, &y) > 0, "agent %d not drawn", a);
        }
    }
    frame_close(&f);
}

int main(void)
{
    TEST_RUN(test_every_builtin_renders);
    TEST_RUN(test_cartpole_follows_state);
    TEST_RUN(test_pendulum_follows_state);
    TEST_RUN(test_acrobot_follows_state);
    TEST_RUN(test_mountain_car_follows_state);
    TEST_RUN(test_spread_shows_agents);
    return test_main_result();
}
