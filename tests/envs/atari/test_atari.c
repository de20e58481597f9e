/* tests/envs/atari/test_atari.c: the Atari environment (envs/atari) and the preprocessing
 * wrappers (envs/wrap.h) against ale-py's own environment, replayed byte for byte:
 *   raw: ALE/Breakout-v5 with frameskip 1 (sticky actions on): every screen, reward and flag;
 *   pre: Gymnasium's AtariPreprocessing (frame skip 4, max-pool, 84x84 INTER_AREA resize) and
 *        FrameStackObservation(4) against frame_skip 4, screen_size 84, frame_stack 4, on
 *        Breakout and Pong: every observation, reward and flag;
 * recorded by atari_reference.py from the same ALE seed and random actions. One exception, by
 * design: the observation on the step an episode ends. AtariPreprocessing stops skipping there
 * without reading the screen, so it returns the pooled frames of the step before; gearbox returns
 * the episode's last frame (the one a bootstrap should see). Those steps compare reward and flags.
 * Also: episodic life (a termination at each lost life, one finished episode per game in the
 * ring's statistics), reward clipping (the sign to the learner, the game's points in the ring's
 * returns), and the errors for a bad game name and for wrappers that do not fit.
 * argv: PYTHON SCRIPT_DIR TMP_DIR. Exits 77 (skip) without ale-py. */
#include "envs/atari/ale_lib.h"
#include "envs/builtin.h"
#include "envs/host.h"
#include "envs/ring.h"
#include "test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *python, *script_dir, *tmp_dir;

typedef struct record_head {
    int32_t action;
    float reward;
    uint8_t term, trunc, pad[2];
} record_head;

/* Records ale-py's run into a file and replays it on iface (wrapped or not): every record
 * compared. Returns the number of steps compared (0 on a setup failure). */
static int replay(const gb_env_interface *iface, const char *game, const char *rom_game,
                  int seed, int steps, const char *variant)
{
    char path[512], cmd[2048];
    snprintf(path, sizeof path, "%s/atari_%s_%s.bin", tmp_dir, game, variant);
    snprintf(cmd, sizeof cmd, "%s %s/atari_reference.py %s %d %d %s %s 2>/dev/null", python,
             script_dir, game, seed, steps, variant, path);
    int rc = system(cmd);
    CHECK_MSG(rc == 0, "%s failed (%d)", cmd, rc);
    if (rc != 0)
        return 0;
    const char *k[] = {"game"}, *v[] = {rom_game};
    gb_env_args args = {1, k, v};
    void *env = NULL;
    gb_env_spec spec;
    gb_error err = {0};
    CHECK_OK(gb_env_create(iface, &args, (uint64_t)seed, &env, &spec, &err));
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    if (!env || !f)
        return 0;
    size_t ob = gb_env_obs_bytes(&spec);
    uint8_t *want = malloc(ob), *got = malloc(ob);
    int32_t action = 0;
    float reward = 0;
    uint8_t term = 0, trunc = 0;
    gb_env_buffers buf = {&action, got, &reward, &term, &trunc, NULL};
    record_head h;
    int compared = 0, obs_bad = 0, flags_bad = 0, ends = 0;
    while (fread(&h, sizeof h, 1, f) == 1 && fread(want, 1, ob, f) == ob) {
        if (h.action < 0) {
            CHECK(iface->reset(env, &buf) == 0);
        } else {
            action = h.action;
            CHECK(iface->step(env, &buf) == 0);
            flags_bad += reward != h.reward || term != h.term || trunc != h.trunc;
            ends += h.term | h.trunc;
        }
        /* the step that ends an episode: see the header (the raw screens agree there too) */
        int skip_obs = strcmp(variant, "pre") == 0 && h.action >= 0 && (h.term | h.trunc);
        if (!skip_obs && memcmp(want, got, ob) != 0 && obs_bad++ == 0) {
            size_t i = 0;
            while (want[i] == got[i])
                i++;
            fprintf(stderr, "%s %s: record %d: observation byte %zu is %d, ale-py's %d\n", game,
                    variant, compared, i, got[i], want[i]);
        }
        compared++;
    }
    printf("%s %s: %d records, %d episode ends, %d observations and %d rewards/flags differ "
           "(%zu bytes each)\n",
           game, variant, compared, ends, obs_bad, flags_bad, ob);
    CHECK_EQ_INT(obs_bad, 0);
    CHECK_EQ_INT(flags_bad, 0);
    CHECK(compared > steps);
    fclose(f);
    unlink(path);
    free(want);
    free(got);
    iface->destroy(env);
    return compared;
}

