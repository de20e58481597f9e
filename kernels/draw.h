/* kernels/draw.h: the counter-based random draws and the weight function shared by the CUDA
 * kernels and their CPU references, so both sides draw the same numbers for the same seed.
 * Draw i of a call is output i of a SplitMix64 stream whose state starts at mix(seed): random
 * access, no state to carry between threads, and SplitMix64 passes BigCrush.
 * defines: gb_kernels_mix64, gb_kernels_draw_bits, gb_kernels_draw, gb_kernels_draw_target,
 *          gb_kernels_weight, gb_kernels_below */
#ifndef GB_KERNELS_DRAW_H
#define GB_KERNELS_DRAW_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define GB_KERNELS_HD __host__ __device__ static inline
#else
#define GB_KERNELS_HD static inline
#endif

#define GB_KERNELS_GOLDEN 0x9e3779b97f4a7c15ULL

/* SplitMix64's finaliser. */
GB_KERNELS_HD uint64_t gb_kernels_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* 64 random bits of draw i. */
GB_KERNELS_HD uint64_t gb_kernels_draw_bits(uint64_t seed, uint64_t i)
{
    uint64_t state = gb_kernels_mix64(seed ^ 0x6a09e667f3bcc909ULL);
    return gb_kernels_mix64(state + (i + 1) * GB_KERNELS_GOLDEN);
}

/* Draw i as a double in [0, 1) (53 bits, exact on both sides). */
GB_KERNELS_HD double gb_kernels_draw(uint64_t seed, uint64_t i)
{
    return (double)(gb_kernels_draw_bits(seed, i) >> 11) * 0x1.0p-53;
}

/* Position in [0, n) of uniform draw i: floor(r * n / 2^64) (bias below n / 2^64). */
GB_KERNELS_HD uint64_t gb_kernels_below(uint64_t seed, uint64_t i, uint64_t n)
{
    uint64_t r = gb_kernels_draw_bits(seed, i);
#ifdef __CUDA_ARCH__
    return __umul64hi(r, n);
#else
    return (uint64_t)(((unsigned __int128)r * n) >> 64);
#endif
}

/* Target of weighted draw i of k in [0, total): u * total, stratified or not, kept below total
 * (u * total can round up to total). No fused multiply-add can change it: one division, one
 * multiplication, both correctly rounded on host and device. */
GB_KERNELS_HD double gb_kernels_draw_target(uint64_t seed, uint64_t i, uint64_t k, int stratified,
                                            double total, double below_total)
{
    double u = gb_kernels_draw(seed, i);
    if (stratified)
        u = ((double)i + u) / (double)k;
    double t = u * total;
    return t < below_total ? t : below_total;
}

/* Selection weight of a priority: p^alpha when p is finite and > 0, else 0 (never selected). */
GB_KERNELS_HD double gb_kernels_weight(float p, double alpha)
{
    if (!(p > 0.0f) || !(p <= 3.402823466e38f))
        return 0.0;
    if (alpha == 1.0)
        return (double)p;
    if (alpha == 0.0)
        return 1.0;
    return pow((double)p, alpha);
}

#endif
