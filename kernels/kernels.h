/* kernels/kernels.h: GPU kernels (CUDA C) and the CPU reference of each, same semantics.
 *
 * Functions of raw arrays, so the replay can call them on its status table (float priorities)
 * and its column tables (contiguous arrays of `capacity` blocks, rows possibly padded):
 *   selection: weighted (priority^alpha, CUB prefix sum, stratified or independent draws),
 *              uniform, top-k (CUB radix sort); priority scatter into a device mirror;
 *   collection: zero-copy gather of rows from pinned, mapped host memory into a device batch.
 * Every GPU entry point has a CPU twin named *_cpu with the same semantics: the same indices for
 * the same seed (weighted: except where a draw lands within rounding distance of an interval
 * boundary, since the GPU prefix sum adds in another order; see kernels/select.cu).
 *
 * GPU calls are stream-ordered and asynchronous: they enqueue work on the context's stream and
 * return. Argument errors are returned at once; errors only the device can see (an index out of
 * range, nothing selectable) are recorded on the device and returned by gb_kernels_sync. A call
 * that finds a bad index does nothing else (no partial scatter or gather).
 * In builds without CUDA the GPU entry points return GB_EUNSUPPORTED; the *_cpu ones work.
 *
 * defines: gb_kernels_device_count, gb_kernels_cuda_built, gb_kernels_ctx, gb_kernels_ctx_*,
 *          gb_kernels_sync, gb_kernels_column, gb_kernels_steps, gb_kernels_select_*,
 *          gb_kernels_scatter*, gb_kernels_gather*, gb_kernels_stack_expand, gb_kernels_host_*,
 *          gb_kernels_device_*, gb_kernels_copy, gb_kernels_timer_*,
 *          gb_kernels_after_default_stream,
 *          GB_KERNELS_NONE, GB_KERNELS_MAX_COLUMNS */
#ifndef GB_KERNELS_KERNELS_H
#define GB_KERNELS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Inside extern "C": runtime/base/error.h has no guard of its own, and the kernels are compiled as
 * C++. */
#include "runtime/base/error.h"

/* Index written where nothing could be selected (top-k beyond the selectable items, weighted or
 * uniform selection from an empty set). */
#define GB_KERNELS_NONE ((int64_t)-1)

/* Columns one gather launch handles; a call with more columns makes several launches. */
#define GB_KERNELS_MAX_COLUMNS 16

/* 1 when this build has the CUDA kernels, else 0. */
int gb_kernels_cuda_built(void);

/* Number of usable CUDA devices: 0 when the build has no CUDA, no driver or no device (never an
 * error: callers fall back to the CPU path). */
int gb_kernels_device_count(void);

/* ---- selection semantics (GPU and CPU) --------------------------------------------------------
 * An item is selectable when its priority p is finite and > 0; its weight is p^alpha (alpha = 0
 * gives 1, alpha = 1 gives p exactly), computed in double. Non-selectable items (0, negative,
 * NaN, inf) are never chosen: a replay keeps free or uncommitted slots at priority 0.
 * Draw i of a call uses the counter-based generator gb_kernels_draw(seed, i) (kernels/draw.h),
 * the same on both sides: u_i in [0,1); stratified: (i + u_i) / k. The target u * total maps to
 * the first item whose inclusive prefix sum of weights exceeds it.
 * probs[i] = weight / total weight, the probability that one independent draw picks that item
 * (for importance weights). Use a different seed per call (gb_kernels_seed(seed, call)). */

/* Derives the seed of one call from a selector's seed and its call counter. */
uint64_t gb_kernels_seed(uint64_t seed, uint64_t call);

/* CPU reference of weighted selection. priorities: n floats; cum: caller-owned scratch of n
 * doubles (inclusive prefix sums, reused across calls); indices, probs: k each (probs may be
 * NULL). Returns 0, GB_EINVAL on bad arguments, GB_EAGAIN when no item is selectable (outputs
 * then hold GB_KERNELS_NONE and 0). *total (may be NULL) gets the total weight. Never blocks. */
