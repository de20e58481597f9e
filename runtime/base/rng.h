/* runtime/base/rng.h: per-object pseudo-random numbers (xoshiro256**, seeded through SplitMix64).
 * Every object that draws (environment, actor, selector) owns a gb_rng seeded from
 * (experiment seed, role, index), so the same seed gives the same run on one worker.
 * defines: gb_rng, gb_rng_seed, gb_rng_seed_for, gb_rng_seed_of, gb_rng_next, gb_rng_below,
 *          gb_rng_uniform, gb_rng_uniform_f, gb_rng_normal, gb_rng_jump */
#ifndef GB_RUNTIME_RNG_H
#define GB_RUNTIME_RNG_H

#include <stdint.h>

typedef struct gb_rng {
    uint64_t s[4];
    double spare_normal; /* second value of the last polar-method pair */
    int has_spare;
} gb_rng;

/* Seeds from one 64-bit value (SplitMix64 expands it, so any seed, 0 included, is fine). */
void gb_rng_seed(gb_rng *rng, uint64_t seed);

/* Seeds from the experiment seed, a role name and a worker/object index: distinct (role, index)
 * pairs give unrelated streams. */
void gb_rng_seed_for(gb_rng *rng, uint64_t seed, const char *role, uint64_t index);

/* The one seeding rule: the seed of the generator that (role, index) uses for `purpose`
 * ("envs", "model", "learner", "replay", ...), derived from the experiment seed. Every random
 * stream of a run takes its seed from here, so two workers, or two purposes of one worker, never
 * share a stream, and the same experiment seed gives the same streams. role: "actor",
 * "policy", "trainer", "server", ... (inline mode uses the role whose work it does). */
uint64_t gb_rng_seed_of(uint64_t experiment_seed, const char *role, uint64_t index,
                        const char *purpose);

/* Next 64 random bits. */
static inline uint64_t gb_rng_next(gb_rng *rng)
{
    uint64_t *s = rng->s;
    uint64_t x = s[1] * 5;
    uint64_t result = ((x << 7) | (x >> 57)) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return result;
}

/* Uniform integer in [0, n) without modulo bias (Lemire's multiply-and-reject); n > 0. */
uint64_t gb_rng_below(gb_rng *rng, uint64_t n);

/* Uniform double in [0, 1) with 53 random bits. */
static inline double gb_rng_uniform(gb_rng *rng)
{
    return (double)(gb_rng_next(rng) >> 11) * 0x1.0p-53;
}

/* Uniform float in [0, 1) with 24 random bits. */
static inline float gb_rng_uniform_f(gb_rng *rng)
{
    return (float)(gb_rng_next(rng) >> 40) * 0x1.0p-24f;
}

/* Standard normal (Marsaglia's polar method; the pair's second value is kept for the next call). */
double gb_rng_normal(gb_rng *rng);

/* Advances the stream by 2^128 draws: gives non-overlapping sub-streams (threads, env copies). */
void gb_rng_jump(gb_rng *rng);

/* SplitMix64 step, also useful to hash small integers. */
uint64_t gb_splitmix64(uint64_t *state);

#endif
