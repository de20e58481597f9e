/* replay/formats/d4rl.h: D4RL-layout HDF5 datasets cut into fixed-length trajectory items.
 * defines: gb_d4rl, gb_d4rl_open, gb_minari_open, gb_d4rl_schema, gb_d4rl_items, gb_d4rl_fill,
 *          gb_d4rl_close, gb_d4rl_export, gb_d4rl_export_stats
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

/* Reads a Minari dataset (the `minari` package's local HDF5 format, minari.c) into the same
 * columns: path is the dataset's folder (holding data/main_data.hdf5), its data/ folder, or the
 * main_data.hdf5 file. Each group episode_<i> (i = 0, 1, ...) is one episode of n steps:
 * observations [n+1, *obs] (obs = rows 0..n-1, next_obs = rows 1..n), actions [n, *act],
 * rewards [n], terminations [n], truncations [n] (-> terminal, timeout). Episodes end with their
 * group (whatever their flags say). Observations or actions stored as groups (Dict and Tuple
 * spaces) and infos are not read. Returns gb_d4rl_open's errors; GB_ECORRUPT names the episode
 * and dataset at fault. */
int gb_minari_open(gb_d4rl **out, const char *path, int64_t T, gb_error *err);

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

/* ---- writing (d4rl_export.c) ----------------------------------------------------------------- */

typedef struct gb_d4rl_export_stats {
    int64_t records;     /* items read */
    int64_t transitions; /* rows written: the items' valid steps */
    int64_t chains;      /* runs of items that continue each other (one per recorded stream
                            piece) */
    int64_t episodes;    /* rows with terminals or timeouts set */
    int64_t cut;         /* of those, episodes the recording ended inside (timeouts set) */
} gb_d4rl_export_stats;

/* Writes gearbox dataset files (one schema: a recording from `gearbox run --record`, columns
 * obs, action, reward, terminated, truncated, valid, next_obs per item; or the D4RL columns with
 * next_obs per step) as a D4RL HDF5 file at out: observations, actions, rewards (float32),
 * terminals, timeouts (bool, as h5py writes them), next_observations, and every other
 * per-step column (a recording's logp and version) as infos/<name>, one row per valid step.
 * A recording interleaves its streams' items; an item whose first observation is the final
 * next observation of an earlier, unfinished item continues it, so each episode's rows come
 * out consecutive and in order (where observations repeat across streams, an item may be joined
 * to another stream's with the same observation: still a consistent trajectory when the
 * observation is the state). An episode the recording ended inside gets timeouts set on its
 * last row. Loads the whole dataset into memory. Returns 0, GB_EINVAL (a schema without those
 * columns, naming the missing one; nothing valid), the readers' errors, GB_EIO, GB_ENOMEM, or
 * GB_EUNSUPPORTED without HDF5. */
int gb_d4rl_export(const char *const *paths, int npaths, const char *out,
                   gb_d4rl_export_stats *st, gb_error *err);

#endif