int gb_kernels_select_weighted_cpu(const float *priorities, int64_t n, double alpha, int64_t k,
                                   uint64_t seed, int stratified, double *cum, int64_t *indices,
                                   float *probs, double *total, gb_error *err);

/* CPU reference of uniform selection with replacement: k draws from [0, n), or from
 * candidates[0..n) when candidates is not NULL (e.g. the list of committed items). Draw i picks
 * position floor(r_i * n / 2^64) with r_i = gb_kernels_draw_bits(seed, i). probs (may be NULL)
 * get 1/n. Returns 0, GB_EINVAL, or GB_EAGAIN when n == 0. */
int gb_kernels_select_uniform_cpu(int64_t n, const int64_t *candidates, int64_t k, uint64_t seed,
                                  int64_t *indices, float *probs, gb_error *err);

/* CPU reference of top-k: the k selectable items of highest priority, highest first, ties by
 * lower index; slots beyond the selectable items get GB_KERNELS_NONE and value 0. values (may be
 * NULL) get the priorities. *count (may be NULL) gets the number of items filled. O(n log k). */
int gb_kernels_select_topk_cpu(const float *priorities, int64_t n, int64_t k, int64_t *indices,
                               float *values, int64_t *count, gb_error *err);

/* CPU reference of the priority scatter: mirror[indices[i]] = values[i] for i in [0, m); with
 * repeated indices the last one wins. Any index outside [0, capacity) makes it return GB_EINVAL
 * without writing anything. */
int gb_kernels_scatter_cpu(float *mirror, int64_t capacity, const int64_t *indices,
                           const float *values, int64_t m, gb_error *err);

/* ---- collection ---------------------------------------------------------------------------- */

/* One column of a table: `capacity` items, item i's block starts at src + i * row_stride and
 * holds `steps` steps of `step_bytes` each (row_stride >= steps * step_bytes; padding allowed).
 * The batch written to dst is (k, count, step_bytes) contiguous, rows in the order of indices. */
typedef struct gb_kernels_column {
    const void *src;     /* table base: device-accessible (mapped host or device) for the GPU */
    void *dst;           /* batch out: device memory for the GPU, host memory for the CPU */
    uint64_t capacity;   /* items in the table */
    uint64_t row_stride; /* bytes from one item's block to the next */
    uint64_t step_bytes; /* bytes of one step (any size: 1 for bool, 12 for 3 x float32) */
    uint32_t steps;      /* T, steps per item */
} gb_kernels_column;

/* The steps read from each item: [first, first + count), or [starts[i], starts[i] + count) for
 * batch row i when starts is not NULL. When lengths is not NULL, row i's item has lengths[i] valid
 * steps and the steps at or beyond it are zero-filled in the batch (the replay's partial items).
 * starts and lengths hold k values each (device memory for the GPU). Whole items: {0, T}. */
typedef struct gb_kernels_steps {
    uint32_t first;
    uint32_t count;
    const uint32_t *starts;
    const int32_t *lengths;
} gb_kernels_steps;

/* CPU reference of the gather (plain memcpy per row). All columns must hold every index and
 * every step of the range; otherwise GB_EINVAL and nothing is written. Never blocks. */
int gb_kernels_gather_cpu(const gb_kernels_column *cols, int ncols, const int64_t *indices,
                          int64_t k, const gb_kernels_steps *steps, gb_error *err);

/* ---- GPU context ------------------------------------------------------------------------------
 * A context is one device, one stream, and a scratch arena reused by every call (grown, never per
 * call, when a call needs more than any before; gb_kernels_ctx_reserve sizes it up front). Not
 * for concurrent use: callers serialise (each call selects the context's device first, so any
 * thread may make the next call). */
typedef struct gb_kernels_ctx gb_kernels_ctx;

/* Creates a context on `device`. stream: a cudaStream_t to work on (e.g. libtorch's current
 * stream, so batches are stream-ordered with the training step), or NULL to create one. Returns
 * 0, GB_EUNSUPPORTED without CUDA, GB_ECUDA. */
int gb_kernels_ctx_create(int device, void *stream, gb_kernels_ctx **out, gb_error *err);

