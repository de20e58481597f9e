/* replay/formats/d4rl.h: D4RL-layout HDF5 datasets cut into fixed-length trajectory items.
 * defines: gb_d4rl, gb_d4rl_open, gb_d4rl_schema, gb_d4rl_items, gb_d4rl_fill, gb_d4rl_close
 *
 * Input (the D4RL layout; N transitions, row i = one step):
 *   observations [N, *obs], actions [N, *act], rewards [N], terminals [N], timeouts [N]
 *   (rewards, terminals, timeouts may be stored [N, 1]; timeouts may be absent, as in D4RL's
 *   v0 datasets: then episodes end at terminals only), optional next_observations [N, *obs]
 *   and infos/<name> [N, ...] (numeric datasets).
 * Episodes end after every row with terminals or timeouts set (rows after the last end form a
 * last, unfinished episode). Each episode is cut into items of T steps: [start + kT, start +
 * (k+1)T); the last item of an episode is shorter, its remaining steps zero-filled with valid 0
 * and its length (valid steps) set, so no item spans two episodes.
 * Output columns, all per step: obs, action, reward (float32), terminal, timeout, valid (uint8),
 * then next_obs when present, then info_<name> for each infos/ dataset. Observations and
 * actions keep their stored types (float32, float64, integers; HDF5 bool enums become uint8).
 * The whole file is read into memory once (D4RL files are at most a few GB). */
#ifndef GB_REPLAY_D4RL_H
#define GB_REPLAY_D4RL_H

#include "replay/formats/dataset.h"

typedef struct gb_d4rl gb_d4rl;

/* Reads path and plans the items for T steps. Returns 0, GB_ENOTFOUND (no file), GB_ECORRUPT
 * (a required dataset missing, lengths that differ, a type gearbox cannot hold, naming it),
 * GB_EIO, GB_ENOMEM, or GB_EUNSUPPORTED when gearbox was built without HDF5. */
int gb_d4rl_open(gb_d4rl **out, const char *path, int64_t T, gb_error *err);

const gb_dataset_schema *gb_d4rl_schema(const gb_d4rl *d);

/* Items planned, transitions (N) and episodes in the file. */
int64_t gb_d4rl_items(const gb_d4rl *d);
int64_t gb_d4rl_transitions(const gb_d4rl *d);
int64_t gb_d4rl_episodes(const gb_d4rl *d);

/* First row (transition index) of item i and its valid steps. */
void gb_d4rl_item_span(const gb_d4rl *d, int64_t i, int64_t *first_row, int32_t *length);

/* Writes item i (0 <= i < items) into dst[c] (column c's block: T x step bytes), zero-filling
 * the steps past its length. */
void gb_d4rl_fill(const gb_d4rl *d, int64_t i, void *const *dst);

void gb_d4rl_close(gb_d4rl *d);

#endif
