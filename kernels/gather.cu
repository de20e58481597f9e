/* kernels/gather.cu: zero-copy collection. GPU warps read the chosen rows of column tables that
 * live in pinned, mapped host memory (or device memory) straight into device batches; and the
 * CPU-orchestrated path (memcpy into pinned staging, then one copy per column) for comparison.
 * CPU reference: kernels/gather_cpu.c.
 *
 * Work is split into units of at most GATHER_CHUNK bytes of one row of one column, one warp per
 * unit: big rows (images) spread over many warps, and each lane keeps four loads in flight, which
 * is what hides the latency of reads crossing PCIe/NVLink-C2C. A column uses 16-byte loads when
 * its table base, stride, step offset, row length and batch address are multiples of 16, else
 * the widest of 8/4/2/1 that divides them all (bool and 3 x float32 rows stay correct). */
#include <limits.h>
#include <string.h>

#include "kernels/ctx.cuh"
#include "kernels/gather_check.h"

#define GATHER_CHUNK 8192 /* bytes per unit; a multiple of every load width */
#define GATHER_THREADS 256

typedef struct gather_col {
    const char *src;
    char *dst;
    uint64_t row_stride;
    uint64_t step_bytes;
    uint64_t len;          /* bytes per item in the batch: count * step_bytes */
    uint64_t chunks;       /* units per item */
    uint64_t units_before; /* units of the columns before this one in the launch */
    uint32_t width;        /* load width in bytes */
} gather_col;

typedef struct gather_args {
    gather_col col[GB_KERNELS_MAX_COLUMNS];
    int ncols;
    const int64_t *indices;  /* (k,) */
    const uint32_t *starts;  /* (k,) or NULL */
    const int32_t *lengths;  /* (k,) or NULL */
    uint64_t first;          /* first step when starts is NULL */
    uint64_t units;
    const unsigned long long *call_bad;
} gather_args;

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

__global__ void __launch_bounds__(GATHER_THREADS) gather_kernel(const gather_args a)
{
    if (*a.call_bad)
        return;
    unsigned lane = threadIdx.x & 31;
    uint64_t warp = ((uint64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    uint64_t nwarps = ((uint64_t)gridDim.x * blockDim.x) >> 5;
    for (uint64_t u = warp; u < a.units; u += nwarps) {
        int c = 0;
        while (c + 1 < a.ncols && u >= a.col[c + 1].units_before)
            c++;
        /* A copy by value: indexing the parameter array keeps it in parameter space (taking its
         * address could make every thread copy the whole argument block to local memory). */
        const gather_col col = a.col[c];
        uint64_t local = u - col.units_before;
        uint64_t item = local / col.chunks, begin = (local % col.chunks) * GATHER_CHUNK;
        uint64_t end = begin + GATHER_CHUNK < col.len ? begin + GATHER_CHUNK : col.len;
        uint64_t first_step = a.starts ? (uint64_t)a.starts[item] : a.first;
        const char *s = col.src + (uint64_t)a.indices[item] * col.row_stride +
                        first_step * col.step_bytes + begin;
        char *d = col.dst + item * col.len + begin;
        /* Bytes of this unit inside the item's valid steps (the rest is zero-filled). */
        uint64_t valid = end - begin;
        if (a.lengths) {
            int64_t v = (int64_t)a.lengths[item] - (int64_t)first_step;
            uint64_t vb = v <= 0 ? 0 : (uint64_t)v * col.step_bytes;
            valid = vb <= begin ? 0 : vb >= end ? end - begin : vb - begin;
        }
        switch (col.width) {
        case 16: warp_copy_fill<uint4>(s, d, valid, end - begin, lane); break;
        case 8: warp_copy_fill<uint2>(s, d, valid, end - begin, lane); break;
        case 4: warp_copy_fill<unsigned>(s, d, valid, end - begin, lane); break;
        case 2: warp_copy_fill<unsigned short>(s, d, valid, end - begin, lane); break;
        default: warp_copy_fill<unsigned char>(s, d, valid, end - begin, lane); break;
        }
    }
}

/* The widest load every address and size of this column allows. */
static uint32_t column_width(const gb_kernels_column *col, const gb_kernels_steps *steps)
{
    /* With per-item starts or lengths, offsets are any multiple of step_bytes. */
    uint64_t first = steps->starts || steps->lengths ? col->step_bytes
                                                     : (uint64_t)steps->first * col->step_bytes;
    uint64_t bits = (uint64_t)(uintptr_t)col->src | (uint64_t)(uintptr_t)col->dst |
                    col->row_stride | first | (uint64_t)steps->count * col->step_bytes;
    uint32_t w = 16;
    while (w > 1 && (bits & (w - 1)))
        w >>= 1;
    return w;
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
    for (int c0 = 0; c0 < ncols; c0 += GB_KERNELS_MAX_COLUMNS) {
        gather_args a;
        memset(&a, 0, sizeof(a));
        a.ncols = ncols - c0 < GB_KERNELS_MAX_COLUMNS ? ncols - c0 : GB_KERNELS_MAX_COLUMNS;
        a.indices = indices;
        a.starts = steps->starts;
        a.lengths = steps->lengths;
        a.first = steps->first;
        a.call_bad = ctx->call_bad;
        for (int c = 0; c < a.ncols; c++) {
            const gb_kernels_column *in = &cols[c0 + c];
            gather_col *g = &a.col[c];
            g->src = (const char *)in->src;
            g->dst = (char *)in->dst;
            g->row_stride = in->row_stride;
            g->step_bytes = in->step_bytes;
            g->len = (uint64_t)steps->count * in->step_bytes;
            g->chunks = (g->len + GATHER_CHUNK - 1) / GATHER_CHUNK;
            g->units_before = a.units;
            g->width = column_width(in, steps);
            a.units += g->chunks * (uint64_t)k;
        }
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
