/* envs/atari/atari_env.c: Atari 2600 games through the Arcade Learning Environment (env.name:
 * atari), the emulator of ale-py's ALE/<Game>-v5 environments with their defaults (sticky
 * actions 0.25, the minimal action set, 108000 frames at most per game) except frameskip, which
 * is 1 here: the frame skip and the rest of the standard preprocessing are the generic wrappers
 * of envs/wrap.h (env.wrappers). Each step is what ale_py's AtariEnv.step does: ALE's act, its
 * reward, game_over without the frame limit as terminated, the frame limit as truncated, and the
 * screen (ALE's grey palette, or RGB) as the observation. */
#include "envs/atari/ale_lib.h"
#include "envs/builtin.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define GB_ATARI_DEFAULT_GAME "pong" /* env.args.game when not given */

typedef struct atari {
    gb_ale *ale;
    int rgb;
    int frameskip;
    int n_actions;
    int actions[GB_ALE_MAX_ACTIONS];
} atari;

static const char *const allowed[] = {"game",
                                      "obs_type",
                                      "full_action_space",
                                      "repeat_action_probability",
                                      "frameskip",
                                      "max_num_frames_per_episode",
                                      "mode",
                                      "difficulty",
                                      NULL};

/* "Breakout", "breakout", "MsPacman", "ms_pacman": the ROM's id (ale_py's snake_case). */
static int rom_id(const char *game, char *out, size_t n)
{
    size_t k = 0;
    for (const char *p = game; *p; p++) {
        if (!(isalnum((unsigned char)*p) || *p == '_'))
            return -1;
        if (isupper((unsigned char)*p) && p > game && (islower((unsigned char)p[-1]) ||
                                                      isdigit((unsigned char)p[-1])))
            if (k + 1 < n)
                out[k++] = '_';
        if (k + 1 < n)
            out[k++] = (char)tolower((unsigned char)*p);
    }
    out[k] = '\0';
    return k && k + 1 < n ? 0 : -1;
}

static int parse_bool(const gb_env_args *args, const char *key, int *out)
{
    const char *v = gb_env_arg(args, key);
    if (!v)
        return 0;
    if (strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0)
        *out = 1;
    else if (strcasecmp(v, "false") == 0 || strcmp(v, "0") == 0)
        *out = 0;
    else
        return -1;
    return 0;
}

typedef struct atari_args {
    const char *game;
    char rom[PATH_MAX];
    int rgb, full, frameskip;
    double repeat_p;
    long long max_frames, mode, difficulty;
} atari_args;

/* The env.args with ale-py's names and v5 defaults; 0, or -1 with a message. */
static int parse(const gb_env_args *args, atari_args *a, char *err, size_t err_len)
{
    if (gb_env_check_args(args, allowed, "atari", err, err_len))
        return -1;
    long long skip = 1;
    *a = (atari_args){.repeat_p = 0.25, .max_frames = 108000, .mode = -1, .difficulty = -1};
    const char *game = gb_env_arg(args, "game"), *obs = gb_env_arg(args, "obs_type");
    if (!game)
        game = GB_ATARI_DEFAULT_GAME;
    const char *bad = obs && strcmp(obs, "grayscale") && strcmp(obs, "rgb")
                          ? "obs_type must be grayscale or rgb"
                      : parse_bool(args, "full_action_space", &a->full)
                          ? "full_action_space must be true or false"
                      : gb_env_arg_double(args, "repeat_action_probability", &a->repeat_p) ||
                              !(a->repeat_p >= 0 && a->repeat_p <= 1)
                          ? "repeat_action_probability must be a number in [0, 1]"
                      : gb_env_arg_int(args, "frameskip", &skip) || skip < 1 || skip > 1000
                          ? "frameskip must be an integer in 1..1000 (1: the frame skip is "
                            "env.wrappers.frame_skip)"
                      : gb_env_arg_int(args, "max_num_frames_per_episode", &a->max_frames) ||
                              a->max_frames < 0 || a->max_frames > INT_MAX
                          ? "max_num_frames_per_episode must be an integer >= 0 (0: no limit)"
                      : gb_env_arg_int(args, "mode", &a->mode) || a->mode < -1 ||
                              a->mode > INT_MAX
                          ? "mode must be an integer (-1: the game's default)"
                      : gb_env_arg_int(args, "difficulty", &a->difficulty) ||
                              a->difficulty < -1 || a->difficulty > INT_MAX
                          ? "difficulty must be an integer (-1: the game's default)"
                          : NULL;
    if (bad) {
        snprintf(err, err_len, "atari: %s", bad);
        return -1;
    }
    a->game = game;
    a->rgb = obs && strcmp(obs, "rgb") == 0;
    a->frameskip = (int)skip;
    char id[128];
    if (gb_ale_load(err, err_len))
        return -1;
    const char *dir = gb_ale_roms_dir();
    int n = rom_id(game, id, sizeof id) ? -1
                                        : snprintf(a->rom, sizeof a->rom, "%s/%s.bin", dir, id);
    if (n < 0 || (size_t)n >= sizeof a->rom || access(a->rom, R_OK) != 0) {
        snprintf(err, err_len,
                 "atari: unknown game '%s' (no ROM %s.bin in %s; the games are the names of the "
                 ".bin files there: ls %s)",
                 game, n < 0 ? "for it" : id, dir, dir);
        return -1;
    }
    return 0;
}

