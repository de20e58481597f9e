/* tests/replay/util.h: helpers shared by the replay tests: a small schema and item contents
 * derived from one 64-bit id, so any torn or reused block shows as a mismatch. */
#ifndef GB_TESTS_REPLAY_UTIL_H
#define GB_TESTS_REPLAY_UTIL_H

#include "replay/replay.h"

#include <string.h>

/* Columns: 0 "obs" float32[4] per step, 1 "act" int32 per step, 2 "id" uint64 per item,
 * 3 "boot" float32[4] per item (bootstrap observation). */
static inline void util_options(gb_replay_options *o, int64_t capacity, int64_t steps)
{
    gb_replay_options_default(o);
    o->capacity = capacity;
    o->steps = steps;
    o->timeout_s = 5;
    int64_t four = 4;
    gb_replay_add_column(o, "obs", GB_DTYPE_FLOAT32, 1, &four, 0, NULL);
    gb_replay_add_column(o, "act", GB_DTYPE_INT32, 0, NULL, 0, NULL);
    gb_replay_add_column(o, "id", GB_DTYPE_UINT64, 0, NULL, 1, NULL);
    gb_replay_add_column(o, "boot", GB_DTYPE_FLOAT32, 1, &four, 1, NULL);
}

static inline float util_obs(uint64_t id, int64_t t, int j)
{
    return (float)(id % 100000) + (float)t * 0.5f + (float)j * 0.125f;
}
static inline int32_t util_act(uint64_t id, int64_t t)
{
    return (int32_t)((id * 7 + (uint64_t)t) & 0x7fffffff);
}

/* Writes item contents for id into block idx (in place). */
static inline void util_write(gb_replay *r, int64_t idx, uint64_t id, int64_t steps)
{
    float *obs = gb_replay_block(r, 0, idx);
    int32_t *act = gb_replay_block(r, 1, idx);
    uint64_t *pid = gb_replay_block(r, 2, idx);
    float *boot = gb_replay_block(r, 3, idx);
    for (int64_t t = 0; t < steps; t++) {
        for (int j = 0; j < 4; j++)
            obs[t * 4 + j] = util_obs(id, t, j);
        act[t] = util_act(id, t);
    }
    *pid = id;
    for (int j = 0; j < 4; j++)
        boot[j] = util_obs(id, steps, j);
}

/* Checks collected rows for one item: steps [t0, t0 + span) with `valid` valid steps. Returns 1
 * when consistent with id. */
static inline int util_check_rows(const float *obs, const int32_t *act, uint64_t id, int32_t t0,
                                  int32_t span, int32_t valid)
{
    for (int32_t s = 0; s < span; s++) {
        for (int j = 0; j < 4; j++) {
            float want = s < valid ? util_obs(id, t0 + s, j) : 0.0f;
            if (obs[s * 4 + j] != want)
                return 0;
        }
        if (act[s] != (s < valid ? util_act(id, t0 + s) : 0))
            return 0;
    }
    return 1;
}

#endif