/* Waits for the stream and frees everything the context allocated (not a caller's stream). */
void gb_kernels_ctx_destroy(gb_kernels_ctx *ctx);

/* Sizes the scratch arena for selections over up to n items, k draws, and scatters of up to m
 * values, so the hot path never allocates. Blocks (device synchronisation). */
int gb_kernels_ctx_reserve(gb_kernels_ctx *ctx, int64_t n, int64_t k, int64_t m, gb_error *err);

/* The context's cudaStream_t. */
void *gb_kernels_ctx_stream(gb_kernels_ctx *ctx);

/* Blocks until the stream's work is done, then returns the first device-side error since the
 * last sync: GB_EINVAL (an index out of range in scatter or gather), GB_EAGAIN (a selection found
 * nothing selectable), GB_ECUDA. Clears them. */
int gb_kernels_sync(gb_kernels_ctx *ctx, gb_error *err);

/* Total weight seen by the last weighted selection before the last gb_kernels_sync (0 when there
 * was none since the sync before). */
double gb_kernels_last_total(const gb_kernels_ctx *ctx);

/* ---- GPU entry points (device pointers unless said otherwise; asynchronous) ------------------ */

/* Weighted selection: priorities (n floats) -> indices (k int64), probs (k floats, may be NULL).
 * n < 2^31. See the semantics above. */
int gb_kernels_select_weighted(gb_kernels_ctx *ctx, const float *priorities, int64_t n,
                               double alpha, int64_t k, uint64_t seed, int stratified,
                               int64_t *indices, float *probs, gb_error *err);

/* The same draws without the n prefix sums: each tile of 1024 weights summed in one pass, a
 * binary search over the tiles' sums, a warp scanning the chosen tile (kernels/select.cu). The
 * same semantics as gb_kernels_select_weighted, rounding at the boundaries aside; measured beside
 * it by `gearbox bench kernels` (weighted_select_tiles) before either becomes the replay's. */
int gb_kernels_select_weighted_tiles(gb_kernels_ctx *ctx, const float *priorities, int64_t n,
                                     double alpha, int64_t k, uint64_t seed, int stratified,
                                     int64_t *indices, float *probs, gb_error *err);

/* Uniform selection, like gb_kernels_select_uniform_cpu; candidates (device, may be NULL). */
int gb_kernels_select_uniform(gb_kernels_ctx *ctx, int64_t n, const int64_t *candidates,
                              int64_t k, uint64_t seed, int64_t *indices, float *probs,
                              gb_error *err);

/* Top-k by CUB radix sort, like gb_kernels_select_topk_cpu (values may be NULL). n < 2^31. */
int gb_kernels_select_topk(gb_kernels_ctx *ctx, const float *priorities, int64_t n, int64_t k,
                           int64_t *indices, float *values, gb_error *err);

/* Priority scatter into a device mirror, like gb_kernels_scatter_cpu (last repeated index wins,
 * deterministically; a bad index makes the call write nothing and gb_kernels_sync return
 * GB_EINVAL). indices, values: m each, device memory. */
int gb_kernels_scatter(gb_kernels_ctx *ctx, float *mirror, int64_t capacity,
                       const int64_t *indices, const float *values, int64_t m, gb_error *err);

/* Zero-copy gather: GPU threads read the rows straight from the tables (pinned, mapped host
 * memory registered with gb_kernels_host_register, or device memory) into the device batches.
 * 16-byte loads when a column's addresses, stride, offsets and sizes allow, else the widest of
 * 8/4/2/1 that does; 64-bit offsets; one launch for up to GB_KERNELS_MAX_COLUMNS columns.
 * cols: host array (copied into the launch); indices, steps->starts: device memory. */
int gb_kernels_gather(gb_kernels_ctx *ctx, const gb_kernels_column *cols, int ncols,
                      const int64_t *indices, int64_t k, const gb_kernels_steps *steps,
                      gb_error *err);

/* The CPU-orchestrated collection, kept for comparison and for tables that are not registered:
 * waits for the stream (the staging buffer may still be in use), gathers on the CPU into
 * `staging` (pinned host memory, staging_bytes long), then enqueues one host-to-device copy per
 * column to cols[c].dst. cols[c].src, indices and steps are host memory. Blocks for the CPU
 * part. */
