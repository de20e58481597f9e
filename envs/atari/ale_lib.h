/* envs/atari/ale_lib.h: the Arcade Learning Environment's C++ library, opened with dlopen at the
 * first create() of an Atari environment, behind a small C interface. gearbox does not build
 * the ALE: it calls the one inside PyPI's ale-py wheel (ale_py/_ale_py.*.so, the build
 * Gymnasium's ALE environments use), whose ale::ALEInterface methods are exported, and reads the
 * ROMs the wheel ships (ale_py/roms/<game>.bin). ale_lib.cpp explains the calling convention.
 * defines: gb_ale, gb_ale_load, gb_ale_roms_dir, gb_ale_new, gb_ale_free, gb_ale_act,
 *          gb_ale_reset, gb_ale_game_over, gb_ale_truncated, gb_ale_lives, gb_ale_screen */
#ifndef GB_ENVS_ATARI_ALE_LIB_H
#define GB_ENVS_ATARI_ALE_LIB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GB_ALE_HEIGHT 210
#define GB_ALE_WIDTH 160
#define GB_ALE_MAX_ACTIONS 18

typedef struct gb_ale gb_ale;

/* Opens the library once per process (thread-safe): $GEARBOX_ALE_LIB when set, else the path
 * found when gearbox was configured; Python's own library (libpython, which the extension module
 * refers to but whose interpreter is never started) is opened first, from $GEARBOX_ALE_PYLIB or
 * the configured path. Returns 0, or -1 with what was tried and how to install ale-py in err. */
int gb_ale_load(char *err, size_t err_len);

/* The folder of the ROMs (<ale_py>/roms): $GEARBOX_ALE_ROMS when set, else next to the library.
 * Static storage; "" before a successful gb_ale_load. */
const char *gb_ale_roms_dir(void);

/* One emulator with the game at rom loaded: seeded with ale_seed (ALE's random_seed, which
 * drives sticky actions), sticky-action probability repeat_p, max_frames the frame limit of an
 * episode (0: none), mode / difficulty (-1: the game's default), frameskip 1. Writes the game's
 * action set (the minimal one, or all 18 when full_actions) to actions (GB_ALE_MAX_ACTIONS
 * ints) and its size to *n_actions. Returns the emulator, or NULL with ALE's message in err.
 * Allocates; not for the hot path. */
gb_ale *gb_ale_new(const char *rom, int32_t ale_seed, float repeat_p, int max_frames, int mode,
                   int difficulty, int full_actions, int *actions, int *n_actions, char *err,
                   size_t err_len);

/* Frees an emulator (NULL is a no-op). */
void gb_ale_free(gb_ale *ale);

/* One frame with the ALE action code `action` (an entry of the action set); returns its reward.
 * Allocates nothing. */
int gb_ale_act(gb_ale *ale, int action);

/* Starts a new game (ALE's reset_game). */
void gb_ale_reset(gb_ale *ale);

/* The game is over (not counting the frame limit); the frame limit was reached; lives left. */
int gb_ale_game_over(gb_ale *ale);
int gb_ale_truncated(gb_ale *ale);
int gb_ale_lives(gb_ale *ale);

/* Writes the screen: rgb = 0: GB_ALE_HEIGHT x GB_ALE_WIDTH grey bytes (ALE's palette
 * luminance); rgb = 1: height x width x 3. Allocates nothing. */
void gb_ale_screen(gb_ale *ale, int rgb, uint8_t *out);

#ifdef __cplusplus
}
#endif

#endif
