/* runtime/base/rng.c: xoshiro256** seeding, bounded integers and normals (see rng.h). */
#include "runtime/base/rng.h"

#include <math.h>

uint64_t gb_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void gb_rng_seed(gb_rng *rng, uint64_t seed)
{
    uint64_t sm = seed;
    for (int i = 0; i < 4; i++)
        rng->s[i] = gb_splitmix64(&sm);
    rng->has_spare = 0;
    rng->spare_normal = 0.0;
}

/* FNV-1a of a name ("" for NULL). */
static uint64_t name_hash(const char *name)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const char *p = name ? name : ""; *p; p++) {
        h ^= (unsigned char)*p;
        h *= 0x100000001b3ULL;
    }
    return h;
}

void gb_rng_seed_for(gb_rng *rng, uint64_t seed, const char *role, uint64_t index)
{
    /* The role's hash, mixed with the seed and the index through SplitMix64, so that
     * neighbouring indices and similar names land far apart. */
    uint64_t st = seed ^ 0x6a09e667f3bcc909ULL;
    uint64_t a = gb_splitmix64(&st);
    st = name_hash(role) ^ a;
    uint64_t b = gb_splitmix64(&st);
    st = index ^ b;
    gb_rng_seed(rng, gb_splitmix64(&st));
}

uint64_t gb_rng_seed_of(uint64_t experiment_seed, const char *role, uint64_t index,
                        const char *purpose)
{
    gb_rng r;
    gb_rng_seed_for(&r, experiment_seed, role, index);
    uint64_t st = name_hash(purpose) ^ gb_rng_next(&r);
    return gb_splitmix64(&st);
}

uint64_t gb_rng_below(gb_rng *rng, uint64_t n)
{
    /* Lemire, "Fast Random Integer Generation in an Interval" (2019). */
    uint64_t x = gb_rng_next(rng);
    __uint128_t m = (__uint128_t)x * n;
    uint64_t low = (uint64_t)m;
    if (low < n) {
        uint64_t threshold = -n % n;
        while (low < threshold) {
            x = gb_rng_next(rng);
            m = (__uint128_t)x * n;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

double gb_rng_normal(gb_rng *rng)
{
    if (rng->has_spare) {
        rng->has_spare = 0;
        return rng->spare_normal;
    }
    double u, v, s;
    do {
        u = 2.0 * gb_rng_uniform(rng) - 1.0;
        v = 2.0 * gb_rng_uniform(rng) - 1.0;
        s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    double f = sqrt(-2.0 * log(s) / s);
    rng->spare_normal = v * f;
    rng->has_spare = 1;
    return u * f;
}

void gb_rng_jump(gb_rng *rng)
{
    static const uint64_t jump[] = {0x180ec6d33cfd0abaULL, 0xd5a61266f0c9392cULL,
                                    0xa9582618e03fc9aaULL, 0x39abdc4529b1661cULL};
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int i = 0; i < 4; i++) {
        for (int b = 0; b < 64; b++) {
            if (jump[i] & (1ULL << b)) {
                s0 ^= rng->s[0];
                s1 ^= rng->s[1];
                s2 ^= rng->s[2];
                s3 ^= rng->s[3];
            }
            gb_rng_next(rng);
        }
    }
    rng->s[0] = s0;
    rng->s[1] = s1;
    rng->s[2] = s2;
    rng->s[3] = s3;
    rng->has_spare = 0;
}
