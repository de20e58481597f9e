/* runtime/streams/chunk_stack_rule.h: the one rule that rebuilds a row's frame stack from a
 * chunk's stored frames (chunk.h, "Frame stacks"), shared by the CPU rebuild
 * (runtime/streams/chunk_stack.c) and the device one (kernels/stack.cu), so both give the same
 * bytes. Plain C; host and device functions under nvcc.
 * defines: gb_chunk_stack_source */
#ifndef GB_CHUNK_STACK_RULE_H
#define GB_CHUNK_STACK_RULE_H

#include <stdint.h>

#ifdef __CUDACC__
#define GB_CHUNK_STACK_HD __host__ __device__ static inline
#else
#define GB_CHUNK_STACK_HD static inline
#endif

/* Where slot j (0 the oldest .. k-1 the newest) of row r's stack of k frames comes from: a row
 * >= 0 of the obs column (that row's newest frame), or for src < 0 frame k-1+src of obs_past.
 * valid: the item's [T] valid flags. A row after one that is not valid (a reset or padding row)
 * starts an episode, and the wrapper's reset filled every slot before it with that row's frame. */
GB_CHUNK_STACK_HD int64_t gb_chunk_stack_source(const uint8_t *valid, int64_t r, int64_t k,
                                                int64_t j)
{
    int64_t start = -k; /* the episode start within the k-1 rows the stack reaches back */
    for (int64_t i = r; i >= 1 && i > r - k + 1; i--)
        if (!valid[i - 1]) {
            start = i;
            break;
        }
    int64_t src = r - (k - 1 - j);
    return src < start ? start : src;
}

#endif