static void test_agreement(void)
{
    gb_env_source src;
    gb_error err = {0};
    CHECK_OK(gb_env_source_open(&src, "atari", NULL, &err));
    replay(src.iface, "Breakout", "breakout", 7, 1500, "raw");
    gb_env_wrap_params p = gb_env_wrap_params_default();
    p.frame_skip = 4;
    p.screen_size = 84;
    p.frame_stack = 4;
    gb_env_source_wrap(&src, &p, 0);
    CHECK(gb_env_wrap_is(src.iface));
    replay(src.iface, "Breakout", "breakout", 11, 1500, "pre");
    replay(src.iface, "Pong", "pong", 5, 1000, "pre");
    gb_env_source_close(&src);
}

/* A ring of one wrapped copy of game stepped with random actions; per step the reward and the
 * flags go to the callbacks' counters. */
typedef struct ring_run {
    gb_env_ring *ring;
    gb_env_ring_buffers buf;
    gb_env_source src;
} ring_run;

static int ring_open(ring_run *r, const char *game, const gb_env_wrap_params *p, uint64_t seed)
{
    gb_error err = {0};
    memset(r, 0, sizeof *r);
    CHECK_OK(gb_env_source_open(&r->src, "atari", NULL, &err));
    gb_env_source_wrap(&r->src, p, 0);
    const char *k[] = {"game"}, *v[] = {game};
    gb_env_args args = {1, k, v};
    CHECK_OK(gb_env_ring_create(r->src.iface, &args, seed, 1, 1, 0, &r->ring, &err));
    if (!r->ring)
        return -1;
    CHECK_OK(gb_env_ring_buffers_alloc(r->ring, &r->buf, &err));
    CHECK_OK(gb_env_ring_attach(r->ring, &r->buf, &err));
    CHECK_OK(gb_env_ring_reset(r->ring, &err));
    return err.code ? -1 : 0;
}

static void ring_close(ring_run *r)
{
    gb_env_ring_destroy(r->ring);
    gb_env_ring_buffers_free(&r->buf);
    gb_env_source_close(&r->src);
}

/* Episodic life on Breakout (5 lives): a termination at every lost life, one finished episode
 * per game in the ring's statistics. */
static void test_episodic_life(void)
{
    gb_env_wrap_params p = gb_env_wrap_params_default();
    p.frame_skip = 4;
    p.episodic_life = 1;
    ring_run r;
    if (ring_open(&r, "breakout", &p, 3))
        return;
    int n = gb_env_ring_spec(r.ring)->action.n, terminations = 0;
    uint64_t x = 12345;
    gb_error err = {0};
    for (int t = 0; t < 4000; t++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        ((int32_t *)r.buf.actions)[0] = (int32_t)((x >> 33) % (uint64_t)n);
        CHECK_OK(gb_env_ring_step(r.ring, 0, &err));
        terminations += r.buf.terminated[0];
    }
    int64_t games, length_sum;
    double return_sum;
    gb_env_ring_take_episodes(r.ring, &games, &return_sum, &length_sum);
    printf("episodic life: %d terminations, %lld games (return %.0f, %lld steps)\n",
           terminations, (long long)games, return_sum, (long long)length_sum);
    CHECK(games >= 2);
    CHECK(terminations >= 5 * games && terminations < 5 * (games + 1));
    ring_close(&r);
}

/* Reward clipping on Space Invaders (5 to 30 points an alien): the learner sees each step's sign,
 * the ring's returns are the game's points, equal to an unclipped copy's on the same actions. */