int gb_kernels_gather_staged(gb_kernels_ctx *ctx, const gb_kernels_column *cols, int ncols,
                             const int64_t *indices, int64_t k, const gb_kernels_steps *steps,
                             void *staging, size_t staging_bytes, gb_error *err);

/* Frame stacks rebuilt on the device (the rule of runtime/streams/chunk_stack_rule.h; CPU
 * reference gb_chunk_stack_expand, which gives the same bytes): n items of T rows whose stacks
 * hold k >= 2 frames of frame_bytes each, from frames [n, T, frame_bytes] (each row's newest
 * frame), past [n, k - 1, frame_bytes] (obs_past) and valid [n, T] into out
 * [n, T, k, frame_bytes]; all device memory. Enqueued on the context's stream; never blocks.
 * Returns 0, GB_EINVAL, GB_EUNSUPPORTED without CUDA, GB_ECUDA. */
int gb_kernels_stack_expand(gb_kernels_ctx *ctx, int64_t n, int64_t T, int64_t k,
                            uint64_t frame_bytes, const void *frames, const void *past,
                            const uint8_t *valid, void *out, gb_error *err);

/* ---- memory ---------------------------------------------------------------------------------- */

/* Page-locks [ptr, ptr + bytes) (e.g. a shared-memory table) and maps it for all devices
 * (cudaHostRegisterMapped | Portable, plus ReadOnly when read_only). *dev_ptr gets the address
 * kernels use. Blocks. Unregister before unmapping the memory. */
int gb_kernels_host_register(void *ptr, size_t bytes, int read_only, void **dev_ptr,
                             gb_error *err);
int gb_kernels_host_unregister(void *ptr, gb_error *err);

/* Pinned, mapped host memory (for staging buffers). Free with gb_kernels_host_free. */
int gb_kernels_host_alloc(size_t bytes, void **out, gb_error *err);
void gb_kernels_host_free(void *ptr);

/* Device memory on the current device (mirrors, batches). Free with gb_kernels_device_free. */
int gb_kernels_device_alloc(size_t bytes, void **out, gb_error *err);
void gb_kernels_device_free(void *ptr);

/* Writes "NAME, sm_XY, N SMs, G GiB" for device into buf (bench reports). Returns 0,
 * GB_EUNSUPPORTED (no CUDA or no such device). */
int gb_kernels_device_describe(int device, char *buf, size_t size, gb_error *err);

/* The calling thread's current CUDA device (0 when none is set or without CUDA). */
int gb_kernels_current_device(void);

/* Asynchronous zero-fill of device memory on the context's stream. */
int gb_kernels_zero(gb_kernels_ctx *ctx, void *dst, size_t bytes, gb_error *err);

/* Asynchronous copy on the context's stream, any direction (cudaMemcpyDefault). */
int gb_kernels_copy(gb_kernels_ctx *ctx, void *dst, const void *src, size_t bytes, gb_error *err);

/* Times work on the context's stream with CUDA events: start records, stop records, waits and
 * returns the elapsed microseconds. */
int gb_kernels_timer_start(gb_kernels_ctx *ctx, gb_error *err);
int gb_kernels_timer_stop(gb_kernels_ctx *ctx, double *us, gb_error *err);

/* The same without waiting, for work that overlaps other work (a pipelined collection): mark
 * records the end event and returns; read waits for it (usually long done) and returns the
 * microseconds since the last start. */
int gb_kernels_timer_mark(gb_kernels_ctx *ctx, gb_error *err);
int gb_kernels_timer_read(gb_kernels_ctx *ctx, double *us, gb_error *err);

/* Work enqueued on the context's stream from now on starts only after everything enqueued so
 * far on the legacy default stream (stream 0, where libtorch runs unless told otherwise): one
 * event, no host wait. The context's own stream is non-blocking, so without this the two run
 * concurrently (what a pipelined collection wants, until it reuses a buffer the other read). */
int gb_kernels_after_default_stream(gb_kernels_ctx *ctx, gb_error *err);

#ifdef __cplusplus
}
#endif

#endif
