/* kernels/gather.cu: zero-copy collection. GPU warps read the chosen rows of column tables that
 * live in pinned, mapped host memory (or device memory) straight into device batches; and the
 * CPU-orchestrated path (memcpy into pinned staging, then one copy per column) for comparison.
 * CPU reference: kernels/gather_cpu.c.
 *
 * Work is split into units of at most GB_KERNELS_GATHER_CHUNK bytes of one batch row of one
 * column (kernels/gather_plan.h), one warp per unit: big rows (images) spread over many warps,
 * and each lane keeps four loads in flight, which is what hides the latency of reads crossing
 * PCIe/NVLink-C2C. A column uses 16-byte loads when its table base, stride, step offset, row
 * length and batch address are multiples of 16, else the widest of 8/4/2/1 that divides them
 * all (bool and 3 x float32 rows stay correct). */
#include <limits.h>
#include <string.h>

#include "kernels/ctx.cuh"
#include "kernels/gather_check.h"
#include "kernels/gather_plan.h"

#define GATHER_THREADS 256

/* Copies nbytes (a multiple of sizeof(T)) with one warp, four loads in flight per lane. */
template <typename T>
__device__ __forceinline__ void warp_copy(const char *__restrict__ s, char *__restrict__ d,
                                          uint64_t nbytes, unsigned lane)
{
    const T *src = (const T *)s;
    T *dst = (T *)d;
    uint64_t n = nbytes / sizeof(T), i = lane;
    for (; i + 96 < n; i += 128) {
        T a = src[i], b = src[i + 32], c = src[i + 64], e = src[i + 96];
        dst[i] = a;
        dst[i + 32] = b;
        dst[i + 64] = c;
        dst[i + 96] = e;
    }
    for (; i < n; i += 32)
        dst[i] = src[i];
}

/* Zero-fills nbytes (a multiple of sizeof(T)) with one warp. */
template <typename T>
__device__ __forceinline__ void warp_zero(char *d, uint64_t nbytes, unsigned lane)
{
    T *dst = (T *)d, z;
    memset(&z, 0, sizeof(z));
    for (uint64_t i = lane; i < nbytes / sizeof(T); i += 32)
        dst[i] = z;
}

/* Copies [0, valid) and zero-fills [valid, nbytes): the part of a unit past the item's length. */
template <typename T>
__device__ __forceinline__ void warp_copy_fill(const char *s, char *d, uint64_t valid,
                                               uint64_t nbytes, unsigned lane)
{
    warp_copy<T>(s, d, valid, lane);
    if (valid < nbytes)
        warp_zero<T>(d + valid, nbytes - valid, lane);
}

__global__ void gather_check_kernel(const int64_t *indices, const uint32_t *starts, int64_t k,
                                    uint64_t capacity, uint32_t max_start,
                                    unsigned long long *call_bad, gb_kernels_status *st)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= k)
        return;
    int64_t j = indices[i];
    if (j < 0 || (uint64_t)j >= capacity || (starts && starts[i] > max_start)) {
        atomicAdd(call_bad, 1ULL);
        atomicAdd(&st->invalid, 1ULL);
    }
}

/* One warp per unit (kernels/gather_plan.h). __grid_constant__: the plan is read in place from
 * parameter space, never copied per thread. */
__global__ void __launch_bounds__(GATHER_THREADS)
    gather_kernel(const __grid_constant__ gb_kernels_gather_plan plan)
{
    if (*plan.call_bad)
        return;
    unsigned lane = threadIdx.x & 31;
    uint64_t warp = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    uint64_t nwarps = ((uint64_t)gridDim.x * blockDim.x) >> 5;
    for (uint64_t u = warp; u < plan.units; u += nwarps) {
        gb_kernels_gather_unit w = gb_kernels_gather_unit_at(&plan, u);
        switch (w.width) {
        case 16: warp_copy_fill<uint4>(w.src, w.dst, w.valid, w.bytes, lane); break;
        case 8: warp_copy_fill<uint2>(w.src, w.dst, w.valid, w.bytes, lane); break;
        case 4: warp_copy_fill<unsigned>(w.src, w.dst, w.valid, w.bytes, lane); break;
        case 2: warp_copy_fill<unsigned short>(w.src, w.dst, w.valid, w.bytes, lane); break;
        default: warp_copy_fill<unsigned char>(w.src, w.dst, w.valid, w.bytes, lane); break;
        }
    }
}

