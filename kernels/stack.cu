/* kernels/stack.cu: frame stacks rebuilt on the device from a batch's stored frames, so a
 * frame-stacked batch reaches the learner by the zero-copy gather (frames, obs_past) and this
 * one launch instead of a rebuild on the host and a copy of k times the bytes. The rule is
 * runtime/streams/chunk_stack_rule.h, the CPU's (gb_chunk_stack_expand) too. */
#include "kernels/ctx.cuh"
#include "runtime/streams/chunk_stack_rule.h"

#define STACK_THREADS 256

typedef struct stack_args {
    const char *frames;  /* [n, T, fb] */
    const char *past;    /* [n, k - 1, fb] */
    const uint8_t *valid; /* [n, T] */
    char *out;           /* [n, T, k, fb] */
    int64_t n, T, k;
    uint64_t fb;
} stack_args;

/* One block per unit (item, row, slot) in a grid-stride loop; its threads copy the slot's fb
 * bytes in words of W bytes (W divides fb and every buffer is 256-byte aligned). */
template <typename W> __global__ void stack_kernel(stack_args a)
{
    const int64_t units = a.n * a.T * a.k;
    const uint64_t words = a.fb / sizeof(W);
    for (int64_t u = blockIdx.x; u < units; u += gridDim.x) {
        const int64_t j = u % a.k, r = (u / a.k) % a.T, i = u / (a.k * a.T);
        const int64_t src = gb_chunk_stack_source(a.valid + i * a.T, r, a.k, j);
        const char *from = src >= 0 ? a.frames + ((uint64_t)(i * a.T + src)) * a.fb
                                    : a.past + ((uint64_t)(i * (a.k - 1) + a.k - 1 + src)) * a.fb;
        const W *s = (const W *)from;
        W *d = (W *)(a.out + (uint64_t)u * a.fb);
        for (uint64_t w = threadIdx.x; w < words; w += blockDim.x)
            d[w] = s[w];
    }
}

extern "C" int gb_kernels_stack_expand(gb_kernels_ctx *ctx, int64_t n, int64_t T, int64_t k,
                                       uint64_t frame_bytes, const void *frames,
                                       const void *past, const uint8_t *valid, void *out,
                                       gb_error *err)
{
    int rc = gb_kernels_begin_call(ctx, err);
    if (rc)
        return rc;
    if (n < 0 || T < 1 || k < 2 || frame_bytes == 0)
        return gb_error_set(err, GB_EINVAL, "stack expand: n %lld, T %lld, k %lld, frame of "
                            "%llu bytes", (long long)n, (long long)T, (long long)k,
                            (unsigned long long)frame_bytes);
    if (n == 0)
        return 0;
    stack_args a = {(const char *)frames, (const char *)past, valid, (char *)out, n, T, k,
                    frame_bytes};
    const int64_t units = n * T * k;
    const unsigned blocks = (unsigned)(units < 65535 ? units : 65535);
    const uint64_t align = (uintptr_t)frames | (uintptr_t)past | (uintptr_t)out | frame_bytes;
    if (align % 16 == 0)
        stack_kernel<uint4><<<blocks, STACK_THREADS, 0, ctx->stream>>>(a);
    else if (align % 8 == 0)
        stack_kernel<uint2><<<blocks, STACK_THREADS, 0, ctx->stream>>>(a);
    else if (align % 4 == 0)
        stack_kernel<uint32_t><<<blocks, STACK_THREADS, 0, ctx->stream>>>(a);
    else
        stack_kernel<uint8_t><<<blocks, STACK_THREADS, 0, ctx->stream>>>(a);
    GB_CUDA_CHECK(cudaGetLastError());
    return 0;
}
