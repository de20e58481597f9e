/* kernels/select.cu: weighted selection (CUB inclusive prefix sum of priority^alpha, then one
 * binary search per draw), uniform selection, top-k (CUB radix sort) and the priority scatter.
 * CPU references with the same semantics: kernels/select_cpu.c.
 *
 * Why double prefix sums: with 1e8 items a float running sum reaches ~1e8 where one ulp is 8,
 * so small weights would get no interval at all. Doubles keep every item's interval to within
 * ~1e-16 relative. The GPU adds in CUB's tile order and the CPU from left to right, so the sums
 * differ in their last bits: a draw landing within that distance of a boundary can pick the
 * neighbouring item on one side (probability ~n * 1e-16 per draw); everything else is identical.
 *
 * gb_kernels_select_weighted_tiles draws the same way without writing the n sums: one pass sums
 * each tile of TILE weights (the only pass over all n priorities, which it reads once), a scan of
 * the tiles' sums, then one warp a draw finds its tile by binary search and its item by scanning
 * that tile's weights again (TILE of them). The sums are added in another order, so it differs
 * from the CPU reference where the full scan does: within rounding distance of a boundary. The
 * full scan writes and reads 8 bytes an item beyond the 4 it reads (on an H200: 1.06 ms for 1024
 * draws from 1e8, its target 1 ms); the tiles are there to be measured beside it. */
#include <cub/block/block_reduce.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <thrust/iterator/transform_iterator.h>

#include <limits.h>

#include "kernels/ctx.cuh"
#include "kernels/draw.h"

#define THREADS 256

struct weight_op {
    double alpha;
    __host__ __device__ double operator()(float p) const { return gb_kernels_weight(p, alpha); }
};

typedef thrust::transform_iterator<weight_op, const float *, double> weight_iter;

static unsigned blocks_for(int64_t n)
{
    int64_t b = (n + THREADS - 1) / THREADS;
    return (unsigned)(b < 1 ? 1 : b);
}

/* ---- scratch --------------------------------------------------------------------------------- */

static int scan_temp_bytes(int64_t n, size_t *bytes, gb_error *err)
{
    *bytes = 0;
    weight_iter it(NULL, weight_op{1.0});
    GB_CUDA_CHECK(cub::DeviceScan::InclusiveSum(NULL, *bytes, it, (double *)NULL, (int)n));
    return 0;
}

static int topk_temp_bytes(int64_t n, size_t *bytes, gb_error *err)
{
    *bytes = 0;
    cub::DoubleBuffer<float> keys(NULL, NULL);
    cub::DoubleBuffer<unsigned> vals(NULL, NULL);
    GB_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(NULL, *bytes, keys, vals, (int)n));
    return 0;
}

static int scatter_temp_bytes(int64_t m, int end_bit, size_t *bytes, gb_error *err)
{
    *bytes = 0;
    cub::DoubleBuffer<unsigned long long> keys(NULL, NULL);
    cub::DoubleBuffer<unsigned> vals(NULL, NULL);
    GB_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(NULL, *bytes, keys, vals, (int)m, 0, end_bit));
    return 0;
}

static size_t weighted_scratch(int64_t n, size_t temp)
{
    return gb_kernels_align((size_t)n * 8) + gb_kernels_align(temp);
}

#define TILE_THREADS 256
#define TILE_ITEMS 4
#define TILE (TILE_THREADS * TILE_ITEMS) /* weights a tile: a block sums one */

static int64_t tiles_for(int64_t n) { return (n + TILE - 1) / TILE; }

static int tiles_temp_bytes(int64_t tiles, size_t *bytes, gb_error *err)
{
    *bytes = 0;
    GB_CUDA_CHECK(cub::DeviceScan::InclusiveSum(NULL, *bytes, (const double *)NULL,
                                                (double *)NULL, (int)tiles));
    return 0;
}

