/* envs/wrap.h: the standard preprocessing of pixel environments (Atari's: Machado et al. 2018,
 * Gymnasium's AtariPreprocessing and FrameStackObservation, SB3's EpisodicLifeEnv) as generic
 * wrappers that go around any environment behind envs/env.h, built-in or plugin, configured per
 * run (env.wrappers). A wrapped source's interface is the wrapper's: every host tool that opens
 * the environment through gb_env_source_open and gb_env_source_wrap (the ring, the workers'
 * spec, gearbox env check, eval) steps the wrapped copy. Single-agent environments only.
 *
 * Per step, innermost first: frame skip (the action repeated frame_skip times, rewards summed,
 * stopping at the end of the episode) with a max over the last two frames (max_pool), grey and
 * resize (an area average like OpenCV's INTER_AREA, the one AtariPreprocessing uses), episodic
 * life (a lost life ends the episode for training; the game goes on), reward clipping (the sign),
 * frame stack (the last frame_stack frames, oldest first, along the first axis). At reset,
 * 1..noop_max (uniform) no-op frames (action 0) below the frame skip, as AtariPreprocessing's.
 * defines: gb_env_wrap_params, gb_env_wrapped, gb_env_wrap_params_default,
 *          gb_env_wrap_params_set, gb_env_wrap_params_pair, gb_env_wrap_active,
 *          gb_env_wrap_init, gb_env_wrap_is, gb_env_wrap_create, gb_env_wrap_episode_end */
#ifndef GB_ENVS_WRAP_H
#define GB_ENVS_WRAP_H

#include "envs/env.h"

#include <stddef.h>
#include <stdint.h>

/* The settings (env.wrappers in the config; every one off by default). */
typedef struct gb_env_wrap_params {
    int64_t noop_max;    /* 0: off */
    int64_t frame_skip;  /* 1: off */
    int max_pool;        /* with frame_skip > 1: max over the last two frames (uint8 only) */
    int64_t screen_size; /* 0: off; else frames resized to screen_size x screen_size */
    int grey;            /* RGB frames to one grey channel */
    int episodic_life;   /* needs an environment that reports lives (atari) */
    int clip_reward;     /* reward -> its sign */
    int64_t frame_stack; /* 1: off */
} gb_env_wrap_params;

/* A wrapped interface: what a wrapped gb_env_source holds and hands out as its iface. The host
 * calls create through gb_env_create (which knows the inner interface from here); reset, step,
 * destroy and render are the wrapper's, through iface like any environment's. */
typedef struct gb_env_wrapped {
    gb_env_interface iface; /* first: a pointer to it is a pointer to the whole */
    const gb_env_interface *inner;
    gb_env_wrap_params p;
    char name[96];
} gb_env_wrapped;

/* The settings that change nothing. */
gb_env_wrap_params gb_env_wrap_params_default(void);

/* Sets one setting from text, as env.wrappers.KEY: VALUE would (tools' --wrap KEY=VALUE).
 * Returns 0, or -1 with a message in err for an unknown key or a bad value. */
int gb_env_wrap_params_set(gb_env_wrap_params *p, const char *key, const char *value, char *err,
                           size_t err_len);

/* The same from "KEY=VALUE" (a tool's --wrap argument). Returns 0, or -1 with a message in
 * err (not KEY=VALUE, an unknown key, a bad value). */
int gb_env_wrap_params_pair(gb_env_wrap_params *p, const char *pair, char *err, size_t err_len);

/* 1 when p asks for any wrapper. */
int gb_env_wrap_active(const gb_env_wrap_params *p);

/* Fills *w to wrap inner with p. for_eval = 1 drops the training-only wrappers (episodic life,
 * reward clipping: an evaluation scores whole games in the game's own points). */
void gb_env_wrap_init(gb_env_wrapped *w, const gb_env_interface *inner,
                      const gb_env_wrap_params *p, int for_eval);

/* 1 when iface is a gb_env_wrapped's. */
int gb_env_wrap_is(const gb_env_interface *iface);

/* create() of a wrapped interface (gb_env_create calls it): creates the inner copy with args
 * and seed, checks that the wrappers fit its spec, and fills spec with the wrapped one. Returns
 * the copy, or NULL with a message in err. Allocates everything the copy needs here. */
void *gb_env_wrap_create(const gb_env_interface *iface, const gb_env_args *args, uint64_t seed,
                         gb_env_spec *spec, char *err, size_t err_len);

/* Called by the host when a copy's episode ended on its side (terminated or truncated; cut = 1
 * when the host's own time limit cut it, which ends the game too). Returns 1 with the game's
 * return (rewards before clipping) and length (steps) when the game ended, 0 when it goes on
 * (only a life was lost: the next reset continues it), and -1 when iface is not wrapped or its
 * wrappers keep episodes and rewards as they are (the host's own count stands). */
int gb_env_wrap_episode_end(const gb_env_interface *iface, void *env, int cut, double *ret,
                            int64_t *len);

#endif