static void test_clip_reward(void)
{
    gb_env_wrap_params p = gb_env_wrap_params_default(), q;
    p.frame_skip = 4;
    q = p;
    q.clip_reward = 1;
    ring_run a, b;
    if (ring_open(&a, "space_invaders", &p, 9) || ring_open(&b, "space_invaders", &q, 9))
        return;
    gb_error err = {0};
    int n = gb_env_ring_spec(a.ring)->action.n, bad = 0, big = 0;
    uint64_t x = 99;
    for (int t = 0; t < 3000; t++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        int32_t act = (int32_t)((x >> 33) % (uint64_t)n);
        ((int32_t *)a.buf.actions)[0] = ((int32_t *)b.buf.actions)[0] = act;
        CHECK_OK(gb_env_ring_step(a.ring, 0, &err));
        CHECK_OK(gb_env_ring_step(b.ring, 0, &err));
        float ra = a.buf.rewards[0], rb = b.buf.rewards[0];
        bad += rb != (float)((ra > 0) - (ra < 0)) || a.buf.terminated[0] != b.buf.terminated[0];
        big += ra > 1;
    }
    int64_t ca, cb, la, lb;
    double sa, sb;
    gb_env_ring_take_episodes(a.ring, &ca, &sa, &la);
    gb_env_ring_take_episodes(b.ring, &cb, &sb, &lb);
    printf("clip reward: %d steps over 1 point; games %lld and %lld, returns %.0f and %.0f\n",
           big, (long long)ca, (long long)cb, sa, sb);
    CHECK_EQ_INT(bad, 0);
    CHECK(big > 0 && ca >= 1);
    CHECK(ca == cb && sa == sb && la == lb);
    ring_close(&a);
    ring_close(&b);
}

/* create() errors: a game that is not shipped; wrappers that do not fit the environment. */
static void test_errors(void)
{
    gb_error err = {0};
    void *env = NULL;
    gb_env_spec spec;
    const char *k[] = {"game"}, *v[] = {"no_such_game"};
    gb_env_args args = {1, k, v};
    CHECK(gb_env_create(&gb_env_atari, &args, 1, &env, &spec, &err) == GB_EINVAL);
    CHECK(strstr(err.msg, "unknown game 'no_such_game'") && strstr(err.msg, "ls "));
    static const struct {
        gb_env_wrap_params p;
        const char *msg;
    } bad[] = {
        {{.frame_skip = 1, .frame_stack = 1, .screen_size = 84}, "need uint8 frames"},
        {{.frame_skip = 1, .frame_stack = 1, .episodic_life = 1}, "reports lives"},
        {{.frame_skip = 2, .frame_stack = 1, .max_pool = 1}, "max_pool"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gb_env_source src;
        CHECK_OK(gb_env_source_open(&src, "CartPole-v1", NULL, &err));
        gb_env_source_wrap(&src, &bad[i].p, 0);
        err = (gb_error){0};
        CHECK(gb_env_create(src.iface, NULL, 1, &env, &spec, &err) == GB_EINVAL);
        CHECK_MSG(strstr(err.msg, bad[i].msg) != NULL, "%s", err.msg);
        gb_env_source_close(&src);
    }
    gb_env_wrap_params ok = gb_env_wrap_params_default(); /* frame skip on vectors: no pool */
    ok.frame_skip = 2;
    ok.max_pool = 0;
    ok.frame_stack = 3;
    gb_env_source src;
    CHECK_OK(gb_env_source_open(&src, "CartPole-v1", NULL, &err));
    gb_env_source_wrap(&src, &ok, 0);
    CHECK_OK(gb_env_create(src.iface, NULL, 1, &env, &spec, &err));
    CHECK_EQ_INT(spec.obs.shape[0], 12);
    if (env)
        src.iface->destroy(env);
    gb_env_source_close(&src);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: %s PYTHON SCRIPT_DIR TMP_DIR\n", argv[0]);
        return 2;
    }
    python = argv[1], script_dir = argv[2], tmp_dir = argv[3];
    char why[1024];
    if (gb_ale_load(why, sizeof why)) {
        fprintf(stderr, "skip: %s\n", why);
        return 77;
    }
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s -c 'import ale_py, gymnasium, cv2' 2>/dev/null", python);
    if (system(cmd) == 0)
        test_agreement();
    else
        fprintf(stderr, "%s lacks ale_py, gymnasium or cv2: no comparison with ale-py's "
                        "environment (launch/install-deps.sh --all)\n", python);
    test_episodic_life();
    test_clip_reward();
    test_errors();
    return test_main_result();
}
