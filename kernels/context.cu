/* kernels/context.cu: the GPU context (device, stream, scratch arena, device-side error status),
 * host registration, memory helpers, copies and event timers. */
#include "kernels/ctx.cuh"

#include <stdlib.h>

int gb_kernels_cuda_fail(gb_error *err, cudaError_t e, const char *what,
                         const char *file, int line)
{
    cudaGetLastError(); /* clears the error unless it is sticky (then the context is lost) */
    return gb_error_set(err, GB_ECUDA, "%s: %s (%s) at %s:%d", what, cudaGetErrorName(e),
                        cudaGetErrorString(e), file, line);
}

int gb_kernels_begin_call(gb_kernels_ctx *ctx, gb_error *err)
{
    if (!ctx)
        return gb_error_set(err, GB_EINVAL, "kernels: NULL context");
    GB_CUDA_CHECK(cudaSetDevice(ctx->device));
    return 0;
}

int gb_kernels_arena(gb_kernels_ctx *ctx, size_t bytes, void **out, gb_error *err)
{
    if (bytes > ctx->arena_bytes) {
        /* Grows by a quarter more than asked, so slowly rising sizes do not reallocate often. */
        size_t want = gb_kernels_align(bytes + bytes / 4);
        GB_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
        if (ctx->arena) {
            GB_CUDA_CHECK(cudaFree(ctx->arena));
            ctx->arena = NULL;
            ctx->arena_bytes = 0;
        }
        GB_CUDA_CHECK(cudaMalloc(&ctx->arena, want));
        ctx->arena_bytes = want;
    }
    *out = ctx->arena;
    return 0;
}

extern "C" int gb_kernels_ctx_create(int device, void *stream, gb_kernels_ctx **out, gb_error *err)
{
    *out = NULL;
    int count = gb_kernels_device_count();
    if (device < 0 || device >= count)
        return gb_error_set(err, count ? GB_EINVAL : GB_EUNSUPPORTED,
                            "kernels: device %d asked, %d available", device, count);
    gb_kernels_ctx *ctx = (gb_kernels_ctx *)calloc(1, sizeof(*ctx));
    if (!ctx)
        return gb_error_set(err, GB_ENOMEM, "kernels: context allocation failed");
    ctx->device = device;
    cudaError_t e;
    const char *what = "";
#define TRY(call)                                                                                 \
    do {                                                                                          \
        what = #call;                                                                             \
        if ((e = (call)) != cudaSuccess)                                                          \
            goto fail;                                                                            \
    } while (0)
    TRY(cudaSetDevice(device));
    TRY(cudaDeviceGetAttribute(&ctx->sm_count, cudaDevAttrMultiProcessorCount, device));
    if (stream) {
        ctx->stream = (cudaStream_t)stream;
    } else {
        TRY(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking));
        ctx->own_stream = 1;
    }
    TRY(cudaMalloc((void **)&ctx->status, sizeof(gb_kernels_status)));
    TRY(cudaMalloc((void **)&ctx->call_bad, sizeof(unsigned long long)));
    TRY(cudaMallocHost((void **)&ctx->hstatus, sizeof(gb_kernels_status)));
    TRY(cudaMemsetAsync(ctx->status, 0, sizeof(gb_kernels_status), ctx->stream));
    TRY(cudaMemsetAsync(ctx->call_bad, 0, sizeof(unsigned long long), ctx->stream));
    TRY(cudaEventCreate(&ctx->timer[0]));
    TRY(cudaEventCreate(&ctx->timer[1]));
    TRY(cudaEventCreateWithFlags(&ctx->fence, cudaEventDisableTiming));
    TRY(cudaStreamSynchronize(ctx->stream));
#undef TRY
    *out = ctx;
    return 0;
fail:
    gb_kernels_cuda_fail(err, e, what, __FILE__, __LINE__);
    gb_kernels_ctx_destroy(ctx);
    return GB_ECUDA;
}

