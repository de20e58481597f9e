/* replay/formats/d4rl_internal.h: what the D4RL reader (d4rl.c) shares with the Minari reader
 * (minari.c): both read a dataset's transitions into memory as N rows per column and cut them
 * into items the same way. Not for use outside replay/formats/.
 * defines: struct gb_d4rl, D4RL_C_* columns, gb_d4rl_map_type, gb_d4rl_plan_items */
#ifndef GB_REPLAY_D4RL_INTERNAL_H
#define GB_REPLAY_D4RL_INTERNAL_H

#include "replay/formats/d4rl.h"

enum { C_OBS = 0, C_ACTION, C_REWARD, C_TERMINAL, C_TIMEOUT, C_VALID, C_FIXED };

struct gb_d4rl {
    gb_dataset_schema schema;
    int64_t N, episodes, nitems;
    size_t step_bytes[GB_REPLAY_MAX_COLUMNS];
    unsigned char *data[GB_REPLAY_MAX_COLUMNS]; /* N rows each; NULL for the valid column */
    uint8_t *ends;  /* NULL: episodes end at terminals or timeouts; else 1 after an episode's
                       last row (Minari: the episode groups are the episodes) */
    int64_t *item_row;                          /* first row of each item */
    int32_t *item_len;
};

#ifdef GEARBOX_HAVE_HDF5
#include <hdf5.h>

/* The gearbox dtype that holds an HDF5 type, and the memory type to read it as (H5Tclose it).
 * Returns 0, or -1 for a type gearbox cannot hold. */
int gb_d4rl_map_type(hid_t ftype, gb_dtype *dt, hid_t *mtype);

/* Plans d's items of schema.steps steps from its episode ends (d->ends, or terminals and
 * timeouts): sets item_row, item_len, nitems, episodes. Returns 0 or GB_ENOMEM. */
int gb_d4rl_plan_items(gb_d4rl *d, const char *path, gb_error *err);
#endif

#endif