static size_t tiles_scratch(int64_t tiles, size_t temp)
{
    return 2 * gb_kernels_align((size_t)tiles * 8) + gb_kernels_align(temp);
}

static size_t topk_scratch(int64_t n, size_t temp)
{
    return 4 * gb_kernels_align((size_t)n * 4) + gb_kernels_align(temp);
}

static size_t scatter_scratch(int64_t m, size_t temp)
{
    return 2 * gb_kernels_align((size_t)m * 8) + 2 * gb_kernels_align((size_t)m * 4) +
           gb_kernels_align(temp);
}

int gb_kernels_select_scratch(int64_t n, int64_t m, size_t *bytes, gb_error *err)
{
    if (n < 0 || n > INT_MAX || m < 0 || m > INT_MAX)
        return gb_error_set(err, GB_EINVAL, "kernels: sizes n %lld, m %lld outside [0, 2^31)",
                            (long long)n, (long long)m);
    size_t scan = 0, tiles = 0, sort = 0, scat = 0;
    int rc;
    if ((rc = scan_temp_bytes(n, &scan, err)) ||
        (rc = tiles_temp_bytes(tiles_for(n), &tiles, err)) ||
        (rc = topk_temp_bytes(n, &sort, err)) || (rc = scatter_temp_bytes(m, 64, &scat, err)))
        return rc;
    const size_t need[] = {weighted_scratch(n, scan), tiles_scratch(tiles_for(n), tiles),
                           topk_scratch(n, sort), scatter_scratch(m, scat)};
    *bytes = 0;
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++)
        *bytes = need[i] > *bytes ? need[i] : *bytes;
    return 0;
}

/* ---- kernels --------------------------------------------------------------------------------- */

/* Outputs for a selection that had nothing to choose from. */
__global__ void fill_none_kernel(int64_t k, int64_t *indices, float *probs, gb_kernels_status *st)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i == 0)
        atomicAdd(&st->empty, 1ULL);
    if (i >= k)
        return;
    indices[i] = GB_KERNELS_NONE;
    if (probs)
        probs[i] = 0.0f;
}

/* A weighted call's total, checked once: the first draw records it (and an empty or overflowed
 * one) in st. 1 when nothing can be drawn from it. */
__device__ static int weighted_total_bad(double total, int first, gb_kernels_status *st)
{
    const int bad = !(total > 0.0) || isinf(total);
    if (first) {
        st->total = total;
        if (bad)
            atomicAdd(isinf(total) ? &st->overflow : &st->empty, 1ULL);
    }
    return bad;
}

/* The first j in [0, n) with cum[j] > t (n when none), cum non-decreasing. */
__device__ static int64_t first_above(const double *cum, int64_t n, double t)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (cum[mid] > t)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* One thread per draw: target in [0, total), first j with cum[j] > target. cum is (n,). */
__global__ void weighted_search_kernel(const double *cum, const float *priorities, int64_t n,
                                       double alpha, int64_t k, uint64_t seed, int stratified,
                                       int64_t *indices, float *probs, gb_kernels_status *st)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    double total = cum[n - 1];
    int bad = weighted_total_bad(total, i == 0, st);
    if (i >= k)
        return;
    if (bad) {
        indices[i] = GB_KERNELS_NONE;
        if (probs)
            probs[i] = 0.0f;
        return;
    }
    double t = gb_kernels_draw_target(seed, (uint64_t)i, (uint64_t)k, stratified, total,
                                      nextafter(total, 0.0));
    int64_t lo = first_above(cum, n, t);
    indices[i] = lo;
    if (probs)
        probs[i] = (float)(gb_kernels_weight(priorities[lo], alpha) / total);
}