static void *atari_create(const gb_env_args *args, uint64_t seed, gb_env_spec *spec, char *err,
                          size_t err_len)
{
    atari_args a;
    if (parse(args, &a, err, err_len))
        return NULL;
    atari *e = calloc(1, sizeof *e);
    if (!e)
        return gb_env_fail(err, err_len, "atari: out of memory");
    char why[512] = "";
    /* ALE's random_seed (sticky actions, the game's own randomness): the seed's low 31 bits */
    e->ale = gb_ale_new(a.rom, (int32_t)(seed & 0x7fffffff), (float)a.repeat_p, (int)a.max_frames,
                        (int)a.mode, (int)a.difficulty, a.full, e->actions, &e->n_actions, why,
                        sizeof why);
    if (!e->ale) {
        free(e);
        return gb_env_fail(err, err_len, "atari: %s: %s", a.game, why);
    }
    e->rgb = a.rgb;
    e->frameskip = a.frameskip;
    *spec = (gb_env_spec){
        .agents = 1,
        .obs = {.dtype = GB_ENV_UINT8,
                .ndim = e->rgb ? 3 : 2,
                .shape = {GB_ALE_HEIGHT, GB_ALE_WIDTH, e->rgb ? 3 : 0}},
        .action = {.kind = GB_ENV_SPACE_DISCRETE, .n = e->n_actions},
        .render_height = GB_ALE_HEIGHT,
        .render_width = GB_ALE_WIDTH,
    };
    return e;
}

static int atari_reset(void *env, const gb_env_buffers *buf)
{
    atari *e = env;
    gb_ale_reset(e->ale);
    gb_ale_screen(e->ale, e->rgb, buf->obs);
    return 0;
}

/* A step without the screen, except on the game's last (envs/builtin.h:
 * gb_env_builtin_blind_step). */
int gb_env_atari_blind_step(void *env, const gb_env_buffers *buf)
{
    atari *e = env;
    int32_t a = *(const int32_t *)buf->actions;
    if (a < 0 || a >= e->n_actions)
        return -1;
    int reward = 0;
    for (int i = 0; i < e->frameskip; i++)
        reward += gb_ale_act(e->ale, e->actions[a]);
    buf->rewards[0] = (float)reward;
    buf->terminated[0] = (uint8_t)gb_ale_game_over(e->ale);
    buf->truncated[0] = (uint8_t)gb_ale_truncated(e->ale);
    if (buf->terminated[0] | buf->truncated[0])
        gb_ale_screen(e->ale, e->rgb, buf->obs);
    return 0;
}

static int atari_step(void *env, const gb_env_buffers *buf)
{
    atari *e = env;
    if (gb_env_atari_blind_step(env, buf))
        return -1;
    if (!(buf->terminated[0] | buf->truncated[0]))
        gb_ale_screen(e->ale, e->rgb, buf->obs);
    return 0;
}

static void atari_destroy(void *env)
{
    atari *e = env;
    if (!e)
        return;
    gb_ale_free(e->ale);
    free(e);
}

static int atari_render(void *env, uint8_t *rgb)
{
    atari *e = env;
    gb_ale_screen(e->ale, 1, rgb);
    return 0;
}

int gb_env_atari_lives(void *env)
{
    return gb_ale_lives(((atari *)env)->ale);
}

const gb_env_interface gb_env_atari = {
    GB_ENV_ABI_VERSION, sizeof(gb_env_interface), "atari",
    "Atari 2600 games through the Arcade Learning Environment (ale-py's): env.args.game "
    "(default " GB_ATARI_DEFAULT_GAME ")",
    atari_create, atari_reset, atari_step, atari_destroy, atari_render};
