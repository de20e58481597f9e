/* tests/workers/roles/chunk_test_util.h: random rows for the learning tests' chunks (float
 * observations, two discrete actions), drawn in one fixed order from the caller's generator so
 * that a seed gives the same chunks in every test that uses it.
 * defines: random_chunk_rows */
#ifndef GB_TESTS_WORKERS_ROLES_CHUNK_TEST_UTIL_H
#define GB_TESTS_WORKERS_ROLES_CHUNK_TEST_UTIL_H

#include "runtime/base/rng.h"
#include "runtime/streams/chunk.h"

#include <stdint.h>

/* Fills one chunk's obs and next_obs (uniform in [-0.5, 0.5)), and per step its action (0 or 1)
 * and reward (uniform in [0, 1)); the other columns are the caller's. */
static inline void random_chunk_rows(const gb_chunk_layout *l, void *const cols[], gb_rng *rng)
{
    float *obs = cols[GB_CHUNK_OBS], *next = cols[GB_CHUNK_NEXT_OBS];
    for (size_t k = 0; k < l->bytes[GB_CHUNK_OBS] / sizeof(float); k++)
        obs[k] = (float)gb_rng_uniform(rng) - 0.5f;
    for (size_t k = 0; k < l->bytes[GB_CHUNK_NEXT_OBS] / sizeof(float); k++)
        next[k] = (float)gb_rng_uniform(rng) - 0.5f;
    for (int64_t t = 0; t < l->T; t++) {
        ((int64_t *)cols[GB_CHUNK_ACTION])[t] = (int64_t)(gb_rng_next(rng) % 2);
        ((float *)cols[GB_CHUNK_REWARD])[t] = (float)gb_rng_uniform(rng);
    }
}

#endif