extern "C" void gb_kernels_ctx_destroy(gb_kernels_ctx *ctx)
{
    if (!ctx)
        return;
    /* Teardown cannot report: errors here are cleared, and everything is released anyway. */
    cudaSetDevice(ctx->device);
    if (ctx->stream)
        cudaStreamSynchronize(ctx->stream);
    if (ctx->timer[0])
        cudaEventDestroy(ctx->timer[0]);
    if (ctx->timer[1])
        cudaEventDestroy(ctx->timer[1]);
    if (ctx->fence)
        cudaEventDestroy(ctx->fence);
    cudaFree(ctx->arena);
    cudaFree(ctx->status);
    cudaFree(ctx->call_bad);
    cudaFreeHost(ctx->hstatus);
    if (ctx->own_stream && ctx->stream)
        cudaStreamDestroy(ctx->stream);
    cudaGetLastError();
    free(ctx);
}

extern "C" int gb_kernels_ctx_reserve(gb_kernels_ctx *ctx, int64_t n, int64_t k, int64_t m,
                                      gb_error *err)
{
    int rc = gb_kernels_begin_call(ctx, err);
    if (rc)
        return rc;
    (void)k; /* draws need no scratch: outputs are the caller's */
    size_t bytes = 0;
    if ((rc = gb_kernels_select_scratch(n, m, &bytes, err)))
        return rc;
    void *p;
    return gb_kernels_arena(ctx, bytes, &p, err);
}

extern "C" void *gb_kernels_ctx_stream(gb_kernels_ctx *ctx)
{
    return ctx ? (void *)ctx->stream : NULL;
}

extern "C" int gb_kernels_sync(gb_kernels_ctx *ctx, gb_error *err)
{
    int rc = gb_kernels_begin_call(ctx, err);
    if (rc)
        return rc;
    GB_CUDA_CHECK(cudaMemcpyAsync(ctx->hstatus, ctx->status, sizeof(gb_kernels_status),
                                  cudaMemcpyDeviceToHost, ctx->stream));
    GB_CUDA_CHECK(cudaMemsetAsync(ctx->status, 0, sizeof(gb_kernels_status), ctx->stream));
    GB_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    gb_kernels_status st = *ctx->hstatus;
    ctx->last_total = st.total;
    if (st.invalid)
        return gb_error_set(err, GB_EINVAL,
                            "kernels: %llu indices or step starts out of range since the last sync "
                            "(the calls that saw them wrote nothing)", st.invalid);
    if (st.overflow)
        return gb_error_set(err, GB_EINVAL,
                            "kernels: weighted selection: total weight overflows (alpha too large "
                            "for these priorities)");
    if (st.empty)
        return gb_error_set(err, GB_EAGAIN,
                            "kernels: %llu selections found no selectable item", st.empty);
    return 0;
}

extern "C" double gb_kernels_last_total(const gb_kernels_ctx *ctx)
{
    return ctx ? ctx->last_total : 0.0;
}

extern "C" int gb_kernels_host_register(void *ptr, size_t bytes, int read_only, void **dev_ptr,
                                        gb_error *err)
{
    if (!ptr || !bytes || !dev_ptr)
        return gb_error_set(err, GB_EINVAL, "host register: bad arguments");
    unsigned flags = cudaHostRegisterMapped | cudaHostRegisterPortable;
    if (read_only) {
        /* Devices without the attribute refuse the flag; writable memory registers without it
         * (memory mapped read-only then fails, with CUDA's message). */
        int device = 0, supported = 0;
        GB_CUDA_CHECK(cudaGetDevice(&device));
        GB_CUDA_CHECK(cudaDeviceGetAttribute(&supported, cudaDevAttrHostRegisterReadOnlySupported,
                                             device));
        if (supported)
            flags |= cudaHostRegisterReadOnly;
    }
    GB_CUDA_CHECK(cudaHostRegister(ptr, bytes, flags));
    cudaError_t e = cudaHostGetDevicePointer(dev_ptr, ptr, 0);
    if (e != cudaSuccess) {
        int rc = gb_kernels_cuda_fail(err, e, "cudaHostGetDevicePointer", __FILE__, __LINE__);
        cudaHostUnregister(ptr);
        cudaGetLastError();
        return rc;
    }
    return 0;
}