extern "C" int gb_kernels_gather(gb_kernels_ctx *ctx, const gb_kernels_column *cols, int ncols,
                                 const int64_t *indices, int64_t k, const gb_kernels_steps *steps,
                                 gb_error *err)
{
    int rc = gb_kernels_begin_call(ctx, err);
    if (rc)
        return rc;
    gb_kernels_gather_limits lim;
    if ((rc = gb_kernels_gather_check(cols, ncols, k, steps, &lim, err)))
        return rc;
    if (ncols == 0 || k == 0)
        return 0;
    if (!indices || k > INT_MAX)
        return gb_error_set(err, GB_EINVAL, "gather: NULL indices or k %lld over 2^31",
                            (long long)k);
    GB_CUDA_CHECK(cudaMemsetAsync(ctx->call_bad, 0, sizeof(unsigned long long), ctx->stream));
    gather_check_kernel<<<(unsigned)((k + 255) / 256), 256, 0, ctx->stream>>>(
        indices, steps->starts, k, lim.capacity, lim.max_start, ctx->call_bad, ctx->status);
    GB_CUDA_CHECK(cudaGetLastError());
    for (int c0 = 0; c0 < ncols;) {
        gb_kernels_gather_plan a;
        c0 += gb_kernels_gather_plan_build(&a, cols + c0, ncols - c0, indices, k, steps);
        a.call_bad = ctx->call_bad;
        /* Enough warps to fill every SM (8 blocks of 8 warps each), never more than the units. */
        uint64_t blocks = (a.units + GATHER_THREADS / 32 - 1) / (GATHER_THREADS / 32);
        uint64_t most = (uint64_t)ctx->sm_count * 8;
        if (blocks > most)
            blocks = most;
        gather_kernel<<<(unsigned)blocks, GATHER_THREADS, 0, ctx->stream>>>(a);
        GB_CUDA_CHECK(cudaGetLastError());
    }
    return 0;
}

extern "C" int gb_kernels_gather_staged(gb_kernels_ctx *ctx, const gb_kernels_column *cols,
                                        int ncols, const int64_t *indices, int64_t k,
                                        const gb_kernels_steps *steps, void *staging,
                                        size_t staging_bytes, gb_error *err)
{
    int rc = gb_kernels_begin_call(ctx, err);
    if (rc)
        return rc;
    gb_kernels_gather_limits lim;
    if ((rc = gb_kernels_gather_check(cols, ncols, k, steps, &lim, err)))
        return rc;
    if (ncols == 0 || k == 0)
        return 0;
    if (!staging)
        return gb_error_set(err, GB_EINVAL, "staged gather: NULL staging buffer");
    /* The previous call's copies may still be reading the staging buffer. */
    GB_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    gb_kernels_column host[GB_KERNELS_MAX_COLUMNS];
    for (int c0 = 0; c0 < ncols; c0 += GB_KERNELS_MAX_COLUMNS) {
        int n = ncols - c0 < GB_KERNELS_MAX_COLUMNS ? ncols - c0 : GB_KERNELS_MAX_COLUMNS;
        size_t used = 0;
        for (int c = 0; c < n; c++) {
            size_t bytes = (size_t)k * steps->count * cols[c0 + c].step_bytes;
            size_t at = gb_kernels_align(used);
            if (at + bytes > staging_bytes)
                return gb_error_set(err, GB_EINVAL, "staged gather: batch needs more than the "
                                    "%zu bytes of staging", staging_bytes);
            host[c] = cols[c0 + c];
            host[c].dst = (char *)staging + at;
            used = at + bytes;
        }
        if (c0 > 0) /* the staging buffer is reused for the next group of columns */
            GB_CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
        if ((rc = gb_kernels_gather_cpu(host, n, indices, k, steps, err)))
            return rc;
        for (int c = 0; c < n; c++)
            GB_CUDA_CHECK(cudaMemcpyAsync(cols[c0 + c].dst, host[c].dst,
                                          (size_t)k * steps->count * cols[c0 + c].step_bytes,
                                          cudaMemcpyHostToDevice, ctx->stream));
    }
    return 0;
}
