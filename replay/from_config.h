/* replay/from_config.h: the replay options of an application config's replay section
 * (trainer.replay, server.replay). The one file of replay/ that reads the application config:
 * the mapping of keys to options is the replay's knowledge, and keeping it here keeps
 * replay/replay.h free of the config.
 * defines: gb_replay_options_from_config */
#ifndef GB_REPLAY_FROM_CONFIG_H
#define GB_REPLAY_FROM_CONFIG_H

#include "replay/replay.h"
#include "runtime/config/config.h"

/* Copies a replay config section into o (capacity, max_size, remover, selectors, rate limiter,
 * timeout, huge pages). Columns, T, the seed and the segment are not in that section: the caller
 * adds them. Allocates nothing, cannot fail. */
void gb_replay_options_from_config(gb_replay_options *o, const gb_config_replay *c);

#endif