/* The sum of each tile's weights into sums (one block a tile; thread t adds t, t + 256, ...). */
__global__ void __launch_bounds__(TILE_THREADS)
    tile_sum_kernel(const float *priorities, int64_t n, double alpha, double *sums)
{
    typedef cub::BlockReduce<double, TILE_THREADS> reduce;
    __shared__ typename reduce::TempStorage tmp;
    const int64_t base = (int64_t)blockIdx.x * TILE;
    double s = 0.0;
#pragma unroll
    for (int j = 0; j < TILE_ITEMS; j++) {
        const int64_t e = base + j * TILE_THREADS + threadIdx.x;
        if (e < n)
            s += gb_kernels_weight(priorities[e], alpha);
    }
    const double total = reduce(tmp).Sum(s);
    if (threadIdx.x == 0)
        sums[blockIdx.x] = total;
}

/* One warp a draw: target in [0, total), the first tile j with cum[j] > target, then in it the
 * first item whose running sum from the tile's start passes what is left of the target, 32
 * weights at a time. When rounding leaves the target past the tile's own running total, the
 * tile's last item of positive weight. cum is (tiles,), sums the tiles' own. A scan in another
 * order than left to right can step up by an ulp over a tile that weighs nothing: the search
 * then takes the nearest tile that weighs something, before it or else after. */
__global__ void tile_search_kernel(const double *cum, const double *sums, int64_t tiles,
                                   const float *priorities,
                                   int64_t n, double alpha, int64_t k, uint64_t seed,
                                   int stratified, int64_t *indices, float *probs,
                                   gb_kernels_status *st)
{
    const unsigned all = 0xffffffffu;
    const int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = (int)(threadIdx.x & 31);
    const double total = cum[tiles - 1];
    const int bad = weighted_total_bad(total, i == 0 && lane == 0, st);
    if (i >= k) /* the whole warp: i is the warp's */
        return;
    if (bad) {
        if (lane == 0) {
            indices[i] = GB_KERNELS_NONE;
            if (probs)
                probs[i] = 0.0f;
        }
        return;
    }
    const double t = gb_kernels_draw_target(seed, (uint64_t)i, (uint64_t)k, stratified, total,
                                            nextafter(total, 0.0));
    int64_t lo = first_above(cum, tiles, t);
    for (int64_t j = lo; sums[lo] <= 0.0 && j-- > 0;)
        lo = sums[j] > 0.0 ? j : lo;
    for (int64_t j = lo; sums[lo] <= 0.0 && ++j < tiles;)
        lo = sums[j] > 0.0 ? j : lo;
    const double left = t - (lo == 0 ? 0.0 : cum[lo - 1]);
    const int64_t end = (lo + 1) * TILE < n ? (lo + 1) * TILE : n;
    int64_t pick = -1, last = -1;
    double run = 0.0;
    for (int64_t c = lo * TILE; c < end; c += 32) {
        const int64_t e = c + lane;
        const double w = e < end ? gb_kernels_weight(priorities[e], alpha) : 0.0;
        double x = w; /* the warp's inclusive scan of w */
        for (int off = 1; off < 32; off *= 2) {
            const double y = __shfl_up_sync(all, x, off);
            if (lane >= off)
                x += y;
        }
        const unsigned positive = __ballot_sync(all, w > 0.0);
        const unsigned past = __ballot_sync(all, w > 0.0 && run + x > left);
        if (positive)
            last = c + 31 - __clz((int)positive);
        if (past) {
            pick = c + __ffs((int)past) - 1;
            break;
        }
        run += __shfl_sync(all, x, 31);
    }
    if (pick < 0)
        pick = last;
    if (lane == 0) {
        indices[i] = pick;
        if (probs)
            probs[i] = (float)(gb_kernels_weight(priorities[pick], alpha) / total);
    }
}

__global__ void uniform_kernel(int64_t n, const int64_t *candidates, int64_t k, uint64_t seed,
                               int64_t *indices, float *probs)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= k)
        return;
    uint64_t pos = gb_kernels_below(seed, (uint64_t)i, (uint64_t)n);
    indices[i] = candidates ? candidates[pos] : (int64_t)pos;
    if (probs)
        probs[i] = (float)(1.0 / (double)n);
}

