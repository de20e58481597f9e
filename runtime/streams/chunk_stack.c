/* runtime/streams/chunk_stack.c: whole observations rebuilt from a chunk's stored frames (the
 * rule of chunk.h's "Frame stacks"). */
#include "runtime/streams/chunk.h"
#include "runtime/streams/chunk_stack_rule.h"

#include <string.h>

void gb_chunk_stack_row(const gb_chunk_layout *l, const void *obs, const void *past,
                        const uint8_t *valid, int64_t r, void *out)
{
    const int64_t k = l->frame_stack;
    const uint64_t fb = l->frame_bytes;
    char *dst = out;
    for (int64_t j = 0; j < k; j++, dst += fb) {
        int64_t src = gb_chunk_stack_source(valid, r, k, j);
        const char *from = src >= 0 ? (const char *)obs + (uint64_t)src * fb
                                    : (const char *)past + (uint64_t)(k - 1 + src) * fb;
        memcpy(dst, from, fb);
    }
}

void gb_chunk_stack_expand(const gb_chunk_layout *l, int64_t n, const void *obs,
                           const void *past, const uint8_t *valid, void *out)
{
    const int64_t T = l->T;
    const uint64_t whole = l->frame_bytes * (uint64_t)l->frame_stack;
    const uint64_t past_bytes = l->past_col >= 0 ? l->bytes[l->past_col] : 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t r = 0; r < T; r++)
            gb_chunk_stack_row(l, (const char *)obs + (uint64_t)i * l->bytes[GB_CHUNK_OBS],
                               (const char *)past + (uint64_t)i * past_bytes,
                               valid + i * T, r,
                               (char *)out + ((uint64_t)i * (uint64_t)T + (uint64_t)r) * whole);
}