extern "C" int gb_kernels_host_unregister(void *ptr, gb_error *err)
{
    GB_CUDA_CHECK(cudaHostUnregister(ptr));
    return 0;
}

extern "C" int gb_kernels_host_alloc(size_t bytes, void **out, gb_error *err)
{
    *out = NULL;
    GB_CUDA_CHECK(
        cudaHostAlloc(out, bytes ? bytes : 1, cudaHostAllocMapped | cudaHostAllocPortable));
    return 0;
}

extern "C" void gb_kernels_host_free(void *ptr)
{
    if (ptr && cudaFreeHost(ptr) != cudaSuccess)
        cudaGetLastError();
}

extern "C" int gb_kernels_device_alloc(size_t bytes, void **out, gb_error *err)
{
    *out = NULL;
    GB_CUDA_CHECK(cudaMalloc(out, bytes ? bytes : 1));
    return 0;
}

extern "C" void gb_kernels_device_free(void *ptr)
{
    if (ptr && cudaFree(ptr) != cudaSuccess)
        cudaGetLastError();
}

extern "C" int gb_kernels_copy(gb_kernels_ctx *ctx, void *dst, const void *src, size_t bytes,
                               gb_error *err)
{
    int rc = gb_kernels_begin_call(ctx, err);
    if (rc)
        return rc;
    if (bytes == 0)
        return 0;
    GB_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, ctx->stream));
    return 0;
}

extern "C" int gb_kernels_timer_start(gb_kernels_ctx *ctx, gb_error *err)
{
    int rc = gb_kernels_begin_call(ctx, err);
    if (rc)
        return rc;
    GB_CUDA_CHECK(cudaEventRecord(ctx->timer[0], ctx->stream));
    return 0;
}

extern "C" int gb_kernels_timer_mark(gb_kernels_ctx *ctx, gb_error *err)
{
    int rc = gb_kernels_begin_call(ctx, err);
    if (rc)
        return rc;
    GB_CUDA_CHECK(cudaEventRecord(ctx->timer[1], ctx->stream));
    return 0;
}

extern "C" int gb_kernels_timer_read(gb_kernels_ctx *ctx, double *us, gb_error *err)
{
    int rc = gb_kernels_begin_call(ctx, err);
    if (rc)
        return rc;
    float ms = 0.0f;
    GB_CUDA_CHECK(cudaEventSynchronize(ctx->timer[1]));
    GB_CUDA_CHECK(cudaEventElapsedTime(&ms, ctx->timer[0], ctx->timer[1]));
    *us = (double)ms * 1000.0;
    return 0;
}

extern "C" int gb_kernels_timer_stop(gb_kernels_ctx *ctx, double *us, gb_error *err)
{
    int rc = gb_kernels_timer_mark(ctx, err);
    return rc ? rc : gb_kernels_timer_read(ctx, us, err);
}

extern "C" int gb_kernels_after_default_stream(gb_kernels_ctx *ctx, gb_error *err)
{
    int rc = gb_kernels_begin_call(ctx, err);
    if (rc)
        return rc;
    GB_CUDA_CHECK(cudaEventRecord(ctx->fence, cudaStreamLegacy));
    GB_CUDA_CHECK(cudaStreamWaitEvent(ctx->stream, ctx->fence, 0));
    return 0;
}

extern "C" int gb_kernels_current_device(void)
{
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return device;
}

extern "C" int gb_kernels_zero(gb_kernels_ctx *ctx, void *dst, size_t bytes, gb_error *err)
{
    int rc = gb_kernels_begin_call(ctx, err);
    if (rc)
        return rc;
    if (bytes == 0)
        return 0;
    GB_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, ctx->stream));
    return 0;
}