/* Sort input: selectable priorities as they are, the rest as 0 (sorted last); values = index. */
__global__ void topk_prepare_kernel(const float *priorities, int64_t n, float *keys, unsigned *vals)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float p = priorities[i];
    keys[i] = gb_kernels_weight(p, 1.0) > 0.0 ? p : 0.0f;
    vals[i] = (unsigned)i;
}

__global__ void topk_output_kernel(const float *keys, const unsigned *vals, int64_t n, int64_t k,
                                   int64_t *indices, float *values)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= k)
        return;
    int ok = i < n && keys[i] > 0.0f;
    indices[i] = ok ? (int64_t)vals[i] : GB_KERNELS_NONE;
    if (values)
        values[i] = ok ? keys[i] : 0.0f;
}

/* Checks every index (a bad one marks the call and the status), and writes the sort input. */
__global__ void scatter_prepare_kernel(const int64_t *indices, int64_t m, int64_t capacity,
                                       unsigned long long *keys, unsigned *vals,
                                       unsigned long long *call_bad, gb_kernels_status *st)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m)
        return;
    int64_t j = indices[i];
    if (j < 0 || j >= capacity) {
        atomicAdd(call_bad, 1ULL);
        atomicAdd(&st->invalid, 1ULL);
    }
    keys[i] = (unsigned long long)j;
    vals[i] = (unsigned)i;
}

/* After a stable sort by index, the last of each run of equal indices is the latest write. */
__global__ void scatter_apply_kernel(const unsigned long long *keys, const unsigned *pos,
                                     const float *values, int64_t m, float *mirror,
                                     const unsigned long long *call_bad)
{
    if (*call_bad)
        return;
    int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= m)
        return;
    if (s + 1 < m && keys[s + 1] == keys[s])
        return;
    mirror[keys[s]] = values[pos[s]];
}

/* ---- entry points ---------------------------------------------------------------------------- */

static int check_sizes(const char *what, int64_t n, int64_t k, gb_error *err)
{
    if (n < 0 || n > INT_MAX || k < 0 || k > INT_MAX)
        return gb_error_set(err, GB_EINVAL, "%s: n %lld or k %lld outside [0, 2^31)", what,
                            (long long)n, (long long)k);
    return 0;
}

/* A weighted selection's checks and its cases with nothing to search (k 0, n 0): 1 when those
 * finished the call, 0 when the draws remain, or an error. */
static int weighted_begin(gb_kernels_ctx *ctx, const float *priorities, int64_t n, double alpha,
                          int64_t k, int64_t *indices, float *probs, gb_error *err)
{
    int rc = gb_kernels_begin_call(ctx, err);
    if (rc || (rc = check_sizes("weighted selection", n, k, err)))
        return rc;
    if (!(alpha >= 0.0) || isinf(alpha))
        return gb_error_set(err, GB_EINVAL, "weighted selection: alpha %g must be finite and >= 0",
                            alpha);
    if ((n > 0 && !priorities) || (k > 0 && !indices))
        return gb_error_set(err, GB_EINVAL, "weighted selection: NULL priorities or indices");
    if (k == 0)
        return 1;
    if (n == 0) {
        fill_none_kernel<<<blocks_for(k), THREADS, 0, ctx->stream>>>(k, indices, probs,
                                                                    ctx->status);
        GB_CUDA_CHECK(cudaGetLastError());
        return 1;
    }
    return 0;
}

extern "C" int gb_kernels_select_weighted(gb_kernels_ctx *ctx, const float *priorities, int64_t n,
                                          double alpha, int64_t k, uint64_t seed, int stratified,
                                          int64_t *indices, float *probs, gb_error *err)
{
    int rc = weighted_begin(ctx, priorities, n, alpha, k, indices, probs, err);
    if (rc)
        return rc < 0 ? rc : 0;
    size_t temp = 0;
    if ((rc = scan_temp_bytes(n, &temp, err)))
        return rc;
    void *scratch;
    if ((rc = gb_kernels_arena(ctx, weighted_scratch(n, temp), &scratch, err)))
        return rc;
    double *cum = (double *)scratch; /* (n,) inclusive prefix sums of the weights */
    void *temp_storage = (char *)scratch + gb_kernels_align((size_t)n * 8);
    weight_iter weights(priorities, weight_op{alpha});
    GB_CUDA_CHECK(cub::DeviceScan::InclusiveSum(temp_storage, temp, weights, cum, (int)n,
                                                ctx->stream));
    weighted_search_kernel<<<blocks_for(k), THREADS, 0, ctx->stream>>>(
        cum, priorities, n, alpha, k, seed, stratified ? 1 : 0, indices, probs, ctx->status);
    GB_CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int gb_kernels_select_weighted_tiles(gb_kernels_ctx *ctx, const float *priorities,
                                                int64_t n, double alpha, int64_t k, uint64_t seed,
                                                int stratified, int64_t *indices, float *probs,
                                                gb_error *err)
{
    int rc = weighted_begin(ctx, priorities, n, alpha, k, indices, probs, err);
    if (rc)
        return rc < 0 ? rc : 0;
    const int64_t tiles = tiles_for(n);
    size_t temp = 0;
    if ((rc = tiles_temp_bytes(tiles, &temp, err)))
        return rc;
    void *scratch;
    if ((rc = gb_kernels_arena(ctx, tiles_scratch(tiles, temp), &scratch, err)))
        return rc;
    double *sums = (double *)scratch; /* (tiles,) each tile's weights' sum */
    double *cum = (double *)((char *)scratch + gb_kernels_align((size_t)tiles * 8));
    void *temp_storage = (char *)cum + gb_kernels_align((size_t)tiles * 8);
    tile_sum_kernel<<<(unsigned)tiles, TILE_THREADS, 0, ctx->stream>>>(priorities, n, alpha,
                                                                      sums);
    GB_CUDA_CHECK(cudaGetLastError());
    GB_CUDA_CHECK(cub::DeviceScan::InclusiveSum(temp_storage, temp, sums, cum, (int)tiles,
                                                ctx->stream));
    const int64_t threads = k * 32; /* a warp a draw */
    tile_search_kernel<<<blocks_for(threads), THREADS, 0, ctx->stream>>>(
        cum, sums, tiles, priorities, n, alpha, k, seed, stratified ? 1 : 0, indices, probs,
        ctx->status);
    GB_CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int gb_kernels_select_uniform(gb_kernels_ctx *ctx, int64_t n, const int64_t *candidates,
                                         int64_t k, uint64_t seed, int64_t *indices, float *probs,
                                         gb_error *err)
{
    int rc = gb_kernels_begin_call(ctx, err);
    if (rc)
        return rc;
    if (n < 0 || k < 0 || k > INT_MAX || (k > 0 && !indices))
        return gb_error_set(err, GB_EINVAL, "uniform selection: bad arguments (n %lld, k %lld)",
                            (long long)n, (long long)k);
    if (k == 0)
        return 0;
    if (n == 0)
        fill_none_kernel<<<blocks_for(k), THREADS, 0, ctx->stream>>>(k, indices, probs,
                                                                    ctx->status);
    else
        uniform_kernel<<<blocks_for(k), THREADS, 0, ctx->stream>>>(n, candidates, k, seed, indices,
                                                                   probs);
    GB_CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int gb_kernels_select_topk(gb_kernels_ctx *ctx, const float *priorities, int64_t n,
                                      int64_t k, int64_t *indices, float *values, gb_error *err)
{
    int rc = gb_kernels_begin_call(ctx, err);
    if (rc || (rc = check_sizes("top-k", n, k, err)))
        return rc;
    if ((n > 0 && !priorities) || (k > 0 && !indices))
        return gb_error_set(err, GB_EINVAL, "top-k: NULL priorities or indices");
    if (k == 0)
        return 0;
    if (n == 0) {
        topk_output_kernel<<<blocks_for(k), THREADS, 0, ctx->stream>>>(NULL, NULL, 0, k, indices,
                                                                       values);
        GB_CUDA_CHECK(cudaGetLastError());
        return 0;
    }
    size_t temp = 0;
    if ((rc = topk_temp_bytes(n, &temp, err)))
        return rc;
    void *scratch;
    if ((rc = gb_kernels_arena(ctx, topk_scratch(n, temp), &scratch, err)))
        return rc;
    size_t part = gb_kernels_align((size_t)n * 4);
    char *p = (char *)scratch;
    cub::DoubleBuffer<float> keys((float *)p, (float *)(p + part));
    cub::DoubleBuffer<unsigned> vals((unsigned *)(p + 2 * part), (unsigned *)(p + 3 * part));
    void *temp_storage = p + 4 * part;
    topk_prepare_kernel<<<blocks_for(n), THREADS, 0, ctx->stream>>>(priorities, n,
                                                                    keys.Current(), vals.Current());
    GB_CUDA_CHECK(cudaGetLastError());
    /* Radix sort is stable, so equal priorities stay in index order. */
    GB_CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(temp_storage, temp, keys, vals, (int)n,
                                                            0, 32, ctx->stream));
    topk_output_kernel<<<blocks_for(k), THREADS, 0, ctx->stream>>>(keys.Current(), vals.Current(),
                                                                   n, k, indices, values);
    GB_CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int gb_kernels_scatter(gb_kernels_ctx *ctx, float *mirror, int64_t capacity,
                                  const int64_t *indices, const float *values, int64_t m,
                                  gb_error *err)
{
    int rc = gb_kernels_begin_call(ctx, err);
    if (rc || (rc = check_sizes("scatter", 0, m, err)))
        return rc;
    if (capacity < 0 || (m > 0 && (!mirror || !indices || !values)))
        return gb_error_set(err, GB_EINVAL, "scatter: bad arguments (capacity %lld, m %lld)",
                            (long long)capacity, (long long)m);
    if (m == 0)
        return 0;
    /* Sorting only the bits an index in [0, capacity) can have saves radix passes. */
    int end_bit = 1;
    while (end_bit < 64 && ((uint64_t)capacity - 1) >> end_bit)
        end_bit++;
    size_t temp = 0;
    if ((rc = scatter_temp_bytes(m, end_bit, &temp, err)))
        return rc;
    void *scratch;
    if ((rc = gb_kernels_arena(ctx, scatter_scratch(m, temp), &scratch, err)))
        return rc;
    size_t part8 = gb_kernels_align((size_t)m * 8), part4 = gb_kernels_align((size_t)m * 4);
    char *p = (char *)scratch;
    cub::DoubleBuffer<unsigned long long> keys((unsigned long long *)p,
                                               (unsigned long long *)(p + part8));
    cub::DoubleBuffer<unsigned> pos((unsigned *)(p + 2 * part8),
                                    (unsigned *)(p + 2 * part8 + part4));
    void *temp_storage = p + 2 * part8 + 2 * part4;
    GB_CUDA_CHECK(cudaMemsetAsync(ctx->call_bad, 0, sizeof(unsigned long long), ctx->stream));
    scatter_prepare_kernel<<<blocks_for(m), THREADS, 0, ctx->stream>>>(
        indices, m, capacity, keys.Current(), pos.Current(), ctx->call_bad, ctx->status);
    GB_CUDA_CHECK(cudaGetLastError());
    /* Stable: among equal indices the positions stay ascending, so the run's last is the latest. */
    GB_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp_storage, temp, keys, pos, (int)m, 0, end_bit,
                                                  ctx->stream));
    scatter_apply_kernel<<<blocks_for(m), THREADS, 0, ctx->stream>>>(
        keys.Current(), pos.Current(), values, m, mirror, ctx->call_bad);
    GB_CUDA_CHECK(cudaGetLastError());
    return 0;
}
